#!/usr/bin/python3
"""Where examples/torch_llama.py's time goes: each of the five kernels it
swaps, forward + backward, PyTorch 1.13's ops against tfcore.torch's, at the
example's shapes.

    /usr/bin/python3 bench/torch_kernels.py [--batch 8] [--seq 128] [--dim 128] [--heads 4] [--kv-heads 2]
                                           [--ffn 352] [--vocab 65] [--dtype float32] [--threads 1] [--reps 50]

The kernels are the example's own TorchKernels and TfcoreKernels (the same
code the training loop calls), on inputs shaped as one block of the model
sees them: q/k/v as the [B,T,H,D] projections viewed [B,H,T,D] (strided,
as in the model), the norm and the LM head on [B,T,C]. A call is its
forward and the gradients of its inputs for a fixed random upstream
gradient (torch.autograd.grad); the two sides alternate call by call so a busy machine
slows both alike. Prints the median µs per call of each side and the
ratio. Nothing here runs in CI.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("torch_llama", os.path.join(ROOT, "examples", "torch_llama.py"))
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)
import tfcore  # noqa: E402  (the example put the checkout's binding on sys.path when needed)


def cases(a, dtype):
    """name -> (make inputs, call(kern, *inputs) -> output)."""
    g = torch.Generator().manual_seed(0)
    B, T, C, H, Hkv, F = a.batch, a.seq, a.dim, a.heads, a.kv_heads, a.ffn
    D = C // H

    def leaf(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()

    def heads(n):  # a projection's output [B,T,n·D] seen as [B,n,T,D], as the model does
        return leaf(B, T, n * D).view(B, T, n, D).transpose(1, 2)

    pos = torch.arange(T)
    inv = (1.0 / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D)).to(dtype)
    targets = torch.randint(0, a.vocab, (B, T), generator=g)
    return {
        "rms_norm [B,T,C]": (lambda: (leaf(B, T, C), leaf(C)), lambda k, x, w: k.rms_norm(x, w, 1e-5)),
        "rope q,k": (lambda: (heads(H), heads(Hkv)), lambda k, q, kk: k.rope(q, kk, pos, inv)),
        "attention (GQA, causal)": (lambda: (heads(H), heads(Hkv), heads(Hkv)),
                                    lambda k, q, kk, v: k.attention(q, kk, v)),
        "swiglu [B,T,F]": (lambda: (leaf(B, T, F), leaf(B, T, F)), lambda k, gg, u: k.swiglu(gg, u)),
        "LM head + loss": (lambda: (leaf(B, T, C), leaf(a.vocab, C)), lambda k, h, w: k.lm_loss(h, w, targets)),
    }


def timed_call(kern, fn, inputs, seeds):
    t0 = time.perf_counter()
    out = fn(kern, *inputs)
    outs = out if isinstance(out, tuple) else (out,)
    grads = torch.autograd.grad(outs, inputs, seeds)
    dt = time.perf_counter() - t0
    del grads
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=352)
    ap.add_argument("--vocab", type=int, default=65)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tfcore.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    print("shapes: B %d, T %d, C %d, %d heads / %d kv heads of %d, F %d, V %d; %s, %d thread(s), median of %d"
          % (a.batch, a.seq, a.dim, a.heads, a.kv_heads, a.dim // a.heads, a.ffn, a.vocab, a.dtype, a.threads,
             a.reps))
    print("%-26s %12s %12s %8s" % ("kernel (fwd + bwd)", "torch µs", "tfcore µs", "ratio"))
    gen = torch.Generator().manual_seed(1)
    total = [0.0, 0.0]
    for name, (make, fn) in cases(a, dtype).items():
        inputs = make()
        probe = fn(ex.TorchKernels, *inputs)
        probe = probe if isinstance(probe, tuple) else (probe,)
        fixed = [torch.randn(o.shape, generator=gen, dtype=dtype) for o in probe]

        times = ([], [])
        for r in range(a.reps + 2):
            for side, kern in enumerate((ex.TorchKernels, ex.TfcoreKernels)):
                dt = timed_call(kern, fn, inputs, fixed)
                if r >= 2:  # two warm-up rounds
                    times[side].append(dt)
        med = [statistics.median(t) * 1e6 for t in times]
        total = [total[0] + med[0], total[1] + med[1]]
        print("%-26s %12.1f %12.1f %7.2fx" % (name, med[0], med[1], med[0] / med[1]))
    print("%-26s %12.1f %12.1f %7.2fx" % ("sum", total[0], total[1], total[0] / total[1]))


if __name__ == "__main__":
    sys.exit(main())
