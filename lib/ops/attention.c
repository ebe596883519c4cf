/*
 * tfc_attention, the graph door of flash attention: saves q, k, v, the
 * output and the per-row log-sum-exp [B,H,T] — O(B·H·T) extra, never the
 * [T,S] probabilities — and backward recomputes them per tile
 * (tfc_attention_backward).
 */
#include "ops/op_util.h"
#include "tfcore/kernels.h"

typedef struct attention_ctx {
    tfc_saved q, k, v, out, lse;
    int32_t causal;
    double scale;
} attention_ctx;

static tfc_status attention_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    const attention_ctx *c = n->ctx;
    tfc_tensor *q = c->q.t, *k = c->k.t, *v = c->v.t, *o = c->out.t, *lse = c->lse.t;
    tfc_tensor *g[3] = {NULL, NULL, NULL};
    const tfc_tensor *like[3] = {q, k, v};
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < 3 && s == TFC_OK; i++)
        if (tfc_node_needs_grad(n, i)) s = tfc_tensor_new_like(like[i], q->dtype, &g[i]);
    if (s == TFC_OK)
        s = tfc_attention_backward(dy, q, k, v, o, lse, c->causal, c->scale, g[0], g[1], g[2], 0);
    for (int32_t i = 0; i < 3; i++) {
        if (s == TFC_OK) gin[i] = g[i];
        else tfc_tensor_release(g[i]);
    }
    return s;
}

TFC_API tfc_status tfc_attention(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                 int32_t causal, double scale, tfc_tensor **out) {
    const char *fn = "tfc_attention";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "q", q));
    TFC_TRY(tfc_check_float(fn, "k", k));
    TFC_TRY(tfc_check_float(fn, "v", v));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return tfc_err(TFC_ERR_SHAPE, "%s: q %s, k %s, v %s must be 4-d [B,H,T,D]", fn, SHAPE(q), SHAPE(k), SHAPE(v));
    int64_t oshape[4] = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]};
    tfc_tensor *o = NULL, *lse = NULL;
    tfc_status s = tfc_tensor_new_on(q, oshape, 4, q->dtype, &o);
    if (s == TFC_OK) s = tfc_tensor_new_on(q, oshape, 3, tfc_tensor_stats_dtype(q), &lse);
    if (s == TFC_OK) s = tfc_attention_forward(q, k, v, causal, scale, o, lse);
    const tfc_tensor *ins[3] = {q, k, v};
    if (s == TFC_OK && tfc_should_record(g, ins, 3)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, attention_node_backward, 3, 1, sizeof(attention_ctx), &n);
        if (s == TFC_OK) {
            attention_ctx *c = n->ctx;
            c->causal = causal != 0;
            c->scale = scale;
            for (int32_t i = 0; i < 3; i++) tfc_node_set_input(n, i, ins[i]);
            s = tfc_node_keep(n, &c->q, q);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->k, k);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->v, v);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->out, o);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->lse, lse);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, o);
        }
    }
    tfc_tensor_release(lse);
    if (s != TFC_OK) {
        tfc_tensor_release(o);
        return s;
    }
    *out = o;
    return TFC_OK;
}
