/*
 * The small-M GEMM with B in bf16 (the kernels of gemm_small_m_tmpl.h, B
 * widened to f32 as each 16-element vector is loaded: exact, a bf16 is the
 * top half of an f32). This is bf16 decoding's GEMM — tfcore sample --dtype
 * bf16, the Linear layers and LM head on bf16 weight copies — where the
 * cost is reading B: 2 bytes a weight instead of f32's 4, and no f32 copy
 * of B written and read again as gemm_bf16.c's general path makes. Products
 * are exact in f32 and summed in f32 in gemm_small_m.c's fixed order.
 * Runs where the CPU has AVX-512 F/BW/VL and neither TFC_GEMM_SMALL_M=off
 * nor TFC_BF16_GEMM=portable is set (the latter forces gemm_bf16.c's
 * widening path, so tests can check both on one machine).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/gemm_small_m.h"
#include "cpu/parallel.h"

int tfc_cpu_gemm_small_m_bf16_enabled(void) {
    static _Atomic int cached = -1; /* CPU and environment, read once */
    int c = atomic_load(&cached);
    if (c < 0) {
        const char *e = getenv("TFC_BF16_GEMM");
        c = 0;
#if TFC_HAVE_GEMM_SMALL_M
        c = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && !(e && !strcmp(e, "portable"));
#else
        (void)e;
#endif
        atomic_store(&cached, c);
    }
    return c && tfc_cpu_gemm_small_m_enabled();
}

#if TFC_HAVE_GEMM_SMALL_M
#define SM_B uint16_t
#define SM_LOAD_B(m, p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((m), (p))), 16))
#if defined(__clang__)
#define SM_TARGET_PUSH \
    _Pragma(           \
        "clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx2,fma\"))), apply_to = function)")
#define SM_TARGET_POP _Pragma("clang attribute pop")
#else
#define SM_TARGET_PUSH _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx2,fma\")")
#define SM_TARGET_POP _Pragma("GCC pop_options")
#endif
#define SM_ENTRY tfc_cpu_gemm_small_m_bf16
#define SM_ENABLED tfc_cpu_gemm_small_m_bf16_enabled
#include "cpu/gemm_small_m_tmpl.h"

#else

int tfc_cpu_gemm_small_m_bf16(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                              const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c,
        (void)ldc;
    return 0;
}

#endif
