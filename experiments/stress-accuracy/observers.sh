#!/bin/bash
# experiments/stress-accuracy/observers.sh OUT ARM... — do several observers of one stressed CPU agree?
# First IDLE idle baselines, each in a process of its own, back to back (ms per CPU probe GEMV: the
# per-process spread of the idle probe). Then per ARM: a fresh baseline, a CPU-only closed-loop stressor
# holding the CPU at LEVEL for DURATION s, and RECORDERS recorders started together 8 s later with that
# baseline; each recorder's mean over the loaded stretch (`ats trace compare --margin 5` against a
# constant LEVEL target) next to what the stressor's own probes saw. An ARM is a string of extra
# `ats stress` flags ("" = the defaults), e.g.
#   experiments/stress-accuracy/observers.sh /tmp/o "" "--hogs-cpu 2" "--pin --pin-hogs"
# Parameters (environment): LEVEL (0.4), DURATION (60), RECORDERS (2), INTERVAL (recorder sample period,
# 0.1 s), RECORD_ARGS (flags of the baselines and recorders, e.g. "--pin" or "--cpu-probe-ms 10"),
# IDLE (8), LIMIT_S (560).
. experiments/common.sh
out=${1:-}; shift || true
[ $# -gt 0 ] || set -- ""
ex_setup "$out" ats
level=${LEVEL:-0.4}; dur=${DURATION:-60}; n=${RECORDERS:-2}; iv=${INTERVAL:-0.1}
margin=$(( dur > 20 ? 5 : 1 ))   # s left out at each end of the loaded stretch
{ lscpu; echo; cat /sys/kernel/mm/transparent_hugepage/enabled; } > "$OUT/machine.txt" 2>&1
ms=""
for i in $(seq "${IDLE:-8}"); do
    "$A" record --save-baseline "$W/idle-$i.txt" --baseline-s 2 --cpu-only ${RECORD_ARGS:-} > "$W/idle-$i.log" 2>&1
    ms="$ms $(awk '{printf "%.4f", $1 * 1e3 / $4}' "$W/idle-$i.txt")"
done
say "idle CPU probe, ms per GEMV, ${IDLE:-8} processes:$ms"
"$A" trace synth --out "$W/target.h5" --duration $((dur + 30)) --cpu "const:$level" > /dev/null
"$A" trace synth --out "$W/level.h5" --duration "$dur" --cpu "const:$level" > /dev/null
a=0
for arm in "$@"; do
    a=$((a + 1))
    ex_left $(( ${LIMIT_S:-560} - dur - 20 )) || { say "arm '$arm' skipped at $((SECONDS - T0)) s"; continue; }
    "$A" record --save-baseline "$W/base-$a.txt" --baseline-s 3 --cpu-only ${RECORD_ARGS:-} > "$W/base-$a.log" 2>&1
    "$A" stress --trace "$W/target.h5" --baseline "$W/base-$a.txt" --cpu-only --duration $((dur + 20)) \
        --log "$OUT/control-$a.csv" $arm > "$OUT/stress-$a.txt" 2>&1 &
    sleep 8
    for r in $(seq "$n"); do
        "$A" record --baseline "$W/base-$a.txt" --cpu-only --interval "$iv" --duration "$dur" ${RECORD_ARGS:-} \
            --out "$OUT/rec-$a-$r.h5" > "$W/rec-$a-$r.log" 2>&1 &
    done
    wait
    say "arm $a '${arm}': baseline $(awk '{printf "%.3f ms (%d GEMVs)", $1 * 1e3, $4}' "$W/base-$a.txt")"
    grep -E "^cpu +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+" "$OUT/stress-$a.txt" | head -1 | sed 's/^/  stressor: /' | tee -a "$S"
    for r in $(seq "$n"); do
        say "  recorder $r: $("$A" trace compare "$OUT/rec-$a-$r.h5" "$W/level.h5" --margin $margin 2>/dev/null |
            awk '$1 == "cpu" {print "mean", $5, "error", $6}') ($(grep -o 'probe lock: [0-9]* of [0-9]*' "$W/rec-$a-$r.log"))"
    done
done
