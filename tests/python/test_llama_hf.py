"""Hugging Face directories of the Llama family, written here from the
formats' documentation (config.json in transformers' LlamaConfig /
MistralConfig / Qwen2Config schema; safetensors: u64 header length, JSON
header, data), loaded with tfcore.GPT.load_hf and checked against the
independent PyTorch implementation of test_llama_family.py; bf16 storage
loads to the f32 twin's logits within bf16 rounding; save_hf writes what it
read; what the model cannot honour is refused by name."""
import json
import struct

import numpy as np
import pytest
import torch

import tfcore
from helpers import needs
from test_llama_family import torch_llama

pytestmark = needs("tfc_gpt_load_hf", "tfc_gpt_arch_from_name")


def bf16_bits(a):
    """f32 -> bf16 bit patterns, round to nearest even (what torch's .to(bfloat16) does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, dtype="F32"):
    """The format: u64 little-endian N, N bytes of JSON {name: {dtype, shape, data_offsets}}, the data."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        raw = bf16_bits(a).tobytes() if dtype == "BF16" else np.ascontiguousarray(a, np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def llama_weights(cfg, rng):
    """Random weights under transformers' names, nn.Linear [out, in]."""
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    D = C // H
    qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
    W = {"model.embed_tokens.weight": rng.standard_normal((V, C)) * 0.1, "model.norm.weight": 1 + rng.standard_normal(C) * 0.1}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        for n, shape in [("self_attn.q_proj", (H * D, C)), ("self_attn.k_proj", (Hkv * D, C)),
                         ("self_attn.v_proj", (Hkv * D, C)), ("self_attn.o_proj", (C, H * D)),
                         ("mlp.gate_proj", (F, C)), ("mlp.up_proj", (F, C)), ("mlp.down_proj", (C, F))]:
            W[p + n + ".weight"] = rng.standard_normal(shape) * 0.1
            if qkv_bias and n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                W[p + n + ".bias"] = rng.standard_normal(shape[0]) * 0.1
        W[p + "input_layernorm.weight"] = 1 + rng.standard_normal(C) * 0.1
        W[p + "post_attention_layernorm.weight"] = 1 + rng.standard_normal(C) * 0.1
    if not cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = rng.standard_normal((V, C)) * 0.1
    return {k: v.astype(np.float32) for k, v in W.items()}


def hf_dir(tmp_path, cfg, W, dtype="F32", name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    write_safetensors(d / "model.safetensors", W, dtype)
    return d


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 40,
         "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
         "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
         "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16", "attention_dropout": 0.0,
         "pretraining_tp": 1, "initializer_range": 0.02, "use_cache": True}
QWEN2 = dict(LLAMA, architectures=["Qwen2ForCausalLM"], model_type="qwen2", rope_theta=1000000.0,
             use_sliding_window=False, sliding_window=4096, max_window_layers=2, tie_word_embeddings=True)
for k in ("attention_bias", "mlp_bias", "pretraining_tp"):
    del QWEN2[k]
MISTRAL = dict(LLAMA, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=5)
for k in ("attention_bias", "mlp_bias", "pretraining_tp"):
    del MISTRAL[k]


def ref_logits(cfg, W, idx):
    ref = dict(n_layer=cfg["num_hidden_layers"], n_head=cfg["num_attention_heads"], n_embd=cfg["hidden_size"],
               n_kv_head=cfg["num_key_value_heads"], ln_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"],
               rope_scaling=cfg.get("rope_scaling"), max_pos=cfg["max_position_embeddings"],
               window=cfg.get("sliding_window") if cfg["model_type"] == "mistral" or cfg.get("use_sliding_window")
               else 0)
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in W.items()}
    t = torch.tensor(idx)
    logits, _ = torch_llama(P, ref, t, t, torch.float64)
    return logits.numpy()


@pytest.mark.parametrize("cfg", [LLAMA, QWEN2, MISTRAL], ids=["llama", "qwen2", "mistral"])
def test_hf_directory_loads_to_the_reference_logits(cfg, tmp_path):
    W = llama_weights(cfg, np.random.default_rng(1))
    d = hf_dir(tmp_path, cfg, W)
    model = tfcore.GPT.load_hf(d)
    assert model.config.arch == cfg["model_type"]
    idx = np.random.default_rng(2).integers(0, cfg["vocab_size"], (2, 11))
    logits, _ = model(idx)
    want = ref_logits(cfg, W, idx)
    assert np.max(np.abs(logits.numpy() - want)) <= 1e-4 * max(1.0, np.max(np.abs(want)))
    # save_hf writes a directory that loads to the same model; config.json in the family's schema
    out = tmp_path / "saved"
    model.save_hf(out, bos_token_id=1, eos_token_id=2)
    saved = json.loads((out / "config.json").read_text())
    assert saved["model_type"] == cfg["model_type"] and saved["num_key_value_heads"] == 2
    assert saved["architectures"] == cfg["architectures"]
    assert saved["intermediate_size"] == 48 and saved["rms_norm_eps"] == 1e-5
    back = tfcore.GPT.load_hf(out)
    l2, _ = back(idx)
    assert np.array_equal(l2.numpy(), logits.numpy())


def test_bf16_directory_is_its_f32_twin_within_bf16_rounding(tmp_path):
    W = llama_weights(LLAMA, np.random.default_rng(3))
    Wb = {k: (bf16_bits(v).astype(np.uint32) << 16).view(np.float32) for k, v in W.items()}  # the rounded twin
    m16 = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, W, "BF16", "b"))
    m32 = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, Wb, "F32", "f"))
    idx = np.arange(20).reshape(2, 10) % 40
    a, _ = m16(idx)
    b, _ = m32(idx)
    assert np.array_equal(a.numpy(), b.numpy())  # bf16 -> f32 is exact: the same model
    full, _ = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, W, "F32", "w"))(idx)
    assert 0 < np.max(np.abs(a.numpy() - full.numpy())) < 0.05  # and within bf16 rounding of the unrounded one


def test_family_defaults_are_implied_as_transformers_does(tmp_path):
    W = llama_weights(MISTRAL, np.random.default_rng(4))
    cfg = dict(MISTRAL)
    del cfg["sliding_window"]  # MistralConfig's default: 4096
    assert tfcore.GPT.load_hf(hf_dir(tmp_path, cfg, W, name="a")).config.sliding_window == 4096
    cfg["sliding_window"] = None
    assert tfcore.GPT.load_hf(hf_dir(tmp_path, cfg, W, name="b")).config.sliding_window == 0
    Wq = llama_weights(QWEN2, np.random.default_rng(5))
    q = tfcore.GPT.load_hf(hf_dir(tmp_path, QWEN2, Wq, name="c")).config
    assert q.attention_bias and q.sliding_window == 0 and q.tie_weights  # biases implied; window off
    cfg = dict(QWEN2, use_sliding_window=True, max_window_layers=0, sliding_window=6)
    assert tfcore.GPT.load_hf(hf_dir(tmp_path, cfg, Wq, name="d")).config.sliding_window == 6


@pytest.mark.parametrize("change,err,words", [
    (dict(model_type="gptj"), tfcore.TfcRuntimeError, "model_type \"gptj\""),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}), tfcore.TfcRuntimeError, "rope_scaling type \"yarn\""),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), tfcore.TfcRuntimeError, "low_freq_factor"),
    (dict(hidden_act="gelu"), tfcore.TfcRuntimeError, "hidden_act \"gelu\""),
    (dict(head_dim=16), tfcore.TfcRuntimeError, "head_dim 16"),
    (dict(pretraining_tp=2), tfcore.TfcRuntimeError, "pretraining_tp"),
    (dict(num_key_value_heads=3), tfcore.TfcRuntimeError, "n_kv_head"),
    (dict(intermediate_size=None), tfcore.TfcRuntimeError, "intermediate_size"),
])
def test_what_the_model_cannot_honour_is_refused_by_name(change, err, words, tmp_path):
    cfg = dict(LLAMA, **change)
    if cfg.get("intermediate_size") is None:
        del cfg["intermediate_size"]
    W = llama_weights(dict(LLAMA), np.random.default_rng(6))
    with pytest.raises(err, match=words.replace("(", r"\(")):
        tfcore.GPT.load_hf(hf_dir(tmp_path, cfg, W))


def test_qwen2_window_on_some_layers_is_refused(tmp_path):
    cfg = dict(QWEN2, use_sliding_window=True, max_window_layers=1)
    with pytest.raises(tfcore.TfcRuntimeError, match="max_window_layers 1 of 2"):
        tfcore.GPT.load_hf(hf_dir(tmp_path, cfg, llama_weights(QWEN2, np.random.default_rng(7))))


def test_bad_tensors_are_named(tmp_path):
    W = llama_weights(LLAMA, np.random.default_rng(8))
    bad = dict(W)
    bad["model.layers.1.self_attn.k_proj.weight"] = bad["model.layers.1.self_attn.k_proj.weight"][:8]
    with pytest.raises(tfcore.TfcRuntimeError, match="model.layers.1.self_attn.k_proj.weight"):
        tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, bad, name="shape"))
    missing = dict(W)
    del missing["model.layers.0.mlp.up_proj.weight"]
    with pytest.raises(tfcore.TfcRuntimeError, match="model.layers.0.mlp.up_proj.weight"):
        tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, missing, name="missing"))
    extra = dict(W, **{"model.layers.0.self_attn.q_norm.weight": np.ones(8, np.float32)})
    with pytest.raises(tfcore.TfcRuntimeError, match="q_norm"):
        tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, extra, name="extra"))
    # older exports keep the rotary buffers: consumed, not read
    buffers = dict(W, **{"model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(4, np.float32)})
    tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, buffers, name="buffers"))


def test_sharded_bf16_export_loads_back_and_matches_the_documented_layout(tmp_path):
    W = llama_weights(LLAMA, np.random.default_rng(9))
    model = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, W))
    out = tmp_path / "sharded"
    model.save_hf(out, dtype="bfloat16", max_shard_size=20000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and shards[0] == "model-00001-of-%05d.safetensors" % len(shards)
    assert sorted(index["weight_map"]) == sorted(W)
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert not (out / "model.safetensors").exists()
    # the shards hold W rounded to bf16, read here with the test's own reader
    from test_gpt import read_safetensors
    total = 0
    for sh in shards:
        tensors, meta = read_safetensors(out / sh)
        assert meta["format"] == "pt"
        for name, t in tensors.items():
            assert index["weight_map"][name] == sh and t.dtype == torch.bfloat16
            want = (bf16_bits(W[name]).astype(np.uint32) << 16).view(np.float32)
            assert np.array_equal(t.float().numpy(), want)
            total += t.numel() * 2
    assert index["metadata"]["total_size"] == total
    back = tfcore.GPT.load_hf(out)
    Wb = {k: (bf16_bits(v).astype(np.uint32) << 16).view(np.float32) for k, v in W.items()}
    twin = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, Wb, name="twin"))
    idx = np.arange(16).reshape(2, 8)
    assert np.array_equal(back(idx)[0].numpy(), twin(idx)[0].numpy())


def test_sharded_directory_faults_name_the_shard(tmp_path):
    W = llama_weights(LLAMA, np.random.default_rng(10))
    model = tfcore.GPT.load_hf(hf_dir(tmp_path, LLAMA, W))
    out = tmp_path / "s"
    model.save_hf(out, max_shard_size=30000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    victim = sorted(set(index["weight_map"].values()))[-1]
    (out / victim).unlink()
    with pytest.raises(tfcore.TfcIOError, match=victim):
        tfcore.GPT.load_hf(out)
    model.save_hf(out, max_shard_size=30000)
    index["weight_map"]["model.layers.0.self_attn.q_norm.weight"] = victim
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(tfcore.TfcRuntimeError, match="q_norm"):
        tfcore.GPT.load_hf(out)
