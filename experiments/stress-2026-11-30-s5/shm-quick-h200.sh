#!/bin/bash
# experiments/stress-2026-11-30-s5/shm-quick-h200.sh — the last ~2 minutes of the fifth session's device time:
# a CPU-only build and 6 + 6 idle baselines in separate processes, shared probe matrix and private
# (ATS_PROBE_PRIVATE=1) alternating, ms per GEMV. Prediction: shared within +-3 % of each other, private
# spread as in this session (0.243-0.314 ms in 17 processes).
#   run(command="bash experiments/stress-2026-11-30-s5/shm-quick-h200.sh", carry=[".deps"], timeout_s=60)
set -u
top=$(pwd); OUT=${OUT:-$top/shm-out}; mkdir -p "$OUT"; S=$OUT/summary.txt
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=/tmp/shmq-build
cmake -S . -B $B -DCMAKE_PREFIX_PATH=$top/.deps/root/usr -DGSL_ROOT_DIR=$top/.deps/root/usr -DATS_CUDA=OFF > $OUT/build.log 2>&1 &&
  cmake --build $B -j"$(nproc)" --target ats >> $OUT/build.log 2>&1 || { echo "build FAILED" | tee $S; tail -5 $OUT/build.log; exit 1; }
A=$B/cli/ats
rm -f /dev/shm/ats-probe-a1-2048x2048
for i in 1 2 3 4 5 6; do
  for m in shared private; do
    pv=""; [ $m = private ] && pv=1
    ATS_PROBE_PRIVATE=$pv $A record --save-baseline /tmp/b-$m-$i.txt --baseline-s 1 --cpu-only > /tmp/b-$m-$i.log 2>&1
  done
done
for m in shared private; do
  echo "idle ms per GEMV, $m: $(for i in 1 2 3 4 5 6; do awk '{printf "%.4f ", $1*1e3/$4}' /tmp/b-$m-$i.txt; done)" | tee -a $S
done
grep -ho "GEMV float ([^)]*)" /tmp/b-*-1.log | tee -a $S
