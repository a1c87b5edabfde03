#!/bin/bash
# experiments/paper-eval-hw.sh OUT — the hardware halves of end-to-end/, load-adaptation/, eps-tau/ and
# ablation/ in one bounded GPU-machine call, each cut down to fit (the full runs: each folder's README).
# Builds `ats` with CUDA (experiments/common.sh ex_setup; BUILD_DIR, CUDA_ARCH, .deps/root when carried),
# then runs the stages named in STAGES (default all four, in this order) while the time since the start
# stays under BUDGET_S (default 520 s): a stage that would not fit is skipped, saying so in
# OUT/summary.txt; a stage is stopped (timeout) when the budget runs out, keeping what it wrote.
#   end-to-end       ROLES=laptop PROMPTS= DECODE=512:32 POLICIES="layer layer-opoffload ats": Qwen3-14B
#                    3 runs, Qwen3-30B-A3B 4 (with expert), each a 512-token prefill + 31 decode steps  ~1.5-2 min
#   load-adaptation  PHASE_S=12: ats validate, static and load-aware, 36 s of Fig. 13 load         ~2-3 min
#   eps-tau          TRACES=fig13-synth WINDOW_S=30 POINTS="best never": ats validate per point      ~2-3 min
#   ablation         MODELS=qwen3-14b GEN=16: 5 steps, 1024-token prompt                           ~1.5 min
# Each stage writes OUT/<stage>/ as its run-hw.sh does; copy it into the experiment's hw/ folder.
set -u
source experiments/common.sh
ex_setup "${1:-}" ats
BUDGET_S=${BUDGET_S:-520}
STAGES=${STAGES:-end-to-end load-adaptation eps-tau ablation}
stage() {  # stage NAME NEED_S VAR=VALUE...: experiments/NAME/run-hw.sh OUT/NAME $A, bounded by the budget
    local name=$1 need=$2; shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local left=$((BUDGET_S - (SECONDS - T0))) rc=0
    if [ $left -lt $need ]; then say "[$((SECONDS - T0)) s] $name skipped: $left s left, it needs ~$need s"; return; fi
    say "[$((SECONDS - T0)) s] $name: $*"
    timeout -k 10 $left env "$@" LIMIT_S=$((left - 30)) RUN_TIMEOUT=$((left - 30)) \
        bash experiments/$name/run-hw.sh "$OUT/$name" "$A" > "$W/$name.txt" 2>&1 || rc=$?
    say "[$((SECONDS - T0)) s] $name rc=$rc$([ $rc = 124 ] && echo ' (stopped: budget)')"
}
stage end-to-end 60 ROLES=laptop PROMPTS= DECODE=512:32 MODELS="qwen3-14b qwen3-30b-a3b" POLICIES="layer layer-opoffload ats"
stage load-adaptation 120 PHASE_S=12
stage eps-tau 110 TRACES=fig13-synth WINDOW_S=30 POINTS="best never"
stage ablation 60 MODELS=qwen3-14b GEN=16
say "[$((SECONDS - T0)) s] done"
