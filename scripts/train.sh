#!/usr/bin/env bash
# The main job: set up, build, run.
#
#   bash scripts/train.sh
#
# Builds the library and the `tfcore` CLI, then trains the char-tiny GPT
# (4 layers, 4 heads, 128 dims, 0.8M parameters) on tinyshakespeare for a
# few minutes and prints a sample. Knobs (environment):
#   TFC_STEPS (2000)  TFC_BATCH (16)  TFC_OUT (out/char-tiny)  TFCORE_DATA (corpus)
#   TFC_CLI_ONLY=1 (configure without tests/bindings/CUDA, build only the CLI)
# Training continues where it stopped with:
#   build/tools/tfcore train --out out/char-tiny --resume --steps 500
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${TFC_JOBS:-2}"

# TFC_CLI_ONLY=1 (tests/standalone/copy_tree.sh): configure without the tests,
# the bindings and CUDA, and build only the CLI, for a quick first run.
cfg=() targets=()
if [[ "${TFC_CLI_ONLY:-0}" == 1 ]]; then
  cfg=(-Dtests=false -Dbindings=false -Dcuda=disabled)
  targets=(tools/tfcore)
fi

bash scripts/setup.sh --for build
bash scripts/configure.sh build "${cfg[@]}" >/dev/null
ninja -C build -j"$jobs" --quiet "${targets[@]}"

# The corpus ships with the project (data/README.md); $TFCORE_DATA overrides it.
data="${TFCORE_DATA:-data/tinyshakespeare.txt}"

out="${TFC_OUT:-out/char-tiny}"
echo "== training char-tiny on $data"
build/tools/tfcore train --data "$data" --preset char-tiny --steps "${TFC_STEPS:-2000}" --batch "${TFC_BATCH:-16}" \
  --eval-every 100 --out "$out" --log-json "$out.jsonl" --force --sample-tokens 0

echo "== sampling from $out"
build/tools/tfcore sample --ckpt "$out" --prompt "ROMEO:" --max-new-tokens 300 --temperature 0.8 --top-k 40 --seed 7
