"""End-to-end evaluation where no GPU is visible: failures before the GPU are scored, the rest is unscored."""

from __future__ import annotations

import pytest

from cudaperf.harness.evaluate import evaluate
from cudaperf.harness.executor import Job, run_batch
from cudaperf.harness.result import FailureKind, Stage
from cudaperf.harness.store import ResultStore
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks
from tests.conftest import HAVE_GPU

pytestmark = pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU behaviour")


@pytest.fixture(scope="module")
def saxpy():
    return find_task(load_builtin_tasks(), "saxpy")


def test_no_code_is_a_scored_candidate_failure(saxpy):
    r = evaluate(saxpy, "Sorry, I can't write CUDA.")
    assert r.status == "scored" and r.stage == Stage.NONE and r.failure.kind == FailureKind.NO_CODE
    assert r.failure.attributed_to == "candidate" and r.code_sha256 is None


def test_static_rejection_is_scored(saxpy, fixtures_dir):
    r = evaluate(saxpy, (fixtures_dir / "saxpy" / "define_global.cu").read_text())
    assert r.status == "scored" and r.failure.kind == FailureKind.STATIC_CHECK
    assert any("__global__" in x for x in r.static_check_reasons)


def test_compile_error_is_scored_with_the_log(saxpy):
    r = evaluate(saxpy, "<OUTPUT_CUDA>__global__ void k() { undefined_thing; }\nvoid f() { k<<<1,1>>>(); }"
                        "</OUTPUT_CUDA>")
    assert r.status == "scored" and r.stage == Stage.CHECKED and r.failure.kind == FailureKind.COMPILE_ERROR
    assert "undefined_thing" in r.compile.log


def test_compiled_candidate_without_gpu_is_unscored_not_zero(saxpy):
    src = next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source
    r = evaluate(saxpy, src)
    assert r.stage == Stage.COMPILED and r.status == "unscored"
    assert r.failure.attributed_to == "harness" and "no NVIDIA GPU" in r.failure.message
    assert r.environment.gpu == "none visible" and r.compile.ok


def test_batch_appends_and_resumes(tmp_path, saxpy):
    store = ResultStore(tmp_path / "r.jsonl")
    jobs = [Job("saxpy", "none", "no code here"), Job("saxpy", "fast",
            next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source)]
    s1 = run_batch([saxpy], jobs, store, compile_workers=2)
    assert s1.n_skipped == 0 and len(store.read()) == 2
    s2 = run_batch([saxpy], jobs, store, compile_workers=2)
    # the scored failure is done; the unscored one (no GPU here) is tried again
    assert s2.n_skipped == 1 and len(store.read()) == 3
    with pytest.raises(ValueError, match="unknown tasks"):
        run_batch([saxpy], [Job("nope", "x", "")], store)


def test_timing_and_background_host_work_never_overlap():
    import threading
    import time

    from cudaperf.harness.quiet import HostActivity

    host = HostActivity()
    overlaps = []
    active = {"timing": 0, "background": 0}
    lock = threading.Lock()

    def work(kind: str, seconds: float) -> None:
        ctx = host.timing() if kind == "timing" else host.background()
        with ctx:
            with lock:
                active[kind] += 1
                if active["timing"] and active["background"]:
                    overlaps.append(dict(active))
            time.sleep(seconds)
            with lock:
                active[kind] -= 1

    threads = [threading.Thread(target=work, args=("timing" if i % 3 == 0 else "background", 0.01))
               for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps and host.state() == (0, 0, 0)


def test_deferred_baseline_is_timed_later_and_inputs_are_shared_read_only():
    import os

    from cudaperf.harness.run_c_function import prepare_c_function, time_baseline
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks import find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    settings = HarnessSettings(budget_ms=50, max_reps=5)
    prep = prepare_c_function(task, settings, seed=3, defer_baseline=True)
    assert prep.baseline_timing is None and len(prep.expected_timing) == settings.timing_sets
    path = prep.input_file("timing")
    assert oct(os.stat(path).st_mode & 0o777) == "0o444"
    done = time_baseline(prep, settings)
    assert done.baseline_timing is not None and done.baseline_timing.n >= settings.min_reps
    assert done.input_file("timing") == path and time_baseline(done, settings) is done


def test_batch_time_limit_leaves_the_rest_for_a_rerun(tmp_path):
    from cudaperf.harness.executor import Job, run_batch
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    jobs = [Job("saxpy", c.label, c.source) for c in builtin_candidates() if c.task_id == "saxpy"]
    s = run_batch([task], jobs, tmp_path / "r.jsonl", compile_workers=2, max_seconds=0.0)
    assert s.n_run == 0 and s.n_not_started == len(jobs)   # all compiled, none started
    s2 = run_batch([task], jobs, tmp_path / "r.jsonl", compile_workers=2)
    assert s2.n_not_started == 0 and s2.n_run == len(jobs)
