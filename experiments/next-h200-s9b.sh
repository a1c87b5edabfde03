#!/bin/bash
# experiments/next-h200-s9b.sh — ninth session's second GPU-machine call (~3 minutes, CPU only), issue 5.
# s9 measured the whole-model CPU row after the merge of cpu-prefill-q4 + cpu-q4-decode at prefill 38.3 tok/s and
# decode 8.67 tok/s against s8d's 45.3 and 8.94 (a different probe: 131.6 vs 122.2 GB/s). Is that the merge or the
# machine? A/B in one session: `pre` = the tree before the merges (1083a59, unpacked into .run by
#   rm -rf .run && mkdir .run && git archive 1083a59 | tar -x -C .run
# ) and `post` = this tree, both CPU-only, the same flags; interleaved 3 times (post, pre, ...)
#   ats bench kernels --skip-gpu --threads 16 --reps 10 --prompt 128 --decode 8
# and test_exec_decode over 30 seeds on this AVX-512 VNNI host.
#   run(command="bash experiments/next-h200-s9b.sh", carry=[".deps", ".run"], timeout_s=330)
# Prediction: whole-model prefill within +-5 % (Q4_K/Q6_K prefill code unchanged by both branches; the SIMD
# Q8_K quantizer can only make it faster), decode +0-5 % (the Q8_K quantizer of a decode step); the s9 drop
# is the machine (its DRAM probe moved 115-132 GB/s between runs of that call).
. experiments/h200-common.sh
T0=$SECONDS
name=nexts9b
W=/tmp/$name; S=$OUT/summary.txt
mkdir -p "$OUT" "$W"; : > "$S"
trap "(cd /tmp && tar czf '$OUT/$name.tgz' '$name')" EXIT
export LD_LIBRARY_PATH=$top/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
say "$name $(date -u +%FT%TZ)"
DEPS="-DCMAKE_PREFIX_PATH=$top/.deps/root/usr -DGSL_ROOT_DIR=$top/.deps/root/usr -DATS_CUDA=OFF"
(cmake -S . -B /tmp/$name-post $DEPS > $W/b-post.log 2>&1 && cmake --build /tmp/$name-post -j8 --target ats test_exec_decode >> $W/b-post.log 2>&1) & p1=$!
(cmake -S .run -B /tmp/$name-pre $DEPS > $W/b-pre.log 2>&1 && cmake --build /tmp/$name-pre -j8 --target ats >> $W/b-pre.log 2>&1) & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
say "[$((SECONDS - T0)) s] builds post rc=$r1 pre rc=$r2"
[ $r1 = 0 ] && [ $r2 = 0 ] || { tail -20 $W/b-post.log $W/b-pre.log | tee -a "$S"; exit 1; }
fails=0
for i in $(seq 30); do /tmp/$name-post/tests/exec/test_exec_decode > $W/ted-$i.txt 2>&1 || { fails=$((fails + 1)); head -3 $W/ted-$i.txt | tee -a "$S"; }; done
say "[$((SECONDS - T0)) s] test_exec_decode: $fails of 30 seeds failed"
for r in 1 2 3; do
  for v in post pre; do
    [ $((SECONDS - T0)) -gt 250 ] && { say "$v $r skipped"; continue; }
    (cd $W && timeout 60 /tmp/$name-$v/cli/ats bench kernels --skip-gpu --threads 16 --reps 10 --prompt 128 --decode 8 \
      --out $W/bk-$v-$r.json > $W/bk-$v-$r.txt 2>&1)
    say "[$((SECONDS - T0)) s] $v $r rc=$?: $(grep -o 'bandwidth [0-9.]* GB/s' $W/bk-$v-$r.txt | head -1)"
    grep -E "^cpu |^(Q4_K|Q6_K) " $W/bk-$v-$r.txt | sed "s/^/  $v /" | tee -a "$S"
  done
done
say "[$((SECONDS - T0)) s] done"
