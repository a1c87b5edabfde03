# experiments/evalkit.sh — sourced by the run-hw.sh scripts of end-to-end/, ablation/, load-adaptation/
# and eps-tau/ (bash, from the repository root).
#
#   hw_setup OUT ATS   checks ATS (an `ats` built with CUDA, e.g. by experiments/common.sh's ex_setup or
#                      `cmake --build build --target ats`), makes OUT and OUT/logs, starts OUT/summary.txt
#                      with the machine (CPU, GPU, tree) and sets K (evalkit.py), PY, T0
#   say LINE           appends LINE to OUT/summary.txt and prints it
#   left               true while LIMIT_S (environment; 0 or unset: no limit) seconds have not passed
#   hw_run NAME KEYS -- ARGS...
#                      runs `ATS run ARGS` (timeout RUN_TIMEOUT s, default 300) with stderr in
#                      OUT/logs/NAME.log, appends its row to OUT/hw.csv (KEYS: K=V,K=V) and says rc and time
#   hw_baseline        sets BASELINE (environment) to OUT/base.txt, the idle probe times `ats record
#                      --save-baseline` measures now, unless BASELINE names a file already: the closed-loop
#                      stressor (the open loop misses a 0.4 target by up to 64%, experiments/stress-accuracy/)
#   sim_row KEYS -- ARGS...
#                      runs `ATS sim ARGS --format csv` and appends its rows to OUT/sim.csv
# Rows go to OUT/hw.csv and OUT/sim.csv under the header of `evalkit.py header` (hw_header KEYS).
set -u
K=experiments/evalkit.py
PY=/usr/bin/python3
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
left() { [ "${LIMIT_S:-0}" = 0 ] || [ $((SECONDS - T0)) -lt "${LIMIT_S}" ]; }
hw_setup() {
    OUT=$1; A=$2
    [ -n "$OUT" ] && [ -x "$A" ] || { echo "usage: $0 OUT ATS (ATS: an executable ats binary; got '$A')" >&2; exit 2; }
    mkdir -p "$OUT/logs"; OUT=$(cd "$OUT" && pwd)
    : > "$OUT/summary.txt"
    T0=$SECONDS
    say "$0 $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '(no git metadata)'), $("$A" --version 2>&1 | head -1)"
    say "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)"
    command -v nvidia-smi > /dev/null && say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
    say "LIMIT_S=${LIMIT_S:-0} RUN_TIMEOUT=${RUN_TIMEOUT:-300}"
}
hw_header() {
    [ -s "$OUT/hw.csv" ] || $PY $K header "$1" > "$OUT/hw.csv"
    [ -s "$OUT/sim.csv" ] || $PY $K header "$1" > "$OUT/sim.csv"
}
kv_args() { echo "${1//,/ }"; }
hw_run() {
    local name=$1 keys=$2; shift 3
    local t=$SECONDS rc=0
    timeout "${RUN_TIMEOUT:-300}" "$A" run "$@" > "$OUT/logs/$name.out" 2> "$OUT/logs/$name.log" || rc=$?
    if [ $rc = 0 ]; then
        $PY $K runrow "$OUT/logs/$name.log" $(kv_args "$keys") >> "$OUT/hw.csv" || rc=1
    fi
    say "[$((SECONDS - T0)) s] $name rc=$rc ($((SECONDS - t)) s)$( [ $rc = 124 ] && echo ", killed after ${RUN_TIMEOUT:-300} s")"
    return 0
}
hw_baseline() {
    if [ -n "${BASELINE:-}" ]; then say "stressor baseline: $BASELINE"; return; fi
    if "$A" record --save-baseline "$OUT/base.txt" > "$OUT/logs/baseline.log" 2>&1; then
        BASELINE=$OUT/base.txt; say "stressor baseline (closed loop): $(tr '\n' ' ' < "$BASELINE")"
    else
        say "ats record --save-baseline failed ($(tail -1 "$OUT/logs/baseline.log")): open-loop stressor"
    fi
}
sim_row() {
    local keys=$1; shift 2
    if "$A" sim "$@" --format csv > "$OUT/logs/sim-one.csv" 2> "$OUT/logs/sim-one.err"; then
        $PY $K simrows "$OUT/logs/sim-one.csv" $(kv_args "$keys") >> "$OUT/sim.csv"
    else
        say "ats sim $* failed: $(head -1 "$OUT/logs/sim-one.err")"
    fi
}
