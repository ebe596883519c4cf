#!/usr/bin/env bash
# Run the libFuzzer targets of tests/fuzz (docs/FUZZING.md):
#
#   bash scripts/fuzz.sh [--seconds N] [--jobs N] [--workers N] [TARGET...]
#
# Configures and builds build-fuzz (clang, ASan+UBSan, scripts/configure.sh),
# then for each target (all by default):
#   1. replays every input in tests/fuzz/regressions/<target>/ and the seeds
#      in tests/fuzz/corpus/<target>/: none may crash, leak or run out of memory;
#   2. fuzzes for N seconds (default 600) from the seeds, the regressions and
#      build-fuzz/fuzz-corpus/<target>/ (the grown corpus, kept between runs,
#      not committed), with -rss_limit_mb=2048 -malloc_limit_mb=512 so memory
#      amplification fails like a crash. A crashing, leaking, OOM or
#      timing-out input is written to tests/fuzz/regressions/<target>/:
#      fix the bug, then commit the input.
# Prints one line per target (executions, seconds, result) and ends with
# "N passed, N failed" (one per target); exit status 0 only when all passed.
# --jobs N runs N targets at once (default 1). --workers N fuzzes each target
# with N processes sharing one corpus (libFuzzer's -fork=N; default 1, plain
# libFuzzer); the executions printed are then the sum over the workers.
# Extra libFuzzer flags: FUZZ_FLAGS.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1

all_targets=(safetensors gpt_load tiktoken native_tokenizer gpt2_vocab token_file dlpack encode train token_shards gpt_llmc
  hf_config adapter_config tokenizer_json hf_index)
seconds=600 jobs=1 workers=1 targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t (have: ${all_targets[*]})" >&2; exit 2; }
done

dir=build-fuzz
bash scripts/configure.sh "$dir" || exit 1
ninja -C "$dir" -j"${TFC_JOBS:-2}" "${targets[@]/#/tests/fuzz/fuzz_}" || exit 1

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
limits=(-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=30)
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --workers wants a positive count, got $workers" >&2; exit 2; }
fork=()
# fork mode would otherwise only count OOMs and timeouts and go on
((workers > 1)) && fork=(-fork="$workers" -ignore_ooms=0 -ignore_timeouts=0 -ignore_crashes=0)
logs="$dir/fuzz-logs"
mkdir -p "$logs"

# fuzz_one TARGET: replay, then fuzz; its summary line goes to $logs/TARGET.result.
fuzz_one() {
  local t="$1" bin="$dir/tests/fuzz/fuzz_$1" log="$logs/$1.log" res="$logs/$1.result"
  local reg="tests/fuzz/regressions/$t" seeds="tests/fuzz/corpus/$t" grown="$dir/fuzz-corpus/$t"
  mkdir -p "$reg" "$grown"
  local inputs=()
  mapfile -t inputs < <(find "$reg" "$seeds" -type f ! -name '.*' | sort)
  if ((${#inputs[@]})) && ! "$bin" "${limits[@]}" "${inputs[@]}" >"$logs/$t.replay.log" 2>&1; then
    echo "FAIL $t: replaying ${#inputs[@]} regression and seed inputs crashed (log: $logs/$t.replay.log)" >"$res"
    return
  fi
  local t0=$SECONDS rc before after
  before="$(ls "$reg")"
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
  "$bin" "${limits[@]}" "${fork[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$reg/" \
    ${FUZZ_FLAGS:-} "$grown" "$seeds" "$reg" >"$log" 2>&1
  rc=$?
  local execs
  if ((workers > 1)); then # fork mode's parent prints "#TOTAL: cov: ..." after each job
    execs="$(grep -oE '^#[0-9]+: cov:' "$log" | grep -oE '[0-9]+' | tail -n 1)"
  else
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)"
  fi
  # fork mode can exit 0 after a worker's OOM; an artifact it wrote still counts
  after="$(ls "$reg")"
  if ((rc == 0)) && [[ "$after" != "$before" ]]; then rc=1; fi
  if ((rc == 0)); then
    echo "ok   $t: ${execs:-?} executions in $((SECONDS - t0)) s, replayed ${#inputs[@]} inputs, 0 crashes" >"$res"
  else
    local what
    what="$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)[^(]*|runtime error:.*|invariant broken:.*' "$log")"
    [[ "$after" != "$before" ]] && what="${what:+$what; }new artifact $(comm -13 <(echo "$before") <(echo "$after") | head -n 1)"
    echo "FAIL $t: ${what:-exit $rc} after ${execs:-?} executions; input saved in $reg/ (log: $log)" >"$res"
  fi
}

running=0
for t in "${targets[@]}"; do
  rm -f "$logs/$t.result"
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
done
wait

passed=0 failed=0
for t in "${targets[@]}"; do
  if [[ -f "$logs/$t.result" ]]; then cat "$logs/$t.result"; else echo "FAIL $t: no result"; fi
  if grep -q '^ok ' "$logs/$t.result" 2>/dev/null; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
for t in "${targets[@]}"; do
  grep -q '^FAIL' "$logs/$t.result" 2>/dev/null && { echo "--- $t"; tail -n 40 "$logs/$t.log" 2>/dev/null || cat "$logs/$t.replay.log"; }
done
echo "$passed passed, $failed failed"
((failed == 0))
