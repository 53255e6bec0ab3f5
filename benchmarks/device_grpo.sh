#!/usr/bin/env bash
# Multi-turn GRPO of the embedded model on one GPU (issue 24), sized for the device tool's 10-minute calls. Not run
# yet. From the repository root on the GPU machine, with OUT set to the folder whose files come back:
#
#   bash benchmarks/device_grpo.sh STEP [STEP ...]
#
# Carry what benchmarks/device_sft.sh carries (.whl in every call; .device/smol/part0 in one call, then
# .device/smol/part1 while the machine is warm). If runs/sft-plain/adapter is there (device_sft.sh's sft-plain, or
# carried), training starts from that adapter. Steps:
#   part0             keep the first half of the GGUF on the machine (/tmp/smol)
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
: "${OUT:?set OUT to the output folder}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
export CUDAPERF_CACHE=/tmp/cpcache
join_gguf() {
  if [ ! -f /tmp/smol/model.gguf ]; then
    [ -f /tmp/smol/part0 ] && [ -f .device/smol/part1 ] || { echo "run step part0 first, then carry .device/smol/part1"; exit 1; }
    cat /tmp/smol/part0 .device/smol/part1 > /tmp/smol/model.gguf || exit 1
  fi
  echo "sha256 $(sha256sum /tmp/smol/model.gguf | cut -c1-16) (expected $(cut -c1-16 .device/smol/sha256))"
  export CUDAPERF_EMBEDDED_GGUF=/tmp/smol/model.gguf
  MODEL_DIR=$(python3 -c 'from cudaperf.policy.embedded import embedded_model_dir; print(embedded_model_dir()[0])') || exit 1
  echo "model dir $MODEL_DIR"
}
train() {  # $1 = reward preset
  local dir="runs/grpo-$1" extra=""
  [ -d "$dir/checkpoints" ] && ls "$dir/checkpoints" | grep -q '^checkpoint-' && extra="--resume"
  [ -z "$extra" ] && [ -f runs/sft-plain/adapter/adapter_config.json ] && extra="--init-adapter runs/sft-plain/adapter"
  timeout $(( ${GRPO_MINUTES:-6} * 60 + 180 )) python3 -m cudaperf train --model "$MODEL_DIR" --reward "$1" \
    --tasks "${GRPO_TASKS:-train-easy:32}" --out "$dir" --max-minutes "${GRPO_MINUTES:-6}" --max-new-tokens 1024 \
    --save-steps 2 --summarizer template $extra ${GRPO_ARGS:-} 2>&1 | tee -a "$OUT/grpo-$1.log" | tail -40
  mkdir -p "$OUT/grpo-$1" && cp "$dir/grpo_run.json" "$OUT/grpo-$1/" 2>/dev/null
  gzip -c "$dir/rollouts.jsonl" > "$OUT/grpo-$1/rollouts.jsonl.gz" 2>/dev/null
  [ -d "$dir/tb" ] && tar czf "$OUT/grpo-$1/tb.tgz" -C "$dir" tb
}
evaluate() {  # $1 = run name, $2 = policy
  timeout $(( ${EVAL_MINUTES:-7} * 60 + 60 )) python3 -m cudaperf eval --policy "$2" --tasks "${EVAL_TASKS:-small:20}" \
    --samples 5 --turns "${EVAL_TURNS:-1}" --batch-size "${EVAL_BATCH:-64}" --max-new-tokens 1024 --summarizer template \
    --max-minutes "${EVAL_MINUTES:-7}" --out "runs/$1" 2>&1 | tee -a "$OUT/$1.log" | tail -30
  tar czf "$OUT/$1.tgz" -C runs "$1"
}
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case "$step" in
    part0)
      mkdir -p /tmp/smol && cp .device/smol/part0 /tmp/smol/part0 && ls -l /tmp/smol ;;
    check)
      python3 -c 'import torch, transformers, trl, peft, datasets, accelerate; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""); print("transformers", transformers.__version__, "trl", trl.__version__, "peft", peft.__version__, "datasets", datasets.__version__, "accelerate", accelerate.__version__)'
      python3 -c 'import tensorboard; print("tensorboard", tensorboard.__version__)' || echo "no tensorboard" ;;
    train-verifiable) join_gguf; train verifiable ;;
    train-paper) join_gguf; train paper ;;
    eval-verifiable) join_gguf; evaluate eval-grpo-verifiable "hf:$MODEL_DIR+runs/grpo-verifiable/adapter" ;;
    eval-paper) join_gguf; evaluate eval-grpo-paper "hf:$MODEL_DIR+runs/grpo-paper/adapter" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
