#!/usr/bin/python3
"""Learning for real: char-tiny trained by our CLI and by an equivalent
PyTorch 1.13 model with the same recipe, on tinyshakespeare.

Recipe (both): char-level vocabulary (the sorted distinct bytes of the
file), first 90% train / last 10% val, batch 16 x block 128, AdamW lr 1e-3,
betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D weights only, linear
warmup over 100 steps ((s+1)/(warmup+1)) then cosine to 1e-4 at the last
step, gradient clipping at 1.0, GPT-2 init (normal 0.02, residual
projections 0.02/sqrt(2 n_layer)), tied LM head. Different random streams
(init and batches), same statistics.

Val loss = mean cross-entropy over all non-overlapping windows of 128+1
tokens of the val split (our side: `tfcore eval` on the val text).

Run:  /usr/bin/python3 bench/learning_curve.py [--steps 2000] [--tfcore build/tools/tfcore]
                                               [--dtype f32|bf16] [--skip-torch]
Prints both curves (every --every steps: train loss averaged over the last
interval, and a sampled val loss) and the final val losses; exit status 1
when ours ends more than 0.03 nats/char above PyTorch's. --dtype bf16 also
trains ours in bf16 mixed precision (tfcore train --dtype bf16, same seed)
and fails unless its val loss is within 0.02 nats/char of our f32 run's
(issue #20); --skip-torch leaves the PyTorch run out.

Architectures side by side (issue #35's learning check):

    /usr/bin/python3 bench/learning_curve.py --presets char-tiny,llama-tiny [--steps 2000]

trains each preset with `tfcore train` on the same data with the same
recipe, batch and seed, one after the other (no PyTorch run), and prints
both curves, each model's parameter count (from `tfcore train`'s own
report) and each final val loss; it fails only when a run fails.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def find_data():
    for p in (os.environ.get("TFCORE_DATA"), os.path.join(ROOT, "data", "tinyshakespeare.txt")):
        if p and os.path.isfile(p):
            return p
    sys.exit("learning_curve.py: tinyshakespeare.txt not found (set TFCORE_DATA)")


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, block, L=4, H=4, C=128):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(block, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") or ".bias" in name:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lr_at(s, steps, lr=1e-3, min_lr=1e-4, warmup=100):
    if s < warmup:
        return lr * (s + 1) / (warmup + 1)
    r = (s - warmup) / (steps - warmup)
    return min_lr + 0.5 * (1 + math.cos(math.pi * r)) * (lr - min_lr)


def full_val_loss(model, val, T=128):
    n = (len(val) - 1) // T
    x = val[: n * T].view(n, T)
    y = val[1 : n * T + 1].view(n, T)
    tot = 0.0
    with torch.no_grad():
        for i in range(0, n, 64):
            tot += model(x[i : i + 64], y[i : i + 64]).item() * x[i : i + 64].shape[0]
    return tot / n


def train_torch(data, steps, every, seed):
    torch.manual_seed(seed)
    chars = sorted(set(data))
    ids = torch.tensor([chars.index(c) for c in data], dtype=torch.long)
    n_val = len(ids) // 10
    train, val = ids[: len(ids) - n_val], ids[len(ids) - n_val :]
    model = GPT(len(chars), 128)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(seed)
    curve, t0, acc = [], time.time(), []
    for s in range(steps):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s, steps)
        off = torch.randint(0, len(train) - 129, (16,), generator=g)
        x = torch.stack([train[o : o + 128] for o in off])
        y = torch.stack([train[o + 1 : o + 129] for o in off])
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc.append(loss.item())
        if (s + 1) % every == 0 or s + 1 == steps:
            curve.append((s + 1, sum(acc) / len(acc)))
            acc = []
    wall = time.time() - t0
    return curve, full_val_loss(model, val), wall


def train_ours(tfcore, data_path, data, steps, every, seed, work, dtype="f32", preset="char-tiny", info=None):
    """Train `preset` with the CLI; (curve, val loss, wall seconds). info, when
    a dict, gets the parameter count tfcore train reports."""
    out = os.path.join(work, "ours-%s-%s" % (preset, dtype))
    log = os.path.join(work, "ours-%s-%s.jsonl" % (preset, dtype))
    t0 = time.time()
    p = subprocess.run([tfcore, "train", "--data", data_path, "--preset", preset, "--steps", str(steps),
                        "--batch", "16", "--lr", "1e-3", "--min-lr", "1e-4", "--warmup", "100", "--weight-decay",
                        "0.1", "--clip", "1.0", "--seed", str(seed), "--eval-every", str(every), "--eval-batches",
                        "4", "--out", out, "--log-json", log, "--force", "--sample-tokens", "0", "--dtype", dtype],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    if info is not None:
        info["params"] = parse_params(p.stdout)
    rows = [json.loads(l) for l in open(log)]
    curve, acc = [], []
    for r in rows:
        acc.append(r["loss"])
        if r["step"] % every == 0 or r["step"] == steps:
            curve.append((r["step"], sum(acc) / len(acc)))
            acc = []
    val_text = os.path.join(work, "val.txt")
    raw = open(data_path, "rb").read()
    with open(val_text, "wb") as f:
        f.write(raw[len(raw) - len(raw) // 10 :])
    # the checkpoint's (f32) weights evaluated in the run's own dtype; the first line is the f32 loss
    res = subprocess.run([tfcore, "eval", "--ckpt", out, "--data", val_text, "--dtype", dtype], check=True,
                         capture_output=True, text=True).stdout
    if dtype == "bf16":
        res = res.split("bf16 mixed precision", 1)[1]
    val = float(res.split("loss ")[1].split()[0])
    return curve, val, wall


def parse_params(text):
    """The parameter count in tfcore train's banner ("... 0.82M params" or
    "818048 parameters"), or None when it says none."""
    import re
    m = re.search(r"([0-9][0-9,]*) param", text)
    if m:
        return int(m.group(1).replace(",", ""))
    m = re.search(r"([0-9.]+)M param", text)
    return int(float(m.group(1)) * 1e6) if m else None


def compare_presets(a, presets):
    """Each preset trained by the CLI with the same recipe; both curves and val losses."""
    data_path = find_data()
    data = open(data_path, "rb").read().decode("latin-1")
    res = {}
    with tempfile.TemporaryDirectory() as work:
        for p in presets:
            info = {}
            res[p] = (*train_ours(a.tfcore, data_path, data, a.steps, a.every, a.seed, work, a.dtype, p, info), info)
    print("%6s " % "step" + " ".join("%13s" % p for p in presets))
    for i, (s, _) in enumerate(res[presets[0]][0]):
        print("%6d " % s + " ".join("%13.4f" % res[p][0][i][1] for p in presets))
    for p in presets:
        curve, val, wall, info = res[p]
        print(f"{p}: {info.get('params') or '?'} parameters, final val loss {val:.4f} nats/char "
              f"(all non-overlapping windows), wall {wall:.0f}s")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tfcore", default=os.path.join(ROOT, "build", "tools", "tfcore"))
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--presets", default="char-tiny",
                    help="several (e.g. char-tiny,llama-tiny): each trained by the CLI, compared, no PyTorch run")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    presets = [p for p in a.presets.split(",") if p]
    if presets != ["char-tiny"]:
        return compare_presets(a, presets)
    data_path = find_data()
    data = open(data_path, "rb").read().decode("latin-1")
    with tempfile.TemporaryDirectory() as work:
        ours, our_val, our_wall = train_ours(a.tfcore, data_path, data, a.steps, a.every, a.seed, work)
        if a.dtype == "bf16":
            b16, b16_val, b16_wall = train_ours(a.tfcore, data_path, data, a.steps, a.every, a.seed, work, "bf16")
    if a.dtype == "bf16":
        print(f"{'step':>6} {'tfcore f32':>11} {'tfcore bf16':>12}")
        for (s, l), (_, lb) in zip(ours, b16):
            print(f"{s:6d} {l:11.4f} {lb:12.4f}")
        d16 = b16_val - our_val
        print(f"final val loss: tfcore f32 {our_val:.4f}, tfcore bf16 mixed precision {b16_val:.4f}, "
              f"difference {d16:+.4f} nats/char; wall {our_wall:.0f}s vs {b16_wall:.0f}s")
        ok16 = abs(d16) <= 0.02
        print("PASS: bf16 within 0.02 nats/char of f32" if ok16 else "FAIL: bf16 more than 0.02 nats/char from f32")
        if a.skip_torch:
            return 0 if ok16 else 1
    elif a.skip_torch:
        print(f"final val loss: tfcore {our_val:.4f} ({our_wall:.0f}s)")
        return 0
    theirs, torch_val, torch_wall = train_torch(data, a.steps, a.every, a.seed)
    print(f"{'step':>6} {'tfcore train':>13} {'torch train':>12}")
    for (s, l), (_, lt) in zip(ours, theirs):
        print(f"{s:6d} {l:13.4f} {lt:12.4f}")
    diff = our_val - torch_val
    print(f"final val loss (all non-overlapping windows): tfcore {our_val:.4f}, torch {torch_val:.4f}, "
          f"difference {diff:+.4f} nats/char")
    print(f"wall time: tfcore {our_wall:.0f}s, torch {torch_wall:.0f}s ({a.steps} steps, {a.threads} threads)")
    ok = diff <= 0.03 and (a.dtype == "f32" or ok16)
    print("PASS: within 0.03 nats/char" if ok else "FAIL: more than 0.03 nats/char worse than torch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
