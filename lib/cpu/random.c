/*
 * Random fills from the Philox streams of core/rng.h:
 *   dst[i] = a + b · r_i,  r_i = tfc_rng_uniform or tfc_rng_normal (seed, offset, i)
 * with i the row-major index in dst's logical shape, so element i is the
 * same for any strides, any thread count and on every backend.
 */
#include "core/dtype.h"
#include "core/rng.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

tfc_status tfc_cpu_random(const tfc_random_problem *p) {
    const tfc_random_kind kind = p->kind;
    const tfc_sview *dst = &p->dst;
    const double a = p->a, b = p->b;
    const uint64_t seed = p->seed, offset = p->offset;
    const tfc_sview *views[1] = {dst};
    /* Iterate in row-major order of the logical shape: no dim merging that could reorder. */
    tfc_iter it;
    tfc_iter_init(&it, views, 1);
    int64_t n = it.numel;
    TFC_PARALLEL_RANGE(n, 1 << 14, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        tfc_iter_seek(&it, lo, idx, off);
        for (int64_t i = lo; i < hi; i++) {
            double r = kind == TFC_RANDOM_NORMAL ? tfc_rng_normal(seed, offset, (uint64_t)i)
                                                 : tfc_rng_uniform(seed, offset, (uint64_t)i);
            tfc_scalar_store(dst->data, dst->dtype, off[0], a + b * r);
            tfc_iter_next(&it, idx, off);
        }
    }
    return TFC_OK;
}
