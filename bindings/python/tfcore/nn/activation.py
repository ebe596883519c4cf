"""tfcore.nn activations: GELU, ReLU, Tanh, Sigmoid, Softmax, SiLU."""
from .. import functional as F
from .module import Module


class GELU(Module):
    """x·Φ(x) (approximate='none') or the tanh form (approximate='tanh'), as torch.nn.GELU."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("tfcore.nn.GELU: approximate must be 'none' or 'tanh', got %r" % (approximate,))
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return "approximate=%r" % self.approximate


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        if inplace:
            raise ValueError("tfcore.nn.ReLU: inplace=True is not supported")

    def forward(self, input):
        return F.relu(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class SiLU(Module):
    """x·σ(x), as torch.nn.SiLU (Llama's MLP activation)."""

    def __init__(self, inplace=False):
        super().__init__()
        if inplace:
            raise ValueError("tfcore.nn.SiLU: inplace=True is not supported")

    def forward(self, input):
        return F.silu(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        if dim is None:
            raise ValueError("tfcore.nn.Softmax: pass dim (torch's implicit choice is deprecated)")
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return "dim=%s" % self.dim
