#!/bin/bash
# experiments/kernels/gemv-table-h200.sh — the decode GEMV table against the four-generation dispatch it
# replaces, on the H200 (one GPU-machine call). Run from the root of a tree that holds, ignored by git:
#   .dev/gemv-base   `git archive e79f6ed` (the tree before: gemv.cu, gemv_v2/v3/v4.cu chained, ATS_GEMV_* knobs)
#   .dev/gemv-cut    `git archive HEAD` of the tree to measure (the table of exec/kernels/cuda/gemv.cu)
#   .dev/shared      a copy of ../shared (stories260K), .deps (GSL, jansson: ../shared/tools/device-deps.sh)
# as `bash .dev/gemv-cut/experiments/kernels/gemv-table-h200.sh` with those four folders copied to the
# GPU machine beside the tree.
# 1. builds both (sm_90, RelWithDebInfo) side by side;
# 2. the branch's GPU tests (ctest -L gpu: test_cuda_ops, test_cuda_model) and stories260K greedy on cuda
#    against reference_greedy_from_BOS.txt;
# 3. `ats bench kernels --skip-cpu --skip-model --reps 30`, base and branch alternating, two rounds;
# 4. if time is left, Qwen3-14B Q4_K_M (dummy weights) decode on cuda, base and branch.
set -u
R=$PWD; D=$R/.deps/root/usr; T0=$SECONDS
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt; : > "$S"
say() { echo "$*" | tee -a "$S"; }
say "gemv-table-h200 $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null)"
build() { # tree build-dir targets...
  local t=$1 b=$2; shift 2
  cmake -S "$t" -B "$b" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D -DGSL_ROOT_DIR=$D \
    -DATS_SHARED_DIR=$R/.dev/shared > "$b.log" 2>&1 && cmake --build "$b" -j8 --target "$@" >> "$b.log" 2>&1
}
build .dev/gemv-base /tmp/bb ats & pb=$!
build .dev/gemv-cut /tmp/bc ats test_cuda_ops test_cuda_model & pc=$!
wait $pb; rb=$?; wait $pc; rc=$?
say "[$((SECONDS - T0)) s] build base rc=$rb, branch rc=$rc"
[ $rc = 0 ] || { tail -30 /tmp/bc.log | tee -a "$S"; exit 1; }
(cd /tmp/bc && timeout 150 ctest -L gpu --output-on-failure > "$OUT/gpu-tests.log" 2>&1)
say "[$((SECONDS - T0)) s] ctest -L gpu rc=$?: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log")"
grep -E "FAIL|checks, " "$OUT/gpu-tests.log" | head -20 | tee -a "$S"
M=$R/.dev/shared/models/stories260K
/tmp/bc/cli/ats run --model $M/stories260K.gguf --backend cuda --temp 0 -n 256 > /tmp/st.txt 2> /tmp/st.err
cmp -s /tmp/st.txt $M/reference_greedy_from_BOS.txt && say "stories260K cuda greedy: byte-exact" ||
  say "stories260K cuda greedy: DIFFERS ($(cmp /tmp/st.txt $M/reference_greedy_from_BOS.txt 2>&1 | head -1); $(tail -2 /tmp/st.err))"
for r in 1 2; do
  for v in base cut; do
    b=/tmp/bb; [ $v = cut ] && b=/tmp/bc
    [ -x $b/cli/ats ] || continue
    (cd .dev/gemv-$v && timeout 60 $b/cli/ats bench kernels --skip-cpu --skip-model --reps 30 \
      --out /tmp/bk-$v-$r.json > "$OUT/bench-$v-$r.txt" 2>&1)
    say "[$((SECONDS - T0)) s] bench kernels $v round $r rc=$?"
  done
done
for v in base cut; do
  [ $((SECONDS - T0)) -lt 200 ] || { say "decode $v skipped at $((SECONDS - T0)) s"; continue; }
  b=/tmp/bb; [ $v = cut ] && b=/tmp/bc
  (cd .dev/gemv-$v && timeout 40 $b/cli/ats run --model qwen3-14b --dummy-weights --backend cuda --prompt-tokens 128 -n 64 \
    2>&1 > /dev/null | grep -E "tok/s" | sed "s/^/$v: /" | tee -a "$S")
done
say "[$((SECONDS - T0)) s] done"
