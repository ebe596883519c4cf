"""tfcore.kernels: the explicit forward/backward entry points against torch
autograd, on caller-owned and on allocated outputs, with accumulate."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from tfcore import kernels as K
from helpers import TORCH_DTYPE, assert_close, torch_attention

rng = np.random.default_rng(7)
DTYPES = ["float64", "float32"]


def pair(a, dtype, grad=True):
    return tfcore.tensor(a, dtype=dtype), torch.tensor(a, dtype=TORCH_DTYPE[dtype], requires_grad=grad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm(dtype):
    x, tx = pair(rng.standard_normal((3, 4, 8)), dtype)
    w, tw = pair(rng.standard_normal(8), dtype)
    b, tb = pair(rng.standard_normal(8), dtype)
    y, mean, rstd = K.layernorm_forward(x, w, b, 1e-5)
    ty = TF.layer_norm(tx, (8,), tw, tb, 1e-5)
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "y")
    assert mean.shape == (12,) and rstd.shape == (12,)
    assert_close(mean.numpy(), tx.detach().numpy().reshape(12, 8).mean(1), dtype, "mean")
    dy, tdy = pair(rng.standard_normal((3, 4, 8)), dtype, grad=False)
    ty.backward(tdy)
    dx, dw, db = K.layernorm_backward(dy, x, w, mean, rstd)
    for got, ref, what in ((dx, tx.grad, "dx"), (dw, tw.grad, "dw"), (db, tb.grad, "db")):
        assert_close(got.numpy(), ref.numpy(), dtype, what)
    # accumulate into caller-owned buffers: twice the gradient
    dx2 = tfcore.zeros(x.shape, dtype=dtype)
    for _ in range(2):
        K.layernorm_backward(dy, x, w, mean, rstd, dx=dx2, dweight=False, dbias=False, accumulate=True)
    assert_close(dx2.numpy(), 2 * tx.grad.numpy(), dtype, "accumulated dx")
    _, dw_none, _ = K.layernorm_backward(dy, x, None, mean, rstd)
    assert dw_none is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, log):
    x, tx = pair(rng.standard_normal((4, 6)), dtype)
    y = K.softmax_forward(x, dim=0, log=log)
    ty = (torch.log_softmax if log else torch.softmax)(tx, 0)
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "y")
    dy, tdy = pair(rng.standard_normal((4, 6)), dtype, grad=False)
    ty.backward(tdy)
    assert_close(K.softmax_backward(dy, y, dim=0, log=log).numpy(), tx.grad.numpy(), dtype, "dx")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy(dtype):
    x, tx = pair(rng.standard_normal((7, 5)), dtype)
    t = np.array([0, 4, -100, 2, 2, 1, 3])
    loss, lse = K.cross_entropy_forward(x, tfcore.tensor(t))
    tl = TF.cross_entropy(tx, torch.tensor(t))
    assert loss.shape == () and lse.shape == (7,)
    assert_close(loss.numpy(), tl.detach().numpy(), dtype, "loss")
    assert_close(lse.numpy(), torch.logsumexp(tx, 1).detach().numpy(), dtype, "lse")
    tl.backward(torch.tensor(0.5, dtype=TORCH_DTYPE[dtype]))
    for l in (lse, None):  # with the saved lse and recomputing it
        d = K.cross_entropy_backward(0.5, x, tfcore.tensor(t), l)
        assert_close(d.numpy(), tx.grad.numpy(), dtype, "dlogits")


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding(dtype):
    table, tt = pair(rng.standard_normal((6, 3)), dtype)
    ids = np.array([[1, 5, 1], [0, 1, 2]])
    out = K.embedding_forward(table, tfcore.tensor(ids))
    to = TF.embedding(torch.tensor(ids), tt)
    assert_close(out.numpy(), to.detach().numpy(), dtype, "out")
    dout, tdout = pair(rng.standard_normal((2, 3, 3)), dtype, grad=False)
    to.backward(tdout)
    assert_close(K.embedding_backward(dout, tfcore.tensor(ids), num_embeddings=6).numpy(), tt.grad.numpy(),
                 dtype, "dtable")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal,T,S", [(True, 5, 5), (False, 3, 6), (True, 2, 6)])
def test_attention(dtype, causal, T, S):
    q, tq = pair(rng.standard_normal((2, 2, T, 4)), dtype)
    k, tk = pair(rng.standard_normal((2, 2, S, 4)), dtype)
    v, tv = pair(rng.standard_normal((2, 2, S, 3)), dtype)
    out, lse = K.attention_forward(q, k, v, causal=causal)
    to = torch_attention(tq, tk, tv, causal=causal)
    assert out.shape == (2, 2, T, 3) and lse.shape == (2, 2, T)
    assert_close(out.numpy(), to.detach().numpy(), dtype, "out")
    dout, tdout = pair(rng.standard_normal((2, 2, T, 3)), dtype, grad=False)
    to.backward(tdout)
    dq, dk, dv = K.attention_backward(dout, q, k, v, out, lse, causal=causal)
    for got, ref, what in ((dq, tq.grad, "dq"), (dk, tk.grad, "dk"), (dv, tv.grad, "dv")):
        assert_close(got.numpy(), ref.numpy(), dtype, what)
    _, dk_only, _ = K.attention_backward(dout, q, k, v, out, lse, causal=causal, dq=False, dv=False)
    assert_close(dk_only.numpy(), tk.grad.numpy(), dtype, "dk alone")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    x, tx = pair(rng.standard_normal((3, 5)) * 3, dtype)
    y = K.gelu_forward(x, approximate)
    ty = TF.gelu(tx, approximate=approximate)
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "y")
    dy, tdy = pair(rng.standard_normal((3, 5)), dtype, grad=False)
    ty.backward(tdy)
    assert_close(K.gelu_backward(dy, x, approximate).numpy(), tx.grad.numpy(), dtype, "dx")


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_backward(dtype):
    a, ta = pair(rng.standard_normal((2, 3, 4)), dtype)
    b, tb = pair(rng.standard_normal((4, 5)), dtype)
    dout, tdout = pair(rng.standard_normal((2, 3, 5)), dtype, grad=False)
    (ta @ tb).backward(tdout)
    da, db = K.matmul_backward(dout, a, b)
    assert_close(da.numpy(), ta.grad.numpy(), dtype, "da")
    assert_close(db.numpy(), tb.grad.numpy(), dtype, "db")


def test_kernel_errors_are_exceptions_naming_the_function():
    x = tfcore.zeros(3, 4, dtype="float64")
    with pytest.raises(ValueError, match="tfc_layernorm_forward"):
        K.layernorm_forward(x, y=tfcore.zeros(4, 3, dtype="float64"))
    with pytest.raises(TypeError, match="tfc_softmax_forward"):
        K.softmax_forward(x, y=tfcore.zeros(3, 4, dtype="float32"))
    with pytest.raises(ValueError, match="approximate"):
        K.gelu_forward(x, "fast")
    with pytest.raises(TypeError):
        K.gelu_forward(x, y=np.zeros((3, 4)))
