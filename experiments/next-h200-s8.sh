#!/bin/bash
# experiments/next-h200-s8.sh — for the next session's first GPU call (~4 minutes), issue 5: does releasing the
# GEMV early help the whole-model decode? Seventh session (bench-kernels.md, "Why the whole model did not
# move"): GEMV v4 is faster than v3 back to back, but in a decode step most GEMVs follow RMSNorm or the
# attention kernel and pay v4's start-up (launch, first bulk copies, x quantization: single_us 20.3 against
# 16.9 us back to back for ffn_up). With ATS_PDL_EARLY=1, RMSNorm and the decode attention execute
# griddepcontrol.launch_dependents at their start, so the next GEMV (launched as a programmatic dependent;
# every GEMV kernel waits with griddepcontrol.wait before reading) streams weights while they run.
# Written without a GPU (compile-checked only). Step 3 is the CPU GEMV table with every weight type.
#   1. test_cuda_model and test_cuda_ops with ATS_PDL_EARLY=1 (correctness first), test_cuda_model default;
#   2. Qwen3-14B Q4_K_M decode tok/s on cuda, 3 interleaved pairs ATS_PDL_EARLY unset / 1, 128-token and
#      2048-token prompts. Prediction: +3.5-5% at 128 tokens (attn_q, ffn_gate after RMSNorm and attn_output
#      after attention: ~3 GEMVs a layer x 2-3 us x 40 layers of a ~7 ms step); less at 2048 (attention longer).
#      If it holds, make it the default (exc_pdl_early) and take the variable out.
#   run(command="bash experiments/next-h200-s8.sh", carry=[".deps", ".gpu-shared"], timeout_s=480)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts8 ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
ATS_PDL_EARLY=1 timeout 150 $B/tests/exec/test_cuda_model > $W/test_cuda_model-early.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_model ATS_PDL_EARLY=1 rc=$? $(tail -1 $W/test_cuda_model-early.log)"
ATS_PDL_EARLY=1 timeout 150 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops-early.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops ATS_PDL_EARLY=1 rc=$? $(tail -1 $W/test_cuda_ops-early.log)"
for p in 128 2048; do
  for rep in 1 2 3; do
    for e in 0 1; do
      [ $((SECONDS - T0)) -lt 400 ] || continue
      ATS_PDL_EARLY=$e timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens $p -n 64 \
        2>&1 > /dev/null | grep -oE "decode [0-9.]+ s \([0-9.]+ tok/s\)" | sed "s/^/prompt $p ATS_PDL_EARLY=$e rep $rep: /" | tee -a "$S"
    done
  done
done
# 3. the CPU GEMV table now has MXFP4, F16, BF16 and F32 rows too (seventh session; dev VM, 2 threads,
#    compute-bound: MXFP4 49-54% of DRAM, F16 46-69%, BF16 61-67%, F32 91-105%); first 16-thread figures.
[ $((SECONDS - T0)) -lt 380 ] && timeout 90 $A bench kernels --skip-gpu --skip-model --threads 16 --reps 20 --tokens 128 \
  --out "$OUT/bench-kernels-cpu.json" > $W/bkc.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels (CPU, all types) rc=$?"; grep -E "DRAM|^(Q4_0|Q4_K|Q8_0|Q6_K|MXFP4|F16|BF16|F32) " $W/bkc.txt | tee -a "$S"
say "[$((SECONDS - T0)) s] done"
