#!/bin/bash
# experiments/validation/run.sh OUT [POLICIES] — sim versus real on the GPU machine (README.md): for each
# policy, `ats validate` runs the executor (Qwen3-14B, random q4_k_m weights, 4.5 GiB of VRAM, 16 threads)
# while the closed-loop `ats stress` replays trace time 50-130 s of fig13-synth (CPU 0.4 from 60 s, GPU and
# PCIe 0.4 from 120 s), then the simulator with --hw on the same request and window. Writes
# OUT/qwen3-14b-fig13-POLICY.h5 (both runs and the table), appends the records to OUT/summary.json and
# the tables to OUT/summary.txt.
# Parameters (environment): HW (the simulator's hardware description or measured profile; h200-host),
# TRACE (fig13-synth), WINDOW (50:130), BUDGET (4.5GiB), THREADS (16), STRESS_ARGS (more `ats stress`
# flags; default "--hogs-gpu 16", as experiments/stress-accuracy), GEN (auto), LIMIT_S (570: a policy is
# started only while at least 240 s are left of it).
# One policy takes ~2-3 min (dummy weights, prefill, ~80 s of decode); give one or two per 10-minute call.
. experiments/common.sh
out=${1:-}
pols=${2:-layer,static,ats}
ex_setup "$out" ats
"$A" record --save-baseline "$OUT/base.txt" > "$W/baseline.log" 2>&1
say "[$((SECONDS - T0)) s] idle baseline rc=$? ($OUT/base.txt)"
for p in ${pols//,/ }; do
    ex_left $(( ${LIMIT_S:-570} - 240 )) || { say "policy $p skipped at $((SECONDS - T0)) s (LIMIT_S)"; continue; }
    timeout $(( ${LIMIT_S:-570} - (SECONDS - T0) )) "$A" validate --model qwen3-14b --dummy-weights \
        --vram-budget "${BUDGET:-4.5GiB}" --threads "${THREADS:-16}" --policy "$p" --hw "${HW:-h200-host}" \
        --trace "${TRACE:-fig13-synth}" --window "${WINDOW:-50:130}" --gen "${GEN:-auto}" \
        --baseline "$OUT/base.txt" --stress-args "${STRESS_ARGS---hogs-gpu 16}" \
        --out "$OUT/qwen3-14b-${TRACE:-fig13-synth}-$p.h5" --summary "$OUT/summary.json" > "$W/$p.txt" 2> "$W/$p.err"
    rc=$?
    say "[$((SECONDS - T0)) s] policy $p rc=$rc"
    grep -v '^#' "$W/$p.txt" | sed 's/^/  /' | tee -a "$S"
    [ $rc -eq 0 ] || tail -5 "$W/$p.err" | sed 's/^/  /' | tee -a "$S"
done
