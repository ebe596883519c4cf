#!/usr/bin/env bash
# The long crash-safety run: tests/cli/test_crash_safety.sh with 100 kill -9s (or --kills N).
#   scripts/crash-test.sh [--build DIR] [--kills N] [--seed S]
# DIR defaults to build (bash scripts/configure.sh build && ninja -C build).
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
kills=100
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build="$2"; shift 2 ;;
    --kills) kills="$2"; shift 2 ;;
    --seed) extra+=(--seed "$2"); shift 2 ;;
    *) echo "usage: scripts/crash-test.sh [--build DIR] [--kills N] [--seed S]" >&2; exit 2 ;;
    esac
done
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
[ -x "$build/tools/tfcore" ] || { echo "no $build/tools/tfcore: build first (ninja -C $build)" >&2; exit 2; }
exec bash "$root/tests/cli/test_crash_safety.sh" "$build/tools/tfcore" "$root" --kills "$kills" "${extra[@]}"
