#!/usr/bin/env bash
# tfcore train's shape flags over a preset (--n-layer --n-head --n-embd
# --block-size --dropout --bias/--no-bias): recorded in config.json and the
# checkpoint's metadata, kept by --resume (which refuses another shape),
# bad values one line on stderr with exit 2; dropout changes the training
# loss, and a resumed dropout run repeats an unbroken one bit for bit.
#   test_cli_train_shape.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --batch 4 --eval-every 100 --eval-batches 1 --sample-tokens 0)
shape=(--preset char-small --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --dropout 0.2 --no-bias)

"$tfcore" train "${common[@]}" "${shape[@]}" --steps 4 --out "$work/a" --log-json "$work/a.jsonl" >"$work/a.out" \
    || fail "training with shape flags"
# config.json and the safetensors metadata carry exactly the flags
$py - "$work/a" <<'PY' || fail "config.json / metadata do not carry the overrides"
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
want = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 16, "bias": False, "dropout": 0.2,
        "resid_pdrop": 0.2, "embd_pdrop": 0.2, "attn_pdrop": 0.2}
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h["__metadata__"]
for k, v in {"tfc.n_layer": "2", "tfc.n_head": "2", "tfc.n_embd": "32", "tfc.block_size": "16", "tfc.bias": "0"}.items():
    if meta.get(k) != v: bad[k] = meta.get(k)
if float(meta.get("tfc.dropout", "nan")) != 0.2: bad["tfc.dropout"] = meta.get("tfc.dropout")
if any(k.endswith(".bias") for k in h if k != "__metadata__"): bad["bias tensors"] = "present"
if bad:
    print(bad); sys.exit(1)
PY
grep -q "(2 layers, 2 heads, 32 dims, block 16," "$work/a.out" || fail "the header does not show the overridden shape"

# --resume without flags keeps the shape and the dropout stream: 2 + 2 steps = 4 steps bit for bit
"$tfcore" train "${common[@]}" "${shape[@]}" --steps 4 --stop-after 2 --out "$work/b" --log-json "$work/b.jsonl" >/dev/null \
    || fail "the first half"
"$tfcore" train "${common[@]}" --steps 4 --resume --out "$work/b" --log-json "$work/b.jsonl" >"$work/b.out" \
    || fail "resuming a shaped dropout run"
grep -q "(2 layers, 2 heads, 32 dims, block 16," "$work/b.out" || fail "resume did not take the checkpoint's shape"
cmp -s <(cut -d, -f1,2 "$work/a.jsonl") <(cut -d, -f1,2 "$work/b.jsonl") \
    || fail "resumed dropout run differs: $(diff <(cut -d, -f1,2 "$work/a.jsonl") <(cut -d, -f1,2 "$work/b.jsonl") | head -4)"

# dropout changes the training loss (the same run at --dropout 0 differs from step 1)
"$tfcore" train "${common[@]}" "${shape[@]}" --dropout 0 --steps 1 --out "$work/c" --log-json "$work/c.jsonl" >/dev/null \
    || fail "--dropout 0"
[ "$(head -1 "$work/a.jsonl" | cut -d, -f2)" != "$(head -1 "$work/c.jsonl" | cut -d, -f2)" ] \
    || fail "--dropout 0.2 trained the same first loss as --dropout 0"

expect_fail 2 "--block-size 32 on --resume: the checkpoint's model has block_size 16" \
    "$tfcore" train "${common[@]}" --steps 8 --resume --block-size 32 --out "$work/b"
expect_fail 2 "--n-embd 64 on --resume" "$tfcore" train "${common[@]}" --steps 8 --resume --n-embd 64 --out "$work/b"
expect_fail 2 "--bias on --resume" "$tfcore" train "${common[@]}" --steps 8 --resume --bias --out "$work/b"
expect_fail 2 "--n-head 3 does not divide --n-embd 32" "$tfcore" train "${common[@]}" --n-embd 32 --n-head 3 --out "$work/d"
expect_fail 2 "--dropout needs a probability in [0, 1), got '1'" "$tfcore" train "${common[@]}" --dropout 1 --out "$work/d"
expect_fail 2 "--dropout needs a probability in [0, 1), got '-0.5'" "$tfcore" train "${common[@]}" --dropout -0.5 --out "$work/d"
expect_fail 2 "--n-layer needs an integer in [1, " "$tfcore" train "${common[@]}" --n-layer 0 --out "$work/d"
expect_fail 2 "--block-size needs an integer in [1, " "$tfcore" train "${common[@]}" --block-size -8 --out "$work/d"
expect_fail 2 "--no-bias takes no value" "$tfcore" train "${common[@]}" --no-bias=1 --out "$work/d"
[ -e "$work/d" ] && fail "a refused run created its output directory"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
