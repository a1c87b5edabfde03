#!/bin/bash
# experiments/decode-profile/run.sh OUT VARIANT... — where the GPU time of a decode step goes: Nsight
# Compute (ncu) times every kernel of `ats run` on full-size dummy weights (PROMPT-token prompt, GEN decode
# steps) and the summary sums them per kernel name (ms over the run, calls), largest first. A VARIANT is a
# space-separated list of NAME=VALUE settings ("" = the defaults), e.g.
#   experiments/decode-profile/run.sh /tmp/p "" "ATS_ATTN_SHAPE=8,2"
# ncu runs each kernel alone (serialized), so the sums are kernel times, not a step's wall time.
# Parameters (environment): MODEL (qwen3-14b), PROMPT (1), GEN (2), KERNELS (an ncu --kernel-name regex,
# e.g. "gemv|quantize"; default every kernel), TOP (25 rows), LIMIT_S (400).
. experiments/common.sh
out=${1:-}; shift || true
[ $# -gt 0 ] || set -- ""
ex_setup "$out" ats
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { say "no ncu on this machine"; exit 1; }
sel=(); [ -n "${KERNELS:-}" ] && sel=(--kernel-name-base demangled --kernel-name "regex:$KERNELS")
i=0
for v in "$@"; do
    i=$((i + 1))
    ex_left "${LIMIT_S:-400}" || { say "${v:-(defaults)} skipped at $((SECONDS - T0)) s"; continue; }
    f=$OUT/ncu-$i.csv
    env $v timeout 300 "$NCU" "${sel[@]}" --metrics gpu__time_duration.sum --csv --print-units base \
        "$A" run --model "${MODEL:-qwen3-14b}" --dummy-weights --backend cuda --prompt-tokens "${PROMPT:-1}" \
        -n "${GEN:-2}" > "$f" 2> "$W/ncu-$i.err"
    say "[$((SECONDS - T0)) s] ${v:-(defaults)} rc=$? (ms over the run, calls, kernel)"
    # ncu's CSV quotes every field and writes thousands separators ("13,056"): strip both before summing
    awk -F'","' 'NR > 1 && $0 ~ /gpu__time_duration/ { n = $5; sub(/[<(].*/, "", n); x = $NF; gsub(/[",]/, "", x);
                 t[n] += x; c[n]++; all += x }
        END { for (k in t) printf "%10.3f ms %6d  %s\n", t[k] / 1e6, c[k], k; printf "%10.3f ms total\n", all / 1e6 }' "$f" |
        sort -rn | head -"${TOP:-25}" | tee -a "$S"
done
