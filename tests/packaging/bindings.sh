#!/usr/bin/env bash
# The bindings package themselves against an installed libtfcore, as their
# users build them (nothing from the build tree but the installed files):
#
#   bash tests/packaging/bindings.sh lua  BUILDDIR   luarocks make of bindings/lua/*.rockspec
#   bash tests/packaging/bindings.sh rust BUILDDIR   cargo package --workspace (both crates
#                                                      built and verified offline), cargo doc,
#                                                      and tfcore-sys's error without a library
#
# BUILDDIR is meson-installed (--destdir) into a scratch folder first; with
# BUILDDIR "installed" the system's libtfcore (the Debian packages,
# scripts/package-test.sh) is used instead. Exit 77 (skip) without luarocks/cargo.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
what="${1:?usage: bindings.sh lua|rust BUILDDIR|installed}"
builddir="${2:?usage: bindings.sh lua|rust BUILDDIR|installed}"
fail() { echo "bindings-$what: FAIL: $*" >&2; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/tfcore-bindpkg.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS

if [[ "$builddir" == installed ]]; then
  pkg-config --exists tfcore || fail "pkg-config finds no tfcore.pc (install libtfcore-dev)"
  incdir="$(pkg-config --variable=includedir tfcore)" libdir="$(pkg-config --variable=libdir tfcore)"
  pc_path=""
else
  meson install -C "$builddir" --destdir "$tmp/root" --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install -C $builddir failed"; }
  pcfile="$(find "$tmp/root" -name tfcore.pc -path '*/pkgconfig/*' | head -n1)"
  [[ -n "$pcfile" ]] || fail "no tfcore.pc installed"
  prefix="$(PKG_CONFIG_PATH="$(dirname "$pcfile")" pkg-config --variable=prefix tfcore)"
  # A .pc in the scratch root, with its prefix moved there, for pkg-config users.
  mkdir -p "$tmp/pc"
  sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pcfile" >"$tmp/pc/tfcore.pc"
  pc_path="$tmp/pc"
  incdir="$(PKG_CONFIG_PATH=$pc_path pkg-config --variable=includedir tfcore)"
  libdir="$(PKG_CONFIG_PATH=$pc_path pkg-config --variable=libdir tfcore)"
fi
[[ -f "$incdir/tfcore/tfcore.h" && -e "$libdir/libtfcore.so" ]] || fail "no tfcore.h/libtfcore.so under $incdir, $libdir"

case "$what" in
lua)
  command -v luarocks >/dev/null || { echo "luarocks not found (scripts/setup.sh --for package); skipped"; exit 77; }
  command -v lua5.4 >/dev/null || { echo "lua5.4 not found; skipped"; exit 77; }
  cp -r "$root/bindings/lua" "$tmp/src" # luarocks make builds in place
  rock="$(cd "$tmp/src" && ls tfcore-*.rockspec)"
  (cd "$tmp/src" && luarocks --lua-version=5.4 make --tree "$tmp/rocks" "$rock" \
    TFCORE_INCDIR="$incdir" TFCORE_LIBDIR="$libdir") >"$tmp/rocks.log" 2>&1 ||
    { cat "$tmp/rocks.log" >&2; fail "luarocks make $rock failed"; }
  so="$(find "$tmp/rocks" -name tfcore.so | head -n1)"
  [[ -n "$so" ]] || fail "luarocks installed no tfcore.so"
  out="$(LD_LIBRARY_PATH="$libdir" LUA_CPATH="$(dirname "$so")/?.so" LUA_PATH="" lua5.4 -e '
    local tf = require("tfcore")
    local t = tf.tensor({ { 1, 2 }, { 3, 4 } })
    print(t:sum():item())')" || fail "require 'tfcore' of the rock failed"
  [[ "$out" == 10* ]] || fail "the rock's tensor sum is '$out', want 10"
  echo "bindings-lua: luarocks make $rock -> ${so#"$tmp/"}; sum = $out; PASS ($((SECONDS - t0))s)"
  ;;
rust)
  cargo="$(command -v cargo || echo "${CARGO_HOME:-$HOME/.cargo}/bin/cargo")"
  [[ -x "$cargo" ]] || { echo "cargo not found; skipped"; exit 77; }
  cp -r "$root/bindings/rust" "$tmp/src"
  rm -rf "$tmp/src/target" "$tmp/src"/*/target
  export CARGO_TARGET_DIR="$tmp/target"
  # Without the library: a build error naming both ways to find it.
  if (cd "$tmp/src" && env -u TFCORE_LIB_DIR PKG_CONFIG_PATH="$tmp/none" PKG_CONFIG_LIBDIR="$tmp/none" \
    "$cargo" build --offline -p tfcore-sys) >"$tmp/nolib.log" 2>&1; then
    fail "tfcore-sys built with no library to find"
  fi
  grep -q "TFCORE_LIB_DIR" "$tmp/nolib.log" && grep -q "pkg-config" "$tmp/nolib.log" ||
    { cat "$tmp/nolib.log" >&2; fail "the error without a library does not name pkg-config and TFCORE_LIB_DIR"; }
  echo "bindings-rust: without a library: $(grep -m1 'tfcore-sys cannot find' "$tmp/nolib.log")"
  # With it, through pkg-config only.
  export PKG_CONFIG_PATH="${pc_path:-${PKG_CONFIG_PATH:-}}"
  unset TFCORE_LIB_DIR
  (cd "$tmp/src" && "$cargo" package --offline --allow-dirty --workspace) >"$tmp/package.log" 2>&1 ||
    { cat "$tmp/package.log" >&2; fail "cargo package --workspace failed"; }
  ls "$tmp/target/package/tfcore-sys-"*.crate "$tmp/target/package/tfcore-"[0-9]*.crate >/dev/null ||
    fail "cargo package made no .crate files"
  grep "Packaged\|Verifying" "$tmp/package.log"
  (cd "$tmp/src" && "$cargo" doc --offline --no-deps --workspace) >"$tmp/doc.log" 2>&1 ||
    { cat "$tmp/doc.log" >&2; fail "cargo doc failed"; }
  [[ -f "$tmp/target/doc/tfcore/index.html" && -f "$tmp/target/doc/tfcore_sys/index.html" ]] || fail "cargo doc wrote no index.html"
  echo "bindings-rust: cargo package (both crates verified) and cargo doc; PASS ($((SECONDS - t0))s)"
  ;;
*) fail "unknown binding '$what' (lua, rust)" ;;
esac
