/* tfc_softmax_forward / tfc_softmax_backward: checks, then lib/cpu/softmax.c. */
#include "cpu/kernels.h"
#include "ops/kernel_args.h"

/* x seen as [outer, d, inner] around dim (negative counts from the end). */
static tfc_status split_at(const char *fn, const tfc_tensor *x, int32_t dim, int32_t is_log, int64_t *outer,
                           int64_t *d, int64_t *inner) {
    if (is_log != 0 && is_log != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: log is %d, must be 0 (softmax) or 1 (log_softmax)", fn,
                       (int)is_log);
    int32_t nd = x->ndim > 0 ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dim %d is out of range for x %s (ndim %d)", fn, (int)dim,
                       SHAPE(x), (int)x->ndim);
    if (dim < 0) dim += nd;
    *outer = *d = *inner = 1;
    for (int32_t i = 0; i < x->ndim; i++) {
        if (i < dim) *outer *= x->shape[i];
        else if (i == dim) *d = x->shape[i];
        else *inner *= x->shape[i];
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_softmax_forward(const tfc_tensor *x, int32_t dim, int32_t log, tfc_tensor *y) {
    const char *fn = "tfc_softmax_forward";
    int64_t outer, d, inner;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(split_at(fn, x, dim, log, &outer, &d, &inner));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));
    tfc_tensor *tx;
    const tfc_tensor *ux;
    TFC_TRY(tfc_karg_contiguous(x, &tx, &ux));
    if (tfc_is_cuda(x)) {
        const tfc_cuda_api *api;
        int32_t dev;
        tfc_status s = tfc_cuda_for(fn, x, &api, &dev);
        if (s == TFC_OK && tfc_numel(x) > 0)
            s = tfc_cuda_done(fn, "softmax_forward", api,
                              api->softmax_forward(dev, x->dtype, log, tfc_data(ux), tfc_data(y), (size_t)outer,
                                                   (size_t)d, (size_t)inner));
        if (s == TFC_OK) tfc_bump_version(y);
        tfc_tensor_release(tx);
        return s;
    }
    if (tfc_numel(x) > 0) tfc_cpu_softmax_forward(x->dtype, outer, d, inner, log, tfc_data(ux), tfc_data(y));
    tfc_bump_version(y);
    tfc_tensor_release(tx);
    return TFC_OK;
}

TFC_API tfc_status tfc_softmax_backward(const tfc_tensor *dy, const tfc_tensor *y, int32_t dim, int32_t log,
                                        tfc_tensor *dx, uint32_t flags) {
    const char *fn = "tfc_softmax_backward";
    int64_t outer, d, inner;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "y", y));
    TFC_TRY(split_at(fn, y, dim, log, &outer, &d, &inner));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, y->shape, y->ndim, "y", y));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, y->dtype, y->shape, y->ndim, "y", y));
    const tfc_tensor *all[] = {dx, dy, y};
    const char *names[] = {"dx", "dy", "y"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));
    tfc_tensor *tdy, *ty = NULL;
    const tfc_tensor *udy, *uy;
    tfc_status s = tfc_karg_contiguous(dy, &tdy, &udy);
    if (s == TFC_OK) s = tfc_karg_contiguous(y, &ty, &uy);
    if (s == TFC_OK && tfc_is_cuda(y)) {
        const tfc_cuda_api *api;
        int32_t dev;
        s = tfc_cuda_for(fn, y, &api, &dev);
        if (s == TFC_OK && tfc_numel(y) > 0)
            s = tfc_cuda_done(fn, "softmax_backward", api,
                              api->softmax_backward(dev, y->dtype, log, tfc_data(udy), tfc_data(uy), tfc_data(dx),
                                                    (size_t)outer, (size_t)d, (size_t)inner, flags));
        if (s == TFC_OK) tfc_bump_version(dx);
    } else if (s == TFC_OK) {
        if (tfc_numel(y) > 0)
            tfc_cpu_softmax_backward(y->dtype, outer, d, inner, log, tfc_data(udy), tfc_data(uy), tfc_data(dx),
                                     (flags & TFC_GRAD_ACCUMULATE) != 0);
        tfc_bump_version(dx);
    }
    tfc_tensor_release(tdy);
    tfc_tensor_release(ty);
    return s;
}
