/*
 * Softmax and log_softmax over the middle dim of x [outer, n, inner]:
 *   y_k = exp(x_k - m) / sum_j exp(x_j - m)        m = max_j x_j
 *   log_softmax: y_k = x_k - m - log sum_j exp(x_j - m)
 * backward (y is the forward output):
 *   softmax:     dx_k = y_k (dy_k - sum_j dy_j y_j)
 *   log_softmax: dx_k = dy_k - exp(y_k) sum_j dy_j
 * inner == 1: one block per row (three passes over the row, which stays in
 * L1/L2 for the sizes that matter); inner > 1: one thread per column.
 */
#include "common.cuh"
#include "entries.h"

template <class T> __global__ void softmax_rows_kernel(bool log_, const T *x, T *y, size_t rows, size_t n) {
    __shared__ float shared[32];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        float m = -INFINITY, s = 0.0f;
        for (size_t k = threadIdx.x; k < n; k += blockDim.x) m = fmaxf(m, tfcu_load(xr, k));
        m = tfcu_block_reduce<true>(m, shared);
        for (size_t k = threadIdx.x; k < n; k += blockDim.x) s += expf(tfcu_load(xr, k) - m);
        s = tfcu_block_reduce<false>(s, shared);
        float ls = logf(s), inv = 1.0f / s;
        for (size_t k = threadIdx.x; k < n; k += blockDim.x) {
            float v = tfcu_load(xr, k) - m;
            yr[k] = tfcu_from_f<T>(log_ ? v - ls : expf(v) * inv);
        }
    }
}

template <class T>
__global__ void softmax_cols_kernel(bool log_, const T *x, T *y, size_t outer, size_t n, size_t inner) {
    size_t total = outer * inner;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t base = (i / inner) * n * inner + i % inner;
        float m = -INFINITY, s = 0.0f;
        for (size_t k = 0; k < n; k++) m = fmaxf(m, tfcu_load(x, base + k * inner));
        for (size_t k = 0; k < n; k++) s += expf(tfcu_load(x, base + k * inner) - m);
        float ls = logf(s), inv = 1.0f / s;
        for (size_t k = 0; k < n; k++) {
            float v = tfcu_load(x, base + k * inner) - m;
            y[base + k * inner] = tfcu_from_f<T>(log_ ? v - ls : expf(v) * inv);
        }
    }
}

template <class T>
__global__ void softmax_backward_rows_kernel(bool log_, const T *dy, const T *y, T *dx, size_t rows, size_t n,
                                             bool acc) {
    __shared__ float shared[32];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        size_t off = r * n;
        float dot = 0.0f;
        for (size_t k = threadIdx.x; k < n; k += blockDim.x)
            dot += log_ ? tfcu_load(dy, off + k) : tfcu_load(dy, off + k) * tfcu_load(y, off + k);
        dot = tfcu_block_reduce<false>(dot, shared);
        for (size_t k = threadIdx.x; k < n; k += blockDim.x) {
            float g = tfcu_load(dy, off + k), yk = tfcu_load(y, off + k);
            tfcu_store_grad(dx, off + k, log_ ? g - expf(yk) * dot : yk * (g - dot), acc);
        }
    }
}

template <class T>
__global__ void softmax_backward_cols_kernel(bool log_, const T *dy, const T *y, T *dx, size_t outer, size_t n,
                                             size_t inner, bool acc) {
    size_t total = outer * inner;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t base = (i / inner) * n * inner + i % inner;
        float dot = 0.0f;
        for (size_t k = 0; k < n; k++) {
            size_t p = base + k * inner;
            dot += log_ ? tfcu_load(dy, p) : tfcu_load(dy, p) * tfcu_load(y, p);
        }
        for (size_t k = 0; k < n; k++) {
            size_t p = base + k * inner;
            float g = tfcu_load(dy, p), yk = tfcu_load(y, p);
            tfcu_store_grad(dx, p, log_ ? g - expf(yk) * dot : yk * (g - dot), acc);
        }
    }
}

static unsigned row_blocks(size_t rows) { return rows < 65535u * 16 ? (unsigned)rows : 65535u * 16; }

tfc_status tfcu_softmax_forward(const tfc_softmax_problem *p) {
    const char *fn = "tfcu_softmax_forward";
    const size_t outer = (size_t)p->outer, n = (size_t)p->d, inner = (size_t)p->inner;
    const int32_t log = p->log;
    const void *x = p->x;
    void *y = p->y;
    tfcu_ctx *c;
    if (!outer || !n || !inner) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        if (inner == 1) {
            softmax_rows_kernel<T><<<row_blocks(outer), 256, 0, c->stream>>>(log != 0, (const T *)x, (T *)y, outer, n);
            return TFCU_LAUNCHED(fn, "softmax_rows_kernel");
        }
        softmax_cols_kernel<T><<<tfcu_blocks(c, outer * inner, 256), 256, 0, c->stream>>>(log != 0, (const T *)x,
                                                                                          (T *)y, outer, n, inner);
        return TFCU_LAUNCHED(fn, "softmax_cols_kernel");
    });
}

tfc_status tfcu_softmax_backward(const tfc_softmax_problem *p) {
    const char *fn = "tfcu_softmax_backward";
    const size_t outer = (size_t)p->outer, n = (size_t)p->d, inner = (size_t)p->inner;
    const int32_t log = p->log;
    const void *dy = p->dy, *y = p->y_in;
    void *dx = p->dx;
    const bool acc = p->accumulate != 0;
    tfcu_ctx *c;
    if (!outer || !n || !inner) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        if (inner == 1) {
            softmax_backward_rows_kernel<T><<<row_blocks(outer), 256, 0, c->stream>>>(
                log != 0, (const T *)dy, (const T *)y, (T *)dx, outer, n, acc);
            return TFCU_LAUNCHED(fn, "softmax_backward_rows_kernel");
        }
        softmax_backward_cols_kernel<T><<<tfcu_blocks(c, outer * inner, 256), 256, 0, c->stream>>>(
            log != 0, (const T *)dy, (const T *)y, (T *)dx, outer, n, inner, acc);
        return TFCU_LAUNCHED(fn, "softmax_backward_cols_kernel");
    });
}
