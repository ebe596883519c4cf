"""Ops as functions (tfcore.matmul, tfcore.layer_norm, ...), PyTorch's names
and argument orders. Each is one call into libtfcore: the op records on the
thread's graph when grad mode is on and an input requires grad (see
tfcore.autograd)."""
import math
import numbers
import operator
from collections import namedtuple as _namedtuple

import numpy as _np

from . import _dtype as _dtype_mod
from . import autograd as _ag
from ._lib import check, ffi, lib
from .tensor import MinMax, Tensor, TopK, _call, _draw, _i32, _i64, _wrap, tensor

_GELU = {"none": lib.TFC_GELU_ERF, "tanh": lib.TFC_GELU_TANH}


def _unary(fn, x):
    return _call(fn, _ag.graph_for(x), x._h)


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def neg(x):
    return _unary(lib.tfc_neg, x)


def exp(x):
    return _unary(lib.tfc_exp, x)


def log(x):
    return _unary(lib.tfc_log, x)


def sqrt(x):
    return _unary(lib.tfc_sqrt, x)


def rsqrt(x):
    return _unary(lib.tfc_rsqrt, x)


def tanh(x):
    return _unary(lib.tfc_tanh, x)


def sigmoid(x):
    return _unary(lib.tfc_sigmoid, x)


def relu(x):
    return _unary(lib.tfc_relu, x)


def pow(x, exponent):
    return x ** exponent


def gelu(x, approximate="none"):
    """GELU: approximate='none' is x·Φ(x), 'tanh' GPT-2's tanh form (PyTorch's names)."""
    if approximate not in _GELU:
        raise ValueError("tfcore.gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    return _call(lib.tfc_gelu, _ag.graph_for(x), x._h, _GELU[approximate])


# ---- gated MLP activations (Llama family) ---------------------------------------------


def _tensor_arg(fn, name, v):
    if not isinstance(v, Tensor):
        raise TypeError("tfcore.%s: %s must be a Tensor, got %s" % (fn, name, type(v).__name__))


def silu(x):
    """SiLU (swish), x·σ(x), as torch.nn.functional.silu; no exp overflows for large |x|."""
    _tensor_arg("silu", "x", x)
    return _unary(lib.tfc_silu, x)


def swiglu(gate, up=None):
    """SwiGLU, silu(gate) * up, in one fused kernel (HF's LlamaMLP: F.silu(gate_proj(x)) * up_proj(x)).

    swiglu(gate, up): gate and up of one shape [..., F]; views (e.g. halves of a wider tensor) are read in place.
    swiglu(gate_up): one [..., 2F] tensor whose last dim holds gate then up (one GEMM with the two weights
    stacked); its gradient is written into one [..., 2F] buffer. An odd last dim raises ShapeError."""
    _tensor_arg("swiglu", "gate", gate)
    if up is None:
        return _call(lib.tfc_swiglu_fused, _ag.graph_for(gate), gate._h)
    _tensor_arg("swiglu", "up", up)
    return _call(lib.tfc_swiglu, _ag.graph_for(gate, up), gate._h, up._h)


# ---- reductions ---------------------------------------------------------------------


def _dims_arg(dim):
    if dim is None:
        return ffi.NULL, 0
    dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    return _i32(dims), len(dims)


def _reduce(fn, x, dim, keepdim):
    d, n = _dims_arg(dim)
    return _call(fn, _ag.graph_for(x), x._h, d, n, 1 if keepdim else 0)


def sum(x, dim=None, keepdim=False):
    return _reduce(lib.tfc_sum, x, dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return _reduce(lib.tfc_mean, x, dim, keepdim)


def max(x, dim=None, keepdim=False):
    """max(x) is the largest value; max(x, dim) is (values, indices) along dim, as in PyTorch."""
    values = _reduce(lib.tfc_max, x, dim, keepdim)
    if dim is None or not isinstance(dim, numbers.Integral):
        return values
    return MinMax(values, argmax(_arg_input(x), dim, keepdim))


def min(x, dim=None, keepdim=False):
    values = _reduce(lib.tfc_min, x, dim, keepdim)
    if dim is None or not isinstance(dim, numbers.Integral):
        return values
    return MinMax(values, argmin(_arg_input(x), dim, keepdim))


def _arg_input(x):
    """torch's max(bool, dim) gives indices though argmax refuses bool: take them from a u8 copy."""
    if x.dtype.code != lib.TFC_DTYPE_BOOL:
        return x
    with _ag.no_grad():
        return x.to(_dtype_mod.uint8)


def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    """Σ(x − mean)² / (n − correction); correction defaults to 1 (unbiased) as in PyTorch."""
    if correction is None:
        correction = 1 if unbiased else 0
    d, n = _dims_arg(dim)
    return _call(lib.tfc_var, _ag.graph_for(x), x._h, d, n, int(correction), 1 if keepdim else 0)


def std(x, dim=None, unbiased=True, keepdim=False):
    return var(x, dim, unbiased, keepdim).sqrt()


def _arg(fn, x, dim, keepdim):
    if dim is None:
        with _ag.no_grad():
            flat = x.reshape(-1)
        return _call(fn, flat._h, 0, 0)
    return _call(fn, x._h, operator.index(dim), 1 if keepdim else 0)


def argmax(x, dim=None, keepdim=False):
    """Index (int64) of the first maximum along dim; over the flattened tensor when dim is None."""
    return _arg(lib.tfc_argmax, x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    """Index (int64) of the first minimum along dim; over the flattened tensor when dim is None."""
    return _arg(lib.tfc_argmin, x, dim, keepdim)


# ---- softmax, linear algebra, layers -----------------------------------------------


def softmax(x, dim):
    return _call(lib.tfc_softmax, _ag.graph_for(x), x._h, int(dim))


def log_softmax(x, dim):
    return _call(lib.tfc_log_softmax, _ag.graph_for(x), x._h, int(dim))


def matmul(a, b):
    """numpy.matmul semantics: 1-D operands promoted, batch dims broadcast."""
    return _call(lib.tfc_matmul, _ag.graph_for(a, b), a._h, b._h)


def linear(x, weight, bias=None):
    """x · weightᵀ + bias with weight [out, in], as torch.nn.functional.linear.

    A 2-D weight goes to tfc_linear (which takes the [in, out] layout) as a
    transposed view: one GEMM with the bias fused, no copy of the weight."""
    if weight.ndim != 2 or x.ndim < 1 or (bias is not None and bias.ndim != 1):
        y = matmul(x, weight.transpose(0, 1) if weight.ndim == 2 else weight)
        return y if bias is None else y + bias
    wt = weight.transpose(0, 1)
    return _call(lib.tfc_linear, _ag.graph_for(x, wt, bias), x._h, wt._h, ffi.NULL if bias is None else bias._h)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """LayerNorm over the last dim (normalized_shape must be (C,) with C = x.shape[-1])."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    if tuple(normalized_shape) != tuple(x.shape[-1:]):
        raise ValueError("tfcore.layer_norm: only the last dim can be normalized: normalized_shape %s, "
                         "x is %s" % (tuple(normalized_shape), x.shape))
    return _call(lib.tfc_layernorm, _ag.graph_for(x, weight, bias), x._h,
                 ffi.NULL if weight is None else weight._h, ffi.NULL if bias is None else bias._h, float(eps))


# torch.finfo(dtype).eps: F.rms_norm's eps when none is given
_FINFO_EPS = {"float32": 2.0 ** -23, "float64": 2.0 ** -52, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """RMSNorm over the last dim, as torch 2.x's F.rms_norm (and Llama's RMSNorm):
    input / sqrt(mean(input², -1) + eps) * weight. normalized_shape must be (C,)
    with C = input.shape[-1]; weight [C] or None; eps None means
    torch.finfo(input.dtype).eps, as in torch."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    if tuple(normalized_shape) != tuple(input.shape[-1:]):
        raise ValueError("tfcore.rms_norm: only the last dim can be normalized: normalized_shape %s, "
                         "input is %s" % (tuple(normalized_shape), input.shape))
    if eps is None:
        eps = _FINFO_EPS.get(input.dtype.name, 2.0 ** -23)
    return _call(lib.tfc_rmsnorm, _ag.graph_for(input, weight), input._h, ffi.NULL if weight is None else weight._h,
                 float(eps))


def embedding(input, weight):
    """Rows of weight [V, C] picked by the integer ids in input: [*input.shape, C] (torch order)."""
    return _call(lib.tfc_embedding, _ag.graph_for(weight), weight._h, input._h)


def cross_entropy(input, target, ignore_index=-100, reduction="mean"):
    """Mean cross-entropy of logits [N, C] (or [..., C]) against class ids [N] (or [...])."""
    if reduction != "mean":
        raise ValueError("tfcore.cross_entropy: only reduction='mean' is supported")
    return _call(lib.tfc_cross_entropy, _ag.graph_for(input), input._h, target._h, int(ignore_index))


def linear_cross_entropy(input, weight, target, ignore_index=-100):
    """cross_entropy(linear(input, weight), target) for input [N, C], weight [V, C] (any strides), target [N],
    computed in row chunks without the [N, V] logits (nor their gradient) ever existing."""
    return _call(lib.tfc_linear_cross_entropy, _ag.graph_for(input, weight), input._h, weight._h, target._h,
                 int(ignore_index))


def _attention_options(window):
    """A tfc_attention_options for the _ex doors: window None or 0 is none (the C door checks the rest)."""
    if window is None:
        window = 0
    if isinstance(window, bool) or not isinstance(window, numbers.Integral):
        raise TypeError("tfcore attention: window must be an int or None, got %s" % type(window).__name__)
    o = ffi.new("tfc_attention_options *")
    o.struct_size = ffi.sizeof("tfc_attention_options")
    o.window = int(window)
    return o


def attention(q, k, v, causal=True, scale=None, window=None):
    """softmax(scale · q kᵀ [+ mask]) v for q [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv] → [B,H,T,Dv].

    scale defaults to 1/sqrt(D); the causal mask is bottom-right aligned (query i sees keys
    j <= i + S - T). Hkv must divide H: query head h attends with kv head h // (H // Hkv), as
    Hugging Face's repeat_kv orders them (grouped-query attention; Hkv = 1 is multi-query), without
    repeating k and v. window=W (causal only) is Mistral's / Qwen2's sliding window: query i also
    drops keys j <= i + S - T - W, so it sees at most W keys, itself included."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return _call(lib.tfc_attention_ex, _ag.graph_for(q, k, v), q._h, k._h, v._h, 1 if causal else 0, float(scale),
                 _attention_options(window))


# ---- rotary position embedding ----------------------------------------------------------

_ROPE_TYPES = {"default": lib.TFC_ROPE_DEFAULT, "linear": lib.TFC_ROPE_LINEAR, "dynamic": lib.TFC_ROPE_DYNAMIC,
               "llama3": lib.TFC_ROPE_LLAMA3}
# rope_scaling keys each type needs (transformers' _validate_*_parameters); "original_max_position_embeddings" is
# also accepted (and unused) with dynamic, as there.
_ROPE_KEYS = {"default": (), "linear": ("factor",), "dynamic": ("factor",),
              "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}


def rope_inv_freq(head_dim, theta=10000.0, rope_scaling=None, max_position_embeddings=None, seq_len=0,
                  dtype="float32", device=None):
    """The rotary inverse frequencies [head_dim // 2] of a config.json's rope_theta and rope_scaling (a dict as
    transformers reads it: "rope_type" (or "type") "default", "linear", "dynamic" or "llama3", with "factor",
    "low_freq_factor", "high_freq_factor", "original_max_position_embeddings" as the type needs). Dynamic NTK
    also reads the config's max_position_embeddings and seq_len, the sequence length the frequencies serve
    (largest position + 1). Computed in float64 by tfc_rope_inv_freq; returned as a Tensor of dtype: float32
    (transformers' dtype, for float32 and bfloat16 models) or float64 (for float64 ones). A key the type does not
    take is ValueError, a missing one KeyError."""
    cfg = ffi.new("tfc_rope_config *")
    cfg.struct_size = ffi.sizeof("tfc_rope_config")
    cfg.theta, cfg.factor, cfg.low_freq_factor, cfg.high_freq_factor = float(theta), 1.0, 1.0, 4.0
    cfg.original_max_position_embeddings, cfg.max_position_embeddings = 8192, 2048
    scaling = dict(rope_scaling or {})
    kind = scaling.pop("rope_type", scaling.pop("type", "default"))
    if kind not in _ROPE_TYPES:
        raise ValueError("tfcore.rope_inv_freq: rope_type %r is not one of %s" % (kind, ", ".join(_ROPE_TYPES)))
    cfg.rope_type = _ROPE_TYPES[kind]
    for key in _ROPE_KEYS[kind]:
        if key not in scaling:
            raise KeyError("tfcore.rope_inv_freq: rope_scaling of rope_type %r needs %r" % (kind, key))
    allowed = set(_ROPE_KEYS[kind]) | ({"original_max_position_embeddings"} if kind == "dynamic" else set())
    for key, value in scaling.items():
        if key not in allowed:
            raise ValueError("tfcore.rope_inv_freq: rope_scaling key %r is not used by rope_type %r (it takes %s)"
                             % (key, kind, ", ".join(sorted(allowed)) or "none"))
        if key != "original_max_position_embeddings":
            setattr(cfg, key, float(value))
        elif kind == "llama3":
            cfg.original_max_position_embeddings = operator.index(value)
    if kind == "dynamic":
        if max_position_embeddings is None:
            raise ValueError("tfcore.rope_inv_freq: rope_type 'dynamic' needs max_position_embeddings")
        cfg.max_position_embeddings = operator.index(max_position_embeddings)
    head_dim = operator.index(head_dim)
    out = ffi.new("double[]", builtin_max(head_dim // 2, 1))
    check(lib.tfc_rope_inv_freq(cfg, head_dim, operator.index(seq_len), out))
    return tensor(_np.frombuffer(ffi.buffer(out), dtype=_np.float64)[:head_dim // 2], dtype=dtype, device=device)


def rope(x, positions, inv_freq):
    """Rotary position embedding, transformers' rotate-half form (apply_rotary_pos_emb) of x [B,H,T,D]:
    x·cos + rotate_half(x)·sin with angle positions[b,t] · inv_freq[i], repeated over both halves of D.
    positions: int64 [T], [1,T] or [B,T] (a KV cache's offset, per-sequence positions; array-likes are made
    int64 tensors on x's device); inv_freq [D/2] from rope_inv_freq, float32 for float32 and bfloat16 x (angles
    in float32 as transformers computes them) or float64 for float64 x. Gradients flow to x only."""
    if not isinstance(x, Tensor) or not isinstance(inv_freq, Tensor):
        raise TypeError("tfcore.rope: x and inv_freq must be Tensors, got %s and %s"
                        % (type(x).__name__, type(inv_freq).__name__))
    if not isinstance(positions, Tensor):
        arr = _np.asarray(positions)
        if arr.size and not _np.issubdtype(arr.dtype, _np.integer):
            raise TypeError("tfcore.rope: positions must be integers, got %s" % arr.dtype)
        positions = tensor(arr.astype(_np.int64), device=x.device)
    return _call(lib.tfc_rope, _ag.graph_for(x), x._h, positions._h, inv_freq._h)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention's signature and defaults
    (not causal unless is_causal). q [..., T, D], k [..., S, D], v [..., S, Dv].

    attn_mask is a bool mask (True = attend) or a float mask added to the
    scores, broadcast to [..., T, S]; is_causal is torch's top-left aligned
    tril(ones(T, S)), an error together with attn_mask. enable_gqa (torch 2.5's
    argument) lets k and v have Hkv heads (dim -3) dividing q's H: query head h
    reads kv head h // (H // Hkv). Without a mask, dropout or T != S under
    is_causal this is one fused tfc_attention_ex call (grouped heads read in
    place); otherwise the scores are formed explicitly, k and v repeated to H
    heads first. dropout_p applies whenever it is > 0, as in torch (pass 0.0
    in evaluation)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError("tfcore.scaled_dot_product_attention: %s must be a Tensor, got %s"
                            % (name, type(t).__name__))
    if attn_mask is not None and is_causal:
        raise ValueError("tfcore.scaled_dot_product_attention: pass attn_mask or is_causal=True, not both")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError("tfcore.scaled_dot_product_attention: dropout_p must be in [0, 1], got %r" % (dropout_p,))
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError("tfcore.scaled_dot_product_attention: query, key and value need at least 2 dims, got "
                         "%s, %s, %s" % (query.shape, key.shape, value.shape))
    T, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    grouped = enable_gqa and query.ndim >= 3 and key.ndim >= 3 and key.shape[-3] != query.shape[-3]
    if grouped and (key.shape[-3] == 0 or query.shape[-3] % key.shape[-3] != 0 or value.shape[-3] != key.shape[-3]):
        raise ValueError("tfcore.scaled_dot_product_attention: with enable_gqa, key's and value's heads (dim -3) "
                         "must be equal and divide query's; got %s, %s, %s" % (query.shape, key.shape, value.shape))
    fused = attn_mask is None and dropout_p == 0 and (not is_causal or T == S) and \
        query.ndim == 4 and key.ndim == 4 and value.ndim == 4 and (grouped or key.shape[1] == query.shape[1])
    if fused:
        return attention(query, key, value, causal=bool(is_causal), scale=scale)
    if grouped:  # the explicit path on repeated heads, as repeat_kv / repeat_interleave make them
        g = query.shape[-3] // key.shape[-3]
        key, value = (_repeat_heads(t, g) for t in (key, value))
    import numpy as np  # the explicit path: masks are built on the host
    scores = matmul(query, key.transpose(-2, -1)) * float(scale)
    if is_causal:
        attn_mask = tensor(np.tril(np.ones((T, S), dtype=np.bool_)))
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            attn_mask = tensor(attn_mask)
        if attn_mask.dtype.name == "bool":  # True keeps a score (torch's meaning, masked_fill's opposite)
            keep = attn_mask.cpu().numpy()
            scores = masked_fill(scores, tensor(~keep, device=scores.device), float("-inf"))
        else:
            scores = scores + attn_mask.to(scores.dtype).to(scores.device)
    weights = softmax(scores, -1)
    if dropout_p > 0:
        weights = dropout(weights, float(dropout_p), True)
    return matmul(weights, value)


def _repeat_heads(t, g):
    """[..., Hkv, S, D] → [..., Hkv·g, S, D], kv head j becoming heads j·g .. j·g + g - 1."""
    lead, (hkv, s, d) = tuple(t.shape[:-3]), tuple(t.shape[-3:])
    return t.unsqueeze(-3).expand(*lead, hkv, g, s, d).reshape(*lead, hkv * g, s, d)


def _check_dropout_p(p):
    """torch 1.13's rule: p is a number in [0, 1] (ValueError otherwise; TypeError for a non-number)."""
    if isinstance(p, (str, bytes, bool)) or not isinstance(p, numbers.Real):
        raise TypeError("dropout probability must be a number, got %s %r" % (type(p).__name__, p))
    if not 0 <= p <= 1:
        raise ValueError("dropout probability has to be between 0 and 1, but got {}".format(p))


def dropout(x, p=0.5, training=True, seed=None):
    """Inverted dropout; identity when not training or p == 0. The mask comes
    from tfcore's Philox stream (tfcore.manual_seed) or from (seed, 0). p == 1
    zeros everything (x · 0, as torch 1.13: NaN stays NaN, the gradient is 0)."""
    _check_dropout_p(p)
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    s, off = (int(seed), 0) if seed is not None else _draw(x.numel())
    return _call(lib.tfc_dropout, _ag.graph_for(x), x._h, float(p), s, off)


# ---- selection and joining --------------------------------------------------------


def _like(value, ref):
    return value if isinstance(value, Tensor) else tensor(value, dtype=ref.dtype)


def where(condition, input, other):
    """condition ? input : other, all broadcast; input/other may be scalars."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("tfcore.where: input or other must be a Tensor")
    ref = input if isinstance(input, Tensor) else other
    a, b = _like(input, ref), _like(other, ref)
    return _call(lib.tfc_where, _ag.graph_for(a, b), condition._h, a._h, b._h)


def masked_fill(x, mask, value):
    """x with value where mask (bool/uint8, broadcast) is set."""
    return _call(lib.tfc_masked_fill, _ag.graph_for(x), x._h, mask._h, float(value))


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("tfcore.cat: expected a non-empty list of tensors")
    handles = ffi.new("tfc_tensor *[]", [t._h for t in tensors])
    return _call(lib.tfc_concat, _ag.graph_for(*tensors), handles, len(tensors), int(dim))


concat = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    return cat([t.unsqueeze(dim) for t in tensors], dim)


def split(x, split_size_or_sections, dim=0):
    """Views of x along dim: pieces of split_size (the last may be smaller) or of the listed sizes."""
    size = x.shape[dim]
    if isinstance(split_size_or_sections, numbers.Integral):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError("tfcore.split: split_size must be positive, got %d" % step)
        sizes = [step] * (size // step) + ([size % step] if size % step else [])
        if not sizes:
            sizes = [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
    outs = ffi.new("tfc_tensor *[]", len(sizes))
    check(lib.tfc_split(_ag.graph_for(x), x._h, _i64(sizes), len(sizes), int(dim), outs))
    return tuple(_wrap(outs[i]) for i in range(len(sizes)))


def chunk(x, chunks, dim=0):
    size = x.shape[dim]
    return split(x, -(-size // chunks) if size else 1, dim)


def topk(x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) along dim, sorted."""
    values = ffi.new("tfc_tensor **")
    indices = ffi.new("tfc_tensor **")
    check(lib.tfc_topk(_ag.graph_for(x), x._h, int(k), int(dim), 1 if largest else 0, values, indices))
    return TopK(_wrap(values[0]), _wrap(indices[0]))


# ---- views -----------------------------------------------------------------------


def reshape(x, shape):
    shape = tuple(shape)
    return _call(lib.tfc_reshape, _ag.graph_for(x), x._h, _i64(shape), len(shape))


def view(x, shape):
    shape = tuple(shape)
    return _call(lib.tfc_view, _ag.graph_for(x), x._h, _i64(shape), len(shape))


def permute(x, dims):
    dims = tuple(dims)
    return _call(lib.tfc_permute, _ag.graph_for(x), x._h, _i32(dims), len(dims))


def transpose(x, dim0, dim1):
    return _call(lib.tfc_transpose, _ag.graph_for(x), x._h, int(dim0), int(dim1))


def contiguous(x):
    return _call(lib.tfc_contiguous, _ag.graph_for(x), x._h)


def expand(x, shape):
    shape = tuple(shape)
    return _call(lib.tfc_expand, _ag.graph_for(x), x._h, _i64(shape), len(shape))


def squeeze(x, dim=None):
    """Drop size-1 dims (all of them, or dim; a dim of another size is left, as in PyTorch)."""
    if dim is None:
        out = x
        for d in reversed(range(x.ndim)):
            if x.shape[d] == 1:
                out = _call(lib.tfc_squeeze, _ag.graph_for(out), out._h, d)
        return out
    if x.shape[dim] != 1:
        return x
    return _call(lib.tfc_squeeze, _ag.graph_for(x), x._h, int(dim))


def unsqueeze(x, dim):
    return _call(lib.tfc_unsqueeze, _ag.graph_for(x), x._h, int(dim))


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, (1,))
    return _call(lib.tfc_flatten, _ag.graph_for(x), x._h, int(start_dim), int(end_dim))


def narrow(x, dim, start, length):
    return _call(lib.tfc_narrow, _ag.graph_for(x), x._h, int(dim), int(start), int(length))


def _slice(x, dim, start, stop, step):
    return _call(lib.tfc_slice, _ag.graph_for(x), x._h, dim, start, stop, step)


def _index(x, index):
    """x[index] (tfcore/_indexing.py: views for basic indices, copies for advanced ones)."""
    from . import _indexing
    return _indexing.getitem(x, index)


import builtins as _builtins  # noqa: E402

builtin_sum = _builtins.sum
builtin_max = _builtins.max


# ---- operands: a TypeError naming the argument, not an AttributeError on None._h --------

_MISSING = object()


def _require_tensors(fn, required, optional=()):
    """fn, refusing a non-Tensor in the required parameters (None too) and in the optional ones (None allowed)
    with a TypeError, as torch does; the check reads the arguments where they are, without inspect.bind."""
    import functools
    import inspect
    names = list(inspect.signature(fn).parameters)
    where = [(names.index(n), n, False) for n in required] + [(names.index(n), n, True) for n in optional]

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for i, n, opt in where:
            v = args[i] if i < len(args) else kwargs.get(n, _MISSING)
            if v is _MISSING or isinstance(v, Tensor) or (opt and v is None):
                continue
            raise TypeError("tfcore.%s: %s must be a Tensor, got %s" % (fn.__name__, n, type(v).__name__))
        return fn(*args, **kwargs)
    return checked


for _name, _req, _opt in [
        ("neg", ("x",), ()), ("exp", ("x",), ()), ("log", ("x",), ()), ("sqrt", ("x",), ()), ("rsqrt", ("x",), ()),
        ("tanh", ("x",), ()), ("sigmoid", ("x",), ()), ("relu", ("x",), ()), ("gelu", ("x",), ()),
        ("sum", ("x",), ()), ("mean", ("x",), ()), ("max", ("x",), ()), ("min", ("x",), ()), ("var", ("x",), ()),
        ("std", ("x",), ()), ("argmax", ("x",), ()), ("argmin", ("x",), ()), ("softmax", ("x",), ()),
        ("log_softmax", ("x",), ()), ("matmul", ("a", "b"), ()), ("linear", ("x", "weight"), ("bias",)),
        ("layer_norm", ("x",), ("weight", "bias")), ("embedding", ("input", "weight"), ()),
        ("cross_entropy", ("input", "target"), ()), ("linear_cross_entropy", ("input", "weight", "target"), ()),
        ("attention", ("q", "k", "v"), ()), ("dropout", ("x",), ()), ("masked_fill", ("x", "mask"), ()),
        ("where", ("condition",), ()), ("topk", ("x",), ()), ("reshape", ("x",), ()), ("view", ("x",), ()),
        ("permute", ("x",), ()), ("transpose", ("x",), ()), ("contiguous", ("x",), ()), ("expand", ("x",), ()),
        ("squeeze", ("x",), ()), ("unsqueeze", ("x",), ()), ("flatten", ("x",), ()), ("narrow", ("x",), ()),
        ("split", ("x",), ()), ("chunk", ("x",), ())]:
    globals()[_name] = _require_tensors(globals()[_name], _req, _opt)
del _name, _req, _opt
# ---- indexing ops (lib/ops/index.c) ----------------------------------------------------

def _index_arg(fn, index):
    if not isinstance(index, Tensor):
        raise TypeError("tfcore.%s: index must be an integer tensor, got %s" % (fn, type(index).__name__))
    return index


def _indexed(fn, *args):
    from ._lib import InvalidArgumentError
    try:
        return _call(*args)
    except InvalidArgumentError as e:
        if "out of range" in str(e):
            raise IndexError(str(e)) from None
        raise


def index_select(input, dim, index):
    """torch.index_select: the entries of index along dim (index 1-D int64/int32, no negative entries)."""
    if not isinstance(input, Tensor):
        raise TypeError("tfcore.index_select: input must be a tensor, got %s" % type(input).__name__)
    index = _index_arg("index_select", index)
    return _indexed("index_select", lib.tfc_index_select, _ag.graph_for(input), input._h, operator.index(dim),
                    index._h)


def gather(input, dim, index):
    """torch.gather: out[p] = input[p with p[dim] = index[p]]; out has index's shape."""
    if not isinstance(input, Tensor):
        raise TypeError("tfcore.gather: input must be a tensor, got %s" % type(input).__name__)
    index = _index_arg("gather", index)
    return _indexed("gather", lib.tfc_gather, _ag.graph_for(input), input._h, operator.index(dim), index._h)


def scatter_add(input, dim, index, src):
    """torch.scatter_add (out of place): input with src added at the positions index names along dim."""
    if not isinstance(input, Tensor) or not isinstance(src, Tensor):
        raise TypeError("tfcore.scatter_add: input and src must be tensors, got %s and %s"
                        % (type(input).__name__, type(src).__name__))
    index = _index_arg("scatter_add", index)
    return _indexed("scatter_add", lib.tfc_scatter_add, _ag.graph_for(input, src), input._h, operator.index(dim),
                    index._h, src._h)


def nonzero(input, as_tuple=False):
    """torch.nonzero: int64 [N, ndim] positions of the nonzero elements (as_tuple: one 1-D tensor per dim)."""
    if not isinstance(input, Tensor):
        raise TypeError("tfcore.nonzero: input must be a tensor, got %s" % type(input).__name__)
    out = _call(lib.tfc_nonzero, input._h)
    if as_tuple:
        return tuple(out[:, d] for d in range(input.ndim))
    return out


def masked_select(input, mask):
    """torch.masked_select: the elements of input where mask (bool, broadcast to input) is true, 1-D."""
    if not isinstance(input, Tensor) or not isinstance(mask, Tensor):
        raise TypeError("tfcore.masked_select: input and mask must be tensors, got %s and %s"
                        % (type(input).__name__, type(mask).__name__))
    return _call(lib.tfc_masked_select, _ag.graph_for(input), input._h, mask._h)
# ---- issue #16: pointwise, comparisons, scans, sorting, sampling -------------------
# (defined after the builtins are saved above: abs, round, any and all shadow them here)

builtin_abs = _builtins.abs
Sort = _namedtuple("Sort", ["values", "indices"])


def _need_tensor(fname, name, x):
    if not isinstance(x, Tensor):
        raise TypeError("tfcore.%s: %s must be a Tensor, not %s" % (fname, name, type(x).__name__))
    return x


def _unary_checked(fname, fn, x):
    return _unary(fn, _need_tensor(fname, "input", x))


def abs(x):
    return _unary_checked("abs", lib.tfc_abs, x)


def sign(x):
    return _unary_checked("sign", lib.tfc_sign, x)


def sin(x):
    return _unary_checked("sin", lib.tfc_sin, x)


def cos(x):
    return _unary_checked("cos", lib.tfc_cos, x)


def floor(x):
    return _unary_checked("floor", lib.tfc_floor, x)


def ceil(x):
    return _unary_checked("ceil", lib.tfc_ceil, x)


def round(x):
    """Round half to even, as torch.round."""
    return _unary_checked("round", lib.tfc_round, x)


def _bound(name, v):
    if v is None or isinstance(v, Tensor):
        return v
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    raise TypeError("tfcore.clamp: %s must be a number, a Tensor or None, not %s" % (name, type(v).__name__))


def clamp(x, min=None, max=None):
    """min(max(x, min), max); either bound may be None (not both), a number or a Tensor (broadcast)."""
    _need_tensor("clamp", "input", x)
    lo, hi = _bound("min", min), _bound("max", max)
    if lo is None and hi is None:
        raise ValueError("tfcore.clamp: at least one of min and max must not be None")
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        # where, not maximum/minimum: at x == bound torch gives x the whole
        # gradient (maximum would split it), and NaN in x stays NaN.
        out = x
        if lo is not None:
            lo = lo if isinstance(lo, Tensor) else tensor(lo, dtype=x.dtype)
            out = where(out < lo, lo, out)
        if hi is not None:
            hi = hi if isinstance(hi, Tensor) else tensor(hi, dtype=x.dtype)
            out = where(out > hi, hi, out)
        return out
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    if lo != lo or hi != hi:
        raise ValueError("tfcore.clamp: a bound is NaN")
    return _call(lib.tfc_clamp, _ag.graph_for(x), x._h, lo, hi)


clip = clamp


def maximum(a, b):
    """Elementwise max (broadcast); gradient split in half at ties, as torch."""
    _need_tensor("maximum", "input", a)
    _need_tensor("maximum", "other", b)
    return _call(lib.tfc_maximum, _ag.graph_for(a, b), a._h, b._h)


def minimum(a, b):
    _need_tensor("minimum", "input", a)
    _need_tensor("minimum", "other", b)
    return _call(lib.tfc_minimum, _ag.graph_for(a, b), a._h, b._h)


_CMP = {"lt": (lib.tfc_lt, lib.tfc_lt_scalar), "le": (lib.tfc_le, lib.tfc_le_scalar),
        "gt": (lib.tfc_gt, lib.tfc_gt_scalar), "ge": (lib.tfc_ge, lib.tfc_ge_scalar),
        "eq": (lib.tfc_eq, lib.tfc_eq_scalar), "ne": (lib.tfc_ne, lib.tfc_ne_scalar)}


def _compare(name, a, b):
    """a <op> b as a bool tensor; a is a Tensor, b a Tensor, a number or array-like."""
    tensor_fn, scalar_fn = _CMP[name]
    if isinstance(b, Tensor):
        return _call(tensor_fn, a._h, b._h)
    if isinstance(b, (numbers.Number, _np.generic)) and not isinstance(b, complex):
        return _call(scalar_fn, a._h, float(b))
    if b is None or isinstance(b, (str, bytes, dict, set)):
        raise TypeError("tfcore.%s: cannot compare a Tensor with %s" % (name, type(b).__name__))
    return _call(tensor_fn, a._h, tensor(b)._h)


def lt(a, b):
    return _compare("lt", _need_tensor("lt", "input", a), b)


def le(a, b):
    return _compare("le", _need_tensor("le", "input", a), b)


def gt(a, b):
    return _compare("gt", _need_tensor("gt", "input", a), b)


def ge(a, b):
    return _compare("ge", _need_tensor("ge", "input", a), b)


def eq(a, b):
    return _compare("eq", _need_tensor("eq", "input", a), b)


def ne(a, b):
    return _compare("ne", _need_tensor("ne", "input", a), b)


less, less_equal, greater, greater_equal, not_equal = lt, le, gt, ge, ne


def _any_all(fname, fn, x, dim, keepdim):
    _need_tensor(fname, "input", x)
    d, n = _dims_arg(dim)
    return _call(fn, x._h, d, n, 1 if keepdim else 0)


def any(x, dim=None, keepdim=False):
    """Whether any element is non-zero (over dim, or everything): a bool tensor."""
    return _any_all("any", lib.tfc_any, x, dim, keepdim)


def all(x, dim=None, keepdim=False):
    return _any_all("all", lib.tfc_all, x, dim, keepdim)


def cumsum(x, dim):
    _need_tensor("cumsum", "input", x)
    return _call(lib.tfc_cumsum, _ag.graph_for(x), x._h, operator.index(dim))


def triu(x, diagonal=0):
    _need_tensor("triu", "input", x)
    return _call(lib.tfc_triu, _ag.graph_for(x), x._h, operator.index(diagonal))


def tril(x, diagonal=0):
    _need_tensor("tril", "input", x)
    return _call(lib.tfc_tril, _ag.graph_for(x), x._h, operator.index(diagonal))


def sort(x, dim=-1, descending=False, stable=True):
    """(values, indices) along dim; always stable (ties keep their order), NaN last ascending."""
    _need_tensor("sort", "input", x)
    values = ffi.new("tfc_tensor **")
    indices = ffi.new("tfc_tensor **")
    check(lib.tfc_sort(_ag.graph_for(x), x._h, operator.index(dim), 1 if descending else 0, values, indices))
    return Sort(_wrap(values[0]), _wrap(indices[0]))


def argsort(x, dim=-1, descending=False, stable=True):
    _need_tensor("argsort", "input", x)
    return _call(lib.tfc_argsort, x._h, operator.index(dim), 1 if descending else 0)


def one_hot(ids, num_classes=-1):
    """int64 [..., num_classes] with a 1 at each id (torch.nn.functional.one_hot)."""
    _need_tensor("one_hot", "tensor", ids)
    return _call(lib.tfc_one_hot, ids._h, operator.index(num_classes))


def multinomial(probs, num_samples, replacement=False, seed=None):
    """num_samples category indices per row of probs (1-D or 2-D, non-negative weights).
    The draws come from tfcore's Philox stream (tfcore.manual_seed) or from (seed, 0)."""
    _need_tensor("multinomial", "input", probs)
    num_samples = operator.index(num_samples)
    rows = probs.shape[0] if probs.ndim == 2 else 1
    # The kernel reads one Philox block per draw; _draw counts values, four to a block.
    s, off = (int(seed), 0) if seed is not None else _draw(4 * rows * builtin_max(num_samples, 0))
    return _call(lib.tfc_multinomial, probs._h, num_samples, 1 if replacement else 0, s, off)
def linear_bf16(x, weight, bias=None, weight_bf16=None):
    """The autocast Linear of bf16 mixed precision: bf16(x) · bf16(weight)ᵀ + bias
    in f32 (torch.autocast('cpu', torch.bfloat16)'s Linear, f32 output).

    x, weight [out, in] and bias are f32; weight_bf16 is an optional bf16 copy
    of weight (same layout) used as the rounded weight as is. Gradients (f32)
    go to x, weight and bias. tfc_linear_bf16 takes [in, out]: the weights go
    to it as transposed views, never copied."""
    for name, v in (("x", x), ("weight", weight)):
        if not isinstance(v, Tensor):
            raise TypeError("tfcore.linear_bf16: %s must be a Tensor, got %s" % (name, type(v).__name__))
    if weight.ndim != 2:
        raise ValueError("tfcore.linear_bf16: weight must be 2-D [out, in], got %s" % (tuple(weight.shape),))
    wt = weight.transpose(0, 1)
    wbt = ffi.NULL
    if weight_bf16 is not None:
        if weight_bf16.ndim != 2:
            raise ValueError("tfcore.linear_bf16: weight_bf16 must be 2-D [out, in], got %s"
                             % (tuple(weight_bf16.shape),))
        wbt = weight_bf16.transpose(0, 1)._h
    return _call(lib.tfc_linear_bf16, _ag.graph_for(x, wt, bias), x._h, wt._h, wbt,
                 ffi.NULL if bias is None else bias._h)
