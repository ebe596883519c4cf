"""bf16 matmul on the CPU against torch 1.13 (whose bf16 matmul is oneDNN's,
f32 accumulation): both against an f64 product of the same bf16 values,
forward and gradients, transposed and broadcast operands; mixed dtypes
refused as torch refuses them."""
import numpy as np
import pytest
import torch

import tfcore

rng = np.random.default_rng(20)


def bf16_pair(shape):
    """The same bf16 values in torch and tfcore (rounded once, by torch)."""
    t = torch.from_numpy(rng.uniform(-1, 1, shape).astype(np.float32)).to(torch.bfloat16)
    return t, tfcore.tensor(t.float().numpy()).to(tfcore.bfloat16)


def f64(x):
    return x.to(tfcore.float64).numpy() if isinstance(x, tfcore.Tensor) else x.double().numpy()


def check(got, ref64, torch_out, k):
    # one bf16 rounding (2^-8 relative) plus f32 accumulation over k terms
    tol = 2.0 ** -8 * np.abs(ref64) + (k + 4) * 2.0 ** -24 * k
    assert np.all(np.abs(f64(got) - ref64) <= tol)
    # torch's own result agrees only loosely: 1.13's bf16 matrix-vector path
    # (1-D operands) rounds its partial sums to bf16 (0.038 for 0.020 seen)
    assert np.all(np.abs(f64(torch_out) - ref64) <= 2.0 ** -5 * np.abs(ref64) + 0.05)


CASES = [((7, 66), (66, 45), False), ((3, 7, 66), (66, 45), False), ((2, 1, 5, 40), (1, 3, 40, 9), False),
         ((130, 17), (65, 17), True), ((66,), (66, 5), False)]


@pytest.mark.parametrize("sa,sb,tb", CASES)
def test_matmul_bf16_forward_and_backward_match_torch(sa, sb, tb):
    ta_, a = bf16_pair(sa)
    tb_, b = bf16_pair(sb)
    if tb:
        tb_, b = tb_.t(), b.t()
    ta_.requires_grad_(True)
    tb_.requires_grad_(True)
    a.requires_grad = True
    b.requires_grad = True
    out_t = torch.matmul(ta_, tb_)
    out = tfcore.matmul(a, b)
    assert out.dtype == tfcore.bfloat16 and tuple(out.shape) == tuple(out_t.shape)
    k = sa[-1]
    ref = np.matmul(ta_.detach().double().numpy(), tb_.detach().double().numpy())
    check(out, ref, out_t.detach(), k)
    g_t = torch.from_numpy(rng.uniform(-1, 1, tuple(out_t.shape)).astype(np.float32)).to(torch.bfloat16)
    g = tfcore.tensor(g_t.float().numpy()).to(tfcore.bfloat16)
    out_t.backward(g_t)
    out.backward(g)
    assert a.grad.dtype == tfcore.bfloat16 and b.grad.dtype == tfcore.bfloat16
    # the f64 gradients of the same bf16 values
    a64 = ta_.detach().double().requires_grad_(True)
    b64 = tb_.detach().double().requires_grad_(True)
    torch.matmul(a64, b64).backward(g_t.double())
    for mine, theirs, ref in ((a.grad, ta_.grad, a64.grad), (b.grad, tb_.grad, b64.grad)):
        assert tuple(mine.shape) == tuple(theirs.shape) == tuple(ref.shape)
        ref = ref.numpy()
        # ours: f32 accumulation (sums over broadcast dims included), one bf16 rounding
        assert np.all(np.abs(f64(mine) - ref) <= 2.0 ** -8 * np.abs(ref) + 1e-5)
        # torch rounds each batch item's product to bf16 before summing broadcast dims
        assert np.all(np.abs(f64(theirs) - ref) <= 2.0 ** -6 * np.abs(ref) + 1e-2)


def test_mixed_dtypes_are_refused_like_torch():
    ta_, a = bf16_pair((3, 4))
    b32 = tfcore.tensor(np.ones((4, 2), np.float32))
    with pytest.raises(RuntimeError):
        torch.matmul(ta_, torch.ones(4, 2))
    with pytest.raises(tfcore.DtypeError, match="tfc_matmul: a is bf16 \\[3,4\\], b is f32 \\[4,2\\]: dtypes differ"):
        tfcore.matmul(a, b32)
