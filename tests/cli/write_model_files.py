"""Other tools' model files made from one of our checkpoints, written here
from the formats' own documentation (never with libtfcore), and the torch
reference loss of a model directory:

  write_model_files.py hf  CKPT_DIR OUT_DIR [--bad-shape]   a Hugging Face GPT-2 directory: config.json +
        model.safetensors under GPT2Model's bare names (h.0.attn.c_attn.weight) with the attn.bias /
        attn.masked_bias buffers older transformers saved
  write_model_files.py llmc CKPT_DIR OUT.bin                llm.c's gpt2_124M.bin layout (train_gpt2.py
        write_model): 256 int32 header, magic 20240326, version 3, Vp = V rounded up to 128, nn.Linear weights
  write_model_files.py vocab CKPT_DIR OUT                   the checkpoint's char vocabulary line
  write_model_files.py loss MODEL_DIR_OR_BIN CKPT_DIR TEXT  torch GPT-2's mean loss on TEXT's first block + 1
        tokens (read back from the HF directory or llm.c file by this file's parsers)
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as TF


def read_st(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", {})
    data = raw[8 + n:]
    dt = {"F32": np.float32, "F64": np.float64, "F16": np.float16}
    out = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=dt[v["dtype"]])
           .reshape(v["shape"]).astype(np.float32) for k, v in head.items()}
    return out, meta


def write_st(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def ckpt(d):
    P, meta = read_st(os.path.join(d, "model.safetensors"))
    cfg = {k[4:]: int(v) for k, v in meta.items() if k.startswith("tfc.") and k[4:] in
           ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")}
    return P, cfg, meta


LIN = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
LLMC = [("ln_1.weight", 0), ("ln_1.bias", 0), ("attn.c_attn.weight", 1), ("attn.c_attn.bias", 0),
        ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0), ("ln_2.weight", 0), ("ln_2.bias", 0),
        ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0), ("mlp.c_proj.weight", 1), ("mlp.c_proj.bias", 0)]


def write_hf(d, out, bad_shape):
    P, cfg, _ = ckpt(d)
    os.makedirs(out, exist_ok=True)
    T = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in P.items()}
    for l in range(cfg["n_layer"]):
        T["h.%d.attn.bias" % l] = np.tril(np.ones((1, 1, cfg["block_size"], cfg["block_size"]), np.float32))
        T["h.%d.attn.masked_bias" % l] = np.array(-1e4, np.float32)
    if bad_shape:
        T["h.1.mlp.c_fc.weight"] = T["h.1.mlp.c_fc.weight"][:, :-1]
    write_st(os.path.join(out, "model.safetensors"), T)
    conf = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": cfg["n_layer"],
            "n_head": cfg["n_head"], "n_embd": cfg["n_embd"], "n_positions": cfg["block_size"],
            "n_ctx": cfg["block_size"], "vocab_size": cfg["vocab_size"], "layer_norm_epsilon": 1e-05,
            "activation_function": "gelu_new", "n_inner": None, "resid_pdrop": 0.1}
    json.dump(conf, open(os.path.join(out, "config.json"), "w"), indent=2)


def write_llmc(d, out):
    P, cfg, _ = ckpt(d)
    V, C, L = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"]
    vp = (V + 127) // 128 * 128
    h = np.zeros(256, "<i4")
    h[:8] = [20240326, 3, cfg["block_size"], V, L, cfg["n_head"], C, vp]
    wte = np.zeros((vp, C), np.float32)
    wte[:V] = P["transformer.wte.weight"]
    parts = [h.tobytes(), wte.tobytes(), P["transformer.wpe.weight"].tobytes()]
    for name, lin in LLMC:
        for l in range(L):
            a = P["transformer.h.%d.%s" % (l, name)]
            parts.append(np.ascontiguousarray(a.T if lin else a, dtype="<f4").tobytes())
    parts += [P["transformer.ln_f.weight"].tobytes(), P["transformer.ln_f.bias"].tobytes()]
    open(out, "wb").write(b"".join(parts))


def read_llmc(path):
    raw = open(path, "rb").read()
    h = np.frombuffer(raw[:1024], "<i4")
    assert h[0] == 20240326 and h[1] == 3, h[:2]
    maxT, V, L, NH, C, vp = (int(x) for x in h[2:8])
    vals = np.frombuffer(raw[1024:], "<f4")
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        a = vals[at:at + n].reshape(shape)
        at += n
        return a
    P = {"transformer.wte.weight": take(vp, C)[:V], "transformer.wpe.weight": take(maxT, C)}
    for name, lin in LLMC:
        rows = {"attn.c_attn": 3 * C, "mlp.c_fc": 4 * C}.get(name.rsplit(".", 1)[0], C)
        cols = 4 * C if name == "mlp.c_proj.weight" else C
        for l in range(L):
            a = take(rows, cols) if lin else take(rows)
            P["transformer.h.%d.%s" % (l, name)] = a.T if lin else a
    P["transformer.ln_f.weight"], P["transformer.ln_f.bias"] = take(C), take(C)
    assert at == vals.size
    return P, dict(n_layer=L, n_head=NH, n_embd=C, block_size=maxT, vocab_size=V)


def read_hf(d):
    P, _ = read_st(os.path.join(d, "model.safetensors"))
    conf = json.load(open(os.path.join(d, "config.json")))
    P = {("transformer." + k if not k.startswith(("transformer.", "lm_head")) else k): v for k, v in P.items()
         if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    return P, dict(n_layer=conf["n_layer"], n_head=conf["n_head"], n_embd=conf["n_embd"],
                   block_size=conf["n_positions"], vocab_size=conf["vocab_size"])


def torch_loss(P, cfg, ids):
    """GPT-2 written from the architecture (HF names, Conv1D [in, out] weights)."""
    P = {k: torch.tensor(np.ascontiguousarray(v), dtype=torch.float64) for k, v in P.items()}
    C, nh = cfg["n_embd"], cfg["n_head"]
    idx, tg = torch.tensor(ids[:-1])[None], torch.tensor(ids[1:])
    T = idx.shape[1]
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T]
    ln = lambda x, n: TF.layer_norm(x, (C,), P[n + ".weight"], P[n + ".bias"], 1e-5)
    lin = lambda x, n: x @ P[n + ".weight"] + P[n + ".bias"]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["n_layer"]):
        h = "transformer.h.%d." % l
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.reshape(1, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        y = torch.softmax(((q @ k.transpose(-2, -1)) / math.sqrt(C // nh)).masked_fill(~mask, -math.inf), -1) @ v
        x = x + lin(y.transpose(1, 2).reshape(1, T, C), h + "attn.c_proj")
        x = x + lin(TF.gelu(lin(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
    head = P.get("lm_head.weight", P["transformer.wte.weight"])
    return TF.cross_entropy((ln(x, "transformer.ln_f") @ head.T)[0], tg).item()


def main():
    what, a, b = sys.argv[1:4]
    if what == "hf":
        write_hf(a, b, "--bad-shape" in sys.argv)
    elif what == "llmc":
        write_llmc(a, b)
    elif what == "vocab":
        open(b, "w").write(ckpt(a)[2]["tfc.vocab"] + "\n")
    elif what == "loss":
        P, cfg = read_llmc(a) if os.path.isfile(a) else read_hf(a)
        chars = bytes.fromhex(ckpt(b)[2]["tfc.vocab"][5:])
        text = open(sys.argv[4], "rb").read()[:cfg["block_size"] + 1]
        print("%.6f" % torch_loss(P, cfg, [chars.index(c) for c in text]))


if __name__ == "__main__":
    main()
