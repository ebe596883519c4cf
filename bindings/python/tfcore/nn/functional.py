"""tfcore.nn.functional: torch.nn.functional's names over tfcore.functional
(the same functions, not copies). Names not listed here are looked up in
tfcore.functional, so ops added there are found here too."""
from .. import functional as _F
from ..functional import (cross_entropy, dropout, embedding, gelu, layer_norm, linear, linear_cross_entropy,  # noqa: F401
                          log_softmax, relu, scaled_dot_product_attention, sigmoid, softmax, tanh)
from ..functional import silu  # noqa: F401


def __getattr__(name):
    try:
        return getattr(_F, name)
    except AttributeError:
        raise AttributeError("module 'tfcore.nn.functional' has no attribute %r" % (name,)) from None
