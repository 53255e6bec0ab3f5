"""Evaluation metrics against hand-computed values and brute-force enumeration: pass@k, speedup@k (and why
ParEval's formula is not it), fast_p@k with its noise margin, and the summary over tasks."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import pytest

from cudaperf.eval.metrics import (
    MetricSettings,
    NoiseMargin,
    SampleOutcome,
    expected_best_at_k,
    fast_p_at_k,
    geometric_mean,
    pass_at_k,
    speedup_at_k,
    summarize,
    task_stats,
)


def ok(speedup=None, candidate_cv=None, baseline_cv=None):
    return SampleOutcome("scored", compiled=True, correct=True, speedup=speedup, candidate_cv=candidate_cv,
                         baseline_cv=baseline_cv)


def wrong(compiled=True):
    return SampleOutcome("scored", compiled=compiled, correct=False)


UNSCORED = SampleOutcome("unscored", compiled=False, correct=False)
POLICY_ERROR = SampleOutcome("policy_error", compiled=False, correct=False)


# ---------------------------------------------------------------------------------------------------- pass@k

@pytest.mark.parametrize("n,c,k,expected", [
    (10, 3, 1, 0.3),
    (5, 2, 2, 1 - 3 / 10),        # 1 - C(3,2)/C(5,2)
    (4, 1, 3, 1 - 1 / 4),         # 1 - C(3,3)/C(4,3)
    (5, 0, 5, 0.0),
    (5, 5, 1, 1.0),
    (3, 1, 3, 1.0),               # n - c = 2 < k: every draw holds the correct one
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def test_pass_at_k_matches_exact_binomials():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 400)
        c, k = rng.randint(0, n), rng.randint(1, n)
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9, abs=1e-12)


def test_pass_at_k_stable_for_large_n():
    assert pass_at_k(10**6, 1, 1) == pytest.approx(1e-6, rel=1e-9)
    exact = 1 - Fraction(math.comb(2000 - 5, 1000), math.comb(2000, 1000))
    assert pass_at_k(2000, 5, 1000) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("n,c,k", [(3, 1, 4), (3, 4, 1), (-1, 0, 1), (3, -1, 1), (3, 1, 0), (3, 1, -2),
                                   (3.5, 1, 1), (3, True, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# ---------------------------------------------------------------------------------------------------- speedup@k

def enumerate_best(values, k):
    """E[max] and E[max | a correct sample in the draw] by listing every k-subset (incorrect = 0)."""
    draws = list(itertools.combinations([0.0 if v is None else v for v in values], k))
    with_correct = [d for d, idx in zip(draws, itertools.combinations(range(len(values)), k))
                    if any(values[i] is not None for i in idx)]
    mean_all = sum(max(d) for d in draws) / len(draws)
    mean_cond = sum(max(d) for d in with_correct) / len(with_correct) if with_correct else None
    return mean_all, mean_cond


def pareval_speedup_at_k(correct_speedups, k):
    """ParEval's speedup@k (analysis/metrics.py of parallelcodefoundry/ParEval), restated over speedups: runtimes
    sorted ascending (= speedups descending), the j-th weighted by C(j-1, k-1) / C(N, k) with C(a, b) = 1 for a < b,
    over the correct samples only. Kept here to show it is not the expected best."""
    def ncr(a, b):
        return 1 if a < b else math.comb(a, b)
    s = sorted(correct_speedups, reverse=True)
    return sum(ncr(j - 1, k - 1) / ncr(len(s), k) * s[j - 1] for j in range(1, len(s) + 1))


def test_expected_best_hand_values():
    # [8, 2, x], k=2: draws {8,2} -> 8, {8,x} -> 8, {2,x} -> 2: 18/3
    assert expected_best_at_k([8.0, 2.0, None], 2) == pytest.approx(6.0)
    assert speedup_at_k([8.0, 2.0, None], 2) == pytest.approx(6.0)          # every 2-draw holds a correct one
    # one correct 4x of 4: it is in half the 2-draws
    assert expected_best_at_k([4.0, None, None, None], 2) == pytest.approx(2.0)
    assert speedup_at_k([4.0, None, None, None], 2) == pytest.approx(4.0)
    # k = 1: the mean, counting incorrect as 0; given a correct one, the mean of the correct ones
    assert expected_best_at_k([3.0, None, 1.0, None], 1) == pytest.approx(1.0)
    assert speedup_at_k([3.0, None, 1.0, None], 1) == pytest.approx(2.0)
    # k = n: the maximum
    assert speedup_at_k([0.5, 7.0, None], 3) == pytest.approx(7.0)


def test_expected_best_matches_enumeration_on_random_cases():
    rng = random.Random(20261201)
    checked_cond = 0
    for _ in range(400):
        n = rng.randint(1, 9)
        k = rng.randint(1, n)
        values = [None if rng.random() < 0.4 else round(rng.lognormvariate(0, 1.5), 3) for _ in range(n)]
        if rng.random() < 0.2 and any(v is not None for v in values):  # ties
            tie = next(v for v in values if v is not None)
            values = [tie if v is not None and rng.random() < 0.5 else v for v in values]
        mean_all, mean_cond = enumerate_best(values, k)
        assert expected_best_at_k(values, k) == pytest.approx(mean_all, rel=1e-12, abs=1e-12)
        got = speedup_at_k(values, k)
        if mean_cond is None:
            assert got is None
        else:
            checked_cond += 1
            assert got == pytest.approx(mean_cond, rel=1e-12)
    assert checked_cond > 200


def test_pareval_formula_does_not_match_enumeration():
    # 10 draws of 3 from 5, each holds a correct one: 8 is the best in C(4,2) = 6, 2 in C(3,2) = 3 (no 8),
    # 1 in one ({1, x, x}): (48 + 6 + 1) / 10
    values = [1.0, 2.0, 8.0, None, None]
    assert enumerate_best(values, 3)[1] == pytest.approx(5.5)
    assert speedup_at_k(values, 3) == pytest.approx(5.5, rel=1e-12)
    # ParEval: N = 3 correct, C(3,3) = 1, and its C(a, b) = 1 for a < b gives every term weight 1: 8 + 2 + 1
    assert pareval_speedup_at_k([1.0, 2.0, 8.0], 3) == pytest.approx(11.0)
    # k = 2 over [1, 2, 8, x]: draws {1,2} 2, {1,8} 8, {1,x} 1, {2,8} 8, {2,x} 2, {8,x} 8: 29/6
    values = [1.0, 2.0, 8.0, None]
    assert speedup_at_k(values, 2) == pytest.approx(29 / 6, rel=1e-12)
    assert enumerate_best(values, 2)[1] == pytest.approx(29 / 6)
    # ParEval: (1*8 + 1*2 + 2*1) / C(3,2): the weight C(j-1, 1) goes to the slower samples (E[min] but for its
    # C(0,1) = 1)
    assert pareval_speedup_at_k([1.0, 2.0, 8.0], 2) == pytest.approx(4.0)
    # at k = 1 the two agree (the mean of the correct samples)
    assert pareval_speedup_at_k([1.0, 2.0, 8.0], 1) == pytest.approx(speedup_at_k(values, 1))


def test_speedup_at_k_none_without_correct_and_bad_values_rejected():
    assert speedup_at_k([None, None], 1) is None
    assert expected_best_at_k([None, None], 2) == 0.0
    for bad in ([0.0], [-1.0], [math.nan], [math.inf], ["2"], [True]):
        with pytest.raises(ValueError):
            expected_best_at_k(bad, 1)
    with pytest.raises(ValueError):
        expected_best_at_k([1.0, 2.0], 3)
    with pytest.raises(ValueError):
        expected_best_at_k([], 1)


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])


# ---------------------------------------------------------------------------------------------------- fast_p

def test_noise_margin_rule():
    m = NoiseMargin()                                        # 2 sigmas
    assert m.margin(0.03, 0.04) == pytest.approx(0.1)        # 2 * sqrt(0.03^2 + 0.04^2)
    assert m.margin(None, 0.05) == pytest.approx(0.1)        # a missing cv counts 0
    assert not m.faster_than(ok(1.05, 0.03, 0.04), 1.0)      # within the noise
    assert m.faster_than(ok(1.11, 0.03, 0.04), 1.0)
    assert not m.faster_than(ok(1.6, 0.03, 0.04), 1.5)       # 1.6 < 1.5 * 1.1
    assert m.faster_than(ok(1.0, None, None), 0.99)
    assert not m.faster_than(ok(1.0, None, None), 1.0)       # strictly faster
    assert m.faster_than(ok(None), 0.0) and not m.faster_than(ok(None), 0.5)  # untimed: only p = 0
    assert m.faster_than(ok(0.1, 0.5, 0.5), 0.0)             # p = 0: every correct sample
    assert not m.faster_than(wrong(), 0.0)
    assert NoiseMargin(0.0).faster_than(ok(1.05, 0.03, 0.04), 1.0)  # no margin: KernelBench's speedup > p
    with pytest.raises(ValueError):
        NoiseMargin(-1.0)


def test_fast_p_at_k_hand_values():
    st = task_stats("t", [ok(3.0), ok(1.05, 0.03, 0.04), wrong(), wrong(False)])
    assert fast_p_at_k(st, 1.0, 1) == pytest.approx(1 / 4)          # only the 3x clears 1 * 1.1
    assert fast_p_at_k(st, 0.0, 1) == pytest.approx(2 / 4)
    assert fast_p_at_k(st, 1.0, 2) == pytest.approx(1 - 3 / 6)      # 1 - C(3,2)/C(4,2)
    assert fast_p_at_k(st, 3.0, 1) == 0.0                           # 3.0 is not > 3.0
    assert fast_p_at_k(st, 1.0, 1, NoiseMargin(0.0)) == pytest.approx(2 / 4)


# ---------------------------------------------------------------------------------------------------- summary

def test_summary_over_tasks_hand_computed():
    samples = {
        "A": [ok(2.0), ok(8.0), wrong(), wrong()],                 # n 4, c 2
        "B": [ok(0.5), wrong(False), UNSCORED, UNSCORED],          # n 2 (unscored left out), c 1
        "C": [UNSCORED] * 4,                                       # reported, not counted
        "D": [wrong(False)] * 4,                                   # n 4, c 0: counts 0 in pass and fast_p
    }
    s = summarize(samples)
    assert s.tasks == 3
    assert s.uncounted_tasks == {"C": "all 4 samples unscored"}
    assert (s.samples, s.unscored_samples, s.correct_samples) == (10, 6, 3)
    assert s.compile_rate == pytest.approx(5 / 10)                 # A 4, B 1, D 0
    a1 = s.at(1)
    assert (a1.tasks, a1.tasks_n_below_k) == (3, 0)
    assert a1.pass_at_k == pytest.approx((2 / 4 + 1 / 2 + 0) / 3)
    assert a1.speedup_tasks == 2
    assert a1.speedup_geomean == pytest.approx(math.sqrt(5.0 * 0.5))   # A: mean(2, 8); B: 0.5
    assert a1.fast_p["1"] == pytest.approx((2 / 4 + 0 + 0) / 3)
    assert a1.fast_p["0"] == pytest.approx((2 / 4 + 1 / 2 + 0) / 3)
    assert a1.fast_p["3"] == pytest.approx((1 / 4) / 3)
    a3 = s.at(3)
    assert (a3.tasks, a3.tasks_n_below_k) == (2, 1)                # B has n = 2 < 3
    assert a3.pass_at_k == pytest.approx((1.0 + 0.0) / 2)
    # A, k=3 over [8, 2, 0, 0]: 8 * C(3,2)/C(4,3) + 2 * C(2,2)/C(4,3) = 6.5, every draw holds a correct one
    assert a3.speedup_geomean == pytest.approx(6.5)
    assert a3.speedup_tasks == 1
    assert s.at(5) is None                                         # no task has n >= 5
    d = s.to_dict()
    assert set(d["at_k"]) == {"1", "3"}
    assert d["at_k"]["1"]["fast_p"]["1.5"] == pytest.approx((2 / 4) / 3)


def test_policy_errors_left_out_by_default_or_counted_as_failures():
    samples = {"A": [POLICY_ERROR, ok(2.0)]}
    default = summarize(samples)
    assert (default.samples, default.policy_error_samples) == (1, 1)
    assert default.at(1).pass_at_k == 1.0
    counted = summarize(samples, MetricSettings(policy_errors_count_as_failures=True))
    assert counted.samples == 2
    assert counted.at(1).pass_at_k == pytest.approx(0.5)
    assert counted.compile_rate == pytest.approx(0.5)
    assert summarize({"P": [POLICY_ERROR]}).uncounted_tasks == {"P": "all 1 samples policy errors"}


def test_correct_untimed_counts_as_correct_but_not_for_speed():
    s = summarize({"A": [ok(None), ok(4.0), wrong()]})
    a1 = s.at(1)
    assert a1.pass_at_k == pytest.approx(2 / 3)
    assert a1.speedup_geomean == pytest.approx(4.0)     # over [4, x]: the untimed one is left out, not 0
    assert a1.fast_p["0"] == pytest.approx(2 / 3)
    assert a1.fast_p["1"] == pytest.approx(1 / 3)
    assert s.correct_untimed_samples == 1


def test_no_correct_sample_and_empty_input():
    s = summarize({"A": [wrong(), wrong(False)]})
    assert s.at(1).speedup_geomean is None and s.at(1).speedup_tasks == 0
    assert s.at(1).pass_at_k == 0.0 and all(v == 0.0 for v in s.at(1).fast_p.values())
    empty = summarize({})
    assert (empty.tasks, empty.at_k, empty.compile_rate) == (0, (), None)


def test_bad_inputs_rejected():
    with pytest.raises(ValueError, match="status"):
        SampleOutcome("done", compiled=True, correct=True)
    with pytest.raises(ValueError, match="incorrect"):
        SampleOutcome("scored", compiled=True, correct=False, speedup=2.0)
    with pytest.raises(ValueError):
        SampleOutcome("scored", compiled=True, correct=True, speedup=-1.0)
    with pytest.raises(ValueError):
        MetricSettings(ks=(0,))
    with pytest.raises(ValueError):
        MetricSettings(fast_p_thresholds=(-1.0,))
