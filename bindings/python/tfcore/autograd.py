"""The implicit autograd tape: one tfc_graph per Python thread.

Ops record on the calling thread's graph when grad mode is on and one of
their inputs requires grad; Tensor.backward() runs tfc_graph_backward on it
and then clears it (tfc_graph_clear) unless retain_graph=True. Clearing
frees the saved activations of EVERY node recorded on this thread so far,
not only those behind the loss: compute one loss at a time, or pass
retain_graph=True to all but the last backward. Work that never calls
backward (evaluation) belongs under `with tfcore.no_grad():`, otherwise the
tape keeps its activations until the next backward or clear_graph().
"""
import contextlib
import threading

from ._lib import check, ffi, lib

_local = threading.local()
# graph address -> token of the owner whose native hook (a tfc_ddp's) is
# installed on it, so that owner removes the hook when it goes only if
# nothing replaced it since. (A token, not a weak reference: weak references
# are already cleared when a finalizer of a garbage cycle runs.)
_native_hooks = {}


def _state():
    st = _local.__dict__
    if "enabled" not in st:
        st["enabled"] = True
        st["graph"] = None
    return st


def graph():
    """This thread's tfc_graph* (created on first use)."""
    st = _state()
    g = st["graph"]
    if g is None:
        out = ffi.new("tfc_graph **")
        check(lib.tfc_graph_new(out))
        g = ffi.gc(out[0], lib.tfc_graph_release)
        st["graph"] = g
    return g


def is_grad_enabled():
    """True when ops on this thread record for backward (no no_grad active)."""
    return _state()["enabled"]


def set_grad_enabled(mode):
    """Turn recording on this thread on or off (returns nothing)."""
    _state()["enabled"] = bool(mode)


class _GradMode(contextlib.ContextDecorator):
    def __init__(self, mode):
        self.mode = mode
        self.prev = []

    def __enter__(self):
        self.prev.append(is_grad_enabled())
        set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        set_grad_enabled(self.prev.pop())
        return False


def no_grad():
    """Context manager / decorator: nothing inside records for backward (torch.no_grad)."""
    return _GradMode(False)


def enable_grad():
    """Context manager / decorator turning recording back on inside a no_grad block."""
    return _GradMode(True)


def graph_for(*tensors):
    """The graph an op on these inputs should record on, or NULL (record nothing)."""
    if not _state()["enabled"]:
        return ffi.NULL
    for t in tensors:
        if t is not None and lib.tfc_tensor_requires_grad(t._h):
            return graph()
    return ffi.NULL


def num_nodes():
    """Number of nodes currently recorded on this thread's graph."""
    g = _state()["graph"]
    return 0 if g is None else int(lib.tfc_graph_num_nodes(g))


def clear_graph():
    """Free everything recorded on this thread's graph (what backward does
    after it ran, unless retain_graph=True)."""
    g = _state()["graph"]
    if g is not None:
        check(lib.tfc_graph_clear(g))
    _state()["checkpoints"] = []


def set_grad_hook(fn, params=None):
    """Call fn(leaf) during every backward on this thread, once per leaf
    reachable from the loss, as soon as that leaf's .grad is final for the
    pass (tfc_graph_set_grad_hook: what overlapping a data-parallel gradient
    all-reduce with backward needs). leaf is the very Tensor object from
    params (an iterable of Tensors) when it is one of them, else a new
    Tensor handle on the same leaf. fn=None removes the hook. The hook stays
    across backward calls and graph clears. An exception raised by fn stops
    backward (gradients may then be partially accumulated) and is re-raised
    from Tensor.backward."""
    st = _state()
    g = graph()
    _native_hooks.pop(_addr(g), None)
    if fn is None:
        check(lib.tfc_graph_set_grad_hook(g, ffi.NULL, ffi.NULL))
        st["grad_hook"] = None
        return
    by_handle = {}
    for p in params or ():
        by_handle[int(ffi.cast("uintptr_t", p._h))] = p
    failure = []

    def hook(leaf, user):
        try:
            t = by_handle.get(int(ffi.cast("uintptr_t", leaf)))
            if t is None:
                from .tensor import _wrap
                t = _wrap(lib.tfc_tensor_retain(leaf))
            fn(t)
            return 0
        except BaseException as e:  # KeyboardInterrupt too: nothing may vanish inside C
            failure.append(e)
            return lib.TFC_ERR_CANCELLED
    # The callback (a native trampoline) lives as long as it is installed.
    cb = ffi.callback("tfc_grad_hook_fn", hook)
    check(lib.tfc_graph_set_grad_hook(g, cb, ffi.NULL))
    st["grad_hook"] = (cb, failure)


def _addr(g):
    return int(ffi.cast("uintptr_t", g))


def _claim_hook(g, token):
    """Record that the owner of token (any unique value) just installed a
    native grad hook on graph g (replacing a set_grad_hook one, whose
    callback can then go)."""
    _native_hooks[_addr(g)] = token
    st = _state()
    if st["graph"] is not None and _addr(st["graph"]) == _addr(g):
        st["grad_hook"] = None


def _release_hook(g, token):
    """True when token's native hook is still the one on g: the caller must
    then remove it from g (it is forgotten here)."""
    if _native_hooks.get(_addr(g)) != token:
        return False
    del _native_hooks[_addr(g)]
    return True


class _Checkpoint:
    """What one tfc_graph_checkpoint node calls back into: the function, the
    Philox stream's state before its forward call (replayed), and the first
    exception the function raised."""

    def __init__(self, fn, rng):
        self.fn, self.rng, self.error = fn, rng, None


def _checkpoint_call(g, ins, n_in, outs, n_out, ctx):
    """tfc_checkpoint_fn: run the Python function with this thread's tape
    pointed at g (NULL: record nothing), and in a replay (g not NULL) with
    the stream as it was before the forward call."""
    from .tensor import Tensor, _rng, _rng_lock, _wrap
    c = ffi.from_handle(ctx)
    st = _state()
    prev = (st["graph"], st["enabled"])
    rng_now = None
    try:
        args = [_wrap(lib.tfc_tensor_retain(ins[i])) for i in range(n_in)]
        if g == ffi.NULL:
            st["enabled"] = False
        else:
            st["graph"], st["enabled"] = g, True
            with _rng_lock:
                rng_now = dict(_rng)
                _rng.update(c.rng)
        res = c.fn(*args)
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        if len(res) != n_out or not all(isinstance(r, Tensor) for r in res):
            raise TypeError("tfcore.checkpoint: fn returned %d value(s), wanted %d Tensor(s) (n_out)"
                            % (len(res), n_out))
        for i, r in enumerate(res):
            outs[i] = lib.tfc_tensor_retain(r._h)
        return 0
    except BaseException as e:  # nothing may unwind through C
        if c.error is None:
            c.error = e
        return lib.TFC_ERR_CANCELLED
    finally:
        st["graph"], st["enabled"] = prev
        if rng_now is not None:
            with _rng_lock:
                _rng.update(rng_now)


# One trampoline for every checkpoint; each call's Python side travels as a handle.
_checkpoint_cb = ffi.callback("tfc_checkpoint_fn", _checkpoint_call)


def checkpoint(fn, *inputs, n_out=1):
    """Activation checkpointing (torch.utils.checkpoint; tfc_graph_checkpoint):
    fn(*inputs) runs without recording, only the inputs are kept for
    backward, and backward re-runs fn (recording) to differentiate it. fn
    returns one Tensor, or a tuple of n_out Tensors; parameters it reads
    from its closure get their gradients too. Dropout inside fn draws the
    same mask in the replay (the stream's state is saved). Returns a Tensor
    (n_out == 1) or a tuple. The function and its closure stay referenced
    until this thread's graph is cleared (backward without retain_graph,
    or clear_graph())."""
    from .tensor import _rng, _rng_lock, _wrap
    with _rng_lock:
        rng = dict(_rng)
    c = _Checkpoint(fn, rng)
    h = ffi.new_handle(c)
    st = _state()
    g = graph() if st["enabled"] else ffi.NULL
    if g != ffi.NULL:
        st.setdefault("checkpoints", []).append(h)
    ins = ffi.new("const tfc_tensor *[]", [t._h for t in inputs])
    outs = ffi.new("tfc_tensor *[]", n_out)
    status = lib.tfc_graph_checkpoint(g, _checkpoint_cb, h, 0, ins, len(inputs), outs, n_out)
    if status != 0:
        if g != ffi.NULL:
            st["checkpoints"].remove(h)
        if c.error is not None:
            raise c.error
    check(status)
    res = tuple(_wrap(outs[i]) for i in range(n_out))
    return res[0] if n_out == 1 else res


def _checkpoint_error():
    """The exception a checkpointed function raised in this thread's last replay, if any."""
    for h in _state().get("checkpoints", ()):
        c = ffi.from_handle(h)
        if c.error is not None:
            return c.error
    return None


def backward(tensor, grad=None, retain_graph=False):
    """d(tensor)/d(leaves) accumulated into the leaves' .grad; see Tensor.backward."""
    if not lib.tfc_tensor_requires_grad(tensor._h):
        raise RuntimeError("tfcore: backward: the tensor does not require grad and was not produced "
                           "by a recorded op (set requires_grad=True on a leaf, outside no_grad)")
    g = graph()
    seed = ffi.NULL if grad is None else grad._h
    status = lib.tfc_graph_backward(g, tensor._h, seed)
    hook = _state().get("grad_hook")
    if status != 0 and hook is not None and hook[1]:
        exc = hook[1].pop()
        hook[1].clear()
        raise exc
    if status != 0:
        err = _checkpoint_error()
        if err is not None:
            _state()["checkpoints"] = []
            check(lib.tfc_graph_clear(g))
            raise err
    check(status)
    if not retain_graph:
        check(lib.tfc_graph_clear(g))
        _state()["checkpoints"] = []
