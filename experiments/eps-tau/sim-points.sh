#!/bin/bash
# The simulated half of the eps-tau hardware check (experiments/eps-tau/README.md), shared by run-sim.sh
# and run-hw.sh. Usage, from the repository root:  experiments/eps-tau/sim-points.sh OUT ATS WINDOW_S TRACE...
# Per trace: its first WINDOW_S seconds (idle after, as a stressor run for WINDOW_S leaves the machine;
# fig13-synth, idle for its first minute: its three steps with WINDOW_S/3-second phases),
# one request of P = 512 whose decode lasts WINDOW_S at the simulated idle TPOT, Qwen3-14B on the laptop
# stand-in (experiments/end-to-end/h200-laptop.json, 5.1 GiB); `ats sweep` over the same 16 x 16 grid as
# run-sim.sh; its best, worst and default (0.15, 5) points, and ε = 10 (never re-plans), re-run by `ats sim`.
# Writes OUT/traces/<trace>.h5 (the cut traces), OUT/window-sweep.h5, OUT/points.csv (evalkit.py
# sweeprows), OUT/sim.csv (trace,point,eps,interval,prompt,gen + the `ats sim` columns).
set -eu
OUT=$1; A=$2; WIN=$3; shift 3
K=experiments/evalkit.py; PY=/usr/bin/python3
HW=experiments/end-to-end/h200-laptop.json
SIMF=(--model ${MODEL:-qwen3-14b} --hw $HW --vram-budget 5.1GiB --chunk 512 --requests 1 --prompt 512)
mkdir -p "$OUT/traces"
tpot=$("$A" sim "${SIMF[@]}" --gen 24 --trace none --policy ats --format csv | awk -F, 'NR==2{print $6}')
G=$(awk -v d=$WIN -v t="$tpot" 'BEGIN{ print int(d * 1000 / t) + 8 }')
echo "simulated idle TPOT $tpot ms: $G decode steps for a ${WIN} s window"
tr=()
for t in "$@"; do
    f=traces/$t.h5; [ -f "$f" ] || f=$t
    n=$(basename "$f" .h5)
    if [ "$n" = fig13-synth ]; then  # its first minute is idle: the same steps with WIN/3-second phases instead
        ph=$(awk -v w=$WIN 'BEGIN{ print w / 3 }')
        "$A" trace synth --out "$OUT/traces/fig13-full.h5" --duration $WIN --cpu step:$ph=0.4,$((2 * WIN / 3))=1 \
            --gpu step:$((2 * WIN / 3))=0.4 --pcie step:$((2 * WIN / 3))=0.4 --description "paper Fig. 13 with $ph s phases" > /dev/null
        f=$OUT/traces/fig13-full.h5
    fi
    $PY $K trimtrace "$f" "$OUT/traces/$n.h5" --end $WIN
    tr+=(--trace "$OUT/traces/$n.h5")
done
"$A" sweep --eps 0.025:0.4:0.025 --interval 1:16:1 "${tr[@]}" --policy ats "${SIMF[@]}" --gen $G \
    --out "$OUT/window-sweep.h5" --checkpoint 0 > "$OUT/window-sweep.txt"
$PY $K sweeprows "$OUT/window-sweep.h5" > "$OUT/points.csv"
for t in "$@"; do echo "$(basename "$t" .h5),never,10,5,," >> "$OUT/points.csv"; done  # first schedule kept: a reference
$PY $K header trace,point,eps,interval,prompt,gen > "$OUT/sim.csv"
tail -n +2 "$OUT/points.csv" | while IFS=, read -r t p e i _; do
    "$A" sim "${SIMF[@]}" --gen $G --trace "$OUT/traces/$t.h5" --policy ats --eps $e --interval $i --format csv > "$OUT/one.csv"
    $PY $K simrows "$OUT/one.csv" trace=$t point=$p eps=$e interval=$i prompt=512 gen=$G >> "$OUT/sim.csv"
done
rm -f "$OUT/one.csv" "$OUT/traces/fig13-full.h5"
