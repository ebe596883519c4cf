/*
 * The AMX tile path of the CPU's bf16 GEMM (gemm_bf16_amx.c) and whether
 * it may run (cpu_features.c).
 */
#ifndef TFC_CPU_GEMM_BF16_AMX_H
#define TFC_CPU_GEMM_BF16_AMX_H

#include <stdint.h>

#include "tfcore/core.h"

/* AMX intrinsics by target attribute: GCC 11+, clang 12+, x86-64. */
#if defined(__x86_64__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define TFC_HAVE_AMX 1
#else
#define TFC_HAVE_AMX 0
#endif

/* How the CPU's bf16 GEMM multiplies (tfc_cpu_bf16_gemm_kind). */
typedef enum tfc_bf16_gemm_kind {
    TFC_BF16_GEMM_WIDEN = 0,   /* widen to f32, the f32 GEMM (gemm_bf16.c): every CPU, the default */
    TFC_BF16_GEMM_AMX = 1,     /* AMX tiles: TFC_BF16_GEMM=amx where CPUID, the OS and arch_prctl allow them */
    TFC_BF16_GEMM_AMX_EMU = 2, /* the AMX tile program on emulated tiles: TFC_BF16_GEMM=amx-emulated (tests) */
} tfc_bf16_gemm_kind;

/*
 * The kind, decided once from TFC_BF16_GEMM: "amx-emulated" → AMX_EMU;
 * "amx" → AMX where usable (AMX-TILE and AMX-BF16 in CPUID, tile state
 * enabled in XCR0, arch_prctl(ARCH_REQ_XCOMP_PERM) granted), else WIDEN;
 * unset, "portable" or anything else → WIDEN. AMX is opt-in until the tile
 * path has been verified and measured on AMX hardware (it was written and
 * tested on emulated tiles; docs/PERFORMANCE.md, "bf16 on an AMX CPU").
 * Thread-safe.
 */
tfc_bf16_gemm_kind tfc_cpu_bf16_gemm_kind(void);

/*
 * f32 C[m, n] = alpha · op(A) · op(B) + beta · C (beta = 0: C not read) on
 * AMX tiles, or (emulated = 1) on emulated ones; A [m, k] (ta: [k, m]) and
 * B [k, n] (tb: [n, k]) bf16 with row strides lda, ldb. m, n, k > 0.
 * Errors: TFC_ERR_OOM for the packed panels; TFC_ERR_UNSUPPORTED for real
 * tiles in a build without AMX code.
 */
tfc_status tfc_cpu_gemm_bf16_tiles(int emulated, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                                   const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, double beta,
                                   float *c, int64_t ldc);

#endif
