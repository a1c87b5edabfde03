# experiments/h200-common.sh — sourced by the experiments/next-h200*.sh scripts (run from the repository
# root on the GPU machine, .deps carried): `h200_setup NAME TARGET...` makes the work folder W=/tmp/NAME
# (packed into $OUT/NAME.tgz at exit: the device tool returns at most 8 files), the summary S=$OUT/summary.txt
# with say() appending to it, points LD_LIBRARY_PATH at .deps' GSL, builds the cmake TARGETs (sm_90) in
# B=/tmp/NAME-build and sets A to the ats binary; a failed build ends the script (exit 1).
set -u
top=$(pwd)
OUT=${OUT:-$top/next-out}
say() { echo "$*" | tee -a "$S"; }
h200_setup() {
  local name=$1; shift
  W=/tmp/$name; B=/tmp/$name-build; S=$OUT/summary.txt
  mkdir -p "$OUT" "$W"; : > "$S"
  trap "(cd /tmp && tar czf '$OUT/$name.tgz' '$name')" EXIT
  export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  say "$name $(date -u +%FT%TZ), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), kernel $(uname -r)"
  cmake -S . -B "$B" -DCMAKE_PREFIX_PATH="$top/.deps/root/usr" -DGSL_ROOT_DIR="$top/.deps/root/usr" \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DATS_CUDA=ON > "$W/build.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" --target "$@" >> "$W/build.log" 2>&1 || { say "build FAILED"; tail -20 "$W/build.log"; exit 1; }
  A=$B/cli/ats
}
