#!/bin/bash
# experiments/next-h200.sh — the first GPU-machine call of the next session (~7 minutes), for the two
# checks this session could not run (no device time left):
#   1. issue 6: `ats stress`'s probes now run in a process of their own (the CPU bias of +5...+13% seen
#      on the H200 was traced to probes inside the hog process on the 2-core VM): one fig13 run with the
#      defaults, `ats trace compare --margin 5 --max-err 0.1` (rc 0 = every phase within 10 %).
#   2. issue 5: the opt-in Q4_K GEMV staged through shared memory (ATS_GEMV_V3_Q4K=smem): correctness
#      (test_cuda_ops) and the GEMV table next to the default's (predicted Q4_K ffn_up 58% -> 62-66%).
# Run from the repository root on the GPU machine, e.g. with the device tool:
#   run(command="bash experiments/next-h200.sh", carry=[".deps"], timeout_s=600)
# (.deps: GSL from ../shared/tools/device-deps.sh.) Everything lands in $OUT/next.tgz (one file: the
# device tool returns at most 8) plus $OUT/h200-fig13.h5 and $OUT/summary.txt.
set -u
top=$(pwd)
OUT=${OUT:-$top/next-out}
W=/tmp/next; B=/tmp/next-build; mkdir -p "$OUT" "$W"
S=$OUT/summary.txt; : > "$S"
say() { echo "$*" | tee -a "$S"; }
fin() { (cd /tmp && tar czf "$OUT/next.tgz" next); }
trap fin EXIT
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
say "next-h200.sh $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), kernel $(uname -r)"
cmake -S . -B $B -DCMAKE_PREFIX_PATH=$top/.deps/root/usr -DGSL_ROOT_DIR=$top/.deps/root/usr \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DATS_CUDA=ON > $W/build.log 2>&1 &&
  cmake --build $B -j"$(nproc)" --target ats test_cuda_ops test_cuda_model >> $W/build.log 2>&1 || { say "build FAILED"; tail -20 $W/build.log; exit 1; }
A=$B/cli/ats
timeout 200 $B/tests/exec/test_cuda_model > $W/model.log 2>&1; say "test_cuda_model rc=$? $(tail -1 $W/model.log)"
for v in direct smem; do
  ATS_GEMV_V3_Q4K=$v timeout 120 $B/tests/exec/test_cuda_ops > $W/ops-$v.log 2>&1; say "test_cuda_ops Q4K=$v rc=$? $(tail -1 $W/ops-$v.log)"
  ATS_GEMV_V3_Q4K=$v timeout 120 $A bench kernels --skip-cpu --skip-model --reps 30 --out $W/bk-$v.json > $W/bk-$v.txt 2>&1
  say "bench Q4K=$v rc=$?"; grep -E "^Q4_K " $W/bk-$v.txt | tee -a "$S"
done
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16" timeout 300 traces/record-h200.sh $W/rec baseline fig13 > $W/rec.log 2>&1
say "fig13 rc=$? (0: every phase within 10 %)"
grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY" $W/rec.log | tee -a "$S"
cp $W/rec/fig13.h5 "$OUT/h200-fig13.h5" 2>/dev/null
