#!/usr/bin/env bash
# Build the Debian packages from this tree, install them on this machine,
# and use them as a user would: a C program built with
# `pkg-config --cflags --libs tfcore`, `python3 -c "import tfcore"`, the
# Lua module, `tfcore` and `man tfcore` — all from the installed packages,
# nothing from the tree. Then the packages are purged again.
#
#   bash scripts/package-test.sh [--cuda|--no-cuda] [--bindings] [--keep] [--update-symbols]
#
#   --cuda / --no-cuda  build libtfcore1-cuda or not. Default: only when a GPU
#                       is present (nvidia-smi -L) and nvcc is found; the CUDA
#                       module's compile is most of the build time.
#   --bindings          also package the Rust crates and the Lua rock against
#                       the installed library (tests/packaging/bindings.sh installed)
#   --keep              leave the packages installed and the .debs in
#                       build-deb/ (default: purge them, remove the scratch dir)
#   --update-symbols    rewrite debian/libtfcore1.symbols from the library just
#                       built (dpkg-gensymbols: every tfc_* of lib/tfcore.map's
#                       TFCORE_1.0 node, at the version that adds it), after
#                       public functions were added. A symbol that disappears
#                       fails the build (dh_makeshlibs); a new one is a warning.
# Environment: TFC_JOBS (2), TFC_SKIP_PACKAGE=1 skips (exit 77).
#
# The build runs in a copy of the files git knows (git ls-files), with
# DEB_BUILD_OPTIONS="nocheck noddebs parallel=$TFC_JOBS": no tests, no debug-symbol packages. lintian
# must report no errors; its warnings are printed. Timing of each phase is
# printed at the end (docs/PACKAGING.md has a real run).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${TFC_JOBS:-2}"
cuda=auto bindings=0 keep=0 update_symbols=0
for arg in "$@"; do
  case "$arg" in
    --cuda) cuda=yes ;;
    --no-cuda) cuda=no ;;
    --bindings) bindings=1 ;;
    --keep) keep=1 ;;
    --update-symbols) update_symbols=1 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "package-test: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [[ "${TFC_SKIP_PACKAGE:-0}" == 1 ]]; then echo "package-test: TFC_SKIP_PACKAGE=1: skipped"; exit 77; fi

fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
times=()
mark() { times+=("$1 $(($SECONDS - t_phase))s"); t_phase=$SECONDS; }
t_start=$SECONDS t_phase=$SECONDS

[[ "$(id -u)" -eq 0 ]] || command -v sudo >/dev/null || fail "installing the packages needs root or sudo"
as_root=()
[[ "$(id -u)" -eq 0 ]] || as_root=(sudo)

step "setup"
bash "$root/scripts/setup.sh" --for package
mark setup

if [[ "$cuda" == auto ]]; then
  cuda=no
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
    { command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; }; then
    cuda=yes
  fi
fi
profiles=()
[[ "$cuda" == yes ]] || profiles=(pkg.tfcore.nocuda)

version="$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)"
work="$root/build-deb"
rm -rf "$work"
src="$work/tfcore-$version"
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e "$f" || -L "$f" ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | (cd "$src" && tar -xf -)
cleanup() {
  if ((!keep)); then
    installed=()
    for p in "${pkgs[@]:-}"; do
      [[ -n "$p" ]] && dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -q installed && installed+=("$p")
    done
    ((${#installed[@]} == 0)) || "${as_root[@]}" dpkg --purge "${installed[@]}" >/dev/null || true
    rm -rf "$work"
  fi
}
pkgs=()
trap cleanup EXIT

step "dpkg-buildpackage -us -uc -b (cuda: $cuda; DEB_BUILD_PROFILES=${profiles[*]:-})"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck noddebs parallel=$jobs" DEB_BUILD_PROFILES="${profiles[*]:-}" \
  dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 || { tail -n 60 "$work/build.log" >&2; fail "dpkg-buildpackage failed (log: $work/build.log)"; }
if grep -q "^dpkg-gensymbols: warning: some new symbols appeared" "$work/build.log"; then
  echo "  note: libtfcore.so.1 exports symbols debian/libtfcore1.symbols lacks:"
  grep -E "^\+ " "$work/build.log" | sed 's/^/    /' | head -n 40
  echo "  (bash scripts/package-test.sh --update-symbols records them)"
fi
if ((update_symbols)); then
  v="$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)"
  (cd "$src" && dpkg-gensymbols -plibtfcore1 -Pdebian/libtfcore1 -v"$v" -O"$work/new.symbols" >/dev/null) || true
  { echo "libtfcore.so.1 libtfcore1 #MINVER#"; echo "* Build-Depends-Package: libtfcore-dev"
    tail -n +2 "$work/new.symbols" | grep -v '^\*'; } >"$root/debian/libtfcore1.symbols"
  echo "  wrote debian/libtfcore1.symbols ($(grep -c '@TFCORE_' "$root/debian/libtfcore1.symbols") symbols)"
fi
mapfile -t debs < <(ls "$work"/*.deb)
for d in "${debs[@]}"; do
  pkgs+=("$(dpkg-deb -f "$d" Package)")
  echo "  $(basename "$d")  $(du -k "$d" | cut -f1) KiB"
done
want=(libtfcore1 libtfcore1-mpi libtfcore-dev tfcore-tools python3-tfcore lua-tfcore)
[[ "$cuda" == yes ]] && want+=(libtfcore1-cuda)
for p in "${want[@]}"; do
  printf '%s\n' "${pkgs[@]}" | grep -qx "$p" || fail "package $p was not built"
done
mark dpkg-buildpackage

# The tree the packages were built from goes: nothing below can use it (the
# CLI looks for its corpus in the source tree it was built from first).
rm -rf "$src"

step "lintian"
changes="$(ls "$work"/*.changes)"
lrc=0
lintian --fail-on error --tag-display-limit 0 "$changes" >"$work/lintian.raw" 2>&1 || lrc=$?
grep -v "running with root privileges" "$work/lintian.raw" >"$work/lintian.log" || true
if ((lrc != 0)) || grep -q "^E: " "$work/lintian.log"; then
  cat "$work/lintian.log" >&2
  fail "lintian reports errors (exit $lrc)"
fi
if [[ -s "$work/lintian.log" ]]; then sed 's/^/  /' "$work/lintian.log"; else echo "  (nothing)"; fi
mark lintian

step "dpkg -i"
"${as_root[@]}" dpkg -i "${debs[@]}" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "dpkg -i failed"; }
mark install

# Everything below runs away from the tree, with no variable that points into it.
cd "$work"
unset TFCORE_LIBRARY TFCORE_LIB_DIR PYTHONPATH LD_LIBRARY_PATH PKG_CONFIG_PATH LUA_CPATH LUA_PATH TFCORE_DATA
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
libdir="/usr/lib/$multiarch"

step "C: cc consumer.c \$(pkg-config --cflags --libs tfcore)"
[[ "$(pkg-config --variable=pcfiledir tfcore)" == "$libdir/pkgconfig" ]] || fail "pkg-config resolves tfcore.pc elsewhere: $(pkg-config --variable=pcfiledir tfcore)"
cp "$root/tests/consumer/consumer.c" "$work/consumer.c"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer" "$work/consumer.c" $(pkg-config --cflags --libs tfcore) ||
  fail "consumer.c does not build against the installed package"
resolved="$(ldd "$work/consumer" | awk '/libtfcore/ {print $3}')"
# (/lib is /usr/lib on a merged-/usr system: compare the files, not the names)
[[ "$(readlink -f "$resolved")" == "$(readlink -f "$libdir/libtfcore.so.1")" ]] ||
  fail "the consumer resolves libtfcore to '$resolved', not $libdir/libtfcore.so.1"
"$work/consumer" | tail -n 1
echo "  libtfcore -> $resolved"

step "Python: python3 -c 'import tfcore'"
out="$(/usr/bin/python3 -c 'import tfcore, os; print(tfcore.__file__); print(tfcore.library_path); print(float(tfcore.tensor([1.0, 2.0, 3.5]).sum()))')" ||
  fail "import tfcore failed"
echo "$out" | sed 's/^/  /'
[[ "$(sed -n 1p <<<"$out")" == /usr/lib/python3/dist-packages/tfcore/__init__.py ]] || fail "tfcore imported from elsewhere"
[[ "$(sed -n 3p <<<"$out")" == 6.5 ]] || fail "the sum is not 6.5"

step "Lua: require 'tfcore'"
out="$(lua5.4 -e 'local tf = require("tfcore"); print(package.searchpath("tfcore", package.cpath)); print(tf.tensor({1, 2, 3}):sum():item())')" ||
  fail "require 'tfcore' failed"
echo "$out" | sed 's/^/  /'
[[ "$(sed -n 1p <<<"$out")" == "$libdir/lua/5.4/tfcore.so" ]] || fail "the Lua module came from elsewhere"

step "tfcore and man tfcore"
[[ "$(command -v tfcore)" == /usr/bin/tfcore ]] || fail "tfcore is not /usr/bin/tfcore"
man -w tfcore | grep -q "^/usr/share/man/man1/tfcore.1" || fail "man -w tfcore does not find the page"
MANWIDTH=80 man tfcore 2>/dev/null | head -n 3 | sed 's/^/  /'
# The installed corpus is the default data: a short run with no --data.
tfcore train --steps 3 --batch 2 --eval-every 3 --eval-batches 1 --sample-tokens 0 --out "$work/run" --force >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; fail "tfcore train failed"; }
grep -q "^tfcore train: /usr/share/tfcore/tinyshakespeare.txt" "$work/train.log" || fail "tfcore train did not use the installed corpus"
tfcore sample --ckpt "$work/run" --prompt "ROMEO:" --max-new-tokens 20 >/dev/null || fail "tfcore sample failed"
grep "^final:" "$work/train.log" | sed 's/^/  /'
mark use

if ((bindings)); then
  step "bindings against the installed library"
  bash "$root/tests/packaging/bindings.sh" lua installed | tail -n 1
  bash "$root/tests/packaging/bindings.sh" rust installed | tail -n 1
  mark bindings
fi

step "timing: ${times[*]}; total $((SECONDS - t_start))s"
echo "package-test: PASS"
