/*
 * SwiGLU over rows × cols (the problem in backend/backend.h):
 *   out = silu(g) · u = g · σ(g) · u
 *   dgate (+)= dy · u · σ(g)(1 + g σ(−g)),  dup (+)= dy · g · σ(g)
 * f32 or bf16 storage, f32 arithmetic, one rounding per output. Row r of
 * an operand starts at base + r · ld (gate and up may be the column halves
 * of one [rows, 2·cols] buffer); one thread per element, grid-stride. σ
 * comes from e^{−|g|} ≤ 1: no overflow, and 1 − σ(g) = σ(−g) without
 * cancellation.
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

/* σ(g) and σ(−g) from one exp of −|g|. */
__device__ __forceinline__ void swiglu_sig(float g, float *s, float *s_neg) {
    float e = expf(-fabsf(g)), inv = 1.0f / (1.0f + e);
    *s = g >= 0.0f ? inv : e * inv;
    *s_neg = g >= 0.0f ? e * inv : inv;
}

/* The problem goes by value: its pointers are device addresses, its sizes the launch's. */
template <class T> __global__ void swiglu_kernel(const tfc_swiglu_problem p, int64_t n) {
    const T *gate = (const T *)p.gate, *up = (const T *)p.up;
    T *out = (T *)p.out;
    TFCU_GRID_STRIDE(i, n) {
        int64_t r = i / p.cols, j = i - r * p.cols;
        float g = tfcu_load(gate, (size_t)(r * p.ld_gate + j)), s, sn;
        swiglu_sig(g, &s, &sn);
        out[r * p.ld_out + j] = tfcu_from_f<T>(g * s * tfcu_load(up, (size_t)(r * p.ld_up + j)));
    }
}

template <class T> __global__ void swiglu_backward_kernel(const tfc_swiglu_problem p, int64_t n, bool acc) {
    const T *gate = (const T *)p.gate, *up = (const T *)p.up, *dy = (const T *)p.dy;
    T *dgate = (T *)p.dgate, *dup = (T *)p.dup;
    TFCU_GRID_STRIDE(i, n) {
        int64_t r = i / p.cols, j = i - r * p.cols;
        float g = tfcu_load(gate, (size_t)(r * p.ld_gate + j)), d = tfcu_load(dy, (size_t)(r * p.ld_dy + j)), s, sn;
        swiglu_sig(g, &s, &sn);
        if (dgate)
            tfcu_store_grad(dgate, (size_t)(r * p.ld_dgate + j),
                            d * tfcu_load(up, (size_t)(r * p.ld_up + j)) * s * (1.0f + g * sn), acc);
        if (dup) tfcu_store_grad(dup, (size_t)(r * p.ld_dup + j), d * g * s, acc);
    }
}

tfc_status tfcu_swiglu_forward(const tfc_swiglu_problem *p) {
    const char *fn = "swiglu_forward";
    tfcu_ctx *c;
    const int64_t n = p->rows * p->cols;
    if (!n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        swiglu_kernel<T><<<tfcu_blocks(c, (size_t)n, 256), 256, 0, c->stream>>>(*p, n);
        return TFCU_LAUNCHED(fn, "swiglu_kernel");
    });
}

tfc_status tfcu_swiglu_backward(const tfc_swiglu_problem *p) {
    const char *fn = "swiglu_backward";
    tfcu_ctx *c;
    const int64_t n = p->rows * p->cols;
    if (!n || (!p->dgate && !p->dup)) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        swiglu_backward_kernel<T><<<tfcu_blocks(c, (size_t)n, 256), 256, 0, c->stream>>>(*p, n, p->accumulate != 0);
        return TFCU_LAUNCHED(fn, "swiglu_backward_kernel");
    });
}
