/*
 * tfc_softmax / tfc_log_softmax, the graph doors: the forward's output y is
 * all the backward needs (tfc_softmax_backward, never a Jacobian).
 *
 * The explicit doors tfc_softmax_forward / tfc_softmax_backward: checks, then the backend's softmax entries.
 */
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* x seen as [outer, d, inner] around dim (negative counts from the end). */
static tfc_status split_at(const char *fn, const tfc_tensor *x, int32_t dim, int32_t is_log, int64_t *outer, int64_t *d,
                           int64_t *inner) {
    if (is_log != 0 && is_log != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: log is %d, must be 0 (softmax) or 1 (log_softmax)", fn, (int)is_log);
    int32_t nd = x->ndim > 0 ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d is out of range for x %s (ndim %d)", fn, (int)dim, SHAPE(x),
                       (int)x->ndim);
    if (dim < 0) dim += nd;
    *outer = *d = *inner = 1;
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i < dim)
            *outer *= x->shape[i];
        else if (i == dim)
            *d = x->shape[i];
        else
            *inner *= x->shape[i];
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_softmax_forward(const tfc_tensor *x, int32_t dim, int32_t log, tfc_tensor *y) {
    const char *fn = "tfc_softmax_forward";
    const tfc_backend *b;
    int64_t outer, d, inner;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    TFC_TRY(split_at(fn, x, dim, log, &outer, &d, &inner));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));

    tfc_softmax_problem p = {.device = tfc_device_index(x),
                             .dtype = x->dtype,
                             .outer = outer,
                             .d = d,
                             .inner = inner,
                             .log = log,
                             .y = tfc_data(y)};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, softmax_forward, &p);
    if (s == TFC_OK) tfc_written(y, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_softmax_backward(const tfc_tensor *dy, const tfc_tensor *y, int32_t dim, int32_t log,
                                        tfc_tensor *dx, uint32_t flags) {
    const char *fn = "tfc_softmax_backward";
    const tfc_backend *b;
    int64_t outer, d, inner;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "y", y));
    TFC_TRY(tfc_tensor_backend(fn, y, &b));
    TFC_TRY(split_at(fn, y, dim, log, &outer, &d, &inner));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, y->shape, y->ndim, "y", y));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, y->dtype, y->shape, y->ndim, "y", y));
    const tfc_tensor *all[] = {dx, dy, y};
    const char *names[] = {"dx", "dy", "y"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));

    tfc_softmax_problem p = {.device = tfc_device_index(y),
                             .dtype = y->dtype,
                             .outer = outer,
                             .d = d,
                             .inner = inner,
                             .log = log,
                             .dx = tfc_data(dx),
                             .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = tfc_operand(&o, y, &p.y_in);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, softmax_backward, &p);
    if (s == TFC_OK) tfc_written(dx, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

typedef struct softmax_ctx {
    tfc_saved y;
    int32_t dim, log;
} softmax_ctx;

/*
 * create_graph: softmax dx = y ⊙ (dy − Σ_dim dy ⊙ y), log_softmax
 * dx = dy − exp(y) ⊙ Σ_dim dy, as recorded ops on gg.
 */
static tfc_status softmax_backward_graph(tfc_node *n, tfc_graph *gg, tfc_tensor *dy, tfc_tensor **dx) {
    const softmax_ctx *c = n->ctx;
    tfc_tensor *y = NULL, *t = NULL, *sum = NULL, *u = NULL;
    tfc_status s = tfc_node_saved(n, &c->y, &y);
    if (c->log) {
        if (s == TFC_OK) s = tfc_sum(gg, dy, &c->dim, 1, 1, &sum);
        if (s == TFC_OK) s = tfc_exp(gg, y, &t);
        if (s == TFC_OK) s = tfc_mul(gg, t, sum, &u);
        if (s == TFC_OK) s = tfc_sub(gg, dy, u, dx);
    } else {
        if (s == TFC_OK) s = tfc_mul(gg, dy, y, &t);
        if (s == TFC_OK) s = tfc_sum(gg, t, &c->dim, 1, 1, &sum);
        if (s == TFC_OK) s = tfc_sub(gg, dy, sum, &u);
        if (s == TFC_OK) s = tfc_mul(gg, y, u, dx);
    }
    tfc_tensor *all[] = {y, t, sum, u};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return s;
}

static tfc_status softmax_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const softmax_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *y = c->y.t, *dx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return softmax_backward_graph(n, gg, dy, &gin[0]);
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
    int64_t outer, d, inner;
    TFC_TRY(split_at(fn, x, dim, log, &outer, &d, &inner)); /* a bad dim names this op, not the door */
    tfc_tensor *y;
    TFC_TRY_IN(fn, tfc_tensor_new_like(x, x->dtype, &y));
    tfc_status s = tfc_softmax_forward(x, dim, log, y);
    if (s == TFC_OK && tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, softmax_node_backward, 1, 1, sizeof(softmax_ctx), &n);
        if (s == TFC_OK) {
            softmax_ctx *c = n->ctx;
            c->dim = dim;
            c->log = log;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->y, y);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
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
