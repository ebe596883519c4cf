#!/usr/bin/env python3
"""The PyTorch side of the GPT-2 124M training-step benchmark (bench/gpu_gpt2.sh).

A GPT-2 124M written from the architecture (nanoGPT's layout: tied wte/lm_head,
pre-LayerNorm blocks, fused qkv Linear, GELU tanh MLP, biases everywhere,
vocabulary 50257 unpadded like tfcore's), trained on random tokens with
torch.autocast(bfloat16) over f32 master weights, AdamW(fused=True) and
clip_grad_norm_(1.0) -- the same step `tfcore train --preset gpt2 --device
cuda --dtype bf16` runs. No torch.compile. Attention is either manual
(q·kᵀ, causal mask, softmax, ·v: "eager") or F.scaled_dot_product_attention
("sdpa", torch >= 2.0). The loss is read once at the end, so no step waits on
the host.

Prints one JSON line: impl, mode, tokens_per_s, step_ms, params, loss, torch
version, device. Exit codes: 0 measured; 77 no CUDA device (the message says
so; --cpu-smoke runs a tiny model on the CPU instead, to test the script on a
machine without a GPU); 2 bad arguments or an SDPA-less torch for --attn sdpa.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, n_head, attn):
        super().__init__()
        self.n_head, self.attn = n_head, attn
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.attn == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, c, attn):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.h = nn.ModuleList(Block(c, n_head, attn) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2 (and tfcore's preset)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's init: N(0, 0.02), residual projections scaled by 1/sqrt(2L)
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--cpu-smoke", action="store_true", help="no GPU: a tiny model on the CPU (tests the script)")
    a = ap.parse_args()
    if a.attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        print(f"gpu_gpt2_torch.py: torch {torch.__version__} has no F.scaled_dot_product_attention", file=sys.stderr)
        return 2
    if a.cpu_smoke:
        dev, vocab, n_layer, n_head, c, a.batch, a.block, a.warmup, a.steps = "cpu", 512, 2, 2, 64, 2, 32, 1, 2
    elif not torch.cuda.is_available():
        print("gpu_gpt2_torch.py: no CUDA device (torch %s) -- skipped" % torch.__version__)
        return 77
    else:
        dev, vocab, n_layer, n_head, c = "cuda", 50257, 12, 12, 768
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 work stays f32, as in tfcore (only the autocast GEMMs are bf16)
    torch.manual_seed(1337)
    model = GPT(vocab, a.block, n_layer, n_head, c, a.attn).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    kw = {"fused": True} if dev == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **kw)
    gen = torch.Generator(device=dev).manual_seed(1)

    def step():
        x = torch.randint(0, vocab, (a.batch, a.block), device=dev, generator=gen)
        y = torch.randint(0, vocab, (a.batch, a.block), device=dev, generator=gen)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    last = float(loss.item())  # the one host wait, after the timed steps' work is queued
    if dev == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({
        "impl": "torch", "mode": a.attn, "tokens_per_s": a.batch * a.block * a.steps / dt,
        "step_ms": 1000.0 * dt / a.steps, "params": n_params, "loss": last, "batch": a.batch, "block": a.block,
        "steps": a.steps, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu (smoke test)"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
