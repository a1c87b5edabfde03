#!/bin/bash
# experiments/paper-eval-hw.sh OUT — the hardware halves of end-to-end/, load-adaptation/, eps-tau/ and
# ablation/ in one bounded GPU-machine call, each cut down to fit (the full runs: each folder's README).
# Builds `ats` with CUDA (experiments/common.sh ex_setup; BUILD_DIR, CUDA_ARCH, .deps/root when carried),
# then runs these stages while the time since the start stays under BUDGET_S (default 530 s; a stage
# that would not fit is skipped, saying so in OUT/summary.txt; each gets what is left as LIMIT_S):
#   OUT/end-to-end/      ROLES=laptop PROMPTS= DECODE=512:32 POLICIES="layer layer-opoffload ats"
#                        (Qwen3-14B 3 runs, Qwen3-30B-A3B 4 with expert: prefill 512 + 31 decode steps)
#   OUT/load-adaptation/ PHASE_S=15: static and load-aware under 45 s of Fig. 13 load
#   OUT/eps-tau/         TRACES=fig13-synth WINDOW_S=30 POINTS="best default never" (10 s phases)
#   OUT/ablation/        MODELS=qwen3-14b GEN=16
# Each stage writes what its run-hw.sh writes; copy it into the experiment's hw/ folder.
set -u
source experiments/common.sh
ex_setup "${1:-}" ats
BUDGET_S=${BUDGET_S:-530}
stage() {  # stage NAME NEED_S VAR=VALUE...: experiments/NAME/run-hw.sh OUT/NAME $A
    local name=$1 need=$2; shift 2
    local left=$((BUDGET_S - (SECONDS - T0))) rc=0
    if [ $left -lt $need ]; then say "[$((SECONDS - T0)) s] $name skipped: $left s left, it needs ~$need s"; return; fi
    say "[$((SECONDS - T0)) s] $name: $*"
    env "$@" LIMIT_S=$((left - 20)) RUN_TIMEOUT=$((left - 20)) bash experiments/$name/run-hw.sh "$OUT/$name" "$A" \
        > "$W/$name.txt" 2>&1 || rc=$?
    say "[$((SECONDS - T0)) s] $name rc=$rc"
}
stage end-to-end 60 ROLES=laptop PROMPTS= DECODE=512:32 MODELS="qwen3-14b qwen3-30b-a3b" POLICIES="layer layer-opoffload ats"
stage load-adaptation 130 PHASE_S=15
stage eps-tau 150 TRACES=fig13-synth WINDOW_S=30 POINTS="best default never"
stage ablation 50 MODELS=qwen3-14b GEN=16
say "[$((SECONDS - T0)) s] done"
