#!/bin/sh
# The GPU device check: run with no arguments on a machine with an NVIDIA
# GPU. It configures and builds libtfcore with -Dcuda=enabled in its own
# build dir (build-device-check/, sm_90 + the archs of the local GPU only,
# to keep the compile short), runs the CUDA test suite (every kernel
# against CPU loops), then the GPU benchmarks, and writes a summary to
# $OUT/device-check-summary.txt (or ./device-check-summary.txt).
# Each stage has its own time limit so the whole run stays under 8 minutes.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD="$ROOT/build-device-check"
LOGS="$ROOT/build-device-check-logs"
SUMMARY="${OUT:-$PWD}/device-check-summary.txt"
mkdir -p "$(dirname "$SUMMARY")" "$LOGS"
START=$(date +%s)
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
stage() { say ""; say "== $1 ($(($(date +%s) - START)) s elapsed)"; }
status=0

say "libtfcore CUDA device check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
stage "GPU"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
    CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
else
    say "nvidia-smi not found"
    CAP=""
fi
ARCHS=90
case "$CAP" in ""|90) ;; *) ARCHS="$CAP;90" ;; esac
say "nvcc: $(nvcc --version 2>/dev/null | tail -1)"

stage "configure + build (gpu_archs=$ARCHS)"
JOBS=$(nproc 2>/dev/null || echo 4)
if [ -d "$BUILD" ]; then
    meson configure "$BUILD" -Dcuda=enabled "-Dgpu_archs=$ARCHS" >/dev/null 2>&1 ||
        rm -rf "$BUILD"
fi
if [ ! -d "$BUILD" ]; then
    timeout 120 meson setup "$BUILD" "$ROOT" -Dcuda=enabled "-Dgpu_archs=$ARCHS" -Dbindings=false \
        >"$LOGS/setup.log" 2>&1 || { say "meson setup FAILED:"; tail -30 "$LOGS/setup.log" | tee -a "$SUMMARY"; exit 1; }
fi
T0=$(date +%s)
if ! timeout 300 ninja -C "$BUILD" -j"$JOBS" >"$LOGS/build.log" 2>&1; then
    say "build FAILED:"
    grep -E "error|FAILED" "$LOGS/build.log" | head -30 | tee -a "$SUMMARY"
    exit 1
fi
say "build ok in $(($(date +%s) - T0)) s"

stage "CUDA tests"
timeout 180 meson test -C "$BUILD" --suite cuda --print-errorlogs --no-rebuild >"$LOGS/test.log" 2>&1
rc=$?
grep -E "^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout):" "$LOGS/test.log" | tee -a "$SUMMARY"
# Per-test lines of the kernel tests: failures with their worst element, and the totals.
grep -E "FAIL|checks, |no CUDA device|^CUDA: " "$BUILD/meson-logs/testlog.txt" 2>/dev/null | head -80 | tee -a "$SUMMARY"
[ $rc -eq 0 ] || status=1
# A device check whose kernel tests were skipped has checked nothing.
if grep -qE "cuda +SKIP" "$LOGS/test.log"; then
    say "kernel tests SKIPPED: no usable GPU, so nothing was checked"
    status=1
fi

stage "benchmarks"
if [ -x "$BUILD/cuda/cuda_bench" ]; then
    timeout 150 "$BUILD/cuda/cuda_bench" "$BUILD/cuda/libtfcore-cuda.so" >"$LOGS/bench.log" 2>&1
    brc=$?
    tee -a "$SUMMARY" <"$LOGS/bench.log"
    [ $brc -eq 0 ] || { say "cuda_bench exit status $brc"; status=1; }
else
    say "cuda_bench was not built (CUDA runtime library not found by meson)"
    status=1
fi

stage "done: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $(($(date +%s) - START)) s"
say "summary: $SUMMARY"
exit $status
