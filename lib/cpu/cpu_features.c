/* Run-time choice between the portable and the AVX2+FMA f32 kernels. */
#include "cpu/kernels.h"

int tfc_cpu_avx2_disabled;

int tfc_cpu_use_avx2(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    if (tfc_cpu_avx2_disabled) return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* ---- the quantized linear's family (cpu/quant.h) ---- */

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/quant.h"

int tfc_cpu_qisa_cap = -1;

const char *tfc_cpu_qisa_name(int isa) {
    return isa == TFC_QISA_AVX512 ? "avx512" : isa == TFC_QISA_AVX2 ? "avx2" : "portable";
}

/* TFC_QUANT_KERNEL's cap, read once (-1: unset or unknown). */
static int env_cap(void) {
    static _Atomic int cached = -2;
    int c = atomic_load(&cached);
    if (c == -2) {
        const char *e = getenv("TFC_QUANT_KERNEL");
        c = !e                       ? -1
            : !strcmp(e, "portable") ? TFC_QISA_PORTABLE
            : !strcmp(e, "avx2")     ? TFC_QISA_AVX2
            : !strcmp(e, "avx512")   ? TFC_QISA_AVX512
                                     : -1;
        atomic_store(&cached, c);
    }
    return c;
}

int tfc_cpu_qisa(void) {
    int isa = TFC_QISA_PORTABLE;
#if TFC_HAVE_QUANT_SIMD
    if (tfc_cpu_use_avx2()) {
        isa = TFC_QISA_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl"))
            isa = TFC_QISA_AVX512;
    }
#endif
    int cap = env_cap();
    if (cap >= 0 && cap < isa) isa = cap;
    if (tfc_cpu_qisa_cap >= 0 && tfc_cpu_qisa_cap < isa) isa = tfc_cpu_qisa_cap;
    return isa;
}

/* ---- the small-M f32 GEMM (cpu/gemm_small_m.h) ---- */

#include "cpu/gemm_small_m.h"

int tfc_cpu_gemm_small_m_allowed = 1;

int tfc_cpu_gemm_small_m_enabled(void) {
    static _Atomic int cached = -1; /* CPU and environment, read once */
    int c = atomic_load(&cached);
    if (c < 0) {
        const char *e = getenv("TFC_GEMM_SMALL_M");
        c = 0;
#if TFC_HAVE_GEMM_SMALL_M
        c = tfc_cpu_use_avx2() && __builtin_cpu_supports("avx512f") && !(e && !strcmp(e, "off"));
#else
        (void)e;
#endif
        atomic_store(&cached, c);
    }
    return c && tfc_cpu_gemm_small_m_allowed;
}
