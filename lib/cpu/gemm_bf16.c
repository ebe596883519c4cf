/*
 * bf16 GEMM on the CPU: bf16 A and B, products summed in f32, C in f32 or
 * rounded once to bf16. Two paths, chosen per call:
 *
 *   avx512bf16  our vdpbf16ps kernel (gemm_bf16_avx512.c), when CPUID
 *               reports AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4 …);
 *   portable    op(A) and op(B) widened to f32 (exact: a bf16 is the top
 *               half of an f32), then the f32 GEMM of gemm.c. Every product
 *               of two bf16s is exact in f32, so this is f32 accumulation of
 *               the exact products; any x86 or other CPU runs it.
 *
 * TFC_BF16_GEMM=portable (read once, at the first bf16 GEMM) forces the
 * portable path on any CPU, so both are testable on one machine; tests set
 * tfc_cpu_bf16_force_portable instead. A bf16 request on a CPU without
 * bf16 instructions is therefore emulated exactly, never refused.
 * The measurements that chose this pair over oneDNN are in
 * docs/PERFORMANCE.md ("bf16 GEMM").
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

int tfc_cpu_bf16_force_portable;

static int g_env_portable;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
    const char *e = getenv("TFC_BF16_GEMM");
    g_env_portable = e && !strcmp(e, "portable");
}

int tfc_cpu_has_avx512bf16(void) {
#if TFC_BF16_AVX512_BUILT
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

const char *tfc_cpu_bf16_gemm_path(void) {
    pthread_once(&g_env_once, read_env);
    if (tfc_cpu_bf16_force_portable || g_env_portable || !tfc_cpu_has_avx512bf16()) return "portable";
    return "avx512bf16";
}

/* Rows × cols of bf16 at src (row stride ld) widened into f32 dst (row stride cols). */
static void widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, float *dst) {
    TFC_PARALLEL_RANGE(rows, (1 << 15) / (cols > 0 ? cols : 1) + 1, lo, hi) {
        for (int64_t r = lo; r < hi; r++)
            for (int64_t j = 0; j < cols; j++) {
                uint32_t u = (uint32_t)src[r * ld + j] << 16;
                memcpy(&dst[r * cols + j], &u, 4);
            }
    }
}

static tfc_status oom(size_t bytes) {
    return tfc_err(TFC_ERR_OOM, "gemm: out of memory for %zu bytes of bf16 GEMM scratch", bytes);
}

/* f32 C = alpha · op(A) · op(B) + beta · C through the f32 GEMM on widened copies. */
static tfc_status portable(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                           int64_t lda, const uint16_t *b, int64_t ldb, double beta, float *c, int64_t ldc) {
    /* A is stored [M, K] (or [K, M] when ta), B [K, N] (or [N, K]). */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t abytes = (size_t)(ar * ac) * 4, bbytes = (size_t)(br * bc) * 4;
    float *af = tfc_host_alloc(abytes), *bf = tfc_host_alloc(bbytes);
    if (!af || !bf) {
        tfc_host_free(af, abytes);
        tfc_host_free(bf, bbytes);
        return oom(abytes + bbytes);
    }
    widen(a, ar, ac, lda, af);
    widen(b, br, bc, ldb, bf);
    tfc_cpu_gemm(TFC_DTYPE_F32, ta, tb, m, n, k, alpha, af, ac, bf, bc, beta, c, ldc);
    tfc_host_free(af, abytes);
    tfc_host_free(bf, bbytes);
    return TFC_OK;
}

static tfc_status gemm_f32c(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                            int64_t lda, const uint16_t *b, int64_t ldb, double beta, float *c, int64_t ldc) {
    if (k == 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0.0f : (float)beta * c[i * ldc + j];
        return TFC_OK;
    }
#if TFC_BF16_AVX512_BUILT
    if (!strcmp(tfc_cpu_bf16_gemm_path(), "avx512bf16")) {
        if (tfc_cpu_gemm_bf16_avx512(ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc) != 0)
            return oom(0);
        return TFC_OK;
    }
#endif
    return portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

tfc_status tfc_cpu_gemm_bf16(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, double beta, void *c, int64_t ldc,
                             int c_f32) {
    if (m == 0 || n == 0) return TFC_OK;
    if (c_f32) return gemm_f32c(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    /* bf16 C: the f32 result in scratch, rounded once. */
    size_t bytes = (size_t)(m * n) * 4;
    float *cf = tfc_host_alloc(bytes);
    if (!cf) return oom(bytes);
    uint16_t *cb = c;
    if (beta != 0)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) cf[i * n + j] = tfc_bf16_to_f32(cb[i * ldc + j]);
    tfc_status s = gemm_f32c(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cf, n);
    if (s == TFC_OK) {
        TFC_PARALLEL_RANGE(m, (1 << 15) / n + 1, lo, hi) {
            for (int64_t i = lo; i < hi; i++)
                for (int64_t j = 0; j < n; j++) cb[i * ldc + j] = tfc_f32_to_bf16(cf[i * n + j]);
        }
    }
    tfc_host_free(cf, bytes);
    return s;
}
