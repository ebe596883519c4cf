/*
 * tfc_gelu, the graph door of GELU: saves x; backward is tfc_gelu_backward.
 *
 * The explicit doors tfc_gelu_forward / tfc_gelu_backward: checks, then the backend's gelu entries.
 */
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

static tfc_status check_approximate(const char *fn, int32_t approximate) {
    if (approximate != 0 && approximate != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be 0 (erf) or 1 (tanh)", fn, (int)approximate);
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu_forward(const tfc_tensor *x, int32_t approximate, tfc_tensor *y) {
    const char *fn = "tfc_gelu_forward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));

    tfc_gelu_problem p = {.device = tfc_device_index(x),
                          .dtype = x->dtype,
                          .n = tfc_numel(x),
                          .approximate = approximate,
                          .y = tfc_data(y)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_forward, &p);
    if (s == TFC_OK) tfc_written(y, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_gelu_backward(const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate, tfc_tensor *dx,
                                     uint32_t flags) {
    const char *fn = "tfc_gelu_backward";
    const tfc_backend *b;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {dx, dy, x};
    const char *names[] = {"dx", "dy", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));

    tfc_gelu_problem p = {.device = tfc_device_index(x),
                          .dtype = x->dtype,
                          .n = tfc_numel(x),
                          .approximate = approximate,
                          .dx = tfc_data(dx),
                          .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, gelu_backward, &p);
    if (s == TFC_OK) tfc_written(dx, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

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
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}
