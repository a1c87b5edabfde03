#!/bin/bash
# experiments/model-speed/bench-model.sh OUT — `ats bench model` (llama-bench's form) on full-size weights:
# Qwen3-14B Q4_K_M dummy weights written as a GGUF file by `ats quantize --dummy-weights` (the file
# `llama-bench -m` can time too), timed from that file on the GPU (-r 5) and on the CPU (THREADS threads,
# -r 2), and the same weights built in memory (--dummy-weights) on the GPU, which must give the same rates
# within the run-to-run spread. Rows: OUT/bench-model-{cuda,cuda-dummy,cpu}.json and the tables in the summary.
# Parameters (environment): MODEL (qwen3-14b), QUANT (q4_k_m), THREADS (16), GGUF (/tmp/MODEL-QUANT-dummy.gguf).
# Prediction (model-speed/README.md: `ats run` decode 140-151 tok/s on the GPU, 6.9-8.9 tok/s on 16 CPU
# threads; prefill 1000-1870 tok/s on the GPU, 34-45 tok/s on the CPU): tg128 on cuda 135-150 tok/s (F16 KV
# cache), pp512 1500-2500 tok/s; cpu tg128 6-9 tok/s, pp512 30-45 tok/s.
. experiments/common.sh
ex_setup "${1:-}" ats
M=${MODEL:-qwen3-14b} Q=${QUANT:-q4_k_m}
G=${GGUF:-/tmp/$M-$Q-dummy.gguf}
timeout 200 "$A" quantize --dummy-weights --model "$M" --quant "$Q" "$G" 2>&1 | tail -1 | tee -a "$S"
say "[$((SECONDS - T0)) s] GGUF written"
timeout 150 "$A" bench model -m "$G" --backend cuda -p 512 -n 128 -r 5 --out "$OUT/bench-model-cuda.json" \
    > "$W/cuda.md" 2>&1; tee -a "$S" < "$W/cuda.md"
timeout 150 "$A" bench model --dummy-weights -m "$M" --quant "$Q" --backend cuda -p 512 -n 128 -r 5 \
    --out "$OUT/bench-model-cuda-dummy.json" > "$W/cuda-dummy.md" 2>&1; tee -a "$S" < "$W/cuda-dummy.md"
timeout 200 "$A" bench model -m "$G" --backend cpu -t "${THREADS:-16}" -p 512 -n 128 -r 2 \
    --out "$OUT/bench-model-cpu.json" > "$W/cpu.md" 2>&1; tee -a "$S" < "$W/cpu.md"
say "[$((SECONDS - T0)) s] done"
