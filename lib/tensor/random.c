/* Tensors drawn from the Philox streams of core/rng.h. */
#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "device/dispatch.h"
#include "cpu/parallel.h"
#include "tensor/tensor_impl.h"

#include <math.h>

typedef enum { DIST_NORMAL, DIST_UNIFORM } dist_kind;

/* Element i (row-major index) of t gets a + b * draw(i). */
static tfc_status fill_dist(const char *fn, tfc_tensor *t, dist_kind kind, double a, double b, uint64_t seed,
                            uint64_t offset) {
    TFC_CHECK_NOT_NULL(fn, t);
    if (!tfc_dtype_is_float(t->dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: t is %s, random fills need a float dtype", fn, tfc_dtype_name(t->dtype));
    if (!isfinite(a) || !isfinite(b))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: parameters %g and %g must be finite", fn, a, b);
    if (tfc_is_cuda(t)) {
        /* Same Philox streams on the device: element i of (seed, offset) is the CPU's element i. */
        const tfc_cuda_api *api;
        int32_t dev;
        if (!tfc_is_contiguous(t)) return tfc_cuda_unimplemented(fn, "a random fill of a non-contiguous view");
        TFC_TRY(tfc_cuda_for(fn, t, &api, &dev));
        size_t n = (size_t)tfc_numel(t);
        if (n == 0) return TFC_OK;
        tfc_status s = kind == DIST_NORMAL
                           ? tfc_cuda_done(fn, "random_normal", api,
                                           api->random_normal(dev, t->dtype, tfc_data(t), n, seed, offset, a, b))
                           : tfc_cuda_done(fn, "random_uniform", api,
                                           api->random_uniform(dev, t->dtype, tfc_data(t), n, seed, offset, a, a + b));
        if (s == TFC_OK) tfc_bump_version(t);
        return s;
    }
    TFC_TRY(tfc_require_cpu(fn, "t", t));
    tfc_sview v = tfc_sview_of(t);
    const tfc_sview *views[1] = {&v};
    /* Iterate in row-major order of the logical shape (no dim merging that
     * could reorder), so element i is the same for any strides. */
    tfc_iter it;
    tfc_iter_init(&it, views, 1);
    int64_t n = tfc_numel(t);
    TFC_PARALLEL_RANGE(n, 1 << 14, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        tfc_iter_seek(&it, lo, idx, off);
        for (int64_t i = lo; i < hi; i++) {
            double r = kind == DIST_NORMAL ? tfc_rng_normal(seed, offset, (uint64_t)i)
                                           : tfc_rng_uniform(seed, offset, (uint64_t)i);
            tfc_scalar_store(v.data, v.dtype, off[0], a + b * r);
            tfc_iter_next(&it, idx, off);
        }
    }
    tfc_bump_version(t);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_fill_normal(tfc_tensor *t, double mean, double std, uint64_t seed, uint64_t offset) {
    return fill_dist("tfc_tensor_fill_normal", t, DIST_NORMAL, mean, std, seed, offset);
}

TFC_API tfc_status tfc_tensor_fill_uniform(tfc_tensor *t, double low, double high, uint64_t seed, uint64_t offset) {
    return fill_dist("tfc_tensor_fill_uniform", t, DIST_UNIFORM, low, high - low, seed, offset);
}

static tfc_status create_dist(const char *fn, const int64_t *dims, int32_t ndim, tfc_dtype dtype, dist_kind kind,
                              double a, double b, uint64_t seed, uint64_t offset, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL(fn, out);
    if (!tfc_dtype_is_float(dtype))
        return tfc_err(TFC_ERR_DTYPE, "%s: dtype %s, random tensors need a float dtype", fn, tfc_dtype_name(dtype));
    tfc_tensor *t;
    TFC_TRY(tfc_tensor_empty(dims, ndim, dtype, &t));
    tfc_status s = fill_dist(fn, t, kind, a, b, seed, offset);
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        return s;
    }
    *out = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_randn(const int64_t *dims, int32_t ndim, tfc_dtype dtype, uint64_t seed,
                                    uint64_t offset, tfc_tensor **out) {
    return create_dist("tfc_tensor_randn", dims, ndim, dtype, DIST_NORMAL, 0.0, 1.0, seed, offset, out);
}

TFC_API tfc_status tfc_tensor_rand(const int64_t *dims, int32_t ndim, tfc_dtype dtype, uint64_t seed,
                                   uint64_t offset, tfc_tensor **out) {
    return create_dist("tfc_tensor_rand", dims, ndim, dtype, DIST_UNIFORM, 0.0, 1.0, seed, offset, out);
}

TFC_API tfc_status tfc_tensor_uniform(const int64_t *dims, int32_t ndim, tfc_dtype dtype, double low, double high,
                                      uint64_t seed, uint64_t offset, tfc_tensor **out) {
    return create_dist("tfc_tensor_uniform", dims, ndim, dtype, DIST_UNIFORM, low, high - low, seed, offset, out);
}
