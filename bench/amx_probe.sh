#!/usr/bin/env bash
# What bf16 could give on another machine's CPU (issue #20), from a bundle,
# with no package registry there: the GPU machine's host is an AMX Xeon,
# this Debian machine's is not. Prints, and writes to $OUT/amx_probe.txt:
#   - the CPU (lscpu) and its AMX flags;
#   - bench/fma_peak at 1 and all threads: f32 FMA, vdpbf16ps and AMX tdpbf16ps peaks;
#   - tests/c/test_bf16 and test_linear_cross_entropy (the autocast LM head on bf16 tensors) on the AMX
#     tile path (TFC_BF16_GEMM=amx: AMX where usable), when bundled;
#   - bench/tfc_bench gemm_bf16 (our f32 and bf16 GEMMs on training shapes, bf16 on AMX) at 1 and all threads;
#   - our training step (bench/train_bench), char-small and gpt2-mini: f32, bf16 on AMX tiles
#     (TFC_BF16_GEMM=amx), and bf16 widened to f32 (the default path), at all threads; char-small at 1;
#   - PyTorch's CPU matmul, f32 against bf16 (oneDNN, AMX where present), on the model's GEMM shapes,
#     when the machine's python3 has torch.
#
#   bash bench/amx_probe.sh --make-bundle [BUILD_DIR]   here: cuda-bundle/ with the programs below
#   bash bench/amx_probe.sh [BUNDLE_DIR]                 there (the device tool: carry ["cuda-bundle"])
# docs/PERFORMANCE.md, "bf16 on an AMX CPU", has a run.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
programs="bench/fma_peak bench/train_bench bench/tfc_bench tests/c/test_bf16 tests/c/test_linear_cross_entropy" # build-relative
if [[ "${1:-}" == --make-bundle ]]; then
    CUDA_BUNDLE_EXTRA="$programs" exec bash "$root/scripts/cuda-bundle.sh" "${2:-$root/build}" "$root/cuda-bundle"
fi
bundle="$(cd "${1:-$root/cuda-bundle}" && pwd)" || exit 2
for p in fma_peak train_bench; do
    [[ -x "$bundle/bin/$p" ]] || {
        echo "amx_probe: $bundle/bin/$p missing: make the bundle with bash bench/amx_probe.sh --make-bundle" >&2
        exit 2
    }
done
export LD_LIBRARY_PATH="$bundle/lib:${LD_LIBRARY_PATH:-}:$bundle/lib-fallback"
out="${OUT:-/tmp}"
nproc="$(nproc)"
{
    lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA node\(s\)|L2|L3'
    echo "amx flags: $(grep -o 'amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    for t in 1 "$nproc"; do timeout 60 "$bundle/bin/fma_peak" "$t"; done
    for t in test_bf16 test_linear_cross_entropy; do
        [[ -x "$bundle/bin/$t" ]] || continue
        echo "$t with TFC_BF16_GEMM=amx: $(TFC_BF16_GEMM=amx TFC_SOURCE_ROOT="$root" timeout 120 \
            "$bundle/bin/$t" 2>&1 | tail -1)"
    done
    if [[ -x "$bundle/bin/tfc_bench" ]]; then
        for t in 1 "$nproc"; do TFC_BF16_GEMM=amx OMP_NUM_THREADS="$t" timeout 60 "$bundle/bin/tfc_bench" gemm_bf16 0.2; done
    fi
    for spec in "char-small 8 256 5 65" "gpt2-mini 8 128 5 50257"; do
        read -r -a a <<<"$spec"
        for dt in f32 bf16 bf16-widened; do
            env=(TFC_BF16_GEMM=amx)
            [[ "$dt" == bf16-widened ]] && env=(TFC_BF16_GEMM=portable)
            env "${env[@]}" OMP_NUM_THREADS="$nproc" timeout 90 "$bundle/bin/train_bench" train "${a[@]}" "${dt%-widened}" |
                head -1 | sed "s/}\$/,\"path\":\"$dt\"}/"
        done
    done
    for dt in f32 bf16; do
        TFC_BF16_GEMM=amx OMP_NUM_THREADS=1 timeout 60 "$bundle/bin/train_bench" train char-small 8 256 3 65 "$dt" |
            head -1
    done
    timeout 90 python3 - "$nproc" <<'PY' || echo "(no PyTorch here: its matmul rows skipped)"
import sys, time
import torch
for nt in (1, int(sys.argv[1])):
    torch.set_num_threads(nt)
    for (m, k, n) in ((2048, 384, 1536), (2048, 1536, 384), (4096, 768, 3072)):
        for dt in (torch.float32, torch.bfloat16):
            a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
            for _ in range(3):
                a @ b
            best = 1e9
            for _ in range(7):
                t = time.perf_counter()
                a @ b
                best = min(best, time.perf_counter() - t)
            print("torch %s threads %d %dx%dx%d: %.1f GFLOP/s" % (str(dt)[6:], nt, m, k, n, 2 * m * k * n / best / 1e9))
print("torch", torch.__version__, "mkldnn", torch.backends.mkldnn.is_available())
PY
} 2>&1 | tee "$out/amx_probe.txt"
