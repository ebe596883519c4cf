#!/usr/bin/env python3
"""A Llama-style decoder written in plain PyTorch, trained with its kernels
on PyTorch's own ops or on libtfcore's (tfcore.torch), side by side.

    /usr/bin/python3 examples/torch_llama.py                   # both backends, 30 steps, f32
    /usr/bin/python3 examples/torch_llama.py --backend tfcore --steps 200
    /usr/bin/python3 examples/torch_llama.py --dtype float64 --steps 5

The model is HF's LlamaForCausalLM in miniature (parameter names as in
transformers' modeling_llama): token embedding; n blocks of RMSNorm → q, k,
v projections → RoPE → causal grouped-query attention (n_kv_heads <
n_heads) → o projection → residual, RMSNorm → gate and up projections →
SwiGLU → down projection → residual; a final RMSNorm and an untied LM head
with the cross-entropy loss. `--backend` swaps only the kernels
(RMSNorm, RoPE, attention, SwiGLU, LM head + loss): the Linears, the
embedding, autograd and AdamW stay PyTorch's in both. The torch side writes
each kernel the way transformers does (LlamaRMSNorm, rotate_half /
apply_rotary_pos_emb, repeat_kv + softmax attention, act_fn(gate) * up,
lm_head then CrossEntropyLoss); the tfcore side calls tfcore.torch.

With --backend both (the default) the two models start from one
initialisation and see the same batches of characters of tinyshakespeare;
each step of one is timed right after the same step of the other, and the
script prints both losses per step, their largest relative difference and
the tokens per second of each side. Deterministic: same arguments, same
losses.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import tfcore  # installed
except ImportError:  # a checkout: the binding's sources, the library from build/lib
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import tfcore
import tfcore.torch as tt  # noqa: E402


class Config:
    """The shapes; the defaults train in a few seconds a step pair on 2 cores."""

    def __init__(self, vocab_size, dim=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=352, rope_theta=10000.0,
                 rms_norm_eps=1e-5):
        if dim % n_heads or n_heads % n_kv_heads or (dim // n_heads) % 2:
            raise ValueError("dim must split into n_heads heads of even size, n_kv_heads must divide n_heads")
        self.vocab_size, self.dim, self.n_layers = vocab_size, dim, n_layers
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.ffn_dim, self.rope_theta, self.rms_norm_eps = ffn_dim, rope_theta, rms_norm_eps


# ---- the two sets of kernels ---------------------------------------------------------


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class TorchKernels:
    """PyTorch's own ops, as transformers' modeling_llama writes them."""

    name = "torch"

    @staticmethod
    def rms_norm(x, weight, eps):
        variance = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + eps))

    @staticmethod
    def rope(q, k, positions, inv_freq):
        freqs = positions[:, None].to(inv_freq.dtype) * inv_freq[None, :]  # [T, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    @staticmethod
    def attention(q, k, v):
        B, H, T, D = q.shape
        groups = H // k.shape[1]  # repeat_kv: kv head j serves query heads j·groups .. j·groups + groups − 1
        k = k[:, :, None].expand(B, k.shape[1], groups, T, D).reshape(B, H, T, D)
        v = v[:, :, None].expand(B, v.shape[1], groups, T, D).reshape(B, H, T, D)
        scores = q @ k.transpose(2, 3) / math.sqrt(D)
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    @staticmethod
    def swiglu(gate, up):
        return F.silu(gate) * up

    @staticmethod
    def lm_loss(hidden, weight, targets):
        logits = F.linear(hidden, weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class TfcoreKernels:
    """The same five kernels from libtfcore (tfcore.torch's autograd Functions)."""

    name = "tfcore"

    @staticmethod
    def rms_norm(x, weight, eps):
        return tt.rms_norm(x, x.shape[-1], weight, eps)

    @staticmethod
    def rope(q, k, positions, inv_freq):
        return tt.apply_rotary_pos_emb(q, k, positions, inv_freq)

    @staticmethod
    def attention(q, k, v):
        return tt.scaled_dot_product_attention(q, k, v, is_causal=True)  # grouped heads read in place

    @staticmethod
    def swiglu(gate, up):
        return tt.swiglu(gate, up)

    @staticmethod
    def lm_loss(hidden, weight, targets):
        return tt.linear_cross_entropy(hidden, weight, targets)  # the logits never exist


KERNELS = {"torch": TorchKernels, "tfcore": TfcoreKernels}


# ---- the model -------------------------------------------------------------------------


class RMSNorm(torch.nn.Module):
    def __init__(self, cfg, kern):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(cfg.dim))
        self.eps, self.kern = cfg.rms_norm_eps, kern

    def forward(self, x):
        return self.kern.rms_norm(x, self.weight, self.eps)


class Attention(torch.nn.Module):
    def __init__(self, cfg, kern):
        super().__init__()
        self.cfg, self.kern = cfg, kern
        hd = cfg.head_dim
        self.q_proj = torch.nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.k_proj = torch.nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = torch.nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = torch.nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)

    def forward(self, x, positions, inv_freq):
        B, T, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = self.kern.rope(q, k, positions, inv_freq)
        out = self.kern.attention(q, k, v)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, c.n_heads * c.head_dim))


class MLP(torch.nn.Module):
    def __init__(self, cfg, kern):
        super().__init__()
        self.kern = kern
        self.gate_proj = torch.nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.up_proj = torch.nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.down_proj = torch.nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.down_proj(self.kern.swiglu(self.gate_proj(x), self.up_proj(x)))


class DecoderLayer(torch.nn.Module):
    def __init__(self, cfg, kern):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg, kern)
        self.self_attn = Attention(cfg, kern)
        self.post_attention_layernorm = RMSNorm(cfg, kern)
        self.mlp = MLP(cfg, kern)

    def forward(self, x, positions, inv_freq):
        x = x + self.self_attn(self.input_layernorm(x), positions, inv_freq)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(torch.nn.Module):
    """LlamaForCausalLM's structure and parameter names; forward(idx, targets) → mean loss."""

    def __init__(self, cfg, kern):
        super().__init__()
        self.cfg, self.kern = cfg, kern
        self.embed_tokens = torch.nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = torch.nn.ModuleList(DecoderLayer(cfg, kern) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg, kern)
        self.lm_head = torch.nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        hd = cfg.head_dim
        # LlamaRotaryEmbedding's default inverse frequencies (f32 as transformers computes them)
        self.register_buffer("inv_freq", 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd),
                             persistent=False)
        for m in self.modules():  # LlamaPreTrainedModel._init_weights: N(0, 0.02)
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def to_dtype(self, dtype):
        """The model in dtype, inv_freq included (f64 angles for an f64 model, as the rope kernel takes them)."""
        self.to(dtype)
        self.inv_freq = self.inv_freq.to(dtype)
        return self

    def forward(self, idx, targets):
        T = idx.shape[1]
        positions = torch.arange(T, dtype=torch.int64, device=idx.device)
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, positions, self.inv_freq)
        return self.kern.lm_loss(self.norm(x), self.lm_head.weight, targets)


# ---- data and training -------------------------------------------------------------------


def load_corpus(path):
    """(data as int64 char ids, vocab size): a char-level vocabulary of the corpus."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return torch.tensor([index[c] for c in text], dtype=torch.int64), len(chars)


def batches(data, n, batch, seq, seed):
    """n (inputs, targets) pairs of [batch, seq] windows at seeded random offsets."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
        out.append((x, y))
    return out


def build(cfg, backends, dtype=torch.float32, seed=0):
    """One model per backend name, all from the same seeded initialisation."""
    torch.manual_seed(seed)
    first = Llama(cfg, KERNELS[backends[0]]).to_dtype(dtype)
    models = [first]
    for name in backends[1:]:
        m = Llama(cfg, KERNELS[name]).to_dtype(dtype)
        m.load_state_dict(first.state_dict())
        models.append(m)
    return models


def make_optimizer(model, lr):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def step(model, opt, x, y):
    """One AdamW step; returns (loss, seconds)."""
    t0 = time.perf_counter()
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item(), time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=["both", "torch", "tfcore"], default="both")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=352)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of both sides (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=os.environ.get("TFCORE_DATA", os.path.join(ROOT, "data", "tinyshakespeare.txt")))
    a = ap.parse_args(argv)
    if a.steps < 1:
        ap.error("--steps must be >= 1")

    threads = a.threads or torch.get_num_threads()
    before = torch.get_num_threads(), tfcore.get_num_threads()
    torch.set_num_threads(threads)
    tfcore.set_num_threads(threads)
    try:
        return train(a, threads)
    finally:  # main() may be called from other code (the test): leave the process as it was
        torch.set_num_threads(before[0])
        tfcore.set_num_threads(before[1])


def train(a, threads):
    data, vocab = load_corpus(a.data)
    cfg = Config(vocab, a.dim, a.layers, a.heads, a.kv_heads, a.ffn)
    names = ["torch", "tfcore"] if a.backend == "both" else [a.backend]
    dtype = getattr(torch, a.dtype)
    models = build(cfg, names, dtype, a.seed)
    opts = [make_optimizer(m, a.lr) for m in models]
    n_params = sum(p.numel() for p in models[0].parameters())
    print("Llama-style decoder: %d layers, dim %d, %d heads / %d kv heads, ffn %d, vocab %d (chars), %.2fM params; "
          "batch %d × %d tokens, %s, AdamW lr %g, %d threads"
          % (cfg.n_layers, cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.ffn_dim, vocab, n_params / 1e6, a.batch, a.seq,
             a.dtype, a.lr, threads))
    print("step  " + "".join("%14s" % ("loss " + n) for n in names) + ("     rel. diff" if len(names) == 2 else ""))
    losses = [[] for _ in names]
    seconds = [0.0 for _ in names]
    worst = 0.0
    for i, (x, y) in enumerate(batches(data, a.steps, a.batch, a.seq, a.seed + 1)):
        row = []
        for j, (m, o) in enumerate(zip(models, opts)):
            loss, dt = step(m, o, x, y)
            losses[j].append(loss)
            if i > 0 or a.steps == 1:  # the first step warms caches and allocators up
                seconds[j] += dt
            row.append(loss)
        line = "%4d  " % i + "".join("%14.8f" % v for v in row)
        if len(names) == 2:
            rel = abs(row[1] - row[0]) / abs(row[0])
            worst = max(worst, rel)
            line += "  %12.3e" % rel
        print(line)
    timed = a.steps - 1 if a.steps > 1 else 1
    for n, s in zip(names, seconds):
        print("%-6s %9.0f tokens/s  (%.1f ms/step over %d steps)" % (n, timed * a.batch * a.seq / s,
                                                                  1e3 * s / timed, timed))
    if len(names) == 2:
        print("largest relative loss difference: %.3e" % worst)
        print("tfcore / torch speed: %.2fx" % (seconds[0] / seconds[1]))
    return losses


if __name__ == "__main__":
    main()
