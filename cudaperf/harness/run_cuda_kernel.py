"""Evaluate a ``cuda_kernel`` (BabelTower-style) candidate: its kernel, the task's wrapper, the task's tests.

The candidate supplies only the ``__global__`` kernel; the trusted wrapper launches it, so a kernel always runs
when the program runs. The tests are the task's own (tiny, visible in the original data set): this kind measures
correctness, not speed, and records no timing.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

from cudaperf.harness import kernel_program
from cudaperf.harness.compile import BuildOutcome, build_cuda_program
from cudaperf.harness.environment import device_for_child
from cudaperf.harness.result import EvaluationResult, Failure, FailureKind, Mismatch, Stage, TestOutcome
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CudaKernelTask


def build_kernel_candidate(task: CudaKernelTask, kernel_code: str, settings: HarnessSettings) -> BuildOutcome:
    program = kernel_program.build_cuda_program(task, kernel_code)
    # Zero-initialised locals, as the CPU build has: the tests' expected outputs show 0 where an array element is
    # never written (babeltower-119), which only a deterministic stack reproduces.
    flags = (*settings.nvcc_flags, *kernel_program.CUDA_HOST_FLAGS)
    return build_cuda_program(program, arch=settings.arch, flags=flags, tag="kernel-task")


def run_kernel_candidate(task: CudaKernelTask, build: BuildOutcome, res: EvaluationResult,
                         settings: HarnessSettings, gpu_index: int | None) -> EvaluationResult:
    assert build.exe is not None
    extra = {"CUDA_VISIBLE_DEVICES": device_for_child(gpu_index)} if gpu_index is not None else {}
    with Workdir(prefix="cudaperf-run-") as w:
        exe = copy_in(build.exe, w, "program")
        nonce = secrets.token_hex(8)
        run = run_sandboxed([str(exe), nonce], w, env=scrubbed_env(w, extra),
                            limits=SandboxLimits(wall_s=settings.test_timeout_s, capture_bytes=4 << 20))
    n = len(task.expected_outputs)
    printouts = kernel_program.parse_program_output(run.stdout, n, nonce)
    tests = []
    for i, (exp, got) in enumerate(zip(task.expected_outputs, printouts)):
        cmp = kernel_program.compare_printout(exp, got, task.tolerance)
        mm = None
        if not cmp.passed and cmp.element is not None:
            mm = Mismatch(output=f"argument {cmp.argument}", index=cmp.element, expected=cmp.expected_value or "",
                          got=cmp.got_value or "", max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err,
                          n_bad=1, n_total=1)
        tests.append(TestOutcome(index=i, config={}, passed=cmp.passed, message=cmp.message, mismatch=mm,
                                 kernels_launched=None))
    passed = sum(t.passed for t in tests)
    p = passed / n
    res = replace(res, stage=Stage.RAN, tests=tuple(tests), pass_fraction=p,
                  durations_s={**res.durations_s, "run_s": run.wall_s})
    err = kernel_program.find_cuda_error(run.stdout)
    if "no CUDA-capable device" in run.stdout + run.stderr or (
            err and any(k in err[1] for k in ("NoDevice", "InsufficientDriver", "OperatingSystem"))):
        return replace(res, status="unscored", failure=Failure(FailureKind.HARNESS, "no usable GPU", "harness"))
    if run.timed_out:
        return replace(res, failure=Failure(FailureKind.TIMEOUT, run.describe()))
    if err:
        return replace(res, failure=Failure(FailureKind.CUDA_ERROR, f"test {err[0]}: CUDA error {err[1]}"))
    if run.returncode != 0:
        return replace(res, failure=Failure(FailureKind.CRASH, f"the test program {run.describe()}: "
                                                               f"{run.stderr.strip()[-300:]}"))
    if p < 1:
        first = next(t for t in tests if not t.passed)
        return replace(res, failure=Failure(FailureKind.WRONG_OUTPUT,
                                            f"{n - passed} of {n} tests failed; test {first.index}: {first.message}"))
    return replace(res, stage=Stage.CORRECT, correct=True)
