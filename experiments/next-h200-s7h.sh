#!/bin/bash
# experiments/next-h200-s7h.sh — seventh session, last call (~2.5 minutes), issue 5:
#   1. test_cuda_ops on the final commit (the v4 experiment knobs WAIT/BPS were taken out after call g; the
#      default path is unchanged);
#   2. why Qwen3-14B Q4_K_M decode did not move with v4 (s7f: v4 145.8, v3 147.3 tok/s) although the bench's
#      Q4_K shapes got faster (attn_q 9.2 -> 8.5 us, attn_kv 6.2 -> 4.1, ffn_up 19.1 -> 17.2, and no quantize
#      kernel): Nsight Compute durations of the GEMV and quantize kernels in a 1-token prompt + 1 decode step,
#      v4 (default) against ATS_GEMV_KERNEL=v3, summed per kernel name. Prediction: v4's GEMV + quantize time
#      a token ~0.25-0.3 ms below v3's; if so, the whole-model step is bound elsewhere (host launches, other
#      kernels), not by these kernels.
#   run(command="bash experiments/next-h200-s7h.sh", carry=[".deps"], timeout_s=300)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7h ats test_cuda_ops
timeout 100 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops.log 2>&1
say "[$((SECONDS - T0)) s] test_cuda_ops rc=$? $(tail -1 $W/test_cuda_ops.log)"
for k in "" v3; do
  [ $((SECONDS - T0)) -lt 200 ] || continue
  ATS_GEMV_KERNEL=$k timeout 90 ncu --kernel-name-base demangled --kernel-name "regex:gemv|quantize" \
    --metrics gpu__time_duration.sum --csv --print-units base \
    $A run --model qwen3-14b --dummy-weights --backend cuda -n 1 --prompt-tokens 1 > $W/ncu-${k:-v4}.csv 2> $W/ncu-${k:-v4}.err
  say "[$((SECONDS - T0)) s] ncu ATS_GEMV_KERNEL=${k:-default} rc=$? (per kernel name: total us over 2 forwards, calls)"
  awk -F'","' 'NR > 1 && $0 ~ /gpu__time_duration/ { n = $5; sub(/\(.*/, "", n); v = $NF; gsub(/[",]/, "", v); t[n] += v; c[n]++; all += v }
    END { for (k in t) printf "%10.1f us %5d  %s\n", t[k] / 1e3, c[k], k; printf "%10.1f us total\n", all / 1e3 }' \
    $W/ncu-${k:-v4}.csv | sort -rn | head -12 | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
