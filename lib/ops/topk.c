/*
 * topk along a dim: the k largest (or smallest) values, sorted, with their
 * indices (the backend's topk entry). Backward scatters dy to the selected
 * positions (topk_backward; in a create_graph pass a recorded scatter_add).
 */
#include "ops/op_util.h"
#include "ops/operands.h"

/* x's shape around dim as [outer, d, inner]. */
static void around(const int64_t *shape, int32_t ndim, int32_t dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int32_t i = 0; i < dim; i++) *outer *= shape[i];
    for (int32_t i = dim + 1; i < ndim; i++) *inner *= shape[i];
}

/* dim is normalised (non-negative). */
typedef struct topk_ctx {
    tfc_saved idx;
    int32_t dim;
} topk_ctx;

static tfc_status topk_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const topk_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *idx = c->idx.t, *dx;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    int32_t d = c->dim;
    const char *fn = "tfc_topk (backward)";
    tfc_graph *gg = tfc_node_grad_graph(n);
    if (gg) {
        /* create_graph: the same scatter as a recorded scatter_add into zeros (differentiable again) */
        tfc_tensor *z;
        TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &z));
        tfc_status s = tfc_tensor_fill(z, 0.0);
        if (s == TFC_OK) s = tfc_scatter_add(gg, z, d, idx, dy, &gin[0]);
        tfc_tensor_release(z);
        return tfc_err_in(fn, s);
    }
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, dy, &be));
    tfc_topk_problem p = {.device = tfc_device_index(dy),
                          .dtype = dy->dtype,
                          .d = e->shape[d],
                          .k = idx->shape[d],
                          .indices_in = tfc_data(idx)};
    around(e->shape, e->ndim, d, &p.outer, &p.inner);
    TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dx));
    tfc_operands o = {0};
    tfc_status s = tfc_tensor_fill(dx, 0.0);
    p.dx = tfc_data(dx);
    if (s == TFC_OK) s = tfc_operand(&o, dy, &p.dy);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, topk_backward, &p);
    tfc_operands_release(&o);
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return tfc_err_in(fn, s);
    }
    gin[0] = dx;
    return TFC_OK;
}

TFC_API tfc_status tfc_topk(tfc_graph *g, const tfc_tensor *x, int64_t k, int32_t dim, int32_t largest,
                            tfc_tensor **values, tfc_tensor **indices) {
    const char *fn = "tfc_topk";
    TFC_CHECK_NOT_NULL(fn, values);
    TFC_CHECK_NOT_NULL(fn, indices);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (x->ndim == 0) return tfc_err(TFC_ERR_SHAPE, "%s: x is a scalar", fn);
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    int64_t D = x->shape[d];
    if (k < 0 || k > D)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: k is %lld but dim %d of x %s has %lld elements", fn, (long long)k,
                       (int)d, SHAPE(x), (long long)D);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    int64_t shape[TFC_MAX_DIMS];
    for (int32_t i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[d] = k;
    tfc_topk_problem p = {.device = tfc_device_index(x), .dtype = x->dtype, .d = D, .k = k, .largest = largest};
    around(x->shape, x->ndim, d, &p.outer, &p.inner);
    tfc_tensor *vals = NULL, *idx = NULL;
    tfc_operands o = {0};
    tfc_status s = tfc_tensor_new_on(x, shape, x->ndim, x->dtype, &vals);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, shape, x->ndim, TFC_DTYPE_I64, &idx);
    if (s == TFC_OK) s = tfc_operand(&o, x, &p.x);
    if (s == TFC_OK) {
        p.values = tfc_data(vals);
        p.indices = tfc_data(idx);
        s = TFC_BACKEND_RUN(fn, be, topk, &p);
    }
    tfc_operands_release(&o);
    if (s != TFC_OK) {
        tfc_tensor_release(vals);
        tfc_tensor_release(idx);
        return tfc_err_in(fn, s);
    }
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, topk_backward, 1, 1, sizeof(topk_ctx), &n);
        if (s == TFC_OK) {
            topk_ctx *c = n->ctx;
            tfc_node_set_double_backward(n);
            c->dim = d;
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->idx, idx);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, vals);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(vals);
            tfc_tensor_release(idx);
            return tfc_err_in(fn, s);
        }
    }
    *values = vals;
    *indices = idx;
    return TFC_OK;
}
