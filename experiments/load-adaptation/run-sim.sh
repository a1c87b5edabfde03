#!/bin/bash
# Load adaptation (paper §5.3, Fig. 13) in the simulator (experiments/load-adaptation/README.md): `ats` with
# its first schedule fixed (--eps 10: never re-plans; the paper's "static policy") against `ats`
# (load-aware), on traces/fig13-synth.h5 (idle 0-60 s, CPU 0.4 60-120 s, GPU and PCIe 0.4 120-180 s),
# requests of P = 2048, G = 128 back to back for 180 s.
# Usage, from the repository root:  experiments/load-adaptation/run-sim.sh [OUT [ATS]]
#   OUT default experiments/load-adaptation/sim (committed), ATS default ./build/cli/ats
# Writes OUT/segments.csv (hw,model + evalkit.py segments: mean decode TPOT per load segment, its first
# 3 s left out), OUT/cut.csv (how much load-aware cuts the TPOT increase, per loaded segment),
# OUT/tpot-<hw>-<model>.png. ~30 s.
set -eu
OUT=${1:-experiments/load-adaptation/sim}
A=${2:-./build/cli/ats}
K=experiments/evalkit.py
PY=/usr/bin/python3
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
MACHINES="rtx3060-laptop:5.1GiB experiments/end-to-end/h200-laptop.json:5.1GiB"
echo "hw,model,label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds" > "$T/segments.csv"
echo "hw,model,segment,cpu,gpu,pcie,fixed_ms,aware_ms,fixed_increase_ms,aware_increase_ms,cut_pct" > "$T/cut.csv"
for m in $MACHINES; do
    IFS=: read -r hw budget <<< "$m"
    hwn=$(basename "$hw" .json)
    for model in qwen3-14b qwen3-30b-a3b; do
        for v in static:10 load-aware:0.15; do
            $A sim --model $model --hw $hw --vram-budget $budget --trace fig13-synth --prompt 2048 --gen 128 --policy ats \
                --eps ${v#*:} --out "$T/${v%%:*}.h5" --format csv > /dev/null
        done
        $PY $K segments --trace traces/fig13-synth.h5 --end 180 --margin 3 static="$T/static.h5:ats" \
            load-aware="$T/load-aware.h5:ats" > "$T/seg.csv"
        tail -n +2 "$T/seg.csv" | sed "s|^|$hwn,$model,|" >> "$T/segments.csv"
        $PY $K cut "$T/seg.csv" static load-aware | tail -n +2 | sed "s|^|$hwn,$model,|" >> "$T/cut.csv"
        $PY $K tpotplot -o "$OUT/tpot-$hwn-$model.png" --trace traces/fig13-synth.h5 --window 5 \
            --title "ats sim, $hwn, $model, fig13-synth (P 2048 + G 128 back to back); dots: re-schedules" \
            "static (ats, eps 10)=$T/static.h5:ats" "load-aware (ats)=$T/load-aware.h5:ats"
    done
done
mv "$T/segments.csv" "$T/cut.csv" "$OUT/"
column -s, -t "$OUT/cut.csv"
