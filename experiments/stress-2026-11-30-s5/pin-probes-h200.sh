#!/bin/bash
# experiments/stress-2026-11-30-s5/pin-probes-h200.sh — fig13 with only the probe threads pinned (`--pin` for
# the stressor and the recorder; the CPU hogs unpinned): pin-h200.sh pinned the hogs too, which put every
# loaded phase within 4.6 % but made the GPU and PCIe probes read 0.76-0.78 during the CPU-only phase.
# Prediction: the CPU phase as pinned (observers agree), the GPU/PCIe readings of the CPU phase back to
# ~0.95 as unpinned. ~4 min:
#   run(command="bash experiments/stress-2026-11-30-s5/pin-probes-h200.sh", carry=[".deps"], timeout_s=600)
. experiments/h200-common.sh
h200_setup pinp ats
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16 --pin" RECORD_ARGS="--pin" timeout 280 traces/record-h200.sh $W/rec baseline fig13 > $W/rec.log 2>&1
say "fig13 --pin (probes only) rc=$? (0: every loaded phase within 10 %)"
grep -E "^(cpu|gpu|pcie) +[0-9.]+ +[0-9.]+ +[01]\.[0-9]+ +[0-9.]+ +[-+]|ACCURACY|UNLOADED|max \|rel|hogs cpu|probe duty|baseline probe" $W/rec.log | tee -a "$S"
cp $W/rec/fig13.h5 "$OUT/fig13-pinp.h5" 2>/dev/null
