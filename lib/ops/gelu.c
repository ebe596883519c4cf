/* tfc_gelu, the graph door of GELU: saves x; backward is tfc_gelu_backward. */
#include "ops/op_util.h"
#include "tfcore/kernels.h"

typedef struct gelu_ctx {
    tfc_saved x;
    int32_t approximate;
} gelu_ctx;

static tfc_status gelu_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const gelu_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *x = c->x.t, *dx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &dx));
    tfc_status s = tfc_gelu_backward(dy, x, c->approximate, dx, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    gin[0] = dx;
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu(tfc_graph *g, const tfc_tensor *x, int32_t approximate, tfc_tensor **out) {
    const char *fn = "tfc_gelu";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (approximate != TFC_GELU_ERF && approximate != TFC_GELU_TANH)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be TFC_GELU_ERF (0) or TFC_GELU_TANH (1)", fn,
                       (int)approximate);
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &y));
    tfc_status s = tfc_gelu_forward(x, approximate, y);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, gelu_node_backward, 1, 1, sizeof(gelu_ctx), &n);
        if (s == TFC_OK) {
            gelu_ctx *c = n->ctx;
            c->approximate = approximate;
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->x, x);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return s;
    }
    *out = y;
    return TFC_OK;
}
