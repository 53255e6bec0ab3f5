"""Rewards: R_ver against hand-computed values (on real H200 results), presets, LEAP's group reward, and the
TRL / verl adapters over real harness evaluations (here without a GPU: compile failures are scored, compiled
candidates are unscored)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from cudaperf.harness.result import EvaluationResult
from cudaperf.reward.adapters import HarnessRewards, UnscoredError, verl_compute_score
from cudaperf.reward.composite import RewardSettings, leap_group_rewards, reward
from cudaperf.reward.terms import VerifiableSettings, r_ver
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

RECORDS = Path(__file__).resolve().parents[1] / "benchmarks/results/2026-11-29-h200/bundled_run1.jsonl"


@pytest.fixture(scope="module")
def real():
    """Real H200 results of the bundled collatz_steps candidates (fast, slow: correct; wrong: all tests fail)."""
    rows = [json.loads(l) for l in RECORDS.read_text().splitlines() if l.strip()]
    return {r["candidate_id"]: EvaluationResult.from_dict(r) for r in rows if r["task_id"] == "collatz_steps"}


def test_correct_candidate_speed_and_stability(real):
    fast = real["fast"]
    r = replace(fast, speedup=4.0, candidate_timing=replace(fast.candidate_timing, cv=0.02))
    assert r_ver(r) == pytest.approx(1.0 * 2.0 - 0.5 * 0.02)       # log2 4 = 2
    r = replace(r, speedup=64.0)
    assert r_ver(r) == pytest.approx(4.0 - 0.01)                    # log2 64 = 6, clipped to s_max = 4
    r = replace(r, speedup=0.5)
    assert r_ver(r) == pytest.approx(-0.5 - 0.01)                   # log2 0.5 = -1, clipped to s_min = -0.5
    # the record itself: speedup 315.9 -> clipped to 4
    assert r_ver(fast) == pytest.approx(4.0 - 0.5 * fast.candidate_timing.cv)


def test_wrong_and_uncompiled_candidates(real):
    wrong = real["wrong"]                                           # 0 of 6 tests passed
    assert r_ver(wrong) == pytest.approx(-2.0)
    half = replace(wrong, pass_fraction=0.5)
    assert r_ver(half) == pytest.approx(-1.0)
    # every test passed but the timed outputs were wrong: counted as one more failed test (p = 6/7)
    recheck = replace(half, pass_fraction=1.0)
    assert r_ver(recheck) == pytest.approx(-2.0 * (1 - 6 / 7))
    custom = VerifiableSettings(alpha_wrong=4.0)
    assert r_ver(half, custom) == pytest.approx(-2.0)
    assert r_ver(replace(wrong, status="unscored")) is None


def _task():
    return find_task(load_builtin_tasks(), "saxpy")


BROKEN = "```cuda\n__global__ void k(float* a) { a[threadIdx.x] = ; }\nextern \"C\" void saxpy() {}\n```"
HACK = "```cuda\n#define __global__\nvoid k() {}\nextern \"C\" void saxpy(int n, float a, const float* x, float* y) {}\n```"


def _good():
    return next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source


@pytest.mark.slow  # 50 s on two cores; test_one_evaluation_per_task_and_code goes through the harness too
def test_rewards_through_the_real_harness_without_a_gpu():
    task = _task()
    rw = HarnessRewards([task], settings=RewardSettings(preset="verifiable"))
    fn = rw.total()
    got = fn(prompts=["p"] * 4, completions=[BROKEN, HACK, "no code at all", _good()],
             completion_ids=None, task_id=["saxpy"] * 4)
    assert got[:3] == [-3.0, -3.0, -3.0]      # compile error, static check (keyword macro), no code
    assert got[3] is None                      # compiled, but no GPU here: unscored, never 0


def test_one_evaluation_per_task_and_code(monkeypatch):
    task = _task()
    rw = HarnessRewards([task], settings=RewardSettings(preset="verifiable"))
    wrapped = "Here it is:\n" + BROKEN + "\nDone."
    conv = [[{"role": "assistant", "content": BROKEN}]]
    for fn in rw.functions() + [rw.total()]:
        fn(prompts=["p", "p"], completions=[BROKEN, wrapped], task_id=["saxpy", "saxpy"])
        fn(prompts=["p"], completions=conv, task_id=["saxpy"])
    assert rw.evaluations == 1
    with pytest.raises(KeyError, match="task_id"):
        rw.total()(prompts=["p"], completions=[BROKEN])


def test_presets_and_breakdown(real):
    task = find_task(load_builtin_tasks(), "collatz_steps")
    src = next(c for c in builtin_candidates() if c.task_id == "collatz_steps" and c.label == "fast").source
    fast = real["fast"]
    score = lambda code: 2.0                                          # a structural scorer
    paper = reward(task, src, fast, RewardSettings("paper"), score)
    assert paper.total == pytest.approx(r_ver(fast) + 2.0) and paper.terms["str"] == 2.0
    gated = reward(task, src, fast, RewardSettings("gated", gate_scale=0.5), score)
    assert gated.total == pytest.approx(r_ver(fast) + 0.5 * math.tanh(2.0))
    from cudaperf.harness.result import FailureKind

    failed = replace(real["wrong"], failure=replace(real["wrong"].failure, kind=FailureKind.COMPILE_ERROR))
    g = reward(task, src, failed, RewardSettings("gated"), score)
    assert g.total == -3.0 and g.terms["str"] == 0.0                  # no structural credit without compiling
    with pytest.raises(ValueError, match="structural scorer"):
        reward(task, src, fast, RewardSettings("paper"), None)
    with pytest.raises(ValueError, match="unknown reward preset"):
        RewardSettings("fancy")


def test_leap_group_reward(real):
    from cudaperf.harness.result import FailureKind

    fast, slow, wrong = real["fast"], real["slow"], real["wrong"]
    nocomp = replace(wrong, failure=replace(wrong.failure, kind=FailureKind.COMPILE_ERROR))
    short, long = "```cuda\n__global__ void k(){}\n```", "```cuda\n__global__ void k(){ /* a longer body */ }\n```"
    group = [nocomp, wrong, slow, fast, replace(fast, status="unscored")]
    got = leap_group_rewards([short, short, short, long, short], group)
    # among the 4 scored: nocomp beats none, wrong beats 1, slow beats 2, fast beats 3
    assert got == [0.0, 1 / 3, 2 / 3, 1.0, None]
    # a tie in everything but length: the shorter wins
    assert leap_group_rewards([short, long], [fast, fast]) == [1.0, 0.0]


def test_verl_adapter():
    rw = HarnessRewards([_task()], settings=RewardSettings(preset="verifiable"))
    cs = verl_compute_score(rw)
    assert cs("cudaperf", BROKEN, "saxpy")["score"] == -3.0
    with pytest.raises(UnscoredError):
        cs("cudaperf", _good(), "saxpy")
    assert math.isnan(verl_compute_score(rw, on_unscored="nan")("cudaperf", _good(), "saxpy")["score"])


def test_trl_reward_functions_take_pytorch_tasks():
    """A PyTorch task in the reward's task set: real fast-path completions through evaluate(); a torch-computing
    ModelNew is a static-check failure (-3), a unit that compiles is unscored here (no GPU: None, never 0)."""
    from pathlib import Path

    from cudaperf.harness.environment import gpu_count
    from cudaperf.reward.adapters import HarnessRewards
    from cudaperf.reward.composite import RewardSettings
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    fix = Path(__file__).parent / "fixtures"
    cheat = (fix / "pytorch" / "relu_modelnew.py").read_text().replace("return self.ext.relu_cuda(x)",
                                                                       "return torch.relu(x)")
    unit = (fix / "torch_fast" / "relu.cu").read_text()
    rewards = HarnessRewards([task], settings=RewardSettings("verifiable"))
    (fn,) = rewards.functions()
    got = fn(prompts=["p", "p"], completions=[f"```python\n{cheat}\n```", f"```cuda\n{unit}\n```"],
             completion_ids=None, task_id=["relu", "relu"])
    assert got[0] == -3.0
    if gpu_count() == 0:
        assert got[1] is None
