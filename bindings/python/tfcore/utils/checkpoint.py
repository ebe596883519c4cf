"""Activation checkpointing with torch.utils.checkpoint's signature.

    from tfcore.utils.checkpoint import checkpoint
    y = checkpoint(block, x, use_reentrant=False)

(the module itself is callable too: tfcore.utils.checkpoint(block, x)).
Built on tfcore.checkpoint (tfc_graph_checkpoint): fn runs without keeping
its activations and is replayed during backward, with the random stream
restored so dropout draws the same mask. use_reentrant is accepted for
compatibility and changes nothing: parameters fn reads from its closure get
their gradients even when no input requires grad (torch's non-reentrant
behaviour).
"""
import sys
import types

from .. import autograd as _ag

__all__ = ["checkpoint"]


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs) checkpointed; returns what it returns (a
    Tensor or a tuple of Tensors). Non-Tensor arguments are passed through
    unchanged. With no Tensor argument, function simply runs (recorded)."""
    from ..tensor import Tensor, _rng, _rng_lock
    if not callable(function):
        raise TypeError("checkpoint: function must be callable, got %s" % type(function).__name__)
    if use_reentrant not in (None, True, False):
        raise TypeError("checkpoint: use_reentrant must be True, False or None")
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    if not pos or len(pos) > 8:  # TFC_CHECKPOINT_MAX_INPUTS
        if len(pos) > 8:
            raise ValueError("checkpoint: at most 8 Tensor arguments (TFC_CHECKPOINT_MAX_INPUTS), got %d" % len(pos))
        return function(*args, **kwargs)
    counts = []

    def body(*tensors):
        full = list(args)
        for i, t in zip(pos, tensors):
            full[i] = t
        res = function(*full, **kwargs)
        counts.append(len(res) if isinstance(res, tuple) else 0)
        return res

    with _rng_lock:
        rng = dict(_rng)
    tensors = [args[i] for i in pos]
    try:
        out = _ag.checkpoint(body, *tensors, n_out=1)
        return (out,) if counts and counts[-1] == 1 else out
    except TypeError:
        # function returned a tuple: the number of outputs is known now; run again from the same stream
        if not counts or counts[-1] <= 1:
            raise
        with _rng_lock:
            _rng.update(rng)
        return _ag.checkpoint(body, *tensors, n_out=counts[-1])


class _CallableModule(types.ModuleType):
    def __call__(self, function, *args, **kwargs):
        return checkpoint(function, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
