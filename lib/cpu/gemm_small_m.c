/*
 * f32 GEMM for a few rows: C[M,N] = alpha · A[M,K] · op(B) + beta · C with
 * 1 <= M <= TFC_GEMM_SMALL_M_MAX (32), A row-major (not transposed), op(B) = B
 * [K,N] or Bᵀ of B [N,K]. These are the decode steps of a handful of
 * sequences (tfc_gpt_generate_batch): every Linear layer and the LM head
 * is such a product, and its cost is reading B once.
 *
 * Why not OpenBLAS: its sgemm packs B on every call, so at M = 2..8 it
 * reads B, writes a packed copy and reads that again; measured on the
 * Xeon of docs/PERFORMANCE.md ("Small-M GEMM"), [M,384]·[384,1536] took
 * 0.27-0.29 ms for M = 2..8 against 0.064 ms for M = 1 (its GEMV), so a
 * batch of 4 sequences decoded no faster than one. Here B is streamed once
 * and each vector of B feeds the FMAs of R = min(M, 8) rows (2R
 * accumulators in registers):
 *   - B [K,N]: a block of 32 columns of C for R rows stays in registers
 *     while k runs down B's rows; row k+PF is prefetched, since
 *     consecutive rows lie ldb floats apart (a new page for wide B) and the
 *     hardware prefetcher does not follow such strides;
 *   - Bᵀ, B [N,K]: two rows of B at a time (contiguous: the prefetcher's
 *     case), each 16-float vector multiplied with R rows of A (in L1), the
 *     accumulators summed across lanes at the end.
 * More than 8 rows go 8 at a time over panels of PANEL columns, so a
 * panel of B comes from memory once and from L2 for the other row groups
 * (no packing: B is read as it lies). At 64 rows OpenBLAS's packed kernel
 * caught up (90 GFLOP/s each on [64,768]·[768,2304], one core), at 16 and
 * 32 rows this ran 2.2× and 1.5× faster: hence the bound of 32. Columns of C are split over OpenMP
 * threads in blocks of 32. Each element's sum over k runs in one fixed
 * order (16 lanes, then the lane sum), so a row's result does not depend
 * on M, on the rows that share its group, or on the thread count.
 */
#include "cpu/gemm_small_m.h"

#include "cpu/parallel.h"

#if TFC_HAVE_GEMM_SMALL_M
#define SM_B float
#define SM_LOAD_B(m, p) _mm512_maskz_loadu_ps((m), (p))
#if defined(__clang__)
#define SM_TARGET_PUSH \
    _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx2,fma\"))), apply_to = function)")
#define SM_TARGET_POP _Pragma("clang attribute pop")
#else
#define SM_TARGET_PUSH _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx2,fma\")")
#define SM_TARGET_POP _Pragma("GCC pop_options")
#endif
#define SM_ENTRY tfc_cpu_gemm_small_m
#define SM_ENABLED tfc_cpu_gemm_small_m_enabled
#include "cpu/gemm_small_m_tmpl.h"

#else

int tfc_cpu_gemm_small_m(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c,
        (void)ldc;
    return 0;
}

#endif
