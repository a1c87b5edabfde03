#!/bin/bash
# Sweep scaling over MPI ranks: points/s of `mpirun -n N ats sweep` for each N, and the parallel efficiency
# (points/s at N) / (N x points/s at 1 rank). Every run must print the same table as the 1-rank run (checked).
#
# usage: experiments/sweep-scaling/run.sh OUT ATS [RANKS...]      (RANKS default: 1 2 4 8 16)
#   OUT     created; gets results.csv, summary.md, and per N: tableN.txt, errN.txt, sweepN.h5
#   (wall time and points/s of the fastest of REPEAT runs; CPU time of that run, all ranks together)
#   ATS     the ats binary (built with MPI: cmake -DATS_MPI=ON)
# environment (defaults in brackets): THREADS per rank [1], EPS [0.05:0.5:0.05], INTERVAL [1:8:1],
#   TRACES [fig13-synth,h200-cpu-compile], POLICIES [ats,ats-paper], DURATION [20], REPEAT runs per N, best
#   time kept [1], MPIRUN [mpirun], MPIFLAGS [--bind-to none; --oversubscribe and, as root,
#   --allow-run-as-root are added]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT ATS [RANKS...]" >&2; exit 2; }
out=$1; ats=$(realpath "$2"); shift 2
ranks=("$@"); [ ${#ranks[@]} -gt 0 ] || ranks=(1 2 4 8 16)
[ -x "$ats" ] || { echo "$0: $ats: not an executable" >&2; exit 2; }
threads=${THREADS:-1}; eps=${EPS:-0.05:0.5:0.05}; itv=${INTERVAL:-1:8:1}
traces=${TRACES:-fig13-synth,h200-cpu-compile}; pols=${POLICIES:-ats,ats-paper}; dur=${DURATION:-20}
repeat=${REPEAT:-1}; mpirun=${MPIRUN:-mpirun}
flags=(${MPIFLAGS:---bind-to none} --oversubscribe); [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
mkdir -p "$out"
args=(sweep --model qwen3-14b --prompt 512 --gen 64 --duration "$dur" --trace "$traces" --policy "$pols"
      --eps "$eps" --interval "$itv" --threads "$threads")
{
  echo "# ats sweep scaling: $(date -u +%FT%TZ), $(hostname), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'))"
  echo "# $("$ats" --version); $("$mpirun" --version | head -1); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# mpirun ${flags[*]} -n N $ats ${args[*]}"
} > "$out/summary.md"
echo "ranks,threads_per_rank,points,wall_s,points_per_s,efficiency,cpu_s,cpu_ms_per_point" > "$out/results.csv"
base=""
for n in "${ranks[@]}"; do
  best=""
  for ((r = 0; r < repeat; r++)); do
    t0=$(date +%s.%N)
    # the subshell's `times`: CPU time of mpirun and every rank (its children), user + system
    ( "$mpirun" "${flags[@]}" -n "$n" "$ats" "${args[@]}" --out "$out/sweep$n.h5" > "$out/table$n.txt" \
        2> "$out/err$n.txt" && echo 0 > "$out/rc" || echo $? > "$out/rc"; times > "$out/times" )
    t1=$(date +%s.%N)
    rc=$(cat "$out/rc")
    [ "$rc" -le 1 ] || { echo "$0: $n ranks: exit $rc (see $out/err$n.txt)" >&2; exit 1; }
    w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    c=$(sed -n 2p "$out/times" | awk '{ split($1, u, "m"); split($2, s, "m"); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
    if [ -z "$best" ] || awk -v w="$w" -v b="$best" 'BEGIN { exit !(w < b) }'; then best=$w; cpu=$c; fi
  done
  pts=$(sed -n 's/.* grid (.*), \([0-9]*\) points$/\1/p' "$out/table$n.txt")
  if [ -n "$base" ] && ! cmp -s "$out/table${ranks[0]}.txt" "$out/table$n.txt"; then
    echo "$0: $n ranks printed another table than ${ranks[0]} rank(s)" >&2; exit 1
  fi
  pps=$(awk -v p="$pts" -v w="$best" 'BEGIN { print p / w }')
  [ -n "$base" ] || base=$(awk -v p="$pps" -v n="${ranks[0]}" 'BEGIN { print p / n }')
  eff=$(awk -v p="$pps" -v n="$n" -v b="$base" 'BEGIN { print p / (n * b) }')
  cpp=$(awk -v c="$cpu" -v p="$pts" 'BEGIN { print 1e3 * c / p }')
  printf "%d,%d,%d,%.2f,%.3f,%.3f,%.2f,%.1f\n" "$n" "$threads" "$pts" "$best" "$pps" "$eff" "$cpu" "$cpp" | tee -a "$out/results.csv"
done
rm -f "$out/rc" "$out/times"
{
  echo
  echo "| ranks | threads/rank | points | wall s | points/s | efficiency | CPU s (all ranks) | CPU ms/point |"
  echo "|---|---|---|---|---|---|---|---|"
  tail -n +2 "$out/results.csv" | awk -F, '{printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8}'
} >> "$out/summary.md"
cat "$out/summary.md"
