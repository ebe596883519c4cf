/*
 * tfc_layernorm, the graph door of LayerNorm: runs tfc_layernorm_forward,
 * saves x, weight, mean and rstd, and its backward calls
 * tfc_layernorm_backward (see kernels.h for the formulas).
 */
#include "ops/op_util.h"
#include "tfcore/kernels.h"

/* weight is empty when the layer has none. */
typedef struct layernorm_ctx {
    tfc_saved x, mean, rstd, weight;
} layernorm_ctx;

static tfc_status layernorm_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    const layernorm_ctx *c = n->ctx;
    tfc_tensor *x = c->x.t, *mean = c->mean.t, *rstd = c->rstd.t, *w = c->weight.t;
    tfc_tensor *g[3] = {NULL, NULL, NULL};
    int64_t C = x->shape[x->ndim - 1];
    tfc_status s = TFC_OK;
    if (tfc_node_needs_grad(n, 0)) s = tfc_tensor_new_like(x, x->dtype, &g[0]);
    for (int32_t i = 1; i < 3 && s == TFC_OK; i++)
        if (tfc_node_needs_grad(n, i)) s = tfc_tensor_new_on(x, &C, 1, x->dtype, &g[i]);
    if (s == TFC_OK) s = tfc_layernorm_backward(dy, x, w, mean, rstd, g[0], g[1], g[2], 0);
    for (int32_t i = 0; i < 3; i++) {
        if (s == TFC_OK) gin[i] = g[i];
        else tfc_tensor_release(g[i]);
    }
    return s;
}

TFC_API tfc_status tfc_layernorm(tfc_graph *g, const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                 double eps, tfc_tensor **out) {
    const char *fn = "tfc_layernorm";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (x->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar; LayerNorm needs a last dim", fn);
    int64_t rows = tfc_numel(x) / (x->shape[x->ndim - 1] ? x->shape[x->ndim - 1] : 1);
    tfc_tensor *y = NULL, *mean = NULL, *rstd = NULL;
    tfc_status s = tfc_tensor_new_like(x, x->dtype, &y);
    tfc_dtype st = tfc_tensor_stats_dtype(x);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, &rows, 1, st, &mean);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, &rows, 1, st, &rstd);
    if (s == TFC_OK) s = tfc_layernorm_forward(x, weight, bias, eps, y, mean, rstd);
    const tfc_tensor *ins[3] = {x, weight, bias};
    if (s == TFC_OK && tfc_should_record(g, ins, 3)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, layernorm_node_backward, 3, 1, sizeof(layernorm_ctx), &n);
        if (s == TFC_OK) {
            layernorm_ctx *c = n->ctx;
            tfc_node_set_input(n, 0, x);
            /* A missing weight/bias is recorded as an input that needs no grad. */
            if (weight) tfc_node_set_input(n, 1, weight);
            if (bias) tfc_node_set_input(n, 2, bias);
            s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->mean, mean);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->rstd, rstd);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->weight, weight);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, y);
        }
    }
    tfc_tensor_release(mean);
    tfc_tensor_release(rstd);
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return s;
    }
    *out = y;
    return TFC_OK;
}
