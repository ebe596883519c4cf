/*
 * The elementwise maps out = f(a, b, c; p): every formula exactly once.
 * Both backends are generated from this table — lib/cpu/elementwise.c
 * instantiates it for f32 and f64 (AVX2 and portable), cuda/map.cu for f32
 * and bf16 storage with f32 arithmetic — so a new map is one line here.
 *
 * A formula reads the inputs a, b, c (of type T) and the scalar parameter
 * p, and may use EXP, LOG, SQRT, TANH, POW, FABS, SIN, COS, FLOOR, CEIL and
 * RINT and ROUND_BF16, which each includer defines for its T. Plain C and CUDA C++ both include this header.
 */
#ifndef TFC_BACKEND_MAP_OPS_H
#define TFC_BACKEND_MAP_OPS_H

#define TFC_MAP_OPS(X)                                                                         \
    /* binary */                                                                               \
    X(ADD, a + b)                                                                              \
    X(SUB, a - b)                                                                              \
    X(MUL, a *b)                                                                               \
    X(DIV, a / b)                                                                              \
    /* unary with scalar p */                                                                  \
    X(NEG, -a)                                                                                 \
    X(EXP, EXP(a))                                                                             \
    X(LOG, LOG(a))                                                                             \
    X(SQRT, SQRT(a))                                                                           \
    X(RSQRT, (T)1 / SQRT(a))                                                                   \
    X(TANH, TANH(a))                                                                           \
    X(SIGMOID, (T)1 / ((T)1 + EXP(-a)))                                                        \
    X(RELU, a > 0 ? a : (T)0)                                                                  \
    X(ADD_S, a + (T)p)                                                                         \
    X(MUL_S, a *(T)p)                                                                          \
    X(RSUB_S, (T)p - a)                                                                        \
    X(RDIV_S, (T)p / a)                                                                        \
    X(POW_S, POW(a, (T)p))                                                                     \
    X(COPY, a)                                                                                 \
    /* backward maps: a = dy, b = x (input), c = y (output) */                                 \
    X(EXP_BWD, a *c)                                                                           \
    X(SQRT_BWD, a *(T)0.5 / c)                                                                 \
    X(RSQRT_BWD, a *(T)-0.5 * c * c * c)                                                       \
    X(TANH_BWD, a *((T)1 - c * c))                                                             \
    X(SIGMOID_BWD, a *c *((T)1 - c))                                                           \
    X(RELU_BWD, b > 0 ? a : (T)0)                                                              \
    X(POW_S_BWD, a *(T)p *POW(b, (T)p - (T)1))                                                 \
    X(DIV_BWD_B, -a *c / b)  /* d(x/b)/db with b = divisor, c = x/b */                         \
    X(RDIV_S_BWD, -a *c / b) /* d(p/x)/dx = -p/x² = -(p/x)/x */                               \
    X(MASK_SELECT, a)        /* where(c, a, b): c is a bool/u8 mask, handled apart */          \
    /* appended in ABI 7 (lib/ops/elementwise_more.c, lib/ops/compare.c) */                    \
    X(ABS, FABS(a))                                                                            \
    X(SIGN, a > 0 ? (T)1 : a < 0 ? (T)-1 : (T)0) /* 0 for ±0 and NaN, as torch 1.13 */        \
    X(SIN, SIN(a))                                                                             \
    X(COS, COS(a))                                                                             \
    X(FLOOR, FLOOR(a))                                                                         \
    X(CEIL, CEIL(a))                                                                           \
    X(ROUND, RINT(a))             /* half to even under the default rounding mode, as torch */ \
    X(MAX_S, a < (T)p ? (T)p : a) /* clamp_min; NaN propagates */                              \
    X(MIN_S, a > (T)p ? (T)p : a) /* clamp_max; NaN propagates */                              \
    X(MAXIMUM, a != a || a > b ? a : b)                                                        \
    X(MINIMUM, a != a || a < b ? a : b)                                                        \
    X(LT, a < b ? (T)1 : (T)0)                                                                 \
    X(LE, a <= b ? (T)1 : (T)0)                                                                \
    X(GT, a > b ? (T)1 : (T)0)                                                                 \
    X(GE, a >= b ? (T)1 : (T)0)                                                                \
    X(EQ, a == b ? (T)1 : (T)0)                                                                \
    X(NE, a != b ? (T)1 : (T)0)                                                                \
    X(ABS_BWD, b > 0 ? a : b < 0 ? -a : (T)0) /* dy·sgn(x), 0 at 0 */                         \
    X(SIN_BWD, a *COS(b))                                                                      \
    X(COS_BWD, -a *SIN(b))                                                                     \
    X(MAX_S_BWD, b >= (T)p ? a : (T)0) /* clamp_min: 1 at the bound, as torch */               \
    X(MIN_S_BWD, b <= (T)p ? a : (T)0) /* clamp_max */                                         \
    /* maximum/minimum: a = dy, b = this operand, c = the other; ties split dy in half */      \
    X(MAXIMUM_BWD, b > c ? a : b == c ? a * (T)0.5 : (T)0)                                     \
    X(MINIMUM_BWD, b < c ? a : b == c ? a * (T)0.5 : (T)0)                                     \
    /* appended in ABI 11: a rounded to the nearest bf16 (ties to even, NaN kept), */          \
    /* stored as T: the autocast GEMM operand where the bf16 GEMM widens anyway */             \
    X(ROUND_BF16, ROUND_BF16(a))                                                               \
    /* appended in ABI 13: silu(a) = a·σ(a) and its backward over (a = dy, b = x), */        \
    /* silu'(x) = σ(x)(1 + x·σ(−x)) with 1 − σ(x) = σ(−x) (no cancellation) */      \
    X(SILU, a *TFC_MAP_SIGMOID_OF(a))                                                          \
    X(SILU_BWD, a *TFC_MAP_SIGMOID_OF(b) * ((T)1 + b * TFC_MAP_SIGMOID_OF(-b)))

/*
 * σ(x) = 1/(1 + e^−x) through e^−|x| ≤ 1, which never overflows: σ(x) =
 * 1/(1 + e^−|x|) for x ≥ 0 and e^−|x|/(1 + e^−|x|) below, each side exact
 * to rounding (NaN stays NaN). Both exps are the same expression, computed
 * once where the includer's EXP is inline.
 */
#define TFC_MAP_SIGMOID_OF(x) (((x) >= 0 ? (T)1 : EXP(-FABS(x))) / ((T)1 + EXP(-FABS(x))))

typedef enum tfc_map_op {
#define TFC_MAP_ENUM(name, expr) TFC_MAP_##name,
    TFC_MAP_OPS(TFC_MAP_ENUM)
#undef TFC_MAP_ENUM
        TFC_MAP_COUNT_
} tfc_map_op;

#endif
