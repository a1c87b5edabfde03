#!/bin/bash
# Load adaptation (paper §5.3) on the executor under a real co-runner (experiments/load-adaptation/README.md),
# on the GPU machine's laptop stand-in (--threads 4 --vram-budget 5.1GiB).
# Usage, from the repository root:  experiments/load-adaptation/run-hw.sh OUT ATS     (ATS: built with CUDA)
# The Fig. 13 load with PHASE_S-second phases (idle, CPU 0.4, GPU and PCIe 0.4; `ats trace synth`) is made
# by `ats stress` (open loop, --hogs-gpu 16) while one `ats run --policy ats` request (prompt PROMPT,
# then as many decode steps as fill the three phases at the idle TPOT of a short calibration run) runs,
# once with --eps 10 (its first schedule fixed: "static") and once with the default --eps 0.15
# ("load-aware"). The simulator replays the same trace (cut at 3 x PHASE_S, idle after, as the stressor
# stops) for the same prompt (its decode steps cut at 3 x PHASE_S).
# Writes OUT/segments.csv (source,model,label + evalkit.py segments; source hw or sim), OUT/cut.csv,
# OUT/tpot-hw.png, OUT/tpot-sim.png, OUT/summary.txt, OUT/logs/ (the stressor's reports); the results
# files stay in OUT/raw/ only when this machine's python has no h5py (then run evalkit.py here).
# Environment: MODEL (qwen3-14b), PHASE_S (60), PROMPT (512), STRESS_ARGS ("--hogs-gpu 16"), RUN_TIMEOUT
# (default 5 x PHASE_S + 120 s).
set -u
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
MODEL=${MODEL:-qwen3-14b}; MN=$(basename "$MODEL" .json); PH=${PHASE_S:-60}; P=${PROMPT:-512}; DUR=$((3 * PH))
RUN_TIMEOUT=${RUN_TIMEOUT:-$((5 * PH + 120))}
hw=experiments/end-to-end/h200-laptop.json
RUN=(--model $MODEL --dummy-weights --kv-type f16 --policy ats --threads 4 --vram-budget 5.1GiB --chunk 512 --hw $hw --prompt-tokens $P)
R=$(mktemp -d); trap 'rm -rf "$R"' EXIT
"$A" trace synth --out "$R/full.h5" --duration $DUR --cpu step:$PH=0.4,$((2 * PH))=1 --gpu step:$((2 * PH))=0.4 \
    --pcie step:$((2 * PH))=0.4 --description "paper Fig. 13 with $PH s phases" > /dev/null || { say "trace synth failed"; exit 1; }
HAVE_H5=1; $PY -c 'import h5py, numpy' 2> /dev/null || HAVE_H5=0
if [ $HAVE_H5 = 1 ]; then $PY $K trimtrace "$R/full.h5" "$R/trace.h5" --end $DUR; else cp "$R/full.h5" "$R/trace.h5"; fi
# calibration: idle TPOT of the load-aware run -> decode steps that fill the trace at idle speed
hw_header role
hw_run calibrate "role=laptop" -- "${RUN[@]}" -n 24 --ctx $((P + 40))
tpot=$(awk -F, 'NR==2{print $7}' "$OUT/hw.csv")   # TPOT p50 [ms]
G=$(awk -v d=$DUR -v t="$tpot" 'BEGIN{ if (t > 0) printf "%d", d * 1000 / t + 8; else print 0 }')
[ "$G" -gt 0 ] || { say "calibration gave no TPOT ('$tpot'): see logs/calibrate.log"; exit 1; }
say "idle TPOT ${tpot} ms -> $G decode steps for ${DUR} s"
stpot=$("$A" sim --model $MODEL --hw $hw --vram-budget 5.1GiB --trace none --requests 1 --prompt $P --gen 24 --policy ats \
    --format csv 2> /dev/null | awk -F, 'NR==2{print $6}')
GS=$(awk -v d=$DUR -v t="$stpot" -v p=$P 'BEGIN{ g = t > 0 ? int(d * 1000 / t) + 8 : 0; if (g > 32000 - p) g = 32000 - p; print g }')
say "simulated idle TPOT ${stpot} ms -> $GS decode steps"
for v in static:10 load-aware:0.15; do
    lab=${v%%:*}
    "$A" stress --trace "$R/full.h5" --duration $DUR ${STRESS_ARGS:---hogs-gpu 16} > "$OUT/logs/stress-$lab.txt" 2>&1 &
    spid=$!
    hw_run "$lab" "role=$lab" -- "${RUN[@]}" -n $G --ctx $((P + G + 16)) --eps ${v#*:} --out "$R/hw-$lab.h5"
    kill $spid 2> /dev/null; wait $spid 2> /dev/null
    "$A" sim --model $MODEL --hw $hw --vram-budget 5.1GiB --trace "$R/trace.h5" --requests 1 --prompt $P --gen $GS \
        --duration $DUR --policy ats --eps ${v#*:} --out "$R/sim-$lab.h5" --format csv > "$OUT/logs/sim-$lab.csv" 2>&1
done
if [ $HAVE_H5 = 0 ]; then
    mkdir -p "$OUT/raw"; cp "$R"/*.h5 "$OUT/raw/"
    say "no h5py here: results files in OUT/raw/; run experiments/evalkit.py segments/cut/tpotplot on them (README.md)"
    exit 0
fi
echo "source,model,label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds" > "$OUT/segments.csv"
echo "source,model,segment,cpu,gpu,pcie,fixed_ms,aware_ms,fixed_increase_ms,aware_increase_ms,cut_pct" > "$OUT/cut.csv"
for src in hw sim; do
    $PY $K segments --trace "$R/trace.h5" --end $DUR --margin 3 static="$R/$src-static.h5:ats" \
        load-aware="$R/$src-load-aware.h5:ats" > "$R/seg-$src.csv" || continue
    tail -n +2 "$R/seg-$src.csv" | sed "s|^|$src,$MN,|" >> "$OUT/segments.csv"
    $PY $K cut "$R/seg-$src.csv" static load-aware | tail -n +2 | sed "s|^|$src,$MN,|" >> "$OUT/cut.csv"
    $PY $K tpotplot -o "$OUT/tpot-$src.png" --trace "$R/trace.h5" --window 5 \
        --title "$src: $MN, laptop stand-in, Fig. 13 load with $PH s phases; dots: re-schedules" \
        "static (eps 10)=$R/$src-static.h5:ats" \
        "load-aware=$R/$src-load-aware.h5:ats"
done
column -s, -t "$OUT/cut.csv" | tee -a "$OUT/summary.txt"
