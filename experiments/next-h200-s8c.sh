#!/bin/bash
# experiments/next-h200-s8c.sh — eighth session: is Qwen3-14B Q4_K_M GPU decode bound by the host's launches?
# `ats run` prints the host time of each op kind; if they add up to the decode time and the output op (which
# waits for the logits) is short, the GPU waits for the host. Also: nsys present?
#   run(command="bash experiments/next-h200-s8c.sh", carry=[".deps", ".gpu-shared"], timeout_s=300)
. experiments/h200-common.sh
T0=$SECONDS
h200_setup nexts8c ats
for n in 64; do
  $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 128 -n $n 2>&1 >/dev/null | tee -a "$S"
  ATS_GEMV_V4_TRIGGER=last $A run --model qwen3-14b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 128 -n $n 2>&1 >/dev/null | grep decode | sed 's/^/TRIGGER=last: /' | tee -a "$S"
done
$A run --model llama-3.1-8b --dummy-weights --backend cuda --ctx 4096 --prompt-tokens 128 -n 64 2>&1 >/dev/null | tee -a "$S" || true
say "nsys: $(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)"
say "[$((SECONDS - T0)) s] done"
