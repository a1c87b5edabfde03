#!/bin/bash
# experiments/gpu-kernels/run-h200.sh — one GPU-machine call: build this tree (ats, test_cuda_ops) and, for
# the baseline, the tree BASE (default: the checkout the device tool sent, i.e. main) side by side; run
# test_cuda_ops; then `ats bench kernels` (GPU rows, warm whole-model prefill of 512 tokens and 128 decode
# steps) for Qwen3-14B and Qwen3-30B-A3B on this tree, and the whole-model rows of the baseline.
# Run from the root of the checkout the device tool sent, this tree at $TREE (default .dev/gpu-prefill),
# .deps carried (GSL):  bash .dev/gpu-prefill/experiments/gpu-kernels/run-h200.sh
# Results under $OUT (at most 8 files): summary.txt, tests.log, new-14b.txt, new-30b.txt, base-*.txt
# (BASE_MODELS, default "qwen3-30b-a3b"), build.log. BUDGET_S (default 230) bounds the whole call; later
# steps are skipped.
set -u
R=$(pwd)
TREE=${TREE:-.dev/gpu-prefill}
BASE=${BASE:-$R}
OUT=${OUT:-$R/out}
BUDGET_S=${BUDGET_S:-230}
S=$OUT/summary.txt
mkdir -p "$OUT"; : > "$S"
say() { echo "[$SECONDS s] $*" | tee -a "$S"; }
D=$R/.deps/root/usr
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export ATS_SHARED_DIR=$R/.dev/shared
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$D \
        -DGSL_ROOT_DIR=$D -DATS_SHARED_DIR=$R/.dev/shared; }
say "gpu-kernels $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
( cfg "$TREE" /tmp/b-new && cmake --build /tmp/b-new -j10 --target ats test_cuda_ops ) > "$OUT/build.log" 2>&1 &
pn=$!
( cfg "$BASE" /tmp/b-base && cmake --build /tmp/b-base -j6 --target ats ) > /tmp/build-base.log 2>&1 &
pb=$!
wait $pn; rn=$?; wait $pb; rb=$?
say "build new rc=$rn base rc=$rb"
[ $rn = 0 ] || { tail -30 "$OUT/build.log"; exit 1; }
left() { echo $((BUDGET_S - SECONDS)); }
run() { # NAME LIMIT CMD...
    local n=$1 l=$2; shift 2
    [ "$(left)" -lt 15 ] && { say "$n SKIPPED"; return; }
    [ "$l" -gt "$(left)" ] && l=$(left)
    timeout "$l" "$@" > "$OUT/$n" 2>&1; say "$n rc=$?"
}
run tests.log 60 /tmp/b-new/tests/exec/test_cuda_ops
grep -E "prefill|FAIL|fail|passed" "$OUT/tests.log" | tail -40 >> "$S"
B="bench kernels --skip-cpu --reps 6 --tokens 512 --prompt 512 --decode 128"
run new-30b.txt 70 /tmp/b-new/cli/ats $B --model qwen3-30b-a3b --out /tmp/n30.json
run new-14b.txt 60 /tmp/b-new/cli/ats $B --model qwen3-14b --out /tmp/n14.json
for m in ${BASE_MODELS-qwen3-30b-a3b}; do
  [ $rb = 0 ] && run base-$m.txt 60 /tmp/b-base/cli/ats $B --model $m --out /tmp/b-$m.json
done
for f in new-30b.txt new-14b.txt base-*.txt; do
  [ -f "$OUT/$f" ] && { echo "== $f" >> "$S"; grep -E -A4 "^prefill GEMM|^prefill attention|^routed|^whole model|^gpu " "$OUT/$f" >> "$S"; }
done
say done
