#!/bin/sh
# Tokenizer speed, libtfcore against tiktoken (npm, WASM), on the same texts
# in one run: encode MB/s on one thread and on all cores (plus our batch
# encode on one thread, the baseline of its scaling), decode MB/s, and
# training time for vocab 4096 on tinyshakespeare. Results: docs/TOKENIZER.md.
#
# usage: bench/tokenizer_bench.sh [build dir (default: build)]
# needs: node, the reference data (scripts/fetch-tokenizer-data.sh, run here
# when missing), and the tokenizer_bench program (ninja -C <build dir>).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
shakespeare=${TFC_TINYSHAKESPEARE:-$root/data/tinyshakespeare.txt}
[ -x "$build/bench/tokenizer_bench" ] || { echo "build $build/bench/tokenizer_bench first (ninja -C $build)"; exit 1; }
[ -f "$shakespeare" ] || { echo "tinyshakespeare.txt not found at $shakespeare (set TFC_TINYSHAKESPEARE)"; exit 1; }
"$root/scripts/fetch-tokenizer-data.sh" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$root/bench/tokenizer_bench.mjs" make-texts "$shakespeare" "$tmp"
texts="english=$tmp/english.txt multilingual=$tmp/multilingual.txt"
echo "texts: english $(wc -c <"$tmp/english.txt") bytes (tinyshakespeare x5), multilingual $(wc -c <"$tmp/multilingual.txt") bytes"
echo "machine: $(nproc) cores, $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
node "$root/bench/tokenizer_bench.mjs" run "$root/.cache/npm" $texts >"$tmp/tiktoken.txt"
# shellcheck disable=SC2086
"$build/bench/tokenizer_bench" "$root/.cache" "$shakespeare" $texts >"$tmp/tfcore.txt"
awk '
  FNR == NR { if ($1 == "RESULT") ref[$2] = $3; next }
  $1 == "RESULT" { ours[$2] = $3; order[n++] = $2 }
  END {
    printf "%-12s %-13s %-16s %10s %10s %7s\n", "encoding", "text", "metric", "tiktoken", "libtfcore", "ratio"
    for (i = 0; i < n; i++) {
      k = order[i]
      if (k ~ /^train4096/ || k ~ /load_s$/) { extra = extra sprintf("libtfcore %-28s %s s\n", k, ours[k]); continue }
      split(k, p, ".")
      if (p[1] != "gpt2" && p[1] != "cl100k_base") continue
      if (p[3] == "tokens") {
        same = ("tiktoken." k in ref) && ref["tiktoken." k] == ours[k] ? "same" : "DIFFERENT"
        printf "%-12s %-13s %-16s %10s %10s %7s\n", p[1], p[2], "tokens", ref["tiktoken." k], ours[k], same
        continue
      }
      if (p[3] == "") continue
      if (!(("tiktoken." k) in ref)) { # ours only: batch on one thread, the scaling baseline
        printf "%-12s %-13s %-16s %10s %10.2f %7s\n", p[1], p[2], p[3] " MB/s", "-", ours[k], "-"
        continue
      }
      r = ref["tiktoken." k]
      printf "%-12s %-13s %-16s %10.2f %10.2f %6.1fx\n", p[1], p[2], p[3] " MB/s", r, ours[k], (r > 0 ? ours[k] / r : 0)
    }
    printf "%s", extra
  }' "$tmp/tiktoken.txt" "$tmp/tfcore.txt"
