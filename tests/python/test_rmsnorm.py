"""RMSNorm: tfcore.functional.rms_norm (the graph door, tfc_rmsnorm) and
tfcore.kernels.rmsnorm_forward / rmsnorm_backward (the explicit door)
against PyTorch 1.13 written from the published equation (torch 1.13 has
no rms_norm):
    y = x * rsqrt(mean(x², -1) + eps) * w
with torch autograd for the gradients; in float32 and float64, on
contiguous and strided inputs, with and without weight; and the errors."""
import numpy as np
import pytest
import torch

import tfcore
from tfcore import functional as F
from tfcore import kernels as K
from helpers import TORCH_DTYPE, assert_close

rng = np.random.default_rng(34)
DTYPES = ["float64", "float32"]


def torch_rms_norm(x, w, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


def pair(a, dtype, grad=True):
    return tfcore.tensor(a, dtype=dtype, requires_grad=grad), torch.tensor(a, dtype=TORCH_DTYPE[dtype],
                                                                           requires_grad=grad)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("strided", [False, True])
def test_graph_door_matches_torch(dtype, weighted, strided):
    x, tx = pair(rng.standard_normal((4, 3, 16)), dtype)
    w, tw = pair(rng.standard_normal(3 if strided else 16), dtype) if weighted else (None, None)
    xin, txin = (x.transpose(1, 2), tx.transpose(1, 2)) if strided else (x, tx)  # [4, 16, 3]: last dim strided
    C = xin.shape[-1]
    y = F.rms_norm(xin, (C,), w, 1e-5)
    ty = torch_rms_norm(txin, tw, 1e-5)
    assert y.shape == tuple(ty.shape)
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "y")
    seed = rng.standard_normal(tuple(ty.shape))
    (y * tfcore.tensor(seed, dtype=dtype)).sum().backward()
    (ty * torch.tensor(seed, dtype=TORCH_DTYPE[dtype])).sum().backward()
    assert_close(x.grad.numpy(), tx.grad.numpy(), dtype, "dx")
    if weighted:
        assert_close(w.grad.numpy(), tw.grad.numpy(), dtype, "dweight")


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_eps_is_finfo_eps_as_in_torch(dtype):
    # rows of tiny values, where eps decides the result
    a = rng.standard_normal((3, 8)) * 1e-4
    x, tx = pair(a, dtype, grad=False)
    want = torch_rms_norm(tx, None, torch.finfo(TORCH_DTYPE[dtype]).eps)
    assert_close(F.rms_norm(x, 8).numpy(), want.numpy(), dtype, "y")
    assert not np.allclose(F.rms_norm(x, 8, eps=1e-6).numpy(), want.numpy(), rtol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_explicit_door_matches_torch_and_the_graph_door(dtype):
    x, tx = pair(rng.standard_normal((2, 5, 12)), dtype)
    w, tw = pair(rng.standard_normal(12), dtype)
    y, rstd = K.rmsnorm_forward(x, w, 1e-6)
    ty = torch_rms_norm(tx, tw, 1e-6)
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "y")
    assert rstd.shape == (10,)
    want_rstd = 1 / np.sqrt((x.numpy().astype(np.float64) ** 2).mean(-1) + 1e-6).reshape(10)
    assert_close(rstd.numpy(), want_rstd, dtype, "rstd")
    np.testing.assert_array_equal(y.numpy(), F.rms_norm(x, (12,), w, 1e-6).numpy())  # one kernel, two doors
    dy, tdy = pair(rng.standard_normal((2, 5, 12)), dtype, grad=False)
    ty.backward(tdy)
    dx, dw = K.rmsnorm_backward(dy, x, w, rstd)
    assert_close(dx.numpy(), tx.grad.numpy(), dtype, "dx")
    assert_close(dw.numpy(), tw.grad.numpy(), dtype, "dweight")
    # accumulate into caller-owned buffers: twice the gradient; False skips an output
    dx2 = tfcore.zeros(x.shape, dtype=dtype)
    for _ in range(2):
        got_dx, got_dw = K.rmsnorm_backward(dy, x, w, rstd, dx=dx2, dweight=False, accumulate=True)
        assert got_dx is dx2 and got_dw is None
    assert_close(dx2.numpy(), 2 * tx.grad.numpy(), dtype, "accumulated dx")
    # without weight: the forward of weight 1, no dweight
    y1, r1 = K.rmsnorm_forward(x, None, 1e-6)
    assert_close(y1.numpy(), torch_rms_norm(tx, None, 1e-6).detach().numpy(), dtype, "y without weight")
    _, dw_none = K.rmsnorm_backward(dy, x, None, r1)
    assert dw_none is None


def test_bfloat16_is_refused_on_the_cpu():
    # The CPU's normalization kernels take f32 and f64 (bf16 runs on CUDA:
    # computed in f32, rounded once); a bf16 x is a dtype error naming both.
    x = tfcore.zeros(2, 4, dtype="float32").bfloat16()
    with pytest.raises(TypeError, match=r"tfc_rmsnorm: x is bf16 \[2,4\]; only f32 and f64 are supported on cpu"):
        F.rms_norm(x, (4,))
    with pytest.raises(TypeError, match="tfc_rmsnorm_forward: x is bf16"):
        K.rmsnorm_forward(x, None, 1e-6, y=tfcore.zeros(2, 4, dtype="float32").bfloat16(), rstd=False)


def test_errors_name_the_function_the_argument_and_the_shapes():
    x = tfcore.zeros(3, 6)
    with pytest.raises(ValueError, match=r"tfc_rmsnorm: weight is \[5\], must be \[6\] \(x is \[3,6\]\)"):
        F.rms_norm(x, (6,), tfcore.zeros(5))
    with pytest.raises(ValueError, match=r"tfc_rmsnorm: weight is \[2,3\], must be \[6\]"):
        F.rms_norm(x, (6,), tfcore.zeros(2, 3))
    for eps in (0.0, -1e-6, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"tfc_rmsnorm: eps is .*, must be finite and > 0"):
            F.rms_norm(x, (6,), None, eps)
    with pytest.raises(TypeError, match=r"tfc_rmsnorm: weight is f64 \[6\], must be f32 like x \[3,6\]"):
        F.rms_norm(x, (6,), tfcore.zeros(6, dtype="float64"))
    with pytest.raises(TypeError, match=r"tfc_rmsnorm: x is i64 \[3,6\]"):
        F.rms_norm(tfcore.tensor(np.zeros((3, 6), dtype=np.int64)), (6,))
    with pytest.raises(ValueError, match="only the last dim can be normalized"):
        F.rms_norm(x, (3, 6))
    with pytest.raises(ValueError, match=r"tfc_rmsnorm_forward: eps is 0, must be finite and > 0"):
        K.rmsnorm_forward(x, None, 0.0)
    with pytest.raises(ValueError, match=r"tfc_rmsnorm_forward: output rstd is \[6\], must be \[3\]"):
        K.rmsnorm_forward(x, rstd=tfcore.zeros(6))
    with pytest.raises(ValueError, match=r"tfc_rmsnorm_backward: rstd is \[2\], must be \[3\]"):
        K.rmsnorm_backward(x, x, None, tfcore.zeros(2))
    with pytest.raises(TypeError, match=r"tfc_rmsnorm_backward: rstd is f64 \[3\], must be f32 like x \[3,6\]"):
        K.rmsnorm_backward(x, x, None, tfcore.zeros(3, dtype="float64"))
