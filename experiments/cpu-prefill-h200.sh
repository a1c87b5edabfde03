#!/bin/bash
# experiments/cpu-prefill-h200.sh — one GPU-machine call (~3-7 minutes, CPU only), issue 5, task AC: CPU
# prefill of Qwen3-14B Q4_K_M after the AVX-512 VNNI Q4_K/Q6_K kernels (exec/src/cpu_matmul.c: 512-bit
# vpdpbusd + vpackssdw + vpdpwssd, corrections as vector madds, 8 tokens per weight row in prefill; the 1-token
# kernel is the VNNI decode dot). A/B in one binary: ATS_CPU_FEATURES=3 lowers the features to AVX2 +
# AVX-512 F/BW without VNNI, which runs the previous AVX2 Q4_K/Q6_K kernels (dot4_*_avx2, dot_*_avx2);
# 7 runs the new ones. Last measured (sixth session, AVX2 kernels): prefill 20.2 tok/s (128-token prompt,
# 16 threads), decode 6.34 tok/s. Prediction (AC, from 2-core Zen 4 measurements, see
# experiments/bench/bench-kernels.md "CPU prefill kernels (AC)"): prefill x1.7-2.5 (35-50 tok/s), decode
# unchanged to +20 % (72 % of its DRAM floor at 16 threads; x1.32 on the 2-core VM, compute-bound there).
#   run(command="bash experiments/cpu-prefill-h200.sh", carry=[".deps"], timeout_s=600)
# What to read in summary.txt: the "median prefill" lines (features 3 = before, 7 = after) and the
# bench's "cpu" whole-model row (prefill_tok/s, decode_tok/s) and its Q4_K / Q6_K GEMV rows (decode).
. experiments/h200-common.sh
h200_setup cpuprefill ats
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(grep -c '^processor' /proc/cpuinfo), avx512_vnni: $(grep -q avx512_vnni /proc/cpuinfo && echo yes || echo no)"
for rep in 1 2 3; do
  for f in 3 7; do
    ATS_CPU_FEATURES=$f timeout 120 $A run --model qwen3-14b --dummy-weights --backend cpu --threads 16 \
      --prompt-tokens 128 -n 8 > /dev/null 2> "$W/run-f$f-$rep.err"
    rc=$?
    say "features $f rep $rep rc=$rc: $(grep -E 'prompt [0-9]+ tok in' "$W/run-f$f-$rep.err" | sed 's/^ats run: //')"
    say "  $(grep 'op time' "$W/run-f$f-$rep.err" | sed 's/^ats run: //')"
  done
done
for f in 3 7; do
  med=$(grep -hoE '\(([0-9.]+) tok/s\); generated' "$W"/run-f$f-*.err | grep -oE '[0-9.]+' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "none"}')
  say "median prefill tok/s, features $f ($( [ $f = 3 ] && echo 'AVX2 K-quant kernels, before' || echo 'VNNI kernels, after')): $med"
done
timeout 360 $A bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8 --out "$OUT/bench-kernels-cpu.json" > "$W/bk.txt" 2>&1
say "bench kernels (CPU, VNNI kernels) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K|Q8_0) |^cpu |DRAM|prefill GEMM" "$W/bk.txt" | tee -a "$S"
# the in-tree CPU prefill GEMM table (ffn_up, 512 tokens) with the AVX2 kernels, for the A/B per type
ATS_CPU_FEATURES=3 timeout 120 $A bench kernels --skip-gpu --skip-model --threads 16 --reps 5 --out "$W/bk-f3.json" > "$W/bk-f3.txt" 2>&1
say "bench kernels (CPU, ATS_CPU_FEATURES=3: AVX2 kernels) rc=$?"; grep -A5 "prefill GEMM" "$W/bk-f3.txt" | tee -a "$S"
cp "$W/bk.txt" "$OUT/bench-kernels-cpu.txt"
