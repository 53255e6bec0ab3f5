#!/usr/bin/env bash
# Supervised warm start of the embedded model on one GPU (issue 23), sized for the device tool's 10-minute calls.
# From the repository root on the GPU machine, with OUT set to the folder whose files come back:
#
#   bash benchmarks/device_sft.sh STEP [STEP ...]
#
# Carry .whl (tree-sitter, tree-sitter-cuda, gguf, pyseccomp, and trl, datasets, dill, multiprocess for Python
# 3.12: the GPU image has torch, transformers, peft, accelerate and tensorboard but not these) in every call. The
# embedded model's GGUF (98 MB) is over one call's 64 MiB with the working tree, so it travels in parts: here
# `split -b 40000000 -d -a 1 GGUF .device/smol/part` and `sha256sum GGUF > .device/smol/sha256`; carry
# .device/smol/sha256 and one part in each call (the tree and the wheels
# leave about 41 MB of the 64 MiB) (step `parts` keeps them on the machine) while the machine
# is warm; the first step that needs the model joins them and checks the hash. Everything lives on the machine only
# while it is warm.
# Steps:
#   parts        keep the GGUF's parts carried in this call on the machine (/tmp/smol); part0 is the same step
#   check        versions of what training needs, and the GPU
#   sft-plain    cudaperf sft --objective plain into runs/sft-plain (SFT_MINUTES of training, default 6; rerun it
#                in the next call to go on from its checkpoint: it resumes when runs/sft-plain has checkpoints)
#   sft-cuset    the same with --objective cuset into runs/sft-cuset
#   sft-both     sft-plain and sft-cuset at once, as two processes on the one GPU. They share it by time-slicing:
#                each step takes about twice as long (5.6 s against 2.6 alone, session 18), so this saves only the
#                second model load; for training to convergence run sft-plain and sft-cuset one after another
#   eval-base    cudaperf eval (EVAL_STATIC=1: --static-cache; prompts built to fit EVAL_CONTEXT tokens with the answer, default 4096: the sft
#                steps' --max-length, so all three models see prompts like the training ones) of the base model (hf:MODEL, the embedded one) on EVAL_TASKS (default test:c, the test split by task) x 5
#                samples x EVAL_TURNS (default 1) turns into runs/eval-base (EVAL_MINUTES, default 7; resumable);
#                EVAL_NEW_TOKENS (default 1024) new tokens an answer, EVAL_ARGS more eval options (e.g. --no-fewshot,
#                matching an SFT run's SFT_ARGS)
#   eval-plain   the same with the plain adapter (hf:MODEL+runs/sft-plain/adapter) into runs/eval-sft-plain
#   eval-cuset   the same with the CuSeT adapter into runs/eval-sft-cuset
#   eval-base-family, eval-plain-family, eval-cuset-family
#                the same on EVAL_FAMILY_TASKS (default test-family:c, the families held out of training) into
#                runs/eval-...-family
#   compare      cudaperf compare of the evaluations there are (base, plain, CuSeT), by task and by family, as
#                Markdown into OUT/compare-task.md and OUT/compare-family.md (issue 23's table)
#   unpack       the adapters back from .device/adapters/adapter-*.tgz.* (carry that folder) for an eval on a new
#                machine
#   genprobe     benchmarks/generation_probe.py on the base model: seconds per batch of 16, 64, 128 answers
#                (GENPROBE_SIZES, default 64,256) of EVAL_TASKS' prompts, to size EVAL_BATCH (default 400: a decoding
#                step of the embedded model costs about 80 ms whatever the batch, session 17, so one chunk per task
#                set) so that a chunk ends inside EVAL_MINUTES; GENPROBE_PROFILE=1 adds torch.profiler's table,
#                GENPROBE_STATIC=1 the first size again with the static (compiled) KV cache
#   sft-speed    seconds per optimizer step of plain SFT in SPEED_STEPS (default 12) steps, side by side in one
#                call: the defaults (4 x 4 accumulated, gradient checkpointing) against one micro-batch of 16 without
#                checkpointing (SPEED_ARGS), the same 16 examples a step; OUT/sft_speed.txt
#   decode       benchmarks/decode_overhead.py: ms a decoding step of the embedded model's shape beside the same
#                depth at width 64, batches 1, 64, 256 (random weights, about a minute)
#   decode-arms  benchmarks/decode_overhead.py --arms (random weights, no model file needed): a decoding step at
#                DECODE_BATCHES (default 64,285) rows of DECODE_PROMPT (2400) tokens: generate sampled, through an
#                unmerged and a merged LoRA adapter, the project's decoder eagerly and as CUDA graphs (plain,
#                with transformers' repeated-head attention, greedy, and through the unmerged adapter); DECODE_ARMS adds
#                greedy or static (transformers' compiled static cache); OUT/decode_arms.json
# STEP+STEP+... runs those steps at once, as processes side by side on the one GPU (the model joined first), e.g.
# sft-both+eval-base+eval-base-family. The GPU time-slices between processes, so GPU-bound steps gain nothing side
# by side (session 18: two evaluations beside two trainings generated 200 answers each in 5 minutes, one alone 85 in
# 93 s); it pays only where steps wait on the CPU (compiling, judging) or for a call's last minutes.
# Each sft step returns OUT/sft-OBJECTIVE.tgz (run record, TensorBoard logs, log) and its adapter as
# OUT/adapter-OBJECTIVE.tgz.NN (15 MiB parts); each eval step OUT/RUN.tgz (its run directory, metrics and report).
set -u
. "$(dirname "$0")/device_model.sh"
sft() {  # $1 = objective
  local dir="runs/sft-$1" extra=""
  mkdir -p runs
  [ -d "$dir/checkpoints" ] && ls "$dir/checkpoints" | grep -q '^checkpoint-' && extra="--resume"
  timeout $(( ${SFT_MINUTES:-6} * 60 + 180 )) python3 -m cudaperf sft --model "$MODEL_DIR" --objective "$1" \
    --out "$dir" --max-minutes "${SFT_MINUTES:-6}" --no-eval $extra ${SFT_ARGS:-} > "$dir.log" 2>&1
  tail -12 "$dir.log"
  # returned files are few (8 a call): the run record, TensorBoard logs and log in one, then the adapter, at once
  # (15 MiB parts: a returned file is at most 16 MiB), so a later step cut by the call's limit cannot lose it;
  # `unpack` puts it back on a new machine
  tar czf "$OUT/sft-$1.tgz" -C runs "sft-$1.log" $(cd runs && ls -d "sft-$1/sft_run.json" "sft-$1/tb" 2>/dev/null)
  [ -d "$dir/adapter" ] && tar czf - -C runs "sft-$1/adapter" | split -b 15M -d - "$OUT/adapter-$1.tgz."
}
evaluate() {  # $1 = run name, $2 = policy, $3 = task set
  timeout $(( ${EVAL_MINUTES:-7} * 60 + 60 )) python3 -m cudaperf eval --policy "$2" --tasks "$3" \
    --samples 5 --turns "${EVAL_TURNS:-1}" --batch-size "${EVAL_BATCH:-400}" --max-new-tokens "${EVAL_NEW_TOKENS:-1024}" \
    --summarizer template --context-tokens "${EVAL_CONTEXT:-4096}" ${EVAL_STATIC:+--static-cache} \
    --decoder "${EVAL_DECODER:-hf}" ${EVAL_ARGS:-} \
    --max-minutes "${EVAL_MINUTES:-7}" --out "runs/$1" >> "$OUT/$1.log" 2>&1
  echo "--- $1 (rc $?)"; tail -25 "$OUT/$1.log"
  # the log goes into the run's archive (returned files are few); a run cut by the call's limit leaves it in OUT
  [ -d "runs/$1" ] && cat "$OUT/$1.log" >> "runs/$1/eval.log" && rm "$OUT/$1.log"
  tar czf "$OUT/$1.tgz" -C runs "$1"
}
run_step() {  # one step; the loop below runs steps in order, or the parts of a STEP+STEP group at once
  local step="$1"
  case "$step" in
    parts|part0) keep_parts ;;
    check) check_versions ;;
    sft-plain) join_gguf; sft plain ;;
    sft-cuset) join_gguf; sft cuset ;;
    sft-both) join_gguf; sft plain & sft cuset & wait ;;
    eval-base|eval-plain|eval-cuset|eval-base-family|eval-plain-family|eval-cuset-family)
      join_gguf
      local which=${step#eval-} tasks=${EVAL_TASKS:-test:c} policy="hf:$MODEL_DIR"
      case "$which" in *-family) tasks=${EVAL_FAMILY_TASKS:-test-family:c}; which=${which%-family} ;; esac
      [ "$which" = base ] || policy="hf:$MODEL_DIR+runs/sft-$which/adapter"
      local name="eval-${which/plain/sft-plain}"; name=${name/cuset/sft-cuset}
      case "$step" in *-family) name="$name-family" ;; esac
      evaluate "$name${EVAL_TAG:-}" "$policy" "$tasks" ;;
    sft-speed)
      join_gguf; mkdir -p runs; : > "$OUT/sft_speed.txt"
      for arm in default fast; do
        local args="" d="runs/speed-$arm"
        [ "$arm" = fast ] && args=${SPEED_ARGS:---batch-size 16 --grad-accum 1 --no-gradient-checkpointing}
        rm -rf "$d"
        timeout 240 python3 -m cudaperf sft --model "$MODEL_DIR" --objective plain --out "$d" \
          --max-steps "${SPEED_STEPS:-12}" --save-steps 1000 --no-eval $args > "$d.log" 2>&1
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3] or "(defaults)", "steps", r["global_step"], "train_wall_s", r["train_wall_s"], "s/step", round(r["train_wall_s"] / max(1, r["global_step"]), 3), "loss", r.get("final_loss"))' \
          "$d/sft_run.json" "$arm" "$args" >> "$OUT/sft_speed.txt" 2>&1 || tail -5 "$d.log" >> "$OUT/sft_speed.txt"
      done
      cat "$OUT/sft_speed.txt" ;;
    decode) timeout "${DECODE_LIMIT:-150}" python3 benchmarks/decode_overhead.py --batches 1,64,256 \
        --out "$OUT/decode_overhead.json" ;;
    decode-arms) timeout "${DECODE_LIMIT:-300}" python3 benchmarks/decode_overhead.py \
        --arms "${DECODE_ARMS:-sampled,lora,merged,loop,graph,graph-repeat,graph-greedy,lora-graph}" --batches "${DECODE_BATCHES:-64,285}" \
        --prompt-tokens "${DECODE_PROMPT:-2400}" --steps "${DECODE_STEPS:-48}" --out "$OUT/decode_arms.json" ;;
    compare)
      for split in "" -family; do
        local dirs="" labels=""
        for run in eval-base eval-sft-plain eval-sft-cuset; do
          [ -d "runs/$run$split" ] && dirs="$dirs runs/$run$split" && labels="$labels --label ${run#eval-}"
        done
        [ -n "$dirs" ] && python3 -m cudaperf compare $dirs $labels --markdown --json "$OUT/compare${split:--task}.json" \
          | tee "$OUT/compare${split:--task}.md"
      done ;;
    unpack)
      mkdir -p runs && for o in plain cuset; do
        ls .device/adapters/adapter-$o.tgz.* > /dev/null 2>&1 && cat .device/adapters/adapter-$o.tgz.* | tar xzf - -C runs
      done; ls runs/*/adapter ;;
    genprobe) join_gguf; timeout "${GENPROBE_LIMIT:-400}" python3 benchmarks/generation_probe.py --model "$MODEL_DIR" \
        --context-tokens "${EVAL_CONTEXT:-4096}" ${GENPROBE_PROFILE:+--profile "$OUT/genprofile.txt"} \
        ${GENPROBE_STATIC:+--static-cache} \
        --tasks "${EVAL_TASKS:-test:c}" --sizes "${GENPROBE_SIZES:-64,256}" --out "$OUT/genprobe.jsonl" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
}
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  if [[ "$step" == *+* ]]; then  # a group: the model is joined once, then its steps run as processes side by side
    [[ "$step" == *sft* || "$step" == *eval* || "$step" == *genprobe* ]] && join_gguf
    for part in ${step//+/ }; do ( run_step "$part" ) & done
    wait
    echo "=== group $step done $(date -u +%H:%M:%S)"
  else
    run_step "$step"
  fi
done
