/*
 * any / all over dims, giving bool: any = (Σ [x ≠ 0]) ≠ 0, all = (Σ [x = 0]) = 0.
 * Counting through the sum reduction gives torch's empty cases for free
 * (any of nothing is false, all of nothing is true), and NaN counts as
 * non-zero. The counts are summed in f64 (f32 on CUDA): a count of ones is
 * never rounded to 0, so the final test is exact.
 */
#include <string.h>

#include "ops/op_util.h"

static tfc_status any_all(const char *fn, int is_all, const tfc_tensor *x, const int32_t *dims, int32_t ndims,
                          int32_t keepdim, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, x);
    TFC_CHECK_NOT_NULL(fn, out);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, x, &be));
    tfc_dtype acc = tfc_backend_takes(be, TFC_DTYPE_F64) ? TFC_DTYPE_F64 : TFC_DTYPE_F32;
    tfc_tensor *hit = NULL, *count = NULL, *sum = NULL;
    tfc_status s = is_all ? tfc_eq_scalar(x, 0.0, &hit) : tfc_ne_scalar(x, 0.0, &hit);
    if (s == TFC_OK) s = tfc_cast(NULL, hit, acc, &count);
    if (s == TFC_OK) s = tfc_sum(NULL, count, dims, ndims, keepdim, &sum);
    if (s == TFC_OK) s = is_all ? tfc_eq_scalar(sum, 0.0, out) : tfc_ne_scalar(sum, 0.0, out);
    tfc_tensor_release(hit);
    tfc_tensor_release(count);
    tfc_tensor_release(sum);
    if (s != TFC_OK) { /* name the caller's function, not the one it went through */
        const char *m = tfc_last_error();
        const char *inner[] = {"tfc_sum: ", "tfc_eq_scalar: ", "tfc_ne_scalar: ", "tfc_cast: "};
        for (size_t i = 0; i < sizeof inner / sizeof *inner; i++)
            if (strncmp(m, inner[i], strlen(inner[i])) == 0) return tfc_err(s, "%s: %s", fn, m + strlen(inner[i]));
        return tfc_err_in(fn, s);
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_any(const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim, tfc_tensor **out) {
    return any_all("tfc_any", 0, x, dims, ndims, keepdim, out);
}
TFC_API tfc_status tfc_all(const tfc_tensor *x, const int32_t *dims, int32_t ndims, int32_t keepdim, tfc_tensor **out) {
    return any_all("tfc_all", 1, x, dims, ndims, keepdim, out);
}
