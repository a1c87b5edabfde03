#!/bin/bash
# experiments/stress-2026-11-30-s5/cpu-observers-h200.sh — why does the recorder's CPU reading of a loaded
# phase differ from the stressor's own probes by a per-run amount of changing sign (fig13 runs: f6 +5.1%,
# b +6.3%, f7 -6.5%, a -16.2%; these four line up with the idle baseline of the run: 1.84, 2.19, 2.39,
# 2.51 ms)? One GPU-machine call (~5 minutes), from the repository root:
#   run(command="bash experiments/stress-2026-11-30-s5/cpu-observers-h200.sh", carry=[".deps"], timeout_s=600)
#   1. machine facts (lscpu, THP, steal time) and 8 idle baselines in 8 processes back to back: does the
#      idle CPU probe time vary between processes (1.84-2.51 ms across runs so far)?
#   2. three arms, each a CPU-only closed-loop stressor at a constant 0.4 and TWO recorders started together
#      (same baseline, same code): do two identical observers agree with each other, and with the stressor?
#      arm def: defaults (6 hogs per thread, 2 ms probes); arm k2: --hogs-cpu 2; arm p10: 10 ms CPU probes
#      (--cpu-probe-ms 10 in the baseline, which the stressor's probes then use too).
. experiments/h200-common.sh
h200_setup cpuobs ats
{ lscpu; echo; cat /sys/kernel/mm/transparent_hugepage/enabled; uname -a; } > $W/machine.txt 2>&1
say "$(grep -E '^(CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|Model name)' $W/machine.txt | tr -s ' ' | paste -sd';')"
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
for i in 1 2 3 4 5 6 7 8; do
  $A record --save-baseline $W/b$i.txt --baseline-s 2 > $W/b$i.log 2>&1
done
say "8 idle baselines, CPU probe ms: $(for i in 1 2 3 4 5 6 7 8; do awk '{printf "%.3f ", $1*1e3}' $W/b$i.txt; done)"
$A trace synth --out $W/c04.h5 --duration 90 --cpu const:0.4 > /dev/null
for arm in def k2 p10; do
  sa=""; bo=""; [ $arm = k2 ] && sa="--hogs-cpu 2"; [ $arm = p10 ] && bo="--cpu-probe-ms 10"
  $A record --save-baseline $W/base-$arm.txt --baseline-s 3 $bo > $W/base-$arm.log 2>&1
  s0=$(steal)
  $A stress --trace $W/c04.h5 --baseline $W/base-$arm.txt --cpu-only --duration 80 --log $W/ctl-$arm.csv $sa > $W/stress-$arm.txt 2>&1 &
  sp=$!; sleep 8
  for r in 1 2; do $A record --baseline $W/base-$arm.txt --cpu-only --duration 60 --out $W/r$r-$arm.h5 > $W/r$r-$arm.log 2>&1 & done
  wait; s1=$(steal)
  say "arm $arm ($sa $bo): baseline $(awk '{printf "%.3f ms, %d reps", $1*1e3, $4}' $W/base-$arm.txt); steal $(echo $s0 $s1 | awk '{printf "%.2f%%", 100*($3-$1)/($4-$2)}')"
  grep -E "^cpu +[0-9.]+ +[0-9.]+ +0\.4" $W/stress-$arm.txt | head -2 | sed 's/^/  stressor: /' | tee -a "$S"
  for r in 1 2; do say "  recorder $r: $(grep -o 'mean availability cpu [0-9.]*' $W/r$r-$arm.log) $(grep -o 'probe duty cycle [0-9.]*%' $W/r$r-$arm.log)"; done
done
cp $W/r*-*.h5 $W/ctl-*.csv "$OUT/" 2>/dev/null; (cd $W && tar czf "$OUT/h5.tgz" r*-*.h5 ctl-*.csv) && rm -f "$OUT"/r*-*.h5 "$OUT"/ctl-*.csv
