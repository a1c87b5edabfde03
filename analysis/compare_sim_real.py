#!/usr/bin/python3
"""Compare a simulated and a measured results file (same schema): per run (policy) present in both,
mean/p50/p99 TPOT, decode tok/s, TTFT and GB moved host→device, with the simulator's relative error.

Prints a table (or --format csv|json) and draws TPOT over time, simulated vs measured, one panel
per run. DESIGN.md's loop: record a trace, replay it in `ats sim`, run `ats run` under the same
load, then this script gives the sim-vs-real error per policy.

Examples:
  analysis/compare_sim_real.py sim.h5 real.h5 -o cmp.png
  analysis/compare_sim_real.py sim.h5 real.h5 --format csv --no-plot
Exit codes: 0 ok, 2 bad input (unreadable file, no run in common).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COLS = ("tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "decode_tok_s", "ttft_s", "gb_h2d")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("sim", help="results file of `ats sim`")
    ap.add_argument("real", help="results file of `ats run`")
    ap.add_argument("-o", "--out", default="sim_vs_real.png", help="output image (default sim_vs_real.png)")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table", help="stdout format")
    ap.add_argument("--no-plot", action="store_true", help="print the comparison only")
    a = ap.parse_args(argv)
    import atsresults as ar
    why = ar.output_error(a.out) if not a.no_plot else None
    if why:
        print(f"compare_sim_real: {why}", file=sys.stderr)
        return 2

    try:
        sim, real = ar.load(a.sim), ar.load(a.real)
    except ar.ResultsError as e:
        print(f"compare_sim_real: {e}", file=sys.stderr)
        return 2
    common = [r.name for r in sim.runs if r.name in {x.name for x in real.runs}]
    if not common:
        print(f"compare_sim_real: no run in common between {a.sim} ({', '.join(r.name for r in sim.runs)}) "
              f"and {a.real} ({', '.join(r.name for r in real.runs)})", file=sys.stderr)
        return 2
    rows = []
    for n in common:
        s, r = sim.run(n).summary(), real.run(n).summary()
        row = {"run": n}
        for c in COLS:
            sv, rv = s.get(c), r.get(c)
            row[f"sim_{c}"], row[f"real_{c}"] = sv, rv
            row[f"err_{c}"] = (sv - rv) / rv if sv is not None and rv not in (None, 0) else None
        rows.append(row)

    def fmt(v, pct=False):
        if v is None:
            return "-"
        return f"{100 * v:+.1f}%" if pct else f"{v:.4g}"

    if a.format == "json":
        print(json.dumps(rows, indent=1))
    elif a.format == "csv":
        keys = list(rows[0].keys())
        print(",".join(keys))
        for row in rows:
            print(",".join("" if row[k] is None else str(row[k]) for k in keys))
    else:
        hdr = f"{'run':<16}" + "".join(f"{c:>26}" for c in COLS)
        print(hdr)
        for row in rows:
            print(f"{row['run']:<16}" + "".join(
                f"{fmt(row['sim_' + c]) + ' / ' + fmt(row['real_' + c]) + ' ' + fmt(row['err_' + c], True):>26}"
                for c in COLS))
        print("(each cell: simulated / measured, relative error of the simulation)")
    if a.no_plot:
        return 0

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(common), 1, figsize=(9, 2.8 * len(common) + 0.5), squeeze=False, sharex=True)
    for ax, n in zip(axes[:, 0], common):
        for res, lab, st in ((sim, "sim", "-"), (real, "real", "--")):
            d = res.run(n).decode()
            ax.plot(d["t_start_s"], d["latency_s"] * 1e3, st, lw=1, label=f"{lab} ({res.attrs.get('producer', '')})")
        ax.set_ylabel(f"{n}\nTPOT [ms]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(f"sim vs real: {os.path.basename(a.sim)} vs {os.path.basename(a.real)}", fontsize=10)
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
