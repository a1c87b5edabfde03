#!/bin/bash
# experiments/next-h200.sh — the first GPU-machine call of the next session (~8.5 minutes), issue 6:
# does the shared probe matrix (/dev/shm/ats-probe-a1-2048x2048, fifth session, not yet run on the H200)
# remove the per-process factor of the CPU probe?
#   1. 16 idle baselines in 16 processes, shared and private (ATS_PROBE_PRIVATE=1) alternating: ms per GEMV.
#      Fifth session (private, 17 processes): 0.243-0.314 ms. Prediction: shared within +-3 % of each other;
#      private spread as before.
#   2. a CPU-only closed-loop stressor at a constant 0.4 with two recorders started together (same baseline),
#      60 s, shared then private. Fifth session (private): recorders 0.425/0.388, 0.447/0.362 (2 hogs per
#      thread), 0.395/0.417 (10 ms probes). Prediction: shared recorders within 3 % of each other and of 0.40.
#   3. fig13 once with the defaults (shared matrix, unpinned), judged with `ats trace compare --loaded-only`
#      (rc 0 = every loaded phase within 10 %; unpinned private runs: 3 of 6 passed, CPU -16...+13 %).
# Run from the repository root on the GPU machine:
#   run(command="bash experiments/next-h200.sh", carry=[".deps"], timeout_s=600)
# Lands in $OUT/next.tgz (logs, baselines, recordings, control CSVs), $OUT/fig13.h5, $OUT/summary.txt.
. experiments/h200-common.sh
h200_setup next ats
rm -f /dev/shm/ats-probe-a1-2048x2048
say "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled), shmem $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null); /dev/shm $(df -h /dev/shm | tail -1)"
for i in $(seq 1 8); do
  for m in shared private; do
    pv=""; [ $m = private ] && pv=1
    ATS_PROBE_PRIVATE=$pv $A record --save-baseline $W/b-$m-$i.txt --baseline-s 2 > $W/b-$m-$i.log 2>&1
  done
done
for m in shared private; do
  say "idle ms per GEMV, $m: $(for i in $(seq 1 8); do awk '{printf "%.4f ", $1*1e3/$4}' $W/b-$m-$i.txt; done)"
  say "  matrices: $(grep -ho 'GEMV float ([^;]*; [a-z]*' $W/b-$m-*.log | sort | uniq -c | tr -s ' ' | paste -sd';')"
done
$A trace synth --out $W/c04.h5 --duration 90 --cpu const:0.4 > /dev/null
for m in shared private; do
  pv=""; [ $m = private ] && pv=1
  export ATS_PROBE_PRIVATE=$pv
  $A record --save-baseline $W/base-$m.txt --baseline-s 3 > $W/base-$m.log 2>&1
  $A stress --trace $W/c04.h5 --baseline $W/base-$m.txt --cpu-only --duration 80 --log $W/ctl-$m.csv > $W/stress-$m.txt 2>&1 &
  sleep 8
  for r in 1 2; do $A record --baseline $W/base-$m.txt --cpu-only --duration 60 --out $W/r$r-$m.h5 > $W/r$r-$m.log 2>&1 & done
  wait
  say "constant 0.4, $m matrix: baseline $(awk '{printf "%.3f ms, %d reps", $1*1e3, $4}' $W/base-$m.txt)"
  grep -E "^cpu +[0-9.]+ +[0-9.]+ +0\.4" $W/stress-$m.txt | head -1 | sed 's/^/  stressor: /' | tee -a "$S"
  for r in 1 2; do say "  recorder $r: $(grep -o 'mean availability cpu [0-9.]*' $W/r$r-$m.log) $(grep -o 'GEMV float ([^)]*)' $W/r$r-$m.log | head -1)"; done
  grep -h "note: the CPU probe uses" $W/stress-$m.txt | tee -a "$S"   # the stressor says so only when not shared
done
unset ATS_PROBE_PRIVATE
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16" timeout 280 traces/record-h200.sh $W/rec baseline fig13 > $W/rec.log 2>&1
say "fig13 (shared matrix) rc=$? (0: every loaded phase within 10 %)"
grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY|UNLOADED|max \|rel|probe duty" $W/rec.log | tee -a "$S"
cp $W/rec/fig13.h5 "$OUT/fig13.h5" 2>/dev/null
