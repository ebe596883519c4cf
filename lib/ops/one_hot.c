/*
 * one_hot(ids, C) → i64 [..., C], out[..., c] = (ids[...] == c). Every id
 * must be known before anything is written (a negative or too-large id is
 * the caller's error), so the ids are read to the host once, checked, and
 * the result is built there and moved to the ids' device. Not
 * differentiable (integer output, as torch.nn.functional.one_hot).
 */
#include <stdint.h>
#include <stdlib.h>

#include "ops/op_util.h"

TFC_API tfc_status tfc_one_hot(const tfc_tensor *ids, int64_t num_classes, tfc_tensor **out) {
    const char *fn = "tfc_one_hot";
    TFC_CHECK_NOT_NULL(fn, ids);
    TFC_CHECK_NOT_NULL(fn, out);
    if (ids->dtype != TFC_DTYPE_I64 && ids->dtype != TFC_DTYPE_I32)
        return tfc_err(TFC_ERR_DTYPE, "%s: ids is %s %s; it must be i64 or i32", fn, tfc_dtype_name(ids->dtype),
                       SHAPE(ids));
    if (num_classes < -1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: num_classes is %lld; it must be >= 0, or -1 for max(ids) + 1", fn,
                       (long long)num_classes);
    if (ids->ndim >= TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_SHAPE, "%s: ids %s has %d dims; the result needs one more (at most %d)", fn, SHAPE(ids),
                       (int)ids->ndim, TFC_MAX_DIMS);
    int64_t n = tfc_tensor_numel(ids);
    if ((uint64_t)n > SIZE_MAX / 8) return tfc_err(TFC_ERR_OOM, "%s: ids %s is too large", fn, SHAPE(ids));
    tfc_tensor *i64 = NULL;
    int64_t *host = malloc((size_t)(n > 0 ? n : 1) * sizeof *host);
    if (!host) return tfc_err(TFC_ERR_OOM, "%s: cannot allocate %lld ids", fn, (long long)n);
    tfc_status s = tfc_cast(NULL, ids, TFC_DTYPE_I64, &i64);
    if (s == TFC_OK) s = tfc_tensor_copy_to_host(i64, host, (size_t)n * sizeof *host);
    tfc_tensor_release(i64);
    if (s != TFC_OK) {
        free(host);
        return tfc_err_in(fn, s);
    }
    int64_t mx = -1;
    for (int64_t i = 0; i < n; i++) {
        if (host[i] < 0 || (num_classes >= 0 && host[i] >= num_classes)) {
            int64_t bad = host[i];
            free(host);
            if (bad < 0)
                return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids %s holds %lld at element %lld; ids must be >= 0", fn,
                               SHAPE(ids), (long long)bad, (long long)i);
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids %s holds %lld at element %lld, not below num_classes %lld", fn,
                           SHAPE(ids), (long long)bad, (long long)i, (long long)num_classes);
        }
        if (host[i] > mx) mx = host[i];
    }
    int64_t C = num_classes >= 0 ? num_classes : mx + 1, total;
    if (num_classes < 0 && n == 0) {
        free(host);
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids %s is empty, so num_classes -1 (max + 1) has no value", fn,
                       SHAPE(ids));
    }
    if (__builtin_mul_overflow(n, C, &total) || (uint64_t)total > SIZE_MAX / 8) {
        free(host);
        return tfc_err(TFC_ERR_OOM, "%s: ids %s with %lld classes is too large", fn, SHAPE(ids), (long long)C);
    }
    int64_t *hot = calloc((size_t)(total > 0 ? total : 1), sizeof *hot);
    if (!hot) {
        free(host);
        return tfc_err(TFC_ERR_OOM, "%s: cannot allocate the %lld x %lld result", fn, (long long)n, (long long)C);
    }
    for (int64_t i = 0; i < n; i++) hot[i * C + host[i]] = 1;
    free(host);
    int64_t shape[TFC_MAX_DIMS];
    for (int32_t i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = C;
    tfc_tensor *h = NULL, *r = NULL;
    s = tfc_tensor_from_data(hot, shape, ids->ndim + 1, TFC_DTYPE_I64, &h);
    free(hot);
    if (s == TFC_OK) s = tfc_tensor_to_device(h, tfc_tensor_device_type(ids), tfc_device_index(ids), &r);
    tfc_tensor_release(h);
    if (s != TFC_OK) return tfc_err_in(fn, s);
    *out = r;
    return TFC_OK;
}
