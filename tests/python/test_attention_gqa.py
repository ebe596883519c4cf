"""Grouped-query attention and the sliding window (tfcore.attention, tfcore.kernels.attention_forward/backward,
scaled_dot_product_attention(enable_gqa=True)) against PyTorch 1.13 written the way Hugging Face's Llama, Mistral
and Qwen2 write their eager attention: repeat_kv by expand + reshape, the causal and sliding-window mask built
explicitly from the query positions (cache_position) and the key positions, softmax in f32 or f64, matmul.
Values and gradients of q, k and v, f64 to 1e-10 and f32 to 1e-5; the errors and their messages."""
import math

import numpy as np
import pytest
import torch

import tfcore
from tfcore import kernels as K
from helpers import TORCH_DTYPE, assert_close

rng = np.random.default_rng(35)
DTYPES = ["float64", "float32"]


def repeat_kv(hidden_states, n_rep):
    """transformers' repeat_kv: [B, Hkv, S, D] -> [B, Hkv * n_rep, S, D], kv head j serving heads j*n_rep .. + n_rep - 1."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def hf_attention(q, k, v, scale, causal, window):
    """Eager attention as HF writes it. Queries are the last T of S positions (cache_position = S - T .. S - 1);
    the causal mask keeps kv_idx <= q_idx, the sliding window also kv_idx > q_idx - window
    (masking_utils.sliding_window_overlay)."""
    T, S = q.shape[-2], k.shape[-2]
    n_rep = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    if causal:
        q_idx = torch.arange(S - T, S)[:, None]
        kv_idx = torch.arange(S)[None, :]
        keep = kv_idx <= q_idx
        if window:
            keep = keep & (kv_idx > q_idx - window)
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v)


def make(shape, dtype):
    a = rng.uniform(-1.5, 1.5, shape)
    return tfcore.tensor(a, dtype=dtype), torch.tensor(a, dtype=TORCH_DTYPE[dtype], requires_grad=True)


# (B, H, Hkv, T, S, D, Dv, causal, window): multi-query, grouped, Hkv = H; windows inside a 64-key tile and across
# tiles; T < S as a KV cache holds it (queries at positions S - T .. S - 1); one query against a long cache.
CASES = [
    (2, 4, 1, 13, 13, 8, 8, True, None),
    (2, 4, 2, 13, 13, 8, 8, True, None),
    (1, 4, 4, 13, 13, 8, 6, True, None),
    (1, 6, 2, 9, 20, 8, 8, False, None),
    (2, 4, 2, 70, 70, 16, 16, True, 9),
    (1, 4, 1, 30, 100, 16, 12, True, 40),
    (1, 8, 2, 1, 130, 16, 16, True, 64),
    (1, 4, 2, 90, 90, 8, 8, True, 1),
]


def _ids(c):
    return "B%d-H%d-Hkv%d-T%d-S%d-%s-w%s" % (c[0], c[1], c[2], c[3], c[4], "causal" if c[7] else "full", c[8])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_functional_attention_matches_hf(dtype, case):
    B, H, Hkv, T, S, D, Dv, causal, window = case
    q, tq = make((B, H, T, D), dtype)
    k, tk = make((B, Hkv, S, D), dtype)
    v, tv = make((B, Hkv, S, Dv), dtype)
    for t in (q, k, v):
        t.requires_grad = True
    out = tfcore.attention(q, k, v, causal=causal, window=window)
    tout = hf_attention(tq, tk, tv, 1.0 / math.sqrt(D), causal, window)
    assert out.shape == (B, H, T, Dv)
    assert_close(out.numpy(), tout.detach().numpy(), dtype, "out")
    r = rng.uniform(-1, 1, (B, H, T, Dv))
    (out * tfcore.tensor(r, dtype=dtype)).sum().backward()
    (tout * torch.tensor(r, dtype=TORCH_DTYPE[dtype])).sum().backward()
    for got, ref, what in ((q, tq, "dq"), (k, tk, "dk"), (v, tv, "dv")):
        assert got.grad.shape == tuple(ref.shape), what
        assert_close(got.grad.numpy(), ref.grad.numpy(), dtype, what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES[:2] + CASES[4:7], ids=_ids)
def test_kernels_attention_forward_backward_match_hf(dtype, case):
    B, H, Hkv, T, S, D, Dv, causal, window = case
    q, tq = make((B, H, T, D), dtype)
    k, tk = make((B, Hkv, S, D), dtype)
    v, tv = make((B, Hkv, S, Dv), dtype)
    out, lse = K.attention_forward(q, k, v, causal=causal, scale=0.3, window=window)
    tout = hf_attention(tq, tk, tv, 0.3, causal, window)
    assert_close(out.numpy(), tout.detach().numpy(), dtype, "out")
    assert lse.shape == (B, H, T)
    dout, tdout = make((B, H, T, Dv), dtype)
    tout.backward(tdout.detach())
    dq, dk, dv = K.attention_backward(dout, q, k, v, out, lse, causal=causal, scale=0.3, window=window)
    assert dk.shape == (B, Hkv, S, D) and dv.shape == (B, Hkv, S, Dv)
    for got, ref, what in ((dq, tq.grad, "dq"), (dk, tk.grad, "dk"), (dv, tv.grad, "dv")):
        assert_close(got.numpy(), ref.numpy(), dtype, what)
    # accumulate into caller-owned kv-head buffers: twice the group sums
    dk2 = tfcore.zeros(k.shape, dtype=dtype)
    for _ in range(2):
        K.attention_backward(dout, q, k, v, out, lse, causal=causal, scale=0.3, window=window, dq=False, dk=dk2,
                             dv=False, accumulate=True)
    assert_close(dk2.numpy(), 2 * tk.grad.numpy(), dtype, "accumulated dk")


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_enable_gqa_fused_and_explicit(dtype):
    B, H, Hkv, T, D = 2, 6, 3, 11, 8
    q, tq = make((B, H, T, D), dtype)
    k, tk = make((B, Hkv, T, D), dtype)
    v, tv = make((B, Hkv, T, D), dtype)
    for t in (q, k, v):
        t.requires_grad = True
    # is_causal with T == S: the fused op, grouped heads read in place
    out = tfcore.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    tout = hf_attention(tq, tk, tv, 1.0 / math.sqrt(D), True, None)
    assert_close(out.numpy(), tout.detach().numpy(), dtype, "fused out")
    out.sum().backward()
    tout.sum().backward()
    for got, ref, what in ((q, tq, "dq"), (k, tk, "dk"), (v, tv, "dv")):
        assert_close(got.grad.numpy(), ref.grad.numpy(), dtype, what)
    # a bool mask: the explicit path on repeated heads (the same band as a window of 4)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    band = (j <= i) & (j > i - 4)
    out2 = tfcore.scaled_dot_product_attention(q, k, v, attn_mask=tfcore.tensor(band), enable_gqa=True)
    tout2 = hf_attention(tq, tk, tv, 1.0 / math.sqrt(D), True, 4)
    assert_close(out2.numpy(), tout2.detach().numpy(), dtype, "explicit out")
    assert_close(tfcore.attention(q, k, v, window=4).numpy(), tout2.detach().numpy(), dtype, "window 4")


def test_window_and_heads_errors():
    q = tfcore.zeros((1, 4, 5, 8))
    k3, v3 = tfcore.zeros((1, 3, 5, 8)), tfcore.zeros((1, 3, 5, 8))
    k, v = tfcore.zeros((1, 2, 5, 8)), tfcore.zeros((1, 2, 5, 8))
    with pytest.raises(ValueError, match=r"k's 3 heads \(dim 1\) must divide q's 4") as e:
        tfcore.attention(q, k3, v3)
    assert isinstance(e.value, tfcore.ShapeError)
    with pytest.raises(ValueError, match=r"k and v must have the same heads"):
        tfcore.attention(q, k, tfcore.zeros((1, 1, 5, 8)))
    with pytest.raises(ValueError, match=r"opts->window is -2, must be >= 0") as e:
        tfcore.attention(q, k, v, window=-2)
    assert isinstance(e.value, tfcore.InvalidArgumentError)
    with pytest.raises(ValueError, match=r"opts->window is 3 but causal is 0; a sliding window needs causal"):
        tfcore.attention(q, k, v, causal=False, window=3)
    with pytest.raises(ValueError, match=r"tfc_attention_forward_ex: opts->window is -1"):
        K.attention_forward(q, k, v, window=-1)
    with pytest.raises(TypeError, match="window must be an int"):
        tfcore.attention(q, k, v, window=2.5)
    with pytest.raises(ValueError, match="enable_gqa"):
        tfcore.scaled_dot_product_attention(q, k3, v3, enable_gqa=True)
