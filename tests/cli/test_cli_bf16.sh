#!/usr/bin/env bash
# tfcore train/sample/eval --dtype bf16 (bf16 mixed precision, CPU): a run
# trains and its loss falls; its first loss is near the f32 run's but not
# equal (it really rounds); checkpoints hold f32 tensors only, resume bit
# for bit in bf16 and resume in f32 (and an f32 checkpoint in bf16);
# sample and eval run in bf16; bad combinations are one line, exit 2.
#   test_cli_bf16.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --batch 4 --eval-every 100 --eval-batches 1 --sample-tokens 0 --warmup 2
    --preset char-tiny --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --lr 3e-3)
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/p' "$1"; }

checks=$((checks + 1))
"$tfcore" train "${common[@]}" --dtype bf16 --steps 30 --out "$work/b" --log-json "$work/b.jsonl" >"$work/b.out" 2>&1 \
    || fail "train --dtype bf16: $(tail -3 "$work/b.out")"
grep -q "dtype bf16" "$work/b.out" || fail "the run's header does not say dtype bf16"
"$tfcore" train "${common[@]}" --steps 30 --out "$work/f" --log-json "$work/f.jsonl" >"$work/f.out" 2>&1 \
    || fail "train f32: $(tail -3 "$work/f.out")"
$py - "$work/b.jsonl" "$work/f.jsonl" "$work/b/model.safetensors" <<'PY' || fail "bf16 run's losses or checkpoint"
import json, re, struct, sys
def losses(p):
    return [float(m.group(1)) for m in re.finditer(r'"loss": ([^,]*),', open(p).read())]
b, f = losses(sys.argv[1]), losses(sys.argv[2])
assert len(b) == len(f) == 30, (len(b), len(f))
assert b[0] != f[0], "the bf16 run's first loss equals the f32 run's: nothing was rounded"
assert abs(b[0] - f[0]) < 1e-2 * f[0], (b[0], f[0])
assert sum(b[-5:]) / 5 < b[0] - 0.5, "the bf16 run did not learn: %s" % b
assert abs(sum(b[-5:]) - sum(f[-5:])) / 5 < 0.1, (b[-5:], f[-5:])
raw = open(sys.argv[3], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); h.pop("__metadata__")
bad = {k: v["dtype"] for k, v in h.items() if v["dtype"] != "F32"}
assert not bad, "checkpoint tensors not f32: %s" % bad
PY

# bf16: 6 steps straight == 3 + resume + 3, bit for bit (the weight copies follow the loaded weights)
checks=$((checks + 1))
"$tfcore" train "${common[@]}" --dtype bf16 --steps 6 --out "$work/s" --log-json "$work/s.jsonl" >/dev/null 2>&1 \
    || fail "bf16 straight run"
"$tfcore" train "${common[@]}" --dtype bf16 --steps 6 --stop-after 3 --out "$work/r" --log-json "$work/r.jsonl" \
    >/dev/null 2>&1 || fail "bf16 first half"
"$tfcore" train "${common[@]}" --dtype bf16 --steps 6 --resume --out "$work/r" --log-json "$work/r.jsonl" \
    >/dev/null 2>&1 || fail "bf16 resume"
[ "$(losses "$work/s.jsonl")" = "$(losses "$work/r.jsonl")" ] && [ "$(losses "$work/s.jsonl" | wc -l)" = 6 ] \
    || fail "bf16 resume is not bit-exact: $(paste <(losses "$work/s.jsonl") <(losses "$work/r.jsonl") | tr '\n' ';')"
# a bf16 checkpoint resumes in f32, an f32 checkpoint in bf16
checks=$((checks + 1))
"$tfcore" train "${common[@]}" --steps 35 --resume --out "$work/b" >/dev/null 2>&1 || fail "a bf16 checkpoint resumed in f32"
"$tfcore" train "${common[@]}" --dtype bf16 --steps 35 --resume --out "$work/f" >/dev/null 2>&1 \
    || fail "an f32 checkpoint resumed in bf16"

# sample and eval in bf16
checks=$((checks + 1))
"$tfcore" sample --ckpt "$work/f" --dtype bf16 --max-new-tokens 40 --prompt "The " >"$work/sample.txt" 2>"$work/sample.err" \
    || fail "sample --dtype bf16: $(cat "$work/sample.err")"
[ "$(wc -c <"$work/sample.txt")" -ge 40 ] || fail "sample --dtype bf16 printed $(wc -c <"$work/sample.txt") bytes"
head -c 4000 "$work/corpus.txt" > "$work/val.txt"
"$tfcore" eval --ckpt "$work/f" --data "$work/val.txt" --dtype bf16 >"$work/eval.txt" 2>&1 \
    || fail "eval --dtype bf16: $(cat "$work/eval.txt")"
$py - "$work/eval.txt" <<'PY' || fail "eval --dtype bf16 output: $(cat "$work/eval.txt")"
import re, sys
t = open(sys.argv[1]).read()
f32 = float(re.search(r"loss ([0-9.]+) nats/token \(perplexity", t).group(1))
m = re.search(r"bf16 mixed precision loss ([0-9.]+) nats/token .*: ([-+][0-9.]+) nats/token vs f32", t)
assert m, t
assert abs(float(m.group(1)) - f32) < 0.02 and abs(float(m.group(2))) < 0.02, t
PY

# --device cuda --dtype bf16 is accepted (bf16 training on CUDA); without a GPU it is the loader's clean refusal,
# before anything is written (with one, tests/cuda/test_cuda_ops.c compares it with the CPU).
if ! "$tfcore" train "${common[@]}" --steps 1 --dtype bf16 --device cuda --out "$work/x" >"$work/cuda_bf16.log" 2>&1; then
    expect_fail 1 "tfcore train: error: --device cuda: CUDA unavailable: " \
        "$tfcore" train "${common[@]}" --dtype bf16 --device cuda --out "$work/x"
else
    echo "(a CUDA device is present: --device cuda --dtype bf16 trained 1 step)"
    rm -rf "$work/x"
fi
expect_fail 2 "--dtype bf16 does not combine with --quantize" \
    "$tfcore" eval --ckpt "$work/f" --data "$work/val.txt" --dtype bf16 --quantize int8
expect_fail 2 "it does not combine with --quantize or --quantize-head" \
    "$tfcore" sample --ckpt "$work/f" --dtype bf16 --quantize-head int8
expect_fail 2 "--dtype needs f32 or bf16, got 'f16'" "$tfcore" sample --ckpt "$work/f" --dtype f16
expect_fail 2 "--dtype needs f32 or bf16, got 'f64'" "$tfcore" eval --ckpt "$work/f" --data "$work/val.txt" --dtype f64
[ -e "$work/x" ] && fail "a refused run created its output directory"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
