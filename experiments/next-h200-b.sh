#!/bin/bash
# experiments/next-h200-b.sh — the second GPU-machine call of the next session (~7 minutes), issue 5:
#   1. test_cuda_ops and test_cuda_model with the defaults: the Q6_K v3 kernel is the default above 2048
#      rows since the fifth session, and test_cuda_ops' new cases (Q6_K rows > 2048 in test_matmul, Q6_K in
#      the back-to-back chain at 4096 (v3) and 1024 (v2)) have not run on a GPU yet;
#   2. the full `ats bench kernels` (CPU and GPU, whole model): refreshes the committed figures with the Q6_K
#      default (fifth session, ATS_GEMV_V3_Q6K=1: decode 124.3 -> 133.0 tok/s) and the CPU side after
#      ex_cpu_features stopped running cpuid on every call (9.2 us a call on the dev VM; the H200 is a VM
#      too: predicted CPU GEMV and CPU decode +1-3 %; CPU figures last measured before the fourth session).
# Run from the repository root on the GPU machine, with the shared models copied to .gpu-shared/models:
#   run(command="bash experiments/next-h200-b.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
# Lands in $OUT/nextb.tgz plus $OUT/summary.txt and $OUT/bench-kernels.json.
. experiments/h200-common.sh
h200_setup nextb ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
timeout 120 $B/tests/exec/test_cuda_ops > $W/ops.log 2>&1
say "test_cuda_ops rc=$? $(tail -1 $W/ops.log)"; grep -E "CHECK failed|gemv Q6_K" $W/ops.log | head -8 | tee -a "$S"
timeout 200 $B/tests/exec/test_cuda_model > $W/model.log 2>&1
say "test_cuda_model rc=$? $(tail -1 $W/model.log)"; grep "CHECK failed" $W/model.log | head -5 | tee -a "$S"
timeout 420 $A bench kernels --reps 30 --prompt 128 --decode 16 --out "$OUT/bench-kernels.json" > $W/bk.txt 2>&1
say "bench kernels rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K) +(ffn_up|ffn_down|gate_up)|^(gpu|cpu) |DRAM|HBM" $W/bk.txt | tee -a "$S"
