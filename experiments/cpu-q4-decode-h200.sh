#!/bin/bash
# experiments/cpu-q4-decode-h200.sh — one GPU-machine call (CPU only, ~3-4 minutes), issue 5, task AJ
# (branch cpu-q4-decode): the CPU decode GEMV of Q4_0 and MXFP4 at Qwen3-14B shapes, 16 threads, before /
# after. Last measured (experiments/bench/gpu-2026-11-30-s8/bench-kernels-cpu.txt, DRAM probe 122.2 GB/s):
# Q4_0 ffn_up 65.5 GB/s (53.6 %), ffn_down 59.9 (49.0 %); MXFP4 61.2 / 57.3 (50.0 / 46.9 %); target 60 %.
# What changed (exec/src/cpu_matmul.c), each bit for bit the old results:
#   - quant_q8_1_avx2: a decode call quantized its one token serially with lrintf (a libm call), ~5.7 ns a
#     float on the dev VM: 90 us for ffn_down's 17408 inputs; now ~0.4 ns a float;
#   - 4 weight rows a call for one token (Q4_0: 512-bit VNNI, two rows a zmm; MXFP4: 4 x 256-bit): four
#     independent FMA chains, one activation load for four rows; each call prefetches the next 4 rows into
#     L2 (the 4 row streams in one 4 KiB page lost the hardware prefetchers on the dev VM).
# Dev VM (Zen 4, 1 thread, interleaved, best of 4 medians): Q4_0 ffn_up 3273 -> 3075 us, ffn_down 4979 ->
# 2991 us; cache-resident (256 rows) the Q4_0 kernel alone is 1.25-1.3x faster, the MXFP4 one no faster
# (its gain is the quantizer and the prefetch: ffn_down 5262 -> 4258 us; ffn_up 3772 -> 4292 us, slower).
# Prediction at 16 threads here (the core is the bound: ~4 GB/s a core): Q4_0 ffn_up 65.5 -> 73-80 GB/s,
# ffn_down 59.9 -> 72-80 GB/s (>= 60 % of 122 GB/s, the ~80 GB/s where Q8_0/Q4_K sit is the likely cap);
# MXFP4 ffn_down +10-20 %, ffn_up -5..+10 % (uncertain: slower on ffn_up on the dev VM).
# Three builds of this tree, CUDA off (only `ats`), in /tmp, A/B in one machine session:
#   before = -DEX_DECODE_ONE_ROW -DEX_QUANT_SCALAR (main's decode path: one-row kernels, scalar quantizer),
#   after  = the branch as committed,
#   onerow = -DEX_DECODE_ONE_ROW (the SIMD quantizer alone: separates the two changes).
# Each runs `ats bench kernels --skip-gpu --skip-model --threads 16 --reps 30`, ROUNDS (3) times interleaved
# (onerow is dropped from a round once 150 s have gone, a round once 200 s have).
#   run(command="bash experiments/cpu-q4-decode-h200.sh", carry=[".deps"], timeout_s=420)
# What to read in summary.txt: per round the DRAM line and the Q4_0 / MXFP4 rows of each build, then the
# median GB/s per build and row over the rounds ("median over rounds").
set -u
top=$(pwd)
OUT=${OUT:-$top/next-out}
THREADS=${THREADS:-16}
REPS=${REPS:-30}
ROUNDS=${ROUNDS:-3}
name=cpuq4dec
W=/tmp/$name
S=$OUT/summary.txt
mkdir -p "$OUT" "$W"
: > "$S"
say() { echo "$*" | tee -a "$S"; }
trap "(cd /tmp && tar czf '$OUT/$name.tgz' '$name')" EXIT
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
T0=$SECONDS
say "$name $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), kernel $(uname -r)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(grep -c '^processor' /proc/cpuinfo), avx512_vnni: $(grep -q avx512_vnni /proc/cpuinfo && echo yes || echo no)"
build() { # NAME C_FLAGS
  cmake -S . -B "/tmp/$name-$1" -DCMAKE_PREFIX_PATH="$top/.deps/root/usr" -DGSL_ROOT_DIR="$top/.deps/root/usr" \
        -DATS_CUDA=OFF -DCMAKE_C_FLAGS="$2" > "$W/build-$1.log" 2>&1 &&
    cmake --build "/tmp/$name-$1" -j"$(nproc)" --target ats >> "$W/build-$1.log" 2>&1
}
VARIANTS="before after onerow"
build before "-DEX_DECODE_ONE_ROW -DEX_QUANT_SCALAR" & pb=$!
build after "" & pa=$!
build onerow "-DEX_DECODE_ONE_ROW" & po=$!
ok=1
for p in "before $pb" "after $pa" "onerow $po"; do
  set -- $p
  wait "$2" || { say "build $1 FAILED"; tail -20 "$W/build-$1.log" | tee -a "$S"; ok=0; }
done
[ $ok = 1 ] || exit 1
say "built in $((SECONDS - T0)) s"
for r in $(seq "$ROUNDS"); do
  if [ $((SECONDS - T0)) -gt 200 ]; then say "round $r skipped: $((SECONDS - T0)) s gone"; break; fi
  for v in $VARIANTS; do
    if [ $v = onerow ] && [ $((SECONDS - T0)) -gt 150 ]; then say "onerow round $r skipped: $((SECONDS - T0)) s gone"; continue; fi
    t=$SECONDS
    timeout 100 "/tmp/$name-$v/cli/ats" bench kernels --skip-gpu --skip-model --threads "$THREADS" --reps "$REPS" \
      --out "$W/bk-$v-$r.json" > "$W/bk-$v-$r.txt" 2>&1
    say "$v round $r rc=$? ($((SECONDS - t)) s): $(grep -m1 'measured DRAM' "$W/bk-$v-$r.txt" | sed 's/.*bandwidth //')"
    grep -E "^(Q4_0|MXFP4) " "$W/bk-$v-$r.txt" | sed "s/^/  $v /" | tee -a "$S"
  done
done
say "median over rounds (GB/s; of_DRAM against each run's own probe in the rows above):"
for v in $VARIANTS; do
  cat "$W"/bk-$v-*.txt 2>/dev/null | awk -v v=$v '/^(Q4_0|MXFP4) / {k = $1 " " $2; g[k] = g[k] " " $6}
    END {for (k in g) {n = split(g[k], a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) {x = a[i]; a[i] = a[j]; a[j] = x}
         printf "  %-7s %-14s %6.1f GB/s (n=%d:%s)\n", v, k, a[int((n + 1) / 2)], n, g[k]}}' | sort -k2,3 | tee -a "$S"
done
say "done in $((SECONDS - T0)) s"
