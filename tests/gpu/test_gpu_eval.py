"""GPU behaviour of the evaluation loop (``pytest -m gpu``): the oracle passes, a wrong answer's feedback shows the
failing case, and a fixed answer in the next turn is timed."""

from __future__ import annotations

import json

import pytest

from cudaperf.eval.run import EvalOptions, run_eval
from cudaperf.eval.tasksets import load_taskset, select
from cudaperf.policy.replay import OraclePolicy, ReplayPolicy

pytestmark = pytest.mark.gpu


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_oracle_answers_are_correct_and_timed(tmp_path):
    ts = select(load_taskset("small:3"), limit=3)
    run_eval(OraclePolicy(), ts, tmp_path / "run", EvalOptions(samples=2, turns=1, summarizer="template"))
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert len(turns) == 6
    assert all(r["correct"] and r["speedup"] > 0 and r["stage"] == "timed" for r in turns), turns
    assert all(r["reward"] is not None and "x as fast as the sequential baseline" in r["feedback"] for r in turns)


def test_wrong_then_fixed_answer_across_turns(tmp_path):
    from cudaperf.tasks.load import builtin_candidates

    src = {(c.task_id, c.label): c.source for c in builtin_candidates()}
    rows = [{"task_id": "saxpy", "sample": 0, "turn": 0, "completion": src[("saxpy", "wrong")]},
            {"task_id": "saxpy", "sample": 0, "turn": 1, "completion": src[("saxpy", "fast")]}]
    comp = tmp_path / "c.jsonl"
    comp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ts = select(load_taskset("builtin"), task_ids=["saxpy"])
    run_eval(ReplayPolicy(comp), ts, tmp_path / "run", EvalOptions(samples=1, turns=2, summarizer="template",
                                                                    fewshot=False))
    t0, t1 = _lines(tmp_path / "run" / "turns.jsonl")
    assert not t0["correct"] and t0["failure_kind"] == "wrong_output" and "[FAILED_CASE]" in t0["feedback"]
    assert t0["reward"] < 0
    assert t1["correct"] and t1["speedup"] > 0 and t1["stage"] == "timed" and t1["stop"] == "turn_limit"
    prompts = {g["key"]: g["prompt"][0]["content"] for g in _lines(tmp_path / "run" / "generations.jsonl")}
    assert "[FAILED_CASE]" in prompts["saxpy/s0/t1/candidate"]


def test_a_candidate_that_exits_with_the_no_gpu_status_is_its_own_crash():
    """exit(5) is the harness's 'no usable GPU' status; from candidate code it must be the candidate's failure
    (an unscored result would be a reward hack under GRPO: advantage 0 instead of a wrong answer's penalty)."""
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.tasks.load import builtin_candidates, find_task, load_builtin_tasks

    src = next(c for c in builtin_candidates() if c.task_id == "saxpy" and c.label == "fast").source
    cheat = "#include <stdlib.h>\n" + src.replace('extern "C" void saxpy(', 'static void saxpy_real(') + (
        '\nextern "C" void saxpy(int n, float a, const float* x, float* y) { exit(5); saxpy_real(n, a, x, y); }\n')
    task = find_task(load_builtin_tasks(), "saxpy")
    res = evaluate(task, cheat)
    assert res.status == "scored" and not res.correct and res.failure.attributed_to == "candidate", res.failure
