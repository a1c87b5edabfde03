#!/bin/sh
# CTest driver for the analysis/ scripts (registered as test_analysis in tests/common/CMakeLists.txt):
# a C test program writes results files, each script draws from them; the PNGs must exist, --help
# must work, and bad input must exit 2 with a message naming the file. Exits 77 (skipped) when
# /usr/bin/python3 lacks h5py, numpy or matplotlib.
#   usage: analysis/test_analysis.sh FIXTURE_WRITER OUTDIR
set -u
writer=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
export PYTHONDONTWRITEBYTECODE=1
if ! $py -c "import h5py, numpy, matplotlib" 2>/dev/null; then
    echo "test_analysis: /usr/bin/python3 lacks h5py/numpy/matplotlib: skipped"
    exit 77
fi
fail=0
check() { # description, command...
    d=$1; shift
    if "$@"; then echo "ok: $d"; else echo "FAILED: $d"; fail=1; fi
}
rm -rf "$out" && mkdir -p "$out" || exit 1
check "fixture written" "$writer" --write-fixture "$out"
for s in plot_tpot.py plot_sweep.py compare_sim_real.py plot_utilization.py timeline_rounds.py; do
    check "$s --help" sh -c "$py '$here/$s' --help >'$out/$s.help' 2>&1"
    check "$s --help mentions usage" grep -q "usage:" "$out/$s.help"
done
check "plot_tpot draws" $py "$here/plot_tpot.py" "$out/results.h5" --window 5 --loads -o "$out/tpot.png"
check "tpot.png exists" test -s "$out/tpot.png"
check "plot_sweep draws" sh -c "$py '$here/plot_sweep.py' '$out/sweep.h5' -o '$out/sweep.png' >'$out/sweep.txt'"
check "sweep.png exists" test -s "$out/sweep.png"
# the fixture's optimum is at eps=0.2, tau=9 on both traces (test_results.c, write_fixture)
check "plot_sweep finds the optimum" grep -q "trace-0 ats: best eps=0.2 tau=9" "$out/sweep.txt"
# points that completed no request (NaN TPOT; eps=0.05 of trace-0 has the highest decode rate and no
# re-schedule) are never the best, and a policy with no other point says so
check "plot_sweep --metric decode_tok_s draws" sh -c "$py '$here/plot_sweep.py' '$out/sweep.h5' --metric decode_tok_s -o '$out/sweep-dec.png' >'$out/sweep-dec.txt'"
check "plot_sweep: decode rate best skips points without a request" grep -q "trace-0 ats: best eps=0.2 tau=9 TPOT: decode" "$out/sweep-dec.txt"
check "plot_sweep --metric n_resched draws" sh -c "$py '$here/plot_sweep.py' '$out/sweep.h5' --metric n_resched -o '$out/sweep-nr.png' >'$out/sweep-nr.txt'"
check "plot_sweep: re-schedules best skips them" grep -q "trace-0 ats: best eps=0.5 tau=15 TPOT: re-schedules 4" "$out/sweep-nr.txt"
check "plot_sweep --policy ats-paper draws" sh -c "$py '$here/plot_sweep.py' '$out/sweep.h5' --policy ats-paper -o '$out/sweep-none.png' >'$out/sweep-none.txt'"
check "plot_sweep: no point completed a request" grep -q "trace-0 ats-paper: no point completed a request: no best point" "$out/sweep-none.txt"
# a validation file's layout (ats validate): results trees under /real and /sim, read as FILE:real / FILE:sim
check "validation-layout fixture" $py -c "
import h5py, sys
with h5py.File(sys.argv[1], 'r') as s, h5py.File(sys.argv[2], 'w') as d:
    for g in ('real', 'sim'):
        s.copy('/', d, name=g)
" "$out/results.h5" "$out/val.h5"
check "plot_tpot reads FILE:real" sh -c "$py '$here/plot_tpot.py' '$out/val.h5:real' -o '$out/val-real.png' >/dev/null 2>&1 && test -s '$out/val-real.png'"
check "plot_tpot on a validation file names the groups" sh -c "$py '$here/plot_tpot.py' '$out/val.h5' -o '$out/val.png' 2>&1 | grep -q 'val.h5:real or'"
check "compare_sim_real FILE:sim FILE:real" sh -c "$py '$here/compare_sim_real.py' '$out/val.h5:sim' '$out/val.h5:real' --no-plot >/dev/null"
check "compare_sim_real on a validation file alone" sh -c "$py '$here/compare_sim_real.py' '$out/val.h5' --no-plot >/dev/null"
check "compare_sim_real: swapped groups warned" sh -c "$py '$here/compare_sim_real.py' '$out/val.h5:real' '$out/val.h5:sim' --no-plot 2>&1 >/dev/null | grep -q swapped"
check "compare_sim_real draws" sh -c "$py '$here/compare_sim_real.py' '$out/results.h5' '$out/real.h5' -o '$out/cmp.png' >'$out/cmp.txt'"
check "cmp.png exists" test -s "$out/cmp.png"
check "comparison names both runs" sh -c "grep -q '^ats ' '$out/cmp.txt' && grep -q '^layer ' '$out/cmp.txt'"
# a run that completed no request (gen_tok 1000, 270 decode rounds) has no TPOT or TTFT; with gen_tok 270 it has
check "compare_sim_real: done run" sh -c "$py '$here/compare_sim_real.py' '$out/done.h5' '$out/real.h5' --format json --no-plot >'$out/done.json'"
check "compare_sim_real: TPOT and TTFT of a completed request" $py -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not all(x['sim_tpot_mean_s'] and x['sim_ttft_s'] for x in r))" "$out/done.json"
check "compare_sim_real: cut run" sh -c "$py '$here/compare_sim_real.py' '$out/cut.h5' '$out/real.h5' --format json --no-plot >'$out/cut.json'"
check "compare_sim_real: no TPOT or TTFT without a completed request" $py -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not all(x[k] is None for x in r for k in ('sim_tpot_mean_s','sim_tpot_p99_s','sim_ttft_s','err_tpot_mean_s')) or not all(x['sim_decode_tok_s'] for x in r))" "$out/cut.json"
# `ats sim --out` names runs after the policy, `ats run --out` after the backend: pair them
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/real-cpu.h5" --no-plot >/dev/null 2>"$out/pair.err"; rc=$?
check "compare_sim_real: no name in common, several runs: exit 2" test $rc -eq 2
check "compare_sim_real: no name in common: suggests --pair" grep -q "pair them with --pair SIMRUN=REALRUN" "$out/pair.err"
check "compare_sim_real --pair draws" sh -c "$py '$here/compare_sim_real.py' '$out/results.h5' '$out/real-cpu.h5' --pair ats=cpu --pair layer=cpu -o '$out/pair.png' >'$out/pair.txt' 2>'$out/pair.err'"
check "compare_sim_real --pair: pair.png exists" test -s "$out/pair.png"
check "compare_sim_real --pair: both pairs in the table" sh -c "grep -q '^ats=cpu ' '$out/pair.txt' && grep -q '^layer=cpu ' '$out/pair.txt'"
check "compare_sim_real --pair: nothing on stderr (same model)" test ! -s "$out/pair.err"
check "compare_sim_real --pair --format json" sh -c "$py '$here/compare_sim_real.py' '$out/results.h5' '$out/real-cpu.h5' --pair layer=cpu --format json --no-plot >'$out/pair.json'"
check "compare_sim_real --pair json: runs named" $py -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not (len(r) == 1 and r[0]['sim_run'] == 'layer' and r[0]['real_run'] == 'cpu' and r[0]['real_tpot_mean_s'] and r[0]['err_tpot_mean_s'] is not None))" "$out/pair.json"
check "compare_sim_real: one run each, paired" sh -c "$py '$here/compare_sim_real.py' '$out/one.h5' '$out/real-cpu.h5' --no-plot >'$out/one.txt' 2>'$out/one.err'"
check "compare_sim_real: one run each: table row" grep -q '^ats=cpu ' "$out/one.txt"
check "compare_sim_real: one run each: said on stderr" sh -c "test \$(wc -l <'$out/one.err') -eq 1 && grep -q \"pairing the only run of each file, .*one.h5 'ats' with .*real-cpu.h5 'cpu'\" '$out/one.err'"
check "compare_sim_real: other model" sh -c "$py '$here/compare_sim_real.py' '$out/one.h5' '$out/real-other.h5' --pair ats=cpu --no-plot >/dev/null 2>'$out/model.err'"
check "compare_sim_real: other model: one warning line naming both" sh -c "test \$(wc -l <'$out/model.err') -eq 1 && grep -q \"warning: the files ran different models: .*one.h5 'qwen3-14b', .*real-other.h5 'stories260K'\" '$out/model.err'"
for p in ats=gpu nope=cpu; do
    $py "$here/compare_sim_real.py" "$out/results.h5" "$out/real-cpu.h5" --pair "$p" -o "$out/badpair.png" >/dev/null 2>"$out/badpair.err"; rc=$?
    check "compare_sim_real --pair $p: exit 2" test $rc -eq 2
    check "compare_sim_real --pair $p: names the file and its runs" sh -c "grep -q \"no run 'gpu' (runs: cpu)\" '$out/badpair.err' && grep -q real-cpu.h5 '$out/badpair.err' || grep -q \"results.h5: no run 'nope' (runs: ats, layer)\" '$out/badpair.err'"
done
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/real-cpu.h5" --pair atscpu --no-plot >/dev/null 2>"$out/badpair.err"; rc=$?
check "compare_sim_real --pair without '=': exit 2 saying the form" sh -c "test $rc -eq 2 && grep -q 'must be SIMRUN=REALRUN' '$out/badpair.err'"
check "no badpair.png left" test ! -e "$out/badpair.png"
# no decode round in the sim file: '-' and JSON null for its TPOT and TTFT (the TTFT was NaN: not JSON)
check "compare_sim_real: runs without decode" sh -c "$py '$here/compare_sim_real.py' '$out/prefill.h5' '$out/real.h5' --format json --no-plot >'$out/nodec.json'"
check "compare_sim_real: runs without decode: strict JSON, null TTFT" $py -c "import json,sys; r=json.loads(open(sys.argv[1]).read(), parse_constant=lambda c: sys.exit('not JSON: ' + c)); sys.exit(not all(x['sim_ttft_s'] is None and x['sim_tpot_mean_s'] is None and x['real_ttft_s'] for x in r))" "$out/nodec.json"
check "csv output" sh -c "$py '$here/compare_sim_real.py' '$out/results.h5' '$out/real.h5' --format csv --no-plot | head -1 | grep -q '^run,sim_tpot_mean_s'"
check "plot_utilization draws" sh -c "$py '$here/plot_utilization.py' '$out/results.h5' -o '$out/util.png' >'$out/util.txt'"
check "util.png exists" test -s "$out/util.png"
check "GPU busy for the run with ops" grep -q "^ats: host->device .* GPU busy" "$out/util.txt"
check "no GPU busy for the run without ops, said" grep -q "^layer: host->device .* GPU busy: no per-op times" "$out/util.txt"
# no run with per-op times: the host->device panel alone, and stdout says why there is no GPU busy
check "plot_utilization without ops draws" sh -c "$py '$here/plot_utilization.py' '$out/one.h5' -o '$out/util1.png' >'$out/util1.txt'"
check "util1.png exists" test -s "$out/util1.png"
check "plot_utilization without ops: says so" grep -q "^ats: host->device .* GPU busy: no per-op times in the file" "$out/util1.txt"
# plot_tpot's lines: back-to-back decode rounds after a prefill are one line per run
check "plot_tpot: one line per run" sh -c "$py '$here/plot_tpot.py' '$out/results.h5' -o '$out/tpot1.png' >'$out/tpot1.txt' && grep -q '^ats: 270 decode rounds drawn as 1 line,' '$out/tpot1.txt' && grep -q '^layer: 270 decode rounds drawn as 1 line,' '$out/tpot1.txt'"
# the break rule on hand-made rounds: 2 decode, a prefill, 2 decode 1 us apart, an idle second, 1 decode: 3 lines
check "decode_segments: breaks at a prefill and an idle gap, not at microseconds" $py -c "
import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, atsresults as ar
r = np.zeros(6, dtype=[(n, 'f8') for n in ar.ROUND_FIELDS])
r['phase'] = [1, 1, 0, 1, 1, 1]; r['latency_s'] = [0.1, 0.1, 0.5, 0.1, 0.1, 0.1]
r['t_start_s'] = [0, 0.100001, 0.2, 0.7, 0.800001, 1.9]
segs = ar.decode_segments(ar.Run('x', 'x', {}, r, None))
sys.exit([list(s) for s in segs] != [[0, 1], [2, 3], [4]])" "$here"
# --loads draws the load trace the runs replayed (results.h5 says 'fig13-synth': traces/fig13-synth.h5), or the
# one given with --trace; the estimates are labelled as the controller's
check "plot_tpot --loads finds the trace" sh -c "$py '$here/plot_tpot.py' '$out/results.h5' --loads -o '$out/tpot2.png' >'$out/tpot2.txt' && grep -q '^load trace: .*traces/fig13-synth.h5' '$out/tpot2.txt'"
check "plot_tpot --loads --trace" sh -c "$py '$here/plot_tpot.py' '$out/results.h5' --loads --trace '$out/load.h5' -o '$out/tpot3.png' >'$out/tpot3.txt' && grep -q '^load trace: .*load.h5' '$out/tpot3.txt'"
$py "$here/plot_tpot.py" "$out/results.h5" --loads --trace "$out/results.h5" -o "$out/tpot4.png" >/dev/null 2>"$out/tpot4.err"; rc=$?
check "plot_tpot --trace RESULTS: exit 2 naming the dataset" sh -c "test $rc -eq 2 && grep -q \"results.h5: dataset '/load/t_s': missing\" '$out/tpot4.err'"
# an `ats run` results file ($ATS_BIN, stories260K): rounds microseconds apart are one line (were single points:
# empty axes), the title names the machine, the run has no load estimate and no trace
if [ -n "${ATS_BIN:-}" ] && [ -x "${ATS_BIN:-}" ]; then
    check "ats run --out" sh -c "'$ATS_BIN' run --model '${ATS_SHARED_DIR:-../shared}/models/stories260K/stories260K.gguf' -n 30 --out '$out/run.h5' >/dev/null 2>&1"
    check "plot_tpot on ats run: one line" sh -c "$py '$here/plot_tpot.py' '$out/run.h5' --loads -o '$out/run.png' >'$out/run.txt' 2>'$out/run.err' && grep -q '^cpu: 29 decode rounds drawn as 1 line,' '$out/run.txt'"
    check "plot_tpot on ats run: no estimate drawn, said" grep -q "^cpu: load estimate 1.0 throughout" "$out/run.txt"
    check "plot_tpot on ats run: no trace, said" grep -q "replayed no load trace" "$out/run.err"
    check "ats run's results name the hardware" $py -c "import sys; sys.path.insert(0, sys.argv[1]); import atsresults as ar; r = ar.load(sys.argv[2]); sys.exit(ar.hardware(r) == 'hardware not recorded' or ' on ' + ar.hardware(r) not in ar.title(r))" "$here" "$out/run.h5"
else
    echo "FAILED: ATS_BIN not set: the ats run checks did not run"; fail=1
fi
# bad input: exit 2, message names the file
echo "not hdf5" >"$out/bad.h5"
$py "$here/plot_tpot.py" "$out/bad.h5" -o "$out/bad.png" 2>"$out/bad.err"; rc=$?
check "bad file: exit 2" test $rc -eq 2
check "bad file: message names it" grep -q "bad.h5" "$out/bad.err"
$py "$here/plot_sweep.py" "$out/results.h5" -o "$out/bad.png" 2>"$out/bad2.err"; rc=$?
check "no /sweep: exit 2" test $rc -eq 2
check "no /sweep: message names the dataset" grep -q "'/sweep'" "$out/bad2.err"
$py "$here/plot_tpot.py" "$out/results.h5" --runs nope -o "$out/bad.png" 2>"$out/bad3.err"; rc=$?
check "unknown run: exit 2" test $rc -eq 2
check "no bad.png left" test ! -e "$out/bad.png"
# bad output paths: refused before any work, exit 2, message names the path (were tracebacks)
for o in "$out/no-such-dir/x.png" "$out/tpot.txt" "$out"; do
    $py "$here/plot_tpot.py" "$out/results.h5" -o "$o" 2>"$out/bad4.err"; rc=$?
    check "plot_tpot -o $o: exit 2" test $rc -eq 2
    check "plot_tpot -o $o: one line naming it" sh -c "test \$(wc -l <'$out/bad4.err') -eq 1 && grep -qF '$o' '$out/bad4.err'"
done
check "no tpot.txt left" test ! -e "$out/tpot.txt"
# -o that is no image file name: one line saying so, not "image type '(none)' unknown"; /dev, /proc refused
# (as the C tools: common/src/outfile.c), also through a link
ln -s /dev/null "$out/null.png"
for o in /dev/null - /proc/self/x.png /dev/stdout "$out/null.png" "$out/noext"; do
    $py "$here/plot_tpot.py" "$out/results.h5" -o "$o" 2>"$out/bad5.err"; rc=$?
    check "plot_tpot -o $o: exit 2" test $rc -eq 2
    check "plot_tpot -o $o: one line, needs an image file name" sh -c "test \$(wc -l <'$out/bad5.err') -eq 1 && grep -q -- '-o needs an image file name' '$out/bad5.err' && ! grep -q '(none)' '$out/bad5.err'"
done
$py "$here/plot_tpot.py" "$out/results.h5" -o /dev/null 2>"$out/bad5.err"
check "plot_tpot -o /dev/null: refused as in /dev" grep -q "/dev/null: refusing to write: it is in /dev" "$out/bad5.err"
check "no noext left" test ! -e "$out/noext"
# a directory as the results file: "is a directory", no HDF5 internals (all scripts load through atsresults)
for s in plot_tpot.py plot_utilization.py plot_sweep.py; do
    $py "$here/$s" "$out" -o "$out/dir.png" 2>"$out/dir.err"; rc=$?
    check "$s DIR: exit 2" test $rc -eq 2
    check "$s DIR: is a directory, one line" sh -c "test \$(wc -l <'$out/dir.err') -eq 1 && grep -qF '$out: is a directory' '$out/dir.err' && ! grep -q 'errno\\|buf =' '$out/dir.err'"
done
$py "$here/compare_sim_real.py" "$out/results.h5" "$out" --no-plot 2>"$out/dir.err"; rc=$?
check "compare_sim_real REAL=DIR: exit 2, is a directory" sh -c "test $rc -eq 2 && grep -qF '$out: is a directory' '$out/dir.err'"
$py "$here/plot_tpot.py" "$out/no-such.h5" -o "$out/dir.png" 2>"$out/dir.err"; rc=$?
check "missing results file: exit 2, says so plainly" sh -c "test $rc -eq 2 && grep -qF 'no-such.h5: cannot open: No such file or directory' '$out/dir.err' && ! grep -q 'errno' '$out/dir.err'"
check "no dir.png left" test ! -e "$out/dir.png"
# runs without a decode round: no TPOT to draw, exit 2 with one line, no image (was an empty plot, exit 0)
$py "$here/plot_tpot.py" "$out/prefill.h5" -o "$out/nodec.png" >/dev/null 2>"$out/nodec.err"; rc=$?
check "plot_tpot no decode round: exit 2" test $rc -eq 2
check "plot_tpot no decode round: one line saying so" sh -c "test \$(wc -l <'$out/nodec.err') -eq 1 && grep -q 'prefill.h5: no run has a decode round' '$out/nodec.err'"
check "plot_tpot no decode round: no image" test ! -e "$out/nodec.png"
# a closed stdout: no traceback
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/real.h5" --no-plot 2>"$out/pipe.err" | head -c1 >/dev/null
check "closed stdout: no traceback" test ! -s "$out/pipe.err"
# standard output that cannot be written: one line as the ats CLI says it, exit 1 (was a traceback)
for c in "plot_tpot.py '$out/results.h5' -o '$out/full.png'" "plot_sweep.py '$out/sweep.h5' -o '$out/full.png'" \
         "plot_utilization.py '$out/results.h5' -o '$out/full.png'" "compare_sim_real.py '$out/results.h5' '$out/real.h5' --no-plot" \
         "plot_tpot.py --help"; do
    s=${c%%.py*}
    sh -c "$py '$here/'$c >/dev/full 2>'$out/full.err'"; rc=$?
    check "$s > /dev/full: exit 1" test $rc -eq 1
    check "$s > /dev/full: one line, write failed" sh -c "test \$(wc -l <'$out/full.err') -eq 1 && grep -qx '$s: standard output: write failed: No space left on device' '$out/full.err'"
done
# a paired run without a decode round: no TPOT to draw, refused as plot_tpot refuses it (was an empty plot, exit 0)
$py "$here/compare_sim_real.py" "$out/prefill.h5" "$out/real.h5" -o "$out/nodec-cmp.png" >"$out/nodec-cmp.txt" 2>"$out/nodec-cmp.err"; rc=$?
check "compare_sim_real no decode round: exit 2" test $rc -eq 2
check "compare_sim_real no decode round: one line naming the run and file" sh -c "test \$(wc -l <'$out/nodec-cmp.err') -eq 1 && grep -q \"prefill.h5: run 'ats' has no decode round\" '$out/nodec-cmp.err'"
check "compare_sim_real no decode round: nothing printed, no image" sh -c "test ! -s '$out/nodec-cmp.txt' && test ! -e '$out/nodec-cmp.png'"
# a pair given twice (was its row twice); -o with --no-plot (was ignored)
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/real-cpu.h5" --pair ats=cpu --pair ats=cpu --no-plot >"$out/dup.txt" 2>"$out/dup.err"; rc=$?
check "compare_sim_real --pair twice: exit 2, says so" sh -c "test $rc -eq 2 && grep -q -- '--pair ats=cpu: given twice' '$out/dup.err' && test ! -s '$out/dup.txt'"
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/real.h5" --no-plot -o "$out/unused.png" >"$out/dup.txt" 2>"$out/dup.err"; rc=$?
check "compare_sim_real --no-plot -o: exit 2, -o unused" sh -c "test $rc -eq 2 && grep -q -- '-o .*unused.png: unused with --no-plot' '$out/dup.err' && test ! -s '$out/dup.txt' && test ! -e '$out/unused.png'"
# --runs: an empty list or entry, a run named twice (plot_tpot plotted all for \"\"; ats,ats drew it twice)
for s in plot_tpot.py plot_utilization.py; do
    for r in "" "ats," ",ats" "ats,ats"; do
        $py "$here/$s" "$out/results.h5" --runs "$r" -o "$out/runs.png" >/dev/null 2>"$out/runs.err"; rc=$?
        check "$s --runs '$r': exit 2" test $rc -eq 2
        check "$s --runs '$r': one line" sh -c "test \$(wc -l <'$out/runs.err') -eq 1 && grep -q -- \"--runs '$r': \(an empty run name\|run 'ats' named twice\)\" '$out/runs.err'"
    done
done
check "no runs.png left" test ! -e "$out/runs.png"
# -o ending in '/': a folder path (was "no type extension")
$py "$here/plot_tpot.py" "$out/results.h5" -o "$out/x.png/" 2>"$out/slash.err"; rc=$?
check "plot_tpot -o x.png/: exit 2, a folder path" sh -c "test $rc -eq 2 && test \$(wc -l <'$out/slash.err') -eq 1 && grep -q 'x.png/: a folder path' '$out/slash.err'"
# a load trace given as a results file (was "attribute '/schema': missing")
$py "$here/plot_tpot.py" "$out/load.h5" -o "$out/lt.png" 2>"$out/lt.err"; rc=$?
check "plot_tpot LOADTRACE: exit 2, a load trace" sh -c "test $rc -eq 2 && test \$(wc -l <'$out/lt.err') -eq 1 && grep -q 'load.h5: a load trace .*not a results file' '$out/lt.err'"
$py "$here/compare_sim_real.py" "$out/results.h5" "$out/load.h5" --no-plot 2>"$out/lt.err"; rc=$?
check "compare_sim_real REAL=LOADTRACE: exit 2, a load trace" sh -c "test $rc -eq 2 && grep -q 'load.h5: a load trace' '$out/lt.err'"
# timeline_rounds.py on an `ats sim --timeline` file (ATS_BIN: the ats binary, set by CTest)
if [ -n "${ATS_BIN:-}" ]; then
    check "ats sim --timeline" sh -c "'$ATS_BIN' sim --model qwen3-30b-a3b --hw rtx3060-laptop --vram-budget 6GiB --policy static,ats --trace none --prompt 64 --gen 4 --requests 1 --timeline '$out/tl.json' >/dev/null 2>&1"
    check "timeline_rounds: decode table" sh -c "$py '$here/timeline_rounds.py' '$out/tl.json' --phase decode --top 3 >'$out/tl.txt'"
    check "timeline_rounds: both policies, 4 decode rounds each" sh -c "grep -q '^static: 4 decode round(s)' '$out/tl.txt' && grep -q '^ats: 4 decode round(s)' '$out/tl.txt'"
    check "timeline_rounds: the CPU track's experts, layer prefix dropped" grep -q "^      ffn_gate_exps " "$out/tl.txt"
    check "timeline_rounds --format json --process ats --phase prefill" sh -c "$py '$here/timeline_rounds.py' '$out/tl.json' --format json --process ats --phase prefill >'$out/tl-json.json'"
    check "timeline_rounds: JSON records of ats's one prefill round" $py -c "
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(not (r and all(x['process'] == 'ats' and x['rounds'] == 1 and x['ms_per_round'] >= 0 for x in r)))" "$out/tl-json.json"
    echo '{"x": 1}' >"$out/notl.json"
    $py "$here/timeline_rounds.py" "$out/notl.json" 2>"$out/notl.err"; rc=$?
    check "timeline_rounds: no traceEvents: exit 2 naming the file" sh -c "test $rc -eq 2 && grep -q 'notl.json: not a Chrome trace-event file' '$out/notl.err'"
    printf '{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": "0", "dur": 5}]}' >"$out/badts.json"
    $py "$here/timeline_rounds.py" "$out/badts.json" 2>"$out/badts.err"; rc=$?
    check "timeline_rounds: a string ts: exit 2, one line naming the event" sh -c "test $rc -eq 2 && test \$(wc -l <'$out/badts.err') -eq 1 && grep -q 'badts.json: traceEvents\[0\].ts' '$out/badts.err'"
    $py "$here/timeline_rounds.py" "$out/tl.json" >/dev/full 2>"$out/full.err"; rc=$?
    check "timeline_rounds > /dev/full: exit 1, one line" sh -c "test $rc -eq 1 && test \$(wc -l <'$out/full.err') -eq 1 && grep -q 'write failed' '$out/full.err'"
    $py "$here/timeline_rounds.py" "$out/tl.json" --rounds 50: 2>"$out/tlr.err"; rc=$?
    check "timeline_rounds: no round chosen: exit 2" sh -c "test $rc -eq 2 && grep -q 'tl.json: no rounds in --rounds 50:' '$out/tlr.err'"
fi
exit $fail
