"""Model-written variants (issue 28): a `cudaperf eval` run on the dataset's training tasks (a replayed policy,
real nvcc in compile-only mode), its answers added to the dataset as candidates of origin ``model`` with their
provenance, counted when they hold no code, repeat a task's code or name a task the dataset lacks, and added once
however often the run is added."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from cudaperf.dataset.build import build
from cudaperf.dataset.external import AddError, add_from_eval_run
from cudaperf.dataset.measure import select_candidates
from cudaperf.dataset.store import Dataset
from cudaperf.eval.run import EvalOptions, run_eval
from cudaperf.eval.tasksets import load_taskset
from cudaperf.policy.replay import ReplayPolicy
from cudaperf.tasks.schema import TaskError


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """A dataset of one family's first tasks, and an eval run over its training split: per task a new variant
    (a family variant with a comment of its own), a family variant as it is, and an answer without code."""
    root = tmp_path_factory.mktemp("model_variants")
    ds = Dataset.load(root / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=4)
    ds.save()
    ts = load_taskset("train:c", root / "ds")
    train = {t["id"] for t in ds.tasks if t["split_task"] == "train"}
    assert {t.id for t in ts.tasks} == train and len(train) >= 2
    ts = type(ts)(ts.spec, ts.benchmark, ts.tasks[:2], ts.meta, ts.excluded)
    nonce = uuid.uuid4().hex
    rows = []
    for t in ts.tasks:
        code = next(c["code"] for c in ds.candidates if c["task_id"] == t.id and c["name"] == "naive_b256")
        rows += [{"task_id": t.id, "sample": 0, "turn": 0,
                  "completion": f"<OUTPUT_CUDA>\n// {nonce}\n{code}</OUTPUT_CUDA>"},
                 {"task_id": t.id, "sample": 1, "turn": 0, "completion": f"```cuda\n{code}```"},
                 {"task_id": t.id, "sample": 2, "turn": 0, "completion": "I would rather not."}]
    comp = root / "answers.jsonl"
    comp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = root / "run"
    run_eval(ReplayPolicy(comp), ts, run, EvalOptions(samples=3, turns=1, compile_only=True,
                                                       summarizer="template", fewshot=False))
    return root / "ds", run, [t.id for t in ts.tasks]


def test_train_split_task_set_keeps_every_training_task_and_checks_its_dataset(tmp_path):
    shipped = load_taskset("train:c")
    assert shipped.benchmark == "c_train" and not shipped.excluded
    assert all(t.kind == "c_function" for t in shipped.tasks)
    assert len(load_taskset("train").tasks) > len(shipped.tasks)
    with pytest.raises(TaskError, match="no dataset there"):
        load_taskset("train:c", tmp_path)
    with pytest.raises(TaskError, match="give 'c' or 'pytorch'"):
        load_taskset("train:cuda")


def test_an_eval_runs_answers_become_model_candidates_with_their_provenance(grown, tmp_path):
    root, run, tids = grown
    ds = Dataset.load(root)
    n_before, version_before = len(ds.candidates), ds.version()
    got = add_from_eval_run(ds, run)
    assert (got.answers, len(got.added), got.duplicates, got.no_code, got.already) == (6, 2, 2, 2, 0)
    assert sorted(c["task_id"] for c in got.added) == sorted(tids)
    for c in got.added:
        assert c["origin"] == "model" and c["tags"] == [] and c["name"].endswith("-s0-t0")
        assert c["name"].startswith("replay-answers.jsonl-") and c["source"].startswith("model=replay:")
        assert f"run={run.resolve()}" in c["source"] and "sample=0 turn=0" in c["source"]
        assert c["code"].startswith("// ") and "__global__" in c["code"]
    v = ds.save()
    assert v != version_before
    again = Dataset.load(root)
    assert len(again.candidates) == n_before + 2 and again.version() == v
    assert {c["source"] for c in again.candidates if c["origin"] == "model"} == {c["source"] for c in got.added}
    assert all(c["source"] is None for c in again.candidates if c["origin"] == "family")
    # measured as untrusted code, with the external candidates; the family variants are the trusted part
    assert {c["candidate_id"] for c in select_candidates(again, origin="external")} == \
        {c["candidate_id"] for c in got.added}
    assert {c["origin"] for c in select_candidates(again, origin="family")} == {"family"}
    # the same run added again (an eval resumed since, say) adds nothing twice
    twice = add_from_eval_run(again, run)
    assert (len(twice.added), twice.already, twice.duplicates) == (0, 2, 2)


def test_the_command_adds_a_run_and_says_what_it_left_out(grown, tmp_path):
    root, run, _ = grown
    ds = Dataset.load(root)
    copy = tmp_path / "ds"
    ds.root = copy
    ds.save()
    r = subprocess.run([sys.executable, "-m", "cudaperf", "dataset", "add-candidates", str(run), "-d", str(copy)],
                       capture_output=True, text=True, timeout=300)
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, out
    assert "6 answers in" in out and "with code the task has already, 2 without code" in out
    other = Dataset.load(tmp_path / "other", missing_ok=True)
    build(other, families=["sum_reduce"], n_tasks=1)
    other.save()
    r = subprocess.run([sys.executable, "-m", "cudaperf", "dataset", "add-candidates", str(run), "-d",
                        str(other.root)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "none of its 2 tasks is in the dataset" in " ".join(r.stderr.split())
    with pytest.raises(AddError, match="no run.json"):
        add_from_eval_run(other, tmp_path)


def test_the_shipped_dataset_keeps_its_version_with_the_source_column():
    from cudaperf.dataset.store import default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    assert ds.version() == ds.manifest["version"]
