#!/bin/bash
# The device check's bf16 training stage (issue #19 Part B): char-tiny on tinyshakespeare trained on CUDA in f32
# and in bf16 mixed precision from the same seed, and the bf16 run's first steps on the CPU.
#
#   bash tests/cuda/train_bf16_check.sh DIR OUT
#
# DIR holds tfcore (a build dir: DIR/tools/tfcore, DIR/lib, DIR/cuda; or a bundle: DIR/tfcore or DIR/bin/tfcore).
# OUT gets the logs, the --log-json records and bf16_train.txt (the verdicts). Checks, each printed PASS/FAIL:
#  1. both CUDA runs learn: the loss at step 300 is at least 1.0 nats below step 1's;
#  2. the bf16 loss curve is within 0.05 nats of f32's at every logged step from 50 on, and the final val loss
#     within 0.03 (bf16 rounds operands to 8 bits of mantissa: the curves differ by noise, not by a trend);
#  3. bf16 on CUDA vs bf16 on the CPU from the same weights and batches: the loss of steps 1-20 within 2e-2
#     relative (summation order and the bf16 roundings it flips; the trajectories then diverge slowly);
#  4. host waits (TFC_CUDA_SYNC_LOG=1): between two logging steps that hold no eval, at most the 4 waits of the
#     logging step itself (loss, clip norm, gradient and weight norms): the 9 steps between wait 0 times.
# Exit 0 all pass, 1 a failure, 77 no CUDA device ("no CUDA device -- skipped"). About 20-40 s on an H200.
# Rehearsal without a GPU only: CHECK_DEVICE=cpu CHECK_STEPS=60 (the verdicts then mean nothing).
set -u
dir="${1:?usage: train_bf16_check.sh DIR OUT}"
out="${2:?usage: train_bf16_check.sh DIR OUT}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$out" || exit 1
tfcore=""
for c in "$dir/tools/tfcore" "$dir/bin/tfcore" "$dir/tfcore"; do
    [ -x "$c" ] && tfcore="$c" && break
done
[ -n "$tfcore" ] || { echo "train_bf16_check.sh: no tfcore under $dir"; exit 1; }
export LD_LIBRARY_PATH="$dir/cuda:$dir/lib:$dir:${LD_LIBRARY_PATH:-}"
py="${PYTHON:-python3}"
common=(--data "$src/data/tinyshakespeare.txt" --preset char-tiny --batch 16 --seed 1337 --eval-every 100
    --eval-batches 4 --sample-tokens 0 --log-every 10)

run() { # name, then flags
    local name="$1"
    shift
    TFC_CUDA_SYNC_LOG=1 "$tfcore" train "${common[@]}" "$@" --out "$out/ckpt_$name" --force \
        --log-json "$out/$name.jsonl" >"$out/$name.log" 2>&1
    local rc=$?
    rm -rf "$out/ckpt_$name"
    if [ $rc -ne 0 ]; then
        if grep -q "CUDA unavailable" "$out/$name.log"; then
            echo "train_bf16_check.sh: no CUDA device -- skipped ($(grep -m1 -o 'CUDA unavailable.*' "$out/$name.log"))"
            exit 77
        fi
        echo "train_bf16_check.sh: the $name run failed (exit $rc):"
        tail -15 "$out/$name.log"
        exit 1
    fi
}
dev="${CHECK_DEVICE:-cuda}"
steps="${CHECK_STEPS:-300}"
t0=$(date +%s)
run cuda_f32 --device "$dev" --dtype f32 --steps "$steps"
run cuda_bf16 --device "$dev" --dtype bf16 --steps "$steps"
run cuda_bf16_20 --device "$dev" --dtype bf16 --steps 20 --log-every 1
run cpu_bf16_20 --device cpu --dtype bf16 --steps 20 --log-every 1
echo "runs: $(($(date +%s) - t0)) s"

"$py" - "$out" "$steps" <<'PY'
import json, re, sys
out, last = sys.argv[1], int(sys.argv[2])
load = lambda n: {r["step"]: r for r in map(json.loads, open("%s/%s.jsonl" % (out, n)))}
f32, b16, c20, p20 = load("cuda_f32"), load("cuda_bf16"), load("cuda_bf16_20"), load("cpu_bf16_20")
lines, ok = [], True
def check(name, good, detail):
    global ok
    ok &= bool(good)
    lines.append("%s  %s: %s" % ("PASS" if good else "FAIL", name, detail))
for n, r in (("f32", f32), ("bf16", b16)):
    check("%s on CUDA learns" % n, r[last]["loss"] <= r[1]["loss"] - 1.0,
          "loss %.4f at step 1, %.4f at step %d" % (r[1]["loss"], r[last]["loss"], last))
common = sorted(s for s in b16 if s in f32 and s >= 50)
if common:
    worst = max(common, key=lambda s: abs(b16[s]["loss"] - f32[s]["loss"]))
    check("bf16 curve within 0.05 nats of f32 (steps >= 50)", abs(b16[worst]["loss"] - f32[worst]["loss"]) <= 0.05,
          "worst at step %d: bf16 %.4f, f32 %.4f over %d logged steps" % (worst, b16[worst]["loss"],
                                                                         f32[worst]["loss"], len(common)))
else:
    check("bf16 curve within 0.05 nats of f32 (steps >= 50)", False, "no logged step >= 50")
check("bf16 final val loss within 0.03 of f32", abs(b16[last]["val_loss"] - f32[last]["val_loss"]) <= 0.03,
      "bf16 %.4f, f32 %.4f" % (b16[last]["val_loss"], f32[last]["val_loss"]))
rel = max(abs(c20[s]["loss"] - p20[s]["loss"]) / abs(p20[s]["loss"]) for s in range(1, 21))
check("bf16 CUDA vs bf16 CPU, steps 1-20, 2e-2 relative", rel <= 2e-2, "worst relative difference %.2e" % rel)
# waits between consecutive progress lines of the bf16 run (stdout and stderr share the log, both line-flushed)
counts, cur, prev = [], 0, None
for line in open(out + "/cuda_bf16.log"):
    m = re.match(r"step (\d+)/%d" % last, line)
    if m:
        s = int(m.group(1))
        if prev is not None and s - prev == 10 and s % 100 and not (prev % 100 == 0):
            counts.append((s, cur))
        prev, cur = s, 0
    elif "host waits on cuda" in line:
        cur += 1
bad = [(s, c) for s, c in counts if c > 4]
check("no host wait between logging steps", counts and not bad,
      "%d intervals of 10 steps, waits per interval %s%s" % (len(counts), sorted(set(c for _, c in counts)),
                                                            (", over 4 at " + str(bad)) if bad else ""))
text = "\n".join(lines)
print(text)
open(out + "/bf16_train.txt", "w").write(text + "\n")
sys.exit(0 if ok else 1)
PY
