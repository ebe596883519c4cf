/*
 * sort / argsort along a dim: the backend's topk entry with k = the dim's
 * size, whose order is total and stable (ties keep their index order, NaN
 * ranks above every number — torch's sort(stable=True)). The values are
 * differentiable: topk's backward scatters dy to the source positions.
 */
#include <string.h>

#include "ops/op_util.h"

TFC_API tfc_status tfc_sort(tfc_graph *g, const tfc_tensor *x, int32_t dim, int32_t descending, tfc_tensor **values,
                            tfc_tensor **indices) {
    const char *fn = "tfc_sort";
    TFC_CHECK_NOT_NULL(fn, values);
    TFC_CHECK_NOT_NULL(fn, indices);
    TFC_TRY(tfc_check_float(fn, "x", x));
    int32_t d;
    TFC_TRY(tfc_norm_dim(fn, dim, x->ndim > 0 ? x->ndim : 1, &d));
    if (x->ndim == 0) { /* one element: itself, index 0 (through a [1] view so the gradient flows) */
        int64_t one = 1;
        tfc_tensor *x1 = NULL, *v1 = NULL, *i1 = NULL, *v = NULL, *i = NULL;
        tfc_status s = tfc_reshape(g, x, &one, 1, &x1);
        if (s == TFC_OK) s = tfc_topk(g, x1, 1, 0, descending != 0, &v1, &i1);
        if (s == TFC_OK) s = tfc_reshape(g, v1, NULL, 0, &v);
        if (s == TFC_OK) s = tfc_reshape(NULL, i1, NULL, 0, &i);
        tfc_tensor_release(x1);
        tfc_tensor_release(v1);
        tfc_tensor_release(i1);
        if (s != TFC_OK) {
            tfc_tensor_release(v);
            tfc_tensor_release(i);
            return tfc_err_in(fn, s);
        }
        *values = v;
        *indices = i;
        return TFC_OK;
    }
    return tfc_err_in(fn, tfc_topk(g, x, x->shape[d], d, descending != 0, values, indices));
}

TFC_API tfc_status tfc_argsort(const tfc_tensor *x, int32_t dim, int32_t descending, tfc_tensor **out) {
    const char *fn = "tfc_argsort";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_CHECK_NOT_NULL(fn, x);
    tfc_tensor *v = NULL, *i = NULL;
    tfc_status s = tfc_sort(NULL, x, dim, descending, &v, &i);
    tfc_tensor_release(v);
    if (s != TFC_OK) {
        /* tfc_sort's message names tfc_sort; the caller called argsort */
        const char *m = tfc_last_error();
        if (strncmp(m, "tfc_sort: ", 10) == 0) return tfc_err(s, "%s: %s", fn, m + 10);
        return tfc_err_in(fn, s);
    }
    *out = i;
    return TFC_OK;
}
