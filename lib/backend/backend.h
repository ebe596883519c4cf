/*
 * The backend table: one struct of kernel entry points per device, the one
 * place where device and dtype are decided. lib/cpu fills it for the CPU
 * (lib/cpu/cpu_backend.c); the CUDA module libtfcore-cuda.so fills it for
 * CUDA (cuda/module.cu) and hands it over through dlopen; lib/device picks
 * the table of a tensor's device. Problems and entries come in the same
 * concept groups: memory, data movement, elementwise, reductions, GEMM,
 * normalization, attention, loss, optimizer, quantized weights, collectives.
 *
 * Validation happens once, at the door. An op's explicit door (lib/ops,
 * lib/tensor) checks its tensors (dtypes, shapes, devices, overlap),
 * prepares the operands and fills the problem struct of its entry, then runs
 *     TFC_BACKEND_RUN(fn, backend, entry, &problem)
 * which fails with TFC_ERR_UNSUPPORTED naming op, device and dtype when the
 * entry is NULL (a backend states what it lacks), and otherwise calls it and
 * turns a failure into the library's message. Entries and the kernels
 * behind them trust the struct: they do not check again what the door
 * checked. They check only what the door cannot see (data on the device: an
 * id outside the table, a target outside the classes) and the cases they
 * refuse (below).
 *
 * Conventions for every entry:
 *  - Pointers are addresses on the backend's device (host memory for the
 *    CPU); `device` is the device index (0 on the CPU).
 *  - `dtype` is the float type of the problem's float buffers, one of
 *    caps.float_dtypes (the gemm: caps.gemm_dtypes). "Stats" buffers
 *    (LayerNorm mean/rstd, RMSNorm rstd, cross-entropy loss/lse, attention lse) have the
 *    dtype tfc_backend_stats_dtype() gives.
 *  - Buffers are contiguous row-major unless the problem says otherwise;
 *    shapes agree, outputs do not overlap inputs, and pointers are NULL
 *    only where marked "or NULL". Sizes may be 0.
 *  - `accumulate` != 0 makes gradient outputs += instead of =.
 *  - Entries return TFC_OK or an error status with a message that
 *    last_error() returns (on the CPU: tfc_last_error()). Bad data only a
 *    kernel can see is TFC_ERR_INVALID_ARG, detected before anything is
 *    written.
 *  - A backend may refuse a case of an entry it offers (a non-contiguous
 *    view, an optimizer variant) with TFC_ERR_UNSUPPORTED saying which.
 *
 * What a backend takes and how it wants its work shaped are its caps
 * (tfc_backend_caps). Ops do not read them: they ask the questions under
 * "asking the table" below ("does the gemm take bf16?", "in which storage
 * do bf16 GEMM operands go?", "which dtype does attention compute in under
 * autocast?"), so each device's policy is stated once, in its table.
 *
 * The table crosses the boundary between libtfcore.so and the CUDA module,
 * an interface internal to the two and versioned by TFC_BACKEND_ABI: the
 * loader (lib/device/cuda_module.c) refuses a module of another version,
 * naming both. struct_size and abi_version stay the first two fields in
 * every version so that the check can read them.
 */
#ifndef TFC_BACKEND_H
#define TFC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/map_ops.h"
#include "backend/view.h"
#include "tfcore/core.h"

#define TFC_BACKEND_ABI 14

/* ---- problems, grouped as the table ------------------------------------- */

/* memory */

typedef enum tfc_memcpy_kind { TFC_MEMCPY_H2D = 0, TFC_MEMCPY_D2H = 1, TFC_MEMCPY_D2D = 2 } tfc_memcpy_kind;

/* data movement */

/* dst = src converted to dst's dtype; src already has dst's shape (stride 0 broadcasts). */
typedef struct tfc_copy_problem {
    int32_t device;
    tfc_sview dst, src;
} tfc_copy_problem;

/* Every element of dst = value. */
typedef struct tfc_fill_problem {
    int32_t device;
    tfc_sview dst;
    double value;
} tfc_fill_problem;

typedef enum tfc_random_kind { TFC_RANDOM_UNIFORM = 0, TFC_RANDOM_NORMAL = 1 } tfc_random_kind;

/*
 * Element i of dst in row-major order of its shape = a + b · r_i, where r_i
 * is tfc_rng_uniform (or tfc_rng_normal) of the Philox stream (seed,
 * offset) at index i (lib/core/rng.h): the same numbers on every backend.
 */
typedef struct tfc_random_problem {
    int32_t device;
    tfc_random_kind kind;
    tfc_sview dst;
    double a, b;
    uint64_t seed, offset;
} tfc_random_problem;

/*
 * num_samples draws per row from the categorical distribution of each row
 * of contiguous probs [rows, n] (non-negative finite weights, not
 * necessarily normalised) into out [rows, num_samples] (i64 category
 * indices). Without replacement a chosen category's weight is removed for
 * the row's later draws. Draw k of row r reads uniform number
 * r · num_samples + k of the Philox stream (seed, offset), so results do
 * not depend on the thread count. A negative, NaN or infinite weight, a
 * row summing to 0, or (without replacement) fewer positive weights than
 * num_samples is TFC_ERR_INVALID_ARG, found before anything is written.
 */
typedef struct tfc_multinomial_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t rows, n, num_samples;
    int32_t replacement;
    uint64_t seed, offset;
    const void *probs;
    int64_t *out;
} tfc_multinomial_problem;

/*
 * Indexed reads and writes (gather, scatter). The loop runs over the
 * positions p of index's shape; each position names one element of x:
 * p with p[dim] replaced by i = index[p] (dim >= 0), or, with dim == -1,
 * the element at row-major position i of x's shape (flat addressing, for
 * index_put). gather: y[p] = x[that element]; scatter: x[that element] =
 * y[p], or += when accumulate (positions in row-major order of index, so a
 * repeated index is summed deterministically and, without accumulate, the
 * last position wins). x, y and index are strided views (y and index have
 * index's shape; stride 0 broadcasts). Every i is checked against
 * [0, limit) (limit = x.shape[dim], or x's numel) before anything is
 * written: one outside is TFC_ERR_INVALID_ARG naming its flat position.
 * gather copies any dtype; scatter with accumulate takes the float dtypes
 * of caps.float_dtypes.
 */
typedef struct tfc_index_problem {
    int32_t device;
    int32_t dim; /* -1: flat addressing */
    tfc_sview x, y, index;
    int32_t accumulate;
} tfc_index_problem;

/*
 * A bit of `accumulate` in the embedding and cross-entropy problems (bit 0
 * is accumulate itself): the caller knows every id / target is in range
 * (lib/tensor recorded it on the host, tfc_storage_range_within), so a
 * backend that checks on the device and reads the verdict back (CUDA: a
 * host wait) may skip the read. The CPU checks anyway (no wait there).
 */
#define TFC_IDS_CHECKED 2

/*
 * Embedding: out [n, c] = table [v, c] rows named by ids [n] (index dtype).
 * Backward: dtable [v, c] (+)= scatter-add of dout [n, c] by ids, summed
 * in position order (deterministic). An id outside [0, v) is
 * TFC_ERR_INVALID_ARG naming the flat position.
 */
typedef struct tfc_embedding_problem {
    int32_t device;
    tfc_dtype dtype, index_dtype;
    int64_t n, v, c;
    const int64_t *ids_shape; /* ids' shape, for messages */
    int32_t ids_ndim;
    const void *table, *ids;
    void *out;
    const void *dout;
    void *dtable;
    int32_t accumulate;
} tfc_embedding_problem;

/* elementwise */

/*
 * out = f(a, b, c; p) for f = op of map_ops.h, or out += f(...) when
 * accumulate. All views have out's shape (stride 0 broadcasts); float
 * views share out's dtype except c of MASK_SELECT, a bool/u8 mask. Inputs
 * an op does not read may be NULL. out may alias an input element for
 * element (in-place updates).
 */
typedef struct tfc_map_problem {
    int32_t device;
    tfc_map_op op;
    const tfc_sview *out, *a, *b, *c;
    double p;
    int32_t accumulate;
} tfc_map_problem;

/*
 * GELU of n elements, exact (approximate = 0: x·Φ(x)) or GPT-2's tanh form
 * (approximate = 1); backward dx (+)= dy · gelu'(x).
 */
typedef struct tfc_gelu_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t n;
    int32_t approximate;
    const void *x, *dy;
    void *y, *dx;
    int32_t accumulate;
} tfc_gelu_problem;

/* Inverted dropout of n contiguous elements: out_i = u_i ≥ p ? x_i / (1 − p) : 0, u_i uniform (seed, offset, i). */
typedef struct tfc_dropout_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t n;
    double p;
    uint64_t seed, offset;
    const void *x;
    void *out;
} tfc_dropout_problem;

/*
 * SwiGLU, the gated MLP activation of Llama-family models, over rows × cols:
 *   out   = silu(gate) ⊙ up,                silu(g) = g·σ(g)
 *   dgate (+)= dy ⊙ up ⊙ σ(g)(1 + g(1 − σ(g)))
 *   dup   (+)= dy ⊙ silu(g)
 * Every operand is [rows, cols] with unit column stride and its own row
 * stride ld_* (elements, >= cols), so gate and up may be the two column
 * halves of one [rows, 2·cols] buffer (ld 2·cols: one GEMM made both) and
 * dgate, dup the two halves of its gradient. The forward reads gate, up and
 * writes out; the backward reads dy, gate, up and writes dgate and dup, each
 * or NULL.
 */
typedef struct tfc_swiglu_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t rows, cols;
    const void *gate, *up;
    int64_t ld_gate, ld_up;
    void *out; /* forward */
    int64_t ld_out;
    const void *dy; /* backward */
    int64_t ld_dy;
    void *dgate, *dup;
    int64_t ld_dgate, ld_dup;
    int32_t accumulate;
} tfc_swiglu_problem;

/* reductions */

typedef enum tfc_reduce_op {
    TFC_REDUCE_SUM,    /* out = scale · Σ x          (mean: scale = 1/n) */
    TFC_REDUCE_MAX,    /* out = max x                                    */
    TFC_REDUCE_MIN,    /* out = min x                                    */
    TFC_REDUCE_ARGMAX, /* out (i64) = first index of max, row-major over the reduced dims */
    TFC_REDUCE_ARGMIN,
    TFC_REDUCE_VAR /* out = Σ (x − mean)² / (n − scale): scale is the correction */
} tfc_reduce_op;

/*
 * Reduction over the trailing dims of a strided view: in = [kept...,
 * reduced...] (the caller permutes the reduced dims to the end; nkeep
 * kept dims), out is contiguous over the kept dims, in's dtype (i64 for
 * the arg ops). n reduced elements per output may be 0 for SUM (0).
 */
typedef struct tfc_reduce_problem {
    int32_t device;
    tfc_reduce_op op;
    tfc_sview in;
    int32_t nkeep;
    void *out;
    double scale;
} tfc_reduce_problem;

/*
 * Backward of max/min: dst (zeroed, permuted like the forward's input,
 * nkeep kept dims) gets dy[o] at reduced position pos[o] (i64) of each
 * kept index o; dy is contiguous over the kept dims.
 */
typedef struct tfc_scatter_problem {
    int32_t device;
    tfc_sview dst;
    int32_t nkeep;
    const int64_t *pos;
    const void *dy;
} tfc_scatter_problem;

/*
 * Inclusive prefix sum along the middle dim of contiguous x [outer, d, inner]:
 * out[o, j, i] = Σ_{j' ≤ j} x[o, j', i], or Σ_{j' ≥ j} when reverse (the
 * backward of a cumsum). out may not alias x. f32 is summed in double.
 */
typedef struct tfc_cumsum_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t outer, d, inner;
    int32_t reverse;
    const void *x;
    void *out;
} tfc_cumsum_problem;

/*
 * Top-k along the middle dim of x [outer, d, inner]: values and indices
 * (i64) [outer, k, inner], sorted (largest first, or smallest when largest
 * is 0; ties by index). Backward: dx [outer, d, inner] += dy scattered to
 * the indices (dx zeroed by the caller).
 */
typedef struct tfc_topk_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t outer, d, inner, k;
    int32_t largest;
    const void *x;
    void *values;
    int64_t *indices;
    const void *dy;
    const int64_t *indices_in;
    void *dx;
} tfc_topk_problem;

/* GEMM */

/*
 * Batched row-major GEMM: for i < batch,
 *   C_i = alpha · op(A_i) · op(B_i) + beta · C_i [+ bias]   C_i [M, N], K inner
 * op(A) is [M, K]: A stored [M, K] with row stride lda, or (trans_a) [K, M]
 * with row stride lda; likewise B [K, N] / (trans_b) [N, K] with ldb; C has
 * row stride ldc. Item i sits at a + i·stride_a (elements; 0 shares one
 * matrix). beta = 0 never reads C. K = 0 gives beta · C (+ bias).
 * dtype is the dtype of A and B (one of caps.gemm_dtypes) and of C unless
 * c_f32. bf16 A and B are multiplied with f32 accumulation; C is rounded
 * once, at the end: to bf16 (c_f32 = 0) or kept f32 (c_f32 = 1, the only
 * mixed case, for consumers that sum or accumulate the product further).
 * epilogue TFC_GEMM_EPI_BIAS adds bias [N] (C's dtype) to every row in the
 * same pass; it is only sent to a backend whose caps.gemm_epilogues has the
 * bit, and one without it refuses a nonzero epilogue (TFC_ERR_UNSUPPORTED)
 * rather than drop it. allow_tf32: f32 products may round their inputs to
 * TF32 (10-bit mantissa) on tensor cores (tfc_set_float32_matmul_precision
 * "high" or "medium"); a backend without such units ignores it.
 */
typedef struct tfc_gemm_problem {
    int32_t device;
    tfc_dtype dtype;
    int32_t trans_a, trans_b;
    int64_t M, N, K, batch;
    double alpha, beta;
    const void *a, *b;
    void *c;
    int64_t lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c;
    int32_t c_f32;      /* 1: C is f32 while A and B are bf16; 0: C has dtype */
    const void *bias;   /* [N], C's dtype, for TFC_GEMM_EPI_BIAS; else NULL */
    int32_t epilogue;   /* tfc_gemm_epilogue */
    int32_t allow_tf32; /* 1: f32 products may use TF32 */
} tfc_gemm_problem;

/* What a gemm does after the product (tfc_gemm_problem.epilogue); bits of caps.gemm_epilogues. */
typedef enum tfc_gemm_epilogue { TFC_GEMM_EPI_NONE = 0, TFC_GEMM_EPI_BIAS = 1 } tfc_gemm_epilogue;

/*
 * The bias of a linear layer: bias_rows writes y [rows, n] (contiguous) =
 * b [n] broadcast into every row; bias_grad: db [n] (+)= Σ_r dy[r, :] with
 * dy [rows, n] of row stride ld, each column summed in row order.
 */
typedef struct tfc_bias_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t rows, n, ld;
    const void *b;  /* bias_rows: b [n] */
    void *y;        /* bias_rows: y [rows, n] */
    const void *dy; /* bias_grad: dy [rows, n] */
    void *db;       /* bias_grad: db [n] */
    int32_t accumulate;
} tfc_bias_problem;

/* normalization */

/*
 * LayerNorm over the rows of x [rows, cols]:
 *   y = (x − mean) · rstd · weight + bias,  rstd = 1/√(var + eps), biased var.
 * weight, bias [cols] or NULL (1 and 0); mean, rstd [rows] (stats dtype) or
 * NULL. The backward reads dy, x, weight, mean, rstd and writes dx [rows,
 * cols], dweight, dbias [cols], each or NULL.
 */
typedef struct tfc_layernorm_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t rows, cols;
    double eps;
    const void *x, *weight, *bias;
    void *y, *mean, *rstd; /* forward outputs (or inputs, in the backward) */
    const void *dy;
    void *dx, *dweight, *dbias;
    int32_t accumulate;
} tfc_layernorm_problem;

/*
 * RMSNorm over the rows of x [rows, cols] (LayerNorm without the mean):
 *   y = x · rstd · weight,  rstd = 1/√(mean(x²) + eps).
 * weight [cols] or NULL (1); rstd [rows] (stats dtype) or NULL. The backward
 * reads dy, x, weight, rstd and writes dx [rows, cols] and dweight [cols],
 * each or NULL; with x̂ = x · rstd and g = dy · weight:
 *   dx = rstd · (g − x̂ · mean(g · x̂)) per row,  dweight = Σ_rows dy · x̂.
 */
typedef struct tfc_rmsnorm_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t rows, cols;
    double eps;
    const void *x, *weight;
    void *y, *rstd; /* forward outputs (rstd an input of the backward) */
    const void *dy;
    void *dx, *dweight;
    int32_t accumulate;
} tfc_rmsnorm_problem;

/*
 * Softmax (log = 0) or log-softmax (log = 1) along the middle dim of
 * [outer, d, inner]: forward y from x; backward dx from dy and the
 * forward's y (softmax: dx = y·(dy − Σ dy·y); log: dx = dy − e^y·Σ dy).
 */
typedef struct tfc_softmax_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t outer, d, inner;
    int32_t log;
    const void *x;
    const void *y_in, *dy; /* backward inputs */
    void *y, *dx;
    int32_t accumulate;
} tfc_softmax_problem;

/* attention */

/* An attention operand [B, H, rows, cols]: element strides of b, h and row; cols has stride 1. */
typedef struct tfc_attn_operand {
    const void *data;
    int64_t sb, sh, sr;
} tfc_attn_operand;

/*
 * Attention: q [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv], out/dout
 * [B,H,T,Dv] as strided operands. Hkv divides H and query head h reads kv
 * head h / (H/Hkv) (grouped-query attention; Hkv = H is multi-head, 1
 * multi-query); s_ij = scale · q_i·k_j, causal keeps j ≤ i + (S − T)
 * (bottom-right aligned) and a window W > 0 (only with causal) also
 * j > i + (S − T) − W: each query sees at most W keys, itself included;
 * out_i = Σ_j softmax_j(s_i) v_j, lse_i = log Σ_j e^{s_ij}; a row that
 * sees no key gets out = 0 and lse = −inf. lse [B,H,T] (stats dtype) and
 * the written outputs are contiguous. Forward writes out_w and lse_w (or
 * NULL); backward reads dout, q, k, v, out, lse and writes dq [B,H,T,D],
 * dk [B,Hkv,S,D], dv [B,Hkv,S,Dv] (each or NULL), dk and dv of a kv head
 * summing over the H/Hkv query heads that read it.
 */
typedef struct tfc_attn_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t B, H, Tq, S, D, Dv; /* Tq: query rows (T in the docs) */
    int64_t Hkv, window;        /* kv heads (divides H); keys a query sees, 0: no window (0 < window < S) */
    int32_t causal;
    double scale;
    tfc_attn_operand q, k, v, out, dout;
    const void *lse;
    void *out_w, *lse_w;
    void *dq, *dk, *dv;
    int32_t accumulate;
} tfc_attn_problem;

/* rotary position embedding */

/*
 * RoPE, HF's rotate-half form, on x [B,H,T,D] (a strided operand), D even,
 * h = D/2: for row (b, head, t), p = pos[b·pos_sb + t] and, in the angle
 * dtype (f64 for f64, else f32: p and inv_freq[i] as it, the product
 * rounded to it), a_i = p · inv_freq[i], i < h:
 *   forward:  y[i] = x[i] cos a_i − x[i+h] sin a_i,   y[i+h] = x[i+h] cos a_i + x[i] sin a_i
 *   backward: dx[i] (+)= dy[i] cos a_i + dy[i+h] sin a_i,   dx[i+h] (+)= dy[i+h] cos a_i − dy[i] sin a_i
 * pos i64 [B,T] (pos_sb = Tn) or [T] (pos_sb = 0), inv_freq [h] of the angle
 * dtype, y / dx contiguous [B,H,T,D]. A negative position is
 * TFC_ERR_INVALID_ARG before anything is written; pos_checked = 1: the
 * door knows none is (tfc_storage_range_within), a device may skip its check.
 */
typedef struct tfc_rope_problem {
    int32_t device;
    tfc_dtype dtype;
    int64_t B, H, Tn, D; /* Tn: tokens per sequence (T in the docs) */
    int64_t pos_sb;
    int32_t pos_checked;
    const int64_t *pos;
    const void *inv_freq;
    tfc_attn_operand x, dy;
    void *y, *dx;
    int32_t accumulate;
} tfc_rope_problem;

/* loss */

/*
 * Mean softmax cross-entropy of logits [n, c] against targets [n] (index
 * dtype i32/i64); rows whose target is ignore_index are skipped:
 *   loss = mean over valid rows of lse_r − logits[r, t_r]  (NaN when none is)
 * loss is one element, lse [n] (or NULL), both of the stats dtype. The
 * backward: dlogits[r, c] (+)= dloss/n_valid · (softmax(logits_r)_c − [c = t_r]),
 * 0 on ignored rows; dloss is one element of the stats dtype; lse from the
 * forward, or NULL (recomputed) where the backend allows.
 */
typedef struct tfc_cross_entropy_problem {
    int32_t device;
    tfc_dtype dtype, index_dtype;
    int64_t n, c;
    int64_t ignore_index;
    const void *logits, *targets;
    void *loss, *lse;
    const void *dloss, *lse_in; /* backward inputs */
    void *dlogits;
    int32_t accumulate;
} tfc_cross_entropy_problem;

/*
 * One row chunk of the fused linear + cross-entropy, in place on logits x
 * [n, c]: row_loss[r] (n host doubles) = lse_r − x[r, t_r], 0 on ignored
 * rows; with to_grad, x becomes scale · (softmax(x) − onehot(t)), zero on
 * ignored rows. Targets were validated by the caller.
 */
typedef struct tfc_ce_rows_problem {
    int32_t device;
    tfc_dtype dtype, index_dtype;
    int64_t n, c;
    int64_t ignore_index;
    void *x;
    const void *targets;
    int32_t to_grad;
    double scale;
    double *row_loss;
} tfc_ce_rows_problem;

/* optimizer */

/*
 * One parameter of a fused optimizer pass: all arrays contiguous, of one
 * dtype, laid end to end in one index range (start = the previous start +
 * its n) so a backend can split the whole range, not each parameter.
 */
typedef struct tfc_optim_seg {
    void *param;
    const void *grad;
    void *buf[3];  /* SGD: momentum_buffer; Adam: exp_avg, exp_avg_sq, max_exp_avg_sq */
    int64_t n;     /* elements (> 0) */
    int64_t start; /* index of element 0 in the fused range */
    tfc_dtype dtype;
    int32_t first; /* SGD: the momentum buffer is new this step (buf = d, as torch) */
    int64_t step;  /* this parameter's step count t, 1 on its first update */
    double lr, weight_decay;
    double step_size; /* Adam: lr / (1 − β1^t) */
    double bc2_sqrt;  /* Adam: √(1 − β2^t) */
} tfc_optim_seg;

typedef enum tfc_optim_rule { TFC_OPTIM_RULE_SGD = 0, TFC_OPTIM_RULE_ADAM = 1 } tfc_optim_rule;

/*
 * One optimizer step over nseg segments; the per-element rules (PyTorch
 * 1.13's rounding order) are in lib/cpu/optim_kernels.h and docs/OPTIM.md.
 */
typedef struct tfc_optim_problem {
    int32_t device;
    tfc_optim_rule rule;
    double momentum, dampening; /* SGD */
    double beta1, beta2, eps;   /* Adam */
    int32_t nesterov;           /* SGD */
    int32_t amsgrad;            /* Adam */
    int32_t decoupled;          /* Adam: AdamW's p ← p·(1 − lr·wd) instead of L2 */
    int32_t maximize;           /* d = −g */
    const tfc_optim_seg *segs;
    int64_t nseg;
} tfc_optim_problem;

/*
 * The global L2 norm of the segments' grads into *norm (host): NaN when an
 * element is NaN, +Inf when one is infinite; *overflow = 1 when the
 * elements are finite but the norm exceeds the dtype's range. grad_scale
 * multiplies every grad by c in place (the grads are written through the
 * const pointers).
 */
typedef struct tfc_grad_norm_problem {
    int32_t device;
    const tfc_optim_seg *segs;
    int64_t nseg;
    double c;     /* grad_scale */
    double *norm; /* grad_norm */
    int32_t *overflow;
} tfc_grad_norm_problem;

/* quantized weights */

/*
 * Quantized weights W [N, K] in format (TFC_QFORMAT_INT8: codes [N, K]
 * int8, scales [N]; TFC_QFORMAT_INT4: codes [N, K/2] two a byte, low nibble
 * first, value = nibble − 8, scales [N, K/group]; include/tfcore/quant.h has
 * the layouts byte by byte). Float buffers have dtype (f32).
 *   quantize:   codes, scales ← w, element (n, k) of w at w + n·w_sn + k·w_sk
 *               (w_sn, w_sk: element strides; the transposed layout is just
 *               other strides). A non-finite element is TFC_ERR_NONFINITE.
 *   dequantize: w_out (contiguous [N, K], or [K, N] when out_in) ← codes·scale.
 *   qlinear:    y [M, N] = x [M, K] · Wᵀ + b [N] (b or NULL), f32
 *               accumulation of the dequantized products; x, y contiguous.
 */
typedef struct tfc_quant_problem {
    int32_t device;
    tfc_dtype dtype;
    int32_t format; /* tfc_qformat */
    int64_t N, K, group;
    const void *w;
    int64_t w_sn, w_sk;
    void *w_out;
    int32_t out_in;
    void *codes, *scales; /* written by quantize, read by the others */
    int64_t M;
    const void *x, *b;
    void *y;
} tfc_quant_problem;

/* collectives */

/*
 * One collective on device memory (the coll_* entries): contiguous buffers
 * of dtype (f32, f64, bf16, f16, i32, i64) on device; the entry returns
 * once the result is in place.
 *   all_reduce:     recv[i] = sum (avg: / N) over ranks of send[i], count elements (send == recv: in place)
 *   broadcast:      recv[i] = root's send[i], count elements (in place)
 *   all_gather:     recv[r*count + i] = rank r's send[i]
 *   reduce_scatter: recv[i] = sum (avg) over ranks q of q's send[rank*count + i]
 */
#define TFC_COLL_ID_BYTES 128
typedef struct tfc_coll_problem {
    void *comm; /* from coll_init */
    int32_t device;
    tfc_dtype dtype;
    int32_t avg; /* all_reduce, reduce_scatter: the average instead of the sum */
    int32_t root;
    const void *send;
    void *recv;
    int64_t count;
} tfc_coll_problem;

/* ---- the table ---------------------------------------------------------- */

/*
 * What a backend takes and how it wants its work shaped: the facts the
 * questions under "asking the table" answer from. dtype masks have bit
 * (1u << dtype) per dtype.
 */
typedef struct tfc_backend_caps {
    /* the float dtypes its kernels take (`dtype` of every problem but the gemm's) */
    uint32_t float_dtypes;
    /* the dtypes of A and B the gemm entry takes: float_dtypes, plus bf16 on the CPU (lib/cpu/gemm_bf16.c) */
    uint32_t gemm_dtypes;
    /* bit (1u << e) for each tfc_gemm_epilogue e != NONE the gemm entry fuses (CUDA: BIAS, through cuBLASLt) */
    uint32_t gemm_epilogues;
    /* 1: stats buffers are f32 whatever the input dtype (CUDA); 0: they have the input's dtype (the CPU) */
    int32_t stats_f32;
    /*
     * n > 0 when the bf16 GEMM widens bf16 operands to f32 and runs the f32
     * GEMM for products whose op(A) has n rows or more (the CPU without AMX
     * tiles: n = TFC_GEMM_SMALL_M_MAX + 1, above its small-M kernel); 0
     * where it multiplies bf16 itself (tensor cores, AMX tiles). Read by
     * tfc_backend_bf16_operands.
     */
    int32_t gemm_bf16_widen_rows;
    /*
     * The multiple of output columns a GEMM runs fastest at when a caller
     * may pad them (CUDA 64: 16-byte rows, whole tiles); 0 = no padding.
     * Read by tfc_backend_pad_cols.
     */
    int32_t gemm_pad_cols;
    /*
     * The dtype the attention entries compute f32 attention in under bf16
     * autocast: TFC_DTYPE_BF16 where they have bf16 tensor-core kernels
     * (CUDA's flash kernels; PyTorch's CUDA autocast likewise runs SDPA in
     * bf16); 0 or TFC_DTYPE_F32 keeps f32. Read by tfc_backend_autocast_dtype.
     */
    int32_t autocast_attention;
} tfc_backend_caps;

typedef struct tfc_backend {
    uint32_t struct_size; /* sizeof(tfc_backend) as its builder saw it */
    uint32_t abi_version; /* TFC_BACKEND_ABI */
    const char *name;     /* "cpu", "cuda": messages say "<name>:<device>" */
    tfc_backend_caps caps;

    /* device */
    const char *(*describe)(void); /* e.g. "NVIDIA H200 (sm_90, 139 GiB)" */
    int32_t (*device_count)(void);
    const char *(*last_error)(void); /* the message of the calling thread's last failed entry */
    tfc_status (*synchronize)(int32_t device);
    /*
     * The native stream (a CUstream / cudaStream_t) device's entries are
     * queued on, in call order, or NULL when it cannot be made: for timing
     * with CUDA events and for handing work to another CUDA library. NULL
     * entry on the CPU.
     */
    void *(*native_stream)(int32_t device);

    /* memory (bytes) */
    tfc_status (*alloc)(int32_t device, size_t nbytes, void **out);
    void (*free)(int32_t device, void *p, size_t nbytes);
    tfc_status (*memset0)(int32_t device, void *p, size_t nbytes);
    tfc_status (*memcpy)(int32_t device, void *dst, const void *src, size_t nbytes, tfc_memcpy_kind kind);

    /* data movement: copies, fills and draws, indexed reads and writes */
    tfc_status (*copy)(const tfc_copy_problem *p);
    tfc_status (*fill)(const tfc_fill_problem *p);
    tfc_status (*random)(const tfc_random_problem *p);
    tfc_status (*multinomial)(const tfc_multinomial_problem *p);
    tfc_status (*gather)(const tfc_index_problem *p);  /* gather, index_select */
    tfc_status (*scatter)(const tfc_index_problem *p); /* scatter_add, index_put */
    tfc_status (*embedding_forward)(const tfc_embedding_problem *p);
    tfc_status (*embedding_backward)(const tfc_embedding_problem *p);

    /* elementwise */
    tfc_status (*map)(const tfc_map_problem *p);
    tfc_status (*gelu_forward)(const tfc_gelu_problem *p);
    tfc_status (*gelu_backward)(const tfc_gelu_problem *p);
    tfc_status (*dropout)(const tfc_dropout_problem *p);
    tfc_status (*swiglu_forward)(const tfc_swiglu_problem *p);
    tfc_status (*swiglu_backward)(const tfc_swiglu_problem *p);

    /* reductions */
    tfc_status (*reduce)(const tfc_reduce_problem *p);
    tfc_status (*reduce_scatter)(const tfc_scatter_problem *p); /* max/min backward */
    tfc_status (*cumsum)(const tfc_cumsum_problem *p);
    tfc_status (*topk)(const tfc_topk_problem *p);
    tfc_status (*topk_backward)(const tfc_topk_problem *p);

    /* GEMM and a linear layer's bias */
    tfc_status (*gemm)(const tfc_gemm_problem *p);
    tfc_status (*bias_rows)(const tfc_bias_problem *p);
    tfc_status (*bias_grad)(const tfc_bias_problem *p);

    /* normalization */
    tfc_status (*layernorm_forward)(const tfc_layernorm_problem *p);
    tfc_status (*layernorm_backward)(const tfc_layernorm_problem *p);
    tfc_status (*rmsnorm_forward)(const tfc_rmsnorm_problem *p);
    tfc_status (*rmsnorm_backward)(const tfc_rmsnorm_problem *p);
    tfc_status (*softmax_forward)(const tfc_softmax_problem *p);
    tfc_status (*softmax_backward)(const tfc_softmax_problem *p);

    /* attention */
    tfc_status (*attention_forward)(const tfc_attn_problem *p);
    tfc_status (*attention_backward)(const tfc_attn_problem *p);

    /* rotary position embedding */
    tfc_status (*rope_forward)(const tfc_rope_problem *p);
    tfc_status (*rope_backward)(const tfc_rope_problem *p);

    /* loss */
    tfc_status (*cross_entropy_forward)(const tfc_cross_entropy_problem *p);
    tfc_status (*cross_entropy_backward)(const tfc_cross_entropy_problem *p);
    tfc_status (*cross_entropy_rows)(const tfc_ce_rows_problem *p); /* NULL: the fused LM head composes */

    /* optimizer */
    tfc_status (*optim_step)(const tfc_optim_problem *p);
    tfc_status (*grad_norm)(const tfc_grad_norm_problem *p);
    tfc_status (*grad_scale)(const tfc_grad_norm_problem *p);

    /* quantized weights (include/tfcore/quant.h) */
    tfc_status (*quantize)(const tfc_quant_problem *p);
    tfc_status (*dequantize)(const tfc_quant_problem *p);
    tfc_status (*qlinear)(const tfc_quant_problem *p);

    /*
     * Collectives on this device's memory across the processes of a job
     * (NCCL in the CUDA module; NULL on the CPU, whose collectives lib/dist
     * runs through MPI on host memory). A communicator is made on every rank
     * from the id rank 0 creates (coll_unique_id writes TFC_COLL_ID_BYTES
     * bytes), which lib/dist broadcasts over MPI.
     */
    tfc_status (*coll_unique_id)(void *id);
    tfc_status (*coll_init)(const void *id, int32_t rank, int32_t size, int32_t device, void **comm);
    void (*coll_release)(void *comm);
    tfc_status (*coll_all_reduce)(const tfc_coll_problem *p);
    tfc_status (*coll_broadcast)(const tfc_coll_problem *p);
    tfc_status (*coll_all_gather)(const tfc_coll_problem *p);
    tfc_status (*coll_reduce_scatter)(const tfc_coll_problem *p);
} tfc_backend;

/*
 * The entry point a backend module exports (dlsym name
 * "tfc_backend_module_get"): its table when abi_version is the version it
 * was built for, else NULL.
 */
typedef const tfc_backend *(*tfc_backend_module_get_fn)(uint32_t abi_version);

/*
 * The table of module `path` (get: its tfc_backend_module_get, or NULL when
 * it exports none) into *out when it speaks this library's TFC_BACKEND_ABI.
 * Else TFC_ERR_DEVICE, *out untouched and why (n bytes) saying so, naming
 * both versions: a module that refuses this version is asked for the
 * earlier ones to learn its own.
 */
tfc_status tfc_backend_check_module(tfc_backend_module_get_fn get, const char *path, const tfc_backend **out, char *why,
                                    size_t n);

/* ---- asking the table --------------------------------------------------- */

/* 1 when b's kernels take float dtype dt. */
static inline int tfc_backend_takes(const tfc_backend *b, tfc_dtype dt) {
    return (unsigned)dt < 32 && ((b->caps.float_dtypes >> (unsigned)dt) & 1u);
}

/* 1 when b's gemm entry takes A and B of dtype dt. */
static inline int tfc_backend_gemm_takes(const tfc_backend *b, tfc_dtype dt) {
    return (unsigned)dt < 32 && ((b->caps.gemm_dtypes >> (unsigned)dt) & 1u);
}

/* 1 when b's gemm entry fuses epilogue e (a tfc_gemm_epilogue other than NONE). */
static inline int tfc_backend_gemm_fuses(const tfc_backend *b, tfc_gemm_epilogue e) {
    return e != TFC_GEMM_EPI_NONE && (unsigned)e < 32 && ((b->caps.gemm_epilogues >> (unsigned)e) & 1u);
}

/* The dtype of the statistics a fused kernel saves for inputs of dtype dt. */
static inline tfc_dtype tfc_backend_stats_dtype(const tfc_backend *b, tfc_dtype dt) {
    return b->caps.stats_f32 ? TFC_DTYPE_F32 : dt;
}

/*
 * The storage in which b's gemm entry wants operands holding bf16 values
 * (bf16 autocast: the GEMM multiplies bf16(A) · bf16(B) with f32
 * accumulation into f32 C) for products whose op(A) has m rows, or m or
 * more for operands several products share (INT64_MAX: all of them):
 *   TFC_DTYPE_F32  bf16 values in f32 storage, for the f32 gemm: where the
 *                  bf16 gemm would widen bf16 to f32 anyway. A product of
 *                  two bf16 values is exact in f32, so this is the same
 *                  sum without a round trip through bf16 storage.
 *   TFC_DTYPE_BF16 bf16 storage, for the bf16 gemm with c_f32 = 1: where
 *                  it multiplies bf16 itself.
 *   -1             neither (no bf16 gemm).
 */
int32_t tfc_backend_bf16_operands(const tfc_backend *b, int64_t m);

/* The dtype b's attention entries compute attention on inputs of dtype dt in under bf16 autocast. */
tfc_dtype tfc_backend_autocast_dtype(const tfc_backend *b, tfc_dtype dt);

/* n rounded up to the multiple of GEMM output columns b runs fastest at (n where it pads nothing). */
int64_t tfc_backend_pad_cols(const tfc_backend *b, int64_t n);

/*
 * How a GEMM addresses a row-major rows × cols matrix whose element strides
 * are (rs, cs): rows contiguous → *trans = 0, *ld = rs; columns contiguous
 * (a transposed view) → *trans = 1, *ld = cs. Returns 0 (outputs untouched)
 * when neither holds and the operand must be compacted first.
 */
int tfc_gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld);

/* "f32 and f64" (conj "and"): the float dtypes b takes, for messages (a thread-local buffer). */
const char *tfc_backend_dtype_list(const tfc_backend *b, const char *conj);
/* The same for any mask of dtype bits (b->caps.gemm_dtypes). */
const char *tfc_dtype_mask_list(uint32_t mask, const char *conj);

/* ---- running an entry --------------------------------------------------- */

/*
 * TFC_ERR_UNSUPPORTED: "fn: <entry> is not implemented on <name>:<device> for <dtype>".
 * dtype < 0 leaves the dtype out.
 */
tfc_status tfc_backend_missing(const char *fn, const tfc_backend *b, int32_t device, const char *entry, int32_t dtype);

/*
 * s, with b's message of the failed entry made the library's: "fn: msg" on
 * the CPU (whose kernels write the message themselves), "fn: <name>:<device>
 * <entry>: msg" for a module.
 */
tfc_status tfc_backend_done(const char *fn, const tfc_backend *b, int32_t device, const char *entry, tfc_status s);

/*
 * Run entry `entry` of backend b on problem p (which has `device` and
 * `dtype` fields), for the public function fn.
 */
#define TFC_BACKEND_RUN(fn, b, entry, p)                                          \
    ((b)->entry ? tfc_backend_done((fn), (b), (p)->device, #entry, (b)->entry(p)) \
                : tfc_backend_missing((fn), (b), (p)->device, #entry, (int32_t)(p)->dtype))
/* The same for problems whose dtype lives elsewhere (a view's, a segment's): named by dtype. */
#define TFC_BACKEND_RUN_DT(fn, b, entry, p, dtype)                                \
    ((b)->entry ? tfc_backend_done((fn), (b), (p)->device, #entry, (b)->entry(p)) \
                : tfc_backend_missing((fn), (b), (p)->device, #entry, (int32_t)(dtype)))

#endif
