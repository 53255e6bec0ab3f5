"""Evaluate a ``c_function`` candidate: hidden tests against the trusted reference, then timing.

The reference runs in its own (trusted) process and writes expected outputs into a directory only the harness
can read; the candidate's sandboxed process receives input files only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cudaperf.harness.compare import compare_arrays, describe_mismatch
from cudaperf.harness.compile import BuildOutcome, build_reference
from cudaperf.harness.driver import EXIT_NO_GPU, driver_source
from cudaperf.harness.result import Failure, FailureKind, GpuEvidence, Stage, TestOutcome, TimingStats
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env
from cudaperf.harness.quiet import HOST
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.inputs import CaseInputs, CaseOutputs, OutputFormatError, generate_case, read_outputs, write_inputs
from cudaperf.tasks.schema import CFunctionTask, is_float_type


class HarnessError(RuntimeError):
    """The harness could not judge (reference failed, no GPU, probe missing): the result is unscored."""


@dataclass(frozen=True)
class PreparedCFunction:
    """Everything trusted about one task for one run: hidden inputs, expected outputs, the timed baseline."""

    task: CFunctionTask
    driver_c: str
    seed: int
    test_cases: tuple[CaseInputs, ...]
    expected_tests: tuple[CaseOutputs, ...]
    timing_cases: tuple[CaseInputs, ...]
    expected_timing: tuple[CaseOutputs, ...]
    baseline_timing: TimingStats | None
    reference_exe: Path | None = None
    """The built reference driver (for a deferred baseline timing, :func:`time_baseline`)."""
    _files: "_InputFiles" = field(default_factory=lambda: _InputFiles(), compare=False, repr=False)

    def input_file(self, which: str) -> Path:
        """The hidden-test (``tests``) or timing (``timing``) inputs serialised once per preparation, in a
        harness-owned directory, readable but not writable by the sandbox user; candidates get a hard link."""
        return self._files.get(which, self.task, self.test_cases if which == "tests" else self.timing_cases)


class _InputFiles:
    """Input files written once and shared by every candidate run of one preparation (removed with it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._paths: dict[str, Path] = {}

    def get(self, which: str, task: CFunctionTask, cases) -> Path:
        with self._lock:
            if which not in self._paths:
                if self._dir is None:
                    self._dir = Path(tempfile.mkdtemp(prefix="cudaperf-inputs-"))
                    os.chmod(self._dir, 0o755)
                    weakref.finalize(self, shutil.rmtree, str(self._dir), True)
                path = self._dir / f"{which}.bin"
                write_inputs(path, task, list(cases))
                os.chmod(path, 0o444)
                self._paths[which] = path
            return self._paths[which]


def _test_config_indices(task: CFunctionTask) -> list[int]:
    n = len(task.size_configs)
    timing = task.timing_config % n
    idx = [i for i in range(n) if i != timing] if n >= 3 else list(range(n))
    return idx


def _run_reference(exe: Path, mode_args: list[str], inputs: list[CaseInputs], task: CFunctionTask,
                   timeout_s: float) -> tuple[list[CaseOutputs], list[float]]:
    with tempfile.TemporaryDirectory(prefix="cudaperf-expected-") as tmp:
        t = Path(tmp)
        write_inputs(t / "in.bin", task, inputs)
        mode = mode_args[0]
        cmd = [str(exe), mode, str(t / "in.bin"), str(t / "out.bin"), str(t / "stats.txt"), *mode_args[1:]]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"task {task.id}: the C reference did not finish {mode} within {timeout_s:.0f} s")
        if p.returncode != 0:
            raise HarnessError(f"task {task.id}: the C reference failed in {mode} mode (exit {p.returncode}): "
                               f"{p.stderr[-500:]}")
        outs = read_outputs(t / "out.bin", task, len(inputs))
        times = [float(l.split()[1]) / 1e6 for l in (t / "stats.txt").read_text().splitlines()
                 if l.startswith("time_ns ")]
    if len(outs) != len(inputs):
        raise HarnessError(f"task {task.id}: the C reference wrote {len(outs)} of {len(inputs)} outputs")
    return outs, times


def _time_args(settings: HarnessSettings) -> list[str]:
    return ["time", str(settings.min_reps), str(settings.max_reps), str(settings.budget_ms),
            str(settings.cv_target), str(settings.reference_warmup)]


def prepare_c_function(task: CFunctionTask, settings: HarnessSettings, seed: int, *,
                       time_baseline: bool = True, defer_baseline: bool = False) -> PreparedCFunction:
    """Draw hidden inputs from ``seed``, run the reference on them, and time the sequential baseline.

    ``defer_baseline``: compute the expected outputs of the timing inputs untimed (as background host work) and
    leave the baseline to :func:`time_baseline`, which a batch calls when the host is quiet.
    """
    rng = np.random.default_rng(seed)
    driver_c = driver_source(task)
    exe = build_reference(driver_c, task.reference_c, settings.reference_flags)
    configs = _test_config_indices(task)
    with HOST.background():
        tests = [generate_case(task, configs[i % len(configs)], int(rng.integers(2**62)))
                 for i in range(settings.n_tests)]
    with HOST.background():
        expected, _ = _run_reference(exe, ["test"], tests, task, settings.reference_timeout_s)
    timing_idx = task.timing_config % len(task.size_configs)
    with HOST.background():
        timing = [generate_case(task, timing_idx, int(rng.integers(2**62))) for _ in range(settings.timing_sets)]
    baseline = None
    expected_timing: list[CaseOutputs] = []
    if time_baseline and defer_baseline:
        with HOST.background():
            expected_timing, _ = _run_reference(exe, ["test"], timing, task, settings.reference_timeout_s)
    elif time_baseline:
        with HOST.timing():
            expected_timing, times = _run_reference(exe, _time_args(settings), timing, task,
                                                    settings.reference_timeout_s)
        baseline = TimingStats.from_samples_ms(times)
    return PreparedCFunction(task=task, driver_c=driver_c, seed=seed, test_cases=tuple(tests),
                             expected_tests=tuple(expected), timing_cases=tuple(timing),
                             expected_timing=tuple(expected_timing), baseline_timing=baseline,
                             reference_exe=exe)


def time_baseline(prepared: PreparedCFunction, settings: HarnessSettings) -> PreparedCFunction:
    """Time the sequential baseline of a preparation made with ``defer_baseline`` (a no-op when it is timed).

    The timed calls' outputs must equal the expected outputs computed earlier: a reference that does not repeat
    itself cannot be a baseline (HarnessError)."""
    if prepared.baseline_timing is not None or not prepared.timing_cases or prepared.reference_exe is None:
        return prepared
    task = prepared.task
    with HOST.timing():
        outs, times = _run_reference(prepared.reference_exe, _time_args(settings), list(prepared.timing_cases),
                                     task, settings.reference_timeout_s)
    for exp, got in zip(prepared.expected_timing, outs):
        m = compare_case(task, exp, got)
        if m is not None:
            raise HarnessError(f"task {task.id}: the C reference gave different outputs for the same inputs "
                               f"({describe_mismatch(m)}): it cannot serve as the baseline")
    return replace(prepared, baseline_timing=TimingStats.from_samples_ms(times), _files=prepared._files)


def compare_case(task: CFunctionTask, expected: CaseOutputs, got: CaseOutputs | None):
    """The first mismatch of one call (None when it matches)."""
    for name, exp in expected.values.items():
        if name == "return":
            ctype = task.returns
        else:
            ctype = next(a.ctype for a in task.args if a.name == name)
        m = compare_arrays(name, exp, got.values.get(name) if got else None, task.tolerance,
                           is_float=is_float_type(ctype))
        if m is not None:
            return m
    return None


@dataclass(frozen=True)
class _Stats:
    cuda_error: str | None
    init_error: str | None
    probe_error: str | None
    case_kernels: dict[int, dict[str, int]]
    profile: dict[str, int] | None
    times_ms: list[float]


def _parse_stats(path: Path) -> _Stats:
    text = path.read_text(errors="replace") if path.exists() else ""
    cuda_error = init_error = probe_error = None
    case_kernels: dict[int, dict[str, int]] = {}
    profile = None
    times: list[float] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cuda_error":
            cuda_error = " ".join(parts[2:]) + (f" (test {parts[1]})" if parts[1] != "-1" else "")
        elif parts[0] == "init_error":
            init_error = " ".join(parts[1:])
        elif parts[0] == "probe_error":
            probe_error = " ".join(parts[1:])
        elif parts[0] == "case" and len(parts) >= 4:
            kv = dict(zip(parts[2::2], parts[3::2]))
            case_kernels[int(parts[1])] = {k: int(v) for k, v in kv.items() if re.fullmatch(r"\d+", v)}
        elif parts[0] == "profile":
            kv = dict(zip(parts[1::2], parts[2::2]))
            profile = {k: int(v) for k, v in kv.items() if re.fullmatch(r"\d+", v)}
        elif parts[0] == "time_ns" and len(parts) == 2:
            times.append(float(parts[1]) / 1e6)
    return _Stats(cuda_error, init_error, probe_error, case_kernels, profile, times)


@dataclass(frozen=True)
class CFunctionOutcome:
    stage: Stage
    correct: bool
    failure: Failure | None
    tests: tuple[TestOutcome, ...]
    pass_fraction: float
    candidate_timing: TimingStats | None
    gpu_evidence: GpuEvidence | None
    run_s: float


def _run_failure(run, stats: _Stats, during: str) -> Failure | None:
    if stats.init_error:
        return Failure(FailureKind.HARNESS, f"no usable GPU for the candidate ({stats.init_error})", "harness")
    if run.timed_out:
        return Failure(FailureKind.TIMEOUT, f"{during}: {run.describe()}")
    if stats.cuda_error:
        return Failure(FailureKind.CUDA_ERROR, f"{during}: CUDA error {stats.cuda_error}")
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip()[-400:]
        return Failure(FailureKind.CRASH, f"{during}: the program {run.describe()}" + (f": {tail}" if tail else ""))
    return None


def _link_in(src: Path, dst: Path) -> None:
    """A read-only input file into the sandbox's directory: a hard link (no copy) where the filesystem allows."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o444)


def run_c_function(prepared: PreparedCFunction, build: BuildOutcome, settings: HarnessSettings,
                   gpu_index: int | None = None) -> CFunctionOutcome:
    """Run a compiled candidate's hidden tests and, when it passes them, time it."""
    task = prepared.task
    assert build.exe is not None
    extra = {"CUDA_VISIBLE_DEVICES": str(gpu_index)} if gpu_index is not None else {}
    run_s = 0.0
    with Workdir(prefix="cudaperf-run-") as w:
        exe = copy_in(build.exe, w, "candidate")
        _link_in(prepared.input_file("tests"), w / "tests.bin")
        env = scrubbed_env(w, extra)
        run = run_sandboxed([str(exe), "test", "tests.bin", "out.bin", "stats.txt"], w, env=env,
                            limits=SandboxLimits(wall_s=settings.test_timeout_s))
        run_s += run.wall_s
        stats = _parse_stats(w / "stats.txt")
        if stats.init_error or run.returncode == EXIT_NO_GPU:
            return CFunctionOutcome(Stage.COMPILED, False, Failure(
                FailureKind.HARNESS, f"no usable GPU for the candidate ({stats.init_error or 'init failed'})",
                "harness"), (), 0.0, None, None, run_s)
        try:
            outs = read_outputs(w / "out.bin", task, len(prepared.test_cases)) if (w / "out.bin").exists() else []
        except OutputFormatError as exc:
            outs = []
            failure_fmt = str(exc)
        else:
            failure_fmt = None
        tests = []
        for i, (case, exp) in enumerate(zip(prepared.test_cases, prepared.expected_tests)):
            got = outs[i] if i < len(outs) else None
            kern = stats.case_kernels.get(i, {}).get("kernels")
            if got is None:
                tests.append(TestOutcome(i, dict(case.config), False, "no output: the call did not return",
                                         None, kern))
                continue
            m = compare_case(task, exp, got)
            tests.append(TestOutcome(i, dict(case.config), m is None, describe_mismatch(m) if m else "", m, kern))
        passed = sum(t.passed for t in tests)
        p = passed / len(tests)
        failure = _run_failure(run, stats, "hidden tests") or (
            Failure(FailureKind.CRASH, f"malformed outputs: {failure_fmt}") if failure_fmt else None)
        if failure is None and p < 1:
            first = next(t for t in tests if not t.passed)
            failure = Failure(FailureKind.WRONG_OUTPUT,
                              f"{len(tests) - passed} of {len(tests)} hidden tests failed; test {first.index} "
                              f"{first.config}: {first.message}")
        kernels_in_tests = sum(v.get("kernels", 0) for v in stats.case_kernels.values())
        probe_ok = stats.probe_error is None and all(v.get("valid", 0) for v in stats.case_kernels.values())
        evidence = GpuEvidence(source="cupti" if probe_ok else f"unavailable: {stats.probe_error}",
                               kernels_in_tests=kernels_in_tests, kernels_in_timed_call=None)
        if failure is not None:
            return CFunctionOutcome(Stage.RAN, False, failure, tuple(tests), p, None, evidence, run_s)
        if not probe_ok and settings.require_gpu_evidence:
            return CFunctionOutcome(Stage.RAN, False, Failure(
                FailureKind.HARNESS, f"cannot verify GPU work: profiler probe unavailable ({stats.probe_error})",
                "harness"), tuple(tests), p, None, evidence, run_s)
        if probe_ok and kernels_in_tests == 0:
            return CFunctionOutcome(Stage.RAN, False, Failure(
                FailureKind.NO_GPU_WORK, "outputs were right but no GPU kernel ran in any hidden test: "
                "the work was done on the host"), tuple(tests), p, None, evidence, run_s)
        if not settings.time_candidates or prepared.baseline_timing is None:
            return CFunctionOutcome(Stage.CORRECT, True, None, tuple(tests), p, None, evidence, run_s)

        # Timing: rotate over the timing input sets; outputs of the last call on each set are re-checked.
        _link_in(prepared.input_file("timing"), w / "timing.bin")
        with HOST.timing():
            trun = run_sandboxed(
                [str(exe), "time", "timing.bin", "tout.bin", "tstats.txt", str(settings.min_reps),
                 str(settings.max_reps), str(settings.budget_ms), str(settings.cv_target), str(settings.warmup)],
                w, env=env, limits=SandboxLimits(wall_s=settings.timing_timeout_s),
            )
        run_s += trun.wall_s
        tstats = _parse_stats(w / "tstats.txt")
        size = dict(prepared.timing_cases[0].config)
        tfail = _run_failure(trun, tstats, f"timing at size {size}")
        if tfail is not None:
            return CFunctionOutcome(Stage.CORRECT, False, tfail, tuple(tests), p, None, evidence, run_s)
        try:
            touts = read_outputs(w / "tout.bin", task, len(prepared.timing_cases))
        except (OutputFormatError, FileNotFoundError) as exc:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.CRASH, f"timing outputs: {exc}"),
                                    tuple(tests), p, None, evidence, run_s)
        for j, exp in enumerate(prepared.expected_timing):
            m = compare_case(task, exp, touts[j] if j < len(touts) else None)
            if m is not None:
                return CFunctionOutcome(Stage.CORRECT, False, Failure(
                    FailureKind.TIMING_RECHECK,
                    f"outputs of timed calls at size {size} are wrong: {describe_mismatch(m)}"),
                    tuple(tests), p, None, evidence, run_s)
        prof = tstats.profile or {}
        evidence = GpuEvidence(
            source=evidence.source, kernels_in_tests=kernels_in_tests,
            kernels_in_timed_call=prof.get("kernels"),
            kernel_ms=prof["kernel_ns"] / 1e6 if "kernel_ns" in prof else None,
            memcpy_ms=prof["memcpy_ns"] / 1e6 if "memcpy_ns" in prof else None,
            memset_ms=prof["memset_ns"] / 1e6 if "memset_ns" in prof else None,
            htod_bytes=prof.get("htod_bytes"), dtoh_bytes=prof.get("dtoh_bytes"),
        )
        if probe_ok and prof.get("kernels", 0) == 0:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(
                FailureKind.NO_GPU_WORK, f"no GPU kernel ran in a call at the timing size {size}: the work was "
                "done on the host"), tuple(tests), p, None, evidence, run_s)
        if not tstats.times_ms:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.CRASH, "timing produced no samples"),
                                    tuple(tests), p, None, evidence, run_s)
        timing = TimingStats.from_samples_ms(tstats.times_ms)
        return CFunctionOutcome(Stage.TIMED, True, None, tuple(tests), p, timing, evidence, run_s)
