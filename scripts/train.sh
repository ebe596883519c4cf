#!/usr/bin/env bash
# The main job: set up, build, run.
#
#   bash scripts/train.sh
#
# PLACEHOLDER: until GPT training lands, this builds the library and runs the
# README's example program (examples/hello.c). The lead replaces the body
# below the build with the real training run (tokenizer + GPT-2 on
# ../shared/data/tinyshakespeare.txt).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs="${TFC_JOBS:-2}"

bash scripts/setup.sh
bash scripts/configure.sh build >/dev/null
ninja -C build -j"$jobs" --quiet

echo "== running examples/hello.c (build/examples/hello)"
build/examples/hello
