/*
 * Inclusive prefix sum along a dim (the backend's cumsum entry). Backward:
 * dx_j = Σ_{k ≥ j} dy_k, the reversed prefix sum of dy along the same dim.
 */
#include "ops/op_util.h"
#include "ops/operands.h"

/* out = (reverse) cumsum of x along dim d (normalised); a 0-d x is one element. */
static tfc_status run_cumsum(const char *fn, const tfc_tensor *x, int32_t d, int32_t reverse, tfc_tensor **out) {
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    tfc_cumsum_problem p = {
        .device = tfc_device_index(x), .dtype = x->dtype, .outer = 1, .d = 1, .inner = 1, .reverse = reverse};
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i < d)
            p.outer *= x->shape[i];
        else if (i == d)
            p.d = x->shape[i];
        else
            p.inner *= x->shape[i];
    }
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(x, x->shape, x->ndim, x->dtype, &r));
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, x, &p.x);
    p.out = tfc_data(r);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, cumsum, &p);
    tfc_operands_release(&o);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}

typedef struct cumsum_ctx {
    int32_t dim, reverse;
} cumsum_ctx;

static tfc_status cumsum_op(const char *fn, tfc_graph *g, const tfc_tensor *x, int32_t d, int32_t reverse,
                            tfc_tensor **out);

/*
 * The adjoint of a (reverse) prefix sum is the prefix sum the other way;
 * in a create_graph pass it is recorded as such a node on gg, so the
 * gradient is differentiable again (and so on, to any order).
 */
static tfc_status cumsum_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const cumsum_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0];
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) return cumsum_op("tfc_cumsum (backward)", gg, dy, c->dim, !c->reverse, &gin[0]);
    return run_cumsum("tfc_cumsum (backward)", dy, c->dim, !c->reverse, &gin[0]);
}

static tfc_status cumsum_op(const char *fn, tfc_graph *g, const tfc_tensor *x, int32_t d, int32_t reverse,
                            tfc_tensor **out) {
    tfc_tensor *r;
    TFC_TRY(run_cumsum(fn, x, d, reverse, &r));
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        tfc_status s = tfc_node_new(g, "tfc_cumsum", cumsum_backward, 1, 1, sizeof(cumsum_ctx), &n);
        if (s == TFC_OK) {
            cumsum_ctx *c = n->ctx;
            c->dim = d;
            c->reverse = reverse;
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, x);
            s = tfc_node_attach_output(n, 0, r);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(r);
            return tfc_err_in(fn, s);
        }
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_cumsum(tfc_graph *g, const tfc_tensor *x, int32_t dim, tfc_tensor **out) {
    const char *fn = "tfc_cumsum";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim > 0 ? x->ndim : 1, &d));
    return cumsum_op(fn, g, x, d, 0, out);
}
