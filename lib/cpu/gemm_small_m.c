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
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

#define INLINE static inline __attribute__((always_inline))
/* M is a constant after inlining: unrolled, the accumulators stay in registers. */
#define ROWS(i) _Pragma("GCC unroll 8") for (int i = 0; i < M; i++)
/* R_MAX rows' 2·R_MAX accumulators, two B vectors and a broadcast fit in the 32 registers. */
enum { BLOCK = 32, PF = 16, R_MAX = 8, PANEL = 128 };

INLINE __mmask16 lanes(int64_t w) { return w >= 16 ? (__mmask16)0xFFFF : w <= 0 ? 0 : (__mmask16)((1u << w) - 1); }

INLINE void store_row(float *c, __mmask16 m, __m512 v, float alpha, float beta) {
    v = _mm512_mul_ps(v, _mm512_set1_ps(alpha));
    if (beta != 0) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, c), v);
    _mm512_mask_storeu_ps(c, m, v);
}

/* C[:, j0..j0+w) for B [K,N]; w <= 32. */
INLINE void nt_block(int M, int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t j0, int64_t w,
                     float alpha, float beta, float *c, int64_t ldc) {
    __m512 acc0[TFC_GEMM_SMALL_M_MAX], acc1[TFC_GEMM_SMALL_M_MAX];
    ROWS(i) acc0[i] = acc1[i] = _mm512_setzero_ps();
    const __mmask16 m0 = lanes(w), m1 = lanes(w - 16);
    const float *bk = b + j0;
    for (int64_t k = 0; k < K; k++, bk += ldb) {
        if (k + PF < K) {
            _mm_prefetch((const char *)(bk + PF * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(bk + PF * ldb + 16), _MM_HINT_T0);
        }
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, bk);
        const __m512 b1 = _mm512_maskz_loadu_ps(m1, bk + 16);
        ROWS(i) {
            const __m512 x = _mm512_set1_ps(a[i * lda + k]);
            acc0[i] = _mm512_fmadd_ps(x, b0, acc0[i]);
            acc1[i] = _mm512_fmadd_ps(x, b1, acc1[i]);
        }
    }
    ROWS(i) {
        store_row(c + i * ldc + j0, m0, acc0[i], alpha, beta);
        if (m1) store_row(c + i * ldc + j0 + 16, m1, acc1[i], alpha, beta);
    }
}

/* C[:, j0..j0+nr) for Bᵀ (B [N,K]), nr = 1 or 2 rows of B. */
INLINE void t_rows(int M, int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t j0, int nr,
                   float alpha, float beta, float *c, int64_t ldc) {
    __m512 acc0[TFC_GEMM_SMALL_M_MAX], acc1[TFC_GEMM_SMALL_M_MAX];
    ROWS(i) acc0[i] = acc1[i] = _mm512_setzero_ps();
    const float *r0 = b + j0 * ldb, *r1 = nr > 1 ? r0 + ldb : r0;
    for (int64_t k = 0; k < K; k += 16) {
        const __mmask16 m = lanes(K - k);
        const __m512 b0 = _mm512_maskz_loadu_ps(m, r0 + k);
        const __m512 b1 = _mm512_maskz_loadu_ps(m, r1 + k);
        ROWS(i) {
            const __m512 x = _mm512_maskz_loadu_ps(m, a + i * lda + k);
            acc0[i] = _mm512_fmadd_ps(x, b0, acc0[i]);
            acc1[i] = _mm512_fmadd_ps(x, b1, acc1[i]);
        }
    }
    ROWS(i) {
        float *ci = c + i * ldc + j0;
        const float s0 = alpha * _mm512_reduce_add_ps(acc0[i]);
        ci[0] = beta != 0 ? s0 + beta * ci[0] : s0;
        if (nr > 1) {
            const float s1 = alpha * _mm512_reduce_add_ps(acc1[i]);
            ci[1] = beta != 0 ? s1 + beta * ci[1] : s1;
        }
    }
}

/* Columns [lo, hi) of C with M rows (a compile-time constant in each instance). */
INLINE void columns(int M, int tb, int64_t lo, int64_t hi, int64_t K, float alpha, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (tb) {
        for (int64_t j = lo; j < hi; j += 2) t_rows(M, K, a, lda, b, ldb, j, hi - j >= 2 ? 2 : 1, alpha, beta, c, ldc);
    } else {
        for (int64_t j = lo; j < hi; j += BLOCK)
            nt_block(M, K, a, lda, b, ldb, j, hi - j < BLOCK ? hi - j : BLOCK, alpha, beta, c, ldc);
    }
}

#define INSTANCE(M)                                                                                              \
    static void columns_##M(int tb, int64_t lo, int64_t hi, int64_t K, float alpha, const float *a, int64_t lda, \
                            const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {                    \
        columns(M, tb, lo, hi, K, alpha, a, lda, b, ldb, beta, c, ldc);                                          \
    }
INSTANCE(1)
INSTANCE(2)
INSTANCE(3)
INSTANCE(4)
INSTANCE(5)
INSTANCE(6)
INSTANCE(7)
INSTANCE(8)
typedef void (*columns_fn)(int, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t, float,
                           float *, int64_t);
static const columns_fn BY_R[R_MAX + 1] = {NULL,      columns_1, columns_2, columns_3, columns_4,
                                           columns_5, columns_6, columns_7, columns_8};

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* Columns [lo, hi) of C for all m rows: R_MAX rows at a time per panel of B. */
static void columns_all_rows(int tb, int64_t m, int64_t lo, int64_t hi, int64_t k, float alpha, const float *a,
                             int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m <= R_MAX) {
        BY_R[m](tb, lo, hi, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    for (int64_t p0 = lo; p0 < hi; p0 += PANEL) {
        const int64_t p1 = p0 + PANEL < hi ? p0 + PANEL : hi;
        for (int64_t r0 = 0; r0 < m; r0 += R_MAX)
            BY_R[m - r0 < R_MAX ? m - r0 : R_MAX](tb, p0, p1, k, alpha, a + r0 * lda, lda, b, ldb, beta, c + r0 * ldc,
                                                  ldc);
    }
}

/* Below this many multiply-adds a second thread costs more than it saves (as gemm.c's GEMM_SPLIT_MIN_MNK). */
#define SPLIT_MIN_MNK (1 << 18)

int tfc_cpu_gemm_small_m(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m < 1 || m > TFC_GEMM_SMALL_M_MAX || k < 1 || !tfc_cpu_gemm_small_m_enabled()) return 0;
    const int64_t blocks = (n + BLOCK - 1) / BLOCK;
    int nth = tfc_threads_for(m * n * k / SPLIT_MIN_MNK, 1);
    if (nth > blocks) nth = (int)blocks;
    if (nth <= 1) {
        columns_all_rows(tb, m, 0, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return 1;
    }
    TFC_PARALLEL_RANGE(blocks, blocks / nth, lo, hi) {
        const int64_t j0 = lo * BLOCK, j1 = hi * BLOCK < n ? hi * BLOCK : n;
        if (j1 > j0) columns_all_rows(tb, m, j0, j1, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    return 1;
}

#else

int tfc_cpu_gemm_small_m(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c,
        (void)ldc;
    return 0;
}

#endif
