#!/usr/bin/python3
"""Two builds of libtfcore side by side: the training step and the fused
kernels of one tree against another's (a change against the tree before it).

    /usr/bin/python3 bench/ab_builds.py --build build --vs OTHER_BUILD [--rounds 3]
                                        [--presets char-tiny,char-small] [--dtypes f32,bf16] [--steps 10]

Runs bench/train_bench (`train PRESET B T STEPS V DTYPE`, the step of
`tfcore train`) and bench/tfc_bench (`micro`: attention, LayerNorm, GELU,
cross-entropy forward + backward) of both builds, alternating build by build
within every round so that a busy machine slows both alike, and prints each
figure's median over the rounds with the ratio this build / the other
(tokens/s: > 1 is faster; ms: < 1 is faster). bench/bench.py compares with
PyTorch; this script compares us with ourselves. Nothing here runs in CI.
"""
import argparse
import json
import os
import statistics
import subprocess

PRESETS = {"char-tiny": (16, 128, 65), "char-small": (8, 256, 65), "gpt2-mini": (8, 128, 50257)}


def lines(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def train(build, preset, dtype, steps, threads):
    B, T, V = PRESETS[preset]
    r = lines([os.path.join(build, "bench", "train_bench"), "train", preset, str(B), str(T), str(steps), str(V),
               dtype], threads)[0]
    return r["tokens_per_s"]


def micro(build, budget, threads):
    return {r["bench"] + " " + r["case"]: r["ms"]
            for r in lines([os.path.join(build, "bench", "tfc_bench"), "micro", str(budget)], threads) if "ms" in r}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--vs", required=True, help="the other build dir (e.g. the tree before a change)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--presets", default="char-tiny,char-small")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--budget", type=float, default=0.5, help="seconds per micro case")
    a = p.parse_args()
    builds = {"this": os.path.abspath(a.build), "other": os.path.abspath(a.vs)}
    tok = {}
    mic = {}
    for rnd in range(a.rounds):
        order = ["this", "other"] if rnd % 2 == 0 else ["other", "this"]
        for preset in a.presets.split(","):
            for dt in a.dtypes.split(","):
                for side in order:
                    tok.setdefault((preset, dt), {}).setdefault(side, []).append(
                        train(builds[side], preset, dt, a.steps, a.threads))
        for side in order:
            for k, ms in micro(builds[side], a.budget, a.threads).items():
                mic.setdefault(k, {}).setdefault(side, []).append(ms)
    print("training step, tokens/s (median of %d rounds, %d threads)" % (a.rounds, a.threads))
    print("%-24s %12s %12s %10s" % ("preset dtype", "this", "other", "this/other"))
    for (preset, dt), v in tok.items():
        t, o = statistics.median(v["this"]), statistics.median(v["other"])
        print("%-24s %12.0f %12.0f %10.3f" % (preset + " " + dt, t, o, t / o))
    print("\nfused kernels, fwd+bwd ms (median of %d rounds)" % a.rounds)
    print("%-40s %10s %10s %10s" % ("case", "this", "other", "this/other"))
    for k, v in mic.items():
        t, o = statistics.median(v["this"]), statistics.median(v["other"])
        print("%-40s %10.3f %10.3f %10.3f" % (k[:40], t, o, t / o))


if __name__ == "__main__":
    main()
