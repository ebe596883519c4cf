#!/bin/bash
# `mpirun -np N tfcore train` is the same training as one process, step for
# step (docs/DISTRIBUTED.md): char-tiny, 20 steps, global batch 16, f64; llama-tiny, 10 steps, likewise.
#   2 ranks x 8 rows (DDP, 1 MiB buckets, so several reduce during backward)
#   2 ranks with --zero 1 (sharded AdamW state)
#   1 process with --grad-accum 2, and 2 ranks with --grad-accum 2
# each equal to one process with batch 16: every parameter, every AdamW
# buffer and every step's loss and gradient norm to 1e-12 relative
# (compare_runs.py); in f32, 2 ranks to 1e-5, leaving out the key bias,
# whose gradient is zero in exact arithmetic and whose f32 AdamW steps are
# rounding noise. Checkpoints do not depend on the rank count: 10 steps on
# 2 ranks (ZeRO-1) resumed on 1, 10 on 1 resumed on 2, and 10 on 2 resumed
# on 4 (ZeRO-1) end where one process's 20 steps end. A rank killed mid-run
# ends the job with mpirun naming it; a bad --batch is refused on every rank.
#
#   test_train_exact.sh TFCORE_CLI SOURCE_ROOT
set -u
cli=$1
root=$2
run_mpi="$root/tests/dist/run_mpi.sh"
compare="/usr/bin/python3 $root/tests/dist/compare_runs.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
common=(--steps 20 --batch 16 --sample-tokens 0 --eval-every 1000 --eval-batches 1 --seed 7)

# train NAME NP ARGS...: one run into $work/NAME (its --log-json is $work/NAME.json)
train() {
  local name=$1 np=$2
  shift 2
  if ! bash "$run_mpi" "$np" "$cli" train "${common[@]}" --out "$work/$name" --log-json "$work/$name.json" "$@" \
    >"$work/$name.log" 2>&1; then
    echo "--- $name failed:"
    tail -20 "$work/$name.log"
    return 1
  fi
}

same() { # same WHAT REF OTHER TOL [compare_runs.py options]
  if $compare "$work/$2" "$work/$3" "${@:4}"; then ok "$1"; else bad "$1"; fi
}

train ref 0 --dtype f64 || bad "the one-process reference run"
train ddp2 2 --dtype f64 --bucket-mb 1 && same "2 ranks x batch 8 == 1 process x batch 16 (f64, 1e-12)" ref ddp2 1e-12
grep -q "ddp: .* buckets in 20 steps" "$work/ddp2.log" && ok "rank 0 reports the DDP buckets" || bad "no ddp line in the log"
train zero2 2 --dtype f64 --zero 1 && same "2 ranks --zero 1 == 1 process (f64, 1e-12)" ref zero2 1e-12
train accum1 0 --dtype f64 --grad-accum 2 && same "1 process --grad-accum 2 == batch 16 at once (f64, 1e-12)" ref accum1 1e-12
train accum2 2 --dtype f64 --grad-accum 2 && same "2 ranks --grad-accum 2 == 1 process (f64, 1e-12)" ref accum2 1e-12
train ref32 0 && train ddp32 2 && same "2 ranks == 1 process in f32 (1e-5)" ref32 ddp32 1e-5 --skip-key-bias 128

# The Llama family (llama-tiny: grouped-query attention, RoPE, SwiGLU, untied head): 10 steps on 2 ranks are
# one process's 10 steps (f64, 1e-12), and 5 on 2 ranks with ZeRO-1 resumed for 5 on 1 end there too.
lsteps=(--preset llama-tiny --dtype f64 --steps 10)
train lref 0 "${lsteps[@]}" || bad "the one-process llama-tiny run"
train lddp2 2 "${lsteps[@]}" --bucket-mb 1 && same "llama-tiny: 2 ranks x batch 8 == 1 process x batch 16 (f64, 1e-12)" lref lddp2 1e-12
train lres 2 "${lsteps[@]}" --zero 1 --stop-after 5 && train lres 0 "${lsteps[@]}" --resume &&
  same "llama-tiny: 5 steps on 2 ranks (ZeRO-1) + 5 resumed on 1 == 10 on 1" lref lres 1e-12

# Resume across rank counts: 10 steps on 2 ranks (sharded), 10 more on 1; and the reverse.
train res21 2 --dtype f64 --zero 1 --stop-after 10 && train res21 0 --dtype f64 --resume &&
  same "10 steps on 2 ranks (ZeRO-1) + 10 resumed on 1 == 20 on 1" ref res21 1e-12
train res12 0 --dtype f64 --stop-after 10 && train res12 2 --dtype f64 --resume &&
  same "10 steps on 1 + 10 resumed on 2 == 20 on 1" ref res12 1e-12
train res24 2 --dtype f64 --stop-after 10 && train res24 4 --dtype f64 --resume --zero 1 &&
  same "10 steps on 2 + 10 resumed on 4 (ZeRO-1) == 20 on 1" ref res24 1e-12

# Only rank 0 writes: one progress stream, one checkpoint.
n=$(grep -c "^final: " "$work/ddp2.log")
[ "$n" = 1 ] && ok "one 'final:' line from 2 ranks" || bad "$n 'final:' lines from 2 ranks"

# Bad input is refused on every rank, promptly.
start=$SECONDS
bash "$run_mpi" 2 "$cli" train "${common[@]}" --batch 15 --out "$work/bad" >"$work/bad.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "does not split evenly into 2 ranks" "$work/bad.log" && [ $((SECONDS - start)) -lt 60 ]; then
  ok "--batch 15 on 2 ranks: refused (exit $rc)"
else
  bad "--batch 15 on 2 ranks: exit $rc"
  tail -5 "$work/bad.log"
fi

# A rank killed mid-run: mpirun ends the job and names the rank, within seconds.
bash "$run_mpi" 2 "$cli" train --steps 100000 --batch 16 --eval-every 100000 --sample-tokens 0 --out "$work/kill" \
  >"$work/kill.log" 2>&1 &
mpirun_pid=$!
victim=""
for _ in $(seq 1 600); do
  for p in $(pgrep -f "$work/kill"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$p; fi
  done
  [ -n "$victim" ] && grep -q "step 3/" "$work/kill.log" && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  bad "could not find rank 1 of the run to kill"
  kill "$mpirun_pid" 2>/dev/null
else
  t0=$(date +%s.%N)
  kill -9 "$victim"
  # bounded: give up after 60 s
  for _ in $(seq 1 600); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
  t1=$(date +%s.%N)
  wait "$mpirun_pid"
  rc=$?
  secs=$(echo "$t1 - $t0" | bc)
  if [ $rc -ne 0 ] && grep -q "rank 1" "$work/kill.log" && [ "$(echo "$secs < 30" | bc)" = 1 ]; then
    ok "rank 1 killed: the job ended in ${secs}s, exit $rc, naming rank 1"
  else
    bad "rank 1 killed: exit $rc after ${secs}s"
    tail -8 "$work/kill.log"
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
