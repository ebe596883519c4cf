"""tfcore.nn.Linear and Identity."""
import math

from .. import functional as F
from .._dtype import as_dtype
from ..tensor import _int_arg, empty
from . import init
from .module import Module
from .parameter import Parameter


class Identity(Module):
    """Returns its input (a placeholder, as torch.nn.Identity)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x·Wᵀ + b with weight [out_features, in_features] and bias [out_features] (torch's layout).
    Initialised as torch's: weight kaiming_uniform_(a=√5), i.e. U(±1/√in), bias U(±1/√in)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        in_features = _int_arg("tfcore.nn.Linear", "in_features", in_features)
        out_features = _int_arg("tfcore.nn.Linear", "out_features", out_features)
        if in_features < 0 or out_features < 0:
            raise ValueError("tfcore.nn.Linear: in_features and out_features must be >= 0, got %d, %d"
                             % (in_features, out_features))
        dt = as_dtype(dtype if dtype is not None else "float32")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = Parameter(empty(self.out_features, self.in_features, dtype=dt))
        if bias:
            self.bias = Parameter(empty(self.out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)
