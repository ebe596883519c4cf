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

#include <stdint.h>
#include <string.h>

/*
 * exp(x) for float. Cephes' method: n = round(x·log2 e), r = x − n·ln 2
 * (ln 2 split in two for exactness), exp(r) by a degree-7 polynomial on
 * |r| <= ln2/2, times 2ⁿ. Relative error ~1 ulp on [-87.3, 88]; 0 below
 * -87.33 (where the true value is subnormal), exp(88) above 88 (inputs of
 * the kernels are max-shifted, so <= 0), NaN stays NaN.
 */
static inline float tfc_vexpf(float x) {
    float xc = x > 88.0f ? 88.0f : x;
    xc = xc < -87.0f ? -87.0f : xc;
    xc = xc == xc ? xc : 0.0f; /* keep the float->int conversion defined for NaN */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; /* 2^n, n in [-126, 127] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float res = p * scale;
    res = x < -87.33f ? 0.0f : res;
    return x == x ? res : x;
}

/*
 * erfc(x) for float, with relative error ~1e-6 everywhere (Numerical
 * Recipes' erfcc: a Chebyshev fit of erfc(z)·exp(z²) in t = 1/(1 + z/2),
 * fractional error < 1.2e-7 in exact arithmetic). Relative accuracy in the
 * tail matters for GELU at negative x, where x·Φ(x) is tiny.
 */
static inline float tfc_verfcf(float x) {
    float z = x < 0.0f ? -x : x;
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
    return x >= 0.0f ? ans : 2.0f - ans;
}

#endif
