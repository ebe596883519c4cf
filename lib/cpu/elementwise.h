/*
 * Elementwise maps out = f(a, b, c; p) over strided views of one shape
 * (broadcast inputs carry stride 0). Each op is one formula in the table
 * below, compiled for every element type by elementwise.c.
 */
#ifndef TFC_CPU_ELEMENTWISE_H
#define TFC_CPU_ELEMENTWISE_H

#include "cpu/strided.h"

/* Formulas use a, b, c for the inputs and p for the scalar parameter. */
#define TFC_MAP_OPS(X)                                                              \
    /* binary */                                                                    \
    X(ADD, a + b)                                                                   \
    X(SUB, a - b)                                                                   \
    X(MUL, a * b)                                                                   \
    X(DIV, a / b)                                                                   \
    /* unary with scalar p */                                                       \
    X(NEG, -a)                                                                      \
    X(EXP, EXP(a))                                                                  \
    X(LOG, LOG(a))                                                                  \
    X(SQRT, SQRT(a))                                                                \
    X(RSQRT, (T)1 / SQRT(a))                                                        \
    X(TANH, TANH(a))                                                                \
    X(SIGMOID, (T)1 / ((T)1 + EXP(-a)))                                             \
    X(RELU, a > 0 ? a : (T)0)                                                       \
    X(ADD_S, a + (T)p)                                                              \
    X(MUL_S, a * (T)p)                                                              \
    X(RSUB_S, (T)p - a)                                                             \
    X(RDIV_S, (T)p / a)                                                             \
    X(POW_S, POW(a, (T)p))                                                          \
    X(COPY, a)                                                                      \
    /* backward maps: a = dy, b = x (input), c = y (output) */                      \
    X(EXP_BWD, a * c)                                                               \
    X(SQRT_BWD, a * (T)0.5 / c)                                                     \
    X(RSQRT_BWD, a * (T)-0.5 * c * c * c)                                           \
    X(TANH_BWD, a * ((T)1 - c * c))                                                 \
    X(SIGMOID_BWD, a * c * ((T)1 - c))                                              \
    X(RELU_BWD, b > 0 ? a : (T)0)                                                   \
    X(POW_S_BWD, a * (T)p * POW(b, (T)p - (T)1))                                    \
    X(DIV_BWD_B, -a * c / b) /* d(x/b)/db with b = divisor, c = x/b */               \
    X(RDIV_S_BWD, -a * c / b) /* d(p/x)/dx = -p/x² = -(p/x)/x */                    \
    X(MASK_SELECT, a) /* where(c, a, b): c is a bool/u8 mask, handled apart */

typedef enum tfc_map_op {
#define TFC_MAP_ENUM(name, expr) TFC_MAP_##name,
    TFC_MAP_OPS(TFC_MAP_ENUM)
#undef TFC_MAP_ENUM
    TFC_MAP_COUNT_
} tfc_map_op;

/*
 * out = f(a, b, c; p), or out += f(...) when accumulate. All float views
 * share out's dtype (f32 or f64) except c of MASK_SELECT, which may be
 * bool/u8. Unused inputs may be NULL.
 */
void tfc_cpu_map(tfc_map_op op, const tfc_sview *out, const tfc_sview *a, const tfc_sview *b, const tfc_sview *c,
                 double p, int accumulate);

#endif
