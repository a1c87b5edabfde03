#!/bin/bash
# experiments/gpu-check/run.sh OUT — does this tree pass on the GPU machine? Builds every target (sm_90),
# runs the whole CTest suite there (the `gpu`-labelled entries run instead of skipping), then stories260K
# greedy from BOS, 256 tokens, on the CUDA backend and on both backends split after layer k = 1..4, with
# F32 and F16 KV caches, each against ../shared's reference_greedy_from_BOS.txt byte for byte, and a Q8_0
# copy of it (ats quantize) against the reference token ids (how many leading ids match).
# Needs the shared models: ATS_SHARED_DIR, ../shared or .gpu-shared (experiments/common.sh, ex_shared).
# Parameters (environment): LABEL (a ctest -L label, e.g. gpu; default: the whole suite), JOBS (8).
. experiments/common.sh
out=${1:-}
ex_setup "$out" all
ex_shared || { say "no models/stories260K under ATS_SHARED_DIR, ../shared or .gpu-shared"; exit 1; }
cmake -S . -B "$B" -DATS_SHARED_DIR="$SHARED" > /dev/null 2>&1
label=(); [ -n "${LABEL:-}" ] && label=(-L "$LABEL")
timeout 400 ctest --test-dir "$B" "${label[@]}" -j"${JOBS:-8}" --output-on-failure > "$OUT/ctest.log" 2>&1
say "[$((SECONDS - T0)) s] ctest ${label[*]} rc=$?: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"
grep -E "\*\*\*|Failed|Not Run" "$OUT/ctest.log" | head -20 | tee -a "$S"
M=$SHARED/models/stories260K
REF=$M/reference_greedy_from_BOS.txt
for kv in f32 f16; do
    "$A" run --model "$M/stories260K.gguf" --temp 0 -n 256 --backend cuda --kv-type $kv 2> "$W/cuda-$kv.err" |
        cmp -s - "$REF" && say "stories260K cuda, $kv KV: byte-exact" || say "stories260K cuda, $kv KV: DIFFERS from the reference"
    for k in 1 2 3 4; do
        "$A" run --model "$M/stories260K.gguf" --temp 0 -n 256 --backend cpu,cuda --split $k --kv-type $kv 2> /dev/null |
            cmp -s - "$REF" && say "  cpu,cuda --split $k, $kv KV: byte-exact" || say "  cpu,cuda --split $k, $kv KV: DIFFERS"
    done
done
"$A" quantize "$M/stories260K.gguf" "$W/q8_0.gguf" --type q8_0 > /dev/null 2>&1
for be in cpu cuda; do
    "$A" run --model "$W/q8_0.gguf" --temp 0 -n 256 --print-ids --backend $be 2> /dev/null > "$W/q8-$be.ids"
    n=$(python3 -c "import sys; a=open(sys.argv[1]).read().split(); b=open(sys.argv[2]).read().split(); k=0
while k < min(len(a), len(b)) and a[k] == b[k]: k += 1
print(k)" "$W/q8-$be.ids" "$M/reference_greedy_from_BOS.ids.txt" 2> /dev/null || echo '?')
    say "stories260K Q8_0 on $be: the first $n of 256 ids match the reference"
done
say "[$((SECONDS - T0)) s] done"
