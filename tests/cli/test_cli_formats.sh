#!/usr/bin/env bash
# Other tools' model files in the CLI: a Hugging Face GPT-2 directory and an
# llm.c checkpoint, written by write_model_files.py from a checkpoint of ours
# (from the formats' documentation, not with libtfcore), are read by eval,
# sample and train --init-from; the loss of each equals torch GPT-2's on the
# same tokens, and --init-from's first step has the source model's loss (a
# corpus of one repeated character makes every window of a batch that
# block). tfcore export writes both formats, read back by the same parsers.
# Mismatches are one line on stderr, a non-zero exit, --out untouched.
#   test_cli_formats.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
files="$src/tests/cli/write_model_files.py"
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

head -c 20000 "$src/data/tinyshakespeare.txt" >"$work/text.txt"
"$tfcore" train --data "$work/text.txt" --steps 3 --batch 2 --sample-tokens 0 --out "$work/A" >/dev/null ||
    { echo "FAIL: training the source model"; exit 1; }
# every window of 'a's is the same block: a batch's loss is the model's loss on it
$py -c "print('a' * 3000, end='')" >"$work/aaa.txt"
$py "$files" hf "$work/A" "$work/H" || fail "writing the HF directory"
$py "$files" llmc "$work/A" "$work/L.bin" || fail "writing the llm.c file"
$py "$files" vocab "$work/A" "$work/vocab.txt" || fail "writing the vocabulary line"
ref=$($py "$files" loss "$work/H" "$work/A" "$work/aaa.txt") || fail "torch reference loss"

near() { $py -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 2e-4)" "$1" "$2"; }
eval_loss() { "$tfcore" eval "$@" --data "$work/aaa.txt" | sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p'; }

# eval: our checkpoint, the HF directory, the llm.c file (its vocabulary given) agree with torch
for m in "--ckpt $work/A" "--ckpt $work/H --tokenizer $work/vocab.txt" "--model $work/L.bin --tokenizer $work/vocab.txt"; do
    checks=$((checks + 1))
    # shellcheck disable=SC2086
    l=$(eval_loss $m)
    near "$l" "$ref" || fail "eval $m: loss '$l', torch $ref"
done

# train --init-from: step 1's loss is the source model's; a fresh model's is not
first_loss() { sed -n 's/.*"step": 1, "loss": \([^,]*\),.*/\1/p' "$1"; }
fast=(--data "$work/aaa.txt" --steps 2 --batch 2 --sample-tokens 0 --eval-every 100)
i=0
for m in "$work/A" "$work/H" "$work/L.bin"; do
    i=$((i + 1))
    extra=()
    [ "$m" != "$work/A" ] && extra=(--tokenizer "$work/vocab.txt") # H and L carry no vocabulary
    checks=$((checks + 1))
    "$tfcore" train --init-from "$m" "${extra[@]}" "${fast[@]}" --out "$work/I$i" --log-json "$work/I$i.jl" \
        >/dev/null || { fail "train --init-from $m"; continue; }
    l=$(first_loss "$work/I$i.jl")
    near "$l" "$ref" || fail "train --init-from $m: first loss '$l', the source model's is $ref"
done
"$tfcore" train "${fast[@]}" --tokenizer "$work/vocab.txt" --out "$work/F" --log-json "$work/F.jl" >/dev/null
checks=$((checks + 1))
near "$(first_loss "$work/F.jl")" "$ref" && fail "a fresh model's first loss equals the source model's: the check proves nothing"
# a resumed --init-from run keeps the source's shape
checks=$((checks + 1))
"$tfcore" train --data "$work/aaa.txt" --steps 3 --batch 2 --sample-tokens 0 --out "$work/I2" --resume >/dev/null ||
    fail "resuming an --init-from run"
# sample reads the HF directory (greedy: the same text as from the checkpoint)
checks=$((checks + 1))
a=$("$tfcore" sample --ckpt "$work/A" --prompt "Th" --max-new-tokens 20 --temperature 0)
b=$("$tfcore" sample --model "$work/H" --tokenizer "$work/vocab.txt" --prompt "Th" --max-new-tokens 20 --temperature 0)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "sample from the HF directory: '$b', from the checkpoint: '$a'"

# export: both formats, read back by write_model_files.py's parsers and torch
checks=$((checks + 1))
"$tfcore" export --format hf "$work/A" "$work/E" >/dev/null || fail "export --format hf"
for f in config.json model.safetensors vocab.json merges.txt; do [ -f "$work/E/$f" ] || fail "export hf: no $f"; done
near "$($py "$files" loss "$work/E" "$work/A" "$work/aaa.txt")" "$ref" || fail "export hf: torch loss differs"
checks=$((checks + 1))
"$tfcore" export --format llmc "$work/H" "$work/E.bin" --tokenizer "$work/vocab.txt" >/dev/null || fail "export --format llmc"
near "$($py "$files" loss "$work/E.bin" "$work/A" "$work/aaa.txt")" "$ref" || fail "export llmc: torch loss differs"
checks=$((checks + 1))
near "$(eval_loss --ckpt "$work/E")" "$ref" || fail "eval of the exported HF directory"

# a BPE vocabulary travels as vocab.json + merges.txt (GPT-2's tokenizer files): valid JSON, one merge a
# line after the version line, and read back (as gpt2 files) it encodes the corpus to the same tokens
checks=$((checks + 1))
"$tfcore" train --data "$work/text.txt" --tokenizer bpe:300 --steps 1 --batch 2 --sample-tokens 0 --out "$work/P" >/dev/null &&
    "$tfcore" export --format hf "$work/P" "$work/PH" >/dev/null || fail "BPE checkpoint export"
$py -c "
import json, sys
v = json.load(open(sys.argv[1] + '/vocab.json', encoding='utf-8'))
m = open(sys.argv[1] + '/merges.txt', encoding='utf-8').read().split('\n')
assert len(v) == 300 and sorted(v.values()) == list(range(300)), len(v)
assert m[0] == '#version: 0.2' and all(len(l.split(' ')) == 2 for l in m[1:] if l) and len([l for l in m[1:] if l]) == 300 - 256
" "$work/PH" || fail "vocab.json / merges.txt are not GPT-2's tokenizer files of the vocabulary"
a=$("$tfcore" eval --ckpt "$work/P" --data "$work/text.txt")
b=$("$tfcore" eval --ckpt "$work/PH" --data "$work/text.txt")
[ -n "$a" ] && [ "$a" = "$b" ] ||
    fail "the exported BPE directory evaluates differently"

# mismatches: one line, non-zero, the existing --out untouched
$py "$files" hf "$work/A" "$work/Hbad" --bad-shape
sum_before=$(cat "$work/I1"/* | cksum)
expect_fail 1 "h.1.mlp.c_fc.weight" "$tfcore" train --init-from "$work/Hbad" --tokenizer "$work/vocab.txt" "${fast[@]}" --out "$work/I1"
$py -c "print('char:' + ''.join('%02x' % b for b in range(256)))" >"$work/bytes.txt"
expect_fail 2 "transformer.wte.weight" "$tfcore" train --init-from "$work/L.bin" --tokenizer "$work/bytes.txt" "${fast[@]}" --out "$work/I1"
expect_fail 2 "carries no vocabulary" "$tfcore" train --init-from "$work/L.bin" "${fast[@]}" --out "$work/I1"
expect_fail 2 "excludes --resume" "$tfcore" train --init-from "$work/A" --resume "${fast[@]}" --out "$work/I1"
expect_fail 2 "is not a model" "$tfcore" train --init-from "$work/aaa.txt" "${fast[@]}" --out "$work/I1"
[ "$(cat "$work/I1"/* | cksum)" = "$sum_before" ] || fail "a refused --init-from changed --out"
printf 'x' | dd of="$work/L.bin" bs=1 seek=8 conv=notrunc 2>/dev/null # header field C (int 6) byte 0
expect_fail 1 "tfc_gpt_load_llmc" "$tfcore" eval --model "$work/L.bin" --tokenizer "$work/vocab.txt" --data "$work/aaa.txt"
expect_fail 2 "--format llmc or --format hf" "$tfcore" export "$work/A" "$work/X"
expect_fail 1 "tfc_gpt_save_llmc" "$tfcore" export --format llmc "$work/A" "$work/no/such/dir/x.bin"

echo "$checks checks, $fails failures"
[ "$fails" = 0 ]
