"""tfcore.nn against torch.nn (1.13, float64): the same weights give the same
outputs and gradients for every module; state_dict names and shapes are
torch's and load both ways; init functions follow torch's formulas (fans,
gains, bounds) within statistical tolerance; Module's mechanics (registration,
train/eval, to(dtype), zero_grad, repr) as torch's. Plus the seed-style checks:
micrograd's README example and an MLP overfitting one batch."""
import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import tfcore
import tfcore.nn as nn
from helpers import rel_err

F64 = tfcore.float64


def t2n(t):
    return t.detach().numpy()


def copy_torch_weights(tm, m):
    """Load torch module tm's state_dict into tfcore module m (names must agree)."""
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})


def check_same(m, tm, x_np, tol=1e-12, int_input=False):
    """Forward both on x, backward a random seed; compare output, input grad, parameter grads by name."""
    if int_input:
        x, tx = tfcore.tensor(x_np), torch.tensor(x_np)
    else:
        x, tx = tfcore.tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    y, ty = m(x), tm(tx)
    assert y.shape == tuple(ty.shape)
    assert rel_err(y.numpy(), t2n(ty)) < tol
    seed = np.random.default_rng(99).standard_normal(tuple(ty.shape))
    y.backward(tfcore.tensor(seed))
    ty.backward(torch.tensor(seed))
    if not int_input:
        assert rel_err(x.grad.numpy(), tx.grad.numpy()) < tol
    tgrads = dict(tm.named_parameters())
    names = [n for n, _ in m.named_parameters()]
    assert names == list(tgrads)
    for n, p in m.named_parameters():
        assert rel_err(p.grad.numpy(), tgrads[n].grad.numpy()) < tol, n


# ---- seed-style checks -----------------------------------------------------------------


def micrograd_example(T):
    """micrograd's README expression, with T(value) making a leaf."""
    a, b = T(-4.0), T(2.0)
    c = a + b
    d = a * b + b ** 3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()
    return g, a, b


def test_micrograd_readme_example():
    g, a, b = micrograd_example(lambda v: tfcore.tensor(v, dtype=F64, requires_grad=True))
    # the README's printed values (4 decimals)
    assert round(g.item(), 4) == 24.7041
    assert round(a.grad.item(), 4) == 138.8338
    assert round(b.grad.item(), 4) == 645.5773
    tg, ta, tb = micrograd_example(lambda v: torch.tensor(v, dtype=torch.float64, requires_grad=True))
    assert abs(g.item() - tg.item()) < 1e-12
    assert abs(a.grad.item() - ta.grad.item()) < 1e-10 and abs(b.grad.item() - tb.grad.item()) < 1e-10


def test_overfit_one_batch_mlp():
    """An MLP written with tfcore.nn reaches near-zero loss on one fixed batch (the first sanity check of a
    training loop), and its loss falls as torch's does from the same weights."""
    tfcore.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5)).double()
    rng = np.random.default_rng(1)
    x = tfcore.tensor(rng.standard_normal((16, 8)))
    y = tfcore.tensor(rng.integers(0, 5, 16))
    opt = tfcore.optim.AdamW(list(model.parameters()), lr=1e-2, weight_decay=0.0)
    losses = []
    for _ in range(150):
        loss = nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < 0.01 < losses[0]


# ---- each module against torch.nn -------------------------------------------------------


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(bias):
    tm = torch.nn.Linear(6, 4, bias=bias).double()
    m = nn.Linear(6, 4, bias=bias, dtype=F64)
    copy_torch_weights(tm, m)
    check_same(m, tm, _x((3, 5, 6)))


def test_embedding_matches_torch():
    tm = torch.nn.Embedding(10, 4).double()
    m = nn.Embedding(10, 4, dtype=F64)
    copy_torch_weights(tm, m)
    check_same(m, tm, np.array([[1, 2, 9], [0, 2, 2]]), int_input=True)


@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layernorm_matches_torch(affine, bias):
    kw = {} if bias else {"bias": False}
    if not bias:  # torch 1.13's LayerNorm has no bias argument: drop the bias by hand
        tm = torch.nn.LayerNorm(7, eps=1e-6, elementwise_affine=affine).double()
        tm.bias = None
    else:
        tm = torch.nn.LayerNorm(7, eps=1e-6, elementwise_affine=affine).double()
    m = nn.LayerNorm(7, eps=1e-6, elementwise_affine=affine, dtype=F64, **kw)
    if affine:
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(_x(7, 3)))
            if tm.bias is not None:
                tm.bias.copy_(torch.tensor(_x(7, 4)))
        copy_torch_weights(tm, m)
    check_same(m, tm, _x((2, 3, 7)))


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "relu", "tanh", "sigmoid", "softmax", "identity"])
def test_activations_match_torch(name):
    m, tm = {
        "gelu": (nn.GELU(), torch.nn.GELU()),
        "gelu_tanh": (nn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")),
        "relu": (nn.ReLU(), torch.nn.ReLU()),
        "tanh": (nn.Tanh(), torch.nn.Tanh()),
        "sigmoid": (nn.Sigmoid(), torch.nn.Sigmoid()),
        "softmax": (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
        "identity": (nn.Identity(), torch.nn.Identity()),
    }[name]
    if name == "identity":
        x = tfcore.ones(2)
        assert m(x) is x
    else:
        check_same(m, tm, _x((4, 5), 5))
    assert repr(m) == repr(tm)


def test_dropout_train_and_eval():
    tfcore.manual_seed(3)
    m = nn.Dropout(0.25)
    x = tfcore.ones(200, 100, dtype=F64)
    y = m(x).numpy()
    kept = y != 0
    assert np.allclose(y[kept], 1 / 0.75)                      # inverted dropout, as torch's
    assert abs(1 - kept.mean() - 0.25) < 0.01                  # ~p of 20000 dropped (σ ≈ 0.003)
    assert m.eval()(x) is x and not m.training                  # identity in eval
    assert nn.Dropout(0.0)(x).numpy().tolist() == x.numpy().tolist()
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_sequential_mlp_matches_torch_and_state_dict_names():
    tm = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(8),
                             torch.nn.Dropout(0.0), torch.nn.Linear(8, 3)).double()
    m = nn.Sequential(nn.Linear(5, 8), nn.GELU(approximate="tanh"), nn.LayerNorm(8), nn.Dropout(0.0),
                      nn.Linear(8, 3)).double()
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert repr(m) == repr(tm)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.tensor(_x(tuple(p.shape), 8)) * 0.1)
    copy_torch_weights(tm, m)
    check_same(m, tm, _x((6, 5), 2))
    # and back: torch loads tfcore's state_dict and computes the same
    tm2 = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(8),
                              torch.nn.Dropout(0.0), torch.nn.Linear(8, 3)).double()
    tm2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    x = _x((2, 5), 6)
    with tfcore.no_grad():
        assert rel_err(m(tfcore.tensor(x)).numpy(), t2n(tm2(torch.tensor(x)))) < 1e-12


def test_nested_modules_names_as_torch():
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(7, 4)
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
            self.head = torch.nn.Sequential(OrderedDict(ln=torch.nn.LayerNorm(4), out=torch.nn.Linear(4, 3)))
            self.head2 = self.blocks[0]  # shared module: parameters once, state_dict under both names

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 4)
            self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            self.head = nn.Sequential(OrderedDict(ln=nn.LayerNorm(4), out=nn.Linear(4, 3)))
            self.head2 = self.blocks[0]

    tm, m = TNet(), Net()
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in m.named_children()] == [n for n, _ in tm.named_children()]
    assert [n for n, _ in m.named_parameters(recurse=False)] == []
    assert len(list(m.parameters())) == len(list(tm.parameters()))
    assert repr(m).replace("Net", "TNet", 1) == repr(tm)


def test_load_state_dict_errors_as_torch():
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    sd = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    before = m[0].weight.numpy().copy()
    bad = dict(sd)
    del bad["1.bias"]
    bad["extra.weight"] = np.zeros(2, np.float32)
    bad["0.weight"] = np.ones((5, 3), np.float32)
    with pytest.raises(RuntimeError) as ours:
        m.load_state_dict(bad)
    with pytest.raises(RuntimeError) as theirs:
        tm.load_state_dict({k: torch.tensor(v) for k, v in bad.items()})
    for needle in ('Missing key(s) in state_dict: "1.bias"', 'Unexpected key(s) in state_dict: "extra.weight"',
                   "size mismatch for 0.weight", "Error(s) in loading state_dict for Sequential"):
        assert needle in str(ours.value) and needle in str(theirs.value), needle
    assert np.array_equal(m[0].weight.numpy(), before)            # nothing copied on error
    # strict=False reports the keys; a shape mismatch is still an error (as torch)
    del bad["0.weight"]
    res = m.load_state_dict(bad, strict=False)
    tres = tm.load_state_dict({k: torch.tensor(v) for k, v in bad.items()}, strict=False)
    assert (res.missing_keys, res.unexpected_keys) == (tres.missing_keys, tres.unexpected_keys)
    with pytest.raises(RuntimeError, match="size mismatch for 1.weight"):
        m.load_state_dict({"1.weight": np.zeros((3, 3))}, strict=False)
    with pytest.raises(TypeError):
        m.load_state_dict(None)


# ---- Module mechanics ---------------------------------------------------------------------


def test_parameter_registration_train_eval_zero_grad_to():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.scale = nn.Parameter(tfcore.ones(2))
            self.register_buffer("steps", tfcore.zeros(1))
            self.register_buffer("tmp", tfcore.zeros(1), persistent=False)
            self.drop = nn.Dropout(0.5)
            self.plain = tfcore.zeros(1)  # a plain tensor attribute is not registered (torch's rule)

        def forward(self, x):
            return self.drop(self.lin(x)) * self.scale

    m = Net()
    # torch's order: a module's own parameters, then its children's
    assert [n for n, _ in m.named_parameters()] == ["scale", "lin.weight", "lin.bias"]
    assert list(m.state_dict()) == ["scale", "steps", "lin.weight", "lin.bias"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "tmp"]
    assert all(p.requires_grad and p.is_leaf for p in m.parameters())
    assert m.training and m.drop.training
    m.eval()
    assert not m.training and not m.drop.training
    x = tfcore.ones(4, 3)
    assert np.array_equal(m(x).numpy(), (m.lin(x) * m.scale).detach().numpy())  # eval: no dropout
    m.train()
    assert m.drop.training
    m(x).sum().backward()
    assert m.lin.weight.grad is not None
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m(x).sum().backward()
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in m.parameters())
    w = m.lin.weight
    m.double()
    assert m.lin.weight is w and w.dtype is tfcore.float64 and w.requires_grad and w.grad.dtype is tfcore.float64
    assert m.steps.dtype is tfcore.float64
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    with pytest.raises(TypeError, match="floating point"):
        m.to(tfcore.int64)
    with pytest.raises(TypeError, match="Parameter or None"):
        m.scale = tfcore.ones(2)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope
    with pytest.raises(AttributeError, match="before Module.__init__"):
        class Bad(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(tfcore.ones(1))
        Bad()
    with pytest.raises(NotImplementedError):
        nn.Module()(x)


def test_module_to_dtype_then_optimizer():
    """module.to(dtype) keeps the Parameter objects (new storage); an optimizer made afterwards (torch's advice
    for module.to) updates them."""
    m = nn.Linear(3, 1)
    w = m.weight
    m.double()
    assert m.weight is w and w.dtype is tfcore.float64
    opt = tfcore.optim.SGD(list(m.parameters()), lr=0.5)
    w0 = m.weight.numpy().copy()
    m(tfcore.ones(2, 3, dtype=F64)).sum().backward()
    opt.step()
    assert np.allclose(m.weight.numpy(), w0 - 0.5 * 2)


def test_parameter_is_a_leaf_tensor():
    base = tfcore.ones(3, requires_grad=True) * 2  # not a leaf
    p = nn.Parameter(base)
    assert isinstance(p, tfcore.Tensor) and p.is_leaf and p.requires_grad
    assert p.data_ptr() == base.data_ptr()  # shares memory, as torch's Parameter
    assert not nn.Parameter(tfcore.ones(2), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor(")
    with pytest.raises(TypeError):
        nn.Parameter([1.0, 2.0])
    (p * p).sum().backward()
    assert p.grad.tolist() == [4.0, 4.0, 4.0]


def test_module_list_and_sequential_containers():
    ml = nn.ModuleList([nn.Linear(2, 2)])
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    ml.insert(1, nn.GELU())
    assert [type(x).__name__ for x in ml] == ["Linear", "GELU", "ReLU", "Tanh"]
    assert type(ml[-1]).__name__ == "Tanh" and len(ml[1:]) == 3
    del ml[1]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    with pytest.raises(IndexError):
        ml[5]
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    s.append(nn.Linear(3, 1))
    assert len(s) == 3 and list(s.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert s(tfcore.ones(4, 2)).shape == (4, 1)


def test_functional_aliases():
    F = nn.functional
    for name in ("linear", "gelu", "layer_norm", "dropout", "softmax", "log_softmax", "cross_entropy", "embedding",
                 "scaled_dot_product_attention", "relu", "tanh", "sigmoid"):
        assert getattr(F, name) is getattr(tfcore.functional, name), name
    assert F.matmul is tfcore.functional.matmul  # everything else is looked up in tfcore.functional
    with pytest.raises(AttributeError):
        F.no_such_function


# ---- init -------------------------------------------------------------------------------


def test_calculate_gain_and_fans_as_torch():
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                      ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", None)]:
        assert nn.init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param), rel=1e-15)
    for shape in [(4, 3), (5, 3, 2), (6, 4, 3, 3)]:
        assert nn.init._calculate_fan_in_and_fan_out(tfcore.zeros(*shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(*shape))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(tfcore.zeros(5))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="Mode"):
        nn.init.kaiming_uniform_(tfcore.zeros(3, 3), mode="fan_avg")
    with pytest.raises(TypeError):
        nn.init.normal_(np.zeros(3))


SHAPE = (300, 200)  # fan_in 200, fan_out 300, 60000 draws: std of the sample std ≈ 0.3%


def _stats(a):
    return float(a.mean()), float(a.std()), float(a.min()), float(a.max())


def _uniform_ok(a, bound):
    mean, std, lo, hi = _stats(a)
    assert -bound <= lo and hi <= bound and lo < -0.99 * bound and hi > 0.99 * bound
    assert abs(mean) < 0.02 * bound and abs(std - bound / math.sqrt(3)) < 0.02 * bound / math.sqrt(3)


def _normal_ok(a, want_std, want_mean=0.0):
    mean, std, _, _ = _stats(a)
    assert abs(mean - want_mean) < 0.02 * want_std + 1e-12 and abs(std - want_std) < 0.02 * want_std


@pytest.mark.parametrize("fn,kw,kind,spread", [
    ("uniform_", {"a": -0.3, "b": 0.3}, "u", 0.3),
    ("normal_", {"mean": 0.0, "std": 0.7}, "n", 0.7),
    ("xavier_uniform_", {"gain": 2.0}, "u", 2.0 * math.sqrt(6 / 500)),
    ("xavier_normal_", {}, "n", math.sqrt(2 / 500)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, "u", math.sqrt(2 / 6) * math.sqrt(3 / 200)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, "u", math.sqrt(2) * math.sqrt(3 / 300)),
    ("kaiming_normal_", {"nonlinearity": "relu"}, "n", math.sqrt(2 / 200)),
    ("kaiming_normal_", {"a": 0.1, "mode": "fan_out"}, "n", math.sqrt(2 / 1.01) / math.sqrt(300)),
])
def test_init_statistics_follow_torch_formulas(fn, kw, kind, spread):
    """spread is the hand-derived bound (uniform) or std (normal); torch's own draws meet the same check,
    which shows the formula is torch's."""
    tfcore.manual_seed(11)
    t = tfcore.empty(*SHAPE, dtype=F64)
    assert getattr(nn.init, fn)(t, **kw) is t
    ours = t.numpy()
    tt = getattr(torch.nn.init, fn)(torch.empty(*SHAPE, dtype=torch.float64), **kw).numpy()
    for a in (ours, tt):
        (_uniform_ok if kind == "u" else _normal_ok)(a, spread)
    assert not np.array_equal(ours, tfcore.nn.init.normal_(tfcore.empty(*SHAPE, dtype=F64)).numpy())


def test_constant_init_and_default_inits():
    t = tfcore.empty(3, 2)
    assert nn.init.constant_(t, 0.25).numpy().tolist() == [[0.25] * 2] * 3
    assert not nn.init.zeros_(t).numpy().any() and (nn.init.ones_(t).numpy() == 1).all()
    tfcore.manual_seed(5)
    lin = nn.Linear(400, 300, dtype=F64)
    _uniform_ok(lin.weight.numpy(), 1 / math.sqrt(400))        # kaiming_uniform(a=√5) = U(±1/√fan_in)
    b = lin.bias.numpy()
    assert np.abs(b).max() <= 1 / math.sqrt(400) and np.abs(b).max() > 0.9 / math.sqrt(400)
    _normal_ok(nn.Embedding(300, 200, dtype=F64).weight.numpy(), 1.0)
    ln = nn.LayerNorm(6)
    assert (ln.weight.numpy() == 1).all() and not ln.bias.numpy().any()
    # inits run on parameters that require grad without recording anything
    p = nn.Parameter(tfcore.zeros(4, 4))
    n0 = tfcore.autograd.num_nodes()
    nn.init.kaiming_normal_(p)
    assert p.is_leaf and p.grad is None and tfcore.autograd.num_nodes() == n0 and p.numpy().any()


def _inplace_sub_lands():
    t = tfcore.zeros(1)
    before = t
    with tfcore.no_grad():
        t -= 1.0
    return t is before and before.item() == -1.0


@pytest.mark.skipif(not _inplace_sub_lands(), reason="in-place -= on tensors is not in this build yet (issue #16)")
def test_manual_sgd_with_minus_equals_moves_parameters_as_torch():
    """The hand-written SGD loop (with no_grad: p -= lr * p.grad) over tfcore.nn parameters moves them exactly as
    the same loop over torch.nn's (f64, 5 steps)."""
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double()
    copy_torch_weights(tm, m)
    x, y = _x((8, 4), 1), np.arange(8) % 3
    for _ in range(5):
        nn.functional.cross_entropy(m(tfcore.tensor(x)), tfcore.tensor(y)).backward()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        with tfcore.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
        with torch.no_grad():
            for p in tm.parameters():
                p -= 0.1 * p.grad
        m.zero_grad()
        tm.zero_grad()
    for (n, p), tp in zip(m.named_parameters(), tm.parameters()):
        assert rel_err(p.numpy(), t2n(tp)) < 1e-12, n


def test_deepcopy_of_a_module_copies_values_and_keeps_ties():
    import copy
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    m[1].weight = m[0].weight  # tied
    c = copy.deepcopy(m)
    assert c[0].weight is c[1].weight and c[0].weight is not m[0].weight
    assert np.array_equal(c[0].weight.numpy(), m[0].weight.numpy()) and c[0].weight.requires_grad
    with tfcore.no_grad():
        c[0].weight.fill_(0.0)
    assert m[0].weight.numpy().any()  # the copy owns its memory
