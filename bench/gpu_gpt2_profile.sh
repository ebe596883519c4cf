#!/bin/bash
# Where the GPT-2 124M bf16 training step spends its time on the GPU (issue #19): tfcore train's per-op
# profile (--profile-steps) of bench/gpu_gpt2.sh's run, twice:
#
#   bash bench/gpu_gpt2_profile.sh DIR OUT        (DIR, OUT as bench/gpu_gpt2.sh's; PyTorch is not run)
#
#   blocking  CUDA_LAUNCH_BLOCKING=1: every launch waits for its kernel, so an op's row is its GPU time
#             (plus a launch latency of some microseconds per kernel): where the device's time goes.
#   async     the launches as training makes them: an op's row is host time, large only where the host
#             waits (a synchronizing call, a full launch queue) or does real work (recording, dispatch).
# Each prints the profile's 25 heaviest rows and the steps' tokens/s. Not in the device check's default
# stages (tests/cuda/device-check.sh: DEVICE_CHECK_EXTRA_STAGES="gpt2prof 80 run_script
# bench/gpu_gpt2_profile.sh" and name it in DEVICE_CHECK_STAGES). Exit codes as bench/gpu_gpt2.sh's.
set -u
dir="${1:?usage: gpu_gpt2_profile.sh DIR OUT}"
out="${2:?usage: gpu_gpt2_profile.sh DIR OUT}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rc_all=0
for mode in blocking async; do
    blocking=0
    [ $mode = blocking ] && blocking=1
    echo "== $mode (CUDA_LAUNCH_BLOCKING=$blocking)"
    CUDA_LAUNCH_BLOCKING=$blocking GPT2_TORCH=0 GPT2_STEPS="${GPT2_STEPS:-4}" \
        GPT2_TFCORE_FLAGS="--profile-steps 2 ${GPT2_TFCORE_FLAGS:-}" bash "$here/gpu_gpt2.sh" "$dir" "$out/$mode"
    rc=$?
    [ $rc -eq 77 ] && exit 77
    [ $rc -ne 0 ] && rc_all=$rc
    # The table: its title, the passes line, the header, then rows sorted by total time.
    sed -n '/profile of step/,/^total/p' "$out/$mode/tfcore.log" | head -30
done
exit $rc_all
