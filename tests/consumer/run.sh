#!/usr/bin/env bash
# Consumer test: install the library the way a packager does (meson install
# --destdir into a temp tree), then build and run tests/consumer/consumer.c
# against it using nothing but pkg-config, as a user's program would.
# Also checks the installed layout: headers, SONAME, symlinks, exports.
#
#   bash tests/consumer/run.sh [BUILDDIR]     (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
builddir="${1:-$root/build}"
[[ "$builddir" = /* ]] || builddir="$root/$builddir"

fail() { echo "consumer: FAIL: $*" >&2; exit 1; }
step() { echo "consumer: $*"; }

[[ -f "$builddir/build.ninja" ]] || fail "$builddir is not a configured meson build dir"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/tfcore-consumer.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
dest="$tmp/root"

step "meson install --destdir $dest"
meson install -C "$builddir" --destdir "$dest" --quiet >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; fail "meson install failed"; }

pcfile="$(find "$dest" -name tfcore.pc -path '*/pkgconfig/*' | head -n1)"
[[ -n "$pcfile" ]] || fail "no pkgconfig/tfcore.pc installed under $dest"
pcdir="$(dirname "$pcfile")"
prefix="$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=prefix tfcore)"
step "found ${pcfile#"$dest"} (prefix $prefix)"

# The .pc file names the final prefix; point it into the destdir tree, and
# refuse to pick up some other tfcore.pc installed on this machine.
export PKG_CONFIG_PATH="$pcdir"
pc=(pkg-config --define-variable=prefix="$dest$prefix")
[[ "$("${pc[@]}" --variable=pcfiledir tfcore)" == "$pcdir" ]] || fail "pkg-config resolved another tfcore.pc"
"${pc[@]}" --exists --print-errors tfcore || fail "pkg-config cannot resolve tfcore (missing Requires?)"
libdir="$("${pc[@]}" --variable=libdir tfcore)"
incdir="$("${pc[@]}" --variable=includedir tfcore)"
[[ -d "$libdir" ]] || fail "libdir $libdir from tfcore.pc does not exist"

# Headers: every public header in the source tree is installed, each one
# compiles on its own, and tfcore.h includes all the others.
[[ -f "$incdir/tfcore/tfcore.h" ]] || fail "tfcore/tfcore.h not installed under $incdir"
for h in "$root"/include/tfcore/*.h; do
  name="$(basename "$h")"
  [[ -f "$incdir/tfcore/$name" ]] || fail "public header include/tfcore/$name is not installed (add it to include/tfcore/meson.build)"
  printf '#include <tfcore/%s>\nint main(void) { return 0; }\n' "$name" >"$tmp/hdr.c"
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$incdir" "$tmp/hdr.c" \
    || fail "installed header tfcore/$name does not compile on its own"
  if [[ "$name" != tfcore.h ]]; then
    grep -Eq "#include [<\"]tfcore/${name//./\\.}[>\"]" "$incdir/tfcore/tfcore.h" \
      || fail "tfcore/tfcore.h does not include tfcore/$name"
  fi
done
step "headers OK: $(cd "$incdir/tfcore" && echo *.h)"

# Library: SONAME, the symlink chain, and only tfc_* symbols exported at TFCORE_*.
so="$libdir/libtfcore.so"
[[ -L "$so" ]] || fail "$so (development symlink) missing"
[[ -e "$libdir/libtfcore.so.1" ]] || fail "libtfcore.so.1 missing in $libdir"
soname="$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
[[ "$soname" == "libtfcore.so.1" ]] || fail "SONAME is '$soname', want libtfcore.so.1"
bad_syms="$(nm -D --defined-only "$so" | awk '$2 != "A" && $3 !~ /^tfc_/ {print $3}')"
[[ -z "$bad_syms" ]] || fail "symbols exported without the tfc_ prefix: $(echo $bad_syms)"
unversioned="$(readelf --dyn-syms -W "$so" | awk '$5 == "GLOBAL" && $7 != "UND" && $8 ~ /^tfc_/ && $8 !~ /@TFCORE_/ {print $8}')"
[[ -z "$unversioned" ]] || fail "exported symbols without a TFCORE_ version node: $(echo $unversioned)"
nexp="$(nm -D --defined-only "$so" | awk '$3 ~ /^tfc_/' | wc -l)"
step "library OK: SONAME $soname, $nexp tfc_* symbols, all versioned"

# Build and run the consumer with pkg-config only.
cflags="$("${pc[@]}" --cflags tfcore)"
libs="$("${pc[@]}" --libs tfcore)"
step "cc \$(pkg-config --cflags --libs tfcore) = $cflags $libs"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer" "$root/tests/consumer/consumer.c" $cflags $libs \
  || fail "consumer.c does not compile/link against the installed library"
resolved="$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/consumer" | awk '/libtfcore/ {print $3}')"
[[ "$resolved" == "$libdir/"* ]] || fail "consumer resolves libtfcore to '$resolved', not the installed copy"
LD_LIBRARY_PATH="$libdir" "$tmp/consumer" || fail "consumer program exited with status $?"
step "PASS"
