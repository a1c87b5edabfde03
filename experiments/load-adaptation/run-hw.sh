#!/bin/bash
# Load adaptation (paper §5.3) on the executor under a real co-runner (experiments/load-adaptation/README.md),
# on the GPU machine's laptop stand-in (--threads 4 --vram-budget 5.1GiB --hw experiments/end-to-end/h200-laptop.json).
# Usage, from the repository root:  experiments/load-adaptation/run-hw.sh OUT ATS     (ATS: built with CUDA)
# `ats validate` twice (policy ats, --eps 10 "static" and --eps 0.15 "load-aware") on the Fig. 13 load with
# PHASE_S-second phases (idle, CPU 0.4, GPU and PCIe 0.4; `ats trace synth`): the executor runs one
# request (prompt PROMPT, as many decode steps as the simulator fits into the 3 phases) while `ats stress`
# replays the trace, and the simulator runs the same request under the same trace.
# Writes OUT/validate-<label>.h5 (/real, /sim: rounds only, no ops) and .json (the validation records),
# OUT/hw.csv and OUT/sim.csv (label + the `ats sim` columns that validate reports), and where
# /usr/bin/python3 has h5py: OUT/segments.csv (source hw|sim, mean decode TPOT per load segment by
# round start, the first 3 s left out: evalkit.py segments), OUT/cut.csv, OUT/tpot-{hw,sim}.png.
# Environment: MODEL (qwen3-14b), PHASE_S (60), PROMPT (512), BASELINE (a file of `ats record
# --save-baseline` for the closed-loop stressor; default: measured at the start, OUT/base.txt), STRESS_ARGS ("--hogs-gpu 16"), CTX (16384:
# the upper bound of the decode steps, as ats validate --ctx).
set -u
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
MODEL=${MODEL:-qwen3-14b}; MN=$(basename "$MODEL" .json); PH=${PHASE_S:-60}; P=${PROMPT:-512}; DUR=$((3 * PH))
hw=experiments/end-to-end/h200-laptop.json
TR=$OUT/fig13-${PH}s.h5
"$A" trace synth --out "$TR" --duration $DUR --cpu step:$PH=0.4,$((2 * PH))=1 --gpu step:$((2 * PH))=0.4 \
    --pcie step:$((2 * PH))=0.4 --description "paper Fig. 13 with $PH s phases" > /dev/null || { say "trace synth failed"; exit 1; }
hw_baseline
hw_header label
for v in static:10 load-aware:0.15; do
    lab=${v%%:*}
    t=$SECONDS
    "$A" validate --model $MODEL --dummy-weights --vram-budget 5.1GiB --threads 4 --hw $hw --trace "$TR" \
        --window 0:$DUR --policy ats --eps ${v#*:} --prompt $P --chunk 512 --ctx ${CTX:-16384} \
        ${BASELINE:+--baseline "$BASELINE"} --stress-args "${STRESS_ARGS:---hogs-gpu 16}" \
        --out "$OUT/validate-$lab.h5" --summary "$OUT/validate-$lab.json" > "$OUT/logs/validate-$lab.txt" 2>&1
    rc=$?
    say "[$((SECONDS - T0)) s] validate $lab rc=$rc ($((SECONDS - t)) s)"
    sed -n '/^# ats validate/,$p' "$OUT/logs/validate-$lab.txt" | grep -v '^wrote\|^appended' | tee -a "$OUT/summary.txt"
    [ $rc = 0 ] || { say "  $(tail -1 "$OUT/logs/validate-$lab.txt")"; continue; }
    $PY $K valrows "$OUT/validate-$lab.json" --side real label=$lab >> "$OUT/hw.csv"
    $PY $K valrows "$OUT/validate-$lab.json" --side sim label=$lab >> "$OUT/sim.csv"
done
if ! $PY -c 'import h5py, numpy, matplotlib' 2> /dev/null; then
    say "no h5py/matplotlib here: run evalkit.py segments/cut/tpotplot on OUT/validate-*.h5 (README.md)"
    exit 0
fi
echo "source,model,label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds" > "$OUT/segments.csv"
echo "source,model,segment,cpu,gpu,pcie,fixed_ms,aware_ms,fixed_increase_ms,aware_increase_ms,cut_pct" > "$OUT/cut.csv"
for src in hw sim; do
    g=$([ $src = hw ] && echo real || echo sim)
    $PY $K segments --trace "$TR" --end $DUR --margin 3 static="$OUT/validate-static.h5:$g/ats" \
        load-aware="$OUT/validate-load-aware.h5:$g/ats" > "$OUT/logs/seg-$src.csv" || continue
    tail -n +2 "$OUT/logs/seg-$src.csv" | sed "s|^|$src,$MN,|" >> "$OUT/segments.csv"
    $PY $K cut "$OUT/logs/seg-$src.csv" static load-aware | tail -n +2 | sed "s|^|$src,$MN,|" >> "$OUT/cut.csv"
    $PY $K tpotplot -o "$OUT/tpot-$src.png" --trace "$TR" --window 5 \
        --title "$src: $MN, laptop stand-in, Fig. 13 load with $PH s phases; dots: re-schedules" \
        "static (eps 10)=$OUT/validate-static.h5:$g/ats" "load-aware=$OUT/validate-load-aware.h5:$g/ats"
done
column -s, -t "$OUT/cut.csv" | tee -a "$OUT/summary.txt"
