#!/usr/bin/env bash
# Configure a build dir with the project's canonical options, or bring an
# existing one to them (reconfiguring only when an option differs):
#
#   bash scripts/configure.sh build        release, -g (ABI check needs DWARF), cuda=auto
#   bash scripts/configure.sh build-asan   ASan+UBSan, debugoptimized, cuda=disabled
#   bash scripts/configure.sh build-fuzz   clang, libFuzzer targets + ASan+UBSan (docs/FUZZING.md)
#
# A dir whose name contains "asan" gets the sanitizer options, one whose
# name contains "fuzz" the fuzzing options (and CC=clang when it is set up). Extra -D
# options after the dir are added (e.g. -Dblas=disabled).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dir="${1:?usage: configure.sh BUILDDIR [-Dopt=value...]}"
shift
# shellcheck disable=SC2054  # the comma is meson's list syntax
if [[ "$(basename "$dir")" == *fuzz* ]]; then
  # One thread (no OpenMP) keeps runs reproducible; tests, bindings off: only the targets matter here.
  opts=(-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
    -Dfuzz=true -Dopenmp=disabled -Dtests=false -Dbindings=false)
  export CC="${CC:-clang}"
elif [[ "$(basename "$dir")" == *asan* ]]; then
  opts=(-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled)
else
  opts=(-Dbuildtype=release -Ddebug=true -Dcuda=auto)
fi
opts+=("$@")

if [[ ! -f "$dir/build.ninja" ]]; then
  wipe=()
  [[ -f "$dir/meson-private/coredata.dat" ]] && wipe=(--wipe)
  exec meson setup "${wipe[@]}" "$dir" "${opts[@]}"
fi

differ="$(meson introspect "$dir" --buildoptions | /usr/bin/python3 -c '
import json, sys
have = {o["name"]: o["value"] for o in json.load(sys.stdin)}
def norm(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, list): return ",".join(map(str, v))
    return str(v)
for arg in sys.argv[1:]:
    k, v = arg[2:].split("=", 1)
    if k not in have or norm(have[k]) != v: print(k)
' "${opts[@]}")"
if [[ -n "$differ" ]]; then
  echo "configure: reconfiguring $dir ($(echo $differ) differ)"
  # All options at once: buildtype resets debug/optimization, so order matters.
  exec meson configure "$dir" "${opts[@]}"
fi
echo "configure: $dir already configured"
