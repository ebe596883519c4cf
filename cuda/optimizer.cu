/*
 * Multi-tensor optimizer kernels: the global gradient norm and a fused
 * AdamW step over every parameter tensor in one launch.
 * The tensors are cut into fixed chunks of CHUNK elements; a per-tensor
 * prefix of chunk counts (uploaded with the pointer table, one small copy
 * per call) lets each block find its tensor by binary search.
 *   norm = sqrt(sum_t sum_i g_ti^2)    (per-chunk partial sums, then one
 *   block adds the partials in chunk order: deterministic)
 *   AdamW: see tfc_cuda_adamw_desc in cuda/cuda_types.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "entries.h"

#define CHUNK 4096

typedef struct tensor_info {
    const void *grad;
    float *p, *m, *v;
    bf16 *p16;
    int64_t numel;
    float wd;
} tensor_info;

/* The tensor holding chunk: the largest t with prefix[t] <= chunk. */
__device__ __forceinline__ int find_tensor(const int64_t *prefix, int count, int64_t chunk) {
    int lo = 0, hi = count;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (prefix[mid] <= chunk)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

template <class G>
__global__ void sumsq_chunks_kernel(const tensor_info *info, const int64_t *prefix, int count, int64_t chunks,
                                    float *partial) {
    __shared__ float shared[32];
    for (int64_t ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
        int t = find_tensor(prefix, count, ch);
        const G *g = (const G *)info[t].grad;
        int64_t start = (ch - prefix[t]) * CHUNK, end = min(start + CHUNK, info[t].numel);
        float s = 0.0f;
        for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
            float x = tfcu_load(g, (size_t)i);
            s += x * x;
        }
        s = tfcu_block_reduce<false>(s, shared);
        if (threadIdx.x == 0) partial[ch] = s;
    }
}

__global__ void norm_final_kernel(const float *partial, int64_t chunks, float max_norm, float *norm, float *clip) {
    __shared__ float shared[32];
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x) s += partial[i];
    s = tfcu_block_reduce<false>(s, shared);
    if (threadIdx.x == 0) {
        float n = sqrtf(s);
        *norm = n;
        if (clip) *clip = fminf(1.0f, max_norm / (n + 1e-6f));
    }
}

template <class G>
__global__ void adamw_kernel(const tensor_info *info, const int64_t *prefix, int count, int64_t chunks,
                             const float *grad_scale, float lr, float beta1, float beta2, float eps, float bc1,
                             float bc2) {
    float gs = grad_scale ? *grad_scale : 1.0f;
    for (int64_t ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
        int t = find_tensor(prefix, count, ch);
        tensor_info ti = info[t];
        const G *g = (const G *)ti.grad;
        int64_t start = (ch - prefix[t]) * CHUNK, end = min(start + CHUNK, ti.numel);
        for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
            float gi = tfcu_load(g, (size_t)i) * gs, p = ti.p[i];
            p -= lr * ti.wd * p;
            float m = beta1 * ti.m[i] + (1.0f - beta1) * gi;
            float v = beta2 * ti.v[i] + (1.0f - beta2) * gi * gi;
            p -= lr * (m / bc1) / (sqrtf(v / bc2) + eps);
            ti.m[i] = m;
            ti.v[i] = v;
            ti.p[i] = p;
            if (ti.p16) ti.p16[i] = __float2bfloat16_rn(p);
        }
    }
}

/*
 * Upload the tensor table and chunk prefix to one scratch buffer. The host
 * copy comes from pageable memory, which cudaMemcpyAsync stages before it
 * returns, so the host buffer is freed at once.
 */
static tfc_status upload_table(tfcu_ctx *c, const char *fn, const tensor_info *info, int count, void **dev,
                               int64_t *chunks) {
    size_t info_bytes = (size_t)count * sizeof(tensor_info), bytes = info_bytes + (size_t)(count + 1) * 8;
    char *host = (char *)malloc(bytes);
    if (!host) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory for the tensor table", fn);
    memcpy(host, info, info_bytes);
    int64_t *prefix = (int64_t *)(host + info_bytes);
    prefix[0] = 0;
    for (int t = 0; t < count; t++) prefix[t + 1] = prefix[t] + (info[t].numel + CHUNK - 1) / CHUNK;
    *chunks = prefix[count];
    tfc_status s = tfcu_scratch(c, fn, bytes, dev);
    if (s == TFC_OK) {
        s = tfcu_cuda(cudaMemcpyAsync(*dev, host, bytes, cudaMemcpyHostToDevice, c->stream), fn, "cudaMemcpyAsync");
        if (s != TFC_OK) tfcu_scratch_free(c, *dev);
    }
    free(host);
    return s;
}

static unsigned chunk_blocks(const tfcu_ctx *c, int64_t chunks) {
    int64_t cap = (int64_t)c->sm_count * 16;
    return (unsigned)(chunks < cap ? (chunks > 0 ? chunks : 1) : cap);
}

tfc_status tfcu_grad_norm(int32_t device, int32_t dtype, const void *const *grads, const size_t *numel, int32_t count,
                          float max_norm, float *norm, float *clip_scale) {
    const char *fn = "tfcu_grad_norm";
    tfcu_ctx *c;
    TFCU_NOT_NULL(fn, norm);
    if (count < 0) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: count is %d", fn, (int)count);
    if (count > 0) {
        TFCU_NOT_NULL(fn, grads);
        TFCU_NOT_NULL(fn, numel);
    }
    if (clip_scale && !(max_norm > 0.0f))
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g; clipping needs max_norm > 0", fn, (double)max_norm);
    tensor_info *info = (tensor_info *)calloc(count ? (size_t)count : 1, sizeof *info);
    if (!info) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory", fn);
    for (int t = 0; t < count; t++) {
        if (numel[t] && !grads[t]) {
            free(info);
            return tfcu_err(TFC_ERR_INVALID_ARG, "%s: grads[%d] is NULL", fn, t);
        }
        info[t].grad = grads[t];
        info[t].numel = (int64_t)numel[t];
    }
    tfc_status s = tfcu_ctx_get(device, fn, &c);
    if (s != TFC_OK) {
        free(info);
        return s;
    }
    s = tfcu_dispatch_float(fn, dtype, [&](auto tg) -> tfc_status {
        typedef decltype(tg) G;
        void *table;
        int64_t chunks;
        TFCU_TRY(upload_table(c, fn, info, count, &table, &chunks));
        float *partial = NULL;
        tfc_status st = tfcu_scratch(c, fn, (size_t)(chunks ? chunks : 1) * sizeof(float), (void **)&partial);
        if (st == TFC_OK && chunks) {
            sumsq_chunks_kernel<G><<<chunk_blocks(c, chunks), 256, 0, c->stream>>>(
                (const tensor_info *)table, (const int64_t *)((char *)table + (size_t)count * sizeof(tensor_info)),
                count, chunks, partial);
            st = TFCU_LAUNCHED(fn, "sumsq_chunks_kernel");
        }
        if (st == TFC_OK) {
            norm_final_kernel<<<1, 1024, 0, c->stream>>>(partial, chunks, max_norm, norm, clip_scale);
            st = TFCU_LAUNCHED(fn, "norm_final_kernel");
        }
        tfcu_scratch_free(c, partial);
        tfcu_scratch_free(c, table);
        return st;
    });
    free(info);
    return s;
}

tfc_status tfcu_adamw(int32_t device, const tfc_cuda_adamw_desc *d) {
    const char *fn = "tfcu_adamw";
    tfcu_ctx *c;
    TFCU_NOT_NULL(fn, d);
    if (d->struct_size < sizeof(tfc_cuda_adamw_desc))
        return tfcu_err(TFC_ERR_VERSION, "%s: desc->struct_size %u is smaller than %zu", fn, d->struct_size,
                        sizeof(tfc_cuda_adamw_desc));
    if (d->count < 0) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: desc->count is %d", fn, (int)d->count);
    if (d->step < 1)
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: desc->step is %lld (the first step is 1)", fn, (long long)d->step);
    if (!(d->beta1 >= 0.0f && d->beta1 < 1.0f && d->beta2 >= 0.0f && d->beta2 < 1.0f))
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: betas (%g, %g) must be in [0, 1)", fn, (double)d->beta1,
                        (double)d->beta2);
    if (!d->count) return TFC_OK;
    TFCU_NOT_NULL(fn, d->params);
    TFCU_NOT_NULL(fn, d->grads);
    TFCU_NOT_NULL(fn, d->m);
    TFCU_NOT_NULL(fn, d->v);
    TFCU_NOT_NULL(fn, d->numel);
    TFCU_NOT_NULL(fn, d->weight_decay);
    tensor_info *info = (tensor_info *)calloc((size_t)d->count, sizeof *info);
    if (!info) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory", fn);
    for (int t = 0; t < d->count; t++) {
        if (d->numel[t] && (!d->params[t] || !d->grads[t] || !d->m[t] || !d->v[t])) {
            free(info);
            return tfcu_err(TFC_ERR_INVALID_ARG, "%s: params/grads/m/v[%d] has a NULL pointer", fn, t);
        }
        info[t] = tensor_info{d->grads[t],
                              d->params[t],
                              d->m[t],
                              d->v[t],
                              d->params_bf16 ? (bf16 *)d->params_bf16[t] : NULL,
                              (int64_t)d->numel[t],
                              d->weight_decay[t]};
    }
    tfc_status s = tfcu_ctx_get(device, fn, &c);
    if (s != TFC_OK) {
        free(info);
        return s;
    }
    /* Bias corrections in double: beta^step underflows gracefully to 0. */
    float bc1 = (float)(1.0 - pow((double)d->beta1, (double)d->step));
    float bc2 = (float)(1.0 - pow((double)d->beta2, (double)d->step));
    s = tfcu_dispatch_float(fn, d->grad_dtype, [&](auto tg) -> tfc_status {
        typedef decltype(tg) G;
        void *table;
        int64_t chunks;
        TFCU_TRY(upload_table(c, fn, info, d->count, &table, &chunks));
        tfc_status st = TFC_OK;
        if (chunks) {
            adamw_kernel<G><<<chunk_blocks(c, chunks), 256, 0, c->stream>>>(
                (const tensor_info *)table, (const int64_t *)((char *)table + (size_t)d->count * sizeof(tensor_info)),
                d->count, chunks, d->grad_scale, d->lr, d->beta1, d->beta2, d->eps, bc1, bc2);
            st = TFCU_LAUNCHED(fn, "adamw_kernel");
        }
        tfcu_scratch_free(c, table);
        return st;
    });
    free(info);
    return s;
}
