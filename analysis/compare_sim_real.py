#!/usr/bin/python3
"""Compare a simulated and a measured results file (same schema): per pair of runs, mean/p50/p99
TPOT, decode tok/s, TTFT and GB moved host→device, with the simulator's relative error.

Prints a table (or --format csv|json) and draws TPOT over time, simulated vs measured, one panel
per pair. DESIGN.md's loop: record a trace, replay it in `ats sim`, run `ats run` under the same
load, then this script gives the sim-vs-real error per policy.

Pairing: `ats sim --out` names its runs after the policy (ats, layer, ...), `ats run --out` after
the backend (cpu, cuda, cpu+cuda), so name the pairs with --pair SIMRUN=REALRUN (repeatable; one
real run may be paired with several policies). Without --pair, runs of the same name are paired;
when there is none and each file holds exactly one run, those two are paired (said on stderr).
A model that differs between the two files (root attribute 'model', else the config's) is warned
about on stderr.

Examples:
  analysis/compare_sim_real.py sim.h5 real.h5 -o cmp.png
  analysis/compare_sim_real.py sim.h5 real.h5 --pair ats=cuda --pair layer=cuda -o cmp.png
  analysis/compare_sim_real.py sim.h5 real.h5 --format csv --no-plot
Exit codes: 0 ok, 1 standard output could not be written, 2 bad input (unreadable file, a --pair
naming a run the file lacks or given twice, nothing to pair, a paired run without a decode round
to draw, -o with --no-plot).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COLS = ("tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "decode_tok_s", "ttft_s", "gb_h2d")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("sim", help="results file of `ats sim` (or an `ats validate` file alone: its /sim and /real)")
    ap.add_argument("real", nargs="?", help="results file of `ats run`")
    ap.add_argument("-o", "--out", help="output image (default sim_vs_real.png; not with --no-plot)")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table", help="stdout format")
    ap.add_argument("--no-plot", action="store_true", help="print the comparison only")
    ap.add_argument("--pair", action="append", default=[], metavar="SIMRUN=REALRUN",
                    help="compare run SIMRUN of the sim file with run REALRUN of the real file (repeatable)")
    a = ap.parse_args(argv)
    if a.real is None:  # one file: an `ats validate` file's two trees
        a.sim, a.real = f"{a.sim}:sim", f"{a.sim}:real"
    elif a.sim.endswith(":real") and a.real.endswith(":sim"):
        print(f"compare_sim_real: warning: {a.sim} is the measured tree and {a.real} the simulated one: the columns "
              f"are swapped (SIM first, then REAL)", file=sys.stderr)
    pairs = []
    for p in a.pair:
        sn, eq, rn = p.partition("=")
        if not eq or not sn or not rn or "=" in rn:
            ap.error(f"--pair: '{p}' (must be SIMRUN=REALRUN, e.g. ats=cpu)")
        if (sn, rn) in pairs:
            print(f"compare_sim_real: --pair {p}: given twice", file=sys.stderr)
            return 2
        pairs.append((sn, rn))
    if a.no_plot and a.out is not None:
        print(f"compare_sim_real: -o {a.out}: unused with --no-plot (which draws no image): drop one of them",
              file=sys.stderr)
        return 2
    if a.out is None:
        a.out = "sim_vs_real.png"
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
    sm, rm = sim.model(), real.model()
    if sm and rm and sm != rm:
        print(f"compare_sim_real: warning: the files ran different models: {a.sim} '{sm}', {a.real} '{rm}'",
              file=sys.stderr)
    for sn, rn in pairs:
        for res, n in ((sim, sn), (real, rn)):
            if n not in {r.name for r in res.runs}:
                print(f"compare_sim_real: --pair {sn}={rn}: {res.path}: no run '{n}' "
                      f"(runs: {', '.join(r.name for r in res.runs)})", file=sys.stderr)
                return 2
    if not pairs:
        pairs = [(r.name, r.name) for r in sim.runs if r.name in {x.name for x in real.runs}]
    if not pairs and len(sim.runs) == 1 and len(real.runs) == 1:
        pairs = [(sim.runs[0].name, real.runs[0].name)]
        print(f"compare_sim_real: no run name in common: pairing the only run of each file, "
              f"{a.sim} '{pairs[0][0]}' with {a.real} '{pairs[0][1]}'", file=sys.stderr)
    if not pairs:
        print(f"compare_sim_real: no run in common between {a.sim} ({', '.join(r.name for r in sim.runs)}) "
              f"and {a.real} ({', '.join(r.name for r in real.runs)}): pair them with --pair SIMRUN=REALRUN",
              file=sys.stderr)
        return 2

    if not a.no_plot:
        # a run without a decode round has no TPOT to draw (`ats run -n 1`, a sim cut by --duration):
        # refused as plot_tpot.py refuses it, before anything is printed; --no-plot shows '-' for it
        for sn, rn in pairs:
            for res, n in ((sim, sn), (real, rn)):
                if not len(res.run(n).decode()):
                    print(f"compare_sim_real: {res.path}: run '{n}' has no decode round, so no TPOT to draw "
                          f"(pair {sn}={rn}; --no-plot prints the table alone)", file=sys.stderr)
                    return 2

    def label(sn, rn):
        return sn if sn == rn else f"{sn}={rn}"

    rows = []
    for sn, rn in pairs:
        s, r = sim.run(sn).summary(), real.run(rn).summary()
        row = {"run": label(sn, rn)}
        for c in COLS:
            # NaN (a TTFT with no finished prefill) shows as '-' and JSON null, as a missing figure
            sv, rv = (None if v is None or math.isnan(v) else v for v in (s.get(c), r.get(c)))
            row[f"sim_{c}"], row[f"real_{c}"] = sv, rv
            row[f"err_{c}"] = (sv - rv) / rv if sv is not None and rv not in (None, 0) else None
        row["sim_run"], row["real_run"] = sn, rn
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
        w = max([16] + [len(row["run"]) + 1 for row in rows])
        hdr = f"{'run':<{w}}" + "".join(f"{c:>26}" for c in COLS)
        print(hdr)
        for row in rows:  # a space before each cell, so that a wide one (a huge error) never joins the next
            print(f"{row['run']:<{w}}" + "".join(
                f" {fmt(row['sim_' + c]) + ' / ' + fmt(row['real_' + c]) + ' ' + fmt(row['err_' + c], True):>25}"
                for c in COLS))
        print("(each cell: simulated / measured, relative error of the simulation; run SIM=REAL: runs of "
              "different names paired)")
    if a.no_plot:
        return 0

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(pairs), 1, figsize=(9, 2.8 * len(pairs) + 0.5), squeeze=False, sharex=True)
    for ax, (sn, rn) in zip(axes[:, 0], pairs):
        for res, n, lab, st in ((sim, sn, "sim", "-"), (real, rn, "real", "--")):
            d = res.run(n).decode()
            if len(d):
                ax.plot(d["t_start_s"], d["latency_s"] * 1e3, st, lw=1,
                        label=f"{lab} {n} ({res.attrs.get('producer', '')})")
        ax.set_ylabel(f"{label(sn, rn)}\nTPOT [ms]")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(f"sim vs real: {os.path.basename(a.sim)} vs {os.path.basename(a.real)}", fontsize=10)
    fig.tight_layout()
    ar.save_figure(fig, a.out)
    return 0


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
