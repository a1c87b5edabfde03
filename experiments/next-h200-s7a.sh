#!/bin/bash
# experiments/next-h200-s7a.sh — seventh session, first GPU-machine call (~7 minutes), issue 5: GEMV v4
# (exec/cuda/gemv_v4.cu: one kernel a call, TMA bulk copies of the weights into a shared-memory ring, x
# quantized by every block, chain-safe programmatic launch; default for Q4_0/Q4_K on sm_90).
#   1. test_cuda_ops (new: test_gemv_v4_shapes; the chain tests now run v4 back to back) and test_cuda_model.
#   2. The GEMV table with v4 (default) and with ATS_GEMV_KERNEL=v3 (the sixth session's kernels).
#      Prediction (written before any run): the fixed 3-5 us a call goes (no quantize kernel, ramp hidden by
#      bulk copies issued before griddepcontrol.wait, the next call's block starting in this one's tail), and
#      the bulk copies stream near the probe: Q4_0 ffn_up 65% -> 75-82% of the 4 GiB read probe, Q4_K 56% ->
#      72-80%, ffn_down alike; attn_kv (2.9 MB) 10% -> 20-30%; gate+up Q4_0 76% -> 82-88%.
#   3. Whole-model Qwen3-14B Q4_K_M decode on cuda (128-token prompt, 64 steps), v4 vs v3. Prediction: the
#      Q4_K GEMVs (3.0 ms of ~7 ms a token) drop ~25% and the 240 quantize launches go: 141.8 -> 160-185 tok/s.
#   run(command="bash experiments/next-h200-s7a.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7a ats test_cuda_ops test_cuda_model
say "[$((SECONDS - T0)) s] built"
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? ($(grep -c 'FAIL' $W/test_cuda_ops.log) FAIL lines)"
grep -E "FAIL|gemv .*\((v4|v3)\)|back to back" $W/test_cuda_ops.log | head -40 | tee -a "$S"
tail -3 $W/test_cuda_ops.log | tee -a "$S"
for k in "" v3; do
  ATS_GEMV_KERNEL=$k timeout 120 $A bench kernels --skip-cpu --skip-model --reps 30 --out $W/bk-${k:-v4}.json > $W/bk-${k:-v4}.txt 2>&1
  say "[$((SECONDS - T0)) s] bench kernels GEMV, ATS_GEMV_KERNEL=${k:-(default)} rc=$?"
  grep -E "^(Q4_0|Q4_K|Q8_0) |^type |HBM read" $W/bk-${k:-v4}.txt | tee -a "$S"
done
cp $W/bk-v4.txt $OUT/bench-kernels-gpu-gemv-v4.txt; cp $W/bk-v3.txt $OUT/bench-kernels-gpu-gemv-v3.txt
for rep in 1 2; do
  for k in "" v3; do
    [ $((SECONDS - T0)) -lt 480 ] || continue
    ATS_GEMV_KERNEL=$k timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --prompt-tokens 128 -n 64 \
      2>&1 > /dev/null | grep -E "tok/s" | sed "s/^/ATS_GEMV_KERNEL=${k:-default} rep $rep: /" | tee -a "$S"
  done
done
timeout 120 $B/tests/exec/test_cuda_model > $W/test_cuda_model.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_model rc=$?"; tail -2 $W/test_cuda_model.log | tee -a "$S"
say "[$((SECONDS - T0)) s] done"
