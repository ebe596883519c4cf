/*
 * Walking strided views (backend/view.h) on the GPU: the element offset of
 * linear index i (row-major in the view's shape) of a view with that shape.
 * Kernels that take views pass them by value (a view is ~140 bytes of
 * kernel parameters) and compute offsets per element: general, not fast —
 * the hot paths (GEMM, fused kernels) take contiguous buffers.
 */
#ifndef TFCU_STRIDED_CUH
#define TFCU_STRIDED_CUH

#include "common.cuh"

__device__ __forceinline__ int64_t tfcu_offset(const tfc_sview &v, int64_t i) {
    int64_t off = 0;
    for (int d = v.ndim - 1; d >= 0; d--) {
        off += (i % v.shape[d]) * v.strides[d];
        i /= v.shape[d];
    }
    return off;
}

/* Offset of linear index i of `shape` (first ndim dims of v) read through v's strides. */
__device__ __forceinline__ int64_t tfcu_offset_dims(const tfc_sview &v, int32_t first, int32_t last, int64_t i) {
    int64_t off = 0;
    for (int d = last - 1; d >= first; d--) {
        off += (i % v.shape[d]) * v.strides[d];
        i /= v.shape[d];
    }
    return off;
}

static inline int64_t tfcu_view_numel(const tfc_sview &v) {
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= v.shape[d];
    return n;
}

#define TFCU_GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif
