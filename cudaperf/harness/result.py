"""The one typed record an evaluation produces, and its parts.

Every evaluation ends in an :class:`EvaluationResult`, whatever happened. ``status`` separates three outcomes:

* ``scored``: the harness did its job; the candidate may have failed (``failure`` says how, ``attributed_to``
  is ``"candidate"``) or passed;
* ``unscored``: the harness could not judge the candidate (toolchain missing, reference failed, no GPU, probe
  unavailable). ``failure.attributed_to`` is ``"harness"``. Trainers must treat this as *no reward*, never 0.

Units are in the field names (``_ms``, ``_s``, ``_bytes``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Literal


class Stage(str, Enum):
    """How far the candidate got, in order."""

    NONE = "none"
    EXTRACTED = "extracted"
    CHECKED = "checked"
    COMPILED = "compiled"
    RAN = "ran"
    CORRECT = "correct"
    TIMED = "timed"


class FailureKind(str, Enum):
    NO_CODE = "no_code"
    STATIC_CHECK = "static_check"
    COMPILE_ERROR = "compile_error"
    LINK_ERROR = "link_error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    CUDA_ERROR = "cuda_error"
    WRONG_OUTPUT = "wrong_output"
    NO_GPU_WORK = "no_gpu_work"
    TIMING_RECHECK = "wrong_output_during_timing"
    TIMER_MISMATCH = "timer_mismatch"
    """The candidate's in-process timing record disagrees with the harness's own clock (a forged timer)."""
    HARNESS = "harness_error"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str
    attributed_to: Literal["candidate", "harness"] = "candidate"


@dataclass(frozen=True)
class CompileInfo:
    ok: bool
    compiler: str
    flags: tuple[str, ...]
    arch: str
    toolchain: str
    log: str
    """Compiler output, trimmed to the first errors."""
    cached: bool
    seconds: float


@dataclass(frozen=True)
class Mismatch:
    """The first element that differed, and the error over the whole output."""

    output: str
    """Argument name, ``return``, or an output line/token position."""
    index: int
    expected: float | int | str
    got: float | int | str
    max_abs_err: float
    max_rel_err: float
    n_bad: int
    n_total: int


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest class

    index: int
    config: dict[str, int]
    passed: bool
    message: str = ""
    mismatch: Mismatch | None = None
    kernels_launched: int | None = None


@dataclass(frozen=True)
class HostLoad:
    """The host's state around one timing window, for telling a slower host from a slower program when timings
    of the same code drift between runs (:mod:`cudaperf.harness.hostload`)."""

    busy_frac: float
    """Share of all CPUs' time that was busy during the window (/proc/stat), the window's own work included."""
    steal_frac: float
    """Share of all CPUs' time the hypervisor gave to other guests during the window."""
    timing_runs: int
    """Timing windows open in this harness at the start, this one included (other GPUs' workers)."""
    compute_ms: float | None = None
    """A fixed chain of integer multiply-adds on one core, timed as background work shortly before the window
    (None: not run)."""
    memory_ms: float | None = None
    """Copying 2 x 64 MiB on one core, timed as background work shortly before the window (None: not run)."""


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    mean_ms: float
    cv: float
    n: int
    min_ms: float
    max_ms: float
    samples_ms: tuple[float, ...] = ()
    """Every timed call in order (microsecond resolution), for estimators other than the median."""
    host: HostLoad | None = None
    """The host's state around the (first) window: sequential C baselines with the calibration workloads, C
    candidates without them; None where not sampled."""
    windows_ms: tuple[float, ...] = ()
    """The median of each timing window, in order, where the timing came in more than one window (``timing_rounds``
    above 1; each of the baseline's windows is a process of its own); empty for a single window."""

    @property
    def best_window_ms(self) -> float:
        """The fastest window's median (``median_ms`` for a single window): the estimator of ``speedup_estimator =
        "best_window"``. On a host that is slow for whole windows at a time (seconds), the fastest of several
        windows drifts less between runs than the pooled median (``benchmarks/host_variance.py``)."""
        return min(self.windows_ms) if self.windows_ms else self.median_ms

    @staticmethod
    def from_windows_ms(windows: list[list[float]]) -> "TimingStats":
        """Statistics of samples taken in windows (empty windows are skipped); ``windows_ms`` when more than one."""
        import statistics

        windows = [w for w in windows if w]
        stats = TimingStats.from_samples_ms([x for w in windows for x in w])
        if len(windows) < 2:
            return stats
        return replace(stats, windows_ms=tuple(round(statistics.median(w), 4) for w in windows))

    @staticmethod
    def from_samples_ms(samples: list[float]) -> "TimingStats":
        import statistics

        if not samples:
            raise ValueError("no timing samples")
        mean = statistics.fmean(samples)
        sd = statistics.stdev(samples) if len(samples) > 1 else 0.0
        return TimingStats(
            median_ms=statistics.median(samples),
            mean_ms=mean,
            cv=sd / mean if mean > 0 else 0.0,
            n=len(samples),
            min_ms=min(samples),
            max_ms=max(samples),
            samples_ms=tuple(round(x, 3) for x in samples),
        )


@dataclass(frozen=True)
class GpuEvidence:
    """What a profiling interface (CUPTI, in trusted driver code) saw during calls of the candidate."""

    source: str
    kernels_in_tests: int
    kernels_in_timed_call: int | None
    kernel_ms: float | None = None
    """GPU time of the kernels in one call at the timing size."""
    memcpy_ms: float | None = None
    memset_ms: float | None = None
    htod_bytes: int | None = None
    dtoh_bytes: int | None = None
    call_ms: float | None = None
    """Wall time of the traced call at the timing size (its kernels' share: ``kernel_share``)."""
    kernel_share: float | None = None
    """``kernel_ms / call_ms`` of the traced call at the timing size; below ``HarnessSettings.min_kernel_share`` the
    candidate gets ``no_gpu_work`` (host work behind a token kernel), with this evidence kept in the result."""
    gpu_share: float | None = None
    """``(kernel_ms + memcpy_ms + memset_ms) / call_ms``: the share of the call the GPU was busy (at most 1 when
    nothing overlaps)."""
    output_bytes_min_fraction: float | None = None
    """The smallest ratio of bytes copied from the device to the bytes of the outputs: over the traced timed
    calls (one per window, >= ``HarnessSettings.outputs_from_device_fraction`` for credit) once timed, over the
    hidden tests (recorded only) before."""
    input_bytes_min_fraction: float | None = None
    """The smallest ratio of bytes copied to the device to the bytes of the input arrays, over the traced timed
    calls (>= ``HarnessSettings.inputs_to_device_fraction`` for credit); None when the task has no input arrays."""
    window_cpu_cores: float | None = None
    """The most cores the run kept busy in a timing window: its CPU time in the window (read from outside the run)
    over the window's wall time; above ``HarnessSettings.max_window_cpu_cores`` host threads worked beside the
    calls (``no_gpu_work``). None when the harness could not read the run's CPU time."""
    timer_check: str | None = None
    """The external clock check of the timing windows: ``in-process span / harness clock`` per window, or why it
    did not apply."""
    driver_context: str | None = None
    """Whole programs: the check of the driver's list of processes with a CUDA context (NVML) while the tests ran:
    ``seen in K of N test runs``, ``off``, or ``unavailable: `` and why (no GPU, NVML unreadable, the driver's
    process ids not this harness's: nothing was ruled on; :mod:`cudaperf.harness.nvml`)."""


@dataclass(frozen=True)
class Environment:
    gpu: str
    driver: str
    cuda: str
    gcc: str
    arch: str
    nvcc_flags: tuple[str, ...]
    reference_flags: tuple[str, ...]
    sandbox_level: str
    seeds_policy: str
    timing_method: str
    host: str
    cpu: str = ""
    """The host CPU model and logical CPU count (empty in records written before it was recorded)."""


@dataclass(frozen=True)
class EvaluationResult:
    task_id: str
    task_kind: str
    candidate_id: str
    code_sha256: str | None
    status: Literal["scored", "unscored"]
    stage: Stage
    correct: bool
    failure: Failure | None = None
    static_check_reasons: tuple[str, ...] = ()
    compile: CompileInfo | None = None
    tests: tuple[TestOutcome, ...] = ()
    pass_fraction: float = 0.0
    candidate_timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    speedup: float | None = None
    """Baseline median / candidate median, at the same call boundary. None unless correct and timed."""
    speedup_flag: str | None = None
    """Set when the speedup is beyond the plausibility bound: kept, but marked for audit."""
    compiled_baseline_timing: TimingStats | None = None
    """PyTorch tasks: the ``torch.compile`` baseline, timed in the same run as the eager one (when asked for)."""
    gpu_evidence: GpuEvidence | None = None
    seeds: tuple[int, ...] = ()
    environment: Environment | None = None
    durations_s: dict[str, float] = field(default_factory=dict)
    created_at: str = ""

    @property
    def scored(self) -> bool:
        return self.status == "scored"

    def to_dict(self) -> dict[str, Any]:
        return _to_jsonable(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvaluationResult":
        return _from_jsonable(cls, d)


def _to_jsonable(x: Any) -> Any:
    if dataclasses.is_dataclass(x):
        return {f.name: _to_jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, Enum):
        return x.value
    if isinstance(x, (list, tuple)):
        return [_to_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _to_jsonable(v) for k, v in x.items()}
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return str(x)  # JSON has no NaN/Inf: keep them readable as strings
    return x


def _from_jsonable(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            try:
                return _from_jsonable(arg, v)
            except (TypeError, ValueError, KeyError):
                continue
        return v
    if origin is tuple:
        (inner, *_rest) = typing.get_args(tp) or (Any,)
        return tuple(_from_jsonable(inner, x) for x in v)
    if origin is dict or origin is typing.Literal or tp is Any:
        return v
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(v)
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise TypeError(f"expected an object for {tp.__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {f.name: _from_jsonable(hints[f.name], v[f.name]) for f in dataclasses.fields(tp) if f.name in v}
        return tp(**kwargs)
    if tp is float and isinstance(v, str):
        return float(v)
    if tp in (int, float, str, bool) and not isinstance(v, tp) and not (tp is float and isinstance(v, int)):
        if tp is str:
            return str(v)
        raise TypeError(f"expected {tp.__name__}, got {type(v).__name__}")
    return v
