#!/usr/bin/env bash
# The main job: set up, build, run.
#
#   bash scripts/train.sh
#
# Builds the library and the `tfcore` CLI, then trains the char-tiny GPT
# (4 layers, 4 heads, 128 dims, 0.8M parameters) on tinyshakespeare for a
# few minutes and prints a sample. Knobs (environment):
#   TFC_STEPS (2000)  TFC_BATCH (16)  TFC_OUT (out/char-tiny)  TFCORE_DATA (corpus)
# Training continues where it stopped with:
#   build/tools/tfcore train --out out/char-tiny --resume --steps 500
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${TFC_JOBS:-2}"

bash scripts/setup.sh
bash scripts/configure.sh build >/dev/null
ninja -C build -j"$jobs" --quiet

# The corpus: $TFCORE_DATA, ../shared/data/tinyshakespeare.txt, or else the
# English text of Debian's `fortunes` package (never a download, never filler).
data="${TFCORE_DATA:-}"
if [[ -z "$data" ]]; then
  for cand in "$root/../shared/data/tinyshakespeare.txt" /work/shared/data/tinyshakespeare.txt; do
    [[ -f "$cand" ]] && { data="$cand"; break; }
  done
fi
if [[ -z "$data" && ! -d /usr/share/games/fortunes ]]; then
  echo "train.sh: no tinyshakespeare.txt here; installing Debian's fortunes text as the corpus"
  if [[ $(id -u) -eq 0 ]]; then apt-get install -y -q fortunes >/dev/null || true
  else sudo apt-get install -y -q fortunes >/dev/null || true; fi
fi
if [[ -z "$data" && -d /usr/share/games/fortunes ]]; then
  data="$root/build/fortunes.txt"
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -print0 |
    sort -z | xargs -0 cat | grep -v '^%$' > "$data"
fi
if [[ -z "$data" ]]; then
  echo "train.sh: no corpus: put tinyshakespeare.txt at ../shared/data/, set TFCORE_DATA, or apt-get install fortunes" >&2
  exit 2
fi

out="${TFC_OUT:-out/char-tiny}"
echo "== training char-tiny on $data"
build/tools/tfcore train --data "$data" --preset char-tiny --steps "${TFC_STEPS:-2000}" --batch "${TFC_BATCH:-16}" \
  --eval-every 100 --out "$out" --log-json "$out.jsonl" --force --sample-tokens 0

echo "== sampling from $out"
build/tools/tfcore sample --ckpt "$out" --prompt "ROMEO:" --max-new-tokens 300 --temperature 0.8 --top-k 40 --seed 7
