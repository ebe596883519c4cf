#!/usr/bin/env bash
# tfcore train --data-bin and tfcore data prepare: token files of other tools, written by
# write_token_bins.py from their documented layouts (llm.c shards with the
# 1024-byte header, nanoGPT's headerless u16). The same tokens as shards,
# as one headerless file or split into --data-bin + --val-bin train bit for
# bit like the text they were encoded from; a resumed --data-bin run finds
# its shards in the checkpoint; bad files are one line on stderr, exit 2,
# nothing written. `data prepare` writes nanoGPT's split of a text, each part
# the tokenizer's encoding of it, as u16 or llm.c files train reads back.
#   test_cli_data_bin.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
bins="$src/tests/cli/write_token_bins.py"
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
tok="$work/tok.tfctok"
"$tfcore" tokenizer train --data "$work/corpus.txt" --vocab 300 --out "$tok" >/dev/null || { echo "FAIL: tokenizer train"; exit 1; }
"$tfcore" tokenizer encode --tokenizer "$tok" --data "$work/corpus.txt" >"$work/ids.txt" || { echo "FAIL: encode"; exit 1; }
n=$(wc -w <"$work/ids.txt")
n_val=$((n / 10))
n_train=$((n - n_val))
mkdir -p "$work/llmc" "$work/split"
# three uneven shards; glob order is train_000, 001, 002
a=$((n / 3 + 17)); b=$((n / 5)); c=$((n - a - b))
$py "$bins" llmc "$work/llmc/train" "$work/ids.txt" $a $b $c || fail "writing llm.c shards"
$py "$bins" u16 "$work/train.bin" "$work/ids.txt" || fail "writing train.bin"
# the first 90% as two shards, the last 10% as the val shard
$py "$bins" u16 "$work/split/all.u16" "$work/ids.txt" 0 $n_train
tr ' ' '\n' <"$work/ids.txt" | grep . | head -n $n_train | tr '\n' ' ' >"$work/train_ids.txt"
tr ' ' '\n' <"$work/ids.txt" | grep . | tail -n $n_val | tr '\n' ' ' >"$work/val_ids.txt"
$py "$bins" llmc "$work/split/train" "$work/train_ids.txt" $((n_train / 2)) $((n_train - n_train / 2))
$py "$bins" llmc "$work/split/val" "$work/val_ids.txt" $n_val
rm -f "$work/split/all.u16"

fast=(--steps 4 --warmup 1 --batch 2 --eval-every 2 --eval-batches 2 --sample-tokens 0 --tokenizer "$tok")
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([^,]*\),.*"elapsed_s": [^,}]*\(.*\)}/\1 \2 \3/p' "$1"; }
run() { # run NAME ARGS...: train into $work/NAME, log to $work/NAME.jsonl
    local name="$1"
    shift
    "$tfcore" train "${fast[@]}" --out "$work/$name" --log-json "$work/$name.jsonl" "$@" >"$work/$name.log" 2>&1 ||
        fail "$name: $(cat "$work/$name.log")"
}
same() { # same A B: identical losses and val losses, 4 steps
    checks=$((checks + 1))
    if [ "$(losses "$work/$1.jsonl")" != "$(losses "$work/$2.jsonl")" ] || [ "$(losses "$work/$1.jsonl" | wc -l)" != 4 ]; then
        fail "$1 and $2 differ:"; paste <(losses "$work/$1.jsonl") <(losses "$work/$2.jsonl")
    fi
}

run text --data "$work/corpus.txt"
run llmc --data-bin "$work/llmc/train_*.bin"
same text llmc
grep -q "3 file(s) of llm.c shards" "$work/llmc.log" || fail "llmc: the header does not report 3 llm.c shards: $(cat "$work/llmc.log")"
grep -q "data: $n tokens ($n_train train, $n_val val)" "$work/llmc.log" || fail "llmc: token counts: $(grep data: "$work/llmc.log")"
[ -e "$work/llmc/data.tokens" ] && fail "--data-bin converted the shards into data.tokens"
run nanogpt --data-bin "$work/train.bin"
same text nanogpt
grep -q "1 file(s) of headerless u16" "$work/nanogpt.log" || fail "nanogpt: not read as headerless u16"
run split --data-bin "$work/split/train_*.bin" --val-bin "$work/split/val_*.bin" --data-format llmc
same text split

# resume: 2 steps, then --resume with no data flags finds the shards (and the val shards) in the checkpoint
run split_resumed --data-bin "$work/split/train_*.bin" --val-bin "$work/split/val_*.bin" --stop-after 2
checks=$((checks + 1))
"$tfcore" train --steps 4 --warmup 1 --batch 2 --eval-every 2 --eval-batches 2 --sample-tokens 0 \
    --out "$work/split_resumed" --log-json "$work/split_resumed.jsonl" --resume >"$work/resume.log" 2>&1 ||
    fail "resume: $(cat "$work/resume.log")"
grep -q "val-bin: $work/split/val_\*.bin" "$work/resume.log" || fail "resume did not reuse --val-bin: $(cat "$work/resume.log")"
same text split_resumed

# bad input: one line, exit 2, no output directory
bad="$work/bad"
mkdir -p "$bad"
expect_fail 2 "--data-bin '$bad/none_*.bin' matches no file" "$tfcore" train --data-bin "$bad/none_*.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
expect_fail 2 "--data-bin needs --tokenizer gpt2:DIR or a tokenizer FILE" "$tfcore" train --data-bin "$work/train.bin" --out "$work/o_bad" --steps 1 --sample-tokens 0
expect_fail 2 "--data and --data-bin exclude each other" "$tfcore" train --data "$work/corpus.txt" --data-bin "$work/train.bin"
expect_fail 2 "--data-format must be auto, llmc or u16, got 'npy'" "$tfcore" train --data-bin "$work/train.bin" --data-format npy
expect_fail 2 "--val-bin needs --data-bin" "$tfcore" train --val-bin "$work/train.bin"
$py "$bins" raw "$bad/magic.bin" 20240519 1 3 1 2 3
expect_fail 2 "is not an llm.c data shard: magic 20240519" "$tfcore" train --data-bin "$bad/magic.bin" --data-format llmc --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
head -c 1000 "$work/llmc/train_000.bin" >"$bad/short.bin"
expect_fail 2 "shorter than llm.c's 1024-byte header" "$tfcore" train --data-bin "$bad/short.bin" --data-format llmc --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
$py "$bins" raw "$bad/count.bin" 20240520 1 5000 1 2 3
expect_fail 2 "'$bad/count.bin' claims 5000 tokens of 2 bytes but holds 6 bytes" "$tfcore" train --data-bin "$bad/count.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
$py "$bins" raw "$bad/version.bin" 20240520 2 3 1 2 3
expect_fail 2 "llm.c version 2" "$tfcore" train --data-bin "$bad/version.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
cp "$work/llmc/train_000.bin" "$bad/vocab_000.bin"
$py "$bins" raw "$bad/vocab_001.bin" 20240520 1 4 7 8 300 9
expect_fail 2 "'$bad/vocab_001.bin' token 2 (byte offset 1028) is 300, not below vocab_size 300" "$tfcore" train --data-bin "$bad/vocab_*.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
printf 'abc' >"$bad/odd.bin"
expect_fail 2 "is 3 bytes, an odd length for u16 tokens" "$tfcore" train --data-bin "$bad/odd.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
$py "$bins" u16 "$bad/tiny.bin" "$work/ids.txt" 0 500
expect_fail 2 "too small" "$tfcore" train --data-bin "$bad/tiny.bin" --tokenizer "$tok" --out "$work/o_bad" --steps 1 --sample-tokens 0
[ -e "$work/o_bad" ] && fail "a refused --data-bin run created its output directory"

# tfcore data prepare: nanoGPT's split (the first int(0.9 n) bytes, the rest), each part encoded on its own
checks=$((checks + 1))
$py - "$work/corpus.txt" "$work/part" <<'PYEOF'
import sys
data = open(sys.argv[1], "rb").read()
cut = int(len(data) * 0.9)
open(sys.argv[2] + ".train", "wb").write(data[:cut])
open(sys.argv[2] + ".val", "wb").write(data[cut:])
# the char vocabulary: sorted distinct bytes, as nanoGPT's shakespeare_char (stoi)
stoi = {c: i for i, c in enumerate(sorted(set(data)))}
open(sys.argv[2] + ".chars.train", "w").write(" ".join(str(stoi[c]) for c in data[:cut]))
open(sys.argv[2] + ".chars.val", "w").write(" ".join(str(stoi[c]) for c in data[cut:]))
PYEOF
"$tfcore" tokenizer encode --tokenizer "$tok" --data "$work/part.train" >"$work/part.ids.train"
"$tfcore" tokenizer encode --tokenizer "$tok" --data "$work/part.val" >"$work/part.ids.val"
# compare NAME.bin (u16, or llm.c with a header) with the ids in a text file
same_ids() {
    $py - "$1" "$2" "$3" <<'PYEOF' || fail "$1 does not hold the ids of $2"
import sys
import numpy as np
path, ids_path, kind = sys.argv[1:]
raw = open(path, "rb").read()
if kind == "llmc":
    head = np.frombuffer(raw[:1024], dtype="<i4")
    assert head[0] == 20240520 and head[1] == 1 and head[2] * 2 == len(raw) - 1024 and not head[3:].any(), head[:4]
    raw = raw[1024:]
got = np.frombuffer(raw, dtype="<u2")
want = np.array(open(ids_path).read().split(), dtype=np.int64)
assert len(got) == len(want) and (got == want).all(), (len(got), len(want))
PYEOF
}
"$tfcore" data prepare --tokenizer "$tok" "$work/corpus.txt" "$work/prep" >"$work/prep.log" 2>&1 || fail "prepare: $(cat "$work/prep.log")"
same_ids "$work/prep/train.bin" "$work/part.ids.train" u16
same_ids "$work/prep/val.bin" "$work/part.ids.val" u16
"$tfcore" data prepare --tokenizer "$tok" --format llmc "$work/corpus.txt" "$work/prep_llmc" >"$work/prep.log" 2>&1 ||
    fail "prepare --format llmc: $(cat "$work/prep.log")"
same_ids "$work/prep_llmc/train.bin" "$work/part.ids.train" llmc
same_ids "$work/prep_llmc/val.bin" "$work/part.ids.val" llmc
"$tfcore" data prepare --tokenizer char "$work/corpus.txt" "$work/prep_char" >"$work/prep.log" 2>&1 ||
    fail "prepare --tokenizer char: $(cat "$work/prep.log")"
same_ids "$work/prep_char/train.bin" "$work/part.chars.train" u16
same_ids "$work/prep_char/val.bin" "$work/part.chars.val" u16
# and train reads them back, with the vocabulary prepare wrote
for d in prep prep_llmc prep_char; do
    checks=$((checks + 1))
    v="$work/$d/tokenizer.tfctok"
    [ -e "$v" ] || v="$work/$d/tokenizer.chars"
    "$tfcore" train --data-bin "$work/$d/train.bin" --val-bin "$work/$d/val.bin" --tokenizer "$v" --steps 2 --batch 2 \
        --eval-batches 1 --sample-tokens 20 --out "$work/o_$d" >"$work/$d.log" 2>&1 || fail "train on $d: $(cat "$work/$d.log")"
done
grep -q "vocab 300)" "$work/prep_llmc.log" || fail "prep_llmc: the model's vocabulary is not the tokenizer's 300"
grep -q "1 file(s) of llm.c shards; val-bin: .* 1 file(s) of llm.c shards" "$work/prep_llmc.log" || fail "prep_llmc: not read as llm.c shards"
expect_fail 2 "prepare needs --tokenizer" "$tfcore" data prepare "$work/corpus.txt" "$work/o_prep_bad"
expect_fail 2 "--format must be u16 or llmc, got 'npy'" "$tfcore" data prepare --tokenizer char --format npy "$work/corpus.txt" "$work/o_prep_bad"
expect_fail 2 "cannot read '$work/missing.txt'" "$tfcore" data prepare --tokenizer char "$work/missing.txt" "$work/o_prep_bad"
expect_fail 2 "prepare needs IN.txt and OUT_DIR" "$tfcore" data prepare --tokenizer char "$work/corpus.txt"
expect_fail 2 "unknown subcommand 'convert'" "$tfcore" data convert
[ -e "$work/o_prep_bad" ] && fail "a refused prepare created its output directory"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
