#!/usr/bin/env bash
# Multi-turn GRPO of the embedded model on one GPU (issue 24), sized for the device tool's 10-minute calls. Not run
# yet. From the repository root on the GPU machine, with OUT set to the folder whose files come back:
#
#   bash benchmarks/device_grpo.sh STEP [STEP ...]
#
# Carry what benchmarks/device_sft.sh carries (.whl in every call; the GGUF's parts, one a call while the machine is
# warm: benchmarks/device_model.sh). If runs/sft-plain/adapter is there (device_sft.sh's sft-plain, or carried),
# training starts from that adapter. GRPO_DECODER (default graph) is cudaperf train's --decoder. Steps:
#   parts             keep the GGUF's parts carried in this call on the machine (/tmp/smol); part0 is the same
#   check             versions of what training needs, and the GPU
#   train-verifiable  cudaperf train --reward verifiable into runs/grpo-verifiable (GRPO_MINUTES of training,
#                     default 6; rerun it in the next call to go on: it resumes when the directory has checkpoints)
#   train-paper       the same with --reward paper (R_str from the shipped ranker) into runs/grpo-paper
#   eval-verifiable   cudaperf eval of hf:MODEL+runs/grpo-verifiable/adapter on EVAL_TASKS (default small:20) x 5
#                     samples x EVAL_TURNS (default 1) into runs/eval-grpo-verifiable (EVAL_MINUTES, default 7)
#   eval-paper        the same with runs/grpo-paper/adapter
# Training tasks: GRPO_TASKS (default train-easy:32, training split only). Each train step copies its run record,
# the rollout log and TensorBoard logs to OUT; each eval step its metrics and report.
set -u
. "$(dirname "$0")/device_model.sh"
train() {  # $1 = reward preset
  local dir="runs/grpo-$1" extra=""
  [ -d "$dir/checkpoints" ] && ls "$dir/checkpoints" | grep -q '^checkpoint-' && extra="--resume"
  [ -z "$extra" ] && [ -f runs/sft-plain/adapter/adapter_config.json ] && extra="--init-adapter runs/sft-plain/adapter"
  timeout $(( ${GRPO_MINUTES:-6} * 60 + 180 )) python3 -m cudaperf train --model "$MODEL_DIR" --reward "$1" \
    --tasks "${GRPO_TASKS:-train-easy:32}" --out "$dir" --max-minutes "${GRPO_MINUTES:-6}" --max-new-tokens 1024 \
    --save-steps 2 --summarizer template --decoder "${GRPO_DECODER:-graph}" $extra ${GRPO_ARGS:-} 2>&1 | tee -a "$OUT/grpo-$1.log" | tail -40
  mkdir -p "$OUT/grpo-$1" && cp "$dir/grpo_run.json" "$OUT/grpo-$1/" 2>/dev/null
  gzip -c "$dir/rollouts.jsonl" > "$OUT/grpo-$1/rollouts.jsonl.gz" 2>/dev/null
  [ -d "$dir/tb" ] && tar czf "$OUT/grpo-$1/tb.tgz" -C "$dir" tb
}
evaluate() {  # $1 = run name, $2 = policy
  timeout $(( ${EVAL_MINUTES:-7} * 60 + 60 )) python3 -m cudaperf eval --policy "$2" --tasks "${EVAL_TASKS:-small:20}" \
    --samples 5 --turns "${EVAL_TURNS:-1}" --batch-size "${EVAL_BATCH:-64}" --max-new-tokens 1024 --summarizer template \
    --decoder "${EVAL_DECODER:-graph}" \
    --max-minutes "${EVAL_MINUTES:-7}" --out "runs/$1" 2>&1 | tee -a "$OUT/$1.log" | tail -30
  tar czf "$OUT/$1.tgz" -C runs "$1"
}
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case "$step" in
    parts|part0) keep_parts ;;
    check) check_versions ;;
    train-verifiable) join_gguf; train verifiable ;;
    train-paper) join_gguf; train paper ;;
    eval-verifiable) join_gguf; evaluate eval-grpo-verifiable "hf:$MODEL_DIR+runs/grpo-verifiable/adapter" ;;
    eval-paper) join_gguf; evaluate eval-grpo-paper "hf:$MODEL_DIR+runs/grpo-paper/adapter" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
