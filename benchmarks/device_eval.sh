#!/usr/bin/env bash
# The evaluation loop's GPU work (issue 21), sized for the device tool's 10-minute calls. From the repository root
# on the GPU machine, with OUT set to the folder whose files come back:
#
#   bash benchmarks/device_eval.sh STEP
#
# Carry .whl (tree-sitter, tree-sitter-cuda, gguf wheels for Python 3.12) in every call. The embedded model's GGUF
# (98 MB) is over one call's 64 MiB, so it travels in two parts: carry .device/smol/part0 in one call (step
# `part0` stores it on the machine), then .device/smol/part1 in the next while the machine is warm.
# Steps (they can be chained: `bash benchmarks/device_eval.sh part0 tests oracle round`):
#   part0     keep the first half of the GGUF on the machine (/tmp/smol)
#   tests     the GPU tests of the evaluation loop (tests/gpu/test_gpu_eval.py)
#   oracle    cudaperf eval --policy oracle on small:20 x 5 samples x 1 turn (run dir runs/oracle, tarred to OUT)
#   round     benchmarks/refine_round.py: one round of 16 samples of one C task, together against one by one
#   embedded  join the GGUF halves, then cudaperf eval --policy embedded on small:20 x 5 x 3 (runs/embedded);
#             resumable: run it again in the next call to finish (EMBEDDED_MINUTES, default 7)
#   gputests  every GPU test of the project (GPU_TEST_LIMIT seconds, default 480)
#   trust     the hostile timing candidates (tests/gpu/test_gpu_trust.py), their verdicts in OUT/trust_table.jsonl
#   trustwx   the same with W^X in the sandbox (CUDAPERF_SANDBOX=+deny_exec_remap), OUT/trust_table_wx.jsonl,
#             and the evaluation loop's GPU tests under it
#   harness   tests/gpu/test_gpu_harness.py (HARNESS_TEST_LIMIT seconds, default 300)
#   oracletest  cudaperf eval --policy oracle on test:c x ORACLE_SAMPLES (default 2) x 1 turn: the dataset's own
#             measured variants through every rule of the harness (runs/oracletest, tarred to OUT)
#   text      the embedded model on the Text2CUDA tasks (issue 27): --tasks text under refine and under evolve,
#             and --tasks text-as-c, TEXT_SAMPLES (default 3) x TEXT_TURNS (default 3), TEXT_MINUTES each (default 3)
set -u
: "${OUT:?set OUT to the output folder}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export CUDAPERF_CACHE=/tmp/cpcache
for step in "$@"; do
  echo "=== $step $(date -u +%H:%M:%S)"
  case "$step" in
    part0)
      mkdir -p /tmp/smol && cp .device/smol/part0 /tmp/smol/part0 && ls -l /tmp/smol ;;
    tests)
      timeout 300 python3 -m pytest -q -m gpu tests/gpu/test_gpu_eval.py 2>&1 | tee "$OUT/gpu_eval_tests.log" | tail -15 ;;
    oracle)
      timeout 420 python3 -m cudaperf eval --policy oracle --tasks small:20 --samples 5 --turns 1 \
        --summarizer template --out runs/oracle 2>&1 | tee "$OUT/oracle.log" | tail -25
      tar czf "$OUT/oracle_run.tgz" runs/oracle ;;
    round)
      timeout 300 python3 benchmarks/refine_round.py --out "$OUT/round" 2>&1 | tee "$OUT/round.log" | tail -5 ;;
    embedded)
      if [ ! -f /tmp/smol/model.gguf ]; then
        cat /tmp/smol/part0 .device/smol/part1 > /tmp/smol/model.gguf || exit 1
      fi
      echo "sha256 $(sha256sum /tmp/smol/model.gguf | cut -c1-16) (expected $(cut -c1-16 .device/smol/sha256))"
      export CUDAPERF_EMBEDDED_GGUF=/tmp/smol/model.gguf
      timeout $(( ${EMBEDDED_MINUTES:-7} * 60 + 60 )) python3 -m cudaperf eval --policy embedded --tasks small:20 \
        --samples 5 --turns 3 --batch-size 100 --max-new-tokens 1024 --max-minutes "${EMBEDDED_MINUTES:-7}" \
        --out runs/embedded 2>&1 | tee -a "$OUT/embedded.log" | tail -30
      tar czf "$OUT/embedded_run.tgz" runs/embedded ;;
    gputests)
      timeout "${GPU_TEST_LIMIT:-480}" python3 -m pytest -q -m gpu tests/gpu 2>&1 | tee "$OUT/gpu_tests.log" | tail -25 ;;
    trust)
      CUDAPERF_TRUST_TABLE="$OUT/trust_table.jsonl" timeout "${TRUST_LIMIT:-300}" python3 -m pytest -q -m gpu tests/gpu/test_gpu_trust.py \
        2>&1 | tee "$OUT/trust_tests.log" | tail -15 ;;
    trustwx)
      CUDAPERF_SANDBOX=+deny_exec_remap CUDAPERF_TRUST_TABLE="$OUT/trust_table_wx.jsonl" timeout "${TRUST_LIMIT:-300}" \
        python3 -m pytest -q -m gpu tests/gpu/test_gpu_trust.py tests/gpu/test_gpu_eval.py 2>&1 \
        | tee "$OUT/trust_wx_tests.log" | tail -15 ;;
    harness)
      timeout "${HARNESS_TEST_LIMIT:-300}" python3 -m pytest -q -m gpu tests/gpu/test_gpu_harness.py 2>&1 \
        | tee "$OUT/gpu_harness.log" | tail -15 ;;
    oracletest)
      timeout "${ORACLE_LIMIT:-420}" python3 -m cudaperf eval --policy oracle --tasks test:c \
        --samples "${ORACLE_SAMPLES:-2}" --turns 1 --summarizer template --out runs/oracletest 2>&1 \
        | tee "$OUT/oracletest.log" | tail -25
      python3 -m cudaperf report runs/oracletest > "$OUT/oracletest_report.log" 2>&1
      tar czf "$OUT/oracletest_run.tgz" runs/oracletest ;;
    text)
      if [ ! -f /tmp/smol/model.gguf ]; then cat /tmp/smol/part0 .device/smol/part1 > /tmp/smol/model.gguf || exit 1; fi
      export CUDAPERF_EMBEDDED_GGUF=/tmp/smol/model.gguf
      for run in "text refine" "text evolve" "text-as-c refine"; do
        read -r tset strat <<< "$run"
        timeout $(( ${TEXT_MINUTES:-3} * 60 + 60 )) python3 -m cudaperf eval --policy embedded --tasks "$tset" --strategy "$strat" \
          --samples "${TEXT_SAMPLES:-3}" --turns "${TEXT_TURNS:-3}" --batch-size 64 --max-new-tokens 1024 \
          --summarizer template --max-minutes "${TEXT_MINUTES:-3}" --out "runs/$tset-$strat" 2>&1 | tee -a "$OUT/text.log" | tail -20
        tar czf "$OUT/$tset-$strat.tgz" -C runs "$tset-$strat"
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
