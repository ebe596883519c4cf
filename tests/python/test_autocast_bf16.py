"""bf16 mixed precision (autocast) on the CPU, against independent references:
tfc_linear_bf16 against an f64 product of the same bf16-rounded operands
(rounded by torch) for values and gradients, and against torch 1.13's own
torch.autocast('cpu', torch.bfloat16) Linear; bad input refused clearly."""
import numpy as np
import pytest
import torch

import tfcore

rng = np.random.default_rng(2020)


def r16(a):
    """a rounded to bf16 (round-to-nearest-even, by torch), as f64."""
    return torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16).double().numpy()


def f32(shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def within(got, ref, k, what):
    # the operands are exactly bf16 on both sides, so only f32 accumulation
    # over k terms (and one f32 rounding of the result) separates them
    got = np.asarray(got, np.float64)
    tol = 2.0 ** -23 * (k + 2) * np.abs(ref).max() + 1e-30
    err = np.abs(got - ref).max() if ref.size else 0.0
    assert err <= tol, "%s: error %.3g > %.3g" % (what, err, tol)


CASES = [((5, 33), 17, True), ((2, 7, 64), 40, True), ((1, 1), 1, False), ((3, 4, 9), 130, False),
         ((65, 128), 96, True)]


@pytest.mark.parametrize("xs,n,bias", CASES)
def test_linear_bf16_matches_f64_on_rounded_operands(xs, n, bias):
    k = xs[-1]
    x, w, b = f32(xs), f32((n, k), 0.3), f32((n,))
    gy = f32(xs[:-1] + (n,))
    tx, tw = tfcore.tensor(x), tfcore.tensor(w)
    tb = tfcore.tensor(b) if bias else None
    for t in (tx, tw) + ((tb,) if bias else ()):
        t.requires_grad = True
    y = tfcore.linear_bf16(tx, tw, tb)
    assert y.dtype == tfcore.float32 and tuple(y.shape) == xs[:-1] + (n,)
    ref = r16(x) @ r16(w).T + (b.astype(np.float64) if bias else 0)
    within(y.numpy(), ref, k, "forward")
    y.backward(tfcore.tensor(gy))
    gyr = r16(gy)
    within(tx.grad.numpy(), gyr @ r16(w), n, "dx")
    within(tw.grad.numpy(), (gyr.reshape(-1, n).T @ r16(x).reshape(-1, k)), int(np.prod(xs[:-1])), "dw")
    assert tx.grad.dtype == tw.grad.dtype == tfcore.float32  # master-weight gradients stay f32
    if bias:
        within(tb.grad.numpy(), gy.astype(np.float64).reshape(-1, n).sum(0), int(np.prod(xs[:-1])), "db")


def test_linear_bf16_differs_from_f32_linear():
    # guards against the op silently running in f32: operands with bits below
    # bf16's 8-bit mantissa give a different product
    x, w = f32((4, 64)), f32((8, 64))
    y16 = tfcore.linear_bf16(tfcore.tensor(x), tfcore.tensor(w)).numpy().astype(np.float64)
    y32 = x.astype(np.float64) @ w.astype(np.float64).T
    assert np.abs(y16 - y32).max() > 1e-3
    within(y16, r16(x) @ r16(w).T, 64, "forward")


def test_linear_bf16_uses_the_given_weight_copy():
    x, w = f32((3, 16)), f32((5, 16))
    wb = tfcore.tensor(np.zeros((5, 16), np.float32)).to(tfcore.bfloat16)
    y = tfcore.linear_bf16(tfcore.tensor(x), tfcore.tensor(w), weight_bf16=wb)
    assert np.all(y.numpy() == 0)  # the cached copy is the weight used, w only receives the gradient


def test_linear_bf16_agrees_with_torch_autocast():
    x, w, b = f32((6, 48)), f32((20, 48), 0.2), f32((20,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))
    assert yt.dtype == torch.bfloat16
    y = tfcore.linear_bf16(tfcore.tensor(x), tfcore.tensor(w), tfcore.tensor(b)).numpy()
    # torch also rounds the bias and its output to bf16 (2^-8 relative each,
    # 1.13's oneDNN path sometimes more); ours keeps both f32: a loose check
    assert np.abs(y - yt.float().numpy()).max() <= 2.0 ** -6 * np.abs(y).max()


def test_linear_bf16_bad_input():
    x, w = tfcore.tensor(f32((3, 4))), tfcore.tensor(f32((5, 4)))
    with pytest.raises(tfcore.DtypeError, match="tfc_linear_bf16: x is f64"):
        tfcore.linear_bf16(x.to(tfcore.float64), w)
    with pytest.raises(tfcore.DtypeError, match="tfc_linear_bf16: w is bf16"):
        tfcore.linear_bf16(x, w.to(tfcore.bfloat16))
    with pytest.raises(tfcore.DtypeError, match="tfc_linear_bf16: w_bf16 is f32"):
        tfcore.linear_bf16(x, w, weight_bf16=w)
    with pytest.raises(tfcore.ShapeError, match="tfc_linear_bf16: w_bf16 is \\[4,3\\], w is \\[4,5\\]"):
        tfcore.linear_bf16(x, w, weight_bf16=tfcore.tensor(f32((3, 4))).to(tfcore.bfloat16))
    with pytest.raises(tfcore.ShapeError, match="x's last dim 4 must equal"):
        tfcore.linear_bf16(x, tfcore.tensor(f32((5, 3))))
    with pytest.raises(TypeError):
        tfcore.linear_bf16(None, w)
