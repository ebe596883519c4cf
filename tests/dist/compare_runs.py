#!/usr/bin/python3
"""compare_runs.py REF OTHER TOL [--no-optim] [--skip-key-bias C]: two `tfcore train` dirs hold the same run.

Reads model.safetensors and optimizer.safetensors of both with a plain
safetensors reader (8-byte header length, JSON header, raw little-endian
data: no tfcore code involved) and the per-step losses of REF.json and
OTHER.json (--log-json files next to the dirs), and checks that every
tensor and every loss agrees to TOL relative: ‖a − b‖₂ ≤ TOL · ‖b‖₂ per
tensor (elementwise ratios mean nothing for the elements near 0 that
AdamW's m/√v drives: a 1e-16 difference in a gradient sum, from adding the
rows in another order, moves them by 1e-13 of the tensor's scale).

--skip-key-bias C leaves out elements [C, 2C) of every 1-D tensor of 3C
elements (the attention's c_attn bias and its AdamW buffers): the key bias.
Its gradient is zero in exact arithmetic (softmax ignores a shift of all
scores), so what it gets is rounding noise, and AdamW's update m/(√v + ε)
turns noise of f32 size (≈ ε) into steps of lr in a random direction: any
other summation order — another thread count in one process — moves it.
In f64 the noise stays far below ε and nothing needs leaving out.
Prints the largest differences; exit status 1 when any exceeds TOL.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "BF16": None}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).astype(np.float64)
    return out


def losses(path):
    """step -> (loss, gradient norm before clipping)"""
    with open(path) as f:
        return {r["step"]: (r["loss"], r["grad_norm"]) for r in (json.loads(line) for line in f if line.strip())}


def rel(a, b, key_bias):
    if not a.size:
        return 0.0
    if key_bias and a.ndim == 1 and a.size == 3 * key_bias:
        a, b = a.copy(), b.copy()
        a[key_bias:2 * key_bias] = b[key_bias:2 * key_bias] = 0
    scale = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / scale if scale > 0 else float(np.linalg.norm(a))


def main():
    ref, other, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    key_bias = int(sys.argv[sys.argv.index("--skip-key-bias") + 1]) if "--skip-key-bias" in sys.argv else 0
    files = ["model.safetensors"] + ([] if "--no-optim" in sys.argv else ["optimizer.safetensors"])
    worst, where, bad = 0.0, "", 0
    for fname in files:
        a, b = read_safetensors("%s/%s" % (other, fname)), read_safetensors("%s/%s" % (ref, fname))
        if sorted(a) != sorted(b):
            print("FAIL: %s holds other tensors: %s" % (fname, sorted(set(a) ^ set(b))))
            return 1
        for name in b:
            if a[name].shape != b[name].shape:
                print("FAIL: %s %s: shape %s vs %s" % (fname, name, a[name].shape, b[name].shape))
                return 1
            d = rel(a[name], b[name], key_bias)
            if d > worst:
                worst, where = d, "%s %s" % (fname, name)
            if d > tol:
                bad += 1
    la, lb = losses(other + ".json"), losses(ref + ".json")
    if sorted(la) != sorted(lb):
        print("FAIL: the runs logged other steps: %s vs %s" % (sorted(la)[:5], sorted(lb)[:5]))
        return 1
    lw = max((abs(la[s][0] - lb[s][0]) / abs(lb[s][0]) for s in lb), default=0.0)
    nw = max((abs(la[s][1] - lb[s][1]) / abs(lb[s][1]) for s in lb), default=0.0)
    print("%s vs %s: largest tensor difference %.3g (%s), largest loss difference %.3g, gradient norm %.3g "
          "over %d steps (tol %g)" % (other, ref, worst, where, lw, nw, len(lb), tol))
    lw = max(lw, nw)
    if bad or lw > tol:
        print("FAIL: %d tensors and %s losses beyond %g" % (bad, "some" if lw > tol else "no", tol))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
