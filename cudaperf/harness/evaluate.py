"""``evaluate(task, completion) -> EvaluationResult``: one candidate, end to end, never raising for its faults.

Pipeline: extract code -> static checks -> compile (cached, sandboxed) -> hidden tests -> GPU-work evidence ->
timing against the sequential baseline. Candidate failures are results (``status="scored"``); harness failures
(toolchain missing, reference broken, no GPU, probe unavailable) are ``status="unscored"``; programming errors in
the harness itself propagate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from cudaperf.harness.compile import BuildOutcome, ToolchainError, build_c_function_candidate
from cudaperf.harness.environment import gpu_count
from cudaperf.harness.extract import extract_code
from cudaperf.harness.result import (
    EvaluationResult,
    Failure,
    FailureKind,
    Stage,
)
from cudaperf.harness.run_c_function import HarnessError, prepare_c_function, run_c_function
from cudaperf.harness.records import base_result, compile_failure, unscored
from cudaperf.harness.settings import HarnessSettings, speedup_flag
from cudaperf.harness.static_checks import check_source
from cudaperf.tasks.inputs import fresh_seed
from cudaperf.tasks.schema import CFunctionTask, CProgramTask, CudaKernelTask, Task



def prepare_task(task: Task, settings: HarnessSettings, seed: int | None = None, *, defer_baseline: bool = False):
    """Hidden inputs, expected outputs and the timed baseline for one task (None for kinds that need none).

    ``defer_baseline`` (c_function tasks): leave the baseline timing to :func:`finish_preparation`, so that the
    preparation can run as background work while other candidates are timed."""
    seed = fresh_seed() if seed is None else seed
    if isinstance(task, CFunctionTask):
        return prepare_c_function(task, settings, seed, time_baseline=settings.time_candidates,
                                  defer_baseline=defer_baseline)
    if isinstance(task, CProgramTask):
        from cudaperf.harness.run_c_program import prepare_c_program

        return prepare_c_program(task, settings, seed, time_baseline=settings.time_candidates)
    return None


def finish_preparation(prepared, settings: HarnessSettings, gpu_index: int | None = None):
    """Time a deferred baseline (c_function preparations) for the worker of ``gpu_index``; anything else comes
    back unchanged."""
    from cudaperf.harness.run_c_function import PreparedCFunction, time_baseline

    if isinstance(prepared, PreparedCFunction) and settings.time_candidates:
        return time_baseline(prepared, settings, owner=gpu_index)
    return prepared


@dataclass(frozen=True)
class Checked:
    """A candidate after extraction and static checks: either code to build, or the result that ends it."""

    code: str | None
    result: EvaluationResult | None


def check_candidate(task: Task, completion: str, candidate_id: str, settings: HarnessSettings,
                    gpu_index: int | None = None) -> Checked:
    """Extraction and static checks (no compiler, no GPU)."""
    ext = extract_code(completion)
    if ext.code is None:
        res = base_result(task, candidate_id, None, settings, gpu_index)
        return Checked(None, replace(res, failure=Failure(
            FailureKind.NO_CODE, "no code found: expected <OUTPUT_CUDA>...</OUTPUT_CUDA> or a fenced code block")))
    kernel = task.kernel_name if isinstance(task, CudaKernelTask) else None
    chk = check_source(ext.code, kind=task.kind, kernel_name=kernel)
    if not chk.ok:
        res = base_result(task, candidate_id, ext.code, settings, gpu_index)
        return Checked(ext.code, replace(res, stage=Stage.EXTRACTED, static_check_reasons=chk.reasons,
                                         failure=Failure(FailureKind.STATIC_CHECK, "; ".join(chk.reasons))))
    return Checked(ext.code, None)


def build_candidate(task: Task, code: str, settings: HarnessSettings) -> BuildOutcome:
    """Compile (cached). Raises ToolchainError for harness faults."""
    if isinstance(task, CFunctionTask):
        from cudaperf.harness.driver import driver_source

        return build_c_function_candidate(code, driver_source(task), task.function_name, arch=settings.arch,
                                          flags=settings.nvcc_flags)
    if isinstance(task, CudaKernelTask):
        from cudaperf.harness.run_cuda_kernel import build_kernel_candidate

        return build_kernel_candidate(task, code, settings)
    if isinstance(task, CProgramTask):
        from cudaperf.harness.run_c_program import build_program_candidate

        return build_program_candidate(code, settings)
    raise TypeError(f"unknown task type {type(task).__name__}")


def evaluate(
    task: Task,
    completion: str,
    *,
    settings: HarnessSettings | None = None,
    candidate_id: str = "candidate",
    prepared=None,
    build: BuildOutcome | None = None,
    gpu_index: int | None = None,
) -> EvaluationResult:
    """Evaluate one completion (or a bare ``.cu`` source) on ``task``.

    ``prepared`` (hidden inputs, expected outputs, baseline timing) is made fresh when not given; a batch passes
    one per task so the baseline is timed once per run. ``build`` lets a batch compile on a CPU pool first.
    """
    settings = settings or HarnessSettings()
    if getattr(task, "kind", None) == "pytorch":
        from cudaperf.harness.run_pytorch import evaluate_pytorch

        return evaluate_pytorch(task, completion, settings, candidate_id=candidate_id, prepared=prepared,
                                gpu_index=gpu_index)
    t_start = time.monotonic()
    checked = check_candidate(task, completion, candidate_id, settings, gpu_index)
    if checked.result is not None:
        return checked.result
    code = checked.code
    assert code is not None
    res = replace(base_result(task, candidate_id, code, settings, gpu_index), stage=Stage.CHECKED)
    durations: dict[str, float] = {}
    try:
        if build is None:
            build = build_candidate(task, code, settings)
        durations["compile_s"] = build.info.seconds
        res = replace(res, compile=build.info)
        if build.stage != "ok":
            if build.stage == "symbols":
                res = replace(res, static_check_reasons=build.reasons)
            return replace(res, failure=compile_failure(build, task), durations_s=durations)
        res = replace(res, stage=Stage.COMPILED)
        if gpu_count() == 0 and not _forced_gpu():
            return replace(unscored(res, "no NVIDIA GPU is visible (nvidia-smi lists none): the candidate compiled, "
                                         "but cannot be run here"), durations_s=durations)
        if isinstance(task, CFunctionTask):
            t0 = time.monotonic()
            if prepared is None:
                prepared = prepare_task(task, settings)
            durations["prepare_s"] = time.monotonic() - t0
            out = run_c_function(prepared, build, settings, gpu_index)
            durations["run_s"] = out.run_s
            durations.update(out.phases_s)
            res = c_function_result(res, prepared, out, settings)
        elif isinstance(task, CudaKernelTask):
            from cudaperf.harness.run_cuda_kernel import run_kernel_candidate

            res = run_kernel_candidate(task, build, res, settings, gpu_index, code)
        elif isinstance(task, CProgramTask):
            from cudaperf.harness.run_c_program import run_program_candidate

            res = run_program_candidate(task, build, res, settings, gpu_index, prepared)
    except (HarnessError, ToolchainError, OSError) as exc:
        res = unscored(res, f"{type(exc).__name__}: {exc}")
    durations["total_s"] = time.monotonic() - t_start
    return replace(res, durations_s={**res.durations_s, **durations})


def c_function_result(res: EvaluationResult, prepared, out, settings: HarnessSettings) -> EvaluationResult:
    """Fold a ``c_function`` run's outcome (and the preparation's baseline) into the result."""
    res = replace(res, stage=out.stage, correct=out.correct, failure=out.failure, tests=out.tests,
                  pass_fraction=out.pass_fraction, candidate_timing=out.candidate_timing,
                  gpu_evidence=out.gpu_evidence, seeds=(prepared.seed,))
    if out.failure is not None and out.failure.attributed_to == "harness":
        res = replace(res, status="unscored")
    if out.candidate_timing is not None and prepared.baseline_timing is not None:
        speedup = (settings.speedup_time_ms(prepared.baseline_timing)
                   / max(settings.speedup_time_ms(out.candidate_timing), 1e-6))
        res = replace(res, baseline_timing=prepared.baseline_timing, speedup=speedup,
                      speedup_flag=speedup_flag(speedup, settings))
    return res


def evaluate_c_function_group(task: CFunctionTask, items, prepared, settings: HarnessSettings,
                              gpu_index: int | None = None, should_stop=lambda: False) -> list[EvaluationResult]:
    """Evaluate a task's compiled candidates together, with interleaved timing windows
    (:func:`cudaperf.harness.run_c_function.run_c_function_group`). ``items``: (candidate_id, code, build) with
    builds that succeeded; candidates left out by ``should_stop`` are not in the result."""
    from cudaperf.harness.run_c_function import run_c_function_group

    t0 = time.monotonic()
    outs, prepared = run_c_function_group(prepared, [((cid, code, build), build) for cid, code, build in items],
                                          settings, gpu_index, should_stop=should_stop)
    results = []
    for (cid, code, build), out in outs:
        res = replace(base_result(task, cid, code, settings, gpu_index), stage=Stage.COMPILED, compile=build.info)
        if isinstance(out, Exception):  # a harness fault of this candidate's run: unscored, the others go on
            results.append(replace(unscored(res, f"{type(out).__name__}: {out}"),
                                   durations_s={"compile_s": build.info.seconds, "group_s": time.monotonic() - t0}))
            continue
        res = c_function_result(res, prepared, out, settings)
        results.append(replace(res, durations_s={"compile_s": build.info.seconds, "run_s": out.run_s,
                                                 "group_s": time.monotonic() - t0, **out.phases_s}))
    return results


def _forced_gpu() -> bool:
    import os

    return os.environ.get("CUDAPERF_ASSUME_GPU") == "1"


def verdict_line(res: EvaluationResult) -> str:
    """One human line: what happened to the candidate."""
    if res.status == "unscored":
        return f"UNSCORED ({res.failure.message if res.failure else 'harness error'})"
    if res.correct and res.speedup is not None:
        return f"CORRECT, {res.speedup:.2f}x vs sequential C ({res.stage.value})"
    if res.correct:
        return f"CORRECT ({res.stage.value})"
    f = res.failure
    return f"FAILED at {res.stage.value}: {f.kind.value if f else '?'}"
