"""SiLU and SwiGLU against PyTorch 1.13 written as Hugging Face writes the
Llama MLP (LlamaMLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x))
with act_fn = F.silu), in float64 and float32 with gradients, in both
layouts: gate and up from two GEMMs, and one GEMM into [.., 2F] with the two
weights stacked (gate first). Also the explicit kernels (tfcore.kernels),
nn.SiLU, large inputs and the errors, with their messages."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from tfcore import kernels as K
from helpers import TORCH_DTYPE, assert_close

DTYPES = ["float64", "float32"]
rng = np.random.default_rng(35)


def pair(a, dtype, grad=True):
    return (tfcore.tensor(a, dtype=dtype, requires_grad=grad),
            torch.tensor(a, dtype=TORCH_DTYPE[dtype], requires_grad=grad))


def hf_llama_mlp(x, gate_w, up_w, down_w):
    """transformers' LlamaMLP.forward (pretraining_tp = 1), with nn.Linear(bias=False) spelled as F.linear."""
    return TF.linear(TF.silu(TF.linear(x, gate_w)) * TF.linear(x, up_w), down_w)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["two_gemms", "one_gemm"])
def test_llama_mlp_matches_hf(dtype, layout):
    B, T, C, F = 2, 5, 8, 12
    x, tx = pair(rng.standard_normal((B, T, C)), dtype)
    wg, twg = pair(rng.standard_normal((F, C)) / np.sqrt(C) * 3, dtype)
    wu, twu = pair(rng.standard_normal((F, C)) / np.sqrt(C), dtype)
    wd, twd = pair(rng.standard_normal((C, F)) / np.sqrt(F), dtype)
    seed = rng.standard_normal((B, T, C))
    ref = hf_llama_mlp(tx, twg, twu, twd)
    (ref * torch.tensor(seed, dtype=TORCH_DTYPE[dtype])).sum().backward()
    if layout == "two_gemms":
        h = tfcore.swiglu(tfcore.linear(x, wg), tfcore.linear(x, wu))
        out = tfcore.linear(h, wd)
    else:
        w, tw = pair(np.concatenate([wg.numpy(), wu.numpy()], 0), dtype)
        gate_up = tfcore.linear(x, w)
        assert gate_up.shape == (B, T, 2 * F)
        out = tfcore.linear(tfcore.swiglu(gate_up), wd)
    assert_close(out.numpy(), ref.detach().numpy(), dtype, "out")
    (out * tfcore.tensor(seed, dtype=dtype)).sum().backward()
    assert_close(x.grad.numpy(), tx.grad.numpy(), dtype, "dx")
    assert_close(wd.grad.numpy(), twd.grad.numpy(), dtype, "d down_proj")
    if layout == "two_gemms":
        assert_close(wg.grad.numpy(), twg.grad.numpy(), dtype, "d gate_proj")
        assert_close(wu.grad.numpy(), twu.grad.numpy(), dtype, "d up_proj")
    else:
        want = np.concatenate([twg.grad.numpy(), twu.grad.numpy()], 0)
        assert_close(w.grad.numpy(), want, dtype, "d [gate_proj; up_proj]")


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_matches_torch_including_far_out(dtype):
    a = np.concatenate([rng.standard_normal(40) * 6, [0.0, 30, -30, 88, -88, 100, -100, 1000, -1000, 1e-5]])
    x, tx = pair(a, dtype)
    y, ty = tfcore.silu(x), TF.silu(tx)
    assert np.all(np.isfinite(y.numpy()))
    assert_close(y.numpy(), ty.detach().numpy(), dtype, "silu")
    w = rng.standard_normal(a.shape)
    (y * tfcore.tensor(w, dtype=dtype)).sum().backward()
    (ty * torch.tensor(w, dtype=TORCH_DTYPE[dtype])).sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    assert_close(x.grad.numpy(), tx.grad.numpy(), dtype, "dsilu")
    m = tfcore.nn.SiLU()
    assert_close(m(x).numpy(), ty.detach().numpy(), dtype, "nn.SiLU")
    assert tfcore.nn.functional.silu is tfcore.silu


@pytest.mark.parametrize("dtype", DTYPES)
def test_explicit_kernels_both_layouts_and_accumulate(dtype):
    N, F = 6, 7
    gu = rng.standard_normal((N, 2 * F)) * 3
    tgu = torch.tensor(gu, dtype=TORCH_DTYPE[dtype], requires_grad=True)
    tg, tu = tgu.chunk(2, dim=-1)
    ty = TF.silu(tg) * tu
    dy_np = rng.standard_normal((N, F))
    ty.backward(torch.tensor(dy_np, dtype=TORCH_DTYPE[dtype]))
    dy = tfcore.tensor(dy_np, dtype=dtype)
    want_dg, want_du = tgu.grad.numpy()[:, :F], tgu.grad.numpy()[:, F:]
    # two separate tensors
    g, u = tfcore.tensor(gu[:, :F], dtype=dtype), tfcore.tensor(gu[:, F:], dtype=dtype)
    assert_close(K.swiglu_forward(g, u).numpy(), ty.detach().numpy(), dtype, "forward")
    dg, du = K.swiglu_backward(dy, g, u)
    assert_close(dg.numpy(), want_dg, dtype, "dgate")
    assert_close(du.numpy(), want_du, dtype, "dup")
    # the fused form: views of one tensor in, one [N, 2F] gradient out
    x = tfcore.tensor(gu, dtype=dtype)
    assert_close(K.swiglu_fused_forward(x).numpy(), ty.detach().numpy(), dtype, "fused forward")
    dx = K.swiglu_fused_backward(dy, x)
    assert dx.shape == (N, 2 * F)
    assert_close(dx.numpy(), tgu.grad.numpy(), dtype, "fused backward")
    # caller-owned views as outputs: the halves of one buffer, accumulated twice
    buf = tfcore.zeros((N, 2 * F), dtype=dtype)
    for _ in range(2):
        K.swiglu_backward(dy, x[:, :F], x[:, F:], dgate=buf[:, :F], dup=buf[:, F:], accumulate=True)
    assert_close(buf.numpy(), 2 * tgu.grad.numpy(), dtype, "accumulated into the halves")
    # a gradient not asked for is neither computed nor returned
    dg_only, none = K.swiglu_backward(dy, g, u, dup=False)
    assert none is None
    assert_close(dg_only.numpy(), want_dg, dtype, "dgate alone")


def test_graph_door_equals_explicit_door_f32():
    gu = tfcore.tensor(rng.standard_normal((64, 96)) * 4, dtype="float32")
    a = tfcore.swiglu(gu).numpy()
    b = tfcore.swiglu(gu[:, :48], gu[:, 48:]).numpy()
    c = K.swiglu_fused_forward(gu).numpy()
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_errors_name_function_argument_and_shapes():
    g = tfcore.zeros((3, 5), dtype="float64")
    with pytest.raises(tfcore.ShapeError, match=r"up is \[3,4\], must be \[3,5\] \(gate is \[3,5\]\)"):
        tfcore.swiglu(g, tfcore.zeros((3, 4), dtype="float64"))
    with pytest.raises(tfcore.ShapeError, match=r"tfc_swiglu_fused: gate_up is \[3,5\]; its last dim 5 must be even"):
        tfcore.swiglu(g)
    with pytest.raises(tfcore.DtypeError, match=r"up is f32 \[3,5\], must be f64 like gate"):
        tfcore.swiglu(g, tfcore.zeros((3, 5), dtype="float32"))
    with pytest.raises(tfcore.DtypeError, match=r"tfc_silu: x is i64"):
        tfcore.silu(tfcore.tensor(np.arange(4)))
    with pytest.raises(TypeError, match=r"tfcore.swiglu: up must be a Tensor, got ndarray"):
        tfcore.swiglu(g, np.zeros((3, 5)))
    with pytest.raises(tfcore.ShapeError, match=r"swiglu_fused_forward: gate_up is \[3, 5\]"):
        K.swiglu_fused_forward(g)
    with pytest.raises(tfcore.ShapeError, match=r"tfc_swiglu_forward: output out is \[3,4\], must be \[3,5\]"):
        K.swiglu_forward(g, g, out=tfcore.zeros((3, 4), dtype="float64"))
    buf = tfcore.zeros((3, 10), dtype="float64")
    with pytest.raises(tfcore.InvalidArgumentError, match=r"output dgate \[3,5\] overlaps output dup \[3,5\]"):
        K.swiglu_backward(g, g, g, dgate=buf[:, :5], dup=buf[:, 4:9])
    with pytest.raises(tfcore.ShapeError, match="odd|even"):
        tfcore.nn.functional.swiglu(tfcore.zeros((2, 3)))
