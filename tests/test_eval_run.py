"""The evaluation loop end to end on this machine (real nvcc, compile-only: no GPU here): records per turn, the
run directory's resume (nothing asked or judged twice), a directory of another run refused, and a real
``cudaperf eval`` process killed mid-run and resumed with nothing lost or duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from cudaperf.eval.run import EvalOptions, RunDirError, run_eval
from cudaperf.eval.tasksets import load_taskset, select
from cudaperf.policy.replay import ReplayPolicy
from cudaperf.tasks.load import builtin_candidates

TASK_IDS = ["saxpy", "dot"]


def _completions(path: Path, samples: int, turns: int) -> Path:
    """Per (task, sample, turn): broken, then the bundled fast and slow variants; a nonce makes every source new
    to the compile cache, so the run really compiles."""
    nonce = uuid.uuid4().hex
    src = {(c.task_id, c.label): c.source for c in builtin_candidates()}
    rows = []
    for tid in TASK_IDS:
        for s in range(samples):
            for t in range(turns):
                body = [src[(tid, "fast")] + "\nstatic int broken = ;", src[(tid, "fast")], src[(tid, "slow")]][t % 3]
                rows.append({"task_id": tid, "sample": s, "turn": t,
                             "completion": f"<OUTPUT_CUDA>\n// {nonce} {s} {t}\n{body}\n</OUTPUT_CUDA>"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_run_records_every_turn_and_resumes_without_asking_or_judging_again(tmp_path):
    comp = _completions(tmp_path / "c.jsonl", 2, 3)
    ts = select(load_taskset("builtin"), task_ids=TASK_IDS)
    opts = EvalOptions(samples=2, turns=3, compile_only=True, summarizer="template", fewshot=False)
    first = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", opts)
    assert first.n_turns_new == 12 and first.n_generated == 12 and first.n_judged == 12
    turns = _lines(tmp_path / "run" / "turns.jsonl")
    assert [(r["task_id"], r["sample"], r["turn"]) for r in turns] == [
        (t, s, k) for k in range(3) for t in TASK_IDS for s in range(2)]
    by_turn = {k: {r["failure_kind"] for r in turns if r["turn"] == k} for k in range(3)}
    assert by_turn == {0: {"compile_error"}, 1: {"harness_error"}, 2: {"harness_error"}}
    assert all(r["stop"] == "turn_limit" for r in turns if r["turn"] == 2)
    assert all("[COMPILE_ERROR]" in r["feedback"] for r in turns if r["turn"] == 0)
    prompts = {g["key"]: g["prompt"][0]["content"] for g in _lines(tmp_path / "run" / "generations.jsonl")}
    assert "[COMPILE_ERROR]" in prompts["saxpy/s0/t1/candidate"]
    assert "turn 1: compile_error" in prompts["saxpy/s0/t2/candidate"]
    again = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", opts)
    assert (again.n_turns_new, again.n_generated, again.n_judged) == (0, 0, 0)
    assert _lines(tmp_path / "run" / "turns.jsonl") == turns
    with pytest.raises(RunDirError, match="holds another run"):
        run_eval(ReplayPolicy(comp), ts, tmp_path / "run", EvalOptions(samples=3, turns=3, compile_only=True,
                                                                     summarizer="template", fewshot=False))


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "cudaperf", "eval", *args]


def _key(r: dict) -> tuple:
    return (r["task_id"], r["sample"], r["turn"])


def _comparable(rows: list[dict]) -> dict:
    return {_key(r): (r["stage"], r["compiled"], r["failure_kind"], r["stop"], r["feedback"]) for r in rows}


@pytest.mark.parametrize("kill_after_results", [3, 7])
def test_a_killed_eval_resumes_with_nothing_lost_or_duplicated(tmp_path, kill_after_results):
    comp = _completions(tmp_path / "c.jsonl", 2, 3)
    common = ["--policy", f"replay:{comp}", "--tasks", "builtin", "--task-ids", ",".join(TASK_IDS), "--samples",
              "2", "--turns", "3", "--compile-only", "--summarizer", "template", "--no-report"]
    run = tmp_path / "killed"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_cli([*common, "--out", str(run)]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(_lines(run / "results.jsonl")) < kill_after_results and proc.poll() is None:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed: " + proc.stdout.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _lines(run / "turns.jsonl")
    assert len(before) < 12
    done = subprocess.run(_cli([*common, "--out", str(run)]), capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    turns = _lines(run / "turns.jsonl")
    keys = [_key(r) for r in turns]
    assert len(keys) == len(set(keys)) == 12
    assert turns[: len(before)] == before  # nothing rewritten
    gens = [g["key"] for g in _lines(run / "generations.jsonl")]
    assert len(gens) == len(set(gens)) == 12
    results = [(r["task_id"], r["candidate_id"]) for r in _lines(run / "results.jsonl")]
    assert len(results) == len(set(results)) == 12
    # the same as a run never interrupted
    whole = tmp_path / "whole"
    ok = subprocess.run(_cli([*common, "--out", str(whole)]), capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stdout[-3000:]
    assert _comparable(turns) == _comparable(_lines(whole / "turns.jsonl"))


def test_cli_says_plainly_what_is_wrong(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app

    from cudaperf.harness.environment import gpu_count

    runner = CliRunner()
    if gpu_count() == 0:
        no_gpu = runner.invoke(app, ["eval", "--policy", "oracle", "--out", str(tmp_path / "r")])
        text = " ".join(no_gpu.output.split())
        assert no_gpu.exit_code == 2 and "no NVIDIA GPU is visible" in text and "--compile-only" in text
        assert not (tmp_path / "r").exists()  # nothing generated, nothing written
    bad_tasks = runner.invoke(app, ["eval", "--compile-only", "--tasks", "nonesuch", "--out", str(tmp_path / "r")])
    assert bad_tasks.exit_code == 2 and "not a task set" in bad_tasks.output
    bad_policy = runner.invoke(app, ["eval", "--compile-only", "--policy", "gpt", "--tasks", "builtin", "--limit",
                                     "1", "--out", str(tmp_path / "r")])
    assert bad_policy.exit_code == 2 and "the forms are" in bad_policy.output
    missing = runner.invoke(app, ["eval", "--compile-only", "--policy", f"replay:{tmp_path / 'none.jsonl'}",
                                  "--tasks", "builtin", "--limit", "1", "--out", str(tmp_path / "r")])
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())
    assert runner.invoke(app, ["report", str(tmp_path / "nowhere")]).exit_code == 2


def test_task_sets(tmp_path):
    from cudaperf.eval.tasksets import BABELTOWER_DEFECTS
    from cudaperf.tasks.pytorch import builtin_pytorch_dir
    from cudaperf.tasks.schema import TaskError

    small = load_taskset("small")
    assert len(small.tasks) == 12 and len({m["family"] for m in small.meta.values()}) == 12
    assert all(t.kind == "c_function" for t in small.tasks)
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    split = {t["id"]: t["split_task"] for t in Dataset.load(default_dataset_dir()).tasks}
    assert {split[t.id] for t in load_taskset("test").tasks} == {"test"}
    fam = load_taskset("test-family:pytorch")
    assert fam.tasks and all(t.kind == "pytorch" for t in fam.tasks)
    # a KernelBench-shaped checkout: levels 1-3 are the benchmark, level 4 is listed as excluded
    src = (builtin_pytorch_dir() / "relu.py").read_text()
    for level, name in [("level1", "19_ReLU.py"), ("level2", "1_Conv.py"), ("level4", "1_Big.py")]:
        (tmp_path / "KernelBench" / level).mkdir(parents=True)
        (tmp_path / "KernelBench" / level / name).write_text(src)
    kb = load_taskset(f"kernelbench:{tmp_path}")
    assert [t.id for t in kb.tasks] == ["level1_19_ReLU", "level2_1_Conv"] and list(kb.excluded) == ["level4_1_Big"]
    assert [kb.meta[t.id]["level"] for t in kb.tasks] == ["level1", "level2"]
    one = load_taskset(f"kernelbench:{tmp_path / 'KernelBench' / 'level4'}")
    assert [t.id for t in one.tasks] == ["1_Big"] and one.meta["1_Big"]["level"] == "level4"
    bt = load_taskset("babeltower") if (Path(__file__).parents[2] / "shared" / "data" / "babeltower").exists() else None
    if bt is not None:
        assert set(bt.excluded) == set(BABELTOWER_DEFECTS) and len(bt.tasks) == 233 - len(BABELTOWER_DEFECTS)
    with pytest.raises(TaskError, match="not a task set"):
        load_taskset("nonesuch")
    with pytest.raises(TaskError, match="not in --tasks"):
        select(small, task_ids=["nope"])


class _SlowReplay(ReplayPolicy):
    """The replay policy taking real time per generate call, as a model does."""

    def generate(self, requests, params):
        time.sleep(0.5)
        return super().generate(requests, params)


def test_max_minutes_starts_no_generation_chunk_past_the_deadline_and_a_rerun_asks_the_rest(tmp_path):
    from cudaperf.eval.run import BUDGET_ERROR, CachingPolicy
    from cudaperf.policy.base import Request, SamplingParams

    comp = _completions(tmp_path / "c.jsonl", 3, 1)
    reqs = [Request(messages=({"role": "user", "content": "x"},), task_id="saxpy", sample=s) for s in range(3)]
    cached = CachingPolicy(_SlowReplay(comp), tmp_path / "g.jsonl", chunk=1)
    gens = cached.generate(reqs, SamplingParams(), deadline=time.monotonic() + 0.25)
    assert gens[0].error is None and [g.error for g in gens[1:]] == [BUDGET_ERROR, BUDGET_ERROR]
    assert len(_lines(tmp_path / "g.jsonl")) == 1  # the unasked are not recorded

    ts = select(load_taskset("builtin"), task_ids=TASK_IDS)
    opts = EvalOptions(samples=3, turns=1, compile_only=True, summarizer="template", fewshot=False, chunk=2)
    none = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", replace(opts, max_minutes=0.0))
    assert (none.n_turns_new, none.n_generated) == (0, 0) and none.stops == {"budget": 6}
    rest = run_eval(ReplayPolicy(comp), ts, tmp_path / "run", opts)
    assert rest.n_turns_new == 6 and rest.n_generated == 6
