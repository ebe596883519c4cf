/*
 * The CPU's backend table: the entries of backend/backend.h, each a thin
 * adapter from a problem struct to the CPU kernels of this folder (which
 * take plain arguments so they read like their formulas). The CPU runs
 * every entry in f32 and f64, and gemm in bf16 too; the quantized-weight
 * entries (cpu/quant.h) in f32 only; stats keep the input's dtype.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16_amx.h"
#include "cpu/gemm_small_m.h"
#include "cpu/kernels.h"
#include "cpu/optim_kernels.h"
#include "cpu/quant.h"
#include "cpu/reduce.h"

static const char *cpu_describe(void) { return "CPU"; }
static int32_t cpu_device_count(void) { return 1; }
/* CPU entries set the library's thread-local message themselves. */
static const char *cpu_last_error(void) { return tfc_last_error(); }

/* ---- memory ---- */

static tfc_status cpu_alloc(int32_t device, size_t nbytes, void **out) {
    (void)device;
    void *p = tfc_host_alloc(nbytes);
    if (!p) return tfc_err(TFC_ERR_OOM, "out of memory allocating %zu bytes", nbytes);
    *out = p;
    return TFC_OK;
}

static void cpu_free(int32_t device, void *p, size_t nbytes) {
    (void)device;
    tfc_host_free(p, nbytes);
}

static tfc_status cpu_memset0(int32_t device, void *p, size_t nbytes) {
    (void)device;
    if (nbytes) memset(p, 0, nbytes);
    return TFC_OK;
}

static tfc_status cpu_memcpy(int32_t device, void *dst, const void *src, size_t nbytes, tfc_memcpy_kind kind) {
    (void)device, (void)kind;
    if (nbytes) memmove(dst, src, nbytes);
    return TFC_OK;
}

static tfc_status cpu_synchronize(int32_t device) {
    (void)device;
    return TFC_OK;
}

/* ---- data movement, elementwise, reductions ---- */

static tfc_status cpu_copy(const tfc_copy_problem *p) {
    tfc_cpu_copy(&p->dst, &p->src);
    return TFC_OK;
}

static tfc_status cpu_fill(const tfc_fill_problem *p) {
    tfc_cpu_fill(&p->dst, p->value);
    return TFC_OK;
}

static tfc_status cpu_random(const tfc_random_problem *p) {
    tfc_cpu_random(p->kind, &p->dst, p->a, p->b, p->seed, p->offset);
    return TFC_OK;
}

/*
 * The element kernels read f32 or f64 only; a bf16 view can reach them since
 * bf16 GEMM results exist on the CPU (a gradient accumulated by the autograd
 * engine), and must be refused rather than read as f32.
 */
static tfc_status check_kernel_dtype(const char *entry, const tfc_sview *v) {
    if (!v || v->dtype == TFC_DTYPE_F32 || v->dtype == TFC_DTYPE_F64 || !tfc_dtype_is_float(v->dtype)) return TFC_OK;
    return tfc_err(TFC_ERR_UNSUPPORTED, "%s is not implemented on cpu:0 for %s (f32 or f64; only gemm takes bf16)",
                   entry, tfc_dtype_name(v->dtype));
}

static tfc_status cpu_map(const tfc_map_problem *p) {
    TFC_TRY(check_kernel_dtype("map", p->out));
    TFC_TRY(check_kernel_dtype("map", p->a));
    TFC_TRY(check_kernel_dtype("map", p->b));
    tfc_cpu_map(p->op, p->out, p->a, p->b, p->c, p->p, p->accumulate);
    return TFC_OK;
}

static tfc_status cpu_reduce(const tfc_reduce_problem *p) {
    TFC_TRY(check_kernel_dtype("reduce", &p->in));
    tfc_cpu_reduce(p->op, &p->in, p->nkeep, p->out, p->scale);
    return TFC_OK;
}

static tfc_status cpu_reduce_scatter(const tfc_scatter_problem *p) {
    tfc_sview dy = {(char *)p->dy, p->dst.dtype, p->nkeep, {0}, {0}};
    int64_t st = 1;
    for (int32_t d = p->nkeep - 1; d >= 0; d--) {
        dy.shape[d] = p->dst.shape[d];
        dy.strides[d] = st;
        st *= p->dst.shape[d];
    }
    tfc_cpu_reduce_scatter(&p->dst, p->nkeep, p->pos, &dy);
    return TFC_OK;
}

/* ---- products ---- */

/* f32 and f64 through BLAS; bf16 A and B (f32 accumulation, bf16 or f32 C) through gemm_bf16.c. */
static tfc_status cpu_gemm(const tfc_gemm_problem *p) {
    /* gemm_epilogues is 0 here: a caller that asks anyway gets an error, not a product without its bias. */
    if (p->epilogue != TFC_GEMM_EPI_NONE)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: epilogue %d is not fused on the CPU", (int)p->epilogue);
    if (p->dtype == TFC_DTYPE_BF16) {
        const int64_t ec = p->c_f32 ? 4 : 2;
        for (int64_t i = 0; i < p->batch; i++)
            TFC_TRY(tfc_cpu_gemm_bf16(p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha,
                                      (const uint16_t *)p->a + i * p->stride_a, p->lda,
                                      (const uint16_t *)p->b + i * p->stride_b, p->ldb, p->beta,
                                      (char *)p->c + i * p->stride_c * ec, p->ldc, p->c_f32));
        return TFC_OK;
    }
    if (p->c_f32)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: an f32 C is for bf16 A and B only, not %s",
                       tfc_dtype_name(p->dtype));
    if (p->dtype != TFC_DTYPE_F32 && p->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: %s is not implemented on the CPU (f32, f64 or bf16)",
                       tfc_dtype_name(p->dtype));
    const int64_t es = (int64_t)tfc_dtype_size(p->dtype);
    for (int64_t i = 0; i < p->batch; i++)
        tfc_cpu_gemm(p->dtype, p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha,
                     (const char *)p->a + i * p->stride_a * es, p->lda, (const char *)p->b + i * p->stride_b * es,
                     p->ldb, p->beta, (char *)p->c + i * p->stride_c * es, p->ldc);
    return TFC_OK;
}

static tfc_status cpu_bias_rows(const tfc_bias_problem *p) {
    tfc_cpu_bias_rows(p->dtype, p->rows, p->n, p->b, p->y);
    return TFC_OK;
}

static tfc_status cpu_bias_grad(const tfc_bias_problem *p) {
    tfc_cpu_bias_grad(p->dtype, p->rows, p->n, p->dy, p->ld, p->db, p->accumulate);
    return TFC_OK;
}

/* ---- fused kernels ---- */

static tfc_status cpu_layernorm_forward(const tfc_layernorm_problem *p) {
    tfc_cpu_layernorm_forward(p->dtype, p->rows, p->cols, p->x, p->weight, p->bias, p->eps, p->y, p->mean, p->rstd);
    return TFC_OK;
}

static tfc_status cpu_layernorm_backward(const tfc_layernorm_problem *p) {
    tfc_cpu_layernorm_backward(p->dtype, p->rows, p->cols, p->dy, p->x, p->weight, p->mean, p->rstd, p->dx, p->dweight,
                               p->dbias, p->accumulate);
    return TFC_OK;
}

static tfc_status cpu_softmax_forward(const tfc_softmax_problem *p) {
    if (p->outer * p->d * p->inner > 0) tfc_cpu_softmax_forward(p->dtype, p->outer, p->d, p->inner, p->log, p->x, p->y);
    return TFC_OK;
}

static tfc_status cpu_softmax_backward(const tfc_softmax_problem *p) {
    if (p->outer * p->d * p->inner > 0)
        tfc_cpu_softmax_backward(p->dtype, p->outer, p->d, p->inner, p->log, p->dy, p->y_in, p->dx, p->accumulate);
    return TFC_OK;
}

/* Every target in [0, c) or ignore_index, checked before anything is written. */
static tfc_status check_targets(const tfc_cross_entropy_problem *p) {
    int64_t bad = tfc_cpu_first_bad_index(p->targets, p->index_dtype, p->n, p->c, 1, p->ignore_index);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "targets[%lld] is %lld, outside [0, %lld) and not ignore_index %lld",
                       (long long)bad, (long long)tfc_index_at(p->targets, p->index_dtype, bad), (long long)p->c,
                       (long long)p->ignore_index);
    return TFC_OK;
}

static tfc_status cpu_cross_entropy_forward(const tfc_cross_entropy_problem *p) {
    TFC_TRY(check_targets(p));
    tfc_cpu_cross_entropy_forward(p->dtype, p->index_dtype, p->n, p->c, p->logits, p->targets, p->ignore_index, p->loss,
                                  p->lse);
    return TFC_OK;
}

static tfc_status cpu_cross_entropy_backward(const tfc_cross_entropy_problem *p) {
    TFC_TRY(check_targets(p));
    tfc_cpu_cross_entropy_backward(p->dtype, p->index_dtype, p->n, p->c, tfc_scalar_load(p->dloss, p->dtype, 0),
                                   p->logits, p->targets, p->lse_in, p->ignore_index, p->dlogits, p->accumulate);
    return TFC_OK;
}

static tfc_status cpu_cross_entropy_rows(const tfc_ce_rows_problem *p) {
    tfc_cpu_cross_entropy_rows(p->dtype, p->index_dtype, p->n, p->c, p->x, p->targets, p->ignore_index, p->to_grad,
                               p->scale, p->row_loss);
    return TFC_OK;
}

static tfc_status check_ids(const tfc_embedding_problem *p) {
    int64_t bad = tfc_cpu_first_bad_index(p->ids, p->index_dtype, p->n, p->v, 0, 0);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "ids %s at flat position %lld is %lld, outside [0, %lld)",
                       tfc_fmt_dims(p->ids_shape, p->ids_ndim), (long long)bad,
                       (long long)tfc_index_at(p->ids, p->index_dtype, bad), (long long)p->v);
    return TFC_OK;
}

static tfc_status cpu_embedding_forward(const tfc_embedding_problem *p) {
    TFC_TRY(check_ids(p));
    tfc_cpu_embedding_forward(p->dtype, p->index_dtype, p->n, p->c, p->table, p->ids, p->out);
    return TFC_OK;
}

static tfc_status cpu_embedding_backward(const tfc_embedding_problem *p) {
    TFC_TRY(check_ids(p));
    tfc_cpu_embedding_backward(p->dtype, p->index_dtype, p->n, p->v, p->c, p->dout, p->ids, p->dtable,
                               p->accumulate & 1 /* TFC_IDS_CHECKED: the CPU checks anyway */);
    return TFC_OK;
}

static tfc_status cpu_gelu_forward(const tfc_gelu_problem *p) {
    tfc_cpu_gelu_forward(p->dtype, p->n, p->approximate, p->x, p->y);
    return TFC_OK;
}

static tfc_status cpu_gelu_backward(const tfc_gelu_problem *p) {
    tfc_cpu_gelu_backward(p->dtype, p->n, p->approximate, p->dy, p->x, p->dx, p->accumulate);
    return TFC_OK;
}

static tfc_status cpu_attention_forward(const tfc_attn_problem *p) {
    tfc_cpu_attention_forward(p);
    return TFC_OK;
}

static tfc_status cpu_attention_backward(const tfc_attn_problem *p) {
    tfc_cpu_attention_backward(p);
    return TFC_OK;
}

static tfc_status cpu_dropout(const tfc_dropout_problem *p) {
    tfc_cpu_dropout(p->dtype, p->n, p->p, p->seed, p->offset, p->x, p->out);
    return TFC_OK;
}

static tfc_status cpu_topk_backward(const tfc_topk_problem *p) {
    tfc_cpu_topk_backward(p);
    return TFC_OK;
}

static tfc_status cpu_cumsum(const tfc_cumsum_problem *p) {
    tfc_cpu_cumsum(p);
    return TFC_OK;
}

/* ---- optimizers ---- */

static tfc_status cpu_optim_step(const tfc_optim_problem *p) {
    if (p->rule == TFC_OPTIM_RULE_ADAM)
        tfc_cpu_adam_step(p, p->segs, p->nseg);
    else
        tfc_cpu_sgd_step(p, p->segs, p->nseg);
    return TFC_OK;
}

/*
 * The norm in f64 over fixed blocks (thread-count independent). A sum of
 * squares that overflows is redone on grads scaled by 1/max|g|, so only a
 * NaN/Inf element or a norm beyond f64 stays non-finite.
 */
static tfc_status cpu_grad_norm(const tfc_grad_norm_problem *p) {
    double sumsq = 0;
    *p->overflow = 0;
    if (tfc_cpu_grad_sumsq(p->segs, p->nseg, 1.0, &sumsq) != TFC_OK) return tfc_err(TFC_ERR_OOM, "out of memory");
    double norm = sqrt(sumsq);
    if (!isfinite(norm)) {
        double mx = tfc_cpu_grad_maxabs(p->segs, p->nseg);
        if (!isfinite(mx)) {
            *p->norm = mx;
            return TFC_OK;
        }
        if (tfc_cpu_grad_sumsq(p->segs, p->nseg, 1.0 / mx, &sumsq) != TFC_OK)
            return tfc_err(TFC_ERR_OOM, "out of memory");
        norm = mx * sqrt(sumsq);
        *p->overflow = !isfinite(norm);
    }
    *p->norm = norm;
    return TFC_OK;
}

static tfc_status cpu_grad_scale(const tfc_grad_norm_problem *p) {
    tfc_cpu_grad_scale(p->segs, p->nseg, p->c);
    return TFC_OK;
}

tfc_backend tfc_cpu_backend = {
    .struct_size = sizeof(tfc_backend),
    .abi_version = TFC_BACKEND_ABI,
    .name = "cpu",
    .caps =
        {
            .float_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64),
            .gemm_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64) | (1u << TFC_DTYPE_BF16),
            .gemm_epilogues = 0, /* linear writes the bias rows, then accumulates the GEMM onto them (beta = 1) */
            .stats_f32 = 0,
            /* gemm_bf16.c widens to f32 above the small-M kernel's rows (docs/PERFORMANCE.md, "bf16 GEMM");
               0 on AMX tiles, which multiply bf16 (settle_table) */
            .gemm_bf16_widen_rows = TFC_GEMM_SMALL_M_MAX + 1,
            .gemm_pad_cols = 0,
            .autocast_attention = TFC_DTYPE_F32, /* attention takes f32 and f64 only */
        },
    .describe = cpu_describe,
    .device_count = cpu_device_count,
    .last_error = cpu_last_error,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset0 = cpu_memset0,
    .memcpy = cpu_memcpy,
    .synchronize = cpu_synchronize,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .random = cpu_random,
    .map = cpu_map,
    .reduce = cpu_reduce,
    .reduce_scatter = cpu_reduce_scatter,
    .gemm = cpu_gemm,
    .bias_rows = cpu_bias_rows,
    .bias_grad = cpu_bias_grad,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .softmax_forward = cpu_softmax_forward,
    .softmax_backward = cpu_softmax_backward,
    .cross_entropy_forward = cpu_cross_entropy_forward,
    .cross_entropy_backward = cpu_cross_entropy_backward,
    .cross_entropy_rows = cpu_cross_entropy_rows,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .dropout = cpu_dropout,
    .topk = tfc_cpu_topk,
    .topk_backward = cpu_topk_backward,
    .optim_step = cpu_optim_step,
    .grad_norm = cpu_grad_norm,
    .grad_scale = cpu_grad_scale,
    .quantize = tfc_cpu_quantize,
    .dequantize = tfc_cpu_dequantize,
    .qlinear = tfc_cpu_qlinear,
    .gather = tfc_cpu_gather,
    .scatter = tfc_cpu_scatter,
    .cumsum = cpu_cumsum,
    .multinomial = tfc_cpu_multinomial,
    .native_stream = NULL, /* no streams on the CPU */
};

static void settle_table(void) {
    if (tfc_cpu_bf16_gemm_kind() != TFC_BF16_GEMM_WIDEN) tfc_cpu_backend.caps.gemm_bf16_widen_rows = 0;
}

const tfc_backend *tfc_cpu_backend_table(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, settle_table);
    return &tfc_cpu_backend;
}
