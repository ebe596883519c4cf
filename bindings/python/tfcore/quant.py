"""Quantized weights (include/tfcore/quant.h): int8 per output channel and
int4 in groups, and the quantized linear y = x · Wᵀ + b on float32 inputs.

    q = tfcore.quantize(w, "int4", group_size=32)   # w [out, in] float32
    y = q.linear(x, bias)                           # x [..., in] -> [..., out]
    q.packed, q.scales                              # numpy views (no copy)

Inference only: q.linear on an x that requires grad under grad mode raises
(the product has no backward); train through q.dequantize() instead.
"""
import numpy as np

from . import autograd as _ag
from ._lib import check, ffi, lib
from .tensor import Tensor, _wrap, as_tensor

_FORMATS = {"int8": lib.TFC_QFORMAT_INT8, "int4": lib.TFC_QFORMAT_INT4}
_NAMES = {v: k for k, v in _FORMATS.items()}


def _format(fmt):
    if fmt not in _FORMATS:
        raise ValueError("tfcore.quantize: format must be 'int8' or 'int4', got %r" % (fmt,))
    return _FORMATS[fmt]


class QWeight:
    """A quantized weight W [out_features, in_features] (an immutable tfc_qweight)."""

    def __init__(self, handle):
        self._h = ffi.gc(handle, lib.tfc_qweight_release)

    @property
    def format(self):
        return _NAMES[lib.tfc_qweight_format(self._h)]

    @property
    def shape(self):
        """(out_features, in_features)."""
        return (lib.tfc_qweight_out_features(self._h), lib.tfc_qweight_in_features(self._h))

    @property
    def group_size(self):
        return lib.tfc_qweight_group_size(self._h)

    @property
    def nbytes(self):
        """Bytes of codes plus scales: what one linear reads of the weight."""
        return lib.tfc_qweight_nbytes(self._h)

    def tensors(self):
        """(packed u8 Tensor, scales float32 Tensor), sharing the weight's memory."""
        p, s = ffi.new("tfc_tensor **"), ffi.new("tfc_tensor **")
        check(lib.tfc_qweight_tensors(self._h, p, s))
        return _wrap(p[0]), _wrap(s[0])

    @property
    def packed(self):
        """The codes as a numpy view: int8 [out, in] for int8 (bytes reinterpreted),
        uint8 [out, in/2] for int4 (low nibble = even k, value = nibble - 8)."""
        a = self.tensors()[0].numpy()
        return a.view(np.int8) if self.format == "int8" else a

    @property
    def scales(self):
        """float32 [out] (int8) or [out, in/group_size] (int4), a numpy view."""
        return self.tensors()[1].numpy()

    def dequantize(self, in_out=False):
        """The float32 weight this stands for: [out, in], or [in, out] with in_out=True."""
        out = ffi.new("tfc_tensor **")
        check(lib.tfc_qweight_dequantize(self._h, lib.TFC_QUANT_IN_OUT if in_out else 0, out))
        return _wrap(out[0])

    def linear(self, x, bias=None):
        """x [..., in] · Wᵀ + bias [out] (float32)."""
        x = as_tensor(x)
        b = None if bias is None else as_tensor(bias)
        g = _ag.graph_for(x, b)
        out = ffi.new("tfc_tensor **")
        check(lib.tfc_qlinear(g, x._h, self._h, ffi.NULL if b is None else b._h, out))
        return _wrap(out[0])

    __call__ = linear

    def __repr__(self):
        g = ", group_size=%d" % self.group_size if self.format == "int4" else ""
        return "QWeight(%s, shape=%s%s)" % (self.format, self.shape, g)


def quantize(w, format="int8", group_size=None, in_out=False):
    """Quantize a 2-D float32 weight [out, in] (or [in, out] with in_out=True, the
    Conv1D layout of tfc_linear/GPT-2). group_size: int4's group along in (default
    32); int8 is per output channel and takes no group."""
    fmt = _format(format)
    if group_size is None:
        group_size = 32 if fmt == lib.TFC_QFORMAT_INT4 else 0
    w = as_tensor(w)
    out = ffi.new("tfc_qweight **")
    check(lib.tfc_quantize(w._h, fmt, int(group_size), lib.TFC_QUANT_IN_OUT if in_out else 0, out))
    return QWeight(out[0])


def from_tensors(format, out_features, in_features, packed, scales, group_size=None):
    """A QWeight from its arrays (QWeight.tensors() or numpy arrays in that layout);
    contiguous tensors are shared, not copied."""
    fmt = _format(format)
    if group_size is None:
        group_size = 32 if fmt == lib.TFC_QFORMAT_INT4 else 0
    if isinstance(packed, np.ndarray) and packed.dtype == np.int8:
        packed = packed.view(np.uint8)
    p, s = as_tensor(packed), as_tensor(scales)
    out = ffi.new("tfc_qweight **")
    check(lib.tfc_qweight_from_tensors(fmt, int(out_features), int(in_features), int(group_size), p._h, s._h, out))
    return QWeight(out[0])


def qlinear(x, weight, bias=None):
    """x · weightᵀ + bias for a QWeight weight."""
    if not isinstance(weight, QWeight):
        raise TypeError("tfcore.qlinear: weight must be a QWeight (tfcore.quantize), got %s" % type(weight).__name__)
    return weight.linear(x, bias)
