#!/bin/bash
# GPU time per kernel of the GPT-2 bf16 training step (issue #19), measured by Nsight Compute's
# gpu__time_duration of every kernel one step launches (each kernel serialized, the clocks left alone):
#
#   bash bench/gpu_kernel_times.sh DIR OUT        (DIR, OUT as bench/gpu_gpt2.sh's)
#
# Runs bench/gpu_gpt2.sh's tfcore run under ncu with GPT-2's shapes (B=16, T=1024, C=768, V=50257) but
# KT_LAYERS layers (default 2: the per-layer kernels are the same, 12 layers repeat them 6 times) for 3
# steps, then prints the 30 kernels with the most GPU time (calls, total ms, mean µs, share). Needs ncu (PATH,
# /usr/local/cuda/bin or # /opt/nvidia/nsight-compute/*); exits 3 without it, 77 without a GPU.
set -u
dir="${1:?usage: gpu_kernel_times.sh DIR OUT}"
out="${2:?usage: gpu_kernel_times.sh DIR OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ncu=$(command -v ncu 2>/dev/null || true)
for f in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do [ -z "$ncu" ] && [ -x "$f" ] && ncu=$f; done
[ -n "$ncu" ] || { echo "gpu_kernel_times.sh: no ncu"; exit 3; }
mkdir -p "$out" || exit 1
csv="$out/ncu.csv"
GPT2_TORCH=0 GPT2_WARM=2 GPT2_STEPS=1 GPT2_TFCORE_FLAGS="--n-layer ${KT_LAYERS:-2} ${GPT2_TFCORE_FLAGS:-}" \
    GPT2_TFCORE_WRAP="$ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --log-file $csv" \
    bash "$here/gpu_gpt2.sh" "$dir" "$out/run" >"$out/run.log" 2>&1
rc=$?
tail -3 "$out/run.log"
[ $rc -eq 77 ] && exit 77
[ -s "$csv" ] || { echo "gpu_kernel_times.sh: ncu wrote nothing (exit $rc)"; tail -20 "$out/run/tfcore.log"; exit 1; }
"${PYTHON:-python3}" - "$csv" <<'PY'
import csv, re, sys
rows = [l for l in open(sys.argv[1], encoding="utf-8", errors="replace") if l.startswith('"')]
r = csv.reader(rows)
head = next(r)
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
agg = {}
for f in r:
    if len(f) <= vi or f[mi] != "gpu__time_duration.sum":
        continue
    name = re.sub(r"\(.*", "", f[ki])[:70]
    ns = float(f[vi].replace(",", ""))
    c, t = agg.get(name, (0, 0.0))
    agg[name] = (c + 1, t + ns)
total = sum(t for _, t in agg.values())
print("kernels of 3 steps (%d launches, %.2f ms of GPU time in all)" % (sum(c for c, _ in agg.values()), total / 1e6))
print("%-70s %6s %10s %9s %6s" % ("kernel", "calls", "total ms", "mean us", "%"))
for name, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:30]:
    print("%-70s %6d %10.3f %9.1f %5.1f%%" % (name, c, t / 1e6, t / c / 1e3, 100 * t / total))
PY
