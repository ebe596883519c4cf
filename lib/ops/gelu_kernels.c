/* tfc_gelu_forward / tfc_gelu_backward: checks, then lib/cpu/gelu.c. */
#include "cpu/kernels.h"
#include "ops/kernel_args.h"

static tfc_status check_approximate(const char *fn, int32_t approximate) {
    if (approximate != 0 && approximate != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: approximate is %d, must be 0 (erf) or 1 (tanh)", fn,
                       (int)approximate);
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu_forward(const tfc_tensor *x, int32_t approximate, tfc_tensor *y) {
    const char *fn = "tfc_gelu_forward";
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {y, x};
    const char *names[] = {"y", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 2));
    tfc_tensor *tx;
    const tfc_tensor *ux;
    if (tfc_is_cuda(x)) {
        if (approximate != 1) return tfc_cuda_unimplemented(fn, "the erf form of GELU (approximate = 0)");
        const tfc_cuda_api *api;
        int32_t dev;
        TFC_TRY(tfc_cuda_for(fn, x, &api, &dev));
        TFC_TRY(tfc_karg_contiguous(x, &tx, &ux));
        tfc_status s = tfc_numel(x) == 0 ? TFC_OK
                       : tfc_cuda_done(fn, "unary", api, api->unary(dev, TFC_CUDA_GELU, x->dtype, tfc_data(ux),
                                                                    tfc_data(y), (size_t)tfc_numel(x)));
        if (s == TFC_OK) tfc_bump_version(y);
        tfc_tensor_release(tx);
        return s;
    }
    TFC_TRY(tfc_karg_contiguous(x, &tx, &ux));
    tfc_cpu_gelu_forward(x->dtype, tfc_numel(x), approximate, tfc_data(ux), tfc_data(y));
    tfc_bump_version(y);
    tfc_tensor_release(tx);
    return TFC_OK;
}

TFC_API tfc_status tfc_gelu_backward(const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate, tfc_tensor *dx,
                                     uint32_t flags) {
    const char *fn = "tfc_gelu_backward";
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(check_approximate(fn, approximate));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    TFC_CHECK_NOT_NULL(fn, dx);
    TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    const tfc_tensor *all[] = {dx, dy, x};
    const char *names[] = {"dx", "dy", "x"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));
    tfc_tensor *tdy, *tx = NULL;
    const tfc_tensor *udy, *ux;
    const tfc_cuda_api *api = NULL;
    int32_t dev = 0;
    if (tfc_is_cuda(x)) {
        if (approximate != 1) return tfc_cuda_unimplemented(fn, "the erf form of GELU (approximate = 0)");
        TFC_TRY(tfc_cuda_for(fn, x, &api, &dev));
    }
    tfc_status s = tfc_karg_contiguous(dy, &tdy, &udy);
    if (s == TFC_OK) s = tfc_karg_contiguous(x, &tx, &ux);
    if (s == TFC_OK && api) {
        if (tfc_numel(x) > 0)
            s = tfc_cuda_done(fn, "unary_backward", api,
                              api->unary_backward(dev, TFC_CUDA_GELU, x->dtype, tfc_data(udy), tfc_data(ux),
                                                  tfc_data(dx), (size_t)tfc_numel(x), flags));
        if (s == TFC_OK) tfc_bump_version(dx);
    } else if (s == TFC_OK) {
        tfc_cpu_gelu_backward(x->dtype, tfc_numel(x), approximate, tfc_data(udy), tfc_data(ux), tfc_data(dx),
                              (flags & TFC_GRAD_ACCUMULATE) != 0);
        tfc_bump_version(dx);
    }
    tfc_tensor_release(tdy);
    tfc_tensor_release(tx);
    return s;
}
