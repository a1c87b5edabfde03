#!/bin/bash
# experiments/v4trace/ncu-h200.sh — GPU machine: Nsight Compute of one v4 call (Q4_0 and Q4_K ffn_up, the
# sixth call of v4_timeline's first burst): speed of light, memory, warp stall reasons, scheduler, pipes.
#   run(command="bash experiments/v4trace/ncu-h200.sh", timeout_s=300)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -lineinfo -Iexec/include -Isched/include -Iexec/cuda -o /tmp/v4_timeline \
  experiments/v4trace/v4_timeline.cu || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for t in q4_0 q4_k; do
  timeout 120 $NCU --kernel-name-base demangled --kernel-name "regex:gemv_v4_kernel" -s 5 -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
    /tmp/v4_timeline $t 17408 5120 8 > "$OUT/ncu-v4-$t-ffn_up.txt" 2>&1
  echo "$t rc=$?"
done
grep -hE "Duration|Memory Throughput|DRAM Throughput|Issue Slots Busy|Issued Warp|No Eligible|Eligible Warps|Active Warps|Stall|Shared|L1/TEX Hit|Mem Busy|Max Bandwidth|Mem Pipes|Registers|Achieved Occ" "$OUT"/ncu-v4-*.txt | head -80
