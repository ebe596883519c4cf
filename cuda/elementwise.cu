/*
 * Elementwise kernels: fill, cast, binary ops (same-shape, strided
 * broadcast and scalar forms), unary ops and their backward. One template
 * per op family over the storage type T (float or bf16); arithmetic is in
 * f32. The op is a runtime switch: it is uniform across the grid, costs
 * nothing next to the memory traffic, and keeps the number of
 * instantiations (and compile time) small.
 */
#include "common.cuh"
#include "entries.h"

__device__ __forceinline__ float binary_op(int op, float a, float b) {
    switch (op) {
    case TFC_CUDA_ADD: return a + b;
    case TFC_CUDA_SUB: return a - b;
    case TFC_CUDA_MUL: return a * b;
    case TFC_CUDA_DIV: return a / b;
    case TFC_CUDA_MAX: return fmaxf(a, b);
    case TFC_CUDA_MIN: return fminf(a, b);
    case TFC_CUDA_POW: return powf(a, b);
    case TFC_CUDA_RSUB: return b - a;
    case TFC_CUDA_RDIV: return b / a;
    default: return a == b ? 1.0f : 0.0f; /* TFC_CUDA_EQ */
    }
}

__device__ __forceinline__ float unary_op(int op, float x) {
    switch (op) {
    case TFC_CUDA_NEG: return -x;
    case TFC_CUDA_EXP: return expf(x);
    case TFC_CUDA_LOG: return logf(x);
    case TFC_CUDA_TANH: return tanhf(x);
    case TFC_CUDA_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case TFC_CUDA_RELU: return x > 0.0f ? x : 0.0f;
    case TFC_CUDA_GELU: return tfcu_gelu(x);
    case TFC_CUDA_SQRT: return sqrtf(x);
    default: return x * x; /* TFC_CUDA_SQUARE */
    }
}

/* f'(x) for the unary ops above. */
__device__ __forceinline__ float unary_grad(int op, float x) {
    switch (op) {
    case TFC_CUDA_NEG: return -1.0f;
    case TFC_CUDA_EXP: return expf(x);
    case TFC_CUDA_LOG: return 1.0f / x;
    case TFC_CUDA_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case TFC_CUDA_SIGMOID: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f - s);
    }
    case TFC_CUDA_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case TFC_CUDA_GELU: return tfcu_gelu_grad(x);
    case TFC_CUDA_SQRT: return 0.5f / sqrtf(x);
    default: return 2.0f * x; /* TFC_CUDA_SQUARE */
    }
}

#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

template <class T> __global__ void fill_kernel(T *x, size_t n, float v) {
    GRID_STRIDE(i, n) x[i] = tfcu_from_f<T>(v);
}

template <class S, class D> __global__ void cast_kernel(const S *src, D *dst, size_t n) {
    GRID_STRIDE(i, n) dst[i] = tfcu_from_f<D>(tfcu_load(src, i));
}

template <class T> __global__ void binary_kernel(int op, const T *a, const T *b, T *out, size_t n) {
    GRID_STRIDE(i, n) out[i] = tfcu_from_f<T>(binary_op(op, tfcu_load(a, i), tfcu_load(b, i)));
}

template <class T> __global__ void binary_strided_kernel(int op, const T *a, const T *b, T *out, size_t n,
                                                         tfc_cuda_strided L) {
    GRID_STRIDE(i, n) {
        int64_t rem = (int64_t)i, ia = 0, ib = 0;
        for (int d = L.ndim - 1; d >= 0; d--) {
            int64_t idx = rem % L.shape[d];
            rem /= L.shape[d];
            ia += idx * L.stride_a[d];
            ib += idx * L.stride_b[d];
        }
        out[i] = tfcu_from_f<T>(binary_op(op, tfcu_load(a, (size_t)ia), tfcu_load(b, (size_t)ib)));
    }
}

/* Elements moved as raw words of their size: one kernel serves every dtype. */
template <class W> __global__ void copy_strided_kernel(const W *src, W *dst, size_t n, tfc_cuda_strided L) {
    GRID_STRIDE(i, n) {
        int64_t rem = (int64_t)i, is = 0;
        for (int d = L.ndim - 1; d >= 0; d--) {
            is += (rem % L.shape[d]) * L.stride_a[d];
            rem /= L.shape[d];
        }
        dst[i] = src[is];
    }
}

template <class T> __global__ void scalar_kernel(int op, const T *a, float s, T *out, size_t n) {
    GRID_STRIDE(i, n) out[i] = tfcu_from_f<T>(binary_op(op, tfcu_load(a, i), s));
}

template <class T> __global__ void unary_kernel(int op, const T *x, T *y, size_t n) {
    GRID_STRIDE(i, n) y[i] = tfcu_from_f<T>(unary_op(op, tfcu_load(x, i)));
}

template <class T> __global__ void unary_backward_kernel(int op, const T *dy, const T *x, T *dx, size_t n, bool acc) {
    GRID_STRIDE(i, n) tfcu_store_grad(dx, i, tfcu_load(dy, i) * unary_grad(op, tfcu_load(x, i)), acc);
}

static tfc_status check_op(const char *fn, int32_t op, int32_t count) {
    if (op < 0 || op >= count) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: op %d is not one of 0..%d", fn, (int)op, (int)count - 1);
    return TFC_OK;
}

tfc_status tfcu_fill(int32_t device, int32_t dtype, void *x, size_t n, double value) {
    const char *fn = "tfc_cuda_fill";
    tfcu_ctx *c;
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, x);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        fill_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>((T *)x, n, (float)value);
        return TFCU_LAUNCHED(fn, "fill_kernel");
    });
}

tfc_status tfcu_cast(int32_t device, int32_t src_dtype, const void *src, int32_t dst_dtype, void *dst, size_t n) {
    const char *fn = "tfc_cuda_cast";
    tfcu_ctx *c;
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, src);
    TFCU_NOT_NULL(fn, dst);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, src_dtype, [&](auto s) {
        typedef decltype(s) S;
        return tfcu_dispatch_float(fn, dst_dtype, [&](auto d) {
            typedef decltype(d) D;
            cast_kernel<S, D><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>((const S *)src, (D *)dst, n);
            return TFCU_LAUNCHED(fn, "cast_kernel");
        });
    });
}

tfc_status tfcu_binary(int32_t device, int32_t op, int32_t dtype, const void *a, const void *b, void *out, size_t n) {
    const char *fn = "tfc_cuda_binary";
    tfcu_ctx *c;
    TFCU_TRY(check_op(fn, op, TFC_CUDA_BINARY_COUNT));
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, a);
    TFCU_NOT_NULL(fn, b);
    TFCU_NOT_NULL(fn, out);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        binary_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>(op, (const T *)a, (const T *)b, (T *)out, n);
        return TFCU_LAUNCHED(fn, "binary_kernel");
    });
}

/* Elements in layout (0 when empty), after checking it; *n_out. */
static tfc_status layout_numel(const char *fn, const tfc_cuda_strided *layout, size_t *n_out) {
    TFCU_NOT_NULL(fn, layout);
    if (layout->ndim < 0 || layout->ndim > TFC_MAX_DIMS)
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: layout->ndim %d is not in 0..%d", fn, (int)layout->ndim, TFC_MAX_DIMS);
    size_t n = 1;
    for (int d = 0; d < layout->ndim; d++) {
        if (layout->shape[d] < 0)
            return tfcu_err(TFC_ERR_INVALID_ARG, "%s: layout->shape[%d] is %lld", fn, d, (long long)layout->shape[d]);
        n *= (size_t)layout->shape[d];
    }
    *n_out = n;
    return TFC_OK;
}

tfc_status tfcu_binary_strided(int32_t device, int32_t op, int32_t dtype, const void *a, const void *b, void *out,
                               const tfc_cuda_strided *layout) {
    const char *fn = "tfc_cuda_binary_strided";
    tfcu_ctx *c;
    TFCU_TRY(check_op(fn, op, TFC_CUDA_BINARY_COUNT));
    size_t n = 0;
    TFCU_TRY(layout_numel(fn, layout, &n));
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, a);
    TFCU_NOT_NULL(fn, b);
    TFCU_NOT_NULL(fn, out);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        binary_strided_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>(op, (const T *)a, (const T *)b,
                                                                                   (T *)out, n, *layout);
        return TFCU_LAUNCHED(fn, "binary_strided_kernel");
    });
}

tfc_status tfcu_binary_scalar(int32_t device, int32_t op, int32_t dtype, const void *a, double s, void *out,
                              size_t n) {
    const char *fn = "tfc_cuda_binary_scalar";
    tfcu_ctx *c;
    TFCU_TRY(check_op(fn, op, TFC_CUDA_BINARY_COUNT));
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, a);
    TFCU_NOT_NULL(fn, out);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        scalar_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>(op, (const T *)a, (float)s, (T *)out, n);
        return TFCU_LAUNCHED(fn, "scalar_kernel");
    });
}

tfc_status tfcu_unary(int32_t device, int32_t op, int32_t dtype, const void *x, void *y, size_t n) {
    const char *fn = "tfc_cuda_unary";
    tfcu_ctx *c;
    TFCU_TRY(check_op(fn, op, TFC_CUDA_UNARY_COUNT));
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, x);
    TFCU_NOT_NULL(fn, y);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        unary_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>(op, (const T *)x, (T *)y, n);
        return TFCU_LAUNCHED(fn, "unary_kernel");
    });
}

tfc_status tfcu_unary_backward(int32_t device, int32_t op, int32_t dtype, const void *dy, const void *x, void *dx,
                               size_t n, uint32_t flags) {
    const char *fn = "tfc_cuda_unary_backward";
    tfcu_ctx *c;
    TFCU_TRY(check_op(fn, op, TFC_CUDA_UNARY_COUNT));
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, dy);
    TFCU_NOT_NULL(fn, x);
    TFCU_NOT_NULL(fn, dx);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    bool acc = (flags & TFC_GRAD_ACCUMULATE) != 0;
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        unary_backward_kernel<T><<<tfcu_blocks(c, n, 256), 256, 0, c->stream>>>(op, (const T *)dy, (const T *)x,
                                                                                  (T *)dx, n, acc);
        return TFCU_LAUNCHED(fn, "unary_backward_kernel");
    });
}

tfc_status tfcu_copy_strided(int32_t device, int32_t dtype, const void *src, void *dst,
                             const tfc_cuda_strided *layout) {
    const char *fn = "tfc_cuda_copy_strided";
    tfcu_ctx *c;
    size_t n = 0;
    TFCU_TRY(layout_numel(fn, layout, &n));
    size_t es = dtype == TFC_DTYPE_F64 || dtype == TFC_DTYPE_I64 ? 8
                : dtype == TFC_DTYPE_F32 || dtype == TFC_DTYPE_I32 ? 4
                : dtype == TFC_DTYPE_BF16 || dtype == TFC_DTYPE_F16 ? 2
                : dtype == TFC_DTYPE_U8 || dtype == TFC_DTYPE_BOOL ? 1 : 0;
    if (!es) return tfcu_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)dtype);
    if (!n) return TFC_OK;
    TFCU_NOT_NULL(fn, src);
    TFCU_NOT_NULL(fn, dst);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    unsigned blocks = tfcu_blocks(c, n, 256);
    if (es == 8) copy_strided_kernel<uint64_t><<<blocks, 256, 0, c->stream>>>((const uint64_t *)src, (uint64_t *)dst, n, *layout);
    else if (es == 4) copy_strided_kernel<uint32_t><<<blocks, 256, 0, c->stream>>>((const uint32_t *)src, (uint32_t *)dst, n, *layout);
    else if (es == 2) copy_strided_kernel<uint16_t><<<blocks, 256, 0, c->stream>>>((const uint16_t *)src, (uint16_t *)dst, n, *layout);
    else copy_strided_kernel<uint8_t><<<blocks, 256, 0, c->stream>>>((const uint8_t *)src, (uint8_t *)dst, n, *layout);
    return TFCU_LAUNCHED(fn, "copy_strided_kernel");
}
