#!/bin/bash
# experiments/next-h200.sh — the first GPU-machine call of the next session (~8 minutes):
#   1. issue 5: the GEMV table with the new same-size read column (rd_same, of_same: the read probe over
#      the same bytes, back to back — is 75% of the 4 GiB probe reachable at 50 MB at all?), and the
#      opt-in Q6_K v3 kernel (ATS_GEMV_V3_Q6K=1, written without a GPU): test_cuda_ops first, then its
#      Q6_K rows. Prediction: Q6_K ffn_up 35% (v2) -> 50-60% (Q4_0's staging, ~2x its ALU work per byte);
#      whole-model decode +10-15% if it holds (Q6_K is 2.2 ms of a 7.5 ms step).
#   2. issue 6: two more fig13 closed-loop runs (fourth session: loaded phases within 10% in 2 of 4 runs;
#      GPU/PCIe phase means carry 3-8% standard error from bimodal probe samples in the stressor's probes,
#      experiments/stress-2026-11-30-s4/), judged with `ats trace compare --loaded-only` (rc 0 = every
#      loaded phase within 10%): run a with the defaults, run b with twice the stressor's probe sets
#      (--probes 6; predicted: its standard error / 1.4, stressor probe duty ~2% -> ~4%).
# Run from the repository root on the GPU machine, e.g. with the device tool:
#   run(command="bash experiments/next-h200.sh", carry=[".deps"], timeout_s=600)
# (.deps: GSL from ../shared/tools/device-deps.sh.) Everything lands in $OUT/next.tgz (one file: the
# device tool returns at most 8) plus $OUT/fig13-a.h5, $OUT/fig13-b.h5 and $OUT/summary.txt.
. experiments/h200-common.sh
h200_setup next ats test_cuda_ops
ATS_GEMV_V3_Q6K=1 timeout 120 $B/tests/exec/test_cuda_ops > $W/ops-q6k.log 2>&1; q6rc=$?
say "test_cuda_ops ATS_GEMV_V3_Q6K=1 rc=$q6rc $(tail -1 $W/ops-q6k.log)"; grep "CHECK failed" $W/ops-q6k.log | head -5 | tee -a "$S"
# one GEMV table (the variable changes the Q6_K rows only; v2's Q6_K rows are in gpu-2026-11-30-s4/)
q6=""; [ $q6rc -eq 0 ] && q6=1
ATS_GEMV_V3_Q6K=$q6 timeout 150 $A bench kernels --skip-cpu --skip-model --reps 30 --out $W/bk.json > $W/bk.txt 2>&1
say "bench (ATS_GEMV_V3_Q6K=$q6) rc=$?"; grep -E "^(type|Q4_0|Q4_K|Q6_K) " $W/bk.txt | tee -a "$S"
for r in a b; do
  sa="--hogs-gpu 16"; [ $r = b ] && sa="--hogs-gpu 16 --probes 6"
  ATS_LOAD=$A STRESS_ARGS="$sa" timeout 280 traces/record-h200.sh $W/rec-$r baseline fig13 > $W/rec-$r.log 2>&1
  say "fig13 run $r ($sa) rc=$? (0: every loaded phase within 10 %)"
  grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY|UNLOADED|max \|rel|hogs cpu" $W/rec-$r.log | tee -a "$S"
  cp $W/rec-$r/fig13.h5 "$OUT/fig13-$r.h5" 2>/dev/null
done
