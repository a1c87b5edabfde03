#!/bin/bash
# Is the simulator's best (ε, τ) also the executor's best? (experiments/eps-tau/README.md), on the GPU
# machine's laptop stand-in (Qwen3-14B, --threads 4 --vram-budget 5.1GiB, --hw experiments/end-to-end/h200-laptop.json).
# Usage, from the repository root:  experiments/eps-tau/run-hw.sh OUT ATS     (ATS: built with CUDA)
# Per trace: sim-points.sh finds, in the simulator, the best, worst and default (0.15, 5) points of the
# first WINDOW_S seconds (and ε = 10, never re-plans); then `ats validate --policy ats --eps E --interval
# I --window 0:WINDOW_S` runs each point on the executor while `ats stress` replays those seconds, and
# the simulator runs the same request (prompt 512, the decode steps it fits into the window).
# Writes OUT/hw.csv and OUT/sim.csv (trace,point,eps,interval + the columns validate reports),
# OUT/points.csv, OUT/rank.csv (per trace: the points in order of mean TPOT, simulated and measured; is
# the simulator's best the measured best), OUT/compare.md, OUT/validate-<trace>-<point>.{h5,json},
# OUT/summary.txt, OUT/logs/.
# Environment: TRACES (every traces/*.h5), WINDOW_S (60), POINTS ("best default worst never"), BASELINE
# (the closed-loop stressor's idle probe times; default: measured at the start, OUT/base.txt), STRESS_ARGS ("--hogs-gpu 16"), LIMIT_S (0: none), MODEL (qwen3-14b), CTX (16384).
set -u
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
WIN=${WINDOW_S:-60}
TRACES=${TRACES:-$(ls traces/*.h5 | xargs -n1 basename | sed 's/\.h5$//' | tr '\n' ' ')}
POINTS=${POINTS:-best default worst never}
hw=experiments/end-to-end/h200-laptop.json
say "traces: $TRACES; window ${WIN} s; points: $POINTS"
experiments/eps-tau/sim-points.sh "$OUT/simpoints" "$A" $WIN $TRACES > "$OUT/logs/sim-points.txt" 2>&1 ||
    { say "sim-points.sh failed: $(tail -1 "$OUT/logs/sim-points.txt")"; exit 1; }
rm -f "$OUT/simpoints/window-sweep.h5"
cp "$OUT/simpoints/points.csv" "$OUT/"
say "[$((SECONDS - T0)) s] simulator: $(head -1 "$OUT/logs/sim-points.txt")"
hw_baseline
hw_header trace,point,eps,interval
for t in $TRACES; do
    t=$(basename "$t" .h5)
    for p in $POINTS; do
        if ! left; then say "skipped (LIMIT_S): $t $p"; continue; fi
        row=$(awk -F, -v t=$t -v p=$p '$1==t && $2==p' "$OUT/points.csv")
        [ -n "$row" ] || { say "no point '$p' for trace $t in points.csv"; continue; }
        IFS=, read -r _ _ e i _ <<< "$row"
        s0=$SECONDS
        "$A" validate --model ${MODEL:-qwen3-14b} --dummy-weights --vram-budget 5.1GiB --threads 4 --hw $hw \
            --trace "$OUT/simpoints/traces/$t.h5" --window 0:$WIN --policy ats --eps $e --interval $i --prompt 512 \
            --chunk 512 --ctx ${CTX:-16384} ${BASELINE:+--baseline "$BASELINE"} --stress-args "${STRESS_ARGS:---hogs-gpu 16}" \
            --out "$OUT/validate-$t-$p.h5" --summary "$OUT/validate-$t-$p.json" > "$OUT/logs/validate-$t-$p.txt" 2>&1
        rc=$?
        say "[$((SECONDS - T0)) s] $t $p (eps $e, tau $i) rc=$rc ($((SECONDS - s0)) s)$([ $rc = 0 ] || echo ": $(tail -1 "$OUT/logs/validate-$t-$p.txt")")"
        [ $rc = 0 ] || continue
        $PY $K valrows "$OUT/validate-$t-$p.json" --side real trace=$t point=$p eps=$e interval=$i >> "$OUT/hw.csv"
        $PY $K valrows "$OUT/validate-$t-$p.json" --side sim trace=$t point=$p eps=$e interval=$i >> "$OUT/sim.csv"
    done
done
$PY $K rank "$OUT/sim.csv" "$OUT/hw.csv" > "$OUT/rank.csv"
column -s, -t "$OUT/rank.csv" | tee -a "$OUT/summary.txt"
$PY $K compare "$OUT/sim.csv" "$OUT/hw.csv" --on trace,point,eps,interval --metrics tpot_mean_ms,reschedules \
    > "$OUT/compare.md"
