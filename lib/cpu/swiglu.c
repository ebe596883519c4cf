/*
 * SwiGLU over rows × cols, forward and backward (the problem in
 * backend/backend.h):
 *
 *   out   = silu(g) · u = g · σ(g) · u
 *   dgate = dy · u · σ(g) (1 + g σ(−g))      (σ(−g) = 1 − σ(g))
 *   dup   = dy · g · σ(g)
 *
 * σ is taken from e = e^{−|g|} ≤ 1, so no exp overflows and 1 − σ(g) has
 * no cancellation: σ(g) = 1/(1 + e) and σ(−g) = e/(1 + e) for g ≥ 0, the
 * other way round below. Row r of an operand starts at base + r · ld; the
 * columns are contiguous. Rows are split between the threads; every element
 * is computed alone, so results do not depend on the thread count.
 */
#ifndef TFC_T

#include "cpu/kernels.h"

#define TFC_TMPL_FILE "cpu/swiglu.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_swiglu_forward(const tfc_swiglu_problem *p) {
    TFC_DISPATCH(p->dtype, swiglu_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_swiglu_backward(const tfc_swiglu_problem *p) {
    TFC_DISPATCH(p->dtype, swiglu_backward, p);
    return TFC_OK;
}

#else /* TFC_T */

/* σ(g) and σ(−g) from one exp of −|g|. */
static inline void FN(swiglu_sig)(T g, T *s, T *s_neg) {
    T e = EXP(g < 0 ? g : -g), inv = (T)1 / ((T)1 + e);
    *s = g >= 0 ? inv : e * inv;
    *s_neg = g >= 0 ? e * inv : inv;
}

static void FN(swiglu_forward)(const tfc_swiglu_problem *p) {
    const int64_t rows = p->rows, cols = p->cols;
    TFC_PARALLEL_RANGE(rows, TFC_GRAIN(cols), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            const T *g = (const T *)p->gate + r * p->ld_gate, *u = (const T *)p->up + r * p->ld_up;
            T *o = (T *)p->out + r * p->ld_out;
            for (int64_t j = 0; j < cols; j++) {
                T s, sn;
                FN(swiglu_sig)(g[j], &s, &sn);
                o[j] = g[j] * s * u[j];
            }
        }
    }
}

static void FN(swiglu_backward)(const tfc_swiglu_problem *p) {
    const int64_t rows = p->rows, cols = p->cols;
    const int accumulate = p->accumulate;
    TFC_PARALLEL_RANGE(rows, TFC_GRAIN(cols), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            const T *g = (const T *)p->gate + r * p->ld_gate, *u = (const T *)p->up + r * p->ld_up;
            const T *dy = (const T *)p->dy + r * p->ld_dy;
            T *dg = p->dgate ? (T *)p->dgate + r * p->ld_dgate : NULL;
            T *du = p->dup ? (T *)p->dup + r * p->ld_dup : NULL;
            if (dg && du) {
                for (int64_t j = 0; j < cols; j++) {
                    T s, sn;
                    FN(swiglu_sig)(g[j], &s, &sn);
                    T vg = dy[j] * u[j] * s * ((T)1 + g[j] * sn), vu = dy[j] * g[j] * s;
                    dg[j] = accumulate ? dg[j] + vg : vg;
                    du[j] = accumulate ? du[j] + vu : vu;
                }
            } else if (dg) {
                for (int64_t j = 0; j < cols; j++) {
                    T s, sn;
                    FN(swiglu_sig)(g[j], &s, &sn);
                    T vg = dy[j] * u[j] * s * ((T)1 + g[j] * sn);
                    dg[j] = accumulate ? dg[j] + vg : vg;
                }
            } else if (du) {
                for (int64_t j = 0; j < cols; j++) {
                    T s, sn;
                    FN(swiglu_sig)(g[j], &s, &sn);
                    T vu = dy[j] * g[j] * s;
                    du[j] = accumulate ? du[j] + vu : vu;
                }
            }
        }
    }
}

#endif
