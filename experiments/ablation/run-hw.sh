#!/bin/bash
# Ablation (paper §5.5) on the executor, on the GPU machine's laptop stand-in (experiments/ablation/README.md).
# Usage, from the repository root:  experiments/ablation/run-hw.sh OUT ATS     (ATS: built with CUDA)
# Writes OUT/hw.csv and OUT/sim.csv (role,hw,model,step,prompt,gen + the `ats sim` columns; sim.csv: the
# simulator with the same arguments on experiments/end-to-end/h200-laptop.json), OUT/compare.md,
# OUT/summary.txt, OUT/logs/. Environment: MODELS ("qwen3-14b qwen3-30b-a3b"), PROMPT (1024), GEN (128),
# LIMIT_S (0: none), RUN_TIMEOUT (300 s a run).
# Steps: base = layer-opoffload; +TP (act sm) = static-opoffload --serialized (the simulator's +TP also
# moves activations on the copy engine, --act-path ce, which ats run cannot ask for); +TP+AC =
# static-opoffload; +TP+AC+DT = ats; static alone = static.
set -u
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
hw_header role,hw,model,step,prompt,gen
MODELS=${MODELS:-qwen3-14b qwen3-30b-a3b}
P=${PROMPT:-1024}; G=${GEN:-128}
hw=experiments/end-to-end/h200-laptop.json
STEPS="base|layer-opoffload
+TP (act sm)|static-opoffload --serialized
+TP+AC|static-opoffload
+TP+AC+DT|ats
static alone|static"
for model in $MODELS; do
    mn=$(basename "$model" .json)
    while IFS='|' read -r step args; do
        if ! left; then say "skipped (LIMIT_S): $model $step"; continue; fi
        keys="role=laptop,hw=h200-laptop,model=$mn,step=$step,prompt=$P,gen=$G"
        n=$(echo "$step" | tr -c 'A-Za-z0-9+\n' _)
        hw_run "$mn-$n" "${keys// /_}" -- --model $model --dummy-weights --kv-type f16 --policy $args --threads 4 --vram-budget 5.1GiB \
            --chunk 512 --hw $hw --prompt-tokens $P -n $G --ctx $((P + G + 16)) < /dev/null
        sim_row "${keys// /_}" -- --model $model --hw $hw --vram-budget 5.1GiB --chunk 512 --trace none --requests 1 \
            --prompt $P --gen $G --policy $args < /dev/null
    done <<< "$STEPS"
done
sed -i 's/,+TP_(act_sm),/,+TP (act sm),/; s/,static_alone,/,static alone,/' "$OUT/hw.csv" "$OUT/sim.csv"
$PY $K compare "$OUT/sim.csv" "$OUT/hw.csv" --on role,model,step,prompt,gen \
    --metrics prefill_tok_s,decode_tok_s,gb_h2d | tee "$OUT/compare.md"
