"""In-place ops and .data against PyTorch 1.13: add_ sub_ mul_ div_ clamp_
zero_ fill_ copy_ and += -= *= /= write the tensor's own memory (the same
object, the same address, views writing through to their base), bump the
version counter as torch does, follow torch's leaf rule, make a saved tensor
modified since fail backward, and manual SGD with `-=` under no_grad moves
an MLP's parameters exactly as torch's does."""
import numpy as np
import pytest
import torch

import tfcore


def _both(v, dtype="float64", requires_grad=False):
    return (tfcore.tensor(v, dtype=dtype, requires_grad=requires_grad),
            torch.tensor(v, dtype=torch.float64 if dtype == "float64" else torch.float32,
                         requires_grad=requires_grad))


V = [[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]]
W = [2.0, -4.0, 0.5]

OPS = {
    "add_t": lambda t, o: t.add_(o),
    "add_alpha": lambda t, o: t.add_(o, alpha=-2.5),
    "add_s": lambda t, o: t.add_(1.25),
    "sub_t": lambda t, o: t.sub_(o),
    "sub_alpha": lambda t, o: t.sub_(o, alpha=0.5),
    "mul_t": lambda t, o: t.mul_(o),
    "mul_s": lambda t, o: t.mul_(-3.0),
    "div_t": lambda t, o: t.div_(o),
    "div_s": lambda t, o: t.div_(7.0),
    "clamp_both": lambda t, o: t.clamp_(-1.0, 1.5),
    "clamp_min": lambda t, o: t.clamp_(min=0.0),
    "clamp_max": lambda t, o: t.clamp_(max=0.75),
    "zero_": lambda t, o: t.zero_(),
    "fill_": lambda t, o: t.fill_(0.125),
    "copy_bcast": lambda t, o: t.copy_(o),
}


def _iop(name):
    def run(t, o):
        if name == "iadd":
            t += o
        elif name == "isub":
            t -= o
        elif name == "imul":
            t *= o
        elif name == "idiv":
            t /= o
        elif name == "iadd_s":
            t += 2.0
        elif name == "idiv_s":
            t /= 4.0
        return t
    return run


for _n in ("iadd", "isub", "imul", "idiv", "iadd_s", "idiv_s"):
    OPS[_n] = _iop(_n)


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_inplace_matches_torch(name, dtype):
    (t, tt), (o, to) = _both(V, dtype), _both(W, dtype)
    ptr, v0, tv0 = t.data_ptr(), t._version, tt._version
    r = OPS[name](t, o)
    tr = OPS[name](tt, to)
    assert r is t and tr is tt
    assert t.data_ptr() == ptr
    np.testing.assert_array_equal(t.numpy(), tt.numpy())
    assert t._version - v0 == tt._version - tv0 == 1


def test_views_write_through_to_their_base():
    for make in (lambda b: b[1], lambda b: b.transpose(0, 1), lambda b: b.narrow(1, 1, 2),
                 lambda b: b.view(3, 2)):
        (b, tb) = _both(V)
        v, tv = make(b), make(tb)
        v.mul_(10.0)
        tv.mul_(10.0)
        v += 1.0
        tv += 1.0
        np.testing.assert_array_equal(b.numpy(), tb.numpy())
        assert b._version == tb._version == 2  # one counter per storage, as in torch


def test_leaf_requiring_grad_in_place_is_torchs_error():
    for op in (lambda p, m: p.add_(1.0), lambda p, m: p.zero_(), lambda p, m: p.copy_(m.zeros(3)),
               lambda p, m: p.clamp_(0.0, 1.0), lambda p, m: p.mul_(2.0), lambda p, m: p.fill_(1.0)):
        p = tfcore.tensor(W, requires_grad=True)
        tp = torch.tensor(W, requires_grad=True)
        with pytest.raises(RuntimeError) as ours:
            op(p, tfcore)
        with pytest.raises(RuntimeError) as theirs:
            op(tp, torch)
        assert str(theirs.value) in str(ours.value)
        assert p.tolist() == W
    p = tfcore.tensor(W, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        p -= 1.0
    assert p.tolist() == W


def test_in_place_on_graph_tensors_is_a_clear_error():
    p = tfcore.tensor(W, requires_grad=True)
    y = p * 2.0
    with pytest.raises(RuntimeError, match="not supported .*y = y \\+ x"):
        y += 1.0
    buf = tfcore.zeros(3)
    with pytest.raises(RuntimeError, match="part of the autograd graph"):
        buf.add_(p)
    np.testing.assert_array_equal(buf.numpy(), [0, 0, 0])
    # under no_grad both are plain writes
    with tfcore.no_grad():
        y += 1.0
        buf.add_(p)
    np.testing.assert_array_equal(y.numpy(), [5.0, -7.0, 2.0])
    np.testing.assert_array_equal(buf.numpy(), W)


def test_saved_tensor_modified_in_place_fails_backward():
    (w, tw), (a, ta) = _both(W, requires_grad=True), _both([1.0, 2.0, 3.0])
    y, ty = (a * w).sum(), (ta * tw).sum()
    a.add_(1.0)
    ta.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.backward()
    with pytest.raises(ValueError, match="modified in place"):
        y.backward()
    assert w.grad is None


def test_data_shares_memory_and_is_detached():
    p, tp = _both(W, requires_grad=True)
    d, td = p.data, tp.data
    assert not d.requires_grad and d.is_leaf and not td.requires_grad
    assert d.data_ptr() == p.data_ptr()
    d.mul_(2.0)  # allowed under grad mode: .data does not require grad
    td.mul_(2.0)
    np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())
    assert p._version == tp._version == 0  # invisible to the version check, as in torch
    with pytest.raises(AttributeError):
        p.data = tfcore.zeros(3)
    # a view of .data writes through too; the memory outlives p
    p.data[1].fill_(7.0)
    tp.data[1].fill_(7.0)
    keep = p.data
    np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())
    del p
    import gc
    gc.collect()
    np.testing.assert_array_equal(keep.numpy(), tp.detach().numpy())


def test_writes_through_data_do_not_fail_backward_like_torch():
    (w, tw), (a, ta) = _both(W, requires_grad=True), _both([1.0, 2.0, 3.0], requires_grad=True)
    y, ty = (a * w).sum(), (ta * tw).sum()
    a.data.add_(10.0)  # torch's backward then uses the new values
    ta.data.add_(10.0)
    y.backward()
    ty.backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    # manual SGD through .data, outside no_grad
    w.data.sub_(0.5 * w.grad)
    tw.data.sub_(0.5 * tw.grad)
    np.testing.assert_array_equal(w.detach().numpy(), tw.detach().numpy())


def test_grad_zero_and_bad_operands():
    p = tfcore.tensor(W, requires_grad=True)
    (p * p).sum().backward()
    with tfcore.no_grad():
        p.grad.zero_()
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    t = tfcore.tensor(V)
    for bad in (lambda: t.add_(None), lambda: t.mul_("x"), lambda: t.copy_(None), lambda: t.clamp_("a")):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError):
        t += None
    with pytest.raises(ValueError):
        t.clamp_()
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        tfcore.zeros(3).add_(tfcore.ones(2, 3))
    with pytest.raises(RuntimeError):
        torch.zeros(3).add_(torch.ones(2, 3))
    np.testing.assert_array_equal(t.numpy(), V)


def test_clamp_keeps_nan_like_torch():
    t, tt = _both([float("nan"), -3.0, 3.0])
    t.clamp_(-1.0, 1.0)
    tt.clamp_(-1.0, 1.0)
    np.testing.assert_array_equal(t.numpy(), tt.numpy())


def _mlp_params(r):
    shapes = [(4, 8), (8,), (8, 3), (3,)]
    return [r.uniform(-0.5, 0.5, size=s) for s in shapes]


def test_manual_sgd_with_minus_equals_under_no_grad_matches_torch():
    r = np.random.RandomState(0)
    init = _mlp_params(r)
    xs = [r.uniform(-1, 1, size=(5, 4)) for _ in range(4)]
    ys = [r.randint(0, 3, size=5) for _ in range(4)]
    ps = [tfcore.tensor(v, dtype="float64", requires_grad=True) for v in init]
    tps = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in init]
    lr = 0.3
    for step in range(4):
        x, tx = tfcore.tensor(xs[step], dtype="float64"), torch.tensor(xs[step], dtype=torch.float64)
        y, ty = tfcore.tensor(ys[step]), torch.tensor(ys[step])
        w1, b1, w2, b2 = ps
        loss = tfcore.cross_entropy((x @ w1 + b1).tanh() @ w2 + b2, y)
        tw1, tb1, tw2, tb2 = tps
        tloss = torch.nn.functional.cross_entropy((tx @ tw1 + tb1).tanh() @ tw2 + tb2, ty)
        assert abs(loss.item() - tloss.item()) < 1e-12
        loss.backward()
        tloss.backward()
        with tfcore.no_grad():
            for p in ps:
                p -= lr * p.grad
                p.grad.zero_()
        with torch.no_grad():
            for p in tps:
                p -= lr * p.grad
                p.grad.zero_()
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-13)
            assert p.requires_grad and p.is_leaf
    # the parameters did move
    assert not np.allclose(ps[0].detach().numpy(), init[0])


def test_copy_from_data_alias_handles_overlap():
    v = np.arange(9.0).reshape(3, 3)
    p = tfcore.tensor(v, dtype="float64")
    p.copy_(p.data.T)  # the same memory through another storage: staged, not read half-written
    np.testing.assert_array_equal(p.numpy(), v.T)
    a = np.arange(6.0)
    x, y = tfcore.from_numpy(a), tfcore.from_numpy(a)  # two wraps of one buffer
    x[1:].copy_(y[:-1])
    np.testing.assert_array_equal(a, [0, 0, 1, 2, 3, 4])
