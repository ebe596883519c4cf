/*
 * The elementwise map kernel out = f(a, b, c; p), written once and compiled
 * per element type through kernel_tmpl.h (f64 with libm; f32 portable and
 * f32 AVX2+FMA with the vectorisable exp of vmath.h). The op switch sits
 * outside the element loop; rows whose views are all unit-stride get a
 * plain indexed loop the compiler vectorises.
 */
#ifndef TFC_T

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"

#define TFC_TMPL_FILE "cpu/elementwise.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_map(const tfc_map_problem *p) {
    TFC_TRY(tfc_cpu_check_float_view("map", p->out));
    TFC_TRY(tfc_cpu_check_float_view("map", p->a));
    TFC_TRY(tfc_cpu_check_float_view("map", p->b));
    TFC_DISPATCH(p->out->dtype, map, p);
    return TFC_OK;
}

#else /* TFC_T */

#if T_IS_F32
/* tanh through one vectorisable exp: tanh|x| = 1 − 2/(e^{2|x|} + 1); an odd
 * Taylor polynomial near 0, where that form cancels. */
static inline float FN(vtanh)(float x) {
    float ax = x < 0 ? -x : x;
    float big = 1.0f - 2.0f / (tfc_vexpf(2.0f * ax) + 1.0f);
    float x2 = ax * ax;
    float small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
    float r = ax < 0.125f ? small : big;
    return x < 0 ? -r : r;
}
#define TANH(x) FN(vtanh)(x)
#define POW(x, y) powf(x, y)
#define FABS(x) fabsf(x)
#define SIN(x) sinf(x)
#define COS(x) cosf(x)
#define FLOOR(x) floorf(x)
#define CEIL(x) ceilf(x)
#define RINT(x) rintf(x)
#define ROUND_BF16(x) tfc_bf16_to_f32(tfc_f32_to_bf16(x))
#else
#define TANH(x) tanh(x)
#define POW(x, y) pow(x, y)
#define FABS(x) fabs(x)
#define SIN(x) sin(x)
#define COS(x) cos(x)
#define FLOOR(x) floor(x)
#define CEIL(x) ceil(x)
#define RINT(x) rint(x)
/* f64 through f32 (a double rounding; autocast operands are f32) */
#define ROUND_BF16(x) (double)tfc_bf16_to_f32(tfc_f32_to_bf16((float)(x)))
#endif

/* One row of `inner` elements: contiguous fast path, else strided. */
#define MAP_ROW(expr)                                             \
    do {                                                          \
        if (so == 1 && sa == 1 && sb == 1 && sc == 1) {           \
            for (int64_t i = 0; i < inner; i++) {                 \
                T a = pa[i], b = pb[i], c = pc[i];                \
                (void)a;                                          \
                (void)b;                                          \
                (void)c;                                          \
                T r_ = (expr);                                    \
                po[i] = accumulate ? po[i] + r_ : r_;             \
            }                                                     \
        } else {                                                  \
            for (int64_t i = 0; i < inner; i++) {                 \
                T a = pa[i * sa], b = pb[i * sb], c = pc[i * sc]; \
                (void)a;                                          \
                (void)b;                                          \
                (void)c;                                          \
                T r_ = (expr);                                    \
                po[i * so] = accumulate ? po[i * so] + r_ : r_;   \
            }                                                     \
        }                                                         \
    } while (0)

/* One row of `inner` elements at po, pa, pb, pc (pm: the mask of where(), else unused) with the given strides. */
static void FN(map_row)(tfc_map_op op, T *po, const T *pa, const T *pb, const T *pc, const unsigned char *pm,
                        int64_t inner, int64_t so, int64_t sa, int64_t sb, int64_t sc, double p, int accumulate) {
    if (op == TFC_MAP_MASK_SELECT) {
        for (int64_t i = 0; i < inner; i++) {
            T r_ = pm[i * sc] ? pa[i * sa] : pb[i * sb];
            po[i * so] = accumulate ? po[i * so] + r_ : r_;
        }
        return;
    }
    switch (op) {
#define TFC_MAP_CASE(name, expr) \
    case TFC_MAP_##name:         \
        MAP_ROW(expr);           \
        break;
        TFC_MAP_OPS(TFC_MAP_CASE)
#undef TFC_MAP_CASE
    default: break;
    }
}

static void FN(map)(const tfc_map_problem *p) {
    const tfc_map_op op = p->op;
    const tfc_sview *out = p->out, *av = p->a, *bv = p->b, *cv = p->c;
    const double param = p->p;
    const int accumulate = p->accumulate;
    /* where(c, a, b) reads c as a bool/u8 mask; every other op reads c as T. */
    int mask = op == TFC_MAP_MASK_SELECT;
    const tfc_sview *views[4] = {out, av ? av : out, bv ? bv : out, cv ? cv : out};
    tfc_iter it;
    tfc_iter_init(&it, views, 4);
    if (it.numel == 0) return;
    int32_t last = it.ndim - 1;
    int64_t inner = it.shape[last], rows = it.numel / inner;
    int64_t so = it.strides[0][last], sa = it.strides[1][last], sb = it.strides[2][last], sc = it.strides[3][last];
    const size_t cs = mask ? 1 : sizeof(T); /* c's element size */
    if (it.ndim == 1) {
        /* One row (every dense tensor merges into one): split the row itself between the threads. */
        TFC_PARALLEL_RANGE(inner, 16384, lo, hi) {
            const T *pa = (const T *)views[1]->data + lo * sa, *pb = (const T *)views[2]->data + lo * sb;
            const char *pcb = (const char *)views[3]->data + (size_t)(lo * sc) * cs;
            FN(map_row)
            (op, (T *)out->data + lo * so, pa, pb, (const T *)pcb, (const unsigned char *)pcb, hi - lo, so, sa, sb, sc,
             param, accumulate);
        }
        return;
    }
    TFC_PARALLEL_RANGE(rows, 16384 / inner + 1, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        tfc_iter row_it = it;
        row_it.shape[last] = 1;
        tfc_iter_seek(&row_it, lo, idx, off);
        for (int64_t r = lo; r < hi; r++) {
            const char *pcb = (const char *)views[3]->data + (size_t)off[3] * cs;
            FN(map_row)
            (op, (T *)out->data + off[0], (const T *)views[1]->data + off[1], (const T *)views[2]->data + off[2],
             (const T *)pcb, (const unsigned char *)pcb, inner, so, sa, sb, sc, param, accumulate);
            tfc_iter_next(&row_it, idx, off);
        }
    }
}

#undef MAP_ROW
#undef TANH
#undef POW
#undef FABS
#undef SIN
#undef COS
#undef FLOOR
#undef CEIL
#undef RINT
#undef ROUND_BF16

#endif /* TFC_T */
