#!/bin/bash
# experiments/bench-model-h200.sh — `ats bench model` on the H200 machine: Qwen3-14B Q4_K_M dummy weights written
# as a GGUF file by `ats quantize --dummy-weights` (the file llama-bench could time too), then timed from that
# file on the GPU (-r 5) and on the CPU (16 threads, -r 2), and the same weights built in memory
# (--dummy-weights) on the GPU, which must give the same rates within the run-to-run spread.
# Prediction (experiments/bench/bench-kernels.md: `ats run` decode 140-146 tok/s on the GPU, 8.7-8.9 tok/s on
# 16 CPU threads; prefill 1400-1870 tok/s at 128 tokens on the GPU, 35-45 tok/s on the CPU): tg128 on cuda
# 135-150 tok/s (F16 KV cache here, F32 there: at most a few % apart at 128 tokens), pp512 1500-2500 tok/s;
# cpu tg128 8-9 tok/s, pp512 30-45 tok/s. Load of the 9 GB file well under the 19.5 s of building the weights.
#   run(command="bash experiments/bench-model-h200.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup benchmodel ats test_bench_model test_exec_dummy_gguf
say "[$((SECONDS - T0)) s] built"
(cd "$B" && ATS_SHARED_DIR=$top/../shared timeout 120 ctest -R "test_bench_model|test_exec_dummy_gguf" > "$W/ctest.log" 2>&1)
say "ctest: $(grep 'tests passed' "$W/ctest.log")"
G=/tmp/qwen3-14b-q4_k_m-dummy.gguf
timeout 150 $A quantize --dummy-weights --model qwen3-14b --quant q4_k_m "$G" 2>&1 | tail -1 | tee -a "$S"
say "[$((SECONDS - T0)) s] GGUF written"
timeout 120 $A bench model -m "$G" --backend cuda -p 512 -n 128 -r 5 --out "$OUT/bench-model-cuda.json" > "$W/cuda.md" 2>&1
cat "$W/cuda.md" | tee -a "$S"
say "[$((SECONDS - T0)) s] cuda done"
timeout 120 $A bench model --dummy-weights -m qwen3-14b --quant q4_k_m --backend cuda -p 512 -n 128 -r 5 \
  --out "$OUT/bench-model-cuda-dummy.json" > "$W/cuda-dummy.md" 2>&1
cat "$W/cuda-dummy.md" | tee -a "$S"
say "[$((SECONDS - T0)) s] cuda (in-memory dummy weights) done"
timeout 170 $A bench model -m "$G" --backend cpu -t 16 -p 512 -n 128 -r 2 --out "$OUT/bench-model-cpu.json" > "$W/cpu.md" 2>&1
cat "$W/cpu.md" | tee -a "$S"
say "[$((SECONDS - T0)) s] done"
