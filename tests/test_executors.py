"""The executor interface and its backends on the CPU: local compile-only against Ray (a real local Ray cluster),
worker deaths (restart, retry, then unscored), the GPU path's plumbing on a Ray node that declares a GPU it does not
have, and make_executor's specs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cudaperf.harness.records import code_sha256
from cudaperf.harness.executor import Job
from cudaperf.harness.executors import (
    COMPILE_ONLY_MESSAGE,
    CompileOnlyExecutor,
    ExecutorError,
    Fault,
    LocalExecutor,
    RayExecutor,
    make_executor,
)
from cudaperf.harness.result import FailureKind, Stage
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks import builtin_candidates, load_builtin_tasks
from cudaperf.tasks.load import builtin_dir

FAST = (builtin_dir("c_functions") / "saxpy" / "fast.cu").read_text(encoding="utf-8")
DOT = (builtin_dir("c_functions") / "dot" / "fast.cu").read_text(encoding="utf-8")
COMPILE_ERROR = FAST.replace("blockIdx.x", "blockIdx.q", 1)
REJECTED = "#include <stdio.h>\nvoid saxpy(int n, float a, const float* x, float* y) { }\n"  # no __global__
NO_CODE = "I cannot help with that."

JOBS = [Job("saxpy", "fast", FAST), Job("saxpy", "compile_error", COMPILE_ERROR),
        Job("saxpy", "rejected", REJECTED), Job("saxpy", "no_code", NO_CODE), Job("dot", "fast", DOT)]
EXPECTED = {  # (status, stage, failure kind)
    ("saxpy", "fast"): ("unscored", Stage.COMPILED, FailureKind.HARNESS),
    ("saxpy", "compile_error"): ("scored", Stage.CHECKED, FailureKind.COMPILE_ERROR),
    ("saxpy", "rejected"): ("scored", Stage.EXTRACTED, FailureKind.STATIC_CHECK),
    ("saxpy", "no_code"): ("scored", Stage.NONE, FailureKind.NO_CODE),
    ("dot", "fast"): ("unscored", Stage.COMPILED, FailureKind.HARNESS),
}


def verdicts(results):
    """What must agree between backends: everything but the time stamps, durations and cache hits."""
    out = {}
    for r in results:
        f = r.failure
        out[(r.task_id, r.candidate_id)] = (r.status, r.stage, f.kind if f else None, f.attributed_to if f else None,
                                            r.code_sha256, r.correct, r.static_check_reasons,
                                            r.compile.ok if r.compile else None,
                                            r.compile.flags if r.compile else None,
                                            f.message.splitlines()[0][:60] if f else None)
    return out


@pytest.fixture(scope="module")
def tasks():
    want = {"saxpy", "dot"}
    return [t for t in load_builtin_tasks() if t.id in want]


@pytest.fixture(scope="module")
def local_compile_only(tasks, tmp_path_factory):
    store = ResultStore(tmp_path_factory.mktemp("local") / "r.jsonl")
    summary = CompileOnlyExecutor(compile_workers=2).evaluate(tasks, JOBS, store)
    return summary, store


@pytest.fixture(scope="module")
def _ray_module():
    ray = pytest.importorskip("ray", reason="pip install 'cudaperf[ray]'")
    yield ray
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def ray_cluster(_ray_module):
    """A local Ray of two CPUs and no GPU (started once; the GPU-path test starts its own)."""
    ray = _ray_module
    if not ray.is_initialized():
        ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return ray


def test_local_compile_only_verdicts(local_compile_only):
    summary, store = local_compile_only
    got = {k: v[:3] for k, v in verdicts(summary.results).items()}
    assert got == EXPECTED
    fast = store.latest()[("saxpy", "fast")]
    assert fast.failure.message == COMPILE_ONLY_MESSAGE and fast.failure.attributed_to == "harness"
    assert summary.n_compiled == 3 and summary.n_run == 0  # fast x2 and the compile error went through nvcc


def test_compile_only_does_not_judge_again(tasks, local_compile_only):
    summary, store = local_compile_only
    n = len(store.read())
    again = CompileOnlyExecutor().evaluate(tasks, JOBS, store)
    assert again.n_skipped == len(JOBS) and not again.results and len(store.read()) == n


def test_ray_compile_only_equals_local(tasks, local_compile_only, ray_cluster, tmp_path):
    summary, _ = local_compile_only
    store = ResultStore(tmp_path / "ray.jsonl")
    with RayExecutor(compile_only=True) as ex:
        got = ex.evaluate(tasks, JOBS, store)
    assert ray_cluster.is_initialized()  # a Ray the caller started stays up
    assert verdicts(got.results) == verdicts(summary.results)
    assert verdicts(store.read()) == verdicts(summary.results)
    assert got.n_compiled == summary.n_compiled and got.n_jobs == len(JOBS)


def test_a_dying_worker_is_restarted_and_its_job_retried(tasks, local_compile_only, ray_cluster, tmp_path):
    summary, _ = local_compile_only
    fault = Fault(task_id="dot", times=1, marker_dir=str(tmp_path / "faults"), stage="compile")
    store = ResultStore(tmp_path / "ray.jsonl")
    with RayExecutor(compile_only=True, compile_workers=1, fault=fault, max_retries=2) as ex:
        got = ex.evaluate(tasks, JOBS, store)
        assert ex.restarts_seen >= 1  # (a call queued behind the fatal one on a loaded host fails too, and is retried)
    assert len(list((tmp_path / "faults").glob("died-*"))) == 1  # the worker did die once
    assert verdicts(got.results) == verdicts(summary.results)  # and the one actor, restarted, finished the batch


def test_a_worker_that_keeps_dying_leaves_its_job_unscored(tasks, ray_cluster, tmp_path):
    fault = Fault(task_id="dot", times=100, marker_dir=str(tmp_path / "faults"), stage="compile")
    store = ResultStore(tmp_path / "ray.jsonl")
    with RayExecutor(compile_only=True, compile_workers=1, fault=fault, max_retries=1) as ex:
        got = ex.evaluate(tasks, JOBS, store)
        assert ex.restarts_seen >= 2  # the first attempt and one retry
    by = {(r.task_id, r.candidate_id): r for r in got.results}
    assert set(by) == set(EXPECTED)
    lost = by[("dot", "fast")]
    assert lost.status == "unscored" and lost.failure.kind == FailureKind.HARNESS
    assert lost.failure.attributed_to == "harness" and "died 2 times" in lost.failure.message
    assert lost.code_sha256 == code_sha256(DOT)  # the candidate's own code, so that a rerun's store check passes
    assert {k: (r.status, r.stage, r.failure.kind) for k, r in by.items() if k != ("dot", "fast")} == \
        {k: v for k, v in EXPECTED.items() if k != ("dot", "fast")}
    # a later run without the fault judges it (an unscored harness failure is retried)
    with RayExecutor(compile_only=True, compile_workers=1) as ex:
        again = ex.evaluate(tasks, JOBS, store)
    assert [(r.task_id, r.candidate_id) for r in again.results] == [("dot", "fast")]
    assert again.results[0].failure.message == COMPILE_ONLY_MESSAGE


def test_the_gpu_path_on_a_node_that_declares_a_gpu(tasks, _ray_module, tmp_path):
    """Compile on a CPU worker, carry the build to the GPU worker, run the local pool's code there: without a real
    GPU each compiled candidate ends as the local pool's "no usable GPU" (unscored), identically."""
    ray = _ray_module
    if ray.is_initialized():
        ray.shutdown()
    settings = HarnessSettings(time_candidates=False)
    jobs = [j for j in JOBS if j.task_id == "saxpy"] + [Job("saxpy", "slow", next(
        c.source for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "slow"))]
    local = LocalExecutor(gpus=[0], compile_workers=2).evaluate(tasks, jobs, tmp_path / "local.jsonl",
                                                                settings=settings)
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with RayExecutor() as ex:
            got = ex.evaluate(tasks, jobs, tmp_path / "ray.jsonl", settings=settings)
    finally:
        ray.shutdown()
    assert verdicts(got.results) == verdicts(local.results)
    fast = {r.candidate_id: r for r in got.results}["fast"]
    # overlap_runs (the default) groups a task's candidates: each one's process finds no GPU, unscored
    assert fast.status == "unscored" and fast.stage == Stage.COMPILED and "no usable GPU" in fast.failure.message
    assert fast.compile is not None and fast.compile.seconds == fast.durations_s["compile_s"]
    assert got.gpus == (0,) and got.n_run == 2


def test_evaluator_takes_an_executor(tasks, tmp_path):
    from cudaperf.env.evaluator import Evaluator

    ev = Evaluator(tasks, tmp_path / "r.jsonl", executor="compile-only")
    assert ev.compile_only and ev.executor.name == "compile-only"
    res = ev.evaluate([("saxpy", "a", FAST), ("saxpy", "b", COMPILE_ERROR)])
    assert [r.failure.kind for r in res] == [FailureKind.HARNESS, FailureKind.COMPILE_ERROR]
    assert Evaluator(tasks, tmp_path / "r.jsonl", compile_only=True).evaluate([("saxpy", "a", FAST)])[0] == res[0]


# ------------------------------------------------------------------------------------------------- specs

def test_make_executor_specs():
    assert isinstance(make_executor("local"), LocalExecutor)
    assert isinstance(make_executor(None), LocalExecutor)
    assert isinstance(make_executor("compile-only"), CompileOnlyExecutor)
    assert isinstance(make_executor("local", compile_only=True), CompileOnlyExecutor)  # --compile-only's alias
    ex = make_executor("local", gpus=[1], compile_workers=3)
    assert ex.gpus == [1] and ex.compile_workers == 3
    pytest.importorskip("ray")
    r = make_executor("ray://head.example:10001", compile_only=True, max_retries=5)
    assert isinstance(r, RayExecutor) and r.address == "ray://head.example:10001" and r.compile_only
    assert r.max_retries == 5 and r.name == "ray:compile-only"
    assert make_executor("ray:auto").address == "auto" and make_executor("ray").address is None
    assert make_executor("ray", gpus=[0, 1]).n_gpus == 2
    same = CompileOnlyExecutor()
    assert make_executor(same, compile_only=True) is same


@pytest.mark.parametrize("spec, words", [
    ("gpu", "unknown executor 'gpu'"),
    ("remote", "unknown executor"),
    ("ray:", "'ray', 'ray:auto' or 'ray://HOST:PORT'"),
    ("ray:cluster", "'ray', 'ray:auto' or 'ray://HOST:PORT'"),
    ("ray://head", "ray://HOST:PORT"),
    ("ray://head:port", "ray://HOST:PORT"),
    ("ray://:10001", "ray://HOST:PORT"),
    ("ray://head:70000", "ray://HOST:PORT"),
])
def test_make_executor_errors(spec, words):
    with pytest.raises(ExecutorError, match=None) as info:
        make_executor(spec)
    assert words in str(info.value)


def test_a_local_executor_is_not_compile_only():
    with pytest.raises(ExecutorError, match="not compile-only"):
        make_executor(LocalExecutor(), compile_only=True)


def test_missing_ray_is_named(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(ExecutorError, match=r"pip install 'cudaperf\[ray\]'"):
        make_executor("ray")


def test_ray_without_gpus_refuses_a_full_run(tasks, ray_cluster, tmp_path):
    with RayExecutor() as ex, pytest.raises(ExecutorError, match="no GPU"):
        ex.evaluate(tasks, JOBS[:1], tmp_path / "r.jsonl")
    assert ray_cluster.is_initialized()


def test_jobs_are_validated_by_every_backend(tasks, tmp_path):
    for ex in (CompileOnlyExecutor(),):
        with pytest.raises(ValueError, match="unknown tasks"):
            ex.evaluate(tasks, [Job("nope", "a", FAST)], tmp_path / "r.jsonl")
        with pytest.raises(ValueError, match="share"):
            ex.evaluate(tasks, [JOBS[0], replace(JOBS[0])], tmp_path / "r.jsonl")


# ------------------------------------------------------------------------------------------------- the CLI

def test_cli_executor_option(tmp_path):
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app

    runner = CliRunner()
    bad = runner.invoke(app, ["eval", "--executor", "gpu", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "unknown executor 'gpu'" in " ".join(bad.output.split())
    assert not (tmp_path / "bad").exists()
    bad_ds = runner.invoke(app, ["dataset", "measure", "--executor", "ray://nowhere"])
    assert bad_ds.exit_code == 2 and "ray://HOST:PORT" in " ".join(bad_ds.output.split())
    run = tmp_path / "run"
    ok = runner.invoke(app, ["eval", "--executor", "compile-only", "--policy", "oracle", "--tasks", "small",
                             "--limit", "1", "--samples", "1", "--turns", "1", "--summarizer", "template",
                             "--no-fewshot", "--no-report", "--out", str(run)])
    assert ok.exit_code == 0, ok.output[-2000:]
    header = json.loads((run / "run.json").read_text())
    assert header["compile_only"] is True and header["settings"]["executor"] == "compile-only"
    assert header["settings"]["overlap_runs"] is True  # the harness setting the run judged with, recorded
    (res,) = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert res["failure"]["message"] == COMPILE_ONLY_MESSAGE  # the oracle's answer compiled, and was not run
    # --compile-only is the same run: it resumes the directory, judging nothing again
    again = runner.invoke(app, ["eval", "--compile-only", "--policy", "oracle", "--tasks", "small", "--limit", "1",
                                "--samples", "1", "--turns", "1", "--summarizer", "template", "--no-fewshot",
                                "--no-report", "--no-overlap-runs", "--out", str(run)])
    assert again.exit_code == 0, again.output[-2000:]
    assert len((run / "results.jsonl").read_text().splitlines()) == 1


def test_batch_command_takes_an_executor(tmp_path):
    """``cudaperf batch --executor``: compile-only judges the bundled candidates without running them (final for
    that executor, so a rerun on the store skips them all); a bad spec is refused before any work."""
    from typer.testing import CliRunner

    from cudaperf.cli import app

    runner = CliRunner()

    import json

    saxpy = [c for c in builtin_candidates() if c.task_id == "saxpy"][:2]
    completions = tmp_path / "c.jsonl"
    completions.write_text("".join(json.dumps({"task_id": c.task_id, "candidate_id": c.label,
                                               "completion": f"<OUTPUT_CUDA>{c.source}</OUTPUT_CUDA>"}) + "\n"
                                   for c in saxpy) + json.dumps({"task_id": "saxpy", "candidate_id": "prose",
                                                                  "completion": "no code here"}) + "\n")
    store = tmp_path / "b.jsonl"
    args = ["batch", "--tasks", "builtin", "--completions", str(completions), "--store", str(store),
            "--executor", "compile-only", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    results = {r.candidate_id: r for r in ResultStore(store).read()}
    assert set(results) == {c.label for c in saxpy} | {"prose"}
    for c in saxpy:  # compiled, not run: unscored, final for a compile-only executor
        assert results[c.label].status == "unscored" and results[c.label].compile.ok
    assert results["prose"].status == "scored" and not results["prose"].correct  # no code: the candidate's failure
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and len(ResultStore(store).read()) == 3
    bad = runner.invoke(app, ["batch", "--store", str(tmp_path / "x.jsonl"), "--executor", "gpu"])
    assert bad.exit_code != 0 and "unknown executor" in bad.output and not (tmp_path / "x.jsonl").exists()
