/* GEMM through CBLAS, with a blocked portable fallback. */
#include "cpu/gemm.h"

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
#define GEMM_BLOCKED(T)                                                                         \
    static void gemm_blocked_##T(int ta, int tb, int64_t m, int64_t n, int64_t k, T alpha,       \
                                 const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,  \
                                 int64_t ldc) {                                                  \
        TFC_PARALLEL_RANGE(m, 4, lo, hi) {                                                       \
            for (int64_t i = lo; i < hi; i++)                                                    \
                for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j]; \
            for (int64_t p0 = 0; p0 < k; p0 += 256) {                                            \
                int64_t p1 = p0 + 256 < k ? p0 + 256 : k;                                        \
                for (int64_t j0 = 0; j0 < n; j0 += 512) {                                        \
                    int64_t j1 = j0 + 512 < n ? j0 + 512 : n;                                    \
                    for (int64_t i = lo; i < hi; i++) {                                          \
                        T *ci = c + i * ldc;                                                     \
                        for (int64_t p = p0; p < p1; p++) {                                      \
                            T aip = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);              \
                            if (tb)                                                              \
                                for (int64_t j = j0; j < j1; j++) ci[j] += aip * b[j * ldb + p]; \
                            else                                                                 \
                                for (int64_t j = j0; j < j1; j++) ci[j] += aip * b[p * ldb + j]; \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
GEMM_BLOCKED(float)
GEMM_BLOCKED(double)

void tfc_cpu_gemm_blocked(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                          const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (dtype == TFC_DTYPE_F64)
        gemm_blocked_double(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        gemm_blocked_float(ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
}

void tfc_cpu_gemm(tfc_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                  int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    if (m == 0 || n == 0) return;
#if TFC_HAVE_BLAS
    /* BLAS wants leading dimensions >= 1 even for empty operands. */
    if (lda < 1) lda = 1;
    if (ldb < 1) ldb = 1;
    if (k == 0) {
        tfc_cpu_gemm_blocked(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TFC_DTYPE_F64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb,
                    (float)beta, c, (int)ldc);
#else
    tfc_cpu_gemm_blocked(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}
