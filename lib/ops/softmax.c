/*
 * tfc_softmax / tfc_log_softmax, the graph doors: the forward's output y is
 * all the backward needs (tfc_softmax_backward, never a Jacobian).
 */
#include "ops/op_util.h"
#include "tfcore/kernels.h"

typedef struct softmax_ctx {
    tfc_saved y;
    int32_t dim, log;
} softmax_ctx;

static tfc_status softmax_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const softmax_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *y = c->y.t, *dx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    TFC_TRY(tfc_tensor_new_like(y, y->dtype, &dx));
    tfc_status s = tfc_softmax_backward(dy, y, c->dim, c->log, dx, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    gin[0] = dx;
    return TFC_OK;
}

static tfc_status softmax_op(const char *fn, int32_t log, tfc_graph *g, const tfc_tensor *x, int32_t dim,
                             tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_like(x, x->dtype, &y));
    tfc_status s = tfc_softmax_forward(x, dim, log, y);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, softmax_node_backward, 1, 1, sizeof(softmax_ctx), &n);
        if (s == TFC_OK) {
            softmax_ctx *c = n->ctx;
            c->dim = dim;
            c->log = log;
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->y, y);
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

TFC_API tfc_status tfc_softmax(tfc_graph *g, const tfc_tensor *x, int32_t dim, tfc_tensor **out) {
    return softmax_op("tfc_softmax", 0, g, x, dim, out);
}

TFC_API tfc_status tfc_log_softmax(tfc_graph *g, const tfc_tensor *x, int32_t dim, tfc_tensor **out) {
    return softmax_op("tfc_log_softmax", 1, g, x, dim, out);
}
