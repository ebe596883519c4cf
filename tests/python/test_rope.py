"""Rotary position embedding (tfcore.functional.rope, rope_inv_freq, kernels.rope_forward/backward) against
PyTorch 1.13 written the way transformers writes it: modeling_rope_utils' inverse frequencies for each
rope_scaling type, LlamaRotaryEmbedding's cos/sin from inv_freq and position_ids, and apply_rotary_pos_emb with
rotate_half; in float32 (transformers' angles: the float32 product inv_freq · position) and float64, gradients
through torch autograd, positions with a KV cache's offset and per sequence, q/k as views of a fused projection."""
import math

import numpy as np
import pytest
import torch

import tfcore
from tfcore import functional as F
from tfcore import kernels as K
from helpers import TORCH_DTYPE, rel_err

rng = np.random.default_rng(35)
DTYPES = ["float64", "float32"]
# float64: the formula's rounding only; float32: the same f32 angles on both sides, cosf/sinf against torch's
# vectorised cos/sin (~1 ulp) and the rounding of four products, relative to the values' scale.
TOL = {"float64": 1e-13, "float32": 2e-6}


# ---- transformers, written out in torch ----------------------------------------------------------------------


def hf_inv_freq(head_dim, theta, rope_scaling=None, max_position_embeddings=None, seq_len=None,
                dtype=torch.float32):
    """modeling_rope_utils' _compute_{default,linear_scaling,dynamic_ntk,llama3}_parameters, in dtype
    (float32 as transformers; float64 for the f64 check)."""
    scaling = dict(rope_scaling or {})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    dim, base = head_dim, theta
    if kind == "dynamic":
        factor = scaling["factor"]
        seq_len = seq_len if seq_len is not None and seq_len > max_position_embeddings else max_position_embeddings
        base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim))
    if kind == "linear":
        inv_freq = inv_freq / scaling["factor"]
    if kind == "llama3":
        factor = scaling["factor"]
        low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq


def hf_cos_sin(inv_freq, position_ids, dtype):
    """LlamaRotaryEmbedding.forward: angles in inv_freq's dtype (float32 in transformers), cos/sin cast to x's."""
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(inv_freq.dtype)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin)


def assert_close(got, ref, dtype, what):
    err = rel_err(got, ref)
    assert err <= TOL[dtype], "%s: error %.3g > %.1g" % (what, err, TOL[dtype])


# ---- forward and backward ---------------------------------------------------------------------------------------

B, T, H, D = 2, 6, 3, 16

POSITIONS = {
    # decoding after a 7-token prompt (a KV cache): position_ids [1, T] starting at the past length
    "kv_offset": lambda: np.arange(7, 7 + T)[None, :],
    # per sequence: packed / left-padded batches
    "per_sequence": lambda: np.stack([np.arange(3, 3 + T), np.array([0, 1, 2, 0, 1, 2])]),
    # [T], shared by the batch
    "shared_1d": lambda: np.arange(T) * 5,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(POSITIONS))
def test_rope_on_projection_views_matches_transformers(dtype, kind):
    """q and k are [B,H,T,D] views of a fused [B,T,3·H·D] projection (no copy); both frameworks differentiate
    Σ w_q ⊙ rope(q) + w_k ⊙ rope(k) back to the projection."""
    pos = POSITIONS[kind]()
    qkv = rng.standard_normal((B, T, 3 * H * D))
    wq, wk = rng.standard_normal((B, H, T, D)), rng.standard_normal((B, H, T, D))
    tdt = TORCH_DTYPE[dtype]
    angle_dt = "float64" if dtype == "float64" else "float32"
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    inv = F.rope_inv_freq(D, theta=500000.0, rope_scaling=scaling, dtype=angle_dt)

    x = tfcore.tensor(qkv, dtype=dtype, requires_grad=True)
    heads = x.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # [3, B, H, T, D]
    q, k = heads[0], heads[1]
    assert not q.is_contiguous()
    p = tfcore.tensor(pos)
    yq, yk = F.rope(q, p, inv), F.rope(k, p, inv)
    ((yq * tfcore.tensor(wq, dtype=dtype)).sum() + (yk * tfcore.tensor(wk, dtype=dtype)).sum()).backward()

    tx = torch.tensor(qkv, dtype=tdt, requires_grad=True)
    theads = tx.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
    position_ids = torch.tensor(pos)
    if position_ids.ndim == 1:
        position_ids = position_ids[None, :]
    tinv = torch.tensor(inv.numpy())  # the same frequencies, in the angle dtype
    cos, sin = hf_cos_sin(tinv, position_ids, tdt)
    tq, tk = hf_apply_rotary_pos_emb(theads[0], cos, sin), hf_apply_rotary_pos_emb(theads[1], cos, sin)
    ((tq * torch.tensor(wq, dtype=tdt)).sum() + (tk * torch.tensor(wk, dtype=tdt)).sum()).backward()

    assert_close(yq.numpy(), tq.detach().numpy(), dtype, "rope(q)")
    assert_close(yk.numpy(), tk.detach().numpy(), dtype, "rope(k)")
    assert_close(x.grad.numpy(), tx.grad.numpy(), dtype, "gradient of the projection")


@pytest.mark.parametrize("dtype", DTYPES)
def test_explicit_kernels_equal_the_graph_op(dtype):
    x = tfcore.tensor(rng.standard_normal((B, H, T, D)), dtype=dtype)
    dy = tfcore.tensor(rng.standard_normal((B, H, T, D)), dtype=dtype)
    p = tfcore.tensor(np.arange(11, 11 + T))
    inv = F.rope_inv_freq(D, dtype="float64" if dtype == "float64" else "float32")
    y = K.rope_forward(x, p, inv)
    np.testing.assert_array_equal(y.numpy(), F.rope(x, p, inv).numpy())
    dx = K.rope_backward(dy, p, inv)
    xg = x.detach().requires_grad_()
    F.rope(xg, p, inv).backward(dy)
    np.testing.assert_array_equal(dx.numpy(), xg.grad.numpy())
    # caller-owned output, accumulated twice
    acc = tfcore.zeros((B, H, T, D), dtype=dtype)
    K.rope_backward(dy, p, inv, dx=acc, accumulate=True)
    K.rope_backward(dy, p, inv, dx=acc, accumulate=True)
    np.testing.assert_allclose(acc.numpy(), 2 * dx.numpy(), rtol=1e-6)
    # the backward is the forward's adjoint: <rope(x), dy> = <x, rope_backward(dy)>
    lhs = float((y.numpy().astype(np.float64) * dy.numpy()).sum())
    rhs = float((x.numpy().astype(np.float64) * dx.numpy()).sum())
    assert abs(lhs - rhs) <= TOL[dtype] * 100 * max(1.0, abs(lhs))


def test_decode_step_equals_the_full_sequence_rows():
    """A KV cache's step: the last token alone at position T-1 gets the row the whole sequence gives it."""
    x = tfcore.tensor(rng.standard_normal((1, H, T, D)), dtype="float32")
    inv = F.rope_inv_freq(D)
    full = F.rope(x, np.arange(T), inv).numpy()
    last = F.rope(x[:, :, T - 1:], [T - 1], inv).numpy()
    np.testing.assert_array_equal(last, full[:, :, T - 1:])


def test_double_backward_matches_torch():
    """create_graph through rope: H·v of Σ w ⊙ rope(x)² (the backward of the backward is the forward)."""
    xa, wa, va = (rng.standard_normal((B, H, T, D)) for _ in range(3))
    pos = POSITIONS["per_sequence"]()
    inv = F.rope_inv_freq(D, theta=100.0, dtype="float64")
    x = tfcore.tensor(xa, dtype="float64", requires_grad=True)
    y = F.rope(x, tfcore.tensor(pos), inv)
    (g,) = tfcore.autograd.grad((y * y * tfcore.tensor(wa, dtype="float64")).sum(), [x], create_graph=True)
    (hv,) = tfcore.autograd.grad((g * tfcore.tensor(va, dtype="float64")).sum(), [x])

    tx = torch.tensor(xa, requires_grad=True)
    cos, sin = hf_cos_sin(torch.tensor(inv.numpy()), torch.tensor(pos), torch.float64)
    ty = hf_apply_rotary_pos_emb(tx, cos, sin)
    (tg,) = torch.autograd.grad((ty * ty * torch.tensor(wa)).sum(), [tx], create_graph=True)
    (thv,) = torch.autograd.grad((tg * torch.tensor(va)).sum(), [tx])
    assert_close(g.detach().numpy(), tg.detach().numpy(), "float64", "gradient")
    assert_close(hv.numpy(), thv.numpy(), "float64", "Hessian-vector product")


# ---- inverse frequencies ---------------------------------------------------------------------------------------

SCALINGS = [
    ("default", 10000.0, None, None, None),
    ("linear", 10000.0, {"type": "linear", "factor": 4.0}, None, None),
    ("dynamic_past", 10000.0, {"rope_type": "dynamic", "factor": 2.0}, 2048, 5000),
    ("dynamic_within", 10000.0, {"rope_type": "dynamic", "factor": 2.0}, 2048, 1000),
    ("llama3_8b", 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}, 131072, None),
]


@pytest.mark.parametrize("name,theta,scaling,max_pos,seq_len", SCALINGS, ids=[s[0] for s in SCALINGS])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_inv_freq_matches_modeling_rope_utils(name, theta, scaling, max_pos, seq_len, head_dim):
    got64 = F.rope_inv_freq(head_dim, theta, scaling, max_pos, seq_len or 0, dtype="float64").numpy()
    ref64 = hf_inv_freq(head_dim, theta, scaling, max_pos, seq_len, torch.float64).numpy()
    np.testing.assert_allclose(got64, ref64, rtol=1e-14, atol=0)
    # transformers' own float32 arithmetic: pow and the divisions rounded to f32 on the way (a few ulp)
    got32 = F.rope_inv_freq(head_dim, theta, scaling, max_pos, seq_len or 0).numpy()
    assert got32.dtype == np.float32
    ref32 = hf_inv_freq(head_dim, theta, scaling, max_pos, seq_len, torch.float32).numpy()
    np.testing.assert_allclose(got32, ref32, rtol=1e-6, atol=0)
    if name == "llama3_8b":  # every band of llama3 is hit
        wavelen = 2 * math.pi / hf_inv_freq(head_dim, theta, dtype=torch.float64).numpy()
        assert (wavelen < 2048).any() and (wavelen > 8192).any() and ((wavelen >= 2048) & (wavelen <= 8192)).any()


# ---- bad input ---------------------------------------------------------------------------------------------------


def test_bad_input_raises_the_right_exception():
    x = tfcore.tensor(rng.standard_normal((1, 2, 3, 4)), dtype="float32")
    inv = F.rope_inv_freq(4)
    p = tfcore.tensor([0, 1, 2])
    with pytest.raises(tfcore.ShapeError, match="must be even"):
        F.rope(tfcore.tensor(rng.standard_normal((1, 2, 3, 5)), dtype="float32"), p, F.rope_inv_freq(6))
    with pytest.raises(tfcore.ShapeError, match="must be 4-D"):
        F.rope(tfcore.tensor(rng.standard_normal((2, 3, 4)), dtype="float32"), p, inv)
    with pytest.raises(TypeError, match="positions must be i64"):
        F.rope(x, tfcore.tensor([0, 1, 2], dtype="int32"), inv)
    with pytest.raises(TypeError, match="inv_freq is f64"):
        F.rope(x, p, F.rope_inv_freq(4, dtype="float64"))
    with pytest.raises(ValueError, match="positions holds -1 at flat index 1"):
        F.rope(x, [3, -1, 0], inv)
    with pytest.raises(ValueError, match=r"positions must be \[T\], \[1,T\] or \[B,T\]"):
        F.rope(x, [0, 1], inv)
    trainable = F.rope_inv_freq(4).requires_grad_()
    with pytest.raises(ValueError, match="inv_freq .* requires grad"):
        F.rope(x.detach().requires_grad_(), p, trainable)
    with pytest.raises(TypeError):
        F.rope(x.numpy(), p, inv)
    with pytest.raises(TypeError, match="positions must be integers"):
        F.rope(x, [0.5, 1.0, 2.0], inv)
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        F.rope_inv_freq(8, rope_scaling={"rope_type": "yarn", "factor": 2.0})
    with pytest.raises(KeyError, match="needs 'factor'"):
        F.rope_inv_freq(8, rope_scaling={"rope_type": "linear"})
    with pytest.raises(ValueError, match="'beta_fast' is not used"):
        F.rope_inv_freq(8, rope_scaling={"rope_type": "linear", "factor": 2.0, "beta_fast": 32.0})
    with pytest.raises(ValueError, match="config->factor is 0"):
        F.rope_inv_freq(8, rope_scaling={"rope_type": "linear", "factor": 0.0})
    with pytest.raises(ValueError, match="head_dim is 7"):
        F.rope_inv_freq(7)
    with pytest.raises(ValueError, match="needs max_position_embeddings"):
        F.rope_inv_freq(8, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
