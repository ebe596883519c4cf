/*
 * Inclusive prefix sums along the middle dim of x [outer, d, inner]
 * (tfc_cumsum_problem), forward or reversed. Sums run in double (ACC) for
 * both dtypes, so an f32 cumsum of a long line does not drift the way a
 * float accumulator would. Lines are independent: split over threads, each
 * line summed in one fixed order (results independent of the thread count).
 */
#ifndef TFC_T

#include "cpu/kernels.h"

#define TFC_TMPL_FILE "cpu/cumsum.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_cumsum(const tfc_cumsum_problem *p) {
    TFC_DISPATCH(p->dtype, cumsum, p);
    return TFC_OK;
}

#else /* TFC_T */

static void FN(cumsum)(const tfc_cumsum_problem *p) {
    const int64_t D = p->d, inner = p->inner, lines = p->outer * inner;
    const T *x = p->x;
    T *out = p->out;
    TFC_PARALLEL_RANGE(lines, TFC_GRAIN(D), lo, hi) {
        for (int64_t l = lo; l < hi; l++) {
            int64_t o = l / inner, in = l % inner, base = o * D * inner + in;
            ACC s = 0;
            for (int64_t j = 0; j < D; j++) {
                int64_t at = base + (p->reverse ? D - 1 - j : j) * inner;
                s += (ACC)x[at];
                out[at] = (T)s;
            }
        }
    }
}

#endif /* TFC_T */
