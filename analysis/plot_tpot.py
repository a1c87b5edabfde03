#!/usr/bin/python3
"""Plot decode TPOT over time, one line per run (policy), from an ATS results file.

Each decode round's latency is one TPOT sample, placed at the round's start time. A line joins the
decode rounds of a stretch; it breaks where a prefill ran between two decode rounds or the machine
idled longer than a median round (the microseconds `ats run` spends between rounds join them). One
line per run on stdout says how many rounds and stretches were drawn. A rolling median (--window)
smooths noise; rounds where the controller re-planned are marked with a dot. --loads adds a panel
with the load trace the runs replayed (the availability of CPU, GPU and PCIe: the file's 'trace'
attribute looked up in $ATS_TRACES_DIR, traces/ and ., or --trace FILE), and dashed, the load the
first run's controller estimated from its measurements (not drawn when it is 1.0 throughout, as in
runs without a load estimate). The title names model, hardware, trace and producer.
The paper's Fig. 13 is this plot for the 'ats' and a static policy under a load trace.

Examples:
  analysis/plot_tpot.py out.h5 -o tpot.png
  analysis/plot_tpot.py out.h5 --runs ats,layer --window 9 --loads -o tpot.png
  analysis/plot_tpot.py out.h5 --loads --trace traces/h200-fig13.h5 -o tpot.png
Exit codes: 0 ok, 1 standard output could not be written, 2 bad input (message names the file and
dataset; no run with a decode round; an empty or repeated --runs entry).
"""
import argparse
import json
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
    ap.add_argument("--loads", action="store_true",
                    help="add a panel with the load trace and the first run's estimate of the load")
    ap.add_argument("--trace", help="the load trace file for --loads (default: found from the file's 'trace')")
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
        segs = ar.decode_segments(run)
        color = None
        for k, seg in enumerate(segs):
            line, = ax.plot(t[seg], y[seg], lw=1.2, color=color,
                            label=f"{run.name} (mean {tpot.mean():.3g} ms)" if k == 0 else None)
            color = line.get_color()
        rs = d["rescheduled"] == 1
        if rs.any():
            ax.plot(t[rs], y[rs], "o", ms=3, color=color)
        print(f"{run.name}: {len(d)} decode rounds drawn as {len(segs)} line{'s' if len(segs) != 1 else ''}, "
              f"mean TPOT {tpot.mean():.3f} ms")
    ax.set_ylabel("TPOT [ms]" + (f" (rolling median of {a.window})" if a.window > 1 else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(a.title or ar.title(res), fontsize=10)
    if a.loads:
        lx = axes[1][0]
        r0 = runs[0].rounds
        t_end = float(np.max(r0["t_start_s"] + r0["latency_s"])) if len(r0) else 0.0
        colors = {"CPU": "C0", "GPU": "C1", "PCIe": "C2"}
        path, why = ar.find_trace(res, a.trace)
        if path:
            try:
                tt, av = ar.load_trace(path)
            except ar.ResultsError as e:
                print(f"plot_tpot: --loads: {e}", file=sys.stderr)
                return 2
            try:
                off = float(json.loads(res.attrs.get("config", "{}")).get("trace_offset_s", 0) or 0)
            except (ValueError, AttributeError):
                off = 0.0
            x = tt - off  # run time of each change point (the run started at trace time `off`)
            for lab, v in av.items():
                keep = x <= t_end
                xs, vs = x[keep], v[keep]
                lx.step(np.append(xs, t_end), np.append(vs, vs[-1] if len(vs) else np.nan), where="post",
                        lw=1.2, color=colors[lab], label=f"{lab} available (trace)")
            print(f"load trace: {path}" + (f" (from {off:g} s)" if off else ""))
        else:
            print(f"plot_tpot: --loads: {why}", file=sys.stderr)
        est = {"CPU": r0["load_cpu"], "GPU": r0["load_gpu"], "PCIe": r0["load_pcie"]}
        no_est = all(np.all(v == 1.0) for v in est.values())
        if not path or no_est:  # say in the panel what is not there
            notes = ([f"no load trace: {why}"] if not path else []) + \
                    ([f"run '{runs[0].name}': load estimate 1.0 throughout (none recorded): not drawn"] if no_est else [])
            lx.text(0.5, 0.5, "\n".join(notes), transform=lx.transAxes, ha="center", va="center", fontsize=7,
                    wrap=True)
        if no_est:
            print(f"{runs[0].name}: load estimate 1.0 throughout (no estimate recorded): not drawn")
        else:
            for lab, v in est.items():
                lx.step(r0["t_start_s"], v, where="post", lw=0.9, ls="--", color=colors[lab],
                        label=f"{lab} estimated by {runs[0].name}'s controller")
        lx.set_ylabel("available fraction /\nestimated speed factor", fontsize=8)
        lx.grid(alpha=0.3)
        if lx.get_legend_handles_labels()[0]:
            lx.legend(loc="best", fontsize=7)
    axes[-1][0].set_xlabel("time [s]")
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
