#!/bin/bash
# experiments/next-h200-c.sh — a third GPU-machine call for the next session if device time is left (~6
# minutes; the bench is cut at 420 s), issue 5: the CPU side of `ats bench kernels` (decode GEMV vs DRAM
# read at 16 threads, whole-model Qwen3-14B Q4_K_M on the CPU) after ex_cpu_features stopped running cpuid
# on every call (9.2 us a call on the dev VM; the H200 host is a VM too). Last measured in the second
# session: Q4_0/Q4_K ffn_up 82% of DRAM read, whole-model CPU decode 6.7 tok/s (floor 9.3). Prediction:
# GEMV +0-2 points, decode +1-3 %.
#   run(command="bash experiments/next-h200-c.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
h200_setup nextc ats
timeout 420 $A bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8 --out "$OUT/bench-kernels-cpu.json" > $W/bk.txt 2>&1
say "bench kernels (CPU) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K|Q8_0) |^cpu |DRAM" $W/bk.txt | tee -a "$S"
