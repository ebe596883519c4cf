#!/usr/bin/env bash
# tfcore train when a run goes wrong (tools/train_forensics.c):
#  - --overfit-batch gets char-tiny's loss on one batch below 0.05 (exit 0,
#    no checkpoint written) and says FAIL with exit 1 when given too few steps;
#  - a NaN planted in one block's weights of a checkpoint (the safetensors
#    file edited, its manifest entry updated) stops the resumed run before
#    the update with exit 1 and one error line naming that weight; the
#    report names it as the suspect, holds the step, the lr, per-block norms
#    and the batch's token ids; the checkpoint's files are byte for byte as
#    they were;
#  - --skip-nonfinite N skips transient non-finite gradients (the test hook
#    TFCORE_TEST_NAN_GRAD) without an update (Adam's step count stays N
#    behind), goes on to the end, and gives up with a clear error at N+1;
#    the first non-finite gradient in backward order is the hooked one;
#  - --log-grad-norms K puts per-block gradient norms on every K-th
#    --log-json line, adding up (in quadrature) to the line's total norm;
#  - --recompute trains bit for bit like the plain run;
#  - bad flags are one-line usage errors.
#   test_cli_forensics.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
chk="$src/tests/cli/forensics_check.py"
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

head -c 200000 "$src/data/tinyshakespeare.txt" >"$work/data.txt"
fast=(--data "$work/data.txt" --batch 2 --warmup 1 --eval-batches 1 --sample-tokens 0)

# ---- --overfit-batch
checks=$((checks + 1))
if "$tfcore" train "${fast[@]}" --overfit-batch --steps 150 --lr 3e-3 --out "$work/of" >"$work/of.out" 2>"$work/of.err"; then
    grep -q "overfit-batch: loss .* -> 0\.0[0-4].*(PASS)" "$work/of.out" || fail "overfit-batch: $(tail -2 "$work/of.out")"
    [ -e "$work/of/model.safetensors" ] && fail "overfit-batch wrote a checkpoint"
else
    fail "overfit-batch exit $?: $(cat "$work/of.err") $(tail -3 "$work/of.out")"
fi
expect_fail 1 "--overfit-batch: the loss did not get below 0.05 in 3 steps" \
    "$tfcore" train "${fast[@]}" --overfit-batch --steps 3 --out "$work/of3"
grep -q "(FAIL" "$work/out" || fail "overfit-batch FAIL line: $(tail -1 "$work/out")"

# ---- a NaN in a checkpoint's weights
"$tfcore" train "${fast[@]}" --steps 6 --stop-after 2 --out "$work/nan" >/dev/null 2>&1 || fail "training 2 steps"
$py "$chk" plant "$work/nan" transformer.h.1.attn.c_attn.weight || fail "planting the NaN"
(cd "$work/nan" && sha256sum model.safetensors optimizer.safetensors checkpoint.json config.json loss.csv >"$work/sums")
expect_fail 1 "non-finite loss (nan) at step 3; stopping before the update" \
    "$tfcore" train "${fast[@]}" --resume --steps 6 --out "$work/nan"
grep -qF "non-finite weights: transformer.h.1.attn.c_attn.weight. Report: $work/nan/nonfinite-step3.json" "$work/err" ||
    fail "the error does not name the planted weight and the report: $(cat "$work/err")"
(cd "$work/nan" && sha256sum -c --quiet "$work/sums") || fail "the checkpoint changed after the NaN stop"
checks=$((checks + 1))
$py "$chk" report "$work/nan/nonfinite-step3.json" step=3 action=stopped "reason=non-finite loss" \
    suspect=transformer.h.1.attn.c_attn.weight nonfinite_weights=transformer.h.1.attn.c_attn.weight \
    first_nonfinite_grad=transformer.ln_f.bias history=1 batch=2x128 lr_finite=1 || fail "the NaN report"

# ---- --skip-nonfinite on transient NaN gradients (steps 3 and 4)
hooked=transformer.h.2.mlp.c_fc.weight
checks=$((checks + 1))
if TFCORE_TEST_NAN_GRAD="3,4:$hooked" "$tfcore" train "${fast[@]}" --steps 6 --skip-nonfinite 2 --out "$work/skip" \
    --log-json "$work/skip.jsonl" >"$work/skip.out" 2>"$work/skip.err"; then
    [ "$(grep -c "warning: non-finite gradient at step [34]: update skipped" "$work/skip.err")" = 2 ] ||
        fail "skip warnings: $(cat "$work/skip.err")"
    [ "$($py "$chk" optstep "$work/skip")" = 4 ] || fail "Adam's step after 6 steps with 2 skipped: $($py "$chk" optstep "$work/skip")"
    [ "$(sed -n 's/.*"step": \([0-9]*\),.*/\1/p' "$work/skip.jsonl" | tr '\n' ' ')" = "1 2 5 6 " ] ||
        fail "logged steps: $(cat "$work/skip.jsonl")"
    $py "$chk" report "$work/skip/nonfinite-step4.json" step=4 "action=skipped (2 of --skip-nonfinite 2)" \
        "reason=non-finite gradient" first_nonfinite_grad=$hooked suspect=$hooked nonfinite_weights= history=4 ||
        fail "the skip report"
else
    fail "--skip-nonfinite 2 with 2 bad steps: exit $?: $(cat "$work/skip.err")"
fi
# two warnings, then the error on one line
checks=$((checks + 1))
TFCORE_TEST_NAN_GRAD="2,3,4:$hooked" "$tfcore" train "${fast[@]}" --steps 6 --skip-nonfinite 2 --out "$work/skip3" \
    >/dev/null 2>"$work/err"
rc=$?
[ "$rc" = 1 ] || fail "giving up after --skip-nonfinite 2: exit $rc"
[ "$(grep -c warning "$work/err")" = 2 ] || fail "skip warnings: $(cat "$work/err")"
tail -1 "$work/err" | grep -qF "error: non-finite gradient at step 4; stopping after skipping 2 step(s) (--skip-nonfinite 2)" ||
    fail "gave up without the error: $(cat "$work/err")"
[ -e "$work/skip3/model.safetensors" ] && fail "a run that gave up wrote a checkpoint"

# ---- --log-grad-norms
"$tfcore" train "${fast[@]}" --steps 5 --log-grad-norms 2 --log-json "$work/gn.jsonl" --out "$work/gn" >/dev/null 2>&1 ||
    fail "--log-grad-norms run"
checks=$((checks + 1))
$py "$chk" gradnorms "$work/gn.jsonl" 2 || fail "--log-grad-norms lines"

# ---- --recompute: the same run bit for bit
"$tfcore" train "${fast[@]}" --steps 3 --log-json "$work/r0.jsonl" --out "$work/r0" >/dev/null 2>&1 || fail "plain run"
"$tfcore" train "${fast[@]}" --steps 3 --recompute --log-json "$work/r1.jsonl" --out "$work/r1" >/dev/null 2>&1 ||
    fail "--recompute run"
checks=$((checks + 1))
cmp -s "$work/r0/model.safetensors" "$work/r1/model.safetensors" || fail "--recompute weights differ from the plain run"
cmp -s "$work/r0/optimizer.safetensors" "$work/r1/optimizer.safetensors" || fail "--recompute Adam state differs"
[ "$(sed 's/"tokens_per_s.*//' "$work/r0.jsonl")" = "$(sed 's/"tokens_per_s.*//' "$work/r1.jsonl")" ] ||
    fail "--recompute losses differ"

# ---- bad flags
expect_fail 2 "--skip-nonfinite" "$tfcore" train --skip-nonfinite -1 --out "$work/x"
expect_fail 2 "--log-grad-norms" "$tfcore" train --log-grad-norms 0 --out "$work/x"
expect_fail 2 "--recompute takes no value" "$tfcore" train --recompute=1 --out "$work/x"
expect_fail 2 "--overfit-batch is a check of a fresh model" "$tfcore" train --overfit-batch --resume --out "$work/x"
expect_fail 2 "--overfit-batch writes no checkpoint" "$tfcore" train --overfit-batch --save-every 5 --out "$work/x"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
