/*
 * Fused softmax cross-entropy over logits [N, C] with targets [N]:
 *   lse_r = log sum_c exp(logits_rc)          (with the row max subtracted)
 *   loss  = sum_{valid r} (lse_r - logits_{r,t_r}) / n_valid
 *   dlogits_rc = dloss / n_valid * (exp(logits_rc - lse_r) - [c == t_r])
 * A row is valid when t_r != ignore_index. The forward reads each row once
 * (online max/sum per thread, merged across the block) and writes only
 * lse [N] and the scalar loss; the backward reads logits once more and
 * writes dlogits once, so the [N, C] probability matrix is never stored.
 * The loss is reduced in a fixed order (deterministic).
 */
#include "common.cuh"
#include "entries.h"

/* Merge two (max, sum of exp(x - max)) pairs. */
__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
    float mm = fmaxf(m, m2);
    if (mm == -INFINITY) return;
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

template <class T, class I>
__global__ void ce_forward_rows_kernel(const T *logits, const I *targets, long long ignore_index, size_t N, size_t C,
                                       float *row_loss, float *lse, unsigned long long *bad_row) {
    __shared__ float sm[32], ss[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        const T *x = logits + r * C;
        float m = -INFINITY, s = 0.0f;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) lse_merge(m, s, tfcu_load(x, c), 1.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            lse_merge(m, s, m2, s2);
        }
        __syncthreads();
        if (lane == 0) sm[warp] = m, ss[warp] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nwarps; w++) lse_merge(m, s, sm[w], ss[w]);
            float l = m + logf(s);
            if (lse) lse[r] = l;
            long long t = (long long)targets[r];
            if (t == ignore_index) {
                row_loss[r] = 0.0f;
            } else if (t < 0 || t >= (long long)C) {
                row_loss[r] = NAN;
                atomicMin(bad_row, (unsigned long long)r);
            } else {
                row_loss[r] = l - tfcu_load(x, (size_t)t);
            }
        }
    }
}

/* loss = sum of row_loss over valid rows / n_valid, one block, fixed order. */
template <class I>
__global__ void ce_mean_kernel(const float *row_loss, const I *targets, long long ignore_index, size_t N, float *loss) {
    __shared__ float shared[32];
    float s = 0.0f, n = 0.0f;
    for (size_t r = threadIdx.x; r < N; r += blockDim.x) {
        if ((long long)targets[r] != ignore_index) s += row_loss[r], n += 1.0f;
    }
    s = tfcu_block_reduce<false>(s, shared);
    n = tfcu_block_reduce<false>(n, shared);
    if (threadIdx.x == 0) *loss = s / n;
}

template <class I> __global__ void ce_count_kernel(const I *targets, long long ignore_index, size_t N, float *n_valid) {
    __shared__ float shared[32];
    float n = 0.0f;
    for (size_t r = threadIdx.x; r < N; r += blockDim.x) n += (long long)targets[r] != ignore_index ? 1.0f : 0.0f;
    n = tfcu_block_reduce<false>(n, shared);
    if (threadIdx.x == 0) *n_valid = n;
}

template <class T, class I>
__global__ void ce_backward_kernel(const float *dloss, const T *logits, const I *targets, long long ignore_index,
                                   const float *lse, const float *n_valid, T *dlogits, size_t N, size_t C, bool acc) {
    float scale = *dloss / *n_valid;
    for (size_t r = blockIdx.x; r < N; r += gridDim.x) {
        long long t = (long long)targets[r];
        bool valid = t != ignore_index;
        float l = lse[r];
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            float g = 0.0f;
            if (valid) g = scale * (expf(tfcu_load(logits, r * C + c) - l) - ((long long)c == t ? 1.0f : 0.0f));
            tfcu_store_grad(dlogits, r * C + c, g, acc);
        }
    }
}

static unsigned row_blocks(size_t rows) { return rows < 65535u * 16 ? (unsigned)rows : 65535u * 16; }

tfc_status tfcu_cross_entropy_forward(const tfc_cross_entropy_problem *p) {
    const char *fn = "tfcu_cross_entropy_forward";
    const int32_t device = p->device;
    const size_t N = (size_t)p->n, C = (size_t)p->c;
    const long long ignore_index = (long long)p->ignore_index;
    const void *logits = p->logits, *targets = p->targets;
    float *loss = (float *)p->loss, *lse = (float *)p->lse;
    /* targets the library range-checked on the host: the kernel still skips bad ones, nobody waits for its verdict */
    const bool checked = ((uint32_t)p->accumulate & TFC_IDS_CHECKED) != 0;
    tfcu_ctx *c;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        return tfcu_dispatch_index(fn, p->index_dtype, [&](auto it) -> tfc_status {
            typedef decltype(it) I;
            if (!N) {
                tfc_fill_problem f = {};
                f.device = device, f.value = NAN;
                f.dst.data = (char *)loss, f.dst.dtype = TFC_DTYPE_F32, f.dst.ndim = 0;
                return tfcu_fill(&f);
            }
            char *scratch;
            TFCU_TRY(tfcu_scratch(c, fn, N * sizeof(float) + 8, (void **)&scratch));
            unsigned long long *bad = (unsigned long long *)scratch, bad_host = ~0ull;
            float *row_loss = (float *)(scratch + 8);
            tfc_status s = tfcu_cuda(cudaMemsetAsync(bad, 0xff, 8, c->stream), fn, "cudaMemsetAsync");
            if (s == TFC_OK) {
                ce_forward_rows_kernel<T, I><<<row_blocks(N), 256, 0, c->stream>>>(
                    (const T *)logits, (const I *)targets, ignore_index, N, C, row_loss, lse, bad);
                s = TFCU_LAUNCHED(fn, "ce_forward_rows_kernel");
            }
            if (s == TFC_OK) {
                ce_mean_kernel<I><<<1, 1024, 0, c->stream>>>(row_loss, (const I *)targets, ignore_index, N, loss);
                s = TFCU_LAUNCHED(fn, "ce_mean_kernel");
            }
            if (checked) {
                tfcu_scratch_free(c, scratch);
                return s;
            }
            if (s == TFC_OK)
                s = tfcu_cuda(cudaMemcpyAsync(&bad_host, bad, 8, cudaMemcpyDeviceToHost, c->stream), fn,
                              "cudaMemcpyAsync");
            tfcu_scratch_free(c, scratch);
            if (s == TFC_OK) s = tfcu_cuda(cudaStreamSynchronize(c->stream), fn, "cudaStreamSynchronize");
            if (s == TFC_OK && bad_host != ~0ull) {
                I tv = 0;
                /* A failed read is reported as such, never as a target of 0. */
                TFCU_TRY(tfcu_cuda(cudaMemcpy(&tv, (const I *)targets + bad_host, sizeof(I), cudaMemcpyDeviceToHost),
                                   fn, "cudaMemcpy (reading the bad target)"));
                return tfcu_err(TFC_ERR_INVALID_ARG,
                                "%s: targets[%llu] is %lld, outside [0, %zu) and not ignore_index %lld", fn, bad_host,
                                (long long)tv, C, ignore_index);
            }
            return s;
        });
    });
}

tfc_status tfcu_cross_entropy_backward(const tfc_cross_entropy_problem *p) {
    const char *fn = "tfcu_cross_entropy_backward";
    const size_t N = (size_t)p->n, C = (size_t)p->c;
    const long long ignore_index = (long long)p->ignore_index;
    const float *dloss = (const float *)p->dloss, *lse = (const float *)p->lse_in;
    const void *logits = p->logits, *targets = p->targets;
    void *dlogits = p->dlogits;
    const bool acc = p->accumulate != 0;
    tfcu_ctx *c;
    if (!N || !C) return TFC_OK;
    if (!lse) return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: the backward needs the forward's lse on CUDA", fn);
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        return tfcu_dispatch_index(fn, p->index_dtype, [&](auto it) -> tfc_status {
            typedef decltype(it) I;
            float *n_valid;
            TFCU_TRY(tfcu_scratch(c, fn, sizeof(float), (void **)&n_valid));
            ce_count_kernel<I><<<1, 1024, 0, c->stream>>>((const I *)targets, ignore_index, N, n_valid);
            tfc_status s = TFCU_LAUNCHED(fn, "ce_count_kernel");
            if (s == TFC_OK) {
                ce_backward_kernel<T, I><<<row_blocks(N), 256, 0, c->stream>>>(
                    dloss, (const T *)logits, (const I *)targets, ignore_index, lse, n_valid, (T *)dlogits, N, C, acc);
                s = TFCU_LAUNCHED(fn, "ce_backward_kernel");
            }
            tfcu_scratch_free(c, n_valid);
            return s;
        });
    });
}
