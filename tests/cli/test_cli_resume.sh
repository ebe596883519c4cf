#!/usr/bin/env bash
# A resume that cannot corrupt (issue 41): tfcore train --resume with flags that contradict the checkpoint in
# --out is refused with one line on stderr and exit 2 before anything is written, and the checkpoint stays byte
# for byte as it was (and still resumes): a stop step at or before the checkpoint's (--stop-after, --steps), another
# shape (--n-layer ... --bias over the checkpoint, or a --preset with another bias), another dtype, another
# vocabulary (--tokenizer). A --tokenizer naming the checkpoint's own vocabulary still resumes.
#   test_cli_resume.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

head -c 60000 "$src/data/tinyshakespeare.txt" >"$work/corpus.txt"
shape=(--n-layer 1 --n-head 2 --n-embd 32 --block-size 16)
fast=(--data "$work/corpus.txt" --batch 2 --eval-every 4 --eval-batches 1 --sample-tokens 0 --peak-flops 1e9)
# the checkpoint: 4 of 8 steps
"$tfcore" train "${fast[@]}" "${shape[@]}" --steps 8 --stop-after 4 --out "$work/c" >"$work/c.log" 2>&1 ||
    fail "the first 4 steps: $(tail -3 "$work/c.log")"
sums() { (cd "$work/c" && ls -A && md5sum -- *); }
before=$(sums)

# refused: expect_fail, then the directory must be as it was
refused() { # refused 'message fragment' FLAGS...
    local frag="$1"
    shift
    expect_fail 2 "$frag" "$tfcore" train "${fast[@]}" --steps 8 --resume --out "$work/c" "$@"
    checks=$((checks + 1))
    [ "$(sums)" = "$before" ] || fail "--resume $*: the refused run changed the checkpoint:"$'\n'"$(diff <(echo "$before") <(sums))"
}
refused "--stop-after 2 on --resume: the checkpoint in '$work/c' is at step 4" --stop-after 2
refused "--stop-after 4 on --resume" --stop-after 4
refused "the checkpoint is at step 4, --steps is 4: nothing to do" --steps 4
refused "the checkpoint is at step 4, --steps is 3: nothing to do" --steps 3 --warmup 0
refused "--n-layer 2 on --resume" --n-layer 2
refused "--n-head 4 on --resume" --n-head 4
refused "--n-embd 64 on --resume" --n-embd 64
refused "--block-size 8 on --resume" --block-size 8
refused "--no-bias on --resume" --no-bias
# a --preset makes the shape, compared with the checkpoint's: another bias, another dtype
refused "holds a checkpoint of another config (bias 1, this run 0)" --preset char-tiny "${shape[@]}" --no-bias
refused "holds a checkpoint of another config (n_layer 1, this run 4)" --preset char-tiny
refused "holds a checkpoint of another config (dtype f32, this run f64)" --dtype f64
# another vocabulary: a BPE one, and a char one of another text
refused "--tokenizer bpe:260 on --resume: the checkpoint in '$work/c' was trained with another vocabulary" \
    --tokenizer bpe:260
printf 'char:0a616263' >"$work/abc.vocab" # a char vocabulary FILE of 4 bytes, as tfcore data prepare writes one
refused "--tokenizer $work/abc.vocab on --resume" --tokenizer "$work/abc.vocab"

# still resumable: --tokenizer char learns the checkpoint's vocabulary from the same text; 4 more steps equal an
# uninterrupted 8-step run
"$tfcore" train "${fast[@]}" --steps 8 --resume --tokenizer char --out "$work/c" >"$work/r.log" 2>&1 ||
    fail "--resume --tokenizer char (the checkpoint's vocabulary): $(tail -3 "$work/r.log")"
"$tfcore" train "${fast[@]}" "${shape[@]}" --steps 8 --out "$work/straight" >"$work/s.log" 2>&1 ||
    fail "the straight run: $(tail -3 "$work/s.log")"
checks=$((checks + 1))
cmp -s "$work/c/model.safetensors" "$work/straight/model.safetensors" ||
    fail "4 steps + refused runs + --resume to 8 differ from 8 straight steps"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
