# experiments/common.sh — sourced by the experiment scripts (bash, run from the repository root).
#
#   ex_setup OUT TARGET...   makes the results folder OUT (every script's first parameter), the summary
#                            S=OUT/summary.txt (say() appends to it and echoes), the log folder W=OUT/logs;
#                            configures and builds the cmake TARGETs in B (BUILD_DIR, default
#                            /tmp/ats-exp-build) and sets A to the ats binary. A failed build ends the
#                            script (exit 1) with the build log's tail in the summary.
#   ex_shared                sets SHARED to the folder holding models/stories260K (ATS_SHARED_DIR, then
#                            ../shared, then .gpu-shared: a copy inside the checkout, ignored by git) and
#                            exports ATS_SHARED_DIR; empty when none has it.
#   ex_left LIMIT_S          true while fewer than LIMIT_S seconds have passed since ex_setup (scripts
#                            skip their later steps, saying so, to fit a bounded machine session).
#
# Environment: CUDA_ARCH (default 90: the H200), ATS_CUDA (ON, OFF or AUTO; default ON), BUILD_DIR.
# GSL and the other dependencies come from the system (tools/deps.sh); a machine without root access can
# unpack the Debian packages into .deps/root (same layout as /), which is then used when present.
set -u
top=$(pwd)
say() { echo "$*" | tee -a "$S"; }
ex_left() { [ $((SECONDS - T0)) -lt "$1" ]; }
ex_setup() {
    OUT=$1; shift
    [ -n "$OUT" ] || { echo "usage: $0 OUT ... (OUT: the folder the results go to)" >&2; exit 2; }
    mkdir -p "$OUT/logs"
    OUT=$(cd "$OUT" && pwd); W=$OUT/logs; S=$OUT/summary.txt; B=${BUILD_DIR:-/tmp/ats-exp-build}
    : > "$S"
    T0=$SECONDS
    local deps=()
    if [ -d "$top/.deps/root/usr" ]; then
        deps=(-DCMAKE_PREFIX_PATH="$top/.deps/root/usr" -DGSL_ROOT_DIR="$top/.deps/root/usr")
        export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    fi
    say "$0 $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '(no git metadata)'), kernel $(uname -r)"
    say "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc)$(grep -q avx512_vnni /proc/cpuinfo && echo ', avx512_vnni')"
    command -v nvidia-smi > /dev/null && say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
    cmake -S . -B "$B" "${deps[@]}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DATS_CUDA="${ATS_CUDA:-ON}" \
        > "$W/build.log" 2>&1 &&
        cmake --build "$B" -j"$(nproc)" --target "$@" >> "$W/build.log" 2>&1 ||
        { say "build FAILED"; tail -20 "$W/build.log" | tee -a "$S"; exit 1; }
    A=$B/cli/ats
    say "[$((SECONDS - T0)) s] built $*"
}
ex_shared() {
    SHARED=""
    local c
    for c in "${ATS_SHARED_DIR:-}" ../shared .gpu-shared; do
        if [ -n "$c" ] && [ -f "$c/models/stories260K/stories260K.gguf" ]; then SHARED=$(cd "$c" && pwd); break; fi
    done
    [ -n "$SHARED" ] && export ATS_SHARED_DIR=$SHARED
}
