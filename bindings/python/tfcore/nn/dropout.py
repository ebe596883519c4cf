"""tfcore.nn.Dropout."""
from .. import functional as F
from .module import Module


class Dropout(Module):
    """Inverted dropout with probability p while training (masks from tfcore's Philox stream,
    tfcore.manual_seed); the identity in eval()."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        F._check_dropout_p(p)
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got {}".format(p))
        if inplace:
            raise ValueError("tfcore.nn.Dropout: inplace=True is not supported")
        self.p = float(p)
        self.inplace = False

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return "p=%s, inplace=%s" % (self.p, self.inplace)
