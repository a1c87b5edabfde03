#!/usr/bin/python3
"""Fifth session (2026-11-30, H200): how far apart do observers of one stressed CPU read it?

Prints (1) the idle CPU probe time per GEMV of every baseline file here (one process each), (2) for each
constant-0.4 arm (a CPU-only closed-loop `ats stress` and two `ats record` started together, same
baseline file), each recorder's mean over t >= 5 s with its standard error (from 0.5 s block means) and
the stressor's own mean over its control steps from t >= 13 s, (3) the fig13 runs' phase means.
Run from anywhere: /usr/bin/python3 experiments/stress-2026-11-30-s5/observers.py (Debian's h5py, numpy).
"""
import csv
import glob
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def base_ms_per_gemv(path):
    f = open(path).read().split()
    return 1e3 * float(f[0]) / float(f[3]), int(f[3])


def rec_mean(path):
    with h5py.File(path, "r") as f:
        t, x = f["load/t_s"][:], f["load/cpu_avail"][:]
    x = x[t >= 5]
    blocks = x[: len(x) // 5 * 5].reshape(-1, 5).mean(1)
    return x.mean(), blocks.std() / np.sqrt(len(blocks))


def main():
    print("(1) idle CPU probe, ms per GEMV (2048 x 2048 float, 16 threads), one process per baseline file")
    for p in sorted(glob.glob(os.path.join(HERE, "*", "b[0-9]*.txt")) + glob.glob(os.path.join(HERE, "*", "base*.txt"))):
        ms, reps = base_ms_per_gemv(p)
        print("  %-42s %.4f ms  (%d reps)" % (os.path.relpath(p, HERE), ms, reps))
    print("\n(2) constant CPU 0.4: two recorders and the stressor's own probes")
    print("  %-26s %-16s %-16s %-9s %s" % ("arm", "recorder 1", "recorder 2", "stressor", "rec1 - rec2 (of 0.4)"))
    for d in ("observers-unpinned", "observers-pinned"):
        for ctl in sorted(glob.glob(os.path.join(HERE, d, "ctl-*.csv"))):
            arm = os.path.basename(ctl)[4:-4]
            r = [rec_mean(os.path.join(HERE, d, "r%d-%s.h5" % (i, arm))) for i in (1, 2)]
            st = [float(row["measured"]) for row in csv.DictReader(open(ctl))
                  if row["measured"] != "nan" and float(row["t_s"]) >= 13]
            print("  %-26s %.3f +- %.3f    %.3f +- %.3f    %.3f     %+.1f%%" % (
                d.split("-")[1] + " " + arm, r[0][0], r[0][1], r[1][0], r[1][1], np.mean(st),
                100 * (r[0][0] - r[1][0]) / 0.4))
    print("\n(3) fig13 recordings: phase means (5 s margins) cpu / gpu / pcie in idle 5-55, CPU 65-115, GPU+PCIe 125-175 s")
    for p in sorted(glob.glob(os.path.join(HERE, "*", "fig13*.h5"))):
        with h5py.File(p, "r") as f:
            t = f["load/t_s"][:]
            cols = {r: f["load/%s_avail" % r][:] for r in ("cpu", "gpu", "pcie")}
        s = []
        for r in ("cpu", "gpu", "pcie"):
            s.append(" ".join("%.3f" % cols[r][(t >= a) & (t < b)].mean() for a, b in ((5, 55), (65, 115), (125, 175))))
        print("  %-38s cpu %s | gpu %s | pcie %s" % (os.path.relpath(p, HERE), *s))


if __name__ == "__main__":
    main()
