"""Semantics that used to differ from PyTorch's (issue #16, "Semantics that
differ"): scaled_dot_product_attention's signature and defaults, the
ignore_index default (-100) in GPT's loss as in cross_entropy, sampling
refusing a 2-D input, None or a wrong type as an operand (TypeError, never a
NaN), and a generate callback's exception coming out of generate unchanged.
References: torch 1.13 in float64 (its math for sdpa, written out here since
1.13 has no F.scaled_dot_product_attention) and hand-known values."""
import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import rel_err


def torch_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """torch 2.x's documented reference implementation of F.scaled_dot_product_attention."""
    L, S = q.size(-2), k.size(-2)
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        bias.masked_fill_(torch.ones(L, S, dtype=torch.bool).tril(diagonal=0).logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            bias = bias + attn_mask
    w = torch.softmax(q @ k.transpose(-2, -1) * scale + bias, dim=-1)
    return w @ v


def _pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    return tfcore.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def test_sdpa_signature_is_torch_s():
    params = inspect.signature(tfcore.functional.scaled_dot_product_attention).parameters
    assert list(params)[:7] == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"]
    assert params["attn_mask"].default is None and params["dropout_p"].default == 0.0
    assert params["is_causal"].default is False and params["scale"].default is None
    assert tfcore.scaled_dot_product_attention is tfcore.functional.scaled_dot_product_attention


@pytest.mark.parametrize("case", ["default", "causal", "causal_T_ne_S", "bool_mask", "float_mask", "scale", "3d"])
def test_sdpa_matches_torch_values_and_grads(case):
    B, H, T, S, D = 2, 3, 5, 5, 4
    if case == "causal_T_ne_S":
        T, S = 3, 6
    kw = {}
    qs, ks = (B, H, T, D), (B, H, S, D)
    if case == "3d":
        qs, ks = (B, T, D), (B, S, D)
    (q, tq), (k, tk), (v, tv) = _pair(qs, 1), _pair(ks, 2), _pair(ks, 3)
    tkw = {}
    if case.startswith("causal"):
        kw = tkw = {"is_causal": True}
    elif case == "bool_mask":
        m = np.random.default_rng(4).random((T, S)) > 0.3
        m[:, 0] = True  # no fully masked row (NaN in both)
        kw, tkw = {"attn_mask": tfcore.tensor(m)}, {"attn_mask": torch.tensor(m)}
    elif case == "float_mask":
        m = np.random.default_rng(5).standard_normal((B, 1, T, S))
        kw, tkw = {"attn_mask": tfcore.tensor(m)}, {"attn_mask": torch.tensor(m)}
    elif case == "scale":
        kw = tkw = {"scale": 0.37}
    out = tfcore.functional.scaled_dot_product_attention(q, k, v, **kw)
    ref = torch_sdpa(tq, tk, tv, **tkw)
    assert rel_err(out.numpy(), ref.detach().numpy()) < 1e-12
    g = np.random.default_rng(6).standard_normal(ref.shape)
    out.backward(tfcore.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in ((q, tq), (k, tk), (v, tv)):
        assert rel_err(a.grad.numpy(), b.grad.numpy()) < 1e-11


def test_sdpa_default_is_not_causal():
    """The old alias defaulted to causal=True; torch's default attends everywhere."""
    (q, tq), (k, tk), (v, tv) = _pair((1, 2, 4, 3), 7), _pair((1, 2, 4, 3), 8), _pair((1, 2, 4, 3), 9)
    with tfcore.no_grad():
        out = tfcore.scaled_dot_product_attention(q, k, v)
    full = torch.softmax(tq @ tk.transpose(-2, -1) / math.sqrt(3), -1) @ tv
    assert rel_err(out.numpy(), full.detach().numpy()) < 1e-12


def test_sdpa_dropout_and_errors():
    q = tfcore.tensor(np.ones((1, 1, 4, 2)))
    with tfcore.no_grad():
        out = tfcore.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        # all scores equal: weights 1/4, kept ones scaled by 2, so each output is (kept count)/2 · 1
        vals = out.numpy()[0, 0, :, 0]
        assert all(abs(x * 2 - round(x * 2)) < 1e-12 for x in vals)
        with pytest.raises(ValueError, match="not both"):
            tfcore.scaled_dot_product_attention(q, q, q, attn_mask=tfcore.tensor(np.ones((4, 4), bool)),
                                                is_causal=True)
        with pytest.raises(ValueError, match="dropout_p"):
            tfcore.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
        with pytest.raises(TypeError, match="key"):
            tfcore.scaled_dot_product_attention(q, None, q)


def test_gpt_loss_skips_ignore_index_minus_100():
    cfg = tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=8, vocab_size=11, dtype="float64")
    model = tfcore.GPT(cfg, seed=3)
    idx = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    tg = np.array([[2, -100, 4, 5], [-100, 7, 8, -100]])
    with tfcore.no_grad():
        logits, loss = model(idx, tg)
    ref = TF.cross_entropy(torch.tensor(logits.numpy()).reshape(8, 11), torch.tensor(tg).reshape(-1))
    assert abs(loss.item() - ref.item()) < 1e-12
    # the same as tfcore.cross_entropy's default
    with tfcore.no_grad():
        assert abs(tfcore.cross_entropy(logits.reshape(8, 11), tfcore.tensor(tg.reshape(-1))).item() - ref.item()) < 1e-12
    with pytest.raises(ValueError, match="-1"):
        model(idx, np.where(tg == -100, -1, tg))  # -1 is an ordinary (out of range) id now, as in torch


def test_sample_rejects_2d_logits():
    logits = np.zeros((2, 5), np.float32)
    with pytest.raises(ValueError, match="1-D"):
        tfcore.gpt.sample(logits)
    with pytest.raises(ValueError, match="1-D"):
        tfcore.gpt.sample(tfcore.zeros(2, 5))
    with pytest.raises(ValueError, match="1-D"):
        tfcore.gpt.sample(tfcore.zeros(()))
    with pytest.raises(TypeError):
        tfcore.gpt.sample(None)
    z = np.full(5, -1e9, np.float32)
    z[3] = 0
    assert tfcore.gpt.sample(z) == 3


@pytest.mark.parametrize("expr", ["z + None", "None + z", "z - None", "None - z", "z * None", "None * z",
                                  "z / None", "None / z", "z @ None", "None @ z", "z + 'a'", "z + object()",
                                  "z + [1.0, None]", "z.add(None)", "z.mul(None)"])
def test_none_or_wrong_type_operand_is_type_error(expr):
    z = tfcore.zeros(2)
    with pytest.raises(TypeError):
        eval(expr)


@pytest.mark.parametrize("expr,arg", [("tfcore.matmul(z, None)", "b"), ("tfcore.linear(z, None)", "weight"),
                                      ("tfcore.linear(z, w, bias='x')", "bias"), ("tfcore.exp(None)", "x"),
                                      ("tfcore.cross_entropy(None, z)", "input"), ("tfcore.sum([1.0])", "x"),
                                      ("tfcore.layer_norm(z, (2,), weight=1.0)", "weight"),
                                      ("tfcore.embedding(None, w)", "input"), ("tfcore.softmax(None, 0)", "x"),
                                      ("tfcore.attention(z, z, None)", "v")])
def test_functions_name_the_non_tensor_argument(expr, arg):
    z, w = tfcore.ones(2, 2), tfcore.ones(3, 2)
    with pytest.raises(TypeError, match=r"^tfcore\.\w+: %s must be a Tensor, got " % arg):
        eval(expr)
    assert tfcore.linear(z, w, None).shape == (2, 3)  # optional arguments may be None


def test_numbers_and_arrays_still_work_as_operands():
    z = tfcore.zeros(2, dtype=tfcore.float64)
    assert (z + [1, 2]).tolist() == [1, 2]
    assert (z + np.array([3.0, 4.0])).tolist() == [3, 4]
    assert (z + torch.tensor([5.0, 6.0], dtype=torch.float64)).tolist() == [5, 6]
    assert (2 - z).tolist() == [2, 2] and (z + True).tolist() == [1, 1]


def test_generate_callback_exception_propagates():
    model = tfcore.GPT(tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=16, vocab_size=11), seed=1)

    class Stop(Exception):
        pass
    seen = []

    def cb(tok):
        seen.append(tok)
        if len(seen) == 3:
            raise Stop("from the callback")
    with pytest.raises(Stop, match="from the callback") as info:
        model.generate([1, 2], 8, temperature=0, callback=cb)
    assert type(info.value) is Stop and len(seen) == 3
    # the model is usable afterwards and the same tokens come out
    assert model.generate([1, 2], 3, temperature=0) == seen
    with pytest.raises(KeyError):
        model.generate_speculative(model, [1, 2], 4, temperature=0, callback=lambda t: {}["x"])
