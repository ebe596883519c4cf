#!/usr/bin/python3
"""The decode roofline report (issue #15, stage 3).

In one run: the machine's memory bandwidth (bench/stream_triad, STREAM
triad over arrays 4x the LLC) and f32 FMA peak (bench/fma_peak) at the
thread count used; then greedy KV-cache decode tokens/s of tfcore's GPT for
each preset x format (f32, int8, int4 group 32; with the LM head quantized
too when the library can) x batch, with the bytes each token has to read,
the GB/s and FLOP/s that implies, and how close that is to the two roofs;
PyTorch 1.13 decoding the same architecture (f32, and
torch.quantization.quantize_dynamic int8) side by side; an SVG roofline.

    TFCORE_LIBRARY=build-cpu/lib/libtfcore.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/decode_roofline.py [--quick] [--presets gpt2,char-small]
        [--batches 1,2,4] [--threads 2] [--svg decode_roofline.svg] [--no-torch]

Presets: tfcore's GPT-2 ones (gpt2, gpt2-mini, char-small, char-tiny) and
"tinyllama": a TinyLlama-1.1B-shaped Llama (22 layers, 2048 wide, 32 heads
over 4 kv heads, MLP 5632, vocab 32000, untied head) with random weights
built by the library (issue #35; f32 is 4.4 GB). PyTorch decodes the GPT-2
presets only.

Timing: wall clock of N decode steps after a P-token prompt, best of
--reps. Batch 1 uses GPT.generate (the per-token callback timestamps the
steps, so the prompt's prefill is not counted); batch > 1 uses
GPT.generate_batch when the library has it (its callback timestamps the
last sequence's tokens, drawn after every prompt is prefilled), otherwise a loop of
tfc_gpt_forward_cached over a batch-B cache with a numpy argmax, marked
"provisional" in the table.

Bytes per token (the model the % of roofline is taken against): the
weights one decode step must read once (block matmuls in their format, the
LM head, biases, LayerNorms) / B, plus per sequence the K and V cache read
at the mean context length of the measured steps, the new K/V written, and
the token's wte/wpe rows. Activations are not counted (they stay in cache).
For the Llama family: q/k/v/o, gate/up/down and the untied head in their
formats, the RMSNorm weights, the K/V of the kv heads only, the embedding
row (traffic_llama).
FLOPs per token: 2 per weight of every matmul (blocks + head) plus the
attention's 4*S*C per layer.
"""
import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import time

READS = {}  # threads -> the read-only pass of every stream_triad run at that count (GB/s)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPROC = os.cpu_count() or 1


# ------------------------------------------------------------------ machine

def run_json(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    return l.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine_roofs(build, threads, reps, clock="wall"):
    """(triad GB/s, f32 FMA GFLOP/s, the ISA of that peak, LLC MiB): best over reps runs of each."""
    exe = lambda name: os.path.join(build, "bench", name)
    triads = [run_json([exe("stream_triad"), str(threads)])[0] for _ in range(reps)]
    suf = "_cpu" if clock == "cpu" else ""  # per CPU-second, like the decode figures under --clock cpu
    bw = max(t["gbs" + suf] for t in triads)
    READS.setdefault(threads, []).extend(t["gbs_read" + suf] for t in triads)
    best = {}
    for _ in range(reps):
        for r in run_json([exe("fma_peak"), str(threads)]):
            if r["isa"] in ("avx2", "avx512"):  # the f32 peaks (avx512_bf16 is bf16)
                best[r["isa"]] = max(best.get(r["isa"], 0), r["gflops"])
    isa = max(best, key=best.get)
    return bw, best[isa], isa, triads[0]["llc_mib"]


# ------------------------------------------------------------- byte model

# A TinyLlama-1.1B-shaped model (TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json:
# 22 layers, hidden 2048, 32 heads over 4 kv heads, intermediate 5632, vocab
# 32000, rms_norm_eps 1e-5, rope_theta 10000, untied head), random weights
# built by the library: nothing is downloaded. Block 2048 (its
# max_position_embeddings); the decode only uses the first few dozen.
TINYLLAMA = dict(arch="llama", n_layer=22, n_embd=2048, n_head=32, n_kv_head=4, mlp_hidden=5632, vocab_size=32000,
                 block_size=2048, ln_eps=1e-5, rope_theta=10000.0, tie_weights=False, bias=False)


def is_gpt2(preset):
    return preset != "tinyllama"


def shapes(cfg):
    """The sizes the byte model reads, from a tfcore.GPTConfig."""
    llama = cfg.arch != "gpt2"
    C, H = cfg.n_embd, cfg.n_head
    return dict(L=cfg.n_layer, C=C, V=cfg.vocab_size, H=H, llama=llama,
                KVC=(cfg.n_kv_head or H) * (C // H) if llama else C, F=cfg.mlp_hidden or (8 * C // 3 + 31) // 32 * 32
                if llama else 4 * C, tied=bool(cfg.tie_weights))


def traffic(cfg, fmt, group, head_q, B, S):
    """(bytes per token, FLOPs per token, weight bytes per step) of one
    decode step at batch B with S positions attended (module docstring)."""
    L, C, V = cfg["L"], cfg["C"], cfg["V"]
    if cfg["llama"]:
        return traffic_llama(cfg, fmt, group, head_q, B, S)

    def qbytes(n_out, k_in, f):  # one weight [n_out, k_in] in format f (include/tfcore/quant.h)
        if f == "f32":
            return 4.0 * n_out * k_in
        if f == "int8":
            return 1.0 * n_out * k_in + 4.0 * n_out  # int8 codes + one f32 scale per output row
        return 0.5 * n_out * k_in + 4.0 * n_out * (k_in // group)  # nibbles + one f32 scale per group

    mats = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)]  # c_attn, attn c_proj, c_fc, mlp c_proj as [out, in]
    w = L * sum(qbytes(n, k, fmt) for n, k in mats)
    w += L * 4.0 * (9 * C + 4 * C) + 4.0 * 2 * C  # biases, ln_1/ln_2, ln_f (f32)
    w += qbytes(V, C, fmt if head_q else "f32")  # the LM head (wte, tied)
    kv = L * 2 * 4.0 * C * (S + 1) + 2 * 4.0 * C  # K,V read over S, the new K,V written; wte+wpe rows
    flops = 2.0 * (L * 12 * C * C + V * C) + L * 4.0 * S * C
    return w / B + kv, flops, w


def qbytes(n_out, k_in, f, group):
    """The bytes of one weight [n_out, k_in] in format f (include/tfcore/quant.h)."""
    if f == "f32":
        return 4.0 * n_out * k_in
    if f == "int8":
        return 1.0 * n_out * k_in + 4.0 * n_out  # int8 codes + one f32 scale per output row
    return 0.5 * n_out * k_in + 4.0 * n_out * (k_in // group)  # nibbles + one f32 scale per group


def traffic_llama(cfg, fmt, group, head_q, B, S):
    """traffic() for the Llama family: per layer q/o [C,C], k/v [KVC,C]
    (KVC = kv heads x head dim), gate/up [F,C], down [C,F], no biases, two
    RMSNorm weights; the final norm; the LM head [V,C] (untied: its own
    matrix; the embedding row is read apart). The KV cache holds the kv heads
    only, so K and V cost KVC floats per position and layer; the attention
    still does 4·S·C FLOPs per layer (every query head reads its group's K/V)."""
    L, C, V, KVC, F = cfg["L"], cfg["C"], cfg["V"], cfg["KVC"], cfg["F"]
    mats = [(C, C), (KVC, C), (KVC, C), (C, C), (F, C), (F, C), (C, F)]  # q, k, v, o, gate, up, down [out, in]
    w = L * sum(qbytes(n, k, fmt, group) for n, k in mats)
    w += L * 4.0 * 2 * C + 4.0 * C  # input/post-attention RMSNorms, the final norm (f32)
    w += qbytes(V, C, fmt if head_q else "f32", group)  # the LM head
    kv = L * 2 * 4.0 * KVC * (S + 1) + 4.0 * C  # K,V read over S, the new K,V written; the embedding row
    flops = 2.0 * (L * sum(n * k for n, k in mats) + V * C) + L * 4.0 * S * C
    return w / B + kv, flops, w


# ------------------------------------------------------------------ tfcore

def tfcore_model(tfcore, preset, fmt, group, head_q):
    if preset == "tinyllama":
        m = tfcore.GPT(tfcore.GPTConfig(**TINYLLAMA), seed=1)
    elif preset.startswith("char"):
        m = tfcore.GPT(preset, vocab_size=65, seed=1)
    else:
        m = tfcore.GPT(preset, seed=1)
    if fmt != "f32":
        if head_q:
            m.quantize(fmt, group_size=group if fmt == "int4" else 0, **HEAD_KW)
        else:
            m.quantize(fmt, group_size=group if fmt == "int4" else 0)
    return m


def head_quant_kwargs(tfcore):
    """The keyword of GPT.quantize that also quantizes the LM head, if this build has one (else None)."""
    params = inspect.signature(tfcore.GPT.quantize).parameters
    for k in ("head", "quantize_head", "lm_head", "include_head"):
        if k in params:
            return {k: True}
    return None


HEAD_KW = None


def decode_step_seconds(tfcore, m, B, P, N, reps, clock, seed=0):
    """Seconds per decode step (best of reps) of greedy decoding at batch B, N
    steps after a P-token prompt per sequence; and how it was measured."""
    import random
    V = m.config.vocab_size
    rng = random.Random(seed)
    prompts = [[rng.randrange(V) for _ in range(P)] for _ in range(B)]
    best = math.inf
    if B == 1:
        for _ in range(reps):
            stamps = []
            m.generate(prompts[0], N + 1, temperature=0, callback=lambda t: stamps.append(clock()))
            best = min(best, (stamps[-1] - stamps[0]) / N)  # token 0 comes after prefill; 1..N after a step each
        return best, "generate"
    if hasattr(m, "generate_batch"):
        for _ in range(reps):
            stamps = []
            # prompts are prefilled one by one before the first draw, then each step draws every
            # sequence's next token: the last sequence's tokens 0..N bracket N batched steps
            m.generate_batch(prompts, N + 1, temperature=0,
                             callback=lambda i, t: stamps.append(clock()) if i == B - 1 else None)
            best = min(best, (stamps[-1] - stamps[0]) / N)
        return best, "generate_batch"
    # provisional: the batch-B KV cache driven step by step (what generate_batch will do in C)
    from tfcore._lib import check, ffi, lib
    from tfcore.tensor import _wrap, tensor
    for _ in range(reps):
        cp = ffi.new("tfc_gpt_cache **")
        check(lib.tfc_gpt_cache_new(m._h, B, cp))
        cache = ffi.gc(cp[0], lib.tfc_gpt_cache_release)

        def step(ids):
            out = ffi.new("tfc_tensor **")
            idx = tensor(ids, dtype="int32")
            check(lib.tfc_gpt_forward_cached(m._h, cache, idx._h, out))
            lg = _wrap(out[0]).numpy()
            return lg[:, -1, :].argmax(axis=1).reshape(B, 1).tolist()

        nxt = step(prompts)
        t0 = clock()
        for _ in range(N):
            nxt = step(nxt)
        best = min(best, (clock() - t0) / N)
    return best, "provisional: forward_cached loop"


def triad(a):
    """One triad measurement at a.threads (best of its repetitions), kept in a.triads[a.threads]."""
    t = run_json([os.path.join(a.build, "bench", "stream_triad"), str(a.threads)])[0]
    suf = "_cpu" if a.clock == "cpu" else ""
    a.triads.setdefault(a.threads, []).append(t["gbs" + suf])
    READS.setdefault(a.threads, []).append(t["gbs_read" + suf])
    return t["gbs" + suf]


def tfcore_rows(a, peaks):
    """Our rows for every preset x format x head x thread count x batch. One
    model per preset and block format: it is measured at every thread count,
    then (where the library can) its LM head is quantized too and measured
    again, so a TinyLlama is built three times, not ten."""
    global HEAD_KW
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import tfcore
    HEAD_KW = head_quant_kwargs(tfcore)
    head_too = bool(HEAD_KW) and hasattr(tfcore.GPT, "quantize_head")
    groups = [("f32", 0, [False])]
    for f in a.formats:
        if f != "f32":
            groups.append((f, 32 if f == "int4" else 0, [False, True] if head_too else [False]))
    rows = []
    for preset in a.presets:
        for fmt, g, heads in groups:
            if fmt not in a.formats:
                continue
            m = tfcore_model(tfcore, preset, fmt, g, False)
            cfg = shapes(m.config)
            for hq in heads:
                if hq:
                    m.quantize_head(fmt, group_size=g)
                for nt in a.thread_list:
                    a.threads = nt
                    tfcore.set_num_threads(nt)
                    # the VM's bandwidth moves with its neighbours' load (5-11 GB/s on one thread within an
                    # hour): a triad next to each group, so each row can be read against its moment's bandwidth
                    near = triad(a)
                    m.generate([1, 2, 3], 2, temperature=0)  # warm up (thread pool, allocator)
                    for B in a.batches:
                        N = max(a.min_new, min(a.new, a.token_budget // B))
                        sec, how = decode_step_seconds(tfcore, m, B, a.prompt, N, a.reps, CLOCKS[a.clock])
                        S = a.prompt + N / 2.0  # the mean number of positions attended over the measured steps
                        bpt, fpt, wstep = traffic(cfg, fmt, g, hq, B, S)
                        tps = B / sec
                        name = fmt + ("-g%d" % g if fmt == "int4" else "") + ("+head" if hq else "")
                        r = dict(preset=preset, fmt=name, base=fmt, head_q=hq, batch=B, threads=nt, tok_s=tps, new=N,
                                 bytes_tok=bpt, flops_tok=fpt, gbs=bpt * tps / 1e9, gflops=fpt * tps / 1e9,
                                 how=how, params=m.num_parameters(), in_llc=wstep < a.llc_mib * 2 ** 20,
                                 bw_near=near)
                        r["pct_near"] = 100 * r["gbs"] / near
                        r["pct_peak"] = 100 * r["gflops"] / peaks[nt]
                        r["ai"] = fpt / bpt
                        rows.append(r)
                        print("  %-10s %-14s %dt B=%-3d %8.1f tok/s  %6.1f MB/tok  %6.2f GB/s (%5.1f%% of triad "
                              "%.1f)  %6.1f GFLOP/s (%5.1f%% peak)%s"
                              % (preset, name, nt, B, tps, bpt / 1e6, r["gbs"], r["pct_near"], near, r["gflops"],
                                 r["pct_peak"], "" if how in ("generate", "generate_batch") else "  [" + how + "]"),
                              flush=True)
            del m
    return rows


# ------------------------------------------------------------------ PyTorch

def torch_worker(a):
    """PyTorch 1.13 decode of the same architecture, written as a 1.13 user
    writes it: past key/values concatenated per step, torch.no_grad; f32 and
    quantize_dynamic int8 (nn.Linear, so the tied head is quantized too)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import tfcore
    out = []

    class Block(nn.Module):
        def __init__(self, C, H):
            super().__init__()
            self.H = H
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x, past):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
            if past is not None:
                k = torch.cat([past[0], k], dim=2)
                v = torch.cat([past[1], v], dim=2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if T > 1:
                S = k.size(2)
                mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
                att = att.masked_fill(~mask, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
            return x, (k, v)

    class GPT(nn.Module):
        def __init__(self, L, C, H, V, block):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(block, C)
            self.h = nn.ModuleList(Block(C, H) for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx, past=None):
            start = 0 if past is None else past[0][0].size(2)
            pos = torch.arange(start, start + idx.size(1))
            x = self.wte(idx) + self.wpe(pos)
            presents = []
            for i, b in enumerate(self.h):
                x, p = b(x, None if past is None else past[i])
                presents.append(p)
            return self.lm_head(self.ln_f(x)), presents

    for preset in a.presets:
        if not is_gpt2(preset):
            continue  # PyTorch decodes the GPT-2 presets only (torch_rows)
        c = tfcore.GPTConfig.preset(preset, **({"vocab_size": 65} if preset.startswith("char") else {}))
        model = GPT(c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.block_size).eval()
        variants = [("f32", model)]
        if "int8" in a.formats:
            try:
                variants.append(("int8_dynamic", torch.quantization.quantize_dynamic(model, {nn.Linear},
                                                                                     dtype=torch.qint8)))
            except Exception as e:  # an engine this machine lacks
                print("torch quantize_dynamic failed: %s" % e, file=sys.stderr)
        for name, mod in variants:
            with torch.no_grad():
                g = torch.Generator().manual_seed(0)
                mod(torch.randint(0, c.vocab_size, (1, 3), generator=g))  # warm up
                for B in a.torch_batches:
                    N = max(a.min_new, min(a.new, a.token_budget // B))
                    idx = torch.randint(0, c.vocab_size, (B, a.prompt), generator=g)
                    best = math.inf
                    for _ in range(a.reps):
                        logits, past = mod(idx)
                        nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                        t0 = CLOCKS[a.clock]()
                        for _ in range(N):
                            logits, past = mod(nxt, past)
                            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                        best = min(best, (CLOCKS[a.clock]() - t0) / N)
                    out.append(dict(preset=preset, fmt=name, batch=B, tok_s=B / best, new=N))
                    print(json.dumps(out[-1]), flush=True)
    return out


def torch_rows(a):
    if not any(is_gpt2(p) for p in a.presets):
        print("(PyTorch decodes the GPT-2 presets only: no PyTorch rows for %s)" % ", ".join(a.presets))
        return []
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--threads", str(a.threads),
           "--presets", ",".join(a.presets), "--torch-batches", ",".join(map(str, a.torch_batches)),
           "--formats", ",".join(a.formats), "--reps", str(a.reps), "--prompt", str(a.prompt),
           "--new", str(a.new), "--clock", a.clock, "--min-new", str(a.min_new), "--token-budget", str(a.token_budget)]
    # its own process: torch's OpenMP/MKL and tfcore's pool do not share a process (as in bench/bench.py)
    near = triad(a)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        print("PyTorch worker failed: %s" % p.stderr[-2000:])
        return []
    return [dict(json.loads(l), bw_near=near) for l in p.stdout.splitlines() if l.startswith("{")]


# ---------------------------------------------------------------- the report

def write_svg(path, rows, bw, peak, title, read_bw=None):
    """Log-log roofline: arithmetic intensity (FLOP/byte) vs GFLOP/s, the
    bandwidth roof, the compute roof, one labelled point per configuration
    (the style of tools/loss_plot.c's loss curve)."""
    W, H, L, R, T, Bm = 900, 560, 80, 30, 40, 55
    ais = [r["ai"] for r in rows] + [peak / bw]
    gfs = [r["gflops"] for r in rows] + [peak]
    x0 = 10 ** math.floor(math.log10(min(ais) / 1.5))
    x1 = 10 ** math.ceil(math.log10(max(ais) * 1.5))
    y0 = 10 ** math.floor(math.log10(min(min(gfs), bw * x0) / 1.5))
    y1 = 10 ** math.ceil(math.log10(peak * 1.5))
    X = lambda v: L + (W - L - R) * (math.log10(v) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
    Y = lambda v: T + (H - T - Bm) * (1 - (math.log10(v) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
         'font-size="12">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="24" font-size="15">%s</text>' % (L, title)]
    d = x0
    while d <= x1 * 1.001:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (X(d), T, X(d), H - Bm))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(d), H - Bm + 18, d))
        d *= 10
    d = y0
    while d <= y1 * 1.001:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, Y(d), W - R, Y(d)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (L - 6, Y(d) + 4, d))
        d *= 10
    o.append('<text x="%d" y="%d" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>'
             % ((L + W - R) // 2, H - 12))
    o.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">GFLOP/s</text>'
             % ((T + H - Bm) // 2, (T + H - Bm) // 2))
    knee = peak / bw
    o.append('<polyline fill="none" stroke="#333" stroke-width="2" points="%.1f,%.1f %.1f,%.1f %.1f,%.1f"/>'
             % (X(x0), Y(max(bw * x0, y0)), X(knee), Y(peak), X(x1), Y(peak)))
    o.append('<text x="%.1f" y="%.1f" fill="#333">compute roof %.0f GFLOP/s</text>' % (X(knee) + 6, Y(peak) - 6, peak))
    o.append('<text x="%.1f" y="%.1f" fill="#333" transform="rotate(%.1f %.1f %.1f)">bandwidth roof %.1f GB/s '
             '(triad)</text>' % (X(x0 * 1.3), Y(bw * x0 * 1.3) - 6,
                                 -math.degrees(math.atan2(Y(bw * x0) - Y(bw * x0 * 10), X(x0 * 10) - X(x0))),
                                 X(x0 * 1.3), Y(bw * x0 * 1.3) - 6, bw))
    if read_bw and read_bw > bw:  # the read-only roof, dashed, up to where it meets the compute roof
        o.append('<polyline fill="none" stroke="#888" stroke-width="1.5" stroke-dasharray="6,4" '
                 'points="%.1f,%.1f %.1f,%.1f"/>' % (X(x0), Y(max(read_bw * x0, y0)), X(peak / read_bw), Y(peak)))
        o.append('<text x="%.1f" y="%.1f" fill="#888">read-only %.1f GB/s</text>'
                 % (X(x0 * 1.3) + 4, Y(read_bw * x0 * 1.3) - 22, read_bw))
    colors = {"f32": "#1f77b4", "int8": "#d62728", "int4": "#2ca02c", "torch f32": "#9467bd",
              "torch int8_dynamic": "#ff7f0e"}
    for r in rows:
        col = colors.get(r["base"], "#777")
        shape = '<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>' % (X(r["ai"]) - 3.5, Y(r["gflops"]) - 3.5,
                                                                              col) if r["head_q"] else \
            '<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (X(r["ai"]), Y(r["gflops"]), col)
        o.append(shape)
        o.append('<text x="%.1f" y="%.1f" font-size="9" fill="%s">%s %s b%d</text>'
                 % (X(r["ai"]) + 5, Y(r["gflops"]) - 4, col, r["preset"], r["fmt"], r["batch"]))
    ly = T + 14
    for name, col in colors.items():
        if any(r["base"] == name for r in rows):
            o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - R - 190, ly, col, name))
            ly += 15
    o.append('<text x="%d" y="%d" fill="#555">squares: LM head quantized too</text>' % (W - R - 190, ly))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("| " + " | ".join(str(h).ljust(n) for h, n in zip(header, w)) + " |")
    print("|" + "|".join("-" * (n + 2) for n in w) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).ljust(n) for x, n in zip(r, w)) + " |")
    sys.stdout.flush()


def report(a, bw, peak, isa, ours, theirs, load0, load1):
    print("\n## Decode roofline: %s, %d threads, triad %.2f GB/s (best of %d measurements through the run, "
          "lowest %.2f), read-only %.2f GB/s, f32 FMA peak %.1f GFLOP/s (%s)"
          % (cpu_model(), a.threads, bw, len(a.triads[a.threads]), min(a.triads[a.threads]), a.read_bw, peak, isa))
    print("load average %s at start, %s at end; tokens and bytes per %s" % (load0, load1, "second (wall clock)"
                                                                             if a.clock == "wall" else "CPU-second"))
    if a.clock == "cpu" and a.threads > 1:
        print("(--clock cpu at %d threads: a decode step's CPU time counts every thread, their barrier waits "
              "included, while the triad adds its threads' rates, so these %% of the roofs read about %dx low: "
              "compare multi-thread rows by wall clock)" % (a.threads, a.threads))
    print("(LLC): the weights one step reads fit in the %.0f MiB last-level cache, so the DRAM roof does not bound "
          "that row\n" % a.llc_mib)
    print("% triad: of the best triad (the issue's roof); % read: of the best read-only pass; % near: of the "
          "triad measured just before that format's rows")
    table(["preset", "format", "batch", "tokens/s", "MB read/token", "GB/s", "% triad", "% read", "% near", "GFLOP/s",
           "% compute roof", "FLOP/byte", "timed by"],
          [[r["preset"], r["fmt"], r["batch"], "%.1f" % r["tok_s"],
            "%.1f%s" % (r["bytes_tok"] / 1e6, " (LLC)" if r["in_llc"] else ""),
            "%.2f" % r["gbs"], "%.1f" % r["pct_bw"], "%.1f" % r["pct_read"], "%.1f" % r["pct_near"],
            "%.1f" % r["gflops"],
            "%.1f" % r["pct_peak"],
            "%.2f" % r["ai"], r["how"]] for r in ours])
    get = lambda p, f, b: next((r["tok_s"] for r in ours if (r["preset"], r["fmt"], r["batch"]) == (p, f, b)), None)
    near = lambda p, f: next((r["bw_near"] for r in ours if (r["preset"], r["fmt"]) == (p, f)), 0)
    tget = lambda p, f, b: next((r["tok_s"] for r in theirs if (r["preset"], r["fmt"], r["batch"]) == (p, f, b)),
                                None)
    if theirs:
        print("\n### Against PyTorch %s (same shapes, past key/values concatenated, %d threads)\n"
              % (a.torch_version or "?", a.threads))
        trows = []
        for t in theirs:
            ofmt = "f32"
            if t["fmt"] != "f32":
                # quantize_dynamic quantizes every nn.Linear, the tied head too: compare with our
                # head-quantized int8 where it exists, else the blocks-only one
                ofmt = "int8+head" if get(t["preset"], "int8+head", t["batch"]) else "int8"
            mine = get(t["preset"], ofmt, t["batch"])
            trows.append([t["preset"], "torch " + t["fmt"], t["batch"], "%.1f" % t["tok_s"], ofmt,
                          "%.1f" % mine if mine else "-", "%.2fx" % (mine / t["tok_s"]) if mine else "-",
                          "%.1f / %.1f" % (t["bw_near"], near(t["preset"], ofmt))])
        table(["preset", "PyTorch", "batch", "PyTorch tokens/s", "tfcore", "tfcore tokens/s", "tfcore / PyTorch",
               "triad GB/s at PyTorch's / tfcore's run"], trows)
    print("\n### Targets (issue #15)\n")
    res = []

    def target(name, val, goal, fmt_val):
        if val is None:
            res.append([name, "not measured", "-"])
        else:
            res.append([name, fmt_val % val, "met" if val >= goal else "NOT met"])

    p = "gpt2" if "gpt2" in a.presets else a.presets[0]
    f32 = next((r for r in ours if (r["preset"], r["fmt"], r["batch"]) == (p, "f32", 1)), None)
    target("%s f32 batch-1 decode >= 70%% of the bandwidth roof%s" % (p, " (its weights fit in the LLC)" if f32 and
                                                                       f32["in_llc"] else ""),
           f32 and f32["pct_bw"], 70, "%.1f%%")
    target("%s f32 batch-1 decode >= 70%% of the read-only pass" % p, f32 and f32["pct_read"], 70,
           "%.1f%%")
    for fmt, goal in (("int8", 1.8), ("int4-g32", 3.0)):
        for suffix in ("", "+head"):
            q = get(p, fmt + suffix, 1)
            if q is None and suffix:
                continue
            target("%s %s%s >= %.1fx f32 tokens/s at batch 1" % (p, fmt, suffix, goal),
                   q / f32["tok_s"] if q and f32 else None, goal, "%.2fx")
    tf = tget(p, "f32", 1)
    target("%s f32 batch 1 >= 2x PyTorch" % p, get(p, "f32", 1) / tf if tf and get(p, "f32", 1) else None, 2.0,
           "%.2fx")
    ti = tget(p, "int8_dynamic", 1)
    mine = get(p, "int8+head", 1) or get(p, "int8", 1)
    target("%s int8 batch 1 >= 1.5x PyTorch quantize_dynamic" % p, mine / ti if ti and mine else None, 1.5, "%.2fx")
    table(["target", "reached", "verdict"], res)


def int_list(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="batches 1,8, one rep, fewer tokens: a few minutes")
    ap.add_argument("--presets", default="gpt2,char-small")
    ap.add_argument("--formats", default="f32,int8,int4")
    ap.add_argument("--batches", default=None, help="default 1,2,4,8,16,32,64")
    ap.add_argument("--torch-batches", default=None, help="PyTorch batches (default: those <= 8)")
    ap.add_argument("--threads", default=str(NPROC), help="thread count, or several (1,2): each model is measured at "
                    "each, with its own roofs and report")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens per sequence")
    ap.add_argument("--new", type=int, default=32, help="decode steps timed (fewer at large batch)")
    ap.add_argument("--min-new", type=int, default=4)
    ap.add_argument("--token-budget", type=int, default=256, help="steps = max(min-new, min(new, budget/batch))")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall: tokens per second; cpu: tokens per CPU-second of the process (all its threads), "
                         "steadier on a shared machine at --threads 1")
    ap.add_argument("--reps", type=int, default=None, help="best of (default 3; 1 with --quick)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-cpu"))
    ap.add_argument("--svg", default="decode_roofline.svg")
    ap.add_argument("--json", default=None, help="also write every row here")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.presets = [p for p in a.presets.split(",") if p]
    a.formats = [f for f in a.formats.split(",") if f]
    a.thread_list = int_list(a.threads)
    a.threads = a.thread_list[0]
    a.batches = int_list(a.batches) if a.batches else ([1, 8] if a.quick else [1, 2, 4, 8, 16, 32, 64])
    a.torch_batches = int_list(a.torch_batches) if a.torch_batches else [b for b in a.batches
                                                                         if b <= (1 if a.quick else 8)]
    if a.reps is None:
        a.reps = 1 if a.quick else 3
    if a.quick:
        a.new, a.token_budget = min(a.new, 12), min(a.token_budget, 48)
    if a.torch_worker:
        torch_worker(a)
        return
    load0 = loadavg()
    print("load average at start: %s" % load0, flush=True)
    a.triads, roofs = {}, {}
    for nt in a.thread_list:
        roofs[nt] = machine_roofs(a.build, nt, 1 if a.quick else 3, a.clock)
        a.triads[nt] = [roofs[nt][0]]
        a.llc_mib = roofs[nt][3]
        print("stream triad %.2f GB/s, f32 FMA peak %.1f GFLOP/s (%s), %d threads" % (*roofs[nt][:3], nt),
              flush=True)
    ours_all = tfcore_rows(a, {nt: r[1] for nt, r in roofs.items()})
    a.torch_version = None
    if not a.no_torch:
        try:
            a.torch_version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                                             capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
    dump = {}
    for nt in a.thread_list:
        a.threads = nt
        ours = [r for r in ours_all if r["threads"] == nt]
        theirs = torch_rows(a) if not a.no_torch else []
        triad(a)  # and once more at the end
        bw = max(a.triads[nt])  # the roof: the best the machine gave (a harder bar than any one moment's)
        _, peak, isa, _ = roofs[nt]
        a.read_bw = max(READS[nt])
        for r in ours:
            r["pct_bw"] = 100 * r["gbs"] / bw
            r["pct_read"] = 100 * r["gbs"] / a.read_bw
        print("%d thread%s: triads through the run (GB/s): %s" % (nt, "s" if nt > 1 else "",
                                                                  ", ".join("%.2f" % t for t in a.triads[nt])))
        print("read-only passes (GB/s): %s" % ", ".join("%.2f" % t for t in READS[nt]))
        load1 = loadavg()
        report(a, bw, peak, isa, ours, theirs, load0, load1)
        pts = ours + [dict(r, base="torch " + r["fmt"], head_q=False, fmt="torch-" + r["fmt"],
                           ai=next(o["ai"] for o in ours if o["preset"] == r["preset"] and o["batch"] == r["batch"]
                                   and o["fmt"] == ("f32" if r["fmt"] == "f32" else "int8+head" if any(
                                       x["fmt"] == "int8+head" for x in ours) else "int8")))
                      for r in theirs if any(o["preset"] == r["preset"] and o["batch"] == r["batch"] for o in ours)]
        for p in pts:
            if "gflops" not in p:
                mine = next(o for o in ours if o["preset"] == p["preset"] and o["batch"] == p["batch"])
                p["gflops"] = mine["flops_tok"] * p["tok_s"] / 1e9
        # one SVG per thread count: NAME.svg for the only (or first) one, NAME-2t.svg for the others
        svg = a.svg if nt == a.thread_list[0] else "%s-%dt%s" % (*os.path.splitext(a.svg)[:1], nt,
                                                                 os.path.splitext(a.svg)[1])
        write_svg(svg, pts, bw, peak, "Decode roofline: tfcore (%s), %d threads" % (", ".join(a.presets), nt),
                  a.read_bw)
        print("\nwrote %s" % svg)
        dump[nt] = dict(bw=bw, read_bw=a.read_bw, reads=READS[nt], triads=a.triads[nt], peak=peak, isa=isa, ours=ours,
                        torch=theirs, load=[load0, load1])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dump[a.thread_list[0]] if len(a.thread_list) == 1 else dump, f, indent=1)


if __name__ == "__main__":
    main()
