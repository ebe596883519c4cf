/*
 * Sums over the trailing dims of a strided view in = [kept..., reduced...]
 * (the backend's reduce entry; the other reductions are the CPU's only):
 *   out[o] (+)= scale · Σ_k in[o, k]        o over the kept dims, contiguous
 * f32 accumulation in a fixed order (deterministic); n = 0 gives 0.
 *   few outputs: one block per output, a block reduction over k;
 *   many outputs: one thread per output walking k — neighbouring threads
 *   read neighbouring kept elements, coalesced when the kept dims are the
 *   inner ones (a bias gradient: columns kept, rows reduced).
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

template <class T>
__global__ void sum_block_kernel(tfc_sview in, int32_t nkeep, T *out, int64_t nout, int64_t n, float scale,
                                 bool accumulate) {
    __shared__ float shared[32];
    for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
        const int64_t base = tfcu_offset_dims(in, 0, nkeep, o);
        float acc = 0.0f;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
            acc += tfcu_load((const T *)in.data, (size_t)(base + tfcu_offset_dims(in, nkeep, in.ndim, k)));
        acc = tfcu_block_reduce<false>(acc, shared);
        if (threadIdx.x == 0) out[o] = tfcu_from_f<T>(scale * acc + (accumulate ? tfcu_load(out, o) : 0.0f));
    }
}

template <class T>
__global__ void sum_thread_kernel(tfc_sview in, int32_t nkeep, T *out, int64_t nout, int64_t n, float scale,
                                  bool accumulate) {
    TFCU_GRID_STRIDE(o, nout) {
        const int64_t base = tfcu_offset_dims(in, 0, nkeep, o);
        float acc = 0.0f;
        for (int64_t k = 0; k < n; k++)
            acc += tfcu_load((const T *)in.data, (size_t)(base + tfcu_offset_dims(in, nkeep, in.ndim, k)));
        out[o] = tfcu_from_f<T>(scale * acc + (accumulate ? tfcu_load(out, o) : 0.0f));
    }
}

tfc_status tfcu_sum(int32_t device, const tfc_sview *in, int32_t nkeep, void *out, double scale, bool accumulate) {
    const char *fn = "reduce";
    tfcu_ctx *c;
    int64_t nout = 1, n = 1;
    for (int32_t d = 0; d < in->ndim; d++) (d < nkeep ? nout : n) *= in->shape[d];
    if (!nout) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, in->dtype, [&](auto t) {
        typedef decltype(t) T;
        if (nout < (int64_t)c->sm_count * 64) {
            sum_block_kernel<T>
                <<<(unsigned)nout, 256, 0, c->stream>>>(*in, nkeep, (T *)out, nout, n, (float)scale, accumulate);
            return TFCU_LAUNCHED(fn, "sum_block_kernel");
        }
        sum_thread_kernel<T><<<tfcu_blocks(c, (size_t)nout, 256), 256, 0, c->stream>>>(*in, nkeep, (T *)out, nout, n,
                                                                                       (float)scale, accumulate);
        return TFCU_LAUNCHED(fn, "sum_thread_kernel");
    });
}

tfc_status tfcu_reduce(const tfc_reduce_problem *p) {
    if (p->op != TFC_REDUCE_SUM)
        return tfcu_err(TFC_ERR_UNSUPPORTED,
                        "reduce: only sums and means run on CUDA (max, min, arg and var are "
                        "CPU-only)");
    return tfcu_sum(p->device, &p->in, p->nkeep, p->out, p->scale, false);
}
