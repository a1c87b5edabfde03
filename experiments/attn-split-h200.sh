#!/bin/bash
# experiments/attn-split-h200.sh — task AA (issue 5, speed): decode attention at long contexts on the H200,
# branch attn-split. Aim: under 3 minutes of device time (later steps are skipped once 170 s have passed).
#
# PREDICTION (written before any GPU run; today at 90a0058: 43 tok/s at a 2048-token prompt with f32 AND f16,
# 133 tok/s at a 128-token prompt): Qwen3-14B dummy Q4_K_M decode at ctx 4096 / 2048-token prompt
# 105-125 tok/s with --kv-type f32 and a little more (+0-5 %) with f16; the 128-token prompt 135-150 tok/s
# (its attention, 128-192 positions, also ran 4 warps x 32-48 serial steps and now runs 8 warps x ~10).
# Why: the old kernel gave each of the 40 (head, token) blocks 4 warps stepping one position at a time
# (512 dependent steps at 2048 positions, ~0.4 ms a layer); now 16 warps x a cluster of 6 blocks per head
# (sm_90 flash-decoding split merged through distributed shared memory), two positions a step: ~11 steps,
# ~10-20 us a layer, 0.4-0.8 ms a token over the 128-token decode's ~7.5 ms.
#
# What to look at in $OUT/summary.txt:
#   1. "test_cuda_ops rc=0" and every "attention... long ... split N" line at <= 2e-5 (CHECK failed lines
#      would be printed right after); "test_cuda_model rc=0".
#   2. The "decode ... tok/s" of the four `ats run` lines (2048-token prompt f32, f16; 128-token prompt f32,
#      f16) against the prediction above.
#   3. A/B at the 2048-token prompt, f32 (if time is left): ATS_ATTN_SHAPE=4,1 (the pre-AA block shape,
#      with the two-positions step), 16,1 (more warps, no split), 16,8 (the largest split): which part of
#      the gain comes from where.
# Run from the repository root on the GPU machine (branch attn-split checked out):
#   run(command="bash experiments/attn-split-h200.sh", carry=[".deps", ".gpu-shared"], timeout_s=400)
# Lands in $OUT/attnsplit.tgz plus $OUT/summary.txt.
. experiments/h200-common.sh
T0=$SECONDS
h200_setup attnsplit ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
say "build done at $((SECONDS - T0)) s"
timeout 90 $B/tests/exec/test_cuda_ops > $W/ops.log 2>&1
say "test_cuda_ops rc=$? $(tail -1 $W/ops.log)"; grep -E "CHECK failed|attention" $W/ops.log | head -60 | tee -a "$S"
timeout 60 $B/tests/exec/test_cuda_model > $W/model.log 2>&1
say "test_cuda_model rc=$? $(tail -1 $W/model.log)"; grep -E "CHECK failed|stories260K" $W/model.log | head -10 | tee -a "$S"
for pt in 2048 128; do
  for t in f32 f16; do
    say "Qwen3-14B dummy Q4_K_M, cuda, ctx 4096, prompt $pt, -n 64, --kv-type $t:"
    timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens $pt -n 64 --kv-type $t \
      2>&1 > /dev/null | tail -4 | tee -a "$S"
  done
done
for sh in 4,1 16,1 16,8; do
  [ $((SECONDS - T0)) -lt 170 ] || { say "A/B ATS_ATTN_SHAPE=$sh skipped: $((SECONDS - T0)) s gone"; continue; }
  say "A/B ATS_ATTN_SHAPE=$sh, prompt 2048, f32:"
  ATS_ATTN_SHAPE=$sh timeout 40 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 2048 \
    -n 64 --kv-type f32 2>&1 > /dev/null | grep -E "decode .*tok/s|op time" | tee -a "$S"
done   # (sixth session's run printed only the op-time line: `tail -1`; the decode tok/s line is now kept too)
say "total $((SECONDS - T0)) s"
