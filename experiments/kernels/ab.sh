#!/bin/bash
# experiments/kernels/ab.sh OUT ARM... — the same `ats bench kernels` run on several builds, interleaved
# ROUNDS times on one machine (the host's memory bandwidth moves between runs: only arms measured side by
# side compare), with the median per table row. An ARM is NAME:SOURCE[:CFLAGS]: SOURCE is `.` (this
# tree), another source tree (a directory, e.g. made with `git archive REV | tar -x -C DIR`) or a git
# revision (archived into /tmp); CFLAGS are extra C flags of that build, e.g. the A/B builds of
# exec/kernels/cpu/cpu_matmul.c:
#   experiments/kernels/ab.sh /tmp/ab "after:." "before:.:-DEX_DECODE_ONE_ROW -DEX_QUANT_SCALAR"
# Builds are CPU-only (ATS_CUDA=OFF) unless ATS_CUDA says otherwise.
# Parameters (environment): BENCH ("--skip-gpu --skip-model --threads 16 --reps 20": the bench flags),
# ROUNDS (3), TYPES ("Q4_0 Q4_K Q8_0 Q6_K MXFP4"), LIMIT_S (400: later rounds are skipped).
. experiments/common.sh
out=${1:-}; shift || true
[ $# -ge 1 ] || { echo "usage: $0 OUT NAME:SOURCE[:CFLAGS]..." >&2; exit 2; }
export ATS_CUDA=${ATS_CUDA:-OFF}
BUILD_DIR=/tmp/ats-ab-host ex_setup "$out" ats   # the summary header and the machine lines
names=()
pids=()
for arm in "$@"; do
    n=${arm%%:*}; rest=${arm#*:}; src=${rest%%:*}; cf=""; [ "$rest" != "$src" ] && cf=${rest#*:}
    if [ "$src" != . ] && [ ! -d "$src" ]; then
        rm -rf "/tmp/ats-ab-src-$n" && mkdir -p "/tmp/ats-ab-src-$n" &&
            git archive "$src" | tar -x -C "/tmp/ats-ab-src-$n" || { say "arm $n: no source tree or revision '$src'"; exit 2; }
        src=/tmp/ats-ab-src-$n
    fi
    say "arm $n: source $src, C flags '${cf}'"
    (cmake -S "$src" -B "/tmp/ats-ab-$n" -DATS_CUDA="$ATS_CUDA" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
        -DCMAKE_C_FLAGS="$cf" > "$W/build-$n.log" 2>&1 &&
        cmake --build "/tmp/ats-ab-$n" -j"$(( $(nproc) / $# + 1 ))" --target ats >> "$W/build-$n.log" 2>&1) &
    pids+=($!); names+=("$n")
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { say "build of ${names[$i]} FAILED"; tail -20 "$W/build-${names[$i]}.log" | tee -a "$S"; exit 1; }
done
say "[$((SECONDS - T0)) s] built ${names[*]}"
rows="^($(echo ${TYPES:-Q4_0 Q4_K Q8_0 Q6_K MXFP4} | tr ' ' '|')) "
bench=${BENCH:---skip-gpu --skip-model --threads 16 --reps 20}
for r in $(seq "${ROUNDS:-3}"); do
    for n in "${names[@]}"; do
        ex_left "${LIMIT_S:-400}" || { say "$n round $r skipped at $((SECONDS - T0)) s"; continue; }
        f=$OUT/bk-$n-$r.txt
        (cd "$W" && timeout 150 "/tmp/ats-ab-$n/cli/ats" bench kernels $bench --out "${f%.txt}.json" > "$f" 2>&1)
        say "[$((SECONDS - T0)) s] $n round $r rc=$?: $(grep -o 'bandwidth [0-9.]* GB/s' "$f" | head -1)"
        grep -E "$rows|^(cpu|gpu) " "$f" | sed "s/^/  $n /" | tee -a "$S"
    done
done
# medians over the rounds of each row's throughput column (GEMV rows: GB/s; prefill GEMM rows: GMAC/s or
# TFLOP/s; whole-model rows: decode tok/s)
say "median over rounds:"
for n in "${names[@]}"; do
    cat "$OUT"/bk-"$n"-*.txt 2>/dev/null | awk -v n="$n" -v re="$rows" '
        $0 ~ re && NF >= 7 && $4 ~ /^[0-9.]+$/ { k = $1 " " $2 " gemv_GB/s"; v[k] = v[k] " " (NF >= 12 ? $7 : $6) }
        $0 ~ re && (NF == 3 || NF == 4) { k = $1 " prefill_GEMM"; v[k] = v[k] " " $3 }
        /^(cpu|gpu) / && NF >= 7 { k = $1 " decode_tok/s"; v[k] = v[k] " " $5 }
        END { for (k in v) { m = split(v[k], a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
              printf "  %-8s %-28s %8s  (n=%d:%s)\n", n, k, a[int((m + 1) / 2)], m, v[k] } }' | sort -k2 | tee -a "$S"
done
