#!/bin/bash
# experiments/stress-accuracy/run.sh OUT [TARGET] — does `ats record` read back the load `ats stress`
# makes? RUNS times: an idle baseline, then the closed-loop stressor on TARGET (fig13: traces/
# fig13-synth.h5, 180 s, 60 s phases idle / CPU 0.4 / GPU+PCIe 0.4; check: the 90 s version with 30 s
# phases) recorded at the same time, judged by `ats trace compare --margin 5 --max-err 0.1 --loaded-only`
# (rc 0: every loaded phase within 10 %; the unloaded segments get their own line). The runs are
# traces/record-h200.sh's `baseline` and TARGET steps with this tree's full `ats` (ATS_LOAD), each in
# OUT/run-N/ (TARGET.h5 the recording, TARGET-stress.txt the stressor's report, TARGET-control.csv its
# 0.5 s control steps, TARGET.log the compare table).
# Parameters (environment): RUNS (1), STRESS_ARGS (more `ats stress` flags; default "--hogs-gpu 16"),
# RECORD_ARGS (more `ats record` flags, e.g. --pin), REBASE (S: every process re-measures its idle probe
# times over S s), CHECK_CPU_ONLY=1 (check: CPU phase only, a machine without a GPU), LIMIT_S (580).
. experiments/common.sh
out=${1:-}
target=${2:-fig13}
case $target in fig13 | check) ;; *) echo "TARGET: fig13 or check, not '$target'" >&2; exit 2 ;; esac
ex_setup "$out" ats
export ATS_LOAD=$A STRESS_ARGS=${STRESS_ARGS---hogs-gpu 16}   # set but empty: no extra flags
need=$([ "$target" = fig13 ] && echo 200 || echo 110)
for r in $(seq "${RUNS:-1}"); do
    ex_left $(( ${LIMIT_S:-580} - need )) || { say "run $r skipped at $((SECONDS - T0)) s"; continue; }
    traces/record-h200.sh "$OUT/run-$r" baseline "$target" > "$W/run-$r.txt" 2>&1
    say "[$((SECONDS - T0)) s] run $r ($target, STRESS_ARGS='$STRESS_ARGS' RECORD_ARGS='${RECORD_ARGS:-}') rc=$? (0: every loaded phase within 10 %)"
    grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY|UNLOADED|max \|rel|probe duty" \
        "$OUT/run-$r/$target.log" | sed 's/^/  /' | tee -a "$S"
done
