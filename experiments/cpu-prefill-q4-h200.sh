#!/bin/bash
# experiments/cpu-prefill-q4-h200.sh — one GPU-machine call (~3-5 minutes; 168 s on the 2-core dev VM; CPU only), issue 5, task AE: main
# against branch `cpu-prefill-q4` (Q4_0 / Q8_0 AVX-512 VNNI prefill kernels, exec/src/cpu_matmul.c
# `dotn_q80_vnni`: 4 and 8 tokens per weight row, two tokens per 512-bit vector, the decode kernel's float
# work bit for bit; decode itself runs main's 1-token kernel unchanged).
# Run from main's root, the branch's source tree in .run:
#   rm -rf .run && mkdir .run && git archive cpu-prefill-q4 | tar -x -C .run
#   run(command="bash .run/experiments/cpu-prefill-q4-h200.sh", carry=[".deps", ".run"], timeout_s=420)
# Builds main (the repository root) and the branch (.run) with the same flags (CPU only: -DATS_CUDA=OFF,
# RelWithDebInfo, target ats), then 3 interleaved pairs (main, branch, main, ...) of
#   ats bench kernels --skip-gpu --skip-model --threads 16 --reps 10 --tokens 128
# and prints, per type, the median over the 3 runs of the CPU decode GEMV (µs, ffn_up and ffn_down rows)
# and of the CPU prefill GEMM (GMAC/s, ffn_up 5120->17408 at 128 tokens) for main and the branch.
# What to read in summary.txt: the "median" table at the end (and the per-run lines above it).
# Prediction (AE, from the 2-core Zen 4 dev VM, where 2 threads gave Q4_0 51 -> 122, Q8_0 60 -> 123 GMAC/s and
# 1 thread 26 -> 61 / 30 -> 61; the H200 host is 16 Xeon cores with AVX-512 VNNI): prefill GEMM Q4_0 and
# Q8_0 x1.8-2.5 over main (the 512-bit multiplies run on fewer ports on a Xeon than the dev VM's double-pumped
# 256-bit units, so nearer x1.8); Q4_K / Q6_K unchanged (same code); decode GEMV µs of every type within
# the run-to-run noise (+-5 %): Q4_0 / Q8_0 decode is main's code, the only change in its path is one
# branch in ex_cpu_matmul.
. experiments/h200-common.sh
name=cpuprefillq4
W=/tmp/$name; S=$OUT/summary.txt
mkdir -p "$OUT" "$W"; : > "$S"
trap "(cd /tmp && tar czf '$OUT/$name.tgz' '$name')" EXIT
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
t_start=$(date +%s)
say "$name $(date -u +%FT%TZ), main tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), branch tree .run, kernel $(uname -r)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(grep -c '^processor' /proc/cpuinfo), avx512_vnni: $(grep -q avx512_vnni /proc/cpuinfo && echo yes || echo no)"
[ -f .run/CMakeLists.txt ] || { say "no .run/CMakeLists.txt: make .run with git archive cpu-prefill-q4 (see the header)"; exit 1; }
build() { # build SRC DIR: the same flags for both trees
  cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$top/.deps/root/usr" -DGSL_ROOT_DIR="$top/.deps/root/usr" \
        -DATS_CUDA=OFF > "$W/build-$3.log" 2>&1 &&
    cmake --build "$2" -j"$(( $(nproc) / 2 ))" --target ats >> "$W/build-$3.log" 2>&1
}
build . /tmp/$name-main main & p1=$!
build .run /tmp/$name-branch branch & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
if [ $r1 != 0 ] || [ $r2 != 0 ]; then
  say "build FAILED (main rc=$r1, branch rc=$r2)"; tail -20 "$W/build-main.log" "$W/build-branch.log"; exit 1
fi
say "built both in $(( $(date +%s) - t_start )) s"
for rep in 1 2 3; do
  for v in main branch; do
    (cd "$W" && timeout 80 /tmp/$name-$v/cli/ats bench kernels --skip-gpu --skip-model --threads 16 --reps 10 \
      --tokens 128 --out "$W/bk-$v-$rep.json" > "$W/bk-$v-$rep.txt" 2>&1)
    rc=$?
    say "$v rep $rep rc=$rc ($(( $(date +%s) - t_start )) s): $(grep -o 'DRAM read bandwidth [0-9.]* GB/s' "$W/bk-$v-$rep.txt")"
    grep -E "^(Q4_0|Q8_0|Q4_K|Q6_K) " "$W/bk-$v-$rep.txt" | sed 's/^/  /' | tee -a "$S"
  done
done
# medians over the 3 runs: GEMV rows are "type shape... MB median_us GB/s of_DRAM" (7 fields, shape is 2
# words), prefill rows "type median_ms GMAC/s tok/s" (4 fields)
say ""
say "median of 3 runs (16 threads): decode GEMV us (ffn_up, ffn_down) and prefill GEMM GMAC/s (ffn_up, 128 tokens)"
say "type   up_main  up_branch  down_main  down_branch  prefill_main  prefill_branch  prefill_x"
med() { sort -g | awk '{v[NR]=$1} END {if (NR) printf "%.1f", v[int((NR+1)/2)]; else printf "none"}'; }
for t in Q4_0 Q8_0 Q4_K Q6_K; do
  um=$(cat "$W"/bk-main-*.txt | awk -v t=$t '$1==t && $2=="ffn_up" && NF==7 {print $5}' | med)
  ub=$(cat "$W"/bk-branch-*.txt | awk -v t=$t '$1==t && $2=="ffn_up" && NF==7 {print $5}' | med)
  dm=$(cat "$W"/bk-main-*.txt | awk -v t=$t '$1==t && $2=="ffn_down" && NF==7 {print $5}' | med)
  db=$(cat "$W"/bk-branch-*.txt | awk -v t=$t '$1==t && $2=="ffn_down" && NF==7 {print $5}' | med)
  pm=$(cat "$W"/bk-main-*.txt | awk -v t=$t '$1==t && NF==4 {print $3}' | med)
  pb=$(cat "$W"/bk-branch-*.txt | awk -v t=$t '$1==t && NF==4 {print $3}' | med)
  px=$(awk -v a="$pm" -v b="$pb" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf "x%.2f", b / a; else printf "-"}')
  say "$(printf '%-6s %8s %10s %10s %12s %13s %15s %10s' $t "$um" "$ub" "$dm" "$db" "$pm" "$pb" "$px")"
done
say "total $(( $(date +%s) - t_start )) s"
