"""Evaluate a ``cuda_kernel`` (BabelTower-style) candidate: its kernel, the task's wrapper, the task's tests.

The candidate supplies only the ``__global__`` kernel; the trusted wrapper launches it, so a kernel always runs
when the program runs. The tests are the task's own (tiny, visible in the original data set) and up to three hidden
ones (:func:`prepare_hidden_tests`): the largest visible test rewritten with other, odd and larger sizes and fresh
values (a seed drawn per harness process), whose expected printouts come from the task's C reference, built with
AddressSanitizer and run on the CPU in the harness's own process, outside the candidate's. A hidden test the
reference cannot run cleanly (an out-of-bounds access, a crash, a timeout) is dropped; a task whose tests the
generator cannot rewrite keeps its visible tests only, and the note says why. The candidate must pass both kinds.
This kind measures correctness, not speed, and records no timing.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
from dataclasses import dataclass, replace

from cudaperf.harness import kernel_program
from cudaperf.harness.compile import BuildOutcome, ToolchainError, _trusted_build, build_cuda_program, gcc_version, sha256
from cudaperf.harness.environment import device_for_child
from cudaperf.harness.result import EvaluationResult, Failure, FailureKind, Mismatch, Stage, TestOutcome
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CudaKernelTask


HIDDEN_SEED = secrets.randbits(32)
"""The hidden tests' seed: drawn once per harness process, never shown to a candidate."""
HIDDEN_TIMEOUT_S = 30.0
_HIDDEN: dict[tuple[str, str, int], "HiddenTests"] = {}
_HIDDEN_LOCK = threading.Lock()
_HIDDEN_LOCKS: dict[tuple[str, str, int], threading.Lock] = {}


@dataclass(frozen=True)
class HiddenTests:
    """A task's hidden tests: the CUDA-side calls, the reference's printouts, how each was made, and a note
    (``visible tests only: ...`` when there are none)."""

    calls: tuple[str, ...]
    expected: tuple[str, ...]
    hows: tuple[str, ...]
    note: str


def prepare_hidden_tests(task: CudaKernelTask, seed: int | None = None) -> HiddenTests:
    """The hidden tests of ``task`` for ``seed`` (default :data:`HIDDEN_SEED`), made once per process."""
    seed = HIDDEN_SEED if seed is None else seed
    key = (task.id, sha256(task.reference_c, *task.test_calls_c, task.wrapper), seed)
    with _HIDDEN_LOCK:  # one lock per task: tasks are prepared in parallel, each once
        lock = _HIDDEN_LOCKS.setdefault(key, threading.Lock())
    with lock:
        if key not in _HIDDEN:
            _HIDDEN[key] = _make_hidden_tests(task, seed)
        return _HIDDEN[key]


def _make_hidden_tests(task: CudaKernelTask, seed: int) -> HiddenTests:
    calls, why = kernel_program.hidden_calls(task, seed)
    if not calls:
        return HiddenTests((), (), (), f"visible tests only: {why}")
    kept: list[tuple[kernel_program.HiddenCall, str]] = []
    remaining = list(calls)
    dropped: list[str] = []
    while remaining:  # AddressSanitizer stops the program at the first bad access: drop that test, run the rest
        probe = replace(task, test_calls_c=tuple(c.call_c for c in remaining), expected_outputs=("",) * len(remaining))
        src = kernel_program.build_cpu_program(probe)
        flags = (*kernel_program.CPU_CXX_FLAGS, "-fsanitize=address", "-fno-sanitize-recover=all", "-w")
        try:
            exe = _trusted_build(sha256("babeltower-hidden", src, " ".join(flags), gcc_version()), "",
                                 {"prog.cpp": src}, lambda t, out: ["g++", *flags, "-o", str(out), str(t / "prog.cpp")],
                                 f"task {task.id}: the C reference does not build with its hidden tests")
        except ToolchainError as exc:
            return HiddenTests((), (), (), f"visible tests only: {str(exc).splitlines()[0]}")
        try:
            run = subprocess.run([str(exe)], capture_output=True, timeout=HIDDEN_TIMEOUT_S,
                                 env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"})
            stdout, rc = run.stdout.decode("latin-1"), run.returncode
        except subprocess.TimeoutExpired as exc:
            stdout, rc = (exc.stdout or b"").decode("latin-1"), -1
        outs = kernel_program.parse_program_output(stdout, len(remaining))
        done = [(c, o) for c, o in zip(remaining, outs) if o is not None]
        if rc == 0 and len(done) == len(remaining):
            kept += done
            break
        first_bad = next((i for i, o in enumerate(outs) if o is None), len(remaining))
        kept += done[:first_bad]
        dropped.append(remaining[first_bad].how if first_bad < len(remaining) else "?")
        remaining = remaining[first_bad + 1:]
    if not kept:
        return HiddenTests((), (), (), "visible tests only: the C reference does not run cleanly (AddressSanitizer, "
                                       f"exit status or time) on any rewritten test ({', '.join(dropped)})")
    note = f"{len(kept)} hidden tests ({', '.join(c.how for c, _ in kept)})"
    if dropped:
        note += f"; dropped, the reference fails them: {', '.join(dropped)}"
    return HiddenTests(tuple(c.call_cuda for c, _ in kept), tuple(o for _, o in kept), tuple(c.how for c, _ in kept),
                       note)


def with_hidden_tests(task: CudaKernelTask, hidden: HiddenTests) -> CudaKernelTask:
    """The task with its hidden tests after the visible ones (what the candidate's program runs)."""
    return replace(task, test_calls_cuda=(*task.test_calls_cuda, *hidden.calls),
                   expected_outputs=(*task.expected_outputs, *hidden.expected))


def build_kernel_candidate(task: CudaKernelTask, kernel_code: str, settings: HarnessSettings) -> BuildOutcome:
    program = kernel_program.build_cuda_program(with_hidden_tests(task, prepare_hidden_tests(task)), kernel_code)
    # Zero-initialised locals, as the CPU build has: the tests' expected outputs show 0 where an array element is
    # never written (babeltower-119), which only a deterministic stack reproduces.
    flags = (*settings.nvcc_flags, *kernel_program.CUDA_HOST_FLAGS)
    return build_cuda_program(program, arch=settings.arch, flags=flags, tag="kernel-task")


def run_kernel_candidate(task: CudaKernelTask, build: BuildOutcome, res: EvaluationResult,
                         settings: HarnessSettings, gpu_index: int | None) -> EvaluationResult:
    assert build.exe is not None
    hidden = prepare_hidden_tests(task)
    n_visible = len(task.expected_outputs)
    task = with_hidden_tests(task, hidden)
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
        config = {} if i < n_visible else {"hidden": hidden.hows[i - n_visible]}
        tests.append(TestOutcome(index=i, config=config, passed=cmp.passed, message=cmp.message, mismatch=mm,
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
        which = f" (hidden: {first.config['hidden']})" if first.config else ""
        return replace(res, failure=Failure(FailureKind.WRONG_OUTPUT,
                                            f"{n - passed} of {n} tests failed ({n - n_visible} of them hidden); test "
                                            f"{first.index}{which}: {first.message}"))
    return replace(res, stage=Stage.CORRECT, correct=True)
