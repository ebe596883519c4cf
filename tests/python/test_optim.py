"""tfcore.optim against torch.optim: 100-step trajectories of a small
regression problem, each side computing its own gradients with its own
autograd, for every optimizer and option; groups, lr changes, clipping,
state_dict resume, schedules."""
import math

import numpy as np
import pytest
import torch

import tfcore
from helpers import TORCH_DTYPE, needs

pytestmark = needs("tfc_optim_new")

rng = np.random.default_rng(99)
X = rng.standard_normal((16, 5))
Y = rng.standard_normal((16, 3))
W0 = rng.standard_normal((5, 3)) * 0.5
B0 = rng.standard_normal(3) * 0.1
TOL = {"float64": 1e-10, "float32": 1e-5}


def make(dtype):
    tf = [tfcore.tensor(W0, dtype=dtype, requires_grad=True), tfcore.tensor(B0, dtype=dtype, requires_grad=True)]
    th = [torch.tensor(W0, dtype=TORCH_DTYPE[dtype], requires_grad=True),
          torch.tensor(B0, dtype=TORCH_DTYPE[dtype], requires_grad=True)]
    return tf, th


def loss_of(ns_x, ns_y, w, b):
    return ((ns_x @ w + b).tanh() - ns_y).pow(2).mean()


def run(tf_opt, th_opt, tf, th, dtype, steps=100, each=None):
    x, y = tfcore.tensor(X, dtype=dtype), tfcore.tensor(Y, dtype=dtype)
    tx, ty = torch.tensor(X, dtype=TORCH_DTYPE[dtype]), torch.tensor(Y, dtype=TORCH_DTYPE[dtype])
    for step in range(steps):
        if each:
            each(step)
        tf_opt.zero_grad()
        th_opt.zero_grad()
        loss_of(x, y, *tf).backward()
        loss_of(tx, ty, *th).backward()
        tf_opt.step()
        th_opt.step()
    for p, q in zip(tf, th):
        ref = q.detach().numpy()
        err = np.max(np.abs(p.numpy() - ref)) / max(1.0, np.max(np.abs(ref)))
        assert err <= TOL[dtype], "parameter error %.3g" % err
    # the trajectory really moved
    assert np.max(np.abs(tf[0].numpy() - W0)) > 1e-2


CONFIGS = {
    "sgd": (lambda p: tfcore.optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum_wd": (lambda p: tfcore.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, dampening=0.1),
                        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, dampening=0.1)),
    "sgd_nesterov": (lambda p: tfcore.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (lambda p: tfcore.optim.Adam(p, lr=1e-2), lambda p: torch.optim.Adam(p, lr=1e-2)),
    "adam_wd_amsgrad": (lambda p: tfcore.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True),
                        lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    "adamw": (lambda p: tfcore.optim.AdamW(p, lr=1e-2), lambda p: torch.optim.AdamW(p, lr=1e-2)),
    "adamw_wd_eps": (lambda p: tfcore.optim.AdamW(p, lr=3e-2, weight_decay=0.3, eps=1e-6, betas=(0.9, 0.95)),
                     lambda p: torch.optim.AdamW(p, lr=3e-2, weight_decay=0.3, eps=1e-6, betas=(0.9, 0.95))),
    "adamw_maximize": (lambda p: tfcore.optim.AdamW(p, lr=1e-3, maximize=True),
                       lambda p: torch.optim.AdamW(p, lr=1e-3, maximize=True)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_trajectory_matches_torch(name, dtype):
    tf, th = make(dtype)
    make_tf, make_th = CONFIGS[name]
    run(make_tf(tf), make_th(th), tf, th, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_groups_and_lr_changes_match_torch(dtype):
    tf, th = make(dtype)
    tf_opt = tfcore.optim.AdamW([{"params": [tf[0]], "weight_decay": 0.1}, {"params": [tf[1]], "lr": 0.05}],
                                lr=0.01, weight_decay=0.0)
    th_opt = torch.optim.AdamW([{"params": [th[0]], "weight_decay": 0.1}, {"params": [th[1]], "lr": 0.05}],
                               lr=0.01, weight_decay=0.0)
    assert tf_opt.param_groups[1]["lr"] == 0.05 and tf_opt.param_groups[0]["weight_decay"] == 0.1
    assert tf_opt.param_groups[0]["betas"] == (0.9, 0.999)

    def schedule(step):
        lr = tfcore.optim.lr_cosine(step, 0.02, 0.002, 10, 100)
        for g, h in zip(tf_opt.param_groups, th_opt.param_groups):
            g["lr"] = lr
            h["lr"] = lr
    run(tf_opt, th_opt, tf, th, dtype, each=schedule)


def test_clip_grad_norm_matches_torch():
    a = rng.standard_normal((4, 3)) * 5
    tf = tfcore.tensor(a, dtype="float64", requires_grad=True)
    th = torch.tensor(a, requires_grad=True)
    (tf * tf).sum().backward()
    (th * th).sum().backward()
    n1 = tfcore.optim.clip_grad_norm_([tf], 1.0)
    n2 = torch.nn.utils.clip_grad_norm_([th], 1.0)
    assert abs(n1.item() - n2.item()) <= 1e-10 * n2.item()
    np.testing.assert_allclose(tf.grad.numpy(), th.grad.numpy(), rtol=1e-12, atol=1e-14)
    before = tf.grad.numpy().copy()
    assert abs(tfcore.optim.clip_grad_norm_(tf, math.inf).item() - 1.0) < 1e-6  # measures only
    np.testing.assert_array_equal(tf.grad.numpy(), before)


def test_state_dict_resume_is_exact():
    tf, _ = make("float64")
    x, y = tfcore.tensor(X), tfcore.tensor(Y)
    opt = tfcore.optim.Adam(tf, lr=1e-2)

    def steps(o, params, n):
        for _ in range(n):
            o.zero_grad()
            loss_of(x, y, *params).backward()
            o.step()
    steps(opt, tf, 5)
    state = opt.state_dict()
    assert state["step"].item() == 5 and "param.0.exp_avg" in state
    snapshot = [p.numpy().copy() for p in tf]
    steps(opt, tf, 5)
    expected = [p.numpy().copy() for p in tf]
    again = [tfcore.tensor(s, requires_grad=True) for s in snapshot]
    opt2 = tfcore.optim.Adam(again, lr=1e-2)
    opt2.load_state_dict(state)
    assert opt2.step_count == 5
    steps(opt2, again, 5)
    for a, b in zip(again, expected):
        np.testing.assert_array_equal(a.numpy(), b)


def test_schedules():
    assert tfcore.optim.lr_cosine(10, 1.0, 0.1, 10, 110) == 1.0
    assert abs(tfcore.optim.lr_cosine(60, 1.0, 0.1, 10, 110) - 0.55) < 1e-12
    assert tfcore.optim.lr_cosine(500, 1.0, 0.1, 10, 110) == 0.1
    assert tfcore.optim.lr_constant(0, 1.0, 3) == 0.25
    assert abs(tfcore.optim.lr_linear(60, 1.0, 0.0, 10, 110) - 0.5) < 1e-12
    assert abs(tfcore.optim.lr_inverse_sqrt(40, 1.0, 10) - 0.5) < 1e-12
    p = tfcore.zeros(2, requires_grad=True)
    opt = tfcore.optim.SGD([p], lr=1.0)
    sched = tfcore.optim.LRScheduler(opt, lambda s: tfcore.optim.lr_constant(s, 1.0, 3))
    assert sched.get_last_lr() == [0.25]
    sched.step()
    assert sched.get_last_lr() == [0.5]


def test_bad_inputs():
    p = tfcore.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="lr"):
        tfcore.optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError):
        tfcore.optim.Adam([p], betas=(1.5, 0.9))
    with pytest.raises(ValueError):
        tfcore.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError):
        tfcore.optim.SGD([np.zeros(2)], lr=0.1)
    with pytest.raises(ValueError):
        tfcore.optim.SGD([(p * 2)], lr=0.1)  # not a leaf
    q = tfcore.zeros(2, requires_grad=True)
    q.grad = tfcore.tensor([float("nan"), 1.0])
    with pytest.raises(tfcore.Error):
        tfcore.optim.clip_grad_norm_([q], 1.0)
