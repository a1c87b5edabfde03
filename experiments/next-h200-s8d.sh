#!/bin/bash
# experiments/next-h200-s8d.sh — eighth session's closing GPU call (~6 minutes): every GPU CTest entry on the
# session's final tree, stories260K on cuda against the published greedy text, and the committed tables:
#   ats bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16          (GPU GEMV/GEMM + whole model)
#   ats bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8   (CPU, the new DRAM probe)
#   run(command="bash experiments/next-h200-s8d.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts8d ats test_cuda_ops test_cuda_model
cmake -S . -B "$B" -DATS_SHARED_DIR="$top/.gpu-shared" > /dev/null 2>&1
ctest --test-dir "$B" -L gpu --output-on-failure > $W/ctest-gpu.log 2>&1
say "[$((SECONDS - T0)) s] ctest -L gpu rc=$?: $(grep -E 'tests passed|tests failed' $W/ctest-gpu.log)"
grep -E "Passed|Failed|Not Run|\*\*\*" $W/ctest-gpu.log | tee -a "$S"
R=$top/.gpu-shared/models/stories260K
$A run --model $R/stories260K.gguf --backend cuda --temp 0 -n 256 > $W/stories-cuda.txt 2> $W/stories-cuda.err
cmp -s $W/stories-cuda.txt $R/reference_greedy_from_BOS.txt && say "stories260K cuda: byte-exact" ||
  say "stories260K cuda: DIFFERS ($(cmp $W/stories-cuda.txt $R/reference_greedy_from_BOS.txt 2>&1 | head -1))"
timeout 200 $A bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16 --out "$OUT/bench-kernels-gpu.json" > "$OUT/bench-kernels-gpu.txt" 2>&1
say "[$((SECONDS - T0)) s] bench kernels GPU rc=$?"; grep -E "HBM|^(Q4_0|Q4_K) |decode|prefill" "$OUT/bench-kernels-gpu.txt" | tee -a "$S"
[ $((SECONDS - T0)) -lt 420 ] && timeout 150 $A bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8 \
  --out "$OUT/bench-kernels-cpu.json" > "$OUT/bench-kernels-cpu.txt" 2>&1
say "[$((SECONDS - T0)) s] bench kernels CPU rc=$?"; grep -E "DRAM|^(Q4_0|Q4_K|Q8_0|F32) |decode|prefill" "$OUT/bench-kernels-cpu.txt" | tee -a "$S"
say "[$((SECONDS - T0)) s] done"
