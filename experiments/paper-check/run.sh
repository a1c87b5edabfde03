#!/bin/sh
# Checks of the simulator against the ATSInfer paper (README.md). Usage, from the repository root:
#   experiments/paper-check/run.sh [path/to/ats [OUT]]      (defaults ./build/cli/ats, experiments/paper-check/out)
# Writes OUT/*.csv and OUT/fig13.txt (the committed ones are experiments/paper-check/out) and prints the
# figures that README.md records.
set -eu
ATS=${1:-./build/cli/ats}
OUT=${2:-experiments/paper-check/out}
mkdir -p "$OUT"
H5=$(mktemp -d)   # results files (a few MB each) are not committed
trap 'rm -rf "$H5"' EXIT
COMMON="--model qwen3-14b --quant q4_k_m --hw rtx3060-laptop --seed 1 --resched-cost 16ms"

echo "== 1. decode, idle machine: P=2048, G=128 (paper §5.2, Fig. 11)"
$ATS sim $COMMON --trace none --requests 1 --prompt 2048 --gen 128 --policy all --format csv | tee "$OUT/decode.csv"

echo "== 2. prefill, idle machine: P in 512..4096, chunk 512 (paper §5.2, Fig. 10)"
: > "$OUT/prefill.csv"
for P in 512 1024 2048 4096; do
  $ATS sim $COMMON --trace none --requests 1 --prompt $P --gen 1 --policy layer,layer-opoffload,static,static-opoffload,ats-paper,ats \
      --format csv | awk -F, -v P=$P 'NR==1{if(P==512)print "prompt,"$0; next}{print P","$0}' >> "$OUT/prefill.csv"
done
cat "$OUT/prefill.csv"

echo "== 3. ablation, P=1024, G=128 (paper §5.5, Fig. 15)"
{
  $ATS sim $COMMON --trace none --requests 1 --prompt 1024 --gen 128 --policy layer-opoffload --format csv | sed 's/^layer-opoffload,/base (layer-opoffload),/'
  $ATS sim $COMMON --trace none --requests 1 --prompt 1024 --gen 128 --policy static-opoffload --serialized --act-path ce --format csv | tail -n 1 | sed 's/^static-opoffload,/+TP (static-opoffload; serialized; CE activations),/'
  $ATS sim $COMMON --trace none --requests 1 --prompt 1024 --gen 128 --policy static-opoffload --format csv | tail -n 1 | sed 's/^static-opoffload,/+TP+AC (static-opoffload; async; SM activations),/'
  $ATS sim $COMMON --trace none --requests 1 --prompt 1024 --gen 128 --policy static --format csv | tail -n 1 | sed 's/^static,/(static placement alone: no prefill op offload),/'
  $ATS sim $COMMON --trace none --requests 1 --prompt 1024 --gen 128 --policy ats --format csv | tail -n 1 | sed 's/^ats,/+TP+AC+DT (ats),/'
} | tee "$OUT/ablation.csv"

echo "== 4. load adaptation on the Fig. 13 trace (paper §5.3): decode P=2048, G=128 back to back, 180 s"
$ATS sim $COMMON --trace fig13-synth --policy ats --eps 1e9 --out "$H5/fig13-fixed.h5" --format csv | tee "$OUT/fig13-fixed.csv"
$ATS sim $COMMON --trace fig13-synth --policy ats --out "$H5/fig13-aware.h5" --format csv | tee "$OUT/fig13-aware.csv"
$ATS sim $COMMON --trace fig13-synth --policy static,layer --out "$H5/fig13-static.h5" --format csv | tee "$OUT/fig13-static.csv"
/usr/bin/python3 experiments/paper-check/fig13.py "$H5/fig13-fixed.h5:ats" "$H5/fig13-aware.h5:ats" \
    "$H5/fig13-static.h5:static" | tee "$OUT/fig13.txt"
