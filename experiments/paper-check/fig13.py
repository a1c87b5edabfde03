#!/usr/bin/python3
"""Paper Fig. 13 / §5.3 metric from `ats sim --out` results on traces/fig13-synth.h5.

Usage: fig13.py FIXED.h5:RUN AWARE.h5:RUN [OTHER.h5:RUN ...]
Mean decode TPOT per trace segment (idle 0-60 s, 60% CPU load 60-120 s, 60% GPU+PCIe load 120-180 s,
by round start time), the TPOT increase over idle, and how much the second run (load-aware) cuts the
first run's (fixed schedule) increase: 1 - increase_aware / increase_fixed (the paper: 13% under CPU
load, 38% under GPU+PCIe load).
"""
import os
import sys

import h5py
import numpy as np

SEGMENTS = [("idle", 0, 60), ("cpu60", 60, 120), ("gpupcie60", 120, 180)]


def tpot(spec):
    path, run = spec.rsplit(":", 1)
    with h5py.File(path, "r") as f:
        r = f["runs"][run]["rounds"][:]
    dec = r[r["phase"] == 1]
    out = []
    for _, a, b in SEGMENTS:
        m = (dec["t_start_s"] >= a) & (dec["t_start_s"] < b)
        out.append(float(np.mean(dec["latency_s"][m])) if m.any() else float("nan"))
    return out


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    rows = [(os.path.basename(s), tpot(s)) for s in sys.argv[1:]]
    print("%-40s %10s %10s %10s %10s %10s" % ("run", "idle ms", "cpu60 ms", "gpu60 ms", "+cpu ms", "+gpu ms"))
    for s, t in rows:
        print("%-40s %10.2f %10.2f %10.2f %10.2f %10.2f" % (s, 1e3 * t[0], 1e3 * t[1], 1e3 * t[2],
                                                         1e3 * (t[1] - t[0]), 1e3 * (t[2] - t[0])))
    fx, aw = rows[0][1], rows[1][1]
    for k, name, paper in ((1, "60% CPU load", 13), (2, "60% GPU+PCIe load", 38)):
        inc_f, inc_a = fx[k] - fx[0], aw[k] - aw[0]
        cut = 1 - inc_a / inc_f if inc_f != 0 else float("nan")
        print("load-aware cuts the TPOT increase under %-18s by %6.1f%%  (paper: %d%%)" % (name, 100 * cut, paper))
    return 0


if __name__ == "__main__":
    sys.exit(main())
