#!/bin/bash
# experiments/next-h200-b.sh — the second GPU-machine call of the next session (~8 minutes; later steps are
# skipped once 480 s have passed), issue 5: everything merged this session that has not run on a GPU.
#   1. test_cuda_ops, test_cuda_model with the defaults: the Q6_K v3 kernel is the default above 2048 rows
#      (it ran on every shape, ATS_GEMV_V3_Q6K=1, in the fifth session; not the row split), test_cuda_ops'
#      new cases (Q6_K rows > 2048; Q6_K in the back-to-back chain at 4096 (v3) and 1024 (v2)), and the F16
#      KV cache (`--kv-type f16`, merged from branch kv-type): in $OUT/summary.txt look for rc=0 and every
#      "attention_f16 hd ...: F16 caches equal" line at <= 2e-5; test_cuda_model part 4 (stories260K F16 KV on
#      cuda and both splits: top-1 = reference, worst logit error ~1.2e-3, bound 5e-3);
#   2. stories260K on the GPU byte-exact with --kv-type f32 and f16, and split k = 1..4; Q8_0 ids matched per
#      KV type (CPU: 185 with f32, 71 with f16; reported); Qwen3-14B dummy decode at ctx 4096 / 2048-token
#      prompt, f32 then f16 (attention reads half the bytes with f16);
#   3. the GPU bench with the defaults (`ats bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16`):
#      whole-model decode with the Q6_K row split (fifth session, v3 on every shape: 133.0 tok/s; predicted
#      slightly above: the 1024-row attn_v back on v2, 7.2 instead of 8.9 us a call);
#   4. Q4_0 ffn_down, 59 % of a same-size read where ffn_up reaches 84 %: the GEMV table with
#      ATS_GEMV_V3_R=4 (ilv) and with ATS_GEMV_V3_X=lin ATS_GEMV_V3_R=1 (more warps per long row? an open lead).
# Run from the repository root on the GPU machine, with the shared models copied to .gpu-shared/models:
#   run(command="bash experiments/next-h200-b.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
# Lands in $OUT/nextb.tgz plus $OUT/summary.txt and $OUT/bench-kernels-gpu.json.
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nextb ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
timeout 200 $B/tests/exec/test_cuda_ops > $W/ops.log 2>&1
say "test_cuda_ops rc=$? $(tail -1 $W/ops.log)"; grep -E "CHECK failed|attention|gemv Q6_K" $W/ops.log | head -30 | tee -a "$S"
timeout 250 $B/tests/exec/test_cuda_model > $W/model.log 2>&1
say "test_cuda_model rc=$? $(tail -1 $W/model.log)"; grep -E "CHECK failed|stories260K" $W/model.log | head -10 | tee -a "$S"
M=$ATS_SHARED_DIR/models/stories260K
REF=$M/reference_greedy_from_BOS.txt
for t in f32 f16; do
  $A run --model $M/stories260K.gguf --temp 0 -n 256 --backend cuda --kv-type $t 2> $W/run-cuda-$t.err | cmp -s - $REF \
    && say "GPU stories260K $t: byte-exact" || say "GPU stories260K $t: DIFFERS from reference_greedy_from_BOS.txt"
  for k in 1 2 3 4; do
    $A run --model $M/stories260K.gguf --temp 0 -n 256 --backend cpu,cuda --split $k --kv-type $t 2>/dev/null | cmp -s - $REF \
      && say "split $k (cpu,cuda) $t byte-exact" || say "split $k (cpu,cuda) $t DIFFERS"
  done
done
$A quantize $M/stories260K.gguf $W/q8_0.gguf --type q8_0 > /dev/null 2>&1
for t in f32 f16; do
  $A run --model $W/q8_0.gguf --temp 0 -n 256 --print-ids --backend cuda --kv-type $t 2>/dev/null > $W/q8-$t.ids
  n=$(python3 -c "import sys; a=open(sys.argv[1]).read().split(); b=open(sys.argv[2]).read().split(); k=0
while k < min(len(a), len(b)) and a[k] == b[k]: k += 1
print(k)" $W/q8-$t.ids $M/reference_greedy_from_BOS.ids.txt 2>/dev/null || echo '?')
  say "GPU Q8_0 stories260K --kv-type $t: first $n of 256 ids match the reference"
done
for t in f32 f16; do
  say "Qwen3-14B dummy Q4_K_M, cuda, ctx 4096, prompt 2048, -n 64, --kv-type $t:"
  timeout 120 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 2048 -n 64 --kv-type $t \
    2>&1 > /dev/null | tail -4 | tee -a "$S"
done
if [ $((SECONDS - T0)) -lt 400 ]; then
  timeout 150 $A bench kernels --skip-cpu --reps 30 --prompt 128 --decode 16 --out "$OUT/bench-kernels-gpu.json" > $W/bk.txt 2>&1
  say "bench kernels (GPU, defaults) rc=$?"; grep -E "^(Q4_0|Q4_K|Q6_K) +(ffn_up|ffn_down|gate_up|attn_kv)|^gpu " $W/bk.txt | tee -a "$S"
else say "bench skipped: $((SECONDS - T0)) s gone"; fi
for v in "ATS_GEMV_V3_R=4" "ATS_GEMV_V3_X=lin ATS_GEMV_V3_R=1"; do
  [ $((SECONDS - T0)) -lt 480 ] || { say "GEMV variant $v skipped: $((SECONDS - T0)) s gone"; continue; }
  env $v timeout 60 $A bench kernels --skip-cpu --skip-model --reps 30 > "$W/bk-$(echo $v | tr ' =' '__').txt" 2>&1
  say "GEMV table with $v rc=$?"; grep -E "^(Q4_0|Q4_K) +(ffn_up|ffn_down)" "$W/bk-$(echo $v | tr ' =' '__').txt" | tee -a "$S"
done
