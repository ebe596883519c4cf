"""tfcore.GPT against an equivalent torch module whose weights are read from
our safetensors file by a reader written here from the format's spec:
logits, loss and every gradient agree (f64 1e-9, f32 1e-4)."""
import json
import math
import struct

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import needs

pytestmark = needs("tfc_gpt_new", "tfc_gpt_save")

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """The format: u64 little-endian header size N, N bytes of JSON
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
    then the data section the offsets index into."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=ST_DTYPES[info["dtype"]]) if e > b else \
            torch.empty(0, dtype=ST_DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out, meta


def torch_gpt(P, cfg, idx, targets, lora=None, lora_scale=1.0):
    """GPT-2 forward written from the architecture, HF names, Conv1D [in, out] weights;
    with lora (PEFT names -> tensors) each layer it holds adds lora_scale·(x·Aᵀ)·Bᵀ."""
    B, T = idx.shape
    C, nh = cfg["n_embd"], cfg["n_head"]
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T]

    def ln(x, name):
        return TF.layer_norm(x, (C,), P[name + ".weight"], P.get(name + ".bias"), cfg["ln_eps"])

    def lin(x, name):
        y = x @ P[name + ".weight"]
        y = y + P[name + ".bias"] if name + ".bias" in P else y
        key = "base_model.model." + name + ".lora_"
        if lora and key + "A.weight" in lora:
            y = y + lora_scale * (x @ lora[key + "A.weight"].T) @ lora[key + "B.weight"].T
        return y
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["n_layer"]):
        h = "transformer.h.%d." % l
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.reshape(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
        y = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + lin(y.transpose(1, 2).reshape(B, T, C), h + "attn.c_proj")
        m = TF.gelu(lin(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh")
        x = x + lin(m, h + "mlp.c_proj")
    x = ln(x, "transformer.ln_f")
    head = P["lm_head.weight"] if "lm_head.weight" in P else P["transformer.wte.weight"]
    logits = x @ head.T
    return logits, TF.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def perturb(model, seed):
    """GPT-2 init zeroes the biases; make every parameter matter for the gradient check."""
    rng = np.random.default_rng(seed)
    with tfcore.no_grad():
        for _, p in model.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape) * 0.02)


CASES = {
    "char-tiny": dict(preset="char-tiny", vocab_size=256, B=2, T=16),
    "2-layer-gpt2-vocab": dict(preset=None, n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=50257,
                               B=2, T=8),
}


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-9), ("float32", 1e-4)])
@pytest.mark.parametrize("case", list(CASES))
def test_gpt_matches_torch_from_our_safetensors(case, dtype, tol, tmp_path):
    c = dict(CASES[case])
    B, T = c.pop("B"), c.pop("T")
    preset = c.pop("preset")
    cfg = tfcore.GPTConfig.preset(preset, **c, dtype=dtype) if preset else tfcore.GPTConfig(**c, dtype=dtype)
    model = tfcore.GPT(cfg, seed=3)
    perturb(model, 4)
    path = tmp_path / "model.safetensors"
    model.save(path)
    tensors, meta = read_safetensors(path)
    assert meta.get("format") == "pt"
    names = [n for n, _ in model.named_parameters()]
    assert sorted(tensors) == sorted(names)
    P = {n: t.clone().requires_grad_(True) for n, t in tensors.items()}
    assert all(t.dtype == (torch.float64 if dtype == "float64" else torch.float32) for t in P.values())

    rng = np.random.default_rng(5)
    idx = rng.integers(0, cfg.vocab_size, (B, T))
    tg = rng.integers(0, cfg.vocab_size, (B, T))
    logits, loss = model(idx, tg)
    ref_logits, ref_loss = torch_gpt(P, cfg.to_dict(), torch.tensor(idx), torch.tensor(tg))
    scale = max(1.0, ref_logits.abs().max().item())
    assert np.max(np.abs(logits.numpy() - ref_logits.detach().numpy())) <= tol * scale
    assert abs(loss.item() - ref_loss.item()) <= tol * max(1.0, abs(ref_loss.item()))
    loss.backward()
    ref_loss.backward()
    for name, p in model.named_parameters():
        g, r = p.grad.numpy(), P[name].grad.numpy()
        err = np.max(np.abs(g - r)) / max(1.0, np.max(np.abs(r)))
        assert err <= tol, "%s: gradient error %.3g" % (name, err)


def test_generate_save_load_and_cached_consistency(tmp_path):
    model = tfcore.GPT("char-tiny", vocab_size=64, n_layer=2, n_embd=32, n_head=2, block_size=32, seed=1)
    greedy = model.generate([1, 2, 3], 10, temperature=0)
    assert len(greedy) == 10 and all(0 <= t < 64 for t in greedy)
    with tfcore.no_grad():  # greedy tokens are the argmax of the full forward, step by step
        seq = [1, 2, 3]
        for t in greedy:
            logits, _ = model([seq])
            assert logits[0, -1].argmax().item() == t
            seq.append(t)
    a = model.generate([5], 12, temperature=1.0, top_k=10, seed=7)
    assert a == model.generate([5], 12, temperature=1.0, top_k=10, seed=7)
    seen = []
    stopped = model.generate([5], 12, temperature=1.0, top_k=10, seed=7, callback=lambda t: seen.append(t) or len(seen) == 4)
    assert stopped == a[:4]
    path = tmp_path / "m.safetensors"
    model.save(path, metadata={"note": "hi"})
    back = tfcore.GPT.load(path)
    assert back.config.to_dict() == model.config.to_dict()
    assert back.generate([5], 12, temperature=1.0, top_k=10, seed=7) == a
    tensors, meta = tfcore.load_safetensors(path)
    assert meta["note"] == "hi" and "transformer.wte.weight" in tensors
    fresh = tfcore.GPT(model.config, seed=99)
    fresh.load_weights(path)
    for (n1, p1), (n2, p2) in zip(fresh.named_parameters(), model.named_parameters()):
        assert n1 == n2 and np.array_equal(p1.numpy(), p2.numpy())
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())


def test_generate_batch_equals_torch_greedy_per_prompt(tmp_path):
    """Prompts of different lengths decoded together: each sequence's greedy
    tokens are those of PyTorch's full forward on that sequence alone, step
    by step; a sequence stopped by the callback ends alone."""
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=50, dtype="float64")
    model = tfcore.GPT(cfg, seed=12)
    perturb(model, 13)
    path = tmp_path / "m.safetensors"
    model.save(path)
    P, _ = read_safetensors(path)
    prompts = [[7], [1, 2, 3, 4, 5, 6, 7], [9, 9, 1], [40, 2]]
    got = model.generate_batch(prompts, 12, temperature=0)
    assert [len(g) for g in got] == [12] * 4
    for prompt, new in zip(prompts, got):
        seq = list(prompt)
        with torch.no_grad():
            for t in new:
                idx = torch.tensor([seq])
                logits, _ = torch_gpt(P, cfg.to_dict(), idx, idx)
                assert logits[0, -1].argmax().item() == t
                seq.append(t)
    # seeded sampling: sequence i as generate(prompts[i], seed=seed + i)
    sampled = model.generate_batch(prompts, 10, temperature=0.9, top_k=8, seed=30)
    assert sampled == [model.generate(p, 10, temperature=0.9, top_k=8, seed=30 + i) for i, p in enumerate(prompts)]
    # the callback stops one sequence; the others run to the end
    stopped = model.generate_batch(prompts, 12, temperature=0, callback=lambda seq, tok: seq == 1)
    assert stopped == [got[0], got[1][:1], got[2], got[3]]
    with pytest.raises(ValueError, match=r"prompts\[2\]\[1\] is 50"):
        model.generate_batch([[1], [2], [3, 50]], 4)
    with pytest.raises(ValueError, match="n_seq is 0"):
        model.generate_batch([], 4)
    with pytest.raises(ValueError, match=r"n_prompts\[0\] is 0"):
        model.generate_batch([[]], 4)

    def boom(seq, tok):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        model.generate_batch(prompts, 4, callback=boom)


def test_generate_speculative_greedy_and_stats():
    """Greedy speculative output is the target's own greedy output; a draft that is
    the target has every proposal accepted; a draft of another vocabulary is refused."""
    cfg = tfcore.GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=40, dtype="float64")
    target, draft = tfcore.GPT(cfg, seed=21), tfcore.GPT(cfg, seed=22)
    perturb(target, 23)
    perturb(draft, 24)
    want = target.generate([1, 2, 3], 20, temperature=0)
    st = {}
    assert target.generate_speculative(draft, [1, 2, 3], 20, k=3, temperature=0, stats=st) == want
    assert 0 <= st["accepted"] <= st["drafted"] and st["target_passes"] >= 1 + 20 // 4
    st = {}
    assert target.generate_speculative(target, [1, 2, 3], 20, k=3, temperature=0, stats=st) == want
    assert st["accepted"] == st["drafted"]
    sampled = target.generate_speculative(draft, [1, 2, 3], 12, k=2, temperature=0.9, seed=5)
    assert sampled == target.generate_speculative(draft, [1, 2, 3], 12, k=2, temperature=0.9, seed=5)
    other = tfcore.GPT(tfcore.GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=64, vocab_size=41), seed=1)
    with pytest.raises(ValueError, match="the draft's 41"):
        target.generate_speculative(other, [1], 4)
    with pytest.raises(ValueError, match="k is 0"):
        target.generate_speculative(draft, [1], 4, k=0)


def test_gpt_trains_with_adamw():
    model = tfcore.GPT("char-tiny", vocab_size=32, n_layer=1, n_embd=32, n_head=2, block_size=16, seed=0)
    opt = tfcore.optim.AdamW(model.parameters(), lr=3e-3)
    data = np.tile(np.arange(8), 8)
    x, y = data[None, :16], data[None, 1:17]
    first = None
    for _ in range(30):
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first


def test_gpt_errors(tmp_path):
    with pytest.raises(ValueError, match="n_head|n_embd"):
        tfcore.GPT(n_layer=1, n_head=3, n_embd=32, block_size=8, vocab_size=10)
    model = tfcore.GPT(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=10)
    with pytest.raises(ValueError):
        model([[1, 2, 99]])  # id out of range
    with pytest.raises(ValueError):
        model([list(range(9))])  # longer than block_size
    with pytest.raises(OSError):
        tfcore.GPT.load(tmp_path / "missing.safetensors")
    with pytest.raises(TypeError):
        tfcore.GPTConfig(n_layers=3)
