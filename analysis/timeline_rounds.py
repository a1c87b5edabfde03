#!/usr/bin/python3
"""Where did a round's time go? Per-track totals of an `ats sim --timeline` or `ats run --policy
--timeline` file (Chrome trace-event JSON, the one timeline format), averaged over the rounds chosen.

For each process of the file (`ats sim`: one per policy; `ats run`: one) and the chosen rounds (the
`rounds` track's slices: prefill and decode), every slice that starts inside a round is counted on its
track (CPU, GPU compute stream, copy engines, ...): busy time per round and its share of the round, and
the TOP names by time, with the layer prefix `blk.N.` dropped so that a name stands for all layers
(`attn`, `ffn_gate_exps`, `w ffn_down`). On the CPU track of `ats run`, the host thread's own work
before an op (category `host`: `switch to cpu`, `switch to cuda`, `issue`) is listed apart from the
ops. Tracks overlap in time (the streams run concurrently), so their busy times do not add up to the
round.

  timeline_rounds.py t.json --phase decode            # every decode round
  timeline_rounds.py t.json --rounds 4:36 --top 5     # rounds 4..35 (the rounds track's order)
  timeline_rounds.py t.json --format json              # one record per (process, track, name)

Exit 2 with one line naming the file on bad input (not JSON, no traceEvents, no round chosen).
"""
import argparse
import json
import numbers
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BLK = re.compile(r"blk\.\d+\.")


def fail(msg):
    print(f"timeline_rounds.py: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_range(s):
    m = re.fullmatch(r"(\d*):(\d*)", s)
    if not m:
        fail(f"--rounds '{s}': expected A:B (round indices, either may be empty)")
    a = int(m.group(1)) if m.group(1) else 0
    b = int(m.group(2)) if m.group(2) else None
    if b is not None and b <= a:
        fail(f"--rounds '{s}': empty range")
    return a, b


def load(path):
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except IsADirectoryError:
        fail(f"{path}: a folder, not a timeline file")
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except (ValueError, UnicodeDecodeError) as e:
        fail(f"{path}: not JSON ({e})")
    except RecursionError:
        fail(f"{path}: JSON nested too deep to be a trace-event file")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(events, list):
        fail(f"{path}: not a Chrome trace-event file (no traceEvents list)")
    return events


def key_ok(v):
    return isinstance(v, (int, str)) and not isinstance(v, bool)


def check_events(path, events):
    """One line naming the event for a slice or metadata event whose fields have the wrong types."""
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") not in ("X", "M"):
            continue
        for f in ("pid", "tid"):
            if f in e and not key_ok(e[f]):
                fail(f"{path}: traceEvents[{i}].{f}: {json.dumps(e[f])[:40]} (must be an integer or a string)")
        if "args" in e and not isinstance(e["args"], dict):
            fail(f"{path}: traceEvents[{i}].args: {json.dumps(e['args'])[:40]} (must be an object)")
        if e["ph"] == "X":
            for f in ("ts", "dur"):
                v = e.get(f)
                if not isinstance(v, numbers.Real) or isinstance(v, bool) or v != v or v in (float("inf"), float("-inf")):
                    fail(f"{path}: traceEvents[{i}].{f}: {json.dumps(v)[:40]} (must be a finite number)")


def summarize(events, phase, rng, top, only):
    procs, tracks = {}, {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "M":
            continue
        args = e.get("args") or {}
        if e.get("name") == "process_name":
            procs[e.get("pid")] = args.get("name", str(e.get("pid")))
        elif e.get("name") == "thread_name":
            tracks[(e.get("pid"), e.get("tid"))] = args.get("name", str(e.get("tid")))
    slices = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e]
    out = []
    for pid in sorted({e.get("pid") for e in slices}, key=lambda p: (p is None, str(p))):
        pname = procs.get(pid, str(pid))
        if only and pname != only:
            continue
        rounds = [e for e in slices if e.get("pid") == pid and tracks.get((pid, e.get("tid"))) == "rounds"]
        rounds.sort(key=lambda e: e["ts"])
        rounds = rounds[rng[0]:rng[1]]
        if phase != "all":
            rounds = [r for r in rounds if r.get("name") == phase]
        if not rounds:
            continue
        starts = [(r["ts"], r["ts"] + r["dur"]) for r in rounds]
        busy, count = {}, {}
        j = 0
        body = sorted((e for e in slices if e.get("pid") == pid and tracks.get((pid, e.get("tid"))) != "rounds"),
                      key=lambda e: e["ts"])
        for e in body:
            while j < len(starts) and starts[j][1] <= e["ts"]:
                j += 1
            if j == len(starts):
                break
            if e["ts"] < starts[j][0]:
                continue
            track = tracks.get((pid, e.get("tid")), str(e.get("tid")))
            if e.get("cat") == "host":
                track += " (host)"
            key = (track, BLK.sub("", str(e.get("name", ""))))
            busy[key] = busy.get(key, 0.0) + float(e["dur"])
            count[key] = count.get(key, 0) + 1
        n = len(rounds)
        mean_us = sum(r["dur"] for r in rounds) / n
        per_track = {}
        for (t, name), us in busy.items():
            per_track.setdefault(t, []).append((us / n, count[(t, name)] / n, name))
        out.append((pname, n, mean_us, per_track))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline", help="a --timeline file of ats sim or ats run --policy")
    ap.add_argument("--phase", choices=["prefill", "decode", "all"], default="all")
    ap.add_argument("--rounds", default=":", help="A:B, round indices in time order before --phase [all]")
    ap.add_argument("--top", type=int, default=8, help="names listed per track [8]")
    ap.add_argument("--process", help="only this process (ats sim: a policy)")
    ap.add_argument("--format", choices=["table", "json"], default="table")
    a = ap.parse_args()
    if a.top < 1:
        fail(f"--top {a.top}: must be >= 1")
    events = load(a.timeline)
    check_events(a.timeline, events)
    res = summarize(events, a.phase, parse_range(a.rounds), a.top, a.process)
    if not res:
        what = f"{a.phase} rounds" if a.phase != "all" else "rounds"
        fail(f"{a.timeline}: no {what} in --rounds {a.rounds}" + (f" of process '{a.process}'" if a.process else ""))
    if a.format == "json":
        rec = []
        for pname, n, mean_us, per_track in res:
            for t, items in per_track.items():
                for us, cnt, name in items:
                    rec.append({"process": pname, "rounds": n, "round_ms": mean_us / 1e3, "track": t, "name": name,
                                "ms_per_round": us / 1e3, "count_per_round": cnt})
        json.dump(rec, sys.stdout, indent=1)
        print()
        return
    for pname, n, mean_us, per_track in res:
        print(f"{pname}: {n} {a.phase if a.phase != 'all' else ''} round(s), mean {mean_us / 1e3:.3f} ms".replace("  ", " "))
        for t in sorted(per_track, key=lambda t: -sum(x[0] for x in per_track[t])):
            items = sorted(per_track[t], reverse=True)
            tot = sum(x[0] for x in items)
            print(f"  {t:<24} {tot / 1e3:9.3f} ms/round ({100 * tot / mean_us:5.1f} % of the round)")
            for us, cnt, name in items[:a.top]:
                print(f"      {name:<28} {us / 1e3:9.3f} ms  x{cnt:6.1f}  {us / cnt if cnt else 0:9.1f} us each")
            if len(items) > a.top:
                rest = sum(x[0] for x in items[a.top:])
                print(f"      ({len(items) - a.top} more names: {rest / 1e3:.3f} ms)")


if __name__ == "__main__":
    import atsresults
    atsresults.run_main(main)
