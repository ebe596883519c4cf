"""tfcore.nn.Embedding."""
from .. import functional as F
from .._dtype import as_dtype
from ..tensor import _int_arg, empty
from . import init
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """A lookup table weight [num_embeddings, embedding_dim] indexed by integer ids; initialised N(0, 1)
    as torch's. padding_idx, max_norm and sparse gradients are not supported (a ValueError)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None or max_norm is not None or scale_grad_by_freq or sparse:
            raise ValueError("tfcore.nn.Embedding: padding_idx, max_norm, scale_grad_by_freq and sparse are not "
                             "supported")
        self.num_embeddings = _int_arg("tfcore.nn.Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = _int_arg("tfcore.nn.Embedding", "embedding_dim", embedding_dim)
        self.padding_idx = None
        if _weight is None:
            dt = as_dtype(dtype if dtype is not None else "float32")
            self.weight = Parameter(empty(self.num_embeddings, self.embedding_dim, dtype=dt))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ValueError("tfcore.nn.Embedding: _weight is %s, expected %s"
                                 % (tuple(_weight.shape), (self.num_embeddings, self.embedding_dim)))
            self.weight = Parameter(_weight)
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        init.normal_(self.weight)

    def forward(self, input):
        return F.embedding(input, self.weight)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True):
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        m = cls(embeddings.shape[0], embeddings.shape[1], _weight=embeddings)
        m.weight.requires_grad = not freeze
        return m

    def extra_repr(self):
        return "%d, %d" % (self.num_embeddings, self.embedding_dim)
