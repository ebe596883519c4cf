/*
 * The ABI between libtfcore.so and libtfcore-cuda.so. The module exports
 * one symbol, tfc_cuda_module_get(api_version), returning this table;
 * libtfcore refuses a module whose api_version differs. Kernel entries take
 * raw device pointers and sizes (contiguous row-major buffers unless a
 * stride is given) and return tfc_status; on failure the module's
 * last_error() holds the message (with the CUDA/cuBLAS error string), which
 * the caller copies into tfc_last_error().
 *
 * All work of one device runs on that device's single stream, in call
 * order; entries return once the work is enqueued (memcpy to the host and
 * synchronize wait for it). Scalars that come out of a kernel (a loss, a
 * norm) are written to device memory so no entry forces a host sync.
 *
 * `dtype` arguments are tfc_dtype values; float kernels accept f32 and bf16
 * (bf16 storage, f32 arithmetic and accumulation). `flags` takes
 * TFC_GRAD_ACCUMULATE (add into gradient outputs instead of overwriting).
 * The semantics of every kernel are stated in docs/CUDA.md and mirror the
 * CPU kernels.
 *
 * Append only: new entries go at the end and bump TFC_CUDA_API_VERSION.
 */
#ifndef TFC_CUDA_API_H
#define TFC_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "tfcore/core.h"

#define TFC_CUDA_API_VERSION 2

/* Binary ops: out = a OP b (also the scalar form with b = s). */
enum {
    TFC_CUDA_ADD = 0,
    TFC_CUDA_SUB = 1,  /* a - b */
    TFC_CUDA_MUL = 2,
    TFC_CUDA_DIV = 3,  /* a / b */
    TFC_CUDA_MAX = 4,
    TFC_CUDA_MIN = 5,
    TFC_CUDA_POW = 6,  /* a ^ b */
    TFC_CUDA_RSUB = 7, /* b - a */
    TFC_CUDA_RDIV = 8, /* b / a */
    TFC_CUDA_EQ = 9,   /* 1 where a == b, else 0 (masks for max backward) */
    TFC_CUDA_BINARY_COUNT = 10
};

/* Unary ops: y = f(x). GELU is GPT-2's tanh form. */
enum {
    TFC_CUDA_NEG = 0,
    TFC_CUDA_EXP = 1,
    TFC_CUDA_LOG = 2,
    TFC_CUDA_TANH = 3,
    TFC_CUDA_SIGMOID = 4,
    TFC_CUDA_RELU = 5,
    TFC_CUDA_GELU = 6,
    TFC_CUDA_SQRT = 7,
    TFC_CUDA_SQUARE = 8,
    TFC_CUDA_UNARY_COUNT = 9
};

/* Reductions over the middle dim of [outer, n, inner]. */
enum { TFC_CUDA_SUM = 0, TFC_CUDA_MEAN = 1, TFC_CUDA_RMAX = 2, TFC_CUDA_REDUCE_COUNT = 3 };

/* Matmul epilogues (bias is a [N] vector added to every row of C). */
enum { TFC_CUDA_EPI_NONE = 0, TFC_CUDA_EPI_BIAS = 1, TFC_CUDA_EPI_GELU = 2, TFC_CUDA_EPI_BIAS_GELU = 3 };

/*
 * Strided broadcast for binary ops: out (contiguous, `shape`) [i] =
 * a[sum i_d*stride_a[d]] OP b[sum i_d*stride_b[d]]; a stride of 0
 * broadcasts. Strides in elements.
 */
typedef struct tfc_cuda_strided {
    int32_t ndim;
    int64_t shape[TFC_MAX_DIMS];
    int64_t stride_a[TFC_MAX_DIMS];
    int64_t stride_b[TFC_MAX_DIMS];
} tfc_cuda_strided;

/*
 * Batched row-major GEMM: for each of `batch` items,
 *   C = alpha * op(A) @ op(B) + beta * C   (then the epilogue),
 * op(A) is [M,K] (A stored [M,K], or [K,M] when trans_a), op(B) is [K,N]
 * (B stored [K,N], or [N,K] when trans_b), C is [M,N]; all contiguous
 * per item, item i at base + i*stride (elements; 0 shares one matrix).
 * dtype is that of A, B, C and bias: bf16 (f32 accumulation) or f32
 * (full f32 precision, no TF32). Epilogues: bias [N] added to every row,
 * then GELU (tanh form) when asked.
 */
typedef struct tfc_cuda_matmul_desc {
    uint32_t struct_size;
    int32_t dtype;
    int64_t M, N, K, batch;
    int32_t trans_a, trans_b;
    const void *a;
    const void *b;
    void *c;
    const void *bias; /* [N], needed for the BIAS epilogues */
    int64_t stride_a, stride_b, stride_c;
    float alpha, beta;
    int32_t epilogue;
} tfc_cuda_matmul_desc;

/*
 * One fused AdamW step over `count` tensors (PyTorch's AdamW):
 *   g = grad * grad_scale   (grad_scale: device f32 scalar, NULL = 1)
 *   p -= lr * weight_decay[t] * p
 *   m = beta1 m + (1-beta1) g;  v = beta2 v + (1-beta2) g^2
 *   p -= lr * (m / (1-beta1^step)) / (sqrt(v / (1-beta2^step)) + eps)
 * params/m/v are f32; grads are grad_dtype (f32 or bf16); params_bf16
 * (NULL, or per-tensor NULL) receives a bf16 copy of the new params for
 * mixed precision. Pointer arrays live in host memory.
 */
typedef struct tfc_cuda_adamw_desc {
    uint32_t struct_size;
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

typedef struct tfc_cuda_api {
    uint32_t struct_size;
    uint32_t api_version;
    /* Human-readable device summary, e.g. "NVIDIA H200 (sm_90, 139 GiB)". */
    const char *(*describe)(void);
    int32_t (*device_count)(void);
    /* Message of the last failure inside the module (thread-local). */
    const char *(*last_error)(void);
    tfc_status (*alloc)(int32_t device, size_t nbytes, void **out);
    void (*free)(int32_t device, void *p);
    tfc_status (*memset0)(int32_t device, void *p, size_t nbytes);
    /* kind: 0 host->device, 1 device->host, 2 device->device */
    tfc_status (*memcpy)(int32_t device, void *dst, const void *src, size_t nbytes, int32_t kind);
    tfc_status (*synchronize)(int32_t device);

    /* ---- version 2: kernels ---- */

    /* x[i] = value, i < n. */
    tfc_status (*fill)(int32_t device, int32_t dtype, void *x, size_t n, double value);
    /* dst[i] = (dst_dtype) src[i]; f32 <-> bf16 (round to nearest even) and same-type copies. */
    tfc_status (*cast)(int32_t device, int32_t src_dtype, const void *src, int32_t dst_dtype, void *dst, size_t n);
    /* out[i] = a[i] OP b[i], i < n. out may alias a or b. */
    tfc_status (*binary)(int32_t device, int32_t op, int32_t dtype, const void *a, const void *b, void *out, size_t n);
    /* Broadcasting / strided form, see tfc_cuda_strided. */
    tfc_status (*binary_strided)(int32_t device, int32_t op, int32_t dtype, const void *a, const void *b, void *out,
                                 const tfc_cuda_strided *layout);
    /* out[i] = a[i] OP s. */
    tfc_status (*binary_scalar)(int32_t device, int32_t op, int32_t dtype, const void *a, double s, void *out,
                                size_t n);
    /* y[i] = f(x[i]). */
    tfc_status (*unary)(int32_t device, int32_t op, int32_t dtype, const void *x, void *y, size_t n);
    /* dx[i] (+)= dy[i] * f'(x[i]). */
    tfc_status (*unary_backward)(int32_t device, int32_t op, int32_t dtype, const void *dy, const void *x, void *dx,
                                 size_t n, uint32_t flags);
    /* out[o, j] = reduce_k x[o, k, j] for x [outer, n, inner], out [outer, inner]; f32 accumulation. */
    tfc_status (*reduce)(int32_t device, int32_t op, int32_t dtype, const void *x, void *out, size_t outer, size_t n,
                         size_t inner);
    /* Softmax (log_softmax when log != 0) over the middle dim of [outer, n, inner]. */
    tfc_status (*softmax_forward)(int32_t device, int32_t dtype, int32_t log, const void *x, void *y, size_t outer,
                                  size_t n, size_t inner);
    /*
     * softmax:     dx = y * (dy - sum_k dy*y)
     * log_softmax: dx = dy - exp(y) * sum_k dy      (y is the forward output)
     */
    tfc_status (*softmax_backward)(int32_t device, int32_t dtype, int32_t log, const void *dy, const void *y,
                                   void *dx, size_t outer, size_t n, size_t inner, uint32_t flags);
    /*
     * LayerNorm over the last dim of x [rows, C]: mean/rstd [rows] (f32),
     * y = (x - mean) * rstd * w + b; rstd = 1/sqrt(var + eps) with the
     * biased variance. w, b [C] (b may be NULL).
     */
    tfc_status (*layernorm_forward)(int32_t device, int32_t dtype, const void *x, const void *w, const void *b,
                                    float eps, void *y, float *mean, float *rstd, size_t rows, size_t C);
    /* Gradients of the above: dx [rows, C], dw, db [C]; any may be NULL. */
    tfc_status (*layernorm_backward)(int32_t device, int32_t dtype, const void *dy, const void *x, const void *w,
                                     const float *mean, const float *rstd, void *dx, void *dw, void *db, size_t rows,
                                     size_t C, uint32_t flags);
    /*
     * Softmax cross-entropy of logits [N, C] against targets [N]
     * (target_dtype i32 or i64); rows whose target is ignore_index are
     * skipped. loss (device f32 scalar) = mean over valid rows of
     * lse_r - logits[r, t_r] (NaN when no row is valid, as PyTorch);
     * lse [N] (f32, may be NULL) receives every row's log-sum-exp (ignored
     * rows included), which the backward needs.
     * A target outside [0, C) that is not ignore_index makes the entry
     * fail with TFC_ERR_INVALID_ARG (this waits for the stream).
     */
    tfc_status (*cross_entropy_forward)(int32_t device, int32_t dtype, const void *logits, int32_t target_dtype,
                                        const void *targets, int64_t ignore_index, size_t N, size_t C, float *loss,
                                        float *lse);
    /*
     * dlogits[r, c] (+)= dloss / n_valid * (exp(logits[r,c] - lse[r]) - [c == t_r]),
     * 0 for ignored rows. dloss: device f32 scalar; lse from the forward.
     */
    tfc_status (*cross_entropy_backward)(int32_t device, int32_t dtype, const float *dloss, const void *logits,
                                         int32_t target_dtype, const void *targets, int64_t ignore_index,
                                         const float *lse, void *dlogits, size_t N, size_t C, uint32_t flags);
    /*
     * out[r, :] = weight[ids[r], :] for weight [V, C], ids [N] (i32/i64).
     * An id outside [0, V) fails with TFC_ERR_INVALID_ARG (waits for the stream).
     */
    tfc_status (*embedding_forward)(int32_t device, int32_t dtype, const void *weight, int32_t id_dtype,
                                    const void *ids, void *out, size_t N, size_t V, size_t C);
    /*
     * dweight[v, :] (+)= sum over r with ids[r] == v of dout[r, :], summed in
     * increasing r (deterministic; same order as a CPU loop). Rows never
     * referenced are zeroed unless accumulating.
     */
    tfc_status (*embedding_backward)(int32_t device, int32_t dtype, const void *dout, int32_t id_dtype,
                                     const void *ids, void *dweight, size_t N, size_t V, size_t C, uint32_t flags);
    /* cuBLASLt GEMM, see tfc_cuda_matmul_desc. */
    tfc_status (*matmul)(int32_t device, const tfc_cuda_matmul_desc *desc);
    /*
     * Attention: q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv], out [B,H,T,Dv],
     * lse [B,H,T] (f32). s_ij = scale * q_i.k_j; causal keeps j <= i + (S - T)
     * (bottom-right aligned). out_i = sum_j softmax_j(s_i) v_j,
     * lse_i = log sum_j exp(s_ij). A row that sees no key gets out = 0 and
     * lse = -inf. D, Dv <= 128.
     */
    tfc_status (*attention_forward)(int32_t device, int32_t dtype, const void *q, const void *k, const void *v,
                                    void *out, float *lse, size_t B, size_t H, size_t T, size_t S, size_t D,
                                    size_t Dv, float scale, int32_t causal);
    /* Gradients of the above; dq, dk, dv may each be NULL. */
    tfc_status (*attention_backward)(int32_t device, int32_t dtype, const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse, void *dq, void *dk, void *dv,
                                     size_t B, size_t H, size_t T, size_t S, size_t D, size_t Dv, float scale,
                                     int32_t causal, uint32_t flags);
    /*
     * Global L2 norm over `count` tensors grads[t] (numel[t] elements of
     * dtype; pointer arrays in host memory) into norm (device f32). When
     * clip_scale is not NULL it receives min(1, max_norm / (norm + 1e-6)),
     * ready to be the AdamW grad_scale. Deterministic.
     */
    tfc_status (*grad_norm)(int32_t device, int32_t dtype, const void *const *grads, const size_t *numel,
                            int32_t count, float max_norm, float *norm, float *clip_scale);
    /* Fused multi-tensor AdamW, see tfc_cuda_adamw_desc. */
    tfc_status (*adamw)(int32_t device, const tfc_cuda_adamw_desc *desc);
    /*
     * x[i] = lo + (hi - lo) * tfc_rng_uniform(seed, offset, i) and
     * x[i] = mean + std * tfc_rng_normal(seed, offset, i): the streams of
     * lib/core/rng.h, so CPU and CUDA draw the same numbers.
     */
    tfc_status (*random_uniform)(int32_t device, int32_t dtype, void *x, size_t n, uint64_t seed, uint64_t offset,
                                 double lo, double hi);
    tfc_status (*random_normal)(int32_t device, int32_t dtype, void *x, size_t n, uint64_t seed, uint64_t offset,
                                double mean, double std);
    /*
     * Inverted dropout: element i is kept iff tfc_rng_uniform(seed, offset, i) >= p,
     * out[i] = keep ? x[i] / (1 - p) : 0. The backward is the same call on dy.
     */
    tfc_status (*dropout)(int32_t device, int32_t dtype, const void *x, void *out, size_t n, float p, uint64_t seed,
                          uint64_t offset);
    /*
     * dst (contiguous, layout->shape)[i] = src[sum_d i_d * layout->stride_a[d]]:
     * materialises any strided view (transpose, slice, expand) of any dtype
     * (1, 2, 4 or 8-byte elements; layout->stride_b is ignored).
     */
    tfc_status (*copy_strided)(int32_t device, int32_t dtype, const void *src, void *dst,
                               const tfc_cuda_strided *layout);
} tfc_cuda_api;

typedef const tfc_cuda_api *(*tfc_cuda_module_get_fn)(uint32_t api_version);

#endif
