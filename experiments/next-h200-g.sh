#!/bin/bash
# experiments/next-h200-g.sh — sixth session, last device seconds (~2.5 minutes): the shipped defaults
# (ats stress --probes 5 by default now) on record-h200.sh's 90 s check target (30 s phases: idle, CPU 0.4,
# GPU+PCIe 0.4), recorded beside it. Prediction: every loaded phase within 10 %.
#   run(command="bash experiments/next-h200-g.sh", carry=[".deps"], timeout_s=200)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nextg ats
ATS_LOAD=$A STRESS_ARGS="--hogs-gpu 16" traces/record-h200.sh $W/f baseline check > $W/check.txt 2>&1
say "[$((SECONDS - T0)) s] check (defaults, --probes 5) rc=$? (0: every loaded phase within 10 %)"
grep -E "^wrote|^cpu |^gpu |^pcie |^hogs|max \|rel|ACCURACY|UNLOADED" $W/f/check.log | tee -a "$S"
