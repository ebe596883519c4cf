"""Ops as functions (tfcore.matmul, tfcore.layer_norm, ...), PyTorch's names
and argument orders. Each is one call into libtfcore: the op records on the
thread's graph when grad mode is on and an input requires grad (see
tfcore.autograd)."""
import math
import numbers
import operator

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
    return MinMax(values, argmax(x, dim, keepdim))


def min(x, dim=None, keepdim=False):
    values = _reduce(lib.tfc_min, x, dim, keepdim)
    if dim is None or not isinstance(dim, numbers.Integral):
        return values
    return MinMax(values, argmin(x, dim, keepdim))


def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    """Σ(x − mean)² / (n − correction); correction defaults to 1 (unbiased) as in PyTorch."""
    if correction is None:
        correction = 1 if unbiased else 0
    d, n = _dims_arg(dim)
    return _call(lib.tfc_var, _ag.graph_for(x), x._h, d, n, int(correction), 1 if keepdim else 0)


def std(x, dim=None, unbiased=True, keepdim=False):
    return var(x, dim, unbiased, keepdim).sqrt()


def argmax(x, dim=None, keepdim=False):
    """Index (int64) of the first maximum along dim; over the flattened tensor when dim is None."""
    if dim is None:
        with _ag.no_grad():
            flat = x.reshape(-1)
        return _call(lib.tfc_argmax, flat._h, 0, 0)
    return _call(lib.tfc_argmax, x._h, int(dim), 1 if keepdim else 0)


def argmin(x, dim=None, keepdim=False):
    """Index of the first minimum (the first maximum of −x)."""
    with _ag.no_grad():
        return argmax(-x, dim, keepdim)


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


def attention(q, k, v, causal=True, scale=None):
    """softmax(scale · q kᵀ [+ causal mask]) v for q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv].
    scale defaults to 1/sqrt(D); the causal mask is bottom-right aligned."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return _call(lib.tfc_attention, _ag.graph_for(q, k, v), q._h, k._h, v._h, 1 if causal else 0, float(scale))


scaled_dot_product_attention = attention


def dropout(x, p=0.5, training=True, seed=None):
    """Inverted dropout; identity when not training or p == 0. The mask comes
    from tfcore's Philox stream (tfcore.manual_seed) or from (seed, 0)."""
    if not training or p == 0:
        return x
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
    """x[index] as a view: ints, slices (step >= 1), None, Ellipsis."""
    if not isinstance(index, tuple):
        index = (index,)
    n_ellipsis = builtin_sum(1 for i in index if i is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("tfcore: an index can only have a single ellipsis ('...')")
    n_real = builtin_sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError("tfcore: too many indices for a tensor of dimension %d" % x.ndim)
    if n_ellipsis:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (x.ndim - n_real) + index[at + 1:]
    out, dim = x, 0
    for item in index:
        if item is None:
            out = unsqueeze(out, dim)
            dim += 1
        elif isinstance(item, slice):
            size = out.shape[dim]
            start, stop, step = item.indices(size)
            if step <= 0:
                raise ValueError("tfcore: slice step must be positive, got %d" % step)
            if (start, stop, step) != (0, size, 1):
                out = _slice(out, dim, start, builtin_max(stop, start), step)
            dim += 1
        else:
            if isinstance(item, Tensor) and item.numel() == 1 and not item.is_floating_point():
                item = item.item()
            try:
                i = operator.index(item)
            except TypeError:
                raise IndexError("tfcore: only integers, slices, None and ... are valid indices "
                                 "(got %s)" % type(item).__name__) from None
            size = out.shape[dim]
            if not -size <= i < size:
                raise IndexError("tfcore: index %d is out of bounds for dimension %d with size %d"
                                 % (i, dim, size))
            out = narrow(out, dim, i % size, 1)
            out = _call(lib.tfc_squeeze, _ag.graph_for(out), out._h, dim)
    return out


import builtins as _builtins  # noqa: E402

builtin_sum = _builtins.sum
builtin_max = _builtins.max


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
