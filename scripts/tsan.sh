#!/usr/bin/env bash
# ThreadSanitizer over the library's threaded paths, OpenMP included.
#
#   bash scripts/tsan.sh [TEST...]     # default: the tests listed below
#
# Builds build-tsan/ with clang (-fsanitize=thread), LLVM's libomp for
# OpenMP and no OpenBLAS (its pthread pool is not instrumented; the
# library's own blocked GEMM runs instead), then runs each C test with
# Archer (LLVM's OMPT tool that tells TSan about OpenMP's barriers,
# tasks and locks, so parallel regions are checked without false reports).
# A data race, a lock-order inversion or a failing check fails the run.
#
# tests/c/test_threads.c drives every thread-safety statement of the
# public headers from several threads; the others run the OpenMP kernels
# (GEMM, attention, layernorm, softmax, cross-entropy, the optimizer) and
# the threaded tokenizer encoder. Suppressions: tests/tsan/suppressions.txt
# (only races inside libomp itself, which is not instrumented).
# Packages: clang, libomp-dev (scripts/setup.sh --for test installs them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dir=build-tsan
jobs="${TFC_JOBS:-2}"
tests=("$@")
((${#tests[@]})) || tests=(threads kernels ops autograd linear_cross_entropy optim tokenizer gpt)

archer=""
for cand in /usr/lib/llvm-*/lib/libarcher.so; do [[ -f "$cand" ]] && archer="$cand"; done
if ! command -v clang >/dev/null 2>&1 || [[ -z "$archer" ]]; then
  echo "tsan: needs clang and libomp-dev (libarcher.so); run: bash scripts/setup.sh --for test" >&2
  exit 1
fi

opts=(-Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false -Dblas=disabled -Dopenmp=enabled
  -Dcuda=disabled -Dbindings=false)
if [[ ! -f "$dir/build.ninja" ]]; then
  wipe=()
  [[ -f "$dir/meson-private/coredata.dat" ]] && wipe=(--wipe)
  mkdir -p build-logs
  CC=clang meson setup "${wipe[@]}" "$dir" "${opts[@]}" >"build-logs/tsan-setup.log" 2>&1 ||
    { tail -n 40 "build-logs/tsan-setup.log"; exit 1; }
fi
# Only the test programs: libtfcore.so itself links with --no-undefined,
# which a TSan-instrumented shared object cannot satisfy without its runtime.
ninja -C "$dir" -j"$jobs" "${tests[@]/#/tests/c/test_}" >"$dir/tsan-build.log" 2>&1 ||
  { tail -n 40 "$dir/tsan-build.log"; exit 1; }

export OMP_TOOL_LIBRARIES="$archer"
# More OpenMP threads than cores: more interleavings for TSan to see.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppressions=$root/tests/tsan/suppressions.txt"
export TFC_SOURCE_ROOT="$root"
passed=0 failed=0
for t in "${tests[@]}"; do
  log="$dir/tsan-$t.log" t0=$SECONDS
  rc=0
  "./$dir/tests/c/test_$t" >"$log" 2>&1 || rc=$?
  races=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
  if ((rc == 0 && races == 0)); then
    passed=$((passed + 1))
    echo "ok   tsan $t ($((SECONDS - t0))s)"
  else
    failed=$((failed + 1))
    echo "FAIL tsan $t: exit $rc, $races TSan reports; log $log"
    grep -A 30 "WARNING: ThreadSanitizer" "$log" | head -n 120 | sed 's/^/  | /'
    tail -n 5 "$log" | sed 's/^/  | /'
  fi
done
echo "$passed passed, $failed failed"
((failed == 0))
