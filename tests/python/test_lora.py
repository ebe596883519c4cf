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


# ---- PEFT's adapter_config.json read as JSON (issue 41) ------------------------------------

def _peft_dir(tmp_path, config_text, mutate_header=None):
    """A PEFT-style adapter directory (tensors without tfc.lora.* metadata, the given adapter_config.json)
    made from a rank-4, alpha-8 adapter (scale 2), and that adapter's logits on a fixed batch."""
    m = model("float32", 7)
    m.add_lora(rank=4, alpha=8, targets="c_attn", seed=1)
    with tfcore.no_grad():
        for name, p in m.lora_named_parameters():
            if "lora_B" in name:
                p.copy_(np.full(p.shape, 0.05))
    m.save_lora(tmp_path / "ours")
    raw = (tmp_path / "ours" / "adapter_model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__")
    if mutate_header:
        mutate_header(hdr)
    h = json.dumps(hdr).encode()
    d = tmp_path / "peft"
    d.mkdir()
    (d / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + raw[8 + n:])
    (d / "adapter_config.json").write_text(config_text)
    x, _ = batch(8)
    out = m(x)
    return d, x, (out[0] if isinstance(out, tuple) else out).numpy()


def _load_logits(d, x):
    m2 = model("float32", 7)
    m2.load_lora(d)
    out = m2(x)
    return m2, (out[0] if isinstance(out, tuple) else out).numpy()


@pytest.mark.parametrize("ws", ["\t", "\n", " ", "", "\r\n  "])
def test_peft_use_rslora_with_any_whitespace(tmp_path, ws):
    # rsLoRA's scale lora_alpha/sqrt(r): 4/sqrt(4) = 2, the plain 8/4 of the saved adapter, bit for bit
    d, x, want = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 4, "use_rslora":%strue, "bias": "none"}' % ws)
    m2, got = _load_logits(d, x)
    assert np.array_equal(got, want)
    assert m2.lora_config["alpha"] == 8.0 and m2.lora_config["rank"] == 4


def test_peft_nested_lora_alpha_is_not_the_top_level_one(tmp_path):
    d, x, want = _peft_dir(tmp_path, '{"extra": {"lora_alpha": 100, "use_rslora": true}, "r": 4, "lora_alpha": 8}')
    assert np.array_equal(_load_logits(d, x)[1], want)


def test_peft_duplicate_key_last_wins(tmp_path):
    d, x, want = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 100, "use_rslora": true, "lora_alpha": 8, '
                                     '"use_rslora": false}')
    assert np.array_equal(_load_logits(d, x)[1], want)


@pytest.mark.parametrize("field,value", [
    ("alpha_pattern", '{"c_attn": 16}'),
    ("rank_pattern", '{"c_attn": 2}'),
    ("layers_to_transform", "[0]"),
    ("modules_to_save", '["lm_head"]'),
    ("bias", '"all"'),
    ("use_dora", "true"),
])
def test_peft_settings_we_cannot_honour_are_refused_by_name(tmp_path, field, value):
    d, x, _ = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 8, "%s": %s}' % (field, value))
    m2 = model("float32", 7)
    with pytest.raises(Exception, match='tfc_gpt_load_lora: .*adapter_config.json sets "%s"' % field):
        m2.load_lora(d)
    assert m2.lora_config is None


@pytest.mark.parametrize("field,value", [
    ("alpha_pattern", "{}"), ("rank_pattern", "{}"), ("layers_to_transform", "null"), ("modules_to_save", "null"),
    ("bias", '"none"'), ("use_dora", "false")])
def test_peft_settings_left_off_load(tmp_path, field, value):
    d, x, want = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 8, "%s": %s}' % (field, value))
    assert np.array_equal(_load_logits(d, x)[1], want)


def test_peft_r_must_match_the_tensors(tmp_path):
    d, x, _ = _peft_dir(tmp_path, '{"r": 8, "lora_alpha": 8}')
    with pytest.raises(Exception, match='has "r": 8 but the tensors of .* have rank 4'):
        model("float32", 7).load_lora(d)


def test_tfc_lora_rank_metadata_must_match_the_tensors(tmp_path):
    m = model("float32", 7)
    m.add_lora(rank=4, alpha=8, targets="c_attn", seed=1)
    m.save_lora(tmp_path / "a.safetensors")
    raw = (tmp_path / "a.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    hdr["__metadata__"]["tfc.lora.rank"] = "3"
    h = json.dumps(hdr).encode()
    (tmp_path / "b.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + raw[8 + n:])
    with pytest.raises(Exception, match="metadata tfc.lora.rank is '3' but the tensors have rank 4"):
        model("float32", 7).load_lora(tmp_path / "b.safetensors")


def test_lora_tensor_of_integer_dtype_is_refused(tmp_path):
    name = "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"

    def relabel(hdr):
        hdr[name]["dtype"] = "I32"  # the same 4 bytes per element, read as integers

    d, x, _ = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 8}', relabel)
    m2 = model("float32", 7)
    with pytest.raises(Exception, match="tensor '%s' is i32, need a float dtype" % name):
        m2.load_lora(d)
    assert m2.lora_config is None


def test_peft_rslora_alpha_that_overflows_is_refused(tmp_path):
    d, x, _ = _peft_dir(tmp_path, '{"r": 4, "lora_alpha": 1e308, "use_rslora": true}')
    with pytest.raises(Exception, match='"lora_alpha" 1e\\+308 at rank 4 overflows'):
        model("float32", 7).load_lora(d)
