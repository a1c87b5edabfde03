#!/bin/bash
# experiments/cpu-kernels/run-h200.sh — one GPU-machine call (CPU only, ~3-5 minutes): CPU prefill of the
# K-quants on AMX tiles (exec/kernels/cpu/cpu_amx.c) against the AVX-512 VNNI kernels, 16 threads, in one
# binary: ATS_CPU_FEATURES=15 (AMX) vs 7 (VNNI, the path before). Question, predictions and results:
# experiments/cpu-kernels/README.md. Run from the root of this tree; OUT (first parameter) gets summary.txt
# and cpuk.tgz (every log and JSON). Environment: DEPS (a .deps/root/usr with GSL and jansson, default
# ./.deps/root/usr), BASE (a tree without the MoE decode change, for that A/B), QUICK=1 (one rep).
#   bash experiments/cpu-kernels/run-h200.sh OUT
set -u
top=$(pwd)
OUT=${1:-${OUT:-$top/out}}
D=${DEPS:-$top/.deps/root/usr}
W=/tmp/cpuk B=/tmp/cpuk-build S=$OUT/summary.txt
mkdir -p "$OUT" "$W"
: > "$S"
say() { echo "$*" | tee -a "$S"; }
trap "(cd /tmp && tar czf '$OUT/cpuk.tgz' cpuk)" EXIT
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
say "cpuk $(date -u +%FT%TZ), kernel $(uname -r)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(grep -c '^processor' /proc/cpuinfo), flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512_vnni|amx_tile|amx_int8' | tr '\n' ' ')"
cmake -S . -B "$B" -G Ninja -DATS_CUDA=OFF -DCMAKE_PREFIX_PATH="$D" -DGSL_ROOT_DIR="$D" > "$W/build.log" 2>&1 &&
  cmake --build "$B" -j16 --target ats >> "$W/build.log" 2>&1 || { say "build FAILED"; tail -20 "$W/build.log" | tee -a "$S"; exit 1; }
A=$B/cli/ats
# 1. the prefill GEMM table (ffn_up 5120 -> 17408, 128 tokens) per type, AMX then VNNI
for f in 15 7; do
  ATS_CPU_FEATURES=$f timeout 150 "$A" bench kernels --skip-gpu --skip-model --threads 16 --reps 5 --tokens 128 \
    --out "$W/bk-f$f.json" > "$W/bk-f$f.txt" 2>&1
  say "bench kernels --skip-model, features $f rc=$?"; grep -A6 "CPU prefill GEMM" "$W/bk-f$f.txt" | tee -a "$S"
done
# 2. whole model on the CPU: Qwen3-14B Q4_K_M 128-token prompt (prefill), 8 decode steps; A/B interleaved
REPS2=${QUICK:+1}; REPS2=${REPS2:-2}   # QUICK=1: one rep, no step 4 (short of device time)
for rep in $(seq 1 $REPS2); do
  for f in 15 7; do
    [ $rep = 2 ] && [ $f = 7 ] && continue
    ATS_CPU_FEATURES=$f timeout 150 "$A" run --model qwen3-14b --dummy-weights --backend cpu --threads 16 \
      --prompt-tokens 128 -n 8 > /dev/null 2> "$W/run14-f$f-$rep.err"
    say "14B features $f rep $rep rc=$?: $(grep -E 'prompt [0-9]+ tok in' "$W/run14-f$f-$rep.err" | sed 's/^ats run: //')"
  done
done
# 3. Qwen3-30B-A3B Q4_K_M: 128-token prompt (tokens gathered per expert: AMX from 8 tokens an expert) and 32
#    decode steps; BASE (a tree without the batched MoE decode, built the same way) for the decode A/B
if [ -n "${BASE:-}" ]; then
  cmake -S "$BASE" -B "$B-base" -G Ninja -DATS_CUDA=OFF -DCMAKE_PREFIX_PATH="$D" -DGSL_ROOT_DIR="$D" > "$W/build-base.log" 2>&1 &&
    cmake --build "$B-base" -j16 --target ats >> "$W/build-base.log" 2>&1 || say "base build FAILED"
fi
for rep in $(seq 1 $REPS2); do
  for v in new:15 new:7 base:15; do
    [ $rep = 2 ] && [ $v != new:15 ] && continue
    bin=$A; [ "${v%%:*}" = base ] && bin=$B-base/cli/ats
    [ -x "$bin" ] || continue
    f=${v##*:}
    ATS_CPU_FEATURES=$f timeout 200 "$bin" run --model qwen3-30b-a3b --dummy-weights --backend cpu --threads 16 \
      --prompt-tokens 128 -n 32 > /dev/null 2> "$W/run30-${v%%:*}-f$f-$rep.err"
    say "30B-A3B ${v%%:*} features $f rep $rep rc=$?: $(grep -E 'prompt [0-9]+ tok in' "$W/run30-${v%%:*}-f$f-$rep.err" | sed 's/^ats run: //')"
  done
done
# 4. the bench's own whole-model CPU rows (the command of the llama.cpp comparison), AMX on
[ -n "${QUICK:-}" ] && BENCH_MODELS=none
for m in ${BENCH_MODELS:-qwen3-14b}; do
  [ "$m" = none ] && continue
  timeout 240 "$A" bench kernels --skip-gpu --threads 16 --reps 5 --tokens 128 --prompt 128 --decode 16 --model $m \
    --out "$W/bk-model-$m.json" > "$W/bk-model-$m.txt" 2>&1
  say "bench kernels --skip-gpu --model $m rc=$?"; grep -iE "^cpu |prefill|decode" "$W/bk-model-$m.txt" | tail -6 | tee -a "$S"
done
cp "$W"/bk-f15.json "$OUT/" 2>/dev/null
