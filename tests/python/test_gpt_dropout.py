"""GPT dropout (cfg.dropout) against a torch forward that applies the same
masks at nanoGPT's four places. The masks come from tfcore.dropout on ones
with the key tfc_gpt_set_dropout_stream documents (splitmix64 written out
here independently of lib/model/gpt_dropout.c), so a wrong site, key, place
or scaling shows as a loss or gradient mismatch."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from test_gpt import perturb, read_safetensors

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def key(seed, counter, site):
    return splitmix64((splitmix64(seed ^ splitmix64(counter)) + site) & M64)


def mask(shape, p, k):
    """The scaled keep-mask m/(1-p) tfc_dropout draws from stream (k, 0)."""
    ones = tfcore.tensor(np.ones(shape), dtype=tfcore.float64)
    with tfcore.no_grad():
        return torch.tensor(tfcore.dropout(ones, p, seed=k).numpy())


def torch_gpt_dropout(P, cfg, idx, targets, p, seed, counter):
    B, T = idx.shape
    C, nh = cfg["n_embd"], cfg["n_head"]
    D = C // nh

    def drop(x, site):
        return x * mask(tuple(x.shape), p, key(seed, counter, site))

    def ln(x, name):
        return TF.layer_norm(x, (C,), P[name + ".weight"], P.get(name + ".bias"), cfg["ln_eps"])

    def lin(x, name):
        y = x @ P[name + ".weight"]
        return y + P[name + ".bias"] if name + ".bias" in P else y
    x = drop(P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T], 0)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["n_layer"]):
        h = "transformer.h.%d." % l
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.reshape(B, T, nh, D).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~causal, float("-inf")), -1)
        y = drop(att, 1 + 3 * l) @ v
        x = x + drop(lin(y.transpose(1, 2).reshape(B, T, C), h + "attn.c_proj"), 2 + 3 * l)
        m = TF.gelu(lin(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
        x = x + drop(lin(m, h + "mlp.c_proj"), 3 + 3 * l)
    logits = ln(x, "transformer.ln_f") @ P["transformer.wte.weight"].T
    return TF.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def model_and_batch(p, bias=True):
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=11, dtype="float64",
                           dropout=p, bias=bias)
    model = tfcore.GPT(cfg, seed=3)
    perturb(model, 4)
    rng = np.random.default_rng(5)
    return cfg, model, rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8))


@pytest.mark.parametrize("bias", [True, False])
def test_training_forward_matches_torch_with_the_same_masks(bias, tmp_path):
    p, seed, counter = 0.3, 99, 7
    cfg, model, idx, tg = model_and_batch(p, bias)
    model.save(tmp_path / "m.safetensors")
    tensors, meta = read_safetensors(tmp_path / "m.safetensors")
    assert float(meta["tfc.dropout"]) == p
    P = {n: t.clone().requires_grad_(True) for n, t in tensors.items()}
    model.set_dropout_stream(seed, counter)
    _, loss = model(idx, tg)
    ref = torch_gpt_dropout(P, cfg.to_dict(), torch.tensor(idx), torch.tensor(tg), p, seed, counter)
    assert abs(loss.item() - ref.item()) <= 1e-10 * max(1.0, abs(ref.item()))
    loss.backward()
    ref.backward()
    for name, t in model.named_parameters():
        g, r = t.grad.numpy(), P[name].grad.numpy()
        assert np.max(np.abs(g - r)) <= 1e-10 * max(1.0, np.max(np.abs(r))), name


def test_p0_eval_and_stream():
    _, m0, idx, tg = model_and_batch(0.0)
    _, m1, _, _ = model_and_batch(0.4)
    _, plain = m0(idx, tg)
    with tfcore.no_grad():
        _, ev0 = m0(idx, tg)
        _, ev1 = m1(idx, tg)
    # p = 0 trains exactly like no dropout; evaluation never drops
    assert plain.item() == ev0.item() == ev1.item()
    m1.set_dropout_stream(1, 0)
    _, a = m1(idx, tg)
    _, b = m1(idx, tg)  # the counter moved on: new masks
    m1.set_dropout_stream(1, 0)
    _, a2 = m1(idx, tg)  # the same (seed, counter): the same masks
    assert a.item() != plain.item() and a.item() != b.item()
    assert a.item() == a2.item()
    # generation (KV cache) is unaffected by dropout
    assert m0.generate([1, 2], 5, temperature=0) == m1.generate([1, 2], 5, temperature=0)


def test_bad_dropout_and_old_files(tmp_path):
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(tfcore.InvalidArgumentError, match="dropout"):
            tfcore.GPT(tfcore.GPTConfig(dropout=bad))
    _, m, _, _ = model_and_batch(0.25)
    path = tmp_path / "d.safetensors"
    m.save(path)
    assert tfcore.GPT.load(path).config.dropout == 0.25
    # a file written before tfc.dropout existed: the same file without the key loads with dropout 0
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    del header["__metadata__"]["tfc.dropout"]
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    old = tmp_path / "old.safetensors"
    old.write_bytes(len(h).to_bytes(8, "little") + h + raw[8 + n:])
    assert tfcore.GPT.load(old).config.dropout == 0.0
