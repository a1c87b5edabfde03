#!/bin/bash
# experiments/sim-speed/run.sh OUT [ats bench sim flags...] — how fast the simulator is (`ats bench sim`):
# engine events/s on one core, a 10-minute replay, a 16 x 16 eps x tau sweep over three 3-minute traces
# on THREADS cores. Writes OUT/bench-sim.json and OUT/bench-sim.txt; copy the JSON next to this script
# to update the committed figures. Runs anywhere (CPU only).
# Parameters (environment): THREADS (sweep cores, 2: the CI machine's count). Flags pass through, e.g.
# --quick (4 x 4 sweep, 1-minute replay), --hw rtx4090-desktop.
. experiments/common.sh
out=${1:-}; shift || true
ATS_CUDA=${ATS_CUDA:-AUTO} ex_setup "$out" ats
say "ats bench sim --threads ${THREADS:-2} $*"
"$A" bench sim --threads "${THREADS:-2}" --out "$OUT/bench-sim.json" "$@" | tee "$OUT/bench-sim.txt"
say "[$((SECONDS - T0)) s] rc=${PIPESTATUS[0]}"
