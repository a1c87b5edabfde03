#!/bin/bash
# Ablation (paper §5.5, Fig. 15) in the simulator (experiments/ablation/README.md): llama.cpp's path, then
# + static tensor placement (TP), + async coordination (AC), + dynamic transfer (DT), P = 1024, G = 128.
# Usage, from the repository root:  experiments/ablation/run-sim.sh [OUT [ATS]]
#   OUT default experiments/ablation/sim (committed), ATS default ./build/cli/ats
# Writes OUT/sim.csv (role,hw,model,step,prompt,gen + the `ats sim` columns), OUT/prefill.png,
# OUT/decode.png. ~5 s.
set -eu
OUT=${1:-experiments/ablation/sim}
A=${2:-./build/cli/ats}
K=experiments/evalkit.py
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# step name : policy and flags. "+TP (act sm)" is +TP as the executor can run it (ats run has no --act-path).
STEPS="base|layer-opoffload
+TP|static-opoffload --serialized --act-path ce
+TP (act sm)|static-opoffload --serialized
+TP+AC|static-opoffload
+TP+AC+DT|ats
static alone|static"
MACHINES="laptop:rtx3060-laptop:5.1GiB:512
laptop:experiments/end-to-end/h200-laptop.json:5.1GiB:512"
/usr/bin/python3 $K header role,hw,model,step,prompt,gen > "$T/sim.csv"
for m in $MACHINES; do
    IFS=: read -r role hw budget chunk <<< "$m"
    hwn=$(basename "$hw" .json)
    for model in qwen3-14b qwen3-30b-a3b; do
        while IFS='|' read -r step args; do
            $A sim --model $model --hw $hw --vram-budget $budget --chunk $chunk --trace none --requests 1 \
                --prompt 1024 --gen 128 --policy $args --format csv > "$T/one.csv"
            /usr/bin/python3 $K simrows "$T/one.csv" role=$role hw=$hwn model=$model "step=$step" prompt=1024 gen=128 >> "$T/sim.csv"
        done <<< "$STEPS"
    done
done
mv "$T/sim.csv" "$OUT/sim.csv"
/usr/bin/python3 $K bars "$OUT/sim.csv" -o "$OUT/prefill.png" --metric prefill_tok_s --x step --panel hw,model \
    --title "ats sim ablation: prefill tok/s, P = 1024"
/usr/bin/python3 $K bars "$OUT/sim.csv" -o "$OUT/decode.png" --metric decode_tok_s --x step --panel hw,model \
    --title "ats sim ablation: decode tok/s, P = 1024, G = 128"
