#!/bin/bash
# experiments/next-h200-s7e.sh — seventh session, sixth call (~3.5 minutes), issue 5: GEMV v4 variants after
# s7c (16 warps: Q4_0 / Q4_K ffn_up 17.5 us = 63% of the probe, graph 69-70%; ffn_down 20.6-21.6 us; halving
# the chunk made it slower: ~0.5 us a (row, chunk) item that the warps do not hide).
# Defaults now quantize x with a reciprocal (ffn_down: 17408 IEEE divisions a block went; predicted -1 us).
#   ATS_GEMV_V4_WAIT=spin: poll the mbarrier (test_wait) instead of try_wait, which may suspend the warp and
#     wake it late; predicted -0.5..-2 us if wake-up latency is the per-item cost.
#   ATS_GEMV_V4_BPS=2: two blocks a SM (32 warps, half the rows each; no room left for the next call's block).
#   run(command="bash experiments/next-h200-s7e.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7e ats test_cuda_ops
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? ($(grep -c 'FAIL' $W/test_cuda_ops.log) FAIL lines)"; tail -1 $W/test_cuda_ops.log | tee -a "$S"
for v in "" WAIT=spin BPS=2 "BPS=2 CHUNK_KB=2" "WAIT=spin BPS=2" "WAIT=spin RING_KB=150" "WAIT=spin CHUNK_KB=2"; do
  [ $((SECONDS - T0)) -lt 420 ] || continue
  envs=""; for kv in $v; do envs="$envs ATS_GEMV_V4_$kv"; done
  env $envs timeout 60 $A bench kernels --skip-cpu --skip-model --reps 20 > "$W/bk-${v// /_}.txt" 2>&1
  say "v4 ${v:-defaults}:"; grep -E "^(Q4_0|Q4_K) +(ffn|attn_kv|gate)" "$W/bk-${v// /_}.txt" | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
