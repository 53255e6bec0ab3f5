"""Text2CUDA (issue 27): text tasks derived from the test split, their prompts (the C reference never shown to the
policy), the spec turn then kernel turns end to end (real nvcc, compile-only), progressive-validation feedback
from real harness results, and the evolve strategy's acceptance and final outcome."""

from __future__ import annotations

import json
import uuid
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from cudaperf.env.prompt import build_messages
from cudaperf.env.refine import EnvContext, EnvSettings, RefineEnv, TemplateSummarizer, step_batch
from cudaperf.env.text2cuda import (MISSING_SPEC_NOTE, evolve_accepts, first_failing_stage, parse_spec,
                                    spec_messages, staged_validation, validation_stages)
from cudaperf.eval.records import TurnRecord
from cudaperf.eval.run import EvalOptions, RunDirError, run_eval
from cudaperf.eval.tasksets import load_taskset, select
from cudaperf.harness.result import (CompileInfo, EvaluationResult, Failure, FailureKind, Stage, TestOutcome,
                                     TimingStats)
from cudaperf.policy.replay import ReplayPolicy
from cudaperf.tasks.schema import CFunctionTask, TaskError
from cudaperf.tasks.text import (TEXT_TASKS_FILE, TextTask, build_text_rows, load_text_tasks, names_argument)


@pytest.fixture(scope="module")
def c_set():
    return load_taskset("test:c")


@pytest.fixture(scope="module")
def text_set():
    return load_taskset("text")


def _reference_lines(task) -> list[str]:
    """Distinctive lines of the reference (a leak of any shows in a prompt), less the definition's own line (its
    signature is public: the interface gives it, and the candidates repeat it)."""
    return [ln.strip() for ln in task.reference_c.splitlines()
            if len(ln.strip()) >= 16 and not ln.strip().startswith(("#", "//")) and f"{task.function_name}(" not in ln]


# --------------------------------------------------------------------------------------------------- the tasks

def test_text_tasks_map_to_the_test_split_and_name_every_argument(c_set, text_set):
    by_id = {t.id: t for t in c_set.tasks}
    assert len(text_set.tasks) >= 30 and text_set.benchmark == "text"
    assert len({t.id for t in text_set.tasks}) == len(text_set.tasks)
    for t in text_set.tasks:
        assert isinstance(t, TextTask) and t.framing == "text" and t.kind == "c_function"
        src = by_id[t.source_id]  # a held-out C task of the built-in dataset
        assert t.id == src.id
        for f in fields(CFunctionTask):  # judged exactly as its C task: everything but the text is the same
            if f.name != "description":
                assert getattr(t, f.name) == getattr(src, f.name), (t.id, f.name)
        for a in t.args:
            assert names_argument(t.description, a.name), (t.id, a.name)
            assert f"  {a.name}: {a.ctype}" in t.interface, (t.id, a.name)
        assert t.signature in t.interface
        assert text_set.meta[t.id]["family"] == c_set.meta[t.id]["family"]
    # the shipped file is what the builder writes from the test split today
    rows = [json.loads(x) for x in TEXT_TASKS_FILE.read_text().splitlines() if x.strip()]
    assert rows == build_text_rows(c_set.tasks, {t.id: c_set.meta[t.id]["family"] for t in c_set.tasks})
    assert {r["family"] for r in rows} >= {"matmul", "stencil2d", "transpose", "bfs_csr", "spmv_csr"}
    as_c = load_taskset("text-as-c")
    assert [t.id for t in as_c.tasks] == [t.id for t in text_set.tasks] and as_c.benchmark == "text_as_c"
    assert all(type(t) is CFunctionTask and t == by_id[t.id] for t in as_c.tasks)


def test_names_argument_is_a_word_match():
    assert names_argument("y[i] = x[i] + 1", "x") and names_argument("with (x, y)", "y")
    assert not names_argument("the max of a row", "x") and not names_argument("n_bad", "n")


def test_loader_refuses_rows_that_are_wrong(tmp_path, c_set):
    by_id = {t.id: t for t in c_set.tasks}
    good = json.loads(TEXT_TASKS_FILE.read_text().splitlines()[0])
    src = by_id[good["source_id"]]

    def load(row):
        p = tmp_path / "t.jsonl"
        p.write_text(json.dumps(row) + "\n")
        return load_text_tasks(p, c_tasks=by_id)

    assert [t.id for t in load(good)] == [good["id"]]
    last = src.args[-1].name
    unnamed = dict(good, description=" ".join(w for w in good["description"].split()
                                              if not names_argument(w, last)))
    with pytest.raises(TaskError, match=f"does not name the argument '{last}'"):
        load(unnamed)
    with pytest.raises(TaskError, match="not a C-function task of test:c"):
        load(dict(good, source_id="saxpy"))
    leak = next(ln for ln in src.reference_c.splitlines() if len(ln.strip()) >= 24 and "#" not in ln)
    with pytest.raises(TaskError, match="holds a line of the reference"):
        load(dict(good, description=good["description"] + "\n" + leak))
    with pytest.raises(TaskError, match="does not give"):
        load(dict(good, interface=good["interface"].replace(f"  {last}: ", f"  {last}_: ")))


# --------------------------------------------------------------------------------------------------- prompts

def test_prompt_shows_description_and_interface_and_never_the_reference(text_set, c_set):
    by_c = {t.id: t for t in c_set.tasks}
    for t in text_set.tasks:
        kernel = build_messages(t, [], "", "", spec="SPEC TEXT")[0]["content"]
        spec = spec_messages(t)[0]["content"]
        for text in (kernel, spec):
            assert f"[DESCRIPTION]\n{t.description}\n[/DESCRIPTION]" in text
            assert t.interface.strip() in text and "[SEQ_CODE]" not in text
            for ln in _reference_lines(t):
                assert ln not in text, (t.id, ln)
        assert "[SPEC]\nSPEC TEXT\n[/SPEC]" in kernel and "<SPEC></SPEC>" in spec
        assert "no program is given" in kernel
    # the check above can fail: the same task as C-to-CUDA shows its reference
    t = text_set.tasks[0]
    c_prompt = build_messages(by_c[t.id], [], "", "")[0]["content"]
    assert all(ln in c_prompt for ln in _reference_lines(t)) and "[DESCRIPTION]" not in c_prompt


def test_parse_spec():
    assert parse_spec("plan:\n<SPEC>\n inputs: x\n</SPEC> done") == "inputs: x"
    assert parse_spec("<SPEC> </SPEC><spec>second</spec>") == "second"
    assert parse_spec("no block here") is None and parse_spec("<SPEC>unclosed") is None


# --------------------------------------------------------------------------------------------------- end to end

EMAP = r"""
#include <cuda_runtime.h>
#include <math.h>
__global__ void k(int n, const double* x, const double* y, double* z) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = pow(fabs(x[i]) + 1.0, 0.5) * sin(y[i]);
}
extern "C" void emap(int n, const double* x, const double* y, double* z) {
    double *dx, *dy, *dz;
    size_t b = (size_t)n * sizeof(double);
    cudaMalloc(&dx, b); cudaMalloc(&dy, b); cudaMalloc(&dz, b);
    cudaMemcpy(dx, x, b, cudaMemcpyHostToDevice); cudaMemcpy(dy, y, b, cudaMemcpyHostToDevice);
    k<<<(n + 255) / 256, 256>>>(n, dx, dy, dz);
    cudaMemcpy(z, dz, b, cudaMemcpyDeviceToHost);
    cudaFree(dx); cudaFree(dy); cudaFree(dz);
}
"""

TID = "elementwise_map_007"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_run_eval_records_the_spec_turn_then_kernel_turns_and_never_shows_the_reference(tmp_path, text_set):
    ts = select(text_set, task_ids=[TID])
    task = ts.tasks[0]
    rows = [{"task_id": TID, "sample": 0, "purpose": "spec",
             "completion": "Here it is.\n<SPEC>\ninputs: n, x[n], y[n] doubles; output z[n]\none thread per i\n</SPEC>"}]
    code = f"// {uuid.uuid4().hex}\n{EMAP}"  # new to the compile cache: nvcc really runs
    for s in range(2):  # sample 1 has no spec row: its kernel turns go on with a note
        rows.append({"task_id": TID, "sample": s, "turn": 0,
                     "completion": f"<OUTPUT_CUDA>\n{code}\nstatic int broken = ;\n</OUTPUT_CUDA>"})
        rows.append({"task_id": TID, "sample": s, "turn": 1, "completion": f"<OUTPUT_CUDA>\n{code}\n</OUTPUT_CUDA>"})
    comp = tmp_path / "c.jsonl"
    comp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    opts = EvalOptions(samples=2, turns=2, compile_only=True, summarizer="policy", fewshot=False)
    first = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", opts)
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert [(r["sample"], r["phase"], r["turn"]) for r in turns] == [
        (0, "spec", 0), (1, "spec", 0), (0, "kernel", 0), (1, "kernel", 0), (0, "kernel", 1), (1, "kernel", 1)]
    spec0, spec1 = turns[0], turns[1]
    assert spec0["spec"].startswith("inputs: n, x[n]") and spec0["feedback"] == "" and spec0["task_kind"] == "text"
    assert spec1["failure_kind"] == "policy_error" and spec1["feedback"] == MISSING_SPEC_NOTE
    kernel = [r for r in turns if r["phase"] == "kernel"]
    assert all(r["task_kind"] == "text" and r["accepted"] is None for r in kernel)
    assert {r["failure_kind"] for r in kernel if r["turn"] == 0} == {"compile_error"}
    assert {r["status"] for r in kernel if r["turn"] == 1} == {"unscored"}  # compiled; not run without a GPU
    assert all("[VALIDATION]" in r["feedback"] and "first failing stage: compile" in r["feedback"]
               for r in kernel if r["turn"] == 0)
    gens = {g["key"]: g for g in _lines(tmp_path / "run" / "generations.jsonl")}
    assert set(gens) >= {f"{TID}/s0/t0/spec", f"{TID}/s0/t0/candidate", f"{TID}/s0/t1/candidate",
                         f"{TID}/s0/t0/summary"}
    assert f"{TID}/s1/t0/spec" not in gens  # an error answer is not recorded (a resumed run asks again)
    k0 = gens[f"{TID}/s0/t0/candidate"]["prompt"][0]["content"]
    assert "[SPEC]\ninputs: n, x[n], y[n] doubles; output z[n]\none thread per i\n[/SPEC]" in k0
    assert f"[SPEC]\n{MISSING_SPEC_NOTE}\n[/SPEC]" in gens[f"{TID}/s1/t0/candidate"]["prompt"][0]["content"]
    assert "first failing stage: compile" in gens[f"{TID}/s0/t1/candidate"]["prompt"][0]["content"]
    seen = [m["content"] for g in gens.values() for m in g["prompt"]] + [g["generation"]["text"] for g in gens.values()]
    seen += [r["feedback"] for r in turns] + [r["spec"] or "" for r in turns]
    for ln in _reference_lines(task):
        assert not any(ln in x for x in seen), ln
    # the report counts the kernel turns only
    from cudaperf.eval.report import build_metrics, load_run

    run = load_run(tmp_path / "run")
    assert len(run.records) == 4 and all(r.phase == "kernel" for r in run.records)
    m = build_metrics(run)
    # final = the best record per trajectory: the scored compile error (an unscored turn counts for nothing)
    assert (m["final"]["samples"], m["final"]["correct_samples"], m["final"]["compiled_samples"]) == (2, 0, 0)
    assert m["load"]["turns_reached"] == 2
    # resume: nothing recorded again (the missing spec is asked again, and again missing)
    again = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", opts)
    assert (again.n_turns_new, again.n_judged) == (0, 0) and again.n_generated == 1
    assert _lines(tmp_path / "run" / "turns.jsonl") == turns
    with pytest.raises(RunDirError, match="holds another run"):
        run_eval(ReplayPolicy(comp), ts, tmp_path / "run", replace(opts, strategy="evolve"))
    assert first.n_turns_new == 6


# --------------------------------------------------------------------------------------------------- stages

def test_staged_feedback_from_real_harness_results(c_set):
    """Hidden tests and expected outputs from the harness's own preparation (the reference run by gcc); the
    candidate's outputs are the expected ones, spoiled at chosen sizes, compared by the harness."""
    from cudaperf.harness.run_c_function import compare_case, prepare_c_function
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.tasks.inputs import CaseOutputs

    task = next(t for t in load_text_tasks(c_tasks={t.id: t for t in c_set.tasks}) if t.id == "stream_compact_001")
    prep = prepare_c_function(task, HarnessSettings(), seed=1234, time_baseline=False)
    sizes = sorted({c.config["n"] for c in prep.test_cases})
    assert sizes == [1, 999, 74167]  # tiny, edge, large; the timing size (5001241) is apart
    timing = task.size_configs[task.timing_config]
    info = CompileInfo(ok=True, compiler="nvcc", flags=(), arch="sm_90", toolchain="", log="", cached=True, seconds=0)

    def result(spoil_n: int | None, speedup: float | None = None) -> EvaluationResult:
        tests = []
        for i, (case, exp) in enumerate(zip(prep.test_cases, prep.expected_tests)):
            values = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in exp.values.items()}
            if case.config["n"] == spoil_n:
                values["y"][0] += 7
            got = CaseOutputs(status=exp.status, values=values)
            m = compare_case(task, exp, got)
            tests.append(TestOutcome(i, dict(case.config), m is None, "" if m is None else "mismatch", m))
        ok = all(t.passed for t in tests)
        res = EvaluationResult(
            task_id=task.id, task_kind="c_function", candidate_id="c", code_sha256="0", status="scored",
            stage=Stage.TIMED if ok else Stage.RAN, correct=ok, compile=info, tests=tuple(tests),
            failure=None if ok else Failure(FailureKind.WRONG_OUTPUT, "wrong"), speedup=speedup if ok else None,
            candidate_timing=TimingStats.from_samples_ms([1.0, 1.1]) if ok else None)
        return EvaluationResult.from_dict(json.loads(res.to_json()))  # as the result store hands it back

    for spoil, first in ((1, "tiny"), (999, "edge cases"), (74167, "large randomized")):
        text = staged_validation(result(spoil), timing)
        assert f"first failing stage: {first}" in text, text
        assert "timing (n = 5001241): not reached" in text
    text = staged_validation(result(999), timing)
    assert "2 tiny (n = 1): passed (2 tests)" in text and "3 edge cases (n = 999): FAILED (2 of 2" in text
    good = staged_validation(result(None, speedup=3.5), timing)
    assert "no stage failed" in good and "timing (n = 5001241): passed (3.50x" in good
    broken = replace(result(None), compile=replace(info, ok=False), tests=(), correct=False,
                     failure=Failure(FailureKind.COMPILE_ERROR, "x.cu(3): error"))
    assert first_failing_stage(validation_stages(broken)) == "compile"
    unrun = replace(result(None), tests=(), correct=False, status="unscored",
                    failure=Failure(FailureKind.HARNESS, "not run: compile-only", "harness"))
    assert first_failing_stage(validation_stages(unrun)) is None and "not run" in staged_validation(unrun)


# --------------------------------------------------------------------------------------------------- evolve

def _res(correct: bool, speedup: float | None = None, status: str = "scored") -> EvaluationResult:
    return EvaluationResult(task_id=TID, task_kind="c_function", candidate_id="c", code_sha256="0", status=status,
                            stage=Stage.TIMED if correct else Stage.RAN, correct=correct,
                            failure=None if correct else Failure(FailureKind.WRONG_OUTPUT, "wrong"),
                            speedup=speedup if correct else None)


def test_evolve_accepts_only_correct_and_faster_by_the_margin():
    assert evolve_accepts(None, _res(True, 1.5)) and evolve_accepts(None, _res(True, None))
    assert not evolve_accepts(None, _res(False)) and not evolve_accepts(None, _res(True, 9.0, "unscored"))
    best = _res(True, 2.0)
    assert evolve_accepts(best, _res(True, 2.1))
    assert not evolve_accepts(best, _res(True, 2.03))  # 1.5 % faster: within the 2 % margin
    assert evolve_accepts(best, _res(True, 2.03), margin=0.01)
    assert not evolve_accepts(best, _res(True, 1.5)) and not evolve_accepts(best, _res(False))
    assert not evolve_accepts(best, _res(True, None))


class _Scripted:
    """An evaluator that hands back constructed results in order."""

    def __init__(self, results):
        self.results = list(results)

    def evaluate(self, items, reuse_any=()):
        return [self.results.pop(0) for _ in items]


def _trajectory(strategy: str, results, tmp_task):
    ctx = EnvContext(evaluator=_Scripted(results), settings=EnvSettings(max_turns=len(results), strategy=strategy),
                     summarizer=TemplateSummarizer())
    env = RefineEnv(ctx, tmp_task, 0)
    env.reset()
    out = []
    for i in range(len(results)):
        out.append(step_batch([env], [f"<OUTPUT_CUDA>\n// answer {i}\n__global__ void k(){{}}\n</OUTPUT_CUDA>"])[0])
    return env, out


def _report_final_speedup(run_dir: Path, recs) -> float:
    from cudaperf.eval.records import RunHeader
    from cudaperf.eval.report import build_metrics, load_run

    run_dir.mkdir(parents=True, exist_ok=True)
    head = RunHeader(policy="scripted", tasks="x", benchmark="file", task_ids=(TID,), samples=1, turns=len(recs),
                     temperature=0.0, top_p=1.0, max_new_tokens=1, seed=0, compile_only=False,
                     reward_preset="verifiable", target_speedup=None)
    (run_dir / "run.json").write_text(json.dumps(head.to_dict()))
    (run_dir / "turns.jsonl").write_text("".join(r.to_json() + "\n" for r in recs))
    return build_metrics(load_run(run_dir))["final"]["at_k"]["1"]["speedup_geomean"]


def test_evolve_keeps_the_best_and_the_report_takes_it_as_final(c_set, tmp_path):
    from cudaperf.eval.report import best_by_turn, final_by_turn

    task = next(t for t in c_set.tasks if t.id == TID)
    script = [_res(False), _res(True, 2.0), _res(True, 1.2), _res(False), _res(True, 2.03), _res(True, 3.0)]
    env, steps = _trajectory("evolve", script[:5], task)
    recs = [s.record for s in steps]
    assert [r.accepted for r in recs] == [False, True, False, False, False]
    assert env.best[0] == 1 and "// answer 1" in env.best[1]
    assert "[BEST_SO_FAR]" not in recs[0].feedback  # still repairing
    for r in recs[1:]:  # every optimization turn's prompt shows the best so far (turn 2's answer)
        assert "[BEST_SO_FAR]" in r.feedback and "// answer 1" in r.feedback and "2.00x" in r.feedback
    assert "accepted as the new best" in recs[1].feedback and "not accepted" in recs[4].feedback
    assert steps[-1].observation is None and "// answer 1" in recs[-1].feedback
    # the report's final outcome is the best accepted (2.00x), not the 2.03x one that missed the margin
    assert final_by_turn(recs, 4).turn == 1 and best_by_turn(recs, 4).turn == 4
    assert _report_final_speedup(tmp_path, recs) == pytest.approx(2.0)  # and so does the report's summary
    env, steps = _trajectory("evolve", script, task)
    assert [s.record.accepted for s in steps][-1] is True and env.best[0] == 5
    assert final_by_turn([s.record for s in steps], 5).speedup == 3.0
    # refine: no acceptance, no best block, and the final outcome is best-by-turn as before
    env, steps = _trajectory("refine", script[:5], task)
    recs = [s.record for s in steps]
    assert all(r.accepted is None and "[BEST_SO_FAR]" not in r.feedback for r in recs)
    assert final_by_turn(recs, 4).turn == 4
    assert _report_final_speedup(tmp_path / "refine", recs) == pytest.approx(2.03)
    # an evolve trajectory without a correct candidate falls back to the best failure
    env, steps = _trajectory("evolve", [_res(False), _res(False)], task)
    assert final_by_turn([s.record for s in steps], 1).turn == 0
    with pytest.raises(ValueError, match="strategy"):
        EvalOptions(strategy="greedy")


def test_turn_records_without_the_new_fields_still_load():
    rec = TurnRecord.from_dict({k: v for k, v in _minimal_record().items() if k not in ("phase", "spec", "accepted")})
    assert rec.phase == "kernel" and rec.accepted is None and rec.spec is None


def _minimal_record() -> dict:
    return dict(task_id="t", task_kind="c_function", sample=0, turn=0, candidate_id="s0-t0", family=None,
                level=None, status="scored", stage="ran", compiled=True, correct=False, failure_kind="wrong_output",
                failure_message="", speedup=None, candidate_cv=None, baseline_cv=None, kernel_ms=None,
                memcpy_ms=None, reward=0.0, reward_terms={}, features={}, prompt_tokens=1, completion_tokens=1,
                finish_reason="stop", latency_s=0.0, feedback="")


def test_cli_runs_text_tasks_with_evolve(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app

    comp = tmp_path / "c.jsonl"
    comp.write_text(json.dumps({"task_id": TID, "purpose": "spec", "completion": "<SPEC>one thread per i</SPEC>"})
                    + "\n" + json.dumps({"task_id": TID, "completion": f"<OUTPUT_CUDA>\n{EMAP}\n</OUTPUT_CUDA>"})
                    + "\n")
    common = ["eval", "--compile-only", "--policy", f"replay:{comp}", "--task-ids", TID, "--samples", "1",
              "--turns", "1", "--summarizer", "template", "--no-fewshot", "--no-report"]
    base = [*common, "--tasks", "text"]
    runner = CliRunner()
    bad = runner.invoke(app, base + ["--strategy", "greedy", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and "strategy" in bad.output
    ok = runner.invoke(app, base + ["--strategy", "evolve", "--out", str(tmp_path / "run")])
    assert ok.exit_code == 0, ok.output
    head = json.loads((tmp_path / "run" / "run.json").read_text())
    assert head["benchmark"] == "text" and head["settings"]["strategy"] == "evolve"
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert [r["phase"] for r in turns] == ["spec", "kernel"] and turns[0]["spec"] == "one thread per i"
    assert turns[1]["accepted"] is False  # compiled, not run here: not correct, not accepted
    assert "[VALIDATION]" in turns[1]["feedback"] and "[BEST_SO_FAR]" not in turns[1]["feedback"]
    # text-as-c: the same id, its C source shown, no spec turn; --staged-feedback on gives it the stages too
    as_c = runner.invoke(app, [*common, "--tasks", "text-as-c", "--staged-feedback", "on", "--out", str(tmp_path / "c")])
    assert as_c.exit_code == 0, as_c.output
    turns = _lines(tmp_path / "c" / "turns.jsonl")
    assert [(r["phase"], r["task_kind"]) for r in turns] == [("kernel", "c_function")]
    assert "[VALIDATION]" in turns[0]["feedback"]
    prompt = _lines(tmp_path / "c" / "generations.jsonl")[0]["prompt"][0]["content"]
    assert "[SEQ_CODE]" in prompt and "[DESCRIPTION]" not in prompt
