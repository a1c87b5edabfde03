#!/bin/bash
# experiments/stress-2026-11-30-s5/pin-h200.sh — the pinned probes and hogs on the H200 (~8 min; ran at 508c0ed, where
# `ats stress --pin` pinned both; since ce270c0 that is `--pin --pin-hogs`, as below):
#   1. twice: a fresh baseline (--pin), a CPU-only closed-loop stressor at a constant 0.4 (--pin) and two
#      recorders (--pin) started together, 60 s: do two identical observers now agree with each other and
#      with the stressor (unpinned, cpu-observers-h200.sh: 0.425 vs 0.388, 0.447 vs 0.362; observers.py)?
#   2. the fig13 scenario with --pin for the stressor and the recorder (traces/record-h200.sh), judged
#      with `ats trace compare --loaded-only` (rc 0 = every loaded phase within 10 %).
#   run(command="bash experiments/stress-2026-11-30-s5/pin-h200.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
h200_setup pin ats
$A trace synth --out $W/c04.h5 --duration 90 --cpu const:0.4 > /dev/null
for arm in pin1 pin2; do
  $A record --save-baseline $W/base-$arm.txt --baseline-s 3 --pin > $W/base-$arm.log 2>&1
  $A stress --trace $W/c04.h5 --baseline $W/base-$arm.txt --cpu-only --duration 80 --pin --pin-hogs --log $W/ctl-$arm.csv > $W/stress-$arm.txt 2>&1 &
  sleep 8
  for r in 1 2; do $A record --baseline $W/base-$arm.txt --cpu-only --pin --duration 60 --out $W/r$r-$arm.h5 > $W/r$r-$arm.log 2>&1 & done
  wait
  say "arm $arm: baseline $(awk '{printf "%.3f ms, %d reps", $1*1e3, $4}' $W/base-$arm.txt); $(grep -o 'hogs cpu [^;]*' $W/stress-$arm.txt | head -1)"
  grep -E "^cpu +[0-9.]+ +[0-9.]+ +0\.4" $W/stress-$arm.txt | head -1 | sed 's/^/  stressor: /' | tee -a "$S"
  for r in 1 2; do say "  recorder $r: $(grep -o 'mean availability cpu [0-9.]*' $W/r$r-$arm.log) $(grep -o 'probe duty cycle [0-9.]*%' $W/r$r-$arm.log) $(grep -o 'on 16 [a-z]* *threads' $W/r$r-$arm.log | head -1)"; done
done
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16 --pin --pin-hogs" RECORD_ARGS="--pin" timeout 280 traces/record-h200.sh $W/rec baseline fig13 > $W/rec.log 2>&1
say "fig13 --pin rc=$? (0: every loaded phase within 10 %)"
grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY|UNLOADED|max \|rel|hogs cpu|probe duty" $W/rec.log | tee -a "$S"
cp $W/rec/fig13.h5 "$OUT/fig13-pin.h5" 2>/dev/null
(cd $W && tar czf "$OUT/h5.tgz" r*-pin*.h5 ctl-*.csv)
