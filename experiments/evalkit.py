#!/usr/bin/python3
"""Shared tools of the paper-evaluation experiments (end-to-end/, load-adaptation/, ablation/, eps-tau/).

Every experiment writes its simulated and its measured numbers as CSV files of the same shape, so that
`compare` can put them side by side. The metric columns are those of `ats sim --format csv`:

    policy,prefill_tok_s,decode_tok_s,ttft_s,tpot_mean_ms,tpot_p50_ms,tpot_p99_ms,reschedules,gb_h2d,gpu_busy

preceded by the experiment's key columns (machine, model, prompt, ...).

Subcommands (run from the repository root with /usr/bin/python3):
  header KEYS                    the CSV header: KEYS (comma-separated) then the metric columns
  simrows FILE K=V...            the rows of an `ats sim --format csv` output FILE, prefixed with the
                                 values V (one per key, in order)
  runrow LOG K=V...              the row of one `ats run --policy` from its stderr LOG (the summary
                                 table it prints; GPU busy as a fraction); exit 1 when LOG has none
  compare SIM.csv HW.csv --on K1,K2 [--metrics M1,M2] [--where K=V ...] [--match K=SIMV:HWV ...]
                                 one table: the key columns, then per metric the simulated value,
                                 the measured one and measured/simulated; rows of SIM without a
                                 measured partner show '-' (a missing HW.csv: "not measured yet").
                                 --match K=SIMV:HWV pairs SIM rows whose K is SIMV with HW rows whose
                                 K is HWV (e.g. hw=h200-laptop:h200-laptop)
  bars CSV -o PNG --metric M --x K [--series K] [--panel K1,K2] [--where K=V ...] [--log] [--title T]
                                 grouped bars: one panel per value of the panel keys
  trimtrace IN.h5 OUT.h5 --end S     a copy of the load trace IN cut at S seconds, idle (1, 1, 1)
                                 from S on (what a stressor run for S seconds leaves)
  segments --trace T.h5 [--margin S] [--end S] LABEL=RESULTS.h5:[GROUP/]RUN ...
                                 mean decode TPOT per segment of constant load of the trace (by round
                                 start; the first S seconds of each segment left out), as CSV:
                                 label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds
  cut SEGMENTS.csv FIXED AWARE   how much AWARE cuts FIXED's TPOT increase over the first (idle)
                                 segment, per loaded segment (paper §5.3's metric)
  tpotplot -o PNG [--trace T.h5] [--window N] [--title T] LABEL=RESULTS.h5:RUN ...
                                 decode TPOT over time of several results files in one plot (rolling
                                 median of N rounds), the trace's availabilities below
  sweeprows SWEEP.h5 [--default EPS,TAU]   per trace of an `ats sweep --out` file: its best and its
                                 worst (ε, τ) by mean TPOT and the default point, as CSV:
                                 trace,point,eps,interval,tpot_mean_ms,reschedules
  valrows SUMMARY.json --side real|sim K=V...   rows (policy, prefill_tok_s, tpot_mean_ms,
                                 reschedules) of the records of an `ats validate --summary` file
  rank SIM.csv HW.csv [--metric M]   per trace (columns trace, point): the points in order of M
                                 (default tpot_mean_ms) simulated and measured, and whether the
                                 simulator's best point is also the measured best
Exit codes: 0 ok, 1 nothing found where a result was expected, 2 bad input.
"""
import csv
import os
import sys

METRICS = ["policy", "prefill_tok_s", "decode_tok_s", "ttft_s", "tpot_mean_ms", "tpot_p50_ms", "tpot_p99_ms",
           "reschedules", "gb_h2d", "gpu_busy"]


def die(msg, code=2):
    print(f"evalkit: {msg}", file=sys.stderr)
    sys.exit(code)


def kv_values(args, what):
    vals = []
    for a in args:
        if "=" not in a:
            die(f"{what}: '{a}' is not KEY=VALUE")
        vals.append(a.split("=", 1)[1])
    return vals


def cmd_header(argv):
    if len(argv) != 1:
        die("usage: header KEYS")
    print(",".join([k for k in argv[0].split(",") if k] + METRICS))


def cmd_simrows(argv):
    if not argv:
        die("usage: simrows FILE K=V...")
    vals = kv_values(argv[1:], "simrows")
    with open(argv[0]) as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][:len(METRICS)] != METRICS:
        die(f"{argv[0]}: not an `ats sim --format csv` output (header {rows[0] if rows else 'missing'})")
    if len(rows) < 2:
        die(f"{argv[0]}: no policy row", 1)
    for r in rows[1:]:
        print(",".join(vals + r[:len(METRICS)]))


def cmd_runrow(argv):
    """The summary of run_policy.c: a header line starting 'policy', a units line, then the row."""
    if not argv:
        die("usage: runrow LOG K=V...")
    vals = kv_values(argv[1:], "runrow")
    try:
        lines = open(argv[0], errors="replace").read().splitlines()
    except OSError as e:
        die(f"{argv[0]}: {e.strerror}")
    for i, ln in enumerate(lines):
        f = ln.split()
        if f[:3] == ["policy", "prefill", "decode"] and i + 2 < len(lines):
            row = lines[i + 2].split()
            if len(row) != 10 or not row[9].endswith("%"):
                die(f"{argv[0]}: line {i + 3}: not a summary row: '{lines[i + 2]}'", 1)
            row = [("" if x == "-" else x) for x in row]
            row[9] = "%.4f" % (float(row[9][:-1]) / 100)
            print(",".join(vals + row))
            return
    die(f"{argv[0]}: no `ats run --policy` summary (the run failed: see the log)", 1)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def filt(rows, where):
    for w in where:
        k, v = w.split("=", 1)
        rows = [r for r in rows if r.get(k) == v]
    return rows


def opt(argv, name, default=None, multi=False):
    vals, rest, i = [], [], 0
    while i < len(argv):
        if argv[i] == name:
            if i + 1 >= len(argv):
                die(f"{name} needs a value")
            vals.append(argv[i + 1])
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    argv[:] = rest
    if multi:
        return vals
    return vals[-1] if vals else default


def flag(argv, name):
    if name in argv:
        argv.remove(name)
        return True
    return False


def cmd_compare(argv):
    on = opt(argv, "--on")
    metrics = opt(argv, "--metrics", "prefill_tok_s,decode_tok_s,tpot_mean_ms").split(",")
    where = opt(argv, "--where", multi=True)
    match = opt(argv, "--match", multi=True)
    if len(argv) != 2 or not on:
        die("usage: compare SIM.csv HW.csv --on K1,K2 [--metrics M1,M2] [--where K=V] [--match K=SIMV:HWV]")
    keys = on.split(",")
    sim = filt(read_csv(argv[0]), where)
    hw = filt(read_csv(argv[1]), where) if os.path.exists(argv[1]) else None
    for m in match:
        k, v = m.split("=", 1)
        sv, hv = v.split(":", 1)
        sim = [r for r in sim if r.get(k) == sv]
        if hw is not None:
            hw = [r for r in hw if r.get(k) == hv]
    if not sim:
        die(f"{argv[0]}: no row left after --where/--match", 1)
    for k in keys + metrics:
        if k not in sim[0]:
            die(f"{argv[0]}: no column '{k}'")
    if hw is None:
        print(f"# {argv[1]}: not measured yet (run-hw.sh writes it); simulated values only")
    hwi = {tuple(r.get(k) for k in keys): r for r in (hw or [])}
    head = keys + [x for m in metrics for x in (m + " sim", m + " hw", "hw/sim")]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in sim:
        h = hwi.get(tuple(r.get(k) for k in keys), {})
        cells = [r.get(k, "") for k in keys]
        for m in metrics:
            s, x = fnum(r.get(m)), fnum(h.get(m))
            cells += [r.get(m) or "-", h.get(m) or "-", "%.3g" % (x / s) if s and x is not None else "-"]
        print("| " + " | ".join(cells) + " |")
    unmatched = [r for k, r in hwi.items() if k not in {tuple(s.get(kk) for kk in keys) for s in sim}]
    if unmatched:
        print(f"# {len(unmatched)} measured rows without a simulated partner (keys {keys})")


def cmd_bars(argv):
    out = opt(argv, "-o")
    metric, x, series = opt(argv, "--metric"), opt(argv, "--x"), opt(argv, "--series")
    panel = [k for k in (opt(argv, "--panel", "") or "").split(",") if k]
    where = opt(argv, "--where", multi=True)
    title = opt(argv, "--title")
    log = flag(argv, "--log")
    if len(argv) != 1 or not out or not metric or not x:
        die("usage: bars CSV -o PNG --metric M --x K [--series K] [--panel K1,K2] [--where K=V] [--log]")
    rows = filt(read_csv(argv[0]), where)
    if not rows:
        die(f"{argv[0]}: no row left after --where", 1)
    for k in [metric, x] + ([series] if series else []) + panel:
        if k not in rows[0]:
            die(f"{argv[0]}: no column '{k}'")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def uniq(seq):
        return list(dict.fromkeys(seq))
    panels = uniq(tuple(r[k] for k in panel) for r in rows)
    n = len(panels)
    cols = min(n, 2)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(6.4 * cols, 3.4 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for ax, p in zip(axes.flat, panels):
        pr = [r for r in rows if tuple(r[k] for k in panel) == p]
        xs = uniq(r[x] for r in pr)
        ss = uniq(r[series] for r in pr) if series else [None]
        w = 0.8 / len(ss)
        for j, s in enumerate(ss):
            ys = []
            for xv in xs:
                m = [r for r in pr if r[x] == xv and (s is None or r[series] == s)]
                ys.append(fnum(m[0][metric]) if m and fnum(m[0][metric]) is not None else 0.0)
            ax.bar([i + (j - (len(ss) - 1) / 2) * w for i in range(len(xs))], ys, w, label=s)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=30 if max(len(v) for v in xs) > 6 else 0, ha="right" if
                           max(len(v) for v in xs) > 6 else "center", fontsize=8)
        ax.set_ylabel(metric)
        if log:
            ax.set_yscale("log")
        ax.set_title(", ".join(f"{v}" for v in p) if p else "", fontsize=9)
        if series:
            ax.legend(fontsize=7, ncol=2)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, out)
    print(f"wrote {out} ({n} panels)")


def load_trace(path):
    import h5py
    import numpy as np
    try:
        with h5py.File(path, "r") as f:
            g = f["load"]
            return {k: np.asarray(g[k][:], dtype=float) for k in ("t_s", "cpu_avail", "gpu_avail", "pcie_avail")}, \
                {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in g.attrs.items()}
    except (OSError, KeyError) as e:
        die(f"{path}: not a load trace (/load with t_s, cpu_avail, gpu_avail, pcie_avail): {e}")


def cmd_trimtrace(argv):
    end = fnum(opt(argv, "--end"))
    if len(argv) != 2 or end is None or end <= 0:
        die("usage: trimtrace IN.h5 OUT.h5 --end S (S > 0)")
    import h5py
    import numpy as np
    tr, attrs = load_trace(argv[0])
    keep = tr["t_s"] < end
    out = {k: np.append(v[keep], end if k == "t_s" else 1.0) for k, v in tr.items()}
    tmp = argv[1] + ".tmp"
    with h5py.File(tmp, "w") as f:
        g = f.create_group("load")
        for k, v in out.items():
            g.create_dataset(k, data=v)
        g.attrs["source"] = f"{attrs.get('source', argv[0])} | cut at {end:g} s, idle after (experiments/evalkit.py trimtrace)"
        g.attrs["machine"] = attrs.get("machine", "unknown")
        g.attrs["description"] = f"{attrs.get('description', '')} [first {end:g} s of {os.path.basename(argv[0])}; idle from {end:g} s]"
    os.replace(tmp, argv[1])


def segments_of(tr, end):
    """Maximal stretches of one (cpu, gpu, pcie) value; a recorded trace's 0.1 s wiggles are merged by
    rounding to 0.05."""
    t = list(tr["t_s"]) + [end]
    segs = []
    for i in range(len(tr["t_s"])):
        v = tuple(round(float(tr[k][i]) * 20) / 20 for k in ("cpu_avail", "gpu_avail", "pcie_avail"))
        t0, t1 = t[i], t[i + 1] if i + 1 < len(t) else end
        if t0 >= end:
            break
        if segs and segs[-1][2] == v:
            segs[-1][1] = min(t1, end)
        else:
            segs.append([t0, min(t1, end), v])
    return segs


def load_rounds(spec):
    """FILE.h5:RUN, or FILE.h5:GROUP/RUN for a results tree inside GROUP (`ats validate`'s real/, sim/)."""
    import h5py
    path, run = spec.rsplit(":", 1)
    grp, _, run = run.rpartition("/")
    try:
        with h5py.File(path, "r") as f:
            return (f[grp] if grp else f)["runs"][run]["rounds"][:]
    except (OSError, KeyError) as e:
        die(f"{path}: no run '{run}' with /rounds: {e}")


def cmd_segments(argv):
    trace = opt(argv, "--trace")
    margin = fnum(opt(argv, "--margin", "0"))
    end = fnum(opt(argv, "--end"))
    if not trace or not argv:
        die("usage: segments --trace T.h5 [--margin S] [--end S] LABEL=RESULTS.h5:RUN ...")
    import numpy as np
    tr, _ = load_trace(trace)
    end = end if end is not None else float(tr["t_s"][-1])
    segs = segments_of(tr, end)
    print("label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds")
    for spec in argv:
        if "=" not in spec:
            die(f"'{spec}' is not LABEL=RESULTS.h5:RUN")
        label, rs = spec.split("=", 1)
        r = load_rounds(rs)
        d = r[r["phase"] == 1]
        for i, (a, b, v) in enumerate(segs):
            m = (d["t_start_s"] >= a + margin) & (d["t_start_s"] < b)
            tp = "%.2f" % (1e3 * float(np.mean(d["latency_s"][m]))) if m.any() else ""
            print(f"{label},{i},{a:g},{b:g},{v[0]:g},{v[1]:g},{v[2]:g},{tp},{int(m.sum())}")


def cmd_cut(argv):
    if len(argv) != 3:
        die("usage: cut SEGMENTS.csv FIXED AWARE")
    rows = read_csv(argv[0])
    fx = [r for r in rows if r["label"] == argv[1]]
    aw = [r for r in rows if r["label"] == argv[2]]
    if not fx or len(fx) != len(aw):
        die(f"{argv[0]}: labels '{argv[1]}' and '{argv[2]}' do not have the same segments", 1)
    f0, a0 = fnum(fx[0]["tpot_mean_ms"]), fnum(aw[0]["tpot_mean_ms"])
    print("segment,cpu,gpu,pcie,fixed_ms,aware_ms,fixed_increase_ms,aware_increase_ms,cut_pct")
    for f, a in zip(fx[1:], aw[1:]):
        fv, av = fnum(f["tpot_mean_ms"]), fnum(a["tpot_mean_ms"])
        if None in (f0, a0, fv, av):
            print(f"{f['segment']},{f['cpu']},{f['gpu']},{f['pcie']},,,,,")
            continue
        fi, ai = fv - f0, av - a0
        cut = "%.1f" % (100 * (1 - ai / fi)) if fi > 0 else ""
        print(f"{f['segment']},{f['cpu']},{f['gpu']},{f['pcie']},{fv:.2f},{av:.2f},{fi:.2f},{ai:.2f},{cut}")


def cmd_tpotplot(argv):
    out = opt(argv, "-o")
    trace = opt(argv, "--trace")
    window = int(opt(argv, "--window", "1"))
    title = opt(argv, "--title")
    if not out or not argv:
        die("usage: tpotplot -o PNG [--trace T.h5] [--window N] [--title T] LABEL=RESULTS.h5:RUN ...")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    n = 2 if trace else 1
    fig, axes = plt.subplots(n, 1, figsize=(8, 3.2 + 1.6 * (n - 1)), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.2][:n]})
    ax = axes[0][0]
    for spec in argv:
        label, rs = spec.split("=", 1)
        r = load_rounds(rs)
        d = r[r["phase"] == 1]
        y = 1e3 * d["latency_s"]
        if window > 1 and len(y) >= window:
            y = np.median(np.lib.stride_tricks.sliding_window_view(np.pad(y, (window // 2, window - 1 - window // 2),
                                                                            mode="edge"), window), axis=1)
        x = np.asarray(d["t_start_s"], dtype=float)
        y = np.asarray(y, dtype=float)
        if len(x) > 2:  # a line breaks where a prefill or an idle gap lies between two decode rounds
            gap = np.nonzero(np.diff(x) > 2 * np.median(d["latency_s"]))[0] + 1
            x, y = np.insert(x, gap, np.nan), np.insert(y, gap, np.nan)
        ax.plot(x, y, lw=1, label=label)
        rr = d[d["rescheduled"] != 0] if "rescheduled" in d.dtype.names else d[:0]
        if len(rr):
            ax.plot(rr["t_start_s"], 1e3 * rr["latency_s"], ".", ms=3, color=ax.lines[-1].get_color())
    ax.set_ylabel("decode TPOT [ms]")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    if trace:
        tr, _ = load_trace(trace)
        b = axes[1][0]
        for k in ("cpu_avail", "gpu_avail", "pcie_avail"):
            b.step(tr["t_s"], tr[k], where="post", label=k.split("_")[0], lw=1)
        b.set_ylim(0, 1.05)
        b.set_ylabel("available")
        b.legend(fontsize=7, ncol=3)
        b.grid(alpha=0.3)
    axes[-1][0].set_xlabel("time [s]")
    fig.tight_layout()
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=80)
    os.replace(tmp, out)
    print(f"wrote {out}")


def cmd_sweeprows(argv):
    dflt = opt(argv, "--default", "0.15,5")
    if len(argv) != 1:
        die("usage: sweeprows SWEEP.h5 [--default EPS,TAU]")
    de, dt = (float(x) for x in dflt.split(","))
    import h5py
    import numpy as np
    try:
        with h5py.File(argv[0], "r") as f:
            sw = f["sweep"][:]
    except (OSError, KeyError) as e:
        die(f"{argv[0]}: no /sweep table: {e}")
    dec = lambda b: b.decode() if isinstance(b, bytes) else str(b)  # noqa: E731
    print("trace,point,eps,interval,tpot_mean_ms,reschedules")
    for t in dict.fromkeys(dec(x) for x in sw["trace"]):
        s = sw[np.array([dec(x) == t for x in sw["trace"]])]
        ok = s[np.isfinite(s["tpot_mean_s"])]
        if len(ok):
            b = ok[np.argmin(ok["tpot_mean_s"])]
            print(f"{t},best,{b['eps']:g},{b['interval']:g},{1e3 * b['tpot_mean_s']:.2f},{int(b['n_resched'])}")
        if len(ok):
            w = ok[np.argmax(ok["tpot_mean_s"])]
            print(f"{t},worst,{w['eps']:g},{w['interval']:g},{1e3 * w['tpot_mean_s']:.2f},{int(w['n_resched'])}")
        d = s[(np.abs(s["eps"] - de) < 1e-9) & (np.abs(s["interval"] - dt) < 1e-9)]
        if len(d):
            print(f"{t},default,{de:g},{dt:g},{1e3 * d[0]['tpot_mean_s']:.2f},{int(d[0]['n_resched'])}")


def cmd_valrows(argv):
    """Rows of the metric CSV from the records of an `ats validate --summary` file: 'real' -> HW.csv,
    'sim' -> SIM.csv (policy, prefill_tok_s, tpot_mean_ms, reschedules; the rest empty)."""
    which = opt(argv, "--side")
    if len(argv) < 1 or which not in ("real", "sim"):
        die("usage: valrows SUMMARY.json --side real|sim K=V...")
    import json
    vals = kv_values(argv[1:], "valrows")
    try:
        recs = json.load(open(argv[0]))
    except (OSError, ValueError) as e:
        die(f"{argv[0]}: not a JSON list of validation records: {e}")
    if not isinstance(recs, list) or not recs:
        die(f"{argv[0]}: no validation record", 1)
    for r in recs:
        def g(k):
            v = r.get(f"{which}_{k}")
            return "" if v is None else f"{v:g}"
        print(",".join(vals + [r.get("policy", ""), g("prefill_tok_s"), "", "", g("tpot_ms"), "", "", g("resched"), "", ""]))


def cmd_rank(argv):
    metric = opt(argv, "--metric", "tpot_mean_ms")
    if len(argv) != 2:
        die("usage: rank SIM.csv HW.csv [--metric M]")
    sim = read_csv(argv[0])
    hw = read_csv(argv[1]) if os.path.exists(argv[1]) else []
    print("trace,sim_order,sim_spread_pct,hw_order,hw_spread_pct,sim_best_is_hw_best")
    for t in dict.fromkeys(r["trace"] for r in sim):
        def order(rows):
            v = sorted((fnum(r[metric]), r["point"]) for r in rows if r["trace"] == t and fnum(r[metric]) is not None)
            spread = 100 * (v[-1][0] / v[0][0] - 1) if v and v[0][0] > 0 else 0.0
            return [p for _, p in v], spread
        (so, ss), (ho, hs) = order(sim), order(hw)
        if not ho:
            verdict = "not measured"
        elif ss < 1:
            verdict = "tie in the simulator (spread < 1%)"
        else:
            verdict = "yes" if so[0] == ho[0] else "no"
        print(f"{t},{' < '.join(so)},{ss:.1f},{' < '.join(ho) or '-'},{hs:.1f},{verdict}")


CMDS = {"header": cmd_header, "simrows": cmd_simrows, "runrow": cmd_runrow, "compare": cmd_compare,
        "bars": cmd_bars, "trimtrace": cmd_trimtrace, "segments": cmd_segments, "cut": cmd_cut,
        "tpotplot": cmd_tpotplot, "sweeprows": cmd_sweeprows, "rank": cmd_rank,
        "valrows": cmd_valrows}

if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe (| head) ends it quietly, as the C tools
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    if sys.argv[1] not in CMDS:
        die(f"unknown subcommand '{sys.argv[1]}' (one of {', '.join(CMDS)})")
    CMDS[sys.argv[1]](sys.argv[2:])
