/* Shared helpers of the ops layer's graph doors. */
#include "ops/op_util.h"

tfc_status tfc_check_float(const char *fn, const char *arg, const tfc_tensor *x) {
    if (!x) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, x, &b));
    if (!tfc_backend_takes(b, x->dtype)) {
        char dev[32];
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; this op needs %s on %s", fn, arg, tfc_dtype_name(x->dtype),
                       SHAPE(x), tfc_backend_dtype_list(b, "or"), tfc_device_str(x, dev, sizeof dev));
    }
    return TFC_OK;
}

tfc_status tfc_check_same(const char *fn, const tfc_tensor *a, const tfc_tensor *b) {
    if (a->dtype != b->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: a is %s %s, b is %s %s: dtypes differ", fn, tfc_dtype_name(a->dtype),
                       SHAPE(a), tfc_dtype_name(b->dtype), SHAPE(b));
    const tfc_tensor *ts[2] = {a, b};
    const char *names[2] = {"a", "b"};
    return tfc_same_device(fn, ts, names, 2);
}

tfc_status tfc_norm_dim(const char *fn, int32_t dim, int32_t ndim, int32_t *out) {
    int32_t d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-d tensor", fn, (int)dim, (int)ndim);
    *out = d;
    return TFC_OK;
}

tfc_status tfc_map_new(const char *fn, tfc_map_op op, const int64_t *shape, int32_t ndim, tfc_dtype dtype,
                       const tfc_tensor *a, const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out) {
    const tfc_tensor *like = a ? a : b ? b : c;
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_on(like, shape, ndim, dtype, &r));
    tfc_status s = tfc_tensor_map(fn, op, r, a, b, c, p, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return tfc_err_in(fn, s);
    }
    *out = r;
    return TFC_OK;
}
