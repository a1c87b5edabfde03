#!/bin/bash
# End-to-end prefill and decode per policy in the simulator (experiments/end-to-end/README.md).
# Usage, from the repository root:  experiments/end-to-end/run-sim.sh [OUT [ATS]]
#   OUT  results folder (default experiments/end-to-end/sim: what is committed)
#   ATS  the ats binary (default ./build/cli/ats)
# Writes OUT/sim.csv (role,hw,model,phase,prompt,gen + the `ats sim` columns), OUT/prefill.png,
# OUT/decode.png. ~20 s on 2 cores.
set -eu
OUT=${1:-experiments/end-to-end/sim}
A=${2:-./build/cli/ats}
K=experiments/evalkit.py
D=experiments/end-to-end
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# role hw budget chunk models: the paper's machines (its chunks, §5.1: 512 laptop, 2048 desktop; budget
# 85% of the VRAM) and their stand-ins on the GPU machine (the budgets and threads run-hw.sh uses)
MACHINES="laptop:rtx3060-laptop:5.1GiB:512:qwen3-14b,qwen3-30b-a3b
desktop:rtx4090-desktop:20.4GiB:2048:qwen3-14b,qwen3-30b-a3b,llama-3.1-70b
laptop:$D/h200-laptop.json:5.1GiB:512:qwen3-14b,qwen3-30b-a3b
desktop:$D/h200-desktop.json:20.4GiB:2048:qwen3-14b,qwen3-30b-a3b,llama-3.1-70b"
/usr/bin/python3 $K header role,hw,model,phase,prompt,gen > "$T/sim.csv"
for m in $MACHINES; do
    IFS=: read -r role hw budget chunk models <<< "$m"
    hwn=$(basename "$hw" .json)
    for model in ${models//,/ }; do
        for P in 512 1024 2048 4096; do
            $A sim --model $model --hw $hw --vram-budget $budget --chunk $chunk --trace none --requests 1 \
                --prompt $P --gen 1 --policy all --format csv > "$T/one.csv"
            /usr/bin/python3 $K simrows "$T/one.csv" role=$role hw=$hwn model=$model phase=prefill prompt=$P gen=1 >> "$T/sim.csv"
        done
        $A sim --model $model --hw $hw --vram-budget $budget --chunk $chunk --trace none --requests 1 \
            --prompt 2048 --gen 128 --policy all --format csv > "$T/one.csv"
        /usr/bin/python3 $K simrows "$T/one.csv" role=$role hw=$hwn model=$model phase=decode prompt=2048 gen=128 >> "$T/sim.csv"
    done
done
mv "$T/sim.csv" "$OUT/sim.csv"
/usr/bin/python3 $K bars "$OUT/sim.csv" -o "$OUT/prefill.png" --where phase=prefill --metric prefill_tok_s --x prompt \
    --series policy --panel hw,model --log --title "ats sim: prefill tok/s per prompt length (idle machine, one request)"
/usr/bin/python3 $K bars "$OUT/sim.csv" -o "$OUT/decode.png" --where phase=decode --metric decode_tok_s --x policy \
    --panel hw,model --title "ats sim: decode tok/s, P = 2048, G = 128 (idle machine)"
