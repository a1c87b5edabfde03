#!/bin/bash
# experiments/kernels/run.sh OUT [gpu] [cpu] — the committed kernel tables: `ats bench kernels` on the GPU
# machine, GPU part and CPU part in separate runs (each with its whole-model row), as
# OUT/bench-kernels-{gpu,cpu}.{json,txt}. Copy them next to this script to update the committed figures.
# With no part named, both run.
# Parameters (environment): REPS (30), THREADS (CPU threads, 16), PROMPT (whole-model prompt tokens, 128),
# DECODE_GPU (16), DECODE_CPU (8), MODEL (qwen3-14b), SKIP_MODEL=1 (GEMV/GEMM tables only).
. experiments/common.sh
out=${1:-}; shift || true
parts=${*:-gpu cpu}
ex_setup "$out" ats
model_flags="--model ${MODEL:-qwen3-14b} --prompt ${PROMPT:-128}"
[ "${SKIP_MODEL:-0}" = 1 ] && model_flags="--skip-model"
for p in $parts; do
    case $p in
    gpu) flags="--skip-cpu --reps ${REPS:-30} $model_flags --decode ${DECODE_GPU:-16}" ;;
    cpu) flags="--skip-gpu --threads ${THREADS:-16} --reps ${REPS:-30} $model_flags --decode ${DECODE_CPU:-8}" ;;
    *) say "unknown part '$p' (gpu, cpu)"; exit 2 ;;
    esac
    say "ats bench kernels $flags"
    timeout 400 "$A" bench kernels $flags --out "$OUT/bench-kernels-$p.json" > "$OUT/bench-kernels-$p.txt" 2>&1
    say "[$((SECONDS - T0)) s] $p rc=$?"
    grep -E "bandwidth|HBM read|^(Q4_0|Q4_K) |^(gpu|cpu) " "$OUT/bench-kernels-$p.txt" | tee -a "$S"
done
