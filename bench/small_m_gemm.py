#!/usr/bin/python3
"""The f32 GEMM of a few rows (decode steps; lib/cpu/gemm_small_m.c) against
the same product through OpenBLAS (our library with TFC_GEMM_SMALL_M=off,
which sends it to cblas_sgemm) and PyTorch 1.13's torch.matmul, on GPT-2
(124M) shapes: y[M, N] = x[M, K] · W, W [K, N] (the Linear layers' Conv1D
layout) and the LM head x · wteᵀ (wte [50257, 768]). One thread each,
interleaved, best of R repetitions (wall time), weight GB/s = bytes of W /
time; "×" is OpenBLAS time / ours.

    TFCORE_LIBRARY=build-cpu/lib/libtfcore.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/small_m_gemm.py [--quick]
"""
import json
import os
import subprocess
import sys
import time

SHAPES = [("qkv", 768, 2304, 0), ("mlp up", 768, 3072, 0), ("mlp down", 3072, 768, 0), ("head", 768, 50257, 1)]
ROWS = [1, 2, 4, 8, 16, 32, 64]


def measure(kind, K, N, tb, M, reps):
    """Best seconds of one product in this process: kind 'tfcore' or 'torch'."""
    import numpy as np
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    if kind == "torch":
        import torch
        torch.set_num_threads(1)
        tw, tx = torch.from_numpy(w), torch.from_numpy(x)
        tw = tw.t() if tb else tw
        run = lambda: torch.matmul(tx, tw)  # noqa: E731
    else:
        import tfcore
        tw, tx = tfcore.tensor(w), tfcore.tensor(x)
        tw = tw.transpose(0, 1) if tb else tw
        run = lambda: tx @ tw  # noqa: E731
    run()
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best


def child(kind, reps):
    out = {}
    for name, K, N, tb in SHAPES:
        for M in ROWS:
            out["%s %d" % (name, M)] = measure(kind, K, N, tb, M, reps if N < 10000 else max(3, reps // 10))
    print(json.dumps(out))


def run_child(kind, env_extra, reps):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **env_extra)
    r = subprocess.run([sys.executable, __file__, "--child", kind, str(reps)], env=env, capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    reps = 10 if "--quick" in sys.argv else 50
    rounds = 1 if "--quick" in sys.argv else 3
    with open("/proc/loadavg") as f:
        print("load average before:", f.read().split()[:3])
    best = {}
    for _ in range(rounds):  # interleaved rounds: a burst of load hits all three alike
        for label, kind, env in [("ours", "tfcore", {}), ("OpenBLAS", "tfcore", {"TFC_GEMM_SMALL_M": "off"}),
                                 ("PyTorch", "torch", {})]:
            for key, t in run_child(kind, env, reps).items():
                best.setdefault(label, {})
                best[label][key] = min(t, best[label].get(key, t))
    with open("/proc/loadavg") as f:
        print("load average after:", f.read().split()[:3])
    print("| shape | M | ours ms (GB/s) | OpenBLAS ms (GB/s) | PyTorch ms (GB/s) | × OpenBLAS | × PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, K, N, tb in SHAPES:
        gb = K * N * 4 / 1e9
        for M in ROWS:
            key = "%s %d" % (name, M)
            o, b, t = best["ours"][key], best["OpenBLAS"][key], best["PyTorch"][key]
            print("| %s %dx%d | %d | %.3f (%.1f) | %.3f (%.1f) | %.3f (%.1f) | %.2f | %.2f |" %
                  (name, K, N, M, o * 1e3, gb / o, b * 1e3, gb / b, t * 1e3, gb / t, b / o, t / o))


main()
