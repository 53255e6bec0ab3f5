"""The refinement environment: the paper's prompt, few-shot examples from training tasks only, public inputs that
are not the hidden tests, feedback per outcome, stop reasons, and batched steps through the real executor (nvcc
here; no GPU, so compile-only)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from cudaperf.env.evaluator import COMPILE_ONLY_MESSAGE, Evaluator
from cudaperf.env.feedback import feedback_text, template_summary, trim_compile_log
from cudaperf.env.prompt import FewShotPool, PromptSettings, build_messages, public_inputs, public_seed, render_prompt
from cudaperf.env.refine import EnvContext, EnvSettings, RefineEnv, step_batch
from cudaperf.harness.result import (CompileInfo, EvaluationResult, Failure, FailureKind, GpuEvidence, Mismatch,
                                     Stage, TestOutcome, TimingStats)
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.load import builtin_candidates, find_task, load_builtin_tasks



@pytest.fixture(scope="module")
def tasks():
    return load_builtin_tasks()


@pytest.fixture(scope="module")
def pool():
    return FewShotPool()


def _source(task_id: str, label: str) -> str:
    return next(c for c in builtin_candidates() if c.task_id == task_id and c.label == label).source


BROKEN = f"<OUTPUT_CUDA>\n{_source('saxpy', 'fast')}\nstatic int broken = ;\n</OUTPUT_CUDA>"


def test_prompt_has_the_papers_blocks_in_order(tasks, pool):
    task = find_task(tasks, "saxpy")
    text = render_prompt(task, pool.examples(task, seed=0), "turn 1: compile_error", "[COMPILE_ERROR]x[/COMPILE_ERROR]")
    order = ["[FEWSHOT]", "[EXAMPLE]", "[SEQ_CODE]", "[CUDA]", "[INPUTS]", "[SPEEDUP]", "[/FEWSHOT]",
             "[FEEDBACK_HISTORY]", "[FEEDBACK]", "<OUTPUT_CUDA></OUTPUT_CUDA>", "[SEQ_CODE]", "[INPUTS]"]
    pos = 0
    for tag in order:
        nxt = text.find(tag, pos)
        assert nxt >= 0, f"{tag} missing or out of order"
        pos = nxt + 1
    assert text.count("[EXAMPLE]") == 5
    assert task.signature in text and task.reference_c.strip() in text


def test_fewshot_examples_come_from_training_tasks_only_and_are_seeded(tasks, pool):
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    split = {t["id"]: (t["split_task"], t["split_family"]) for t in ds.tasks}
    held_out = {tid for tid, s in split.items() if s != ("train", "train")}
    assert pool.train_task_ids and not (pool.train_task_ids & held_out)
    test_task = next(t for t in ds.tasks if t["split_task"] == "test")
    from cudaperf.dataset.build import dataset_tasks

    target = dataset_tasks(ds)[test_task["id"]]
    a, b = pool.examples(target, seed=3), pool.examples(target, seed=3)
    c = pool.examples(target, seed=4)
    assert [e.task_id for e in a] == [e.task_id for e in b]
    assert [e.task_id for e in a] != [e.task_id for e in c]
    assert len(a) == 5 and all(split[e.task_id] == ("train", "train") for e in a)
    assert target.id not in {e.task_id for e in a}
    # the 5 are drawn from the 20 fastest of 50 sampled: each is among the fastest 20 of its 50-sample
    assert all(e.speedup > 1.0 for e in a)


def test_examples_are_dropped_one_by_one_to_fit_the_context(tasks, pool):
    task = find_task(tasks, "saxpy")
    exs = pool.examples(task, seed=0)
    count = lambda msgs: sum(len(m["content"]) for m in msgs)  # noqa: E731  (characters as tokens)
    full = count(build_messages(task, exs))
    bare = count(build_messages(task, []))
    for keep in range(len(exs) + 1):
        budget = count(build_messages(task, exs[:keep]))
        msgs = build_messages(task, exs, count_tokens=count, context_tokens=budget + 100, max_new_tokens=100)
        assert msgs[0]["content"].count("[EXAMPLE]") == keep
    tiny = build_messages(task, exs, count_tokens=count, context_tokens=10, max_new_tokens=0)
    assert count(tiny) == bare < full


def test_no_hidden_input_reaches_the_prompt(tasks, pool):
    """The hidden tests' inputs (drawn by the harness's own preparation) appear nowhere in the prompt; the public
    example is drawn from a fixed seed the harness never uses."""
    from cudaperf.harness.evaluate import prepare_task

    task = find_task(tasks, "saxpy")
    prepared = prepare_task(task, HarnessSettings(time_candidates=False), defer_baseline=True)
    text = render_prompt(task, pool.examples(task, seed=0), "", "")
    assert prepared.seed != public_seed(task.id)
    hidden = list(prepared.test_cases) + list(prepared.timing_cases)
    for case in hidden:
        for a in task.args:
            if a.role in ("in", "inout"):
                vals = np.asarray(case.values[a.name])[:64]
                shown = [f"{float(v):.6g}" for v in vals if abs(float(v)) > 1e-3]
                leaked = [s for s in shown if re.search(rf"(?<![\d.]){re.escape(s)}(?![\d])", text)]
                assert len(leaked) <= 1, f"hidden values of {a.name} in the prompt: {leaked[:5]}"
    for out in list(prepared.expected_tests) + list(prepared.expected_timing):
        for arr in (v for v in out.values.values() if isinstance(v, np.ndarray)):
            shown = [f"{float(v):.6g}" for v in np.asarray(arr)[:64] if abs(float(v)) > 1e-3]
            assert sum(s in text for s in shown) <= 1
    # the public example is exactly the public seed's case
    from cudaperf.tasks.inputs import generate_case

    small = min(range(len(task.size_configs)), key=lambda i: sum(task.size_configs[i].values()))
    pub = generate_case(task, small, public_seed(task.id))
    x = next(a for a in task.args if a.role == "in")
    assert f"{float(np.asarray(pub.values[x.name])[0]):.6g}" in public_inputs(task)


def test_babeltower_prompt_shows_the_wrapper_and_no_test_values():
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    path = find_babeltower(None)
    if path is None:
        pytest.skip("BabelTower data not found")
    task = load_babeltower(path)[0]
    text = render_prompt(task, [], "", "")
    assert task.wrapper.strip() in text and task.kernel_name in text
    for call in task.test_calls_cuda:
        assert call.strip() not in text
    for exp in task.expected_outputs:
        if len(exp.strip()) > 6:
            assert exp.strip() not in text


def test_pytorch_prompt_states_the_fast_path_contract_or_modelnew():
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = load_pytorch_tasks(builtin_pytorch_dir())[0]
    fast = render_prompt(task, [], "", "")
    assert "kernel_forward" in fast and "class Model" in fast
    modelnew = render_prompt(task, [], "", "", PromptSettings(pytorch_style="modelnew"))
    assert "ModelNew" in modelnew and "kernel_forward" not in modelnew


def _result(**kw) -> EvaluationResult:
    base = dict(task_id="saxpy", task_kind="c_function", candidate_id="s0-t0", code_sha256="x", status="scored",
                stage=Stage.COMPILED, correct=False)
    base.update(kw)
    return EvaluationResult(**base)


FEATS = {"coal": 1.0, "tpb": 256.0, "kernels": 1.0}


def test_feedback_per_outcome():
    log = "\n".join([f"note {i}" for i in range(40)] + ["k.cu(3): error: expected an expression"])
    ce = feedback_text(_result(stage=Stage.CHECKED, failure=Failure(FailureKind.COMPILE_ERROR, log)), FEATS)
    assert "[COMPILE_ERROR]" in ce and ce.index("error: expected") < ce.index("note 0")
    assert "more lines" in trim_compile_log(log)
    mm = Mismatch(output="y", index=17, expected=1.5, got=2.25, max_abs_err=0.75, max_rel_err=0.5, n_bad=3,
                  n_total=1000)
    tests = (TestOutcome(0, {"n": 100}, True), TestOutcome(1, {"n": 1001}, False, mismatch=mm))
    wrong = feedback_text(_result(stage=Stage.RAN, tests=tests, failure=Failure(FailureKind.WRONG_OUTPUT, "wrong")),
                          FEATS)
    assert "[FAILED_CASE]" in wrong and "element 17: expected 1.5, got 2.25" in wrong and "n = 1001" in wrong
    t = TimingStats.from_samples_ms([1.0, 1.0, 1.1])
    b = TimingStats.from_samples_ms([10.0, 10.0, 10.2])
    ok = feedback_text(_result(stage=Stage.TIMED, correct=True, tests=tests[:1], speedup=10.0, candidate_timing=t,
                               baseline_timing=b, gpu_evidence=GpuEvidence("cupti", 1, 1, kernel_ms=0.2, memcpy_ms=0.6)),
                       FEATS)
    assert "10.00x" in ok and "kernels 0.200 ms, copies 0.600 ms (75 % copies)" in ok
    for text in (ce, wrong, ok):
        assert "[FEATURES] coal = 1, tpb = 256, kernels = 1 [/FEATURES]" in text
    nogpu = feedback_text(_result(stage=Stage.RAN, failure=Failure(FailureKind.NO_GPU_WORK, "no kernel")), FEATS)
    assert "not computed on the GPU" in nogpu and "(no kernel)" in nogpu
    summary = template_summary("turn 1: compile_error", 1, _result(correct=True, speedup=3.0), FEATS)
    assert summary.splitlines() == ["turn 1: compile_error", "turn 2: correct, 3.00x (coal 1, tpb 256, kernels 1)"]


def _ctx(tasks, tmp_path, **kw) -> EnvContext:
    ev = Evaluator(tasks, tmp_path / "results.jsonl", compile_only=True, compile_workers=2)
    return EnvContext(evaluator=ev, **kw)


def test_reset_step_through_real_nvcc(tasks, tmp_path):
    task = find_task(tasks, "saxpy")
    ctx = _ctx(tasks, tmp_path, settings=EnvSettings(max_turns=3))
    env = RefineEnv(ctx)
    obs = env.reset(task)
    assert obs.turn == 0 and "[FEEDBACK]" not in obs.messages[0]["content"]
    r1 = env.step(BROKEN)
    assert not r1.done and r1.record.failure_kind == "compile_error" and r1.reward is not None and r1.reward < 0
    assert "[COMPILE_ERROR]" in r1.observation.messages[0]["content"]
    assert "[FEEDBACK_HISTORY]\nturn 1: compile_error" in r1.observation.messages[0]["content"]
    r2 = env.step(f"<OUTPUT_CUDA>\n{_source('saxpy', 'fast')}\n</OUTPUT_CUDA>")
    assert r2.record.compiled and r2.record.status == "unscored" and r2.reward is None
    assert r2.record.failure_message == COMPILE_ONLY_MESSAGE and r2.record.features["kernels"] == 1.0
    r3 = env.step(BROKEN)
    assert r3.done and r3.stop == "turn_limit" and r3.observation is None
    with pytest.raises(ValueError):
        env.step(BROKEN)
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["candidate_id"] for r in rows] == ["s0-t0", "s0-t1", "s0-t2"]


def test_stop_reasons_repeated_failure_and_no_code(tasks, tmp_path):
    ctx = _ctx(tasks, tmp_path, settings=EnvSettings(max_turns=5, repeat_patience=2))
    task = find_task(tasks, "saxpy")
    envs = [RefineEnv(ctx, task, 0), RefineEnv(ctx, task, 1), RefineEnv(ctx, task, 2)]
    for e in envs:
        e.reset()
    first = step_batch(envs, [BROKEN, "I cannot write CUDA.", BROKEN])
    assert [r.done for r in first] == [False, False, False]
    second = step_batch(envs, [BROKEN, "Still no code.", f"<OUTPUT_CUDA>\n{_source('saxpy', 'fast')}\n</OUTPUT_CUDA>"])
    assert [r.stop for r in second] == ["repeated_failure", "no_code", None]
    assert envs[2].turn == 2 and not envs[2].done


def test_a_policy_error_ends_a_trajectory(tasks, tmp_path):
    from cudaperf.policy.base import Generation

    ctx = _ctx(tasks, tmp_path)
    env = RefineEnv(ctx, find_task(tasks, "saxpy"))
    env.reset()
    r = env.step(Generation(text="", finish_reason="error", error="endpoint down after 5 retries"))
    assert r.done and r.stop == "policy_error" and r.record.status == "policy_error" and r.reward is None
    assert not (tmp_path / "results.jsonl").exists() or "s0-t0" not in (tmp_path / "results.jsonl").read_text()


def test_a_forged_result_in_the_store_lends_no_credit(tasks, tmp_path):
    """A result store planted with a correct, 500x result under the key of the next answer (another run's, or an
    edited file) must not credit an answer whose code it never judged: the evaluator refuses the store."""
    from dataclasses import replace

    from cudaperf.env.evaluator import StoreMismatchError
    from cudaperf.harness.records import code_sha256
    from cudaperf.harness.extract import extract_code
    from cudaperf.harness.store import ResultStore

    honest = f"<OUTPUT_CUDA>\n{_source('saxpy', 'fast')}\n</OUTPUT_CUDA>"
    forged = _result(candidate_id="s0-t0", status="scored", stage=Stage.TIMED, correct=True, speedup=500.0,
                     code_sha256=code_sha256(extract_code(honest).code))
    ResultStore(tmp_path / "results.jsonl").append(forged)
    ev = Evaluator(tasks, tmp_path / "results.jsonl", compile_only=True, compile_workers=1)
    with pytest.raises(StoreMismatchError, match="holds results of other code"):
        ev.evaluate([("saxpy", "s0-t0", BROKEN)])
    # the same record for the code it did judge is reused, not judged again (a resumed run)
    assert ev.evaluate([("saxpy", "s0-t0", honest)])[0].speedup == 500.0 and ev.n_judged == 0
    ResultStore(tmp_path / "results.jsonl").append(replace(forged, code_sha256=None))
    with pytest.raises(StoreMismatchError):
        ev.evaluate([("saxpy", "s0-t0", honest)])


def test_a_batched_generation_records_its_batch(tasks, tmp_path):
    """A local model's answer carries its generate call's batch size (its latency is that call's wall), so the
    report counts the call once; a string answer (no generation record) has none."""
    from cudaperf.policy.base import Generation

    ctx = _ctx(tasks, tmp_path, settings=EnvSettings(max_turns=2))
    env = RefineEnv(ctx, find_task(tasks, "saxpy"))
    env.reset()
    r = env.step(Generation(text="no code", latency_s=12.0, extra={"seed": 1, "batch": 6}))
    assert r.record.gen_batch == 6 and r.record.latency_s == 12.0
    assert env.step(BROKEN).record.gen_batch is None
    assert Generation(text="", extra={"batch": True}).batch_size is None
