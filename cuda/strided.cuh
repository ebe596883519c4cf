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

/*
 * The offset of linear index i for kernels that walk n = numel elements:
 * the outermost dim needs no modulo, a one-dim view none at all, and with
 * n ≤ INT32_MAX (every dim then below 2^31) the divisions are 32-bit — a
 * 64-bit division is a ~70-instruction software routine on the GPU, and it
 * was what made the first GPT-2 profile's casts, adds and copies run at a
 * tenth of the H200's bandwidth. `small` is uniform across the grid.
 */
__device__ __forceinline__ int64_t tfcu_offset_n(const tfc_sview &v, int64_t i, bool small) {
    if (v.ndim <= 1) return v.ndim ? i * v.strides[0] : 0;
    int64_t off = 0;
    if (small) {
        uint32_t j = (uint32_t)i;
        for (int d = v.ndim - 1; d > 0; d--) {
            const uint32_t s = (uint32_t)v.shape[d], q = j / s;
            off += (int64_t)(j - q * s) * v.strides[d];
            j = q;
        }
        return off + (int64_t)j * v.strides[0];
    }
    for (int d = v.ndim - 1; d > 0; d--) {
        const int64_t q = i / v.shape[d];
        off += (i - q * v.shape[d]) * v.strides[d];
        i = q;
    }
    return off + i * v.strides[0];
}

/*
 * v with its size-1 dims dropped and each pair of neighbouring dims merged
 * where the outer one's stride is the inner one's span (stride·size): the
 * same offset for every linear index (row-major order is kept), in fewer
 * dims — a contiguous view becomes one dim, a permuted one keeps only the
 * dims its permutation really breaks. Broadcast (stride 0) dims merge with
 * each other. Host code, applied to each view separately before a launch.
 */
static inline tfc_sview tfcu_coalesce(const tfc_sview &v) {
    tfc_sview r = v;
    int32_t nd = 0;
    for (int32_t d = 0; d < v.ndim; d++) {
        if (v.shape[d] == 1) continue;
        if (nd > 0 && r.strides[nd - 1] == v.strides[d] * v.shape[d]) {
            r.shape[nd - 1] *= v.shape[d];
            r.strides[nd - 1] = v.strides[d];
            continue;
        }
        r.shape[nd] = v.shape[d];
        r.strides[nd] = v.strides[d];
        nd++;
    }
    for (int32_t d = 0; d < v.ndim; d++)
        if (v.shape[d] == 0) return v; /* empty: nothing is walked; keep it as it was */
    r.ndim = nd;
    return r;
}

static inline int64_t tfcu_view_numel(const tfc_sview &v) {
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= v.shape[d];
    return n;
}

#define TFCU_GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif
