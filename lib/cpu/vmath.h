/*
 * Vectorisable f32 exp and erfc. libm's expf/erff are opaque calls the
 * compiler cannot vectorise (without -ffast-math), and the softmax,
 * cross-entropy and GELU loops spend most of their time in them. These are
 * straight-line code — clamps as selects, rounding by the 1.5·2²³ trick,
 * 2ⁿ built in the exponent bits — so a loop calling them vectorises.
 * f64 kernels keep libm.
 */
#ifndef TFC_CPU_VMATH_H
#define TFC_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/*
 * exp(x) for float. Cephes' method: n = round(x·log2 e), r = x − n·ln 2
 * (ln 2 split in two for exactness), exp(r) by a degree-7 polynomial on
 * |r| <= ln2/2, times 2ⁿ. Relative error ~1 ulp on [-87.3, 88]; x is
 * clamped to [-88, 88], and at n = -127 the scale 2ⁿ is built as 0, so
 * exp(x < ~-87.5) is 0 (the true value is subnormal) and exp(x > 88) is
 * exp(88) (the kernels' inputs are max-shifted, so <= 0). NaN stays NaN.
 *
 * Written for the vectoriser: the clamps are selects of values every path
 * needs, n is rounded by adding 1.5·2²³ (whose low mantissa bits then hold
 * n, read back through the bits — no float-to-int conversion), and there
 * is no branch a compiler could turn into control flow around a possibly
 * trapping multiply (which would stop it vectorising the caller's loop).
 */
static inline float tfc_vexpf(float x) {
    x = isgreater(x, 88.0f) ? 88.0f : x;
    x = isless(x, -88.0f) ? -88.0f : x;
    const float round_magic = 12582912.0f; /* 1.5·2²³, bits 0x4B400000 */
    float nm = x * 1.44269504088896341f + round_magic;
    float n = nm - round_magic;
    float r = x - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &nm, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23; /* 2^n for n in [-127, 127]; n = -127 gives 0 */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/*
 * erfc(x) for float: relative error < 5e-6 for |x| < 6 and < 1.5e-5 out to
 * x = 9 (where f32 rounding of x² inside the exp dominates), by Numerical
 * Recipes' erfcc: a Chebyshev fit of erfc(z)·exp(z²) in t = 1/(1 + z/2),
 * fractional error < 1.2e-7 in exact arithmetic. Relative accuracy in the
 * tail matters for GELU at negative x, where x·Φ(x) is tiny. erfc(−z) =
 * 2 − erfc(z) is applied arithmetically (no branch, see tfc_vexpf).
 */
static inline float tfc_verfcf(float x) {
    float z = fabsf(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    float ans = t * tfc_vexpf(p - z * z);
    float neg = isless(x, 0.0f) ? 1.0f : 0.0f;
    return ans + neg * (2.0f - 2.0f * ans);
}

#endif
