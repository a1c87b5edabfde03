#!/bin/sh
# The hybrid-executor figures (experiments/hybrid-executor/README.md): every policy at the brief's
# budgets on Qwen3-14B and Qwen3-30B-A3B (random q4_k_m weights, 16 threads, 512-token prompt in one
# chunk, 32 generated tokens), then the sanitizer runs on a small random MoE. Usage: run.sh ATS_BINARY
set -u
A=${1:-build/cli/ats}
D=$(dirname "$0")
for p in ats layer static static-opoffload layer-opoffload gpu-stream ats-paper; do
    timeout 120 "$A" run --model qwen3-14b --dummy-weights --prompt-tokens 512 -n 32 --threads 16 --policy $p \
        --vram-budget 4.5GiB; echo "qwen3-14b $p rc=$?"
done
for p in ats layer expert static; do
    timeout 120 "$A" run --model qwen3-30b-a3b --dummy-weights --prompt-tokens 512 -n 32 --threads 16 --policy $p \
        --vram-budget 9.5GiB; echo "qwen3-30b-a3b $p rc=$?"
done
