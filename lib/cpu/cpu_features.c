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

/* ---- the bf16 GEMM's kind (cpu/gemm_bf16_amx.h) ---- */

#include "cpu/gemm_bf16_amx.h"

#if TFC_HAVE_AMX
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

/* AMX-TILE and AMX-BF16 in CPUID, tile state in XCR0, and Linux's grant of the tile data to this process. */
static int amx_usable(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 24)) || !(edx & (1u << 22))) return 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return 0; /* no OSXSAVE: no xgetbv */
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) return 0; /* XTILECFG, XTILEDATA */
    /* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (Linux 5.16+); once granted, for every thread */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#endif

tfc_bf16_gemm_kind tfc_cpu_bf16_gemm_kind(void) {
    static _Atomic int cached = -1;
    int k = atomic_load(&cached);
    if (k < 0) {
        const char *e = getenv("TFC_BF16_GEMM");
        if (e && !strcmp(e, "portable"))
            k = TFC_BF16_GEMM_WIDEN;
        else if (e && !strcmp(e, "amx-emulated"))
            k = TFC_BF16_GEMM_AMX_EMU;
        else {
            /* AMX tiles only when asked for, until the path has run on AMX hardware (docs/PERFORMANCE.md) */
            k = TFC_BF16_GEMM_WIDEN;
#if TFC_HAVE_AMX
            if (e && !strcmp(e, "amx") && amx_usable()) k = TFC_BF16_GEMM_AMX;
#endif
        }
        atomic_store(&cached, k);
    }
    return (tfc_bf16_gemm_kind)k;
}
