"""What an evaluation run writes, one record per turn of one sample, and the run's header.

RUN_DIR/
    run.json          :class:`RunHeader` as JSON (the command's settings, the task ids, excluded tasks)
    generations.jsonl one line per policy call that completed ({"key", "task_id", "sample", "turn", "purpose",
                      "generation": Generation.to_dict(), "prompt": [messages]}), appended as they complete
    results.jsonl     the harness's :class:`~cudaperf.harness.store.ResultStore` (one EvaluationResult per
                      candidate, candidate_id ``s{sample}-t{turn}``), appended as candidates are judged
    turns.jsonl       one :class:`TurnRecord` per (task, sample, turn), appended as each turn completes; a text
                      task's spec turn is one more record per (task, sample), ``phase = "spec"`` (not judged)
    metrics.json      written by ``cudaperf report`` (and at the end of ``cudaperf eval``)
    report.html       idem, self-contained (PNG plots inlined)

A run killed at any point resumes from these files: a generation in ``generations.jsonl`` is never asked for
again, a candidate in ``results.jsonl`` is never judged again, and a turn in ``turns.jsonl`` is never written
twice (each file is keyed; a torn last line is ignored and rewritten).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

STOP_REASONS = ("solved", "turn_limit", "repeated_failure", "no_code", "budget", "policy_error")
"""Why a trajectory ended: ``solved`` (correct and at least ``--target-speedup`` fast), ``turn_limit`` (``--turns``
turns done), ``repeated_failure`` (the same failure, same message, twice in a row), ``no_code`` (no CUDA in the
completion twice in a row), ``budget`` (``--max-minutes`` ran out before its next turn), ``policy_error`` (the
policy could not answer, after its retries)."""


@dataclass(frozen=True)
class TurnRecord:
    task_id: str
    task_kind: str
    """``c_function``, ``c_program``, ``cuda_kernel`` or ``pytorch``."""
    sample: int
    turn: int
    """0-based."""
    candidate_id: str
    family: str | None
    """The dataset family (built-in tasks), else None."""
    level: str | None
    """KernelBench level (``level1``...), else None."""
    status: str
    """``scored`` or ``unscored`` (a harness fault: counts for no metric but the unscored count), or ``policy_error``."""
    stage: str
    """The harness's Stage value (``none`` .. ``timed``)."""
    compiled: bool
    correct: bool
    failure_kind: str | None
    failure_message: str | None
    speedup: float | None
    """Baseline time / candidate time; None unless correct and timed."""
    candidate_cv: float | None
    baseline_cv: float | None
    kernel_ms: float | None
    memcpy_ms: float | None
    reward: float | None
    """The reward preset's total (None: unscored)."""
    reward_terms: dict[str, float | None]
    features: dict[str, float | None]
    """The paper's 11 structural features of the extracted code (None: not readable)."""
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    latency_s: float
    feedback: str
    """The feedback block this turn's result gives the next turn."""
    stop: str | None = None
    """Set on a trajectory's last turn: one of :data:`STOP_REASONS`."""
    speedup_flag: str | None = None
    gen_error: str | None = None
    phase: str = "kernel"
    """``kernel`` (a judged CUDA answer) or ``spec`` (a text task's spec turn: not judged, left out of every metric;
    :mod:`cudaperf.env.text2cuda`)."""
    spec: str | None = None
    """A spec turn's specification (the <SPEC> block, else the raw answer)."""
    accepted: bool | None = None
    """``--strategy evolve``: whether this turn's candidate became the best kept (None under ``refine``)."""
    gen_batch: int | None = None
    """How many answers one generate call made together with this one (local models batch them, and ``latency_s``
    is that call's wall, shared); None: a request of its own (an endpoint) or an older record."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TurnRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class RunHeader:
    policy: str
    tasks: str
    """The ``--tasks`` spec as given."""
    benchmark: str
    """``c_test``, ``c_test_family``, ``babeltower``, ``kernelbench``, ``pytorch``, ``file`` ..."""
    task_ids: tuple[str, ...]
    samples: int
    turns: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    compile_only: bool
    reward_preset: str
    target_speedup: float
    excluded: dict[str, str] = field(default_factory=dict)
    """Task id -> why it is not in the run (BabelTower's defective tasks, for instance)."""
    created_at: str = ""
    cudaperf_version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    """Everything else the command was given (few-shot, summarizer, harness settings)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["task_ids"] = list(self.task_ids)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunHeader":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["task_ids"] = tuple(kw.get("task_ids", ()))
        return cls(**kw)
