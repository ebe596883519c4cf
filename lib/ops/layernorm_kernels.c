/* tfc_layernorm_forward / tfc_layernorm_backward: checks, then lib/cpu/layernorm.c. */
#include <math.h>

#include "cpu/kernels.h"
#include "ops/kernel_args.h"

/* x's last dim C and row count N; x must have a last dim of size >= 1. */
static tfc_status rows_of(const char *fn, const tfc_tensor *x, int64_t *n, int64_t *c) {
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: x is %s; it needs a last dim of size >= 1 to normalise over", fn,
                       SHAPE(x));
    *c = x->shape[x->ndim - 1];
    *n = tfc_numel(x) / *c;
    return TFC_OK;
}

TFC_API tfc_status tfc_layernorm_forward(const tfc_tensor *x, const tfc_tensor *weight, const tfc_tensor *bias,
                                         double eps, tfc_tensor *y, tfc_tensor *mean, tfc_tensor *rstd) {
    const char *fn = "tfc_layernorm_forward";
    int64_t n, c;
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(rows_of(fn, x, &n, &c));
    if (!(eps >= 0 && isfinite(eps)))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: eps is %g, must be finite and >= 0", fn, eps);
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    if (bias) TFC_TRY(tfc_karg_float_like(fn, "bias", bias, &c, 1, "x", x));
    TFC_CHECK_NOT_NULL(fn, y);
    TFC_TRY(tfc_karg_output(fn, "y", y, x->dtype, x->shape, x->ndim, "x", x));
    /* On CUDA the saved statistics are f32 whatever x's dtype (the kernel accumulates in f32). */
    tfc_dtype st = tfc_is_cuda(x) ? TFC_DTYPE_F32 : x->dtype;
    if (mean) TFC_TRY(tfc_karg_output(fn, "mean", mean, st, &n, 1, "x", x));
    if (rstd) TFC_TRY(tfc_karg_output(fn, "rstd", rstd, st, &n, 1, "x", x));
    const tfc_tensor *all[] = {y, mean, rstd, x, weight, bias};
    const char *names[] = {"y", "mean", "rstd", "x", "weight", "bias"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 6));
    if (tfc_is_cuda(x)) {
        if (!mean || !rstd) return tfc_cuda_unimplemented(fn, "LayerNorm without mean and rstd outputs");
        const tfc_cuda_api *api;
        int32_t dev;
        TFC_TRY(tfc_cuda_for(fn, x, &api, &dev));
        tfc_tensor *tx, *tw = NULL, *tb = NULL;
        const tfc_tensor *ux, *uw, *ub;
        tfc_status s = tfc_karg_contiguous(x, &tx, &ux);
        if (s == TFC_OK) s = tfc_karg_contiguous(weight, &tw, &uw);
        if (s == TFC_OK) s = tfc_karg_contiguous(bias, &tb, &ub);
        /* The table's kernel needs a weight: ones stand in for a missing one. */
        tfc_tensor *ones = NULL;
        if (s == TFC_OK && !uw) {
            s = tfc_tensor_new_on(x, &c, 1, x->dtype, &ones);
            if (s == TFC_OK) s = tfc_cuda_fill(fn, ones, 1.0);
            uw = ones;
        }
        if (s == TFC_OK && n > 0)
            s = tfc_cuda_done(fn, "layernorm_forward", api,
                              api->layernorm_forward(dev, x->dtype, tfc_data(ux), tfc_data(uw),
                                                     ub ? tfc_data(ub) : NULL, (float)eps, tfc_data(y),
                                                     (float *)tfc_data(mean), (float *)tfc_data(rstd), (size_t)n,
                                                     (size_t)c));
        if (s == TFC_OK) {
            tfc_bump_version(y);
            tfc_bump_version(mean);
            tfc_bump_version(rstd);
        }
        tfc_tensor_release(tx);
        tfc_tensor_release(tw);
        tfc_tensor_release(tb);
        tfc_tensor_release(ones);
        return s;
    }

    tfc_tensor *tx, *tw = NULL, *tb = NULL;
    const tfc_tensor *ux, *uw, *ub;
    tfc_status s = tfc_karg_contiguous(x, &tx, &ux);
    if (s == TFC_OK) s = tfc_karg_contiguous(weight, &tw, &uw);
    if (s == TFC_OK) s = tfc_karg_contiguous(bias, &tb, &ub);
    if (s == TFC_OK) {
        tfc_cpu_layernorm_forward(x->dtype, n, c, tfc_data(ux), uw ? tfc_data(uw) : NULL, ub ? tfc_data(ub) : NULL,
                                  eps, tfc_data(y), mean ? tfc_data(mean) : NULL, rstd ? tfc_data(rstd) : NULL);
        tfc_bump_version(y);
        if (mean) tfc_bump_version(mean);
        if (rstd) tfc_bump_version(rstd);
    }
    tfc_tensor_release(tx);
    tfc_tensor_release(tw);
    tfc_tensor_release(tb);
    return s;
}

TFC_API tfc_status tfc_layernorm_backward(const tfc_tensor *dy, const tfc_tensor *x, const tfc_tensor *weight,
                                          const tfc_tensor *mean, const tfc_tensor *rstd, tfc_tensor *dx,
                                          tfc_tensor *dweight, tfc_tensor *dbias, uint32_t flags) {
    const char *fn = "tfc_layernorm_backward";
    int64_t n, c;
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "x", x));
    TFC_TRY(rows_of(fn, x, &n, &c));
    TFC_TRY(tfc_karg_float_like(fn, "dy", dy, x->shape, x->ndim, "x", x));
    if (weight) TFC_TRY(tfc_karg_float_like(fn, "weight", weight, &c, 1, "x", x));
    if (tfc_is_cuda(x)) { /* f32 statistics on CUDA */
        TFC_TRY(tfc_karg_output(fn, "mean", mean, TFC_DTYPE_F32, &n, 1, "x", x));
        TFC_TRY(tfc_karg_output(fn, "rstd", rstd, TFC_DTYPE_F32, &n, 1, "x", x));
    } else {
        TFC_TRY(tfc_karg_float_like(fn, "mean", mean, &n, 1, "x", x));
        TFC_TRY(tfc_karg_float_like(fn, "rstd", rstd, &n, 1, "x", x));
    }
    if (dweight && !weight)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dweight %s is given but weight is NULL", fn, SHAPE(dweight));
    if (dx) TFC_TRY(tfc_karg_output(fn, "dx", dx, x->dtype, x->shape, x->ndim, "x", x));
    if (dweight) TFC_TRY(tfc_karg_output(fn, "dweight", dweight, x->dtype, &c, 1, "x", x));
    if (dbias) TFC_TRY(tfc_karg_output(fn, "dbias", dbias, x->dtype, &c, 1, "x", x));
    const tfc_tensor *all[] = {dx, dweight, dbias, dy, x, weight, mean, rstd};
    const char *names[] = {"dx", "dweight", "dbias", "dy", "x", "weight", "mean", "rstd"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 3, 8));
    if (!dx && !dweight && !dbias) return TFC_OK;
    if (tfc_is_cuda(x)) {
        const tfc_cuda_api *api;
        int32_t dev;
        TFC_TRY(tfc_cuda_for(fn, x, &api, &dev));
        tfc_tensor *tmp[3] = {NULL}, *ones = NULL;
        const tfc_tensor *u[3];
        const tfc_tensor *in[3] = {dy, x, weight};
        tfc_status s = TFC_OK;
        for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_karg_contiguous(in[i], &tmp[i], &u[i]);
        if (s == TFC_OK && !u[2]) {
            s = tfc_tensor_new_on(x, &c, 1, x->dtype, &ones);
            if (s == TFC_OK) s = tfc_cuda_fill(fn, ones, 1.0);
            u[2] = ones;
        }
        if (s == TFC_OK && n > 0)
            s = tfc_cuda_done(fn, "layernorm_backward", api,
                              api->layernorm_backward(dev, x->dtype, tfc_data(u[0]), tfc_data(u[1]), tfc_data(u[2]),
                                                      (const float *)tfc_data(mean), (const float *)tfc_data(rstd),
                                                      dx ? tfc_data(dx) : NULL, dweight ? tfc_data(dweight) : NULL,
                                                      dbias ? tfc_data(dbias) : NULL, (size_t)n, (size_t)c, flags));
        if (s == TFC_OK) {
            if (dx) tfc_bump_version(dx);
            if (dweight) tfc_bump_version(dweight);
            if (dbias) tfc_bump_version(dbias);
        }
        for (int i = 0; i < 3; i++) tfc_tensor_release(tmp[i]);
        tfc_tensor_release(ones);
        return s;
    }

    tfc_tensor *tmp[5] = {NULL};
    const tfc_tensor *u[5];
    const tfc_tensor *in[5] = {dy, x, weight, mean, rstd};
    tfc_status s = TFC_OK;
    for (int i = 0; i < 5 && s == TFC_OK; i++) s = tfc_karg_contiguous(in[i], &tmp[i], &u[i]);
    if (s == TFC_OK) {
        tfc_cpu_layernorm_backward(x->dtype, n, c, tfc_data(u[0]), tfc_data(u[1]), weight ? tfc_data(u[2]) : NULL,
                                   tfc_data(u[3]), tfc_data(u[4]), dx ? tfc_data(dx) : NULL,
                                   dweight ? tfc_data(dweight) : NULL, dbias ? tfc_data(dbias) : NULL,
                                   (flags & TFC_GRAD_ACCUMULATE) != 0);
        if (dx) tfc_bump_version(dx);
        if (dweight) tfc_bump_version(dweight);
        if (dbias) tfc_bump_version(dbias);
    }
    for (int i = 0; i < 5; i++) tfc_tensor_release(tmp[i]);
    return s;
}
