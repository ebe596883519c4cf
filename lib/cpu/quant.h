/*
 * The CPU's quantized-weight kernels (formats in include/tfcore/quant.h,
 * entries in lib/backend/backend.h): quantize and dequantize (quant.c) and
 * the quantized linear, one row-range function per instruction family —
 * portable C (quant.c), AVX2+FMA (quant_avx2.c), AVX-512 (quant_avx512.c) —
 * chosen at run time (cpu_features.c).
 */
#ifndef TFC_CPU_QUANT_H
#define TFC_CPU_QUANT_H

#include <stdint.h>

#include "backend/backend.h"

/* Instruction families of the quantized linear, lowest first. */
enum { TFC_QISA_PORTABLE = 0, TFC_QISA_AVX2 = 1, TFC_QISA_AVX512 = 2 };

/*
 * The family tfc_qlinear runs: the best this CPU has, capped by
 * TFC_QUANT_KERNEL=portable|avx2|avx512 (read once), by tfc_cpu_qisa_cap
 * when >= 0, and portable when tfc_cpu_avx2_disabled.
 */
int tfc_cpu_qisa(void);
/* Tests and benchmarks set it (>= 0) to cap the family; -1 (default): no cap. */
extern int tfc_cpu_qisa_cap;
/* "portable", "avx2", "avx512". */
const char *tfc_cpu_qisa_name(int isa);

/*
 * Rows [n0, n1) of W: y[m, n] = Σ_k x[m, k] · W[n, k] + (b ? b[n] : 0) for
 * every m < M. x [M, K] and y [M, N] contiguous f32; codes/scales in
 * format's layout (G: the int4 group, a multiple of 32 dividing K).
 */
typedef void (*tfc_qrows_fn)(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                             const float *x, const void *codes, const float *scales, const float *b, float *y);
void tfc_cpu_qrows_portable(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                            const float *x, const void *codes, const float *scales, const float *b, float *y);
/*
 * W[n0 .. n0+nb, k0 .. k0+kb] dequantized into dst [nb, kb] (W's [N, K]
 * layout; int4: k0 and kb multiples of G), each element the same f32
 * product as tfc_cpu_dequantize's: the tile the batched quantized linear
 * hands to the f32 GEMM.
 */
typedef void (*tfc_qtile_fn)(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                             const void *codes, const float *scales, float *dst);
void tfc_cpu_qtile_portable(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                            const void *codes, const float *scales, float *dst);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFC_HAVE_QUANT_SIMD 1
void tfc_cpu_qtile_avx2(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                        const void *codes, const float *scales, float *dst);
void tfc_cpu_qtile_avx512(int32_t format, int64_t n0, int64_t nb, int64_t k0, int64_t kb, int64_t K, int64_t G,
                          const void *codes, const float *scales, float *dst);
void tfc_cpu_qrows_avx2(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                        const float *x, const void *codes, const float *scales, const float *b, float *y);
void tfc_cpu_qrows_avx512(int32_t format, int64_t n0, int64_t n1, int64_t M, int64_t N, int64_t K, int64_t G,
                          const float *x, const void *codes, const float *scales, const float *b, float *y);
#else
#define TFC_HAVE_QUANT_SIMD 0
#endif

/* The backend entries (validated problems; dtype f32). */
tfc_status tfc_cpu_quantize(const tfc_quant_problem *p);
tfc_status tfc_cpu_dequantize(const tfc_quant_problem *p);
tfc_status tfc_cpu_qlinear(const tfc_quant_problem *p);

#endif
