/*
 * Multi-tensor optimizer kernels: the global gradient norm and a fused
 * AdamW step over every parameter tensor in one launch, and the backend's
 * optimizer entries on them (optim_step, grad_norm, grad_scale; at the end).
 * The tensors are cut into fixed chunks of CHUNK elements; a per-tensor
 * prefix of chunk counts (uploaded with the pointer table, one small copy
 * per call) lets each block find its tensor by binary search.
 *   norm = sqrt(sum_t sum_i g_ti^2)    (per-chunk partial sums, then one
 *   block adds the partials in chunk order: deterministic)
 *   AdamW: see tfc_cuda_adamw_desc below.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "entries.h"

#define CHUNK 4096

/*
 * One fused AdamW step over `count` tensors (PyTorch's AdamW), filled by
 * tfcu_optim_step from the problem's segments:
 *   g = grad * grad_scale   (grad_scale: device f32 scalar, NULL = 1)
 *   p -= lr * weight_decay[t] * p
 *   m = beta1 m + (1-beta1) g;  v = beta2 v + (1-beta2) g^2
 *   p -= lr * (m / (1-beta1^step)) / (sqrt(v / (1-beta2^step)) + eps)
 * params/m/v are f32; grads are grad_dtype (f32 or bf16); params_bf16
 * (NULL, or per-tensor NULL) receives a bf16 copy of the new params for
 * mixed precision. Pointer arrays live in host memory. The entry uses f32
 * grads, no grad_scale and no params_bf16.
 */
typedef struct tfc_cuda_adamw_desc {
    int32_t count;
    int32_t grad_dtype;
    float *const *params;
    const void *const *grads;
    float *const *m;
    float *const *v;
    void *const *params_bf16;
    const size_t *numel;
    const float *weight_decay; /* [count], host */
    const float *grad_scale;   /* device scalar or NULL */
    float lr, beta1, beta2, eps;
    int64_t step; /* 1 on the first step */
} tfc_cuda_adamw_desc;

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

/*
 * *norm (device f32) = the L2 norm of the count tensors grads[t] [numel[t]]
 * of one dtype; with clip_scale, also *clip_scale = min(1, max_norm /
 * (norm + 1e-6)) on the device.
 */
static tfc_status multi_tensor_norm(int32_t device, int32_t dtype, const void *const *grads, const size_t *numel,
                                    int32_t count, float max_norm, float *norm, float *clip_scale) {
    const char *fn = "tfcu_grad_norm";
    tfcu_ctx *c;
    if (clip_scale && !(max_norm > 0.0f))
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: max_norm is %g; clipping needs max_norm > 0", fn, (double)max_norm);
    tensor_info *info = (tensor_info *)calloc(count ? (size_t)count : 1, sizeof *info);
    if (!info) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory", fn);
    for (int t = 0; t < count; t++) {
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

/* The fused AdamW step of d, one launch. */
static tfc_status adamw(int32_t device, const tfc_cuda_adamw_desc *d) {
    const char *fn = "tfcu_optim_step";
    tfcu_ctx *c;
    if (!d->count) return TFC_OK;
    tensor_info *info = (tensor_info *)calloc((size_t)d->count, sizeof *info);
    if (!info) return tfcu_err(TFC_ERR_OOM, "%s: out of host memory", fn);
    for (int t = 0; t < d->count; t++) {
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

/* ---- the backend's entries ---- */

/*
 * PyTorch's AdamW through the fused multi-tensor kernel: one launch per
 * distinct (lr, step), since parameters skipped on earlier steps have their
 * own counts. Adam without weight decay is the same rule. Refused: SGD,
 * Adam with (coupled) weight decay, amsgrad, maximize, parameters not f32.
 */
tfc_status tfcu_optim_step(const tfc_optim_problem *p) {
    bool wd = false;
    for (int64_t i = 0; i < p->nseg; i++) wd |= p->segs[i].weight_decay != 0.0;
    if (p->rule != TFC_OPTIM_RULE_ADAM || (!p->decoupled && wd))
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s runs on the CPU only; CUDA has AdamW (and Adam without weight decay)",
                        p->rule == TFC_OPTIM_RULE_SGD ? "SGD" : "Adam with (coupled) weight decay");
    if (p->amsgrad || p->maximize)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "AdamW with %s runs on the CPU only", p->amsgrad ? "amsgrad" : "maximize");
    for (int64_t i = 0; i < p->nseg; i++)
        if (p->segs[i].dtype != TFC_DTYPE_F32)
            return tfcu_err(TFC_ERR_DTYPE, "the CUDA AdamW takes f32 master weights and grads, parameter %lld is %s",
                            (long long)i, tfcu_dtype_name(p->segs[i].dtype));
    size_t n = (size_t)p->nseg;
    std::vector<float *> params(n), m(n), v(n);
    std::vector<const void *> grads(n);
    std::vector<size_t> numel(n);
    std::vector<float> decay(n);
    std::vector<char> done(n, 0);
    for (size_t first = 0; first < n; first++) {
        if (done[first]) continue;
        const tfc_optim_seg *f = &p->segs[first];
        int32_t count = 0;
        for (size_t k = first; k < n; k++) {
            const tfc_optim_seg *g = &p->segs[k];
            if (done[k] || g->step != f->step || g->lr != f->lr) continue;
            done[k] = 1;
            params[count] = (float *)g->param;
            grads[count] = g->grad;
            m[count] = (float *)g->buf[0];
            v[count] = (float *)g->buf[1];
            numel[count] = (size_t)g->n;
            decay[count] = (float)g->weight_decay;
            count++;
        }
        tfc_cuda_adamw_desc d = {};
        d.count = count, d.grad_dtype = TFC_DTYPE_F32;
        d.params = params.data(), d.grads = grads.data(), d.m = m.data(), d.v = v.data();
        d.numel = numel.data(), d.weight_decay = decay.data();
        d.lr = (float)f->lr, d.beta1 = (float)p->beta1, d.beta2 = (float)p->beta2, d.eps = (float)p->eps;
        d.step = f->step;
        TFCU_TRY(adamw(p->device, &d));
    }
    return TFC_OK;
}

/*
 * The norm in f32 on the device, then one stream sync: the host needs it to
 * decide whether to scale. Refused: gradients of more than one dtype.
 */
tfc_status tfcu_grad_norm(const tfc_grad_norm_problem *p) {
    const char *fn = "tfcu_grad_norm";
    *p->overflow = 0;
    if (!p->nseg) {
        *p->norm = 0;
        return TFC_OK;
    }
    int32_t dt = p->segs[0].dtype;
    std::vector<const void *> ptrs((size_t)p->nseg);
    std::vector<size_t> numel((size_t)p->nseg);
    for (int64_t i = 0; i < p->nseg; i++) {
        if (p->segs[i].dtype != dt)
            return tfcu_err(TFC_ERR_UNSUPPORTED, "clipping on CUDA needs gradients of one dtype (%s and %s)",
                            tfcu_dtype_name(dt), tfcu_dtype_name(p->segs[i].dtype));
        ptrs[(size_t)i] = p->segs[i].grad;
        numel[(size_t)i] = (size_t)p->segs[i].n;
    }
    if (p->nseg > INT32_MAX) return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: %lld gradients", fn, (long long)p->nseg);
    tfcu_scratch_set s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    void *norm_dev;
    TFCU_TRY(s.get(fn, 4, &norm_dev));
    TFCU_TRY(multi_tensor_norm(p->device, dt, ptrs.data(), numel.data(), (int32_t)p->nseg, INFINITY, (float *)norm_dev,
                               NULL));
    float norm = 0;
    TFCU_TRY(tfcu_memcpy(p->device, &norm, norm_dev, sizeof norm, TFC_MEMCPY_D2H));
    *p->norm = norm;
    return TFC_OK;
}

/* Every segment's grad *= c in place, through the map entry. */
tfc_status tfcu_grad_scale(const tfc_grad_norm_problem *p) {
    for (int64_t i = 0; i < p->nseg; i++) {
        const tfc_optim_seg *g = &p->segs[i];
        tfc_sview v = tfcu_flat_view((void *)g->grad, g->dtype, g->n);
        tfc_map_problem m = {};
        m.device = p->device, m.op = TFC_MAP_MUL_S, m.out = &v, m.a = &v, m.p = p->c;
        TFCU_TRY(tfcu_map(&m));
    }
    return TFC_OK;
}
