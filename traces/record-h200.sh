#!/bin/bash
# Records the load traces of traces/README.md on the GPU machine (16-core host + H200) with the
# project's own tools (ats record, ats stress; built alone by traces/build-loadtool.sh).
#   usage: traces/record-h200.sh OUTDIR STEP...
#   steps: build baseline check idle pcie-copies fig13 | calibrate fig13-open cpu-compile gpu-train
#     build        build build-load/ats-load; print GPU, cores, kernel, sched_autogroup
#     baseline     idle probe times, 5 s -> OUTDIR/base.txt (every later step uses it)
#     check        closed-loop stressor on a 90 s Fig. 13 target (30 s phases: idle, CPU 0.4, GPU+PCIe 0.4)
#                  while `ats record --duration 90` runs; `ats trace compare --margin 5` table;
#                  fails (rc 1) when a loaded phase is off by more than 10 % (unloaded segments: a
#                  second verdict line, not failing)   (CHECK_DUR: target length, 90;
#                  CHECK_CPU_ONLY=1: CPU phase only, for a machine without a GPU)
#     idle         DUR s of the idle machine (IDLE_DUR overrides DUR)
#     pcie-copies  DUR s next to traces/pcie-copies.py
#     fig13        closed-loop stressor on traces/fig13-synth.h5 (180 s, 60 s phases) recorded, with the
#                  compare table (FF_CALIB=1: feed-forward from OUTDIR/calib.txt of `calibrate`)
#     calibrate    open-loop calibration table -> OUTDIR/calib.txt
#     fig13-open   the open-loop stressor (model + OUTDIR/calib.txt if present) recorded, for comparison
#     cpu-compile, gpu-train   DUR s next to a parallel build / a PyTorch training loop
# REBASE=S (check, fig13; not fig13-open, whose open loop has no baseline): the stressor's probe process and the recorder each re-measure the idle probe
# times over S s with the settings of base.txt (`--baseline-s S`: each process's CPU probe has a speed
# factor of its own), the recorder in the target's idle start after the stressor's t = 0, so the compare
# shifts by --offset -S (the recorder's t = 0 is the target's t = S).
# DUR (default 180) is each recording's length [s]; STRESS_ARGS: more `ats stress` flags for check and
# fig13 (e.g. "--hogs-gpu 12 --hogs-pcie 12" when the report shows duties pinned at 1); RECORD_ARGS: more
# `ats record` flags for every recording and the baseline (e.g. "--pin", with STRESS_ARGS="--pin"). Every step writes OUTDIR/<step>.log (stress steps also
# OUTDIR/<step>-stress.txt and the controller's OUTDIR/<step>-control.csv), prints its log, its wall
# time and its exit code; a failed step does not stop the later ones; the script exits 1 if any failed.
# The stressor runs in its own process group but in this script's session, like the recorder: with
# sched_autogroup on, a setsid'ed stressor would share the CPU with the recorder per session, not per
# thread, and its own probes would no longer see what the recorder sees.
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: traces/record-h200.sh OUTDIR STEP...}; shift
mkdir -p "$OUT"
A=${ATS_LOAD:-build-load/ats-load}   # ATS_LOAD: another build of the tool (tests elsewhere)
DUR=${DUR:-180}
CHECK_DUR=${CHECK_DUR:-90}
CHECK_CPU_ONLY=${CHECK_CPU_ONLY:-0}  # 1: the check target loads the CPU only (a machine without a GPU)
M=h200-host
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
BG=""
cleanup() {
  [ -n "$BG" ] || return 0
  kill -TERM -- -"$BG" 2>/dev/null; sleep 1; kill -KILL -- -"$BG" 2>/dev/null; BG=""
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
bg_group() { set -m; "$@" & BG=$!; set +m; }     # own process group, same session
bg_session() { setsid "$@" & BG=$!; }           # own session (real co-running workloads, as recorded before)

rec() { # rec NAME DESCRIPTION [DURATION]
  local d=${3:-$DUR}
  $A record --baseline "$OUT/base.txt" ${REC_REBASE:-} --duration "$d" --machine $M --out "$OUT/$1.h5" --description "$2" --progress ${RECORD_ARGS:-} || return
  $A trace show "$OUT/$1.h5" | tail -7
}
need_base() { [ -s "$OUT/base.txt" ] || { echo "no $OUT/base.txt: run the baseline step first"; return 2; }; }

# stress_rec NAME TARGET DURATION DESCRIPTION STRESS-ARGS...: stressor in the background, the recorder
# started once the stressor says t = 0, then both waited for; rc: 0, or the first failure's code.
stress_rec() {
  local name=$1 target=$2 d=$3 desc=$4; shift 4
  local slog="$OUT/$name-stress.txt"
  : > "$slog"
  local REC_REBASE="" rb=()
  [ -n "${REBASE:-}" ] && { REC_REBASE="--baseline-s $REBASE"; rb=(--baseline-s "$REBASE"); }
  bg_group $A stress --trace "$target" --verbose "${rb[@]}" "$@" > "$slog" 2>&1
  local i=0
  until grep -q "t = 0:" "$slog" || ! kill -0 "$BG" 2>/dev/null || [ $i -ge 600 ]; do sleep 0.1; i=$((i + 1)); done
  if ! grep -q "t = 0:" "$slog"; then
    cleanup; wait 2>/dev/null; cat "$slog"
    echo "FAILED: ats stress did not start within $((i / 10)) s (nothing recorded)"; return 3
  fi
  echo "stressor ready after $((i / 10)).$((i % 10)) s"
  rec "$name" "$desc" "$d"; local rrc=$?
  wait "$BG"; local src=$?; BG=""
  grep -v "5 s means" "$slog"
  echo "(per-5-s controller lines: $slog; control steps: $OUT/$name-control.csv)"
  [ $src -eq 0 ] || { echo "FAILED: ats stress exited $src"; return $src; }
  [ $rrc -eq 0 ] || { echo "FAILED: ats record exited $rrc"; return $rrc; }
  return 0
}

compare() { # compare NAME TARGET: the table; rc 1 when a loaded phase (what the stressor was asked for)
            # is off by more than 10 %; unloaded segments get a verdict line of their own (not failing)
  [ -s "$OUT/$1.h5" ] || { echo "ACCURACY: nothing recorded to compare"; return 1; }
  local out c u ef="$OUT/$1-compare.err"
  out=$($A trace compare "$OUT/$1.h5" "$2" --margin 5 --max-err 0.1 --loaded-only ${REBASE:+--offset -$REBASE} 2>"$ef"); c=$?
  printf '%s\n' "$out"; cat "$ef"; rm -f "$ef"   # the table, then its verdict line (stderr)
  if [ $c -eq 0 ]; then echo "ACCURACY: every loaded phase within 10 %"; else echo "ACCURACY: a loaded phase NOT within 10 %, or not compared (see the lines above; compare rc $c)"; fi
  u=$(printf '%s\n' "$out" | sed -n 's/.*; unloaded: \([0-9.e+-]*\) over .*/\1/p')
  if [ -z "$u" ]; then echo "UNLOADED: no unloaded segment compared"
  elif awk -v u="$u" 'BEGIN { exit !(u <= 0.1) }'; then echo "UNLOADED: every unloaded segment within 10 % (worst $u)"
  else echo "UNLOADED: an unloaded segment off by $u (> 10 %; e.g. the CPU during PCIe copies: traces/README.md)"; fi
  return $c
}

step_build() {
  if command -v nvidia-smi > /dev/null; then nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  else echo "no nvidia-smi: no NVIDIA driver here (CPU-only steps still work: CHECK_CPU_ONLY=1)"; fi
  echo "cores $(nproc); kernel $(uname -r); sched_autogroup_enabled $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo n/a)"
  traces/build-loadtool.sh build-load
}
step_baseline() { $A record --save-baseline "$OUT/base.txt" --baseline-s 5 ${RECORD_ARGS:-} && cat "$OUT/base.txt"; }
step_check() {
  [ -s "$OUT/base.txt" ] || step_baseline || return
  local h=$((CHECK_DUR / 3)) t="$OUT/check-target.h5"
  local gp=(--gpu step:$((2 * h))=0.4 --pcie step:$((2 * h))=0.4)
  local phases="idle / CPU 0.4 / GPU+PCIe 0.4" sa=${STRESS_ARGS:+ $STRESS_ARGS}
  [ "$CHECK_CPU_ONLY" = 1 ] && { gp=(); phases="idle / CPU 0.4 / idle (CPU only)"; }
  $A trace synth --out "$t" --duration "$CHECK_DUR" --cpu step:$h=0.4,$((2 * h))=1 "${gp[@]}" > /dev/null || return
  stress_rec check "$t" "$CHECK_DUR" "check: closed-loop ats stress$sa, ${h} s phases $phases, recorded at the same time" \
    --baseline "$OUT/base.txt" --log "$OUT/check-control.csv" ${STRESS_ARGS:-}; local r=$?
  compare check "$t" || { [ $r -ne 0 ] || r=1; }
  return $r
}
step_idle() { need_base || return; rec idle "idle: nothing else running" "${IDLE_DUR:-$DUR}"; }
step_calibrate() { $A stress --calibrate "$OUT/calib.txt" --settle 0.4 --measure 1.0 --verbose; }
step_fig13() {
  need_base || return
  local ff=()
  [ "${FF_CALIB:-0}" = 1 ] && [ -s "$OUT/calib.txt" ] && ff=(--calibration "$OUT/calib.txt")
  stress_rec fig13 traces/fig13-synth.h5 "$DUR" "fig13: closed-loop ats stress --trace traces/fig13-synth.h5 --baseline base.txt${ff[*]:+ ${ff[*]}}${STRESS_ARGS:+ $STRESS_ARGS} (idle 0-60 s, CPU avail 0.4 60-120 s, GPU+PCIe avail 0.4 120-180 s), recorded at the same time${RECORD_ARGS:+ by ats record $RECORD_ARGS}" \
    --baseline "$OUT/base.txt" --log "$OUT/fig13-control.csv" --duration "$DUR" "${ff[@]}" ${STRESS_ARGS:-}; local r=$?
  compare fig13 traces/fig13-synth.h5 || { [ $r -ne 0 ] || r=1; }
  return $r
}
step_fig13-open() {
  local REBASE=""   # open loop: no --baseline, so no --baseline-s (ats stress refuses it), no compare offset
  need_base || return
  local ff=()
  [ -s "$OUT/calib.txt" ] && ff=(--calibration "$OUT/calib.txt")
  stress_rec fig13-open traces/fig13-synth.h5 "$DUR" "fig13-open: open-loop ats stress --trace traces/fig13-synth.h5 ${ff[*]}, recorded at the same time" \
    --duration "$DUR" "${ff[@]}"; local r=$?
  compare fig13-open traces/fig13-synth.h5 || { [ $r -ne 0 ] || r=1; }
  return $r
}
step_cpu-compile() {
  need_base || return
  local CF="-O2 -std=c11 -fopenmp -D_GNU_SOURCE -DH5_USE_110_API -Isched/include -Icommon/include -Iexec/include -Iexec/kernels/cpu -Iexec/kernels/cuda -Iload/include -Iload/src -Icli -Isim/include -Ibuild-load/gen -I/usr/include/hdf5/serial -I.deps/root/usr/include"
  bg_session bash -c "while :; do ls sched/src/*.c common/src/*.c sim/src/*.c exec/model/*.c exec/kernels/cpu/*.c exec/runtime/*.c load/src/*.c cli/*.c | xargs -P 16 -I{} gcc $CF -c {} -o /dev/null 2>/dev/null; ls exec/kernels/cuda/*.cu load/cuda/*.cu | xargs -P 16 -I{} nvcc -O2 -arch=sm_90 -c {} -o /dev/null 2>/dev/null; done"
  rec cpu-compile "cpu-compile: parallel build of this project's C (gcc -O2, 16 jobs) and CUDA (nvcc sm_90) sources in a loop"; local r=$?
  cleanup; return $r
}
step_gpu-train() {
  need_base || return
  bg_session python3 traces/gpu-train.py; sleep 6
  rec gpu-train "gpu-train: PyTorch ResNet-18 training loop (traces/gpu-train.py: batch 128x3x224x224 bf16 autocast, pinned host batches copied each step), started 6 s before"; local r=$?
  cleanup; return $r
}
step_pcie-copies() {
  need_base || return
  bg_session python3 traces/pcie-copies.py; sleep 4
  rec pcie-copies "pcie-copies: PyTorch bulk copies (traces/pcie-copies.py: 256 MiB pinned buffers, H2D and D2H at once on two streams, back to back), started 4 s before"; local r=$?
  cleanup; return $r
}

T0=$(date +%s); SUMMARY=""; FAILED=0
for step; do
  s0=$(date +%s)
  echo "=== $step $(date -u +%T)"
  if declare -F "step_$step" > /dev/null; then
    "step_$step" > "$OUT/$step.log" 2>&1; rc=$?
    cleanup
    grep -v "5 s means" "$OUT/$step.log"
  else
    echo "unknown step $step (see the head of $0)"; rc=2
  fi
  el=$(($(date +%s) - s0))
  if [ $rc -eq 0 ]; then st=ok; else st="FAILED (rc $rc)"; FAILED=1; fi
  echo "=== $step: $st after $el s (log $OUT/$step.log)"
  SUMMARY="$SUMMARY$(printf '%-12s %-16s %5d s' "$step" "$st" "$el")"$'\n'
done
echo "=== end $(date -u +%T), $(($(date +%s) - T0)) s in all"
printf '%s' "$SUMMARY"
exit $FAILED
