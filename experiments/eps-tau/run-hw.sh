#!/bin/bash
# Is the simulator's best (ε, τ) also the executor's best? (experiments/eps-tau/README.md), on the GPU
# machine's laptop stand-in (Qwen3-14B, --threads 4 --vram-budget 5.1GiB).
# Usage, from the repository root:  experiments/eps-tau/run-hw.sh OUT ATS     (ATS: built with CUDA)
# Per trace: sim-points.sh finds, in the simulator, the best, worst and default (0.15, 5) points of the
# first WINDOW_S seconds (and ε = 10, never re-plans); then each point runs on the executor while
# `ats stress` (open loop) makes the same WINDOW_S seconds of load: one request of P = 512 whose decode
# lasts WINDOW_S at the idle TPOT of a calibration run.
# Writes OUT/hw.csv and OUT/sim.csv (trace,point,eps,interval,prompt,gen + the `ats sim` columns),
# OUT/points.csv, OUT/rank.csv (per trace: the points in order of mean TPOT, simulated and measured;
# is the simulator's best the measured best), OUT/compare.md, OUT/summary.txt, OUT/logs/.
# Environment: TRACES (every traces/*.h5), WINDOW_S (60), POINTS ("best default worst never"),
# STRESS_ARGS ("--hogs-gpu 16"), LIMIT_S (0: none), RUN_TIMEOUT (3 x WINDOW_S + 60), MODEL (qwen3-14b).
set -u
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
WIN=${WINDOW_S:-60}
TRACES=${TRACES:-$(ls traces/*.h5 | xargs -n1 basename | sed 's/\.h5$//' | tr '\n' ' ')}
POINTS=${POINTS:-best default worst never}
RUN_TIMEOUT=${RUN_TIMEOUT:-$((3 * WIN + 60))}
hw=experiments/end-to-end/h200-laptop.json
say "traces: $TRACES; window ${WIN} s; points: $POINTS"
experiments/eps-tau/sim-points.sh "$OUT/simpoints" "$A" $WIN $TRACES > "$OUT/logs/sim-points.txt" 2>&1 ||
    { say "sim-points.sh failed: $(tail -1 "$OUT/logs/sim-points.txt")"; exit 1; }
cp "$OUT/simpoints/points.csv" "$OUT/simpoints/sim.csv" "$OUT/"
say "[$((SECONDS - T0)) s] simulator: $(head -1 "$OUT/logs/sim-points.txt")"
RUN=(--model ${MODEL:-qwen3-14b} --dummy-weights --kv-type f16 --policy ats --threads 4 --vram-budget 5.1GiB --chunk 512 --hw $hw --prompt-tokens 512)
hw_header trace,point,eps,interval,prompt,gen
hw_run calibrate "trace=none,point=calibrate,eps=0.15,interval=5,prompt=512,gen=24" -- "${RUN[@]}" -n 24 --ctx 552
tpot=$(awk -F, '$1=="none"{print $12}' "$OUT/hw.csv")   # TPOT p50 [ms]
G=$(awk -v d=$WIN -v t="$tpot" 'BEGIN{ if (t > 0) printf "%d", d * 1000 / t + 8; else print 0 }')
[ "$G" -gt 0 ] || { say "calibration gave no TPOT ('$tpot'): see logs/calibrate.log"; exit 1; }
say "idle TPOT $tpot ms: $G decode steps for a ${WIN} s window"
for t in $TRACES; do
    t=$(basename "$t" .h5)
    for p in $POINTS; do
        if ! left; then say "skipped (LIMIT_S): $t $p"; continue; fi
        row=$(awk -F, -v t=$t -v p=$p '$1==t && $2==p' "$OUT/points.csv")
        [ -n "$row" ] || { say "no point '$p' for trace $t in points.csv"; continue; }
        IFS=, read -r _ _ e i _ <<< "$row"
        "$A" stress --trace "$OUT/simpoints/traces/$t.h5" --duration $WIN ${STRESS_ARGS:---hogs-gpu 16} \
            > "$OUT/logs/stress-$t-$p.txt" 2>&1 &
        spid=$!
        hw_run "$t-$p" "trace=$t,point=$p,eps=$e,interval=$i,prompt=512,gen=$G" -- "${RUN[@]}" -n $G \
            --ctx $((512 + G + 16)) --eps $e --interval $i
        kill $spid 2> /dev/null; wait $spid 2> /dev/null
        sleep 2   # the hogs' processes gone before the next run
    done
done
rm -rf "$OUT/simpoints/window-sweep.h5"
$PY $K rank "$OUT/sim.csv" "$OUT/hw.csv" > "$OUT/rank.csv"
column -s, -t "$OUT/rank.csv" | tee -a "$OUT/summary.txt"
$PY $K compare "$OUT/sim.csv" "$OUT/hw.csv" --on trace,point,eps,interval --metrics tpot_mean_ms,reschedules,gb_h2d \
    > "$OUT/compare.md"
