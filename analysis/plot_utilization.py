#!/usr/bin/python3
"""Plot GPU busy fraction and effective host→device bandwidth per round over time (the paper's
Fig. 14: GPU SM utilization and effective PCIe bandwidth), one line per run, from a results file.

Per round: GPU busy = (sum of the round's GPU op durations) / round latency, from /runs/<run>/ops;
host→device bandwidth = bytes_h2d / latency. Time-weighted means over the whole run are printed and
shown in the legend. A run without per-op times (`ats sim` without --ops) has no GPU busy: stdout
and the GPU panel say so; when no run has them, only the host→device panel is drawn and its title
says why.

Examples:
  analysis/plot_utilization.py out.h5 -o util.png
  analysis/plot_utilization.py out.h5 --runs layer,ats -o util.png
Exit codes: 0 ok, 1 standard output could not be written, 2 bad input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def gpu_busy_per_round(run):
    """(round indices, busy fraction) from the ops table; None without ops."""
    import numpy as np
    if run.ops is None or len(run.ops) == 0:
        return None
    ops, rounds = run.ops, run.rounds
    gpu = ops[ops["backend"] == 1]
    busy = np.zeros(len(rounds))
    pos = np.searchsorted(rounds["index"], gpu["round"])
    ok = (pos < len(rounds)) & (rounds["index"][np.minimum(pos, len(rounds) - 1)] == gpu["round"])
    np.add.at(busy, pos[ok], gpu["t_end_s"][ok] - gpu["t_start_s"][ok])
    lat = rounds["latency_s"]
    return np.where(lat > 0, np.minimum(busy / np.where(lat > 0, lat, 1), 1.0), 0.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("results", help="results file written by `ats sim` or `ats run` (HDF5)")
    ap.add_argument("-o", "--out", default="utilization.png", help="output image (default utilization.png)")
    ap.add_argument("--runs", help="comma-separated run names (default: all)")
    a = ap.parse_args(argv)
    import atsresults as ar
    why = ar.output_error(a.out)
    if why:
        print(f"plot_utilization: {why}", file=sys.stderr)
        return 2

    import numpy as np
    res, runs = ar.load_runs("plot_utilization", a.results, a.runs)
    if runs is None:
        return 2

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with_ops = [run for run in runs if gpu_busy_per_round(run) is not None]
    if with_ops:
        fig, (ax_g, ax_p) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    else:  # nothing for a GPU panel: draw what exists and say why the rest is missing
        fig, ax_p = plt.subplots(1, 1, figsize=(9, 4))
        ax_g = None
    for run in runs:
        r = run.rounds
        if len(r) == 0:
            continue
        lat = r["latency_s"]
        t = r["t_start_s"]
        bw = np.where(lat > 0, r["bytes_h2d"] / np.where(lat > 0, lat, 1) / 1e9, 0.0)
        mean_bw = float(np.sum(r["bytes_h2d"]) / np.sum(lat) / 1e9) if np.sum(lat) > 0 else 0.0
        line, = ax_p.step(t, bw, where="post", lw=1, label=f"{run.name} (mean {mean_bw:.2f} GB/s)")
        busy = gpu_busy_per_round(run)
        msg = f"{run.name}: host->device {mean_bw:.3f} GB/s"
        if busy is not None:
            mean_busy = float(np.sum(busy * lat) / np.sum(lat)) if np.sum(lat) > 0 else 0.0
            ax_g.step(t, 100 * busy, where="post", lw=1, color=line.get_color(),
                      label=f"{run.name} (mean {100 * mean_busy:.1f}%)")
            msg += f", GPU busy {100 * mean_busy:.1f}%"
        else:
            msg += ", GPU busy: no per-op times in the file (ats sim --ops)"
        print(msg)
    missing = [run.name for run in runs if gpu_busy_per_round(run) is None]
    ax_p.set_ylabel("host→device [GB/s]")
    ax_p.set_xlabel("time [s]")
    head = ar.title(res)
    if ax_g is not None:
        ax_g.set_ylabel("GPU busy [% of round]")
        ax_g.set_ylim(0, 105)
        if missing:
            ax_g.text(0.5, 0.5, f"no GPU busy for {', '.join(missing)}: no per-op times (ats sim --ops)",
                      transform=ax_g.transAxes, ha="center", va="center", fontsize=8)
        ax_g.set_title(head, fontsize=10)
    else:
        ax_p.set_title(f"{head}\nGPU busy not drawn: no run has per-op times (ats sim --ops)", fontsize=10)
    for ax in (ax_g, ax_p):
        if ax is None:
            continue
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
