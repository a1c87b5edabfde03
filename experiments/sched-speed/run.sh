#!/bin/bash
# experiments/sched-speed/run.sh OUT [ats bench sched flags...] — wall time of the scheduling code
# (`ats bench sched`): static placement DP, the two dynamic-transfer DPs and plan building for decode
# rounds, medians of many runs on one thread. Writes OUT/bench-sched.json and OUT/bench-sched.txt; copy
# the JSON next to this script to update the committed figures, which `ats sim` reads as the default
# re-schedule cost (cli/sim_cli.h, sim_cli_resched_cost). Runs anywhere (CPU only): ATS_CUDA=OFF builds faster.
# Flags pass through, e.g. --runs 401 --models qwen3-14b --hw rtx4090-desktop.
. experiments/common.sh
out=${1:-}; shift || true
ATS_CUDA=${ATS_CUDA:-AUTO} ex_setup "$out" ats
say "ats bench sched $*"
"$A" bench sched --out "$OUT/bench-sched.json" "$@" | tee "$OUT/bench-sched.txt"
say "[$((SECONDS - T0)) s] rc=${PIPESTATUS[0]}"
