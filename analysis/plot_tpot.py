#!/usr/bin/python3
"""Plot decode TPOT over time, one line per run (policy), from an ATS results file.

Each decode round's latency is one TPOT sample, placed at the round's start time. A rolling median
(--window) smooths noise; rounds where the controller re-planned are marked with a dot; --loads
adds a second panel with the load factors the controller saw (CPU, GPU, PCIe) for the first run.
The paper's Fig. 13 is this plot for the 'ats' and a static policy under a load trace.

Examples:
  analysis/plot_tpot.py out.h5 -o tpot.png
  analysis/plot_tpot.py out.h5 --runs ats,layer --window 9 --loads -o tpot.png
Exit codes: 0 ok, 1 standard output could not be written, 2 bad input (message names the file and
dataset; no run with a decode round; an empty or repeated --runs entry).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def rolling_median(x, w):
    import numpy as np
    if w <= 1 or len(x) < w:
        return x
    pad = w // 2
    xp = np.pad(x, (pad, w - 1 - pad), mode="edge")
    win = np.lib.stride_tricks.sliding_window_view(xp, w)
    return np.median(win, axis=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("results", help="results file written by `ats sim` or `ats run` (HDF5)")
    ap.add_argument("-o", "--out", default="tpot.png", help="output image (PNG, SVG or PDF; default tpot.png)")
    ap.add_argument("--runs", help="comma-separated run names to plot (default: all)")
    ap.add_argument("--window", type=int, default=1, help="rolling-median window in rounds (default 1: raw)")
    ap.add_argument("--loads", action="store_true", help="add a panel with the load factors seen")
    ap.add_argument("--title", help="figure title (default: model / hw / trace from the file)")
    a = ap.parse_args(argv)
    import atsresults as ar
    why = ar.output_error(a.out)
    if why:
        print(f"plot_tpot: {why}", file=sys.stderr)
        return 2
    if a.window < 1:
        ap.error(f"--window: {a.window} (must be >= 1)")

    res, runs = ar.load_runs("plot_tpot", a.results, a.runs)
    if runs is None:
        return 2
    if not any(len(run.decode()) for run in runs):
        print(f"plot_tpot: {a.results}: no run has a decode round, so no TPOT to draw "
              f"(runs: {', '.join(r.name for r in runs)})", file=sys.stderr)
        return 2

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    nrows = 2 if a.loads else 1
    fig, axes = plt.subplots(nrows, 1, figsize=(9, 4 + 2 * (nrows - 1)), sharex=True, squeeze=False)
    ax = axes[0][0]
    for run in runs:
        d = run.decode()
        if len(d) == 0:
            print(f"plot_tpot: run '{run.name}' has no decode round; skipped", file=sys.stderr)
            continue
        t, tpot = d["t_start_s"], d["latency_s"] * 1e3
        y = rolling_median(tpot, a.window)
        # break the line where other rounds (a prefill, an idle gap) ran between two decode rounds
        gap = np.nonzero(t[1:] > t[:-1] + d["latency_s"][:-1] * (1 + 1e-9) + 1e-12)[0] + 1
        line, = ax.plot(np.insert(t, gap, np.nan), np.insert(y, gap, np.nan), lw=1.2,
                        label=f"{run.name} (mean {tpot.mean():.1f} ms)")
        rs = d["rescheduled"] == 1
        if rs.any():
            ax.plot(t[rs], y[rs], "o", ms=3, color=line.get_color())
    ax.set_ylabel("TPOT [ms]" + (f" (rolling median of {a.window})" if a.window > 1 else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    at = res.attrs
    ax.set_title(a.title or f"{at.get('model', '?')} on {at.get('hw', '?')}, trace {at.get('trace', '') or 'none'}"
                 f" ({at.get('producer', '')})", fontsize=10)
    if a.loads:
        lx = axes[1][0]
        r0 = runs[0].rounds
        for col, lab in (("load_cpu", "CPU"), ("load_gpu", "GPU"), ("load_pcie", "PCIe")):
            lx.step(r0["t_start_s"], r0[col], where="post", label=lab, lw=1)
        lx.set_ylabel(f"speed factor seen\n({runs[0].name})")
        lx.grid(alpha=0.3)
        lx.legend(loc="best", fontsize=8)
    axes[-1][0].set_xlabel("time [s]")
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
