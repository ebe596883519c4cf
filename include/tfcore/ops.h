/*
 * tfcore/ops.h — differentiable ops on tensors.
 *
 * Every op takes the graph first (NULL = record nothing, like
 * torch.no_grad) and returns a new tensor through its last argument.
 * Inputs may have any strides. Binary ops broadcast with numpy rules and
 * need both operands of the same dtype and device. Math ops work on f32
 * and f64 (f64 is what gradcheck uses). Errors name the op, the argument
 * and the shapes; on error *out is untouched and nothing is recorded.
 *
 * Views (reshape when possible, view, permute, transpose, slice, narrow,
 * expand, squeeze, unsqueeze, flatten) share storage with their input and
 * never copy; gradients flow through them.
 *
 * Thread-safety: ops on distinct graphs may run concurrently; one graph is
 * used by one thread at a time.
 */
#ifndef TFCORE_OPS_H
#define TFCORE_OPS_H

#include "tfcore/core.h"
#include "tfcore/graph.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, broadcasting ------------------------------------------ */

/* out = a + b, a − b, a ⊙ b, a / b (broadcast). */
TFC_API TFC_NODISCARD tfc_status tfc_add(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                         tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_sub(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                         tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_mul(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                         tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_div(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                         tfc_tensor **out);
/* out = x + s, x · s, s − x, s / x, x^s for a scalar s. */
TFC_API TFC_NODISCARD tfc_status tfc_add_scalar(tfc_graph *g /* nullable */, const tfc_tensor *x, double s,
                                                tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_mul_scalar(tfc_graph *g /* nullable */, const tfc_tensor *x, double s,
                                                tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_rsub_scalar(tfc_graph *g /* nullable */, const tfc_tensor *x, double s,
                                                 tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_rdiv_scalar(tfc_graph *g /* nullable */, const tfc_tensor *x, double s,
                                                 tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_pow_scalar(tfc_graph *g /* nullable */, const tfc_tensor *x, double s,
                                                tfc_tensor **out);

/* Unary maps: −x, eˣ, ln x, √x, 1/√x, tanh x, σ(x) = 1/(1+e⁻ˣ), max(x, 0). */
TFC_API TFC_NODISCARD tfc_status tfc_neg(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_exp(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_log(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_sqrt(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_rsqrt(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_tanh(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_sigmoid(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_relu(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);

/* GELU approximations for tfc_gelu. */
#define TFC_GELU_ERF 0  /* x Φ(x), exact */
#define TFC_GELU_TANH 1 /* 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), GPT-2's */
TFC_API TFC_NODISCARD tfc_status tfc_gelu(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t approximate,
                                          tfc_tensor **out);

/* ---- gated MLP activations (Llama family) ---- */

/*
 * SiLU (swish), elementwise: out = x · σ(x), d/dx = σ(x)(1 + x(1 − σ(x))).
 * σ is computed from e^(−|x|), so no exp overflows for any finite x. Saves
 * x. On the map entry of every backend (f32/f64 on the CPU, f32/bf16 on
 * CUDA); create_graph differentiates it again.
 */
TFC_API TFC_NODISCARD tfc_status tfc_silu(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
/*
 * SwiGLU, out = silu(gate) ⊙ up (Llama's MLP: silu(gate_proj(x)) ·
 * up_proj(x)) by the fused kernel of tfc_swiglu_forward. gate and up have
 * one shape [..., F] (at least 1-d), dtype and device; out is a new
 * contiguous [..., F]. Either may be a view: rows of the last dim with unit
 * stride along it and one stride between rows (a narrow of the last dim of
 * a [..., 2F] tensor, say) are read in place, other layouts through a
 * temporary contiguous copy. Saves gate and up; the backward is
 * tfc_swiglu_backward, and create_graph differentiates it again. Errors:
 * NULL gate/up/out (TFC_ERR_INVALID_ARG), a 0-d gate or shapes that differ
 * (TFC_ERR_SHAPE), dtypes that differ or are not float on the device
 * (TFC_ERR_DTYPE), mixed devices (TFC_ERR_DEVICE).
 */
TFC_API TFC_NODISCARD tfc_status tfc_swiglu(tfc_graph *g /* nullable */, const tfc_tensor *gate, const tfc_tensor *up,
                                            tfc_tensor **out);
/*
 * SwiGLU of one [..., 2F] tensor whose last dim holds gate then up (the
 * output of one GEMM with gate_proj's and up_proj's weights stacked):
 * out [..., F] = silu(gate_up[..., :F]) ⊙ gate_up[..., F:]. The halves are
 * read in place, and the backward writes d(gate_up) [..., 2F] with one
 * kernel call, dgate into its first half and dup into its second. A last
 * dim that is odd is TFC_ERR_SHAPE; other errors as tfc_swiglu.
 */
TFC_API TFC_NODISCARD tfc_status tfc_swiglu_fused(tfc_graph *g /* nullable */, const tfc_tensor *gate_up,
                                                  tfc_tensor **out);

/* ---- reductions ------------------------------------------------------------ */

/*
 * Reduce over the ndims dims listed in dims (negative counts from the end;
 * ndims == 0 with dims NULL means all dims). keepdim keeps them as size 1.
 * Integer and bool x (i32, i64, u8, bool) as in PyTorch 1.13: tfc_sum gives
 * i64, summed exactly (wrapping on int64 overflow, as torch); tfc_max and
 * tfc_min keep x's dtype; tfc_mean and tfc_var refuse them (TFC_ERR_DTYPE,
 * cast to a float dtype first). Not differentiable for those dtypes.
 */
TFC_API TFC_NODISCARD tfc_status tfc_sum(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                         const int32_t *dims /* nullable when ndims == 0 */, int32_t ndims,
                                         int32_t keepdim, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_mean(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                          const int32_t *dims /* nullable when ndims == 0 */, int32_t ndims,
                                          int32_t keepdim, tfc_tensor **out);
/* Max / min values; the gradient goes to the first extremal element. */
TFC_API TFC_NODISCARD tfc_status tfc_max(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                         const int32_t *dims /* nullable when ndims == 0 */, int32_t ndims,
                                         int32_t keepdim, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_min(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                         const int32_t *dims /* nullable when ndims == 0 */, int32_t ndims,
                                         int32_t keepdim, tfc_tensor **out);
/* Variance Σ(x − mean)² / (n − correction) (correction 1 = unbiased, torch's default). */
TFC_API TFC_NODISCARD tfc_status tfc_var(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                         const int32_t *dims /* nullable when ndims == 0 */, int32_t ndims,
                                         int32_t correction, int32_t keepdim, tfc_tensor **out);
/*
 * Index (i64) of the first maximum along dim. Not differentiable. x is a
 * float dtype, i32, i64 or u8; bool is refused (TFC_ERR_DTYPE), as in torch.
 */
TFC_API TFC_NODISCARD tfc_status tfc_argmax(const tfc_tensor *x, int32_t dim, int32_t keepdim, tfc_tensor **out);
/*
 * Index (i64) of the first minimum along dim: tfc_argmax's contract with
 * the minimum. Errors as tfc_argmax (NULL x or out: TFC_ERR_INVALID_ARG,
 * an empty dim: TFC_ERR_SHAPE). Thread-safe as every op on distinct outputs.
 */
TFC_API TFC_NODISCARD tfc_status tfc_argmin(const tfc_tensor *x, int32_t dim, int32_t keepdim, tfc_tensor **out);

/* ---- softmax family -------------------------------------------------------- */

/* Numerically stable (max-subtracted) softmax / log_softmax over dim. */
TFC_API TFC_NODISCARD tfc_status tfc_softmax(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                             tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_log_softmax(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                                 tfc_tensor **out);

/* ---- linear algebra ---------------------------------------------------------- */

/*
 * Matrix product with numpy.matmul semantics: 1-D operands are promoted
 * (and the added dim removed), leading batch dims broadcast. a [..., M, K],
 * b [..., K, N] → out [..., M, N]. Transposed operands (unit stride on
 * either of the last two dims) go to BLAS as flags, never copied.
 * Dtypes: a and b share one (TFC_ERR_DTYPE naming both otherwise): f32, f64
 * or bf16 on the CPU, f32 or bf16 on CUDA. bf16 · bf16 gives bf16 computed
 * with f32 accumulation and one rounding (torch.matmul's semantics); on the
 * CPU it runs on any CPU (lib/cpu/gemm_bf16.c), though the other CPU ops
 * take f32/f64 only. Gradients of a bf16 matmul are bf16.
 */
TFC_API TFC_NODISCARD tfc_status tfc_matmul(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                            tfc_tensor **out);

/*
 * Explicit backward of out = a · b (matmul semantics as above) on
 * caller-owned buffers, no graph: da = dout · bᵀ, db = aᵀ · dout, each
 * summed over the batch dims its operand was broadcast along. da/db must
 * have a's/b's shape and dtype (either may be NULL = not needed), dout
 * the operands' dtype. TFC_GRAD_ACCUMULATE adds into them instead of
 * overwriting; for bf16 on the CPU, which has no bf16 elementwise add, it
 * is TFC_ERR_UNSUPPORTED (nothing written).
 */
TFC_API TFC_NODISCARD tfc_status tfc_matmul_backward(const tfc_tensor *dout, const tfc_tensor *a, const tfc_tensor *b,
                                                     tfc_tensor *da /* nullable */, tfc_tensor *db /* nullable */,
                                                     uint32_t flags);

/* ---- neural-network layers --------------------------------------------------- */

/*
 * Linear layer out[..., out] = x[..., in] · w + b, with w in the Conv1D
 * layout [in, out] — GPT-2's, the TRANSPOSE of torch.nn.Linear's
 * [out, in] weight — and b [out] or NULL. x's leading dims fold into one
 * GEMM; the bias is written into the output before the GEMM accumulates
 * onto it, so no separate add runs. Any strides (a transposed w goes to
 * BLAS as a flag). Backward: dx = dy·wᵀ, dw = Σ xᵀ·dy over the leading
 * dims, db = Σ dy over all but the last dim, each computed only when that
 * input requires grad. Same results as tfc_matmul followed by tfc_add up to
 * float rounding. x, w, b: one float dtype the device takes (f32/f64 on the
 * CPU, f32/bf16 on CUDA), one device. *out is a new contiguous tensor
 * owned by the caller. Errors: TFC_ERR_INVALID_ARG (NULL x/w/out),
 * TFC_ERR_DTYPE (a dtype the device does not take, or dtypes differ),
 * TFC_ERR_SHAPE (w not 2-D, x's last dim ≠ w's rows, b not [out]),
 * TFC_ERR_DEVICE (tensors on different devices, or no usable GPU),
 * TFC_ERR_UNSUPPORTED (w dims above 2^31). Thread-safety as for every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_linear(tfc_graph *g /* nullable */, const tfc_tensor *x, const tfc_tensor *w,
                                            const tfc_tensor *b /* nullable */, tfc_tensor **out);

/* LayerNorm over the last dim: (x − mean)/√(var + eps) ⊙ weight + bias; weight/bias may be NULL. */
TFC_API TFC_NODISCARD tfc_status tfc_layernorm(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                               const tfc_tensor *weight /* nullable */,
                                               const tfc_tensor *bias /* nullable */, double eps, tfc_tensor **out);
/*
 * RMSNorm over the last dim (Llama's; torch 2.x's F.rms_norm):
 *   out = x / √(mean(x², last dim) + eps) ⊙ weight,
 * computed by tfc_rmsnorm_forward (kernels.h: formulas, dtypes, errors);
 * weight [C] or NULL, eps finite and > 0. Backward gives x and weight their
 * gradients (tfc_rmsnorm_backward), and is itself differentiable
 * (create_graph). *out is a new tensor of x's shape, dtype and device.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rmsnorm(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                             const tfc_tensor *weight /* nullable */, double eps, tfc_tensor **out);
/* out[..., :] = table[ids[...], :]; ids i32 or i64, bounds-checked. */
TFC_API TFC_NODISCARD tfc_status tfc_embedding(tfc_graph *g /* nullable */, const tfc_tensor *table,
                                               const tfc_tensor *ids, tfc_tensor **out);
/*
 * Mean cross-entropy of logits [N, C] (or [..., C], flattened) against
 * integer targets [N] (i32/i64); rows whose target == ignore_index are
 * skipped. Fused log-softmax + NLL; out is a scalar.
 */
TFC_API TFC_NODISCARD tfc_status tfc_cross_entropy(tfc_graph *g /* nullable */, const tfc_tensor *logits,
                                                   const tfc_tensor *targets, int64_t ignore_index, tfc_tensor **out);
/*
 * An LM head and its loss in one op, never holding the logits:
 *   loss = Σ_{r: t_r != ignore_index} (logsumexp_v z_rv − z_{r,t_r}) / n_valid,   z = h · wᵀ,
 * the same value and gradients as tfc_cross_entropy(tfc_matmul(h, wᵀ),
 * targets, ignore_index) (NaN, with zero gradients, when every row is
 * ignored; N = 0 counts as that). h [N, C] and w [V, C] (nn.Linear /
 * embedding layout; any strides, a transposed view included) are f32 or f64
 * of one dtype, C >= 1, V >= 1; targets holds N i32/i64 class ids (any
 * shape), each in [0, V) or equal to ignore_index. *loss receives a new
 * scalar of h's dtype.
 * Memory: rows go in chunks (at least 256 rows, more while a chunk's
 * [rows, V] logits stay under 8 MiB), one chunk buffer at a time; when g
 * records and h or w requires grad, the gradients are computed in the same
 * pass (dh [N, C], dW [V, C], only those needed) and kept on the graph until
 * it is cleared; backward scales them by the loss's gradient. Neither the
 * [N, V] logits nor their gradient is ever allocated. On CUDA (h, w and
 * targets all on one CUDA device, f32 or bf16) it is the unfused
 * composition above (matmul, then the fused softmax + cross-entropy
 * kernel), which does hold the logits and their gradient; the loss is f32.
 * Errors: NULL arguments (TFC_ERR_INVALID_ARG), h/w not f32/f64 on the CPU
 * (f32/bf16 on CUDA) or of different dtypes, tensors on different devices
 * or CUDA unavailable (TFC_ERR_DEVICE), targets not i32/i64 (TFC_ERR_DTYPE), shapes as above
 * (TFC_ERR_SHAPE), a target out of range (TFC_ERR_INVALID_ARG), dims above
 * 2^31 (TFC_ERR_UNSUPPORTED), TFC_ERR_OOM; on error *loss is untouched and
 * nothing is recorded. Thread-safety: as every op (distinct graphs may be
 * used concurrently).
 */
TFC_API TFC_NODISCARD tfc_status tfc_linear_cross_entropy(tfc_graph *g /* nullable */, const tfc_tensor *h,
                                                          const tfc_tensor *w, const tfc_tensor *targets,
                                                          int64_t ignore_index, tfc_tensor **loss);
/*
 * Scaled dot-product attention softmax(scale · q kᵀ + mask) v with
 * q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv] → [B,H,T,Dv]. causal masks key j
 * for query i when j > i + (S − T). Flash-style: saves only out and the
 * per-row log-sum-exp for backward.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention(tfc_graph *g /* nullable */, const tfc_tensor *q, const tfc_tensor *k,
                                               const tfc_tensor *v, int32_t causal, double scale, tfc_tensor **out);

/*
 * What the _ex attention functions (tfc_attention_ex here,
 * tfc_attention_forward_ex / tfc_attention_backward_ex in kernels.h) take
 * beyond causal and scale. Set struct_size = sizeof(tfc_attention_options)
 * (TFC_ATTENTION_OPTIONS_INIT does) so later versions can append fields;
 * zero fields and a NULL pointer mean the defaults.
 *
 *   window: 0 (default) = no window. W > 0 needs causal and keeps for query
 *     i only the keys j > i + (S − T) − W besides the causal j <= i + (S − T):
 *     each query sees at most W keys, itself included — Hugging Face's
 *     sliding window (Mistral, Qwen2: kv_idx > q_idx − sliding_window,
 *     q_idx being the query's position i + S − T, so a KV cache of S keys
 *     with T new queries is windowed as the whole sequence would be).
 *     W >= S hides nothing. Negative, or positive without causal:
 *     TFC_ERR_INVALID_ARG.
 */
typedef struct tfc_attention_options {
    uint32_t struct_size; /* sizeof(tfc_attention_options) */
    int64_t window;       /* keys a query sees at most (causal only); 0 = all */
} tfc_attention_options;

#define TFC_ATTENTION_OPTIONS_INIT \
    { (uint32_t)sizeof(tfc_attention_options), 0 }

/*
 * tfc_attention with grouped-query heads and the options above: q
 * [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv] → [B,H,T,Dv], where Hkv divides
 * H and query head h attends with kv head h / (H/Hkv) (Hugging Face's
 * repeat_kv order: kv head j serves query heads j·G .. j·G + G − 1, G =
 * H/Hkv; Hkv = 1 is multi-query attention). The kv heads are read in
 * place, never repeated; backward sums each kv head's dk, dv over its G
 * query heads. opts may be NULL (no window). Saves q, k, v, out and the
 * row log-sum-exp, as tfc_attention. Errors: as tfc_attention, plus Hkv
 * not dividing H or v's heads differing from k's (TFC_ERR_SHAPE, naming
 * the shapes), a bad window (TFC_ERR_INVALID_ARG), opts->struct_size not
 * one this library knows (TFC_ERR_VERSION); on error *out is untouched and
 * nothing is recorded. Thread-safety: as every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention_ex(tfc_graph *g /* nullable */, const tfc_tensor *q, const tfc_tensor *k,
                                                  const tfc_tensor *v, int32_t causal, double scale,
                                                  const tfc_attention_options *opts /* nullable */, tfc_tensor **out);
/*
 * Inverted dropout: zero each element with probability p and scale the rest
 * by 1/(1−p); the mask comes from the Philox stream (seed, offset), so the
 * same (seed, offset) gives the same mask, in forward and backward.
 * p == 0 returns x's values unchanged (a copy); p must be in [0, 1).
 */
TFC_API TFC_NODISCARD tfc_status tfc_dropout(tfc_graph *g /* nullable */, const tfc_tensor *x, double p, uint64_t seed,
                                             uint64_t offset, tfc_tensor **out);
/*
 * Rotary position embedding (HF's rotate-half form) of x [B,H,T,D] at
 * positions (i64 [T], [1,T] or [B,T]) with inv_freq [D/2]: the formula,
 * dtypes and errors of tfc_rope_forward (kernels.h). *out is a new
 * contiguous [B,H,T,D] tensor. Saves positions and inv_freq (not x); the
 * backward is the rotation by −angle (tfc_rope_backward), itself
 * differentiable (create_graph). Gradients flow to x only: inv_freq
 * requiring grad on a recording graph is TFC_ERR_INVALID_ARG.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rope(tfc_graph *g /* nullable */, const tfc_tensor *x, const tfc_tensor *positions,
                                          const tfc_tensor *inv_freq, tfc_tensor **out);

/* ---- selection and joining --------------------------------------------------- */

/* out = cond ? a : b elementwise (cond bool/u8, all three broadcast). */
TFC_API TFC_NODISCARD tfc_status tfc_where(tfc_graph *g /* nullable */, const tfc_tensor *cond, const tfc_tensor *a,
                                           const tfc_tensor *b, tfc_tensor **out);
/* out = mask ? value : x (mask bool/u8, broadcast to x). */
TFC_API TFC_NODISCARD tfc_status tfc_masked_fill(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                                 const tfc_tensor *mask, double value, tfc_tensor **out);
/* Join n tensors (same dtype, equal shapes except along dim) along dim. */
TFC_API TFC_NODISCARD tfc_status tfc_concat(tfc_graph *g /* nullable */, const tfc_tensor *const *xs, int32_t n,
                                            int32_t dim, tfc_tensor **out);
/*
 * Split x along dim into n pieces of the given sizes (summing to the dim's
 * size); outs[i] are views. outs must hold n pointers.
 */
TFC_API TFC_NODISCARD tfc_status tfc_split(tfc_graph *g /* nullable */, const tfc_tensor *x, const int64_t *sizes,
                                           int32_t n, int32_t dim, tfc_tensor **outs);
/*
 * The k largest (largest = 1) or smallest values along dim, sorted, and
 * their i64 indices. values are differentiable (gradient scattered back).
 */
TFC_API TFC_NODISCARD tfc_status tfc_topk(tfc_graph *g /* nullable */, const tfc_tensor *x, int64_t k, int32_t dim,
                                          int32_t largest, tfc_tensor **values, tfc_tensor **indices);

/* ---- views and layout ---------------------------------------------------------- */

/* View with a new shape; fails with TFC_ERR_SHAPE when strides don't allow it. One dim may be -1. */
TFC_API TFC_NODISCARD tfc_status tfc_view(tfc_graph *g /* nullable */, const tfc_tensor *x, const int64_t *dims,
                                          int32_t ndim, tfc_tensor **out);
/* Like tfc_view, but copies (to contiguous) when a view is impossible. */
TFC_API TFC_NODISCARD tfc_status tfc_reshape(tfc_graph *g /* nullable */, const tfc_tensor *x, const int64_t *dims,
                                             int32_t ndim, tfc_tensor **out);
/* Reorder dims: out dim i is x dim perm[i]. */
TFC_API TFC_NODISCARD tfc_status tfc_permute(tfc_graph *g /* nullable */, const tfc_tensor *x, const int32_t *perm,
                                             int32_t ndim, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_transpose(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim0,
                                               int32_t dim1, tfc_tensor **out);
/*
 * Elements start, start+step, ... < end along dim (python slicing: negative
 * start/end count from the end and are clamped; step >= 1).
 */
TFC_API TFC_NODISCARD tfc_status tfc_slice(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim, int64_t start,
                                           int64_t end, int64_t step, tfc_tensor **out);
/* length elements from start along dim (no clamping: out of range is an error). */
TFC_API TFC_NODISCARD tfc_status tfc_narrow(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                            int64_t start, int64_t length, tfc_tensor **out);
/* Broadcast to dims (size-1 dims stretched with stride 0; -1 keeps a size). */
TFC_API TFC_NODISCARD tfc_status tfc_expand(tfc_graph *g /* nullable */, const tfc_tensor *x, const int64_t *dims,
                                            int32_t ndim, tfc_tensor **out);
/* Remove dim (must have size 1). */
TFC_API TFC_NODISCARD tfc_status tfc_squeeze(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                             tfc_tensor **out);
/* Insert a size-1 dim at position dim (0..ndim). */
TFC_API TFC_NODISCARD tfc_status tfc_unsqueeze(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                               tfc_tensor **out);
/* Merge dims start..end (inclusive) into one (a view when strides allow, else a copy). */
TFC_API TFC_NODISCARD tfc_status tfc_flatten(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t start,
                                             int32_t end, tfc_tensor **out);
/* x itself (new reference) when contiguous, else a contiguous copy. */
TFC_API TFC_NODISCARD tfc_status tfc_contiguous(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
/* Convert to dtype (new tensor; gradient converted back for float dtypes). */
TFC_API TFC_NODISCARD tfc_status tfc_cast(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_dtype dtype,
                                          tfc_tensor **out);

/* ---- indexing ------------------------------------------------------------------- */
/*
 * Indices are i32 or i64 tensors on x's device and are not wrapped: as in
 * PyTorch, every index must lie in [0, size) of the dim it addresses (a
 * negative one is an error, not "from the end"). An index outside is
 * TFC_ERR_INVALID_ARG, "fn: index [shape] at flat position p is i, out of
 * range: outside [0, size) ...", found before anything is written. Bad
 * shapes are TFC_ERR_SHAPE, NULL pointers TFC_ERR_INVALID_ARG, tensors on
 * two devices TFC_ERR_DEVICE. CPU only so far: on CUDA the backend's
 * gather / scatter entries are missing and every call is
 * TFC_ERR_UNSUPPORTED. Outputs are new contiguous tensors owned by the
 * caller. Like every op, safe to call from several threads on distinct
 * graphs (the inputs are only read).
 */

/*
 * out = x with dim replaced by the entries index names (torch.index_select):
 * out[.., k, ..] = x[.., index[k], ..]; index is 1-D [K] (or 0-d, one
 * entry), out has x's shape with K at dim. x of any dtype (only float x
 * records). Backward: dx = zeros, dx[.., index[k], ..] += dout[.., k, ..]
 * (repeated indices accumulate).
 */
TFC_API TFC_NODISCARD tfc_status tfc_index_select(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                                  const tfc_tensor *index, tfc_tensor **out);
/*
 * torch.gather: out has index's shape, out[p] = x[p with p[dim] = index[p]].
 * index has x's number of dims and index.shape[d] <= x.shape[d] for every
 * d != dim. x of any dtype (only float x records). Backward: dx = zeros
 * scatter-added with dout by index (repeated indices accumulate).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gather(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                            const tfc_tensor *index, tfc_tensor **out);
/*
 * Out-of-place torch.scatter_add: out = a copy of x, then for every
 * position p of index: out[p with p[dim] = index[p]] += src[p]. x, index
 * and src have the same number of dims; index.shape[d] <= src.shape[d] for
 * every d and <= x.shape[d] for d != dim (src elements outside index's
 * shape are not read). x and src float, one dtype. Sums run in row-major
 * order of index (deterministic). Backward: dx = dout; dsrc = dout gathered
 * by index (zero outside index's shape).
 */
TFC_API TFC_NODISCARD tfc_status tfc_scatter_add(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                                 const tfc_tensor *index, const tfc_tensor *src, tfc_tensor **out);
/*
 * In place: for every position p of index, x's element at row-major
 * position index[p] (x's flat numbering, whatever its strides: x may be a
 * view, and the write goes through to its storage) becomes values[p]
 * (accumulate = 0) or gets values[p] added (accumulate = 1, float x only).
 * index has any shape, values (x's dtype) broadcasts to it. With repeated
 * indices and accumulate = 0 the last position in index's row-major order
 * wins (torch leaves that case undefined); with accumulate = 1 they all
 * add. This is what Python's `x[idx] = v` stands on. Records nothing: x's
 * version counter is bumped, so a saved use of x fails at backward; when g
 * records and x requires grad the call is refused (TFC_ERR_UNSUPPORTED:
 * the write would not be differentiated), so call it with g = NULL (no_grad)
 * on parameters. values and index must not overlap x's memory
 * (TFC_ERR_INVALID_ARG). Not thread-safe against other users of x.
 */
TFC_API TFC_NODISCARD tfc_status tfc_index_put(tfc_graph *g /* nullable */, tfc_tensor *x, const tfc_tensor *index,
                                               const tfc_tensor *values, int32_t accumulate);

/*
 * The positions of mask's nonzero elements (torch.nonzero): out is a new
 * i64 tensor [N, ndim] on mask's device, one row of coordinates per nonzero
 * element in row-major order ([N, 0] for a 0-d mask). mask of any dtype
 * and layout. Records nothing. N depends on the data, so the mask is read
 * on the host: a CUDA mask is copied there first (a synchronisation).
 * Errors: NULL pointers TFC_ERR_INVALID_ARG, TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_nonzero(const tfc_tensor *mask, tfc_tensor **out);
/*
 * torch.masked_select: the elements of x where mask (bool or u8,
 * broadcast to x's shape) is nonzero, as a new 1-D tensor in row-major
 * order. Differentiable: x is flattened (tfc_reshape) and the positions
 * picked with tfc_index_select, both recorded on g, so dx scatters dout
 * back. The mask is read on the host (as tfc_nonzero). Errors: a mask of
 * another dtype TFC_ERR_DTYPE; one that does not broadcast to x
 * TFC_ERR_SHAPE; x and mask on two devices TFC_ERR_DEVICE; CUDA x
 * TFC_ERR_UNSUPPORTED (no gather entry yet).
 */
TFC_API TFC_NODISCARD tfc_status tfc_masked_select(tfc_graph *g /* nullable */, const tfc_tensor *x,
                                                   const tfc_tensor *mask, tfc_tensor **out);
/* ---- more elementwise, comparisons, scans, sorting, sampling (issue #16) ------------ */

/*
 * Pointwise |x|, sgn(x), sin x, cos x, ⌊x⌋, ⌈x⌉ and round(x) (half to even,
 * as torch.round) into a new tensor of x's shape and dtype (f32/f64 on the
 * CPU, f32/bf16 on CUDA). Gradients as torch 1.13: abs dy·sgn(x) (0 at 0),
 * sin dy·cos x, cos −dy·sin x; sign, floor, ceil and round have gradient 0
 * (zeros, recorded so backward through them works). sign of ±0 and NaN is
 * 0, as torch 1.13. Errors: TFC_ERR_INVALID_ARG (NULL x or out),
 * TFC_ERR_DTYPE (a dtype the device does not take), TFC_ERR_DEVICE,
 * TFC_ERR_OOM; *out untouched on error. Thread-safety as every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_abs(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_sign(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_sin(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_cos(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_floor(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_ceil(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_round(tfc_graph *g /* nullable */, const tfc_tensor *x, tfc_tensor **out);

/*
 * out = min(max(x, min), max) (torch.clamp; pass -INFINITY / INFINITY for
 * a missing bound; min > max gives max everywhere). NaN in x stays NaN.
 * Gradient dy where min ≤ x ≤ max (1 at the bounds themselves, torch's
 * convention), 0 elsewhere. Errors as tfc_abs, plus TFC_ERR_INVALID_ARG
 * for a NaN bound. Records one node per finite bound.
 */
TFC_API TFC_NODISCARD tfc_status tfc_clamp(tfc_graph *g /* nullable */, const tfc_tensor *x, double min, double max,
                                           tfc_tensor **out);

/*
 * Elementwise maximum / minimum of a and b (broadcast; one float dtype and
 * device, as tfc_add). NaN in either gives NaN. Gradient as torch 1.13:
 * dy goes to the larger (smaller) operand and is split in half between
 * equal ones; each summed back to its operand's shape. Errors as tfc_add.
 */
TFC_API TFC_NODISCARD tfc_status tfc_maximum(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                             tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_minimum(tfc_graph *g /* nullable */, const tfc_tensor *a, const tfc_tensor *b,
                                             tfc_tensor **out);

/*
 * Comparisons a < b, a <= b, a > b, a >= b, a == b, a != b, broadcast,
 * into a new bool tensor (1 = true) on the operands' device. Not
 * differentiable: no graph, nothing recorded. Any dtypes: two tensors of
 * one float dtype the device takes compare in it; anything else (integers,
 * bool, mixed dtypes) is converted to f64 first (f32 on CUDA, which has no
 * f64: integers above 2^24 then compare inexactly). NaN compares unequal to
 * everything. The _scalar forms compare x with s, s first converted to the
 * dtype the comparison runs in (an f32 x compares with s rounded to f32,
 * as torch). CUDA: TFC_ERR_UNSUPPORTED for now (its copy entry does not
 * convert to bool). Errors: TFC_ERR_INVALID_ARG (NULL argument),
 * TFC_ERR_SHAPE (shapes do not broadcast), TFC_ERR_DEVICE (different
 * devices), TFC_ERR_OOM;
 * *out untouched on error. Thread-safety: any threads.
 */
TFC_API TFC_NODISCARD tfc_status tfc_lt(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_le(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_gt(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_ge(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_eq(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_ne(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_lt_scalar(const tfc_tensor *x, double s, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_le_scalar(const tfc_tensor *x, double s, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_gt_scalar(const tfc_tensor *x, double s, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_ge_scalar(const tfc_tensor *x, double s, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_eq_scalar(const tfc_tensor *x, double s, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_ne_scalar(const tfc_tensor *x, double s, tfc_tensor **out);

/*
 * any / all: whether any (every) element is non-zero over the ndims dims
 * listed in dims (negative counts from the end; ndims == 0 with dims NULL
 * = all dims), giving a bool tensor (keepdim keeps the dims as size 1).
 * Any dtype; NaN counts as non-zero; over no elements any is false and all
 * is true, as torch. Not differentiable; TFC_ERR_UNSUPPORTED on CUDA for
 * now, as the comparisons. Errors: TFC_ERR_INVALID_ARG (NULL x or out, a
 * dim out of range or listed twice), TFC_ERR_DEVICE,
 * TFC_ERR_OOM. Thread-safety: any threads.
 */
TFC_API TFC_NODISCARD tfc_status tfc_any(const tfc_tensor *x, const int32_t *dims /* nullable when ndims == 0 */,
                                         int32_t ndims, int32_t keepdim, tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_all(const tfc_tensor *x, const int32_t *dims /* nullable when ndims == 0 */,
                                         int32_t ndims, int32_t keepdim, tfc_tensor **out);

/*
 * Inclusive prefix sum along dim (torch.cumsum): out[..., j, ...] =
 * Σ_{k ≤ j} x[..., k, ...]; x's shape and dtype (f32/f64; summed in double
 * on the CPU). A 0-d x takes dim 0 or -1. Backward: the reversed prefix
 * sum of dy. Errors: TFC_ERR_INVALID_ARG (NULL x/out, dim out of range),
 * TFC_ERR_DTYPE, TFC_ERR_DEVICE, TFC_ERR_UNSUPPORTED (on CUDA: the cumsum
 * entry is CPU-only so far), TFC_ERR_OOM. Thread-safety as every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_cumsum(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                            tfc_tensor **out);

/*
 * triu / tril: x with the elements of each matrix (the last two dims)
 * below (above) diagonal zeroed: triu keeps column − row ≥ diagonal, tril
 * column − row ≤ diagonal (0 = the main diagonal, > 0 above it). The
 * gradient is dy under the same mask. Errors: TFC_ERR_INVALID_ARG (NULL
 * x/out), TFC_ERR_DTYPE, TFC_ERR_SHAPE (x has fewer than 2 dims),
 * TFC_ERR_DEVICE, TFC_ERR_OOM. Thread-safety as every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_triu(tfc_graph *g /* nullable */, const tfc_tensor *x, int64_t diagonal,
                                          tfc_tensor **out);
TFC_API TFC_NODISCARD tfc_status tfc_tril(tfc_graph *g /* nullable */, const tfc_tensor *x, int64_t diagonal,
                                          tfc_tensor **out);

/*
 * Sort along dim, ascending (descending != 0: descending), stably (equal
 * values keep their order; NaN sorts above every number, as torch): new
 * *values (x's dtype) and *indices (i64, positions along dim), x's shape.
 * values are differentiable (dy scattered back to the sorted positions).
 * A 0-d x takes dim 0 or -1. tfc_argsort gives only the indices and
 * records nothing. Errors: TFC_ERR_INVALID_ARG (NULL argument, dim out of
 * range), TFC_ERR_DTYPE (x not f32/f64), TFC_ERR_UNSUPPORTED (on CUDA, whose
 * topk entry is CPU-only), TFC_ERR_OOM; outputs untouched on error.
 */
TFC_API TFC_NODISCARD tfc_status tfc_sort(tfc_graph *g /* nullable */, const tfc_tensor *x, int32_t dim,
                                          int32_t descending, tfc_tensor **values, tfc_tensor **indices);
TFC_API TFC_NODISCARD tfc_status tfc_argsort(const tfc_tensor *x, int32_t dim, int32_t descending, tfc_tensor **out);

/*
 * One-hot encoding (torch.nn.functional.one_hot): ids (i64 or i32, any
 * shape, on any device) → new i64 [..., num_classes] on the ids' device,
 * 1 at the id's position and 0 elsewhere. num_classes -1 means max(ids) + 1.
 * The ids are read to the host once to be checked. Not differentiable.
 * Errors: TFC_ERR_INVALID_ARG (NULL argument, num_classes < -1, an id < 0
 * or >= num_classes, -1 with empty ids), TFC_ERR_DTYPE (ids not i32/i64),
 * TFC_ERR_SHAPE (ids already has TFC_MAX_DIMS dims), TFC_ERR_OOM.
 * Thread-safety: any threads.
 */
TFC_API TFC_NODISCARD tfc_status tfc_one_hot(const tfc_tensor *ids, int64_t num_classes, tfc_tensor **out);

/*
 * num_samples category indices per row of probs (1-D [n] → [num_samples],
 * 2-D [rows, n] → [rows, num_samples], i64), drawn with probability
 * proportional to the weights (non-negative, finite, not necessarily
 * normalised; torch.multinomial). Without replacement (replacement == 0)
 * a drawn category is not drawn again in its row. The randomness is the
 * Philox stream (seed, offset), as tfc_dropout: draw k of row r uses block
 * offset + r · num_samples + k, so the caller advances its offset by
 * rows · num_samples. Not differentiable. Errors: TFC_ERR_INVALID_ARG
 * (NULL argument; num_samples < 1; without replacement num_samples above n
 * or above a row's count of non-zero weights; a negative, NaN or infinite
 * weight; a row summing to 0 — nothing written), TFC_ERR_DTYPE (probs not
 * f32/f64), TFC_ERR_SHAPE (probs not 1-D/2-D or n == 0),
 * TFC_ERR_UNSUPPORTED (on CUDA: CPU-only so far), TFC_ERR_OOM.
 * Thread-safety: any threads.
 */
TFC_API TFC_NODISCARD tfc_status tfc_multinomial(const tfc_tensor *probs, int64_t num_samples, int32_t replacement,
                                                 uint64_t seed, uint64_t offset, tfc_tensor **out);
/* ---- bf16 mixed precision (autocast) ----------------------------------------- */

/*
 * The autocast Linear of bf16 mixed-precision training (what
 * torch.autocast('cpu', torch.bfloat16) does to a Linear):
 *   out[..., out] = bf16(x) · bf16(w) + b
 * with x, w (the f32 master weight, Conv1D layout [in, out]) and b ([out]
 * or NULL) f32; the GEMM operands are rounded to bf16 (round-to-nearest-
 * even) as they enter it, the products summed in f32, and out is a new
 * contiguous f32 tensor owned by the caller. w_bf16, when not NULL, is the
 * caller's bf16 copy of w (same shape), used as the rounded weight as is —
 * so a caller refreshes it once per optimizer step rather than rounding w
 * in every call; NULL rounds w here. Gradients go to x, w and b (never to
 * w_bf16): with dyb = bf16(dy), dx = dyb · bf16(w)ᵀ and dw = bf16(x)ᵀ · dyb
 * are f32 (f32 accumulation, so w's gradient accumulates in f32), db = Σ dy
 * in f32. Backward keeps the bf16 copy of x (half the bytes of x) and
 * w_bf16 (an in-place change of it before backward is an error then).
 * On the CPU the bf16 GEMM runs on any CPU (lib/cpu/gemm_bf16.c).
 * Errors: TFC_ERR_INVALID_ARG (NULL x/w/out), TFC_ERR_DTYPE (x, w or b not
 * f32; w_bf16 not bf16), TFC_ERR_SHAPE (w not 2-D, x's last dim ≠ w's rows,
 * w_bf16 not w's shape, b not [out]), TFC_ERR_DEVICE (tensors on different
 * devices), TFC_ERR_UNSUPPORTED (a backend without a bf16 GEMM, w dims
 * above 2^31), TFC_ERR_OOM; on error *out is untouched and nothing is
 * recorded. Thread-safety as for every op.
 */
TFC_API TFC_NODISCARD tfc_status tfc_linear_bf16(tfc_graph *g /* nullable */, const tfc_tensor *x, const tfc_tensor *w,
                                                 const tfc_tensor *w_bf16 /* nullable */,
                                                 const tfc_tensor *b /* nullable */, tfc_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_OPS_H */
