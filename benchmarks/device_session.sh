#!/usr/bin/env bash
# One step of the GPU work that the open issues still need, sized for the device tool's 10-minute calls.
# Run from the repository root on the GPU machine, with OUT set to the folder whose files come back:
#
#   bash benchmarks/device_session.sh STEP
#
# Steps, in the order to run them (each fits one call; every log and store lands in $OUT):
#   tests-all     on a two-GPU machine: tests-torch on GPU 0 and tests-harness on GPU 1, side by side
#                 (BabelTower's test reads $CUDAPERF_BABELTOWER when the data is carried)
#   tests-torch   GPU tests of the PyTorch side (fast path, adversarial candidates, families through measure) and
#                 of the reward's TRL functions (a C and a PyTorch task, with a ranker trained there)
#   tests-harness GPU tests of the C harness, the profile tier and external candidates added to the dataset
#   tests-dataset GPU test of `dataset add-candidates --measure` alone (a minute or two)
#   measure-pt    the dataset's PyTorch problems (families pt_*), 7 minutes at most (RUNNERS=N: runners per GPU)
#   remeasure-pt  the PyTorch problems measured before, again (a new run), 7 minutes at most
#   pt-both       measure-pt for PT_MINUTES (default 5), then remeasure-pt in what is left of 9 minutes
#   measure-c     more C tasks, held-out ones first, 7 minutes at most
#   remeasure     a 10 % re-measure (reproducibility within one machine), 7 minutes at most
#   build-bench   the fast path against load_inline on the same five kernels
#   repro-c       a 10 % re-measure of the C tasks, twice in one lease (runs -a and -b; 2 minutes each at most);
#                 with CUDA_VISIBLE_DEVICES=0 and RUN_TAG=1gpu, the same on one GPU: no other worker beside it
#   repro-ab      repro-c on one GPU (runs ...-1gpu-a/-b), then on two (...-a/-b): is the baseline's drift the
#                 second worker's doing? (about 8 minutes)
#   tests-then-measure  tests-harness (TEST_LIMIT, default 330 s), then measure-c for the rest of 570 s
#   host-variance the baseline's drift on a quiet machine: free, pinned, huge pages (benchmarks/host_variance.py);
#                 HV_SPREAD=1 HV_ROUNDS=8 HV_ARMS=free: a task's windows minutes apart (does the fastest repeat?)
#   repro-x       repro-c on two GPUs with --exclusive-timing (runs ...-excl-a/-b), for the same question;
#                 REPRO_EXTRA adds measure options to repro-c (e.g. "--timing-rounds 5")
#   profile-features  ncu counters for the ranker's profile tier (held-out and training tasks in turn),
#                 PROFILE_MINUTES (default 8); carry .device/features_profile.parquet to go on from a previous call
#   repro-pool    repro-c as runs ...-pool-a1 b1 a2 b2 (PARTS), alternating, about 7 minutes: does pooling a
#                 side's runs minutes apart (benchmarks/reproducibility_stat.py --pooled) bring the sides closer?
#                 The whole 10 % sample takes about 3.6 minutes a run on two GPUs: PARTS="a1 b1"
#                 REPRO_MINUTES=3.6 in one call, then PARTS="a2 b2" with the same STAMP in the next
#   burst-ab      the 10 % C sample four times, alternating --no-burst-preparation (runs ...-burst-a1, a2) and
#                 --burst-preparation (...-burst-b1, b2), REPRO_MINUTES each (default 1.8): rates side by side in the
#                 logs, and benchmarks/reproducibility_stat.py --pooled over a1 b1 a2 b2 for whether the speedups agree
#   measure-c-ab  unmeasured C tasks in chunks of CHUNK_MINUTES (default 3.5), one run per part of PARTS (default
#                 "p1 b1"): p* with --no-burst-preparation, b* with --burst-preparation, so that every minute adds
#                 coverage and the two settings' rates and GPU timelines (benchmarks/gpu_timeline.py) stand side by
#                 side; other names (PARTS="m1 m2") take measure's defaults. Each chunk's store is kept in
#                 .device/stores (left on the machine between calls of one lease) and ingested at the start of the
#                 next call, so that the next chunk goes on to new tasks
#   repro-extend  grows the 10 % C sample with the dataset: session 10's sample (the tasks of run SAMPLE_BASE,
#                 default 20261130-s10-repro-c-pool-a1) stays, and runs ...-ext-e1, -e2 (PARTS) re-measure the tasks
#                 drawn to bring it to 10 % of the C tasks (--extend-sample), REPRO_MINUTES each (default 3.6);
#                 six runs in all give those tasks pooled labels like the rest of the sample (`dataset stats`)
#   labels-c      the C labels that rest on fewer than BELOW_RUNS (default 3) windowed runs, measured again in
#                 measure-c-ab's chunks (PARTS, default "l1 l2"; CHUNK_MINUTES), stores kept and ingested the same way
#   final         tests-all with build-bench beside it (TEST_LIMIT seconds per half, default 480)
#   trust-load    benchmarks/load_run.py (issue 22): the clean batch, then the load (1,800 honest dataset variants of
#                 100 tasks, reused as distinct copies past the pool (LOAD_ARGS, default --max-tasks 100), with
#                 the adversarial suite twice, shuffled; eval's timing: --budget-ms 500 --max-reps 30),
#                 LOAD_MINUTES (default 8) a call; the stores stay in
#                 .device/load on the machine, so the next call of the lease goes on (a new machine: carry
#                 .device/load back, unpacked from load_stores.tgz); summary.json, progress.json and load_stores.tgz to $OUT.
#                 Carry .whl (pyseccomp for the sandbox) and .device/bt (BabelTower, for the suite's cuda_kernel entries)
#   kb-sample     benchmarks/kernelbench_sample.py on a KernelBench checkout carried as .device/kb (its KernelBench
#                 folder): all of levels 1-3 loaded, correct candidates through the largest level-1 problems
#                 (KB_PROBLEMS, default the script's sample of six)
#   bt-full       benchmarks/harness_batch.py: BabelTower's 233 reference kernels against their validated hidden
#                 tests (carry .device/bt)
#   overlap-bench benchmarks/refine_round.py: 16 samples of one C task through the executor, with and without
#                 HarnessSettings.overlap_judging, alternating REPEATS (default 3) times, side by side
#   tests-s21     session 21's GPU work: the adversarial entries it added (library-computing ModelNew files past the
#                 static checks; host threads through std::thread, async, thrd_create, a host callback) and the
#                 timed ones (their window_cpu_cores in the table), the trust test of max_window_cpu_cores, and the
#                 grouped-batch cases session 20's call did not reach
#   tests-s22     session 21's CPU-only changes on a GPU (a user id per run, the three-pointer exec pin, the object
#                 checks): the sandbox and trust GPU tests, the forged-records test in its new form, the adversarial
#                 entries of the object checks and of the PyTorch run-time boundary; then trust-load for LOAD_MINUTES
#                 (default 4) in what is left of the call
#   prebuild      session 22's PyTorch start-up work (HarnessSettings.prebuild_modelnew, prestart_runners): their
#                 GPU tests, then benchmarks/modelnew_prebuild.py (PREBUILD_CANDIDATES, default 4, in each arm of
#                 PREBUILD_ARMS, default KernelBench's procedure, built ahead with runners started ahead, built ahead;
#                 add in_run, about a minute a candidate, for the old path), side by side
#   startup       benchmarks/runner_startup.py: a PyTorch runner's start-up (torch's import, the CUDA context, the
#                 profiler's first session) plainly, sandboxed, with one protection off at a time, and forked
#   c-speed       issue 25's C path: the GPU tests of HarnessSettings.overlap_runs, then benchmarks/c_throughput.py
#                 (16 samples of each of C_TASKS, default 4, held-out C tasks; arms C_ARMS, default serial,
#                 overlap_judging, overlap_runs, side by side)
#   verify-s24    session 24's CPU-side changes on a GPU (the driver's mapped inputs and pooled buffers, the probe's
#                 clock for CUPTI, overlap_runs' batched re-checks), the harness and trust GPU tests and the
#                 adversarial entries they touch (TEST_LIMIT, ADV_LIMIT)
#   speed-load    c_throughput.py's arms (C_ARMS, default serial,overlap_runs; overlap_runs_5 times with the paper's
#                 five runs; C_ARGS more of its flags) without c-speed's GPU tests, then
#                 trust-load (LOAD_ARGS) until LIMIT seconds from the call's start
#   verify-s26    sessions 25-26's PyTorch changes on a GPU (outputs compared there, runners started ahead, a
#                 ModelNew built ahead with the precompiled header, builds started before a batch's C tasks), the
#                 pinned-buffer adversarial entries, then tests/gpu/test_gpu_harness.py in the rest of LIMIT
#   newfam        issue 28's new families (NEWFAM) on a GPU before they enter the shipped dataset: N_TASKS each, built
#                 into a dataset of their own and measured; each candidate's verdict to $OUT/newfam_verdicts.txt
#   torch-pch     benchmarks/torch_pch.py --cuda (REPEATS, default 1): load_inline builds of the ReLU ModelNew's
#                 extension with and without the precompiled torch/extension.h, side by side
#   startup-seccomp  the startup step with the wheels installed (the sandbox's seccomp filter in force)
#   zygote        HarnessSettings.pytorch_zygote (session 30) on a GPU: runner_startup.py's plain, sandbox and
#                 sandbox_zygote (REPEATS, default 3), the zygote's and the quick exit's GPU tests (the same
#                 verdicts forked and exec'd; HarnessSettings.pytorch_quick_exit),
#                 then with CUDAPERF_PYTORCH_ZYGOTE=1 (every runner forked) the PyTorch GPU tests (TEST_LIMIT,
#                 default 200 s) and the adversarial suite's PyTorch entries (ADV_LIMIT, default 240 s)
#   zygote-bench  modelnew_prebuild.py's ZYGOTE_ARMS (default kernelbench_procedure,prebuild_prestart,
#                 prebuild_prestart_zygote,prebuild_prestart_zygote_quick) side by side, PREBUILD_CANDIDATES (default 4) each, in LIMIT
#   tests-s20     the GPU tests written in session 20: device memory left between runs, overlap_judging's process
#                 spans and its batch case, the adversarial entries session 20 added or changed (hangs at exit,
#                 host work beside useless kernels: the input rule) and the trust tests
# Then, on the CPU machine: `cudaperf dataset ingest STORE.jsonl.gz ...`, in run order (runs named after their stores).
set -u
step=${1:?usage: device_session.sh STEP (see the header)}
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
load_run() {  # benchmarks/load_run.py for $2 minutes within $1 seconds; stores kept in .device/load, copied to $OUT
  mkdir -p .device/load
  timeout "$1" python benchmarks/load_run.py --out .device/load \
    --max-minutes "$2" ${LOAD_ARGS:---max-tasks 100} > "$OUT/load_run.log" 2>&1
  echo "rc=$?" >> "$OUT/load_run.log"; tail -c 2500 "$OUT/load_run.log"
  cp .device/load/summary.json .device/load/progress.json "$OUT/" 2>/dev/null
  tar czf "$OUT/load_stores.tgz" -C .device $(cd .device && ls load/clean.jsonl load/load.jsonl \
    load/clean_again.jsonl load/progress.json 2>/dev/null)
}
stamp=${STAMP:-$(date -u +%Y%m%d-%H%M)}  # run ids carry the minute: two sessions of one day do not collide
export STAMP=$stamp
case "$step" in
  tests-all)
    nvidia-smi -L > "$OUT/smi.txt" 2>&1
    CUDA_VISIBLE_DEVICES=0 bash "$0" tests-torch > "$OUT/tests_torch.tail" 2>&1 &
    CUDA_VISIBLE_DEVICES=1 bash "$0" tests-harness > "$OUT/tests_harness.tail" 2>&1 &
    wait; cat "$OUT/tests_torch.tail" "$OUT/tests_harness.tail" ;;
  final)
    CUDA_VISIBLE_DEVICES=1 bash "$0" build-bench > "$OUT/build_bench.tail" 2>&1 &
    bash "$0" tests-all; wait; cat "$OUT/build_bench.tail" ;;
  repro-ab)
    CUDA_VISIBLE_DEVICES=0 RUN_TAG=1gpu REPRO_MINUTES=2.5 bash "$0" repro-c
    REPRO_MINUTES=1.5 bash "$0" repro-c ;;
  tests-then-measure)
    # The harness GPU tests, then measure-c for what is left of the call's 570 s.
    t0=$(date +%s); TEST_LIMIT=${TEST_LIMIT:-330} bash "$0" tests-harness
    left=$(( 570 - ($(date +%s) - t0) ))
    if [ "$left" -gt 120 ]; then MINUTES=$(python -c "print(($left - 60) / 60)") LIMIT=$left bash "$0" measure-c; fi ;;
  host-variance)
    # No GPU work: does the baseline drift on a quiet machine, and does pinning it to one core stop that?
    timeout "${HV_LIMIT:-240}" python benchmarks/host_variance.py --rounds "${HV_ROUNDS:-3}" ${HV_ARMS:+--arms $HV_ARMS} ${HV_SPREAD:+--spread} \
      --out "$OUT/host_variance.json" > "$OUT/host_variance.log" 2>&1
    echo "rc=$?" >> "$OUT/host_variance.log"; tail -c 1500 "$OUT/host_variance.log" ;;
  repro-x)
    EXCL=1 RUN_TAG=excl REPRO_MINUTES=2.5 bash "$0" repro-c ;;
  profile-features)
    # Nsight Compute counters of the measured valid candidates (the ranker's profile tier), tasks of the held-out
    # and training parts in turn, PROFILE_MINUTES (default 8) at most; resumes from a carried
    # .device/features_profile.parquet. Then, on the CPU: copy it into the dataset and `ranker eval --profile`.
    [ -f .device/features_profile.parquet ] && cp .device/features_profile.parquet cudaperf/data/dataset/
    timeout "${LIMIT:-570}" python -m cudaperf.cli dataset features --tier profile --order splits-in-turn \
      --max-minutes "${PROFILE_MINUTES:-8}" > "$OUT/profile_features.log" 2>&1
    echo "rc=$?" >> "$OUT/profile_features.log"; tail -c 800 "$OUT/profile_features.log"
    cp cudaperf/data/dataset/features_profile.parquet "$OUT/" 2>/dev/null ;;
  repro-pool)
    # Runs a1 b1 a2 b2 (PARTS) of the 10 % C sample, alternating, each cut at REPRO_MINUTES (default 1.5); then
    # on the CPU: benchmarks/reproducibility_stat.py --pooled over the stores, in the order they ran.
    PARTS=${PARTS:-a1 b1 a2 b2} RUN_TAG=${RUN_TAG:-pool} REPRO_MINUTES=${REPRO_MINUTES:-1.5} bash "$0" repro-c ;;
  burst-ab)
    for part in ${PARTS:-a1 b1 a2 b2}; do
      case "$part" in b*) extra="--burst-preparation" ;; *) extra="--no-burst-preparation" ;; esac
      PARTS=$part RUN_TAG=burst REPRO_MINUTES=${REPRO_MINUTES:-1.8} REPRO_EXTRA="$extra" bash "$0" repro-c
    done ;;
  measure-c-ab)
    mkdir -p .device/stores
    # earlier calls' chunks (the tree's dataset came fresh with this call), each run named after its store
    ls .device/stores/*.jsonl > /dev/null 2>&1 && python -m cudaperf.cli dataset ingest .device/stores/*.jsonl \
      ${DATASET:+--dataset "$DATASET"} 2>&1 | tail -1
    for part in ${PARTS:-p1 b1}; do
      case "$part" in b*) extra="--burst-preparation" ;; p*) extra="--no-burst-preparation" ;; *) extra="" ;; esac
      extra="$extra ${CHUNK_EXTRA:-}"
      run=$stamp-${CHUNK_NAME:-measure-c}-$part
      RUN=$run MINUTES=${CHUNK_MINUTES:-3.5} EXTRA="$extra" \
        LIMIT=$(python -c "print(int(${CHUNK_MINUTES:-3.5} * 60 + 90))") bash "$0" measure-c
      zcat "$OUT/$run.jsonl.gz" > ".device/stores/$run.jsonl"
    done ;;
  labels-c)
    # C labels toward BELOW_RUNS (default 3) pooled runs: measure-c-ab's chunks (PARTS, default "l1 l2"), each
    # `measure --remeasure --below-runs N` over the C families, ingested before the next so that it selects anew
    c_families=$(python -c 'from cudaperf.dataset.build import torch_family_names as t
from cudaperf.dataset.families import all_families as a; print(",".join(sorted(set(a()) - set(t()))))')
    PARTS=${PARTS:-l1 l2} CHUNK_NAME=labels-c \
      CHUNK_EXTRA="--remeasure --below-runs ${BELOW_RUNS:-3} --families $c_families" bash "$0" measure-c-ab ;;
  repro-extend)
    RUN_TAG=${RUN_TAG:-ext} PARTS=${PARTS:-e1 e2} REPRO_MINUTES=${REPRO_MINUTES:-3.6} \
      REPRO_EXTRA="--extend-sample ${SAMPLE_BASE:-20261130-s10-repro-c-pool-a1}" bash "$0" repro-c ;;
  repro-c)
    c_families=$(python -c 'from cudaperf.dataset.build import torch_family_names as t
from cudaperf.dataset.families import all_families as a; print(",".join(sorted(set(a()) - set(t()))))')
    for part in ${PARTS:-a b}; do
      RUN=$stamp-repro-c${RUN_TAG:+-$RUN_TAG}-$part MINUTES=${REPRO_MINUTES:-2} \
        LIMIT=$(python -c "print(max(240, int(${REPRO_MINUTES:-2} * 60 + 90)))") \
        EXTRA="--families $c_families${EXCL:+ --exclusive-timing}${REPRO_EXTRA:+ $REPRO_EXTRA}" \
        bash "$0" remeasure
    done ;;
  tests-dataset)
    timeout "${TEST_LIMIT:-300}" python -m pytest -v -m gpu tests/gpu/test_gpu_dataset.py -p no:cacheprovider \
      --durations=0 > "$OUT/gpu_tests_dataset.log" 2>&1
    echo "rc=$?" >> "$OUT/gpu_tests_dataset.log"; tail -3 "$OUT/gpu_tests_dataset.log" ;;
  tests-torch)
    timeout "${TEST_LIMIT:-560}" python -m pytest -v -m gpu tests/gpu/test_gpu_torch_fast.py tests/gpu/test_gpu_pytorch_fast.py tests/gpu/test_gpu_reward.py \
      -p no:cacheprovider --durations=0 > "$OUT/gpu_tests_torch.log" 2>&1
    echo "rc=$?" >> "$OUT/gpu_tests_torch.log"; tail -3 "$OUT/gpu_tests_torch.log" ;;
  tests-harness)
    timeout "${TEST_LIMIT:-560}" python -m pytest -v -m gpu tests/gpu/test_gpu_harness.py tests/gpu/test_gpu_profile.py \
      tests/gpu/test_gpu_dataset.py \
      -p no:cacheprovider --durations=0 > "$OUT/gpu_tests_harness.log" 2>&1
    echo "rc=$?" >> "$OUT/gpu_tests_harness.log"; tail -3 "$OUT/gpu_tests_harness.log" ;;
  pt-both)
    # The re-measure reads a copy of the dataset as it was before: the first part's rows are ingested on the way.
    t0=$(date +%s); rm -rf /tmp/dataset_before; cp -r cudaperf/data/dataset /tmp/dataset_before
    MINUTES=${PT_MINUTES:-5} LIMIT=400 bash "$0" measure-pt
    left=$(( 540 - ($(date +%s) - t0) ))
    DATASET=/tmp/dataset_before MINUTES=$(python -c "print(max(0.5, ($left - 75) / 60))") LIMIT=$left \
      bash "$0" remeasure-pt ;;
  measure-pt|remeasure-pt|measure-c|remeasure)
    pt_families=$(python -c 'from cudaperf.dataset.build import torch_family_names as f; print(",".join(sorted(f())))')
    case "$step" in
      measure-pt) args=(--families "$pt_families") ;;
      remeasure-pt) args=(--remeasure --families "$pt_families") ;;
      measure-c) args=(--held-out-first) ;;
      remeasure) args=(--remeasure --sample 0.1) ;;
    esac
    run="${RUN:-$stamp-$step}"  # RUN=ID with STORE=... resumes an earlier run
    [ -n "${RUNNERS:-}" ] && args+=(--pytorch-runners "$RUNNERS")
    [ -n "${DATASET:-}" ] && args+=(--dataset "$DATASET")
    [ -n "${EXTRA:-}" ] && read -r -a extra <<< "$EXTRA" && args+=("${extra[@]}")
    # Resume: STORE=path/to/an/earlier/store.jsonl (carried) continues that run instead of starting a new one.
    store="${STORE:-$OUT/$run.jsonl}"
    timeout "${LIMIT:-570}" python -m cudaperf.cli dataset measure "${args[@]}" --store "$store" --run-id "$run" \
      --max-minutes "${MINUTES:-7}" > "$OUT/$run.log" 2>&1
    echo "rc=$?" >> "$OUT/$run.log"; tail -c 800 "$OUT/$run.log"
    [ "$store" != "$OUT/$run.jsonl" ] && cp "$store" "$OUT/$run.jsonl"; gzip -f "$OUT/$run.jsonl" ;;
  startup)
    # Where a PyTorch runner's start-up goes: plain, sandboxed, sandboxed with one protection off, forked
    timeout "${LIMIT:-400}" python benchmarks/runner_startup.py --out "$OUT/startup" --repeats "${REPEATS:-2}" \
      > "$OUT/startup.log" 2>&1; echo "rc=$?" >> "$OUT/startup.log"; tail -c 3000 "$OUT/startup.log" ;;
  trust-load|speed-load|torch-pch|kb-sample|bt-full|overlap-bench|tests-s20|tests-s21|tests-s22|prebuild|c-speed|startup-seccomp|verify-s24|verify-s26|newfam|zygote|zygote-bench)
    if ls .whl/*.whl > /dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl > /tmp/pip.log 2>&1 || { cat /tmp/pip.log; exit 1; }
      export PYTHONPATH=/tmp/site:$PWD
    fi
    [ -d .device/bt ] && export CUDAPERF_BABELTOWER=$PWD/.device/bt
    case "$step" in
      trust-load)
        load_run "${LIMIT:-570}" "${LOAD_MINUTES:-8}" ;;
      speed-load)
        t0=$SECONDS
        nvidia-smi --query-gpu=name,clocks.sm,memory.used,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
        timeout "${SPEED_LIMIT:-330}" python benchmarks/c_throughput.py --out "$OUT/c_speed" --tasks "${C_TASKS:-4}" \
          --arms "${C_ARMS:-serial,overlap_runs}" --repeats "${REPEATS:-1}" ${C_ARGS:-} > "$OUT/c_speed.log" 2>&1
        echo "rc=$?" >> "$OUT/c_speed.log"; tail -c 2500 "$OUT/c_speed.log"; gzip -f "$OUT"/c_speed/store_*.jsonl
        left=$(( ${LIMIT:-570} - (SECONDS - t0) ))
        [ "$left" -gt 90 ] && load_run "$left" "$(( (left - 45) / 60 ))" ;;
      torch-pch)
        timeout "${LIMIT:-560}" python benchmarks/torch_pch.py --out "$OUT/pch" --cuda --repeats "${REPEATS:-1}" \
          > "$OUT/torch_pch.log" 2>&1; echo "rc=$?" >> "$OUT/torch_pch.log"; tail -c 2000 "$OUT/torch_pch.log"
        rm -rf "$OUT/pch/work" ;;
      kb-sample)
        [ -d .device/kb/level1 ] || { echo "carry a KernelBench checkout's KernelBench folder as .device/kb"; exit 2; }
        timeout "${LIMIT:-570}" python benchmarks/kernelbench_sample.py --kernelbench .device/kb --out "$OUT/kb" \
          ${KB_PROBLEMS:+--problems "$KB_PROBLEMS"} > "$OUT/kb_sample.log" 2>&1
        echo "rc=$?" >> "$OUT/kb_sample.log"; tail -c 3000 "$OUT/kb_sample.log" ;;
      overlap-bench)
        timeout "${LIMIT:-400}" python benchmarks/refine_round.py --out "$OUT/overlap" --arms round,overlap \
          --repeats "${REPEATS:-3}" > "$OUT/overlap_bench.log" 2>&1
        echo "rc=$?" >> "$OUT/overlap_bench.log"; tail -c 1500 "$OUT/overlap_bench.log" ;;
      prebuild)
        timeout "${TEST_LIMIT:-240}" python -m pytest -v -s -m gpu \
          "tests/gpu/test_gpu_pytorch_fast.py::test_a_modelnew_built_ahead_runs_without_building_again" \
          "tests/gpu/test_gpu_pytorch_fast.py::test_prestarted_runners_keep_every_verdict" \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_prebuild.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_prebuild.log"; tail -c 1500 "$OUT/gpu_prebuild.log"
        timeout "${LIMIT:-330}" python benchmarks/modelnew_prebuild.py --out "$OUT/prebuild" \
          --candidates "${PREBUILD_CANDIDATES:-4}" --arms "${PREBUILD_ARMS:-kernelbench_procedure,prebuild_prestart,prebuild}" \
          > "$OUT/prebuild_bench.log" 2>&1
        echo "rc=$?" >> "$OUT/prebuild_bench.log"; tail -c 2000 "$OUT/prebuild_bench.log"
        rm -rf "$OUT"/prebuild/cache-* "$OUT"/prebuild/kb-* ;;
      c-speed)
        nvidia-smi --query-gpu=name,clocks.sm,memory.used,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
        timeout "${TEST_LIMIT:-150}" python -m pytest -v -s -m gpu \
          "tests/gpu/test_gpu_harness.py::test_overlapped_runs_time_alone_and_a_memory_hog_cannot_fail_the_next_candidate" \
          "tests/gpu/test_gpu_harness.py::test_overlap_judging_never_runs_two_candidates" \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_overlap.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_overlap.log"; tail -c 2500 "$OUT/gpu_overlap.log"
        timeout "${LIMIT:-400}" python benchmarks/c_throughput.py --out "$OUT/c_speed" --tasks "${C_TASKS:-4}" \
          --arms "${C_ARMS:-serial,overlap_judging,overlap_runs}" --repeats "${REPEATS:-1}" ${C_ARGS:-} \
          > "$OUT/c_speed.log" 2>&1
        echo "rc=$?" >> "$OUT/c_speed.log"; tail -c 2500 "$OUT/c_speed.log"; gzip -f "$OUT"/c_speed/store_*.jsonl ;;
      verify-s24)
        # session 24's CPU-side changes on a GPU: the driver's mapped inputs and pooled buffers (every C run), the
        # probe's own clock for CUPTI, overlap_runs' batched re-checks (with exclusive timing too); then the
        # adversarial entries they touch and the trust tests
        nvidia-smi --query-gpu=name,clocks.sm,memory.used,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
        timeout "${TEST_LIMIT:-300}" python -m pytest -v -m gpu tests/gpu/test_gpu_harness.py tests/gpu/test_gpu_trust.py \
          -k "overlap or correct_candidate or wrong_candidate or caching or trust or timed or forged" \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_verify_s24.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_verify_s24.log"; tail -c 2500 "$OUT/gpu_verify_s24.log"
        CUDAPERF_ADVERSARIAL_TABLE=$OUT/adv_s24.jsonl timeout "${ADV_LIMIT:-240}" python -m pytest -v -m gpu \
          tests/gpu/test_gpu_adversarial.py -p no:cacheprovider --durations=0 \
          -k "clock_rewrite or pin_across or token or cache or forged or side_stream or host_final or spin" \
          > "$OUT/gpu_adv_s24.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_adv_s24.log"; tail -c 1500 "$OUT/gpu_adv_s24.log" ;;
      verify-s26)
        # sessions 25 and 26's CPU-side PyTorch changes on a GPU: outputs compared on the GPU, runners started ahead
        # (TurnLock), a ModelNew built ahead with the precompiled header, builds started before a batch's C tasks and
        # candidates run as their builds end; then the adversarial entries of pinned buffers kept across calls, then
        # the rest of the harness GPU tests under overlap_runs (the default since session 25), TEST_LIMIT in all
        nvidia-smi --query-gpu=name,clocks.sm,memory.used,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
        t0=$SECONDS
        timeout "${TEST_LIMIT:-330}" python -m pytest -v -p no:cacheprovider --durations=0 \
          "tests/test_pytorch_reference.py::test_verdicts_are_the_same_wherever_compared" \
          tests/gpu/test_gpu_pytorch_fast.py tests/test_torch_fast.py \
          -k "wherever_compared or prestarted or built_ahead or beside_c_tasks or builds_started_ahead or correct_candidate or wrong_and_in_place" \
          > "$OUT/gpu_verify_s26.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_verify_s26.log"; tail -c 2500 "$OUT/gpu_verify_s26.log"
        CUDAPERF_ADVERSARIAL_TABLE=$OUT/adv_s26.jsonl timeout "${ADV_LIMIT:-120}" python -m pytest -v -m gpu \
          tests/gpu/test_gpu_adversarial.py -p no:cacheprovider --durations=0 \
          -k "pin_across or pinned_left or cache_by_address" > "$OUT/gpu_adv_s26.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_adv_s26.log"; tail -c 1500 "$OUT/gpu_adv_s26.log"
        left=$(( ${LIMIT:-570} - (SECONDS - t0) ))
        [ "$left" -gt 60 ] && { timeout "$left" python -m pytest -v -m gpu tests/gpu/test_gpu_harness.py \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_harness_s26.log" 2>&1
          echo "rc=$?" >> "$OUT/gpu_harness_s26.log"; tail -c 1500 "$OUT/gpu_harness_s26.log"; } ;;
      newfam)
        # issue 28's new families on a GPU before they enter the shipped dataset: N_TASKS (default 4) tasks of each of
        # NEWFAM built into a dataset of their own (no GPU needed), then measured (MEASURE_MINUTES, default 7); the
        # store and every candidate's verdict back in $OUT (newfam.jsonl.gz, newfam_verdicts.txt). Resumable: the
        # dataset and its store stay in .device/newds (built again only when NEWFAM or N_TASKS change), so a later
        # call on the warm machine (or one that carries .device/newds) measures what is left
        NEWFAM=${NEWFAM:-edit_distance_batch,knapsack_dp,newton_roots,pagerank_csr,kmeans_step,attention_rows,sorted_search,counting_sort,topk_rows,radix_sort_lsd,life_automaton,integral_image,bf16_matvec,int8_dequant_gemv,bf16_layer_stats,sssp_bellman_ford,label_prop_components,spmm_csr_dense,bitonic_sort_rows,merge_sorted_pairs,hash_build_probe,unique_sorted_count,lcs_length_batch,viterbi_decode,floyd_warshall_small,histogram_equalize,triangle_count_csr,cross_entropy_rows,batchnorm_train_forward,conv2d_relu_maxpool,pt_gelu_mlp,pt_group_norm,pt_scaled_dot_attention,pt_rms_norm,pt_l2_normalize_rows,pt_batch_norm_eval,pt_cross_entropy_loss,pt_masked_softmax,pt_embedding_bag_mean,pt_swiglu_mlp,pt_conv1d_causal,pt_rotary_embedding,pt_transpose_scale,pt_upsample_bilinear,pt_pixel_shuffle,pt_index_add_rows,pt_topk_rows,pt_histc_bins,pt_bmm_batched,pt_conv2d_bias_relu,pt_half_linear}
        t0=$SECONDS; want="$NEWFAM ${N_TASKS:-4}"
        if [ "$(cat .device/newds/.newfam 2>/dev/null)" != "$want" ]; then
          rm -rf .device/newds
          python -m cudaperf dataset build -d .device/newds --families "$NEWFAM" --n-tasks "${N_TASKS:-4}" \
            > "$OUT/newfam_build.log" 2>&1 || { tail -c 2000 "$OUT/newfam_build.log"; exit 1; }
          echo "$want" > .device/newds/.newfam
        fi
        timeout $(( ${LIMIT:-570} - (SECONDS - t0) - 20 )) python -m cudaperf dataset measure -d .device/newds \
          --store .device/newds/newfam.jsonl --run-id newfam --max-minutes "${MEASURE_MINUTES:-7}" \
          > "$OUT/newfam_measure.log" 2>&1
        echo "rc=$?" >> "$OUT/newfam_measure.log"; tail -c 1500 "$OUT/newfam_measure.log"
        python - .device/newds/newfam.jsonl > "$OUT/newfam_verdicts.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    f = r.get("failure") or {}
    print(r["task_id"] + "/" + r["candidate_id"], r["status"], "correct" if r["correct"] else f.get("kind"), r.get("speedup"),
          (f.get("message") or "")[:160].replace("\n", " "))
PY
        tail -n 40 "$OUT/newfam_verdicts.txt"; gzip -c .device/newds/newfam.jsonl > "$OUT/newfam.jsonl.gz" ;;
      zygote)
        timeout 200 python benchmarks/runner_startup.py --out "$OUT/startup" --repeats "${REPEATS:-3}" \
          --arms plain,sandbox,sandbox_zygote > "$OUT/startup.log" 2>&1; echo "rc=$?" >> "$OUT/startup.log"
        tail -c 1200 "$OUT/startup.log"
        timeout 200 python -m pytest -q -s -m gpu \
          "tests/gpu/test_gpu_pytorch_fast.py::test_runners_forked_from_the_zygote_keep_every_verdict" \
          "tests/gpu/test_gpu_pytorch_fast.py::test_a_quick_exit_ends_runners_without_their_exit_code_and_keeps_the_verdicts" \
          -p no:cacheprovider > "$OUT/gpu_zygote.log" 2>&1; echo "rc=$?" >> "$OUT/gpu_zygote.log"
        CUDAPERF_PYTORCH_ZYGOTE=1 timeout "${TEST_LIMIT:-200}" python -m pytest -q -m gpu \
          tests/gpu/test_gpu_pytorch_fast.py tests/gpu/test_gpu_torch_fast.py -p no:cacheprovider --durations=5 \
          >> "$OUT/gpu_zygote.log" 2>&1; echo "rc=$?" >> "$OUT/gpu_zygote.log"
        CUDAPERF_PYTORCH_ZYGOTE=1 timeout "${ADV_LIMIT:-240}" python -m pytest -v -m gpu \
          tests/gpu/test_gpu_adversarial.py -k "torch_fast or fast_ or modelnew_" -p no:cacheprovider \
          >> "$OUT/gpu_zygote.log" 2>&1; echo "rc=$?" >> "$OUT/gpu_zygote.log"
        grep -E "passed|failed|FAILED|error|rc=" "$OUT/gpu_zygote.log" | tail -12 ;;
      zygote-bench)
        timeout "${LIMIT:-560}" python benchmarks/modelnew_prebuild.py --out "$OUT/prebuild" \
          --candidates "${PREBUILD_CANDIDATES:-4}" \
          --arms "${ZYGOTE_ARMS:-kernelbench_procedure,prebuild_prestart,prebuild_prestart_zygote,prebuild_prestart_zygote_quick}" \
          > "$OUT/prebuild_bench.log" 2>&1
        echo "rc=$?" >> "$OUT/prebuild_bench.log"; tail -c 2000 "$OUT/prebuild_bench.log"
        rm -rf "$OUT"/prebuild/cache-* "$OUT"/prebuild/kb-* ;;
      startup-seccomp)
        timeout "${LIMIT:-400}" python benchmarks/runner_startup.py --out "$OUT/startup" --repeats "${REPEATS:-2}" \
          > "$OUT/startup.log" 2>&1; echo "rc=$?" >> "$OUT/startup.log"; tail -c 3000 "$OUT/startup.log" ;;
      tests-s22)
        nvidia-smi --query-gpu=name,clocks.sm,memory.used,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
        timeout "${TEST_LIMIT:-240}" python -m pytest -v -m gpu tests/gpu/test_gpu_sandbox.py tests/gpu/test_gpu_trust.py \
          "tests/gpu/test_gpu_pytorch_fast.py::test_records_rewritten_at_the_runners_exit_are_never_read" \
          tests/gpu/test_gpu_adversarial.py \
          -k "test_gpu_sandbox or test_gpu_trust or rewritten_at_the_runners_exit or gnu_constructor or init_array or ifunc or forged or namespace_alias or fp32_precision_tf32 or side_stream or clock_rewrite_runtime or host_final" \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_tests_s22.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_tests_s22.log"; tail -c 2500 "$OUT/gpu_tests_s22.log"
        load_run "${LIMIT:-300}" "${LOAD_MINUTES:-4}" ;;
      tests-s21)
        CUDAPERF_ADVERSARIAL_TABLE=$OUT/adv_s21.jsonl timeout "${ADV_LIMIT:-270}" python -m pytest -v -m gpu \
          tests/gpu/test_gpu_adversarial.py -p no:cacheprovider --durations=0 \
          -k "namespace_alias or cuda_torch_matmul or broadcast_sum or fp32_precision_tf32 or mandelbrot or side_stream or clock_rewrite_runtime or host_final or host_merge" \
          > "$OUT/gpu_adv_s21.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_adv_s21.log"; tail -c 1200 "$OUT/gpu_adv_s21.log"
        CUDAPERF_TRUST_TABLE=$OUT/trust_s21.jsonl timeout "${TRUST_LIMIT:-120}" python -m pytest -v -m gpu \
          tests/gpu/test_gpu_trust.py -k "host_threads or honest" -p no:cacheprovider --durations=0 \
          > "$OUT/gpu_trust_s21.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_trust_s21.log"; tail -c 800 "$OUT/gpu_trust_s21.log"
        timeout "${GROUP_LIMIT:-150}" python -m pytest -v -m gpu "tests/gpu/test_gpu_harness.py::test_batch_with_grouped_candidates" \
          -k "not 3-False-False-False and not 1-True-False-False" -p no:cacheprovider --durations=0 \
          > "$OUT/gpu_grouped_s21.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_grouped_s21.log"; tail -c 800 "$OUT/gpu_grouped_s21.log" ;;
      tests-s20)
        timeout "${TEST_LIMIT:-400}" python -m pytest -v -m gpu tests/gpu/test_gpu_sandbox.py \
          "tests/gpu/test_gpu_harness.py::test_overlap_judging_never_runs_two_candidates" \
          "tests/gpu/test_gpu_harness.py::test_batch_with_grouped_candidates" \
          tests/gpu/test_gpu_trust.py "tests/gpu/test_gpu_adversarial.py" \
          -k "sandbox or overlap or grouped or destructor or token or spin or host_final or host_merge or atexit or trust" \
          -p no:cacheprovider --durations=0 > "$OUT/gpu_tests_s20.log" 2>&1
        echo "rc=$?" >> "$OUT/gpu_tests_s20.log"; tail -c 2500 "$OUT/gpu_tests_s20.log" ;;
      bt-full)
        timeout "${LIMIT:-570}" python benchmarks/harness_batch.py --out /tmp/bt --skip-bundled \
          --babeltower .device/bt --budget-ms 300 > "$OUT/bt_full.log" 2>&1
        echo "rc=$?" >> "$OUT/bt_full.log"; tail -c 3000 "$OUT/bt_full.log"; cp /tmp/bt/summary.json "$OUT/bt_summary.json" ;;
    esac ;;
  build-bench)
    timeout 560 python benchmarks/torch_build.py --out "$OUT/torch_build.json" --repeats 1 > "$OUT/torch_build.log" 2>&1
    echo "rc=$?" >> "$OUT/torch_build.log"; tail -3 "$OUT/torch_build.log" ;;
  *) echo "unknown step $step (see the header)"; exit 2 ;;
esac
