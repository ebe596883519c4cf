#!/usr/bin/env bash
# tfcore train --log-every N (issue #19: no host waits between logging steps on CUDA), checked on the CPU:
# the --log-json records, the loss curve and the progress lines are written at steps N, 2N, ... and at the
# first, last, eval and save steps only; their losses are those of a run that logs every step (the steps
# between clip on the device instead of the host: the same formula, so within 1e-5), tok/s covers the whole
# interval; --skip-nonfinite forces every step; N = 0 is refused.
#   test_cli_log_every.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

head -c 200000 "$src/data/tinyshakespeare.txt" > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --batch 4 --eval-every 8 --eval-batches 1 --sample-tokens 0 --warmup 2
    --preset char-tiny --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --lr 3e-3 --steps 11 --clip 0.5)

checks=$((checks + 1))
"$tfcore" train "${common[@]}" --out "$work/a" --log-json "$work/a.jsonl" >"$work/a.out" 2>&1 ||
    fail "train (every step): $(tail -3 "$work/a.out")"
"$tfcore" train "${common[@]}" --log-every 3 --out "$work/b" --log-json "$work/b.jsonl" >"$work/b.out" 2>&1 ||
    fail "train --log-every 3: $(tail -3 "$work/b.out")"
"$py" - "$work" <<'PY' || fail "--log-every 3 records (above)"
import json, sys
w = sys.argv[1]
a = {r["step"]: r for r in map(json.loads, open(w + "/a.jsonl"))}
b = [json.loads(l) for l in open(w + "/b.jsonl")]
steps = [r["step"] for r in b]
# 3, 6, 9 (every 3rd), 1 (first), 8 (eval), 11 (last, eval)
assert steps == [1, 3, 6, 8, 9, 11], steps
assert sorted(a) == list(range(1, 12)), sorted(a)
for r in b:
    ra = a[r["step"]]
    assert abs(r["loss"] - ra["loss"]) <= 1e-5 * abs(ra["loss"]), (r, ra)
    assert abs(r["grad_norm"] - ra["grad_norm"]) <= 1e-4 * ra["grad_norm"], (r, ra)
    assert r["tokens_per_s"] > 0 and r["mfu"] > 0, r
    if r["step"] in (8, 11):
        assert "val_loss" in r and abs(r["val_loss"] - ra["val_loss"]) <= 1e-4, (r, ra)
# the clip really clips (0.5) on the steps between, or the losses above would drift apart
assert all(a[s]["grad_norm"] > 0.5 for s in (2, 4, 5)), [a[s]["grad_norm"] for s in (2, 4, 5)]
PY
checks=$((checks + 1))
# the loss curve (loss.csv, or whatever the checkpoint keeps) has the logged steps only
n=$(grep -c '^step [0-9]*/11' "$work/b.out")
[ "$n" = 6 ] || fail "--log-every 3 printed $n progress lines, wanted 6: $(grep '^step' "$work/b.out")"

checks=$((checks + 1))
"$tfcore" train "${common[@]}" --log-every 3 --skip-nonfinite 1 --out "$work/c" --log-json "$work/c.jsonl" \
    >"$work/c.out" 2>&1 || fail "train --log-every 3 --skip-nonfinite 1: $(tail -3 "$work/c.out")"
[ "$(wc -l <"$work/c.jsonl")" = 11 ] || fail "--skip-nonfinite did not log every step: $(wc -l <"$work/c.jsonl") records"

expect_fail 2 "--log-every needs an integer" "$tfcore" train "${common[@]}" --log-every 0 --out "$work/x"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
