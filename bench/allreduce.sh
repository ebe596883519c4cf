#!/bin/bash
# bench/allreduce.sh [NP] [MAX_MB] [MIN_MB] [BUILD_DIR]: tfc_all_reduce vs bare
# MPI_Allreduce (bench/allreduce.c) under `mpirun -np NP` (default 2) as
# the tests run it (tests/dist/run_mpi.sh: root allowed, oversubscribed,
# shared memory and loopback TCP). Builds nothing: build BUILD_DIR (default
# build-rel, else build) first. Sizes MIN_MB (default 4 KB) to MAX_MB MB (default 256),
# doubling.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
np=${1:-2}
max_mb=${2:-256}
min_mb=${3:-0.00390625}
dir=${4:-}
if [ -z "$dir" ]; then
  for d in build-rel build; do
    if [ -x "$root/$d/bench/allreduce" ]; then dir=$d; break; fi
  done
fi
exe="$root/${dir:-build}/bench/allreduce"
if [ ! -x "$exe" ]; then
  echo "allreduce.sh: $exe not built (needs the MPI module: libopenmpi-dev; then ninja -C DIR bench/allreduce)" >&2
  exit 1
fi
exec bash "$root/tests/dist/run_mpi.sh" "$np" "$exe" "$max_mb" "$min_mb"
