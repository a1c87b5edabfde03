#!/bin/bash
# End-to-end prefill and decode per policy on the executor (experiments/end-to-end/README.md), on the GPU
# machine: the paper's laptop and desktop stood in for by a VRAM budget and a CPU thread count.
# Usage, from the repository root:  experiments/end-to-end/run-hw.sh OUT ATS
#   ATS: an ats built with CUDA (cmake -DATS_CUDA=ON ... --target ats)
# Writes OUT/hw.csv (role,hw,model,phase,prompt,gen + the `ats sim` columns, measured), OUT/sim.csv (the
# simulator with the same arguments on the stand-in's description: the side-by-side partner),
# OUT/compare.md, OUT/summary.txt, OUT/logs/. Environment (defaults = the full experiment):
#   ROLES      "laptop desktop"
#   MODELS     "qwen3-14b qwen3-30b-a3b" (llama-3.1-70b: ~40 GB of random weights, add it by hand)
#   PROMPTS    "512 1024 2048 4096"   prefill runs (-n 1)
#   DECODE     "2048:128"             decode runs, P:G (empty: none)
#   POLICIES   "layer layer-opoffload gpu-stream static static-opoffload ats-paper ats" (+ expert on MoE models)
#   LIMIT_S    0 (no limit): later runs are skipped, saying so, once this many seconds have passed
#   RUN_TIMEOUT 300 (s, per run)
# Stand-ins (README.md "Machines"): laptop = --threads 4 --vram-budget 5.1GiB --chunk 512,
# desktop = --threads 8 --vram-budget 20.4GiB --chunk 2048; --hw the matching description.
set -u
D=experiments/end-to-end
source experiments/evalkit.sh
hw_setup "${1:-}" "${2:-}"
hw_header role,hw,model,phase,prompt,gen
ROLES=${ROLES:-laptop desktop}
MODELS=${MODELS:-qwen3-14b qwen3-30b-a3b}
PROMPTS=${PROMPTS-512 1024 2048 4096}
DECODE=${DECODE-2048:128}
POLICIES=${POLICIES:-layer layer-opoffload gpu-stream static static-opoffload ats-paper ats}
for role in $ROLES; do
    case $role in
        laptop) thr=4; budget=5.1GiB; chunk=512 ;;
        desktop) thr=8; budget=20.4GiB; chunk=2048 ;;
        *) echo "run-hw.sh: ROLES: unknown role '$role' (laptop, desktop)" >&2; exit 2 ;;
    esac
    hw=$D/h200-$role.json
    for model in $MODELS; do
        pols=$POLICIES
        case $model in *a3b*|*moe*|*mixtral*|*gpt-oss*) pols="$pols expert" ;; esac
        runs=""
        for P in $PROMPTS; do runs="$runs prefill:$P:1"; done
        for pg in $DECODE; do runs="$runs decode:$pg"; done
        for r in $runs; do
            IFS=: read -r phase P G <<< "$r"
            for p in $pols; do
                if ! left; then say "skipped (LIMIT_S): $role $model $phase P=$P $p"; continue; fi
                mn=$(basename "$model" .json)
                keys=role=$role,hw=h200-$role,model=$mn,phase=$phase,prompt=$P,gen=$G
                hw_run "$role-$mn-$phase-$P-$p" $keys -- --model $model --dummy-weights --kv-type f16 --policy $p --threads $thr \
                    --vram-budget $budget --chunk $chunk --hw $hw --prompt-tokens $P -n $G --ctx $((P + G + 16))
                sim_row $keys -- --model $model --hw $hw --vram-budget $budget --chunk $chunk --trace none --requests 1 \
                    --prompt $P --gen $G --policy $p
            done
        done
    done
done
{ echo "## prefill"; $PY $K compare "$OUT/sim.csv" "$OUT/hw.csv" --on role,model,phase,prompt,gen,policy --where phase=prefill \
      --metrics prefill_tok_s,ttft_s
  echo; echo "## decode"; $PY $K compare "$OUT/sim.csv" "$OUT/hw.csv" --on role,model,phase,prompt,gen,policy --where phase=decode \
      --metrics decode_tok_s,tpot_mean_ms,gb_h2d; } | tee "$OUT/compare.md"
