#!/bin/bash
# experiments/model-speed/bench-policy.sh OUT — `ats bench model --policy` (llama-bench's form for `ats run
# --policy`) on full-size dummy weights: for each model of MODELS, the hybrid policies POLICIES under the
# model's VRAM budget, THREADS CPU threads, pp512 and tg128, -r 3. Rows: OUT/bench-policy-MODEL.json and the
# markdown tables in the summary. Each model's run is bounded by LIMIT_S (default 590 s: one call of the GPU
# machine); run one model per call with MODELS=qwen3-14b or MODELS=qwen3-30b-a3b.
# Parameters (environment): MODELS (qwen3-14b qwen3-30b-a3b), POLICIES (layer,static,ats,gpu-stream),
# THREADS (16), PROMPT (512), GEN (128), REPS (3), LIMIT_S (590), HW (the policies' starting cost snapshot,
# `--hw`: h200-host; e.g. sim/hw/h200-host-profile.json, the machine's measured profile of Qwen3-14B). Budgets: qwen3-14b 4.5GiB, qwen3-30b-a3b
# 9.5GiB (experiments/end-to-end's laptop role), any other model BUDGET (default 4.5GiB).
. experiments/common.sh
ex_setup "${1:-}" ats
for M in ${MODELS:-qwen3-14b qwen3-30b-a3b}; do
    case $M in
        qwen3-14b) V=4.5GiB ;;
        qwen3-30b-a3b) V=9.5GiB ;;
        *) V=${BUDGET:-4.5GiB} ;;
    esac
    args="--dummy-weights -m $M -t ${THREADS:-16} -p ${PROMPT:-512} -n ${GEN:-128} -r ${REPS:-3}"
    args="$args --policy ${POLICIES:-layer,static,ats,gpu-stream} --vram-budget $V"
    [ -n "${HW:-}" ] && args="$args --hw $HW"
    say "ats bench model $args"
    timeout "${LIMIT_S:-590}" "$A" bench model $args --out "$OUT/bench-policy-$M.json" > "$W/$M.md" 2> "$W/$M.err"
    say "rc=$? [$((SECONDS - T0)) s]"
    tee -a "$S" < "$W/$M.md"
    tee -a "$S" < "$W/$M.err"
done
