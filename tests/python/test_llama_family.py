"""The Llama family (llama, mistral, qwen2) against an independent PyTorch
implementation written here from the published equations, the way
transformers' modeling_llama / modeling_mistral / modeling_qwen2 write them:
RMSNorm, rotary positions in the rotate-half form with the rope_scaling
types of modeling_rope_utils (default, linear, dynamic, llama3),
grouped-query attention by repeat_kv, the sliding window as HF masks it
(kv_idx > q_idx - window), SwiGLU, tied and untied heads, Qwen2's q/k/v
biases. Weights go through our safetensors file (read here from the format),
so names and layouts are checked too. Logits, loss and every gradient agree
to 1e-10 in f64 and 1e-5 (relative) in f32."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tfcore
from helpers import needs
from test_gpt import read_safetensors

pytestmark = needs("tfc_gpt_new", "tfc_gpt_arch_from_name")


def inv_freq_hf(D, theta, scaling, seq_len, max_pos):
    """modeling_rope_utils' inverse frequencies (in f64 here; the f32 run rounds them as transformers does)."""
    base = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    if scaling is None:
        return base
    t = scaling["rope_type"]
    f = scaling["factor"]
    if t == "linear":
        return base / f
    if t == "dynamic":
        if seq_len <= max_pos:
            return base
        theta2 = theta * ((f * seq_len / max_pos) - (f - 1)) ** (D / (D - 2))
        return 1.0 / theta2 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    if t == "llama3":
        lo, hi, old = scaling["low_freq_factor"], scaling["high_freq_factor"], \
            scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / base
        out = torch.where(wavelen > old / lo, base / f, base)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * out / f + smooth * out
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return torch.where(medium, smoothed, out)
    raise ValueError(t)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def torch_llama(P, c, idx, targets, dtype):
    """LlamaForCausalLM's forward from its equations; P maps HF names to tensors."""
    B, T = idx.shape
    C, H = c["n_embd"], c["n_head"]
    Hkv = c["n_kv_head"] or H
    D = C // H
    eps = c["ln_eps"]
    pos = torch.arange(T)
    inv = inv_freq_hf(D, c["rope_theta"], c["rope_scaling"], T, c["max_pos"])
    if dtype == torch.float32:
        inv = inv.float()
        ang = pos.float()[:, None] * inv[None, :]
    else:
        ang = pos.double()[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def lin(x, name):
        y = x @ P[name + ".weight"].T
        return y + P[name + ".bias"] if name + ".bias" in P else y

    qi = torch.arange(T)[:, None]
    ki = torch.arange(T)[None, :]
    mask = ki <= qi
    if c["window"]:
        mask = mask & (ki > qi - c["window"])
    x = P["model.embed_tokens.weight"][idx]
    for l in range(c["n_layer"]):
        p = "model.layers.%d." % l
        h = rms(x, P[p + "input_layernorm.weight"])
        q = lin(h, p + "self_attn.q_proj").view(B, T, H, D).transpose(1, 2)
        k = lin(h, p + "self_attn.k_proj").view(B, T, Hkv, D).transpose(1, 2)
        v = lin(h, p + "self_attn.v_proj").view(B, T, Hkv, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // Hkv, dim=1)  # repeat_kv
        v = v.repeat_interleave(H // Hkv, dim=1)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        y = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
        x = x + lin(y.transpose(1, 2).reshape(B, T, C), p + "self_attn.o_proj")
        h = rms(x, P[p + "post_attention_layernorm.weight"])
        x = x + lin(TF.silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, P["model.norm.weight"])
    head = P["lm_head.weight"] if "lm_head.weight" in P else P["model.embed_tokens.weight"]
    logits = x @ head.T
    return logits, TF.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


BASE = dict(n_layer=2, n_head=4, n_embd=32, block_size=16, vocab_size=50, mlp_hidden=40)
CASES = {
    "llama-mha-untied": dict(arch="llama", n_kv_head=4, tie_weights=False),
    "llama-gqa2-tied-linear": dict(arch="llama", n_kv_head=2, tie_weights=True,
                                   rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "llama-mqa-dynamic": dict(arch="llama", n_kv_head=1, tie_weights=False, max_pos=4,
                              rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    "llama-gqa2-llama3-biases": dict(arch="llama", n_kv_head=2, tie_weights=False, attention_bias=True,
                                     mlp_bias=True, rope_theta=500000.0,
                                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 8}),
    "qwen2-biases": dict(arch="qwen2", n_kv_head=2, tie_weights=False, attention_bias=True, rope_theta=1e6),
    "mistral-window": dict(arch="mistral", n_kv_head=2, tie_weights=False, sliding_window=4),
    "qwen2-window-mqa": dict(arch="qwen2", n_kv_head=1, tie_weights=True, attention_bias=True, sliding_window=3),
}


def build(case, dtype, seed=3):
    c = dict(BASE)
    c.update(CASES[case])
    max_pos = c.pop("max_pos", None)
    cfg = tfcore.GPTConfig(**c, dtype=dtype, ln_eps=1e-6)
    if max_pos is not None:
        cfg._c.rope.max_position_embeddings = max_pos
    model = tfcore.GPT(cfg, seed=seed)
    rng = np.random.default_rng(seed + 1)
    with tfcore.no_grad():  # the init zeroes biases and sets norms to 1: make every parameter matter
        for _, p in model.named_parameters():
            p.copy_(p.numpy() + rng.standard_normal(p.shape) * 0.05)
    ref = dict(n_layer=c["n_layer"], n_head=c["n_head"], n_embd=c["n_embd"], n_kv_head=c.get("n_kv_head", 0),
               ln_eps=1e-6, rope_theta=c.get("rope_theta", 10000.0), rope_scaling=c.get("rope_scaling"),
               window=c.get("sliding_window", 0), max_pos=max_pos or 2048)
    return model, ref


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("case", list(CASES))
def test_llama_family_matches_torch(case, dtype, tol, tmp_path):
    model, ref = build(case, dtype)
    path = tmp_path / "model.safetensors"
    model.save(path)
    tensors, meta = read_safetensors(path)
    assert meta["tfc.arch"] == CASES[case]["arch"]
    names = [n for n, _ in model.named_parameters()]
    assert sorted(tensors) == sorted(names)
    tdt = torch.float64 if dtype == "float64" else torch.float32
    P = {n: t.clone().requires_grad_(True) for n, t in tensors.items()}
    B, T = 2, 9
    rng = np.random.default_rng(5)
    idx = rng.integers(0, BASE["vocab_size"], (B, T))
    tg = rng.integers(0, BASE["vocab_size"], (B, T))
    logits, loss = model(idx, tg)
    ref_logits, ref_loss = torch_llama(P, ref, torch.tensor(idx), torch.tensor(tg), tdt)
    scale = max(1.0, ref_logits.abs().max().item())
    err = np.max(np.abs(logits.numpy() - ref_logits.detach().numpy())) / scale
    assert err <= tol, "logits: %.3g" % err
    assert abs(loss.item() - ref_loss.item()) <= tol * max(1.0, abs(ref_loss.item()))
    loss.backward()
    ref_loss.backward()
    for name, p in model.named_parameters():
        g, r = p.grad.numpy(), P[name].grad.numpy()
        e = np.max(np.abs(g - r)) / max(1e-3, np.max(np.abs(r)))
        assert e <= tol, "%s: gradient error %.3g" % (name, e)


def test_names_and_layouts_are_hf():
    model, _ = build("qwen2-biases", "float64")
    shapes = dict((n, tuple(p.shape)) for n, p in model.named_parameters())
    assert shapes["model.embed_tokens.weight"] == (50, 32)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (32, 32)  # nn.Linear [out, in]
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (16, 32)  # 2 kv heads of 8
    assert shapes["model.layers.0.self_attn.k_proj.bias"] == (16,)
    assert "model.layers.0.self_attn.o_proj.bias" not in shapes  # Qwen2: q/k/v biases only
    assert shapes["model.layers.1.mlp.down_proj.weight"] == (32, 40)
    assert shapes["lm_head.weight"] == (50, 32)
    cfg = model.config
    assert cfg.arch == "qwen2" and cfg.n_kv_head == 2 and cfg.mlp_hidden == 40 and cfg.rope_theta == 1e6


def test_bad_configs_are_refused_by_name():
    for kw, word in [(dict(arch="llama", n_kv_head=3), "n_kv_head"),
                     (dict(arch="llama", sliding_window=4), "sliding_window"),
                     (dict(arch="mistral", attention_bias=True), "attention_bias"),
                     (dict(arch="qwen2", mlp_bias=True), "mlp_bias"),
                     (dict(arch="gpt2", n_kv_head=2), "n_kv_head"),
                     (dict(arch="llama", n_kv_head=2, dropout=0.1), "dropout"),
                     (dict(arch="llama", rope_theta=-1.0), "theta")]:
        c = dict(BASE)
        c.update(kw)
        with pytest.raises(tfcore.InvalidArgumentError, match=word):
            tfcore.GPT(tfcore.GPTConfig(**c), seed=0)
    with pytest.raises(tfcore.InvalidArgumentError, match="unknown architecture 'gptj'"):
        tfcore.GPTConfig(arch="gptj")
