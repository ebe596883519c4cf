/*
 * Splitting a range of n work items over OpenMP threads, only when there is
 * enough work (grain items per thread at least) to pay for waking them.
 *
 *   TFC_PARALLEL_RANGE(n, grain, lo, hi) { for (i = lo; i < hi; i++) ... }
 */
#ifndef TFC_CPU_PARALLEL_H
#define TFC_CPU_PARALLEL_H

#include <stdint.h>

#include "tfc_config.h"

#if TFC_HAVE_OPENMP
#include <omp.h>
static inline int tfc_threads_for(int64_t n, int64_t grain) {
    if (omp_in_parallel()) return 1;
    int64_t t = grain > 0 ? n / grain : n;
    int max = omp_get_max_threads();
    if (t > max) t = max;
    return t < 1 ? 1 : (int)t;
}
#define TFC_PARALLEL_RANGE(n, grain, lo, hi)                                                                         \
    for (int64_t tfc_n_ = (n), tfc_nth_ = tfc_threads_for(tfc_n_, (grain)), tfc_once_ = 1; tfc_once_; tfc_once_ = 0) \
    _Pragma("omp parallel num_threads(tfc_nth_)") for (int64_t tfc_t_ = omp_get_thread_num(),                        \
                                                       tfc_nt_ = omp_get_num_threads(),                              \
                                                       lo = tfc_n_ * tfc_t_ / tfc_nt_,                               \
                                                       hi = tfc_n_ * (tfc_t_ + 1) / tfc_nt_, tfc_o2_ = 1;            \
                                                       tfc_o2_; tfc_o2_ = 0)
#else
static inline int tfc_threads_for(int64_t n, int64_t grain) {
    (void)n;
    (void)grain;
    return 1;
}
#define TFC_PARALLEL_RANGE(n, grain, lo, hi) for (int64_t lo = 0, hi = (n), tfc_o2_ = 1; tfc_o2_; tfc_o2_ = 0)
#endif

#endif
