"""Hostile C candidates against the timing's defences, on a GPU: a clock rewritten in the candidate's process,
outputs cached by sampled inputs, host work behind a token kernel, outputs through mapped memory.

With ``CUDAPERF_TRUST_TABLE=PATH`` the verdicts are also written there as JSON lines (the adversarial table)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cudaperf.harness.evaluate import evaluate
from cudaperf.harness.result import FailureKind, Stage
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

pytestmark = pytest.mark.gpu

SETTINGS = HarnessSettings(test_timeout_s=60, timing_timeout_s=120, budget_ms=1000)
TRUST = Path(__file__).resolve().parents[1] / "fixtures" / "trust"


@pytest.fixture(scope="module")
def saxpy():
    return find_task(load_builtin_tasks(), "saxpy")


@pytest.fixture(scope="module")
def prepared(saxpy):
    return prepare_c_function(saxpy, SETTINGS, seed=2468)


@pytest.fixture(scope="module")
def honest(saxpy, prepared):
    src = next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source
    r = _run(saxpy, prepared, "honest fast.cu", src)
    assert r.correct and r.stage == Stage.TIMED and r.speedup, r.failure
    return r


def _run(task, prepared, name: str, source: str):
    r = evaluate(task, source, settings=SETTINGS, prepared=prepared)
    table = os.environ.get("CUDAPERF_TRUST_TABLE")
    if table:
        ev = r.gpu_evidence
        with open(table, "a") as fh:
            fh.write(json.dumps({
                "candidate": name, "task": task.id, "status": r.status, "stage": r.stage.value,
                "correct": r.correct, "speedup": r.speedup,
                "failure": r.failure.kind.value if r.failure else None,
                "reason": r.failure.message[:300] if r.failure else None,
                "sandbox": r.environment.sandbox_level if r.environment else None,
                "output_bytes_min_fraction": ev.output_bytes_min_fraction if ev else None,
                "kernel_share": ev.kernel_share if ev else None, "gpu_share": ev.gpu_share if ev else None,
                "timer_check": ev.timer_check if ev else None}) + "\n")
    return r


def _fixture(saxpy, prepared, name):
    return _run(saxpy, prepared, name, (TRUST / name).read_text())


def test_honest_candidate_keeps_its_credit_and_records_the_evidence(honest):
    ev = honest.gpu_evidence
    assert ev.output_bytes_min_fraction is not None and ev.output_bytes_min_fraction >= 1.0
    assert ev.input_bytes_min_fraction is not None and ev.input_bytes_min_fraction >= 1.0
    assert ev.timer_check and ev.timer_check.startswith("span/clock ")
    assert ev.call_ms and ev.call_ms > 0 and 0 < ev.kernel_share <= 1 and 0 < ev.gpu_share


def test_a_rewritten_clock_gains_nothing(saxpy, prepared, honest):
    """The driver reads the clock by system call: the rewrite of the C library's clock_gettime does not reach it,
    and the candidate is timed as what it is (its honest twin's speed), or, where it does disturb the record,
    gets no credit. (trust/clock_rewrite.cu assembles its forbidden names with the preprocessor, which the static
    checks now read, so it stops there; its twin finds mprotect and syscall at run time, by walking the C library's
    symbol table, a spelling no source check resolves, and so reaches timing.)"""
    runtime = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial" / "saxpy_clock_rewrite_runtime.cu"
    r = _run(saxpy, prepared, "saxpy_clock_rewrite_runtime.cu", runtime.read_text())
    assert r.status == "scored", r.failure
    if r.correct:
        assert r.speedup < 2 * honest.speedup, (r.speedup, honest.speedup)
    else:
        assert r.failure.kind in (FailureKind.TIMER_MISMATCH, FailureKind.CRASH), r.failure


def test_outputs_cached_by_sampled_inputs_get_no_credit(saxpy, prepared):
    """Two defences can end it, whichever comes first: the traced call (a cache hit copies on the host, so no kernel
    wrote the outputs: no_gpu_work), or the re-check of the last timed call on its perturbed inputs (a stale
    output: wrong_output_during_timing). On the H200 (session 16) the traced call caught it."""
    r = _fixture(saxpy, prepared, "cache_sampled.cu")
    assert r.status == "scored" and not r.correct and r.speedup is None
    assert r.failure.kind in (FailureKind.TIMING_RECHECK, FailureKind.NO_GPU_WORK), r.failure


@pytest.mark.parametrize("name", ["token_kernel_host_loop.cu", "token_kernel_partial_copy.cu",
                                  "mapped_host_memory.cu"])
def test_outputs_not_copied_from_the_device_get_no_credit(saxpy, prepared, name):
    r = _fixture(saxpy, prepared, name)
    assert r.status == "scored" and not r.correct and r.speedup is None
    assert r.failure.kind == FailureKind.NO_GPU_WORK, r.failure
    assert "from the device" in r.failure.message or "no GPU kernel" in r.failure.message


def test_host_work_behind_a_full_size_copy_falls_below_the_kernel_share_floor(saxpy, prepared, honest):
    """The byte rule is met by a useless copy; the input rule (session 20) stops it first: none of its inputs go
    to the device. With that rule off, what still tells it apart is the kernels' share of the call traced after
    timing: below ``min_kernel_share`` (0.0001; on the H200 the honest dataset variants had 0.0004 and more, the
    honest saxpy 0.0025, this candidate below 0.00005) it gets no_gpu_work, with the shares it was judged on kept
    in the result. (Credited at 0.16x to 0.23x before session 19.)"""
    from dataclasses import replace

    r = _fixture(saxpy, prepared, "token_kernel_full_copy.cu")
    assert r.status == "scored" and not r.correct and r.speedup is None
    assert r.stage == Stage.CORRECT and r.failure.kind == FailureKind.NO_GPU_WORK, r.failure
    assert "of its input bytes to the device" in r.failure.message, r.failure
    src = (TRUST / "token_kernel_full_copy.cu").read_text()
    r = evaluate(saxpy, src, settings=replace(SETTINGS, inputs_to_device_fraction=0.0), prepared=prepared)
    assert r.status == "scored" and not r.correct and r.speedup is None
    assert r.stage == Stage.CORRECT and r.failure.kind == FailureKind.NO_GPU_WORK, r.failure
    assert "computed on the host" in r.failure.message and "min_kernel_share" in r.failure.message
    ev = r.gpu_evidence
    assert ev.output_bytes_min_fraction is not None and ev.output_bytes_min_fraction >= 1.0  # the byte rule: met
    assert ev.call_ms and ev.call_ms > 0 and ev.kernel_share is not None and ev.gpu_share is not None
    assert ev.kernel_share < SETTINGS.min_kernel_share <= honest.gpu_evidence.kernel_share


def test_host_threads_beside_the_calls_get_no_credit(tmp_path, monkeypatch):
    """Host threads computing the outputs while a kernel only moves them meet the byte, input and kernel-share
    rules; the build's import check stops the spellings known (``adversarial/mandelbrot_using_std_thread.cu``:
    std::thread after ``using namespace std``). Behind it, the cores the run kept busy in each timing window
    (its CPU time, read from outside it, over the window's wall time): with the import check off for this one
    build (a private build cache, so no other run finds it built), 16 threads on the host show as many cores and
    get no_gpu_work, while the honest fast kernel keeps about one."""
    import cudaperf.harness.compile as compile_mod

    task = find_task(load_builtin_tasks(), "mandelbrot")
    prepared = prepare_c_function(task, SETTINGS, seed=97531)
    honest_src = next(c for c in builtin_candidates() if c.task_id == "mandelbrot" and c.label == "fast").source
    honest = _run(task, prepared, "mandelbrot fast.cu", honest_src)
    assert honest.correct and honest.stage == Stage.TIMED, honest.failure
    cores = honest.gpu_evidence.window_cpu_cores
    assert cores is not None and cores <= SETTINGS.max_window_cpu_cores, cores

    src = (Path(__file__).resolve().parents[1] / "fixtures" / "adversarial" /
           "mandelbrot_using_std_thread.cu").read_text()
    r = evaluate(task, src, settings=SETTINGS, prepared=prepared)
    assert r.status == "scored" and r.failure.kind == FailureKind.STATIC_CHECK and "std::thread" in r.failure.message
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "build-cache"))
    monkeypatch.setattr(compile_mod, "host_worker_references", lambda nm_undefined: [])
    r = _run(task, prepared, "mandelbrot_using_std_thread.cu (import check off)", src)
    assert r.status == "scored" and not r.correct and r.speedup is None, r.failure
    assert r.failure.kind == FailureKind.NO_GPU_WORK and "max_window_cpu_cores" in r.failure.message, r.failure
    assert r.gpu_evidence.window_cpu_cores > SETTINGS.max_window_cpu_cores
