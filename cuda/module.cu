/*
 * The module's single export: the CUDA backend table libtfcore asks for
 * with dlopen/dlsym (tfc_backend_module_get). Most entries are the kernels'
 * own launchers, which take the problems of lib/backend/backend.h
 * (entries.h, last); the adapters here prepare what those kernels do not
 * cover (attention operands they need contiguous) with stream-ordered
 * scratch memory, fill the cuBLASLt and AdamW descriptors,
 * and refuse what CUDA does not offer with TFC_ERR_UNSUPPORTED saying so.
 * Everything else in libtfcore-cuda.so is hidden (-fvisibility=hidden,
 * version script).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "common.cuh"
#include "entries.h"

/* ---- memory ---- */

static void cu_free(int32_t device, void *p, size_t nbytes) {
    (void)nbytes;
    tfcu_free(device, p);
}

static tfc_status cu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, tfc_memcpy_kind kind) {
    return tfcu_memcpy(device, dst, src, nbytes, (int32_t)kind);
}

/* ---- scratch: stream-ordered device buffers released with the object ---- */

struct scratch {
    tfcu_ctx *c = NULL;
    std::vector<void *> bufs;
    ~scratch() {
        for (void *p : bufs) tfcu_scratch_free(c, p);
    }
    tfc_status get(const char *fn, size_t nbytes, void **out) {
        TFCU_TRY(tfcu_scratch(c, fn, nbytes ? nbytes : 1, out));
        bufs.push_back(*out);
        return TFC_OK;
    }
};

static size_t float_size(int32_t dt) { return dt == TFC_DTYPE_BF16 ? 2 : 4; }

/* A contiguous view of n elements at data. */
static tfc_sview flat_view(void *data, int32_t dtype, int64_t n) {
    tfc_sview v = {};
    v.data = (char *)data;
    v.dtype = (tfc_dtype)dtype;
    v.ndim = 1;
    v.shape[0] = n;
    v.strides[0] = 1;
    return v;
}

/* ---- products ---- */

/*
 * K = 0: C_i = beta · C_i (+ bias rows) for every item, through the strided
 * fill and map entries, so any ldc works.
 */
static tfc_status gemm_k0(const tfc_gemm_problem *p) {
    const int32_t ct = p->c_f32 ? (int32_t)TFC_DTYPE_F32 : (int32_t)p->dtype;
    const size_t es = float_size(ct);
    for (int64_t i = 0; i < p->batch; i++) {
        tfc_sview c = flat_view((char *)p->c + (size_t)(i * p->stride_c) * es, ct, 0);
        c.ndim = 2, c.shape[0] = p->M, c.shape[1] = p->N, c.strides[0] = p->ldc ? p->ldc : p->N, c.strides[1] = 1;
        if (p->beta == 0.0) {
            tfc_fill_problem f = {p->device, c, 0.0};
            TFCU_TRY(tfcu_fill(&f));
        } else if (p->beta != 1.0) {
            tfc_map_problem m = {};
            m.device = p->device, m.op = TFC_MAP_MUL_S, m.out = &c, m.a = &c, m.p = p->beta;
            TFCU_TRY(tfcu_map(&m));
        }
        if (p->epilogue == TFC_GEMM_EPI_BIAS) {
            tfc_sview b = c;
            b.data = (char *)p->bias, b.strides[0] = 0;
            tfc_map_problem m = {};
            m.device = p->device, m.op = TFC_MAP_ADD, m.out = &c, m.a = &c, m.b = &b;
            TFCU_TRY(tfcu_map(&m));
        }
        if (!p->stride_c) break;
    }
    return TFC_OK;
}

/*
 * The table's GEMM on cuBLASLt (matmul.cu): bf16 or f32 C, the f32 C of
 * bf16 A and B (c_f32, the bf16 autocast's gradients), the fused bias
 * epilogue, TF32 when allow_tf32.
 */
static tfc_status cu_gemm(const tfc_gemm_problem *p) {
    if (p->epilogue != TFC_GEMM_EPI_NONE && p->epilogue != TFC_GEMM_EPI_BIAS)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "gemm: epilogue %d is not one CUDA fuses (bias)", (int)p->epilogue);
    if (p->epilogue == TFC_GEMM_EPI_BIAS && !p->bias)
        return tfcu_err(TFC_ERR_INVALID_ARG, "gemm: the bias epilogue without a bias");
    if (p->c_f32 && p->dtype != TFC_DTYPE_BF16)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "gemm: an f32 C (c_f32) is for bf16 A and B only, not %s",
                        tfcu_dtype_name(p->dtype));
    if (p->M * p->N * p->batch == 0) return TFC_OK;
    if (p->K == 0) return gemm_k0(p);
    tfc_cuda_matmul_desc d = {};
    d.struct_size = sizeof d;
    d.dtype = p->dtype;
    d.M = p->M, d.N = p->N, d.K = p->K, d.batch = p->batch;
    d.trans_a = p->trans_a, d.trans_b = p->trans_b;
    d.a = p->a, d.b = p->b, d.c = p->c;
    d.stride_a = p->stride_a, d.stride_b = p->stride_b, d.stride_c = p->stride_c;
    d.lda = p->lda, d.ldb = p->ldb, d.ldc = p->ldc;
    d.alpha = (float)p->alpha, d.beta = (float)p->beta;
    d.epilogue = p->epilogue == TFC_GEMM_EPI_BIAS ? TFC_CUDA_EPI_BIAS : TFC_CUDA_EPI_NONE;
    d.bias = p->bias;
    d.c_f32 = p->c_f32;
    d.allow_tf32 = p->allow_tf32;
    return tfcu_matmul(p->device, &d);
}

/* y [rows, n] = b broadcast into every row: a copy whose source rows all have stride 0. */
static tfc_status cu_bias_rows(const tfc_bias_problem *p) {
    tfc_copy_problem c = {};
    c.device = p->device;
    c.dst = flat_view(p->y, p->dtype, 0);
    c.dst.ndim = 2, c.dst.shape[0] = p->rows, c.dst.shape[1] = p->n, c.dst.strides[0] = p->n, c.dst.strides[1] = 1;
    c.src = c.dst;
    c.src.data = (char *)p->b, c.src.strides[0] = 0;
    return tfcu_copy(&c);
}

/* db [n] (+)= column sums of dy [rows, n] (row stride ld): the row-chunked column sum of reduce.cu. */
static tfc_status cu_bias_grad(const tfc_bias_problem *p) {
    return tfcu_colsum("bias_grad", p->device, p->dtype, p->dy, p->rows, p->n, p->ld, p->db, 1.0, p->accumulate != 0);
}

/* ---- attention ---- */

/* An attention operand as the kernels read it: contiguous [B, H, rows, cols], compacted into scratch if not. */
static tfc_status attn_contiguous(scratch &s, const char *fn, const tfc_attn_problem *p, const tfc_attn_operand &o,
                                  int64_t rows, int64_t cols, const void **out) {
    *out = o.data;
    if (o.sr == cols && o.sh == rows * cols && o.sb == p->H * rows * cols) return TFC_OK;
    void *buf;
    TFCU_TRY(s.get(fn, (size_t)(p->B * p->H * rows * cols) * float_size(p->dtype), &buf));
    tfc_copy_problem c = {};
    c.device = p->device;
    c.dst = flat_view(buf, p->dtype, 0);
    c.dst.ndim = 4;
    const int64_t shape[4] = {p->B, p->H, rows, cols}, src_st[4] = {o.sb, o.sh, o.sr, 1};
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) c.dst.shape[d] = shape[d], c.dst.strides[d] = st, st *= shape[d];
    c.src = c.dst;
    c.src.data = (char *)o.data;
    for (int d = 0; d < 4; d++) c.src.strides[d] = src_st[d];
    TFCU_TRY(tfcu_copy(&c));
    *out = buf;
    return TFC_OK;
}

/*
 * Which attention kernels run (attention section, see docs/CUDA.md):
 * TFC_CUDA_ATTENTION=flash (the default) takes the tensor-core kernels of
 * attention_flash.cu where they apply (bf16, D = Dv = 64 or 128, aligned
 * operands) and attention.cu's otherwise; =simple always takes
 * attention.cu's. Read on every call so one process (the device check) can
 * compare both paths against the CPU.
 */
static tfc_status attn_use_flash(const char *fn, const tfc_attn_problem *p, const void *const *ptrs, int nptrs,
                                 bool *use) {
    const char *e = getenv("TFC_CUDA_ATTENTION");
    *use = false;
    if (e && *e && strcmp(e, "flash") != 0) {
        if (strcmp(e, "simple") == 0) return TFC_OK;
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: TFC_CUDA_ATTENTION is '%s', want 'flash' or 'simple'", fn, e);
    }
    *use = tfcu_flash_attention_applies(p->dtype, (size_t)p->D, (size_t)p->Dv, (size_t)p->Tq, (size_t)p->S, ptrs,
                                        nptrs) != 0;
    return TFC_OK;
}

static tfc_status cu_attention_forward(const tfc_attn_problem *p) {
    const char *fn = "attention_forward";
    if (p->B * p->H * p->Tq == 0) return TFC_OK;
    scratch s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    const void *q, *k, *v;
    void *lse = p->lse_w;
    TFCU_TRY(attn_contiguous(s, fn, p, p->q, p->Tq, p->D, &q));
    TFCU_TRY(attn_contiguous(s, fn, p, p->k, p->S, p->D, &k));
    TFCU_TRY(attn_contiguous(s, fn, p, p->v, p->S, p->Dv, &v));
    if (!lse) TFCU_TRY(s.get(fn, (size_t)(p->B * p->H * p->Tq) * 4, &lse));
    const void *ptrs[4] = {q, k, v, p->out_w};
    bool flash;
    TFCU_TRY(attn_use_flash(fn, p, ptrs, 4, &flash));
    if (flash)
        return tfcu_flash_attention_forward(p->device, q, k, v, p->out_w, (float *)lse, (size_t)p->B, (size_t)p->H,
                                            (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (float)p->scale, p->causal);
    return tfcu_attention_forward(p->device, p->dtype, q, k, v, p->out_w, (float *)lse, (size_t)p->B, (size_t)p->H,
                                  (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (size_t)p->Dv, (float)p->scale, p->causal);
}

static tfc_status cu_attention_backward(const tfc_attn_problem *p) {
    const char *fn = "attention_backward";
    if (p->B * p->H * (p->Tq + p->S) == 0) return TFC_OK;
    scratch s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    const void *q, *k, *v, *out, *dout;
    TFCU_TRY(attn_contiguous(s, fn, p, p->q, p->Tq, p->D, &q));
    TFCU_TRY(attn_contiguous(s, fn, p, p->k, p->S, p->D, &k));
    TFCU_TRY(attn_contiguous(s, fn, p, p->v, p->S, p->Dv, &v));
    TFCU_TRY(attn_contiguous(s, fn, p, p->out, p->Tq, p->Dv, &out));
    TFCU_TRY(attn_contiguous(s, fn, p, p->dout, p->Tq, p->Dv, &dout));
    const void *ptrs[8] = {q, k, v, out, dout, p->dq, p->dk, p->dv};
    bool flash;
    TFCU_TRY(attn_use_flash(fn, p, ptrs, 8, &flash));
    if (flash)
        return tfcu_flash_attention_backward(p->device, dout, q, k, v, out, (const float *)p->lse, p->dq, p->dk, p->dv,
                                             (size_t)p->B, (size_t)p->H, (size_t)p->Tq, (size_t)p->S, (size_t)p->D,
                                             (float)p->scale, p->causal, p->accumulate ? TFC_GRAD_ACCUMULATE : 0);
    return tfcu_attention_backward(p->device, p->dtype, dout, q, k, v, out, (const float *)p->lse, p->dq, p->dk, p->dv,
                                   (size_t)p->B, (size_t)p->H, (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (size_t)p->Dv,
                                   (float)p->scale, p->causal, p->accumulate ? TFC_GRAD_ACCUMULATE : 0);
}

/* ---- optimizers ---- */

/*
 * PyTorch's AdamW through the fused multi-tensor kernel: one launch per
 * distinct (lr, step), since parameters skipped on earlier steps have their
 * own counts. Adam without weight decay is the same rule.
 */
static tfc_status cu_optim_step(const tfc_optim_problem *p) {
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
        d.struct_size = sizeof d, d.count = count, d.grad_dtype = TFC_DTYPE_F32;
        d.params = params.data(), d.grads = grads.data(), d.m = m.data(), d.v = v.data();
        d.numel = numel.data(), d.weight_decay = decay.data();
        d.lr = (float)f->lr, d.beta1 = (float)p->beta1, d.beta2 = (float)p->beta2, d.eps = (float)p->eps;
        d.step = f->step;
        TFCU_TRY(tfcu_adamw(p->device, &d));
    }
    return TFC_OK;
}

/* The norm in f32 on the device, then one stream sync: the host needs it to decide whether to scale. */
static tfc_status cu_grad_norm(const tfc_grad_norm_problem *p) {
    const char *fn = "grad_norm";
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
    scratch s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    void *norm_dev;
    TFCU_TRY(s.get(fn, 4, &norm_dev));
    TFCU_TRY(
        tfcu_grad_norm(p->device, dt, ptrs.data(), numel.data(), (int32_t)p->nseg, INFINITY, (float *)norm_dev, NULL));
    float norm = 0;
    TFCU_TRY(tfcu_memcpy(p->device, &norm, norm_dev, sizeof norm, TFC_MEMCPY_D2H));
    *p->norm = norm;
    return TFC_OK;
}

static tfc_status cu_grad_scale(const tfc_grad_norm_problem *p) {
    for (int64_t i = 0; i < p->nseg; i++) {
        const tfc_optim_seg *g = &p->segs[i];
        tfc_sview v = flat_view((void *)g->grad, g->dtype, g->n);
        tfc_map_problem m = {};
        m.device = p->device, m.op = TFC_MAP_MUL_S, m.out = &v, m.a = &v, m.p = p->c;
        TFCU_TRY(tfcu_map(&m));
    }
    return TFC_OK;
}

/* The device's stream (the context's), so callers can order their own work or CUDA events against ours. */
static void *cu_native_stream(int32_t device) {
    tfcu_ctx *c;
    return tfcu_ctx_get(device, "native_stream", &c) == TFC_OK ? (void *)c->stream : NULL;
}

static tfc_backend make_table(void) {
    tfc_backend b = {};
    b.struct_size = sizeof(tfc_backend);
    b.abi_version = TFC_BACKEND_ABI;
    b.name = "cuda";
    b.caps.float_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_BF16);
    b.caps.gemm_dtypes = b.caps.float_dtypes;
    b.caps.gemm_epilogues = 1u << TFC_GEMM_EPI_BIAS; /* cuBLASLt's bias epilogue: tfc_linear's forward is one call */
    b.caps.stats_f32 = 1;
    b.caps.gemm_bf16_widen_rows = 0;            /* cuBLASLt multiplies bf16 on tensor cores */
    b.caps.gemm_pad_cols = 64;                  /* 16-byte rows and whole tiles (V = 50257 → 50304) */
    b.caps.autocast_attention = TFC_DTYPE_BF16; /* the flash kernels are bf16 (attention_flash.cu) */
    b.describe = tfcu_describe;
    b.device_count = tfcu_device_count;
    b.last_error = tfcu_last_error;
    b.alloc = tfcu_alloc;
    b.free = cu_free;
    b.memset0 = tfcu_memset0;
    b.memcpy = cu_memcpy;
    b.synchronize = tfcu_synchronize;
    b.copy = tfcu_copy;
    b.fill = tfcu_fill;
    b.random = tfcu_random;
    b.map = tfcu_map;
    b.reduce = tfcu_reduce;
    b.reduce_scatter = NULL; /* max/min backward: CPU only */
    b.gemm = cu_gemm;
    b.bias_rows = cu_bias_rows;
    b.bias_grad = cu_bias_grad;
    b.layernorm_forward = tfcu_layernorm_forward;
    b.layernorm_backward = tfcu_layernorm_backward;
    b.softmax_forward = tfcu_softmax_forward;
    b.softmax_backward = tfcu_softmax_backward;
    b.cross_entropy_forward = tfcu_cross_entropy_forward;
    b.cross_entropy_backward = tfcu_cross_entropy_backward;
    b.cross_entropy_rows = NULL; /* the fused LM head composes matmul + cross_entropy instead */
    b.embedding_forward = tfcu_embedding_forward;
    b.embedding_backward = tfcu_embedding_backward;
    b.gelu_forward = tfcu_gelu_forward;
    b.gelu_backward = tfcu_gelu_backward;
    b.attention_forward = cu_attention_forward;
    b.attention_backward = cu_attention_backward;
    b.dropout = tfcu_dropout;
    b.swiglu_forward = tfcu_swiglu_forward;
    b.swiglu_backward = tfcu_swiglu_backward;
    b.topk = NULL; /* top-k: CPU only */
    b.topk_backward = NULL;
    b.optim_step = cu_optim_step;
    b.grad_norm = cu_grad_norm;
    b.grad_scale = cu_grad_scale;
    b.quantize = NULL; /* quantized weights: CPU only so far (docs/CUDA.md) */
    b.dequantize = NULL;
    b.qlinear = NULL;
    b.coll_unique_id = tfcu_coll_unique_id;
    b.coll_init = tfcu_coll_init;
    b.coll_release = tfcu_coll_release;
    b.coll_all_reduce = tfcu_coll_all_reduce;
    b.coll_broadcast = tfcu_coll_broadcast;
    b.coll_all_gather = tfcu_coll_all_gather;
    b.coll_reduce_scatter = tfcu_coll_reduce_scatter;
    /* No CUDA kernels yet for these: the ops on cuda:0 are TFC_ERR_UNSUPPORTED naming the entry. */
    b.gather = NULL;
    b.scatter = NULL;
    b.cumsum = NULL;
    b.multinomial = NULL;
    b.native_stream = cu_native_stream;
    return b;
}

static const tfc_backend g_table = make_table();

/* The table for abi_version, or NULL when this module speaks another version. */
extern "C" __attribute__((visibility("default"))) const tfc_backend *tfc_backend_module_get(uint32_t abi_version) {
    return abi_version == TFC_BACKEND_ABI ? &g_table : NULL;
}
