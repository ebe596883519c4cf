"""LoRA adapters from Python (GPT.add_lora / merge_lora / save_lora / load_lora)
against an independent PyTorch 1.13 implementation: the adapted GPT-2 written
here from the formula y = x·W + b + (alpha/r)·(x·Aᵀ)·Bᵀ with PEFT's layouts
(A [r, in], B [out, r]), its loss and the adapters' gradients from
torch.autograd; PEFT's file names and adapter_config.json; errors."""
import json
import struct

import numpy as np
import pytest
import torch

import tfcore
from test_gpt import torch_gpt

CFG = dict(n_layer=2, n_head=2, n_embd=16, block_size=16, vocab_size=29)
LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def torch_lora_gpt(P, LA, scale, cfg, idx, targets):
    """GPT-2 (HF names, Conv1D [in, out] weights) with LoRA on the layers LA holds: test_gpt's reference."""
    return torch_gpt(P, dict(cfg, ln_eps=1e-5), idx, targets, lora=LA, lora_scale=scale)


def model(dtype="float32", seed=0):
    m = tfcore.GPT(dtype=dtype, seed=seed, **CFG)
    rng = np.random.default_rng(seed)
    with tfcore.no_grad():  # biases start at 0: give every term a value
        for _, p in m.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape) * 0.02)
    return m


def batch(seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, CFG["vocab_size"], (2, 8)), rng.integers(0, CFG["vocab_size"], (2, 8))


def test_loss_and_adapter_gradients_match_torch():
    m = model("float64", 1)
    params = m.add_lora(rank=3, alpha=6.0, targets=["c_attn", "c_proj", "c_fc"], seed=4)
    rng = np.random.default_rng(2)
    with tfcore.no_grad():  # B starts at 0; a trained-looking B makes every gradient matter
        for name, p in m.lora_named_parameters():
            if "lora_B" in name:
                p.copy_(rng.standard_normal(p.shape) * 0.1)
    x, y = batch(3)
    logits, loss = m(x, y)
    loss.backward()
    P = {n: torch.tensor(p.numpy()) for n, p in m.named_parameters()}
    LA = {n: torch.tensor(p.numpy(), requires_grad=True) for n, p in m.lora_named_parameters()}
    assert len(LA) == len(params) == 2 * 4 * CFG["n_layer"]  # c_proj: attn.c_proj and mlp.c_proj
    tl, tloss = torch_lora_gpt(P, LA, 6.0 / 3, CFG, torch.tensor(x), torch.tensor(y))
    tloss.backward()
    assert abs(loss.item() - tloss.item()) < 1e-10
    np.testing.assert_allclose(logits.numpy(), tl.detach().numpy(), rtol=1e-10, atol=1e-10)
    for name, p in m.lora_named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), LA[name].grad.numpy(), rtol=1e-8, atol=1e-11, err_msg=name)
    for name, p in m.named_parameters():
        assert not p.requires_grad and p.grad is None, name


def test_fresh_adapters_training_and_merge():
    m = model("float32", 5)
    x, y = batch(6)
    base = m(x)[0].numpy() if isinstance(m(x), tuple) else m(x).numpy()
    opt = tfcore.optim.AdamW(m.add_lora(rank=4, alpha=8, targets="all-linear"), lr=1e-2)
    out = m(x)
    after = (out[0] if isinstance(out, tuple) else out).numpy()
    assert np.array_equal(base, after)  # B = 0: bit for bit
    before = {n: p.numpy().copy() for n, p in m.named_parameters()}
    first = None
    for _ in range(10):
        _, loss = m(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        first = first if first is not None else loss.item()
    assert loss.item() < first
    for n, p in m.named_parameters():
        assert np.array_equal(p.numpy(), before[n]), n
    out = m(x)
    adapted = (out[0] if isinstance(out, tuple) else out).numpy()
    m.merge_lora()
    assert m.lora_config is None and m.lora_parameters() == []
    out = m(x)
    merged = (out[0] if isinstance(out, tuple) else out).numpy()
    np.testing.assert_allclose(merged, adapted, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(merged, base)


def test_peft_files_round_trip(tmp_path):
    m = model("float32", 7)
    m.add_lora(rank=2, alpha=4, targets="mlp.c_fc,attn.c_attn", seed=1)
    with tfcore.no_grad():
        for name, p in m.lora_named_parameters():
            if "lora_B" in name:
                p.copy_(np.full(p.shape, 0.05))
    m.save_lora(tmp_path / "ad", base_model="gpt2")
    raw = (tmp_path / "ad" / "adapter_model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__")
    want = {}
    for l in range(CFG["n_layer"]):
        for mod, i, o in (("attn.c_attn", 16, 48), ("mlp.c_fc", 16, 64)):
            want["base_model.model.transformer.h.%d.%s.lora_A.weight" % (l, mod)] = [2, i]
            want["base_model.model.transformer.h.%d.%s.lora_B.weight" % (l, mod)] = [o, 2]
    assert {k: v["shape"] for k, v in hdr.items()} == want
    cfg = json.loads((tmp_path / "ad" / "adapter_config.json").read_text())
    assert (cfg["r"], cfg["lora_alpha"], cfg["fan_in_fan_out"], cfg["base_model_name_or_path"]) == (2, 4, True, "gpt2")
    assert cfg["target_modules"] == ["mlp.c_fc", "attn.c_attn"]
    x, _ = batch(8)
    out = m(x)
    a = (out[0] if isinstance(out, tuple) else out).numpy()
    m2 = model("float32", 7)
    m2.load_lora(tmp_path / "ad")
    out = m2(x)
    assert np.array_equal((out[0] if isinstance(out, tuple) else out).numpy(), a)
    assert m2.lora_config == {"rank": 2, "alpha": 4.0, "targets": "mlp.c_fc,attn.c_attn"}


def test_errors(tmp_path):
    m = model()
    with pytest.raises(ValueError, match="tfc_gpt_add_lora: cfg->targets item 'q_proj' matches no"):
        m.add_lora(rank=2, targets="q_proj")
    with pytest.raises(ValueError, match="cfg->rank is 0"):
        m.add_lora(rank=0)
    with pytest.raises(ValueError, match="cfg->rank is 17, need 1 .. 16"):
        m.add_lora(rank=17)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        m.merge_lora()
    assert m.lora_config is None and all(p.requires_grad for p in m.parameters())
    m.add_lora(rank=2)
    with pytest.raises(ValueError, match="adapters already"):
        m.add_lora(rank=2)
    m.save_lora(tmp_path / "a.safetensors")
    wide = tfcore.GPT(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=29)
    with pytest.raises(tfcore.ShapeError if hasattr(tfcore, "ShapeError") else ValueError, match="needs \\[r, 32\\]"):
        wide.load_lora(tmp_path / "a.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(Exception, match="tfc_gpt_load_lora"):
        wide.load_lora(tmp_path / "bad.safetensors")
    with pytest.raises(OSError):
        wide.load_lora(tmp_path / "missing.safetensors")
    assert wide.lora_config is None
