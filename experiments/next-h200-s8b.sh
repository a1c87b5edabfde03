#!/bin/bash
# experiments/next-h200-s8b.sh — eighth session, issue 5: correctness and speed of GEMV v4's stream split
# (ATS_GEMV_V4_SPLIT=stream, gemv_v4s_kernel) and of the masked high-nibble dp4a (common.cuh, v3 and v4).
#   1. test_cuda_ops: defaults (v3/v4 with the dp4a change), v4 everywhere with the stream split, v2 (D2 refactor);
#   2. v4_timeline: rows vs stream split, chunk 8 / 16 units, trigger start / last;
#   3. ats bench kernels GEMV table (no model), default vs ATS_GEMV_V4_SPLIT=stream.
#   run(command="bash experiments/next-h200-s8b.sh", carry=[".deps", ".gpu-shared"], timeout_s=540)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts8b ats test_cuda_ops
export ATS_SHARED_DIR=$top/.gpu-shared
for v in "" "ATS_GEMV_KERNEL=v4 ATS_GEMV_V4_SPLIT=stream" "ATS_GEMV_KERNEL=v4 ATS_GEMV_V4_SPLIT=stream ATS_GEMV_V4_CHUNK_UNITS=1" "ATS_GEMV_KERNEL=v2"; do
  n=$(echo "${v:-default}" | tr ' =' '_-')
  env $v timeout 150 $B/tests/exec/test_cuda_ops > $W/test_cuda_ops-$n.log 2>&1
  say "[$((SECONDS - T0)) s] test_cuda_ops $v rc=$? $(tail -1 $W/test_cuda_ops-$n.log)"
done
nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -Iexec/include -Isched/include -Iexec/cuda -o /tmp/v4_timeline \
  experiments/v4trace/v4_timeline.cu > $W/v4trace.txt 2>&1 || say "v4_timeline build failed"
t() { echo "== $*" >> $W/v4trace.txt; env "$@" >> $W/v4trace.txt 2>&1; }
for shape in "q4_0 17408 5120" "q4_k 17408 5120" "q4_0 5120 5120" "q4_k 1024 5120" "q4_k 34816 5120"; do
  t /tmp/v4_timeline $shape
  t ATS_GEMV_V4_SPLIT=stream /tmp/v4_timeline $shape
  t ATS_GEMV_V4_SPLIT=stream ATS_GEMV_V4_TRIGGER=last /tmp/v4_timeline $shape
  t ATS_GEMV_V4_SPLIT=stream ATS_GEMV_V4_CHUNK_UNITS=16 /tmp/v4_timeline $shape
  t ATS_GEMV_V4_SPLIT=stream ATS_GEMV_V4_CHUNK_UNITS=4 /tmp/v4_timeline $shape
done
for shape in "q4_0 5120 17408" "q4_k 5120 17408"; do
  t ATS_GEMV_KERNEL=v4 /tmp/v4_timeline $shape
  t ATS_GEMV_KERNEL=v4 ATS_GEMV_V4_SPLIT=stream /tmp/v4_timeline $shape
done
grep -E "^==|untraced|^median|mbarrier" $W/v4trace.txt > $OUT/v4trace-summary.txt
say "[$((SECONDS - T0)) s] v4_timeline done"
for v in "" "ATS_GEMV_V4_SPLIT=stream"; do
  [ $((SECONDS - T0)) -lt 420 ] || continue
  n=$(echo "${v:-default}" | tr ' =' '_-')
  env $v timeout 100 $A bench kernels --skip-cpu --skip-model --reps 30 > $W/bk-$n.txt 2>&1
  say "[$((SECONDS - T0)) s] bench kernels $v rc=$?"; grep -E "^(Q4_0|Q4_K) " $W/bk-$n.txt | tee -a "$S"
done
say "[$((SECONDS - T0)) s] done"
