#!/usr/bin/python3
"""Helpers of test_cli_forensics.sh, reading and editing tfcore's files by
their documented layouts (safetensors: 8-byte header length, JSON header,
data; checkpoint.json: each file's size and FNV-1a 64 hash), not through
the library.

  plant DIR PARAM          set PARAM[0] of DIR/model.safetensors to NaN and
                           update DIR/checkpoint.json's size and hash (what a
                           corrupted but consistent checkpoint looks like)
  report JSON KEY=VALUE... check the report's fields (step, suspect,
                           first_nonfinite_grad, action, history length
                           "history=N", the batch file's tensors "batch")
  optstep DIR              print the optimizer's step count from
                           DIR/optimizer.safetensors
  gradnorms LOG K          check --log-grad-norms K lines of a --log-json file:
                           present every K steps only, per block, and their
                           quadrature sum equals the line's total grad_norm
"""
import json
import math
import re
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U16": np.uint16}


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return b, json.loads(b[8:8 + n]), 8 + n


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def plant(d, param):
    path = d + "/model.safetensors"
    b, hdr, base = read_st(path)
    off = base + hdr[param]["data_offsets"][0]
    assert hdr[param]["dtype"] == "F32"
    b = b[:off] + struct.pack("<f", float("nan")) + b[off + 4:]
    open(path, "wb").write(b)
    # the manifest's own line for the file, edited in place (tfcore reads its exact layout)
    hv = fnv1a64(b)
    man = open(d + "/checkpoint.json").read()
    line = re.search(r'.*"name": "model.safetensors".*', man).group(0)
    new = re.sub(r'"size": \d+', '"size": %d' % len(b), line)
    new = re.sub(r'"fnv1a64": "[0-9a-f]+"', '"fnv1a64": "%016x"' % hv, new)
    open(d + "/checkpoint.json", "w").write(man.replace(line, new))


def report(path, checks):
    r = json.load(open(path))
    bad = []
    for kv in checks:
        k, v = kv.split("=", 1)
        if k == "history":
            got = len(r["history"])
            if got != int(v):
                bad.append("history has %d steps, wanted %s" % (got, v))
            steps = [h["step"] for h in r["history"]]
            if steps != sorted(steps) or steps[-1] != r["step"]:
                bad.append("history steps %s do not end at %d" % (steps, r["step"]))
        elif k == "batch":
            _, hdr, _ = read_st(r["batch_file"])
            shape = [int(x) for x in v.split("x")]
            for t in ("x", "y"):
                if hdr[t]["shape"] != shape:
                    bad.append("batch %s is %s, wanted %s" % (t, hdr[t]["shape"], shape))
        elif k == "lr_finite":
            if not (isinstance(r["lr"], float) and r["lr"] > 0):
                bad.append("lr %r" % (r["lr"],))
        elif k == "nonfinite_weights":
            if r[k] != ([] if v == "" else v.split(",")):
                bad.append("%s is %r, wanted %r" % (k, r[k], v))
        else:
            got = r.get(k)
            if str(got) != v:
                bad.append("%s is %r, wanted %r" % (k, got, v))
    # every block has its grad and weight norms in every step of the history
    for h in r["history"]:
        for key in ("grad_norms", "weight_norms"):
            if not any(name.startswith("transformer.h.") for name in h[key]):
                bad.append("history step %d lacks per-block %s" % (h["step"], key))
    for b in bad:
        print("FAIL: report %s: %s" % (path, b))
    return 1 if bad else 0


def optstep(d):
    b, hdr, base = read_st(d + "/optimizer.safetensors")
    for name, t in hdr.items():
        if name != "__metadata__" and name.endswith("step"):
            s, e = t["data_offsets"]
            v = np.frombuffer(b[base + s:base + e], dtype=DT[t["dtype"]])
            print(int(v.reshape(-1)[0]))
            return 0
    print("no step tensor in", sorted(hdr))
    return 1


def gradnorms(log, k):
    k = int(k)
    bad = 0
    lines = [json.loads(x) for x in open(log)]
    for ln in lines:
        has = "grad_norms" in ln
        if has != (ln["step"] % k == 0):
            print("FAIL: step %d: grad_norms %s" % (ln["step"], "present" if has else "missing"))
            bad = 1
        if not has:
            continue
        g = ln["grad_norms"]
        blocks = [n for n in g if n.startswith("transformer.h.")]
        if len(blocks) < 2 or "transformer.wte" not in g:
            print("FAIL: step %d: groups %s" % (ln["step"], sorted(g)))
            bad = 1
        total = math.sqrt(sum(v * v for v in g.values()))
        if not abs(total - ln["grad_norm"]) <= 1e-4 * ln["grad_norm"]:
            print("FAIL: step %d: per-layer norms add to %.9g, the total is %.9g" % (ln["step"], total, ln["grad_norm"]))
            bad = 1
    return bad


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "plant":
        plant(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if cmd == "report":
        sys.exit(report(sys.argv[2], sys.argv[3:]))
    if cmd == "optstep":
        sys.exit(optstep(sys.argv[2]))
    if cmd == "gradnorms":
        sys.exit(gradnorms(sys.argv[2], sys.argv[3]))
    sys.exit("unknown command " + cmd)
