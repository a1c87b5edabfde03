#!/usr/bin/python3
"""Recorder vs the stressor's own probes ("sensor") in the loaded phases of a fig13 run.

Usage: sensor_vs_recorder.py REC.h5 CONTROL.csv [REC.h5 CONTROL.csv ...]
  REC.h5: the recording (`ats record --out`, DESIGN.md schema /load); CONTROL.csv: the stressor's control
  steps (`ats stress --log`; run.sh writes run-N/fig13.h5 and run-N/fig13-control.csv).

For each loaded phase of traces/fig13-synth.h5 (CPU 65-115 s, GPU and PCIe 125-175 s: the target segments
without their 5 s margins) and each 0.5 s control step of the stressor (column `measured`: the mean of the
sensor's probe sets over the step), the recorder's mean over the same 0.5 s. Prints both means, their
correlation over the steps, the spread of the step means, and the standard error of each phase mean (from
the 0.5 s step means, since neighbouring 0.1 s samples are correlated): how much of the recorder-vs-target
difference sampling noise alone explains. The noise of recorder minus target is
sqrt(se_sensor^2 + se_recorder^2 - 2 cov) (the controller drives the sensor's mean to the target), printed
with the measured correlation of the step means. The sensor column is the mean of the control steps inside
the phase, so it differs slightly from the stressor report's per-segment figure (other window).
Needs Debian's python3-h5py and numpy (/usr/bin/python3).
"""
import csv
import os
import sys

import h5py
import numpy as np

PHASES = [("cpu", 65.0, 115.0), ("gpu", 125.0, 175.0), ("pcie", 125.0, 175.0)]
TARGET = 0.4


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    RUNS = [(os.path.basename(args[i]), args[i], args[i + 1]) for i in range(0, len(args), 2)]
    print("run          res   sensor recorder  rec-tgt  corr  sd(step) sen/rec  se(mean) sen/rec  noise(rec-tgt)  recorder samples p10/med/p90")
    for run, h5, ctl in RUNS:
        try:
            with h5py.File(h5, "r") as f:
                t = f["load/t_s"][:]
                avail = {r: f["load/%s_avail" % r][:] for r in ("cpu", "gpu", "pcie")}
            with open(ctl, newline="") as fh:
                steps = list(csv.DictReader(fh))
        except (OSError, KeyError) as e:
            sys.exit("sensor_vs_recorder.py: %s: %s" % (run, e))
        for res, t0, t1 in PHASES:
            m = [(float(r["t_s"]), float(r["measured"])) for r in steps
                 if r["resource"] == res and t0 <= float(r["t_s"]) <= t1 and r["measured"] != "nan"]
            ts = np.array([a for a, _ in m])
            sen = np.array([b for _, b in m])
            rec = np.array([avail[res][(t >= x - 0.5) & (t < x)].mean() for x in ts])
            s = avail[res][(t >= t0) & (t < t1)]
            n = len(sen)
            corr = np.corrcoef(sen, rec)[0, 1]
            se_s, se_r = sen.std() / np.sqrt(n), rec.std() / np.sqrt(n)
            noise = np.sqrt(max(se_s ** 2 + se_r ** 2 - 2 * corr * se_s * se_r, 0.0))
            print("%-12s %-4s  %.3f   %.3f   %+6.1f%%  %+.2f   %.3f/%.3f     %.3f/%.3f     %5.1f%%          %.2f/%.2f/%.2f" % (
                run, res, sen.mean(), s.mean(), 100 * (s.mean() - TARGET) / TARGET, corr, sen.std(), rec.std(), se_s,
                se_r, 100 * noise / TARGET, np.percentile(s, 10), np.median(s), np.percentile(s, 90)))


if __name__ == "__main__":
    sys.exit(main())
