"""Metrics of an evaluation run: pass@k, speedup@k and fast_p@k per task, and their summary over tasks.

Definitions (PAPER-SPEC §7, ONLINE.md "Evaluation conventions"), for one task with n counted samples of which c
are correct:

``pass@k``  Chen et al. (2021)'s unbiased estimator ``1 - C(n-c, k) / C(n, k)``, in their product form
            ``1 - prod_{i=n-c+1..n} (1 - k/i)`` (no large binomials), defined only where n >= k.
``expected_best_at_k``  the exact expectation, over all C(n, k) draws of k samples without replacement, of the best
            speedup in the draw, an incorrect sample counting as 0. Sorted from the largest, the i-th value
            (1-based) is the draw's maximum exactly when the draw holds it and k-1 of the n-i values after it:
            probability C(n-i, k-1) / C(n, k). Ties change nothing (tied values are the same maximum).
            ParEval's speedup@k sorts runtimes ascending and weights the j-th with C(j-1, k-1) / C(n, k): that is
            the probability that the j-th *fastest* is the *slowest* of the draw, so it computes the expected
            *worst* speedup (and over correct samples only); it agrees with this one only at k = 1.
``speedup@k``  the same expectation given that the draw holds at least one correct sample:
            ``expected_best_at_k / P(a draw holds a correct sample)``; None when no sample is correct.
``fast_p@k``  per task, the probability that a k-draw holds a correct sample counted faster than p (pass@k with
            c = the number of such samples); averaged over *all* counted tasks, a task without a correct sample
            counting 0 (KernelBench's fast_p, with Dr. Kernel's thresholds 1.2 and 3 added). "Faster than p" has a
            noise margin, :class:`NoiseMargin`, since an unchanged program lands on either side of 1.0x
            (KernelBench#166).

Decisions:

* Counted samples: ``unscored`` samples (harness faults) never count; they are left out of their task's n and
  counted apart. ``policy_error`` samples (the policy gave no answer, after its retries) are left out the same way
  by default, since there is no candidate to judge (cudaperf.policy.base: "a policy failure, never the
  candidate's"); ``MetricSettings.policy_errors_count_as_failures`` counts them as failed samples instead. A task
  left without a counted sample is reported (:attr:`Summary.uncounted_tasks`), not counted.
* A correct sample without a speedup (timing disabled) is correct for pass@k and fast_0, never faster than p > 0,
  and is left out of its task's n for speedup@k (its speed is unknown, not 0); :attr:`TaskStats.correct_untimed`
  counts them.
* For each k, the summary covers the tasks with n >= k (pass@k is undefined below); how many had fewer is said.
* The speedup@k of the summary is the geometric mean over the tasks with at least one correct timed sample, with
  the number of such tasks beside it: failures stay visible through pass@k and fast_p@k, which cover all tasks.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

SUMMARY_KS = (1, 3, 5)
"""The k of the paper's tables (PAPER-SPEC §7)."""

FAST_P_THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0)
"""KernelBench's p (0, 0.5, 0.8, 1, 1.5, 2) and Dr. Kernel's 1.2 and 3."""

STATUSES = ("scored", "unscored", "policy_error")


def _count(name: str, v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError(f"{name} must be an integer, got {v!r}")
    try:
        i = operator.index(v)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {v!r}") from None
    if i < 0:
        raise ValueError(f"{name} must be >= 0, got {i}")
    return i


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that k samples drawn without replacement from n, c of them correct, hold a correct one.

    Raises ValueError for a negative or non-integer argument, k < 1, k > n or c > n.
    """
    n, c, k = _count("n", n), _count("c", c), _count("k", k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least k samples; n = {n}")
    if c > n:
        raise ValueError(f"c = {c} correct samples of n = {n}")
    if n - c < k:
        return 1.0  # every k-draw holds a correct sample
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _check_values(values: Sequence[float | None]) -> list[float | None]:
    out: list[float | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"value {i} must be a speedup (float) or None, got {v!r}")
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"value {i}: a speedup must be finite and > 0, got {v!r}")
        out.append(float(v))
    return out


def expected_best_at_k(values: Sequence[float | None], k: int) -> float:
    """E[max of a k-draw without replacement] over ``values`` (None: an incorrect sample, counted as 0).

    Raises ValueError when k < 1, k > len(values), or a value is not None nor a finite positive number.
    """
    vals = _check_values(values)
    n, k = len(vals), _count("k", k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        raise ValueError(f"a draw of k = {k} needs at least k values; got {n}")
    correct = sorted((v for v in vals if v is not None), reverse=True)
    total_draws = math.comb(n, k)
    # The i-th largest (1-based) is the maximum of C(n-i, k-1) draws; exact integers, one rounding per term.
    return sum(v * (math.comb(n - i, k - 1) / total_draws) for i, v in enumerate(correct, start=1))


def speedup_at_k(values: Sequence[float | None], k: int) -> float | None:
    """E[max of a k-draw | the draw holds a correct sample]; None when no value is correct. Raises as
    :func:`expected_best_at_k`."""
    best = expected_best_at_k(values, k)
    c = sum(v is not None for v in values)
    if c == 0:
        return None
    return best / pass_at_k(len(values), c, k)


def geometric_mean(values: Iterable[float]) -> float | None:
    """exp(mean(log v)); None for no values. Raises ValueError for a value <= 0."""
    vals = list(values)
    if not vals:
        return None
    if any(not (v > 0) for v in vals):
        raise ValueError(f"a geometric mean needs positive values, got {min(vals)!r}")
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))


@dataclass(frozen=True)
class NoiseMargin:
    """When a correct sample counts as faster than p, for fast_p.

    Rule: ``speedup > p * (1 + margin)`` with ``margin = noise_sigmas * sqrt(candidate_cv**2 + baseline_cv**2)``
    (a missing cv counts as 0); at p = 0 every correct sample counts. The speedup is a ratio of two timed means:
    to first order its relative spread is the root sum of squares of the two coefficients of variation, and
    ``noise_sigmas`` of it is what a same-speed program may show by chance. The cvs are of single timed runs (not
    of their mean), which makes the margin conservative. ``noise_sigmas = 0`` gives KernelBench's plain
    ``speedup > p``.
    """

    noise_sigmas: float = 2.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise_sigmas) and self.noise_sigmas >= 0):
            raise ValueError(f"noise_sigmas must be finite and >= 0, got {self.noise_sigmas!r}")

    def margin(self, candidate_cv: float | None, baseline_cv: float | None) -> float:
        cc = candidate_cv or 0.0
        bc = baseline_cv or 0.0
        return self.noise_sigmas * math.sqrt(cc * cc + bc * bc)

    def faster_than(self, outcome: "SampleOutcome", p: float) -> bool:
        if not outcome.correct:
            return False
        if p == 0:
            return True
        if outcome.speedup is None:
            return False  # correct, speed unknown
        return outcome.speedup > p * (1.0 + self.margin(outcome.candidate_cv, outcome.baseline_cv))

    def describe(self) -> str:
        return (f"a correct sample is faster than p when speedup > p * (1 + {self.noise_sigmas:g} * "
                f"sqrt(candidate_cv^2 + baseline_cv^2)); missing cv = 0; p = 0 counts every correct sample")


@dataclass(frozen=True)
class MetricSettings:
    ks: tuple[int, ...] = SUMMARY_KS
    fast_p_thresholds: tuple[float, ...] = FAST_P_THRESHOLDS
    noise: NoiseMargin = field(default_factory=NoiseMargin)
    policy_errors_count_as_failures: bool = False
    """False (default): a policy error is left out of its task's n, like an unscored sample. True: it counts as a
    failed sample (not compiled, not correct)."""

    def __post_init__(self) -> None:
        for k in self.ks:
            if _count("k", k) < 1:
                raise ValueError(f"every k must be >= 1, got {self.ks}")
        for p in self.fast_p_thresholds:
            if not (math.isfinite(p) and p >= 0):
                raise ValueError(f"fast_p thresholds must be finite and >= 0, got {self.fast_p_thresholds}")

    def to_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks), "fast_p_thresholds": list(self.fast_p_thresholds),
                "noise_sigmas": self.noise.noise_sigmas, "noise_margin_rule": self.noise.describe(),
                "policy_errors_count_as_failures": self.policy_errors_count_as_failures}


@dataclass(frozen=True)
class SampleOutcome:
    """What the metrics need of one sample (one trajectory's outcome at some turn)."""

    status: str
    """``scored``, ``unscored`` or ``policy_error``."""
    compiled: bool
    correct: bool
    speedup: float | None = None
    candidate_cv: float | None = None
    baseline_cv: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.speedup is not None and not (math.isfinite(self.speedup) and self.speedup > 0):
            raise ValueError(f"speedup must be finite and > 0 or None, got {self.speedup!r}")
        if self.speedup is not None and not self.correct:
            raise ValueError(f"an incorrect sample has no speedup (got {self.speedup!r})")

    @classmethod
    def of(cls, record: Any) -> "SampleOutcome":
        """From anything with the fields of :class:`cudaperf.eval.records.TurnRecord`."""
        return cls(status=record.status, compiled=bool(record.compiled), correct=bool(record.correct),
                   speedup=record.speedup if record.correct else None, candidate_cv=record.candidate_cv,
                   baseline_cv=record.baseline_cv)


def _counted(o: SampleOutcome, settings: MetricSettings) -> bool:
    return o.status == "scored" or (o.status == "policy_error" and settings.policy_errors_count_as_failures)


@dataclass(frozen=True)
class TaskStats:
    task_id: str
    n: int
    """Counted samples."""
    unscored: int
    policy_errors: int
    """All policy errors, whether counted in n or not."""
    compiled: int
    correct: int
    correct_untimed: int
    speedups: tuple[float, ...]
    """Of the correct timed samples, in sample order."""
    speed_values: tuple[float | None, ...]
    """The samples speedup@k is computed over: None for an incorrect sample, the speedup of a correct timed one."""
    outcomes: tuple[SampleOutcome, ...]
    """The counted samples."""

    @property
    def best_speedup(self) -> float | None:
        return max(self.speedups) if self.speedups else None


def task_stats(task_id: str, samples: Sequence[SampleOutcome], settings: MetricSettings = MetricSettings()
               ) -> TaskStats:
    counted = tuple(o for o in samples if _counted(o, settings))
    return TaskStats(
        task_id=task_id,
        n=len(counted),
        unscored=sum(o.status == "unscored" for o in samples),
        policy_errors=sum(o.status == "policy_error" for o in samples),
        compiled=sum(o.compiled for o in counted),
        correct=sum(o.correct for o in counted),
        correct_untimed=sum(o.correct and o.speedup is None for o in counted),
        speedups=tuple(o.speedup for o in counted if o.correct and o.speedup is not None),
        speed_values=tuple(o.speedup if o.correct else None for o in counted if not (o.correct and o.speedup is None)),
        outcomes=counted,
    )


def fast_p_at_k(stats: TaskStats, p: float, k: int, noise: NoiseMargin = NoiseMargin()) -> float:
    """The probability that a k-draw of the task's counted samples holds a correct sample faster than p."""
    f = sum(noise.faster_than(o, p) for o in stats.outcomes)
    return pass_at_k(stats.n, f, k)


def p_key(p: float) -> str:
    """The key of threshold p in dicts and JSON: ``"1"``, ``"1.5"``."""
    return f"{p:g}"


@dataclass(frozen=True)
class AtK:
    k: int
    tasks: int
    """Tasks with n >= k: pass@k and fast_p@k are means over these."""
    tasks_n_below_k: int
    pass_at_k: float | None
    speedup_geomean: float | None
    """Geometric mean of speedup@k over the tasks with a correct timed sample (None: no such task)."""
    speedup_tasks: int
    fast_p: dict[str, float | None]
    """:func:`p_key` -> mean fast_p@k over the tasks (None: no task)."""

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "tasks": self.tasks, "tasks_n_below_k": self.tasks_n_below_k,
                "pass_at_k": self.pass_at_k, "speedup_geomean": self.speedup_geomean,
                "speedup_tasks": self.speedup_tasks, "fast_p": dict(self.fast_p)}


@dataclass(frozen=True)
class Summary:
    tasks: int
    """Tasks with at least one counted sample."""
    uncounted_tasks: dict[str, str]
    """Task id -> why it has no counted sample (all unscored, say)."""
    samples: int
    """Counted samples over all tasks."""
    unscored_samples: int
    policy_error_samples: int
    compiled_samples: int
    correct_samples: int
    correct_untimed_samples: int
    compile_rate: float | None
    """Compiled / counted samples (None: no counted sample)."""
    at_k: tuple[AtK, ...]
    """One per k of the settings that some task has n >= k for."""

    def at(self, k: int) -> AtK | None:
        return next((a for a in self.at_k if a.k == k), None)

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "uncounted_tasks": dict(self.uncounted_tasks), "samples": self.samples,
                "unscored_samples": self.unscored_samples, "policy_error_samples": self.policy_error_samples,
                "compiled_samples": self.compiled_samples, "correct_samples": self.correct_samples,
                "correct_untimed_samples": self.correct_untimed_samples, "compile_rate": self.compile_rate,
                "at_k": {str(a.k): a.to_dict() for a in self.at_k}}


def _mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def summarize(samples_by_task: Mapping[str, Sequence[SampleOutcome]], settings: MetricSettings = MetricSettings()
              ) -> Summary:
    """The summary over tasks of one outcome per sample (see the module docstring for every definition)."""
    stats = [task_stats(t, s, settings) for t, s in samples_by_task.items()]
    uncounted: dict[str, str] = {}
    for st in stats:
        if st.n == 0:
            total = st.unscored + st.policy_errors
            if total == 0:
                uncounted[st.task_id] = "no sample"
            elif st.policy_errors == 0:
                uncounted[st.task_id] = f"all {total} samples unscored"
            elif st.unscored == 0:
                uncounted[st.task_id] = f"all {total} samples policy errors"
            else:
                uncounted[st.task_id] = f"all {total} samples unscored ({st.unscored}) or policy errors"
    counted = [st for st in stats if st.n > 0]
    at_k = []
    for k in settings.ks:
        pool = [st for st in counted if st.n >= k]
        if not pool:
            continue
        speed = [speedup_at_k(st.speed_values, k) for st in pool if len(st.speed_values) >= k and st.speedups]
        at_k.append(AtK(
            k=k,
            tasks=len(pool),
            tasks_n_below_k=len(counted) - len(pool),
            pass_at_k=_mean([pass_at_k(st.n, st.correct, k) for st in pool]),
            speedup_geomean=geometric_mean(s for s in speed if s is not None),
            speedup_tasks=sum(s is not None for s in speed),
            fast_p={p_key(p): _mean([fast_p_at_k(st, p, k, settings.noise) for st in pool])
                    for p in settings.fast_p_thresholds},
        ))
    n = sum(st.n for st in counted)
    compiled = sum(st.compiled for st in counted)
    return Summary(
        tasks=len(counted),
        uncounted_tasks=uncounted,
        samples=n,
        unscored_samples=sum(st.unscored for st in stats),
        policy_error_samples=sum(st.policy_errors for st in stats),
        compiled_samples=compiled,
        correct_samples=sum(st.correct for st in counted),
        correct_untimed_samples=sum(st.correct_untimed for st in counted),
        compile_rate=compiled / n if n else None,
        at_k=tuple(at_k),
    )
