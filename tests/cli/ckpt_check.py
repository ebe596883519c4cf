#!/usr/bin/env python3
"""Independent reader of a `tfcore train` checkpoint directory, for the crash test.

    ckpt_check.py DIR [--pids P,P,...] [--clean]

Finds the checkpoint the loader would use: a committed but not yet moved-in
save (DIR/.checkpoint.new/checkpoint.json) first, then DIR/checkpoint.json,
else the bare files (an old-style directory). Checks, reading the files
itself (safetensors header and the optimizer's `step` tensor):
  - the model's train.step equals the optimizer's step (and the manifest's);
  - listed files have the manifest's size; small ones its FNV-1a 64 hash;
  - loss.csv is whole rows and ends at the checkpoint's step, loss.svg is a
    whole SVG, config.json parses;
  - every temporary file of tfcore's (NAME.tmp.PID.N, NAME.tmp, NAME a checkpoint
    file's name) belongs to one of --pids
    (the processes killed since the last completed save); with --clean none
    may exist, nor a staging directory.
Prints the checkpoint's step, or "none" when there is no checkpoint, then
"in-save" when a staging directory or a temporary file is there (a kill
interrupted a write), else "idle".
Exit 1 with one "FAIL: ..." line per problem.
"""
import json
import os
import re
import struct
import sys

STAGE = ".checkpoint.new"
KNOWN = ("model.safetensors", "optimizer.safetensors", "tokenizer.tfctok", "tokenizer.json", "config.json", "loss.csv",
         "loss.svg", "checkpoint.json", "data.tokens")
TMP = re.compile(r"^(%s)\.tmp(?:\.(\d+)\.(\d+))?$" % "|".join(re.escape(k) for k in KNOWN))
problems = []


def fail(msg):
    problems.append(msg)


def fnv1a64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        for b in f.read():
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def model_step(path):
    h, _ = st_header(path)
    return int(h["__metadata__"]["train.step"])


def optimizer_step(path):
    h, base = st_header(path)
    t = h["step"]
    if t["dtype"] != "I64" or t["shape"] not in ([], [1]):
        raise ValueError("optimizer 'step' is %s %s" % (t["dtype"], t["shape"]))
    b, e = t["data_offsets"]
    with open(path, "rb") as f:
        f.seek(base + b)
        return struct.unpack("<q", f.read(e - b))[0]


def main():
    d = sys.argv[1]
    pids = set()
    clean = "--clean" in sys.argv
    if "--pids" in sys.argv:
        pids = {p for p in sys.argv[sys.argv.index("--pids") + 1].split(",") if p}
    stage = os.path.join(d, STAGE)
    in_save = os.path.isdir(stage)

    # temporaries anywhere under DIR
    for root, _, files in os.walk(d):
        for n in files:
            m = TMP.match(n)
            if not m:
                continue
            where = os.path.join(root, n)
            in_save = True
            if clean:
                fail("temporary file left behind: %s" % where)
            elif m.group(2) is None or m.group(2) not in pids:
                fail("temporary file %s is not from a process killed since the last save (pids %s)" %
                     (where, ",".join(sorted(pids)) or "-"))
    if clean and os.path.isdir(stage):
        fail("staging directory left behind: %s (%s)" % (stage, os.listdir(stage)))

    def resolve(name, first):
        if first and os.path.exists(os.path.join(first, name)):
            return os.path.join(first, name)
        return os.path.join(d, name)

    manifest, first = None, None
    if os.path.exists(os.path.join(stage, "checkpoint.json")):
        manifest, first = os.path.join(stage, "checkpoint.json"), stage
    elif os.path.exists(os.path.join(d, "checkpoint.json")):
        manifest = os.path.join(d, "checkpoint.json")
    model = resolve("model.safetensors", first)
    if not os.path.exists(model):
        if manifest:
            fail("%s names a checkpoint but %s is missing" % (manifest, model))
        print("none")
        print("in-save" if in_save else "idle")
        return
    step = model_step(model)
    ostep = optimizer_step(resolve("optimizer.safetensors", first))
    if step != ostep:
        fail("model.safetensors is at step %d, optimizer.safetensors at step %d" % (step, ostep))
    if manifest:
        with open(manifest) as f:
            man = json.load(f)
        if man.get("format") != "tfcore-checkpoint" or man.get("step") != step:
            fail("%s: format %r step %r, model at step %d" % (manifest, man.get("format"), man.get("step"), step))
        for e in man["files"]:
            p = resolve(e["name"], first)
            if not os.path.exists(p):
                fail("%s lists %s, which is missing" % (manifest, e["name"]))
                continue
            if os.path.getsize(p) != e["size"]:
                fail("%s: size %d, manifest says %d" % (p, os.path.getsize(p), e["size"]))
            elif e["size"] < (1 << 16) and fnv1a64(p) != e["fnv1a64"]:
                fail("%s: FNV-1a %s, manifest says %s" % (p, fnv1a64(p), e["fnv1a64"]))
            if "step" in e and e["step"] != step:
                fail("%s: manifest step %d for %s, model at %d" % (manifest, e["step"], e["name"], step))
    csv = resolve("loss.csv", first)
    if os.path.exists(csv):
        with open(csv) as f:
            text = f.read()
        rows = text.split("\n")
        if rows[0] != "step,loss,val_loss,lr" or rows[-1] != "":
            fail("%s is damaged: %r" % (csv, text[-80:]))
        elif len(rows) > 2 and int(rows[-2].split(",")[0]) != step:
            fail("%s ends at step %s, the checkpoint is at step %d" % (csv, rows[-2].split(",")[0], step))
    svg = resolve("loss.svg", first)
    if os.path.exists(svg):
        with open(svg) as f:
            if not f.read().endswith("</svg>\n"):
                fail("%s is truncated" % svg)
    cfg = resolve("config.json", first)
    if os.path.exists(cfg):
        try:
            with open(cfg) as f:
                json.load(f)
        except ValueError as e:
            fail("%s does not parse: %s" % (cfg, e))
    print(step)
    print("in-save" if in_save else "idle")


try:
    main()
except Exception as e:  # an unreadable file is a finding, not a crash of the checker
    fail("%s: %s" % (type(e).__name__, e))
for p in problems:
    print("FAIL: " + p)
sys.exit(1 if problems else 0)
