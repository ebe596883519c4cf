"""The autograd engine against torch 1.13 in float64: double backward of
every differentiable op (the parity tables of test_parity_ops, run through
torch.autograd.grad(create_graph=True) and tfcore.autograd.grad), a third
derivative, Hessian-vector products, a gradient-penalty training run,
fused ops refusing create_graph, per-loss graphs (backward of one loss
keeps the others; freed nodes name retain_graph), a flat training loop,
and detect_anomaly."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import TorchNS, rel_err
from test_ops_more import CASES as MORE
from test_parity_ops import ELEMENTWISE, LAYERS, LINALG, REDUCTIONS, SELECT, SOFTMAX, VIEWS

TOL = 1e-10
FUSED = ("linear_cross_entropy", "attention")


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _inputs(arrays):
    tf_in, th_in = [], []
    for a in arrays:
        if np.issubdtype(a.dtype, np.floating):
            tf_in.append(tfcore.tensor(a, dtype="float64", requires_grad=True))
            th_in.append(torch.tensor(a, dtype=torch.float64, requires_grad=True))
        else:
            tf_in.append(tfcore.tensor(a))
            th_in.append(torch.tensor(a))
    return tf_in, th_in


def _close(got, ref, what):
    got = np.zeros(ref.shape) if got is None else got
    err = rel_err(got, ref)
    assert err <= TOL, "%s: error %.3g" % (what, err)


def _objective(outs, seeds):
    return sum((o * w).sum() for o, w in zip(outs, seeds))


def double_backward(fn, arrays, seed=0):
    """g = d<w, fn(x)>/dx with create_graph, then H = d<v, g>/dx, both
    frameworks, compared (a gradient that does not depend on x is zero)."""
    rng = np.random.default_rng(seed)
    tf_in, th_in = _inputs(arrays)
    tf_out = [o for o in _flat(fn(tfcore, *tf_in)) if o.dtype.is_floating_point]
    th_out = [o for o in _flat(fn(TorchNS, *th_in)) if o.dtype.is_floating_point]
    ws = [rng.standard_normal(tuple(r.shape)) for r in th_out]
    ftf = [t for t, r in zip(tf_in, th_in) if r.requires_grad]
    fth = [r for r in th_in if r.requires_grad]
    l_tf = _objective(tf_out, [tfcore.tensor(w, dtype="float64") for w in ws])
    l_th = _objective(th_out, [torch.tensor(w, dtype=torch.float64) for w in ws])
    g_tf = tfcore.autograd.grad(l_tf, ftf, create_graph=True, allow_unused=True)
    g_th = torch.autograd.grad(l_th, fth, create_graph=True, allow_unused=True)
    for i, (a, b) in enumerate(zip(g_tf, g_th)):
        _close(None if a is None else a.numpy(), b.detach().numpy(), "first gradient %d" % i)
    vs = [rng.standard_normal(tuple(r.shape)) for r in fth]
    pairs_th = [(g, torch.tensor(v)) for g, v in zip(g_th, vs) if g is not None and g.requires_grad]
    pairs_tf = [(g, tfcore.tensor(v, dtype="float64")) for g, v in zip(g_tf, vs)
                if g is not None and g.requires_grad]
    h_th = [torch.zeros_like(r) for r in fth]
    if pairs_th:
        h = torch.autograd.grad(sum((g * v).sum() for g, v in pairs_th), fth, allow_unused=True)
        h_th = [torch.zeros_like(r) if x is None else x for x, r in zip(h, fth)]
    h_tf = [None] * len(ftf)
    if pairs_tf:
        h_tf = tfcore.autograd.grad(sum((g * v).sum() for g, v in pairs_tf), ftf, allow_unused=True)
    for i, (a, b) in enumerate(zip(h_tf, h_th)):
        _close(None if a is None else a.numpy(), b.numpy(), "second derivative (Hv) %d" % i)


def _cases():
    out = []
    for table in (ELEMENTWISE, REDUCTIONS, VIEWS, LINALG, SELECT, SOFTMAX, LAYERS):
        for name, (fn, arrays) in table.items():
            if name.startswith("arg") or name.startswith(FUSED):
                continue
            out.append(pytest.param(fn, arrays, id=name))
    return out


@pytest.mark.parametrize("fn,arrays", _cases())
def test_double_backward_matches_torch(fn, arrays):
    double_backward(fn, arrays)


def _squared(fn):
    """fn's float outputs squared: a linear op's backward then receives a dy
    that depends on x, so its create_graph backward is differentiated too."""
    return lambda ns, *a: [o * o for o in _flat(fn(ns, *a)) if o.dtype.is_floating_point]


# The #16 ops (test_ops_more's cases with a gradient) and the index ops.
MORE_DIFFERENTIABLE = [
    "abs", "abs_at_zero", "sign", "sin_strided", "cos", "floor", "ceil_strided", "round_half_even",
    "clamp", "clamp_at_bounds", "clamp_min_only", "clamp_max_only", "clamp_min_above_max",
    "clamp_tensor_bounds", "clamp_tensor_bounds_ties", "clip", "maximum_broadcast", "minimum_strided",
    "maximum_ties", "minimum_ties_broadcast", "cumsum_dim0", "cumsum_last_strided", "cumsum_middle",
    "triu", "triu_k1_batched", "tril_k-1_strided", "tril_k2", "sort", "sort_desc_dim0", "sort_strided",
]
_R = np.random.default_rng(16)
_A = _R.standard_normal((4, 5, 6))
INDEX = {
    "index_select_dim0": (lambda ns, x, i: x.index_select(0, i), [_A, np.array([1, 0, 1, 3])]),
    "index_select_dim-1": (lambda ns, x, i: x.index_select(-1, i), [_A, np.array([5, 0, 5, 2, 2])]),
    "gather_dim1": (lambda ns, x, i: x.gather(1, i), [_A, _R.integers(0, 5, size=(3, 4, 5))]),
    "gather_dim2": (lambda ns, x, i: x.gather(2, i), [_A, _R.integers(0, 6, size=(4, 5, 7))]),
    "scatter_add_dim0": (lambda ns, x, i, s: x.scatter_add(0, i, s),
                         [_A, _R.integers(0, 4, size=(3, 4, 5)), _R.standard_normal((3, 4, 5))]),
    "scatter_add_dim2": (lambda ns, x, i, s: x.scatter_add(2, i, s),
                         [_A, _R.integers(0, 6, size=(4, 5, 6)), _R.standard_normal((4, 5, 6))]),
    "masked_select": (lambda ns, x, m: x.masked_select(m), [_A, _A[0] > 0]),
}


@pytest.mark.parametrize("name", MORE_DIFFERENTIABLE + sorted(INDEX))
def test_double_backward_of_issue16_ops_matches_torch(name):
    fn, arrays = MORE[name] if name in MORE else INDEX[name]
    double_backward(_squared(fn), arrays)


_I = np.random.default_rng(17)
THIRD = {  # name: (f(x, index tensors), index arrays)
    "cumsum": (lambda x: x.cumsum(1), []),
    "index_select": (lambda x, i: x.index_select(1, i), [np.array([4, 0, 4, 2])]),
    "gather": (lambda x, i: x.gather(0, i), [_I.integers(0, 3, size=(2, 5))]),
    "scatter_add": (lambda x, i: (x * 0).scatter_add(1, i, x[:, :4] * 1), [_I.integers(0, 5, size=(3, 4))]),
    "sort": (lambda x: x.sort(1)[0], []),
}


@pytest.mark.parametrize("name", sorted(THIRD))
def test_third_derivative_through_linear_backwards_matches_torch(name):
    """A linear op's create_graph backward records an op (the reversed
    cumsum, a scatter or gather) that must itself support create_graph:
    the third derivative of Σ w·f(x)³ reaches it."""
    f, idx = THIRD[name]
    xv = np.random.default_rng(7).permutation(15).reshape(3, 5) * 0.3 - 2.0
    wv = None
    res = []
    for tens in (lambda a, **k: tfcore.tensor(a, **k), lambda a, **k: torch.tensor(a, **k)):
        grad = tfcore.autograd.grad if tens(0.0).__class__.__module__.startswith("tfcore") else torch.autograd.grad
        x = tens(xv, requires_grad=True)
        y = f(x, *[tens(i) for i in idx])
        wv = np.random.default_rng(1).standard_normal(tuple(y.shape)) if wv is None else wv
        (d1,) = grad((y * y * y * tens(wv)).sum(), x, create_graph=True)
        (d2,) = grad((d1 * d1).sum(), x, create_graph=True)
        (d3,) = grad((d2 * d2).sum(), x)
        res.append([d.detach().numpy() for d in (d1, d2, d3)])
    for i, (a, b) in enumerate(zip(*res)):
        _close(a, b, "derivative %d" % (i + 1))


@pytest.mark.parametrize("name", ["linear_cross_entropy", "attention_causal"])
def test_fused_ops_refuse_create_graph(name):
    table = {**LAYERS, **SELECT}
    fn, arrays = table[name]
    tf_in, _ = _inputs(arrays)
    out = _flat(fn(tfcore, *tf_in))[0]
    floats = [t for t in tf_in if t.dtype.is_floating_point]
    op = {"linear_cross_entropy": "tfc_linear_cross_entropy", "attention_causal": "tfc_attention"}[name]
    with pytest.raises(RuntimeError, match=op):
        tfcore.autograd.grad(out.sum(), floats, create_graph=True)
    assert all(t.grad is None for t in floats)
    # once is fine
    assert all(g is not None for g in tfcore.autograd.grad(out.sum(), floats))


def test_third_derivative_of_cube():
    xv = np.array([0.5, -1.25, 2.0])
    x = tfcore.tensor(xv, dtype="float64", requires_grad=True)
    (d1,) = tfcore.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (d2,) = tfcore.autograd.grad(d1.sum(), x, create_graph=True)
    (d3,) = tfcore.autograd.grad(d2.sum(), x)
    np.testing.assert_allclose(d1.numpy(), 3 * xv ** 2, rtol=1e-14)
    np.testing.assert_allclose(d2.numpy(), 6 * xv, rtol=1e-14)
    np.testing.assert_allclose(d3.numpy(), [6.0, 6.0, 6.0], rtol=1e-14)
    assert x.grad is None


def test_backward_create_graph_leaves_differentiable_grad():
    xv = np.array([1.5, -0.5, 0.25])
    x = tfcore.tensor(xv, dtype="float64", requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    gx = x.grad
    x.grad = None  # as in torch: .grad with history would keep the graph alive through x
    (gx * gx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 36 * xv ** 3, rtol=1e-13)


def _mlp_params(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((4, 6)) * 0.5, rng.standard_normal(6) * 0.1, rng.standard_normal((6, 3)) * 0.5]


def _mlp(ns, x, w1, b1, w2):
    h = (x @ w1 + b1).tanh()
    return ns.matmul(h, w2).sum()


def test_hessian_vector_product_mlp_matches_torch():
    rng = np.random.default_rng(5)
    xa = rng.standard_normal((5, 4))
    ps = _mlp_params(6)
    vs = [rng.standard_normal(p.shape) for p in ps]
    tp = [tfcore.tensor(p, dtype="float64", requires_grad=True) for p in ps]
    rp = [torch.tensor(p, requires_grad=True) for p in ps]
    g_tf = tfcore.autograd.grad(_mlp(tfcore, tfcore.tensor(xa, dtype="float64"), *tp), tp, create_graph=True)
    g_th = torch.autograd.grad(_mlp(torch, torch.tensor(xa), *rp), rp, create_graph=True)
    hv_tf = tfcore.autograd.grad(sum((g * tfcore.tensor(v, dtype="float64")).sum() for g, v in zip(g_tf, vs)), tp)
    hv_th = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(g_th, vs)), rp)
    for a, b in zip(hv_tf, hv_th):
        _close(a.numpy(), b.numpy(), "Hv")


def test_hvp_gelu_layernorm_softmax_matches_torch():
    rng = np.random.default_rng(9)
    xa, wa, ba = rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal(5)

    def f(ns, x, w, b):
        h = ns.layer_norm(x, (5,), w, b, 1e-5)
        h = ns.gelu(h, approximate="tanh") + ns.gelu(h)
        return ns.softmax(h, -1)
    double_backward(f, [xa, wa, ba], seed=3)


def test_gradient_penalty_training_matches_torch():
    """loss = Σ mlp(x) + ‖∂ Σ mlp(x) / ∂x‖², trained three SGD steps."""
    rng = np.random.default_rng(11)
    xa = rng.standard_normal((5, 4))
    ps = _mlp_params(12)
    tp = [tfcore.tensor(p, dtype="float64", requires_grad=True) for p in ps]
    rp = [torch.tensor(p, requires_grad=True) for p in ps]
    for _ in range(3):
        x = tfcore.tensor(xa, dtype="float64", requires_grad=True)
        xt = torch.tensor(xa, requires_grad=True)
        out = _mlp(tfcore, x, *tp)
        outt = _mlp(torch, xt, *rp)
        (gx,) = tfcore.autograd.grad(out, x, create_graph=True)
        (gxt,) = torch.autograd.grad(outt, xt, create_graph=True)
        (out + (gx * gx).sum()).backward()
        (outt + (gxt * gxt).sum()).backward()
        with tfcore.no_grad():
            for i, p in enumerate(tp):
                _close(p.grad.numpy(), rp[i].grad.numpy(), "penalty grad")
        for i, (p, r) in enumerate(zip(tp, rp)):
            newp = p.detach().numpy() - 0.1 * p.grad.numpy()
            tp[i] = tfcore.tensor(newp, dtype="float64", requires_grad=True)
            with torch.no_grad():
                rp[i] = (r - 0.1 * r.grad).detach().requires_grad_(True)
    for p, r in zip(tp, rp):
        _close(p.numpy(), r.detach().numpy(), "weights after training")


def test_grad_arguments():
    x = tfcore.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    z = tfcore.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(ValueError, match="inputs\\[1\\]"):
        tfcore.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = tfcore.autograd.grad(y, [x, z], retain_graph=True, allow_unused=True)
    assert gz is None and gx.tolist() == [2.0, 4.0]
    with pytest.raises(TypeError):
        tfcore.autograd.grad(y, None)
    with pytest.raises(TypeError):
        tfcore.autograd.grad(None, x)
    with pytest.raises(TypeError):
        tfcore.autograd.grad(y, [x, 3])
    v = x * x
    (gv,) = tfcore.autograd.grad(v, x, grad_outputs=[tfcore.tensor([1.0, 0.5], dtype="float64")])
    assert gv.tolist() == [2.0, 2.0]
    assert x.grad is None
    with pytest.raises(ValueError, match="not a single element"):
        tfcore.autograd.grad(x * x, x)


def test_two_losses_backward_independently():
    """The old binding cleared the whole tape on backward: the second loss failed."""
    xv = np.array([0.5, 2.0])
    x = tfcore.tensor(xv, dtype="float64", requires_grad=True)
    h = x * 3.0
    l1, l2 = h.exp().sum(), h.tanh().sum()
    l1.backward()
    l2.backward()
    xt = torch.tensor(xv, requires_grad=True)
    ht = xt * 3.0
    ht.exp().sum().backward(retain_graph=True)  # torch's scalar product saves its operands
    ht.tanh().sum().backward()
    _close(x.grad.numpy(), xt.grad.numpy(), "two losses")


def test_backward_twice_names_retain_graph():
    x = tfcore.tensor([1.0, 3.0], dtype="float64", requires_grad=True)
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert x.grad.tolist() == [4.0, 12.0]
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()


def test_training_loop_tape_stays_flat():
    rng = np.random.default_rng(2)
    w = tfcore.tensor(rng.standard_normal((4, 3)), dtype="float64", requires_grad=True)
    x = tfcore.tensor(rng.standard_normal((8, 4)), dtype="float64")
    sizes = []
    for _ in range(200):
        h = (x @ w).tanh()
        loss = (h * h).mean()
        _ = h.exp()  # a result computed with recording on and dropped
        loss.backward()
        w = tfcore.tensor(w.numpy() - 0.1 * w.grad.numpy(), dtype="float64", requires_grad=True)
        sizes.append(tfcore.autograd.num_nodes())
    assert max(sizes[20:]) <= max(sizes[:20]) and max(sizes) <= 8


def test_detect_anomaly_forward_and_backward():
    x = tfcore.tensor([1.0, -2.0], dtype="float64", requires_grad=True)
    with tfcore.autograd.detect_anomaly():
        assert tfcore.autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="anomaly detected: tfc_log"):
            x.log()
        s = tfcore.tensor([0.0, 4.0], dtype="float64", requires_grad=True)
        r = s.sqrt().sum()
        with pytest.raises(RuntimeError, match="backward of tfc_sqrt.*forward op tfc_sqrt"):
            r.backward()
    assert not tfcore.autograd.is_anomaly_enabled()
    x.log()  # off again: NaN passes as in torch
    tfcore.autograd.clear_graph()
