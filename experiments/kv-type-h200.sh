#!/bin/bash
# KV cache type (helper Y, issue 5, branch kv-type): the GPU checks of --kv-type f32|f16, ~4-5 minutes.
# run(command="bash experiments/kv-type-h200.sh", carry=[".deps", ".gpu-shared"], timeout_s=600)
# from the root of a tree with branch kv-type merged, the shared models copied to .gpu-shared/models as
# for next-h200-b.sh (ATS_SHARED_DIR points there).
# Look at $OUT/summary.txt:
#   - "test_cuda_ops rc=0"; every "attention hd ..." (F32) and "attention_f16 hd ...: F16 caches equal"
#     line with max error <= 2e-5 (the CUDA F16 store writes the CPU store's bits; attention over it);
#   - "test_cuda_model rc=0": part 3 (F32 stories260K on the GPU, within 1e-4: unchanged) and part 4
#     "stories260K F16 KV cuda / cuda|cpu split 2 / cpu|cuda split 2": top-1 equal to the reference,
#     worst logit error ~1.2e-3 expected (bound 5e-3), and the reported max difference to the CPU's own
#     F16 logits (expected ~1e-6 relative unless a K/V value rounds to the other F16 neighbour);
#   - "GPU stories260K f32: byte-exact" and "f16: byte-exact", "split k (cpu,cuda) f16 byte-exact" k = 1..4;
#   - Q8_0 stories260K on the GPU: ids matched per KV type (CPU: 185 with f32, 71 with f16; reported);
#   - Qwen3-14B --dummy-weights decode tok/s at ctx 4096 / 2048-token prompt, f32 then f16 KV
#     (attention reads half the bytes with f16).
. experiments/h200-common.sh
h200_setup kvtype ats test_cuda_ops test_cuda_model
export ATS_SHARED_DIR=$top/.gpu-shared
timeout 200 $B/tests/exec/test_cuda_ops > $W/ops.log 2>&1
say "test_cuda_ops rc=$? $(tail -1 $W/ops.log)"; grep -E "CHECK failed|attention" $W/ops.log | head -24 | tee -a "$S"
timeout 250 $B/tests/exec/test_cuda_model > $W/model.log 2>&1
say "test_cuda_model rc=$? $(tail -1 $W/model.log)"; grep -E "CHECK failed|stories260K" $W/model.log | head -10 | tee -a "$S"
M=$ATS_SHARED_DIR/models/stories260K
REF=$M/reference_greedy_from_BOS.txt
for t in f32 f16; do
  $A run --model $M/stories260K.gguf --temp 0 -n 256 --backend cuda --kv-type $t 2> $W/run-cuda-$t.err | cmp -s - $REF \
    && say "GPU stories260K $t: byte-exact" || say "GPU stories260K $t: DIFFERS from reference_greedy_from_BOS.txt"
  head -1 $W/run-cuda-$t.err | tee -a "$S"
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
  timeout 200 $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 2048 -n 64 --kv-type $t \
    2>&1 > /dev/null | tail -4 | tee -a "$S"
done
