/*
 * Rotary position embedding, HF's rotate-half form (tfc_rope_problem in
 * backend.h), x [B,H,T,D] strided, y / dx contiguous, h = D/2; for the row
 * (b, head, t) with p = pos[b·pos_sb + t] and a_i = p · inv_freq[i], i < h:
 *   forward:  y[i]  = x[i] cos a_i − x[i+h] sin a_i,    y[i+h]  = x[i+h] cos a_i + x[i] sin a_i
 *   backward: dx[i] = dy[i] cos a_i + dy[i+h] sin a_i,  dx[i+h] = dy[i+h] cos a_i − dy[i] sin a_i
 * The backward is the forward with sin a negated (the rotation by −a).
 * Angles in T (f64 for f64; f32 for f32: p rounded to f32, the product
 * rounded to f32, then libm's cosf/sinf — transformers' f32 angles), so
 * inv_freq has the dtype T. Each token (b, t) computes its cos/sin once, in
 * chunks of ROPE_CHUNK frequencies kept on the stack, for all H heads.
 * Parallel over tokens; every element is computed the same way on any
 * thread count.
 */
#ifndef TFC_T

#include "core/error.h"
#include "cpu/kernels.h"

#define ROPE_CHUNK 64

#define TFC_TMPL_FILE "cpu/rope.c"
#include "cpu/kernel_tmpl.h"

/* Every position >= 0, checked before anything is written. */
static tfc_status check_positions(const tfc_rope_problem *p) {
    const int64_t n = p->pos_sb ? p->B * p->Tn : p->Tn;
    for (int64_t i = 0; i < n; i++)
        if (p->pos[i] < 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "positions holds %lld at flat index %lld; positions must be >= 0",
                           (long long)p->pos[i], (long long)i);
    return TFC_OK;
}

tfc_status tfc_cpu_rope_forward(const tfc_rope_problem *p) {
    TFC_TRY(check_positions(p));
    TFC_DISPATCH(p->dtype, rope_rotate, p, 0);
    return TFC_OK;
}

tfc_status tfc_cpu_rope_backward(const tfc_rope_problem *p) {
    TFC_TRY(check_positions(p));
    TFC_DISPATCH(p->dtype, rope_rotate, p, 1);
    return TFC_OK;
}

#else /* TFC_T */

#if T_IS_F32
#define COS(x) cosf(x)
#define SIN(x) sinf(x)
#else
#define COS(x) cos(x)
#define SIN(x) sin(x)
#endif

static void FN(rope_rotate)(const tfc_rope_problem *p, int inverse) {
    const int64_t B = p->B, H = p->H, Tn = p->Tn, D = p->D, half = D / 2, pos_sb = p->pos_sb;
    const tfc_attn_operand in = inverse ? p->dy : p->x;
    T *out = inverse ? p->dx : p->y;
    const int acc = inverse && p->accumulate;
    const T *inv_freq = p->inv_freq;
    const int64_t *pos = p->pos;
    TFC_PARALLEL_RANGE(B * Tn, TFC_GRAIN(H * D), lo, hi) {
        T c[ROPE_CHUNK], s[ROPE_CHUNK];
        for (int64_t bt = lo; bt < hi; bt++) {
            const int64_t b = bt / Tn, t = bt % Tn;
            const T at = (T)pos[b * pos_sb + t];
            for (int64_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
                const int64_t n = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
                for (int64_t k = 0; k < n; k++) {
                    const T a = at * inv_freq[i0 + k];
                    c[k] = COS(a);
                    s[k] = inverse ? -SIN(a) : SIN(a);
                }
                for (int64_t h = 0; h < H; h++) {
                    const T *xr = (const T *)in.data + b * in.sb + h * in.sh + t * in.sr + i0;
                    T *yr = out + ((b * H + h) * Tn + t) * D + i0;
                    for (int64_t k = 0; k < n; k++) {
                        const T x1 = xr[k], x2 = xr[k + half];
                        const T v1 = x1 * c[k] - x2 * s[k], v2 = x2 * c[k] + x1 * s[k];
                        yr[k] = acc ? yr[k] + v1 : v1;
                        yr[k + half] = acc ? yr[k + half] + v2 : v2;
                    }
                }
            }
        }
    }
}

#undef COS
#undef SIN

#endif
