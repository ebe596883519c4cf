"""The implicit autograd tape: one tfc_graph per Python thread.

Ops record on the calling thread's graph when grad mode is on and one of
their inputs requires grad; Tensor.backward() runs tfc_graph_backward_ex on
it. Without retain_graph, backward frees the saved tensors of the nodes IT
went through (as PyTorch does), not the rest of the tape: other losses
recorded on this thread stay usable, and nodes whose results nobody holds
any more leave the tape by themselves. create_graph=True records the
backward itself, so gradients can be differentiated again (grad(),
Hessian-vector products, gradient penalties). clear_graph() still frees
everything recorded on this thread at once. Evaluation belongs under
`with tfcore.no_grad():` (nothing is recorded there at all).
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
    until this thread's tape is empty after a backward without
    retain_graph (backward frees only its own nodes, and the binding cannot
    tell which checkpoints those were), or until clear_graph()."""
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


def _raise_callback_error(status, g):
    """A grad hook's or a checkpointed function's exception, re-raised in
    place of the status it turned into."""
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


def _after_free(g):
    """Once nothing is left on the tape, the checkpointed functions it
    referenced can go."""
    if lib.tfc_graph_num_nodes(g) == 0:
        _state()["checkpoints"] = []


def backward(tensor, grad=None, retain_graph=None, create_graph=False):
    """d(tensor)/d(leaves) accumulated into the leaves' .grad; see Tensor.backward."""
    if not lib.tfc_tensor_requires_grad(tensor._h):
        raise RuntimeError("tfcore: backward: the tensor does not require grad and was not produced "
                           "by a recorded op (set requires_grad=True on a leaf, outside no_grad)")
    if retain_graph is None:
        retain_graph = create_graph
    g = graph()
    seed = ffi.NULL if grad is None else grad._h
    status = lib.tfc_graph_backward_ex(g, tensor._h, seed, int(bool(retain_graph)), int(bool(create_graph)))
    _raise_callback_error(status, g)
    if not retain_graph:
        _after_free(g)


def _tensors(arg, what):
    from .tensor import Tensor
    seq = (arg,) if isinstance(arg, Tensor) else arg
    try:
        seq = tuple(seq)
    except TypeError:
        raise TypeError("tfcore.autograd.grad: %s must be a Tensor or a sequence of Tensors, not %s"
                        % (what, type(arg).__name__)) from None
    for i, t in enumerate(seq):
        if not isinstance(t, Tensor):
            raise TypeError("tfcore.autograd.grad: %s[%d] is %s, not a Tensor" % (what, i, type(t).__name__))
    return seq


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """torch.autograd.grad: the gradients of the outputs (weighted by
    grad_outputs, each None meaning 1 for a one-element output) with respect
    to inputs, returned as a tuple (one per input) instead of accumulated
    into .grad; no .grad is touched. create_graph=True records the backward
    so the results can be differentiated again; retain_graph defaults to
    create_graph. An input the outputs do not depend on raises ValueError,
    or gives None with allow_unused=True (tfc_autograd_grad)."""
    from .tensor import Tensor, _wrap, tensor as _tensor
    outs = _tensors(outputs, "outputs")
    ins = _tensors(inputs, "inputs")
    if not outs or not ins:
        raise ValueError("tfcore.autograd.grad: outputs and inputs must not be empty")
    seeds = None
    if grad_outputs is not None:
        gos = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
        if len(gos) != len(outs):
            raise ValueError("tfcore.autograd.grad: %d grad_outputs for %d outputs" % (len(gos), len(outs)))
        seeds = [None if s is None else s if isinstance(s, Tensor) else _tensor(s, dtype=o.dtype)
                 for s, o in zip(gos, outs)]
    if retain_graph is None:
        retain_graph = create_graph
    for i, o in enumerate(outs):
        if not lib.tfc_tensor_requires_grad(o._h):
            raise RuntimeError("tfcore.autograd.grad: outputs[%d] does not require grad and was not produced "
                               "by a recorded op" % i)
    g = graph()
    c_outs = ffi.new("const tfc_tensor *[]", [o._h for o in outs])
    c_ins = ffi.new("const tfc_tensor *[]", [t._h for t in ins])
    c_seeds = ffi.NULL if seeds is None else ffi.new(
        "const tfc_tensor *[]", [ffi.NULL if s is None else s._h for s in seeds])
    res = ffi.new("tfc_tensor *[]", len(ins))
    status = lib.tfc_autograd_grad(g, c_outs, len(outs), c_ins, len(ins), c_seeds, int(bool(retain_graph)),
                                   int(bool(create_graph)), int(bool(allow_unused)), res)
    _raise_callback_error(status, g)
    if not retain_graph:
        _after_free(g)
    return tuple(None if res[i] == ffi.NULL else _wrap(res[i]) for i in range(len(ins)))


def set_detect_anomaly(mode):
    """Turn anomaly detection on this thread's tape on or off
    (torch.autograd.set_detect_anomaly): while on, an op recorded for
    backward whose output holds NaN or Inf, and a backward step that
    produces such a gradient, raise RuntimeError naming the op, its shapes
    and (in backward) the forward op that recorded the node."""
    check(lib.tfc_graph_set_detect_anomaly(graph(), int(bool(mode))))


def is_anomaly_enabled():
    """True while anomaly detection is on for this thread's tape."""
    g = _state()["graph"]
    return g is not None and bool(lib.tfc_graph_is_detect_anomaly(g))


class detect_anomaly(contextlib.ContextDecorator):
    """Context manager / decorator: anomaly detection on inside
    (torch.autograd.detect_anomaly; see set_detect_anomaly). It costs a read
    of every recorded output and every gradient: for debugging."""

    def __init__(self):
        self.prev = []

    def __enter__(self):
        self.prev.append(is_anomaly_enabled())
        set_detect_anomaly(True)
        return self

    def __exit__(self, *exc):
        set_detect_anomaly(self.prev.pop())
        return False
