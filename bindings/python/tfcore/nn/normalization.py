"""tfcore.nn.LayerNorm."""
import numbers

from .. import functional as F
from .._dtype import as_dtype
from ..tensor import _int_arg, empty
from . import init
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    """LayerNorm over the last dim (normalized_shape (C,) or C; the library normalises the last dim only, so a
    longer normalized_shape is a ValueError). weight ones, bias zeros (torch's init)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        normalized_shape = tuple(_int_arg("tfcore.nn.LayerNorm", "normalized_shape", d) for d in normalized_shape)
        if len(normalized_shape) != 1:
            raise ValueError("tfcore.nn.LayerNorm: only the last dim can be normalized, got normalized_shape %s"
                             % (normalized_shape,))
        self.normalized_shape = normalized_shape
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        dt = as_dtype(dtype if dtype is not None else "float32")
        if self.elementwise_affine:
            self.weight = Parameter(empty(normalized_shape, dtype=dt))
            if bias:
                self.bias = Parameter(empty(normalized_shape, dtype=dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)
