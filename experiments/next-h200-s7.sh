#!/bin/bash
# experiments/next-h200-s7.sh — first GPU-machine call of the seventh session (~6 minutes), issue 5.
# Where a Qwen3-14B Q4_K_M decode step goes after the sixth session's attention split (141.8 tok/s at a
# 128-token prompt = 26.1 % of the 544 tok/s floor; 139.6 at 2048 positions), and which of the split's
# three parts (more warps, two positions a step, the cluster split) carries the long-context gain.
#   1. ncu per-kernel durations of a 1-token prompt + 2 decode steps (fifth session, before the split:
#      Q4_K GEMV 3.0 ms, Q6_K 1.5, RMSNorm 0.78, quantize 0.73, RoPE 0.27, add 0.19, attention 0.16 per
#      token). Prediction: attention ~0.1 ms, the rest unchanged; kernels other than GEMVs ~2.2 ms a token,
#      the lead for fusing (norm + quantize, Q/K norm + RoPE).
#   2. decode tok/s at the 2048-token prompt with ATS_ATTN_SHAPE=4,1 / 16,1 / 16,8 and the default.
#      Prediction: 4,1 ~45 tok/s (as before), 16,1 ~100, 16,8 and default ~140.
#   run(command="bash experiments/next-h200-s7.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7 ats
if command -v ncu > /dev/null; then
  timeout 240 ncu --metrics gpu__time_duration.sum --csv --print-units base \
    $A run --model qwen3-14b --dummy-weights --backend cuda -n 2 --prompt-tokens 1 > $W/ncu.csv 2> $W/ncu.err
  say "ncu rc=$? (per kernel name: total ms over the 3 steps, calls)"
  awk -F'","' 'NR > 1 && $0 ~ /gpu__time_duration/ { n = $5; sub(/[<(].*/, "", n); v = $NF; gsub(/[",]/, "", v); t[n] += v; c[n]++ }
    END { for (k in t) printf "%10.3f ms %6d  %s\n", t[k] / 1e6, c[k], k }' \
    $W/ncu.csv | sort -rn | head -25 | tee -a "$S"
else say "no ncu"; fi
for sh in "" 4,1 16,1 16,8; do
  [ $((SECONDS - T0)) -lt 500 ] || { say "ATS_ATTN_SHAPE=$sh skipped"; continue; }
  say "ATS_ATTN_SHAPE=${sh:-default}, prompt 2048, f32:"
  ATS_ATTN_SHAPE=$sh timeout 60 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 \
    --prompt-tokens 2048 -n 64 --kv-type f32 2>&1 > /dev/null | grep -E "decode .*tok/s" | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
