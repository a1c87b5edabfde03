#!/bin/bash
# ε × τ sweeps of the load-aware controller on every committed trace (experiments/eps-tau/README.md).
# Usage, from the repository root:  experiments/eps-tau/run-sim.sh [OUT [ATS]]
#   OUT default experiments/eps-tau/sim (committed), ATS default ./build/cli/ats
# 1. `ats sweep`, ε 0.025..0.4 step 0.025 × τ 1..16 TPOT, policy ats, Qwen3-14B on the laptop stand-in
#    (experiments/end-to-end/h200-laptop.json, 5.1 GiB), requests of P = 2048, G = 128 back to back
#    for each trace's 180 s: OUT/best.csv (best, worst, default per trace), OUT/heat-tpot.png,
#    OUT/heat-resched.png.
# 2. sim-points.sh with a 60 s window (what run-hw.sh replays on the GPU machine): OUT/window/points.csv,
#    OUT/window/sim.csv.
# ~8 minutes on 2 cores.
set -eu
OUT=${1:-experiments/eps-tau/sim}
A=${2:-./build/cli/ats}
K=experiments/evalkit.py; PY=/usr/bin/python3
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TRACES=$(ls traces/*.h5 | xargs -n1 basename | sed 's/\.h5$//' | tr '\n' ' ')
echo "traces: $TRACES"
tr=(); for t in $TRACES; do tr+=(--trace $t); done
"$A" sweep --eps 0.025:0.4:0.025 --interval 1:16:1 "${tr[@]}" --policy ats --model qwen3-14b \
    --hw experiments/end-to-end/h200-laptop.json --vram-budget 5.1GiB --chunk 512 --prompt 2048 --gen 128 \
    --out "$T/sweep.h5" --checkpoint 0 | tee "$OUT/sweep.txt"
$PY $K sweeprows "$T/sweep.h5" > "$OUT/best.csv"
$PY analysis/plot_sweep.py "$T/sweep.h5" --metric tpot_mean_s -o "$OUT/heat-tpot.png"
$PY analysis/plot_sweep.py "$T/sweep.h5" --metric n_resched -o "$OUT/heat-resched.png"
experiments/eps-tau/sim-points.sh "$T/window" "$A" 60 $TRACES
mkdir -p "$OUT/window"
cp "$T/window/points.csv" "$T/window/sim.csv" "$T/window/window-sweep.txt" "$OUT/window/"
$PY $K rank "$OUT/window/sim.csv" /dev/null/none | column -s, -t
