"""A task's C-function candidates in turn (``run_c_function_group`` with one timing window each): with
``overlap_judging`` the next candidate starts only once the previous one's process is gone (no two candidate
processes ever exist at once), the harness judging the previous one meanwhile; with ``overlap_runs`` it starts once
the previous one is released, beside its exit (a run that overlapped and failed in a way the other process could
cause is redone alone: ``tests/gpu/test_gpu_harness.py``); either way a harness fault of one candidate is
that candidate's unscored result and the others go on. Real builds and real sandboxed processes; without a GPU each
run ends at the driver's CUDA check (a harness fault recorded as the candidate's outcome, not raised)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cudaperf.harness.evaluate import build_candidate, evaluate_c_function_group
from cudaperf.harness.run_c_function import CFunctionOutcome, prepare_c_function, run_c_function_group
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

SETTINGS = HarnessSettings(test_timeout_s=20, timing_timeout_s=20, overlap_judging=True)
MODES = [{"overlap_judging": True}, {"overlap_judging": False, "overlap_runs": True}]


@pytest.fixture(scope="module")
def saxpy():
    task = find_task(load_builtin_tasks(), "saxpy")
    builds = {}
    for c in builtin_candidates():
        if c.task_id == "saxpy" and c.label in ("fast", "slow", "wrong"):
            b = build_candidate(task, c.source, SETTINGS)
            assert b.stage == "ok", b.info.log[-1000:]
            builds[c.label] = (c.source, b)
    return task, prepare_c_function(task, SETTINGS, seed=3, defer_baseline=True), builds


@pytest.mark.parametrize("mode", MODES)
def test_candidates_in_turn_each_get_their_own_outcome_in_order(saxpy, mode):
    """Here every run ends at the driver's CUDA check, before it could wait for timing, so whether processes
    overlap is shown on the GPU (``tests/gpu/test_gpu_harness.py::test_overlap_judging_never_runs_two_candidates``)."""
    task, prepared, builds = saxpy
    items = [(label, *builds[label]) for label in ("fast", "slow", "wrong", "fast")]
    outs, _ = run_c_function_group(prepared, [((cid, code, b), b) for cid, code, b in items],
                                   replace(SETTINGS, **mode), 0)
    assert [k[0] for k, _ in outs] == ["fast", "slow", "wrong", "fast"]
    for _, out in outs:
        assert isinstance(out, CFunctionOutcome) and out.process_span is not None, out
        assert out.process_span[0] < out.process_span[1]


@pytest.mark.parametrize("mode", MODES)
def test_a_harness_fault_of_one_candidate_is_its_unscored_result_only(saxpy, tmp_path, mode):
    task, prepared, builds = saxpy
    settings = replace(SETTINGS, **mode)
    code, good = builds["fast"]
    gone = replace(good, exe=tmp_path / "evicted-from-the-cache")  # its build vanished: the harness's fault
    items = [("a", code, good), ("b", code, gone), ("c", code, good)]
    outs, _ = run_c_function_group(prepared, [((cid, c, b), b) for cid, c, b in items], settings, 0)
    assert [k[0] for k, _ in outs] == ["a", "b", "c"]
    assert isinstance(outs[1][1], OSError)
    assert isinstance(outs[0][1], CFunctionOutcome) and isinstance(outs[2][1], CFunctionOutcome)
    results = evaluate_c_function_group(task, items, prepared, settings, 0)
    assert [r.candidate_id for r in results] == ["a", "b", "c"]
    b = results[1]
    assert b.status == "unscored" and b.failure.attributed_to == "harness" and "evicted-from-the-cache" in \
        b.failure.message
    assert not Path(gone.exe).exists()



def test_recheck_gate_lets_rechecks_go_in_batches_then_all():
    """``overlap_runs`` holds each re-check (a reference run no window may share) until a batch of them waits,
    then lets that batch go side by side; once the task's windows are done every re-check goes, later ones too."""
    import threading
    import time

    from cudaperf.harness.run_c_function import RecheckGate

    gate = RecheckGate(3)
    passed: list[int] = []

    def waiter(i: int) -> None:
        gate.wait()
        passed.append(i)

    def start(i: int) -> threading.Thread:
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        return t

    def settle(n_waiting: int) -> None:
        deadline = time.monotonic() + 10
        while gate._waiting < n_waiting and time.monotonic() < deadline:
            time.sleep(0.01)

    first = [start(i) for i in range(2)]
    settle(2)
    assert not gate.release_if_full() and passed == []  # two of a batch of three: they wait
    first.append(start(2))
    settle(3)
    assert gate.release_if_full()
    for t in first:
        t.join(5)
    assert sorted(passed) == [0, 1, 2]
    late = start(3)
    settle(1)
    assert sorted(passed) == [0, 1, 2] and late.is_alive()  # the fourth waits for a batch, or the end
    gate.open()
    late.join(5)
    after = start(4)
    after.join(5)
    assert sorted(passed) == [0, 1, 2, 3, 4]
    assert not late.is_alive() and not after.is_alive()


@pytest.mark.parametrize("together", [pytest.param(False, marks=pytest.mark.slow), True])
def test_interleaved_rounds_start_a_tasks_processes_together_or_one_by_one(saxpy, together):
    """``timing_rounds`` above 1 with the CPU build of the driver as every candidate (real sandboxed processes
    through the tests, three windows each and the close): each gets its outcome, timed in every round; one by one,
    a process starts only once the one before has reported its tests; with ``start_together`` they start at once."""
    task, _, _ = saxpy
    settings = replace(SETTINGS, overlap_judging=False, timing_rounds=3, budget_ms=30, max_reps=6,
                       start_together=together, require_gpu_evidence=False)  # no probe in the CPU build
    prepared = prepare_c_function(task, settings, seed=5)
    from cudaperf.harness.compile import BuildOutcome
    from cudaperf.harness.result import CompileInfo

    build = BuildOutcome(exe=prepared.reference_exe, stage="ok", info=CompileInfo(
        ok=True, compiler="gcc", flags=(), arch="cpu", toolchain="", log="", cached=False, seconds=0.0))
    outs, after = run_c_function_group(prepared, [(k, build) for k in "abc"], settings, None)
    assert [k for k, _ in outs] == list("abc")
    for _, out in outs:
        assert isinstance(out, CFunctionOutcome) and out.correct and out.failure is None, out
        assert len(out.window_spans) == 3
    assert len(after.baseline_timing.samples_ms) > len(prepared.baseline_timing.samples_ms)
    spans = [(out.process_span[0], out.phases_s["setup_s"] + out.phases_s["tests_s"]) for _, out in outs]
    reported = [start + took for start, took in spans]
    starts = [start for start, _ in spans]
    if together:
        assert max(starts) < min(reported), (starts, reported)
    else:
        assert all(starts[i + 1] >= reported[i] for i in range(2)), (starts, reported)
