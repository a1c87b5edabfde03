#!/bin/bash
# Records the load traces of traces/README.md on the GPU machine (16-core host + H200) with the
# project's own tools (ats record, ats stress; built alone by traces/build-loadtool.sh).
#   usage: traces/record-h200.sh OUTDIR STEP...
#   steps: build baseline idle calibrate fig13 cpu-compile gpu-train pcie-copies
# DUR (default 180) is each recording's length [s]; IDLE_DUR overrides it for `idle`.
# Every step logs to stdout; traces land in OUTDIR/<name>.h5, the baseline in OUTDIR/base.txt, the
# stressor's calibration in OUTDIR/calib.txt.
set -u
cd "$(dirname "$0")/.."
OUT=$1; shift
A=build-load/ats-load
DUR=${DUR:-180}
M=h200-host
export LD_LIBRARY_PATH=$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
BG=""
cleanup() { [ -n "$BG" ] && kill -TERM -- -"$BG" 2>/dev/null; sleep 1; [ -n "$BG" ] && kill -KILL -- -"$BG" 2>/dev/null; BG=""; }
trap cleanup EXIT INT TERM
rec() { # rec NAME DESCRIPTION
  $A record --baseline "$OUT/base.txt" --duration "$DUR" --machine $M --out "$OUT/$1.h5" --description "$2" --progress
  $A trace show "$OUT/$1.h5" | tail -7
}
for step; do
  echo "=== $step $(date -u +%T)"
  case $step in
  build) nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; nproc
         traces/build-loadtool.sh build-load ;;
  baseline) $A record --save-baseline "$OUT/base.txt" --baseline-s 5; cat "$OUT/base.txt" ;;
  idle) DUR=${IDLE_DUR:-$DUR} rec idle "idle: nothing else running" ;;
  calibrate) $A stress --calibrate "$OUT/calib.txt" --settle 0.4 --measure 1.0 --verbose ;;
  fig13)
    setsid $A stress --trace traces/fig13-synth.h5 --calibration "$OUT/calib.txt" --duration "$DUR" --verbose &
    BG=$!
    rec fig13 "fig13: ats stress --trace traces/fig13-synth.h5 --calibration calib.txt (idle 0-60 s, CPU avail 0.4 60-120 s, GPU+PCIe avail 0.4 120-180 s), recorded at the same time"
    wait "$BG"; BG=""
    $A trace compare "$OUT/fig13.h5" traces/fig13-synth.h5 --margin 5 ;;
  cpu-compile)
    CF="-O2 -std=c11 -fopenmp -D_GNU_SOURCE -DH5_USE_110_API -Isched/include -Icommon/include -Iexec/include -Iexec/cuda -Icli -Isim/include -Ibuild-load/gen -I/usr/include/hdf5/serial -I.deps/root/usr/include"
    setsid bash -c "while :; do ls sched/src/*.c common/src/*.c sim/src/*.c exec/src/*.c cli/*.c | xargs -P 16 -I{} gcc $CF -c {} -o /dev/null 2>/dev/null; ls exec/cuda/*.cu | xargs -P 16 -I{} nvcc -O2 -arch=sm_90 -c {} -o /dev/null 2>/dev/null; done" &
    BG=$!
    rec cpu-compile "cpu-compile: parallel build of this project's C (gcc -O2, 16 jobs) and CUDA (nvcc sm_90) sources in a loop"
    cleanup ;;
  gpu-train)
    setsid python3 traces/gpu-train.py &
    BG=$!; sleep 6
    rec gpu-train "gpu-train: PyTorch ResNet-18 training loop (traces/gpu-train.py: batch 128x3x224x224 bf16 autocast, pinned host batches copied each step), started 6 s before"
    cleanup ;;
  pcie-copies)
    setsid python3 traces/pcie-copies.py &
    BG=$!; sleep 4
    rec pcie-copies "pcie-copies: PyTorch bulk copies (traces/pcie-copies.py: 256 MiB pinned buffers, H2D and D2H at once on two streams, back to back), started 4 s before"
    cleanup ;;
  *) echo "unknown step $step" ;;
  esac
done
echo "=== end $(date -u +%T)"
