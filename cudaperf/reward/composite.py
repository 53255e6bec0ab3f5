"""Composite rewards: presets over the terms, a per-term breakdown, and LEAP's rank-based group reward.

Presets:
``paper``  r = R_ver + R_str, unweighted (PAPER-SPEC §4).
``gated``  r = R_ver + (g * tanh(R_str) if the candidate compiled else 0): the structural term only for compiling
           code, squashed into (-g, g) with g = ``gate_scale`` (default 0.5, the size of R_ver's lowest speed
           term), so code that only looks optimised cannot earn more than half a log2 step of speed.
``verifiable``  r = R_ver alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from cudaperf.harness.result import EvaluationResult
from cudaperf.reward.terms import StructuralScore, VerifiableSettings, compiled, r_str, r_ver

PRESETS = ("paper", "gated", "verifiable")


@dataclass(frozen=True)
class RewardSettings:
    preset: str = "paper"
    verifiable: VerifiableSettings = field(default_factory=VerifiableSettings)
    gate_scale: float = 0.5

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"unknown reward preset {self.preset!r}; choose one of {PRESETS}")


@dataclass(frozen=True)
class RewardBreakdown:
    total: float | None
    """None: unscored (a harness fault), never 0."""
    terms: dict[str, float | None]
    preset: str

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "preset": self.preset, **{f"r_{k}": v for k, v in self.terms.items()}}


def completion_code(completion: str) -> str | None:
    """The code the harness evaluates for ``completion`` (the same extraction)."""
    from cudaperf.harness.extract import extract_code

    return extract_code(completion).code


def reward(task, completion: str, result: EvaluationResult, settings: RewardSettings = RewardSettings(),
           structural: StructuralScore | None = None) -> RewardBreakdown:
    """The reward of one evaluated completion: a pure function of (task, completion, result)."""
    if result.task_id != getattr(task, "id", result.task_id):
        raise ValueError(f"result of task {result.task_id} given with task {task.id}")
    ver = r_ver(result, settings.verifiable)
    terms: dict[str, float | None] = {"ver": ver}
    if settings.preset == "verifiable" or structural is None:
        if settings.preset != "verifiable" and structural is None:
            raise ValueError(f"preset {settings.preset!r} needs a structural scorer (a trained ranker)")
        return RewardBreakdown(ver, terms, settings.preset)
    raw = r_str(completion_code(completion), structural)
    if settings.preset == "paper":
        terms["str"] = raw
        total = None if ver is None else ver + (raw if raw is not None else 0.0)
    else:
        gated = settings.gate_scale * math.tanh(raw) if (raw is not None and compiled(result)) else 0.0
        terms["str_raw"], terms["str"] = raw, gated
        total = None if ver is None else ver + gated
    return RewardBreakdown(total, terms, settings.preset)


def _leap_key(r: EvaluationResult, completion: str) -> tuple:
    speed = r.speedup if (r.correct and r.speedup) else 0.0
    code = completion_code(completion)
    return (compiled(r), r.correct, speed, -(len(code) if code else 10**9))


def leap_group_rewards(completions: Sequence[str], group: Sequence[EvaluationResult]) -> list[float | None]:
    """LEAP's rank-based reward: each candidate's win rate in pairwise comparisons within its group, comparing
    (compiles, then correct, then faster, then shorter); a tie counts one half. Unscored members get None and are
    left out of the others' comparisons."""
    scored = [i for i, r in enumerate(group) if r.status == "scored"]
    out: list[float | None] = [None] * len(group)
    for i in scored:
        if len(scored) == 1:
            out[i] = 0.5
            continue
        ki = _leap_key(group[i], completions[i])
        wins = 0.0
        for j in scored:
            if j == i:
                continue
            kj = _leap_key(group[j], completions[j])
            wins += 1.0 if ki > kj else 0.5 if ki == kj else 0.0
        out[i] = wins / (len(scored) - 1)
    return out
