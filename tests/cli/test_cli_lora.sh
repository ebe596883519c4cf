#!/usr/bin/env bash
# LoRA from the command line: tfcore train --lora-* on a base checkpoint
# leaves the base's files alone and writes PEFT-named adapters + their
# optimizer state; N steps, then --resume to M, give the files M straight
# steps give, bit for bit; eval on the LoRA checkpoint, on the base with
# --lora, and on `tfcore lora merge`'s output agree; bad flags and files are
# one line on stderr, exit 2, with the existing output left as it was.
#   test_cli_lora.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"

head -c 60000 "$src/data/tinyshakespeare.txt" >"$work/corpus.txt"
head -c 6000 "$src/data/tinyshakespeare.txt" >"$work/ev.txt"
fast=(--data "$work/corpus.txt" --batch 2 --eval-every 100 --eval-batches 1 --sample-tokens 0)
"$tfcore" train "${fast[@]}" --steps 3 --out "$work/base" >"$work/base.log" 2>&1 || { echo "FAIL: base: $(cat "$work/base.log")"; exit 1; }
base_sum=$(cat "$work/base"/* | md5sum)

lora=(--lora-rank 4 --lora-alpha 8 --lora-targets c_attn,c_proj --lora-base "$work/base" --lr 1e-2)
# the schedule is a flag, not part of the checkpoint: a resume passes the same --lr
"$tfcore" train "${fast[@]}" --steps 6 "${lora[@]}" --out "$work/full" >"$work/full.log" 2>&1 || fail "lora train: $(cat "$work/full.log")"
grep -q "lora: rank 4, alpha 8 (scale 2), targets c_attn,c_proj: 22528 trainable parameters in 24 tensors" "$work/full.log" ||
    fail "lora summary line: $(grep lora: "$work/full.log")"
"$tfcore" train "${fast[@]}" --steps 6 --stop-after 3 "${lora[@]}" --out "$work/res" >/dev/null 2>&1 || fail "lora train to 3"
"$tfcore" train "${fast[@]}" --steps 6 --lr 1e-2 --resume --out "$work/res" >"$work/res.log" 2>&1 || fail "lora resume: $(cat "$work/res.log")"
for f in adapter_model.safetensors optimizer.safetensors adapter_config.json; do
    cmp -s "$work/full/$f" "$work/res/$f" || fail "3 steps + --resume to 6 differ from 6 steps in $f"
done
[ -e "$work/full/model.safetensors" ] && fail "a LoRA run wrote the base weights into --out"
[ "$(cat "$work/base"/* | md5sum)" = "$base_sum" ] || fail "a LoRA run changed the base checkpoint's files"

# PEFT's names, shapes and adapter_config.json
$py - "$work/full" <<'EOF' || fail "adapter files are not PEFT's"
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/adapter_model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__")
want = {}
for l in range(4):
    for mod, (i, o) in (("attn.c_attn", (128, 384)), ("attn.c_proj", (128, 128)), ("mlp.c_proj", (512, 128))):
        p = "base_model.model.transformer.h.%d.%s." % (l, mod)
        want[p + "lora_A.weight"] = [4, i]
        want[p + "lora_B.weight"] = [o, 4]
got = {k: v["shape"] for k, v in h.items()}
assert got == want, sorted(set(got) ^ set(want))
assert all(v["dtype"] == "F32" for v in h.values())
assert meta["format"] == "pt" and meta["lora.base"].endswith("/base"), meta
c = json.load(open(d + "/adapter_config.json"))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8 and c["fan_in_fan_out"] is True, c
assert c["target_modules"] == ["c_attn", "c_proj"] and c["base_model_name_or_path"].endswith("/base"), c
EOF

# the same adapted model three ways; the base alone differs
ev() { "$tfcore" eval --data "$work/ev.txt" "$@" 2>&1 | sed -n 's/.*loss \([0-9.]*\) nats.*/\1/p'; }
l_ckpt=$(ev --ckpt "$work/full")
l_flag=$(ev --ckpt "$work/base" --lora "$work/full/adapter_model.safetensors")
"$tfcore" lora merge "$work/base" "$work/full" "$work/merged" >"$work/merge.log" 2>&1 || fail "merge: $(cat "$work/merge.log")"
l_merged=$(ev --ckpt "$work/merged")
l_base=$(ev --ckpt "$work/base")
checks=$((checks + 1))
if [ -z "$l_ckpt" ] || [ "$l_ckpt" != "$l_flag" ] || [ "$l_ckpt" != "$l_merged" ]; then
    fail "eval of the adapted model: checkpoint $l_ckpt, --lora $l_flag, merged $l_merged"
fi
[ "$l_ckpt" = "$l_base" ] && fail "the adapters did not change the loss ($l_base)"
"$tfcore" sample --ckpt "$work/base" --lora "$work/full" --max-new-tokens 20 --temperature 0 >"$work/s1" 2>&1 || fail "sample --lora"
"$tfcore" sample --ckpt "$work/merged" --max-new-tokens 20 --temperature 0 >"$work/s2" 2>&1 || fail "sample merged"
cmp -s "$work/s1" "$work/s2" || fail "greedy text of base --lora and the merged model differ"

# bad flags: one line, exit 2, the existing LoRA checkpoint untouched
full_sum=$(cat "$work/full"/* | md5sum)
expect_fail 2 "cfg->targets item 'q_proj' matches no Linear layer" \
    "$tfcore" train "${fast[@]}" --steps 6 --lora-rank 4 --lora-targets c_attn,q_proj --lora-base "$work/base" --out "$work/full"
expect_fail 2 "cfg->rank is 200, need 1 .. 128" \
    "$tfcore" train "${fast[@]}" --steps 6 --lora-rank 200 --lora-base "$work/base" --out "$work/full"
expect_fail 2 "--lora-rank" "$tfcore" train "${fast[@]}" --lora-rank 0 --lora-base "$work/base" --out "$work/full"
expect_fail 2 "--lora-rank needs the base model" "$tfcore" train "${fast[@]}" --lora-rank 4 --out "$work/full"
expect_fail 2 "need --lora-rank R" "$tfcore" train "${fast[@]}" --lora-alpha 4 --out "$work/full"
expect_fail 2 "drop --lora-rank" "$tfcore" train "${fast[@]}" --steps 9 --resume --lora-rank 8 --out "$work/full"
expect_fail 2 "holds LoRA adapters itself" "$tfcore" train "${fast[@]}" --lora-rank 2 --lora-base "$work/full" --out "$work/x"
[ "$(cat "$work/full"/* | md5sum)" = "$full_sum" ] || fail "a refused run changed the LoRA checkpoint"

# bad adapter files for eval, sample and merge; merge leaves an existing OUT as it was
head -c 3000 "$work/full/adapter_model.safetensors" >"$work/cut.safetensors"
$py - "$work/wide.safetensors" <<'EOF'
import json, struct, sys
names = {"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight": [4, 64],
         "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight": [192, 4]}
hdr, off = {"__metadata__": {"tfc.lora.alpha": "8"}}, 0
for k, s in names.items():
    n = s[0] * s[1] * 4
    hdr[k] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * off)
EOF
expect_fail 2 "tfc_gpt_load_lora" "$tfcore" eval --ckpt "$work/base" --data "$work/ev.txt" --lora "$work/cut.safetensors"
expect_fail 2 "lora_A.weight is [4,64], the model needs [r, 128]" \
    "$tfcore" eval --ckpt "$work/base" --data "$work/ev.txt" --lora "$work/wide.safetensors"
expect_fail 2 "LoRA adapters '$work/nothing'" "$tfcore" sample --ckpt "$work/base" --lora "$work/nothing"
merged_sum=$(cat "$work/merged"/* | md5sum)
expect_fail 2 "adapters '$work/wide.safetensors'" "$tfcore" lora merge "$work/base" "$work/wide.safetensors" "$work/merged"
expect_fail 2 "merge takes BASE_DIR ADAPTER OUT_DIR" "$tfcore" lora merge "$work/base" "$work/full"
expect_fail 2 "unknown subcommand 'split'" "$tfcore" lora split
[ "$(cat "$work/merged"/* | md5sum)" = "$merged_sum" ] || fail "a refused merge changed its OUT_DIR"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
