"""Reward terms (PAPER-SPEC §4). Every term is a pure function of (task, completion, evaluation result): the
harness runs before, never inside. ``None`` means "unscored" (the harness could not judge), never 0.

R_ver, with p the fraction of hidden tests passed, S the speedup and cv the timed runs' coefficient of variation:

    no compilable code (no code, static check, compile or link error):   -alpha_comp
    compiles, not correct:                                               -alpha_wrong * (1 - p)
    correct:                                  alpha_speed * clip(log2 S, s_min, s_max) - alpha_cv * cv

Decision where the paper is silent: a candidate that passes every hidden test but then fails a later check
(outputs wrong during timing, no GPU work, a crash while timed) is "not correct" with the failed check counted as
one more failed test: p = passed / (n + 1). Without that, such a candidate would get 0, more than an honest
candidate with one wrong test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from cudaperf.harness.result import EvaluationResult, FailureKind

NOT_COMPILED = {FailureKind.NO_CODE, FailureKind.STATIC_CHECK, FailureKind.COMPILE_ERROR, FailureKind.LINK_ERROR}


@dataclass(frozen=True)
class VerifiableSettings:
    alpha_comp: float = 3.0
    alpha_wrong: float = 2.0
    alpha_speed: float = 1.0
    alpha_cv: float = 0.5
    s_min: float = -0.5
    s_max: float = 4.0


def compiled(result: EvaluationResult) -> bool:
    return result.failure is None or result.failure.kind not in NOT_COMPILED


def effective_pass_fraction(result: EvaluationResult) -> float:
    n = len(result.tests)
    if result.correct:
        return 1.0
    if n and result.pass_fraction >= 1.0:
        return n / (n + 1)  # every test passed, a later check failed
    return result.pass_fraction


def r_ver(result: EvaluationResult, s: VerifiableSettings = VerifiableSettings()) -> float | None:
    """The verifiable reward of one evaluation; None when the result is unscored or correct but not timed."""
    if result.status != "scored":
        return None
    if not compiled(result):
        return -s.alpha_comp
    if not result.correct:
        return -s.alpha_wrong * (1.0 - effective_pass_fraction(result))
    if result.speedup is None or result.candidate_timing is None or result.speedup <= 0:
        return None  # correct but not timed (timing disabled): the speed term cannot be computed
    speed = min(max(math.log2(result.speedup), s.s_min), s.s_max)
    return s.alpha_speed * speed - s.alpha_cv * result.candidate_timing.cv


StructuralScore = Callable[[str], float]
"""code -> s_psi(normalized phi(code)) (a trained :class:`cudaperf.ranker.train.Ranker`'s ``score_code``), or
the linear form w . normalized phi."""


def r_str(code: str | None, score: StructuralScore) -> float | None:
    """The structural reward: the ranker's score of the candidate's code (None when there is no code)."""
    if code is None:
        return None
    return float(score(code))


def linear_structural(weights: dict[str, float], normalizer) -> StructuralScore:
    """The appendix's form R_str = w . normalized phi(y), over the paper tier."""
    from cudaperf.features.paper import extract_paper_features

    def score(code: str) -> float:
        z = normalizer.transform(extract_paper_features(code))
        return float(sum(weights.get(k, 0.0) * v for k, v in z.items()))

    return score
