"""Reading ATS results files (the one HDF5 schema of DESIGN.md, common/README.md) with h5py.

Used by the plotting scripts of this folder; importable on its own:
    import atsresults as ar
    f = ar.load("out.h5")            # ar.Results
    for run in f.runs: run.name, run.policy, run.rounds (numpy structured array), run.ops or None
    f.sweep                          # numpy structured array or None
Bad files raise ar.ResultsError with a message naming the file and the dataset or attribute.
"""
import json
import signal
import sys

import numpy as np


# a closed stdout (`... | head -1`) ends the script quietly by SIGPIPE, as it does the C tools (no
# BrokenPipeError trace). Python ignores SIGPIPE before any script runs, so a SIGPIPE its parent ignored
# cannot be seen here and is not kept (the C tools keep it: common/src/outfile.c); other write failures
# (a full disk) are "standard output: write failed" (run_main)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

SCHEMA = "ats-results"
SCHEMA_VERSION = 1
ROUND_FIELDS = ("index", "phase", "tokens", "t_start_s", "latency_s", "n_promoted",
                "rescheduled", "bytes_h2d", "load_cpu", "load_gpu", "load_pcie")
PHASE_PREFILL, PHASE_DECODE = 0, 1


class ResultsError(Exception):
    """A results file that does not follow the schema."""


class Run:
    def __init__(self, name, policy, config, rounds, ops, gen_tok=None):
        self.name, self.policy, self.config, self.rounds, self.ops = name, policy, config, rounds, ops
        self.gen_tok = gen_tok  # decode steps per request (the file's config "gen_tok"; None: unknown)

    def decode(self):
        """Decode rounds only (their latency_s is the TPOT sample)."""
        return self.rounds[self.rounds["phase"] == PHASE_DECODE]

    def prefill(self):
        return self.rounds[self.rounds["phase"] == PHASE_PREFILL]

    def summary(self):
        """Mean/p50/p99 TPOT [s], decode tok/s, mean TTFT [s] over requests (a request starts with a
        run of prefill rounds), prefill tok/s, re-schedules, GB host→device. When the file's config
        says how many tokens a request generates (`ats sim`: gen_tok) and no request got them all
        (a --duration that ended in a prefill or decode), there is no TPOT and no TTFT: those keys
        are absent, as `ats sim` shows '-' (README)."""
        d, p = self.decode(), self.prefill()
        out = {"rounds": int(len(self.rounds)), "decode_rounds": int(len(d))}
        if len(d):
            lat = d["latency_s"]
            out.update(tpot_mean_s=float(np.mean(lat)), tpot_p50_s=float(np.percentile(lat, 50)),
                       tpot_p99_s=float(np.percentile(lat, 99)),
                       decode_tok_s=float(np.sum(d["tokens"]) / np.sum(lat)))
        if len(p):
            # one request = a run of consecutive prefill rounds; TTFT = its first start to its last end
            r = self.rounds
            is_p = r["phase"] == PHASE_PREFILL
            starts = np.nonzero(is_p & ~np.concatenate(([False], is_p[:-1])))[0]
            ends = np.nonzero(is_p & ~np.concatenate((is_p[1:], [False])))[0]
            # only requests whose prefill finished (a decode round follows), as `ats sim` counts them:
            # a run cut by --duration in the middle of its prompt has no first token
            done = ends + 1 < len(r)
            done[done] = r["phase"][ends[done] + 1] != PHASE_PREFILL
            ttft = (r["t_start_s"][ends] + r["latency_s"][ends]) - r["t_start_s"][starts]
            out["ttft_s"] = float(np.mean(ttft[done])) if np.any(done) else float("nan")
            out["requests"] = int(np.sum(done))
            out["prefill_tok_s"] = float(np.sum(p["tokens"]) / np.sum(p["latency_s"]))
        if self.gen_tok and len(p):
            r = self.rounds
            is_p = r["phase"] == PHASE_PREFILL
            # decode rounds after each run of prefill rounds, up to the next one
            starts = np.nonzero(is_p & ~np.concatenate(([False], is_p[:-1])))[0]
            bounds = np.concatenate((starts, [len(r)]))
            n_dec = [int(np.sum(r["phase"][bounds[k]:bounds[k + 1]] == PHASE_DECODE)) for k in range(len(starts))]
            out["requests_done"] = sum(1 for d in n_dec if d >= self.gen_tok)
            if out["requests_done"] == 0:
                for k in ("tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "ttft_s"):
                    out.pop(k, None)
        out["resched"] = int(np.sum(self.rounds["rescheduled"]))
        out["gb_h2d"] = float(np.sum(self.rounds["bytes_h2d"]) / 1e9)
        return out


class Results:
    def __init__(self, path, attrs, runs, sweep):
        self.path, self.attrs, self.runs, self.sweep = path, attrs, runs, sweep

    def model(self):
        """The model the file's runs ran: root attribute 'model', else the config's "model"; None if neither."""
        m = self.attrs.get("model")
        if not m:
            try:
                m = json.loads(self.attrs.get("config", "")).get("model")
            except (ValueError, AttributeError):
                m = None
        return str(m) if m else None

    def run(self, name):
        for r in self.runs:
            if r.name == name:
                return r
        raise ResultsError(f"{self.path}: no run '{name}' (runs: {', '.join(r.name for r in self.runs)})")


def _str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load(path):
    """Reads a results file; raises ResultsError naming `path` when it is not one (a directory, a
    missing or unreadable file, not HDF5, a load trace, not the schema). `FILE.h5:GROUP` reads the
    results tree under GROUP: `ats validate`'s file holds two, `FILE.h5:real` and `FILE.h5:sim`."""
    import os
    import h5py
    group = None
    if not os.path.exists(path) and ":" in path and os.path.isfile(path.rsplit(":", 1)[0]):
        path, group = path.rsplit(":", 1)
    if os.path.isdir(path):
        raise ResultsError(f"{path}: is a directory (give a results file, as written by `ats sim --out` "
                           f"or `ats run --out`)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        # h5py's text carries HDF5's internals (read sizes, buffer addresses): say what the system said
        if e.errno:
            raise ResultsError(f"{path}: cannot open: {os.strerror(e.errno)}") from None
        if "signature not found" in str(e):
            raise ResultsError(f"{path}: not an HDF5 file (no HDF5 signature)") from None
        raise ResultsError(f"{path}: cannot open as HDF5 ({e})") from None
    with f:
        root = f
        if group is not None:
            if group.strip("/") not in f:
                raise ResultsError(f"{path}: group '/{group.strip('/')}': missing")
            root = f[group.strip("/")]
            path = f"{path}:{group}"
        a = root.attrs
        if group is None and "runs" not in a and "real" in f and "sim" in f:
            raise ResultsError(f"{path}: a validation file (ats validate): give {path}:real or {path}:sim")
        if "schema" not in a and "load" in f:
            raise ResultsError(f"{path}: a load trace (it holds /load, as `ats trace synth` or `ats trace "
                               f"record` write it), not a results file (give one written by `ats sim --out` "
                               f"or `ats run --out`)")
        for k in ("schema", "schema_version", "runs", "config", "seed"):
            if k not in a:
                raise ResultsError(f"{path}: attribute '/{k}': missing")
        if _str(a["schema"]) != SCHEMA:
            raise ResultsError(f"{path}: attribute '/schema': '{_str(a['schema'])}' (must be '{SCHEMA}')")
        if int(a["schema_version"]) != SCHEMA_VERSION:
            raise ResultsError(f"{path}: attribute '/schema_version': {int(a['schema_version'])} "
                               f"(this script reads {SCHEMA_VERSION})")
        attrs = {k: (_str(v) if isinstance(v, (bytes, str)) else v.item() if hasattr(v, "item") else v)
                 for k, v in a.items()}
        try:
            gen_tok = json.loads(attrs["config"]).get("gen_tok")
        except (ValueError, AttributeError):
            gen_tok = None
        gen_tok = gen_tok if isinstance(gen_tok, int) and gen_tok > 0 else None
        runs = []
        names = [n for n in _str(a["runs"]).split(",") if n]
        for n in names:
            g = root.get(f"runs/{n}")
            if g is None:
                raise ResultsError(f"{path}: group '/runs/{n}' (listed in attribute 'runs'): missing")
            if "rounds" not in g:
                raise ResultsError(f"{path}: dataset '/runs/{n}/rounds': missing")
            rounds = g["rounds"][()]
            missing = [c for c in ROUND_FIELDS if c not in (rounds.dtype.names or ())]
            if missing:
                raise ResultsError(f"{path}: dataset '/runs/{n}/rounds': member '{missing[0]}' missing")
            ops = g["ops"][()] if "ops" in g else None
            cfg = json.loads(_str(g.attrs.get("config", "{}")))
            runs.append(Run(n, _str(g.attrs.get("policy", n)), cfg, rounds, ops, gen_tok))
        sweep = root["sweep"][()] if "sweep" in root else None
    return Results(path, attrs, runs, sweep)


def _pseudo_hop(path):
    """The first name on the way to `path` (itself, or a hop of the symbolic links it leads through:
    /dev/stdout -> /proc/self/fd/1 -> ...) whose folder is /dev, /proc or /sys or lies under one, or
    None. As the C tools (common/src/outfile.c, pseudo_hop): such a path names a stream or a kernel
    file, never an image to replace through a temporary and a rename."""
    import os
    cur = path
    for _ in range(40):
        folder = os.path.realpath(os.path.dirname(os.path.abspath(cur)))
        if any(folder == r or folder.startswith(r + "/") for r in ("/dev", "/proc", "/sys")):
            return cur
        if not os.path.islink(cur):
            return None
        try:
            link = os.readlink(cur)
        except OSError:
            return None
        cur = link if os.path.isabs(link) else os.path.join(os.path.dirname(cur), link)
    return None


def output_error(out):
    """None when image path `out` can be written, else why not (one line naming it): a file name (not
    '-', not in /dev, /proc or /sys), of a type matplotlib writes (by extension: png, svg, pdf, ...),
    in a folder that exists and is writable. Scripts check before loading anything, and exit 2 with the message."""
    import os
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    if not out:
        return "-o: empty: -o needs an image file name (e.g. plot.png)"
    if out == "-":
        return "-o -: an image cannot go to stdout: -o needs an image file name (e.g. plot.png)"
    hop = _pseudo_hop(out)
    if hop:
        where = "it is" if hop == out else f"it leads through {hop},"
        return (f"{out}: refusing to write: {where} in /dev, /proc or /sys, a device, stream or kernel file: "
                f"-o needs an image file name (e.g. plot.png)")
    if os.path.isdir(out):
        return f"{out}: is a directory (give an image file name, e.g. {os.path.join(out, 'plot.png')})"
    if os.path.basename(out) in ("", ".", ".."):
        return (f"{out}: a folder path, not a file name: -o needs an image file name "
                f"(e.g. {os.path.join(out, 'plot.png')})")
    ext = os.path.splitext(out)[1][1:].lower()
    kinds = Figure().canvas.get_supported_filetypes()
    if ext not in kinds:
        why = f"type '{ext}' unknown" if ext else "no type extension"
        return (f"{out}: -o needs an image file name ({why}; matplotlib writes: "
                f"{', '.join(sorted(kinds))})")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        return f"{out}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"{out}: folder {folder} is not writable"
    return None


def save_figure(fig, out):
    """Saves a matplotlib figure to `out` through a temporary name and a rename, so an interrupted
    run never leaves a half-written image where a good one was; prints the path. A write that fails
    (disk full, permissions) removes the temporary and exits 2 naming `out`."""
    import os
    tmp = out + f".tmp.{os.getpid()}" + os.path.splitext(out)[1]
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, out)
    except (OSError, ValueError) as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        prog = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "analysis"
        print(f"{prog}: {out}: cannot write the image: {e}", file=sys.stderr)
        raise SystemExit(2)
    print(f"wrote {out}")


def hardware(res):
    """The hardware a file's runs ran on (root attribute 'hw': `ats sim`'s hardware description, `ats
    run`'s CPU and GPU names), or 'hardware not recorded' (files of `ats run` before it recorded them)."""
    return res.attrs.get("hw") or "hardware not recorded"


def title(res):
    """'<model> on <hardware>, trace <trace> (<producer>)' for a figure."""
    at = res.attrs
    return (f"{res.model() or '?'} on {hardware(res)}, trace {at.get('trace', '') or 'none'}"
            f" ({at.get('producer', '')})")


def decode_segments(run):
    """Index arrays into run.decode(), one per stretch of decode rounds to draw as one line. A stretch
    ends where a non-decode round (a prefill) ran between two decode rounds, or where the time between
    one decode round's end and the next one's start exceeds both the median decode latency and 50 ms
    (the machine idled a round's length or more, and longer than the OS can pause a process: a gap
    between requests). The time `ats run` spends between rounds (sampling, bookkeeping, a descheduled
    process on a loaded machine) joins rounds, as it should: with stories260K a round takes ~0.4 ms, so
    the median alone split a run wherever the OS paused it."""
    r = run.rounds
    pos = np.nonzero(r["phase"] == PHASE_DECODE)[0]
    if len(pos) == 0:
        return []
    t, lat = r["t_start_s"][pos], r["latency_s"][pos]
    idle = t[1:] - (t[:-1] + lat[:-1])
    brk = (pos[1:] != pos[:-1] + 1) | (idle > max(np.median(lat), 0.05))
    cuts = np.nonzero(brk)[0] + 1
    return np.split(np.arange(len(pos)), cuts)


def find_trace(res, given=None):
    """(path, None) of the load trace the file's runs replayed, or (None, why). `given` (a --trace
    option) wins; else the root attribute 'trace' (a name, as `ats sim` records it) is looked up as
    $ATS_TRACES_DIR/<name>.h5, the source tree's traces/<name>.h5 and ./<name>.h5."""
    import os
    if given:
        return (given, None) if os.path.isfile(given) else (None, f"--trace {given}: no such file")
    name = res.attrs.get("trace", "") or ""
    if name in ("", "none"):
        return None, f"{res.path}: its runs replayed no load trace (attribute 'trace' = '{name}')"
    here = os.path.dirname(os.path.abspath(__file__))
    places = []
    if os.environ.get("ATS_TRACES_DIR"):
        places.append(os.environ["ATS_TRACES_DIR"])
    places += [os.path.join(here, "..", "traces"), "."]
    for d in places:
        p = os.path.join(d, name if name.endswith(".h5") else name + ".h5")
        if os.path.isfile(p):
            return os.path.normpath(p), None
    return None, (f"load trace '{name}' (attribute 'trace' of {res.path}) not found in "
                  f"{', '.join(os.path.normpath(d) for d in places)}; give it with --trace FILE")


def load_trace(path):
    """(t_s, {"CPU": cpu_avail, "GPU": gpu_avail, "PCIe": pcie_avail}) of a load trace file; raises
    ResultsError naming the file and dataset when it is not one."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            out = {}
            for k in ("t_s", "cpu_avail", "gpu_avail", "pcie_avail"):
                if f"load/{k}" not in f:
                    raise ResultsError(f"{path}: dataset '/load/{k}': missing (not a load trace)")
                out[k] = np.asarray(f[f"load/{k}"][()], dtype=float)
    except OSError as e:
        raise ResultsError(f"{path}: cannot open as HDF5 ({e})") from None
    return out["t_s"], {"CPU": out["cpu_avail"], "GPU": out["gpu_avail"], "PCIe": out["pcie_avail"]}


def load_runs(prog, path, names):
    """(results, runs): the file and the runs named in `names` (comma-separated; None = all), or
    (None, None) after printing "<prog>: <why>" to stderr (the caller exits 2): an empty name
    (--runs "", "ats,") or one named twice, before the file is read; a run the file lacks."""
    import sys
    if names is not None:
        want = names.split(",")
        if "" in want:
            print(f"{prog}: --runs '{names}': an empty run name (give comma-separated run names, "
                  f"e.g. ats,layer)", file=sys.stderr)
            return None, None
        twice = [n for i, n in enumerate(want) if n in want[:i]]
        if twice:
            print(f"{prog}: --runs '{names}': run '{twice[0]}' named twice", file=sys.stderr)
            return None, None
    try:
        res = load(path)
        runs = [res.run(n) for n in want] if names is not None else res.runs
    except ResultsError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None, None
    if not runs:
        print(f"{prog}: {path}: the file holds no run", file=sys.stderr)
        return None, None
    return res, runs


class _StdoutError(Exception):
    """A write to standard output failed (errno); not an OSError, so no `except OSError` swallows it."""

    def __init__(self, errno_):
        super().__init__(errno_)
        self.errno = errno_


class _Stdout:
    """sys.stdout, with its write failures turned into _StdoutError (run_main)."""

    def __init__(self, f):
        self._f = f

    def write(self, s):
        try:
            return self._f.write(s)
        except OSError as e:
            raise _StdoutError(e.errno) from None

    def flush(self):
        try:
            self._f.flush()
        except OSError as e:
            raise _StdoutError(e.errno) from None

    def __getattr__(self, name):
        return getattr(self._f, name)


def run_main(main):
    """Runs a script's main() and exits with its status. Standard output is flushed before the exit;
    a write to it that fails (`> /dev/full`, a closed pipe with SIGPIPE ignored) is one line on stderr,
    "<prog>: standard output: write failed: <reason>", and exit 1, as the ats CLI (cli/main.c), not a
    traceback."""
    import os
    prog = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "analysis"
    sys.stdout = _Stdout(sys.stdout)
    try:
        try:
            rc = main()
        except SystemExit as e:  # argparse: --help (0), a usage error (2)
            rc = e.code
        sys.stdout.flush()
    except _StdoutError as e:
        why = os.strerror(e.errno) if e.errno else "disk full, or its reader went away"
        print(f"{prog}: standard output: write failed: {why}", file=sys.stderr)
        # what is left in the buffer must not fail again (a second message, exit 120) when Python exits
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.__stdout__.fileno())
        except (OSError, ValueError):
            pass
        sys.exit(1)
    sys.exit(rc)
