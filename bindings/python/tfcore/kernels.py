"""Explicit forward/backward entry points (include/tfcore/kernels.h): the
fused kernels on caller-owned tensors, with no graph at all — the door
another framework with its own autograd uses.

Every output argument takes a Tensor (written in place: contiguous, exact
shape and dtype), None (the default: allocated here and returned) or False
(not computed; None is returned in its place). accumulate=True makes the
gradient outputs += their result (TFC_GRAD_ACCUMULATE); outputs allocated
here then start at zero. Shapes: see each function and kernels.h.
"""
import math

from ._lib import check, ffi, lib
from .functional import _attention_options
from .tensor import Tensor, _call, _i64, tensor

_GELU = {"none": lib.TFC_GELU_ERF, "tanh": lib.TFC_GELU_TANH}


def _out(arg, shape, like, accumulate=False):
    """(Tensor or None, handle or NULL) for an output argument."""
    if arg is False:
        return None, ffi.NULL
    if arg is None:
        fn = lib.tfc_tensor_zeros if accumulate else lib.tfc_tensor_empty
        arg = _call(fn, _i64(shape), len(shape), like.dtype.code)
    elif not isinstance(arg, Tensor):
        raise TypeError("tfcore.kernels: an output must be a Tensor, None or False, got %s" % type(arg).__name__)
    return arg, arg._h


def _opt(t):
    return ffi.NULL if t is None else t._h


def _flags(accumulate):
    return lib.TFC_GRAD_ACCUMULATE if accumulate else 0


def _gelu_mode(approximate):
    if approximate not in _GELU:
        raise ValueError("tfcore.kernels: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    return _GELU[approximate]


def _rows(x):
    n = 1
    for d in x.shape[:-1]:
        n *= d
    return (n,)


# ---- LayerNorm ------------------------------------------------------------------


def layernorm_forward(x, weight=None, bias=None, eps=1e-5, y=None, mean=None, rstd=None):
    """LayerNorm over the last dim of x [..., C]. Returns (y, mean [N], rstd [N])."""
    y, hy = _out(y, x.shape, x)
    mean, hm = _out(mean, _rows(x), x)
    rstd, hr = _out(rstd, _rows(x), x)
    check(lib.tfc_layernorm_forward(x._h, _opt(weight), _opt(bias), float(eps), hy, hm, hr))
    return y, mean, rstd


def layernorm_backward(dy, x, weight, mean, rstd, dx=None, dweight=None, dbias=None, accumulate=False):
    """Gradients of layernorm_forward. Returns (dx, dweight, dbias); dweight
    is None when weight is None."""
    C = x.shape[-1:]
    dx, hdx = _out(dx, x.shape, x, accumulate)
    dweight, hdw = _out(False if weight is None else dweight, C, x, accumulate)
    dbias, hdb = _out(dbias, C, x, accumulate)
    check(lib.tfc_layernorm_backward(dy._h, x._h, _opt(weight), mean._h, rstd._h, hdx, hdw, hdb,
                                     _flags(accumulate)))
    return dx, dweight, dbias


# ---- RMSNorm --------------------------------------------------------------------


def rmsnorm_forward(x, weight=None, eps=1e-6, y=None, rstd=None):
    """RMSNorm over the last dim of x [..., C]: x / sqrt(mean(x²) + eps) * weight.
    Returns (y, rstd [N]); rstd has x's dtype on the CPU, f32 on CUDA."""
    y, hy = _out(y, x.shape, x)
    rstd, hr = _out(rstd, _rows(x), x)
    check(lib.tfc_rmsnorm_forward(x._h, _opt(weight), float(eps), hy, hr))
    return y, rstd


def rmsnorm_backward(dy, x, weight, rstd, dx=None, dweight=None, accumulate=False):
    """Gradients of rmsnorm_forward. Returns (dx, dweight); dweight is None when weight is None."""
    dx, hdx = _out(dx, x.shape, x, accumulate)
    dweight, hdw = _out(False if weight is None else dweight, x.shape[-1:], x, accumulate)
    check(lib.tfc_rmsnorm_backward(dy._h, x._h, _opt(weight), rstd._h, hdx, hdw, _flags(accumulate)))
    return dx, dweight


# ---- softmax --------------------------------------------------------------------


def softmax_forward(x, dim=-1, log=False, y=None):
    """softmax (or log_softmax with log=True) of x along dim."""
    y, hy = _out(y, x.shape, x)
    check(lib.tfc_softmax_forward(x._h, int(dim), 1 if log else 0, hy))
    return y


def softmax_backward(dy, y, dim=-1, log=False, dx=None, accumulate=False):
    """Gradient of softmax_forward from its output y."""
    dx, hdx = _out(dx, y.shape, y, accumulate)
    check(lib.tfc_softmax_backward(dy._h, y._h, int(dim), 1 if log else 0, hdx, _flags(accumulate)))
    return dx


# ---- cross-entropy ----------------------------------------------------------------


def cross_entropy_forward(logits, targets, ignore_index=-100, loss=None, lse=None):
    """Mean cross-entropy of logits [N, C] against targets [N]. Returns (loss (0-d), lse [N])."""
    loss, hl = _out(loss, (), logits)
    lse, hlse = _out(lse, logits.shape[:1], logits)
    check(lib.tfc_cross_entropy_forward(logits._h, targets._h, int(ignore_index), hl, hlse))
    return loss, lse


def cross_entropy_backward(dloss, logits, targets, lse=None, ignore_index=-100, dlogits=None, accumulate=False):
    """dlogits [N, C]; dloss is a one-element tensor or a number; lse None recomputes it."""
    if not isinstance(dloss, Tensor):
        dloss = tensor(float(dloss), dtype=logits.dtype)
    dlogits, hd = _out(dlogits, logits.shape, logits, accumulate)
    check(lib.tfc_cross_entropy_backward(dloss._h, logits._h, targets._h, _opt(lse), int(ignore_index), hd,
                                         _flags(accumulate)))
    return dlogits


# ---- embedding --------------------------------------------------------------------


def embedding_forward(table, ids, out=None):
    """out[p..., :] = table[ids[p...], :] for table [V, C]."""
    out, ho = _out(out, tuple(ids.shape) + tuple(table.shape[-1:]), table)
    check(lib.tfc_embedding_forward(table._h, ids._h, ho))
    return out


def embedding_backward(dout, ids, dtable=None, num_embeddings=None, accumulate=False):
    """Scatter-add of dout [ids.shape..., C] into dtable [V, C]; pass dtable
    or num_embeddings (V)."""
    if dtable is None:
        if num_embeddings is None:
            raise ValueError("tfcore.kernels.embedding_backward: pass dtable or num_embeddings")
        dtable, hd = _out(None, (int(num_embeddings), dout.shape[-1]), dout, accumulate)
    else:
        hd = dtable._h
    check(lib.tfc_embedding_backward(dout._h, ids._h, hd, _flags(accumulate)))
    return dtable


# ---- attention --------------------------------------------------------------------


def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def attention_forward(q, k, v, causal=True, scale=None, out=None, lse=None, window=None):
    """Flash-style attention, q [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv] (Hkv dividing H: query head h
    reads kv head h // (H // Hkv), grouped-query attention). Returns (out [B,H,T,Dv], lse [B,H,T]);
    scale defaults to 1/sqrt(D); window=W (causal only): each query sees at most its last W keys
    (tfc_attention_forward_ex)."""
    out, ho = _out(out, tuple(q.shape[:-1]) + tuple(v.shape[-1:]), q)
    lse, hl = _out(lse, tuple(q.shape[:-1]), q)
    check(lib.tfc_attention_forward_ex(q._h, k._h, v._h, 1 if causal else 0, _scale(q, scale),
                                       _attention_options(window), ho, hl))
    return out, lse


def attention_backward(dout, q, k, v, out, lse, causal=True, scale=None, dq=None, dk=None, dv=None,
                       accumulate=False, window=None):
    """Gradients of attention_forward from its out and lse (same causal, scale, window). Returns (dq, dk, dv);
    dk and dv have k's and v's kv heads, each the sum over the query heads reading it."""
    dq, hq = _out(dq, q.shape, q, accumulate)
    dk, hk = _out(dk, k.shape, q, accumulate)
    dv, hv = _out(dv, v.shape, q, accumulate)
    check(lib.tfc_attention_backward_ex(dout._h, q._h, k._h, v._h, out._h, lse._h, 1 if causal else 0,
                                        _scale(q, scale), _attention_options(window), hq, hk, hv,
                                        _flags(accumulate)))
    return dq, dk, dv


# ---- GELU, matmul -----------------------------------------------------------------


def gelu_forward(x, approximate="none", y=None):
    y, hy = _out(y, x.shape, x)
    check(lib.tfc_gelu_forward(x._h, _gelu_mode(approximate), hy))
    return y


def gelu_backward(dy, x, approximate="none", dx=None, accumulate=False):
    dx, hdx = _out(dx, x.shape, x, accumulate)
    check(lib.tfc_gelu_backward(dy._h, x._h, _gelu_mode(approximate), hdx, _flags(accumulate)))
    return dx


# ---- rotary position embedding ------------------------------------------------------


def rope_forward(x, positions, inv_freq, y=None):
    """RoPE (rotate-half) of x [B,H,T,D] at positions (int64 [T], [1,T] or [B,T]) with inv_freq [D/2]
    (tfcore.functional.rope_inv_freq; float32 for float32 x, float64 for float64). Returns y [B,H,T,D]."""
    y, hy = _out(y, x.shape, x)
    check(lib.tfc_rope_forward(x._h, positions._h, inv_freq._h, hy))
    return y


def rope_backward(dy, positions, inv_freq, dx=None, accumulate=False):
    """Gradient of rope_forward: dy rotated back by the same angles. Returns dx [B,H,T,D]."""
    dx, hdx = _out(dx, dy.shape, dy, accumulate)
    check(lib.tfc_rope_backward(dy._h, positions._h, inv_freq._h, hdx, _flags(accumulate)))
    return dx


# ---- SwiGLU -----------------------------------------------------------------------


def swiglu_forward(gate, up, out=None):
    """out = silu(gate) * up for gate, up [..., F]. Every tensor may be a row-strided view (the halves of a
    [..., 2F] tensor: swiglu_fused_forward), outputs included."""
    out, ho = _out(out, gate.shape, gate)
    check(lib.tfc_swiglu_forward(gate._h, up._h, ho))
    return out


def swiglu_backward(dy, gate, up, dgate=None, dup=None, accumulate=False):
    """dgate = dy * up * s * (1 + gate * (1 - s)) with s = sigmoid(gate), dup = dy * silu(gate). Returns
    (dgate, dup)."""
    dgate, hg = _out(dgate, gate.shape, gate, accumulate)
    dup, hu = _out(dup, gate.shape, gate, accumulate)
    check(lib.tfc_swiglu_backward(dy._h, gate._h, up._h, hg, hu, _flags(accumulate)))
    return dgate, dup


def _halves(fn, t):
    f2 = t.shape[-1] if t.shape else 1
    if not t.shape or f2 % 2:
        from ._lib import ShapeError
        raise ShapeError("tfcore.kernels.%s: gate_up is %s; its last dim must be even (gate and up are its halves)"
                         % (fn, list(t.shape)))
    return t.narrow(-1, 0, f2 // 2), t.narrow(-1, f2 // 2, f2 // 2)


def swiglu_fused_forward(gate_up, out=None):
    """swiglu_forward on the halves of gate_up [..., 2F] (gate first), read in place. out [..., F]."""
    gate, up = _halves("swiglu_fused_forward", gate_up)
    return swiglu_forward(gate, up, out)


def swiglu_fused_backward(dy, gate_up, dgate_up=None, accumulate=False):
    """The gradient of swiglu_fused_forward: dgate_up [..., 2F] holds dgate then dup, both written by one kernel
    call."""
    gate, up = _halves("swiglu_fused_backward", gate_up)
    dgate_up, _ = _out(dgate_up, gate_up.shape, gate_up, accumulate)
    dgate, dup = _halves("swiglu_fused_backward", dgate_up)
    swiglu_backward(dy, gate, up, dgate, dup, accumulate)
    return dgate_up


def matmul_backward(dout, a, b, da=None, db=None, accumulate=False):
    """da = dout · bᵀ, db = aᵀ · dout (summed over broadcast batch dims). Returns (da, db)."""
    da, ha = _out(da, a.shape, a, accumulate)
    db, hb = _out(db, b.shape, b, accumulate)
    check(lib.tfc_matmul_backward(dout._h, a._h, b._h, ha, hb, _flags(accumulate)))
    return da, db
