#!/usr/bin/env bash
# The Llama family from the command line: tfcore train --preset llama-tiny
# (and --arch llama|mistral|qwen2 with --n-kv-head, --mlp-hidden,
# --rope-theta, --sliding-window) on the repo's corpus with a char and a BPE
# vocabulary and a Hugging Face tokenizer.json; the checkpoint's metadata and config.json; --resume bit for
# bit and its refusals; eval equal to an independent PyTorch Llama
# (torch_llama_reference.py) for llama, mistral with a window shorter than
# the block, and qwen2 with its q/k/v biases; greedy sampling, --quantize,
# --dtype bf16, batched (--prompts) and speculative (--draft) decoding;
# --recompute bit for bit; LoRA under PEFT's Llama names (all-linear and the
# default q_proj,v_proj) and its resume; export to a Hugging Face directory
# that eval, sample and train --init-from read as the same model, and the
# refusal of llm.c's format; MFU's FLOPs per token for GQA and SwiGLU;
# bad flags one line on stderr, exit 2, nothing written.
#   test_cli_llama.sh <path to tfcore> <source root>
set -u
tfcore="$1"
src="$2"
py=/usr/bin/python3
# shellcheck source=harness.sh
source "$src/tests/cli/harness.sh"
export XDG_CACHE_HOME="$work/cache" # a measured FMA peak is cached here, not in the user's cache

head -c 200000 "$src/data/tinyshakespeare.txt" >"$work/corpus.txt"
head -c 3000 "$src/data/tinyshakespeare.txt" >"$work/ev.txt"
common=(--data "$work/corpus.txt" --batch 4 --eval-every 10 --eval-batches 1 --sample-tokens 0 --peak-flops 1e12)
have_torch=0
$py -c "import torch, numpy" 2>/dev/null && have_torch=1

# meta DIR KEY: the checkpoint's metadata entry
meta() {
    $py - "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(8 + 10**7)
n = struct.unpack("<Q", raw[:8])[0]
print(json.loads(raw[8:8 + n])["__metadata__"].get(sys.argv[2], "ABSENT"))
PY
}
# loss_of: the f32 loss `tfcore eval` prints
loss_of() { sed -n 's/^eval: .*: loss \([0-9.]*\) nats.*/\1/p' | head -1; }
# the torch reference equals tfcore eval on MODEL (a checkpoint or a Hugging Face directory)
same_as_torch() {
    local what="$1" dir="$2"
    [ "$have_torch" = 1 ] || return 0
    checks=$((checks + 1))
    local ours theirs
    ours=$("$tfcore" eval --ckpt "$dir" --data "$work/ev.txt" | loss_of)
    theirs=$($py "$src/tests/cli/torch_llama_reference.py" "$dir" "$work/ev.txt") || { fail "$what: torch reference failed"; return; }
    [ -n "$ours" ] && [ "$ours" = "$theirs" ] || fail "$what: tfcore eval $ours, PyTorch $theirs"
}

# ---- llama-tiny, char vocabulary: 20 steps ----
"$tfcore" train "${common[@]}" --preset llama-tiny --steps 20 --out "$work/a" --log-json "$work/a.jsonl" >"$work/a.log" 2>&1 ||
    { echo "FAIL: llama-tiny: $(tail -5 "$work/a.log")"; exit 1; }
checks=$((checks + 1))
grep -q "preset llama-tiny (llama: 4 layers, 4 heads, 2 kv heads, 128 dims, MLP 352, rope theta 10000, block 128, untied head, vocab 6[0-9]), [0-9]* parameters" "$work/a.log" ||
    fail "the header does not show llama-tiny's shape: $(head -1 "$work/a.log")"
$py - "$work/a" "$work/a.jsonl" <<'PY' || fail "llama-tiny's checkpoint, config.json or learning"
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__")
want = {"tfc.arch": "llama", "tfc.n_layer": "4", "tfc.n_head": "4", "tfc.n_kv_head": "2", "tfc.n_embd": "128",
        "tfc.mlp_hidden": "352", "tfc.block_size": "128", "tfc.tie_weights": "0", "tfc.sliding_window": "0",
        "tfc.attention_bias": "0", "tfc.mlp_bias": "0", "tfc.rope.type": "0", "train.preset": "llama-tiny"}
bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
assert not bad, bad
assert float(meta["tfc.rope.theta"]) == 10000.0
V = int(meta["tfc.vocab_size"])
shapes = {k: v["shape"] for k, v in h.items()}
assert shapes["model.layers.3.self_attn.k_proj.weight"] == [64, 128], shapes
assert shapes["model.layers.0.mlp.gate_proj.weight"] == [352, 128]
assert shapes["model.layers.0.mlp.down_proj.weight"] == [128, 352]
assert shapes["lm_head.weight"] == [V, 128] and shapes["model.embed_tokens.weight"] == [V, 128]
assert not any(k.startswith("transformer.") or k.endswith(".bias") for k in shapes), shapes
c = json.load(open(d + "/config.json"))
want = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 352, "max_position_embeddings": 128,
        "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False, "vocab_size": V,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
assert not bad, bad
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == 20 and rows[-1]["loss"] < rows[0]["loss"] - 0.5, [r["loss"] for r in rows]
PY

# MFU counts GQA's narrower k/v and SwiGLU's three matrices: 6N + 12LCT, N without the untied embedding
checks=$((checks + 1))
$py - "$work/a.log" "$work/a.jsonl" <<'PY' || fail "llama-tiny's MFU is not 6N + 12LCT of its config"
import json, re, sys
out = open(sys.argv[1]).read()
V = int(re.search(r"vocab (\d+)\), (\d+) parameters", out).group(1))
n = int(re.search(r"vocab (\d+)\), (\d+) parameters", out).group(2))
L, C, Ckv, F, T = 4, 128, 64, 352, 128
by_hand = L * (C * C + 2 * Ckv * C + C * C + 3 * F * C + 2 * C) + C + 2 * V * C
assert n == by_hand, (n, by_hand)
fpt = 6 * (n - V * C) + 12 * L * C * T
assert re.search(re.escape("MFU: %.4g FLOPs per token (6N + 12LCT)" % fpt), out), (fpt, re.findall("MFU: .*", out))
for r in (json.loads(l) for l in open(sys.argv[2])):
    assert abs(r["mfu"] - fpt * r["tokens_per_s"] / 1e12) <= 2e-3 * r["mfu"] + 1e-12, r
PY

same_as_torch "llama-tiny" "$work/a"

# ---- --resume: 10 + 10 steps are the 20 steps, bit for bit; flags that contradict the checkpoint refused ----
"$tfcore" train "${common[@]}" --preset llama-tiny --steps 20 --stop-after 10 --out "$work/b" --log-json "$work/b.jsonl" \
    >/dev/null 2>&1 || fail "llama-tiny to step 10"
"$tfcore" train "${common[@]}" --steps 20 --resume --out "$work/b" --log-json "$work/b.jsonl" >"$work/b.log" 2>&1 ||
    fail "resuming llama-tiny: $(tail -3 "$work/b.log")"
checks=$((checks + 1))
cmp -s <(cut -d, -f1,2 "$work/a.jsonl") <(cut -d, -f1,2 "$work/b.jsonl") ||
    fail "10 + 10 resumed steps differ from 20: $(diff <(cut -d, -f1,2 "$work/a.jsonl") <(cut -d, -f1,2 "$work/b.jsonl") | head -4)"
cmp -s "$work/a/model.safetensors" "$work/b/model.safetensors" || fail "resumed weights differ from 20 straight steps"
grep -q "(llama: 4 layers, 4 heads, 2 kv heads" "$work/b.log" || fail "resume did not take the checkpoint's shape"
b_sum=$(cat "$work/b"/*.safetensors "$work/b/checkpoint.json" | md5sum)
expect_fail 2 "--n-kv-head 4 on --resume: the checkpoint's model has n_kv_head 2" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --n-kv-head 4 --out "$work/b"
expect_fail 2 "--arch mistral on --resume: the checkpoint's model is llama" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --arch mistral --out "$work/b"
expect_fail 2 "--mlp-hidden 256 on --resume: the checkpoint's model has mlp_hidden 352" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --mlp-hidden 256 --out "$work/b"
expect_fail 2 "--rope-theta 500000 on --resume: the checkpoint's model has rope.theta 10000" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --rope-theta 500000 --out "$work/b"
expect_fail 2 "holds a checkpoint of another config (arch llama, this run gpt2)" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --preset char-tiny --out "$work/b"
expect_fail 2 "holds a checkpoint of another config (n_kv_head 2, this run 1)" \
    "$tfcore" train "${common[@]}" --steps 30 --resume --preset llama-tiny --n-kv-head 1 --out "$work/b"
expect_fail 2 "holds a checkpoint of another config (arch llama, this run gpt2)" \
    "$tfcore" train "${common[@]}" --steps 20 --preset char-tiny --out "$work/b"
[ "$(cat "$work/b"/*.safetensors "$work/b/checkpoint.json" | md5sum)" = "$b_sum" ] || fail "a refused resume changed the checkpoint"

# ---- sample and eval ----
checks=$((checks + 1))
g1=$("$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 40 --temperature 0)
g2=$("$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 40 --temperature 0)
[ ${#g1} -gt 40 ] && [ "$g1" = "$g2" ] || fail "greedy sampling of llama-tiny: '$g1' vs '$g2'"
for q in int8 int4; do
    checks=$((checks + 1))
    a=$("$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 30 --seed 3 --quantize $q)
    b=$("$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 30 --seed 3 --quantize $q)
    [ ${#a} -gt 30 ] && [ "$a" = "$b" ] || fail "seeded sampling with --quantize $q: '$a' vs '$b'"
    "$tfcore" eval --ckpt "$work/a" --data "$work/ev.txt" --quantize $q >"$work/q.out" 2>&1 || fail "eval --quantize $q: $(cat "$work/q.out")"
    $py - "$work/q.out" <<'PY' || fail "eval --quantize $q: not near the f32 loss: $(cat "$work/q.out")"
import re, sys
t = open(sys.argv[1]).read()
d = float(re.search(r"loss [\d.]+ nats/token \(perplexity [\d.]+\): ([-+][\d.]+) nats/token vs f32", t).group(1))
assert abs(d) < 0.1, d
PY
done
checks=$((checks + 1))
"$tfcore" eval --ckpt "$work/a" --data "$work/ev.txt" --dtype bf16 >"$work/bf.out" 2>&1 &&
    grep -q "bf16 mixed precision loss .* nats/token vs f32" "$work/bf.out" || fail "eval --dtype bf16: $(cat "$work/bf.out")"
checks=$((checks + 1))
"$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 20 --seed 3 --dtype bf16 >/dev/null 2>"$work/err" ||
    fail "sample --dtype bf16: $(cat "$work/err")"

# batched decoding: sample i of --prompts is what --prompt of line i alone gives with seed + i
checks=$((checks + 1))
printf 'ROMEO:\nJULIET:\nKING\n' >"$work/prompts.txt"
"$tfcore" sample --ckpt "$work/a" --prompts "$work/prompts.txt" --max-new-tokens 20 --seed 3 --top-k 10 \
    >"$work/batch.txt" 2>"$work/err" || fail "sample --prompts: $(cat "$work/err")"
"$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 20 --seed 3 --top-k 10 >"$work/s0.txt"
"$tfcore" sample --ckpt "$work/a" --prompt "JULIET:" --max-new-tokens 20 --seed 4 --top-k 10 >"$work/s1.txt"
"$tfcore" sample --ckpt "$work/a" --prompt "KING" --max-new-tokens 20 --seed 5 --top-k 10 >"$work/s2.txt"
cmp -s "$work/batch.txt" <(cat "$work/s0.txt"; echo ---; cat "$work/s1.txt"; echo ---; cat "$work/s2.txt") ||
    fail "sample --prompts is not the three single samples: $(cat "$work/batch.txt")"

# speculative decoding: a 1-layer llama draft trained on the same text proposes, the target's greedy text comes out
"$tfcore" train "${common[@]}" --preset llama-tiny --n-layer 1 --steps 10 --out "$work/draft" >/dev/null 2>&1 || fail "the draft"
checks=$((checks + 1))
spec=$("$tfcore" sample --ckpt "$work/a" --prompt "ROMEO:" --max-new-tokens 40 --temperature 0 --draft "$work/draft" --draft-k 3 2>"$work/err") ||
    fail "sample --draft: $(cat "$work/err")"
[ "$spec" = "$g1" ] || fail "speculative greedy '$spec' is not the plain greedy '$g1'"
grep -q "^tfcore sample: speculative, k = 3: [0-9]* of [0-9]* drafted tokens accepted" "$work/err" || fail "no acceptance line: $(cat "$work/err")"

# ---- --recompute: the same steps bit for bit; --dtype bf16 trains near f32 and resumes ----
"$tfcore" train "${common[@]}" --preset llama-tiny --steps 20 --stop-after 3 --out "$work/rc" --log-json "$work/rc.jsonl" --recompute >"$work/rc.log" 2>&1 ||
    fail "--recompute: $(tail -3 "$work/rc.log")"
checks=$((checks + 1))
cmp -s <(head -3 "$work/a.jsonl" | cut -d, -f1,2,4) <(cut -d, -f1,2,4 "$work/rc.jsonl") ||
    fail "--recompute changed the losses or norms: $(cut -d, -f1,2,4 "$work/rc.jsonl")"
"$tfcore" train "${common[@]}" --preset llama-tiny --steps 20 --stop-after 10 --dtype bf16 --out "$work/bf" --log-json "$work/bf.jsonl" \
    >"$work/bf.log" 2>&1 || fail "--dtype bf16: $(tail -3 "$work/bf.log")"
"$tfcore" train "${common[@]}" --steps 20 --dtype bf16 --resume --out "$work/bf" --log-json "$work/bf.jsonl" >/dev/null 2>&1 ||
    fail "--dtype bf16 --resume"
checks=$((checks + 1))
$py - "$work/a.jsonl" "$work/bf.jsonl" <<'PY' || fail "bf16 training is not near f32's"
import json, sys
f32 = [json.loads(l)["loss"] for l in open(sys.argv[1])]
bf = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(bf) == 20 and all(abs(a - b) < 0.05 for a, b in zip(f32, bf)), list(zip(f32, bf))
PY
[ "$(meta "$work/bf" tfc.dtype)" = f32 ] || fail "a bf16 run's checkpoint is not f32"

# ---- BPE: a tokenizer trained by tfcore tokenizer ----
"$tfcore" tokenizer train --data "$work/corpus.txt" --vocab 320 --out "$work/tok.tfctok" >/dev/null || fail "tokenizer train"
"$tfcore" train "${common[@]}" --preset llama-tiny --tokenizer "$work/tok.tfctok" --steps 20 --out "$work/bpe" --log-json "$work/bpe.jsonl" \
    >"$work/bpe.log" 2>&1 || fail "llama-tiny with BPE: $(tail -3 "$work/bpe.log")"
checks=$((checks + 1))
grep -q "block 128, untied head, vocab 320)" "$work/bpe.log" || fail "BPE run's vocabulary: $(head -1 "$work/bpe.log")"
[ "$(meta "$work/bpe" tfc.vocab)" = bpe ] && [ -s "$work/bpe/tokenizer.tfctok" ] || fail "the BPE checkpoint lacks its tokenizer"
$py -c "import json,sys; r=[json.loads(l)['loss'] for l in open(sys.argv[1])]; sys.exit(0 if r[-1] < r[0] - 0.5 else 1)" \
    "$work/bpe.jsonl" || fail "llama-tiny with BPE does not learn"
checks=$((checks + 1))
"$tfcore" sample --ckpt "$work/bpe" --prompt "ROMEO:" --max-new-tokens 20 --temperature 0 >"$work/b1.txt"
"$tfcore" sample --ckpt "$work/bpe" --prompt "ROMEO:" --max-new-tokens 20 --temperature 0 >"$work/b2.txt"
[ "$(wc -c <"$work/b1.txt")" -gt 26 ] && cmp -s "$work/b1.txt" "$work/b2.txt" ||
    fail "greedy BPE sampling: '$(cat "$work/b1.txt")' vs '$(cat "$work/b2.txt")'"
"$tfcore" sample --ckpt "$work/bpe" --prompt "ROMEO:" --max-new-tokens 20 --seed 7 >"$work/b3.txt" &&
    [ "$(wc -c <"$work/b3.txt")" -gt 26 ] || fail "seeded BPE sampling: '$(cat "$work/b3.txt")'"
"$tfcore" eval --ckpt "$work/bpe" --data "$work/ev.txt" | grep -q "nats/token" || fail "eval of the BPE llama"
"$tfcore" train "${common[@]}" --steps 25 --resume --out "$work/bpe" >/dev/null 2>&1 || fail "resuming the BPE llama"

# ---- a Hugging Face tokenizer.json (Llama 2's layout: SentencePiece-style BPE with byte fallback; the fuzz
# corpus's seed file) as the vocabulary: checkpoints and exports carry the file itself ----
hfj="$src/tests/fuzz/corpus/tokenizer_json/llama2_layout.json"
"$tfcore" train "${common[@]}" --preset llama-tiny --tokenizer "$hfj" --steps 6 --stop-after 3 --out "$work/hj" \
    >"$work/hj.log" 2>&1 || fail "llama-tiny with a tokenizer.json: $(tail -3 "$work/hj.log")"
"$tfcore" train "${common[@]}" --steps 6 --resume --tokenizer "$hfj" --out "$work/hj" >"$work/hj2.log" 2>&1 ||
    fail "resuming the tokenizer.json run: $(tail -3 "$work/hj2.log")"
checks=$((checks + 1))
[ "$(meta "$work/hj" tfc.vocab)" = hf-json ] && cmp -s "$hfj" "$work/hj/tokenizer.json" ||
    fail "the checkpoint does not carry the tokenizer.json: $(meta "$work/hj" tfc.vocab)"
grep -q "tokenizer.json" "$work/hj/checkpoint.json" || fail "checkpoint.json does not list tokenizer.json"
checks=$((checks + 1))
"$tfcore" sample --ckpt "$work/hj" --prompt "ROMEO:" --max-new-tokens 10 --temperature 0 >"$work/hj1.txt" &&
    "$tfcore" sample --ckpt "$work/hj" --prompt "ROMEO:" --max-new-tokens 10 --temperature 0 >"$work/hj2.txt" &&
    cmp -s "$work/hj1.txt" "$work/hj2.txt" || fail "greedy sampling with the tokenizer.json"
"$tfcore" export --format hf "$work/hj" "$work/hjx" >/dev/null 2>&1 || fail "export of the tokenizer.json run"
checks=$((checks + 1))
cmp -s "$hfj" "$work/hjx/tokenizer.json" && [ ! -e "$work/hjx/vocab.json" ] || fail "the export does not carry the tokenizer.json"
l1=$("$tfcore" eval --ckpt "$work/hj" --data "$work/ev.txt" | loss_of)
l2=$("$tfcore" eval --ckpt "$work/hjx" --data "$work/ev.txt" | loss_of)
[ -n "$l1" ] && [ "$l1" = "$l2" ] || fail "eval: checkpoint $l1, its Hugging Face directory (tokenizer.json) $l2"
"$tfcore" train "${common[@]}" --init-from "$work/hjx" --steps 2 --out "$work/hjf" >/dev/null 2>&1 &&
    cmp -s "$hfj" "$work/hjf/tokenizer.json" || fail "--init-from a directory with a tokenizer.json"

# ---- LoRA under PEFT's Llama names ----
lora=(--lora-rank 4 --lora-alpha 8 --lr 1e-2)
"$tfcore" train "${common[@]}" --init-from "$work/a" "${lora[@]}" --lora-targets all-linear --steps 4 --out "$work/la" \
    >"$work/la.log" 2>&1 || fail "LoRA all-linear: $(tail -3 "$work/la.log")"
checks=$((checks + 1))
# rank 4: 4·(in + out) a module, q 4·256, k and v 4·192, o 4·256, gate, up and down 4·480: 9344 a layer
grep -q "lora: rank 4, alpha 8 (scale 2), targets all-linear: 37376 trainable parameters in 56 tensors" "$work/la.log" ||
    fail "LoRA summary: $(grep lora: "$work/la.log")"
$py - "$work/la" <<'PY' || fail "the adapters are not PEFT's Llama ones"
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/adapter_model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__")
want = {}
dims = {"self_attn.q_proj": (128, 128), "self_attn.k_proj": (128, 64), "self_attn.v_proj": (128, 64),
        "self_attn.o_proj": (128, 128), "mlp.gate_proj": (128, 352), "mlp.up_proj": (128, 352),
        "mlp.down_proj": (352, 128)}
for l in range(4):
    for mod, (i, o) in dims.items():
        p = "base_model.model.model.layers.%d.%s." % (l, mod)
        want[p + "lora_A.weight"] = [4, i]
        want[p + "lora_B.weight"] = [o, 4]
got = {k: v["shape"] for k, v in h.items()}
assert got == want, sorted(set(got) ^ set(want))[:6]
assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in got
assert meta["tfc.arch"] == "llama" and meta["tfc.n_kv_head"] == "2", meta
c = json.load(open(d + "/adapter_config.json"))
assert c["peft_type"] == "LORA" and c["r"] == 4 and c["lora_alpha"] == 8 and c["fan_in_fan_out"] is False, c
assert c["target_modules"] in ("all-linear", ["all-linear"]), c["target_modules"]
PY
# the default targets are PEFT's for llama: q_proj, v_proj
"$tfcore" train "${common[@]}" --init-from "$work/a" "${lora[@]}" --steps 4 --stop-after 2 --out "$work/ld" \
    >"$work/ld.log" 2>&1 || fail "LoRA default targets: $(tail -3 "$work/ld.log")"
checks=$((checks + 1))
grep -q "targets q_proj,v_proj: 7168 trainable parameters in 16 tensors" "$work/ld.log" || fail "LoRA default targets: $(grep lora: "$work/ld.log")"
$py -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if sorted(c['target_modules'])==['q_proj','v_proj'] else 1)" \
    "$work/ld/adapter_config.json" || fail "the default targets' adapter_config.json: $(cat "$work/ld/adapter_config.json")"
"$tfcore" train "${common[@]}" --steps 4 --lr 1e-2 --resume --out "$work/ld" >"$work/ld2.log" 2>&1 || fail "LoRA resume: $(tail -3 "$work/ld2.log")"
"$tfcore" train "${common[@]}" --init-from "$work/a" "${lora[@]}" --steps 4 --out "$work/ld4" >/dev/null 2>&1 || fail "LoRA 4 steps"
checks=$((checks + 1))
cmp -s "$work/ld/adapter_model.safetensors" "$work/ld4/adapter_model.safetensors" || fail "LoRA 2 + 2 resumed steps differ from 4"
checks=$((checks + 1))
l_lora=$("$tfcore" eval --ckpt "$work/la" --data "$work/ev.txt" | loss_of)
l_with=$("$tfcore" eval --ckpt "$work/a" --lora "$work/la" --data "$work/ev.txt" | loss_of)
"$tfcore" lora merge "$work/a" "$work/la" "$work/merged" >/dev/null || fail "lora merge of a llama"
l_merged=$("$tfcore" eval --ckpt "$work/merged" --data "$work/ev.txt" | loss_of)
[ -n "$l_lora" ] && [ "$l_lora" = "$l_with" ] && [ "$l_lora" = "$l_merged" ] ||
    fail "LoRA checkpoint $l_lora, base + --lora $l_with, merged $l_merged"
expect_fail 2 "--lora-*: " "$tfcore" train "${common[@]}" --init-from "$work/a" --lora-rank 4 --lora-targets c_attn --out "$work/lbad"

# ---- export to a Hugging Face directory: the same model to eval, sample and train --init-from ----
"$tfcore" export --format hf "$work/a" "$work/hf" >"$work/exp.log" 2>&1 || fail "export --format hf: $(cat "$work/exp.log")"
checks=$((checks + 1))
grep -q "(llama, 4 layers, 4 heads, 128 dims, block 128, vocab" "$work/exp.log" || fail "export line: $(cat "$work/exp.log")"
$py - "$work/a/config.json" "$work/hf/config.json" <<'PY' || fail "the checkpoint's config.json is not the exported one"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("bos_token_id", "eos_token_id"):
    b.pop(k, None)
assert a == b, {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
PY
checks=$((checks + 1))
l_ckpt=$("$tfcore" eval --ckpt "$work/a" --data "$work/ev.txt" | loss_of)
l_hf=$("$tfcore" eval --ckpt "$work/hf" --data "$work/ev.txt" | loss_of)
[ -n "$l_hf" ] && [ "$l_hf" = "$l_ckpt" ] || fail "eval of the exported directory $l_hf, of the checkpoint $l_ckpt"
same_as_torch "the exported Hugging Face directory" "$work/hf"
checks=$((checks + 1))
g_hf=$("$tfcore" sample --ckpt "$work/hf" --prompt "ROMEO:" --max-new-tokens 40 --temperature 0)
[ "$g_hf" = "$g1" ] || fail "greedy sample of the exported directory '$g_hf', of the checkpoint '$g1'"
"$tfcore" train "${common[@]}" --init-from "$work/hf" --steps 2 --out "$work/fromhf" --log-json "$work/fromhf.jsonl" \
    >"$work/fromhf.log" 2>&1 || fail "--init-from the exported directory: $(tail -3 "$work/fromhf.log")"
checks=$((checks + 1))
grep -q "preset init-from (llama: 4 layers, 4 heads, 2 kv heads, 128 dims, MLP 352" "$work/fromhf.log" ||
    fail "--init-from HF_DIR is not llama-tiny: $(head -1 "$work/fromhf.log")"
[ "$(meta "$work/fromhf" tfc.arch)" = llama ] || fail "--init-from HF_DIR's checkpoint is not a llama"
"$tfcore" train "${common[@]}" --steps 3 --resume --out "$work/fromhf" >/dev/null 2>&1 || fail "resuming an --init-from HF_DIR run"
expect_fail 2 "--format llmc: '$work/a' is a llama model and llm.c's checkpoint format holds GPT-2 only (use --format hf)" \
    "$tfcore" export --format llmc "$work/a" "$work/a.bin"
[ -e "$work/a.bin" ] && fail "a refused llm.c export wrote a file"

# ---- mistral with a window shorter than the block, qwen2 with its biases, MQA ----
"$tfcore" train "${common[@]}" --preset llama-tiny --arch mistral --sliding-window 8 --steps 5 --out "$work/mis" \
    >"$work/mis.log" 2>&1 || fail "mistral: $(tail -3 "$work/mis.log")"
checks=$((checks + 1))
grep -q "(mistral: 4 layers, 4 heads, 2 kv heads, 128 dims, MLP 352, rope theta 10000, window 8, block 128" "$work/mis.log" ||
    fail "mistral header: $(head -1 "$work/mis.log")"
grep -q "FLOPs per token (6N + 12LCW, W the sliding window)" "$work/mis.log" || fail "mistral MFU: $(grep MFU: "$work/mis.log")"
[ "$(meta "$work/mis" tfc.sliding_window)" = 8 ] && [ "$(meta "$work/mis" tfc.arch)" = mistral ] || fail "mistral's metadata"
$py -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if c['model_type']=='mistral' and c['sliding_window']==8 else 1)" \
    "$work/mis/config.json" || fail "mistral's config.json: $(cat "$work/mis/config.json")"
same_as_torch "mistral, window 8" "$work/mis"
"$tfcore" train "${common[@]}" --preset llama-tiny --arch qwen2 --rope-theta 1000000 --steps 5 --out "$work/qw" \
    >"$work/qw.log" 2>&1 || fail "qwen2: $(tail -3 "$work/qw.log")"
checks=$((checks + 1))
$py - "$work/qw" <<'PY' || fail "qwen2's checkpoint"
import json, struct, sys
raw = open(sys.argv[1] + "/model.safetensors", "rb").read()
h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
meta = h.pop("__metadata__")
assert meta["tfc.arch"] == "qwen2" and meta["tfc.attention_bias"] == "1" and float(meta["tfc.rope.theta"]) == 1e6, meta
b = sorted(k for k in h if k.endswith(".bias"))
assert b == sorted("model.layers.%d.self_attn.%s_proj.bias" % (l, m) for l in range(4) for m in "qkv"), b
c = json.load(open(sys.argv[1] + "/config.json"))
assert c["model_type"] == "qwen2" and c["use_sliding_window"] is False and c["rope_theta"] == 1e6, c
PY
same_as_torch "qwen2" "$work/qw"
"$tfcore" train "${common[@]}" --arch llama --n-kv-head 1 --mlp-hidden 256 --n-layer 2 --steps 2 --out "$work/mqa" \
    >"$work/mqa.log" 2>&1 || fail "MQA from char-tiny: $(tail -3 "$work/mqa.log")"
checks=$((checks + 1))
grep -q "preset char-tiny (llama: 2 layers, 4 heads, 1 kv heads, 128 dims, MLP 256" "$work/mqa.log" || fail "MQA header: $(head -1 "$work/mqa.log")"

# ---- --plan ----
checks=$((checks + 1))
"$tfcore" train "${common[@]}" --preset llama-tiny --plan --out "$work/plan" >"$work/plan.out" 2>&1 || fail "--plan: $(cat "$work/plan.out")"
grep -q "KV cache (sampling)" "$work/plan.out" && [ ! -e "$work/plan" ] || fail "--plan of llama-tiny: $(cat "$work/plan.out")"

# ---- flags the model cannot take: one line, exit 2, nothing written ----
expect_fail 2 "--arch must be gpt2, llama, mistral or qwen2, got 'gpt3'" "$tfcore" train "${common[@]}" --arch gpt3 --out "$work/bad"
expect_fail 2 "--n-kv-head 3 does not divide --n-head 4" "$tfcore" train "${common[@]}" --preset llama-tiny --n-kv-head 3 --out "$work/bad"
expect_fail 2 "--sliding-window 8: llama attends to every earlier position" \
    "$tfcore" train "${common[@]}" --preset llama-tiny --sliding-window 8 --out "$work/bad"
expect_fail 2 "--n-kv-head is the Llama family's" "$tfcore" train "${common[@]}" --n-kv-head 2 --out "$work/bad"
expect_fail 2 "--rope-theta is the Llama family's" "$tfcore" train "${common[@]}" --preset llama-tiny --arch gpt2 --rope-theta 1e4 --out "$work/bad"
expect_fail 2 "--no-bias sets GPT-2's biases" "$tfcore" train "${common[@]}" --preset llama-tiny --no-bias --out "$work/bad"
expect_fail 2 "--dropout 0.1 with grouped-query attention" "$tfcore" train "${common[@]}" --preset llama-tiny --dropout 0.1 --out "$work/bad"
expect_fail 2 "--n-embd 120 / --n-head 8 is 15 dims a head" "$tfcore" train "${common[@]}" --preset llama-tiny --n-embd 120 --n-head 8 --out "$work/bad"
expect_fail 2 "--rope-theta needs a number in [1, 1e+15], got '0'" "$tfcore" train "${common[@]}" --preset llama-tiny --rope-theta 0 --out "$work/bad"
expect_fail 2 "do not combine with --init-from" "$tfcore" train "${common[@]}" --init-from "$work/a" --n-kv-head 4 --out "$work/bad"
[ -e "$work/bad" ] && fail "a refused run created its output directory"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
