#!/usr/bin/python3
"""Heatmap of an ε × τ sweep table (/sweep of an ATS results file written by `ats sweep`).

One panel per trace (rows of the table with the same trace name), for one policy: ε (the
re-scheduling threshold) on the y axis, τ (the minimum interval, in TPOT multiples or seconds; shown
in ms when all are under a second) on the x axis, colour = the chosen metric. The best cell of each panel (lowest, or highest for
throughput metrics) is outlined and printed. A point that completed no request (NaN TPOT in /sweep)
is left blank and is never the best; a panel with no such point says so.

Examples:
  analysis/plot_sweep.py sweep.h5 -o sweep.png
  analysis/plot_sweep.py sweep.h5 --metric tpot_p99_s --policy ats --trace fig13-synth -o p99.png
Exit codes: 0 ok, 1 standard output could not be written, 2 bad input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

METRICS = {"tpot_mean_s": ("mean TPOT [ms]", 1e3, min), "tpot_p50_s": ("median TPOT [ms]", 1e3, min),
           "tpot_p99_s": ("p99 TPOT [ms]", 1e3, min), "decode_tok_s": ("decode [tok/s]", 1, max),
           "n_resched": ("re-schedules", 1, min), "ttft_s": ("TTFT [s]", 1, min)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("sweep", help="HDF5 file with a /sweep table")
    ap.add_argument("-o", "--out", default="sweep.png", help="output image (default sweep.png)")
    ap.add_argument("--metric", default="tpot_mean_s", choices=sorted(METRICS), help="colour (default tpot_mean_s)")
    ap.add_argument("--policy", help="policy to show (default: the first in the table)")
    ap.add_argument("--trace", action="append", help="trace(s) to show (repeatable; default: all)")
    a = ap.parse_args(argv)
    import atsresults as ar
    why = ar.output_error(a.out)
    if why:
        print(f"plot_sweep: {why}", file=sys.stderr)
        return 2

    import numpy as np
    try:
        res = ar.load(a.sweep)
    except ar.ResultsError as e:
        print(f"plot_sweep: {e}", file=sys.stderr)
        return 2
    sw = res.sweep
    if sw is None or len(sw) == 0:
        print(f"plot_sweep: {a.sweep}: dataset '/sweep': missing or empty", file=sys.stderr)
        return 2
    for col in ("trace", "policy", "eps", "interval", "interval_in_tpot", a.metric):
        if col not in sw.dtype.names:
            print(f"plot_sweep: {a.sweep}: dataset '/sweep': member '{col}' missing", file=sys.stderr)
            return 2
    dec = np.vectorize(lambda b: b.decode() if isinstance(b, bytes) else str(b))
    traces_all, policies = dec(sw["trace"]), dec(sw["policy"])
    policy = a.policy or policies[0]
    if policy not in set(policies):
        print(f"plot_sweep: {a.sweep}: dataset '/sweep': no row for policy '{policy}'", file=sys.stderr)
        return 2
    traces = a.trace or list(dict.fromkeys(traces_all[policies == policy]))
    label, scale, best_of = METRICS[a.metric]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(traces), figsize=(4.5 * len(traces) + 1, 4), squeeze=False)
    for ax, tr in zip(axes[0], traces):
        sel = (traces_all == tr) & (policies == policy)
        if not sel.any():
            print(f"plot_sweep: {a.sweep}: dataset '/sweep': no row for trace '{tr}', policy '{policy}'",
                  file=sys.stderr)
            return 2
        rows = sw[sel]
        eps, tau = np.unique(rows["eps"]), np.unique(rows["interval"])
        grid = np.full((len(eps), len(tau)), np.nan)
        for r in rows:
            # a point without a TPOT completed no request (`ats sweep` writes NaN): no figure, never the best
            if np.isfinite(r["tpot_mean_s"]):
                grid[np.searchsorted(eps, r["eps"]), np.searchsorted(tau, r["interval"])] = r[a.metric] * scale
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis_r" if best_of is min else "viridis")
        fig.colorbar(im, ax=ax, label=label)
        # τ in seconds (interval_in_tpot 0) is shown in ms when every value is under a second
        in_tpot = bool(rows["interval_in_tpot"][0])
        unit, tscale = ("TPOT", 1.0) if in_tpot else ("ms", 1e3) if tau.max() < 1 else ("s", 1.0)
        ax.set_xticks(range(len(tau)))
        ax.set_xticklabels([f"{t * tscale:g}" for t in tau], fontsize=7, rotation=90)
        ax.set_yticks(range(len(eps)))
        ax.set_yticklabels([f"{e:g}" for e in eps], fontsize=7)
        ax.set_xlabel(f"τ (minimum interval) [{unit}]")
        ax.set_ylabel("ε (threshold)")
        ax.set_title(f"{tr} ({policy})", fontsize=10)
        if np.isnan(grid).all():
            print(f"{tr} {policy}: no point completed a request: no best point")
            continue
        flat = np.where(np.isnan(grid), np.inf if best_of is min else -np.inf, grid)
        i, j = np.unravel_index(np.argmin(flat) if best_of is min else np.argmax(flat), grid.shape)
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2))
        print(f"{tr} {policy}: best eps={eps[i]:g} tau={tau[j] * tscale:g} {unit}: {label} {grid[i, j]:.4g}")
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
