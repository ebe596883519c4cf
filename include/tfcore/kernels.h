/*
 * tfcore/kernels.h — the transformer's fused kernels as explicit forward and
 * backward functions on caller-owned tensors, with no autograd graph. This is
 * the door another training framework uses: it keeps its own tape and calls
 * these on its own buffers. The graph ops (ops.h) call the same functions,
 * and both run the kernel of the tensors' device (CPU or CUDA).
 *
 * Rules shared by every function below:
 *
 *  - dtypes: float tensors are f32 or f64 on the CPU (f64 exists for
 *    gradient checks), f32 or bf16 on CUDA, and every float tensor of one
 *    call has the same dtype. Index tensors (targets, ids) are i32 or i64.
 *    Anything else is TFC_ERR_DTYPE. The statistics a forward saves for its
 *    backward (LayerNorm mean/rstd, RMSNorm rstd, cross-entropy loss/lse, attention lse)
 *    have the input's dtype on the CPU and are f32 on CUDA.
 *  - Inputs may have any strides (transposed, sliced, expanded views). A
 *    kernel reads strided inputs directly where it can (attention reads
 *    q/k/v/out/dout through their strides when the last dim has stride 1)
 *    and otherwise makes a temporary contiguous copy of that input.
 *  - Outputs are caller-owned, contiguous tensors of exactly the documented
 *    shape and dtype; they are written, never allocated or reshaped. A wrong
 *    shape is TFC_ERR_SHAPE, a wrong dtype TFC_ERR_DTYPE, a non-contiguous
 *    output TFC_ERR_INVALID_ARG (SwiGLU's outputs may also be row-strided
 *    views, see there); the message names the function, the argument and
 *    the shapes. Outputs must not overlap any input or each
 *    other. An output marked "or NULL" may be NULL: it is then neither
 *    computed nor written, and work only it needs is skipped.
 *  - flags: TFC_GRAD_ACCUMULATE (core.h) makes every gradient output
 *    `+=` its result instead of `=`; other bits are TFC_ERR_INVALID_ARG.
 *  - NULL for a required tensor is TFC_ERR_INVALID_ARG. All tensors of one
 *    call live on one device, else TFC_ERR_DEVICE naming both; a CUDA
 *    tensor without a usable GPU is TFC_ERR_DEVICE with the loader's
 *    reason; a case the device's backend does not offer (GELU's erf form on
 *    CUDA) is TFC_ERR_UNSUPPORTED. On any error nothing is written.
 *  - Memory: nothing is allocated except a temporary contiguous copy of an
 *    input that needs one (on the CPU scratch tiles live on the stack).
 *  - Threads: the kernels use the process-wide OpenMP thread pool
 *    (tfc_set_num_threads). Results do not depend on the thread count.
 *    Calls on different output tensors may run concurrently from several
 *    threads; writing a tensor another call reads is a data race.
 *  - f32 kernels use AVX2/FMA when the CPU has them (chosen at run time,
 *    with a portable fallback) and vectorised polynomial exp (~1 ulp; 0
 *    below about −87.5 instead of a subnormal) and erfc (< 5e-6 relative
 *    for |x| < 6, < 1.5e-5 up to 9); f64 kernels use libm. The AVX2 and
 *    portable f32 paths may differ in the last bits (summation widths, FMA).
 */
#ifndef TFCORE_KERNELS_H
#define TFCORE_KERNELS_H

#include "tfcore/core.h"
#include "tfcore/ops.h" /* tfc_attention_options */
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- LayerNorm ------------------------------------------------------------ */

/*
 * LayerNorm over the last dimension. x is [..., C] with C >= 1, seen as N =
 * numel / C rows of C. Per row n:
 *   mean[n] = (1/C) Σ_c x[n,c]
 *   rstd[n] = 1 / sqrt((1/C) Σ_c (x[n,c] − mean[n])² + eps)   (biased variance)
 *   y[n,c]  = (x[n,c] − mean[n]) · rstd[n] · weight[c] + bias[c]
 * weight [C] and bias [C] may be NULL (weight 1, bias 0). y has x's shape;
 * mean [N] and rstd [N] may be NULL (keep them for the backward). Statistics
 * are accumulated in f64 with two passes. eps must be finite and >= 0.
 */
TFC_API TFC_NODISCARD tfc_status tfc_layernorm_forward(const tfc_tensor *x, const tfc_tensor *weight /* nullable */,
                                                       const tfc_tensor *bias /* nullable */, double eps, tfc_tensor *y,
                                                       tfc_tensor *mean /* nullable */,
                                                       tfc_tensor *rstd /* nullable */);

/*
 * Gradients of tfc_layernorm_forward. dy and x are [..., C] (same shape),
 * weight [C] or NULL as in the forward, mean [N] and rstd [N] as the forward
 * produced them (required). With x̂ = (x − mean)·rstd and g = dy·weight:
 *   dx[n,c]   = rstd[n] · (g[n,c] − mean_c(g[n,:]) − x̂[n,c] · mean_c(g[n,:]·x̂[n,:]))
 *   dweight[c] = Σ_n dy[n,c] · x̂[n,c]        dbias[c] = Σ_n dy[n,c]
 * dx (like x), dweight [C], dbias [C] may each be NULL. dweight must be
 * NULL when weight is NULL. Column sums run over rows in order, so they are
 * the same for any thread count.
 */
TFC_API TFC_NODISCARD tfc_status tfc_layernorm_backward(const tfc_tensor *dy, const tfc_tensor *x,
                                                        const tfc_tensor *weight /* nullable */, const tfc_tensor *mean,
                                                        const tfc_tensor *rstd, tfc_tensor *dx /* nullable */,
                                                        tfc_tensor *dweight /* nullable */,
                                                        tfc_tensor *dbias /* nullable */, uint32_t flags);

/* ---- RMSNorm ---------------------------------------------------------------- */

/*
 * RMSNorm over the last dimension (Llama's LlamaRMSNorm, torch 2.x's
 * torch.nn.functional.rms_norm). x is [..., C] with C >= 1, seen as N =
 * numel / C rows of C. Per row n:
 *   rstd[n] = 1 / sqrt((1/C) Σ_c x[n,c]² + eps)
 *   y[n,c]  = x[n,c] · rstd[n] · weight[c]
 * weight [C] may be NULL (weight 1). y has x's shape; rstd [N] may be NULL
 * (keep it for the backward). The sum of squares is accumulated in f64 on
 * the CPU and in f32 on CUDA, where a bf16 x is computed in f32 and y
 * rounded to bf16 once (as F.rms_norm; Hugging Face's LlamaRMSNorm also
 * rounds x · rstd to bf16 before the weight multiplies it). eps must be
 * finite and > 0 (else TFC_ERR_INVALID_ARG): a row of zeros would divide by
 * zero. Other errors as for every function here (the rules above): a
 * weight that is not [C] is TFC_ERR_SHAPE, one of another dtype than x
 * TFC_ERR_DTYPE, x with no last dim or C = 0 TFC_ERR_SHAPE.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rmsnorm_forward(const tfc_tensor *x, const tfc_tensor *weight /* nullable */,
                                                     double eps, tfc_tensor *y, tfc_tensor *rstd /* nullable */);

/*
 * Gradients of tfc_rmsnorm_forward. dy and x are [..., C] (same shape),
 * weight [C] or NULL as in the forward, rstd [N] as the forward produced it
 * (required). With x̂ = x · rstd and g = dy · weight:
 *   dx[n,c]    = rstd[n] · (g[n,c] − x̂[n,c] · mean_c(g[n,:] · x̂[n,:]))
 *   dweight[c] = Σ_n dy[n,c] · x̂[n,c]
 * dx (like x) and dweight [C] may each be NULL; dweight must be NULL when
 * weight is NULL (TFC_ERR_INVALID_ARG). Column sums run over rows in a
 * fixed order, so they are the same for any thread count.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rmsnorm_backward(const tfc_tensor *dy, const tfc_tensor *x,
                                                      const tfc_tensor *weight /* nullable */, const tfc_tensor *rstd,
                                                      tfc_tensor *dx /* nullable */, tfc_tensor *dweight /* nullable */,
                                                      uint32_t flags);

/* ---- softmax / log-softmax ------------------------------------------------ */

/*
 * Softmax (log == 0) or log-softmax (log == 1) of x along dim (negative
 * counts from the end; a 0-d x takes dim 0 or -1). With x seen as
 * [outer, D, inner] around dim:
 *   softmax:     y = exp(x − max) / Σ_d exp(x − max)
 *   log_softmax: y = x − max − log Σ_d exp(x − max)
 * y has x's shape. A dim of size 0 gives an empty y.
 */
TFC_API TFC_NODISCARD tfc_status tfc_softmax_forward(const tfc_tensor *x, int32_t dim, int32_t log, tfc_tensor *y);

/*
 * Gradient of tfc_softmax_forward from its output y (same shape as dy):
 *   softmax:     dx = y ⊙ (dy − Σ_d dy ⊙ y)
 *   log_softmax: dx = dy − exp(y) ⊙ Σ_d dy
 * with the sums along dim, broadcast back — never a Jacobian. dx is like y.
 */
TFC_API TFC_NODISCARD tfc_status tfc_softmax_backward(const tfc_tensor *dy, const tfc_tensor *y, int32_t dim,
                                                      int32_t log, tfc_tensor *dx, uint32_t flags);

/* ---- softmax cross-entropy ------------------------------------------------ */

/*
 * Mean cross-entropy of rows of logits [N, C] (C >= 1) against class
 * indices targets [N] (i32 or i64). Rows whose target equals ignore_index
 * are left out of the mean:
 *   lse[n] = log Σ_c exp(logits[n,c])
 *   loss   = Σ_{n valid} (lse[n] − logits[n, targets[n]]) / n_valid
 * loss is a scalar (ndim 0) of the logits' dtype; it is NaN when no row is
 * valid (as in PyTorch). lse [N] may be NULL; ignored rows get their lse
 * too. Any other target outside [0, C) is TFC_ERR_INVALID_ARG naming the
 * row and the value. The sum runs in f64 over fixed row blocks, so the loss
 * is the same for any thread count.
 */
TFC_API TFC_NODISCARD tfc_status tfc_cross_entropy_forward(const tfc_tensor *logits, const tfc_tensor *targets,
                                                           int64_t ignore_index, tfc_tensor *loss,
                                                           tfc_tensor *lse /* nullable */);

/*
 * Gradient of tfc_cross_entropy_forward, fused:
 *   dlogits[n,c] = dloss · (exp(logits[n,c] − lse[n]) − [c == targets[n]]) / n_valid
 * and 0 on ignored rows (all rows when none is valid). dloss holds one
 * element (ndim 0 or [1]) of the loss's dtype: the logits' dtype on the
 * CPU, f32 on CUDA. lse [N] is the forward's output, or NULL to recompute
 * it (one extra pass over each row; the CPU only). dlogits [N, C] is
 * required. Targets are checked as in the forward.
 */
TFC_API TFC_NODISCARD tfc_status tfc_cross_entropy_backward(const tfc_tensor *dloss, const tfc_tensor *logits,
                                                            const tfc_tensor *targets,
                                                            const tfc_tensor *lse /* nullable */, int64_t ignore_index,
                                                            tfc_tensor *dlogits, uint32_t flags);

/* ---- embedding ------------------------------------------------------------ */

/*
 * Row lookup: out[p..., :] = table[ids[p...], :]. table is [V, C], ids any
 * shape (ndim <= 7, i32 or i64), out [ids.shape..., C] of the table's dtype.
 * An id outside [0, V) is TFC_ERR_INVALID_ARG naming its position and value;
 * every id is checked before anything is written.
 */
TFC_API TFC_NODISCARD tfc_status tfc_embedding_forward(const tfc_tensor *table, const tfc_tensor *ids, tfc_tensor *out);

/*
 * Gradient of the lookup, a scatter-add: dtable[v, :] = Σ_{p: ids[p] == v} dout[p, :]
 * (rows no id names are 0, or untouched with TFC_GRAD_ACCUMULATE). dout is
 * [ids.shape..., C], dtable [V, C] (required; V comes from it). Duplicate
 * ids accumulate in position order, so the result is bit-identical for any
 * thread count. Ids are checked against V before anything is written.
 */
TFC_API TFC_NODISCARD tfc_status tfc_embedding_backward(const tfc_tensor *dout, const tfc_tensor *ids,
                                                        tfc_tensor *dtable, uint32_t flags);

/* ---- scaled dot-product attention ----------------------------------------- */

/*
 * Attention, flash style: q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv],
 *   out[b,h,i,:] = Σ_j P[i,j] · v[b,h,j,:],  P = softmax_j(scale · q_i·k_j + mask)
 *   lse[b,h,i]   = log Σ_j exp(scale · q_i·k_j + mask)    (the scaled scores' log-sum-exp)
 * causal != 0 masks keys bottom-right aligned: query i sees key j iff
 * j <= i + (S − T). That is PyTorch's is_causal when S == T, and lets a
 * single new query (T = 1) see the whole KV cache. A query that sees no key
 * (causal with T > S) gets out = 0 and lse = −inf. scale must be finite
 * (commonly 1/sqrt(D)). out [B,H,T,Dv] is required; lse [B,H,T] may be NULL
 * (but the backward needs it). Keys are processed in tiles with an online
 * softmax: extra memory is O(tile), never a [T,S] matrix. q, k and v are
 * read through their strides when their last dim has stride 1 (e.g. a
 * [B,T,H,D] buffer permuted to [B,H,T,D]; also stride 0 over heads for
 * shared keys). Parallel over B·H and blocks of 32 queries.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention_forward(const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                                       int32_t causal, double scale, tfc_tensor *out,
                                                       tfc_tensor *lse /* nullable */);

/*
 * Gradients of tfc_attention_forward. dout and out are [B,H,T,Dv], lse
 * [B,H,T] as the forward produced them (both required); causal and scale as
 * in the forward. Recomputes P per tile from lse, with
 *   Di = Σ_e dout[i,e]·out[i,e],  dP = dout · vᵀ,  dS = P ⊙ (dP − Di)
 *   dq = scale · dS · k,   dk = scale · dSᵀ · q,   dv = Pᵀ · dout
 * dq [B,H,T,D], dk [B,H,S,D], dv [B,H,S,Dv] may each be NULL. Extra memory
 * O(tile). Parallel over B·H; with fewer heads than threads, over blocks of
 * keys (dk, dv) and then of queries (dq), recomputing P once more — same
 * result bits either way.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention_backward(const tfc_tensor *dout, const tfc_tensor *q,
                                                        const tfc_tensor *k, const tfc_tensor *v, const tfc_tensor *out,
                                                        const tfc_tensor *lse, int32_t causal, double scale,
                                                        tfc_tensor *dq /* nullable */, tfc_tensor *dk /* nullable */,
                                                        tfc_tensor *dv /* nullable */, uint32_t flags);

/*
 * tfc_attention_forward with grouped-query heads and a sliding window
 * (tfc_attention_options, ops.h; opts may be NULL: no window): q [B,H,T,D],
 * k [B,Hkv,S,D], v [B,Hkv,S,Dv] with Hkv dividing H; query head h attends
 * with kv head h / (H/Hkv) (Hugging Face's repeat_kv order; Hkv = 1 is
 * multi-query, Hkv = H the plain case). K and V are read in place, never
 * repeated. With opts->window = W > 0 (causal only) query i sees the keys
 * i + (S − T) − W < j <= i + (S − T): at most W, itself included.
 * out [B,H,T,Dv] and lse [B,H,T] as tfc_attention_forward; the tiles
 * outside every query's keys are skipped. Errors: as
 * tfc_attention_forward, plus Hkv not dividing H or v's heads differing
 * from k's (TFC_ERR_SHAPE), a negative window or one without causal
 * (TFC_ERR_INVALID_ARG), opts->struct_size not one this library knows
 * (TFC_ERR_VERSION). On CUDA as tfc_attention_forward.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention_forward_ex(const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                                          int32_t causal, double scale,
                                                          const tfc_attention_options *opts /* nullable */,
                                                          tfc_tensor *out, tfc_tensor *lse /* nullable */);

/*
 * Gradients of tfc_attention_forward_ex, as tfc_attention_backward with
 * the same causal, scale and opts as the forward: dq [B,H,T,D], dk
 * [B,Hkv,S,D], dv [B,Hkv,S,Dv] (each may be NULL), where dk and dv of kv
 * head j are the sums over query heads j·G .. j·G + G − 1 (G = H/Hkv):
 *   dk_j = scale · Σ_{h in group} dS_hᵀ · q_h,   dv_j = Σ_{h in group} P_hᵀ · dout_h
 * Every dk, dv element is summed by one thread in a fixed order (the
 * group's heads in turn; no atomics, on the CPU and on CUDA), so the bits
 * do not depend on the thread count and repeat from run to run. Errors: as
 * tfc_attention_backward and tfc_attention_forward_ex.
 */
TFC_API TFC_NODISCARD tfc_status tfc_attention_backward_ex(
    const tfc_tensor *dout, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v, const tfc_tensor *out,
    const tfc_tensor *lse, int32_t causal, double scale, const tfc_attention_options *opts /* nullable */,
    tfc_tensor *dq /* nullable */, tfc_tensor *dk /* nullable */, tfc_tensor *dv /* nullable */, uint32_t flags);

/* ---- GELU ----------------------------------------------------------------- */

/*
 * GELU, elementwise on any shape; y has x's shape.
 *   approximate == 0 (exact): y = x · Φ(x),  Φ(x) = ½ · erfc(−x / √2)
 *   approximate == 1 (tanh):  y = ½ · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
 * (PyTorch's approximate='none' and 'tanh'). Other values are TFC_ERR_INVALID_ARG.
 */
TFC_API TFC_NODISCARD tfc_status tfc_gelu_forward(const tfc_tensor *x, int32_t approximate, tfc_tensor *y);

/*
 * Gradient of tfc_gelu_forward: dx = dy · gelu'(x), where
 *   exact: gelu'(x) = Φ(x) + x · φ(x),  φ(x) = exp(−x²/2) / √(2π)
 *   tanh:  with u = √(2/π)(x + 0.044715 x³), t = tanh u:
 *          gelu'(x) = ½(1 + t) + ½ · x · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 x²)
 * dy and x have one shape; dx is like x (required).
 */
TFC_API TFC_NODISCARD tfc_status tfc_gelu_backward(const tfc_tensor *dy, const tfc_tensor *x, int32_t approximate,
                                                   tfc_tensor *dx, uint32_t flags);

/* ---- rotary position embedding (RoPE) -------------------------------------- */

/* The rope_scaling types of a Hugging Face config.json ("rope_type", or "type" in older files). */
typedef enum tfc_rope_type {
    TFC_ROPE_DEFAULT = 0, /* no rope_scaling, or "default" */
    TFC_ROPE_LINEAR = 1,  /* "linear": position interpolation, inv_freq / factor */
    TFC_ROPE_DYNAMIC = 2, /* "dynamic": NTK-aware, theta grows with the sequence past max_position_embeddings */
    TFC_ROPE_LLAMA3 = 3   /* "llama3": Llama 3.1's per-wavelength interpolation */
} tfc_rope_type;

/*
 * How a model's rotary frequencies are made: rope_theta and rope_scaling of
 * its config.json. Set struct_size = sizeof(tfc_rope_config) (the INIT
 * macro does): fields added later go at the end. Each field is read only by
 * the types named beside it.
 */
typedef struct tfc_rope_config {
    uint32_t struct_size;
    int32_t rope_type;                        /* a tfc_rope_type */
    double theta;                             /* rope_theta (all types): finite, > 0 */
    double factor;                            /* linear, dynamic, llama3: finite, > 0 */
    double low_freq_factor;                   /* llama3: finite, > 0 */
    double high_freq_factor;                  /* llama3: finite, > low_freq_factor */
    int64_t original_max_position_embeddings; /* llama3 (rope_scaling's): > 0 */
    int64_t max_position_embeddings;          /* dynamic (the config's top-level field): > 0 */
} tfc_rope_config;

/* Llama 2's rope_theta and no scaling; the llama3 fields hold Llama 3.1's values (factor 8 to be set). */
#define TFC_ROPE_CONFIG_INIT \
    { (uint32_t)sizeof(tfc_rope_config), TFC_ROPE_DEFAULT, 10000.0, 1.0, 1.0, 4.0, 8192, 2048 }

/*
 * The rotary inverse frequencies of a head of head_dim D (even, >= 2), as
 * transformers' modeling_rope_utils computes them, written to
 * inv_freq[0 .. D/2) (the caller's array of D/2 doubles), in f64; i < D/2:
 *   default: inv_freq[i] = 1 / theta^(2i/D)
 *   linear:  inv_freq[i] = 1 / (factor · theta^(2i/D))
 *   dynamic: with L = max_position_embeddings, when seq_len > L
 *              theta' = theta · (factor · seq_len / L − (factor − 1))^(D / (D − 2)),
 *              inv_freq[i] = 1 / theta'^(2i/D);  else the default (needs D > 2)
 *   llama3:  with f = the default's, w = 2π / f, O = original_max_position_embeddings:
 *              w < O / high_freq_factor: f;   w > O / low_freq_factor: f / factor;
 *              else s = (O / w − low_freq_factor) / (high_freq_factor − low_freq_factor),
 *                   (1 − s) · f / factor + s · f
 * seq_len (>= 0) is the sequence length the frequencies serve, the largest
 * position + 1; only dynamic reads it (transformers keeps the frequencies
 * of the longest sequence seen until one shorter than L comes: pass that).
 * Transformers computes them in f32; for f32 and bf16 tensors pass them
 * rounded to f32, for f64 as they are. Errors (inv_freq untouched): NULL
 * config or inv_freq (TFC_ERR_INVALID_ARG); config->struct_size too small
 * (TFC_ERR_VERSION); head_dim odd or < 2 (or 2 for dynamic), seq_len < 0,
 * an unknown rope_type, a field the type reads outside its range
 * (TFC_ERR_INVALID_ARG naming it). Thread-safe; allocates nothing.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rope_inv_freq(const tfc_rope_config *config, int64_t head_dim, int64_t seq_len,
                                                   double *inv_freq);

/*
 * Rotary position embedding in Hugging Face's rotate-half form (Llama's
 * apply_rotary_pos_emb): x [B,H,T,D] (D even; the heads as tfc_attention
 * takes them), positions i64 of the tokens, [T] or [1,T] (shared by the
 * batch) or [B,T] (per sequence: a KV cache's offset, packed sequences),
 * inv_freq [D/2] (tfc_rope_inv_freq). With h = D/2, p = positions[b,t] and
 * a_i = p · inv_freq[i], for every b, head, t and i < h:
 *   y[..., i]     = x[..., i]     · cos a_i − x[..., i + h] · sin a_i
 *   y[..., i + h] = x[..., i + h] · cos a_i + x[..., i]     · sin a_i
 * i.e. y = x·cos + rotate_half(x)·sin with cos/sin repeated over both
 * halves. The angle dtype: f64 for f64 x (inv_freq f64); f32 for f32 and
 * bf16 x (inv_freq f32, the one float tensor of another dtype than x), p
 * converted to f32 and the product p·inv_freq rounded to f32 before cos and
 * sin, as transformers does. y [B,H,T,D] has x's dtype; positions and
 * inv_freq live on x's device (else TFC_ERR_DEVICE). x is read through its strides when its
 * last dim has stride 1 (q or k as a [B,H,T,D] view of a fused [B,T,3,H,D]
 * projection, no copy). A negative position is TFC_ERR_INVALID_ARG naming
 * its flat index and value, found before anything is written (on CUDA that
 * check waits for the device, unless positions were copied from the host
 * by tfc_tensor_to_device and not written since). Other errors: x not 4-D
 * or D odd, positions or inv_freq of another shape (TFC_ERR_SHAPE),
 * positions not i64 or inv_freq not the angle dtype (TFC_ERR_DTYPE).
 */
TFC_API TFC_NODISCARD tfc_status tfc_rope_forward(const tfc_tensor *x, const tfc_tensor *positions,
                                                  const tfc_tensor *inv_freq, tfc_tensor *y);

/*
 * Gradient of tfc_rope_forward (the rotation by −a_i; it does not need x):
 *   dx[..., i]     = dy[..., i]     · cos a_i + dy[..., i + h] · sin a_i
 *   dx[..., i + h] = dy[..., i + h] · cos a_i − dy[..., i]     · sin a_i
 * dy [B,H,T,D] (read through its strides like x), positions and inv_freq
 * as in the forward; dx [B,H,T,D] (required). Errors as the forward's.
 */
TFC_API TFC_NODISCARD tfc_status tfc_rope_backward(const tfc_tensor *dy, const tfc_tensor *positions,
                                                   const tfc_tensor *inv_freq, tfc_tensor *dx, uint32_t flags);
/* ---- SwiGLU ----------------------------------------------------------------- */

/*
 * SwiGLU, Llama's gated MLP activation: gate and up [..., F] (at least
 * 1-d, one shape and dtype), seen as N = numel / F rows of F:
 *   out[n,f] = silu(gate[n,f]) · up[n,f],  silu(g) = g · σ(g) = g / (1 + exp(−g))
 * σ is computed from exp(−|g|), so no exp overflows. out [..., F].
 * Layout, unlike the other kernels here: every tensor of these two calls,
 * the outputs included, may be rows of its last dim with unit stride
 * along it and any one stride between rows (at least F) — in particular
 * the two halves gate = gate_up[..., :F] and up = gate_up[..., F:] of one
 * [..., 2F] tensor (tfc_narrow), read where they lie. An input in another
 * layout is copied to a contiguous temporary first; an output in another
 * layout is TFC_ERR_INVALID_ARG. Outputs may interleave with each other
 * (the two halves of one gradient) but share no element with any tensor of
 * the call.
 */
TFC_API TFC_NODISCARD tfc_status tfc_swiglu_forward(const tfc_tensor *gate, const tfc_tensor *up, tfc_tensor *out);

/*
 * Gradients of tfc_swiglu_forward from dy [..., F] (like gate), s = σ(gate):
 *   dgate = dy · up · s · (1 + gate · (1 − s))
 *   dup   = dy · silu(gate)
 * dgate and dup are like gate, each or NULL, in the layouts the forward
 * takes: dgate = d_gate_up[..., :F] and dup = d_gate_up[..., F:] fill the
 * gradient of a fused [..., 2F] input in one call.
 */
TFC_API TFC_NODISCARD tfc_status tfc_swiglu_backward(const tfc_tensor *dy, const tfc_tensor *gate, const tfc_tensor *up,
                                                     tfc_tensor *dgate /* nullable */, tfc_tensor *dup /* nullable */,
                                                     uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif /* TFCORE_KERNELS_H */
