#!/usr/bin/env bash
# The tensor-core attention kernels (cuda/attention_flash.cu) compiled as
# host C++ and run on the CPU against a naive reference
# (tests/cuda/flash_emulation.cpp says what this does and does not check).
# Needs only g++; no GPU, no CUDA toolkit.
#   bash tests/cuda/flash-emulation.sh          # the small cases (~15 s)
#   bash tests/cuda/flash-emulation.sh --full   # also T = 130 and 200, D 128 ragged (~40 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++17 -O2 -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-function -Wno-unused-parameter -Wno-clobbered \
  -I cuda -o "$out/flash_emulation" tests/cuda/flash_emulation.cpp
if [[ "${1:-}" == "--full" ]]; then
  "$out/flash_emulation"
else
  "$out/flash_emulation" quick
fi
