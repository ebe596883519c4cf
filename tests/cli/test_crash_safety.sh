#!/usr/bin/env bash
# Crash safety of tfcore train's checkpoints (issue #21, defect 4).
#   test_crash_safety.sh <path to tfcore> <source root> [--kills N] [--seed S]
# (also $CRASH_KILLS, $CRASH_SEED; scripts/crash-test.sh runs it with 100 kills)
#
# Part 1, by hand-made damage: a mismatched model/optimizer pair is refused
# (with and without checkpoint.json), a committed but unfinished save is
# finished, an abandoned one and orphaned temporaries are removed (files of
# other names are kept).
# Part 2, by kill -9: train with --save-every 1 and kill it after a random
# delay (seeded; the seed is printed), counted from its start or, every
# other run, from the moment a save begins to write; again and again,
# resuming each time.
# After every kill an independent reader (ckpt_check.py) finds the model and
# optimizer at the same step, whole loss/config files, and no temporary file
# other than the killed processes' own; tfcore sample loads the checkpoint.
# Each run that is allowed to finish must equal a run never interrupted, bit
# for bit (model.safetensors and loss.csv): every resume continued exactly.
set -u
tfcore="$1"
src="$2"
shift 2
kills_wanted="${CRASH_KILLS:-30}"
seed="${CRASH_SEED:-$((10#$(date +%s%N | cut -c8-15)))}" # 10#: a leading 0 is not octal
while [ $# -gt 0 ]; do
    case "$1" in
    --kills) kills_wanted="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    *) echo "unknown argument $1"; exit 2 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
check=(/usr/bin/python3 "$here/ckpt_check.py")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
now_ms() { date +%s%3N; }

cat "$src"/README.md "$src"/docs/*.md > "$work/corpus.txt"
N=8 # steps of the runs in part 1
args=(--data "$work/corpus.txt" --steps "$N" --batch 1 --warmup 1 --eval-every 1000000 --eval-batches 1
    --sample-tokens 0 --seed 7)

# ---- part 1: hand-made damage -------------------------------------------------------------
"$tfcore" train "${args[@]}" --stop-after 2 --out "$work/a" >/dev/null 2>&1 || fail "train to step 2 failed"
"$tfcore" train "${args[@]}" --stop-after 3 --out "$work/b" >/dev/null 2>&1 || fail "train to step 3 failed"

# expect_refusal DESCRIPTION FRAGMENT cmd...: exit 2, one line on stderr holding FRAGMENT
expect_refusal() {
    local what="$1" frag="$2"
    shift 2
    "$@" >/dev/null 2>"$work/err"
    local rc=$?
    if [ "$rc" != 2 ] || ! grep -qF -- "$frag" "$work/err" || [ "$(wc -l <"$work/err")" != 1 ]; then
        fail "$what: exit $rc, stderr '$(cat "$work/err")', wanted exit 2 and one line with '$frag'"
    fi
}
cp -r "$work/a" "$work/m1"
cp "$work/b/optimizer.safetensors" "$work/m1/"
expect_refusal "resume with another run's optimizer" "optimizer.safetensors does not match" \
    "$tfcore" train "${args[@]}" --out "$work/m1" --resume
rm -f "$work/m1/checkpoint.json" # an old-style directory: no manifest, the steps in the files are compared
expect_refusal "resume of a mismatched old-style pair" \
    "model.safetensors is at step 2 but optimizer.safetensors is at step 3" \
    "$tfcore" train "${args[@]}" --out "$work/m1" --resume
"$tfcore" sample --ckpt "$work/m1" --max-new-tokens 2 >/dev/null 2>"$work/err" ||
    fail "an old-style directory does not load for sampling: $(cat "$work/err")"
cp -r "$work/a" "$work/m2"
cp "$work/b/model.safetensors" "$work/m2/"
expect_refusal "sample with a model not in checkpoint.json" "model.safetensors does not match" \
    "$tfcore" sample --ckpt "$work/m2" --max-new-tokens 2

cp -r "$work/a" "$work/m3"
head -n 7 "$work/a/checkpoint.json" > "$work/m3/checkpoint.json"
expect_refusal "a cut checkpoint.json" "is damaged: $work/m3/checkpoint.json: it ends early, after line 7" \
    "$tfcore" sample --ckpt "$work/m3" --max-new-tokens 2
sed 's/"size": /"size": -/' "$work/a/checkpoint.json" > "$work/m3/checkpoint.json"
expect_refusal "a checkpoint.json with negative sizes" "is damaged: $work/m3/checkpoint.json: line 6 is not" \
    "$tfcore" eval --ckpt "$work/m3" --data "$work/corpus.txt"
sed 's/"step": \([0-9]*\),/"step": \1, "step": \1,/' "$work/a/checkpoint.json" > "$work/m3/checkpoint.json"
expect_refusal "a checkpoint.json with a key twice" "is damaged: $work/m3/checkpoint.json: line 4 is not" \
    "$tfcore" sample --ckpt "$work/m3" --max-new-tokens 2
# JSON, not a layout: the same manifest on one line (another writer's) is read
/usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$work/a/checkpoint.json" \
    > "$work/m3/checkpoint.json"
"$tfcore" sample --ckpt "$work/m3" --max-new-tokens 2 >/dev/null 2>"$work/err" ||
    fail "a one-line checkpoint.json does not load: $(cat "$work/err")"
sed 's/"size": /"size": -/' "$work/a/checkpoint.json" > "$work/m3/checkpoint.json" # damaged again, for what follows
"$tfcore" train "${args[@]}" --stop-after 1 --out "$work/m3" >/dev/null 2>"$work/err" ||
    fail "a fresh run over a damaged checkpoint.json: $(cat "$work/err")"
got=$("${check[@]}" "$work/m3" --clean) || fail "after a fresh run over a damaged checkpoint.json: $got"

# readers while saves run: each sample finds one whole checkpoint (retrying when a save swaps files under it)
"$tfcore" train "${args[@]}" --steps 30 --save-every 1 --out "$work/live" >/dev/null 2>&1 &
live=$!
samples=0
while kill -0 "$live" 2>/dev/null && [ "$samples" -lt 15 ]; do
    if [ -e "$work/live/checkpoint.json" ]; then
        samples=$((samples + 1))
        "$tfcore" sample --ckpt "$work/live" --max-new-tokens 1 >/dev/null 2>"$work/err" ||
            fail "sample during training (#$samples): $(cat "$work/err")"
    else
        sleep 0.02
    fi
done
kill -9 "$live" 2>/dev/null
wait "$live" 2>/dev/null
[ "$samples" -gt 0 ] || fail "no sample ran while training saved"
echo "$samples samples loaded the checkpoint while training saved every step"

# a save committed (staging manifest written) but not moved in: readers use it, train finishes it
cp -r "$work/a" "$work/c"
mkdir "$work/c/.checkpoint.new"
for f in model.safetensors config.json loss.csv loss.svg checkpoint.json; do cp "$work/b/$f" "$work/c/.checkpoint.new/"; done
cp "$work/b/optimizer.safetensors" "$work/c/" # the first file was already moved in when the save stopped
[ "$("${check[@]}" "$work/c" | head -1)" = 3 ] || fail "ckpt_check does not see the committed save: $("${check[@]}" "$work/c")"
"$tfcore" sample --ckpt "$work/c" --max-new-tokens 2 >/dev/null 2>"$work/err" ||
    fail "sample of a committed, unfinished save: $(cat "$work/err")"
# an abandoned save of another directory and orphans of a dead process; files of other names stay
mkdir "$work/d"
cp -r "$work/a/." "$work/d/"
mkdir "$work/d/.checkpoint.new"
dead=$(sh -c 'echo $$')
touch "$work/d/.checkpoint.new/model.safetensors" "$work/d/.checkpoint.new/optimizer.safetensors.tmp.$dead.0" \
    "$work/d/model.safetensors.tmp.$dead.3" "$work/d/loss.csv.tmp.$dead.1" "$work/d/tokenizer.tfctok.tmp" \
    "$work/d/notes.tmp.$dead.0" "$work/d/model.safetensors.tmp.keep" "$work/d/my.txt"
for dir in c d; do
    "$tfcore" train "${args[@]}" --out "$work/$dir" --resume --stop-after 4 >/dev/null 2>"$work/err" ||
        fail "resume in $dir: $(cat "$work/err")"
    got=$("${check[@]}" "$work/$dir" --clean) || fail "after resuming in $dir: $got"
done
for f in notes.tmp.$dead.0 model.safetensors.tmp.keep my.txt; do
    [ -e "$work/d/$f" ] || fail "the cleanup removed $f, which is not a tfcore temporary file"
done
grep -q '^3,' "$work/c/loss.csv" || fail "the finished save's loss.csv lacks step 3"

# ---- part 2: kill -9 ----------------------------------------------------------------------
# Runs of N2 steps, killed after a random delay and resumed, until one has taken kills_per_run kills; then it
# is run to the end and compared with an uninterrupted run. N2 is large enough that a run rarely ends before
# its kill; the delays cover start-up, the first saves and the steps between, and follow the machine's speed
# (measured on every run that goes to the end).
N2=12
kills_per_run=10
args2=("${args[@]}" --steps "$N2" --save-every 1)
echo "crash test: seed $seed, $kills_wanted kills (CRASH_SEED=$seed reproduces the delays)"
RANDOM=$seed
t0=$(now_ms)
"$tfcore" train "${args2[@]}" --stop-after 1 --out "$work/t1" >/dev/null 2>&1 || fail "reference run 1"
t1=$(now_ms)
"$tfcore" train "${args2[@]}" --out "$work/ref" >/dev/null 2>&1 || fail "reference run"
t2=$(now_ms)
first=$((t1 - t0))                              # start-up + one step + one save
per_step=$(((t2 - t1) / N2 + 1))              # one step + one save, at most (start-up included)
calibrate() { max_delay=$((first + 2 * per_step)); }
calibrate
echo "start-up to the first save ${first} ms, one step + save ${per_step} ms: delays 0..${max_delay} ms"

kills=0 in_save=0 seg_kills=0 segments=0 finished=0 iters=0
seg_dir="$work/seg0"
state=none # the step of seg_dir's checkpoint
pids=""    # processes killed since the last completed save
# finish_run: the run in seg_dir has ended: it must equal the uninterrupted run and leave nothing behind
finish_run() {
    finished=$((finished + 1))
    got=$("${check[@]}" "$seg_dir" --clean) || fail "finished run $segments: $got"
    cmp -s "$work/ref/model.safetensors" "$seg_dir/model.safetensors" ||
        fail "run $segments (killed and resumed) ends with other weights than the uninterrupted run"
    cmp -s "$work/ref/loss.csv" "$seg_dir/loss.csv" ||
        fail "run $segments: loss.csv differs from the uninterrupted run's:"$'\n'"$(diff "$work/ref/loss.csv" "$seg_dir/loss.csv" | head -5)"
    segments=$((segments + 1))
    seg_dir="$work/seg$segments"
    state=none pids="" seg_kills=0
}
# complete_run: resume seg_dir's run to the end (a committed final save: --resume moves it in and finds
# nothing to do), then finish_run; the time it took rescales the delays
complete_run() {
    local resume=() t=$(now_ms) rc
    [ "$state" != none ] && resume=(--resume)
    "$tfcore" train "${args2[@]}" --out "$seg_dir" "${resume[@]}" >"$work/log" 2>&1
    rc=$?
    if [ "$state" = "$N2" ]; then
        [ "$rc" = 2 ] && grep -q "nothing to do" "$work/log" ||
            fail "--resume of a finished run: exit $rc, $(cat "$work/log"), wanted 'nothing to do'"
    elif [ "$rc" != 0 ]; then
        fail "resuming run $segments to the end (from step $state): $(tail -3 "$work/log")"
    else
        local n=$((N2 - ${state/none/0})) dt=$(($(now_ms) - t))
        local want=$((first + (n - 1) * per_step))
        if [ "$n" -ge 4 ]; then # scale by dt / want, within [1/4, 4]
            [ "$dt" -gt $((4 * want)) ] && dt=$((4 * want))
            [ "$dt" -lt $((want / 4)) ] && dt=$((want / 4))
            first=$((first * dt / want + 1)) per_step=$((per_step * dt / want + 1))
            calibrate
        fi
    fi
    finish_run
}
while [ "$kills" -lt "$kills_wanted" ] && [ "$iters" -lt $((kills_wanted * 4)) ]; do
    iters=$((iters + 1))
    if [ "$seg_kills" -ge "$kills_per_run" ] || [ "$state" = "$N2" ]; then
        complete_run
        continue
    fi
    resume=()
    [ "$state" != none ] && resume=(--resume)
    "$tfcore" train "${args2[@]}" --out "$seg_dir" "${resume[@]}" >"$work/log" 2>&1 &
    pid=$!
    delay=$(((RANDOM * 32768 + RANDOM) % (max_delay + 1)))
    how="after ${delay} ms"
    if [ $((iters % 2)) = 0 ]; then
        # every other run: wait until this process writes an optimizer file (the first file of a save), then
        # kill within one step + save, so many kills land inside saves whatever the machine's speed
        delay=$(((RANDOM * 32768 + RANDOM) % (per_step + 1)))
        how="${delay} ms after a save began"
        waited=0
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 2000 ] &&
            ! compgen -G "$seg_dir/optimizer.safetensors.tmp.$pid.*" >/dev/null &&
            ! compgen -G "$seg_dir/.checkpoint.new/optimizer.safetensors.tmp.$pid.*" >/dev/null; do
            sleep 0.005
            waited=$((waited + 1))
        done
    fi
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    status=$?
    if [ "$status" = 0 ]; then # it ended before the kill: the delays are too long for this machine now
        first=$((first * 3 / 4 + 1)) per_step=$((per_step * 3 / 4 + 1))
        calibrate
        finish_run
        continue
    fi
    [ "$status" = 137 ] || { fail "run $iters exited $status: $(tail -3 "$work/log")"; break; }
    kills=$((kills + 1)) seg_kills=$((seg_kills + 1))
    pids="$pids$pid,"
    after=$("${check[@]}" "$seg_dir" --pids "$pids")
    ok=$?
    [ "$ok" = 0 ] || fail "after kill $kills (pid $pid, $how, checkpoint was at step $state):"$'\n'"$after"
    before=$state
    state=$(head -1 <<<"$after")
    [ "$(sed -n 2p <<<"$after")" = in-save ] && in_save=$((in_save + 1))
    [[ "$state" =~ ^([0-9]+|none)$ ]] || { fail "after kill $kills: ckpt_check printed no step"; break; }
    # a save happened (its start removes the earlier runs' leftovers): only this run's temporaries may remain
    if [ "$ok" = 0 ] && [ "$state" != none ] && { [ "$before" = none ] || [ "$state" -gt "$before" ]; }; then
        got=$("${check[@]}" "$seg_dir" --pids "$pid,") ||
            fail "after kill $kills (pid $pid): the save at step $state left older temporaries:"$'\n'"$got"
        pids="$pid,"
    fi
    if [ "$state" != none ] && [ "$state" != "$before" ]; then # (an unchanged one was loaded before)
        "$tfcore" sample --ckpt "$seg_dir" --max-new-tokens 1 >/dev/null 2>"$work/err" ||
            fail "after kill $kills: sample cannot load the checkpoint (step $state): $(cat "$work/err")"
    fi
done
# the last run too: its kills must also have resumed exactly
[ -d "$seg_dir" ] && complete_run
[ "$kills" -ge "$kills_wanted" ] || fail "only $kills kills in $iters runs (wanted $kills_wanted)"
echo "crash test: $kills kills ($in_save of them during a write), $finished runs finished and compared bit for bit, $(($(now_ms) - t0)) ms" \
    "(delays at the end 0..${max_delay} ms), seed $seed"
if [ "$fails" -gt 0 ]; then
    echo "$fails failures (seed $seed)"
    exit 1
fi
echo "all crash-safety checks passed"
