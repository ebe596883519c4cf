/* Shared helpers of the ops layer. */
#include "ops/op_util.h"

tfc_status tfc_check_float(const char *fn, const char *arg, const tfc_tensor *x) {
    if (!x) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, arg);
    if (x->dtype != TFC_DTYPE_F32 && x->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s %s; this op needs f32 or f64", fn, arg, tfc_dtype_name(x->dtype),
                       SHAPE(x));
    return tfc_require_cpu(fn, arg, x);
}

tfc_status tfc_check_same(const char *fn, const tfc_tensor *a, const tfc_tensor *b) {
    if (a->dtype != b->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: a is %s %s, b is %s %s: dtypes differ", fn, tfc_dtype_name(a->dtype),
                       SHAPE(a), tfc_dtype_name(b->dtype), SHAPE(b));
    if (a->storage->device != b->storage->device || a->storage->device_index != b->storage->device_index)
        return tfc_err(TFC_ERR_DEVICE, "%s: a and b live on different devices", fn);
    return TFC_OK;
}

tfc_status tfc_norm_dim(const char *fn, int32_t dim, int32_t ndim, int32_t *out) {
    int32_t d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d is out of range for a %d-d tensor", fn, (int)dim, (int)ndim);
    *out = d;
    return TFC_OK;
}

static tfc_sview broadcast_view(const tfc_tensor *t, const int64_t *shape, int32_t ndim) {
    tfc_sview v = tfc_sview_of(t);
    v.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) v.shape[i] = shape[i];
    tfc_broadcast_strides(t, shape, ndim, v.strides);
    return v;
}

tfc_status tfc_map_new(tfc_map_op op, const int64_t *shape, int32_t ndim, tfc_dtype dtype, const tfc_tensor *a,
                       const tfc_tensor *b, const tfc_tensor *c, double p, tfc_tensor **out) {
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new(shape, ndim, dtype, TFC_DEVICE_CPU, 0, &r));
    tfc_sview rv = tfc_sview_of(r), av, bv, cv;
    if (a) av = broadcast_view(a, shape, ndim);
    if (b) bv = broadcast_view(b, shape, ndim);
    if (c) cv = broadcast_view(c, shape, ndim);
    tfc_cpu_map(op, &rv, a ? &av : NULL, b ? &bv : NULL, c ? &cv : NULL, p, 0);
    *out = r;
    return TFC_OK;
}

tfc_status tfc_sum_to_shape(tfc_tensor *grad, const int64_t *shape, int32_t ndim, tfc_tensor **out) {
    int same = grad->ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = grad->shape[i] == shape[i];
    if (same) {
        *out = grad;
        return TFC_OK;
    }
    /* Sum the leading extra dims and the dims where shape has 1. */
    int32_t dims[TFC_MAX_DIMS], nd = 0, lead = grad->ndim - ndim;
    for (int32_t i = 0; i < grad->ndim; i++) {
        int32_t k = i - lead;
        if (k < 0 || (shape[k] == 1 && grad->shape[i] != 1)) dims[nd++] = i;
    }
    tfc_tensor *summed, *r;
    tfc_status s = tfc_sum(NULL, grad, dims, nd, 1, &summed);
    tfc_tensor_release(grad);
    TFC_TRY(s);
    s = tfc_reshape(NULL, summed, shape, ndim, &r);
    tfc_tensor_release(summed);
    TFC_TRY(s);
    *out = r;
    return TFC_OK;
}
