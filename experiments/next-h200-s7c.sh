#!/bin/bash
# experiments/next-h200-s7c.sh — seventh session, third and fifth calls (~5 minutes), issue 5: GEMV v4 rebuilt with a
# pipeline per warp. Call 2 (s7b) showed the bulk-copy ring itself streams at 4.6 TB/s (tma_stream: 16 KB x 6
# slots, one block a SM) but v4 cost ~1 us per ring stage: the whole block waited for each stage, computed it
# with few warps and met at a __syncthreads, so the stage's latency chain was paid in full every time. Now
# every warp has its own ring of S slots (4 KB chunks of rows, own mbarriers, lane 0 refills after __syncwarp),
# takes every 8th (row, chunk) item of the block, and only the final sum meets at one __syncthreads.
# Prediction: Q4_0 / Q4_K ffn_up 65% / 56% (v3) -> 72-80% of the 4 GiB read probe; ffn_down alike;
# whole-model decode 148 (v3) -> 160-180 tok/s.
#   run(command="bash experiments/next-h200-s7c.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7c ats test_cuda_ops
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? ($(grep -c 'FAIL' $W/test_cuda_ops.log) FAIL lines)"; tail -1 $W/test_cuda_ops.log | tee -a "$S"
grep -E "FAIL|\(v4\)" $W/test_cuda_ops.log | head -20 | tee -a "$S"
timeout 120 $A bench kernels --skip-cpu --skip-model --reps 30 > $W/bk.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels GEMV (v4 default) rc=$?"
grep -E "^(Q4_0|Q4_K) |^type |HBM read" $W/bk.txt | tee -a "$S"
cp $W/bk.txt $OUT/bench-kernels-gpu-gemv-v4.txt
for cr in 2,96 4,96 3,150 3,200 8,96; do
  [ $((SECONDS - T0)) -lt 330 ] || continue
  ATS_GEMV_V4_CHUNK_KB=${cr%,*} ATS_GEMV_V4_RING_KB=${cr#*,} timeout 60 $A bench kernels --skip-cpu --skip-model --reps 20 > $W/bk-$cr.txt 2>&1
  say "chunk,ring KB = $cr:"; grep -E "^(Q4_0|Q4_K) +(ffn|attn_kv)" $W/bk-$cr.txt | tee -a "$S"
done
for k in "" v3; do
  [ $((SECONDS - T0)) -lt 450 ] || continue
  ATS_GEMV_KERNEL=$k timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --prompt-tokens 128 -n 64 \
    2>&1 > /dev/null | grep -E "tok/s" | sed "s/^/ATS_GEMV_KERNEL=${k:-default}: /" | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
# Fifth call (after ncu, s7d: 8 warps a SM, 2 eligible per scheduler, 4.5 cycles between a warp's
# instructions: latency-bound): 16 warps a block (2 slots each by default, 3 KB chunks), launch bounds
# (512, 2), the item walk without divisions. Prediction: ffn_up 21 -> 14-16 us.
