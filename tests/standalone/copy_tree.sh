#!/usr/bin/env bash
# The project stands on its own: copy the files git knows (git ls-files: no
# build dirs, no .cache, nothing .gitignore excludes) to a fresh folder that has no
# ../shared (nor anything else) beside it, and run the main job there —
# scripts/train.sh, which sets up, configures, builds and trains — for a few
# steps, then check what it wrote. The build is the copy's own (TFC_CLI_ONLY:
# no tests, bindings or CUDA, only the CLI), so nothing of this tree's
# build dirs is reused.
#
#   bash tests/standalone/copy_tree.sh     (TFC_KEEP=1 keeps the copy)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
fail() { echo "copy-tree: FAIL: $*" >&2; exit 1; }
t0=$SECONDS

command -v git >/dev/null || { echo "copy-tree: git not found; skipped"; exit 77; }
git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || { echo "copy-tree: $root is not a git checkout; skipped"; exit 77; }

parent="$(mktemp -d "${TMPDIR:-/tmp}/tfcore-copy.XXXXXX")"
[[ "${TFC_KEEP:-0}" == 1 ]] || trap 'rm -rf "$parent"' EXIT
copy="$parent/tfcore"
mkdir "$copy"
# The working tree's content of every file git tracks or would (untracked files
# that .gitignore does not exclude: a change not committed yet; a file deleted but not
# yet committed is skipped), modes kept.
(cd "$root" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do [[ -e "$f" || -L "$f" ]] && printf '%s\0' "$f"; done) |
  (cd "$root" && tar --null -T - -cf -) | (cd "$copy" && tar -xf -)
[[ ! -e "$parent/shared" ]] || fail "$parent/shared exists"
[[ "$(ls -A "$parent")" == tfcore ]] || fail "$parent holds more than the copy"
for d in build build-cpu build-asan .cache out; do
  [[ ! -e "$copy/$d" ]] || fail "the copy has $d/, which git does not track"
done
echo "copy-tree: $(cd "$copy" && find . -type f | wc -l) files copied to $copy ($((SECONDS - t0))s)"

# The main job, from the copy, with a short run. TFCORE_DATA is cleared so
# the corpus is the copy's data/tinyshakespeare.txt. One OpenMP thread: on
# a busy machine (parallel builds) spinning threads made 30 steps take
# minutes instead of seconds, and speed is not what this test is about.
log="$parent/train.log"
t1=$SECONDS
(cd "$copy" && env -u TFCORE_DATA OMP_NUM_THREADS=1 TFC_CLI_ONLY=1 TFC_STEPS=30 TFC_BATCH=8 bash scripts/train.sh) >"$log" 2>&1 ||
  { tail -n 40 "$log" >&2; fail "scripts/train.sh failed in the copy"; }
sed 's/^/  | /' "$log" | head -n 40
echo "copy-tree: scripts/train.sh ran in the copy in $((SECONDS - t1))s"

[[ -x "$copy/build/tools/tfcore" ]] || fail "the copy's build/tools/tfcore was not built"
grep -q "^tfcore train: data/tinyshakespeare.txt" "$log" || fail "training did not read the copy's data/tinyshakespeare.txt"
grep -Eq '^final: train loss [0-9.]+, val loss [0-9.]+ after 30 steps' "$log" || fail "no 'final: ... after 30 steps' line"
for f in model.safetensors optimizer.safetensors config.json loss.csv; do
  [[ -s "$copy/out/char-tiny/$f" ]] || fail "out/char-tiny/$f missing in the copy"
done
grep -q "== sampling from out/char-tiny" "$log" || fail "the sampling step did not run"
sample="$(sed -n '/== sampling from/,$p' "$log" | tail -n +2)"
[[ "$sample" == ROMEO:* && ${#sample} -gt 100 ]] || fail "the sample does not continue 'ROMEO:' (got: ${sample:0:80})"
echo "copy-tree: PASS ($((SECONDS - t0))s in all)"
