/* GEMM through CBLAS, with a blocked portable fallback; the gemm entry. */
#include "cpu/gemm.h"

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/gemm_small_m.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "tfc_config.h"

#if TFC_HAVE_BLAS
#include <cblas.h>
#endif

/*
 * Blocked kernel: C[i,j] = beta C[i,j] + alpha Σ_p A(i,p) B(p,j), rows of C
 * split across threads, K and N blocked so a panel of B stays in cache.
 * Written once for both element types.
 */
#define GEMM_BLOCKED(T)                                                                                             \
    static void gemm_blocked_##T(int ta, int tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda, \
                                 const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {                              \
        TFC_PARALLEL_RANGE(m, 4, lo, hi) {                                                                          \
            for (int64_t i = lo; i < hi; i++)                                                                       \
                for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];             \
            for (int64_t p0 = 0; p0 < k; p0 += 256) {                                                               \
                int64_t p1 = p0 + 256 < k ? p0 + 256 : k;                                                           \
                for (int64_t j0 = 0; j0 < n; j0 += 512) {                                                           \
                    int64_t j1 = j0 + 512 < n ? j0 + 512 : n;                                                       \
                    for (int64_t i = lo; i < hi; i++) {                                                             \
                        T *ci = c + i * ldc;                                                                        \
                        for (int64_t p = p0; p < p1; p++) {                                                         \
                            T aip = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);                                 \
                            if (tb)                                                                                 \
                                for (int64_t j = j0; j < j1; j++) ci[j] += aip * b[j * ldb + p];                    \
                            else                                                                                    \
                                for (int64_t j = j0; j < j1; j++) ci[j] += aip * b[p * ldb + j];                    \
                        }                                                                                           \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
    }
GEMM_BLOCKED(float)
GEMM_BLOCKED(double)

void tfc_cpu_gemm_blocked(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                          int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (dtype == TFC_DTYPE_F64)
        gemm_blocked_double(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        gemm_blocked_float(ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
}

#if TFC_HAVE_BLAS
static void blas_gemm(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                      int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TFC_DTYPE_F64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb, (float)beta,
                    c, (int)ldc);
}

/*
 * Below this many multiply-adds (~0.5 MFLOP, tens of microseconds) waking a
 * second thread costs more than it saves; OpenBLAS's own threshold is of the
 * same order.
 */
#define GEMM_SPLIT_MIN_MNK (1 << 18)

/*
 * C = alpha op(A) op(B) + beta C split into independent blocks of C, one per
 * OpenMP thread, each a single-threaded BLAS call (blas_threads.c explains
 * why the BLAS itself runs one thread). The longer of M and N is split, in
 * multiples of 64 so every block keeps whole register tiles; each thread
 * packs the shared operand itself, O(K·min(M,N)) extra copying against
 * O(M·N·K) arithmetic.
 *   rows i0..i1 of C:    op(A) rows i0..i1 = ta ? A[:, i0..i1] : A[i0..i1, :]
 *   columns j0..j1 of C: op(B) cols j0..j1 = tb ? B[j0..j1, :] : B[:, j0..j1]
 */
static void gemm_split(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                       int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    size_t es = dtype == TFC_DTYPE_F64 ? 8 : 4;
    int split_rows = m >= n;
    int64_t len = split_rows ? m : n, blocks = (len + 63) / 64;
    int nth = tfc_threads_for(m * n * k / GEMM_SPLIT_MIN_MNK, 1);
    if (nth > blocks) nth = (int)blocks;
    if (nth <= 1) {
        blas_gemm(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    TFC_PARALLEL_RANGE(blocks, blocks / nth, lo, hi) {
        int64_t p0 = lo * 64, p1 = hi * 64 < len ? hi * 64 : len;
        if (p1 > p0) {
            if (split_rows)
                blas_gemm(dtype, ta, tb, p1 - p0, n, k, alpha, (const char *)a + (size_t)(ta ? p0 : p0 * lda) * es, lda,
                          b, ldb, beta, (char *)c + (size_t)(p0 * ldc) * es, ldc);
            else
                blas_gemm(dtype, ta, tb, m, p1 - p0, k, alpha, a, lda,
                          (const char *)b + (size_t)(tb ? p0 * ldb : p0) * es, ldb, beta, (char *)c + (size_t)p0 * es,
                          ldc);
        }
    }
}
#endif

void tfc_cpu_gemm_matrix(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                         int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    /* a few rows of f32 (decode steps): B streamed once instead of packed (gemm_small_m.c) */
    if (dtype == TFC_DTYPE_F32 && !ta &&
        tfc_cpu_gemm_small_m(tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc))
        return;
#if TFC_HAVE_BLAS
    /* BLAS wants leading dimensions >= 1 even for empty operands. */
    if (lda < 1) lda = 1;
    if (ldb < 1) ldb = 1;
    if (k == 0) {
        tfc_cpu_gemm_blocked(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (tfc_cpu_blas_threads_owned())
        gemm_split(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        blas_gemm(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    tfc_cpu_gemm_blocked(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

/* f32 and f64 through BLAS; bf16 A and B (f32 accumulation, bf16 or f32 C) through gemm_bf16.c. */
tfc_status tfc_cpu_gemm(const tfc_gemm_problem *p) {
    /* gemm_epilogues is 0 here: a caller that asks anyway gets an error, not a product without its bias. */
    if (p->epilogue != TFC_GEMM_EPI_NONE)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: epilogue %d is not fused on the CPU", (int)p->epilogue);
    if (p->dtype == TFC_DTYPE_BF16) {
        const int64_t ec = p->c_f32 ? 4 : 2;
        for (int64_t i = 0; i < p->batch; i++)
            TFC_TRY(tfc_cpu_gemm_bf16(p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha,
                                      (const uint16_t *)p->a + i * p->stride_a, p->lda,
                                      (const uint16_t *)p->b + i * p->stride_b, p->ldb, p->beta,
                                      (char *)p->c + i * p->stride_c * ec, p->ldc, p->c_f32));
        return TFC_OK;
    }
    if (p->c_f32)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: an f32 C is for bf16 A and B only, not %s",
                       tfc_dtype_name(p->dtype));
    if (p->dtype != TFC_DTYPE_F32 && p->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: %s is not implemented on the CPU (f32, f64 or bf16)",
                       tfc_dtype_name(p->dtype));
    const int64_t es = (int64_t)tfc_dtype_size(p->dtype);
    for (int64_t i = 0; i < p->batch; i++)
        tfc_cpu_gemm_matrix(p->dtype, p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha,
                            (const char *)p->a + i * p->stride_a * es, p->lda,
                            (const char *)p->b + i * p->stride_b * es, p->ldb, p->beta,
                            (char *)p->c + i * p->stride_c * es, p->ldc);
    return TFC_OK;
}
