#!/bin/bash
# experiments/v4trace/run-h200.sh — GPU machine, repository root: builds v4_timeline (sm_90) and traces
# Qwen3-14B shapes with the default v4 and with the late launch_dependents variant
# (ATS_GEMV_V4_TRIGGER=last; the L2-prefetch and unroll experiments of the eighth session are in
# experiments/bench/gpu-2026-11-30-s8/v4trace-{b,c-unroll}.txt, their code was removed). Output: $OUT/v4trace.txt.
#   run(command="bash experiments/v4trace/run-h200.sh", timeout_s=300)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; R=$OUT/v4trace.txt
nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -Iexec/include -Isched/include -Iexec/cuda -o /tmp/v4_timeline \
  experiments/v4trace/v4_timeline.cu > "$R" 2>&1 || { cat "$R"; exit 1; }
t() { echo "== $*" >> "$R"; env "$@" >> "$R" 2>&1; }
for shape in "q4_0 17408 5120" "q4_k 17408 5120" "q4_0 5120 5120" "q4_k 34816 5120"; do
  t /tmp/v4_timeline $shape
  t ATS_GEMV_V4_TRIGGER=last /tmp/v4_timeline $shape
done
grep -E "^==|untraced|^median|mbarrier" "$R"
