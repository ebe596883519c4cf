"""x[index] and x[index] = v with PyTorch's (numpy's) rules.

Basic indexing (ints, slices with a positive step, None, ...) gives a view
that shares x's memory, as torch does. Advanced indexing (integer index
tensors / lists / arrays, bool masks) gives a copy: the index arrays are
broadcast together, the indexed dims are moved first and merged, and one
tfc_index_select picks the rows, so the read is differentiable. Where the
indexed dims sit in the result follows numpy: in place of the first of them
when they are adjacent in the index, first otherwise. Writes go through the
basic view (fill / copy) or tfc_index_put (x's flat positions), in place.

Index arithmetic (broadcasting, bounds, negative indices wrapping) runs in
numpy on the host: index tensors on another device are copied to the host
first, as torch synchronises on a bool mask.
"""
import operator

import numpy as np

from . import _dtype
from . import autograd as _ag
from ._lib import ffi, lib
from .tensor import Tensor, _call, _i32, _i64, _is_scalar, tensor

_MASK_DTYPES = (_dtype.bool_, _dtype.uint8)
_INT_DTYPES = (_dtype.int32, _dtype.int64)


class _Adv:
    """An advanced index: k integer arrays (k > 1 only for a bool mask) addressing k consecutive dims."""

    __slots__ = ("arrays", "mask_shape")

    def __init__(self, arrays, mask_shape=None):
        self.arrays = arrays
        self.mask_shape = mask_shape

    @property
    def ndim(self):
        return len(self.arrays)




class StringIndexError(IndexError, TypeError):
    """t["a"]: a TypeError as in torch, and an IndexError like every other invalid index."""

def _host(t):
    return (t if t.device.type == "cpu" else t.cpu()).numpy()


def _from_array(a, what):
    """An index array (numpy) as an _Adv, or an IndexError for a float one."""
    if a.dtype == np.bool_:
        if a.ndim == 0:
            raise NotImplementedError("tfcore: indexing with a 0-d bool (x[True]) is not supported; use None")
        return _Adv(list(np.nonzero(a)), a.shape)
    if a.size == 0 and a.dtype.kind not in "iu":
        a = a.astype(np.int64)  # x[[]] is an empty integer index, as in torch
    if a.dtype.kind not in "iu":
        raise IndexError("tfcore: tensors used as indices must be long, int, byte or bool tensors "
                         "(got %s %s)" % (what, a.dtype))
    return _Adv([a.astype(np.int64)])


def _classify(item):
    """None, Ellipsis, a slice, an int, or an _Adv."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return item
    if isinstance(item, (bool, np.bool_)):
        if item:
            return None  # x[True] adds a size-1 dim, as None does
        raise NotImplementedError("tfcore: indexing with False (an empty selection) is not supported")
    if isinstance(item, Tensor):
        if item.dtype in _MASK_DTYPES:
            return _from_array(_host(item).astype(np.bool_), "a tensor of")
        if item.dtype in _INT_DTYPES:
            if item.ndim == 0:
                return int(item.item())
            return _from_array(_host(item), "a tensor of")
        raise IndexError("tfcore: tensors used as indices must be long, int, byte or bool tensors (got %s)"
                         % item.dtype)
    if isinstance(item, (list, np.ndarray)):
        if isinstance(item, list) and any(isinstance(v, (slice, Tensor)) or v is None or v is Ellipsis
                                          for v in item):
            raise IndexError("tfcore: a list index must hold only ints or bools; use a tuple for "
                             "several indices")
        try:
            a = np.asarray(item)
        except ValueError:
            raise IndexError("tfcore: a ragged list is not a valid index") from None
        if a.dtype == object:
            raise IndexError("tfcore: a list index must hold only ints or bools")
        return _from_array(a, "an array of")
    if isinstance(item, (str, bytes)):  # torch raises TypeError for a string index
        raise StringIndexError("tfcore: only integers, slices (':'), ellipsis ('...'), None, and integer or "
                               "boolean tensors are valid indices (got %s)" % type(item).__name__)
    if isinstance(item, (float, complex)) or type(item).__module__.startswith("torch"):
        raise IndexError("tfcore: only integers, slices (':'), ellipsis ('...'), None, and integer or "
                         "boolean tensors are valid indices (got %s)" % type(item).__name__)
    try:
        return operator.index(item)
    except TypeError:
        raise IndexError("tfcore: only integers, slices (':'), ellipsis ('...'), None, and integer or "
                         "boolean tensors are valid indices (got %s)" % type(item).__name__) from None


def _parse(x, index):
    items = [_classify(i) for i in (index if isinstance(index, tuple) else (index,))]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("tfcore: an index can only have a single ellipsis ('...')")
    used = sum(i.ndim if isinstance(i, _Adv) else 1 for i in items if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise IndexError("tfcore: too many indices for tensor of dimension %d" % x.ndim)
    if Ellipsis in items:
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        items = items[:at] + [slice(None)] * (x.ndim - used) + items[at + 1:]
    return items


def _narrow_int(out, dim, i):
    size = out.shape[dim]
    if not -size <= i < size:
        raise IndexError("tfcore: index %d is out of bounds for dimension %d with size %d" % (i, dim, size))
    out = _call(lib.tfc_narrow, _ag.graph_for(out), out._h, dim, i % size, 1)
    return _call(lib.tfc_squeeze, _ag.graph_for(out), out._h, dim)


def _slice_dim(out, dim, item):
    size = out.shape[dim]
    if item.step is not None and operator.index(item.step) <= 0:
        # torch refuses these (numpy would reverse): keep torch's ValueError, never a silent copy
        raise ValueError("tfcore: step must be greater than zero (got %d); use torch-style x.flip(dim) "
                         "or index with a reversed integer list" % operator.index(item.step))
    start, stop, step = item.indices(size)
    if (start, stop, step) != (0, size, 1):
        out = _call(lib.tfc_slice, _ag.graph_for(out), out._h, dim, start, max(stop, start), step)
    return out


def _basic(x, items):
    """Apply every basic item (ints too: unlike numpy, torch selects an int's dim before the
    advanced indices are placed). Returns (view, [(dim in view, array), ...] in index order)."""
    out, dim, adv = x, 0, []
    for item in items:
        if item is None:
            out = _call(lib.tfc_unsqueeze, _ag.graph_for(out), out._h, dim)
            dim += 1
        elif isinstance(item, slice):
            out = _slice_dim(out, dim, item)
            dim += 1
        elif isinstance(item, _Adv):
            if item.mask_shape is not None:
                want = tuple(out.shape[dim:dim + item.ndim])
                if tuple(item.mask_shape) != want:
                    raise IndexError("tfcore: the shape of the mask %s at index %d does not match the shape "
                                     "of the indexed tensor %s" % (list(item.mask_shape), dim, list(out.shape)))
            for a in item.arrays:
                adv.append((dim, a))
                dim += 1
        else:
            out = _narrow_int(out, dim, item)
    return out, adv


def _prepare_adv(v, adv):
    """Broadcast and bounds-check the arrays; wrap negatives. Returns (dims, arrays, B, adjacent)."""
    dims = [d for d, _ in adv]
    try:
        arrays = np.broadcast_arrays(*[a for _, a in adv])
    except ValueError:
        raise IndexError("tfcore: shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes %s" % " ".join(str(list(a.shape)) for _, a in adv)) from None
    out = []
    for d, a in zip(dims, arrays):
        size = v.shape[d]
        if a.size:
            lo, hi = int(a.min()), int(a.max())
            bad = lo if lo < -size else hi if hi >= size else None
            if bad is not None:
                raise IndexError("tfcore: index %d is out of bounds for dimension %d with size %d"
                                 % (bad, d, size))
        out.append(np.where(a < 0, a + size, a))
    shape = tuple(arrays[0].shape) if arrays else ()
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    return dims, out, shape, adjacent


def _permute(t, perm):
    if list(perm) == list(range(t.ndim)):
        return t
    return _call(lib.tfc_permute, _ag.graph_for(t), t._h, _i32(perm), len(perm))


def _reshape(t, shape):
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    return _call(lib.tfc_reshape, _ag.graph_for(t), t._h, _i64(shape), len(shape))


def _index_tensor(a, like):
    t = tensor(np.ascontiguousarray(a, dtype=np.int64), dtype=_dtype.int64)
    return t if like.device.type == "cpu" else t._to_device(like.device)


def _select(v, dim, index):
    return _call(lib.tfc_index_select, _ag.graph_for(v), v._h, dim, index._h)


def getitem(x, index):
    items = _parse(x, index)
    v, adv = _basic(x, items)
    if not adv:
        return v
    dims, arrays, bshape, adjacent = _prepare_adv(v, adv)
    rest = [d for d in range(v.ndim) if d not in dims]
    if len(dims) == 1 and len(bshape) == 1:
        # one 1-D index: a single index_select on its dim, already in place
        return _select(v, dims[0], _index_tensor(arrays[0], v))
    sizes = [v.shape[d] for d in dims]
    p = _permute(v, dims + rest)
    flat = _reshape(p, [int(np.prod(sizes))] + [v.shape[d] for d in rest])
    lin = np.ravel_multi_index(arrays, sizes) if arrays[0].size else np.zeros(bshape, np.int64)
    out = _select(flat, 0, _index_tensor(lin.reshape(-1), v))
    out = _reshape(out, list(bshape) + [v.shape[d] for d in rest])
    if adjacent and dims[0] > 0:
        nb, p0 = len(bshape), dims[0]
        order = list(range(nb, nb + p0)) + list(range(nb)) + list(range(nb + p0, out.ndim))
        out = _permute(out, order)
    return out


def _check_writable(x):
    if _ag.is_grad_enabled() and x.requires_grad:
        if x.is_leaf:
            raise RuntimeError("tfcore: a leaf tensor that requires grad is being used in an in-place "
                               "operation (x[...] = v); write under tfcore.no_grad()")
        raise NotImplementedError("tfcore: x[...] = v into a tensor that is part of the autograd graph is "
                                  "not differentiated; write into a copy (y = x.clone(); y[...] = v is "
                                  "not recorded either) or under tfcore.no_grad()")


def _values_for(x, value):
    if _is_scalar(value):
        return tensor(value, dtype=x.dtype) if x.device.type == "cpu" else \
            tensor(value, dtype=x.dtype)._to_device(x.device)
    if value is None:
        raise TypeError("tfcore: cannot assign None to tensor elements")
    if not isinstance(value, Tensor):
        if isinstance(value, (str, bytes)):
            raise TypeError("tfcore: cannot assign a %s to tensor elements" % type(value).__name__)
        value = tensor(value, dtype=x.dtype)
    with _ag.no_grad():
        value = value.detach()
        if value.dtype is not x.dtype:
            value = value.to(x.dtype)
        if value.device != x.device:
            value = value._to_device(x.device)
        # a private copy: the values may be a view of x's own memory
        return _call(lib.tfc_tensor_clone, value._h)


def setitem(x, index, value, accumulate=False):
    _check_writable(x)
    if isinstance(value, Tensor) and value.requires_grad and _ag.is_grad_enabled():
        # torch would record the write and send gradients to value; dropping them silently is worse than refusing
        raise NotImplementedError("tfcore: x[...] = v with a v that requires grad is not differentiated; build "
                                  "the result out of place (tfcore.where, scatter_add, cat) or detach v")
    with _ag.no_grad():
        items = _parse(x, index)
        v, adv = _basic(x, items)
        if not adv:
            if accumulate:
                raise NotImplementedError("tfcore: index_put_ with accumulate needs index tensors")
            if _is_scalar(value):
                v.fill_(value)
            else:
                if value is None:
                    raise TypeError("tfcore: cannot assign None to tensor elements")
                v.copy_(value)
            return
        dims, arrays, bshape, adjacent = _prepare_adv(v, adv)
        rest = [d for d in range(v.ndim) if d not in dims]
        sizes = [v.shape[d] for d in dims]
        rest_shape = [v.shape[d] for d in rest]
        p = _permute(v, dims + rest)  # a view: index_put addresses its flat positions
        n_rest = int(np.prod(rest_shape))
        lin = np.ravel_multi_index(arrays, sizes) if arrays[0].size else np.zeros(bshape, np.int64)
        full = lin.reshape(tuple(bshape) + (1,) * len(rest)) * n_rest + \
            np.arange(n_rest, dtype=np.int64).reshape(rest_shape)
        if adjacent and dims[0] > 0:
            nb, p0 = len(bshape), dims[0]
            full = np.transpose(full, list(range(nb, nb + p0)) + list(range(nb)) +
                               list(range(nb + p0, full.ndim)))
        vals = _values_for(x, value)
        if vals.ndim > full.ndim or any(a != b and a != 1 for a, b in zip(reversed(vals.shape),
                                                                          reversed(full.shape))):
            raise ValueError("tfcore: shape mismatch: value tensor of shape %s cannot be broadcast to "
                             "indexing result of shape %s" % (list(vals.shape), list(full.shape)))
        from ._lib import check
        check(lib.tfc_index_put(ffi.NULL, p._h, _index_tensor(full, x)._h, vals._h, 1 if accumulate else 0))


def index_put_(x, indices, values, accumulate=False):
    """torch.Tensor.index_put_: x[indices] = values (or += with accumulate; repeated indices add)."""
    if not isinstance(indices, tuple):
        raise TypeError("tfcore: index_put_ takes a tuple of index tensors, got %s" % type(indices).__name__)
    if not all(isinstance(i, Tensor) for i in indices):
        raise TypeError("tfcore: index_put_ indices must be tensors")
    setitem(x, indices, values, accumulate=bool(accumulate))
    return x
