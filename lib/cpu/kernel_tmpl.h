/*
 * Compiling one kernel file once per element type — the "template" of the
 * fused kernels, so each op is written once for float and double.
 *
 * A kernel file keeps its type-generic code in an `#else` branch of
 * `#ifndef TFC_T`, and in its first branch does
 *     #define TFC_TMPL_FILE "cpu/layernorm.c"
 *     #include "cpu/kernel_tmpl.h"
 * which includes the file again for each of:
 *   f64         T = double, FN(x) = x_f64        libm math (gradchecks)
 *   f32         T = float,  FN(x) = x_f32        portable, built for the baseline ISA
 *   f32 AVX2    T = float,  FN(x) = x_f32_avx2   x86 only: built for AVX2+FMA
 * Inside, the code uses T, ACC (double: accumulators of sums), FN(),
 * EXP/LOG/SQRT and T_IS_F32. TFC_DISPATCH(dtype, name, args...) then calls
 * the instance for the dtype and the CPU (avx2 only when the CPU has it).
 */
#ifndef TFC_CPU_KERNEL_TMPL_H
#define TFC_CPU_KERNEL_TMPL_H

/*
 * For every function of a kernel file, vmath.h's inline helpers included
 * (they must inline into the AVX2 instance, which needs equal options):
 *  - no-trapping-math: FP exceptions are never unmasked here, and without
 *    it GCC will not if-convert a select next to a multiply ("could trap"),
 *    so loops calling tfc_vexpf would not vectorise;
 *  - fp-contract=fast: a*b+c may become one FMA (ISO C mode turns this
 *    off); only the AVX2 instance has FMA instructions to use;
 *  - no-thread-jumps: jump threading clones the code after tfc_vexpf's
 *    clamps for the clamped value, folds it to constants like
 *    1/(1 + e^88) = 6e-39, and the vectorised loop then multiplies every
 *    element by that subnormal before blending it away: a microcode assist
 *    per vector, 6-8x slower (measured on the tanh-GELU loop).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "fp-contract=fast", "no-thread-jumps")
#endif

#include <math.h>

#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "cpu/vmath.h"

#define TFC_CAT_(a, b) a##b
#define TFC_CAT(a, b) TFC_CAT_(a, b)
#define FN(name) TFC_CAT(name, TFC_SUFFIX)
#define ACC double

/* Rows (or items) per thread so that each thread gets about 16K elements. */
#define TFC_GRAIN(per_item) ((per_item) >= 16384 ? 1 : 16384 / ((per_item) > 0 ? (per_item) : 1))

/* `SIMD_SUM(s)` before a loop lets it vectorise the += s reduction (the
 * lanes' partial sums are added at the end: same result for any thread count). */
#define TFC_PRAGMA(x) _Pragma(#x)
#if TFC_HAVE_OPENMP
#define SIMD_SUM(...) TFC_PRAGMA(omp simd reduction(+ : __VA_ARGS__))
#define SIMD_MAX(v) TFC_PRAGMA(omp simd reduction(max : v))
#else
#define SIMD_SUM(...)
#define SIMD_MAX(v)
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TFC_HAVE_AVX2_VARIANT 1
#define TFC_DISPATCH(dt, name, ...)                          \
    ((dt) == TFC_DTYPE_F64    ? name##_f64(__VA_ARGS__)      \
         : tfc_cpu_use_avx2() ? name##_f32_avx2(__VA_ARGS__) \
                              : name##_f32(__VA_ARGS__))
#else
#define TFC_HAVE_AVX2_VARIANT 0
#define TFC_DISPATCH(dt, name, ...) ((dt) == TFC_DTYPE_F64 ? name##_f64(__VA_ARGS__) : name##_f32(__VA_ARGS__))
#endif

#endif /* TFC_CPU_KERNEL_TMPL_H */

/* ---- the instantiations (run on every inclusion) ---------------------------- */

#define TFC_T double
#define T double
#define T_IS_F32 0
#define TFC_SUFFIX _f64
#define EXP(x) exp(x)
#define LOG(x) log(x)
#define SQRT(x) sqrt(x)
#include TFC_TMPL_FILE
#undef TFC_T
#undef T
#undef T_IS_F32
#undef TFC_SUFFIX
#undef EXP
#undef LOG
#undef SQRT

#define TFC_T float
#define T float
#define T_IS_F32 1
#define TFC_SUFFIX _f32
#define EXP(x) tfc_vexpf(x)
#define LOG(x) logf(x)
#define SQRT(x) sqrtf(x)
#include TFC_TMPL_FILE
#undef TFC_SUFFIX

#if TFC_HAVE_AVX2_VARIANT
#define TFC_SUFFIX _f32_avx2
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#include TFC_TMPL_FILE
#pragma clang attribute pop
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include TFC_TMPL_FILE
#pragma GCC pop_options
#endif
#undef TFC_SUFFIX
#endif

#undef TFC_T
#undef T
#undef T_IS_F32
#undef EXP
#undef LOG
#undef SQRT
#undef TFC_TMPL_FILE
