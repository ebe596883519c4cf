"""tfcore.Tensor: a Python handle on a tfc_tensor, and the ways to make one."""
import itertools
import math
import numbers
import operator
import threading
from collections import namedtuple

import numpy as np

from . import _dtype
from . import autograd as _ag
from ._dtype import as_dtype
from ._lib import check, ffi, lib

# ---- handles -------------------------------------------------------------------


def _wrap(ptr):
    """A Tensor owning the new reference ptr (released when the Tensor dies)."""
    t = Tensor.__new__(Tensor)
    t._h = ffi.gc(ptr, lib.tfc_tensor_release)
    return t


def _call(fn, *args):
    """Call a tfc function whose last argument is a tfc_tensor** out; return the Tensor."""
    out = ffi.new("tfc_tensor **")
    check(fn(*args, out))
    return _wrap(out[0])


def _i64(values):
    values = [operator.index(v) for v in values]
    return ffi.new("int64_t[]", values) if values else ffi.NULL


def _i32(values):
    values = [operator.index(v) for v in values]
    return ffi.new("int32_t[]", values) if values else ffi.NULL


def _shape_arg(args):
    """Accept f(2, 3), f((2, 3)) and f([2, 3])."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral):
        return tuple(operator.index(d) for d in args[0])
    return tuple(operator.index(d) for d in args)


def _int_arg(fn, name, v):
    """v as an int, checked as torch checks sizes and ranks: an int, a numpy
    integer or anything with __index__; a float (8.5), a str or None is a
    TypeError (int(8.5) would silently give 8)."""
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError("%s: %s must be an int, got %s %r" % (fn, name, type(v).__name__, v)) from None


def _id_array(fn, name, x):
    """Token ids as an int64 numpy array: an integer array, list or tensor. Floats (and bools)
    are a TypeError, as for torch's embedding (they would be truncated)."""
    if isinstance(x, Tensor):
        if x.dtype not in (_dtype.int32, _dtype.int64):
            raise TypeError("%s: %s must hold integer ids, got a %s tensor" % (fn, name, x.dtype.name))
        return x
    a = np.asarray(x)
    if a.size and a.dtype.kind not in "iu":
        raise TypeError("%s: %s must hold integer ids, got %s values" % (fn, name, a.dtype))
    return a.astype(np.int64)


def _is_scalar(x):
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, np.ndarray)


def _broadcast(a, b):
    """numpy's broadcast shape of shapes a and b (ValueError when they do not broadcast)."""
    return tuple(np.broadcast_shapes(tuple(a), tuple(b)))


# ---- devices ---------------------------------------------------------------------


class Device:
    """Where a tensor's memory lives: device('cpu'), device('cuda', 0), device('cuda:1')."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, Device):
            type, index = type.type, type.index
        elif ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise ValueError("tfcore: unknown device type %r (expected 'cpu' or 'cuda')" % (type,))
        self.type = type
        self.index = (index or 0) if type == "cuda" else 0

    @property
    def _code(self):
        return lib.TFC_DEVICE_CPU if self.type == "cpu" else lib.TFC_DEVICE_CUDA

    def __eq__(self, other):
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(type=%r)" % self.type if self.type == "cpu" else \
            "device(type=%r, index=%d)" % (self.type, self.index)

    def __str__(self):
        return self.type if self.type == "cpu" else "%s:%d" % (self.type, self.index)


device = Device

# ---- random numbers: one Philox stream per process -------------------------------

_rng_lock = threading.Lock()
_rng = {"seed": 0, "offset": 0}


def manual_seed(seed):
    """Seed the stream randn/rand/dropout draw from (and restart it)."""
    with _rng_lock:
        _rng["seed"] = int(seed) & (2**64 - 1)
        _rng["offset"] = 0


def _draw(numel):
    """(seed, offset) for a draw of numel values; advances the stream past it."""
    with _rng_lock:
        seed, off = _rng["seed"], _rng["offset"]
        _rng["offset"] = off + (numel + 3) // 4 + 1
    return seed, off


# ---- numpy views ------------------------------------------------------------------


class _NumpyView:
    """The base object of arrays returned by Tensor.numpy(): holds the Tensor,
    so the memory outlives every array (and view of an array) over it."""

    __slots__ = ("tensor", "__array_interface__")

    def __init__(self, tensor, interface):
        self.tensor = tensor
        self.__array_interface__ = interface


# from_numpy: the library calls back when the last tfc reference to the array's
# memory goes (on whatever thread drops it); the array stays in this registry
# until then. cffi callbacks take the GIL themselves.
_live_arrays = {}
_array_ids = itertools.count(1)


def _release_array(data, ctx):
    _live_arrays.pop(int(ffi.cast("uintptr_t", ctx)), None)


_release_array_cb = ffi.callback("tfc_deleter", _release_array)


# ---- the tensor ------------------------------------------------------------------

MinMax = namedtuple("MinMax", ["values", "indices"])
TopK = namedtuple("TopK", ["values", "indices"])


class Tensor:
    """An n-dimensional array in libtfcore, with autograd.

    Make one with tfcore.tensor(data), tfcore.from_numpy(a), tfcore.zeros(...),
    or as the result of an op. Semantics follow PyTorch's: operators
    broadcast, indexing and .view/.transpose/... return views sharing memory,
    .backward() accumulates into the .grad of leaves with requires_grad.
    Binary ops need both operands of one dtype (no implicit promotion).
    """

    __slots__ = ("_h", "__weakref__")
    __array_ufunc__ = None  # numpy defers `ndarray + Tensor` to Tensor.__radd__

    def __init__(self, *args, **kwargs):
        raise TypeError("tfcore.Tensor is not constructed directly: use tfcore.tensor(data), "
                        "tfcore.from_numpy(array), tfcore.zeros(shape), ...")

    # -- metadata --
    @property
    def shape(self):
        nd = lib.tfc_tensor_ndim(self._h)
        dims = ffi.new("int64_t[]", max(nd, 1))
        check(lib.tfc_tensor_shape(self._h, dims, nd))
        return tuple(dims[i] for i in range(nd))

    def size(self, dim=None):
        s = self.shape
        return s if dim is None else s[dim]

    def stride(self, dim=None):
        nd = lib.tfc_tensor_ndim(self._h)
        st = ffi.new("int64_t[]", max(nd, 1))
        check(lib.tfc_tensor_strides(self._h, st, nd))
        s = tuple(st[i] for i in range(nd))
        return s if dim is None else s[dim]

    @property
    def ndim(self):
        return int(lib.tfc_tensor_ndim(self._h))

    def dim(self):
        return self.ndim

    def numel(self):
        return int(lib.tfc_tensor_numel(self._h))

    @property
    def dtype(self):
        return _dtype.BY_CODE[int(lib.tfc_tensor_dtype(self._h))]

    @property
    def device(self):
        if lib.tfc_tensor_device_type(self._h) == lib.TFC_DEVICE_CPU:
            return Device("cpu")
        return Device("cuda", int(lib.tfc_tensor_device_index(self._h)))

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def is_contiguous(self):
        return bool(lib.tfc_tensor_is_contiguous(self._h))

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def data_ptr(self):
        """Address of the first element (an int)."""
        return int(ffi.cast("uintptr_t", lib.tfc_tensor_data(self._h)))

    def storage_offset(self):
        return int(lib.tfc_tensor_storage_offset(self._h))

    def element_size(self):
        return self.dtype.itemsize

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # -- autograd --
    @property
    def requires_grad(self):
        return bool(lib.tfc_tensor_requires_grad(self._h))

    @requires_grad.setter
    def requires_grad(self, on):
        check(lib.tfc_tensor_set_requires_grad(self._h, 1 if on else 0))

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return bool(lib.tfc_tensor_is_leaf(self._h))

    @property
    def grad(self):
        out = ffi.new("tfc_tensor **")
        check(lib.tfc_tensor_grad(self._h, out))
        return None if out[0] == ffi.NULL else _wrap(out[0])

    @grad.setter
    def grad(self, g):
        check(lib.tfc_tensor_set_grad(self._h, ffi.NULL if g is None else g._h))

    def retain_grad(self):
        """Keep this non-leaf's gradient in .grad after backward."""
        check(lib.tfc_tensor_retain_grad(self._h))

    def zero_grad(self, set_to_none=True):
        check(lib.tfc_tensor_zero_grad(self._h, 1 if set_to_none else 0))

    def backward(self, gradient=None, retain_graph=None, create_graph=False, grad=None):
        """Accumulate d(self)/d(leaf) into every leaf's .grad. gradient (or
        grad=) is the seed, needed when self has more than one element.
        Without retain_graph (default: create_graph) the saved tensors of the
        nodes this backward went through are freed, so going through them
        again raises RuntimeError naming retain_graph; other losses on the
        thread's tape are untouched. create_graph=True records the backward
        so .grad can be differentiated again (see tfcore.autograd)."""
        if grad is not None:
            if gradient is not None:
                raise TypeError("tfcore: backward: pass gradient or grad, not both")
            gradient = grad
        if gradient is not None and not isinstance(gradient, Tensor):
            gradient = tensor(gradient, dtype=self.dtype)
        _ag.backward(self, gradient, retain_graph, create_graph)

    def detach(self):
        """A tensor sharing this one's memory, cut from the graph."""
        return _call(lib.tfc_tensor_detach, self._h)

    # -- data out --
    def numpy(self):
        """A numpy array over this tensor's memory (no copy; writes show
        through both ways; not writable when the tensor is read-only). bfloat16 tensors are converted (copied) to
        float32; CUDA tensors must be moved with .cpu() first."""
        if self.device.type != "cpu":
            raise TypeError("tfcore: numpy() of a %s tensor: call .cpu() first" % self.device)
        dt = self.dtype
        if dt.numpy is None:
            with _ag.no_grad():
                return self.to(_dtype.float32).numpy()
        shape = self.shape
        if self.numel() == 0:
            return np.empty(shape, dt.numpy)
        strides = tuple(s * dt.itemsize for s in self.stride())
        interface = {"version": 3, "shape": shape, "typestr": dt.numpy.str, "strides": strides,
                     "data": (self.data_ptr(), self.is_read_only)}  # read-only memory stays read-only in numpy
        return np.asarray(_NumpyView(self, interface))

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor as a Python float/int/bool."""
        v = ffi.new("double *")
        check(lib.tfc_tensor_item(self._h, v))
        dt = self.dtype
        if dt is _dtype.bool_:
            return bool(v[0])
        if dt.is_floating_point:
            return v[0]
        if abs(v[0]) >= 2.0 ** 53:  # the double tfc_tensor_item gives rounds an int64 this large: read it exactly
            return int(self.cpu().numpy().reshape(-1)[0])
        return int(v[0])

    def tolist(self):
        return self.numpy().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError("tfcore: the truth value of a tensor with %d elements is ambiguous"
                             % self.numel())
        return bool(self.item())

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        extra = ""
        if self.dtype not in (_dtype.float32, _dtype.int64, _dtype.bool_):
            extra += ", dtype=%r" % self.dtype
        if self.device.type != "cpu":
            extra += ", device='%s'" % self.device
        if self.requires_grad:
            extra += ", requires_grad=True"
        return "tensor(%s%s)" % (body, extra)

    def describe(self):
        """libtfcore's one-line description (dtype, shape, strides, flags)."""
        out = ffi.new("char **")
        check(lib.tfc_tensor_describe(self._h, out))
        try:
            return ffi.string(out[0]).decode()
        finally:
            lib.tfc_free(out[0])

    # -- in place (never recorded on the graph) --
    # Each writes self's memory (so through a view, its base) and bumps the
    # storage's version, so a tensor saved for backward and modified since
    # fails that backward. torch's rules: not on a leaf that requires grad
    # while grad mode is on; torch records in-place ops on tensors in a
    # graph, tfcore does not (a clear error says what to write instead).
    def _check_inplace(self, op, *others):
        if not _ag.is_grad_enabled():
            return
        if self.requires_grad and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation. "
                               "(tfcore: %s; wrap the update in `with tfcore.no_grad():`)" % op)
        if self.requires_grad or any(isinstance(o, Tensor) and o.requires_grad for o in others):
            raise RuntimeError("tfcore: in-place %s on a tensor that is part of the autograd graph is not "
                               "supported (torch would record it); write the out-of-place form, e.g. "
                               "`y = y + x` instead of `y += x`, or do it under `with tfcore.no_grad():`" % op)

    def _write(self, value):
        """self[...] = value (a Tensor of a shape broadcasting to self's), one version bump."""
        try:
            shape = _broadcast(value.shape, self.shape)
        except ValueError:
            shape = None
        if shape != self.shape:
            raise RuntimeError("tfcore: output with shape %s doesn't match the broadcast shape %s"
                               % (list(self.shape), list(shape or value.shape)))
        check(lib.tfc_tensor_copy_from(self._h, value._h))
        return self

    def _inplace(self, op, other, fn):
        if other is None:
            raise TypeError("tfcore: %s(): other is None; expected a Tensor or a number" % op)
        if not isinstance(other, Tensor) and not _is_scalar(other):
            raise TypeError("tfcore: %s(): other is a %s; expected a Tensor or a number" % (op, type(other).__name__))
        self._check_inplace(op, other)
        with _ag.no_grad():
            if isinstance(other, Tensor) and other.dtype is not self.dtype:
                other = other.to(self.dtype)
            return self._write(fn(other))

    def add_(self, other, alpha=1):
        """self += alpha * other, in place."""
        return self._inplace("add_", other, lambda o: self + (o if alpha == 1 else o * alpha))

    def sub_(self, other, alpha=1):
        """self -= alpha * other, in place."""
        return self._inplace("sub_", other, lambda o: self - (o if alpha == 1 else o * alpha))

    def mul_(self, other):
        return self._inplace("mul_", other, lambda o: self * o)

    def div_(self, other):
        return self._inplace("div_", other, lambda o: self / o)

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

    def clamp_(self, min=None, max=None):
        """Clamp every element into [min, max] in place (NaN stays NaN)."""
        if min is None and max is None:
            raise ValueError("tfcore: clamp_(): at least one of min and max must be given")
        for name, b in (("min", min), ("max", max)):
            if b is not None and not _is_scalar(b):
                raise TypeError("tfcore: clamp_(): %s is a %s; expected a number" % (name, type(b).__name__))
        self._check_inplace("clamp_")
        with _ag.no_grad():
            clamp = getattr(_F, "clamp", None)
            if clamp is not None:
                return self._write(clamp(self, min, max))
            a = np.clip(np.asarray(self.cpu().numpy(), dtype=np.float64), min, max)
            return self._write(tensor(a, dtype=self.dtype, device=self.device))

    def fill_(self, value):
        self._check_inplace("fill_")
        check(lib.tfc_tensor_fill(self._h, float(value)))
        return self

    def zero_(self):
        self._check_inplace("zero_")
        return self.fill_(0.0)

    def copy_(self, src):
        """self[...] = src (broadcast, converted to self's dtype)."""
        if src is None:
            raise TypeError("tfcore: copy_(): src is None")
        self._check_inplace("copy_", src)
        if not isinstance(src, Tensor):
            src = tensor(src, dtype=self.dtype)
        check(lib.tfc_tensor_copy_from(self._h, src._h))
        return self

    @property
    def is_read_only(self):
        """True when this tensor wraps read-only memory (a non-writable numpy
        array, a DLPack import flagged read-only) or is a view of one: writes
        into it raise RuntimeError. tfcore's own; torch has no such flag."""
        return bool(lib.tfc_tensor_is_read_only(self._h))

    @property
    def _version(self):
        """How many times this tensor's memory was written in place (torch's t._version)."""
        return int(lib.tfc_tensor_version(self._h))

    @property
    def data(self):
        """A tensor sharing this one's memory, cut from the graph, not requiring
        grad (torch's .data). Writes to it are seen by this tensor and, as in
        torch, are invisible to autograd's version check: on the CPU it is a
        tensor over the same memory with its own version counter (it keeps
        this tensor's memory alive). On CUDA it is detach(): writes through
        it bump the shared counter, so a backward that saved this tensor
        then fails instead of using the new values."""
        d = _call(lib.tfc_tensor_detach, self._h)
        if self.device.type != "cpu" or self.numel() == 0:
            return d
        key = next(_array_ids)
        _live_arrays[key] = d  # released by the deleter when the last tensor over the memory goes
        out = ffi.new("tfc_tensor **")
        args = (lib.tfc_tensor_data(self._h), _i64(self.shape), _i64(self.stride()), self.ndim, self.dtype.code)
        if self.is_read_only:
            status = lib.tfc_tensor_wrap_ex(*args, lib.TFC_WRAP_READ_ONLY, _release_array_cb,
                                            ffi.cast("void *", key), out)
        else:
            status = lib.tfc_tensor_wrap(*args, _release_array_cb, ffi.cast("void *", key), out)
        if status != 0:  # a layout wrap refuses (negative strides): the shared counter then
            del _live_arrays[key]
            lib.tfc_clear_error()
            return d
        return _wrap(out[0])

    def normal_(self, mean=0.0, std=1.0):
        seed, off = _draw(self.numel())
        check(lib.tfc_tensor_fill_normal(self._h, mean, std, seed, off))
        return self

    def uniform_(self, a=0.0, b=1.0):
        seed, off = _draw(self.numel())
        check(lib.tfc_tensor_fill_uniform(self._h, a, b, seed, off))
        return self

    def clone(self):
        """A contiguous copy (recorded: gradients flow back to self)."""
        if _ag.graph_for(self) != ffi.NULL:
            return self * 1.0 if self.is_floating_point() else _call(lib.tfc_tensor_clone, self._h)
        return _call(lib.tfc_tensor_clone, self._h)

    # -- conversion --
    def to(self, *args, dtype=None, device=None):
        """to(dtype), to(device), to(device, dtype), or keywords."""
        for a in args:
            if isinstance(a, (str, Device)) and not _looks_like_dtype(a):
                device = a
            else:
                dtype = a
        out = self
        if dtype is not None:
            out = out._cast(as_dtype(dtype))
        if device is not None:
            out = out._to_device(Device(device))
        return out

    def _cast(self, dt):
        if dt is self.dtype:
            return self
        return _call(lib.tfc_cast, _ag.graph_for(self), self._h, dt.code)

    def _to_device(self, dev):
        if dev == self.device:
            return self
        return _call(lib.tfc_tensor_to_device, self._h, dev._code, dev.index)

    def cpu(self):
        return self._to_device(Device("cpu"))

    def cuda(self, index=0):
        return self._to_device(Device("cuda", index))

    def float(self):
        return self._cast(_dtype.float32)

    def double(self):
        return self._cast(_dtype.float64)

    def half(self):
        return self._cast(_dtype.float16)

    def bfloat16(self):
        return self._cast(_dtype.bfloat16)

    def long(self):
        return self._cast(_dtype.int64)

    def int(self):
        return self._cast(_dtype.int32)

    def bool(self):
        return self._cast(_dtype.bool_)

    # -- operators --
    def _coerce(self, other):
        if isinstance(other, Tensor):
            return other
        _check_operand(other)
        return tensor(other, dtype=self.dtype)

    def __add__(self, other):
        if _is_scalar(other):
            return _call(lib.tfc_add_scalar, _ag.graph_for(self), self._h, float(other))
        other = self._coerce(other)
        return _call(lib.tfc_add, _ag.graph_for(self, other), self._h, other._h)

    __radd__ = __add__

    def __sub__(self, other):
        if _is_scalar(other):
            return _call(lib.tfc_add_scalar, _ag.graph_for(self), self._h, -float(other))
        other = self._coerce(other)
        return _call(lib.tfc_sub, _ag.graph_for(self, other), self._h, other._h)

    def __rsub__(self, other):
        if _is_scalar(other):
            return _call(lib.tfc_rsub_scalar, _ag.graph_for(self), self._h, float(other))
        return self._coerce(other).__sub__(self)

    def __mul__(self, other):
        if _is_scalar(other):
            return _call(lib.tfc_mul_scalar, _ag.graph_for(self), self._h, float(other))
        other = self._coerce(other)
        return _call(lib.tfc_mul, _ag.graph_for(self, other), self._h, other._h)

    __rmul__ = __mul__

    def __truediv__(self, other):
        # x / s divides by a 0-d tensor, so the result is rounded once, as in PyTorch.
        other = self._coerce(other)
        return _call(lib.tfc_div, _ag.graph_for(self, other), self._h, other._h)

    def __rtruediv__(self, other):
        if _is_scalar(other):
            return _call(lib.tfc_rdiv_scalar, _ag.graph_for(self), self._h, float(other))
        return self._coerce(other).__truediv__(self)

    def __pow__(self, exponent):
        if not _is_scalar(exponent):
            raise TypeError("tfcore: only a scalar exponent is supported (x ** s)")
        return _call(lib.tfc_pow_scalar, _ag.graph_for(self), self._h, float(exponent))

    def __rpow__(self, base):
        if not _is_scalar(base) or base <= 0:
            raise TypeError("tfcore: s ** x needs a positive scalar s")
        return (self * math.log(base)).exp()

    def __matmul__(self, other):
        return _F.matmul(self, self._coerce(other))

    def __rmatmul__(self, other):
        return _F.matmul(self._coerce(other), self)

    def __neg__(self):
        return _call(lib.tfc_neg, _ag.graph_for(self), self._h)

    def __pos__(self):
        return self

    # -- indexing: views for basic indices, copies for advanced ones (tfcore/_indexing.py) --
    def __getitem__(self, index):
        from . import _indexing
        return _indexing.getitem(self, index)

    def __setitem__(self, index, value):
        from . import _indexing
        _indexing.setitem(self, index, value)

    def index_put_(self, indices, values, accumulate=False):
        """self[indices] = values in place (accumulate=True: +=, repeated indices add up)."""
        from . import _indexing
        return _indexing.index_put_(self, indices, values, accumulate)

    def index_select(self, dim, index):
        return _F.index_select(self, dim, index)

    def gather(self, dim, index):
        return _F.gather(self, dim, index)

    def scatter_add(self, dim, index, src):
        return _F.scatter_add(self, dim, index, src)

    def nonzero(self, as_tuple=False):
        return _F.nonzero(self, as_tuple)

    def masked_select(self, mask):
        return _F.masked_select(self, mask)

    # -- methods forwarding to tfcore.functional --
    def reshape(self, *shape):
        return _F.reshape(self, _shape_arg(shape))

    def view(self, *shape):
        """A view with a new shape (no copy; a ValueError when the strides do not allow one)."""
        return _F.view(self, _shape_arg(shape))

    def transpose(self, dim0, dim1):
        return _F.transpose(self, dim0, dim1)

    def t(self):
        if self.ndim != 2:
            raise ValueError("tfcore: t() expects a 2-D tensor, got %d-D" % self.ndim)
        return _F.transpose(self, 0, 1)

    @property
    def T(self):
        return _F.permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self):
        return _F.transpose(self, -2, -1)

    def permute(self, *dims):
        return _F.permute(self, _shape_arg(dims))

    def contiguous(self):
        return _F.contiguous(self)

    def expand(self, *sizes):
        return _F.expand(self, _shape_arg(sizes))

    def expand_as(self, other):
        return _F.expand(self, other.shape)

    def squeeze(self, dim=None):
        return _F.squeeze(self, dim)

    def unsqueeze(self, dim):
        return _F.unsqueeze(self, dim)

    def flatten(self, start_dim=0, end_dim=-1):
        return _F.flatten(self, start_dim, end_dim)

    def narrow(self, dim, start, length):
        return _F.narrow(self, dim, start, length)

    def split(self, split_size_or_sections, dim=0):
        return _F.split(self, split_size_or_sections, dim)

    def chunk(self, chunks, dim=0):
        return _F.chunk(self, chunks, dim)

    def sum(self, dim=None, keepdim=False):
        return _F.sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return _F.mean(self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        return _F.max(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _F.min(self, dim, keepdim)

    def var(self, dim=None, unbiased=True, keepdim=False, correction=None):
        return _F.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=True, keepdim=False):
        return _F.var(self, dim, unbiased, keepdim).sqrt()

    def argmax(self, dim=None, keepdim=False):
        return _F.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _F.argmin(self, dim, keepdim)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        return _F.topk(self, k, dim, largest, sorted)

    def exp(self):
        return _F.exp(self)

    def log(self):
        return _F.log(self)

    def sqrt(self):
        return _F.sqrt(self)

    def rsqrt(self):
        return _F.rsqrt(self)

    def tanh(self):
        return _F.tanh(self)

    def sigmoid(self):
        return _F.sigmoid(self)

    def relu(self):
        return _F.relu(self)

    def gelu(self, approximate="none"):
        return _F.gelu(self, approximate)

    def softmax(self, dim):
        return _F.softmax(self, dim)

    def log_softmax(self, dim):
        return _F.log_softmax(self, dim)

    def masked_fill(self, mask, value):
        return _F.masked_fill(self, mask, value)

    def matmul(self, other):
        return _F.matmul(self, other)

    def add(self, other):
        return self + other

    def sub(self, other):
        return self - other

    def mul(self, other):
        return self * other

    def div(self, other):
        return self / other

    def neg(self):
        return -self

    def pow(self, exponent):
        return self ** exponent

    # -- issue #16: comparisons (bool tensors), pointwise, scans, sorting, sampling --
    # __eq__ makes Python drop the inherited hash; tensors stay hashable by
    # identity (dict/set keys, as torch), and `t in list` compares by identity first.
    __hash__ = object.__hash__

    def _cmp(self, name, other):
        if other is None or not (isinstance(other, (Tensor, numbers.Number, np.generic, np.ndarray, list, tuple))):
            return NotImplemented
        return _F._compare(name, self, other)

    def __lt__(self, other):
        return self._cmp("lt", other)

    def __le__(self, other):
        return self._cmp("le", other)

    def __gt__(self, other):
        return self._cmp("gt", other)

    def __ge__(self, other):
        return self._cmp("ge", other)

    def __eq__(self, other):
        return self._cmp("eq", other)

    def __ne__(self, other):
        return self._cmp("ne", other)

    def lt(self, other):
        return _F.lt(self, other)

    def le(self, other):
        return _F.le(self, other)

    def gt(self, other):
        return _F.gt(self, other)

    def ge(self, other):
        return _F.ge(self, other)

    def eq(self, other):
        return _F.eq(self, other)

    def ne(self, other):
        return _F.ne(self, other)

    def __abs__(self):
        return _F.abs(self)

    def abs(self):
        return _F.abs(self)

    def sign(self):
        return _F.sign(self)

    def sin(self):
        return _F.sin(self)

    def cos(self):
        return _F.cos(self)

    def floor(self):
        return _F.floor(self)

    def ceil(self):
        return _F.ceil(self)

    def round(self):
        return _F.round(self)

    def clamp(self, min=None, max=None):
        return _F.clamp(self, min, max)

    clip = clamp

    def maximum(self, other):
        return _F.maximum(self, other)

    def minimum(self, other):
        return _F.minimum(self, other)

    def cumsum(self, dim):
        return _F.cumsum(self, dim)

    def triu(self, diagonal=0):
        return _F.triu(self, diagonal)

    def tril(self, diagonal=0):
        return _F.tril(self, diagonal)

    def sort(self, dim=-1, descending=False, stable=True):
        return _F.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=True):
        return _F.argsort(self, dim, descending, stable)

    def any(self, dim=None, keepdim=False):
        return _F.any(self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return _F.all(self, dim, keepdim)

    def multinomial(self, num_samples, replacement=False, seed=None):
        return _F.multinomial(self, num_samples, replacement, seed)

    # DLPack (tfcore.dlpack fills these in)
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return _dl.to_capsule(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return _dl.device_of(self)


def _check_operand(other):
    """A TypeError for what is no number, array or nested list of numbers (None,
    strings, objects): converting those would give NaN or a numpy error."""
    ok = _is_scalar(other) or isinstance(other, (list, tuple, np.ndarray)) or \
        type(other).__module__.startswith("torch")
    if ok and not _is_scalar(other):
        kind = np.asarray(other.detach().cpu().numpy() if hasattr(other, "detach") else other).dtype.kind
        ok = kind in "biuf"
    if not ok:
        raise TypeError("tfcore: unsupported operand type %s for a Tensor operation (expected a Tensor, a number "
                        "or an array of numbers)" % type(other).__name__)


def _looks_like_dtype(a):
    if isinstance(a, str):
        try:
            as_dtype(a)
            return True
        except TypeError:
            return False
    return False


# ---- creation ----------------------------------------------------------------------


def _default_dtype_for(data, arr):
    """PyTorch's defaults: Python floats -> float32, ints -> int64; numpy arrays keep theirs."""
    if isinstance(data, (np.ndarray, np.generic)):
        return as_dtype(arr.dtype)
    if arr.dtype == np.bool_:
        return _dtype.bool_
    if np.issubdtype(arr.dtype, np.integer):
        return _dtype.int64
    if np.issubdtype(arr.dtype, np.floating):
        return _dtype.float32
    raise TypeError("tfcore.tensor: cannot make a tensor from %s data" % arr.dtype)


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new tensor holding a copy of data (nested lists, scalars, numpy
    arrays, Tensors). dtype defaults like PyTorch's: float32 for Python
    floats, int64 for ints, the array's own dtype for numpy arrays."""
    if isinstance(data, Tensor):
        with _ag.no_grad():
            out = data.detach().to(dtype or data.dtype)
            out = _call(lib.tfc_tensor_clone, out._h)
    else:
        if type(data).__module__.startswith("torch"):
            data = data.detach().cpu().numpy()
        arr = np.asarray(data)
        dt = as_dtype(dtype) if dtype is not None else _default_dtype_for(data, arr)
        host = dt if dt.numpy is not None else _dtype.float32
        arr = np.array(arr, dtype=host.numpy, order="C", copy=False)  # keeps 0-d arrays 0-d
        out = _call(lib.tfc_tensor_from_data, ffi.cast("void *", arr.ctypes.data), _i64(arr.shape),
                    arr.ndim, host.code)
        if host is not dt:
            out = _call(lib.tfc_cast, ffi.NULL, out._h, dt.code)
    if device is not None:
        out = out._to_device(Device(device))
    if requires_grad:
        out.requires_grad = True
    return out


def as_tensor(data, dtype=None):
    """data itself when it already is a Tensor of that dtype, else tensor(data, dtype)."""
    if isinstance(data, Tensor) and (dtype is None or as_dtype(dtype) is data.dtype):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(a):
    """A tensor over the numpy array's memory (no copy): writes through either
    show in both. The array is kept alive until the last tensor (or view)
    over it is released. Strides must be non-negative multiples of the item
    size; dtypes float16/32/64, int32/64, uint8, bool.

    A non-writable array (``a.flags.writeable`` False: ``setflags(write=False)``,
    a read-only ``np.memmap``, ``np.frombuffer`` of bytes) gives a read-only
    tensor: every in-place op, ``copy_`` and optimizer step into it (or a
    view of it) raises RuntimeError. torch 1.13 only warns there and lets
    the write through (a segfault on a read-only memmap); tfcore refuses."""
    if not isinstance(a, np.ndarray):
        raise TypeError("tfcore.from_numpy: expected a numpy.ndarray, got %s" % type(a).__name__)
    dt = as_dtype(a.dtype)
    item = a.dtype.itemsize
    if any(s % item for s in a.strides):
        raise ValueError("tfcore.from_numpy: strides %s are not multiples of the item size %d"
                         % (a.strides, item))
    if any(s < 0 for s in a.strides):
        raise ValueError("tfcore.from_numpy: negative strides %s are not supported; "
                         "use np.ascontiguousarray(a) first" % (a.strides,))
    key = next(_array_ids)
    _live_arrays[key] = a
    out = ffi.new("tfc_tensor **")
    args = (ffi.cast("void *", a.ctypes.data), _i64(a.shape), _i64([s // item for s in a.strides]), a.ndim, dt.code)
    if a.flags.writeable:
        status = lib.tfc_tensor_wrap(*args, _release_array_cb, ffi.cast("void *", key), out)
    else:
        status = lib.tfc_tensor_wrap_ex(*args, lib.TFC_WRAP_READ_ONLY, _release_array_cb, ffi.cast("void *", key), out)
    if status != 0:
        del _live_arrays[key]  # the deleter is not called on error
        check(status)
    return _wrap(out[0])


def _filled(fn, shape, dtype, requires_grad, *extra):
    dt = as_dtype(dtype)
    out = _call(fn, _i64(shape), len(shape), dt.code, *extra)
    if requires_grad:
        out.requires_grad = True
    return out


def empty(*size, dtype=_dtype.float32, requires_grad=False):
    return _filled(lib.tfc_tensor_empty, _shape_arg(size), dtype, requires_grad)


def zeros(*size, dtype=_dtype.float32, requires_grad=False):
    return _filled(lib.tfc_tensor_zeros, _shape_arg(size), dtype, requires_grad)


def ones(*size, dtype=_dtype.float32, requires_grad=False):
    return _filled(lib.tfc_tensor_ones, _shape_arg(size), dtype, requires_grad)


def full(size, fill_value, dtype=_dtype.float32, requires_grad=False):
    shape = _shape_arg((size,))
    dt = as_dtype(dtype)
    out = _call(lib.tfc_tensor_full, _i64(shape), len(shape), dt.code, float(fill_value))
    if requires_grad:
        out.requires_grad = True
    return out


def zeros_like(t, dtype=None, requires_grad=False):
    return zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None):
    """[start, end) by step, like torch.arange (int64 for integer arguments)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = _dtype.int64 if ints else _dtype.float32
    return _call(lib.tfc_tensor_arange, float(start), float(end), float(step), as_dtype(dtype).code)


def _random(fn, size, dtype, requires_grad, seed, *extra):
    shape = _shape_arg(size)
    n = 1
    for d in shape:
        n *= d
    s, off = (int(seed), 0) if seed is not None else _draw(n)
    dt = as_dtype(dtype)
    out = _call(fn, _i64(shape), len(shape), dt.code, *extra, s, off)
    if requires_grad:
        out.requires_grad = True
    return out


def randn(*size, dtype=_dtype.float32, requires_grad=False, seed=None):
    """Standard normal values from the Philox stream (tfcore.manual_seed), or from (seed, 0)."""
    return _random(lib.tfc_tensor_randn, size, dtype, requires_grad, seed)


def rand(*size, dtype=_dtype.float32, requires_grad=False, seed=None):
    """Uniform [0, 1) values from the Philox stream (tfcore.manual_seed), or from (seed, 0)."""
    return _random(lib.tfc_tensor_rand, size, dtype, requires_grad, seed)


from . import functional as _F  # noqa: E402  (functional imports Tensor from here)
from . import dlpack as _dl  # noqa: E402
