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
        err = _function_error()
        if err is not None:
            raise err
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


# ---- custom autograd functions (tfc_custom_op) ------------------------------------

_MAX_SAVED = 8  # TFC_CUSTOM_MAX_SAVED


class FunctionCtx:
    """The ctx a Function's forward and backward share (torch's ctx):
    save_for_backward(*tensors) in forward, saved_tensors in backward,
    needs_input_grad (one bool per forward argument), and any attribute
    forward sets."""

    def __init__(self):
        self._to_save = ()
        self._n_saved = 0
        self._saved = None
        self._non_diff = []
        self.needs_input_grad = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        """Keep these Tensors (or None) for backward; they go through the
        in-place version check: modifying one before backward makes
        backward fail."""
        from .tensor import Tensor
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward: argument %d is %s, not a Tensor or None"
                                % (i, type(t).__name__))
        if len(tensors) > _MAX_SAVED:
            raise ValueError("save_for_backward: at most %d tensors (TFC_CUSTOM_MAX_SAVED), got %d"
                             % (_MAX_SAVED, len(tensors)))
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """What forward saved, as tensors sharing its memory (in backward only)."""
        if self._saved is None:
            raise RuntimeError("saved_tensors is available inside backward only (tfcore frees it when the "
                               "op's node is freed)")
        return self._saved

    def mark_non_differentiable(self, *outputs):
        """These outputs get no gradient (returned detached; backward receives zeros for them)."""
        self._non_diff.extend(outputs)

    def set_materialize_grads(self, value):
        """False: backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class _FnRecord:
    """One Function.apply: what the C callbacks need, kept alive (as a handle)
    until the library destroys the op's ctx."""

    def __init__(self, cls, ctx, outs, n_args, tensor_pos, in_meta):
        self.cls, self.ctx, self.outs = cls, ctx, outs
        self.out_meta = [(o.shape, o.dtype, o.device) for o in outs]
        self.n_args, self.tensor_pos, self.in_meta = n_args, tensor_pos, in_meta
        self.error = None


_fn_live = {}  # id(record) -> handle, until tfc_custom_op's destroy


def _fn_forward(ctx, ins, n_in, outs, n_out, saved):
    """tfc_custom_forward_fn: hand over the outputs and saved tensors of the
    forward Function.apply already ran (its exceptions surfaced there)."""
    rec = ffi.from_handle(ctx)
    try:
        for i, o in enumerate(rec.outs):
            outs[i] = lib.tfc_tensor_retain(o._h)
        for k, t in enumerate(rec.ctx._to_save):
            if t is not None:
                saved[k] = lib.tfc_tensor_retain(t._h)
        return 0
    except BaseException as e:  # nothing may unwind through C
        rec.error = e
        return lib.TFC_ERR_CANCELLED
    finally:
        rec.outs = None


def _sum_to(g, shape):
    """g summed down to shape (torch accepts a gradient that broadcasts to its input)."""
    from . import functional as F
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    if lead < 0:
        raise ValueError("shape")
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    for i, s in enumerate(shape):
        if s != 1 and g.shape[lead + i] != s:
            raise ValueError("shape")
    if dims:
        g = F.sum(g, dims, keepdim=True)
    return g.reshape(tuple(shape))


def _fn_backward(ctx, saved, gouts, n_out, needs, gins, n_in):
    """tfc_custom_backward_fn: the Python backward with the thread's recording off."""
    from .tensor import Tensor, _wrap, zeros
    rec = ffi.from_handle(ctx)
    st = _state()
    prev = st["enabled"]
    st["enabled"] = False
    c = rec.ctx
    name = rec.cls.__name__ + "Backward"
    try:
        c._saved = tuple(None if saved[k] == ffi.NULL else _wrap(lib.tfc_tensor_retain(saved[k]))
                         for k in range(c._n_saved))
        grads = []
        for o in range(n_out):
            if gouts[o] != ffi.NULL:
                grads.append(_wrap(lib.tfc_tensor_retain(gouts[o])))
            elif c.materialize_grads:
                shape, dt, dev = rec.out_meta[o]
                grads.append(zeros(shape, dtype=dt).to(dev))
            else:
                grads.append(None)
        res = rec.cls.backward(c, *grads)
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        if len(res) != rec.n_args:
            raise RuntimeError("function %s returned an incorrect number of gradients (expected %d, got %d)"
                               % (name, rec.n_args, len(res)))
        for pos, r in enumerate(res):
            if r is not None and not isinstance(r, Tensor):
                raise TypeError("function %s returned a %s as gradient %d; expected a Tensor or None"
                                % (name, type(r).__name__, pos))
            if r is not None and pos not in rec.tensor_pos:
                raise RuntimeError("function %s returned a gradient different than None at position %d, but "
                                   "the corresponding forward input was not a Tensor" % (name, pos))
        for j, pos in enumerate(rec.tensor_pos):
            r = res[pos]
            if r is None or not needs[j]:
                continue
            shape, dt = rec.in_meta[j]
            try:
                r = _sum_to(r, shape)
            except ValueError:
                raise RuntimeError("function %s returned an invalid gradient at index %d - got %s but expected "
                                   "shape compatible with %s" % (name, pos, list(r.shape), list(shape))) from None
            if r.dtype is not dt:
                r = r.to(dt)
            gins[j] = lib.tfc_tensor_retain(r._h)
        return 0
    except BaseException as e:  # nothing may unwind through C: re-raised from backward()
        if st.get("function_error") is None:
            st["function_error"] = e
        for j in range(n_in):
            if gins[j] != ffi.NULL:
                lib.tfc_tensor_release(gins[j])
                gins[j] = ffi.NULL
        return lib.TFC_ERR_CANCELLED
    finally:
        c._saved = None
        st["enabled"] = prev


def _fn_destroy(ctx):
    _fn_live.pop(id(ffi.from_handle(ctx)), None)


_fn_forward_cb = ffi.callback("tfc_custom_forward_fn", _fn_forward)
_fn_backward_cb = ffi.callback("tfc_custom_backward_fn", _fn_backward)
_fn_destroy_cb = ffi.callback("tfc_custom_destroy_fn", _fn_destroy)
_fn_defs = {}  # class -> (tfc_custom_op_def, its name buffer)


def _fn_def(cls):
    d = _fn_defs.get(cls)
    if d is None:
        name = ffi.new("char[]", (cls.__name__ + "Backward").encode("utf-8", "replace")[:63])
        op = ffi.new("tfc_custom_op_def *")
        op.struct_size = ffi.sizeof("tfc_custom_op_def")
        op.name = name
        op.forward = _fn_forward_cb
        op.backward = _fn_backward_cb
        op.destroy = _fn_destroy_cb
        d = _fn_defs[cls] = (op, name)
    return d[0]


class Function:
    """A differentiable op written in Python (torch.autograd.Function):

        class Square(tfcore.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x
            @staticmethod
            def backward(ctx, gy):
                x, = ctx.saved_tensors
                return 2 * x * gy
        y = Square.apply(x)

    forward runs under no_grad and returns a Tensor or a tuple of Tensors;
    backward gets one gradient per output (zeros where an output got none,
    unless ctx.set_materialize_grads(False)) and returns one gradient (or
    None) per forward argument. Built on tfc_custom_op: one node named
    '<Class>Backward', saved tensors version-checked. An exception raised
    in backward is re-raised by Tensor.backward(). backward is not
    differentiable again (no double backward through a Function)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must define backward(ctx, *grad_outputs)")

    def __init__(self, *args, **kwargs):
        raise TypeError("tfcore.autograd.Function is not instantiated: call %s.apply(...)" % type(self).__name__)

    @classmethod
    def apply(cls, *args):
        from .tensor import Tensor, _wrap
        if cls.forward is Function.forward or cls.backward is Function.backward:
            raise NotImplementedError("%s must define both forward and backward as static methods" % cls.__name__)
        ctx = FunctionCtx()
        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        recording = is_grad_enabled()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and recording and a.requires_grad for a in args)
        with no_grad():
            res = cls.forward(ctx, *args)
        single = not isinstance(res, tuple)
        outs = (res,) if single else res
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise TypeError("%s.forward returned a %s as output %d; outputs must be Tensors"
                                % (cls.__name__, type(o).__name__, i))
        if not outs or not tensor_pos:
            return res  # nothing to differentiate with respect to
        in_meta = [(args[i].shape, args[i].dtype) for i in tensor_pos]
        rec = _FnRecord(cls, ctx, outs, len(args), tensor_pos, in_meta)
        h = ffi.new_handle(rec)
        _fn_live[id(rec)] = h  # from here the library destroys it exactly once
        ins = ffi.new("const tfc_tensor *[]", [args[i]._h for i in tensor_pos])
        c_outs = ffi.new("tfc_tensor *[]", len(outs))
        g = graph_for(*[args[i] for i in tensor_pos])
        status = lib.tfc_custom_op(g, _fn_def(cls), h, ins, len(tensor_pos), c_outs, len(outs))
        if status != 0 and rec.error is not None:
            raise rec.error
        check(status)
        # the node keeps its own aliases of what was saved (version-checked); the ctx need not
        ctx._n_saved, ctx._to_save = len(ctx._to_save), ()
        non_diff = {id(t) for t in ctx._non_diff}
        results = []
        for i, o in enumerate(outs):
            r = _wrap(c_outs[i])
            if id(o) in non_diff or not o.dtype.is_floating_point:
                r = r.detach()
            results.append(r)
        return results[0] if single else tuple(results)


def _function_error():
    """The first exception a Function's backward raised in this thread's last backward, if any (taken)."""
    st = _state()
    err = st.get("function_error")
    st["function_error"] = None
    return err


# ---- gradcheck ------------------------------------------------------------------------


class GradcheckError(RuntimeError):
    """gradcheck found an analytic gradient that disagrees with finite differences."""


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Check the gradients of fn(*inputs) against central finite differences
    (torch.autograd.gradcheck) through tfc_gradcheck. inputs: a Tensor or a
    tuple (non-Tensor entries are passed through); the Tensors that require
    grad must be contiguous CPU tensors, float64 for a meaningful check.
    fn returns a Tensor or a tuple of Tensors; an output with several
    elements is checked through a fixed random projection sum(out * v) (so
    one backward covers all of it, not one per element). An element passes
    when |analytic - numerical| <= atol + rtol * |numerical| (torch's rule).
    Returns True, or raises GradcheckError (returns False when
    raise_exception=False). An exception fn raises propagates as itself.
    The inputs keep their values; their .grad holds the analytic
    gradient afterwards."""
    import numpy as np
    from .tensor import Tensor, tensor
    if not callable(fn):
        raise TypeError("gradcheck: fn must be callable, got %s" % type(fn).__name__)
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    tensors = [a for a in inputs if isinstance(a, Tensor)]
    if not any(t.requires_grad for t in tensors):
        raise ValueError("gradcheck: no input requires grad (set requires_grad=True on at least one Tensor)")
    weights = {}
    failure = []

    def objective():
        res = fn(*inputs)
        outs = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        total = None
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise TypeError("gradcheck: fn returned a %s as output %d; expected Tensors" % (type(o).__name__, k))
            if not o.dtype.is_floating_point:
                continue
            if o.numel() != 1:
                if k not in weights:
                    rng = np.random.default_rng(1234 + k)
                    weights[k] = tensor(rng.standard_normal(o.shape), dtype=o.dtype).to(o.device)
                o = o * weights[k]
            term = o.sum()
            total = term if total is None else total + term
        if total is None:
            raise ValueError("gradcheck: fn returned no floating-point Tensor")
        return total

    def call(g, ins, n, out, ctx):
        st = _state()
        prev = (st["graph"], st["enabled"])
        try:
            st["graph"], st["enabled"] = g, bool(lib.tfc_graph_is_grad_enabled(g))
            out[0] = lib.tfc_tensor_retain(objective()._h)
            return 0
        except BaseException as e:  # nothing may unwind through C
            if not failure:
                failure.append(e)
            return lib.TFC_ERR_CANCELLED
        finally:
            st["graph"], st["enabled"] = prev

    cb = ffi.callback("tfc_gradcheck_fn", call)
    arr = ffi.new("tfc_tensor *[]", [t._h for t in tensors])
    worst = ffi.new("double *")
    wi, wk = ffi.new("int32_t *"), ffi.new("int64_t *")
    _state()["function_error"] = None
    status = lib.tfc_gradcheck(cb, arr, len(tensors), ffi.NULL, float(eps), worst, wi, wk)
    if status != 0 and failure:
        raise failure[0]
    if status != 0:
        err = _function_error()  # a Function's backward inside fn
        if err is not None:
            raise err
    check(status)
    # torch's rule per element: the numerical derivative again, the analytic one from .grad
    with no_grad():
        for i, x in enumerate(tensors):
            if not x.requires_grad:
                continue
            g = x.grad
            ana = np.zeros(x.numel()) if g is None else np.array(g.numpy(), dtype=np.float64).reshape(-1)
            flat = x.numpy().reshape(-1)  # x is contiguous (tfc_gradcheck checked): a view
            for k in range(flat.size):
                orig = flat[k]
                flat[k] = orig + eps
                fp = objective().item()
                flat[k] = orig - eps
                fm = objective().item()
                flat[k] = orig
                num = (fp - fm) / (2 * eps)
                if not abs(ana[k] - num) <= atol + rtol * abs(num):
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        "Jacobian mismatch for input %d, element %d:\nnumerical: %r\nanalytical: %r\n"
                        "(|analytical - numerical| = %.3g > atol + rtol * |numerical| = %.3g; "
                        "tfc_gradcheck's worst relative error %.3g at input %d, element %d)"
                        % (i, k, num, float(ana[k]), abs(ana[k] - num), atol + rtol * abs(num), worst[0],
                           wi[0], wk[0]))
    return True


def backward(tensor, grad=None, retain_graph=None, create_graph=False):
    """d(tensor)/d(leaves) accumulated into the leaves' .grad; see Tensor.backward."""
    if not lib.tfc_tensor_requires_grad(tensor._h):
        raise RuntimeError("tfcore: backward: the tensor does not require grad and was not produced "
                           "by a recorded op (set requires_grad=True on a leaf, outside no_grad)")
    if retain_graph is None:
        retain_graph = create_graph
    g = graph()
    seed = ffi.NULL if grad is None else grad._h
    _state()["function_error"] = None  # only an exception of this pass is re-raised
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
    _state()["function_error"] = None
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
