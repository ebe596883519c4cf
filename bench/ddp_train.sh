#!/bin/bash
# Data-parallel training speed on this machine (docs/PERFORMANCE.md,
# "Data-parallel training"): `tfcore train` on char-small, global batch 16,
# in one run, side by side:
#   1 process x 2 threads              (the baseline: all cores, one process)
#   2 ranks x 1 thread (DDP)           (mpirun; gradients averaged in buckets during backward)
#   2 ranks x 1 thread, 4 MiB buckets  (more, smaller buckets: more overlap)
#   2 ranks x 1 thread, --zero 1       (sharded AdamW state)
# and prints tokens/s (median over the steps after the first 3), the ratio to
# the baseline, how much of the all-reduce time backward hid, and the
# optimizer state per rank.
#
#   bash bench/ddp_train.sh [BUILD_DIR] [STEPS]     (default: build, 20)
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
steps="${2:-20}"
cli="$build/tools/tfcore"
[ -x "$cli" ] || { echo "ddp_train.sh: $cli not found (build first)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(train --preset char-small --steps "$steps" --batch 16 --sample-tokens 0 --eval-every 100000 --eval-batches 1
  --seed 3)

run() { # run NAME NP THREADS [ARGS...]
  local name=$1 np=$2 threads=$3
  shift 3
  OMP_NUM_THREADS=$threads bash "$root/tests/dist/run_mpi.sh" "$np" "$cli" "${args[@]}" --out "$work/$name" \
    --log-json "$work/$name.json" "$@" >"$work/$name.log" 2>&1
}

median_tps() {
  /usr/bin/python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%.0f" % statistics.median(r["tokens_per_s"] for r in rows[3:]))' "$1"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo "tfcore train --preset char-small --batch 16 (global) --steps $steps"
printf "%-44s %9s %6s  %s\n" "configuration" "tokens/s" "ratio" "notes"
run base 0 2
base=$(median_tps "$work/base.json")
printf "%-44s %9s %6s\n" "1 process x 2 threads" "$base" "1.00"
for cfg in "ddp:2 ranks x 1 thread (DDP, 25 MiB buckets)" "ddp4:2 ranks x 1 thread (DDP, 4 MiB buckets):--bucket-mb 4" \
  "zero:2 ranks x 1 thread (--zero 1):--zero 1"; do
  name=${cfg%%:*}
  rest=${cfg#*:}
  label=${rest%%:*}
  extra=""
  [ "$rest" != "$label" ] && extra=${rest#*:}
  # shellcheck disable=SC2086
  run "$name" 2 1 $extra
  tps=$(median_tps "$work/$name.json")
  note=$(grep -E "^ddp: |^optimizer state: " "$work/$name.log" | sed 's/^ddp: //' | paste -sd ';' -)
  printf "%-44s %9s %6.2f  %s\n" "$label" "$tps" "$(echo "scale=4; $tps / $base" | bc)" "$note"
done
