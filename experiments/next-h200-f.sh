#!/bin/bash
# experiments/next-h200-f.sh — sixth session, last call (~5.5 minutes) on main after merging attn-split:
#   1. the GPU bench with the defaults (Q4_0 wide rule, split decode attention): results file;
#   2. `ats run --out` on the cuda backend (run name "cuda", ops' backend ATS_GPU: never run on a GPU);
#   3. the CPU bench again (this morning: DRAM read 59.7 GB/s where earlier sessions measured ~101);
#   4. fig13 with --probes 5 a second time (first: +2.5 / +7.8 / +3.7 %, passed). Prediction: passes.
#   run(command="bash experiments/next-h200-f.sh", carry=[".deps", ".gpu-shared"], timeout_s=480)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nextf ats
timeout 150 $A bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16 --out "$OUT/bench-kernels-gpu.json" > $W/bk.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels (GPU, defaults) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K|Q8_0) |^gpu |type " $W/bk.txt | tee -a "$S"
M=$top/.gpu-shared/models/stories260K
$A run --model $M/stories260K.gguf --temp 0 -n 64 --backend cuda --out $W/run-cuda.h5 > /dev/null 2> $W/run-cuda.err
say "ats run --out (cuda) rc=$?: groups $( (h5ls -r $W/run-cuda.h5 2>/dev/null || echo 'no h5ls') | awk '{print $1}' | tr '\n' ' ') (ops' backend column: read $W/run-cuda.h5 back here)"
timeout 60 $A bench kernels --skip-gpu --threads 16 --reps 30 --prompt 128 --decode 8 --out "$OUT/bench-kernels-cpu.json" > $W/bkc.txt 2>&1
say "[$((SECONDS - T0)) s] bench kernels (CPU) rc=$?"; grep -E "DRAM|^(Q4_0|Q4_K) |^cpu " $W/bkc.txt | tee -a "$S"
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16 --probes 5" traces/record-h200.sh $W/f baseline fig13 > $W/fig13.txt 2>&1
say "[$((SECONDS - T0)) s] fig13 (--probes 5, second run) rc=$? (0: every loaded phase within 10 %)"
grep -E "^wrote|^cpu |^gpu |^pcie |^hogs|max \|rel|ACCURACY|UNLOADED" $W/f/fig13.log | tee -a "$S"
cp $W/f/fig13.h5 $OUT/fig13.h5 2>/dev/null
say "[$((SECONDS - T0)) s] done"
