#!/usr/bin/python3
"""Speculative decoding (tfc_gpt_generate_speculative) against the target
model decoding alone (tfc_gpt_generate), side by side in one run: two
checkpoints of `tfcore train` on the same corpus and tokenizer (the target,
e.g. char-small, and a smaller draft, e.g. char-tiny), the same prompt,
greedy and sampled, k = 2, 4, 6. Prints tokens/s of each (best of R, wall
time), the speed-up, the acceptance rate (accepted / drafted) and the
target's forward passes per token. Greedy rows also check that the tokens
are the target's own.

    TFCORE_LIBRARY=build-cpu/lib/libtfcore.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/speculative.py TARGET_DIR DRAFT_DIR [--tokens N] [--reps R]
"""
import argparse
import os
import time

import tfcore


def best_time(fn, reps):
    best, out = None, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    target = tfcore.GPT.load(os.path.join(a.target, "model.safetensors"))
    draft = tfcore.GPT.load(os.path.join(a.draft, "model.safetensors"))
    print("target %r\ndraft  %r" % (target, draft))
    with open("/proc/loadavg") as f:
        print("load average before:", " ".join(f.read().split()[:3]))
    prompt = [1, 2, 3]  # any ids of the shared vocabulary
    print("| decoding | T | k | target alone tok/s | speculative tok/s | speed-up | accepted/drafted | "
          "target passes per token |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for temperature in (0.0, 0.8):
        alone_t, alone = best_time(lambda: target.generate(prompt, a.tokens, temperature=temperature, seed=1),
                                   a.reps)
        for k in (2, 4, 6):
            st = {}
            spec_t, spec = best_time(lambda: target.generate_speculative(
                draft, prompt, a.tokens, k=k, temperature=temperature, seed=1, stats=st), a.reps)
            same = "" if temperature > 0 else (" (tokens = target's)" if spec == alone else " (TOKENS DIFFER)")
            print("| %s%s | %.1f | %d | %.1f | %.1f | %.2f | %.2f | %.2f |" % (
                "greedy" if temperature == 0 else "sampled", same, temperature, k, a.tokens / alone_t,
                a.tokens / spec_t, alone_t / spec_t, st["accepted"] / max(st["drafted"], 1),
                st["target_passes"] / a.tokens))
    with open("/proc/loadavg") as f:
        print("load average after:", " ".join(f.read().split()[:3]))


main()
