#!/bin/bash
# experiments/kernels/variants.sh OUT VARIANT... — the GEMV table under kernel variables (exec/kernels/cuda/
# README.md lists them; exec/runtime/env_check.c refuses unknown names and values), ROUNDS times
# interleaved. A VARIANT is a space-separated list of NAME=VALUE settings; "" is the defaults, e.g.
#   experiments/kernels/variants.sh /tmp/v "" "ATS_ATTN_SHAPE=8,2" "ATS_CPU_FEATURES=7"
# TEST=1 runs test_cuda_ops under each variant first (correctness before speed). Each variant's table is
# OUT/bk-<variant>-<round>.txt; the summary keeps the rows of TYPES.
# Parameters (environment): REPS (30), ROUNDS (1), TYPES ("Q4_0 Q4_K"), PART (gpu: --skip-cpu; cpu:
# --skip-gpu --threads THREADS), THREADS (16), TEST (0), LIMIT_S (480: later runs are skipped).
. experiments/common.sh
out=${1:-}; shift || true
[ $# -gt 0 ] || set -- ""
targets=ats; [ "${TEST:-0}" = 1 ] && targets="ats test_cuda_ops"
ex_setup "$out" $targets
part="--skip-cpu"; [ "${PART:-gpu}" = cpu ] && part="--skip-gpu --threads ${THREADS:-16}"
rows="^($(echo ${TYPES:-Q4_0 Q4_K} | tr ' ' '|')) "
name() { local n; n=$(echo "${1:-defaults}" | tr ' =/' '_-_'); echo "$n"; }
if [ "${TEST:-0}" = 1 ]; then
    for v in "$@"; do
        env $v timeout 200 "$B/tests/exec/test_cuda_ops" > "$W/test_cuda_ops-$(name "$v").log" 2>&1
        say "[$((SECONDS - T0)) s] test_cuda_ops ${v:-(defaults)} rc=$? $(tail -1 "$W/test_cuda_ops-$(name "$v").log")"
    done
fi
for r in $(seq "${ROUNDS:-1}"); do
    for v in "$@"; do
        ex_left "${LIMIT_S:-480}" || { say "${v:-(defaults)} round $r skipped at $((SECONDS - T0)) s"; continue; }
        f=$OUT/bk-$(name "$v")-$r.txt
        env $v timeout 120 "$A" bench kernels $part --skip-model --reps "${REPS:-30}" --out "${f%.txt}.json" > "$f" 2>&1
        say "[$((SECONDS - T0)) s] ${v:-(defaults)} round $r rc=$?"
        grep -E "$rows|HBM read|bandwidth" "$f" | sed 's/^/  /' | tee -a "$S"
    done
done
