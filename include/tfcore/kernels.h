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
 *    backward (LayerNorm mean/rstd, cross-entropy loss/lse, attention lse)
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
