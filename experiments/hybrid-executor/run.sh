#!/bin/sh
# The hybrid-executor figures (experiments/hybrid-executor/README.md): every policy at the brief's
# budgets on Qwen3-14B and Qwen3-30B-A3B (random q4_k_m weights, THREADS threads, a 512-token prompt in
# one chunk, GEN generated tokens). Usage: run.sh [ATS_BINARY [OUT]]
#   With OUT: each run's statistics in OUT/M-P.txt, and for the `ats` runs a timeline (OUT/M-ats.json)
#   with its per-round summary (analysis/timeline_rounds.py, decode rounds after the first 4:
#   OUT/M-ats-decode.txt), a summary table in OUT/summary.txt. Without OUT: everything on the terminal.
# Parameters (environment): THREADS (16), GEN (32), POLICIES14 (ats layer static static-opoffload
# layer-opoffload gpu-stream ats-paper), POLICIES30 (ats layer expert static gpu-stream), HW (h200-host).
set -u
A=${1:-build/cli/ats}
OUT=${2:-}
T=${THREADS:-16}
G=${GEN:-32}
top=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "$OUT" ] && { mkdir -p "$OUT" && : > "$OUT/summary.txt" || exit 1; }
one() { # model budget policy
    m=$1 b=$2 p=$3
    tl=""
    [ -n "$OUT" ] && [ "$p" = ats ] && tl="--timeline $OUT/$m-ats.json"
    if [ -n "$OUT" ]; then
        timeout 120 "$A" run --model "$m" --dummy-weights --prompt-tokens 512 -n "$G" --threads "$T" --policy "$p" \
            --vram-budget "$b" --hw "${HW:-h200-host}" $tl > "$OUT/$m-$p.txt" 2>&1
        rc=$?
        echo "$m $p rc=$rc $(grep -E "^$p " "$OUT/$m-$p.txt")" | tee -a "$OUT/summary.txt"
        if [ -n "$tl" ] && [ $rc = 0 ]; then
            /usr/bin/python3 "$top/analysis/timeline_rounds.py" "$OUT/$m-ats.json" --phase decode --rounds 5: --top 6 \
                > "$OUT/$m-ats-decode.txt" 2>&1
            gzip -f "$OUT/$m-ats.json"
        fi
    else
        timeout 120 "$A" run --model "$m" --dummy-weights --prompt-tokens 512 -n "$G" --threads "$T" --policy "$p" \
            --vram-budget "$b" --hw "${HW:-h200-host}"
        echo "$m $p rc=$?"
    fi
}
for p in ${POLICIES14:-ats layer static static-opoffload layer-opoffload gpu-stream ats-paper}; do
    one qwen3-14b 4.5GiB "$p"
done
for p in ${POLICIES30:-ats layer expert static gpu-stream}; do
    one qwen3-30b-a3b 9.5GiB "$p"
done
