#!/usr/bin/python3
"""libtfcore's CPU benchmark suite: ours and PyTorch side by side, in one run.

    /usr/bin/python3 bench/bench.py [--build build] [--only peak,gemm,gemm_bf16,micro,qlinear,adamw,train]
                                    [--quick] [--json results.json] [--dtypes f32,bf16]

Run from the source tree after `ninja -C build` (docs/PERFORMANCE.md). It
prints, per section, our figure, the reference's, their ratio, and whether
issue #8's target is met:

  peak   the fp32 FMA peak, measured (bench/fma_peak.c, AVX2 and AVX-512)
  gemm   tfc_matmul vs a bare cblas_sgemm on the same buffers and the same
         OpenBLAS kernels, plus bare OpenBLAS with its own default kernels
  gemm_bf16  tfc_matmul in f32 and bf16 (f32 accumulation) vs PyTorch 1.13
         f32 and bf16 (oneDNN) on training GEMM shapes, 1 and all threads,
         as % of the measured bf16 (AMX where usable, else vdpbf16ps) and
         f32 FMA peaks (issue #20);
         not in the default set
  micro  fused kernels (attention, LayerNorm, GELU, cross-entropy) vs
         PyTorch 1.13 eager fwd+bwd, the composition a 1.13 user writes
  adamw  one AdamW step over 10M parameters (1 tensor, 100 tensors)
  qlinear  the quantized linear (issue #15): f32 tfc_linear vs int8 and int4
         tfc_qlinear on GPT-2 layer shapes, M = 1, 4, 16, 64 rows; weight GB/s
         and speed-ups, with PyTorch 1.13's f32 linear and
         quantize_dynamic int8 Linear; not in the default set
  train  a full training step (fwd + CE + bwd + clip 1.0 + AdamW) for the
         char-tiny, char-small and gpt2-mini presets vs an equivalent
         PyTorch GPT-2: tokens/s, GFLOP/s, % of peak, peak RSS; with
         --dtypes f32,bf16 (the default on a CPU with AVX512-BF16) also bf16
         mixed precision (tfc_gpt_set_autocast) vs PyTorch under
         torch.autocast('cpu', dtype=torch.bfloat16), as % of the measured
         bf16 peak (AMX or vdpbf16ps; issue #20); a CPU without bf16 instructions is said
         so and gets the f32 rows only; --presets llama-char-small,llama-gpt2-mini
         runs the Llama family (RMSNorm, RoPE, grouped-query attention,
         SwiGLU, untied head) at those two scales against the same module
         written as transformers writes it in PyTorch 1.13 (issue #35)

Both sides get their best thread setting (1 or all cores). PyTorch also
runs with OPENBLAS_CORETYPE=Haswell and (on AVX-512 CPUs) SkylakeX — the
kernel family libtfcore selects — and the best of all is the reference.
Every figure is a median over repetitions. Nothing here runs in CI.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPROC = os.cpu_count() or 1
LLMC_TOKS = {"char-tiny": 2500.0, "char-small": 230.0, "gpt2-mini": 134.0}
# Batch x context per preset: B*T = 2048 rows for the char models (T = block
# size), 1024 for gpt2-mini (its LM head is then the (1024, 50257) CE case).
PRESETS = {"char-tiny": (16, 128, 65), "char-small": (8, 256, 65), "gpt2-mini": (8, 128, 50257)}
# The Llama family at the GPT-2 presets' scales (issue #35): name -> (the
# GPT-2 preset giving layers, heads, width, block, batch and vocab; kv heads;
# MLP width). Untied head, no biases, RoPE theta 10000, RMSNorm eps 1e-5, as
# the llama-tiny preset. char-small: 6 query heads over 2 kv heads and 1024 =
# 8*384/3, the family's default width; gpt2-mini: 4 over 2 and 704 = 8*256/3
# rounded up to 32, the default again.
LLAMA = {"llama-char-small": ("char-small", 2, 1024), "llama-gpt2-mini": ("gpt2-mini", 2, 704)}
for _name, (_base, _kv, _mlp) in LLAMA.items():
    PRESETS[_name] = PRESETS[_base]
SHAPES = {"char-tiny": (4, 4, 128, 128), "char-small": (6, 6, 384, 256), "gpt2-mini": (4, 4, 256, 128)}


def flops_per_token(r):
    """Training FLOPs per token of a train_bench row: 6 per matmul weight (the
    blocks' Linears and the LM head; an untied model's embedding table is a
    lookup, not a matmul) + the attention's 12·L·C·T."""
    L, C, T = r["n_layer"], r["n_embd"], r["T"]
    n = r["params"] - (r["vocab"] * C if not r.get("tied", 1) else 0)
    return 6 * n + 12 * L * C * T


# ---------------------------------------------------------------- utilities

def run_lines(cmd, env=None, timeout=1800):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def machine_line():
    model = "?"
    try:
        for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if l.startswith("Model name:"):
                model = l.split(":", 1)[1].strip()
    except OSError:
        pass
    load = os.getloadavg()
    return "%s, %d cores, load average %.1f/%.1f/%.1f at start" % (model, NPROC, *load)


def timeit(fn, budget, min_reps=3):
    fn()
    ts = []
    end = time.perf_counter() + budget
    while len(ts) < min_reps or (time.perf_counter() < end and len(ts) < 200):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts), 1e3 * min(ts), len(ts)


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for l in f:
            if l.startswith("VmHWM:"):
                return int(l.split()[1]) / 1024
    return 0.0


def table(title, header, rows):
    print("\n## " + title)
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    print("| " + " | ".join(str(h).ljust(n) for h, n in zip(header, w)) + " |")
    print("|" + "|".join("-" * (n + 2) for n in w) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).ljust(n) for x, n in zip(r, w)) + " |")
    sys.stdout.flush()


def verdict(ok):
    return "pass" if ok else "FALL SHORT"


# ------------------------------------------------------- the PyTorch worker

def torch_worker(args):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    out = []
    if args.mode == "micro":
        for nt in args.threads:
            torch.set_num_threads(nt)
            out += torch_micro(torch, F, nt, args.budget)
    elif args.mode == "gemm_bf16":
        for nt in args.threads:
            torch.set_num_threads(nt)
            out += torch_gemm_bf16(torch, nt, args.budget)
    elif args.mode == "qlinear":
        for nt in args.threads:
            torch.set_num_threads(nt)
            out += torch_qlinear(torch, nt, args.budget)
    elif args.mode == "adamw":
        for nt in args.threads:
            torch.set_num_threads(nt)
            out += torch_adamw(torch, nt, args.budget)
    elif args.mode == "train":
        torch.set_num_threads(args.threads[0])
        out += torch_train(torch, F, args.preset, args.steps, args.threads[0], args.dtype)
    for r in out:
        r["coretype"] = os.environ.get("OPENBLAS_CORETYPE", "default")
        r["blas_threads"] = int(os.environ.get("OPENBLAS_NUM_THREADS", NPROC))
        print(json.dumps(r))


# tfc_bench gemm_bf16's cases, in its order: (what, m, n, k, ta, tb).
GEMM_BF16_CASES = [("qkv fwd C=384", 1024, 1152, 384, 0, 0), ("mlp up fwd", 1024, 1536, 384, 0, 0),
                   ("mlp down fwd", 1024, 384, 1536, 0, 0), ("mlp up dX", 1024, 384, 1536, 0, 1),
                   ("mlp up dW", 384, 1536, 1024, 1, 0), ("qkv fwd C=256", 8192, 768, 256, 0, 0),
                   ("square", 1024, 1024, 1024, 0, 0)]


def gemm_case_name(what, m, n, k, ta, tb):
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    return "%s [%d,%d]%sx[%d,%d]%s" % (what, a[0], a[1], "T" if ta else "", b[0], b[1], "T" if tb else "")


def torch_gemm_bf16(torch, nt, budget):
    res = []
    for c in GEMM_BF16_CASES:
        what, m, n, k, ta, tb = c
        a = torch.randn((k, m) if ta else (m, k))
        b = torch.randn((n, k) if tb else (k, n))
        for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            x, y = a.to(dt), b.to(dt)
            x, y = (x.t() if ta else x), (y.t() if tb else y)
            ms, mn, reps = timeit(lambda: torch.matmul(x, y), budget)
            res.append({"bench": "gemm_bf16", "case": gemm_case_name(*c), "dtype": name, "threads": nt, "ms": ms,
                        "ms_min": mn, "gflops": 2.0 * m * n * k / ms / 1e6, "reps": reps})
    return res


def torch_micro(torch, F, nt, budget):
    res = []

    def rec(bench, case, fn):
        ms, mn, n = timeit(fn, budget)
        res.append({"bench": bench, "case": case, "ms": ms, "ms_min": mn, "reps": n, "threads": nt})

    B, H, T, D = 8, 6, 256, 64
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, T, D)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    def attn():
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(mask, float("-inf"))
        return torch.softmax(att, dim=-1) @ v

    def attn_fb():
        attn().backward(dout)
        q.grad = k.grad = v.grad = None

    case = "B=8 H=6 T=256 d=64 causal"
    rec("attention_fwd", case, attn)
    rec("attention_fwd_bwd", case, attn_fb)

    x = torch.randn(2048, 384, requires_grad=True)
    w = torch.randn(384, requires_grad=True)
    b = torch.randn(384, requires_grad=True)
    dy = torch.randn(2048, 384)

    def ln():
        F.layer_norm(x, (384,), w, b, 1e-5).backward(dy)
        x.grad = w.grad = b.grad = None

    rec("layernorm_fwd_bwd", "(2048, 384)", ln)

    g = torch.randn(2048, 1536, requires_grad=True)
    dg = torch.randn(2048, 1536)

    def gelu():
        F.gelu(g, approximate="tanh").backward(dg)
        g.grad = None

    rec("gelu_fwd_bwd", "(2048, 1536) tanh", gelu)

    for n, c in ((2048, 65), (1024, 50257)):
        logits = torch.randn(n, c, requires_grad=True)
        tgt = torch.tensor([(j * 7919) % c for j in range(n)])

        def ce():
            F.cross_entropy(logits, tgt).backward()
            logits.grad = None

        rec("cross_entropy_fwd_bwd", "(%d, %d)" % (n, c), ce)
    return res


# tfc_bench qlinear's cases, in its order: (K, N) x M.
QLINEAR_SHAPES = [(768, 2304), (768, 3072), (3072, 768)]
QLINEAR_MS = [1, 4, 16, 64]


def torch_qlinear(torch, nt, budget):
    """F.linear in f32 and torch.quantization.quantize_dynamic's int8 Linear
    (which also quantizes the activations per call: other semantics, same job)."""
    import torch.nn as nn
    res = []
    for K, N in QLINEAR_SHAPES:
        lin = nn.Linear(K, N)
        qlin = torch.quantization.quantize_dynamic(nn.Sequential(lin), {nn.Linear}, dtype=torch.qint8)
        for M in QLINEAR_MS:
            x = torch.randn(M, K)
            case = "K=%d N=%d M=%d" % (K, N, M)
            with torch.no_grad():
                for kind, fn in (("torch_f32", lambda: lin(x)), ("torch_int8_dynamic", lambda: qlin(x))):
                    ms, mn, reps = timeit(fn, budget / 2)
                    res.append({"bench": "qlinear", "case": case, "kind": kind, "threads": nt, "ms": ms,
                                "ms_min": mn, "reps": reps})
    return res


def torch_adamw(torch, nt, budget):
    res = []
    numel = 10_000_000
    for ntens in (1, 100):
        params = [torch.randn(numel // ntens + (i < numel % ntens), requires_grad=True) for i in range(ntens)]
        for p in params:
            p.grad = torch.randn_like(p)
        for foreach in (False, True):
            opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
            ms, mn, n = timeit(opt.step, budget)
            res.append({"bench": "adamw", "case": "%d params in %d tensors" % (numel, ntens), "ms": ms,
                        "ms_min": mn, "reps": n, "threads": nt, "foreach": foreach})
    return res


def torch_train(torch, F, preset, steps, nt, dtype="f32"):
    import contextlib
    import torch.nn as nn
    B, T, V = PRESETS[preset]
    if preset in LLAMA:
        return torch_train_llama(torch, F, preset, steps, nt, dtype)
    L, H, C, block = SHAPES[preset]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x, mask):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = torch.softmax(att.masked_fill(mask[:t, :t], float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(block, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))
            for p in self.parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.h:
                x = blk(x, self.mask)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied LM head

    model = GPT()
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, V, (B, T + 1), generator=g)
    x, y = data[:, :T], data[:, 1:]
    times, cpu = [], []
    # bf16: autocast around the forward (its recipe: bf16 Linears/matmuls, f32 master weights)
    ac = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if dtype == "bf16" else contextlib.nullcontext
    for s in range(steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        with ac():
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s >= 2:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    step = statistics.median(times)
    n = sum(p.numel() for p in params)
    return [{"bench": "train", "preset": preset, "B": B, "T": T, "params": n, "steps": steps,
             "step_ms": 1e3 * step, "cpu_ms": 1e3 * statistics.median(cpu), "tokens_per_s": B * T / step, "peak_rss_mib": peak_rss_mib(), "threads": nt,
             "loss_last": float(loss), "dtype": dtype}]


def torch_llama(torch, F, preset):
    """The Llama-family model in PyTorch 1.13, written the way transformers'
    modeling_llama writes it (LlamaRMSNorm in f32, rotate_half RoPE from
    cos/sin tables built once, repeat_kv for the grouped heads, eager
    softmax(QKᵀ/√d + causal mask)·V — 1.13 has no SDPA — and
    down(silu(gate(x)) · up(x))); no biases, untied lm_head, HF's init
    (normal 0.02, norms 1). Parameter names are transformers' without the
    self_attn./mlp./model. levels. forward(idx) returns the logits."""
    import torch.nn as nn
    base, KV, FF = LLAMA[preset]
    B, T, V = PRESETS[preset]
    L, H, C, block = SHAPES[base]
    D, eps, theta = C // H, 1e-5, 10000.0

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(C))

        def forward(self, x):
            dt = x.dtype
            x = x.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            return self.weight * x.to(dt)

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def repeat_kv(x):
        b, kv, t, d = x.shape
        return x[:, :, None].expand(b, kv, H // KV, t, d).reshape(b, H, t, d)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.q_proj, self.o_proj = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.k_proj, self.v_proj = nn.Linear(C, KV * D, bias=False), nn.Linear(C, KV * D, bias=False)
            self.gate_proj, self.up_proj = nn.Linear(C, FF, bias=False), nn.Linear(C, FF, bias=False)
            self.down_proj = nn.Linear(FF, C, bias=False)

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(b, t, H, D).transpose(1, 2)
            k = self.k_proj(h).view(b, t, KV, D).transpose(1, 2)
            v = self.v_proj(h).view(b, t, KV, D).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k), repeat_kv(v)
            att = (q @ k.transpose(2, 3)) / math.sqrt(D)
            att = F.softmax(att.masked_fill(mask[:t, :t], float("-inf")), dim=-1, dtype=torch.float32).to(q.dtype)
            y = (att @ v).transpose(1, 2).reshape(b, t, C)
            x = x + self.o_proj(y)
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, C)
            self.layers = nn.ModuleList(Block() for _ in range(L))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(C, V, bias=False)
            inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2).float() / D))
            emb = torch.cat([torch.outer(torch.arange(block).float(), inv_freq)] * 2, dim=-1)
            self.register_buffer("cos", emb.cos())
            self.register_buffer("sin", emb.sin())
            self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))
            for p in self.parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.embed_tokens(idx)
            cos, sin = self.cos[:t], self.sin[:t]
            for blk in self.layers:
                x = blk(x, cos, sin, self.mask)
            return self.lm_head(self.norm(x))

    return Llama()


def torch_train_llama(torch, F, preset, steps, nt, dtype="f32"):
    """torch_llama's model trained with torch_train's recipe and timing."""
    import contextlib
    B, T, V = PRESETS[preset]
    model = torch_llama(torch, F, preset)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, V, (B, T + 1), generator=g)
    x, y = data[:, :T], data[:, 1:]
    times, cpu = [], []
    ac = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if dtype == "bf16" else contextlib.nullcontext
    for s in range(steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        with ac():
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s >= 2:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    step = statistics.median(times)
    return [{"bench": "train", "preset": preset, "B": B, "T": T, "params": sum(p.numel() for p in params),
             "steps": steps, "step_ms": 1e3 * step, "cpu_ms": 1e3 * statistics.median(cpu),
             "tokens_per_s": B * T / step, "peak_rss_mib": peak_rss_mib(), "threads": nt, "loss_first": None,
             "loss_last": float(loss), "dtype": dtype}]


# ------------------------------------------------------------ the sections

def torch_envs():
    """PyTorch's configurations: OpenBLAS kernel family x OpenBLAS thread count.

    PyTorch 1.13's set_num_threads sets its OpenMP pool only; OpenBLAS keeps
    its own pthread pool (OPENBLAS_NUM_THREADS, default all cores). Both at 2
    threads on 2 cores oversubscribe (each pool spins while the other runs),
    so PyTorch gets every combination and keeps its best, as we do with our
    single pool (lib/cpu/blas_threads.c).
    """
    cores = [{}, {"OPENBLAS_CORETYPE": "Haswell"}]
    if "avx512f" in open("/proc/cpuinfo").read():
        cores.append({"OPENBLAS_CORETYPE": "SkylakeX"})
    blas = sorted({1, NPROC})
    return [dict(c, OPENBLAS_NUM_THREADS=str(b)) for c in cores for b in blas]


def torch_cfg(t):
    """How a PyTorch figure was obtained: its threads, OpenBLAS's threads and kernels."""
    return "%dt, BLAS %dt, %s" % (t["threads"], t.get("blas_threads", NPROC), t["coretype"])


def torch_runs(mode, threads, budget, quick, extra=()):
    """All PyTorch configurations of one mode: a subprocess per OpenBLAS kernel family."""
    out = []
    envs = torch_envs()
    if quick:
        envs = [e for e in envs if e.get("OPENBLAS_CORETYPE") == envs[-1].get("OPENBLAS_CORETYPE")]
    for env in envs:
        cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", mode, "--budget", str(budget),
               "--threads", ",".join(map(str, threads)), *extra]
        try:
            out += run_lines(cmd, env)
        except Exception as e:  # a missing torch must not hide our own figures
            print("  (torch %s %s failed: %s)" % (mode, env, str(e)[:300]))
    return out


def best_by(rows, key):
    best = {}
    for r in rows:
        k = key(r)
        if k not in best or r["ms"] < best[k]["ms"]:
            best[k] = r
    return best


def peak_lines(a, threads):
    """fma_peak's measured rows; an ISA the CPU has but cannot use (AMX the
    kernel refuses) is printed with the reason and left out."""
    rows = run_lines([os.path.join(a.build, "bench", "fma_peak"), str(threads)])
    for r in rows:
        if "unavailable" in r:
            print("  (%s present but unavailable: %s)" % (r["isa"], r["unavailable"]))
    return [r for r in rows if "gflops" in r]


def bf16_peak(peak):
    """The CPU's bf16 peak: AMX tiles where usable, else vdpbf16ps (None without either)."""
    found = [peak[k] for k in ("amx_bf16", "avx512_bf16") if peak and k in peak]
    return max(found) if found else None


def sec_peak(a, res):
    # Best of three runs: in a VM, time the hypervisor steals from a vCPU
    # still counts as the thread's CPU time, so a single run can read low.
    runs = [peak_lines(a, NPROC) for _ in range(3)]
    rows = [max((r[i] for r in runs), key=lambda x: x["gflops"]) for i in range(len(runs[0]))]
    res["peak"] = rows
    table("Measured fp32 FMA peak (%d threads)" % NPROC, ["ISA", "GFLOP/s (CPU time)", "GFLOP/s (wall, shared machine)"],
          [[r["isa"], "%.1f" % r["gflops"], "%.1f" % r["gflops_wall"]] for r in rows])
    # AVX2 is the denominator; the SkylakeX GEMM kernels run AVX-512,
    # so the training table shows both (AVX2 % can pass 100).
    return {r["isa"]: r["gflops"] for r in rows}


def sec_gemm(a, res):
    exe = os.path.join(a.build, "bench", "tfc_bench")
    ours = run_lines([exe, "gemm", str(a.budget)])
    dflt = run_lines([exe, "gemm", str(a.budget / 2)], {"TFC_BLAS_CORETYPE": "keep"})
    res["gemm"], res["gemm_openblas_default"] = ours, dflt
    info, dinfo = ours[0], dflt[0]
    dmap = {r["case"]: r for r in dflt[1:]}
    rows = []
    for r in ours[1:]:
        ratio = r["bare_ms"] / r["ms"]
        d = dmap.get(r["case"])
        rows.append([r["case"], "%.1f" % r["gflops"], "%.1f" % r["bare_gflops"], "%.2f" % ratio,
                     verdict(ratio >= 0.95), "%.1f" % d["bare_gflops"] if d else "-",
                     "%.1f" % (d["bare_ms"] / r["ms"]) if d else "-"])
    table("GEMM, fp32, %d threads: tfc_matmul vs bare cblas_sgemm (OpenBLAS kernels: ours %s, default %s)"
          % (info["threads"], info["coretype"], dinfo["coretype"]),
          ["shape", "ours GFLOP/s", "bare GFLOP/s", "ours/bare", "target >=0.95",
           "bare, OpenBLAS default kernels", "ours vs default (x)"], rows)


def sec_gemm_bf16(a, res):
    threads = sorted({1, NPROC})
    peaks = {}
    for nt in threads:  # best of three, as sec_peak
        runs = [peak_lines(a, nt) for _ in range(3)]
        for i in range(len(runs[0])):
            r = max((x[i] for x in runs), key=lambda x: x["gflops"])
            peaks[(r["isa"], nt)] = r["gflops"]
    res["gemm_bf16_peaks"] = [{"isa": k[0], "threads": k[1], "gflops": v} for k, v in peaks.items()]
    table("Measured peaks (CPU time) for the bf16 GEMM: vdpbf16ps counts 64 flops per instruction, "
          "AMX tdpbf16ps 16384",
          ["ISA", "threads", "GFLOP/s"], [[k[0], k[1], "%.1f" % v] for k, v in sorted(peaks.items())])
    exe = os.path.join(a.build, "bench", "tfc_bench")
    ours = ours_runs([exe, "gemm_bf16", str(a.budget)], a, threads)
    theirs = torch_runs("gemm_bf16", threads, a.budget, a.quick)
    res["gemm_bf16"], res["gemm_bf16_torch"] = ours, theirs
    bo = {(r["case"], r["threads"], r["dtype"]): r for r in ours}
    bt = best_by(theirs, lambda r: (r["case"], r["threads"], r["dtype"]))
    rows = []
    for c in GEMM_BF16_CASES:
        name = gemm_case_name(*c)
        for nt in threads:
            o32, o16 = bo.get((name, nt, "f32")), bo.get((name, nt, "bf16"))
            t32, t16 = bt.get((name, nt, "f32")), bt.get((name, nt, "bf16"))
            if not o32 or not o16:
                continue
            pk16 = bf16_peak({k[0]: v for k, v in peaks.items() if k[1] == nt})
            pk32 = peaks.get(("avx512", nt))
            g = lambda r: "%.1f" % r["gflops"] if r else "-"
            rows.append([name, nt, g(o32), g(o16), "%.2f" % (o16["gflops"] / o32["gflops"]), g(t32), g(t16),
                         "%.2f" % (o16["gflops"] / t16["gflops"]) if t16 else "-",
                         "%.0f%%" % (100 * o16["gflops"] / pk16) if pk16 else "-",
                         "%.0f%%" % (100 * t16["gflops"] / pk16) if pk16 and t16 else "-",
                         "%.0f%%" % (100 * o16["gflops"] / pk32) if pk32 else "-"])
    table("GEMM, bf16 (f32 accumulation) vs f32, median GFLOP/s; PyTorch's best over its OpenBLAS settings",
          ["shape", "threads", "ours f32", "ours bf16", "ours bf16/f32", "PyTorch f32", "PyTorch bf16 (oneDNN)",
           "ours bf16/PyTorch bf16", "ours bf16 % of bf16 peak", "PyTorch bf16 % of bf16 peak",
           "ours bf16 % of f32 AVX-512 peak"], rows)


def ours_runs(args_list, a, threads):
    out = []
    for nt in threads:
        for r in run_lines(args_list, {"OMP_NUM_THREADS": str(nt)}):
            r["threads"] = nt
            out.append(r)
    return out


def sec_micro(a, res):
    threads = sorted({1, NPROC})
    ours = ours_runs([os.path.join(a.build, "bench", "tfc_bench"), "micro", str(a.budget)], a, threads)
    theirs = torch_runs("micro", threads, a.budget, a.quick)
    res["micro"], res["micro_torch"] = ours, theirs
    bo = best_by(ours, lambda r: (r["bench"], r["case"]))
    bt = best_by(theirs, lambda r: (r["bench"], r["case"]))
    rows = []
    for k, r in bo.items():
        t = bt.get(k)
        rate = ("%.1f GFLOP/s" % (r["gflops"])) if r.get("gflops") else ("%.1f GB/s" % r["gbs"])
        rows.append([k[0], k[1], "%.3f (%dt)" % (r["ms"], r["threads"]), rate,
                     "%.3f (%s)" % (t["ms"], torch_cfg(t)) if t else "-",
                     "%.2f" % (t["ms"] / r["ms"]) if t else "-"])
    table("Fused kernels, median ms (threads; for PyTorch also its OpenBLAS kernels)",
          ["bench", "case", "ours ms", "ours rate", "PyTorch 1.13 ms", "speed-up vs PyTorch (x)"], rows)


def sec_qlinear(a, res):
    threads = sorted({1, NPROC})
    exe = os.path.join(a.build, "bench", "tfc_bench")
    ours = ours_runs([exe, "qlinear", str(a.budget)], a, threads)
    theirs = torch_runs("qlinear", threads, a.budget, True)  # one OpenBLAS family: the f32 GEMV is not the point
    res["qlinear"], res["qlinear_torch"] = ours, theirs
    bo = {(r["case"], r["threads"], r["kind"]): r for r in ours}
    bt = best_by(theirs, lambda r: (r["case"], r["threads"], r["kind"]))
    rows = []
    for K, N in QLINEAR_SHAPES:
        for M in QLINEAR_MS:
            case = "K=%d N=%d M=%d" % (K, N, M)
            for nt in threads:
                f, i8, i4 = (bo.get((case, nt, k)) for k in ("f32", "int8", "int4"))
                if not (f and i8 and i4):
                    continue
                tf, tq = bt.get((case, nt, "torch_f32")), bt.get((case, nt, "torch_int8_dynamic"))
                ms = lambda r: "%.3f" % r["ms"] if r else "-"
                rows.append([case, nt, "%s (%.1f)" % (ms(f), f["gbs"]), "%s (%.1f)" % (ms(i8), i8["gbs"]),
                             "%s (%.1f)" % (ms(i4), i4["gbs"]), "%.2f" % (f["ms"] / i8["ms"]),
                             "%.2f" % (f["ms"] / i4["ms"]), ms(tf), ms(tq),
                             "%.2f" % (tq["ms"] / i8["ms"]) if tq else "-"])
    table("Quantized linear y = x·Wᵀ + b, median ms (weight GB/s); x-fold = f32 ms / quantized ms (tokens/s ratio at M=1)",
          ["shape", "threads", "ours f32", "ours int8", "ours int4 g32", "int8 x", "int4 x", "PyTorch f32",
           "PyTorch int8 dynamic", "ours int8 vs PyTorch int8 (x)"], rows)


def sec_adamw(a, res):
    exe = os.path.join(a.build, "bench", "train_bench")
    if not os.path.exists(exe):
        print("\n## AdamW: skipped (train_bench not built: needs include/tfcore/optim.h and gpt.h)")
        return
    threads = sorted({1, NPROC})
    ours = []
    for ntens in (1, 100):
        ours += ours_runs([exe, "adamw", str(ntens), "10000000"], a, threads)
    theirs = torch_runs("adamw", threads, a.budget, a.quick)
    res["adamw"], res["adamw_torch"] = ours, theirs
    bo, bt = best_by(ours, lambda r: r["case"]), best_by(theirs, lambda r: r["case"])
    rows = [[k, "%.2f (%dt)" % (r["ms"], r["threads"]), "%.1f" % r["gbs"],
             "%.2f (%s, foreach=%s)" % (bt[k]["ms"], torch_cfg(bt[k]), bt[k]["foreach"]) if k in bt else "-",
             "%.2f" % (bt[k]["ms"] / r["ms"]) if k in bt else "-"] for k, r in bo.items()]
    table("AdamW step, median ms", ["case", "ours ms", "ours GB/s", "PyTorch 1.13 ms", "speed-up vs PyTorch (x)"],
          rows)


def has_bf16():
    """Whether the CPU has bf16 dot-product instructions (AVX512-BF16)."""
    return "avx512_bf16" in open("/proc/cpuinfo").read()


def sec_train(a, res, peak):
    exe = os.path.join(a.build, "bench", "train_bench")
    if not os.path.exists(exe):
        print("\n## Training step: skipped (train_bench not built: needs include/tfcore/gpt.h and optim.h)")
        return
    dtypes = a.dtypes.split(",") if a.dtypes else (["f32", "bf16"] if has_bf16() else ["f32"])
    if "bf16" in dtypes and not has_bf16():
        print("\n(this CPU has no bf16 instructions (no avx512_bf16): bf16 rows skipped, f32 only)")
        dtypes = [d for d in dtypes if d != "bf16"]
    elif not a.dtypes and not has_bf16():
        print("\n(this CPU has no bf16 instructions (no avx512_bf16): f32 figures only)")
    runs = collect_train(a, exe, dtypes)
    best = {}
    for dt in dtypes:
        best[dt] = sec_train_dtype(a, res, peak, runs[dt], dt)
    if "f32" in best and "bf16" in best:
        rows = []
        for preset in best["bf16"]:
            o16, t16 = best["bf16"][preset]
            o32, t32 = best["f32"].get(preset, (None, None))
            pk = bf16_peak(peak)
            pk32 = peak.get("avx512") if peak else None
            gf = flops_per_token(o16) * o16["tokens_per_s"] / 1e9
            rows.append([preset, "%.0f" % o16["tokens_per_s"], "%.0f" % o32["tokens_per_s"] if o32 else "-",
                         "%.2f" % (o16["tokens_per_s"] / o32["tokens_per_s"]) if o32 else "-",
                         "%.0f" % t16["tokens_per_s"] if t16 else "-",
                         "%.2f" % (o16["tokens_per_s"] / t16["tokens_per_s"]) if t16 else "-",
                         "%.0f%%" % (100 * gf / pk) if pk else "-",
                         "%.0f%%" % (100 * gf / pk32) if pk32 else "-",
                         verdict(o32 is not None and o16["tokens_per_s"] >= 1.7 * o32["tokens_per_s"]),
                         verdict(t16 is not None and o16["tokens_per_s"] >= 2 * t16["tokens_per_s"])])
        table("bf16 mixed precision vs f32 (issue #20 targets: >= 1.7x our f32, >= 2x PyTorch autocast)",
              ["preset", "ours bf16 tok/s", "ours f32 tok/s", "bf16/f32", "PyTorch autocast tok/s",
               "ours/PyTorch bf16", "% of bf16 peak (AMX or vdpbf16ps)", "% of f32 FMA peak", ">=1.7x f32",
               ">=2x PyTorch bf16"],
              rows)
        print("  (our CPU bf16 GEMM widens bf16 operands to f32 and runs f32 FMAs (lib/cpu/gemm_bf16.c), so the\n"
              "  f32 FMA peak bounds it; above 100% of the bf16 peak means more than bf16 instructions could give)")


def train_threads(a):
    """The thread counts both sides' training runs get (--train-threads; default 1 and all cores)."""
    return [int(x) for x in a.train_threads.split(",")] if a.train_threads else sorted({1, NPROC})


def train_envs(a):
    envs = torch_envs()
    if a.quick:
        envs = [e for e in envs if e.get("OPENBLAS_CORETYPE") == envs[-1].get("OPENBLAS_CORETYPE")]
    return envs


def collect_train(a, exe, dtypes):
    """{dtype: {preset: (our rows, PyTorch's rows)}}. Interleaved: before every
    PyTorch run, one of ours with the same thread count and dtype, and the
    dtypes alternate, so every row samples the same load on a shared machine."""
    out = {dt: {} for dt in dtypes}
    for preset in a.presets.split(","):
        B, T, V = PRESETS[preset]
        # a Llama-family name runs its GPT-2 base preset with the family's arch, kv heads and MLP width
        base, family = (LLAMA[preset][0], ["llama", str(LLAMA[preset][1]), str(LLAMA[preset][2])]) \
            if preset in LLAMA else (preset, [])
        for dt in dtypes:
            out[dt][preset] = ([], [])
        for nt in train_threads(a):
            for env in train_envs(a):
                for dt in dtypes:
                    ours, theirs = out[dt][preset]
                    r = run_lines([exe, "train", base, str(B), str(T), str(a.steps), str(V), dt, *family],
                                  {"OMP_NUM_THREADS": str(nt)})[0]
                    r["preset"] = preset
                    r["threads"] = nt
                    ours.append(r)
                    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "train", "--threads",
                           str(nt), "--preset", preset, "--steps", str(a.steps), "--dtype", dt]
                    try:
                        theirs += run_lines(cmd, env)
                    except Exception as e:
                        print("  (torch train %s %s %s failed: %s)" % (preset, dt, env, str(e)[:300]))
    return out


def sec_train_dtype(a, res, peak, runs, dtype):
    """One dtype's training table from its runs {preset: (ours, theirs)};
    returns {preset: (our best row, PyTorch's best row or None)}."""
    threads = train_threads(a)
    best = {}
    rows, verdicts = [], []
    envs = train_envs(a)
    for preset, (ours, theirs) in runs.items():
        B, T, V = PRESETS[preset]
        res.setdefault("train", []).extend(ours)
        res.setdefault("train_torch", []).extend(theirs)
        o = max(ours, key=lambda r: r["tokens_per_s"])
        t = max(theirs, key=lambda r: r["tokens_per_s"]) if theirs else None
        best[preset] = (o, t)
        gf = flops_per_token(o) * o["tokens_per_s"] / 1e9
        ratio = o["tokens_per_s"] / t["tokens_per_s"] if t else float("nan")
        rss = o["peak_rss_mib"] / t["peak_rss_mib"] if t else float("nan")
        llmc = o["tokens_per_s"] / LLMC_TOKS[preset] if preset in LLMC_TOKS else None
        rows.append([preset, "%dx%d" % (B, T), "%.0f (%dt)" % (o["tokens_per_s"], o["threads"]),
                     "%.1f" % gf, "%.0f%%" % (100 * gf / peak["avx2"]) if peak and peak.get("avx2") else "-",
                     "%.0f%%" % (100 * gf / peak["avx512"]) if peak and peak.get("avx512") else "-",
                     "%.0f" % o["peak_rss_mib"],
                     "%.0f (%s)" % (t["tokens_per_s"], torch_cfg(t)) if t else "-",
                     "%.0f" % t["peak_rss_mib"] if t else "-", "%.2f" % ratio, "%.2f" % llmc if llmc else "-",
                     "%.2f" % rss, str(o["os_allocs_after_step2"])])
        verdicts.append([preset, verdict(ratio >= 1.5), verdict(llmc >= 5) if llmc else "- (no llm.c figure)",
                         verdict(rss <= 0.6), verdict(o["os_allocs_after_step2"] == 0)])
        if t:
            print("  %s: ours %.0f tok/s (fwd %.0f, bwd %.0f, clip %.1f, AdamW %.1f ms), PyTorch %.0f tok/s"
                  % (preset, o["tokens_per_s"], o["fwd_ms"], o["bwd_ms"], o["clip_ms"], o["opt_ms"],
                     t["tokens_per_s"]))
        # per CPU-second (all the process's threads): steadier than wall time on a shared machine, and
        # at one thread what an idle core would give; the best run of each side at each thread count
        for nt in threads:
            oc = [r for r in ours if r["threads"] == nt and r.get("cpu_ms")]
            tc = [r for r in theirs if r["threads"] == nt and r.get("cpu_ms")]
            if oc and tc:
                oc, tc = min(r["cpu_ms"] for r in oc), min(r["cpu_ms"] for r in tc)
                print("  %s, %d thread%s: %.0f vs %.0f tokens per CPU-second (ours %.0f, PyTorch %.0f CPU ms a "
                      "step): %.2fx" % (preset, nt, "s" if nt > 1 else "", B * T / oc * 1e3, B * T / tc * 1e3, oc,
                                        tc, tc / oc))
    table("Training step (fwd + CE + bwd + clip 1.0 + AdamW), %s, median of %d steps after 2 warm-up; "
          "best of %d interleaved runs per side"
          % ("fp32" if dtype == "f32" else "bf16 mixed precision (PyTorch: torch.autocast)", a.steps,
             len(threads) * len(envs)),
          ["preset", "BxT", "ours tok/s", "ours GFLOP/s", "% of AVX2 peak", "% of AVX-512 peak", "ours peak RSS MiB",
           "PyTorch tok/s", "PyTorch RSS MiB", "ours/PyTorch", "ours/llm.c", "RSS ours/PyTorch",
           "OS allocs after step 2"], rows)
    table("Training targets (issue #8), %s" % dtype,
          ["preset", ">=1.5x PyTorch", ">=5x llm.c", "RSS <=0.6x", "0 OS allocs"], verdicts)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--only", default="peak,gemm,micro,adamw,train")
    p.add_argument("--presets", default="char-tiny,char-small,gpt2-mini",
                   help="training presets: char-tiny, char-small, gpt2-mini, llama-char-small, llama-gpt2-mini")
    p.add_argument("--steps", type=int, default=5, help="timed training steps per run (after 2 warm-up)")
    p.add_argument("--train-threads", help="training thread counts, both sides (default: 1 and all cores)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of repetitions per micro case")
    p.add_argument("--quick", action="store_true", help="PyTorch with one OpenBLAS kernel family (the last: SkylakeX on AVX-512) instead of all")
    p.add_argument("--json", help="also write every raw figure to this file")
    p.add_argument("--dtypes", help="training dtypes, f32,bf16 (default: both on a CPU with AVX512-BF16, else f32)")
    p.add_argument("--dtype", default="f32", help=argparse.SUPPRESS)
    p.add_argument("--torch-worker", dest="mode", help=argparse.SUPPRESS)
    p.add_argument("--threads", default=str(NPROC), help=argparse.SUPPRESS)
    p.add_argument("--preset", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.mode:
        a.threads = [int(x) for x in a.threads.split(",")]
        return torch_worker(a)
    if not os.path.exists(os.path.join(a.build, "bench", "tfc_bench")):
        sys.exit("bench.py: %s/bench/tfc_bench not found: build first (meson setup build && ninja -C build)" % a.build)
    only = set(a.only.split(","))
    res = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "machine": machine_line()}
    print("# libtfcore CPU benchmarks\n%s\n%s\ncommand: %s" % (res["date"], res["machine"], " ".join(sys.argv)))
    peak = sec_peak(a, res) if "peak" in only else None
    if "gemm" in only:
        sec_gemm(a, res)
    if "gemm_bf16" in only:
        sec_gemm_bf16(a, res)
    if "micro" in only:
        sec_micro(a, res)
    if "qlinear" in only:
        sec_qlinear(a, res)
    if "adamw" in only:
        sec_adamw(a, res)
    if "train" in only:
        sec_train(a, res, peak)
    res["load_at_end"] = os.getloadavg()
    print("\nload average at end: %.1f/%.1f/%.1f" % res["load_at_end"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
