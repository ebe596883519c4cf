"""tfcore.autograd.Function (on tfc_custom_op), tfcore.autograd.gradcheck
(over tfc_gradcheck) and tfcore.utils.checkpoint, against PyTorch 1.13:
values and gradients in f64 equal torch.autograd.Function's and torch's
checkpoint's; needs_input_grad, saved tensors modified in place, exceptions
raised inside forward/backward/gradcheck's fn (the original exception, never
a crash), wrong gradients from backward, and the op's ctx freed once."""
import os
import gc
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import tfcore
from tfcore.autograd import Function


def _pair(seed, *shapes, grad=True):
    r = np.random.RandomState(seed)
    vals = [r.uniform(-1, 1, size=s) for s in shapes]
    ours = [tfcore.tensor(v, dtype="float64", requires_grad=grad) for v in vals]
    ref = [torch.tensor(v, dtype=torch.float64, requires_grad=grad) for v in vals]
    return ours, ref


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy() if torch.is_tensor(b) else b, rtol=tol, atol=tol)


# One formula, written twice: (p, q) = (a * b * s, exp(a + b)), saving a, b and q.
def _forward(ctx, a, b, s):
    p, q = a * b * s, (a + b).exp()
    ctx.save_for_backward(a, b, q)
    ctx.s = s
    ctx.needs_in_forward = tuple(ctx.needs_input_grad)
    return p, q


def _backward(ctx, gp, gq):
    a, b, q = ctx.saved_tensors
    ctx.needs_in_backward = tuple(ctx.needs_input_grad)
    ga = gp * b * ctx.s + gq * q if ctx.needs_input_grad[0] else None
    gb = gp * a * ctx.s + gq * q if ctx.needs_input_grad[1] else None
    return ga, gb, None


class MulExp(Function):
    forward = staticmethod(_forward)
    backward = staticmethod(_backward)


class TorchMulExp(torch.autograd.Function):
    forward = staticmethod(_forward)
    backward = staticmethod(_backward)


@pytest.mark.parametrize("b_grad", [True, False])
def test_function_matches_torch_function(b_grad):
    (a, b, wp, wq), (ta, tb, twp, twq) = _pair(0, (3, 4), (3, 4), (3, 4), (3, 4), grad=False)
    for t in (a, ta):
        t.requires_grad = True
    if b_grad:
        b.requires_grad = True
        tb.requires_grad = True
    p, q = MulExp.apply(a, b, 0.5)
    tp, tq = TorchMulExp.apply(ta, tb, 0.5)
    assert p.requires_grad and q.requires_grad and not p.is_leaf
    _close(p.numpy(), tp)
    _close(q.numpy(), tq)
    ((p * wp).sum() + (q * wq).sum()).backward()
    ((tp * twp).sum() + (tq * twq).sum()).backward()
    _close(a.grad.numpy(), ta.grad)
    if b_grad:
        _close(b.grad.numpy(), tb.grad)
    else:
        assert b.grad is None and tb.grad is None


def test_needs_input_grad_matches_torch():
    got = {}
    for lib_ in ("tfcore", "torch"):
        (a, b), (ta, tb) = _pair(1, (2,), (2,), grad=False)
        x, y = (a, b) if lib_ == "tfcore" else (ta, tb)
        x.requires_grad = True
        cls = MulExp if lib_ == "tfcore" else TorchMulExp
        captured = {}

        class Spy(cls):
            @staticmethod
            def forward(ctx, a, b, s):
                out = _forward(ctx, a, b, s)
                captured["fwd"] = ctx.needs_in_forward
                return out

            @staticmethod
            def backward(ctx, gp, gq):
                out = _backward(ctx, gp, gq)
                captured["bwd"] = ctx.needs_in_backward
                return out
        p, q = Spy.apply(x, y, 2.0)
        (p.sum() + q.sum()).backward()
        got[lib_] = captured
    assert got["tfcore"] == got["torch"] == {"fwd": (True, False, False), "bwd": (True, False, False)}


def test_unused_output_gets_zeros_or_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(None if g2 is None else g2.numpy().copy())
            return g1 * 2.0, None
    for materialize in (True, False):
        (x,), _ = _pair(2, (3,))
        y1, _ = Two.apply(x, materialize)
        y1.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    assert seen[0].tolist() == [0.0, 0.0, 0.0] and seen[1] is None


def test_mark_non_differentiable_and_integer_outputs():
    class ArgAndVal(Function):
        @staticmethod
        def forward(ctx, x):
            m = x * 1.0
            ctx.mark_non_differentiable(m)
            return x * 2.0, m, x.argmax()

        @staticmethod
        def backward(ctx, g, gm, gi):
            return g * 2.0
    (x,), _ = _pair(3, (4,))
    y, m, i = ArgAndVal.apply(x)
    assert y.requires_grad and not m.requires_grad and not i.requires_grad
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 4)


def test_broadcastable_gradient_is_summed_like_torch():
    def fwd(ctx, x):
        return x * 1.0

    def bwd_rows(ctx, g):
        return g.sum(0, keepdim=True) * 0 + g  # [2,3]: same shape

    class Bc(Function):
        forward = staticmethod(fwd)

        @staticmethod
        def backward(ctx, g):
            return tfcore.ones(2, 3, dtype="float64") * g.sum()  # [2,3] for a [3] input

    class TBc(torch.autograd.Function):
        forward = staticmethod(fwd)

        @staticmethod
        def backward(ctx, g):
            return torch.ones(2, 3, dtype=torch.float64) * g.sum()
    (x,), (tx,) = _pair(4, (3,))
    (Bc.apply(x) * 2.0).sum().backward()
    (TBc.apply(tx) * 2.0).sum().backward()
    _close(x.grad.numpy(), tx.grad)
    del bwd_rows


def test_wrong_gradients_raise_runtime_error():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return tfcore.ones(5, dtype="float64")

    class NotTensor(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return 3.0
    (x, y), _ = _pair(5, (3,), (3,))
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooFew.apply(x, y).sum().backward()
    with pytest.raises(RuntimeError, match=r"BadShapeBackward returned an invalid gradient at index 0 - got \[5\]"):
        BadShape.apply(x).sum().backward()
    with pytest.raises(TypeError, match="NotTensorBackward returned a float"):
        NotTensor.apply(x).sum().backward()
    assert x.grad is None
    # the thread's graph still works
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 3)


class Boom(Exception):
    pass


def test_exceptions_propagate_as_themselves():
    class FwdFails(Function):
        @staticmethod
        def forward(ctx, x):
            raise Boom("in forward")

        @staticmethod
        def backward(ctx, g):
            return g

    class BwdFails(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            raise Boom("in backward")
    (x,), _ = _pair(6, (3,))
    n0 = tfcore.autograd.num_nodes()
    with pytest.raises(Boom, match="in forward"):
        FwdFails.apply(x)
    assert tfcore.autograd.num_nodes() == n0
    with pytest.raises(Boom, match="in backward"):
        (BwdFails.apply(x) * 3.0).sum().backward()
    assert x.grad is None
    tfcore.autograd.clear_graph()
    with pytest.raises(KeyboardInterrupt):  # not only Exception subclasses

        class Interrupt(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                raise KeyboardInterrupt
        Interrupt.apply(x).sum().backward()
    tfcore.autograd.clear_graph()
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0] * 3)


def test_saved_tensor_modified_in_place_fails_backward_like_torch():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x, c):
            ctx.save_for_backward(x, c)
            return x * x * c

        @staticmethod
        def backward(ctx, g):
            x, c = ctx.saved_tensors
            return 2.0 * x * c * g, None

    class TSq(torch.autograd.Function):
        forward = Sq.forward
        backward = Sq.backward
    (x, c), (tx, tc) = _pair(7, (3,), (3,), grad=False)
    x.requires_grad = True
    tx.requires_grad = True
    y, ty = Sq.apply(x, c), TSq.apply(tx, tc)
    c.add_(1.0)
    tc.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()
    with pytest.raises(ValueError, match="saved by SqBackward for backward was modified in place"):
        y.sum().backward()
    assert x.grad is None


def test_saved_tensors_only_in_backward_and_bad_save():
    class S(Function):
        @staticmethod
        def forward(ctx, x):
            with pytest.raises(RuntimeError, match="inside backward only"):
                ctx.saved_tensors
            with pytest.raises(TypeError, match="argument 1 is int"):
                ctx.save_for_backward(x, 3)
            with pytest.raises(ValueError, match="at most 8"):
                ctx.save_for_backward(*([x] * 9))
            ctx.save_for_backward(None, x)
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            none, x = ctx.saved_tensors
            assert none is None
            return g * x
    (x,), _ = _pair(8, (2,))
    S.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), x.detach().numpy())
    with pytest.raises(TypeError, match="not instantiated"):
        S()

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x
    with pytest.raises(NotImplementedError):
        NoBackward.apply(x)

    class ReturnsList(Function):
        @staticmethod
        def forward(ctx, x):
            return [x]

        @staticmethod
        def backward(ctx, g):
            return g
    with pytest.raises(TypeError, match="outputs must be Tensors"):
        ReturnsList.apply(x)


def test_ctx_freed_once_when_node_goes():
    from tfcore import autograd as ag
    tfcore.autograd.clear_graph()
    gc.collect()
    n0 = len(ag._fn_live)
    (x,), _ = _pair(9, (3,))
    y = MulExp.apply(x, x, 1.0)
    assert len(ag._fn_live) == n0 + 1
    y[0].sum().backward()  # frees this pass's saved tensors; y still holds the node
    assert len(ag._fn_live) == n0 + 1
    del y
    gc.collect()
    # Only the thread's graph refers to the node now; its next backward drops it.
    (x * 2.0).sum().backward()
    assert len(ag._fn_live) == n0
    with tfcore.no_grad():  # nothing recorded: freed at once
        MulExp.apply(x, x, 1.0)
    assert len(ag._fn_live) == n0


def test_no_grad_and_no_tensor_inputs():
    (x,), _ = _pair(10, (3,))
    with tfcore.no_grad():
        p, q = MulExp.apply(x, x, 1.0)
    assert not p.requires_grad and not q.requires_grad

    class Const(Function):
        @staticmethod
        def forward(ctx, n):
            return tfcore.ones(n)

        @staticmethod
        def backward(ctx, g):
            return None
    assert Const.apply(3).tolist() == [1.0, 1.0, 1.0]


# ---- gradcheck ------------------------------------------------------------------


class WrongGrad(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2.1 * x * g  # should be 2


def test_gradcheck_passes_on_correct_functions_like_torch():
    (a, b), (ta, tb) = _pair(11, (3, 2), (3, 2))
    assert tfcore.autograd.gradcheck(lambda a, b: MulExp.apply(a, b, 0.5), (a, b))
    assert torch.autograd.gradcheck(lambda a, b: TorchMulExp.apply(a, b, 0.5), (ta, tb))
    assert tfcore.autograd.gradcheck(lambda a: (a @ a.T).tanh().sum(), a)
    assert tfcore.autograd.gradcheck(lambda a, k: a.softmax(-1) * k, (a, 3.0))


def test_gradcheck_reports_a_wrong_backward():
    (x,), (tx,) = _pair(12, (4,))
    with pytest.raises(tfcore.autograd.GradcheckError, match="Jacobian mismatch for input 0"):
        tfcore.autograd.gradcheck(WrongGrad.apply, (x,))
    assert tfcore.autograd.gradcheck(WrongGrad.apply, (x,), raise_exception=False) is False
    assert issubclass(tfcore.autograd.GradcheckError, RuntimeError)

    class TWrong(torch.autograd.Function):
        forward = WrongGrad.forward
        backward = WrongGrad.backward
    assert torch.autograd.gradcheck(TWrong.apply, (tx,), raise_exception=False) is False
    np.testing.assert_array_equal(x.detach().numpy(), tx.detach().numpy())  # values restored


def test_gradcheck_tolerances():
    (x,), _ = _pair(13, (3,))
    # 2.1 vs 2: relative error ~5%: within rtol=0.1, not within the default 1e-3
    assert tfcore.autograd.gradcheck(WrongGrad.apply, (x,), rtol=0.1, raise_exception=False)
    assert not tfcore.autograd.gradcheck(WrongGrad.apply, (x,), raise_exception=False)


def test_gradcheck_exception_in_fn_propagates():
    (x,), _ = _pair(14, (3,))
    calls = []

    def fn(x):
        calls.append(1)
        if len(calls) == 3:  # a perturbed evaluation
            raise Boom("third call")
        return (x * x).sum()
    with pytest.raises(Boom, match="third call"):
        tfcore.autograd.gradcheck(fn, (x,))
    with pytest.raises(Boom):
        tfcore.autograd.gradcheck(lambda x: (_ for _ in ()).throw(Boom("first")), (x,))
    with pytest.raises(Boom, match="in backward"):
        class B(Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                raise Boom("in backward")
        tfcore.autograd.gradcheck(B.apply, (x,))
    with pytest.raises(TypeError, match="returned a str"):
        tfcore.autograd.gradcheck(lambda x: "no", (x,))
    with pytest.raises(TypeError, match="callable"):
        tfcore.autograd.gradcheck(None, (x,))
    with pytest.raises(ValueError, match="no input requires grad"):
        tfcore.autograd.gradcheck(lambda x: x.sum(), (x.detach(),))
    np.testing.assert_array_equal(x.detach().numpy(), _pair(14, (3,))[0][0].detach().numpy())


def test_gradcheck_exception_does_not_crash_the_interpreter():
    code = ("import tfcore\n"
            "x = tfcore.tensor([1.0, 2.0], dtype='float64', requires_grad=True)\n"
            "def f(x):\n    raise ZeroDivisionError('inside')\n"
            "try:\n    tfcore.autograd.gradcheck(f, (x,))\nexcept ZeroDivisionError:\n    print('raised')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert r.returncode == 0 and r.stdout.strip() == "raised", r.stderr


# ---- tfcore.utils.checkpoint ----------------------------------------------------


def test_utils_checkpoint_matches_torch_and_plain():
    from tfcore.utils.checkpoint import checkpoint
    (x, w), (tx, tw) = _pair(15, (5, 4), (4, 4))

    def f(x, scale):
        return (x @ w).tanh() * x * scale
    for use_reentrant in (True, False, None):
        x.grad = None
        w.grad = None
        y = checkpoint(f, x, 0.5, use_reentrant=use_reentrant)
        y.sum().backward()
        # plain graph, bitwise
        gx, gw = x.grad.numpy().copy(), w.grad.numpy().copy()
        x.grad = None
        w.grad = None
        f(x, 0.5).sum().backward()
        assert np.array_equal(gx, x.grad.numpy()) and np.array_equal(gw, w.grad.numpy())
    ty = torch.utils.checkpoint.checkpoint(lambda x, s: (x @ tw).tanh() * x * s, tx, 0.5, use_reentrant=False)
    ty.sum().backward()
    _close(gx, tx.grad)
    _close(gw, tw.grad)
    _close(y.detach().numpy(), ty)


def test_utils_checkpoint_tuple_outputs_and_callable_module():
    (x, z), (tx, tz) = _pair(16, (3,), (3,))
    a, b = tfcore.utils.checkpoint(lambda x, z: (x * z, (x + z).exp()), x, z)
    (a.sum() + b.sum()).backward()
    ta, tb = torch.utils.checkpoint.checkpoint(lambda x, z: (x * z, (x + z).exp()), tx, tz, use_reentrant=False)
    (ta.sum() + tb.sum()).backward()
    _close(x.grad.numpy(), tx.grad)
    _close(z.grad.numpy(), tz.grad)
    one = tfcore.utils.checkpoint.checkpoint(lambda x: (x * 2.0,), x)
    assert isinstance(one, tuple) and len(one) == 1
    with pytest.raises(TypeError, match="callable"):
        tfcore.utils.checkpoint(None, x)
    with pytest.raises(Boom):
        tfcore.utils.checkpoint(lambda x: (_ for _ in ()).throw(Boom("f")), x)


def test_raw_gradcheck_callback_that_raises_is_an_error_not_a_crash():
    # cffi turns an exception in a callback into a return of 0 (TFC_OK) with *out unset:
    # tfc_gradcheck must report that instead of reading the missing output
    code = ("import tfcore\nfrom tfcore import ffi, lib\n"
            "@ffi.callback('tfc_gradcheck_fn')\n"
            "def f(g, ins, n, out, ctx):\n    raise ValueError('swallowed by cffi')\n"
            "x = tfcore.tensor([1.0, 2.0], dtype='float64', requires_grad=True)\n"
            "err = ffi.new('double *')\n"
            "s = lib.tfc_gradcheck(f, ffi.new('tfc_tensor *[]', [x._h]), 1, ffi.NULL, 1e-6, err, ffi.NULL, ffi.NULL)\n"
            "print(s == lib.TFC_ERR_INVALID_ARG, ffi.string(lib.tfc_last_error()).decode())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("True tfc_gradcheck: f returned TFC_OK but no output"), r.stdout


def test_function_with_retain_graph_and_inside_a_checkpoint():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2.0 * x * g

    class TSq(torch.autograd.Function):
        forward = Sq.forward
        backward = Sq.backward
    (x, w), (tx, tw) = _pair(17, (4,), (4,))
    y, ty = Sq.apply(x).sum(), TSq.apply(tx).sum()
    for _ in range(2):  # the saved tensors survive retain_graph
        y.backward(retain_graph=True)
        ty.backward(retain_graph=True)
    _close(x.grad.numpy(), tx.grad)
    x.grad, tx.grad = None, None
    # replayed by a checkpoint: the Function records on the replay's graph
    tfcore.utils.checkpoint(lambda a: Sq.apply(a * w), x).sum().backward()
    torch.utils.checkpoint.checkpoint(lambda a: TSq.apply(a * tw), tx, use_reentrant=False).sum().backward()
    _close(x.grad.numpy(), tx.grad)
    _close(w.grad.numpy(), tw.grad)

    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            raise Boom("in the replay")
    with pytest.raises(Boom, match="in the replay"):
        tfcore.utils.checkpoint(lambda a: Bad.apply(a), x).sum().backward()
