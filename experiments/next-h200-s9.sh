#!/bin/bash
# experiments/next-h200-s9.sh — ninth session's one GPU-machine call (~6-8 minutes), issue 5: the tree with
# the two CPU branches merged (cpu-prefill-q4: Q4_0/Q8_0 AVX-512 VNNI prefill kernels; cpu-q4-decode: the
# SIMD Q8_1/Q8_K activation quantizers and the 4-rows-a-call Q4_0/MXFP4 decode kernels).
#   run(command="bash experiments/next-h200-s9.sh", carry=[".deps", ".gpu-shared"], timeout_s=580)
# 1. builds the whole tree (sm_90, every target) and, beside it, `before` = the same tree CPU-only with
#    -DEX_DECODE_ONE_ROW -DEX_QUANT_SCALAR (the decode path as it was before cpu-q4-decode);
# 2. the whole CTest suite on this machine (AVX-512 VNNI host + H200; the GPU entries run), stories260K on cuda;
# 3. CPU decode GEMV A/B at 16 threads, interleaved after/before, 2 rounds:
#      ats bench kernels --skip-gpu --skip-model --threads 16 --reps 20
# 4. the committed CPU table with the whole model:
#      ats bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8
# Prediction (cpu-q4-decode-h200.sh's header): Q4_0 ffn_up 65.5 -> 73-80 GB/s, ffn_down 59.9 -> 72-80 GB/s
# (>= 60 % of the ~122 GB/s probe); MXFP4 ffn_down +10-20 %; Q4_K/Q8_0 unchanged within +-5 % except the
# SIMD Q8_K quantizer's share of a call; CPU whole-model decode (Q4_K_M: Q4_K + Q6_K) +0-5 %; the prefill GEMM
# Q4_0/Q8_0 rows x1.8-2.5 over s8d's 213 / 327 ms... (cpu-prefill-q4-h200.sh's header).
. experiments/h200-common.sh
T0=$SECONDS
name=nexts9
W=/tmp/$name; B=/tmp/$name-build; S=$OUT/summary.txt
mkdir -p "$OUT" "$W"; : > "$S"
trap "(cd /tmp && tar czf '$OUT/$name.tgz' '$name')" EXIT
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
say "$name $(date -u +%FT%TZ), kernel $(uname -r), cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
DEPS="-DCMAKE_PREFIX_PATH=$top/.deps/root/usr -DGSL_ROOT_DIR=$top/.deps/root/usr"
(cmake -S . -B "$B" $DEPS -DCMAKE_CUDA_ARCHITECTURES=90 -DATS_CUDA=ON -DATS_SHARED_DIR="$top/.gpu-shared" > "$W/build.log" 2>&1 &&
  cmake --build "$B" -j12 >> "$W/build.log" 2>&1) & pa=$!
(cmake -S . -B /tmp/$name-before $DEPS -DATS_CUDA=OFF -DCMAKE_C_FLAGS="-DEX_DECODE_ONE_ROW -DEX_QUANT_SCALAR" > "$W/build-before.log" 2>&1 &&
  cmake --build /tmp/$name-before -j4 --target ats >> "$W/build-before.log" 2>&1) & pb=$!
wait $pa; ra=$?; wait $pb; rb=$?
say "[$((SECONDS - T0)) s] build rc=$ra, before build rc=$rb"
[ $ra = 0 ] || { tail -30 "$W/build.log" | tee -a "$S"; exit 1; }
A=$B/cli/ats
timeout 200 ctest --test-dir "$B" -j8 --output-on-failure > $W/ctest.log 2>&1
say "[$((SECONDS - T0)) s] ctest rc=$?: $(grep -E 'tests passed|tests failed' $W/ctest.log)"
grep -E "\*\*\*|Failed|Not Run" $W/ctest.log | head -20 | tee -a "$S"
R=$top/.gpu-shared/models/stories260K
$A run --model $R/stories260K.gguf --backend cuda --temp 0 -n 256 > $W/stories-cuda.txt 2> $W/stories-cuda.err
cmp -s $W/stories-cuda.txt $R/reference_greedy_from_BOS.txt && say "stories260K cuda: byte-exact" ||
  say "stories260K cuda: DIFFERS ($(cmp $W/stories-cuda.txt $R/reference_greedy_from_BOS.txt 2>&1 | head -1))"
for r in 1 2; do
  for v in after before; do
    [ $((SECONDS - T0)) -gt 400 ] && { say "A/B $v round $r skipped at $((SECONDS - T0)) s"; continue; }
    [ $v = before ] && { [ $rb = 0 ] || continue; bin=/tmp/$name-before/cli/ats; } || bin=$A
    (cd $W && timeout 60 $bin bench kernels --skip-gpu --skip-model --threads 16 --reps 20 --out "$W/ab-$v-$r.json" > "$W/ab-$v-$r.txt" 2>&1)
    say "[$((SECONDS - T0)) s] $v round $r rc=$?: $(grep -o 'bandwidth [0-9.]* GB/s' "$W/ab-$v-$r.txt" | head -1)"
    grep -E "^(Q4_0|MXFP4|Q4_K|Q8_0) " "$W/ab-$v-$r.txt" | sed "s/^/  $v /" | tee -a "$S"
  done
done
if [ $((SECONDS - T0)) -lt 470 ]; then
  timeout 90 $A bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8 \
    --out "$OUT/bench-kernels-cpu.json" > "$OUT/bench-kernels-cpu.txt" 2>&1
  say "[$((SECONDS - T0)) s] bench kernels CPU rc=$?"
  grep -E "DRAM|^(Q4_0|Q4_K|Q8_0|Q6_K|MXFP4) |decode|prefill|^cpu " "$OUT/bench-kernels-cpu.txt" | tee -a "$S"
else
  say "CPU table skipped at $((SECONDS - T0)) s"
fi
cp $W/ctest.log "$OUT/" 2>/dev/null
say "[$((SECONDS - T0)) s] done"
