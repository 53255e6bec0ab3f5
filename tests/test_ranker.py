"""The offline ranker: pairs, metrics, the linear baseline, deterministic training and save/load, on real
family variants (real code, real features) with measurement rows written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.build import build  # noqa: E402
from cudaperf.dataset.store import Dataset  # noqa: E402
from cudaperf.ranker.evaluate import evaluate_split, fit_linear, kendall_tau_b, metrics  # noqa: E402
from cudaperf.ranker.model import pairwise_logistic_loss  # noqa: E402
from cudaperf.ranker.pairs import Item, ordered_pairs, quartile_pairs  # noqa: E402
from cudaperf.ranker.train import Ranker, RankerSettings, train_ranker  # noqa: E402


def _items(task: str, speedups):
    return [Item(f"{task}/v{i}", task, s) for i, s in enumerate(speedups)]


def test_quartile_pairs_join_the_fastest_and_slowest_quarters_within_a_task():
    items = _items("a", [1, 2, 3, 4, 5, 6, 7, 8]) + _items("b", [1.0, 2.0, 3.0])
    pairs = quartile_pairs(items)
    assert {(s.speedup, w.speedup) for s, w in pairs} == {(8, 1), (8, 2), (7, 1), (7, 2)}
    assert all(s.task_id == w.task_id for s, w in pairs)  # never across tasks; task b (3 items) gives none
    assert len(ordered_pairs(_items("c", [1, 2, 2]))) == 2  # the tie is not a pair


def test_kendall_tau_b_known_values():
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # one discordant pair of 6: (5 - 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6)


def test_metrics_of_a_perfect_and_a_reversed_scorer():
    items = _items("a", [1, 2, 3, 4, 5, 6, 7, 8])
    perfect = metrics(items, {i.candidate_id: i.speedup for i in items})
    assert perfect["pairwise_accuracy"] == 1.0 and perfect["kendall_tau"] == pytest.approx(1.0)
    assert perfect["top1_hit_rate"] == 1.0 and perfect["ordered_accuracy"] == 1.0
    rev = metrics(items, {i.candidate_id: -i.speedup for i in items})
    assert rev["pairwise_accuracy"] == 0.0 and rev["top1_hit_rate"] == 0.0
    flat = metrics(items, {i.candidate_id: 0.0 for i in items})
    assert flat["pairwise_accuracy"] == 0.5  # ties count one half
    assert perfect["pairwise_accuracy_ci95"] == [1.0, 1.0] and flat["pairwise_accuracy_ci95"] == [0.5, 0.5]


def test_the_interval_resamples_whole_tasks():
    from cudaperf.ranker.evaluate import task_bootstrap_ci

    right = _items("a", [1, 2, 3, 4, 5, 6, 7, 8])
    wrong = _items("b", [1, 2, 3, 4, 5, 6, 7, 8])
    scores = {**{i.candidate_id: i.speedup for i in right}, **{i.candidate_id: -i.speedup for i in wrong}}
    m = metrics(right + wrong, scores)
    assert m["pairwise_accuracy"] == 0.5
    lo, hi = m["pairwise_accuracy_ci95"]
    assert lo == 0.0 and hi == 1.0  # two tasks, one right and one wrong: resamples of tasks span both
    assert all(math.isnan(x) for x in task_bootstrap_ci([], {}))  # no pairs, no interval


def test_linear_baseline_learns_the_separating_direction():
    rng = np.random.default_rng(0)
    neg = rng.normal(size=(200, 3))
    pos = neg + np.array([1.0, 0.0, -0.5]) + 0.1 * rng.normal(size=(200, 3))
    w = fit_linear(pos, neg)
    assert w[0] > 0 and w[2] < 0 and abs(w[1]) < w[0]


def test_loss_is_log2_at_a_tie_and_small_when_ordered():
    z = torch.zeros(4)
    assert float(pairwise_logistic_loss(z, z)) == pytest.approx(math.log(2))
    assert float(pairwise_logistic_loss(z + 10, z)) < 1e-4


def _row(c, speedup):
    return {"candidate_id": c["candidate_id"], "task_id": c["task_id"], "code_sha256": c["code_sha256"],
            "run_id": "r", "measured_at": "r", "status": "scored", "correct": True, "stage": "timed",
            "failure_kind": None, "failure": None, "pass_fraction": 1.0, "speedup": speedup,
            "candidate_median_ms": 1.0, "candidate_cv": 0.01, "baseline_median_ms": speedup, "baseline_cv": 0.01,
            "kernels_in_timed_call": 1, "gpu": "g", "driver": "d", "cuda": "c", "host": "h", "timing_method": "t",
            "seed": 1}


@pytest.fixture()
def labelled(tmp_path):
    """12 elementwise_map tasks whose variants get speedups by a fixed rule over their tags (strided and chunked
    slow, vectorized and grid-stride fast), 8 for training, 4 held out."""
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=12)
    rank = {"vectorized": 20.0, "grid_stride": 16.0, "naive_b256": 12.0, "naive_b1024": 11.0,
            "streams_pinned": 9.0, "naive_b32": 6.0, "strided": 3.0, "chunked": 1.5}
    for k, t in enumerate(sorted(ds.tasks, key=lambda t: t["id"])):
        t["split_task"] = "train" if k < 8 else "test"
    ds.measurements = [_row(c, rank[c["name"]]) for c in ds.candidates]
    return ds


def test_training_is_deterministic_and_survives_save_and_load(labelled, tmp_path):
    s = RankerSettings(epochs=30, seed=3)
    a = train_ranker(labelled, settings=s)
    b = train_ranker(labelled, settings=s)
    vec = {n: 0.5 for n in a.names}
    assert a.score(vec) == b.score(vec)
    a.save(tmp_path / "rk")
    c = Ranker.load(tmp_path / "rk")
    assert c.score(vec) == pytest.approx(a.score(vec), abs=1e-6)
    assert c.meta["dataset_version"] == labelled.version() and c.meta["split"] == "task" and c.meta["seed"] == 3
    assert train_ranker(labelled, settings=RankerSettings(epochs=30, seed=4)).score(vec) != a.score(vec)
    with pytest.raises(FileNotFoundError, match="cudaperf ranker train"):
        Ranker.load(tmp_path / "missing")


def test_ordered_pairs_option_trains_on_every_pair_apart_by_the_ratio(labelled):
    from cudaperf.ranker.train import split_items

    items = split_items(labelled, "task", "train")
    quart = train_ranker(labelled, settings=RankerSettings(epochs=5, min_steps=0))
    ordered = train_ranker(labelled, settings=RankerSettings(epochs=5, min_steps=0, pairs="ordered",
                                                             pair_min_ratio=1.5))
    assert quart.meta["n_train_pairs"] == len(quartile_pairs(items))
    assert ordered.meta["n_train_pairs"] == len(ordered_pairs(items, min_ratio=1.5)) > quart.meta["n_train_pairs"]
    assert ordered.meta["settings"]["pairs"] == "ordered"
    with pytest.raises(ValueError, match="pairs"):
        RankerSettings(pairs="all")


def test_held_out_evaluation_beats_chance_on_a_learnable_rule(labelled):
    res = evaluate_split(labelled, "task", RankerSettings(epochs=50, seed=0))
    m = res["models"]
    assert res["n_test_tasks"] == 4 and set(m) == {"mlp_paper", "random", "linear_paper", "block_size_rule"}
    assert m["mlp_paper"]["pairwise_accuracy"] > m["random"]["pairwise_accuracy"]
    assert m["mlp_paper"]["pairwise_accuracy"] >= 0.75
    fams = res["mlp_paper_by_family"]  # the same MLP, family by family
    assert sum(f["n_tasks"] for f in fams.values()) == res["n_test_tasks"]
    assert all(0.0 <= f["pairwise_accuracy"] <= 1.0 for f in fams.values())


def test_no_measured_tasks_is_a_clear_error(tmp_path):
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=2)
    with pytest.raises(ValueError, match="cudaperf dataset measure"):
        train_ranker(ds)


def test_cli_train_score_and_eval(labelled, tmp_path):
    import json

    from typer.testing import CliRunner

    from cudaperf.cli import app

    labelled.save()
    runner = CliRunner()
    r = runner.invoke(app, ["ranker", "train", "-d", str(labelled.root), "-o", str(tmp_path / "rk"), "--epochs", "5"])
    assert r.exit_code == 0, r.output
    src = next(c["code"] for c in labelled.candidates if c["name"] == "vectorized")
    (tmp_path / "v.cu").write_text(src)
    r = runner.invoke(app, ["ranker", "score", str(tmp_path / "v.cu"), "-m", str(tmp_path / "rk")])
    assert r.exit_code == 0 and math.isfinite(float(r.output.strip()))
    r = runner.invoke(app, ["ranker", "score", str(tmp_path / "v.cu"), "-m", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no trained ranker" in r.output
    r = runner.invoke(app, ["ranker", "eval", "-d", str(labelled.root), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["pairwise_accuracy"] == d["splits"]["task"]["models"]["mlp_paper"]["pairwise_accuracy"]


@pytest.mark.slow  # 39 s on two cores: nvcc over the training tasks for the compiler tier
def test_paper_plus_compiler_tier(tmp_path):
    """An MLP on the paper + compiler features (nvcc compiles each candidate; the table is stored and reused)."""
    from cudaperf.dataset.features import compute_features, load_features

    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=4)
    rank = {"vectorized": 20.0, "grid_stride": 16.0, "naive_b256": 12.0, "naive_b1024": 11.0,
            "streams_pinned": 9.0, "naive_b32": 6.0, "strided": 3.0, "chunked": 1.5}
    for k, t in enumerate(sorted(ds.tasks, key=lambda t: t["id"])):
        t["split_task"] = "train" if k < 3 else "test"
    ds.measurements = [_row(c, rank[c["name"]]) for c in ds.candidates]
    ds.save()
    assert compute_features(ds, "compiler", jobs=2) == len(ds.candidates)
    assert all(v["compiler.registers_per_thread"] > 0 for v in load_features(ds, "compiler").values())
    res = evaluate_split(ds, "task", RankerSettings(epochs=20), tiers=("paper", "paper+compiler"))
    m = res["models"]["mlp_paper_compiler"]
    assert m["n_tasks"] == 1 and 0.0 <= m["pairwise_accuracy"] <= 1.0
    r = train_ranker(ds, tier="paper+compiler", settings=RankerSettings(epochs=5))
    assert len(r.names) == 11 + len([n for n in r.names if n.startswith("compiler.")]) > 11
    r.save(tmp_path / "rk")
    assert Ranker.load(tmp_path / "rk").tier == "paper+compiler"


def test_paper_plus_profile_tier_reads_stored_counters(tmp_path):
    """The profile tier's counters are measured on a GPU, not computed from code: here they are the real Nsight
    Compute records of elementwise_map_000 and _001 taken on the H200 (benchmarks/results), stored in the
    dataset's profile table; the tier trains and evaluates on the tasks that have them all."""
    import hashlib
    import json
    from pathlib import Path

    from cudaperf.dataset.features import load_features, write_features
    from cudaperf.features.profile import PROFILE_FEATURES
    from cudaperf.ranker.train import PROFILE_INPUTS, feature_table, split_items

    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=3)
    rank = {"vectorized": 20.0, "grid_stride": 16.0, "naive_b256": 12.0, "naive_b1024": 11.0,
            "streams_pinned": 9.0, "naive_b32": 6.0, "strided": 3.0, "chunked": 1.5}
    for t in ds.tasks:
        t["split_task"] = {"elementwise_map_000": "train", "elementwise_map_001": "test"}.get(t["id"], "test")
    ds.measurements = [_row(c, rank[c["name"]]) for c in ds.candidates]
    ds.save()
    records = Path(__file__).parent.parent / "benchmarks/results/2026-11-29-h200/profile_ncu.jsonl"
    by_sha = {}
    for line in records.read_text().splitlines():
        r = json.loads(line)
        if r["ok"]:
            by_sha[hashlib.sha256(r["code"].encode()).hexdigest()] = r["values"]
    table = {c["candidate_id"]: {f"profile.{k}": float("nan") if by_sha[c["code_sha256"]].get(k) is None
                                 else float(by_sha[c["code_sha256"]][k]) for k in PROFILE_FEATURES}
             for c in ds.candidates if c["code_sha256"] in by_sha}
    profiled = {c["task_id"] for c in ds.candidates if c["candidate_id"] in table}
    assert profiled == {"elementwise_map_000", "elementwise_map_001"} and len(table) >= 14
    write_features(ds, "profile", table)
    assert set(load_features(ds, "profile")) == set(table)

    res = evaluate_split(ds, "task", RankerSettings(epochs=20), tiers=("paper", "paper+profile"))
    m = res["models"]
    assert res["n_test_tasks"] == 2  # elementwise_map_001 and _002; only _001 has counters
    assert m["mlp_paper_profile"]["n_tasks"] == 1 and m["mlp_paper_on_paper_profile_tasks"]["n_tasks"] == 1
    assert m["mlp_paper_trained_on_paper_profile_tasks"]["n_tasks"] == 1  # trained on _000 alone, as the tier is
    assert m["mlp_paper_trained_on_paper_profile_tasks"]["n_train_tasks"] == 1
    assert m["mlp_paper_profile"]["n_train_tasks"] == 1
    assert m["mlp_paper_on_paper_profile_tasks"]["n_train_tasks"] == res["n_train_tasks"]
    assert 0.0 <= m["mlp_paper_profile"]["pairwise_accuracy"] <= 1.0
    r = train_ranker(ds, tier="paper+profile", settings=RankerSettings(epochs=5),
                     items=[i for i in split_items(ds, "task", "train")])
    assert [n for n in r.names if n.startswith("profile.")] == [f"profile.{k}" for k in PROFILE_INPUTS]
    missing = next(c["candidate_id"] for c in ds.candidates if c["candidate_id"] not in table)
    with pytest.raises(ValueError, match="dataset features --tier profile"):
        feature_table(ds, [missing], "paper+profile")


def test_profile_tier_without_ncu_or_gpu_is_a_clear_error(labelled):
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.features.profile import find_ncu
    from cudaperf.harness.environment import gpu_count

    if find_ncu() is not None and gpu_count() > 0:
        pytest.skip("this machine can profile")
    labelled.save()
    r = CliRunner().invoke(app, ["dataset", "features", "--tier", "profile", "-d", str(labelled.root)])
    assert r.exit_code != 0 and ("ncu" in r.output or "GPU" in r.output)


def test_the_shipped_ranker_matches_the_shipped_dataset_and_ranks_held_out_tasks():
    """cudaperf/data/ranker is the default R_str; it must be the one trained on this dataset's task-split training
    part (rebuild it with `cudaperf ranker train --out cudaperf/data/ranker` when the dataset changes)."""
    from cudaperf.dataset.store import default_dataset_dir
    from cudaperf.ranker import builtin_ranker_dir
    from cudaperf.ranker.train import feature_table, split_items

    ds = Dataset.load(default_dataset_dir())
    ranker = Ranker.load(builtin_ranker_dir())
    assert ranker.meta["dataset_version"] == ds.version(), "the shipped ranker is stale: retrain it"
    assert (ranker.meta["split"], ranker.meta["tier"]) == ("task", "paper")
    held_out = split_items(ds, "task", "test")
    feats = feature_table(ds, [i.candidate_id for i in held_out], "paper")
    scores = {i.candidate_id: float(s) for i, s in zip(held_out, ranker.score_many([feats[i.candidate_id]
                                                                                    for i in held_out]))}
    assert metrics(held_out, scores)["pairwise_accuracy"] > 0.8
