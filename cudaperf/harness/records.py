"""The parts of a result record every runner shares: the record an evaluation starts from (the task, the
candidate, the machine and toolchain, the sandbox), the verdict of a failed build, and the unscored record of a
harness fault. Runners import these from here, and ``evaluate`` dispatches to the runners, so no runner imports
``evaluate``."""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import replace

from cudaperf.harness.compile import BuildOutcome, default_arch
from cudaperf.harness.environment import cpu_model, describe_toolchain, gpu_inventory, host_name
from cudaperf.harness.result import Environment, EvaluationResult, Failure, FailureKind, Stage
from cudaperf.harness.sandbox import sandbox_level
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CFunctionTask, Task


NO_GPU = "none visible"
"""``Environment.gpu`` of a result made where no GPU was visible."""


def environment(settings: HarnessSettings, gpu_index: int | None = None) -> Environment:
    inv = gpu_inventory()
    gpu = next((g for g in inv if gpu_index is None or g[0] == gpu_index), None)
    nv, gc = describe_toolchain()
    return Environment(
        gpu=gpu[1] if gpu else NO_GPU,
        driver=gpu[2] if gpu else "none",
        cuda=nv,
        gcc=gc,
        arch=settings.arch or default_arch(),
        nvcc_flags=tuple(settings.nvcc_flags),
        reference_flags=tuple(settings.reference_flags),
        sandbox_level=sandbox_level(),
        seeds_policy=settings.seeds_policy,
        timing_method=settings.timing_method,
        host=host_name(),
        cpu=cpu_model(),
    )


def code_sha256(code: str) -> str:
    # surrogatepass: a rejected candidate may hold lone surrogates (same digest as before for any valid text)
    return hashlib.sha256(code.encode("utf-8", errors="surrogatepass")).hexdigest()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def base_result(task: Task, candidate_id: str, code: str | None, settings: HarnessSettings,
          gpu_index: int | None) -> EvaluationResult:
    return EvaluationResult(
        task_id=task.id, task_kind=task.kind, candidate_id=candidate_id,
        code_sha256=code_sha256(code) if code is not None else None,
        status="scored", stage=Stage.NONE, correct=False, environment=environment(settings, gpu_index),
        created_at=_now(),
    )


def compile_failure(build: BuildOutcome, task: Task) -> Failure:
    if build.stage == "symbols":
        return Failure(FailureKind.STATIC_CHECK, "; ".join(build.reasons))
    if build.stage == "link":
        hint = ""
        if isinstance(task, CFunctionTask) and f"undefined reference to `{task.function_name}'" in build.info.log:
            hint = (f"the function {task.function_name} with C linkage is missing: define it as "
                    f"extern \"C\" {task.signature}; ")
        return Failure(FailureKind.LINK_ERROR, hint + build.info.log)
    return Failure(FailureKind.COMPILE_ERROR, build.info.log or "nvcc failed")


def unscored(res: EvaluationResult, message: str) -> EvaluationResult:
    return replace(res, status="unscored", failure=Failure(FailureKind.HARNESS, message, "harness"))
