#!/usr/bin/python3
"""Sim versus real on an idle machine, in llama-bench's form: for every row of `ats bench model --policy`
result files (ppN: prefill tok/s of an N-token prompt; tgN: decode tok/s of N steps after a 1-token
prompt), the simulator's figure for the same model, policy and VRAM budget (`ats sim --trace none
--requests 1 --prompt N --gen 1`, or `--prompt 1 --gen N`) with the model's measured profile, and the
error 100 (sim - real) / real. Prints a markdown table, then the rows within 5 % and the mean absolute
error; exit 0 (the figures are reported, not asserted); bad input: one line naming the file, field
and value, exit 2; a failing simulation: exit 1.

Usage (from the repository root, after a build):
  /usr/bin/python3 experiments/validation/idle-table.py [--ats build/cli/ats] \\
      [--hw qwen3-14b=sim/hw/h200-host-profile.json ...] experiments/model-speed/h200/bench-policy-*.json
Default profiles: qwen3-14b -> sim/hw/h200-host-profile.json, qwen3-30b-a3b ->
sim/hw/h200-host-profile-qwen3-30b-a3b.json (relative to the repository, as --ats's default); a model
without one is an error naming it.
"""
import argparse
import json
import os
import subprocess
import sys

DEFAULT_HW = {
    "qwen3-14b": "sim/hw/h200-host-profile.json",
    "qwen3-30b-a3b": "sim/hw/h200-host-profile-qwen3-30b-a3b.json",
}


def fail(msg, code=2):
    print(f"idle-table.py: {msg}", file=sys.stderr)
    sys.exit(code)


def sim_figure(ats, model, hw, policy, budget, test):
    kind, n = test[:2], int(test[2:])
    prompt, gen = (n, 1) if kind == "pp" else (1, n)
    cmd = [ats, "sim", "--model", model, "--hw", hw, "--trace", "none", "--requests", "1", "--policy", policy,
           "--vram-budget", f"{budget}B", "--prompt", str(prompt), "--gen", str(gen), "--format", "json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        fail(f"--ats {ats}: cannot run it ({e.strerror})")
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed (rc {r.returncode}): {r.stderr.strip()}", 1)
    try:
        row = json.loads(r.stdout)[0]
        return float(row["prefill_tok_s" if kind == "pp" else "decode_tok_s"])
    except (ValueError, KeyError, IndexError, TypeError):
        fail(f"--ats {ats}: its `sim --format json` output is not a list of policy rows: {r.stdout[:80]!r}")


def policy_rows(path):
    """The policy rows of an `ats bench model --out` file, each checked: (model, policy, budget, test, real, sd)."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except OSError as e:
        fail(f"{path}: cannot read it ({e.strerror})")
    except ValueError as e:
        fail(f"{path}: not JSON ({e})")
    rows = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        fail(f"{path}: no list 'results' (not an `ats bench model --out` file)")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            fail(f"{path}: results[{i}]: {r!r} is not an object")
        if not r.get("policy"):
            continue  # backend rows (--backend): no plan to simulate
        for k, typ in (("model", str), ("policy", str), ("test", str), ("vram_budget_bytes", int), ("avg_ts", (int, float)),
                       ("stddev_ts", (int, float))):
            if not isinstance(r.get(k), typ) or isinstance(r.get(k), bool):
                fail(f"{path}: results[{i}].{k}: {r.get(k)!r} (missing or of the wrong type)")
        t = r["test"]
        if t[:2] not in ("pp", "tg") or not t[2:].isdigit() or int(t[2:]) < 1:
            fail(f"{path}: results[{i}].test: {t!r} (expected ppN or tgN)")
        if r["vram_budget_bytes"] < 1 or not r["avg_ts"] > 0:
            bad = "vram_budget_bytes" if r["vram_budget_bytes"] < 1 else "avg_ts"
            fail(f"{path}: results[{i}].{bad}: {r[bad]!r} (must be > 0)")
        out.append((r["model"], r["policy"], r["vram_budget_bytes"], t, float(r["avg_ts"]), float(r["stddev_ts"])))
    return out


def main():
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="ats bench model --out JSON files with policy rows")
    ap.add_argument("--ats", default=os.path.join(top, "build", "cli", "ats"), help="the ats binary [build/cli/ats]")
    ap.add_argument("--hw", action="append", default=[], metavar="MODEL=PATH",
                    help="the simulator's profile of MODEL (repeatable)")
    a = ap.parse_args()
    hw = {m: os.path.join(top, p) for m, p in DEFAULT_HW.items()}
    for h in a.hw:
        if "=" not in h or not h.split("=", 1)[0] or not h.split("=", 1)[1]:
            fail(f"--hw {h!r}: expected MODEL=PATH")
        m, p = h.split("=", 1)
        hw[m] = p
    rows = []
    for f in a.files:
        rows += [(f,) + r for r in policy_rows(f)]
    if not rows:
        fail(f"{', '.join(a.files)}: no policy rows (`ats bench model --policy ... --out FILE` writes them)")
    models = {r[1] for r in rows}
    for h in a.hw:
        if h.split("=", 1)[0] not in models:
            fail(f"--hw {h!r}: no rows of model {h.split('=', 1)[0]!r} in the files")
    table = {}  # (model, policy, budget) -> {test: (sim, real, sd)}
    for f, m, pol, b, test, real, sd in rows:
        if m not in hw:
            fail(f"{f}: model {m!r} has no profile: give --hw {m}=PATH")
        s = sim_figure(a.ats, m, hw[m], pol, b, test)
        table.setdefault((m, pol, b), {})[test] = (s, real, sd)
    tests = sorted({t for v in table.values() for t in v}, key=lambda t: (t[:2] != "pp", int(t[2:])))
    print("| model, budget | policy | " + " | ".join(f"{t} sim / real (error)" for t in tests) + " |")
    print("|---|---|" + "---|" * len(tests))
    errs = []
    for (m, p, b), v in table.items():
        cells = []
        for t in tests:
            if t not in v:
                cells.append("")
                continue
            s, real, sd = v[t]
            e = 100.0 * (s - real) / real
            errs.append(e)
            fmt = "{:.0f}" if t.startswith("pp") else "{:.2f}"
            cells.append(f"{fmt.format(s)} / {fmt.format(real)} ± {fmt.format(sd)} ({e:+.0f} %)")
        print(f"| {m}, {b / 2**30:.1f} GiB | {p} | " + " | ".join(cells) + " |")
    within = sum(abs(e) <= 5 for e in errs)
    print(f"\nwithin 5 %: {within} of {len(errs)}; mean absolute error {sum(abs(e) for e in errs) / len(errs):.1f} %")


if __name__ == "__main__":
    main()
