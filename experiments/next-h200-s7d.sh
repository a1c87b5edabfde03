#!/bin/bash
# experiments/next-h200-s7d.sh — seventh session, fourth call (~2 minutes): Nsight Compute on GEMV v4 (Q4_0 and
# Q4_K ffn_up 5120->17408), after s7c measured v4 at 21 us where v3 takes 16.5 (the per-warp pipeline
# streams ~18 GB/s per SM; the bulk copies alone reach 35). Question: are the warps stalled on the
# mbarrier (memory latency: too few bytes in flight) or on their own math (shared-memory loads, dp4a)?
#   run(command="bash experiments/next-h200-s7d.sh", carry=[".deps"], timeout_s=300)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts7d ats
for k in 2 12; do   # template argument: ATS_Q_Q4_0 = 2, ATS_Q_Q4_K = 12; launch 4 of each is ffn_up 5120->17408
timeout 120 ncu --kernel-name-base demangled --kernel-name "regex:gemv_v4_kernel<.int.$k>" --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section LaunchStats --section SourceCounters \
  $A bench kernels --skip-cpu --skip-model --reps 2 > $W/ncu-$k.txt 2>&1
say "[$((SECONDS - T0)) s] ncu $k rc=$?"
grep -E "gemv_v4|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Stall|stall|Warp Cycles|Issued Warp|Eligible|Active Warps|No Eligible|Shared|Bank|Registers|Achieved Occ|Theoretical Occ|Block Limit|Dynamic Shared" $W/ncu-$k.txt | head -60 | tee -a "$S"
done
cp $W/ncu-2.txt $W/ncu-12.txt $OUT/
say "[$((SECONDS - T0)) s] done"
