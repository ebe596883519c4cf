#!/usr/bin/python3
"""Independent check of a Llama-family checkpoint of tfcore train: read
model.safetensors (a tfcore checkpoint) or a Hugging Face directory's
config.json + model.safetensors with nothing but json + numpy, run the
decoder in PyTorch 1.13 (f64) the way transformers' LlamaForCausalLM /
MistralForCausalLM / Qwen2ForCausalLM compute it (RMSNorm, rotary positions
in the rotate-half form with rope_theta, grouped-query attention by
repeating the key/value heads, an optional sliding window, SwiGLU, nn.Linear
[out, in] weights, q/k/v biases where the file has them, an untied or tied
head), and print the mean loss over the non-overlapping windows of a text
file — which must equal `tfcore eval` on the same model and file.

    torch_llama_reference.py MODEL_DIR TEXT_FILE

The text is encoded with the checkpoint's char vocabulary (metadata
tfc.vocab), or for a Hugging Face directory written by tfcore export the
tfcore.vocab line beside it.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import load as load_tensors  # noqa: E402  (the safetensors reader written once, from the spec)


def load(path):
    tensors, meta = load_tensors(path)
    return {k: v.double() for k, v in tensors.items()}, meta


def config(d, meta):
    """The shape from the tfc.* metadata of a checkpoint, else from a Hugging Face config.json."""
    if "tfc.arch" in meta:
        g = lambda k: meta["tfc." + k]
        return dict(L=int(g("n_layer")), H=int(g("n_head")), Hkv=int(g("n_kv_head")), C=int(g("n_embd")),
                    T=int(g("block_size")), eps=float(g("ln_eps")), theta=float(g("rope.theta")),
                    window=int(g("sliding_window")), rope_type=int(g("rope.type")))
    c = json.load(open(os.path.join(d, "config.json")))
    assert c.get("rope_scaling") is None, "this reference writes the default rope only"
    window = c.get("sliding_window") or 0
    if c["model_type"] == "qwen2" and not c.get("use_sliding_window", False):
        window = 0
    return dict(L=c["num_hidden_layers"], H=c["num_attention_heads"], Hkv=c["num_key_value_heads"],
                C=c["hidden_size"], T=c["max_position_embeddings"], eps=c["rms_norm_eps"], theta=c["rope_theta"],
                window=window, rope_type=0)


def vocab(d, meta):
    line = meta.get("tfc.vocab")
    if line is None:
        line = open(os.path.join(d, "tfcore.vocab")).read().strip()
    assert line.startswith("char:"), "this reference reads char vocabularies"
    return bytes.fromhex(line[5:])


def main():
    d, text = sys.argv[1], sys.argv[2]
    w, meta = load(os.path.join(d, "model.safetensors"))
    c = config(d, meta)
    assert c["rope_type"] == 0, "this reference writes the default rope only"
    L, H, Hkv, C, T, eps = c["L"], c["H"], c["Hkv"], c["C"], c["T"], c["eps"]
    D = C // H
    chars = vocab(d, meta)
    ids = torch.tensor([chars.index(b) for b in open(text, "rb").read()], dtype=torch.long)
    n = (len(ids) - 1) // T
    x, y = ids[: n * T].view(n, T), ids[1 : n * T + 1].view(n, T)

    # rotary positions: inv_freq_i = theta^(-2i/D); angles p·inv_freq, repeated over both halves
    inv = 1.0 / c["theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()

    def rot(t):  # x·cos + rotate_half(x)·sin
        return t * cos + torch.cat((-t[..., D // 2 :], t[..., : D // 2]), -1) * sin

    def rms(t, g):
        return g * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps))

    def lin(t, name):
        out = t @ w[name + ".weight"].t()
        return out + w[name + ".bias"] if name + ".bias" in w else out

    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    mask = ki <= qi
    if c["window"]:
        mask = mask & (ki > qi - c["window"])
    h = w["model.embed_tokens.weight"][x]
    for l in range(L):
        p = "model.layers.%d." % l
        a = rms(h, w[p + "input_layernorm.weight"])
        q = rot(lin(a, p + "self_attn.q_proj").view(n, T, H, D).transpose(1, 2))
        k = rot(lin(a, p + "self_attn.k_proj").view(n, T, Hkv, D).transpose(1, 2)).repeat_interleave(H // Hkv, 1)
        v = lin(a, p + "self_attn.v_proj").view(n, T, Hkv, D).transpose(1, 2).repeat_interleave(H // Hkv, 1)
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~mask, float("-inf")).softmax(-1)
        h = h + lin((att @ v).transpose(1, 2).reshape(n, T, C), p + "self_attn.o_proj")
        a = rms(h, w[p + "post_attention_layernorm.weight"])
        h = h + lin(F.silu(lin(a, p + "mlp.gate_proj")) * lin(a, p + "mlp.up_proj"), p + "mlp.down_proj")
    h = rms(h, w["model.norm.weight"])
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    logits = h @ head.t()
    print(f"{F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item():.4f}")


main()
