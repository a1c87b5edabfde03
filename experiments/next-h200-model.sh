#!/bin/bash
# experiments/next-h200-model.sh — a second GPU-machine call for the next session (~4 minutes), after
# experiments/next-h200.sh has shown the opt-in Q6_K v3 kernel correct (test_cuda_ops with
# ATS_GEMV_V3_Q6K=1): the whole model with and without it, and the per-kernel times of a decode step.
#   1. test_cuda_model with ATS_GEMV_V3_Q6K=1 (whole models CPU / GPU / split, stories260K on the GPU);
#   2. `ats bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16`, default and ATS_GEMV_V3_Q6K=1:
#      decode tok/s (fourth session: 123.9 tok/s = 22.8% of the 544 tok/s floor; predicted +10-15% if the
#      Q6_K kernel reaches 50-60% of the read probe);
#   3. ncu per-kernel durations of a 1-token prompt + 2 decode steps with ATS_GEMV_V3_Q6K=1 (compare with
#      experiments/bench/gpu-2026-11-30-s4/ncu-decode-rmsnorm-fixed.csv: Q6_K v2 2.2 ms of 7.47 ms).
# Run from the repository root on the GPU machine, with the shared models copied to .gpu-shared/models:
#   run(command="bash experiments/next-h200-model.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
# Everything lands in $OUT/nextm.tgz plus $OUT/summary.txt and the two bench JSON files.
. experiments/h200-common.sh
h200_setup nextm ats test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
ATS_GEMV_V3_Q6K=1 timeout 200 $B/tests/exec/test_cuda_model > $W/model-q6k.log 2>&1
say "test_cuda_model ATS_GEMV_V3_Q6K=1 rc=$? $(tail -1 $W/model-q6k.log)"; grep "CHECK failed" $W/model-q6k.log | head -5 | tee -a "$S"
for v in "" 1; do
  ATS_GEMV_V3_Q6K=$v timeout 150 $A bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16 \
      --out "$OUT/bench-kernels-q6k${v:-0}.json" > $W/bk-q6k${v:-0}.txt 2>&1
  say "bench ATS_GEMV_V3_Q6K=${v:-unset} rc=$?"; grep -E "^(Q6_K |gpu )" $W/bk-q6k${v:-0}.txt | tee -a "$S"
done
if command -v ncu > /dev/null; then
  ATS_GEMV_V3_Q6K=1 timeout 200 ncu --metrics gpu__time_duration.sum --csv --print-units base \
      $A run --model qwen3-14b --dummy-weights --backend cuda -n 2 --prompt-tokens 1 > $W/ncu.csv 2> $W/ncu.err
  say "ncu rc=$?"
fi
