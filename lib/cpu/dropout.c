/*
 * Inverted dropout of n contiguous elements:
 *   out_i = x_i · m_i,  m_i = [u_i ≥ p] / (1 − p) rounded to the dtype,
 * u_i the i-th uniform of the Philox stream (seed, offset). The backward is
 * the same call on dy (the mask is regenerated, never stored).
 */
#include "core/rng.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"

tfc_status tfc_cpu_dropout(const tfc_dropout_problem *p) {
    const tfc_dtype dt = p->dtype;
    const double prob = p->p, keep = 1.0 / (1.0 - prob);
    const uint64_t seed = p->seed, offset = p->offset;
    const void *x = p->x;
    void *out = p->out;
    TFC_PARALLEL_RANGE(p->n, 1 << 14, lo, hi) {
        for (int64_t i = lo; i < hi; i++) {
            double m = tfc_rng_uniform(seed, offset, (uint64_t)i) >= prob ? keep : 0.0;
            if (dt == TFC_DTYPE_F64)
                ((double *)out)[i] = ((const double *)x)[i] * m;
            else
                ((float *)out)[i] = ((const float *)x)[i] * (float)m;
        }
    }
    return TFC_OK;
}
