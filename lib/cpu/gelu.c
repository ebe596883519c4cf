/*
 * GELU, elementwise, exact and tanh-approximated, forward and backward.
 *
 *   exact: y = x · Φ(x),  Φ(x) = ½ erfc(−x/√2);   y' = Φ(x) + x · φ(x),  φ(x) = e^{−x²/2} / √(2π)
 *   tanh:  y = ½ x (1 + tanh u) = x · σ(2u),  u = √(2/π) (x + 0.044715 x³)
 *          y' = σ(2u) + x · 2σ(2u)(1 − σ(2u)) · √(2/π) (1 + 3 · 0.044715 x²)
 *
 * ½(1 + tanh u) is written as the logistic σ(2u) = 1 / (1 + e^{−2u}): one
 * exp, no cancellation near u = 0, and it vectorises. f32 uses the
 * polynomial exp/erfc of vmath.h, f64 libm's exp/erfc.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

#define GELU_SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_COEF 0.044715
#define GELU_SQRT1_2 0.70710678118654752440
#define GELU_INV_SQRT_2PI 0.39894228040143267794

#define TFC_TMPL_FILE "cpu/gelu.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_gelu_forward(const tfc_gelu_problem *p) {
    TFC_DISPATCH(p->dtype, gelu_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_gelu_backward(const tfc_gelu_problem *p) {
    TFC_DISPATCH(p->dtype, gelu_backward, p);
    return TFC_OK;
}

#else /* TFC_T */

#if T_IS_F32
#define ERFC(x) tfc_verfcf(x)
#else
#define ERFC(x) erfc(x)
#endif

/* Φ(x), the standard normal CDF. */
static inline T FN(gelu_cdf)(T x) { return (T)0.5 * ERFC(-x * (T)GELU_SQRT1_2); }
/* σ(2u) of the tanh form. */
static inline T FN(gelu_sig)(T x) {
    T u = (T)GELU_SQRT_2_OVER_PI * (x + (T)GELU_COEF * x * x * x);
    return (T)1 / ((T)1 + EXP(-2 * u));
}

static void FN(gelu_forward)(const tfc_gelu_problem *p) {
    const int64_t n = p->n;
    const int approximate = p->approximate;
    const T *x = p->x;
    T *y = p->y;
    TFC_PARALLEL_RANGE(n, 16384, lo, hi) {
        if (approximate)
            for (int64_t i = lo; i < hi; i++) y[i] = x[i] * FN(gelu_sig)(x[i]);
        else
            for (int64_t i = lo; i < hi; i++) y[i] = x[i] * FN(gelu_cdf)(x[i]);
    }
}

static void FN(gelu_backward)(const tfc_gelu_problem *p) {
    const int64_t n = p->n;
    const int approximate = p->approximate, accumulate = p->accumulate;
    const T *dy = p->dy, *x = p->x;
    T *dx = p->dx;
    TFC_PARALLEL_RANGE(n, 16384, lo, hi) {
        if (approximate)
            for (int64_t i = lo; i < hi; i++) {
                T xi = x[i], s = FN(gelu_sig)(xi);
                T du = (T)GELU_SQRT_2_OVER_PI * ((T)1 + (T)(3 * GELU_COEF) * xi * xi);
                T v = dy[i] * (s + xi * 2 * s * ((T)1 - s) * du);
                dx[i] = accumulate ? dx[i] + v : v;
            }
        else
            for (int64_t i = lo; i < hi; i++) {
                T xi = x[i];
                T v = dy[i] * (FN(gelu_cdf)(xi) + xi * (T)GELU_INV_SQRT_2PI * EXP((T)-0.5 * xi * xi));
                dx[i] = accumulate ? dx[i] + v : v;
            }
    }
}

#undef ERFC

#endif
