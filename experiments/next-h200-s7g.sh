#!/bin/bash
# experiments/next-h200-s7g.sh — seventh session, last call (~4 minutes), issue 5, on the commit that makes GEMV
# v4 the default for Q4_0/Q4_K up to 8192 columns (v3 keeps ffn_down's 17408):
#   1. test_cuda_ops with the defaults and with ATS_GEMV_KERNEL=v4 (every shape v4 can take), test_cuda_model
#      (stories260K on the GPU included), stories260K `ats run` on cuda byte-exact;
#   2. the whole GPU bench (results file): GEMV table, prefill GEMM, Qwen3-14B Q4_K_M decode/prefill.
#      Prediction: Q4_0 ffn_up ~64% of the probe (graph ~70%), Q4_K ffn_up ~63% (68%), gate+up >= 75% for
#      both, ffn_down as v3 (~58%); whole-model decode within 3% of 146 tok/s (s7f: v4 145.8, v3 147.3);
#   3. the CPU prefill kernels of the sixth session (AC: AVX-512 VNNI Q4_K/Q6_K) never run on the H200: one
#      128-token prefill each with ATS_CPU_FEATURES=3 (AVX2 kernels) and 7 (VNNI). Prediction: 20 -> 35-50 tok/s.
#   run(command="bash experiments/next-h200-s7g.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7g ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? $(tail -1 $W/test_cuda_ops.log)"
ATS_GEMV_KERNEL=v4 timeout 200 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops-v4.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops (ATS_GEMV_KERNEL=v4) rc=$? $(tail -1 $W/test_cuda_ops-v4.log)"
grep -E "FAIL|gemv .*\((v4|v3)\)" $W/test_cuda_ops.log $W/test_cuda_ops-v4.log | head -30 | tee -a "$S"
timeout 150 $B/tests/exec/test_cuda_model > $W/test_cuda_model.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_model rc=$? $(tail -1 $W/test_cuda_model.log)"
M=$top/.gpu-shared/models/stories260K
$A run --model $M/stories260K.gguf --temp 0 -n 256 --backend cuda 2> $W/run-cuda.err | cmp -s - $M/reference_greedy_from_BOS.txt \
  && say "GPU stories260K: byte-exact" || say "GPU stories260K: DIFFERS from reference_greedy_from_BOS.txt"
timeout 200 $A bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16 --out "$OUT/bench-kernels-gpu.json" > $W/bk.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels (GPU, defaults) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K|Q8_0) |^gpu |^type |HBM read" $W/bk.txt | tee -a "$S"
cp $W/bk.txt "$OUT/bench-kernels-gpu.txt"
for f in 3 7; do
  [ $((SECONDS - T0)) -lt 500 ] || continue
  ATS_CPU_FEATURES=$f timeout 90 $A run --model qwen3-14b --dummy-weights --backend cpu --threads 16 \
    --prompt-tokens 128 -n 8 > /dev/null 2> "$W/cpu-f$f.err"
  say "CPU 16 threads, ATS_CPU_FEATURES=$f rc=$?: $(grep -E 'prompt [0-9]+ tok in' "$W/cpu-f$f.err" | sed 's/^ats run: //')"
done
say "[$((SECONDS - T0)) s] done"
