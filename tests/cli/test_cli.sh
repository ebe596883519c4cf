#!/usr/bin/env bash
# CLI tests: every error path a person can hit (one line on stderr, non-zero
# exit, nothing overwritten), a bit-exact resume (3 steps + save + resume +
# 3 steps == 6 steps straight) whose loss.csv covers all 6 steps, --profile,
# sampling, eval and the tokenizer commands.
#   test_cli.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

# A real English corpus that is always present: the project's own docs.
cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
head -c 500 "$work/corpus.txt" > "$work/tiny.txt"
fast=(--batch 2 --eval-batches 1 --sample-tokens 0)

expect_fail 2 "unknown command 'bogus'" "$tfcore" bogus
expect_fail 2 "cannot read the data file '$work/missing.txt'" "$tfcore" train --data "$work/missing.txt"
expect_fail 2 "too small" "$tfcore" train --data "$work/tiny.txt" --out "$work/o_tiny"
[ -e "$work/o_tiny" ] && fail "a failed run created its output directory"
expect_fail 2 "unknown preset 'gpt5'" "$tfcore" train --data "$work/corpus.txt" --preset gpt5 --out "$work/o_bad"
expect_fail 2 "--steps needs an integer" "$tfcore" train --data "$work/corpus.txt" --steps abc
expect_fail 2 "--steps needs an integer" "$tfcore" train --data "$work/corpus.txt" --steps 0
expect_fail 2 "--lr needs a number" "$tfcore" train --data "$work/corpus.txt" --lr -1
expect_fail 2 "--batch needs an integer" "$tfcore" train --data "$work/corpus.txt" --batch 1.5
expect_fail 2 "unknown flag --bogus" "$tfcore" train --bogus 1
expect_fail 2 "--tokenizer must be char, bpe:VOCAB, gpt2:DIR or a tokenizer FILE, got 'words'" "$tfcore" train --data "$work/corpus.txt" --tokenizer words
expect_fail 2 "--resume: no checkpoint" "$tfcore" train --data "$work/corpus.txt" --resume --out "$work/none"
expect_fail 2 "--device must be cpu, cuda or cuda:N, got 'tpu'" "$tfcore" train --data "$work/corpus.txt" --device tpu
expect_fail 2 "--device cuda: needs an integer" "$tfcore" train --data "$work/corpus.txt" --device cuda:x
expect_fail 2 "--dtype must be f32, f64 or bf16, got 'f16'" "$tfcore" train --data "$work/corpus.txt" --dtype f16
# --device cuda: trains where a GPU is usable; elsewhere one clean line with the loader's reason, nothing written.
if "$tfcore" train --data "$work/corpus.txt" --device cuda --steps 2 --batch 2 --eval-every 1 --eval-batches 1 \
    --sample-tokens 0 --out "$work/o_cuda" >"$work/cuda.log" 2>&1; then
    echo "(a CUDA device is present: --device cuda trained 2 steps)"
else
    expect_fail 1 "tfcore train: error: --device cuda: CUDA unavailable: " "$tfcore" train --data "$work/corpus.txt" \
        --device cuda --out "$work/o_cuda"
    [ -e "$work/o_cuda" ] && fail "a --device cuda run without a GPU created its output directory"
fi

# 6 steps straight vs 3 + resume + 3: identical losses, bit for bit
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --steps 6 --warmup 2 "${fast[@]}" --out "$work/straight" \
    --log-json "$work/straight.jsonl" >"$work/log1" 2>&1 || fail "straight run: $(cat "$work/log1")"
"$tfcore" train --data "$work/corpus.txt" --steps 6 --warmup 2 "${fast[@]}" --out "$work/resumed" \
    --log-json "$work/resumed.jsonl" --stop-after 3 >"$work/log2" 2>&1 || fail "first half: $(cat "$work/log2")"
"$tfcore" train --data "$work/corpus.txt" --steps 6 --warmup 2 "${fast[@]}" --out "$work/resumed" \
    --log-json "$work/resumed.jsonl" --resume >"$work/log3" 2>&1 || fail "resume: $(cat "$work/log3")"
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/p' "$1"; }
if [ "$(losses "$work/straight.jsonl")" != "$(losses "$work/resumed.jsonl")" ] || [ "$(losses "$work/straight.jsonl" | wc -l)" != 6 ]; then
    fail "resume is not bit-exact:"; paste <(losses "$work/straight.jsonl") <(losses "$work/resumed.jsonl")
fi
# checkpoints are ordinary files: 0644 under umask 022 (not a temp file's 0600), no temp files left
checks=$((checks + 1))
(
    umask 022
    "$tfcore" train --data "$work/corpus.txt" --steps 2 --warmup 1 "${fast[@]}" --out "$work/perm" >"$work/logp" 2>&1
) || fail "perm run: $(cat "$work/logp")"
for f in model.safetensors optimizer.safetensors; do
    [ "$(stat -c %a "$work/perm/$f" 2>/dev/null)" = 644 ] || fail "$f has mode $(stat -c %a "$work/perm/$f" 2>&1), want 644"
done
ls "$work/perm" | grep -q '\.tmp\.' && fail "temp files left in $work/perm: $(ls "$work/perm")"
# without --data nor TFCORE_DATA, train reads the corpus that ships in data/, from any directory
checks=$((checks + 1))
tfcore_abs="$(cd "$(dirname "$tfcore")" && pwd)/$(basename "$tfcore")"
(cd "$work" && env -u TFCORE_DATA "$tfcore_abs" train --steps 2 --warmup 1 "${fast[@]}" --out "$work/default" >"$work/logd" 2>&1) ||
    fail "default corpus run: $(cat "$work/logd")"
grep -qF "data/tinyshakespeare.txt" "$work/logd" || fail "default corpus is not data/tinyshakespeare.txt: $(head -2 "$work/logd")"
# the resumed run's loss.csv / loss.svg cover the whole run, not only the resumed steps
checks=$((checks + 1))
[ "$(cut -d, -f1 "$work/resumed/loss.csv" | tr '\n' ' ')" = "step 1 2 3 4 5 6 " ] ||
    fail "resumed loss.csv steps: $(cut -d, -f1 "$work/resumed/loss.csv" | tr '\n' ' ')"
checks=$((checks + 1))
[ "$(cut -d, -f1,2 "$work/straight/loss.csv")" = "$(cut -d, -f1,2 "$work/resumed/loss.csv")" ] ||
    fail "resumed loss.csv differs from the straight run's:"$'\n'"$(paste -d'|' "$work/straight/loss.csv" "$work/resumed/loss.csv")"
checks=$((checks + 1))
grep -q "steps 0-6" "$work/resumed/loss.svg" || fail "resumed loss.svg title does not cover steps 0-6"
# a missing or damaged loss.csv costs the history only: one warning, the run goes on
resume_with_csv() { # $1: what to do to loss.csv; $2: warning fragment; $3: steps wanted in the CSV
    checks=$((checks + 1))
    rm -rf "$work/rcsv"
    "$tfcore" train --data "$work/corpus.txt" --steps 4 --warmup 1 "${fast[@]}" --out "$work/rcsv" --stop-after 2 \
        >/dev/null 2>&1 || { fail "first half for the CSV check"; return; }
    eval "$1"
    "$tfcore" train --data "$work/corpus.txt" --steps 4 --warmup 1 "${fast[@]}" --out "$work/rcsv" --resume \
        >/dev/null 2>"$work/err"
    local rc=$? got
    got=$(cut -d, -f1 "$work/rcsv/loss.csv" | tr '\n' ' ')
    if [ "$rc" != 0 ]; then fail "resume after '$1': exit $rc ($(cat "$work/err"))"
    elif ! grep -qF -- "$2" "$work/err" || [ "$(wc -l < "$work/err")" != 1 ]; then
        fail "resume after '$1': stderr '$(cat "$work/err")' is not one line with '$2'"
    elif [ "$got" != "$3" ]; then fail "resume after '$1': loss.csv steps '$got', wanted '$3'"
    fi
}
resume_with_csv 'rm "$work/rcsv/loss.csv"' "warning: cannot read $work/rcsv/loss.csv" "step 3 4 "
resume_with_csv 'printf "step,loss,val_loss,lr\n1,4.5,,0.001\nbogus\n" > "$work/rcsv/loss.csv"' \
    "loss.csv line 3 is not a 'step,loss,val_loss,lr' row" "step 3 4 "
resume_with_csv 'printf "step,loss,val_loss,lr\n2,4.5,,0.001\n1,4.4,,0.001\n" > "$work/rcsv/loss.csv"' \
    "loss.csv line 3 is not" "step 3 4 "
resume_with_csv 'printf "step,loss\n1,2\n" > "$work/rcsv/loss.csv"' "loss.csv line 1 is not" "step 3 4 "
resume_with_csv 'sed -i \$d "$work/rcsv/loss.csv"' "loss.csv ends at step 1, the checkpoint is at step 2" "step 1 3 4 "

# --profile: the per-op table of one step after the warm-up step, on stderr
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --steps 3 --warmup 1 "${fast[@]}" --out "$work/prof" --profile \
    >"$work/prof.out" 2>"$work/prof.err" || fail "--profile run: $(cat "$work/prof.err")"
for want in "profile of step 2 " "backward passes: 1;" tfc_linear tfc_attention tfc_layernorm tfc_linear_cross_entropy \
    "(between steps: clip, optimizer"; do
    checks=$((checks + 1))
    grep -qF -- "$want" "$work/prof.err" || fail "--profile output lacks '$want': $(cat "$work/prof.err")"
done
# every row: calls, fwd, bwd, total ms and % are numbers >= 0, total = fwd + bwd, the % add up to 100
checks=$((checks + 1))
awk '/^op +calls/ { t = 1; next } /^total/ { t = 0 }
     t && NF >= 6 { n++; for (i = NF - 4; i <= NF; i++) if ($i !~ /^[0-9.]+$/) bad = bad " " $0;
                    d = $(NF - 3) + $(NF - 2) - $(NF - 1); if (d > 0.002 || d < -0.002) bad = bad " sum:" $0; p += $NF }
     END { if (n < 5 || bad != "" || p < 99.5 || p > 100.5) { print n, p, bad; exit 1 } }' "$work/prof.err" ||
    fail "--profile rows are not well-formed: $(cat "$work/prof.err")"
checks=$((checks + 1))
grep -q "final: train loss" "$work/prof.out" || fail "training did not finish after --profile"
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --steps 4 --warmup 1 "${fast[@]}" --out "$work/prof2" --profile-steps 2 \
    >/dev/null 2>"$work/prof.err" || fail "--profile-steps run: $(cat "$work/prof.err")"
grep -qF "profile of steps 2..3" "$work/prof.err" && grep -qF "backward passes: 2;" "$work/prof.err" &&
    grep -q "^tfc_linear " "$work/prof.err" || fail "--profile-steps 2: $(cat "$work/prof.err")"
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --steps 3 --warmup 1 "${fast[@]}" --out "$work/prof3" >/dev/null 2>"$work/prof.err"
[ ! -s "$work/prof.err" ] || fail "train without --profile wrote to stderr: $(cat "$work/prof.err")"
expect_fail 2 "--profile takes no value" "$tfcore" train --data "$work/corpus.txt" --profile=yes
expect_fail 2 "--profile-steps needs an integer in [1," "$tfcore" train --data "$work/corpus.txt" --profile-steps 0
expect_fail 2 "--profile-steps needs an integer in [1," "$tfcore" train --data "$work/corpus.txt" --profile-steps x
expect_fail 2 "--profile-steps needs an integer in [1, 100000000], got '(nothing)'" "$tfcore" train --data "$work/corpus.txt" --profile-steps

for f in model.safetensors optimizer.safetensors config.json loss.csv loss.svg; do
    checks=$((checks + 1))
    [ -s "$work/straight/$f" ] || fail "train did not write $f"
done
checks=$((checks + 1))
grep -q '"val_loss"' "$work/straight.jsonl" || fail "no val_loss in the JSON log"
cmp -s "$work/straight/model.safetensors" "$work/resumed/model.safetensors" || fail "final weights differ after resume"

# a checkpoint of another config is refused and left as it was
sum_before=$(md5sum < "$work/straight/model.safetensors")
expect_fail 2 "holds a checkpoint of another config" "$tfcore" train --data "$work/corpus.txt" --preset char-small --out "$work/straight" --resume
expect_fail 2 "holds a checkpoint of another config" "$tfcore" train --data "$work/corpus.txt" --preset char-small --out "$work/straight"
expect_fail 2 "nothing to do" "$tfcore" train --data "$work/corpus.txt" --steps 6 --out "$work/straight" --resume
checks=$((checks + 1))
[ "$sum_before" = "$(md5sum < "$work/straight/model.safetensors")" ] || fail "a refused run changed the checkpoint"

# sampling: reproducible with a seed, greedy works, errors are clear
checks=$((checks + 1))
a=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --top-k 10 --top-p 0.9)
b=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --top-k 10 --top-p 0.9)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "seeded sampling differs: '$a' vs '$b'"
checks=$((checks + 1))
"$tfcore" sample --ckpt "$work/straight" --max-new-tokens 5 --temperature 0 >/dev/null || fail "greedy sampling failed"
expect_fail 2 "no checkpoint in '$work/none'" "$tfcore" sample --ckpt "$work/none"
expect_fail 2 "--top-p must be in (0, 1]" "$tfcore" sample --ckpt "$work/straight" --top-p 0
expect_fail 2 "--temperature needs a number" "$tfcore" sample --ckpt "$work/straight" --temperature -1
expect_fail 2 "--ckpt DIR is required" "$tfcore" sample
printf '\x01\x02' > "$work/odd.txt"
expect_fail 2 "is not in the model's" "$tfcore" sample --ckpt "$work/straight" --prompt "$(cat "$work/odd.txt")"

# batched sampling: one sample per line of --prompts (an empty line starts like no prompt), decoded
# together; sample i is what --prompt of line i alone gives with seed + i
checks=$((checks + 1))
printf 'The \n\nAnd so\n' > "$work/prompts.txt"
# (outputs kept whole, trailing newlines too: a sample may end in one, which $(...) would strip)
"$tfcore" sample --ckpt "$work/straight" --prompts "$work/prompts.txt" --max-new-tokens 20 --seed 3 --top-k 10 \
    >"$work/batch.txt" 2>"$work/err" || fail "sample --prompts failed: $(cat "$work/err")"
"$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --top-k 10 >"$work/s0.txt"
"$tfcore" sample --ckpt "$work/straight" --max-new-tokens 20 --seed 4 --top-k 10 >"$work/s1.txt"
"$tfcore" sample --ckpt "$work/straight" --prompt "And so" --max-new-tokens 20 --seed 5 --top-k 10 >"$work/s2.txt"
batch=$(cat "$work/batch.txt"; echo x)
s0=$(cat "$work/s0.txt"; echo x) s1=$(cat "$work/s1.txt"; echo x) s2=$(cat "$work/s2.txt"; echo x)
[ "$batch" = "${s0%x}---
${s1%x}---
${s2%x}x" ] || fail "sample --prompts: '$batch' is not the three single samples '$s0' / '$s1' / '$s2'"
grep -q "^tfcore sample: 3 samples, 60 tokens in .* tokens/s)$" "$work/err" || fail "sample --prompts printed no speed line: $(cat "$work/err")"
expect_fail 2 "--prompt and --prompts exclude each other" "$tfcore" sample --ckpt "$work/straight" --prompt "a" --prompts "$work/prompts.txt"
expect_fail 1 "cannot read --prompts '$work/none.txt'" "$tfcore" sample --ckpt "$work/straight" --prompts "$work/none.txt"
: > "$work/empty.txt"
expect_fail 2 "holds no line" "$tfcore" sample --ckpt "$work/straight" --prompts "$work/empty.txt"
printf 'The \n\x01\n' > "$work/odd_prompts.txt"
expect_fail 2 "sample (--prompts line 2): " "$tfcore" sample --ckpt "$work/straight" --prompts "$work/odd_prompts.txt"

# speculative sampling: a checkpoint as its own draft accepts every proposal and gives the greedy text;
# a draft of another vocabulary (the default corpus) is refused
checks=$((checks + 1))
plain=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 30 --temperature 0)
spec=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 30 --temperature 0 --draft "$work/straight" --draft-k 3 2>"$work/err") ||
    fail "sample --draft failed: $(cat "$work/err")"
[ "$spec" = "$plain" ] || fail "sample --draft (greedy) '$spec' is not the plain greedy sample '$plain'"
grep -q "^tfcore sample: speculative, k = 3: \([0-9]*\) of \1 drafted tokens accepted (100%), [0-9]* target passes for 30 tokens$" "$work/err" ||
    fail "sample --draft printed no acceptance line: $(cat "$work/err")"
expect_fail 2 "has another vocabulary than --ckpt" "$tfcore" sample --ckpt "$work/straight" --draft "$work/default"
expect_fail 2 "--draft decodes one prompt" "$tfcore" sample --ckpt "$work/straight" --draft "$work/straight" --prompts "$work/prompts.txt"
expect_fail 2 "--draft-k" "$tfcore" sample --ckpt "$work/straight" --draft "$work/straight" --draft-k 0

# eval over non-overlapping windows
checks=$((checks + 1))
"$tfcore" eval --ckpt "$work/straight" --data "$work/corpus.txt" | grep -q "nats/token" || fail "eval printed no loss"
expect_fail 2 "--ckpt DIR and --data FILE are required" "$tfcore" eval --ckpt "$work/straight"

# quantized inference: --quantize int8|int4 [--group-size G] on sample and eval
checks=$((checks + 1))
head -c 3000 "$work/corpus.txt" > "$work/small.txt"
"$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize int4 --group-size 64 > "$work/q.out" || fail "eval --quantize int4 failed"
grep -q "^eval: .*: loss .* nats/token" "$work/q.out" && grep -q "int4 group 64 loss .* nats/token vs f32" "$work/q.out" ||
    fail "eval --quantize did not print the f32 and int4 losses: $(cat "$work/q.out")"
for q in int8 int4; do
    checks=$((checks + 1))
    a=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --quantize $q)
    b=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --quantize $q)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "seeded sampling with --quantize $q differs: '$a' vs '$b'"
done
expect_fail 2 "--quantize needs int8, int4 or none, got 'int2'" "$tfcore" sample --ckpt "$work/straight" --quantize int2
expect_fail 2 "--quantize needs int8, int4 or none, got 'fp8'" "$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize fp8
expect_fail 2 "--group-size needs --quantize int4" "$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --group-size 32
expect_fail 2 "--group-size is for int4" "$tfcore" sample --ckpt "$work/straight" --quantize int8 --group-size 32
expect_fail 2 "tfc_gpt_quantize: group_size is 48" "$tfcore" sample --ckpt "$work/straight" --quantize int4 --group-size 48
expect_fail 2 "--group-size needs an integer" "$tfcore" sample --ckpt "$work/straight" --quantize int4 --group-size x
# the LM head: --quantize-head, alone or with --quantize, --group-size for every int4 part
checks=$((checks + 1))
"$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize int4 --quantize-head int8 --group-size 64 > "$work/q.out" || fail "eval --quantize-head failed"
grep -q "int4 group 64, head int8 loss .* nats/token vs f32" "$work/q.out" || fail "eval --quantize-head did not say what was quantized: $(cat "$work/q.out")"
checks=$((checks + 1))
a=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --quantize-head int4)
b=$("$tfcore" sample --ckpt "$work/straight" --prompt "The " --max-new-tokens 20 --seed 3 --quantize-head int4)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "seeded sampling with --quantize-head int4 differs: '$a' vs '$b'"
expect_fail 2 "--quantize-head needs int8, int4 or none, got 'int2'" "$tfcore" sample --ckpt "$work/straight" --quantize-head int2
expect_fail 2 "--group-size is for int4" "$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize-head int8 --group-size 32
expect_fail 2 "tfc_gpt_quantize_head: group_size is 96" "$tfcore" sample --ckpt "$work/straight" --quantize int8 --quantize-head int4 --group-size 96

# the checkpoint read by an independent PyTorch GPT-2 (HF layout) gives the same loss
if /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
    checks=$((checks + 1))
    head -c 3000 "$work/corpus.txt" > "$work/small.txt"
    ours=$("$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" | sed 's/.*loss \([0-9.]*\) nats.*/\1/')
    ref=$(/usr/bin/python3 "$(dirname "$0")/torch_reference.py" "$work/straight" "$work/small.txt")
    [ -n "$ours" ] && awk -v a="$ours" -v b="$ref" 'BEGIN { exit !(a - b < 2e-4 && b - a < 2e-4) }' || fail "tfcore eval loss '$ours' != PyTorch reading the checkpoint '$ref'"
    # quantized: the same loss as PyTorch on weights quantized by numpy from quant.h's description
    for q in int8 int4:32 int4:64; do
        checks=$((checks + 1))
        ours=$("$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize "${q%%:*}" \
            $([ "$q" != int8 ] && echo --group-size "${q#*:}") | grep " vs f32" | sed 's/.* loss \([0-9.]*\) nats.*/\1/')
        ref=$(/usr/bin/python3 "$(dirname "$0")/torch_reference.py" "$work/straight" "$work/small.txt" "$q")
        [ -n "$ours" ] && awk -v a="$ours" -v b="$ref" 'BEGIN { exit !(a - b < 2e-4 && b - a < 2e-4) }' || fail "tfcore eval --quantize $q loss '$ours' != PyTorch on numpy-quantized weights '$ref'"
    done
    # and with the LM head quantized (alone, and with int4 blocks)
    for q in none:int8 int4:int4; do
        checks=$((checks + 1))
        blocks=${q%%:*} head=${q#*:}
        ours=$("$tfcore" eval --ckpt "$work/straight" --data "$work/small.txt" --quantize "$blocks" --quantize-head "$head" \
            $([ "$q" != none:int8 ] && echo --group-size 32) | grep " vs f32" | sed 's/.* loss \([0-9.]*\) nats.*/\1/')
        ref=$(/usr/bin/python3 "$(dirname "$0")/torch_reference.py" "$work/straight" "$work/small.txt" \
            "$([ "$blocks" = int4 ] && echo int4:32 || echo "$blocks")" "$([ "$head" = int4 ] && echo int4:32 || echo "$head")")
        [ -n "$ours" ] && awk -v a="$ours" -v b="$ref" 'BEGIN { exit !(a - b < 2e-4 && b - a < 2e-4) }' || fail "tfcore eval --quantize $blocks --quantize-head $head loss '$ours' != PyTorch on numpy-quantized weights '$ref'"
    done
else
    echo "skip: PyTorch check (no torch in /usr/bin/python3)"
fi

# tokenizer: decode(encode(text)) == text
checks=$((checks + 1))
"$tfcore" tokenizer train --data "$work/corpus.txt" --vocab 300 --out "$work/tok.tfctok" >/dev/null || fail "tokenizer train"
ids=$("$tfcore" tokenizer encode --tokenizer "$work/tok.tfctok" --text "Hello, tokenizer world!")
# shellcheck disable=SC2086
back=$("$tfcore" tokenizer decode --tokenizer "$work/tok.tfctok" $ids)
[ "$back" = "Hello, tokenizer world!" ] || fail "tokenizer round trip gave '$back' from '$ids'"
expect_fail 2 "unknown subcommand 'split'" "$tfcore" tokenizer split
expect_fail 2 "train needs --data FILE --vocab N --out FILE" "$tfcore" tokenizer train --data "$work/corpus.txt"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
