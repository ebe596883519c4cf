#!/usr/bin/env bash
# Compare the ABI of the built library with the committed baseline
# abi/libtfcore.abi (abigail-tools' abidiff).
#   - removed or changed exported functions/types: FAIL
#   - added functions: pass (note printed; refresh the baseline with
#     scripts/abi-update.sh in the same commit)
#
#   bash scripts/abi-check.sh [BUILDDIR]      (default: build)
#
# abidiff's exit status is a bit field: 1 tool error, 2 usage error,
# 4 ABI change, 8 incompatible ABI change. With --no-added-syms added
# symbols are not reported, so any remaining 4 or 8 is a breaking change.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
builddir="${1:-build}"
baseline="${TFC_ABI_BASELINE:-abi/libtfcore.abi}"
lib="$builddir/lib/libtfcore.so"

[[ -f "$baseline" ]] || { echo "abi-check: FAIL: no baseline $baseline (create it: bash scripts/abi-update.sh)"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash scripts/abi-dump.sh "$lib" >"$tmp/current.abi" || { echo "abi-check: FAIL: could not dump the ABI of $lib"; exit 1; }

abidiff --no-added-syms "$baseline" "$tmp/current.abi" >"$tmp/breaking.txt" 2>&1
rc=$?
if (( rc & 3 )); then
  cat "$tmp/breaking.txt"
  echo "abi-check: FAIL: abidiff itself failed (exit $rc)"
  exit 1
fi
if (( rc & 12 )); then
  sed 's/^/  | /' "$tmp/breaking.txt"
  kind="ABI change"; (( rc & 8 )) && kind="INCOMPATIBLE ABI change"
  cat <<MSG
abi-check: FAIL: $kind against $baseline (abidiff exit $rc).
  Exported functions may be added, never removed or changed (docs/ARCHITECTURE.md,
  "ABI rules"): keep the old function and add a new one (e.g. tfc_foo_v2).
  Only if this break is deliberate (a new ABI epoch), regenerate the baseline:
    bash scripts/abi-update.sh
MSG
  exit 1
fi

# Compatible. Report additions so the baseline gets refreshed with them.
abidiff "$baseline" "$tmp/current.abi" >"$tmp/all.txt" 2>&1
added="$(grep -oE "^  \[A\] '[^']*'" "$tmp/all.txt" | sed "s/^  \[A\] //" | tr '\n' ' ')"
nsyms="$(grep -c '<elf-symbol ' "$tmp/current.abi" || true)"
if [[ -n "$added" ]]; then
  echo "abi-check: PASS ($nsyms exported symbols); added since the baseline: $added"
  echo "abi-check: note: refresh the baseline with 'bash scripts/abi-update.sh' in the commit that adds them"
elif cmp -s "$baseline" "$tmp/current.abi"; then
  echo "abi-check: PASS ($nsyms exported symbols, identical to $baseline)"
else
  echo "abi-check: PASS ($nsyms exported symbols; only harmless differences from $baseline, e.g. appended enumerators)"
fi
