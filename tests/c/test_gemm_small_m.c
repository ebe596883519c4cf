/*
 * The small-M f32 GEMM (lib/cpu/gemm_small_m.c) against an f64 product
 * written here: every M from 1 to 33 (33 falls back to BLAS), both layouts
 * of B, column and K tails of every width class, leading dimensions larger
 * than the rows, alpha and beta; the BLAS path forced by the tests' switch
 * must agree too; and a row's result is bitwise the same whether it is
 * computed alone or among others (what makes batched decoding reproduce
 * single-sequence decoding).
 */
#include <math.h>
#include <string.h>

#include "tfc_test.h"

#include "cpu/gemm.h"
#include "cpu/gemm_small_m.h"

TFC_TEST_MAIN

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rand_floats(int64_t n) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = frand();
    return v;
}

/* Largest |C - ref| / (1 + |ref|) over C[M,N], ref = alpha·A·op(B) + beta·C0 in f64. */
static double product_error(int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int use_kernel) {
    const int64_t lda = K + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    float *a = rand_floats(M * lda), *b = rand_floats((tb ? N : K) * ldb), *c = rand_floats(M * ldc);
    double *ref = malloc((size_t)(M * N) * sizeof *ref);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t p = 0; p < K; p++) s += (double)a[i * lda + p] * (tb ? b[j * ldb + p] : b[p * ldb + j]);
            ref[i * N + j] = alpha * s + beta * (double)c[i * ldc + j];
        }
    tfc_cpu_gemm_small_m_allowed = use_kernel;
    tfc_cpu_gemm_matrix(TFC_DTYPE_F32, 0, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    tfc_cpu_gemm_small_m_allowed = 1;
    double err = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double e = fabs(c[i * ldc + j] - ref[i * N + j]) / (1 + fabs(ref[i * N + j]));
            err = e > err || isnan(e) ? e : err;
        }
    free(a);
    free(b);
    free(c);
    free(ref);
    return err;
}

TEST(small_m_products_match_f64) {
    static const int64_t NS[] = {1, 2, 15, 16, 17, 31, 32, 33, 100}, KS[] = {1, 3, 16, 17, 100};
    int failures = 0;
    for (int path = 1; path >= 0; path--)
        for (int tb = 0; tb < 2; tb++)
            for (int64_t M = 1; M <= TFC_GEMM_SMALL_M_MAX + 1; M++)
                for (size_t ni = 0; ni < sizeof NS / sizeof *NS; ni++)
                    for (size_t ki = 0; ki < sizeof KS / sizeof *KS; ki++) {
                        const int64_t N = NS[ni], K = KS[ki];
                        const float alpha = (M % 3) ? 1.0f : 0.5f, beta = (M % 2) ? 0.0f : 0.75f;
                        const double err = product_error(tb, M, N, K, alpha, beta, path);
                        if (!(err <= 1e-5 * (double)(K > 16 ? K / 16 : 1)) && failures++ < 10)
                            TFC_FAIL_AT("%s path, tb %d, M %lld N %lld K %lld alpha %g beta %g: error %.3g",
                                        path ? "kernel" : "BLAS", tb, (long long)M, (long long)N, (long long)K,
                                        (double)alpha, (double)beta, err);
                    }
}

TEST(kernel_runs_where_the_cpu_has_avx512) {
    if (!tfc_cpu_gemm_small_m_enabled()) {
        printf("  (no AVX-512 here, or TFC_GEMM_SMALL_M=off: the BLAS path ran above)\n");
        return;
    }
    float a[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, c[2 * 3];
    CHECK(tfc_cpu_gemm_small_m(0, 2, 3, 4, 1.0f, a, 4, b, 3, 0.0f, c, 3) == 1);
    const float want[6] = {5, 6, 7, 13, 14, 15};
    CHECK(memcmp(c, want, sizeof want) == 0);
    CHECK(tfc_cpu_gemm_small_m(0, TFC_GEMM_SMALL_M_MAX + 1, 3, 4, 1.0f, a, 4, b, 3, 0.0f, c, 3) == 0);
    tfc_cpu_gemm_small_m_allowed = 0;
    CHECK(tfc_cpu_gemm_small_m(0, 2, 3, 4, 1.0f, a, 4, b, 3, 0.0f, c, 3) == 0);
    tfc_cpu_gemm_small_m_allowed = 1;
}

TEST(a_row_does_not_depend_on_the_others) {
    const int64_t K = 300, N = 1000;
    for (int tb = 0; tb < 2; tb++) {
        float *a = rand_floats(TFC_GEMM_SMALL_M_MAX * K), *b = rand_floats(K * N);
        float *alone = malloc((size_t)N * sizeof *alone),
              *all = malloc((size_t)(TFC_GEMM_SMALL_M_MAX * N) * sizeof *all);
        for (int64_t M = 2; M <= TFC_GEMM_SMALL_M_MAX; M++) {
            const int64_t row = M - 1; /* the last row of M, then alone */
            tfc_cpu_gemm_matrix(TFC_DTYPE_F32, 0, tb, M, N, K, 1.0, a, K, b, tb ? K : N, 0.0, all, N);
            tfc_cpu_gemm_matrix(TFC_DTYPE_F32, 0, tb, 1, N, K, 1.0, a + row * K, K, b, tb ? K : N, 0.0, alone, N);
            if (memcmp(alone, all + row * N, (size_t)N * sizeof *alone) != 0)
                TFC_FAIL_AT("tb %d: row %lld of an M = %lld product differs from the same row alone", tb,
                            (long long)row, (long long)M);
        }
        free(a);
        free(b);
        free(alone);
        free(all);
    }
}
