/*
 * topk along a dim: the k largest (or smallest) values, sorted, with their
 * indices. Backward scatters dy to the selected positions.
 */
#include <stdlib.h>

#include "ops/op_util.h"

typedef struct ranked {
    double v;
    int64_t i;
} ranked;

static int cmp_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int cmp_asc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? 1 : -1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* dim is normalised (non-negative). */
typedef struct topk_ctx {
    tfc_saved idx;
    int32_t dim;
} topk_ctx;

static tfc_status topk_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const topk_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *idx = c->idx.t, *dx, *dyc;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    int32_t d = c->dim;
    TFC_TRY(tfc_tensor_new(e->shape, e->ndim, dy->dtype, TFC_DEVICE_CPU, 0, &dx));
    tfc_status s = tfc_tensor_fill(dx, 0.0);
    if (s == TFC_OK) s = tfc_make_contiguous(dy, &dyc);
    if (s != TFC_OK) {
        tfc_tensor_release(dx);
        return s;
    }
    int64_t outer = 1, inner = 1, k = idx->shape[d], D = e->shape[d];
    for (int32_t i = 0; i < d; i++) outer *= e->shape[i];
    for (int32_t i = d + 1; i < e->ndim; i++) inner *= e->shape[i];
    const int64_t *ix = tfc_data(idx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t in = 0; in < inner; in++) {
                int64_t src = (o * k + j) * inner + in, dst = (o * D + ix[src]) * inner + in;
                if (dy->dtype == TFC_DTYPE_F64) ((double *)tfc_data(dx))[dst] += ((double *)tfc_data(dyc))[src];
                else ((float *)tfc_data(dx))[dst] += ((float *)tfc_data(dyc))[src];
            }
    tfc_tensor_release(dyc);
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
    tfc_tensor *xc, *vals, *idx;
    TFC_TRY(tfc_make_contiguous(x, &xc));
    int64_t shape[TFC_MAX_DIMS];
    for (int32_t i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[d] = k;
    tfc_status s = tfc_tensor_new(shape, x->ndim, x->dtype, TFC_DEVICE_CPU, 0, &vals);
    if (s == TFC_OK) {
        s = tfc_tensor_new(shape, x->ndim, TFC_DTYPE_I64, TFC_DEVICE_CPU, 0, &idx);
        if (s != TFC_OK) tfc_tensor_release(vals);
    }
    ranked *buf = s == TFC_OK ? malloc(sizeof *buf * (size_t)(D ? D : 1)) : NULL;
    if (s == TFC_OK && !buf) {
        tfc_tensor_release(vals);
        tfc_tensor_release(idx);
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    if (s != TFC_OK) {
        tfc_tensor_release(xc);
        return s;
    }
    int64_t outer = 1, inner = 1;
    for (int32_t i = 0; i < d; i++) outer *= x->shape[i];
    for (int32_t i = d + 1; i < x->ndim; i++) inner *= x->shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            for (int64_t j = 0; j < D; j++) {
                buf[j].v = tfc_scalar_load(tfc_data(xc), x->dtype, (o * D + j) * inner + in);
                buf[j].i = j;
            }
            qsort(buf, (size_t)D, sizeof *buf, largest ? cmp_desc : cmp_asc);
            for (int64_t j = 0; j < k; j++) {
                int64_t at = (o * k + j) * inner + in;
                tfc_scalar_store(tfc_data(vals), x->dtype, at, buf[j].v);
                ((int64_t *)tfc_data(idx))[at] = buf[j].i;
            }
        }
    free(buf);
    tfc_tensor_release(xc);
    if (tfc_should_record(g, &x, 1)) {
        tfc_node *n;
        s = tfc_node_new_ctx(g, fn, topk_backward, 1, 1, sizeof(topk_ctx), &n);
        if (s == TFC_OK) {
            topk_ctx *c = n->ctx;
            c->dim = d;
            tfc_node_set_input(n, 0, x);
            s = tfc_node_keep(n, &c->idx, idx);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, vals);
        }
        if (s != TFC_OK) {
            tfc_tensor_release(vals);
            tfc_tensor_release(idx);
            return s;
        }
    }
    *values = vals;
    *indices = idx;
    return TFC_OK;
}
