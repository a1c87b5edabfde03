#!/bin/bash
# experiments/kernels/gemv-timeline/ncu.sh OUT — Nsight Compute of one GEMV v4 call (the sixth call of a
# back-to-back burst of v4_timeline, Q4_0 and Q4_K ffn_up 5120->17408): speed of light, memory, warp stall
# reasons, scheduler, occupancy. Writes OUT/ncu-v4-<type>-ffn_up.txt and the key lines to OUT/summary.txt.
set -u
OUT=${1:?usage: $0 OUT}; mkdir -p "$OUT"
nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -lineinfo -Iexec/include -Isched/include -Iexec/kernels/cuda \
    -o /tmp/v4_timeline experiments/kernels/gemv-timeline/v4_timeline.cu || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine"; exit 1; }
for t in q4_0 q4_k; do
    timeout 120 "$NCU" --kernel-name-base demangled --kernel-name "regex:gemv_v4_kernel" -s 5 -c 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
        /tmp/v4_timeline $t 17408 5120 8 > "$OUT/ncu-v4-$t-ffn_up.txt" 2>&1
    echo "$t rc=$?"
done
grep -hE "Duration|Memory Throughput|DRAM Throughput|Issue Slots Busy|Issued Warp|No Eligible|Eligible Warps|Active Warps|Stall|L1/TEX Hit|Registers|Achieved Occ" \
    "$OUT"/ncu-v4-*.txt | head -80 | tee "$OUT/summary.txt"
