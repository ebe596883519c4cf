/*
 * GELU in GPT-2's tanh form (the erf form is the CPU's only):
 *   y = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))     dx (+)= dy · y'(x)
 * n contiguous elements, f32 or bf16 storage, f32 arithmetic.
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

template <class T> __global__ void gelu_kernel(const T *x, T *y, int64_t n) {
    TFCU_GRID_STRIDE(i, n) y[i] = tfcu_from_f<T>(tfcu_gelu(tfcu_load(x, (size_t)i)));
}

template <class T> __global__ void gelu_backward_kernel(const T *dy, const T *x, T *dx, int64_t n, bool acc) {
    TFCU_GRID_STRIDE(i, n)
    tfcu_store_grad(dx, (size_t)i, tfcu_load(dy, (size_t)i) * tfcu_gelu_grad(tfcu_load(x, (size_t)i)), acc);
}

static tfc_status tanh_form_only(const tfc_gelu_problem *p) {
    if (p->approximate != 1)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "the erf form of GELU (approximate = 0) runs on the CPU only");
    return TFC_OK;
}

tfc_status tfcu_gelu_forward(const tfc_gelu_problem *p) {
    const char *fn = "gelu_forward";
    tfcu_ctx *c;
    TFCU_TRY(tanh_form_only(p));
    if (!p->n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        gelu_kernel<T><<<tfcu_blocks(c, (size_t)p->n, 256), 256, 0, c->stream>>>((const T *)p->x, (T *)p->y, p->n);
        return TFCU_LAUNCHED(fn, "gelu_kernel");
    });
}

tfc_status tfcu_gelu_backward(const tfc_gelu_problem *p) {
    const char *fn = "gelu_backward";
    tfcu_ctx *c;
    TFCU_TRY(tanh_form_only(p));
    if (!p->n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        gelu_backward_kernel<T><<<tfcu_blocks(c, (size_t)p->n, 256), 256, 0, c->stream>>>(
            (const T *)p->dy, (const T *)p->x, (T *)p->dx, p->n, p->accumulate != 0);
        return TFCU_LAUNCHED(fn, "gelu_backward_kernel");
    });
}
