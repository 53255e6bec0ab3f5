"""GPU behaviour of the harness on real candidates (run with ``pytest -m gpu`` on a machine with a GPU)."""

from __future__ import annotations

import pytest

from cudaperf.harness.evaluate import evaluate
from cudaperf.harness.result import FailureKind, Stage
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

pytestmark = pytest.mark.gpu

SETTINGS = HarnessSettings(test_timeout_s=30, timing_timeout_s=60, budget_ms=1000)


@pytest.fixture(scope="module")
def saxpy():
    return find_task(load_builtin_tasks(), "saxpy")


@pytest.fixture(scope="module")
def prepared(saxpy):
    return prepare_c_function(saxpy, SETTINGS, seed=12345)


def _run(task, prepared, source):
    return evaluate(task, source, settings=SETTINGS, prepared=prepared)


def _bundled(task_id: str, label: str) -> str:
    return next(c for c in builtin_candidates() if c.task_id == task_id and c.label == label).source


def test_correct_candidate_is_timed_with_evidence(saxpy, prepared):
    r = _run(saxpy, prepared, _bundled("saxpy", "fast"))
    assert r.status == "scored" and r.correct and r.stage == Stage.TIMED, r.failure
    assert r.pass_fraction == 1.0 and len(r.tests) >= 5
    assert r.gpu_evidence.kernels_in_tests >= len(r.tests)
    assert r.gpu_evidence.kernels_in_timed_call >= 1 and r.gpu_evidence.kernel_ms > 0
    assert r.gpu_evidence.htod_bytes > 0 and r.gpu_evidence.dtoh_bytes > 0
    assert r.candidate_timing.n >= 5 and r.speedup is not None and r.speedup > 0
    assert r.environment.gpu != "none visible"
    # the host's state around both windows (the baseline's with the one-core calibration workloads)
    assert r.candidate_timing.host is not None and r.candidate_timing.host.timing_runs >= 1
    assert r.baseline_timing.host is not None and r.baseline_timing.host.compute_ms > 0


def test_wrong_candidate_fails_with_mismatch(saxpy, prepared):
    r = _run(saxpy, prepared, _bundled("saxpy", "wrong"))
    assert r.status == "scored" and not r.correct
    assert r.failure.kind == FailureKind.WRONG_OUTPUT and r.failure.attributed_to == "candidate"
    bad = [t for t in r.tests if not t.passed]
    assert bad and bad[0].mismatch is not None and bad[0].mismatch.index >= 0
    assert r.pass_fraction < 1 and r.speedup is None


def test_out_of_bounds_writer_is_a_cuda_error(saxpy, prepared, fixtures_dir):
    r = _run(saxpy, prepared, (fixtures_dir / "saxpy" / "oob.cu").read_text())
    assert r.status == "scored" and not r.correct
    assert r.failure.kind in (FailureKind.CUDA_ERROR, FailureKind.CRASH), r.failure


def test_host_only_candidate_gets_no_credit(saxpy, prepared, fixtures_dir):
    r = _run(saxpy, prepared, (fixtures_dir / "saxpy" / "host_only.cu").read_text())
    assert r.status == "scored" and not r.correct
    assert r.failure.kind == FailureKind.NO_GPU_WORK
    assert r.pass_fraction == 1.0  # the outputs were right; the credit is withheld
    assert r.speedup is None


def test_infinite_kernel_times_out_and_next_evaluation_is_unaffected(saxpy, prepared, fixtures_dir):
    fast = HarnessSettings(test_timeout_s=5)
    r = evaluate(saxpy, (fixtures_dir / "saxpy" / "infinite.cu").read_text(), settings=fast, prepared=prepared)
    assert r.status == "scored" and r.failure.kind == FailureKind.TIMEOUT
    after = _run(saxpy, prepared, _bundled("saxpy", "fast"))
    assert after.correct, after.failure


def test_caching_across_calls_is_caught(saxpy, prepared, fixtures_dir):
    r = _run(saxpy, prepared, (fixtures_dir / "saxpy" / "cache_outputs.cu").read_text())
    assert not r.correct and r.speedup is None
    # the traced call (one of each window's first calls) sees a cache hit copy on the host: no_gpu_work; otherwise a
    # stale output fails the hidden tests or the re-check of a timed call
    assert r.failure.kind in (FailureKind.WRONG_OUTPUT, FailureKind.TIMING_RECHECK, FailureKind.NO_GPU_WORK), r.failure


def test_side_stream_work_is_synchronized_and_counted(saxpy, prepared, fixtures_dir):
    r = _run(saxpy, prepared, (fixtures_dir / "saxpy" / "side_stream.cu").read_text())
    assert r.correct and r.stage == Stage.TIMED, r.failure


def test_slow_and_fast_speedups_come_out_in_order():
    tasks = load_builtin_tasks()
    pairs = 0
    for task_id in ("saxpy", "matmul"):
        try:
            task = find_task(tasks, task_id)
        except Exception:
            continue
        prep = prepare_c_function(task, SETTINGS, seed=7)
        fast = _run(task, prep, _bundled(task_id, "fast"))
        slow = _run(task, prep, _bundled(task_id, "slow"))
        assert fast.correct and slow.correct, (fast.failure, slow.failure)
        assert fast.speedup > slow.speedup, (task_id, fast.speedup, slow.speedup)
        pairs += 1
    assert pairs >= 1


@pytest.fixture(scope="module")
def collatz():
    return find_task(load_builtin_tasks(), "collatz_longest")


@pytest.fixture(scope="module")
def collatz_prepared(collatz):
    from cudaperf.harness.evaluate import prepare_task

    return prepare_task(collatz, SETTINGS, seed=99)


def test_c_program_correct_wrong_and_host_only(collatz, collatz_prepared, fixtures_dir):
    fast = _run(collatz, collatz_prepared, _bundled("collatz_longest", "fast"))
    assert fast.correct and fast.stage == Stage.TIMED, fast.failure
    assert fast.gpu_evidence.kernels_in_tests >= 5 and fast.speedup > 0
    wrong = _run(collatz, collatz_prepared, _bundled("collatz_longest", "wrong"))
    assert not wrong.correct and wrong.failure.kind == FailureKind.WRONG_OUTPUT
    host = _run(collatz, collatz_prepared, (fixtures_dir / "collatz_longest" / "host_only.cu").read_text())
    assert not host.correct and host.failure.kind == FailureKind.NO_GPU_WORK, host.failure
    assert host.pass_fraction == 1.0


def test_babeltower_reference_kernels_sample():
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    path = find_babeltower()
    if path is None:
        pytest.skip("BabelTower data not present")
    all_tasks = load_babeltower(path)
    # every 25th, plus 119 (needs zero-initialised host locals to reproduce its expected output)
    tasks = all_tasks[::25] + [all_tasks[119]]
    for t in tasks:
        r = evaluate(t, t.reference_kernel, settings=SETTINGS)
        assert r.status == "scored" and r.correct, (t.id, r.failure)
        _assert_validated_hidden_tests_counted(t, r)


def _assert_validated_hidden_tests_counted(t, r):
    """The result's hidden tests are the ones the reference kernel passed on the GPU, in order."""
    from cudaperf.harness.run_cuda_kernel import prepare_hidden_tests, validate_hidden_tests

    hidden = validate_hidden_tests(t, prepare_hidden_tests(t), SETTINGS, None)
    counted = [x.config["hidden"] for x in r.tests if x.config]
    assert counted == list(hidden.hows), (t.id, hidden.note)
    assert len(r.tests) == len(t.expected_outputs) + len(hidden.calls)
    return hidden


# Their C and CUDA references disagree at some rewritten sizes (wrong output, or the test program killed by
# SIGSEGV): without the GPU check of the hidden tests their own reference kernels failed.
HIDDEN_DISAGREE = ("006", "010", "012", "015", "036", "047", "060", "094", "097", "106", "107", "138", "140", "166",
                   "172", "174", "183")


def test_babeltower_reference_kernels_pass_their_validated_hidden_tests(tmp_path):
    """As a batch (compiles in parallel, the reference kernels' check programs built on the compile pool)."""
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.harness.run_cuda_kernel import prepare_hidden_tests
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    path = find_babeltower()
    if path is None:
        pytest.skip("BabelTower data not present")
    wanted = {f"babeltower-{n}" for n in HIDDEN_DISAGREE}
    tasks = [t for t in load_babeltower(path) if t.id in wanted]
    if not tasks:
        pytest.skip("none of these BabelTower tasks is in the data")
    s = run_batch(tasks, [Job(t.id, "reference", t.reference_kernel) for t in tasks], tmp_path / "r.jsonl",
                  settings=SETTINGS, gpus=[0])
    by = {r.task_id: r for r in s.results}
    assert set(by) == {t.id for t in tasks}
    n_dropped = 0
    for t in tasks:
        r = by[t.id]
        assert r.status == "scored" and r.correct, (t.id, r.failure)
        hidden = _assert_validated_hidden_tests_counted(t, r)
        n_dropped += len(prepare_hidden_tests(t).calls) - len(hidden.calls)
    assert n_dropped > 0  # the check did drop some: these are the tasks it is for


@pytest.mark.parametrize("rounds,pipelined,exclusive,overlap", [
    (3, False, False, False), (1, True, False, False), (3, False, True, False), (1, True, True, False),
    (1, False, False, True)])
def test_batch_with_grouped_candidates(tmp_path, saxpy, fixtures_dir, rounds, pipelined, exclusive, overlap):
    """A task's candidates evaluated as a group, interleaved (3 timing windows each), pipelined (one window,
    the next candidate's tests overlapping the previous one's end) or with only the judging overlapped
    (``overlap_judging``), with and without exclusive timing: wrong ones fail at their tests, a hang is cut at
    its tests' limit, the correct ones are timed in every round with the baseline, and the fast one wins."""
    from dataclasses import replace

    from cudaperf.harness.executor import Job, run_batch

    settings = replace(SETTINGS, timing_rounds=rounds, pipeline_candidates=pipelined, budget_ms=300,
                       test_timeout_s=10, exclusive_timing=exclusive, overlap_judging=overlap,
                       speedup_estimator="best_window" if rounds > 1 else "median")
    jobs = [Job("saxpy", "fast", _bundled("saxpy", "fast")), Job("saxpy", "slow", _bundled("saxpy", "slow")),
            Job("saxpy", "wrong", _bundled("saxpy", "wrong")),
            Job("saxpy", "hang", (fixtures_dir / "saxpy" / "infinite.cu").read_text()),
            Job("saxpy", "cache", (fixtures_dir / "saxpy" / "cache_outputs.cu").read_text())]
    s = run_batch([saxpy], jobs, tmp_path / "r.jsonl", settings=settings, gpus=[0])
    by = {r.candidate_id: r for r in s.results}
    assert set(by) == {j.candidate_id for j in jobs} and s.n_not_started == 0
    assert by["wrong"].failure.kind == FailureKind.WRONG_OUTPUT
    assert by["hang"].failure.kind == FailureKind.TIMEOUT and "hidden tests" in by["hang"].failure.message
    assert not by["cache"].correct
    for label in ("fast", "slow"):
        r = by[label]
        assert r.correct and r.stage == Stage.TIMED, r.failure
        assert r.candidate_timing.n >= 3 * rounds and r.candidate_timing.n >= settings.min_reps
        assert r.baseline_timing.n >= 3 * rounds and r.baseline_timing == by["fast"].baseline_timing
        assert ("3 windows" in r.environment.timing_method) == (rounds == 3)
        assert ("one timed window at a time" in r.environment.timing_method) == exclusive
        if rounds > 1:  # every window's median kept; the speedup rests on each side's fastest window
            assert len(r.candidate_timing.windows_ms) == rounds == len(r.baseline_timing.windows_ms)
            assert r.speedup == pytest.approx(r.baseline_timing.best_window_ms / r.candidate_timing.best_window_ms)
    assert by["fast"].speedup > by["slow"].speedup
    from cudaperf.harness.quiet import HOST

    assert HOST.state() == (0, 0, 0) and not HOST.exclusive  # every slot given back


def test_overlap_judging_never_runs_two_candidates(saxpy, prepared):
    """``overlap_judging``: a candidate's process starts only once the previous one's is gone (the harness's judging
    of it overlaps the next one's start and tests); ``pipeline_candidates`` (trusted candidates) lets them overlap,
    which shows that the spans can tell. Every honest candidate is timed either way."""
    from dataclasses import replace

    from cudaperf.harness.evaluate import build_candidate
    from cudaperf.harness.run_c_function import run_c_function_group

    build = build_candidate(saxpy, _bundled("saxpy", "fast"), SETTINGS)
    overlaps = {}
    for mode in ("overlap_judging", "pipeline_candidates"):
        settings = replace(SETTINGS, budget_ms=200, **{mode: True})
        outs, _ = run_c_function_group(prepared, [((i,), build) for i in range(5)], settings, 0)
        assert all(o.correct and o.stage == Stage.TIMED for _, o in outs), [o.failure for _, o in outs]
        spans = [o.process_span for _, o in outs]
        overlaps[mode] = [round(prev[1] - nxt[0], 4) for prev, nxt in zip(spans, spans[1:])]
    assert all(d <= 0 for d in overlaps["overlap_judging"]), overlaps
    assert any(d > 0 for d in overlaps["pipeline_candidates"]), overlaps


def test_overlapped_runs_time_alone_and_a_memory_hog_cannot_fail_the_next_candidate(saxpy, prepared, fixtures_dir):
    """``overlap_runs`` (a policy's samples): the next candidate's process starts beside the previous one's exit, but
    its timing window opens only once that process is gone; a correct candidate that holds nearly all the GPU's
    memory until it exits (``hostile/hog_device_memory.cu``) does not fail the honest candidate started beside it:
    a follower whose tests overlapped it and failed in a way it could cause is run again alone. Every candidate,
    hog included (it is correct), is timed."""
    from dataclasses import replace

    from cudaperf.harness.evaluate import build_candidate
    from cudaperf.harness.run_c_function import overlap_isolated, run_c_function_group

    assert overlap_isolated() is None
    settings = replace(SETTINGS, budget_ms=200, overlap_runs=True)
    hog = build_candidate(saxpy, (fixtures_dir / "hostile" / "hog_device_memory.cu").read_text(), settings)
    fast = build_candidate(saxpy, _bundled("saxpy", "fast"), settings)
    assert hog.stage == "ok" and fast.stage == "ok"
    order = ["hog", "fast"] * 4
    outs, _ = run_c_function_group(prepared, [((i, k), hog if k == "hog" else fast) for i, k in enumerate(order)],
                                   settings, 0)
    assert [k[1] for k, _ in outs] == order
    for (i, kind), o in outs:
        print(i, kind, o.correct, o.failure, o.phases_s, o.process_span, o.window_spans)
    assert all(o.correct and o.stage == Stage.TIMED for _, o in outs), [(k, o.failure) for k, o in outs]
    spans = [o.process_span for _, o in outs]
    windows = [o.window_spans for _, o in outs]
    # no window shares the GPU with another candidate's process
    for j, win in enumerate(windows):
        for a, b in win:
            assert all(e <= a or s >= b for k, (s, e) in enumerate(spans) if k != j), (j, win, spans)
    # and the processes did overlap (the start of one beside the exit of the one before)
    assert sum(1 for prev, nxt in zip(spans, spans[1:]) if nxt[0] < prev[1]) >= len(order) // 2, spans


def test_overlapped_runs_under_exclusive_timing_release_their_rechecks(saxpy, prepared):
    """``overlap_runs`` with ``exclusive_timing`` (a candidate's own host work held as background work) and re-checks
    let go one at a time: a run waiting for its re-check's turn holds no background slot, so the next window is not
    held up by it (which would wait for that window in turn); every candidate is timed, within a bounded time."""
    import threading
    from dataclasses import replace

    from cudaperf.harness.evaluate import build_candidate
    from cudaperf.harness.quiet import HOST
    from cudaperf.harness.run_c_function import run_c_function_group

    settings = replace(SETTINGS, budget_ms=200, overlap_runs=True, exclusive_timing=True, recheck_batch=1)
    fast = build_candidate(saxpy, _bundled("saxpy", "fast"), settings)
    done: dict = {}

    def group() -> None:
        with HOST.exclusive_mode(True):
            done["outs"], _ = run_c_function_group(prepared, [((i,), fast) for i in range(4)], settings, 0)

    t = threading.Thread(target=group, daemon=True)
    t.start()
    t.join(240)
    assert not t.is_alive(), "the group did not end: a held re-check and a waiting window wait for each other"
    assert all(o.correct and o.stage == Stage.TIMED for _, o in done["outs"]), [o.failure for _, o in done["outs"]]
    assert HOST.state() == (0, 0, 0)


def test_batch_with_burst_preparation_on_every_gpu(tmp_path):
    """``burst_preparation``: tasks prepared in urgent bursts (no GPU opens a new timed window meanwhile), with the
    queue refilled several times over six tasks on every visible GPU; every candidate is scored and timed in its
    3 windows as without bursts, and every slot and period is given back."""
    from dataclasses import replace

    from cudaperf.harness.environment import gpu_inventory
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.harness.quiet import HOST

    ids = ["saxpy", "dot", "heat1d", "histogram", "transpose", "sum_reduce"]
    tasks = [find_task(load_builtin_tasks(), t) for t in ids]
    jobs = [Job(t, label, _bundled(t, label)) for t in ids for label in ("fast", "slow")]
    settings = replace(SETTINGS, timing_rounds=3, pipeline_candidates=False, budget_ms=300, test_timeout_s=10,
                       speedup_estimator="best_window", burst_preparation=True)
    gpus = [g[0] for g in gpu_inventory()]
    before = HOST.urgent_started
    s = run_batch(tasks, jobs, tmp_path / "r.jsonl", settings=settings, gpus=gpus, prepare_ahead=2,
                  prepare_workers=2)
    assert len(s.results) == len(jobs) and s.n_not_started == 0
    for r in s.results:
        assert r.status == "scored" and r.correct and r.stage == Stage.TIMED, (r.task_id, r.failure)
        assert len(r.candidate_timing.windows_ms) == 3 == len(r.baseline_timing.windows_ms)
    assert HOST.urgent_started - before >= 2  # the first fill and at least one refill
    assert HOST.state() == (0, 0, 0) and HOST.urgent_periods() == 0


def test_c_program_context_check_sees_honest_programs_and_stops_a_forged_probe(collatz, fixtures_dir):
    """The driver's context list (NVML) from outside the program: the calibration sees a sandboxed program here;
    the bundled fast program is seen in every test run and credited; a host-only program that writes the probe's
    record itself (adversarial/collatz_forged_probe_runtime.cu, credited without the check) gets no_gpu_work."""
    from dataclasses import replace

    from cudaperf.harness.environment import device_for_child
    from cudaperf.harness.evaluate import prepare_task
    from cudaperf.harness.nvml import context_check_available

    ok, why = context_check_available(int(device_for_child(0)))
    assert ok, why
    s = replace(SETTINGS, c_program_context_check=True)
    prepared = prepare_task(collatz, s, seed=99)
    fast = evaluate(collatz, _bundled("collatz_longest", "fast"), settings=s, prepared=prepared, gpu_index=0)
    assert fast.correct and fast.stage == Stage.TIMED, fast.failure
    n = len(fast.tests)
    assert fast.gpu_evidence.driver_context == f"seen in {n} of {n} test runs"
    forged = (fixtures_dir / "adversarial" / "collatz_forged_probe_runtime.cu").read_text()
    r = evaluate(collatz, f"<OUTPUT_CUDA>\n{forged}</OUTPUT_CUDA>\n", settings=s, prepared=prepared, gpu_index=0)
    assert not r.correct and r.failure.kind == FailureKind.NO_GPU_WORK, r.failure
    assert "never listed a CUDA context" in r.failure.message and r.failure.attributed_to == "candidate"
