#!/bin/sh
# CTest driver for experiments/evalkit.py (registered as test_evalkit in tests/common/CMakeLists.txt): the
# row parsers against a known `ats run` summary and a real `ats sim` output, compare's ratio, cut's
# arithmetic, rank's verdicts, trimtrace + segments on a synthetic trace replayed by `ats sim`, sweeprows
# on a small `ats sweep`. Exits 77 (skipped) when /usr/bin/python3 lacks h5py, numpy or matplotlib.
#   usage: experiments/test_evalkit.sh OUTDIR      (environment: ATS_BIN, the ats binary)
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
K="$py $here/evalkit.py"
A=${ATS_BIN:?ATS_BIN: the ats binary}
export PYTHONDONTWRITEBYTECODE=1
if ! $py -c "import h5py, numpy, matplotlib" 2>/dev/null; then
    echo "test_evalkit: /usr/bin/python3 lacks h5py/numpy/matplotlib: skipped"
    exit 77
fi
fail=0
check() { # description, command...
    d=$1; shift
    if "$@"; then echo "ok: $d"; else echo "FAILED: $d"; fail=1; fi
}
rm -rf "$out" && mkdir -p "$out" || exit 1
# the summary ats run --policy prints on stderr (cli/run_policy.c)
cat > "$out/run.log" <<'LOG'
ats run: policy ats on cuda, --vram-budget 4.500 GiB: resident 3.867 GiB + temp 0.259 + KV 0.000 + compute 0.360 (est.)
policy              prefill     decode      TTFT  TPOT mean   TPOT p50   TPOT p99 resched    GB h2d    GPU
                      tok/s      tok/s         s         ms         ms         ms                     busy
ats                  120.77      10.83     4.239      92.36      91.47     106.78       1   141.007   6.8%
LOG
check "runrow parses the summary" sh -c "$K runrow '$out/run.log' a=1 b=x > '$out/row.csv'"
check "runrow: the row" grep -qx "1,x,ats,120.77,10.83,4.239,92.36,91.47,106.78,1,141.007,0.0680" "$out/row.csv"
cat > "$out/norun.log" <<'LOG'
policy              prefill     decode      TTFT  TPOT mean   TPOT p50   TPOT p99 resched    GB h2d    GPU
                      tok/s      tok/s         s         ms         ms         ms                     busy
LOG
$K runrow "$out/norun.log" a=1 > /dev/null 2> "$out/norun.err"; rc=$?
check "runrow without a row: exit 1" test $rc = 1
check "runrow without a row: says so" grep -q "norun.log" "$out/norun.err"
# simrows on a real ats sim output
"$A" sim --model qwen3-14b --trace none --prompt 512 --gen 4 --policy layer,ats --format csv > "$out/sim1.csv"
check "simrows: one row per policy" sh -c "$K header k > '$out/s.csv' && $K simrows '$out/sim1.csv' k=v >> '$out/s.csv' && test \$(wc -l < '$out/s.csv') = 3"
check "simrows: keys first" grep -q "^v,ats," "$out/s.csv"
# compare: ratio hw/sim
printf 'k,policy,decode_tok_s\nA,ats,10\nB,ats,4\n' > "$out/csim.csv"
printf 'k,policy,decode_tok_s\nA,ats,20\n' > "$out/chw.csv"
check "compare runs" sh -c "$K compare '$out/csim.csv' '$out/chw.csv' --on k,policy --metrics decode_tok_s > '$out/cmp.md'"
check "compare: hw/sim = 2" grep -q "| A | ats | 10 | 20 | 2 |" "$out/cmp.md"
check "compare: no partner is '-'" grep -q "| B | ats | 4 | - | - |" "$out/cmp.md"
check "compare: missing hw file" sh -c "$K compare '$out/csim.csv' '$out/none.csv' --on k,policy --metrics decode_tok_s | grep -q 'not measured yet'"
# cut: fixed 100 -> 150 (+50), aware 100 -> 125 (+25): 50% cut
printf 'label,segment,t0_s,t1_s,cpu,gpu,pcie,tpot_mean_ms,rounds\nf,0,0,1,1,1,1,100,9\nf,1,1,2,0.4,1,1,150,9\na,0,0,1,1,1,1,100,9\na,1,1,2,0.4,1,1,125,9\n' > "$out/seg.csv"
check "cut: 50%" sh -c "$K cut '$out/seg.csv' f a | grep -q '^1,0.4,1,1,150.00,125.00,50.00,25.00,50.0$'"
# rank
printf 'trace,point,tpot_mean_ms\nt,best,10\nt,default,11\nu,best,10\nu,default,10.01\n' > "$out/rsim.csv"
printf 'trace,point,tpot_mean_ms\nt,best,12\nt,default,11\nu,best,10\nu,default,11\n' > "$out/rhw.csv"
$K rank "$out/rsim.csv" "$out/rhw.csv" > "$out/rank.csv"
check "rank: the simulator's best is not the measured best" grep -q "^t,best < default,10.0,default < best,9.1,no$" "$out/rank.csv"
check "rank: below 1% is a tie" grep -q "^u,.*tie in the simulator" "$out/rank.csv"
# trimtrace + segments on a synthetic step trace replayed by ats sim
"$A" trace synth --out "$out/tr.h5" --duration 6 --cpu step:2=0.4,4=1 --gpu step:4=0.4 --pcie step:4=0.4 > /dev/null
check "trimtrace" $K trimtrace "$out/tr.h5" "$out/cut.h5" --end 5
check "trimtrace: idle from 5 s" sh -c "\"$A\" trace show '$out/cut.h5' | grep -q 'samples:     4 over 5.000 s'"
"$A" sim --model "$here/hybrid-executor/small-moe.json" --trace "$out/cut.h5" --prompt 32 --gen 3000 --policy ats \
    --out "$out/r.h5" --format csv > /dev/null 2>&1
check "segments: the three load segments up to the cut" sh -c "$K segments --trace '$out/cut.h5' x='$out/r.h5:ats' > '$out/segs.csv' && test \$(wc -l < '$out/segs.csv') = 4"
check "segments: rounds in the CPU-loaded one" sh -c "awk -F, '\$2==1 && \$5==0.4 && \$9>0' '$out/segs.csv' | grep -q ."
check "tpotplot draws" sh -c "$K tpotplot -o '$out/t.png' --trace '$out/cut.h5' x='$out/r.h5:ats' > /dev/null && test -s '$out/t.png'"
# valrows: the records of ats validate --summary
printf '[{"policy": "ats", "real_tpot_ms": 80.5, "sim_tpot_ms": 70.25, "real_prefill_tok_s": 100, "sim_prefill_tok_s": 200, "real_resched": 3, "sim_resched": 2}]' > "$out/val.json"
check "valrows: the measured side" sh -c "$K valrows '$out/val.json' --side real t=x | grep -qx 'x,ats,100,,,80.5,,,3,,'"
check "valrows: the simulated side" sh -c "$K valrows '$out/val.json' --side sim t=x | grep -qx 'x,ats,200,,,70.25,,,2,,'"
# sweeprows on a small sweep
"$A" sweep --eps 0.1:0.2 --interval 2:4:2 --trace "$out/cut.h5" --policy ats --model "$here/hybrid-executor/small-moe.json" \
    --prompt 32 --gen 64 --duration 5 --threads 1 --out "$out/sw.h5" > /dev/null 2>&1
check "sweeprows: best, worst and the default point" sh -c "$K sweeprows '$out/sw.h5' --default 0.1,2 > '$out/pts.csv' && grep -q '^cut,best,' '$out/pts.csv' && grep -q '^cut,worst,' '$out/pts.csv' && grep -q '^cut,default,0.1,2,' '$out/pts.csv'"
exit $fail
