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
