"""tfcore.nn.Parameter: a Tensor that a Module registers as one of its parameters."""
from .. import autograd as _ag
from ..tensor import Tensor, empty


class Parameter(Tensor):
    """A leaf Tensor that requires grad (unless requires_grad=False) and that a
    Module registers when it is assigned to one of its attributes.

    Parameter(data) shares data's memory (as torch's does) but is a new leaf:
    it is cut from whatever graph data came from."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError("tfcore.nn.Parameter: data must be a tfcore.Tensor, got %s" % type(data).__name__)
        with _ag.no_grad():
            leaf = data.detach()
        p = Tensor.__new__(cls)
        p._h = leaf._h
        if requires_grad:
            p.requires_grad = True
        return p

    def __init__(self, data=None, requires_grad=True):  # Tensor.__init__ refuses direct construction
        pass

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        """A new Parameter over a copy of the values (copy.deepcopy(module) works, as in torch)."""
        if id(self) in memo:
            return memo[id(self)]
        from ..tensor import _call
        from .._lib import lib
        out = Parameter(_call(lib.tfc_tensor_clone, self._h), self.requires_grad)
        memo[id(self)] = out
        return out

    def __reduce__(self):
        raise TypeError("tfcore.nn.Parameter cannot be pickled; save a state_dict with tfcore.save_safetensors")
