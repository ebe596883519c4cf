#!/usr/bin/python3
"""Independent check of the checkpoint layout: read model.safetensors with
nothing but json + numpy, run GPT-2 in PyTorch 1.13 the way Hugging Face's
GPT2LMHeadModel does (Conv1D weights [in, out]: y = x @ W + b; tied head),
and print the mean loss over the non-overlapping windows of a text file —
which must equal `tfcore eval` on the same checkpoint and file.

    torch_reference.py CKPT_DIR TEXT_FILE [int8 | int4:GROUP | none [HEAD: int8 | int4:GROUP]]

With a format, the four Linear weights of every block are first quantized
and dequantized in numpy as include/tfcore/quant.h lays the formats out
(symmetric, round half to even, one f32 scale per output feature or per
group of GROUP inputs), which must equal `tfcore eval --quantize`. With a
HEAD format the tied LM head (a copy of wte [V, C]: rows are vocab entries,
groups run along C) is too, while the embedding keeps the f32 wte: that
must equal `tfcore eval --quantize-head`.
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DT = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8 : 8 + n])
    meta = hdr.pop("__metadata__", {})
    data = raw[8 + n :]
    out = {}
    for name, e in hdr.items():
        a, b = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=DT[e["dtype"]]).reshape(e["shape"]).copy())
    return out, meta


def fake_quant(w, fmt):
    """w [in, out] (Conv1D) through quantize → dequantize, per quant.h: rows are outputs, groups run along in."""
    wt = w.numpy().astype(np.float32).T  # [N, K]
    N, K = wt.shape
    G, qmax = (K, 127) if fmt == "int8" else (int(fmt.split(":")[1]), 7)
    g = wt.reshape(N, K // G, G)
    scale = (np.abs(g).max(axis=2, keepdims=True) / np.float32(qmax)).astype(np.float32)
    q = np.rint(np.divide(g, scale, out=np.zeros_like(g), where=scale > 0))
    return torch.from_numpy((q.astype(np.float32) * scale).reshape(N, K).T.copy())


def main():
    ckpt, text = sys.argv[1], sys.argv[2]
    w, meta = load(ckpt + "/model.safetensors")
    head = fake_quant(w["transformer.wte.weight"].t(), sys.argv[4]).t() if len(sys.argv) > 4 else None
    if len(sys.argv) > 3 and sys.argv[3] != "none":
        for name in list(w):
            if name.endswith(("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")):
                w[name] = fake_quant(w[name], sys.argv[3])
    L, H, C, T = (int(meta["tfc." + k]) for k in ("n_layer", "n_head", "n_embd", "block_size"))
    eps = float(meta["tfc.ln_eps"])
    chars = bytes.fromhex(meta["tfc.vocab"][5:])
    ids = torch.tensor([chars.index(b) for b in open(text, "rb").read()], dtype=torch.long)
    n = (len(ids) - 1) // T
    x, y = ids[: n * T].view(n, T), ids[1 : n * T + 1].view(n, T)
    p = lambda k: w["transformer." + k].double()
    h = p("wte.weight")[x] + p("wpe.weight")[:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        b = lambda k: p(f"h.{i}.{k}")
        a = F.layer_norm(h, (C,), b("ln_1.weight"), b("ln_1.bias"), eps)
        q, k, v = (a @ b("attn.c_attn.weight") + b("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (t.view(n, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(C // H)).masked_fill(~mask, float("-inf")).softmax(-1)
        h = h + (att @ v).transpose(1, 2).reshape(n, T, C) @ b("attn.c_proj.weight") + b("attn.c_proj.bias")
        a = F.layer_norm(h, (C,), b("ln_2.weight"), b("ln_2.bias"), eps)
        f = F.gelu(a @ b("mlp.c_fc.weight") + b("mlp.c_fc.bias"), approximate="tanh")
        h = h + f @ b("mlp.c_proj.weight") + b("mlp.c_proj.bias")
    h = F.layer_norm(h, (C,), p("ln_f.weight"), p("ln_f.bias"), eps)
    logits = h @ (p("wte.weight") if head is None else head.double()).t()
    print(f"{F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item():.4f}")


if __name__ == "__main__":
    main()
