/*
 * triu / tril: keep the elements of the last two dims on and above
 * (below) diagonal k — column − row ≥ k (≤ k) — and zero the rest. The
 * mask [R, C] is made on the host and moved to x's device once; the op is
 * then tfc_where(mask, x, 0), whose backward is the same mask applied to dy.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ops/op_util.h"

static tfc_status triangle(const char *fn, int upper, tfc_graph *g, const tfc_tensor *x, int64_t diagonal,
                           tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "x", x));
    if (x->ndim < 2)
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s; it needs at least 2 dims (the matrix is the last two)", fn,
                       SHAPE(x));
    int64_t R = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1], RC;
    if (__builtin_mul_overflow(R, C, &RC) || (uint64_t)RC > SIZE_MAX / 2)
        return tfc_err(TFC_ERR_OOM, "%s: x is %s; its %lldx%lld mask is too large", fn, SHAPE(x), (long long)R,
                       (long long)C);
    unsigned char *m = malloc((size_t)(RC > 0 ? RC : 1));
    if (!m) return tfc_err(TFC_ERR_OOM, "%s: cannot allocate a %lldx%lld mask", fn, (long long)R, (long long)C);
    /* j − i lies in (−R, C): no overflow, whatever diagonal is. */
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) m[i * C + j] = (unsigned char)(upper ? j - i >= diagonal : j - i <= diagonal);
    int64_t dims[2] = {R, C};
    tfc_tensor *host = NULL, *mask = NULL, *zero = NULL;
    tfc_status s = tfc_tensor_from_data(m, dims, 2, TFC_DTYPE_BOOL, &host);
    free(m);
    if (s == TFC_OK) s = tfc_tensor_to_device(host, tfc_tensor_device_type(x), tfc_device_index(x), &mask);
    if (s == TFC_OK) s = tfc_tensor_new_on(x, NULL, 0, x->dtype, &zero);
    if (s == TFC_OK) s = tfc_tensor_fill(zero, 0.0);
    if (s == TFC_OK) s = tfc_where(g, mask, x, zero, out);
    tfc_tensor_release(host);
    tfc_tensor_release(mask);
    tfc_tensor_release(zero);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_triu(tfc_graph *g, const tfc_tensor *x, int64_t diagonal, tfc_tensor **out) {
    return triangle("tfc_triu", 1, g, x, diagonal, out);
}
TFC_API tfc_status tfc_tril(tfc_graph *g, const tfc_tensor *x, int64_t diagonal, tfc_tensor **out) {
    return triangle("tfc_tril", 0, g, x, diagonal, out);
}
