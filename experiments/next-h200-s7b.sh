#!/bin/bash
# experiments/next-h200-s7b.sh — seventh session, second call (~4 minutes), issue 5: GEMV v4 after call 1
# (s7a) showed it correct but 3x slower than v3 (Q4_0 ffn_up 52.8 us, ffn_down 85.9 us; per ring stage
# ~2 us, as if one bulk copy were in flight at a time).
#   1. experiments/tma/tma_stream.cu: bulk-copy streaming by stage size, ring depth, blocks per SM, consumer
#      style. Prediction: >= 3.5 TB/s with 16 KB x 6 slots and one block per SM; if not, the ring design is
#      the limit, not the kernel's math.
#   2. v4 with x quantized by float4 lane groups (8 loads in flight a thread; the one-block-at-a-time loop
#      waited on L2 each time: predicted ~8 us of attn_kv's 11 us and ~27 us of ffn_down's 86 us), GEMV table,
#      and ring shapes ATS_GEMV_V4_STAGE_KB / _RING_KB.
#   run(command="bash experiments/next-h200-s7b.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7b ats test_cuda_ops
nvcc -arch=sm_90 -O3 -o $W/tma_stream experiments/tma/tma_stream.cu > $W/nvcc.log 2>&1 && timeout 60 $W/tma_stream 2>&1 | tee -a "$S"
say "[$((SECONDS - T0)) s] tma_stream done"
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? ($(grep -c 'FAIL' $W/test_cuda_ops.log) FAIL lines)"; tail -1 $W/test_cuda_ops.log | tee -a "$S"
timeout 120 $A bench kernels --skip-cpu --skip-model --reps 30 > $W/bk.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels GEMV (v4 default) rc=$?"
grep -E "^(Q4_0|Q4_K) |^type |HBM read" $W/bk.txt | tee -a "$S"
for sr in 8,64 32,96 16,160 4,48; do
  [ $((SECONDS - T0)) -lt 400 ] || continue
  ATS_GEMV_V4_STAGE_KB=${sr%,*} ATS_GEMV_V4_RING_KB=${sr#*,} timeout 60 $A bench kernels --skip-cpu --skip-model --reps 20 > $W/bk-$sr.txt 2>&1
  say "stage,ring KB = $sr:"; grep -E "^(Q4_0|Q4_K) +(ffn|attn_kv)" $W/bk-$sr.txt | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
