#!/bin/bash
# experiments/next-h200-s7f.sh — seventh session, seventh call (~3 minutes), issue 5: GEMV v4 with the per-item
# index math taken out of the loop. s7e: no knob helped (spin wait, 2 blocks a SM, bigger ring), and halving
# the chunk cost ~0.5 us an item; each item did 5 integer divisions (chunk bounds, the refill's bounds, the
# ring parity j / S), ~30 dependent instructions each at the measured 4.5 cycles an instruction. Now: a table
# of chunk bounds in shared memory and a parity bit. Prediction: ffn_up 17.1 -> 15-16 us (66-70% of the
# probe), graph 15.3 -> 13.5-14.5 (72-77%); CHUNK_KB=2 no longer slower than the default.
#   run(command="bash experiments/next-h200-s7f.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7f ats test_cuda_ops
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? ($(grep -c 'FAIL' $W/test_cuda_ops.log) FAIL lines)"; tail -1 $W/test_cuda_ops.log | tee -a "$S"
for v in "" "CHUNK_KB=2" "CHUNK_KB=6 RING_KB=110"; do
  envs=""; for kv in $v; do envs="$envs ATS_GEMV_V4_$kv"; done
  env $envs timeout 60 $A bench kernels --skip-cpu --skip-model --reps 20 > "$W/bk-${v// /_}.txt" 2>&1
  say "v4 ${v:-defaults}:"; grep -E "^(Q4_0|Q4_K) " "$W/bk-${v// /_}.txt" | tee -a "$S"
done
for k in "" v3; do
  ATS_GEMV_KERNEL=$k timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --prompt-tokens 128 -n 64 \
    2>&1 > /dev/null | grep -E "tok/s" | sed "s/^/ATS_GEMV_KERNEL=${k:-default}: /" | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
