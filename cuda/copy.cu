/*
 * Data movement on strided views: dst = src (same dtype: moved as raw
 * words of the element size, so every dtype is served; f32 ↔ bf16: converted,
 * round to nearest even), src broadcast by stride 0, dst any strides; and
 * dst = value for every dtype. Contiguous same-dtype copies and zero fills
 * go to cudaMemcpyAsync / cudaMemsetAsync. A linear layer's bias rows are
 * such a broadcast copy (tfcu_bias_rows).
 */
#include <cuda_fp16.h>

#include "common.cuh"
#include "core/dtype.h"
#include "entries.h"
#include "strided.cuh"

/* The views arrive coalesced (tfcu_coalesce): a contiguous one is one dim, its offset i·stride. */
template <class W> __global__ void copy_kernel(tfc_sview dst, tfc_sview src, int64_t n) {
    const bool small = n <= INT32_MAX;
    TFCU_GRID_STRIDE(i, n)
    ((W *)dst.data)[tfcu_offset_n(dst, i, small)] = ((const W *)src.data)[tfcu_offset_n(src, i, small)];
}

template <class S, class D> __global__ void cast_kernel(tfc_sview dst, tfc_sview src, int64_t n) {
    const bool small = n <= INT32_MAX;
    TFCU_GRID_STRIDE(i, n)
    ((D *)dst.data)[tfcu_offset_n(dst, i, small)] =
        tfcu_from_f<D>(tfcu_load((const S *)src.data, (size_t)tfcu_offset_n(src, i, small)));
}

tfc_status tfcu_copy(const tfc_copy_problem *p) {
    const char *fn = "copy";
    tfcu_ctx *c;
    int64_t n = tfcu_view_numel(p->dst);
    const bool same = p->dst.dtype == p->src.dtype;
    const size_t es = tfc_dtype_bytes(p->dst.dtype);
    if (same && !es) return tfcu_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)p->dst.dtype);
    const bool fl = (p->src.dtype == TFC_DTYPE_F32 || p->src.dtype == TFC_DTYPE_BF16) &&
        (p->dst.dtype == TFC_DTYPE_F32 || p->dst.dtype == TFC_DTYPE_BF16);
    if (!same && !fl)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: converting %s to %s (CUDA converts between f32 and bf16 only)", fn,
                        tfcu_dtype_name(p->src.dtype), tfcu_dtype_name(p->dst.dtype));
    if (!n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    unsigned blocks = tfcu_blocks(c, (size_t)n, 256);
    const tfc_sview dst = tfcu_coalesce(p->dst), src = tfcu_coalesce(p->src);
    if (same) {
        if (tfc_sview_is_contiguous(&p->dst) && tfc_sview_is_contiguous(&p->src))
            return tfcu_cuda(
                cudaMemcpyAsync(p->dst.data, p->src.data, (size_t)n * es, cudaMemcpyDeviceToDevice, c->stream), fn,
                "cudaMemcpyAsync");
        if (es == 8)
            copy_kernel<uint64_t><<<blocks, 256, 0, c->stream>>>(dst, src, n);
        else if (es == 4)
            copy_kernel<uint32_t><<<blocks, 256, 0, c->stream>>>(dst, src, n);
        else if (es == 2)
            copy_kernel<uint16_t><<<blocks, 256, 0, c->stream>>>(dst, src, n);
        else
            copy_kernel<uint8_t><<<blocks, 256, 0, c->stream>>>(dst, src, n);
        return TFCU_LAUNCHED(fn, "copy_kernel");
    }
    if (p->src.dtype == TFC_DTYPE_F32)
        cast_kernel<float, bf16><<<blocks, 256, 0, c->stream>>>(dst, src, n);
    else
        cast_kernel<bf16, float><<<blocks, 256, 0, c->stream>>>(dst, src, n);
    return TFCU_LAUNCHED(fn, "cast_kernel");
}

template <class T> __global__ void fill_kernel(tfc_sview dst, T v, int64_t n) {
    const bool small = n <= INT32_MAX;
    TFCU_GRID_STRIDE(i, n)((T *)dst.data)[tfcu_offset_n(dst, i, small)] = v;
}

tfc_status tfcu_fill(const tfc_fill_problem *p) {
    const char *fn = "fill";
    tfcu_ctx *c;
    int64_t n = tfcu_view_numel(p->dst);
    if (!n) return TFC_OK;
    size_t es = tfc_dtype_bytes(p->dst.dtype);
    if (!es) return tfcu_err(TFC_ERR_DTYPE, "%s: unknown dtype %d", fn, (int)p->dst.dtype);
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    if (p->value == 0.0 && tfc_sview_is_contiguous(&p->dst))
        return tfcu_cuda(cudaMemsetAsync(p->dst.data, 0, (size_t)n * es, c->stream), fn, "cudaMemsetAsync");
    const tfc_sview dst = tfcu_coalesce(p->dst);
    unsigned blocks = tfcu_blocks(c, (size_t)n, 256);
    const double v = p->value;
    switch (p->dst.dtype) {
    case TFC_DTYPE_F64: fill_kernel<double><<<blocks, 256, 0, c->stream>>>(dst, v, n); break;
    case TFC_DTYPE_F32: fill_kernel<float><<<blocks, 256, 0, c->stream>>>(dst, (float)v, n); break;
    case TFC_DTYPE_BF16: fill_kernel<bf16><<<blocks, 256, 0, c->stream>>>(dst, __float2bfloat16_rn((float)v), n); break;
    case TFC_DTYPE_F16: fill_kernel<__half><<<blocks, 256, 0, c->stream>>>(dst, __float2half_rn((float)v), n); break;
    case TFC_DTYPE_I64: fill_kernel<int64_t><<<blocks, 256, 0, c->stream>>>(dst, (int64_t)v, n); break;
    case TFC_DTYPE_I32: fill_kernel<int32_t><<<blocks, 256, 0, c->stream>>>(dst, (int32_t)v, n); break;
    default:
        fill_kernel<uint8_t>
            <<<blocks, 256, 0, c->stream>>>(dst, (uint8_t)(p->dst.dtype == TFC_DTYPE_BOOL ? v != 0 : (int)v), n);
    }
    return TFCU_LAUNCHED(fn, "fill_kernel");
}

/* y [rows, n] = b broadcast into every row: a copy whose source rows all have stride 0. */
tfc_status tfcu_bias_rows(const tfc_bias_problem *p) {
    tfc_copy_problem c = {};
    c.device = p->device;
    c.dst = tfcu_flat_view(p->y, p->dtype, 0);
    c.dst.ndim = 2, c.dst.shape[0] = p->rows, c.dst.shape[1] = p->n, c.dst.strides[0] = p->n, c.dst.strides[1] = 1;
    c.src = c.dst;
    c.src.data = (char *)p->b, c.src.strides[0] = 0;
    return tfcu_copy(&c);
}
