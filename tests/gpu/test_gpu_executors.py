"""The Ray backend on a GPU (``pytest -m gpu``): one GPU worker actor times the correct answers of two built-in tasks
and agrees with the local backend on every verdict."""

from __future__ import annotations

import pytest

from cudaperf.harness.executor import Job
from cudaperf.harness.executors import LocalExecutor, RayExecutor
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import builtin_candidates, load_builtin_tasks

pytestmark = pytest.mark.gpu

TASKS = ("saxpy", "dot")


def test_ray_gpu_worker_agrees_with_the_local_backend(tmp_path):
    ray = pytest.importorskip("ray", reason="pip install 'cudaperf[ray]'")
    tasks = [t for t in load_builtin_tasks() if t.id in TASKS]
    jobs = [Job(c.task_id, c.label, c.source) for c in builtin_candidates()
            if c.task_id in TASKS and c.label in ("fast", "slow", "wrong")]
    settings = HarnessSettings(budget_ms=300.0, max_reps=10)
    local = LocalExecutor(gpus=[0]).evaluate(tasks, jobs, tmp_path / "local.jsonl", settings=settings)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        with RayExecutor(gpus=1) as ex:
            got = ex.evaluate(tasks, jobs, tmp_path / "ray.jsonl", settings=settings)
    finally:
        ray.shutdown()

    def verdicts(results):
        return {(r.task_id, r.candidate_id): (r.status, r.correct, r.stage, r.failure.kind if r.failure else None)
                for r in results}

    assert verdicts(got.results) == verdicts(local.results)
    by = {(r.task_id, r.candidate_id): r for r in got.results}
    for t in TASKS:
        for label in ("fast", "slow"):
            r = by[(t, label)]
            assert r.status == "scored" and r.correct and r.speedup is not None and r.speedup > 0, r.failure
        assert not by[(t, "wrong")].correct
    assert got.gpus == (0,) and got.n_run == len(jobs)
    assert all(r.environment.gpu != "none visible" for r in got.results if r.stage.value in ("ran", "timed",
                                                                                             "correct"))
