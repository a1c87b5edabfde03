#!/bin/bash
# experiments/bench/gpu-final.sh — the one GPU-machine call for issue 5's GEMV speed figures:
# build (sm_90 only: ats, test_cuda_ops, test_cuda_model), correctness first, then `ats bench kernels`
# with the default GEMV kernels (v3 for Q4_0/Q4_K, v2 for Q8_0/Q6_K) and v1 (ATS_GEMV_KERNEL=v1) side
# by side; the CUDA op test also with ATS_GEMV_KERNEL=v2 and v1. ~4-5 minutes.
#
# Run from the repository root on the GPU machine, e.g. with the device tool:
#   run(command="bash experiments/bench/gpu-final.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
# .deps/: GSL unpacked by ../shared/tools/device-deps.sh (the machine has HDF5, not GSL).
# Shared models: $ATS_SHARED_DIR, else ../shared, else .gpu-shared (a copy of the needed
# ../shared/models/stories260K files inside the checkout, ignored by git, carried).
# Writes at most 8 files under $OUT (the device tool's limit):
#   summary.txt      verdicts and the GEMV rows that matter (read this first)
#   build.log        configure + build
#   tests.log        test_cuda_ops (default; v2 everywhere, also with ATS_GEMV_MAX_BLOCKS=1 so
#                    warps take many rows; v1), test_cuda_model, stories260K greedy runs vs the reference
#   bench-kernels.json / .txt         GPU bench, default GEMV kernels (the figures to commit)
#   bench-kernels-v1.json / -v1.txt   GPU part only, GEMV v1 (same options), for the comparison
# Every step has a time limit and later steps are skipped when the budget (BUDGET_S, default 540 s)
# runs out, so the call returns what it has. NO_BENCH=1: build and correctness only (a dry run).
set -u
top=$(pwd)
OUT=${OUT:-$top/gpu-final-out}
mkdir -p "$OUT"
S=$OUT/summary.txt
T=$OUT/tests.log
B=${BUILD_DIR:-build-gpu-final}
BUDGET_S=${BUDGET_S:-540}
: >"$S"
: >"$T"
say() { echo "$*" | tee -a "$S"; }
left() { echo $((BUDGET_S - SECONDS)); }
# step NAME LIMIT_S LOG CMD...: runs CMD with a time limit (shortened to the budget left), appends
# its output to LOG, records "NAME: rc=N (Ns)" in the summary; skipped when < 20 s are left.
step() {
    local name=$1 lim=$2 log=$3
    shift 3
    local l
    l=$(left)
    if [ "$l" -lt 20 ]; then say "$name: SKIPPED (budget spent)"; return 99; fi
    [ "$lim" -gt "$l" ] && lim=$l
    echo "===== $name (limit ${lim}s): $*" >>"$log"
    local t0=$SECONDS
    timeout "$lim" "$@" >>"$log" 2>&1
    local rc=$?
    say "$name: rc=$rc ($((SECONDS - t0)) s)"
    return $rc
}

# ---- environment ------------------------------------------------------------------------------
SH=""
for c in "${ATS_SHARED_DIR:-}" ../shared .gpu-shared; do
    if [ -n "$c" ] && [ -f "$c/models/stories260K/stories260K.gguf" ]; then SH=$(cd "$c" && pwd); break; fi
done
export ATS_SHARED_DIR=${SH:-$top/../shared}
export ATS_SOURCE_DIR=$top
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
say "gpu-final.sh at $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '(no git metadata)'), shared: $ATS_SHARED_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee -a "$S"
nproc | sed 's/^/cores: /' | tee -a "$S"

# ---- build --------------------------------------------------------------------------------------
step configure 90 "$OUT/build.log" cmake -S . -B "$B" -DCMAKE_CUDA_ARCHITECTURES=90 -DATS_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$top/.deps/root/usr" -DGSL_ROOT_DIR="$top/.deps/root/usr" ||
    { tail -30 "$OUT/build.log" >>"$S"; exit 1; }
step build 240 "$OUT/build.log" cmake --build "$B" -j"$(nproc)" --target ats test_cuda_ops test_cuda_model ||
    { grep -E "error|Error" "$OUT/build.log" | head -30 >>"$S"; exit 1; }
ATS=$B/cli/ats
[ -x "$ATS" ] || ATS=$(find "$B" -name ats -type f -perm -u+x | head -1)
OPS=$(find "$B" -name test_cuda_ops -type f -perm -u+x | head -1)
MODEL=$(find "$B" -name test_cuda_model -type f -perm -u+x | head -1)

# ---- correctness --------------------------------------------------------------------------------
# test summary line(s) of the last run in tests.log
verdict() { awk '/^===== /{n=0; delete a} {a[++n]=$0} END{for(i=1;i<=n;i++) print a[i]}' "$T" |
    grep -E "seed|checks|failed|FAIL|skipped" | tail -4 | sed 's/^/    /' | tee -a "$S"; }
step "test_cuda_ops (GEMV default)" 120 "$T" "$OPS"; verdict
step "test_cuda_ops (GEMV v2, ATS_GEMV_MAX_BLOCKS=1)" 120 "$T" env ATS_GEMV_KERNEL=v2 ATS_GEMV_MAX_BLOCKS=1 "$OPS"; verdict
step "test_cuda_model (GEMV default)" 150 "$T" "$MODEL"; verdict

# stories260K greedy from BOS, 256 tokens: token ids against the reference (top1_id of the
# per-step CSV, or the .ids.txt beside it), and the text against reference_greedy_from_BOS.txt.
M=$ATS_SHARED_DIR/models/stories260K
ref_ids=$OUT/.ref_ids
if [ -f "$M/reference_greedy_from_BOS.ids.txt" ]; then tr -s ' \n' '  ' <"$M/reference_greedy_from_BOS.ids.txt" | xargs >"$ref_ids"
elif [ -f "$M/reference_greedy_steps.csv" ]; then tail -n +2 "$M/reference_greedy_steps.csv" | cut -d, -f3 | xargs >"$ref_ids"
fi
compare_ids() { # $1 = label, $2 = file with the run's ids
    local got ref n_same=0 i
    got=($(cat "$2")) ref=($(cat "$ref_ids" 2>/dev/null))
    for ((i = 0; i < ${#ref[@]} && i < ${#got[@]}; i++)); do [ "${got[$i]}" = "${ref[$i]}" ] || break; n_same=$((n_same + 1)); done
    say "    $1: ${#got[@]} ids, first $n_same equal to the reference's ${#ref[@]}"
}
gpu_flag=""
if "$ATS" run --help 2>&1 | grep -q -- '--backend'; then gpu_flag="--backend cuda"
elif "$ATS" run --help 2>&1 | grep -q -- '--gpu'; then gpu_flag="--gpu"; fi
for be in cpu gpu; do
    flags=""
    if [ $be = gpu ]; then
        if [ -z "$gpu_flag" ]; then say "ats run on the GPU: SKIPPED (ats run has no backend flag in this tree; test_cuda_model covers stories260K on the GPU)"; continue; fi
        flags=$gpu_flag
    fi
    step "ats run stories260K ($be, ids)" 60 "$T" bash -c "'$ATS' run --model '$M/stories260K.gguf' --temp 0 -n 256 --print-ids $flags >'$OUT/.ids_$be' 2>>'$T'" &&
        compare_ids "$be" "$OUT/.ids_$be"
    if [ -f "$M/reference_greedy_from_BOS.txt" ]; then
        step "ats run stories260K ($be, text)" 60 "$T" bash -c "'$ATS' run --model '$M/stories260K.gguf' --temp 0 -n 256 $flags >'$OUT/.text_$be' 2>>'$T'" &&
            { if diff -q "$OUT/.text_$be" "$M/reference_greedy_from_BOS.txt" >/dev/null; then say "    $be text: identical to reference_greedy_from_BOS.txt"
              else say "    $be text: DIFFERS from reference_greedy_from_BOS.txt"; diff "$OUT/.text_$be" "$M/reference_greedy_from_BOS.txt" | head -5 >>"$T"; fi; }
    fi
done
rm -f "$OUT"/.ids_* "$OUT"/.text_* "$ref_ids"

# ---- speed: the options of the committed results ------------------------------------------------
if [ -n "${NO_BENCH:-}" ]; then say "bench: SKIPPED (NO_BENCH set: a dry run of this script)"; BUDGET_S=0; fi
# GPU-only first (the GEMV target); the CPU and whole-model rows of the committed bench-kernels.json
# (an earlier call) are not re-measured when the device budget is short (FULL_BENCH=1 to include them).
step "bench kernels (GEMV default, GPU only)" 120 "$T" bash -c "'$ATS' bench kernels --reps 30 --skip-cpu --skip-model --out '$OUT/bench-kernels.json' >'$OUT/bench-kernels.txt'"
step "bench kernels (GEMV v1, GPU only)" 90 "$T" bash -c "ATS_GEMV_KERNEL=v1 '$ATS' bench kernels --reps 30 --skip-cpu --skip-model --out '$OUT/bench-kernels-v1.json' >'$OUT/bench-kernels-v1.txt'"
if [ -n "${FULL_BENCH:-}" ]; then
    step "bench kernels (GEMV default, full)" 240 "$T" bash -c "'$ATS' bench kernels --reps 30 --prompt 128 --decode 8 --out '$OUT/bench-kernels-full.json' >'$OUT/bench-kernels-full.txt'"
fi
step "test_cuda_ops (GEMV v1)" 90 "$T" env ATS_GEMV_KERNEL=v1 "$OPS"; verdict

# ---- summary: the GEMV rows that matter, v1 next to the default -------------------------------------------
{
    echo
    echo "decode GEMV, Qwen3-14B shapes (type shape MB median_us single_us GB/s of_read kernel err):"
    for f in bench-kernels-v1.txt bench-kernels.txt; do
        [ -f "$OUT/$f" ] || continue
        echo "  $f:"
        grep -E "HBM read" "$OUT/$f" | sed 's/^/    /'
        grep -E "^(Q4_0|Q4_K|Q8_0|Q6_K|MXFP4|F16|BF16|F32) " "$OUT/$f" | grep -v "of_DRAM" | head -32 | sed 's/^/    /'
    done
    n_fail=$(cat "$OUT"/bench-kernels*.txt 2>/dev/null | grep -c " FAIL")
    echo "GEMV rows that differ from ex_cpu_matmul (FAIL): $n_fail"
    echo "whole model:"
    grep -A3 "^whole model" "$OUT/bench-kernels.txt" 2>/dev/null | sed 's/^/    /'
    echo "build warnings: $(grep -ci 'warning' "$OUT/build.log")"
    echo "total ${SECONDS} s"
} | tee -a "$S"
