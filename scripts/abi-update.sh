#!/usr/bin/env bash
# Regenerate the committed ABI baseline abi/libtfcore.abi from build/.
# Run it deliberately, in the same commit that adds public functions (or,
# on an ABI epoch bump, changes them); scripts/abi-check.sh compares
# every build against this file.
#
#   bash scripts/abi-update.sh [BUILDDIR]     (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
builddir="${1:-build}"
bash scripts/configure.sh "$builddir" >/dev/null
ninja -C "$builddir" -j"${TFC_JOBS:-2}" --quiet
mkdir -p abi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
bash scripts/abi-dump.sh "$builddir/lib/libtfcore.so" >"$tmp"
if [[ -f abi/libtfcore.abi ]] && cmp -s "$tmp" abi/libtfcore.abi; then
  echo "abi-update: abi/libtfcore.abi is already up to date"
else
  mv "$tmp" abi/libtfcore.abi
  n="$(grep -c '<elf-symbol ' abi/libtfcore.abi || true)"
  echo "abi-update: wrote abi/libtfcore.abi ($n exported symbols); commit it"
fi
