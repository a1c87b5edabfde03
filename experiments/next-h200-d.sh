#!/bin/bash
# experiments/next-h200-d.sh — sixth session, one GPU-machine call (~8 minutes).
# Issue 6: is the recorders' disagreement a per-process speed factor of the CPU probe, and does
# re-measuring the idle baseline in each process (`--baseline FILE --baseline-s S`, new) remove it?
# This session's first call (next-h200.sh) refuted the shared-matrix idea: idle GEMV 0.295-0.366 ms in 8
# processes with the shared matrix, 0.299-0.428 ms with private copies; two recorders sharing one baseline
# read a stressed 0.4 as 0.385 / 0.357 (shared) and 0.375 / 0.400 (private); fig13 CPU -14.7 %.
#   1. Q4_0 GEMV: few long rows (cols >= 2 rows, ffn_down) now take lin R = 1 by default; test_cuda_ops and
#      the GEMV table. Prediction: Q4_0 ffn_down 47.2 % -> ~58 % of the read probe (74 % of a same-size
#      read), every other row unchanged within 2 points.
#   2. E1: 4 recorders, each re-measuring its idle baseline (3 s) with the settings of b0.txt and saving it,
#      then a closed-loop CPU-only stressor at a constant 0.4 that re-measures too (--baseline-s 3), 70 s.
#      Each recorder's mean over the loaded stretch with its own baseline, and as it would have read with
#      b0.txt's time (a x t_b0 / t_own). Prediction if the factor is per process and constant: own-baseline
#      readings within 3 % of 0.40 and of each other; the b0 readings spread as before (5-10 %).
#   3. E2: fig13 with REBASE=3 (stressor and recorder both re-measure), judged as before (--loaded-only,
#      10 %). Prediction: every loaded phase within 10 %, the CPU phase within 5 %.
#   run(command="bash experiments/next-h200-d.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nextd ats test_cuda_ops
timeout 120 $B/tests/exec/test_cuda_ops > $W/ops.log 2>&1
say "test_cuda_ops rc=$? $(tail -1 $W/ops.log)"; grep -E "CHECK failed" $W/ops.log | head -5 | tee -a "$S"
timeout 60 $A bench kernels --skip-cpu --skip-model --reps 30 > $W/bk.txt 2>&1
say "GEMV table (defaults) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K) +(ffn_up|ffn_down|gate_up|attn_kv)|type " $W/bk.txt | tee -a "$S"
say "[$((SECONDS - T0)) s] E1: 4 recorders + stressor at 0.4, all re-measuring"
$A record --save-baseline $W/b0.txt --baseline-s 3 > $W/b0.log 2>&1
$A trace synth --out $W/c04.h5 --duration 80 --cpu const:0.4 > /dev/null
for i in 1 2 3 4; do
  $A record --baseline $W/b0.txt --baseline-s 3 --save-baseline $W/own-$i.txt --cpu-only --duration 84 \
    --out $W/r$i.h5 > $W/r$i.log 2>&1 &
  sleep 0.3
done
sleep 5
$A stress --trace $W/c04.h5 --baseline $W/b0.txt --baseline-s 3 --cpu-only --duration 72 --log $W/ctl.csv \
  > $W/stress.txt 2>&1
wait
grep -E "^cpu|re-measured" $W/stress.txt | tee -a "$S"
# the stressor's load runs from about recorder t = 9 s (5 s + its 3 s re-measure + start) to t = 81 s
$A trace synth --out $W/e1-target.h5 --duration 84 --cpu step:9=0.4,81=1 > /dev/null
tb0=$(awk '{print $1}' $W/b0.txt)
for i in 1 2 3 4; do
  to=$(awk '{print $1}' $W/own-$i.txt)
  a=$($A trace compare $W/r$i.h5 $W/e1-target.h5 --margin 6 2>/dev/null | awk '$1 == "cpu" && $4 == "0.4000" {print $5}')
  say "  recorder $i: own idle $(awk -v t=$to 'BEGIN{printf "%.4f", t*1e3}') ms (b0 $(awk -v t=$tb0 'BEGIN{printf "%.4f", t*1e3}') ms); loaded mean own baseline ${a:-?}, with b0 $(awk -v a=${a:-nan} -v t=$to -v b=$tb0 'BEGIN{printf "%.4f", a*b/t}')"
done
say "[$((SECONDS - T0)) s] E2: fig13, REBASE=3"
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16" REBASE=3 traces/record-h200.sh $W/f baseline fig13 > $W/fig13.txt 2>&1
say "fig13 (REBASE=3) rc=$? (0: every loaded phase within 10 %)"
grep -E "^wrote|^cpu |^gpu |^pcie |^hogs|max \|rel|ACCURACY|UNLOADED|re-measured" $W/f/fig13.log | tee -a "$S"
cp $W/f/fig13.h5 $OUT/fig13.h5 2>/dev/null
say "[$((SECONDS - T0)) s] done"
