#!/usr/bin/env bash
# The device check rehearsed without a GPU (meson test cuda_device_check_rehearsal):
#
#   bash tests/cuda/device-check-rehearsal.sh BUILD_DIR
#
# 1. scripts/cuda-bundle.sh makes a bundle from BUILD_DIR: at most 64 MiB,
#    a manifest, and every bundled program's and library's libraries resolve
#    (ldd with the bundle's LD_LIBRARY_PATH: no "not found", and libtfcore
#    and OpenBLAS come from the bundle, not from BUILD_DIR or the system).
# 2. The check from that bundle in a stripped environment (env -i,
#    PATH=/usr/bin:/bin) ends "no CUDA device — skipped", exit 77, with its
#    evidence in OUTDIR (at most 8 files, the logs tarred).
# 3. The same check with a stand-in "GPU": the bundle's programs replaced by
#    scripts that answer --list and --exact as the real ones do, one test
#    failing, one hanging, a compute-sanitizer stand-in on PATH: every case
#    runs as its own process, the failure is rerun with CUDA_LAUNCH_BLOCKING=1
#    and under memcheck and the summary names the kernel, the hang is cut at
#    its time limit, the training comparison's verdict and the benchmark
#    output reach the summary, exit 1.
# 4. Without a bundle and without meson, ninja, cc: the preflight lists all
#    of them at once and the check stops (exit 3) before building.
set -u
build="$(cd "${1:?usage: device-check-rehearsal.sh BUILD_DIR}" && pwd)"
root="$(cd "$(dirname "$0")/../.." && pwd)"
check="$root/tests/cuda/device-check.sh"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/dc-rehearsal.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
ok() {
    checks=$((checks + 1))
    if eval "$1"; then :; else
        fails=$((fails + 1))
        echo "FAIL: $2"
    fi
}

# ---- 1. the bundle ----
# cuda_bench is built only where meson finds the CUDA runtime library; the check needs it.
if [[ ! -x "$build/cuda/cuda_bench" ]]; then
    echo "SKIP: $build has no cuda/cuda_bench (meson found no libcudart), so no bundle can be made"
    exit 77
fi
if ! bash "$root/scripts/cuda-bundle.sh" "$build" "$tmp/bundle" >"$tmp/bundle.log" 2>&1; then
    cat "$tmp/bundle.log"
    echo "FAIL: scripts/cuda-bundle.sh failed"
    exit 1
fi
cat "$tmp/bundle.log"
b="$tmp/bundle"
size=$(du -sb "$b" | cut -f1)
ok '((size <= 64 * 1024 * 1024))' "bundle is $size bytes, over 64 MiB"
ok '[[ -s "$b/MANIFEST.txt" ]] && grep -q "^commit: " "$b/MANIFEST.txt" && grep -q "gpu_archs=" "$b/MANIFEST.txt"' \
    "MANIFEST.txt lacks the commit or the build options"
for f in tfcore test_cuda test_cuda_ops test_cuda_dist test_cuda_module cuda_bench; do
    ok '[[ -x "$b/bin/$f" ]]' "bin/$f missing from the bundle"
done
ok '[[ -f "$b/lib/libtfcore-cuda.so" ]]' "lib/libtfcore-cuda.so missing from the bundle"
mkdir -p "$tmp/unpacked"
for gz in "$b"/lib/*.gz; do [[ -f "$gz" ]] && gzip -dc "$gz" >"$tmp/unpacked/$(basename "${gz%.gz}")"; done
for f in "$b"/bin/* "$b"/lib/*.so* "$tmp"/unpacked/*; do
    [[ -f "$f" && "$f" != *.gz ]] || continue
    out=$(LD_LIBRARY_PATH="$b/lib:$tmp/unpacked" ldd "$f" 2>&1)
    ok '! grep -q "not found" <<<"$out"' "$(basename "$f"): $(grep "not found" <<<"$out" | tr -s ' \n' ' ')"
    # What the bundle holds must be taken from the bundle: the build dir does not travel.
    ok '! grep -E "=> ($build|/usr/lib|/lib)/.*(libtfcore|openblas|pcre2|gomp|gfortran)" <<<"$out" >/dev/null' \
        "$(basename "$f") resolves a bundled library elsewhere: $(grep -E "libtfcore|openblas|pcre2" <<<"$out" | tr -s ' \n' ' ')"
done

# ---- 2. no device, stripped environment ----
env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" TMPDIR="$tmp" bash "$check" --bundle "$b" "$tmp/out" >"$tmp/check.log" 2>&1
rc=$?
cat "$tmp/check.log"
ok '((rc == 77))' "device check without a device: exit $rc, want 77"
ok 'grep -q "no CUDA device — skipped" "$tmp/out/summary.txt"' "summary lacks 'no CUDA device — skipped'"
for f in summary.txt stages.tsv logs.tar.gz MANIFEST.txt preflight.txt; do
    ok '[[ -s "$tmp/out/$f" ]]' "OUTDIR lacks $f"
done
n=$(find "$tmp/out" -type f | wc -l)
ok '((n <= 8))' "OUTDIR holds $n files, more than the 8 that come back"
ok 'tar tzf "$tmp/out/logs.tar.gz" | grep -q "logs/device.log"' "logs.tar.gz lacks logs/device.log"
ok 'grep -qP "^preflight\t15\t0\t" "$tmp/out/stages.tsv" && grep -qP "^device\t15\t77\t" "$tmp/out/stages.tsv"' \
    "stages.tsv lacks the preflight and device rows: $(tr '\n' ' ' <"$tmp/out/stages.tsv")"

# ---- 3. a stand-in GPU ----
f="$tmp/fake"
cp -r "$b" "$f"
# A test program: --list, --exact NAME as tfc_test.h's main; "broken" fails
# naming a kernel as a real failure would, "hangs" never ends.
stub() {
    cat >"$f/bin/$1" <<EOF
#!/bin/bash
names="$2"
case "\$1" in
--list) for n in \$names; do echo \$n; done ;;
--exact)
    case "\$2" in
    broken) echo "test.c:1: FAIL: map_kernel: element 7 is 1, want 2 (launch blocking \${CUDA_LAUNCH_BLOCKING:-0})"; exit 1 ;;
    hangs) sleep 60 ;;
    *) echo "ok   \$2"; echo "1 checks, 0 failed; 1 tests, 0 failed" ;;
    esac ;;
esac
EOF
    chmod +x "$f/bin/$1"
}
stub test_cuda "memory_roundtrip broken hangs fine"
stub test_cuda_ops "op_a op_b"
stub test_cuda_dist "all_reduce"
stub test_cuda_module "version_negotiation"
mkdir -p "$tmp/path"
cat >"$tmp/path/compute-sanitizer" <<'EOF'
#!/bin/bash
echo "========= COMPUTE-SANITIZER"
echo "========= Invalid __global__ read of size 4 bytes"
echo "=========     at map_kernel<float>(tfc_map_args)+0x1f0 in /src/cuda/map.cu:42"
while [[ "$1" == --* ]]; do [[ "$1" == --tool || "$1" == --print-limit || "$1" == --error-exitcode ]] && shift; shift; done
"$@"
echo "========= ERROR SUMMARY: 1 error"
exit 99
EOF
chmod +x "$tmp/path/compute-sanitizer"
# tfcore: a training log whose curve falls; both devices give the same losses.
cat >"$f/bin/tfcore" <<'EOF'
#!/bin/bash
steps=0 log=
while (($#)); do case "$1" in --steps) steps=$2; shift ;; --log-json) log=$2 ;; esac; shift; done
for ((s = 1; s <= steps; s++)); do
    l=$(awk -v s=$s 'BEGIN { printf "%.6f", 4.2 - 1.5 * s / '"$steps"' }')
    v=""; ((s == steps)) && v=", \"val_loss\": 2.8"
    echo "{\"step\": $s, \"loss\": $l, \"lr\": 0.001, \"tokens_per_s\": 1000.0, \"elapsed_s\": 0.1$v}" >>"$log"
done
echo "final: ok"
EOF
printf '#!/bin/bash\necho "bench: gemm ratio 0.97 (stand-in)"\n' >"$f/bin/cuda_bench"
chmod +x "$f/bin/tfcore" "$f/bin/cuda_bench"
# A stage program as another helper would add one (run_script: bundle dir and output dir as arguments).
printf '#!/bin/bash\necho "extra stage: bundle ok $([[ -x $1/bin/test_cuda ]] && echo yes)"\necho data >"$2/extra.txt"\n' >"$tmp/extra.sh"
env -i PATH="$tmp/path:/usr/bin:/bin" HOME="${HOME:-/tmp}" TMPDIR="$tmp" DEVICE_CHECK_TEST_TIMEOUT=3 \
    DEVICE_CHECK_TRAIN_STEPS=40 DEVICE_CHECK_EXTRA_STAGES="extra 10 run_script $tmp/extra.sh" \
    bash "$check" --bundle "$f" "$tmp/out2" >"$tmp/check2.log" 2>&1
rc=$?
cat "$tmp/check2.log"
# shellcheck disable=SC2034 # read inside the ok strings (eval)
s="$tmp/out2/summary.txt"
ok '((rc == 1))' "stand-in GPU with a failing test: exit $rc, want 1"
ok '[[ $(wc -l <"$tmp/out2/tests.tsv") == 8 ]]' "tests.tsv should hold the 8 cases: $(wc -l <"$tmp/out2/tests.tsv")"
ok 'grep -qP "^test_cuda\tfine\t0\t" "$tmp/out2/tests.tsv"' "a passing case is not recorded as passing"
ok 'grep -q "FAILED: test_cuda broken (exit 1" "$s"' "the failing case is not named"
ok 'grep -q "FAILED: test_cuda hangs (exit 124" "$s"' "the hanging case is not cut at its limit"
ok 'grep -q "rerun test_cuda broken blocking: 1" "$s" && grep -q "launch blocking 1" "$s"' \
    "the failure was not rerun with CUDA_LAUNCH_BLOCKING=1"
ok 'grep -q "rerun test_cuda broken memcheck: 99" "$s" && grep -q "at map_kernel.*map.cu:42" "$s"' \
    "the memcheck rerun does not name the kernel"
ok 'grep -q "rerun test_cuda hangs memcheck: not run (the test timed out)" "$s"' "a timed-out case was rerun under memcheck"
ok 'grep -q "training check: ok" "$s" && grep -q "mean loss steps 31-40" "$s"' "the training comparison did not pass"
ok 'grep -q "gemm ratio 0.97 (stand-in)" "$s"' "the benchmark output is not in the summary"
for st in preflight device tests reruns train bench; do
    ok 'grep -qP "^$st\t" "$tmp/out2/stages.tsv"' "stages.tsv lacks $st"
done
ok 'grep -q "== stage times" "$s" && grep -qE "== FAIL in [0-9]+ s" "$s"' "the summary lacks the stage times or the verdict"
ok 'tar tzf "$tmp/out2/logs.tar.gz" | grep -q "logs/tests/test_cuda.broken.memcheck.log"' "logs.tar.gz lacks the memcheck log"
ok '(($(find "$tmp/out2" -type f | wc -l) <= 8))' "OUTDIR holds more than 8 files"
ok 'grep -q "extra stage: bundle ok yes" "$s" && grep -qP "^extra\t10\t0\t" "$tmp/out2/stages.tsv"' \
    "a run_script stage did not run with the bundle dir"
ok 'tar tzf "$tmp/out2/logs.tar.gz" | grep -q "logs/extra/extra.txt"' "a run_script stage's output dir is not in logs.tar.gz"

# ---- 4. without a bundle, on a machine lacking the build tools: the preflight lists them all at once ----
mkdir -p "$tmp/tools"
for t in bash env date awk sed grep tr cat mkdir rm cp mv tar gzip timeout ldd find wc head tail sort tee \
    sleep mktemp dirname basename uname nproc du stat cut ls; do
    p=$(command -v "$t") && ln -sf "$p" "$tmp/tools/$t"
done
env -i PATH="$tmp/tools" HOME="${HOME:-/tmp}" TMPDIR="$tmp" bash "$check" --build "$tmp/out3" >"$tmp/check3.log" 2>&1
rc=$?
cat "$tmp/check3.log"
ok '((rc == 3))' "preflight without build tools: exit $rc, want 3"
ok 'grep -q "MISSING: meson" "$tmp/out3/summary.txt" && grep -q "MISSING: ninja" "$tmp/out3/summary.txt" &&
    grep -q "MISSING: cc" "$tmp/out3/summary.txt"' "the preflight did not list every missing tool at once"
ok '! grep -q "^build" "$tmp/out3/stages.tsv"' "it tried to build after a failed preflight"

echo "$checks checks, $fails failed"
((fails == 0))
