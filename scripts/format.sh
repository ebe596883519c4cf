#!/usr/bin/env bash
# Format the C/CUDA sources with clang-format and the repository's
# .clang-format (the project's style, written down).
#
#   bash scripts/format.sh          # rewrite every file that drifted
#   bash scripts/format.sh --check  # list drifted files, exit 1 if any (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[[ "${1:-}" == "--check" ]] && check=1
if ! command -v clang-format >/dev/null 2>&1; then
  echo "format: clang-format is not installed (bash scripts/setup.sh --for test installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'lib/*.c' 'lib/*.h' 'include/*.h' 'tools/*.c' 'tools/*.h' 'cuda/*.cu' \
  'cuda/*.cuh' 'cuda/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c' 'bench/*.h' 'bindings/lua/*.c')
drift=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  if ! clang-format --style=file "$f" | cmp -s - "$f"; then
    drift+=("$f")
    ((check)) || clang-format --style=file -i "$f"
  fi
done
if ((check)); then
  for f in "${drift[@]}"; do echo "not formatted: $f (run bash scripts/format.sh)"; done
  echo "${#files[@]} files checked, ${#drift[@]} not formatted"
  ((${#drift[@]} == 0))
else
  echo "format: ${#drift[@]} of ${#files[@]} files rewritten"
fi
