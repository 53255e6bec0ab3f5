"""Evaluate a ``c_function`` candidate: hidden tests against the trusted reference, then timing.

The reference runs in its own (trusted) process and writes expected outputs into a directory only the harness
can read; the candidate's sandboxed process receives input files only.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cudaperf.harness.compare import compare_arrays, describe_mismatch
from cudaperf.harness.compile import BuildOutcome, ToolchainError, build_reference
from cudaperf.harness.driver import call_seed, driver_source, perturbs_inputs
from cudaperf.harness import hostload
from cudaperf.harness.environment import device_for_child
from cudaperf.harness.result import Failure, FailureKind, GpuEvidence, HostLoad, Stage, TestOutcome, TimingStats
from cudaperf.harness.sandbox import (CTL_FD, Control, SandboxLimits, SandboxRun, Workdir, copy_in, link_in,
                                      run_sandboxed, scrubbed_env)
from cudaperf.harness.quiet import HOST, BackgroundSlot
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.inputs import (CaseInputs, CaseOutputs, OutputFormatError, generate_case, open_untrusted,
                                   read_outputs, read_untrusted_text, write_inputs)
from cudaperf.tasks.schema import CFunctionTask, is_float_type, numpy_dtype


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
                   timeout_s: float, inputs_file: Path | None = None) -> tuple[list[CaseOutputs], list[float]]:
    with tempfile.TemporaryDirectory(prefix="cudaperf-expected-") as tmp:
        t = Path(tmp)
        if inputs_file is None:
            inputs_file = t / "in.bin"
            write_inputs(inputs_file, task, inputs)
        mode = mode_args[0]
        cmd = [str(exe), mode, str(inputs_file), str(t / "out.bin"), str(t / "stats.txt"), *mode_args[1:]]
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
        cal = hostload.calibrate_as_background(settings.host_calibration)
        with HOST.timing(), hostload.sampled(cal) as host:
            expected_timing, times = _run_reference(exe, _time_args(settings), timing, task,
                                                    settings.reference_timeout_s)
        baseline = replace(TimingStats.from_samples_ms(times), host=host.load)
    return PreparedCFunction(task=task, driver_c=driver_c, seed=seed, test_cases=tuple(tests),
                             expected_tests=tuple(expected), timing_cases=tuple(timing),
                             expected_timing=tuple(expected_timing), baseline_timing=baseline,
                             reference_exe=exe)


def time_baseline(prepared: PreparedCFunction, settings: HarnessSettings, owner=None) -> PreparedCFunction:
    """Time the sequential baseline of a preparation made with ``defer_baseline`` (a no-op when it is timed).

    The timed calls' outputs must equal the expected outputs computed earlier: a reference that does not repeat
    itself cannot be a baseline (HarnessError)."""
    if prepared.baseline_timing is not None or not prepared.timing_cases or prepared.reference_exe is None:
        return prepared
    task = prepared.task
    inputs = prepared.input_file("timing")  # written before the quiet period
    cal = hostload.calibrate_as_background(settings.host_calibration, wait=not settings.burst_preparation)
    with HOST.timing(owner), hostload.sampled(cal) as host:
        outs, times = _run_reference(prepared.reference_exe, _time_args(settings), list(prepared.timing_cases),
                                     task, settings.reference_timeout_s, inputs)
    for exp, got in zip(prepared.expected_timing, outs):
        m = compare_case(task, exp, got)
        if m is not None:
            raise HarnessError(f"task {task.id}: the C reference gave different outputs for the same inputs "
                               f"({describe_mismatch(m)}): it cannot serve as the baseline")
    return replace(prepared, baseline_timing=replace(TimingStats.from_samples_ms(times), host=host.load),
                   _files=prepared._files)


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
    window_reps: list[int] = field(default_factory=list)
    """Timed calls of each window, in order (the driver's ``window N reps R ...`` lines)."""
    window_warm: list[int] = field(default_factory=list)
    """Warm-up calls of each window."""
    window_span_ms: list[float] = field(default_factory=list)
    """Each window's in-process span, from its start to the end of its last timed call."""
    traced: list[dict[str, int]] = field(default_factory=list)
    """The traced (not timed) call of each window (GPU build): ``window``, ``case`` and the probe's counts."""
    kept_seeds: dict[int, int] = field(default_factory=dict)
    """Timing case -> the perturbation seed of its last timed call (whose outputs ``tout.bin`` holds)."""

    def windows(self) -> list[list[float]]:
        """The samples split by window; one window when the split does not add up."""
        if sum(self.window_reps) != len(self.times_ms):
            return [self.times_ms]
        out, i = [], 0
        for n in self.window_reps:
            out.append(self.times_ms[i:i + n])
            i += n
        return out


def _trusted(stats: _Stats, ready: str | None) -> _Stats:
    """The stats as far as the harness can trust them, given the ``ready probe 0|1`` line the driver sent before
    any candidate code ran (None: none came). The candidate's process can write its stats files, so a GPU start
    failure counts only without a ``ready`` line, and whether the probe traces is what that line said."""
    if ready is None or not ready.startswith("ready "):
        return stats
    probe_error = None if ready == "ready probe 1" else (stats.probe_error or "the driver reported no probe")
    return replace(stats, init_error=None, probe_error=probe_error)


def _parse_stats(path: Path) -> _Stats:
    try:
        return _parse_text(read_untrusted_text(path))
    except OSError:  # not a regular file: the candidate's doing, read as nothing
        return _parse_text("")


def _parse_text(text: str) -> _Stats:
    cuda_error = init_error = probe_error = None
    case_kernels: dict[int, dict[str, int]] = {}
    profile = None
    times: list[float] = []
    window_reps: list[int] = []
    window_warm: list[int] = []
    window_span: list[float] = []
    kept: dict[int, int] = {}
    traced: list[dict[str, int]] = []
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
        elif parts[0] == "window" and len(parts) >= 4 and parts[2] == "reps" and parts[3].isdigit():
            window_reps.append(int(parts[3]))
            kv = dict(zip(parts[4::2], parts[5::2]))
            if kv.get("warm", "").isdigit():
                window_warm.append(int(kv["warm"]))
            try:
                window_span.append(float(kv["span_ns"]) / 1e6)
            except (KeyError, ValueError):
                pass
        elif parts[0] == "traced" and len(parts) >= 5:
            kv = dict(zip(parts[1::2], parts[2::2]))
            traced.append({k: int(v) for k, v in kv.items() if re.fullmatch(r"\d+", v)})
        elif parts[0] == "kept" and len(parts) == 5 and parts[2].isdigit() and parts[4].isdigit():
            kept[int(parts[2])] = int(parts[4])
    return _Stats(cuda_error, init_error, probe_error, case_kernels, profile, times, window_reps, window_warm,
                  window_span, traced, kept)


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
    phases_s: dict = field(default_factory=dict)
    """Where the run's time went: tests, waiting for a quiet host, timing windows, the end of the process."""
    process_span: tuple[float, float] | None = None
    """When the candidate's process started and ended (``time.monotonic``), as the harness saw it."""
    window_spans: tuple[tuple[float, float], ...] = ()
    """When each of its timing windows began and ended (``time.monotonic``): command sent, ``timing_done`` read."""


def output_bytes(task: CFunctionTask, outputs: CaseOutputs) -> int:
    """The bytes a call must bring back from the device: the elements of its output arrays that are not zero (a
    zero can be set on the host with a memset, which is no computation: an honest stream compaction copies back
    its ``count`` selected elements and zeroes the tail on the host), or (no arrays, or all zero) its return
    value."""
    arrays = sum(np.count_nonzero(a) * a.itemsize
                 for a in (np.asarray(v) for k, v in outputs.values.items() if k != "return"))
    if arrays:
        return int(arrays)
    return int(np.dtype(numpy_dtype(task.returns)).itemsize) if task.returns != "void" else 0


def input_bytes(task: CFunctionTask, inputs: CaseInputs) -> int:
    """The bytes a call must bring to the device: the non-zero elements of its ``in`` and ``inout`` arrays (a zero
    can be set on the device with a memset)."""
    roles = {a.name: a.role for a in task.args}
    return int(sum(np.count_nonzero(a) * a.itemsize for a in (np.asarray(v) for k, v in inputs.values.items()
                                                                if roles.get(k) in ("in", "inout")) if a.ndim > 0))


def _smallest_fraction(pairs) -> float | None:
    """min(device-to-host bytes / output bytes) over ``(dtoh_bytes, output_bytes)`` pairs with output bytes."""
    fracs = [dtoh / need for dtoh, need in pairs if need]
    return min(fracs) if fracs else None


def _device_output_fraction(prepared: PreparedCFunction, stats: _Stats) -> float | None:
    """Over the hidden tests with a valid trace, the smallest (device-to-host bytes / output bytes)."""
    recs = [(stats.case_kernels.get(i) or {}, exp) for i, exp in enumerate(prepared.expected_tests)]
    return _smallest_fraction((r["dtoh_bytes"], output_bytes(prepared.task, exp)) for r, exp in recs
                              if r.get("valid") and "dtoh_bytes" in r)


def _run_failure(run: SandboxRun | None, stats: _Stats, during: str) -> Failure | None:
    """What went wrong with a run, from its stats file and (once it has ended) its exit; ``run`` None: the
    program is still alive, waiting for the harness's verdict."""
    if stats.init_error:
        return Failure(FailureKind.HARNESS, f"no usable GPU for the candidate ({stats.init_error})", "harness")
    if run is not None and run.timed_out:
        return Failure(FailureKind.TIMEOUT, f"{during}: {run.describe()}")
    if stats.cuda_error:
        return Failure(FailureKind.CUDA_ERROR, f"{during}: CUDA error {stats.cuda_error}")
    if run is not None and run.returncode != 0:
        tail = (run.stderr or run.stdout).strip()[-400:]
        return Failure(FailureKind.CRASH, f"{during}: the program {run.describe()}" + (f": {tail}" if tail else ""))
    return None


@dataclass(frozen=True)
class _TestVerdict:
    tests: tuple[TestOutcome, ...]
    pass_fraction: float
    failure: Failure | None
    evidence: GpuEvidence
    stage: Stage
    """RAN, or COMPILED when the candidate never reached its tests (no usable GPU)."""


def _judge_tests(prepared: PreparedCFunction, w: Path, run: SandboxRun | None,
                 settings: HarnessSettings, ready: str | None = None) -> _TestVerdict:
    """Compare the candidate's test outputs (in ``w``) with the expected ones; ``run`` None while the program
    waits for the verdict; ``ready``: the driver's first control line (see :func:`_trusted`)."""
    task = prepared.task
    stats = _trusted(_parse_stats(w / "stats.txt"), ready)
    # Only the driver's own record of a failed CUDA start (written before any candidate code runs) is the harness's
    # fault: a bare exit status EXIT_NO_GPU could be the candidate's exit(5), which is its crash.
    if stats.init_error:
        return _TestVerdict((), 0.0, Failure(
            FailureKind.HARNESS, f"no usable GPU for the candidate ({stats.init_error or 'init failed'})",
            "harness"), GpuEvidence(source="none", kernels_in_tests=0, kernels_in_timed_call=None), Stage.COMPILED)
    try:
        outs = read_outputs(w / "out.bin", task, len(prepared.test_cases)) if (w / "out.bin").exists() else []
    except (OutputFormatError, OSError) as exc:  # malformed, or not a regular file: the candidate's doing
        outs = []
        failure_fmt: str | None = str(exc)
    else:
        failure_fmt = None
    tests = []
    for i, (case, exp) in enumerate(zip(prepared.test_cases, prepared.expected_tests)):
        got = outs[i] if i < len(outs) else None
        kern = stats.case_kernels.get(i, {}).get("kernels")
        if got is None:
            tests.append(TestOutcome(i, dict(case.config), False, "no output: the call did not return", None, kern))
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
    if ready == "ready probe 1":  # the probe traces: a missing or invalid record was not written by the driver
        probe_ok = True
        untraced = [t.index for t in tests if t.passed and not stats.case_kernels.get(t.index, {}).get("valid")]
        if failure is None and untraced:
            failure = Failure(FailureKind.NO_GPU_WORK, f"the trace of hidden test {untraced[0]} is missing or "
                              "invalid: the candidate's process overwrote the harness's records")
    else:
        probe_ok = stats.probe_error is None and all(v.get("valid", 0) for v in stats.case_kernels.values())
    frac = _device_output_fraction(prepared, stats) if probe_ok else None
    evidence = GpuEvidence(source="cupti" if probe_ok else f"unavailable: {stats.probe_error}",
                           kernels_in_tests=kernels_in_tests, kernels_in_timed_call=None,
                           output_bytes_min_fraction=None if frac is None else round(frac, 4))
    if failure is None and not probe_ok and settings.require_gpu_evidence:
        failure = Failure(FailureKind.HARNESS, f"cannot verify GPU work: profiler probe unavailable "
                          f"({stats.probe_error})", "harness")
    if failure is None and probe_ok and kernels_in_tests == 0:
        failure = Failure(FailureKind.NO_GPU_WORK, "outputs were right but no GPU kernel ran in any hidden test: "
                          "the work was done on the host")
    # the byte rule applies to timed calls (a traced one, at the timing size, see traced_evidence); a hidden test
    # at a small size may be served from the host, and its fraction is only recorded
    return _TestVerdict(tuple(tests), p, failure, evidence, Stage.RAN)


@dataclass(frozen=True)
class TimingWindow:
    """One timing window of a candidate (or of the baseline): the timing rules applied to a slice of the run."""

    min_reps: int
    max_reps: int
    budget_ms: float
    cv_target: float
    warmup: int
    warmup_ms: float

    @staticmethod
    def of(settings: HarnessSettings, rounds: int, first: bool) -> "TimingWindow":
        """The window of one of ``rounds`` rounds: the run's repetitions and budget shared among them; the full
        warm-up before the first, a short one before each later window (the clocks are up)."""
        return TimingWindow(min_reps=max(1, -(-settings.min_reps // rounds)),
                            max_reps=max(1, -(-settings.max_reps // rounds)),
                            budget_ms=settings.budget_ms / rounds, cv_target=settings.cv_target,
                            warmup=settings.warmup if first else 1, warmup_ms=settings.warmup_ms)

    def command(self, secret: int = 0, perturb: bool = False) -> str:
        """The driver's command: ``secret`` (nonzero) picks the traced call and, with ``perturb``, every call's
        input perturbation (see the driver)."""
        return (f"time {self.min_reps} {self.max_reps} {self.budget_ms:.3f} {self.cv_target} {self.warmup} "
                f"{self.warmup_ms:.3f} {secret} {int(perturb)}")


def check_timer(window_ext_ms: list[float], tstats: _Stats, settings: HarnessSettings) -> tuple[str | None, str]:
    """Each timing window's in-process record against the harness's clock: (what disagrees, or None; the
    ratios in-process span / harness clock, for the record)."""
    st, n = settings, len(window_ext_ms)
    if len(tstats.window_span_ms) != n or len(tstats.window_reps) != n:
        return (f"the driver recorded {len(tstats.window_span_ms)} timing windows where the harness ran {n}",
                "inconsistent")
    wins = tstats.windows()
    if sum(tstats.window_reps) != len(tstats.times_ms) or len(wins) != n:
        return f"{len(tstats.times_ms)} timed calls where the windows report {sum(tstats.window_reps)}", \
            "inconsistent"
    ratios = []
    for i, (ext, span, samples) in enumerate(zip(window_ext_ms, tstats.window_span_ms, wins)):
        total = sum(samples)
        ratios.append(f"{span / ext:.3f}" if ext > 0 else "n/a")
        if total > span * 1.001 + 0.01:
            return (f"window {i}: the timed calls add up to {total:.3f} ms, more than the window's span of "
                    f"{span:.3f} ms", "inconsistent")
        if span > ext + 1.0:
            return (f"window {i}: the driver's clock measured {span:.1f} ms where the harness's measured "
                    f"{ext:.1f} ms", "span/clock " + ",".join(ratios))
        if span < ext * (1 - st.timer_check_rel) - st.timer_check_abs_ms:
            return (f"window {i}: the driver's clock measured {span:.1f} ms where the harness's measured "
                    f"{ext:.1f} ms (a timer forged in the candidate's process?)", "span/clock " + ",".join(ratios))
    return None, "span/clock " + ",".join(ratios)



def window_cpu_problem(window_ext_ms: list[float], window_cpu_s: list[float | None],
                       settings: HarnessSettings) -> tuple[float | None, str | None]:
    """Each timing window's CPU time of the run against its wall time on the harness's clock: (the most cores kept
    busy in a window, rounded, or None without a reading; what is wrong when host threads worked beside the calls,
    more than ``settings.max_window_cpu_cores`` plus ``window_cpu_slack_s``, else None)."""
    pairs = [(ms / 1e3, cpu) for ms, cpu in zip(window_ext_ms, window_cpu_s) if cpu is not None and ms > 0]
    if not pairs:
        return None, None
    cores = max(cpu / wall for wall, cpu in pairs)
    limit = settings.max_window_cpu_cores
    if limit > 0:
        for i, (wall, cpu) in enumerate(pairs):
            if cpu > limit * wall + settings.window_cpu_slack_s:
                return round(cores, 3), (
                    f"timing window {i}: the program used {cpu * 1e3:.0f} ms of CPU time in {wall * 1e3:.0f} ms "
                    f"({cpu / wall:.1f} cores, more than {limit:g}: HarnessSettings.max_window_cpu_cores): host "
                    "threads worked beside the calls, so the outputs are not shown to be the GPU's work")
    return round(cores, 3), None


def traced_evidence(prepared: PreparedCFunction, tstats: _Stats, windows: int,
                    settings: HarnessSettings) -> tuple[float | None, str | None]:
    """The traced call of each window (one of its first timed calls, drawn by the window's secret): a kernel
    ran, and at least ``outputs_from_device_fraction`` of the output bytes came back from the device. Returns the
    smallest fraction seen and what is wrong, if anything."""
    if len(tstats.traced) != windows:
        return None, f"the driver traced {len(tstats.traced)} calls in {windows} timing windows"
    for rec in tstats.traced:
        if not 0 <= rec.get("case", -1) < len(prepared.expected_timing) or not rec.get("valid"):
            return None, "a timed call's trace is missing or malformed"
        if rec.get("kernels", 0) == 0:
            return None, ("no GPU kernel ran in a timed call at the timing size: the outputs were computed on the "
                          "host")
    worst = _smallest_fraction((rec.get("dtoh_bytes", 0),
                                output_bytes(prepared.task, prepared.expected_timing[rec["case"]]))
                               for rec in tstats.traced)
    frac = None if worst is None else round(worst, 4)
    need_frac = settings.outputs_from_device_fraction
    if worst is not None and need_frac > 0 and worst < need_frac:
        return frac, (
            f"a timed call copied only {100 * worst:.0f} % of its output bytes from the device: outputs must come "
            "back with cudaMemcpy from device memory (host work behind a token kernel, and outputs written "
            "through mapped or managed memory, get no credit)")
    worst_in = input_fraction(prepared, tstats)
    need_in = settings.inputs_to_device_fraction
    if worst_in is not None and need_in > 0 and worst_in < need_in:
        return frac, (
            f"a timed call copied only {100 * worst_in:.0f} % of its input bytes to the device: the inputs must go "
            "to device memory with cudaMemcpy (outputs computed on the host beside a kernel that does not read "
            "them, and inputs read through mapped or managed memory, get no credit)")
    return frac, None


def input_fraction(prepared: PreparedCFunction, tstats: _Stats) -> float | None:
    """Over the traced timed calls, the smallest (host-to-device bytes / input bytes); None without input arrays."""
    return _smallest_fraction((rec.get("htod_bytes", 0), input_bytes(prepared.task, prepared.timing_cases[rec["case"]]))
                              for rec in tstats.traced)


def kernel_share_problem(profile: dict[str, int] | None, settings: HarnessSettings) -> str | None:
    """The kernels' share of the call traced after timing (its GPU time over the call's wall time, both from the
    driver's CUPTI profile) against ``settings.min_kernel_share``: what is wrong when it falls short (the outputs
    were computed on the host behind a token kernel), else None. Nothing is ruled on without the profile's
    ``kernel_ns`` and ``call_ns`` (no CUPTI evidence, the CPU build) or with the floor at 0."""
    prof = profile or {}
    floor = settings.min_kernel_share
    kernel_ns, call_ns = prof.get("kernel_ns"), prof.get("call_ns")
    if floor <= 0 or kernel_ns is None or not call_ns:
        return None
    share = kernel_ns / call_ns
    if share >= floor:
        return None
    return (f"the kernels ran for {kernel_ns / 1e3:.1f} us of a {call_ns / 1e6:.2f} ms call (kernel share "
            f"{share:.5f}, below the floor of {floor:g}, HarnessSettings.min_kernel_share): the outputs were "
            "computed on the host; no credit")


def kept_call_seeds(secret: int, warm: int, reps: int, n_sets: int) -> list[int]:
    """The perturbation seeds of the last timed call on each of ``n_sets`` timing input sets in a window of
    ``warm`` warm-up calls and ``reps`` timed calls (timed call r runs on set r mod n_sets)."""
    return [call_seed(secret, warm + c + n_sets * ((reps - 1 - c) // n_sets)) for c in range(n_sets)]


class CandidateRun:
    """One candidate's sandboxed process for a task: its hidden tests, then any number of timing windows (the
    process stays alive and idle between them, blocked on its stdin), then its timing outputs re-checked.

    :meth:`start` runs the tests and returns once they are judged; :meth:`time_window` runs one window;
    :meth:`finish` ends the process and returns the outcome. The process lives on a thread of its own, so a
    batch can keep several of a task's candidates waiting and interleave their windows (see
    :func:`run_c_function_group`)."""

    def __init__(self, prepared: PreparedCFunction, build: BuildOutcome, settings: HarnessSettings,
                 gpu_index: int | None = None, recheck_after: "RecheckGate | None" = None) -> None:
        assert build.exe is not None
        self.prepared, self.build, self.settings, self.gpu_index = prepared, build, settings, gpu_index
        self.recheck_after = recheck_after
        """When set: the re-check of the timed calls' outputs (a reference run, background host work that timing
        windows wait for) waits for this gate, so that a group's re-checks run in batches between its windows."""
        self.want_timing = settings.time_candidates and prepared.baseline_timing is not None
        self.verdict: _TestVerdict | None = None
        self.waiting = False
        """Tests passed and the process waits for timing windows."""
        self.windows_tried = 0
        self.window_failed: str | None = None
        self._cmds: queue.Queue[TimingWindow | None] = queue.Queue()
        self.perturb = settings.timing_recheck and perturbs_inputs(prepared.task)
        self.window_secrets: list[int] = []
        """The secret of each window sent (its traced call; with ``perturb``, its calls' input perturbations)."""
        self.ready: str | None = None
        """The driver's first control line, ``ready probe 0|1``, sent before any candidate code ran."""
        self._window_records: list[bytes] = []
        """The timing stats file as read at each ``timing_done`` (window i's lines are judged from record i)."""
        self._written_record: bytes | None = None
        self._closed_record: bytes | None = None
        self._timing_outputs: list[CaseOutputs] | Exception | None = None
        """The timing outputs as read at ``timing_written`` (an exception when unreadable; None: never written)."""
        self.window_ext_ms: list[float] = []
        """Each window as the harness's clock saw it: command sent to ``timing_done`` received."""
        self.window_spans: list[tuple[float, float]] = []
        self.window_cpu_s: list[float | None] = []
        """Each window's CPU time of the run (all its threads, read from outside it; None: unreadable here)."""
        self._events: queue.Queue[tuple[str, object]] = queue.Queue()
        self._outcome: CFunctionOutcome | None = None
        self._error: BaseException | None = None
        self._w: Path | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._stopped = False
        self.gone = threading.Event()
        """Set once the process has ended (and everything it started with it), before its outputs are judged."""
        self.released = threading.Event()
        """Set once the harness needs nothing more from the live process (its records are read, or it failed and
        was told to stop): what is left is its exit (:func:`_run_overlapped` starts the next candidate then)."""
        self.process_span: tuple[float, float] | None = None
        """The process's start and end (``time.monotonic``), as the harness saw them."""
        self.phases_s = {"setup_s": 0.0, "tests_s": 0.0, "quiet_wait_s": 0.0, "windows_s": 0.0, "close_s": 0.0,
                         "exit_s": 0.0, "judge_s": 0.0}
        """``setup_s``: sandbox and process start to the driver's ``ready`` line (its CUDA context up);
        ``tests_s``: from there to the tests' verdict; ``close_s``: ``stop`` to the last record read;
        ``exit_s``: ``stop`` to the process gone (``close_s`` included)."""
        self._t_start = 0.0
        self.host: HostLoad | None = None
        """The host's state around the first timing window (no calibration run: it would lengthen every window)."""
        self._bg: BackgroundSlot | None = None

    # -- the orchestrating thread's side ---------------------------------------------------------------------
    def start(self) -> _TestVerdict | None:
        """Run the hidden tests; the verdict, or None when the process ended before reporting them."""
        self.launch()
        return self.tests_verdict()

    def launch(self) -> None:
        """Start the process (its sandbox, CUDA context and hidden tests) without waiting for them."""
        self._thread.start()

    def tests_verdict(self) -> _TestVerdict | None:
        """After :meth:`launch`: wait for the hidden tests; as :meth:`start` returns (a harness error raised)."""
        kind, payload = self._events.get()
        if kind == "error":
            self._thread.join()
            raise payload  # type: ignore[misc]
        return payload if kind == "tests" else None  # type: ignore[return-value]

    def time_window(self, window: TimingWindow) -> bool:
        """One timing window; False when the process is not waiting or the window failed (it then ends)."""
        if not self.waiting:
            return False
        self._cmds.put(window)
        _, ok = self._events.get()
        if not ok:
            self.waiting = False
        return bool(ok)

    def stop(self) -> None:
        """Tell the process to end (it writes its timing outputs and exits) without waiting for it."""
        if not self._stopped:
            self._stopped = True
            self.waiting = False
            self._cmds.put(None)

    def finish(self) -> CFunctionOutcome:
        self.stop()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        return self._outcome

    # -- the process's thread ----------------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self._outcome = self._run()
        except BaseException as exc:  # a harness error: handed to the orchestrating thread
            self._error = exc
            self._events.put(("error", exc))
        finally:
            self.released.set()
            self.gone.set()

    def _hold_background(self) -> None:
        """Exclusive timing: the process's own host work (its start and hidden tests, its exit) is background
        work, kept out of every timed window of every GPU."""
        if HOST.exclusive and self._bg is None:
            self._bg = HOST.hold_background()

    def _release_background(self) -> None:
        if self._bg is not None:
            self._bg.release()
            self._bg = None

    def _control(self, ctl: Control) -> None:
        try:
            self._converse(ctl)
        finally:
            if self._stop_sent is not None:
                self.phases_s["close_s"] = time.monotonic() - self._stop_sent
            self.released.set()

    def _converse(self, ctl: Control) -> None:
        settings = self.settings
        t0 = time.monotonic()
        line = ctl.read_line(timeout_s=settings.test_timeout_s)
        t_ready = time.monotonic()
        if line is not None and line.startswith("ready "):
            self.ready = line
            self.phases_s["setup_s"] = t_ready - self._t_start
            line = ctl.read_line(timeout_s=max(0.1, settings.test_timeout_s - (time.monotonic() - t0)))
        self.phases_s["tests_s"] = time.monotonic() - (t_ready if self.ready is not None else t0)
        if line != "tests_done":
            if line is None and not ctl.eof:  # the tests ran past their limit
                ctl.kill()
            self._events.put(("ended", None))
            return  # the program ended (or broke the protocol): judged from its files once it is gone
        assert self._w is not None
        self.verdict = _judge_tests(self.prepared, self._w, None, settings, self.ready)
        ok = self.verdict.failure is None and self.want_timing
        self.waiting = ok
        if ok:
            self._release_background()  # its windows are timing; the slot comes back for the exit
        self._events.put(("tests", self.verdict))
        if not ok:
            ctl.send("stop")
            self._stop_sent = time.monotonic()
            return
        while True:
            try:
                cmd = self._cmds.get(timeout=max(0.0, ctl.deadline - time.monotonic()))
            except queue.Empty:
                cmd = None
            if cmd is None:
                self._hold_background()
                ctl.send("stop")
                self._stop_sent = time.monotonic()
                if self.windows_tried:
                    self._read_closing_records(ctl)
                return
            t_wait = time.monotonic()
            with HOST.timing(self.gpu_index), hostload.sampled() as host:
                t_win = time.monotonic()
                self.phases_s["quiet_wait_s"] += t_win - t_wait
                self.windows_tried += 1
                secret = secrets.randbits(63) | 1
                self.window_secrets.append(secret)
                cpu0 = ctl.cpu_s()
                t_sent = time.monotonic()
                done = (ctl.read_line(timeout_s=settings.timing_timeout_s)
                        if ctl.send(cmd.command(secret, self.perturb)) else None)
                t_done = time.monotonic()
                cpu1 = ctl.cpu_s()
                self.window_ext_ms.append((t_done - t_sent) * 1e3)
                self.window_spans.append((t_sent, t_done))
                self.window_cpu_s.append(None if cpu0 is None or cpu1 is None else cpu1 - cpu0)
                self.phases_s["windows_s"] += t_done - t_win
            if host.load is not None and self.host is None:
                self.host = host.load  # the first window's (with several rounds, the others' are alike)
            if done != "timing_done":
                if done is None and not ctl.eof:
                    ctl.kill()
                    self.window_failed = f"a timing window ran past its {settings.timing_timeout_s:.0f} s limit"
                self._events.put(("window", False))
                return
            self._window_records.append(self._read_record("tstats.txt"))  # the program waits: no code of its runs
            self._events.put(("window", True))

    def _read_record(self, name: str) -> bytes:
        assert self._w is not None
        try:
            with open_untrusted(self._w / name) as fh:
                return fh.read(64 << 20)
        except OSError:
            return b""

    def _read_closing_records(self, ctl: Control) -> None:
        """After ``stop``: the timing outputs and records once written (``timing_written``), then the traced
        call's profile (``closed``), each read while the program waits, so that no code of the candidate's (its
        last call, its static destructors and exit handlers) can rewrite them before the harness reads them."""
        limit = self.settings.timing_timeout_s
        if ctl.read_line(timeout_s=limit) != "timing_written":
            return
        self._written_record = self._read_record("tstats.txt")
        assert self._w is not None
        try:
            self._timing_outputs = read_outputs(self._w / "tout.bin", self.prepared.task,
                                                len(self.prepared.timing_cases))
        except (OutputFormatError, OSError) as exc:
            self._timing_outputs = exc
        if not ctl.send("go"):
            return
        line = ctl.read_line(timeout_s=limit)
        if line == "closed":
            self._closed_record = self._read_record("tstats.txt")
        elif line is None and not ctl.eof:
            ctl.kill()  # its last (traced) call ran past the limit

    def _run(self) -> CFunctionOutcome:
        self._hold_background()
        try:
            return self._run_process()
        finally:
            self._release_background()

    def _run_process(self) -> CFunctionOutcome:
        prepared = self.prepared
        extra = {"CUDA_VISIBLE_DEVICES": device_for_child(self.gpu_index)} if self.gpu_index is not None else {}
        with Workdir(prefix="cudaperf-run-") as w:
            self._w = w
            exe = copy_in(self.build.exe, w, "candidate")  # type: ignore[arg-type]
            link_in(prepared.input_file("tests"), w / "tests.bin")
            if self.want_timing:
                link_in(prepared.input_file("timing"), w / "timing.bin")
            env = scrubbed_env(w, extra)
            argv = [str(exe), "testtime", "tests.bin", "out.bin", "stats.txt", "timing.bin", "tout.bin",
                    "tstats.txt", CTL_FD]
            # Each phase has its own limit (tests, every timing window); the process may wait idle between
            # phases while the task's other candidates run, so its own wall-clock limit is only a backstop.
            self._stop_sent = None
            t_start = self._t_start = time.monotonic()
            run = run_sandboxed(argv, w, env=env, control=self._control,
                                limits=SandboxLimits(wall_s=_PROCESS_BACKSTOP_S,
                                                     exit_grace_s=self.settings.exit_grace_s))
            t_end = time.monotonic()
            self.process_span = (t_start, t_end)
            self.gone.set()  # the process and all it started are gone (run_sandboxed kills what is left)
            # its host work is over: judging takes background slots of its own where it needs them (a re-check
            # waiting for its batch must not hold one: the next window would wait for it, and it for the window)
            self._release_background()
            if self._stop_sent is not None:
                self.phases_s["exit_s"] = t_end - self._stop_sent
            out = self._judge(w, run)
            self.phases_s["judge_s"] = time.monotonic() - t_end
            return replace(out, phases_s={k: round(v, 4) for k, v in self.phases_s.items()},
                           process_span=self.process_span, window_spans=tuple(self.window_spans))

    def _judge(self, w: Path, run: SandboxRun) -> CFunctionOutcome:
        prepared, task = self.prepared, self.prepared.task
        run_s = run.wall_s
        verdict = self.verdict or _judge_tests(prepared, w, run, self.settings, self.ready)
        if self.verdict is None and self.ready is not None and verdict.failure is None:
            # it ended without reporting its tests, after its code ran: what its files say is not evidence (its
            # exit handlers could have written them)
            verdict = replace(verdict, failure=Failure(FailureKind.CRASH, (
                f"the program ended during its hidden tests without reporting them ({run.describe()})")))
        tests, p, evidence = verdict.tests, verdict.pass_fraction, verdict.evidence
        if verdict.failure is not None:
            return CFunctionOutcome(verdict.stage, False, verdict.failure, tests, p, None, evidence, run_s)
        if run.exit_overrun:  # every record was read, but the program would not end: no credit
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.TIMEOUT, (
                f"the program {run.describe()}; killed")), tests, p, None, evidence, run_s)
        if not self.windows_tried:
            return CFunctionOutcome(Stage.CORRECT, True, None, tests, p, None, evidence, run_s)

        # Timing rotated over the timing input sets; outputs of the last call on each set are re-checked.
        tstats = _trusted(self._timing_stats(w), self.ready)
        size = dict(prepared.timing_cases[0].config)
        tfail = (Failure(FailureKind.TIMEOUT, f"timing at size {size}: {self.window_failed}")
                 if self.window_failed else _run_failure(run, tstats, f"timing at size {size}"))
        if tfail is not None:
            return CFunctionOutcome(Stage.CORRECT, False, tfail, tests, p, None, evidence, run_s)
        touts = self._timing_outputs
        if not isinstance(touts, list):
            why = (f"timing outputs: {touts}" if touts is not None else
                   "the program did not write its timing outputs when told to stop")
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.CRASH, why), tests, p, None, evidence,
                                    run_s)
        probe_ok = evidence.source == "cupti"
        frac, problem = (traced_evidence(prepared, tstats, self.windows_tried, self.settings) if probe_ok
                         else (None, None))
        in_frac = input_fraction(prepared, tstats) if probe_ok and len(tstats.traced) == self.windows_tried else None
        evidence = replace(evidence, output_bytes_min_fraction=frac,
                           input_bytes_min_fraction=None if in_frac is None else round(in_frac, 4))
        if problem is not None:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.NO_GPU_WORK, problem), tests, p, None,
                                    evidence, run_s)
        cores, problem = window_cpu_problem(self.window_ext_ms, self.window_cpu_s, self.settings)
        evidence = replace(evidence, window_cpu_cores=cores)
        if problem is not None:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.NO_GPU_WORK, problem), tests, p, None,
                                    evidence, run_s)
        problem, timer_note = check_timer(self.window_ext_ms, tstats, self.settings)
        evidence = replace(evidence, timer_check=timer_note)
        if problem is None:
            expected, problem = self._expected_timing(tstats)
        if problem is not None:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(
                FailureKind.TIMER_MISMATCH, f"timing at size {size}: {problem}; no credit"), tests, p, None,
                evidence, run_s)
        for j, exp in enumerate(expected):
            m = compare_case(task, exp, touts[j] if j < len(touts) else None)
            if m is not None:
                return CFunctionOutcome(Stage.CORRECT, False, Failure(
                    FailureKind.TIMING_RECHECK,
                    f"outputs of timed calls at size {size} are wrong: {describe_mismatch(m)}"),
                    tests, p, None, evidence, run_s)
        prof = tstats.profile or {}
        evidence = GpuEvidence(
            source=evidence.source, kernels_in_tests=evidence.kernels_in_tests,
            kernels_in_timed_call=prof.get("kernels"),
            kernel_ms=prof["kernel_ns"] / 1e6 if "kernel_ns" in prof else None,
            memcpy_ms=prof["memcpy_ns"] / 1e6 if "memcpy_ns" in prof else None,
            memset_ms=prof["memset_ns"] / 1e6 if "memset_ns" in prof else None,
            htod_bytes=prof.get("htod_bytes"), dtoh_bytes=prof.get("dtoh_bytes"),
            call_ms=prof["call_ns"] / 1e6 if "call_ns" in prof else None,
            kernel_share=(round(prof["kernel_ns"] / prof["call_ns"], 4)
                          if prof.get("call_ns") and "kernel_ns" in prof else None),
            gpu_share=(round(sum(prof.get(k, 0) for k in ("kernel_ns", "memcpy_ns", "memset_ns")) / prof["call_ns"], 4)
                       if prof.get("call_ns") else None),
            output_bytes_min_fraction=evidence.output_bytes_min_fraction,
            input_bytes_min_fraction=evidence.input_bytes_min_fraction, timer_check=evidence.timer_check,
            window_cpu_cores=evidence.window_cpu_cores,
        )
        if probe_ok and prof.get("kernels", 0) == 0:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(
                FailureKind.NO_GPU_WORK, f"no GPU kernel ran in a call at the timing size {size}: the work was "
                "done on the host"), tests, p, None, evidence, run_s)
        problem = kernel_share_problem(prof, self.settings) if probe_ok else None
        if problem is not None:  # the evidence stays in the result: the shares are what the verdict rests on
            return CFunctionOutcome(Stage.CORRECT, False, Failure(
                FailureKind.NO_GPU_WORK, f"at the timing size {size}, {problem}"), tests, p, None, evidence, run_s)
        if not tstats.times_ms:
            return CFunctionOutcome(Stage.CORRECT, False, Failure(FailureKind.CRASH, "timing produced no samples"),
                                    tests, p, None, evidence, run_s)
        timing = replace(TimingStats.from_windows_ms(tstats.windows()), host=self.host)
        return CFunctionOutcome(Stage.TIMED, True, None, tests, p, timing, evidence, run_s)


    def _timing_stats(self, w: Path) -> _Stats:
        """The timing records as the harness read them while the program waited: window i from the record read
        at its ``timing_done``, the kept seeds from ``timing_written``, the profile from ``closed``; errors from
        the file as it was left."""
        final = _parse_stats(w / "tstats.txt")
        if not self._window_records:
            return final
        times: list[float] = []
        reps, warm, span, traced = [], [], [], []
        for i, rec in enumerate(self._window_records):
            st = _parse_text(rec.decode(errors="replace"))
            wins = st.windows()
            if len(st.window_reps) != i + 1 or sum(st.window_reps) != len(st.times_ms) or len(wins) != i + 1:
                reps.append(-1)  # does not add up: check_timer refuses it
                continue
            times += wins[i]
            reps.append(st.window_reps[i])
            warm += st.window_warm[i:i + 1]
            span += st.window_span_ms[i:i + 1]
            traced += [t for t in st.traced if t.get("window") == i]
        written = _parse_text(self._written_record.decode(errors="replace")) if self._written_record else None
        closed = _parse_text(self._closed_record.decode(errors="replace")) if self._closed_record else None
        return replace(final, times_ms=times, window_reps=reps, window_warm=warm, window_span_ms=span,
                       traced=traced, kept_seeds=written.kept_seeds if written else {},
                       profile=closed.profile if closed else None)

    def _expected_timing(self, tstats: _Stats) -> tuple[list[CaseOutputs], str | None]:
        """What the last timed call on each timing case should have returned: the reference run on the same
        perturbed inputs (the seeds the harness derives from the last window's secret and the driver's counts),
        or, for inputs that are not perturbed, the preparation's expected outputs."""
        prepared = self.prepared
        if not self.perturb or not self.window_secrets:
            return list(prepared.expected_timing), None
        n = len(prepared.timing_cases)
        reps, warm = tstats.window_reps[-1], (tstats.window_warm[-1] if tstats.window_warm else None)
        if warm is None or reps < n:
            return [], f"the last window reports {reps} timed calls and warm-up {warm} for {n} input sets"
        seeds = kept_call_seeds(self.window_secrets[-1], warm, reps, n)
        bad = [c for c in range(n) if tstats.kept_seeds.get(c) != seeds[c]]
        if bad:
            return [], f"the driver kept the outputs of another call on input set {bad[0]} than the last timed one"
        assert prepared.reference_exe is not None
        if self.recheck_after is not None:  # deferred: the task's windows first, then the re-checks side by side
            t_wait = time.monotonic()
            self.recheck_after.wait()
            self.phases_s["recheck_wait_s"] = time.monotonic() - t_wait
        t_ref = time.monotonic()
        with HOST.background():
            outs, _ = _run_reference(prepared.reference_exe, ["ptest", *map(str, seeds)], list(prepared.timing_cases),
                                     prepared.task, self.settings.reference_timeout_s, prepared.input_file("timing"))
        self.phases_s["recheck_s"] = time.monotonic() - t_ref
        return outs, None


_PROCESS_BACKSTOP_S = 6 * 3600.0


def run_c_function(prepared: PreparedCFunction, build: BuildOutcome, settings: HarnessSettings,
                   gpu_index: int | None = None) -> CFunctionOutcome:
    """Run a compiled candidate's hidden tests and, when it passes them, time it: one sandboxed process does both
    (one CUDA context, clocks already up), pausing between them for the harness's verdict on its test outputs."""
    run = CandidateRun(prepared, build, settings, gpu_index)
    run.start()
    if run.waiting:
        run.time_window(TimingWindow.of(settings, 1, first=True))
    return run.finish()


def baseline_window(prepared: PreparedCFunction, settings: HarnessSettings, window: TimingWindow,
                    owner=None) -> list[float]:
    """One more timing window of the sequential baseline (on a quiet host); its outputs must repeat."""
    task = prepared.task
    assert prepared.reference_exe is not None
    args = ["time", str(window.min_reps), str(window.max_reps), str(window.budget_ms), str(window.cv_target),
            str(settings.reference_warmup)]
    with HOST.timing(owner):
        outs, times = _run_reference(prepared.reference_exe, args, list(prepared.timing_cases), task,
                                     settings.reference_timeout_s, prepared.input_file("timing"))
    for exp, got in zip(prepared.expected_timing, outs):
        m = compare_case(task, exp, got)
        if m is not None:
            raise HarnessError(f"task {task.id}: the C reference gave different outputs for the same inputs "
                               f"({describe_mismatch(m)}): it cannot serve as the baseline")
    return times


HARNESS_FAULTS = (HarnessError, ToolchainError, OSError)
"""Errors of the harness's own (a sandbox that cannot start, a reference that fails): the candidate's result is
unscored, never the candidate's failure."""


def _run_pipelined(prepared: PreparedCFunction, builds: list[tuple[object, BuildOutcome]],
                   settings: HarnessSettings, gpu_index: int | None, should_stop,
                   ) -> list[tuple[object, CFunctionOutcome | Exception]]:
    """One timing window per candidate, candidates in turn, each candidate's end overlapping the next one's start
    and hidden tests. A candidate is timed only once the previous one is gone and judged, so timing never shares
    the GPU. With ``settings.pipeline_candidates`` (trusted candidates) the next one starts as soon as the previous
    one is told to stop, beside the end of its process (its timing outputs, one traced call, context teardown);
    otherwise (``settings.overlap_judging``) only once the previous process is gone: just the harness's judging
    overlaps, and no two candidate processes ever exist at once. A harness fault of one candidate is its outcome
    (an exception, for an unscored result); the others go on."""
    outcomes: list[tuple[object, CFunctionOutcome | Exception]] = []
    prev: tuple[object, CandidateRun] | None = None
    wait_gone = not settings.pipeline_candidates

    def end_prev() -> None:
        nonlocal prev
        if prev is not None:
            key, run, prev = prev[0], prev[1], None
            try:
                outcomes.append((key, run.finish()))
            except HARNESS_FAULTS as exc:
                outcomes.append((key, exc))

    try:
        for key, build in builds:
            if should_stop():
                break
            r = CandidateRun(prepared, build, settings, gpu_index)
            try:
                try:
                    r.start()
                finally:
                    end_prev()
                if r.waiting:
                    r.time_window(TimingWindow.of(settings, 1, first=True))
            except HARNESS_FAULTS as exc:
                r.stop()
                r.gone.wait()
                outcomes.append((key, exc))
                continue
            r.stop()
            if wait_gone:
                r.gone.wait()
            prev = (key, r)
    finally:
        end_prev()
    return outcomes


CONTENTION_KINDS = frozenset({FailureKind.TIMEOUT, FailureKind.CRASH, FailureKind.CUDA_ERROR, FailureKind.HARNESS})
"""Failures of a run's hidden tests that another process on the same GPU could have caused (GPU time taken, device
memory held, a context that could not be made): under ``overlap_runs`` a run that overlapped the previous candidate's
exit and ends in one of them is run again alone. A wrong output cannot come from another process (their address
spaces, files, namespaces and user ids are apart), so it stands."""


def contention_suspect(run: "CandidateRun") -> bool:
    """Whether ``run``'s hidden tests ended in a way another process on its GPU could have caused."""
    v = run.verdict
    return v is None or (v.failure is not None and v.failure.kind in CONTENTION_KINDS)


def overlap_isolated() -> str | None:
    """Why two candidates' processes may not be alive at once here (None: they may): each run needs a PID namespace
    of its own, so that neither can see, signal or trace the other."""
    from cudaperf.harness.sandbox import base_level

    level = base_level()
    return None if level != "session" else "no PID namespaces here (sandbox level 'session')"


class RecheckGate:
    """Holds a group's re-checks of timed outputs (reference runs: host work that no timing window may share) and
    lets them go in batches, side by side, between two windows: one wait of the next window for a batch instead of
    one for each re-check, and never more than a batch of candidates' timing outputs held in memory waiting."""

    def __init__(self, batch: int) -> None:
        self.batch = max(1, batch)
        self._cv = threading.Condition()
        self._generation = 0
        self._waiting = 0
        self._open = False

    def wait(self) -> None:
        """A candidate's thread, before its re-check: wait for its batch to be let go."""
        with self._cv:
            if self._open:
                return
            gen = self._generation
            self._waiting += 1
            self._cv.wait_for(lambda: self._open or self._generation != gen)

    def release_if_full(self) -> bool:
        """Between windows: let the waiting re-checks go once a batch of them waits."""
        with self._cv:
            if self._waiting < self.batch:
                return False
            self._generation += 1
            self._waiting = 0
            self._cv.notify_all()
            return True

    def open(self) -> None:
        """The group's last window is done: every re-check goes, now and later."""
        with self._cv:
            self._open = True
            self._cv.notify_all()


def _run_overlapped(prepared: PreparedCFunction, builds: list[tuple[object, BuildOutcome]],
                    settings: HarnessSettings, gpu_index: int | None, should_stop,
                    ) -> list[tuple[object, CFunctionOutcome | Exception]]:
    """``settings.overlap_runs``: candidates in turn, one timing window each, the next candidate's process (its
    sandbox, CUDA context and hidden tests) starting as soon as the previous one is released (told to stop and its
    last record read), beside the previous one's exit and judging. Safe for a policy's samples:

    * a candidate's timing window opens only once the previous candidate's process is gone, so timing never shares
      the GPU with another candidate (the previous one's judging is harness work, kept off timed windows by
      :mod:`cudaperf.harness.quiet` like any reference run);
    * the re-checks of the timed calls' outputs (a reference run each, host work that no timing window may share)
      wait and go in batches of ``settings.recheck_batch``, side by side, between two windows (and the rest after
      the task's last one), instead of holding up each next window;
    * two processes alive at once are apart (PID, mount, network and IPC namespaces, a user id each): neither can
      read, signal or trace the other; all one can do to the other is take GPU time or device memory during its
      hidden tests, so a run whose tests overlapped the previous process and ended in a way that could cause
      (:data:`CONTENTION_KINDS`) is run again alone, and only that second run counts.

    Where runs cannot be kept apart (:func:`overlap_isolated`) this is :func:`_run_pipelined` one at a time."""
    outcomes: list[tuple[object, CFunctionOutcome | Exception]] = []
    runs: list[tuple[object, CandidateRun]] = []
    prev: CandidateRun | None = None
    gate = RecheckGate(settings.recheck_batch)

    def started(build: BuildOutcome) -> CandidateRun:
        r = CandidateRun(prepared, build, settings, gpu_index, recheck_after=gate)
        r.start()
        return r

    try:
        for key, build in builds:
            if should_stop():
                break
            if prev is not None:
                prev.released.wait()
            overlapped = prev is not None and not prev.gone.is_set()
            try:
                r = started(build)
                if overlapped:
                    r.phases_s["overlapped"] = 1.0
                if overlapped and contention_suspect(r):
                    first = r
                    first.stop()
                    try:
                        first.finish()
                    except HARNESS_FAULTS:
                        pass  # the run is redone alone: its first try's fault is not its result
                    assert prev is not None
                    prev.gone.wait()
                    r = started(build)
                    r.phases_s["isolated_rerun"] = 1.0
                if r.waiting:
                    if prev is not None:
                        prev.gone.wait()
                    r.time_window(TimingWindow.of(settings, 1, first=True))
            except HARNESS_FAULTS as exc:
                outcomes.append((key, exc))
                continue
            r.stop()
            runs.append((key, r))
            prev = r
            gate.release_if_full()  # beside this one's exit and the next one's start: no window is open
    finally:
        gate.open()
        for key, r in runs:
            r.stop()
            try:
                outcomes.append((key, r.finish()))
            except HARNESS_FAULTS as exc:
                outcomes.append((key, exc))
    order = {id(k): i for i, (k, _) in enumerate(builds)}
    return sorted(outcomes, key=lambda o: order.get(id(o[0]), len(order)))


def run_c_function_group(prepared: PreparedCFunction, builds: list[tuple[object, BuildOutcome]],
                         settings: HarnessSettings, gpu_index: int | None = None, *,
                         should_stop=lambda: False,
                         ) -> tuple[list[tuple[object, CFunctionOutcome | Exception]], PreparedCFunction]:
    """Evaluate a task's candidates on one GPU.

    With ``settings.timing_rounds`` == 1, candidates run in turn, one timing window each, the end of one
    candidate overlapping the next one's tests (:func:`_run_pipelined`; an outcome may be a harness fault's
    exception there). Above 1, timing is interleaved: each candidate's
    tests run in turn (its process then waits); then ``settings.timing_rounds`` rounds each
    time the sequential baseline for one window and every waiting candidate for one window, in alternating
    order. A candidate's speedup then rests on samples spread over the whole task rather than on one window of
    a fraction of a second, so fluctuations of the host (which dominate run-to-run differences on a shared
    machine) average out, and the baseline is sampled across the same span as the candidates.

    Above 1 round the task's candidates are alive together, so one could disturb another's timing: use it for
    candidates that do not attack each other (the built-in dataset's), not for a policy's samples. With
    ``settings.start_together`` their processes also start together, their hidden tests side by side.

    ``should_stop()``: checked before each candidate starts; those not started are left out of the result.
    Returns the outcomes, in order, and the preparation with the baseline timing of every window.
    """
    rounds = max(1, settings.timing_rounds)
    if rounds == 1:
        if settings.overlap_runs and not settings.pipeline_candidates and overlap_isolated() is None:
            return _run_overlapped(prepared, builds, settings, gpu_index, should_stop), prepared
        return _run_pipelined(prepared, builds, settings, gpu_index, should_stop), prepared
    runs: list[tuple[object, CandidateRun]] = []
    try:
        for key, build in builds:
            if should_stop():
                break
            r = CandidateRun(prepared, build, settings, gpu_index)
            runs.append((key, r))
            r.launch()
            if not settings.start_together:
                r.tests_verdict()
        if settings.start_together:
            for _, r in runs:
                r.tests_verdict()
    except BaseException:
        for _, r in runs:  # a harness error: no process of the task's is left waiting for a window
            r.stop()
        raise
    live = [r for _, r in runs if r.waiting]
    first = prepared.baseline_timing
    base = [list(first.samples_ms)] if first is not None and first.samples_ms else []
    try:
        # One quiet period for all the rounds: each window would otherwise wait for background work that
        # starts again between windows.
        with HOST.timing(gpu_index):
            for rnd in range(rounds):
                if rnd > 0 and live and base:
                    base.append(baseline_window(prepared, settings,
                                                TimingWindow.of(settings, rounds, first=False), owner=gpu_index))
                window = TimingWindow.of(settings, rounds, first=rnd == 0)
                for r in (live if rnd % 2 == 0 else live[::-1]):
                    r.time_window(window)
    finally:
        for _, r in runs:  # all processes end (and their outputs are judged) in parallel
            r.stop()
        outcomes = [(key, r.finish()) for key, r in runs]
    if base and live:
        prepared = replace(prepared, baseline_timing=replace(TimingStats.from_windows_ms(base), host=first.host),
                           _files=prepared._files)
    return outcomes, prepared
