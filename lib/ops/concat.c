/*
 * concat(xs, dim): out = [x0; x1; ...] along dim, each piece copied into a
 * slice of out.  Backward: dxi = dy sliced back at xi's place.
 * split is n narrow() views, so its gradients flow through the views.
 */
#include <stdlib.h>

#include "ops/op_util.h"

static tfc_status concat_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    tfc_tensor *dy = gout[0];
    if (!dy) return TFC_OK;
    int32_t dim = (int32_t)n->params.i[0];
    int64_t start = 0;
    for (int32_t i = 0; i < n->n_in; i++) {
        int64_t len = n->in[i].shape[dim];
        if (tfc_node_needs_grad(n, i)) TFC_TRY(tfc_narrow(NULL, dy, dim, start, len, &gin[i]));
        start += len;
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_concat(tfc_graph *g, const tfc_tensor *const *xs, int32_t n, int32_t dim, tfc_tensor **out) {
    const char *fn = "tfc_concat";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_CHECK_NOT_NULL(fn, xs);
    if (n < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, need at least one tensor", fn, (int)n);
    for (int32_t i = 0; i < n; i++) {
        if (!xs[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: xs[%d] is NULL", fn, (int)i);
        TFC_TRY(tfc_require_cpu(fn, "xs[i]", xs[i]));
    }
    const tfc_tensor *x0 = xs[0];
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x0->ndim, &d));
    int64_t shape[TFC_MAX_DIMS], total = 0;
    for (int32_t k = 0; k < x0->ndim; k++) shape[k] = x0->shape[k];
    for (int32_t i = 0; i < n; i++) {
        const tfc_tensor *x = xs[i];
        if (x->dtype != x0->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: xs[%d] is %s, xs[0] is %s", fn, (int)i, tfc_dtype_name(x->dtype),
                           tfc_dtype_name(x0->dtype));
        int ok = x->ndim == x0->ndim;
        for (int32_t k = 0; ok && k < x->ndim; k++) ok = k == d || x->shape[k] == x0->shape[k];
        if (!ok)
            return tfc_err(TFC_ERR_SHAPE, "%s: xs[%d] is %s, xs[0] is %s: shapes differ outside dim %d", fn, (int)i,
                           SHAPE(x), SHAPE(x0), (int)d);
        total += x->shape[d];
    }
    shape[d] = total;
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new(shape, x0->ndim, x0->dtype, TFC_DEVICE_CPU, 0, &r));
    int64_t start = 0;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        tfc_tensor *part;
        s = tfc_narrow(NULL, r, d, start, xs[i]->shape[d], &part);
        if (s == TFC_OK) {
            tfc_sview pv = tfc_sview_of(part), xv = tfc_sview_of(xs[i]);
            tfc_cpu_copy(&pv, &xv);
            tfc_tensor_release(part);
        }
        start += xs[i]->shape[d];
    }
    if (s == TFC_OK && tfc_should_record(g, xs, n)) {
        tfc_node *node;
        s = tfc_node_new(g, fn, concat_backward, n, 1, &node);
        if (s == TFC_OK) {
            node->params.i[0] = d;
            for (int32_t i = 0; i < n; i++) tfc_node_set_input(node, i, xs[i]);
            tfc_node_attach_output(node, 0, r);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

TFC_API tfc_status tfc_split(tfc_graph *g, const tfc_tensor *x, const int64_t *sizes, int32_t n, int32_t dim,
                             tfc_tensor **outs) {
    const char *fn = "tfc_split";
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, outs);
    TFC_CHECK_NOT_NULL(fn, sizes);
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim, &d));
    if (n < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d", fn, (int)n);
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (sizes[i] < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: sizes[%d] is negative", fn, (int)i);
        total += sizes[i];
    }
    if (total != x->shape[d])
        return tfc_err(TFC_ERR_SHAPE, "%s: sizes sum to %lld but dim %d of x %s is %lld", fn, (long long)total, (int)d,
                       SHAPE(x), (long long)x->shape[d]);
    tfc_tensor **tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int64_t start = 0;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        s = tfc_narrow(g, x, d, start, sizes[i], &tmp[i]);
        start += sizes[i];
    }
    if (s != TFC_OK) {
        for (int32_t i = 0; i < n; i++) tfc_tensor_release(tmp[i]);
    } else {
        for (int32_t i = 0; i < n; i++) outs[i] = tmp[i];
    }
    free(tmp);
    return s;
}
