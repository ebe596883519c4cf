#!/bin/bash
# The GPT-2 124M training-step benchmark (issue #19 Part B): tfcore and PyTorch 2.x side by side in one run.
#
#   bash bench/gpu_gpt2.sh DIR OUT
#
# DIR holds tfcore: a build dir (DIR/tools/tfcore, DIR/lib, DIR/cuda) or a bundle (DIR/tfcore or DIR/bin/tfcore
# with the libraries next to it). OUT (created) receives gpt2_step.txt (the table), gpt2_step.json (one object)
# and the raw logs. Environment: PEAK_TFLOPS (dense bf16 peak of the card, default 989 = H100/H200 SXM),
# PYTHON (default python3: the GPU machine's torch 2.x venv), GPT2_STEPS (timed steps, default 8),
# GPT2_BATCH (16), GPT2_TORCH (1; 0 leaves PyTorch out: bench/gpu_gpt2_profile.sh), GPT2_WARM (warm-up steps, 4),
# GPT2_TFCORE_WRAP (a command tfcore runs under, e.g. ncu: bench/gpu_kernel_times.sh). Rehearsal without a GPU only: GPT2_DEVICE=cpu, GPT2_TFCORE_FLAGS (appended to tfcore train's,
# e.g. "--n-layer 1 --n-embd 64 --n-head 2 --block-size 64"), GPT2_TORCH_FLAGS (e.g. --cpu-smoke).
#
# tfcore: `tfcore train --preset gpt2 --device cuda --dtype bf16` on random tokens (a synthetic GPT-2-shaped
# tokenizer is written into OUT: the data are random ids, the vocabulary only sets V = 50257), B=16, T=1024,
# --log-every 4 (so only every 4th step waits for the device): steps 1-4 are warm-up, the tokens/s of the
# --log-json records of the next GPT2_STEPS steps (whole --log-every intervals) are the measurement.
# PyTorch: bench/gpu_gpt2_torch.py, eager with manual attention and eager with F.scaled_dot_product_attention,
# 3 warm-up + 10 timed steps each; no torch.compile.
# MFU = tokens/s x (6N + 12·L·C·T) / peak for every row (N = the model's parameters, tied wte counted once; the
# attention term counts q·kᵀ and p·v forward and backward over the full T×T, as nanoGPT's estimate_mfu).
#
# Exit codes: 0 measured (whatever the ratios); 77 no CUDA device (tfcore's loader says so: "no CUDA device --
# skipped"); 1 a run failed (its log is in OUT and its tail printed). Budget on an H200: about 60-90 s.
set -u
dir="${1:?usage: gpu_gpt2.sh DIR OUT}"
out="${2:?usage: gpu_gpt2.sh DIR OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
peak="${PEAK_TFLOPS:-989}"
steps="${GPT2_STEPS:-8}"
batch="${GPT2_BATCH:-16}"
device="${GPT2_DEVICE:-cuda}"
mkdir -p "$out" || exit 1

tfcore=""
for c in "$dir/tools/tfcore" "$dir/bin/tfcore" "$dir/tfcore"; do
    [ -x "$c" ] && tfcore="$c" && break
done
[ -n "$tfcore" ] || { echo "gpu_gpt2.sh: no tfcore under $dir (tools/, bin/ or top level)"; exit 1; }
export LD_LIBRARY_PATH="$dir/cuda:$dir/lib:$dir:${LD_LIBRARY_PATH:-}"

# Random GPT-2-sized data and a synthetic GPT-2-shaped tokenizer (256 byte tokens, 50000 two-byte merges,
# <|endoftext|>): what the CLI needs to train a vocabulary of 50257 without fetching GPT-2's files.
"$py" - "$out" <<'PY' || { echo "gpu_gpt2.sh: could not write the data"; exit 1; }
import json, os, random, struct, sys
out = sys.argv[1]
os.makedirs(os.path.join(out, "gpt2tok"), exist_ok=True)
bs = [b for b in range(256) if 33 <= b <= 126 or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
cs = bs[:] + [256 + i for i in range(256 - len(bs))]
alpha = dict(zip(bs + [b for b in range(256) if b not in bs], [chr(c) for c in cs]))
base = [alpha[b] for b in range(256)]
enc = {t: i for i, t in enumerate(base)}
merges = []
for i in range(50000):
    l, r = base[i // 256], base[i % 256]
    merges.append(l + " " + r)
    enc[l + r] = 256 + i
enc["<|endoftext|>"] = 50256
with open(os.path.join(out, "gpt2tok", "encoder.json"), "w", encoding="utf-8") as f:
    json.dump(enc, f, ensure_ascii=False)
with open(os.path.join(out, "gpt2tok", "vocab.bpe"), "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
rng = random.Random(1337)
n = 1 << 21
with open(os.path.join(out, "tokens.bin"), "wb") as f:
    f.write(struct.pack("<%dH" % n, *(rng.randrange(50257) for _ in range(n))))
PY

warm=${GPT2_WARM:-4}
total=$((warm + steps))
echo "== tfcore: GPT-2 124M, bf16 mixed precision, B=$batch T=1024, $warm warm-up + $steps timed steps"
t0=$(date +%s)
${GPT2_TFCORE_WRAP:-} "$tfcore" train --data-bin "$out/tokens.bin" --data-format u16 --tokenizer "gpt2:$out/gpt2tok" --preset gpt2 \
    --device "$device" --dtype bf16 --batch "$batch" --steps "$total" --warmup 2 --log-every 4 --eval-every 100000 \
    --eval-batches 1 --sample-tokens 0 --out "$out/tfcore_ckpt" --force --log-json "$out/tfcore.jsonl" \
    ${GPT2_TFCORE_FLAGS:-} >"$out/tfcore.log" 2>&1
rc=$?
echo "   ($(($(date +%s) - t0)) s, exit $rc)"
rm -rf "$out/tfcore_ckpt" # 1.5 GB of weights and optimizer state: not evidence
if [ $rc -ne 0 ]; then
    if grep -q "no CUDA device\|CUDA unavailable" "$out/tfcore.log"; then
        echo "gpu_gpt2.sh: no CUDA device -- skipped ($(grep -m1 -o 'CUDA unavailable.*' "$out/tfcore.log"))"
        exit 77
    fi
    echo "gpu_gpt2.sh: tfcore train failed:"
    tail -20 "$out/tfcore.log"
    exit 1
fi

modes="eager sdpa"
[ "${GPT2_TORCH:-1}" = 0 ] && modes=""
# a torch without SDPA (1.13 here) can rehearse the eager row only
[ -n "$modes" ] && ! "$py" -c 'import sys, torch.nn.functional as F; sys.exit(0 if hasattr(F, "scaled_dot_product_attention") else 1)' \
    2>/dev/null && modes="eager"
for mode in $modes; do
    echo "== PyTorch ($mode attention): GPT-2 124M, bf16 autocast, fused AdamW, B=$batch T=1024"
    t0=$(date +%s)
    "$py" "$here/gpu_gpt2_torch.py" --attn "$mode" --batch "$batch" ${GPT2_TORCH_FLAGS:-} >"$out/torch_$mode.json" \
        2>"$out/torch_$mode.log"
    rc=$?
    echo "   ($(($(date +%s) - t0)) s, exit $rc)"
    [ $rc -eq 0 ] || { echo "gpu_gpt2.sh: PyTorch $mode failed (exit $rc):"; tail -20 "$out/torch_$mode.log"; \
        cat "$out/torch_$mode.json"; [ $rc -eq 77 ] && exit 77; exit 1; }
done

"$py" - "$out" "$peak" "$warm" "$batch" <<'PY'
import json, re, sys
out, peak, warm, batch = sys.argv[1], float(sys.argv[2]) * 1e12, int(sys.argv[3]), int(sys.argv[4])
L, C, T = 12, 768, 1024
log = open(out + "/tfcore.log").read()
m = re.search(r"\), (\d+) parameters", log)
n_params = int(m.group(1)) if m else 124439808
recs = [json.loads(l) for l in open(out + "/tfcore.jsonl") if l.strip()]
timed = [r for r in recs if r["step"] > warm]  # each a whole --log-every interval after the warm-up
# tokens/s over the timed intervals: their step counts weight them (all 4 here)
prev = {r["step"]: p["step"] for p, r in zip(recs, recs[1:])}
steps = sum(r["step"] - prev[r["step"]] for r in timed)
secs = sum((r["step"] - prev[r["step"]]) * batch * T / r["tokens_per_s"] for r in timed)
rows = [("tfcore bf16", batch * T * steps / secs, n_params, recs[-1]["loss"])]
import os
for mode in ("eager", "sdpa"):
    if not os.path.exists(out + "/torch_%s.json" % mode) or not os.path.getsize(out + "/torch_%s.json" % mode):
        rows.append(("torch %s: not run" % mode, float("nan"), n_params, float("nan")))
        continue
    j = json.loads(open(out + "/torch_%s.json" % mode).read())
    rows.append(("torch %s %s" % (j["torch"], mode), j["tokens_per_s"], j["params"], j["loss"]))
fpt = lambda n: 6 * n + 12 * L * C * T
lines = ["GPT-2 124M training step, B=%d T=%d, bf16 mixed precision; MFU over a %.0f TFLOP/s dense bf16 peak" %
         (batch, T, peak / 1e12),
         "%-26s %12s %9s %8s %10s" % ("", "tokens/s", "ms/step", "MFU", "last loss")]
for name, tps, n, loss in rows:
    lines.append("%-26s %12.0f %9.1f %7.1f%% %10.4f" % (name, tps, batch * T / tps * 1e3, 100 * tps * fpt(n) / peak,
                                                        loss))
if rows[1][1] == rows[1][1]:  # torch eager ran (GPT2_TORCH=0 leaves both out)
    lines.append("ratios: tfcore / torch eager %.3f, tfcore / torch sdpa %.3f (targets: >= 1 vs eager, MFU >= 45%%)" %
                 (rows[0][1] / rows[1][1], rows[0][1] / rows[2][1]))
text = "\n".join(lines)
print(text)
open(out + "/gpt2_step.txt", "w").write(text + "\n")
json.dump({"batch": batch, "block": T, "peak_tflops": peak / 1e12, "timed_steps_tfcore": steps,
           "rows": [{"name": r[0], "tokens_per_s": r[1], "params": r[2], "mfu": r[1] * fpt(r[2]) / peak,
                     "loss": r[3]} for r in rows]}, open(out + "/gpt2_step.json", "w"), indent=1)
PY
