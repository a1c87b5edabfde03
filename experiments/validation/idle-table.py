#!/usr/bin/python3
"""Sim versus real on an idle machine, in llama-bench's form: for every row of `ats bench model --policy`
result files (ppN: prefill tok/s of an N-token prompt; tgN: decode tok/s of N steps after a 1-token
prompt), the simulator's figure for the same model, policy and VRAM budget (`ats sim --trace none
--requests 1 --prompt N --gen 1`, or `--prompt 1 --gen N`) with the model's measured profile, and the
error 100 (sim - real) / real. Prints a markdown table, then the rows within 5 % and the mean absolute
error; exit 0 (the figures are reported, not asserted).

Usage (from the repository root, after a build):
  /usr/bin/python3 experiments/validation/idle-table.py [--ats build/cli/ats] \\
      [--hw qwen3-14b=sim/hw/h200-host-profile.json ...] experiments/model-speed/h200/bench-policy-*.json
Default profiles: qwen3-14b -> sim/hw/h200-host-profile.json, qwen3-30b-a3b ->
sim/hw/h200-host-profile-qwen3-30b-a3b.json; a model without one is an error naming it.
"""
import argparse
import json
import subprocess
import sys

DEFAULT_HW = {
    "qwen3-14b": "sim/hw/h200-host-profile.json",
    "qwen3-30b-a3b": "sim/hw/h200-host-profile-qwen3-30b-a3b.json",
}


def sim_figure(ats, model, hw, policy, budget, test):
    kind, n = test[:2], int(test[2:])
    prompt, gen = (n, 1) if kind == "pp" else (1, n)
    cmd = [ats, "sim", "--model", model, "--hw", hw, "--trace", "none", "--requests", "1", "--policy", policy,
           "--vram-budget", f"{budget}B", "--prompt", str(prompt), "--gen", str(gen), "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"idle-table.py: {' '.join(cmd)} failed (rc {r.returncode}): {r.stderr.strip()}")
    row = json.loads(r.stdout)[0]
    return row["prefill_tok_s" if kind == "pp" else "decode_tok_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="ats bench model --out JSON files with policy rows")
    ap.add_argument("--ats", default="build/cli/ats", help="the ats binary [build/cli/ats]")
    ap.add_argument("--hw", action="append", default=[], metavar="MODEL=PATH",
                    help="the simulator's profile of MODEL (repeatable)")
    a = ap.parse_args()
    hw = dict(DEFAULT_HW)
    for h in a.hw:
        if "=" not in h:
            sys.exit(f"idle-table.py: --hw {h!r}: expected MODEL=PATH")
        m, p = h.split("=", 1)
        hw[m] = p
    table = {}  # (model, policy, budget) -> {test: (sim, real, sd)}
    for f in a.files:
        try:
            with open(f) as fh:
                doc = json.load(fh)
            rows = doc["results"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"idle-table.py: {f}: not an `ats bench model --out` file ({e})")
        for r in rows:
            if not r.get("policy"):
                continue  # backend rows (--backend): no plan to simulate
            m, test = r["model"], r["test"]
            if m not in hw:
                sys.exit(f"idle-table.py: {f}: model {m!r} has no profile: give --hw {m}=PATH")
            s = sim_figure(a.ats, m, hw[m], r["policy"], r["vram_budget_bytes"], test)
            table.setdefault((m, r["policy"], r["vram_budget_bytes"]), {})[test] = (s, r["avg_ts"], r["stddev_ts"])
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
    if errs:
        within = sum(abs(e) <= 5 for e in errs)
        print(f"\nwithin 5 %: {within} of {len(errs)}; mean absolute error {sum(abs(e) for e in errs) / len(errs):.1f} %")


if __name__ == "__main__":
    main()
