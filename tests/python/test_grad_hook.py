"""tfcore.autograd.set_grad_hook: called once per reachable leaf with its
final gradient (checked against torch), the params' own Tensor objects
passed back, exceptions re-raised from backward, None removes the hook."""
import numpy as np
import pytest
import torch

import tfcore


@pytest.fixture(autouse=True)
def _no_hook():
    yield
    tfcore.autograd.set_grad_hook(None)


def _forward(a, w, b):
    # loss = sum(a*w*w*b + w*w): w is used by three edges of three nodes, b late, a first.
    return ((a * w * w) * b + w * w).sum()


def test_hook_sees_final_gradients_once_in_order():
    av, wv, bv = [0.5, -1.5], [2.0, 3.0], [-1.0, 0.25]
    a, w, b, u = (tfcore.tensor(v, dtype="float64", requires_grad=True) for v in (av, wv, bv, [7.0, 8.0]))
    seen = []
    tfcore.autograd.set_grad_hook(lambda t: seen.append((t, t.grad.numpy().copy())), params=[a, w, b, u])
    loss = _forward(a, w, b)
    loss.backward()
    ta, tw, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (av, wv, bv))
    _forward(ta, tw, tb).backward()
    names = {id(a): "a", id(w): "w", id(b): "b", id(u): "u"}
    order = [names[id(t)] for t, _ in seen]
    assert sorted(order) == ["a", "b", "w"]  # once each, u (unused) never
    assert order.index("b") < order.index("a")  # used last in the forward: final first
    want = {"a": ta.grad.numpy(), "w": tw.grad.numpy(), "b": tb.grad.numpy()}
    got_after = {"a": a.grad.numpy(), "w": w.grad.numpy(), "b": b.grad.numpy()}
    for (t, g), name in zip(seen, order):
        np.testing.assert_allclose(g, want[name], rtol=1e-14)
        np.testing.assert_array_equal(g, got_after[name])


def test_hook_without_params_gets_handles_and_none_removes_it():
    w = tfcore.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    seen = []
    tfcore.autograd.set_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * w).sum().backward()
    assert seen == [[2.0, 4.0]]
    tfcore.autograd.set_grad_hook(None)
    (w * w).sum().backward()
    assert seen == [[2.0, 4.0]]
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 8.0])


class Boom(Exception):
    pass


def test_exception_in_hook_is_reraised_from_backward():
    w = tfcore.tensor([1.0, 2.0], requires_grad=True)

    def hook(t):
        raise Boom("from the hook")
    tfcore.autograd.set_grad_hook(hook)
    with pytest.raises(Boom, match="from the hook"):
        (w * 3.0).sum().backward()
    tfcore.autograd.clear_graph()
    # The next backward runs normally with a hook that succeeds.
    calls = []
    tfcore.autograd.set_grad_hook(lambda t: calls.append(1))
    w.grad = None
    (w * 3.0).sum().backward()
    assert calls == [1]
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
