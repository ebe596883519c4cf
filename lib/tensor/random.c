/* Tensors drawn from the Philox streams of core/rng.h (the backends' `random` entry). */
#include <math.h>

#include "core/dtype.h"
#include "core/error.h"
#include "tensor/dispatch.h"

/* Element i (row-major index) of t gets a + b * draw(i), on t's device. */
static tfc_status fill_dist(const char *fn, tfc_tensor *t, tfc_random_kind kind, double a, double b, uint64_t seed,
                            uint64_t offset) {
    TFC_CHECK_NOT_NULL(fn, t);
    TFC_TRY(tfc_tensor_check_writable(fn, "t", t));
    if (!tfc_dtype_is_float(t->dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: t is %s, random fills need a float dtype", fn, tfc_dtype_name(t->dtype));
    if (!isfinite(a) || !isfinite(b))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: parameters %g and %g must be finite", fn, a, b);
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, t, &be));
    tfc_random_problem p = {.device = tfc_device_index(t),
                            .kind = kind,
                            .dst = tfc_sview_of(t),
                            .a = a,
                            .b = b,
                            .seed = seed,
                            .offset = offset};
    TFC_TRY(TFC_BACKEND_RUN_DT(fn, be, random, &p, t->dtype));
    tfc_bump_version(t);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_fill_normal(tfc_tensor *t, double mean, double std, uint64_t seed, uint64_t offset) {
    return fill_dist("tfc_tensor_fill_normal", t, TFC_RANDOM_NORMAL, mean, std, seed, offset);
}

TFC_API tfc_status tfc_tensor_fill_uniform(tfc_tensor *t, double low, double high, uint64_t seed, uint64_t offset) {
    return fill_dist("tfc_tensor_fill_uniform", t, TFC_RANDOM_UNIFORM, low, high - low, seed, offset);
}

static tfc_status create_dist(const char *fn, const int64_t *dims, int32_t ndim, tfc_dtype dtype, tfc_random_kind kind,
                              double a, double b, uint64_t seed, uint64_t offset, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    if (!tfc_dtype_is_float(dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: dtype %s, random tensors need a float dtype", fn, tfc_dtype_name(dtype));
    tfc_tensor *t;
    TFC_TRY_IN(fn, tfc_tensor_empty(dims, ndim, dtype, &t));
    tfc_status s = fill_dist(fn, t, kind, a, b, seed, offset);
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        return tfc_err_in(fn, s);
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_randn(const int64_t *dims, int32_t ndim, tfc_dtype dtype, uint64_t seed, uint64_t offset,
                                    tfc_tensor **out) {
    return create_dist("tfc_tensor_randn", dims, ndim, dtype, TFC_RANDOM_NORMAL, 0.0, 1.0, seed, offset, out);
}

TFC_API tfc_status tfc_tensor_rand(const int64_t *dims, int32_t ndim, tfc_dtype dtype, uint64_t seed, uint64_t offset,
                                   tfc_tensor **out) {
    return create_dist("tfc_tensor_rand", dims, ndim, dtype, TFC_RANDOM_UNIFORM, 0.0, 1.0, seed, offset, out);
}

TFC_API tfc_status tfc_tensor_uniform(const int64_t *dims, int32_t ndim, tfc_dtype dtype, double low, double high,
                                      uint64_t seed, uint64_t offset, tfc_tensor **out) {
    return create_dist("tfc_tensor_uniform", dims, ndim, dtype, TFC_RANDOM_UNIFORM, low, high - low, seed, offset, out);
}
