"""libtfcore as the kernel backend of PyTorch: the explicit kernels of
include/tfcore/kernels.h (tfcore.kernels) as torch.autograd.Functions on
torch tensors, and drop-in nn.Modules built on them.

    import torch, tfcore.torch as tt
    y = tt.layer_norm(x, (C,), weight, bias)          # like F.layer_norm
    y = tt.rms_norm(x, C, weight, eps)                # Llama's RMSNorm
    q, k = tt.apply_rotary_pos_emb(q, k, position_ids, inv_freq)
    o = tt.scaled_dot_product_attention(q, k, v, is_causal=True)   # k, v may have fewer (kv) heads
    m = tt.swiglu(gate, up)                           # F.silu(gate) * up
    loss = tt.linear_cross_entropy(h, lm_head.weight, targets)     # the fused LM head
    loss = tt.cross_entropy(logits, targets)

Torch keeps the autograd graph; each Function's forward runs our forward
kernel and saves what its backward kernel needs (LayerNorm's mean and
rstd, attention's output and log-sum-exp), so backward never re-runs the
forward. The fused LM head and SiLU have no explicit kernel door in C;
their Functions drive the graph ops tfc_linear_cross_entropy and tfc_silu
on a private tfcore graph (see "ops with no explicit kernel door" below).

Tensors cross in both directions through DLPack without copies: an input
that is already contiguous is read in place, and every result is a torch
tensor over the memory our kernel wrote (kept alive by the torch tensor).
The kernels that read strided views (attention's q, k, v and upstream
gradient, RoPE's input and upstream gradient, SwiGLU's operands) take any
tensor whose last dim has unit stride in place too — q, k, v as a
[B,T,H,D] projection viewed [B,H,T,D] cross without a copy. Other
non-contiguous inputs are made contiguous first (one copy, as torch's own
fused kernels do).

CPU tensors only (the DLPack import takes host memory); float32 and
float64 as the CPU kernels take them. Errors the kernels report arrive as
tfcore's exceptions (tfcore.Error subclasses: ShapeError, DtypeError, …)
with the C function named. Importing this module imports torch; `import
tfcore` alone does not.
"""
import torch

from . import kernels as _k
from ._lib import check as _check, ffi as _ffi, lib as _lib
from .dlpack import from_dlpack as _from_dlpack
from .tensor import _call, _wrap

__all__ = [
    "layer_norm", "rms_norm", "rope", "apply_rotary_pos_emb", "silu", "swiglu", "scaled_dot_product_attention",
    "cross_entropy", "linear_cross_entropy", "gelu", "embedding", "LayerNorm", "RMSNorm", "SiLU", "SwiGLU",
    "CrossEntropyLoss", "LinearCrossEntropy", "GELU", "Embedding",
]


def _torch_tensor(t):
    if not isinstance(t, torch.Tensor):
        raise TypeError("tfcore.torch: expected a torch.Tensor, got %s" % type(t).__name__)
    return t


def _in(t):
    """A tfcore tensor over torch tensor t's memory (contiguous first), or None."""
    if t is None:
        return None
    if _torch_tensor(t).device.type != "cpu":
        raise ValueError("tfcore.torch: tensors must be on the CPU, got one on %s" % t.device)
    return _from_dlpack(t.detach().contiguous())


def _in_rows(t):
    """Like _in, but a tensor whose last dim has unit stride crosses as the
    strided view it is (no copy), for the kernels that read such views in
    place: attention's q, k, v, dout and RoPE's x, dy (q/k/v as [B,T,H,D]
    projections viewed [B,H,T,D]), SwiGLU's gate, up, dy (which copies any
    other layout itself)."""
    if t is not None and isinstance(t, torch.Tensor) and t.dim() and t.stride(-1) == 1:
        if t.device.type != "cpu":
            raise ValueError("tfcore.torch: tensors must be on the CPU, got one on %s" % t.device)
        return _from_dlpack(t.detach())
    return _in(t)


def _out(t):
    """A torch tensor over tfcore tensor t's memory (None stays None)."""
    return None if t is None else torch.from_dlpack(t)


# ---- ops with no explicit kernel door: a private graph ------------------------------
#
# The fused LM head (tfc_linear_cross_entropy) and SiLU (tfc_silu) exist as
# graph ops only (include/tfcore/ops.h), not as forward/backward pairs in
# kernels.h. Their Functions record the op on a graph of their own — never
# the thread's tfcore tape — with requires_grad set on the tfcore views of
# exactly the inputs torch wants gradients for, and take the gradients from
# that graph (tfc_autograd_grad).
#
# SiLU: backward asks the graph, seeded with torch's upstream gradient. The
# graph is retained, since torch may run a node's backward again
# (retain_graph=True, gradcheck) and a Function cannot tell whether it will;
# it goes with the Function's ctx when torch frees the node.
#
# The fused LM head computes dh and dW in its forward pass (its design: the
# logits exist one chunk at a time and are gone after it). The Function
# takes them out of the graph right there (upstream gradient 1), drops the
# graph, and saves them as torch tensors: backward is their product with
# torch's upstream gradient (what the op's own backward node does), so it
# can run any number of times and torch frees them after the last.


def _record(op, inputs, needs, *args):
    """Run graph op `op` on tfcore tensors `inputs` (+ extra args) on a new
    graph with inputs[i] requiring grad where needs[i]; returns (graph or
    None, the leaves that require grad, the op's output Tensor)."""
    leaves = [x for x, need in zip(inputs, needs) if need]
    g = None
    if leaves:
        out = _ffi.new("tfc_graph **")
        _check(_lib.tfc_graph_new(out))
        g = _ffi.gc(out[0], _lib.tfc_graph_release)
        for x in leaves:
            x.requires_grad = True
    y = _call(op, _ffi.NULL if g is None else g, *[x._h for x in inputs], *args)
    return g, leaves, y


def _grads(g, y, leaves, dy, retain):
    """d(<y, dy>)/d(leaves) from the graph _record made (each a tfcore Tensor);
    dy None is 1 for a one-element y; retain 0 frees the node."""
    seeds = _ffi.NULL
    if dy is not None:
        seed = _in(dy)
        seeds = _ffi.new("const tfc_tensor *[]", [seed._h])
    res = _ffi.new("tfc_tensor *[]", len(leaves))
    _check(_lib.tfc_autograd_grad(g, _ffi.new("const tfc_tensor *[]", [y._h]), 1,
                                  _ffi.new("const tfc_tensor *[]", [x._h for x in leaves]), len(leaves),
                                  seeds, int(retain), 0, 0, res))
    return [_wrap(res[i]) for i in range(len(leaves))]


def _needs(*tensors):
    """Per tensor: torch will want its gradient (grad mode on, requires_grad);
    asked before apply, since Function.forward always runs with grad mode off."""
    on = torch.is_grad_enabled()
    return tuple(bool(on and t is not None and t.requires_grad) for t in tensors)


# ---- LayerNorm --------------------------------------------------------------------


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        y, mean, rstd = _k.layernorm_forward(_in(x), _in(weight), _in(bias), eps)
        ctx.save_for_backward(x, weight, _out(mean), _out(rstd))
        ctx.has_bias = bias is not None
        return _out(y)

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _k.layernorm_backward(_in(dy), _in(x), _in(weight), _in(mean), _in(rstd),
                                           dbias=None if ctx.has_bias else False)
        return _out(dx), _out(dw), _out(db) if ctx.has_bias else None, None


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm over the last dim (normalized_shape must be (x.shape[-1],))."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if shape != tuple(_torch_tensor(x).shape[-1:]):
        raise ValueError("tfcore.torch.layer_norm: normalized_shape %s must be the last dim of x %s"
                         % (shape, tuple(x.shape)))
    return _LayerNorm.apply(x, weight, bias, float(eps))


# ---- RMSNorm, RoPE, SwiGLU (the Llama family) ------------------------------------------


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        y, rstd = _k.rmsnorm_forward(_in(x), _in(weight), eps)
        ctx.save_for_backward(x, weight, _out(rstd))
        return _out(y)

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = _k.rmsnorm_backward(_in(dy), _in(x), _in(weight), _in(rstd))
        return _out(dx), _out(dw), None


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """torch 2.x's F.rms_norm over the last dim: x / sqrt(mean(x²) + eps) · weight (Llama's RMSNorm);
    eps None is torch.finfo(x.dtype).eps, as in torch."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if shape != tuple(_torch_tensor(x).shape[-1:]):
        raise ValueError("tfcore.torch.rms_norm: normalized_shape %s must be the last dim of x %s"
                         % (shape, tuple(x.shape)))
    return _RMSNorm.apply(x, weight, float(torch.finfo(x.dtype).eps if eps is None else eps))


class _Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, positions, inv_freq):
        ctx.save_for_backward(positions, inv_freq)
        return _out(_k.rope_forward(_in_rows(x), _in(positions), _in(inv_freq)))

    @staticmethod
    def backward(ctx, dy):
        positions, inv_freq = ctx.saved_tensors
        return _out(_k.rope_backward(_in_rows(dy), _in(positions), _in(inv_freq))), None, None


def rope(x, positions, inv_freq):
    """Rotary positions in transformers' rotate-half form, x [B,H,T,D] at int64 positions [T], [1,T] or
    [B,T] with inv_freq [D/2] (float32 for float32 x, float64 for float64; tfcore.functional.rope_inv_freq
    or the model's own): x·cos + rotate_half(x)·sin. Gradients flow to x."""
    return _Rope.apply(x, positions, inv_freq)


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return _out(_k.swiglu_forward(_in_rows(gate), _in_rows(up)))

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        dg, du = _k.swiglu_backward(_in_rows(dy), _in_rows(gate), _in_rows(up))
        return _out(dg), _out(du)


def swiglu(gate, up):
    """silu(gate) · up in one kernel (Llama's MLP: F.silu(gate_proj(x)) * up_proj(x))."""
    return _SwiGLU.apply(gate, up)


class _Silu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, need):
        ctx.graph, ctx.leaves, ctx.y = _record(_lib.tfc_silu, [_in(x)], (need,))
        ctx.save_for_backward(x)  # only for torch's in-place check: the graph holds what backward reads
        return _out(ctx.y.detach())

    @staticmethod
    def backward(ctx, dy):
        ctx.saved_tensors
        (dx,) = _grads(ctx.graph, ctx.y, ctx.leaves, dy, retain=True)
        return _out(dx), None


def silu(x):
    """F.silu: x · σ(x) (the graph op tfc_silu on a private graph; there is no explicit silu kernel door)."""
    return _Silu.apply(x, *_needs(x))


def apply_rotary_pos_emb(q, k, position_ids, inv_freq):
    """transformers' apply_rotary_pos_emb(q, k, cos, sin) for q [B,H,T,D] and
    k [B,Hkv,T,D], returning (q_embed, k_embed), with the rotation's angles
    given as position_ids (int64 [T], [1,T] or [B,T]) and inv_freq [D/2]
    instead of cos/sin: the kernel forms cos and sin of position · inv_freq
    itself, so the [B,T,D] cos/sin tensors never exist. Same layout and
    rotate-half convention as HF: with cos, sin = LlamaRotaryEmbedding(x,
    position_ids) and its inv_freq, f32 results agree with HF's to f32
    rounding (f32 angles, as transformers forms them). f64 tensors take an
    f64 inv_freq and get f64 cos/sin, where transformers rounds cos/sin to
    f32 even for an f64 model (about 1e-7 apart)."""
    return rope(q, position_ids, inv_freq), rope(k, position_ids, inv_freq)


# ---- attention --------------------------------------------------------------------


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, window):
        out, lse = _k.attention_forward(_in_rows(q), _in_rows(k), _in_rows(v), causal=causal, scale=scale,
                                        window=window)
        out_t = _out(out)
        ctx.save_for_backward(q, k, v, out_t, _out(lse))
        ctx.causal, ctx.scale, ctx.window = causal, scale, window
        return out_t

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _k.attention_backward(_in_rows(dout), _in_rows(q), _in_rows(k), _in_rows(v), _in(out),
                                           _in(lse), causal=ctx.causal, scale=ctx.scale, window=ctx.window)
        return _out(dq), _out(dk), _out(dv), None, None, None


def scaled_dot_product_attention(q, k, v, is_causal=False, scale=None, window=None):
    """softmax(q kᵀ · scale (+ causal mask)) v for q [B,H,T,D], k [B,Hkv,S,D],
    v [B,Hkv,S,Dv] by the flash-style kernel (no [T, S] matrix kept for
    backward). Hkv dividing H is grouped-query attention: query head h reads
    kv head h // (H // Hkv) (HF's repeat_kv order) without K/V being repeated,
    and dk, dv sum over each kv head's query heads. scale defaults to 1/√D.
    The causal mask is bottom-right aligned (query i sees keys j ≤ i + S − T),
    which is torch's top-left `is_causal` when T == S; window=W (causal only)
    keeps each query's last W keys, itself included (Mistral's and Qwen2's
    sliding window). No attn_mask and no dropout (use tfcore.functional for
    those)."""
    return _Attention.apply(q, k, v, bool(is_causal), None if scale is None else float(scale),
                            None if window is None else int(window))


# ---- cross-entropy ----------------------------------------------------------------


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, ignore_index):
        loss, lse = _k.cross_entropy_forward(_in(logits), _in(targets), ignore_index)
        ctx.save_for_backward(logits, targets, _out(lse))
        ctx.ignore_index = ignore_index
        return _out(loss)

    @staticmethod
    def backward(ctx, dloss):
        logits, targets, lse = ctx.saved_tensors
        d = _k.cross_entropy_backward(_in(dloss.reshape(())), _in(logits), _in(targets), _in(lse),
                                      ignore_index=ctx.ignore_index)
        return _out(d), None, None


def cross_entropy(logits, targets, ignore_index=-100):
    """Mean softmax cross-entropy of logits [N, C] against targets [N]
    (int64 or int32), rows equal to ignore_index skipped: F.cross_entropy
    with reduction='mean'."""
    return _CrossEntropy.apply(logits, targets, int(ignore_index))


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index, need_h, need_w):
        flat = hidden.dim() > 2 and hidden.shape[-1] > 0  # else as it is: the C door names a bad shape
        h = _in(hidden.reshape(-1, hidden.shape[-1]) if flat else hidden)
        g, leaves, loss = _record(_lib.tfc_linear_cross_entropy, [h, _in(weight), _in(targets)],
                                  (need_h, need_w, False), int(ignore_index))
        grads = iter(_grads(g, loss, leaves, None, retain=False) if leaves else ())
        dh, dw = (_out(next(grads)) if need else None for need in (need_h, need_w))
        ctx.h_shape = hidden.shape
        ctx.save_for_backward(dh, dw)
        return _out(loss.detach())

    @staticmethod
    def backward(ctx, dloss):
        dh, dw = ctx.saved_tensors
        return (None if dh is None else (dh * dloss).view(ctx.h_shape), None if dw is None else dw * dloss,
                None, None, None, None)


def linear_cross_entropy(hidden, weight, targets, ignore_index=-100):
    """The fused LM head: F.cross_entropy(hidden @ weight.T, targets,
    ignore_index=…) with reduction 'mean', for hidden [..., C] (rows N =
    numel / C), weight [V, C] (nn.Linear's layout: lm_head.weight) and
    targets of N int64/int32 class ids (any shape, e.g. [B, T]), without the
    [N, V] logits or their gradient ever existing (tfc_linear_cross_entropy:
    row chunks of at least 256 rows, more while a chunk's logits stay under
    8 MiB). When torch wants gradients, dh [N, C] and dW [V, C] are computed
    in the same pass as the loss and kept for backward, which multiplies
    them by the upstream gradient. Every row ignored gives NaN (as torch),
    with zero gradients. f32 or f64, hidden and weight of one dtype."""
    return _LinearCrossEntropy.apply(hidden, weight, targets, int(ignore_index), *_needs(hidden, weight))


# ---- GELU, embedding ----------------------------------------------------------------


class _Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return _out(_k.gelu_forward(_in(x), approximate))

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return _out(_k.gelu_backward(_in(dy), _in(x), ctx.approximate)), None


def gelu(x, approximate="none"):
    """F.gelu: approximate 'none' (erf) or 'tanh' (GPT-2's)."""
    return _Gelu.apply(x, approximate)


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, table):
        ctx.save_for_backward(ids)
        ctx.num = table.shape[0]
        return _out(_k.embedding_forward(_in(table), _in(ids)))

    @staticmethod
    def backward(ctx, dout):
        (ids,) = ctx.saved_tensors
        return None, _out(_k.embedding_backward(_in(dout), _in(ids), num_embeddings=ctx.num))


def embedding(ids, table):
    """F.embedding(ids, table): rows of table [V, C] for int32/int64 ids (bounds-checked)."""
    return _Embedding.apply(ids, table)


# ---- modules ------------------------------------------------------------------------


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm (same parameters and state_dict) over the last dim, on our kernels."""

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.Module):
    """Llama's RMSNorm (HF LlamaRMSNorm: one weight of ones, eps), on our kernels; its state_dict is HF's."""

    def __init__(self, hidden_size, eps=1e-6, dtype=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=dtype))
        self.variance_epsilon = eps

    def forward(self, x):
        return rms_norm(x, x.shape[-1], self.weight, self.variance_epsilon)


class CrossEntropyLoss(torch.nn.Module):
    """torch.nn.CrossEntropyLoss(ignore_index=…) with reduction 'mean', on our kernels."""

    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits, targets):
        return cross_entropy(logits, targets, self.ignore_index)


class LinearCrossEntropy(torch.nn.Linear):
    """A bias-free nn.Linear(in_features, out_features) LM head (same
    parameters and state_dict: HF's lm_head.weight loads as is) whose
    forward(hidden, targets) returns the mean cross-entropy loss through the
    fused head (linear_cross_entropy); forward(hidden) with no targets
    returns the logits, by torch's F.linear, for generation."""

    def __init__(self, in_features, out_features, bias=False, ignore_index=-100, device=None, dtype=None):
        if bias:
            raise NotImplementedError("tfcore.torch.LinearCrossEntropy: the fused LM head has no bias")
        super().__init__(in_features, out_features, bias=False, device=device, dtype=dtype)
        self.ignore_index = ignore_index

    def forward(self, hidden, targets=None):
        if targets is None:
            return torch.nn.functional.linear(hidden, self.weight)
        return linear_cross_entropy(hidden, self.weight, targets, self.ignore_index)


class SiLU(torch.nn.SiLU):
    """torch.nn.SiLU on our op (no in-place variant)."""

    def forward(self, x):
        return silu(x)


class SwiGLU(torch.nn.Module):
    """The SwiGLU activation as a module: forward(gate, up) = silu(gate) · up
    by the fused kernel, or forward(gate_up) on one [..., 2F] tensor (gate
    first, as a fused gate_up projection lays it out). No parameters."""

    def forward(self, gate, up=None):
        if up is None:
            if gate.shape[-1] % 2:
                raise ValueError("tfcore.torch.SwiGLU: gate_up's last dim %d is odd" % gate.shape[-1])
            gate, up = gate.chunk(2, dim=-1)
        return swiglu(gate, up)


class GELU(torch.nn.GELU):
    """torch.nn.GELU(approximate=…) on our kernels."""

    def forward(self, x):
        return gelu(x, self.approximate)


class Embedding(torch.nn.Embedding):
    """torch.nn.Embedding (no padding_idx, max_norm or sparse) on our kernels."""

    def forward(self, ids):
        if self.padding_idx is not None or self.max_norm is not None or self.sparse:
            raise NotImplementedError("tfcore.torch.Embedding: padding_idx, max_norm and sparse are not supported")
        return embedding(ids, self.weight)
