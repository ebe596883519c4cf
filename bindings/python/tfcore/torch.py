"""libtfcore as the kernel backend of PyTorch: the explicit kernels of
include/tfcore/kernels.h (tfcore.kernels) as torch.autograd.Functions on
torch tensors, and drop-in nn.Modules built on them.

    import torch, tfcore.torch as tt
    y = tt.layer_norm(x, (C,), weight, bias)          # like F.layer_norm
    o = tt.scaled_dot_product_attention(q, k, v, is_causal=True)
    loss = tt.cross_entropy(logits, targets)

Torch keeps the autograd graph; each Function's forward runs our forward
kernel and saves what its backward kernel needs (LayerNorm's mean and
rstd, attention's output and log-sum-exp), so backward never re-runs the
forward. Tensors cross in both directions through DLPack without copies:
an input that is already contiguous is read in place, and every result is
a torch tensor over the memory our kernel wrote (kept alive by the torch
tensor). Non-contiguous inputs are made contiguous first (one copy, as
torch's own fused kernels do).

CPU tensors only (the DLPack import takes host memory); float32 and
float64 as the CPU kernels take them. Errors the kernels report arrive as
tfcore's exceptions (TfcoreError subclasses: ShapeError, DtypeError, …)
with the C function named. Importing this module imports torch; `import
tfcore` alone does not.
"""
import torch

from . import kernels as _k
from .dlpack import from_dlpack as _from_dlpack

__all__ = [
    "layer_norm", "rms_norm", "rope", "silu", "swiglu", "scaled_dot_product_attention", "cross_entropy", "gelu",
    "embedding", "LayerNorm", "RMSNorm", "CrossEntropyLoss", "GELU", "Embedding",
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


def _out(t):
    """A torch tensor over tfcore tensor t's memory (None stays None)."""
    return None if t is None else torch.from_dlpack(t)


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
        return _out(_k.rope_forward(_in(x), _in(positions), _in(inv_freq)))

    @staticmethod
    def backward(ctx, dy):
        positions, inv_freq = ctx.saved_tensors
        return _out(_k.rope_backward(_in(dy), _in(positions), _in(inv_freq))), None, None


def rope(x, positions, inv_freq):
    """Rotary positions in transformers' rotate-half form, x [B,H,T,D] at int64 positions [T], [1,T] or
    [B,T] with inv_freq [D/2] (float32 for float32 x, float64 for float64; tfcore.functional.rope_inv_freq
    or the model's own): x·cos + rotate_half(x)·sin. Gradients flow to x."""
    return _Rope.apply(x, positions, inv_freq)


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return _out(_k.swiglu_forward(_in(gate), _in(up)))

    @staticmethod
    def backward(ctx, dy):
        gate, up = ctx.saved_tensors
        dg, du = _k.swiglu_backward(_in(dy), _in(gate), _in(up))
        return _out(dg), _out(du)


def swiglu(gate, up):
    """silu(gate) · up in one kernel (Llama's MLP: F.silu(gate_proj(x)) * up_proj(x))."""
    return _SwiGLU.apply(gate, up)


# ---- attention --------------------------------------------------------------------


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, window):
        out, lse = _k.attention_forward(_in(q), _in(k), _in(v), causal=causal, scale=scale, window=window)
        out_t = _out(out)
        ctx.save_for_backward(q, k, v, out_t, _out(lse))
        ctx.causal, ctx.scale, ctx.window = causal, scale, window
        return out_t

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _k.attention_backward(_in(dout), _in(q), _in(k), _in(v), _in(out), _in(lse),
                                           causal=ctx.causal, scale=ctx.scale, window=ctx.window)
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
