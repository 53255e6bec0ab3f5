"""Evaluate a ``cuda_kernel`` (BabelTower-style) candidate: its kernel, the task's wrapper, the task's tests.

The candidate supplies only the ``__global__`` kernel; the trusted wrapper launches it, so a kernel always runs
when the program runs. The tests are the task's own (tiny, visible in the original data set) and up to three hidden
ones (:func:`prepare_hidden_tests`): the largest visible test rewritten with other, odd and larger sizes and fresh
values (a seed drawn per harness process), whose expected printouts come from the task's C reference, built with
AddressSanitizer and run on the CPU in the harness's own process, outside the candidate's. A hidden test the
reference cannot run cleanly (an out-of-bounds access, a crash, a timeout) is dropped; a task whose tests the
generator cannot rewrite keeps its visible tests only, and the note says why.

A hidden test counts only when both trusted references agree on it: before a candidate runs, the task's reference
CUDA kernel (``task.reference_kernel``) is built with the hidden tests and run on the GPU, exactly as a candidate
is (:func:`validate_hidden_tests`), and a hidden test it fails (a wrong printout, a crash, a CUDA error, a timeout)
is dropped: the data set's kernels and wrappers assume things about sizes that its C code does not, so the C
reference's printout at a rewritten size is not always the CUDA one's. This costs one extra build and run per task
per harness process (more, up to one per hidden test, when the reference kernel stops at one); a candidate built
with a hidden test dropped this way is rebuilt with the validated ones (a rebuild that fails is the candidate's
compile failure). When the check cannot run (the reference kernel does not build, no usable GPU), the candidate
is unscored, never judged on unchecked tests. The candidate
must pass the visible tests and the validated hidden ones. This kind measures correctness, not speed, and records
no timing.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cudaperf.harness import kernel_program
from cudaperf.harness.compile import BuildOutcome, ToolchainError, _trusted_build, build_cuda_program, gcc_version, sha256
from cudaperf.harness.environment import device_for_child, gpu_count
from cudaperf.harness.result import EvaluationResult, Failure, FailureKind, Mismatch, Stage, TestOutcome
from cudaperf.harness.run_c_function import HarnessError
from cudaperf.harness.sandbox import SandboxLimits, SandboxRun, Workdir, copy_in, run_sandboxed, scrubbed_env
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CudaKernelTask, Tolerance


HIDDEN_SEED = secrets.randbits(32)
"""The hidden tests' seed: drawn once per harness process, never shown to a candidate."""
HIDDEN_TIMEOUT_S = 30.0
_HIDDEN: dict[tuple[str, str, int], "HiddenTests"] = {}
_HIDDEN_LOCK = threading.Lock()
_HIDDEN_LOCKS: dict[tuple[str, str, int], threading.Lock] = {}
_VALIDATED: dict[tuple[str, str], "HiddenTests"] = {}
_VALIDATED_LOCKS: dict[tuple[str, str], threading.Lock] = {}


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


def build_kernel_program(task: CudaKernelTask, hidden: HiddenTests, kernel_code: str,
                         settings: HarnessSettings) -> BuildOutcome:
    """The test program of ``kernel_code`` (a candidate's kernel or ``task.reference_kernel``) with the visible
    tests and ``hidden``, built as every candidate's is."""
    program = kernel_program.build_cuda_program(with_hidden_tests(task, hidden), kernel_code)
    # Zero-initialised locals, as the CPU build has: the tests' expected outputs show 0 where an array element is
    # never written (babeltower-119), which only a deterministic stack reproduces.
    flags = (*settings.nvcc_flags, *kernel_program.CUDA_HOST_FLAGS)
    return build_cuda_program(program, arch=settings.arch, flags=flags, tag="kernel-task")


def build_kernel_candidate(task: CudaKernelTask, kernel_code: str, settings: HarnessSettings) -> BuildOutcome:
    """The candidate's program with the task's hidden tests (:func:`prepare_hidden_tests`, not yet checked against
    the reference kernel: :func:`run_kernel_candidate` rebuilds it when that check drops some). The reference
    kernel's program for that check is built here too when a GPU is visible, on the compile pool (once per task:
    builds are cached by content), so the GPU step only runs it."""
    hidden = prepare_hidden_tests(task)
    if hidden.calls and gpu_count() > 0:  # (without a GPU nothing runs: no check to build for)
        build_kernel_program(task, hidden, task.reference_kernel, settings)  # a failure is reported by the check
    return build_kernel_program(task, hidden, kernel_code, settings)


def _run_program(exe, settings: HarnessSettings, gpu_index: int | None) -> tuple[SandboxRun, str]:
    """Run a test program in the sandbox as a candidate's runs: (the run, the nonce it was given)."""
    extra = {"CUDA_VISIBLE_DEVICES": device_for_child(gpu_index)} if gpu_index is not None else {}
    with Workdir(prefix="cudaperf-run-") as w:
        exe = copy_in(exe, w, "program")
        nonce = secrets.token_hex(8)
        run = run_sandboxed([str(exe), nonce], w, env=scrubbed_env(w, extra),
                            limits=SandboxLimits(wall_s=settings.test_timeout_s, capture_bytes=4 << 20))
    return run, nonce


def _no_usable_gpu(run: SandboxRun, err: tuple[int, str] | None) -> bool:
    return "no CUDA-capable device" in run.stdout + run.stderr or bool(
        err and any(k in err[1] for k in ("NoDevice", "InsufficientDriver", "OperatingSystem")))


@dataclass(frozen=True)
class HiddenCheck:
    """One run of the reference kernel's program, judged on its hidden tests (indices among them): those it passed
    (``kept``) and printed wrongly (``failed``) before ``stopped_at``, the first hidden test it did not finish
    cleanly (None when the run was clean and every hidden test has a printout)."""

    kept: tuple[int, ...]
    failed: tuple[int, ...]
    stopped_at: int | None


def check_hidden_printouts(expected: Sequence[str], printouts: Sequence[str | None],
                           tolerance: Tolerance, clean: bool) -> HiddenCheck:
    """Judge the reference kernel's hidden-test ``printouts`` against the C reference's ``expected`` ones.

    ``clean``: the program exited with status 0, without a CUDA error or a timeout. A program that stops (crash,
    CUDA error, timeout) stops at its first hidden test without a printout: that one is to be dropped and the
    rest run again; one that fails after its last printout (at exit) is taken to have been stopped by the last
    hidden test. Tests before the stop are decided by their printouts."""
    n = len(expected)
    missing = next((i for i, o in enumerate(printouts[:n]) if o is None), None)
    if len(printouts) < n and missing is None:
        missing = len(printouts)
    stopped_at = missing if missing is not None else (None if clean or n == 0 else n - 1)
    decided = range(n if stopped_at is None else stopped_at)
    passed = [kernel_program.compare_printout(expected[i], printouts[i], tolerance).passed for i in decided]
    return HiddenCheck(tuple(i for i, ok in zip(decided, passed) if ok),
                       tuple(i for i, ok in zip(decided, passed) if not ok), stopped_at)


def _subset(hidden: HiddenTests, keep: Sequence[int]) -> HiddenTests:
    return HiddenTests(tuple(hidden.calls[i] for i in keep), tuple(hidden.expected[i] for i in keep),
                       tuple(hidden.hows[i] for i in keep), hidden.note)


def _why_stopped(run: SandboxRun, err: tuple[int, str] | None) -> str:
    if run.timed_out:
        return "timeout"
    if err:
        return f"CUDA error {err[1]}"
    return f"the program {run.describe()}"


def validate_hidden_tests(task: CudaKernelTask, hidden: HiddenTests, settings: HarnessSettings,
                          gpu_index: int | None) -> HiddenTests:
    """The hidden tests of ``hidden`` that the task's reference kernel passes on the GPU: its program is built
    and run as a candidate's is, with the visible tests first; a hidden test it prints wrongly is dropped, and
    when it stops (crash, CUDA error, timeout) the first hidden test without a printout is dropped and the rest
    run again. Visible tests are never dropped (the reference failing one is a data defect). Made once per
    process per task and hidden set. Raises :class:`HarnessError` when the check cannot run (the reference kernel
    does not build, no usable GPU) and ToolchainError without a toolchain."""
    if not hidden.calls:
        return hidden
    key = (task.id, sha256(task.wrapper, task.reference_kernel, *task.test_calls_cuda, *task.expected_outputs,
                           *hidden.calls, *hidden.expected, settings.arch or "", " ".join(settings.nvcc_flags)))
    with _HIDDEN_LOCK:
        lock = _VALIDATED_LOCKS.setdefault(key, threading.Lock())
    with lock:  # failures are not kept: the next candidate tries again
        if key not in _VALIDATED:
            _VALIDATED[key] = _validate(task, hidden, settings, gpu_index)
        return _VALIDATED[key]


def _validate(task: CudaKernelTask, hidden: HiddenTests, settings: HarnessSettings,
              gpu_index: int | None) -> HiddenTests:
    n_visible = len(task.expected_outputs)
    remaining = list(range(len(hidden.calls)))
    kept: list[int] = []
    dropped: list[str] = []
    while remaining:
        sub = _subset(hidden, remaining)
        build = build_kernel_program(task, sub, task.reference_kernel, settings)
        if build.stage != "ok" or build.exe is None:
            raise HarnessError(f"task {task.id}: the reference kernel does not build with the hidden tests, so they "
                               f"cannot be checked: {build.info.log.strip()[-300:]}")
        run, nonce = _run_program(build.exe, settings, gpu_index)
        err = kernel_program.find_cuda_error(run.stdout)
        if _no_usable_gpu(run, err):
            raise HarnessError("no usable GPU to check the hidden tests against the reference kernel")
        outs = kernel_program.parse_program_output(run.stdout, n_visible + len(remaining), nonce)
        clean = run.returncode == 0 and not run.timed_out and err is None
        if any(o is None for o in outs[:n_visible]):
            first = next(i for i, o in enumerate(outs) if o is None)
            dropped += [f"{hidden.hows[i]} (the reference kernel stops at visible test {first}: "
                        f"{_why_stopped(run, err)})" for i in remaining]
            break
        chk = check_hidden_printouts(sub.expected, outs[n_visible:], task.tolerance, clean)
        kept += [remaining[i] for i in chk.kept]
        dropped += [f"{hidden.hows[remaining[i]]} (wrong output)" for i in chk.failed]
        if chk.stopped_at is None:
            break
        dropped.append(f"{hidden.hows[remaining[chk.stopped_at]]} ({_why_stopped(run, err)})")
        remaining = remaining[chk.stopped_at + 1:]
    if not dropped:
        return hidden
    kept.sort()
    gpu_part = f"dropped, the reference kernel fails them: {', '.join(dropped)}"
    if not kept:
        return HiddenTests((), (), (), f"visible tests only: {gpu_part}")
    c_part = "".join(f"; {rest}" for rest in hidden.note.split("; ", 1)[1:])  # what the C reference dropped
    out = _subset(hidden, kept)
    return replace(out, note=f"{len(kept)} hidden tests ({', '.join(out.hows)}){c_part}; {gpu_part}")


def run_kernel_candidate(task: CudaKernelTask, build: BuildOutcome, res: EvaluationResult,
                         settings: HarnessSettings, gpu_index: int | None, kernel_code: str) -> EvaluationResult:
    """Run the candidate's program (``build``, made by :func:`build_kernel_candidate` from ``kernel_code``) on the
    visible tests and the hidden ones the reference kernel passes (:func:`validate_hidden_tests`); when that check
    dropped some, the candidate is rebuilt with the validated ones first."""
    assert build.exe is not None
    built_with = prepare_hidden_tests(task)
    t0 = time.monotonic()
    try:
        hidden = validate_hidden_tests(task, built_with, settings, gpu_index)
    except HarnessError as exc:
        return replace(res, status="unscored", failure=Failure(FailureKind.HARNESS, str(exc), "harness"))
    durations = {"validate_s": time.monotonic() - t0}
    if hidden.calls != built_with.calls:
        build = build_kernel_program(task, hidden, kernel_code, settings)
        durations["recompile_s"] = build.info.seconds
        if build.stage != "ok" or build.exe is None:
            # The same kernel, fewer test calls: a second build that fails (a compile time at the limit, say) is
            # the candidate's doing, so its failure, never "unscored" (which a trainer would reward above it).
            # A missing toolchain raises instead.
            from cudaperf.harness.records import compile_failure

            failure = compile_failure(build, task)
            return replace(res, failure=replace(failure, message="the program with the validated hidden tests "
                                                f"does not build: {failure.message}"))
    n_visible = len(task.expected_outputs)
    task = with_hidden_tests(task, hidden)
    run, nonce = _run_program(build.exe, settings, gpu_index)
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
                  durations_s={**res.durations_s, **durations, "run_s": run.wall_s})
    err = kernel_program.find_cuda_error(run.stdout)
    if _no_usable_gpu(run, err):
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
