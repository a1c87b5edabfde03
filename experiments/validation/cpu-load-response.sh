#!/bin/bash
# experiments/validation/cpu-load-response.sh OUT — this machine's CPU load response: how much slower the
# executor's CPU decode step (memory-bound GEMVs at THREADS threads) runs while `ats stress` holds the
# CPU availability of a load trace at A (closed loop against an idle `ats record` baseline, the trace's
# CPU column only), for A in AVAILS. The simulator reads the result as the hardware description's
# `cpu.load_response` (sched/include/ats/hw.h: the memory part of a CPU op under availability a runs at
# 1 / slowdown(a) of its idle speed), the quantity `ats validate` found wrong: the executor's `layer`
# decode on Qwen3-14B slowed 1.26x under CPU 0.4 where a 0.4 share of CPU time predicts 2.5x.
# The x-axis is the availability the trace asks for (what `ats validate`'s stressor is given), not the
# stressor's own probe readings, which are printed beside each point.
# Per point: `ats trace synth --cpu const:A`, the stressor started SETTLE s (10: past its 5 s start-up) before
# `ats run --model MODEL --dummy-weights --cpu-only --policy static --vram-budget 1GiB --prompt-tokens 16 -n GEN --threads
# THREADS --kv-type f16`, its mean TPOT; slowdown = TPOT(A) / TPOT idle (no stressor), idle measured
# first and last (their spread is the noise). Writes OUT/load_response.json ({"load_response": [...],
# "source": "..."}, to copy into a profile's cpu section) and OUT/summary.txt.
# Parameters (environment): MODEL (qwen3-14b), THREADS (16), GEN (24), AVAILS (0.8 0.6 0.4 0.2), SETTLE (10).
# Exit 1 with a line naming what failed: a run without a TPOT (its log), a trace or stressor that did
# not start, a slowdown that is not non-increasing in the availability (the loader would refuse it).
. experiments/common.sh
ex_setup "${1:-}" ats
M=${MODEL:-qwen3-14b}; T=${THREADS:-16}; G=${GEN:-24}
"$A" record --save-baseline "$OUT/base.txt" > "$W/baseline.log" 2>&1 || { say "ats record failed"; exit 1; }
tpot() { # TPOT mean [ms] of one CPU decode run, or nothing
    "$A" run --model "$M" --dummy-weights --cpu-only --policy static --vram-budget 1GiB --prompt-tokens 16 -n "$G" --threads "$T" \
        --kv-type f16 > "$W/run-$1.txt" 2>&1 && awk '$1 == "static" { print $5 }' "$W/run-$1.txt"
}
: > "$W/points.txt"
need() { # TPOT of run $1 or exit 1 naming its log
    [ -n "$2" ] || { say "cpu-load-response: no TPOT from 'ats run --model $M ...' ($W/run-$1.txt: $(tail -1 "$W/run-$1.txt"))"; exit 1; }
}
t=$(tpot idle0); need idle0 "$t"; say "[$((SECONDS - T0)) s] idle: TPOT $t ms"; echo "1 $t" >> "$W/points.txt"
for a in ${AVAILS:-0.8 0.6 0.4 0.2}; do
    "$A" trace synth --out "$W/const-$a.h5" --duration 300 --cpu "const:$a" > "$W/synth-$a.log" 2>&1 ||
        { say "cpu-load-response: availability '$a': $(tail -1 "$W/synth-$a.log")"; exit 1; }
    "$A" stress --trace "$W/const-$a.h5" --baseline "$OUT/base.txt" --cpu-only > "$W/stress-$a.log" 2>&1 &
    sp=$!
    sleep "${SETTLE:-10}"
    kill -0 $sp 2> /dev/null || { say "cpu-load-response: ats stress ended early ($W/stress-$a.log: $(tail -1 "$W/stress-$a.log"))"; exit 1; }
    t=$(tpot "$a")
    kill -INT $sp; wait $sp
    need "$a" "$t"
    say "[$((SECONDS - T0)) s] CPU availability $a: TPOT $t ms; the stressor's probes: $(awk '$1 == "cpu" && $4 != "1.0000" { print $5 }' "$W/stress-$a.log" | head -1)"
    echo "$a $t" >> "$W/points.txt"
done
t=$(tpot idle1); need idle1 "$t"; say "[$((SECONDS - T0)) s] idle again: TPOT $t ms"; echo "1 $t" >> "$W/points.txt"
/usr/bin/python3 - "$W/points.txt" "$OUT/load_response.json" "$M" "$T" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" <<'PY' | tee -a "$S"
import json, sys
pts = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 2]
idle = [float(t) for a, t in pts if a == "1"]
if len(idle) < 2 or min(idle) <= 0:
    sys.exit(f"cpu-load-response: no idle TPOT ({sys.argv[1]})")
base = sum(idle) / len(idle)
curve = [{"avail": float(a), "slowdown": round(max(1.0, float(t) / base), 4)} for a, t in pts if a != "1"]
curve.sort(key=lambda p: p["avail"])
for p, q in zip(curve, curve[1:]):
    if q["slowdown"] > p["slowdown"]:
        sys.exit(f"cpu-load-response: slowdown {q['slowdown']} at availability {q['avail']} above {p['slowdown']} at "
                 f"{p['avail']}: noise larger than the effect (repeat, or fewer points)")
src = (f"experiments/validation/cpu-load-response.sh: {sys.argv[3]} CPU decode (ats run --cpu-only, {sys.argv[4]} threads) "
       f"under ats stress at constant CPU availability, mean TPOT / idle {base:.1f} ms (idle spread "
       f"{min(idle):.1f}-{max(idle):.1f} ms) on{sys.argv[5]}")
json.dump({"load_response": curve, "source": src}, open(sys.argv[2], "w"), indent=1)
print(json.dumps(curve), "\n" + src)
PY
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
