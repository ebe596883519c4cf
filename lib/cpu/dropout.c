/*
 * Inverted dropout of n contiguous elements:
 *   out_i = x_i · m_i,  m_i = [u_i ≥ p] / (1 − p) rounded to the dtype,
 * u_i the i-th uniform of the Philox stream (seed, offset). The backward is
 * the same call on dy (the mask is regenerated, never stored).
 */
#include "core/rng.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

void tfc_cpu_dropout(tfc_dtype dt, int64_t n, double p, uint64_t seed, uint64_t offset, const void *x, void *out) {
    const double keep = 1.0 / (1.0 - p);
    TFC_PARALLEL_RANGE(n, 1 << 14, lo, hi) {
        for (int64_t i = lo; i < hi; i++) {
            double m = tfc_rng_uniform(seed, offset, (uint64_t)i) >= p ? keep : 0.0;
            if (dt == TFC_DTYPE_F64)
                ((double *)out)[i] = ((const double *)x)[i] * m;
            else
                ((float *)out)[i] = ((const float *)x)[i] * (float)m;
        }
    }
}
