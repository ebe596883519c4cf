#!/usr/bin/python3
"""Per-op Python overhead: a small add through `import tfcore`, side by side.

    /usr/bin/python3 bench/op_overhead.py [--build build] [--vs OTHER_BUILD] [--rounds 5]

Times `a + b`, `a.add_(b)` and `(a * b).sum()` on 16-element f32 tensors,
where the call path (binding, dispatch, validation, allocation) is the whole
cost, with PyTorch 1.13 doing the same in the same script as the reference.
With --vs, a second build of libtfcore (e.g. the tree before a change) runs
through the same Python package; the builds alternate round by round so a
busy machine slows both alike. Prints the median µs per op and the ratios.
Nothing here runs in CI.
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "a + b": "a + b",
    "a.add_(b)": "a.add_(b)",
    "(a * b).sum()": "(a * b).sum()",
}

CHILD = r"""
import sys, time
which, n = sys.argv[1], int(sys.argv[2])
if which == "torch":
    import torch
    torch.set_num_threads(1)
    a = torch.ones(16); b = torch.ones(16)
else:
    import numpy as np, tfcore
    a = tfcore.from_numpy(np.ones(16, np.float32)); b = tfcore.from_numpy(np.ones(16, np.float32))
for name, expr in CASES.items():
    code = compile(expr, "<op>", "eval")
    env = {"a": a, "b": b}
    for _ in range(n // 10): eval(code, env)
    t0 = time.perf_counter()
    for _ in range(n): eval(code, env)
    print(name, (time.perf_counter() - t0) / n * 1e6)
"""


def run(which, lib, n):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["OMP_NUM_THREADS"] = "1"
    if lib:
        env["TFCORE_LIBRARY"] = lib
    src = "CASES = %r\n" % CASES + CHILD
    out = subprocess.run([sys.executable, "-c", src, which, str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        name, us = line.rsplit(" ", 1)
        res[name] = float(us)
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--vs", help="a second build dir to compare against (e.g. the tree before a change)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-n", type=int, default=20000, help="ops per case per round")
    a = p.parse_args()
    sides = [("ours", os.path.join(os.path.abspath(a.build), "lib", "libtfcore.so"))]
    if a.vs:
        sides.append(("vs", os.path.join(os.path.abspath(a.vs), "lib", "libtfcore.so")))
    sides.append(("torch", None))
    got = {s: {c: [] for c in CASES} for s, _ in sides}
    for _ in range(a.rounds):
        for s, lib in sides:
            for c, us in run("torch" if s == "torch" else "tfcore", lib, a.n).items():
                got[s][c].append(us)
    head = "%-16s %10s" % ("op (16 x f32)", "ours us")
    if a.vs:
        head += " %10s %9s" % ("vs us", "vs/ours")
    head += " %10s %11s" % ("torch us", "torch/ours")
    print(head)
    for c in CASES:
        ours = statistics.median(got["ours"][c])
        line = "%-16s %10.2f" % (c, ours)
        if a.vs:
            v = statistics.median(got["vs"][c])
            line += " %10.2f %9.2f" % (v, v / ours)
        t = statistics.median(got["torch"][c])
        line += " %10.2f %11.2f" % (t, t / ours)
        print(line)
    print("(median of %d rounds of %d ops; ratios > 1 mean ours is faster)" % (a.rounds, a.n))


if __name__ == "__main__":
    main()
