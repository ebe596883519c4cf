#!/usr/bin/env bash
# Collect what the GPU device check runs into one folder that travels to a
# GPU machine which has no package registry (docs/CUDA.md, "Device check"):
#
#   bash scripts/cuda-bundle.sh [BUILD_DIR] [BUNDLE_DIR]     (build/, cuda-bundle/)
#
# BUILD_DIR must hold the CUDA module (CI's release build/ has it where nvcc
# is found; -Dcuda=enabled makes sure). The bundle:
#   bin/           tfcore, the CUDA test programs, cuda_bench (and the
#                  build-relative programs named in CUDA_BUNDLE_EXTRA)
#   lib/           libtfcore.so.1, libtfcore-cuda.so and every shared library
#                  they need that is not in the minimal base below
#   lib-fallback/  libstdc++ and libgcc_s, used only where the GPU machine
#                  lacks them (its own are usually newer: a bundled older one
#                  first on the path would shadow it for cuBLASLt or NCCL)
#   MANIFEST.txt   files, sizes, sha256, commit, build options, nvcc, the
#                  newest glibc symbol version needed
# Programs find lib/ through LD_LIBRARY_PATH, which tests/cuda/device-check.sh
# sets (it takes precedence over the RUNPATHs the build left pointing into
# BUILD_DIR; no patchelf needed). Left to the GPU machine: glibc, the CUDA
# driver (libcuda), and the CUDA toolkit libraries (libcublasLt, libcudart,
# NCCL); the module links the CUDA runtime statically.
# Exits 1, saying why, when the build lacks the CUDA module or the bundle
# would exceed 64 MiB (the device tool's limit for what travels).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bundle="${2:-$root/cuda-bundle}"
limit=$((64 * 1024 * 1024))
die() {
    echo "cuda-bundle: $*" >&2
    exit 1
}

[[ -f "$build/build.ninja" ]] || die "$build is not a meson build dir (bash scripts/configure.sh build && ninja -C build)"
module="$build/cuda/libtfcore-cuda.so"
[[ -f "$module" ]] ||
    die "$build has no CUDA module ($module): configure with -Dcuda=enabled where nvcc is installed and build it (ninja -C $build cuda/libtfcore-cuda.so)"

# What goes into bin/ (the device check needs all but cuda_bench; without it the benchmarks stage fails).
programs=(tools/tfcore tests/cuda/test_cuda tests/cuda/test_cuda_ops tests/cuda/test_cuda_dist
    tests/cuda/test_cuda_module cuda/cuda_bench)
# More programs (build-relative paths, e.g. another benchmark) with CUDA_BUNDLE_EXTRA="bench/x bench/y".
read -r -a extra <<<"${CUDA_BUNDLE_EXTRA:-}"
programs+=(${extra[@]+"${extra[@]}"})
missing=()
for p in "${programs[@]}"; do [[ -x "$build/$p" ]] || missing+=("$p"); done
((${#missing[@]} == 0)) || die "$build lacks ${missing[*]} (ninja -C $build ${missing[*]})"

# The minimal base every Linux machine has: glibc's libraries. The CUDA driver
# and toolkit libraries are the GPU machine's own (they must match its driver).
is_base() {
    case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
        libresolv.so.* | libutil.so.*) return 0 ;;
    libcuda.so.* | libnvidia-*.so* | libcublas.so.* | libcublasLt.so.* | libcudart.so.* | libnccl.so.*) return 0 ;;
    *) return 1 ;;
    esac
}
is_fallback() { case "$1" in libstdc++.so.* | libgcc_s.so.*) return 0 ;; *) return 1 ;; esac }

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/lib-fallback"
for p in "${programs[@]}"; do cp -L "$build/$p" "$bundle/bin/"; done
# Under its SONAME, which is the name the dynamic loader looks for.
soname="$(readelf -d "$build/lib/libtfcore.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' || true)"
cp -L "$build/lib/libtfcore.so" "$bundle/lib/${soname:-libtfcore.so}"
# libtfcore looks for the module next to itself.
cp -L "$module" "$bundle/lib/libtfcore-cuda.so"

# Every library ldd resolves for the bundled files, outside the base.
unresolved=()
for f in "$bundle"/bin/* "$bundle"/lib/*; do
    while read -r name _ path _; do
        [[ -n "$name" ]] || continue
        if [[ "$path" == "not" ]]; then
            is_base "$name" || unresolved+=("$name (needed by $(basename "$f"))")
            continue
        fi
        is_base "$name" && continue
        [[ -e "$bundle/lib/$name" || -e "$bundle/lib-fallback/$name" ]] && continue
        [[ "$name" == "$soname" ]] && continue
        if is_fallback "$name"; then cp -L "$path" "$bundle/lib-fallback/$name"; else cp -L "$path" "$bundle/lib/$name"; fi
    done < <(LD_LIBRARY_PATH="$bundle/lib" ldd "$f" 2>/dev/null | awk '/=>/ {print $1, $2, $3, $4}')
done
((${#unresolved[@]} == 0)) || die "libraries not found here: ${unresolved[*]}"

# The host-side DWARF of a -g build is most of the size and no use there; the
# symbol tables stay (sanitizer backtraces name functions), and so does the
# device code's -lineinfo, which lives in the fatbinary, not in .debug_*.
stripped=no
if command -v strip >/dev/null 2>&1; then
    for f in "$bundle"/bin/* "$bundle"/lib/*; do chmod u+w "$f" && strip --strip-debug "$f"; done
    stripped="yes (strip --strip-debug)"
fi

# Large third-party libraries (OpenBLAS is 36 MB, 11 MB gzipped) travel
# gzipped: bundle and working tree together must stay under 64 MiB.
# device-check.sh unpacks them outside the bundle before it runs anything.
gzipped=()
for f in "$bundle"/lib/* "$bundle"/lib-fallback/*; do
    case "$(basename "$f")" in libtfcore*) continue ;; esac
    if (($(stat -c %s "$f") > 4 * 1024 * 1024)); then
        gzip "$f"
        gzipped+=("${f#"$bundle"/}")
    fi
done

# The newest glibc symbol version any bundled file needs: the GPU machine's glibc must be at least that.
glibc_need="$(for f in "$bundle"/bin/* "$bundle"/lib/*; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9][0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1 || true)"

total=$(du -sb "$bundle" | cut -f1)
{
    echo "libtfcore CUDA bundle (scripts/cuda-bundle.sh)"
    echo "made: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -sm), $(ldd --version 2>/dev/null | head -1)"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "build dir: $build; host debug info stripped: $stripped"
    echo "gzipped (device-check.sh unpacks them): ${gzipped[*]:-none}"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo '?')"
    echo "needs on the GPU machine: glibc >= ${glibc_need#GLIBC_}, the CUDA driver, libcublasLt (and libcudart for cuda_bench, libnccl.so.2 for test_cuda_dist)"
    echo "build options:"
    meson introspect "$build" --buildoptions 2>/dev/null | /usr/bin/python3 -c '
import json, sys
for o in json.load(sys.stdin):
    if o["name"] in ("buildtype", "debug", "optimization", "cuda", "gpu_archs", "blas", "openmp", "b_sanitize", "b_ndebug"):
        print("  %s=%s" % (o["name"], o["value"]))' || echo "  (meson introspect failed)"
    echo "files (bytes, sha256, path):"
    (cd "$bundle" && find bin lib lib-fallback -type f | sort | while read -r f; do
        printf '  %10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$f"
    done)
    echo "total: $total bytes"
} >"$bundle/MANIFEST.txt"

total=$(du -sb "$bundle" | cut -f1)
if ((total > limit)); then
    die "the bundle is $((total / 1048576)) MiB, over the 64 MiB that may travel: build with -Ddebug=false (or strip) and bundle again"
fi
# What travels is the bundle plus the working tree; say how close that is.
tree=$(git -C "$root" ls-files -z 2>/dev/null | (cd "$root" && du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) || echo 0)
echo "cuda-bundle: $bundle: $(find "$bundle" -type f | wc -l) files, $total bytes ($((total / 1048576)) MiB; limit 64 MiB, with the $((tree / 1048576)) MiB working tree $(((total + tree) / 1048576)) MiB)"
if ((total + tree > limit)); then
    echo "cuda-bundle: warning: bundle + working tree exceed the 64 MiB the device tool carries" >&2
fi
