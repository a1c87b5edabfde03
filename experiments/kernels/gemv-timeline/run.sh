#!/bin/bash
# experiments/kernels/gemv-timeline/run.sh OUT [VARIANT...] — where a GEMV v4 call's time goes when calls
# run back to back: builds v4_timeline.cu (gemv_v4.cu with its V4_MARK hooks defined: thread 0 of every
# block records %globaltimer and clock64 at 7 points of each call) and traces SHAPES under each VARIANT (a
# space-separated list of NAME=VALUE kernel settings, "" = the defaults; e.g. "ATS_GEMV_V4_TRIGGER=last").
# Writes OUT/timeline.txt (every call) and the per-shape medians to OUT/summary.txt. GPU: sm_90.
# Parameters (environment): SHAPES (";"-separated "type rows cols"; default Qwen3-14B ffn_up, attn_q and
# gate+up for q4_0 and q4_k), CALLS (48).
set -u
OUT=${1:?usage: $0 OUT [VARIANT...]}; shift
[ $# -gt 0 ] || set -- ""
mkdir -p "$OUT"; R=$OUT/timeline.txt; S=$OUT/summary.txt; : > "$S"
nvcc -arch=sm_90 -O3 -DNDEBUG -std=c++17 -Iexec/include -Isched/include -Iexec/kernels/cuda -o /tmp/v4_timeline \
    experiments/kernels/gemv-timeline/v4_timeline.cu > "$R" 2>&1 || { cat "$R"; exit 1; }
IFS=';' read -ra shapes <<< "${SHAPES:-q4_0 17408 5120;q4_k 17408 5120;q4_0 5120 5120;q4_0 34816 5120;q4_k 34816 5120}"
for sh in "${shapes[@]}"; do
    for v in "$@"; do
        echo "== ${v:+$v }$sh" >> "$R"
        env $v /tmp/v4_timeline $sh "${CALLS:-48}" >> "$R" 2>&1
    done
done
grep -E "^==|untraced|^median|mbarrier" "$R" | tee "$S"
