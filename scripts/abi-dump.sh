#!/usr/bin/env bash
# Print the ABI of a built libtfcore.so as abigail XML (abidw), reduced to
# what callers see and normalised so that the same sources give the same
# bytes whatever the clone path or build dir:
#  - only types from include/tfcore (private structs stay opaque),
#  - no undefined symbols, DT_NEEDED, locations, corpus or comp-dir paths,
#  - translation-unit paths made relative to the source root,
#  - hash type ids (stable when unrelated types come and go).
# The library must carry DWARF (-g): run-tests.sh configures build/ with
# -Ddebug=true for this.
#
#   bash scripts/abi-dump.sh [LIBRARY]      (default: build/lib/libtfcore.so)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="${1:-$root/build/lib/libtfcore.so}"
[[ -f "$lib" ]] || { echo "abi-dump: $lib not found (build first: ninja -C build)" >&2; exit 1; }
lib="$(readlink -f "$lib")"
if ! readelf -S -W "$lib" | grep -q '\.debug_info'; then
  echo "abi-dump: $lib has no debug info; reconfigure with: meson configure $(dirname "$(dirname "$lib")") -Ddebug=true" >&2
  exit 1
fi
# The compiler saw sources as <path from build dir to source root>/lib/...;
# the build dir is the one holding lib/libtfcore.so.
builddir="$(dirname "$(dirname "$lib")")"
rel="$(/usr/bin/python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$root" "$builddir")"
xml="$(abidw --headers-dir "$root/include/tfcore" --drop-private-types --drop-undefined-syms \
  --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed --no-architecture \
  --type-id-style hash "$lib")"
# Compile units are named "<rel>/lib/x.c" (relative build dirs) or with the
# absolute source root; strip either prefix.
printf '%s\n' "$xml" | sed -e "s#path='$rel/#path='#" -e "s#path='$root/#path='#"
