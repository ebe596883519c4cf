/*
 * Reductions over the middle dim of x [outer, n, inner] into out
 * [outer, inner]: sum, mean (sum / n), max. f32 accumulation in a fixed
 * order, so results are deterministic.
 *   inner == 1 (reduce the last dim): one block per row, block reduction.
 *   inner  > 1: one thread per output, walking k with coalesced loads
 *   across neighbouring outputs.
 * n == 0 gives sum 0, mean NaN (0/0), max -inf.
 */
#include "common.cuh"
#include "entries.h"

__device__ __forceinline__ float reduce_init(int op) { return op == TFC_CUDA_RMAX ? -INFINITY : 0.0f; }
__device__ __forceinline__ float reduce_step(int op, float acc, float x) {
    return op == TFC_CUDA_RMAX ? fmaxf(acc, x) : acc + x;
}
__device__ __forceinline__ float reduce_final(int op, float acc, size_t n) {
    return op == TFC_CUDA_MEAN ? acc / (float)n : acc;
}

template <class T> __global__ void reduce_rows_kernel(int op, const T *x, T *out, size_t rows, size_t n) {
    __shared__ float shared[32];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *row = x + r * n;
        float acc = reduce_init(op);
        for (size_t k = threadIdx.x; k < n; k += blockDim.x) acc = reduce_step(op, acc, tfcu_load(row, k));
        acc = op == TFC_CUDA_RMAX ? tfcu_block_reduce<true>(acc, shared) : tfcu_block_reduce<false>(acc, shared);
        if (threadIdx.x == 0) out[r] = tfcu_from_f<T>(reduce_final(op, acc, n));
    }
}

template <class T> __global__ void reduce_mid_kernel(int op, const T *x, T *out, size_t outer, size_t n, size_t inner) {
    size_t total = outer * inner;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t o = i / inner, j = i % inner;
        const T *base = x + o * n * inner + j;
        float acc = reduce_init(op);
        for (size_t k = 0; k < n; k++) acc = reduce_step(op, acc, tfcu_load(base, k * inner));
        out[i] = tfcu_from_f<T>(reduce_final(op, acc, n));
    }
}

tfc_status tfcu_reduce(int32_t device, int32_t op, int32_t dtype, const void *x, void *out, size_t outer, size_t n,
                       size_t inner) {
    const char *fn = "tfc_cuda_reduce";
    tfcu_ctx *c;
    if (op < 0 || op >= TFC_CUDA_REDUCE_COUNT)
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: op %d is not sum, mean or max", fn, (int)op);
    if (!outer || !inner) return TFC_OK;
    TFCU_NOT_NULL(fn, out);
    if (n) TFCU_NOT_NULL(fn, x);
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) T;
        if (inner == 1) {
            unsigned blocks = outer < 65535u * 16 ? (unsigned)outer : 65535u * 16;
            reduce_rows_kernel<T><<<blocks, 256, 0, c->stream>>>(op, (const T *)x, (T *)out, outer, n);
            return TFCU_LAUNCHED(fn, "reduce_rows_kernel");
        }
        reduce_mid_kernel<T><<<tfcu_blocks(c, outer * inner, 256), 256, 0, c->stream>>>(op, (const T *)x, (T *)out,
                                                                                        outer, n, inner);
        return TFCU_LAUNCHED(fn, "reduce_mid_kernel");
    });
}
