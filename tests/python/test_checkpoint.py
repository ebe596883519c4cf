"""tfcore.checkpoint (tfc_graph_checkpoint) and GPT.recompute: gradients
through a checkpoint equal PyTorch 1.13's (torch.utils.checkpoint and the
plain graph) for inputs and closure parameters, equal tfcore's own plain
graph bit for bit (dropout's mask replays), exceptions raised by the
function in forward or in the replay come back as themselves, and a GPT
with recompute on gets bitwise the gradients of recompute off."""
import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import tfcore


def _f(x, z, w):
    # two outputs: tanh(x·w) ⊙ x and that ⊙ z
    y = (x @ w).tanh() * x
    return y, y * z


def _data(seed=0):
    r = np.random.RandomState(seed)
    return [r.uniform(-1, 1, size=s) for s in ((5, 4), (5, 4), (4, 4))]


def test_matches_torch_checkpoint_f64():
    xv, zv, wv = _data()
    x, z, w = (tfcore.tensor(v, dtype="float64", requires_grad=True) for v in (xv, zv, wv))
    a, b = tfcore.checkpoint(lambda x, z: _f(x, z, w), x, z, n_out=2)
    assert a.requires_grad and b.requires_grad
    (a.sum() + b.sum() * 0.5).backward()
    tx, tz, tw = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (xv, zv, wv))
    ta, tb = torch.utils.checkpoint.checkpoint(lambda x, z: _f(x, z, tw), tx, tz, use_reentrant=False)
    (ta.sum() + tb.sum() * 0.5).backward()
    for ours, ref in ((x, tx), (z, tz), (w, tw)):
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(a.detach().numpy(), ta.detach().numpy(), rtol=1e-12)


def _grads_with_dropout(use_checkpoint):
    xv, _, wv = _data(1)
    x, w = (tfcore.tensor(v, dtype="float32", requires_grad=True) for v in (xv, wv))

    def f(x):
        return tfcore.functional.dropout((x @ w).tanh() * x, p=0.4)
    tfcore.manual_seed(7)
    y = tfcore.checkpoint(f, x) if use_checkpoint else f(x)
    # a draw after the checkpoint: the replay must not disturb the stream the caller sees
    after = tfcore.functional.dropout(tfcore.ones(3), p=0.5).numpy()
    y.sum().backward()
    return x.grad.numpy(), w.grad.numpy(), after


def test_dropout_replays_bitwise():
    plain, ckpt = _grads_with_dropout(False), _grads_with_dropout(True)
    for a, b in zip(plain, ckpt):
        assert np.array_equal(a, b)
    assert (plain[0] == 0).any()  # the mask dropped something


def test_exceptions_come_back():
    x = tfcore.tensor([1.0, 2.0], requires_grad=True)

    def bad(x):
        raise KeyError("in forward")
    with pytest.raises(KeyError, match="in forward"):
        tfcore.checkpoint(bad, x)
    calls = []

    def second_fails(x):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("in the replay")
        return x * x
    y = tfcore.checkpoint(second_fails, x)
    with pytest.raises(ValueError, match="in the replay"):
        y.sum().backward()
    with pytest.raises(TypeError, match="n_out"):
        tfcore.checkpoint(lambda x: (x, x), x)
    # the tape is usable afterwards
    (x * x).sum().backward()
    assert x.grad.numpy().tolist() == [2.0, 4.0]


def test_no_grad_runs_plainly():
    x = tfcore.tensor([1.0, 2.0], requires_grad=True)
    with tfcore.no_grad():
        y = tfcore.checkpoint(lambda x: x * 3, x)
    assert not y.requires_grad and y.numpy().tolist() == [3.0, 6.0]


def test_gpt_recompute_bitwise():
    cfg = tfcore.GPTConfig.preset("char-tiny", vocab_size=65)
    r = np.random.RandomState(3)
    idx = tfcore.tensor(r.randint(0, 65, size=(2, 32)))
    tgt = tfcore.tensor(r.randint(0, 65, size=(2, 32)))
    grads = []
    for on in (False, True):
        m = tfcore.GPT(cfg, seed=5)
        assert m.recompute is False
        m.recompute = on
        assert m.recompute is on
        _, loss = m(idx, tgt)
        loss.backward()
        grads.append([p.grad.numpy().copy() for _, p in m.named_parameters()])
    for a, b in zip(*grads):
        assert np.array_equal(a, b)
