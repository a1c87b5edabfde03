#!/bin/bash
# experiments/model-speed/run.sh OUT VARIANT... — whole-model prefill and decode speed of `ats run` on
# full-size dummy weights, under kernel variables, REPS times interleaved (variant 1, 2, ..., then again),
# with the median per variant. A VARIANT is a space-separated list of NAME=VALUE settings; "" is the
# defaults, e.g.
#   experiments/model-speed/run.sh /tmp/m "" "ATS_ATTN_SHAPE=4,1" "ATS_PDL_EARLY=1"           # GPU
#   BACKEND=cpu THREADS=16 GEN=8 experiments/model-speed/run.sh /tmp/m "ATS_CPU_FEATURES=3" ""   # CPU
# Parameters (environment): MODEL (qwen3-14b; Q4_K_M dummy weights), BACKEND (cuda), CTX (4096),
# PROMPT (128 prompt tokens, one chunk), GEN (64 decode steps), THREADS (16, CPU backend), KV (f32 or
# f16 KV cache; f32), REPS (3), LIMIT_S (480: later runs are skipped).
. experiments/common.sh
out=${1:-}; shift || true
[ $# -gt 0 ] || set -- ""
ex_setup "$out" ats
args="--model ${MODEL:-qwen3-14b} --dummy-weights --backend ${BACKEND:-cuda} --ctx ${CTX:-4096}"
args="$args --prompt-tokens ${PROMPT:-128} -n ${GEN:-64} --threads ${THREADS:-16} --kv-type ${KV:-f32}"
say "ats run $args"
i=0
for r in $(seq "${REPS:-3}"); do
    i=0
    for v in "$@"; do
        i=$((i + 1))
        ex_left "${LIMIT_S:-480}" || { say "${v:-(defaults)} rep $r skipped at $((SECONDS - T0)) s"; continue; }
        env $v timeout 150 "$A" run $args > /dev/null 2> "$W/run-$i-$r.err"
        rc=$?
        line=$(grep -E "prompt [0-9]+ tok in" "$W/run-$i-$r.err" | sed 's/^ats run: //')
        say "${v:-(defaults)} rep $r rc=$rc: $line"
        echo "$line" | grep -oE '\(([0-9.]+) tok/s\)' | tr -d '(' | awk '{print $1}' | paste -sd' ' > "$W/tps-$i-$r.txt"
    done
done
say "median over reps (prefill tok/s, decode tok/s):"
i=0
for v in "$@"; do
    i=$((i + 1))
    cat "$W"/tps-$i-*.txt 2>/dev/null | awk -v v="${v:-(defaults)}" 'NF == 2 { p[++n] = $1; d[n] = $2 }
        function med(a, m,   i, j, t) { for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((m + 1) / 2)] }
        END { if (n) printf "  %-40s prefill %8s  decode %8s  (n=%d)\n", v, med(p, n), med(d, n), n; else printf "  %-40s no run\n", v }' |
        tee -a "$S"
done
