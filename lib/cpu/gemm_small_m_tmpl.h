/*
 * The small-M GEMM kernels (the design: gemm_small_m.c's comment), written
 * once for B in f32 (gemm_small_m.c) and B in bf16 (gemm_small_m_bf16.c,
 * widened to f32 as each vector is loaded). A, C and the accumulation are
 * f32 in both. The including file defines:
 *   SM_B          B's element type
 *   SM_LOAD_B(m, p)  16 elements of B at p (lanes outside mask m zero) as __m512
 *   SM_TARGET_PUSH, SM_TARGET_POP  _Pragmas around the kernels: their target ISA
 *   SM_ENTRY      the entry's name, SM_ENABLED() whether it may run
 * and includes this inside its #if TFC_HAVE_GEMM_SMALL_M.
 */
#include <immintrin.h>

SM_TARGET_PUSH

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
INLINE void nt_block(int M, int64_t K, const float *a, int64_t lda, const SM_B *b, int64_t ldb, int64_t j0, int64_t w,
                     float alpha, float beta, float *c, int64_t ldc) {
    __m512 acc0[TFC_GEMM_SMALL_M_MAX], acc1[TFC_GEMM_SMALL_M_MAX];
    ROWS(i) acc0[i] = acc1[i] = _mm512_setzero_ps();
    const __mmask16 m0 = lanes(w), m1 = lanes(w - 16);
    const SM_B *bk = b + j0;
    for (int64_t k = 0; k < K; k++, bk += ldb) {
        if (k + PF < K) {
            _mm_prefetch((const char *)(bk + PF * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(bk + PF * ldb + 16), _MM_HINT_T0);
        }
        const __m512 b0 = SM_LOAD_B(m0, bk);
        const __m512 b1 = SM_LOAD_B(m1, bk + 16);
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
INLINE void t_rows(int M, int64_t K, const float *a, int64_t lda, const SM_B *b, int64_t ldb, int64_t j0, int nr,
                   float alpha, float beta, float *c, int64_t ldc) {
    __m512 acc0[TFC_GEMM_SMALL_M_MAX], acc1[TFC_GEMM_SMALL_M_MAX];
    ROWS(i) acc0[i] = acc1[i] = _mm512_setzero_ps();
    const SM_B *r0 = b + j0 * ldb, *r1 = nr > 1 ? r0 + ldb : r0;
    for (int64_t k = 0; k < K; k += 16) {
        const __mmask16 m = lanes(K - k);
        const __m512 b0 = SM_LOAD_B(m, r0 + k);
        const __m512 b1 = SM_LOAD_B(m, r1 + k);
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
                    const SM_B *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (tb) {
        for (int64_t j = lo; j < hi; j += 2) t_rows(M, K, a, lda, b, ldb, j, hi - j >= 2 ? 2 : 1, alpha, beta, c, ldc);
    } else {
        for (int64_t j = lo; j < hi; j += BLOCK)
            nt_block(M, K, a, lda, b, ldb, j, hi - j < BLOCK ? hi - j : BLOCK, alpha, beta, c, ldc);
    }
}

#define INSTANCE(M)                                                                                              \
    static void columns_##M(int tb, int64_t lo, int64_t hi, int64_t K, float alpha, const float *a, int64_t lda, \
                            const SM_B *b, int64_t ldb, float beta, float *c, int64_t ldc) {                     \
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
typedef void (*columns_fn)(int, int64_t, int64_t, int64_t, float, const float *, int64_t, const SM_B *, int64_t, float,
                           float *, int64_t);
static const columns_fn BY_R[R_MAX + 1] = {NULL,      columns_1, columns_2, columns_3, columns_4,
                                           columns_5, columns_6, columns_7, columns_8};

SM_TARGET_POP

/* Columns [lo, hi) of C for all m rows: R_MAX rows at a time per panel of B. */
static void columns_all_rows(int tb, int64_t m, int64_t lo, int64_t hi, int64_t k, float alpha, const float *a,
                             int64_t lda, const SM_B *b, int64_t ldb, float beta, float *c, int64_t ldc) {
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

int SM_ENTRY(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const SM_B *b,
             int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m < 1 || m > TFC_GEMM_SMALL_M_MAX || k < 1 || !SM_ENABLED()) return 0;
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
