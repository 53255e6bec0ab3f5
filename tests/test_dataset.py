"""The dataset: families generate valid tasks and distinct variants; the store round-trips; splits are fixed;
external candidates are validated; the filter and statistics follow the paper's rule."""

from __future__ import annotations

import json
import math

import pytest

from cudaperf.dataset.build import build, dataset_tasks, family_split, task_split
from cudaperf.dataset.external import AddError, add_candidates
from cudaperf.dataset.family import STRATEGY_TAGS, build_task, normalized_code
from cudaperf.dataset.families import all_families
from cudaperf.dataset.measure import MIN_BEST_SPEEDUP, stats, task_filter
from cudaperf.dataset.store import Dataset, DatasetError
from cudaperf.harness.evaluate import build_candidate, check_candidate
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CFunctionTask

FAMILIES = all_families()


def test_enough_families():
    assert len(FAMILIES) >= 25, sorted(FAMILIES)


def _family_tasks_are_valid_and_varied(name: str, checked_every: int) -> None:
    """Every task of the family builds, is valid and has varied, tagged variants; the static checks (a sandboxed
    preprocessor run per variant, the slow part) run on every ``checked_every``-th task's variants."""
    fam = FAMILIES[name]
    built = [build_task(fam, i) for i in range(fam.n_tasks)]
    refs = {normalized_code(b.task.reference_c) + json.dumps(b.task_dict["size_configs"]) for b in built}
    assert len(refs) >= 0.75 * len(built), f"{name}: tasks repeat"
    settings = HarnessSettings()
    for b in built:
        assert isinstance(b.task, CFunctionTask) and len(b.variants) >= 6
        assert all(t in STRATEGY_TAGS for v in b.variants for t in v.tags)
        assert len({tuple(sorted(v.tags)) for v in b.variants}) >= 3, f"{b.task.id}: strategies too alike"
    for b in built[::checked_every]:
        for v in b.variants:
            chk = check_candidate(b.task, v.code, v.name, settings)
            assert chk.result is None, f"{b.task.id}/{v.name}: {chk.result.failure.message}"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_tasks_are_valid_and_varied(name):
    _family_tasks_are_valid_and_varied(name, checked_every=7)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_task_of_every_family_passes_the_static_checks(name):
    _family_tasks_are_valid_and_varied(name, checked_every=1)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_one_variant_per_family_compiles_and_links(name):
    b = build_task(FAMILIES[name], 0)
    out = build_candidate(b.task, b.variants[0].code, HarnessSettings())
    assert out.stage == "ok", out.info.log[-2000:] or out.reasons


def test_splits_are_fixed_functions_of_names():
    assert task_split("elementwise_map_003") == task_split("elementwise_map_003")
    splits = [task_split(f"x_{i:03d}") for i in range(2000)]
    assert 0.75 < splits.count("train") / 2000 < 0.85 and splits.count("test") > 100
    assert {family_split(f) for f in FAMILIES} == {"train", "test"}


@pytest.fixture()
def small(tmp_path):
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map", sorted(FAMILIES)[0]], n_tasks=2)
    ds.save()
    return ds


def test_store_round_trips_with_a_stable_version(small):
    again = Dataset.load(small.root)
    assert again.version() == small.version() == small.manifest["version"]
    assert {t["id"] for t in again.tasks} == {t["id"] for t in small.tasks}
    tasks = dataset_tasks(again)
    assert all(isinstance(t, CFunctionTask) for t in tasks.values())
    v1 = again.save()
    assert v1 == small.version()  # same content, same version


def test_rebuild_keeps_measurements_of_unchanged_code(small):
    c = small.candidates[0]
    small.measurements = [_row(c, "r1", True, 2.0)]
    build(small, families=["elementwise_map"], n_tasks=2)
    assert [m["candidate_id"] for m in small.measurements] == [c["candidate_id"]]


def test_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetError, match="cudaperf dataset build"):
        Dataset.load(tmp_path / "nothing")


def test_add_candidates_validates_rows(small, tmp_path):
    tid = small.tasks[0]["id"]
    good = tmp_path / "c.jsonl"
    good.write_text(json.dumps({"task_id": tid, "name": "model_1", "completion": "```cuda\n__global__ void k(){}\n```",
                                "tags": ["naive"]}) + "\n")
    added = add_candidates(small, good)
    assert added[0]["origin"] == "external" and added[0]["code"].startswith("__global__")
    with pytest.raises(AddError, match="exists already"):
        add_candidates(small, good)
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"task_id": "nope", "name": "x", "code": "y"}\n')
    with pytest.raises(AddError, match=r"b.jsonl:1: unknown task_id"):
        add_candidates(small, bad)
    bad.write_text(json.dumps({"task_id": tid, "name": "x", "code": "y", "tags": ["magic"]}) + "\n")
    with pytest.raises(AddError, match="magic"):
        add_candidates(small, bad)


def _row(c, run, correct, speedup, status="scored"):
    return {"candidate_id": c["candidate_id"], "task_id": c["task_id"], "code_sha256": c["code_sha256"],
            "run_id": run, "measured_at": run, "status": status, "correct": correct, "stage": "timed",
            "failure_kind": None if correct else "wrong_output", "failure": None, "pass_fraction": 1.0,
            "speedup": speedup if correct else None, "candidate_median_ms": 1.0, "candidate_cv": 0.01,
            "baseline_median_ms": speedup, "baseline_cv": 0.01, "kernels_in_timed_call": 1, "gpu": "g",
            "driver": "d", "cuda": "c", "host": "h", "timing_method": "t"}


def test_filter_needs_five_valid_variants_and_one_fast_one(small):
    tid = small.tasks[0]["id"]
    cands = [c for c in small.candidates if c["task_id"] == tid]
    assert len(cands) >= 6
    # 5 valid, the best 1.6x: kept
    small.measurements = [_row(c, "r1", i < 5, 1.6 if i == 0 else 1.1) for i, c in enumerate(cands)]
    assert task_filter(small)[tid] == "kept"
    # the best below 1.5x: dropped
    small.measurements = [_row(c, "r1", i < 5, 1.4) for i, c in enumerate(cands)]
    assert task_filter(small)[tid].startswith("no variant")
    # 4 valid: dropped; an unscored row does not count as measured
    small.measurements = [_row(c, "r1", i < 4, 3.0) for i, c in enumerate(cands)]
    assert task_filter(small)[tid].startswith("fewer than 5")
    small.measurements = [_row(cands[0], "r1", False, None, status="unscored")]
    assert task_filter(small)[tid] == "unmeasured"


def test_stats_reports_counts_and_reproducibility(small):
    tid = small.tasks[0]["id"]
    cands = [c for c in small.candidates if c["task_id"] == tid]
    small.measurements = ([_row(c, "r1", True, 2.0) for c in cands]
                          + [_row(c, "r2", True, 2.0 * math.exp(0.04)) for c in cands[:3]])
    s = stats(small)
    assert s["n_tasks"] == len(small.tasks) and s["n_families"] == 2
    assert s["n_candidates"] == len(small.candidates) and s["n_valid_candidates"] == len(cands)
    assert s["n_kept_tasks"] == 1 and s["reproducibility"]["pairs"] == 3
    assert s["reproducibility"]["median_abs_log_ratio"] == pytest.approx(0.04)
    from cudaperf.dataset.measure import reproducibility_by_run_pair

    assert s["reproducibility_by_run_pair"] == []  # 3 common candidates: fewer than the default 5
    (pair,) = reproducibility_by_run_pair(small, min_common=3)  # r2 against r1: the baseline moved, not the candidate
    assert (pair["run_a"], pair["run_b"], pair["candidates"]) == ("r1", "r2", 3)
    assert pair["speedup_median_abs_log_ratio"] == pytest.approx(0.04)
    assert pair["baseline_median_log_ratio"] == pytest.approx(0.04) and pair["candidate_median_abs_log_ratio"] == 0
    assert s["speedup_by_strategy"] and MIN_BEST_SPEEDUP == 1.5


def test_speedup_plot_is_drawn(small, tmp_path):
    from cudaperf.dataset.measure import plot_speedup_by_strategy

    tid = small.tasks[0]["id"]
    cands = [c for c in small.candidates if c["task_id"] == tid]
    small.measurements = [_row(c, "r1", True, 1.0 + i) for i, c in enumerate(cands)]
    out = plot_speedup_by_strategy(small, tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="of PyTorch tasks"):  # C speedups never land on the PyTorch plot
        plot_speedup_by_strategy(small, tmp_path / "pt.png", pytorch=True)
    small.measurements = []
    with pytest.raises(ValueError, match="no valid measured"):
        plot_speedup_by_strategy(small, tmp_path / "q.png")


def test_feature_tables_are_stored_and_refreshed_when_code_changes(small):
    from cudaperf.dataset.features import compute_features, load_features

    n = compute_features(small, "paper", jobs=1)
    assert n == len(small.candidates)
    feats = load_features(small, "paper")
    assert set(feats) == {c["candidate_id"] for c in small.candidates}
    assert all(set(v) >= {"coal", "occ", "tpb"} for v in feats.values())
    assert compute_features(small, "paper") == 0            # up to date: nothing recomputed
    small.candidates[0] = {**small.candidates[0], "code_sha256": "changed"}
    assert small.candidates[0]["candidate_id"] not in load_features(small, "paper")
    assert compute_features(small, "paper") == 1
    with pytest.raises(ValueError, match="unknown feature tier"):
        compute_features(small, "magic")


def test_feature_runs_go_task_by_task_and_stop_at_their_time_limit(small):
    from cudaperf.dataset.features import compute_features, in_task_order, load_features

    assert compute_features(small, "paper", max_minutes=0) == 0  # past its limit before the first candidate
    assert load_features(small, "paper") == {}
    tasks = sorted({c["task_id"] for c in small.candidates})
    ordered = in_task_order(small.candidates, [tasks[-1], tasks[1]])
    by_task = [c["task_id"] for c in ordered]
    k_last, k_1 = by_task.count(tasks[-1]), by_task.count(tasks[1])
    assert by_task[:k_last] == [tasks[-1]] * k_last and by_task[k_last:k_last + k_1] == [tasks[1]] * k_1
    rest = [c for c in small.candidates if c["task_id"] not in (tasks[-1], tasks[1])]
    assert ordered[k_last + k_1:] == rest  # the others keep the dataset's order
    assert compute_features(small, "paper", jobs=1, task_order=[tasks[-1]], max_minutes=60) == len(small.candidates)


def test_profile_prebuild_leaves_the_build_in_the_cache(small, tmp_path, monkeypatch):
    """The profile tier compiles ahead of the GPUs: what it builds, the profiling run finds cached (real nvcc)."""
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.features import profile_prebuild
    from cudaperf.dataset.measure import MEASURE_SETTINGS
    from cudaperf.harness.evaluate import build_candidate, check_candidate

    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))  # an empty cache of its own
    c = small.candidates[0]
    assert profile_prebuild(small)(c) is True
    task = dataset_tasks(small)[c["task_id"]]
    again = build_candidate(task, check_candidate(task, c["code"], "profile", MEASURE_SETTINGS).code, MEASURE_SETTINGS)
    assert again.stage == "ok" and again.info.cached
    assert profile_prebuild(small)({**c, "code": "int main() { return 0; }"}) is False  # not CUDA: no build


def test_profile_tier_runs_the_c_tasks_only():
    from cudaperf.dataset.features import c_function_task_ids
    from cudaperf.dataset.store import default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    c = c_function_task_ids(ds)
    torch_tasks = {t["id"] for t in ds.tasks if t["family"].startswith("pt_")}
    assert torch_tasks and not (c & torch_tasks) and c | torch_tasks == {t["id"] for t in ds.tasks}


def test_shipped_dataset_stats_cli():
    from typer.testing import CliRunner

    from cudaperf.cli import app

    r = CliRunner().invoke(app, ["dataset", "stats", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {"n_tasks", "n_families", "n_candidates", "n_valid_candidates"} <= set(d)
    assert d["n_tasks"] >= 500 and d["n_families"] >= 25 and d["n_candidates"] >= 3000
    from cudaperf.dataset.store import default_dataset_dir

    assert d["version"] == Dataset.load(default_dataset_dir()).manifest["version"]
    # the re-measured sample: its figure lies inside its interval, and the text report gives both
    pooled = d["reproducibility_pooled"]
    lo, hi = pooled["speedup_ci95"]
    assert pooled["candidates"] > 0 and lo <= pooled["speedup_median_abs_log_ratio"] <= hi
    r = CliRunner().invoke(app, ["dataset", "stats"])
    out = " ".join(r.output.split())
    assert r.exit_code == 0 and f"95 % interval over tasks {lo:.3f} to {hi:.3f}" in out, out[-2000:]


def test_measurement_order_interleaves_families(small):
    from cudaperf.dataset.measure import interleaved_task_order

    ids = {t["id"] for t in small.tasks}
    order = interleaved_task_order(small, ids)
    fam_of = {t["id"]: t["family"] for t in small.tasks}
    assert sorted(order) == sorted(ids)
    n_fam = len(set(fam_of.values()))
    assert len({fam_of[t] for t in order[:n_fam]}) == n_fam  # every family before any family's second task


def test_measurement_order_can_put_held_out_tasks_first(small):
    from cudaperf.dataset.measure import interleaved_task_order

    tasks = sorted(small.tasks, key=lambda t: t["id"])
    tasks[-1]["split_task"], tasks[0]["split_task"] = "test", "train"
    ids = {t["id"] for t in tasks}
    first = interleaved_task_order(small, ids, held_out_first=True)
    test_ids = [t["id"] for t in tasks if t["split_task"] == "test"]
    assert 0 < len(test_ids) < len(ids)
    assert set(first[: len(test_ids)]) == set(test_ids) and set(first) == ids
    # in turn: a held-out task, then a training task, then the rest
    turns = interleaved_task_order(small, ids, held_out_first=True, groups_in_turn=True)
    assert set(turns) == ids and turns[0] in test_ids and turns[1] not in test_ids


def test_runs_are_summarised_with_their_span(small):
    from cudaperf.dataset.measure import run_summaries

    rows = []
    for k, c in enumerate(small.candidates[:3]):
        rows.append({"candidate_id": c["candidate_id"], "task_id": c["task_id"], "run_id": "r1", "status": "scored",
                     "measured_at": f"2026-11-29T10:00:{10 * k:02d}+00:00", "gpu": "NVIDIA H200", "host": "h"})
    rows.append({"candidate_id": "x", "task_id": "t", "run_id": "r2", "status": "unscored", "measured_at": "",
                 "gpu": None, "host": None})
    small.measurements = rows
    r1, r2 = run_summaries(small)
    assert (r1["run_id"], r1["n"], r1["n_scored"], r1["span_s"], r1["gpus"]) == ("r1", 3, 3, 20.0, ["NVIDIA H200"])
    assert (r2["n"], r2["n_scored"], r2["span_s"], r2["first"]) == (1, 0, None, None)


def test_conditioning_check_flags_a_reference_that_fused_multiply_adds_change():
    """elementwise_map_010 (cbrtf(x*y + 2) cancels near x*y = -2) failed on the H200 in all 8 of its variants;
    the CPU check finds it by building the reference with FMA contraction, and passes a well-conditioned task."""
    from cudaperf.dataset.validate import SETTINGS, conditioning_problem, host_has_fma
    from cudaperf.harness.run_c_function import prepare_c_function

    if not host_has_fma():
        pytest.skip("this host has no FMA instructions")
    why = {}
    for index in (10, 0):
        task = build_task(FAMILIES["elementwise_map"], index).task
        prep = prepare_c_function(task, SETTINGS, seed=1234, time_baseline=True, defer_baseline=True)
        why[index] = conditioning_problem(task, prep)
    assert why[0] is None
    assert "fused multiply-adds" in why[10] and "timing size" in why[10]


def test_ill_conditioned_tasks_are_stored_skipped_and_named_by_the_filter(tmp_path):
    from cudaperf.dataset.conditioning import compute_conditioning, load_conditioning
    from cudaperf.dataset.measure import select_candidates
    from cudaperf.dataset.validate import host_has_fma

    if not host_has_fma():
        pytest.skip("this host has no FMA instructions")
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=11)
    ds.save()
    assert compute_conditioning(ds, task_ids={"elementwise_map_010", "elementwise_map_000"}) == 2
    assert set(load_conditioning(ds)) == {"elementwise_map_010"}
    assert compute_conditioning(ds, task_ids={"elementwise_map_010"}) == 0  # stored: not checked again
    assert task_filter(ds)["elementwise_map_010"].startswith("reference ill-conditioned")
    assert not any(c["task_id"] == "elementwise_map_010" for c in select_candidates(ds))
    assert any(c["task_id"] == "elementwise_map_010" for c in select_candidates(ds, include_ill_conditioned=True))
    ds.tasks = [{**t, "task": t["task"].replace("2.0f", "5.0f")} if t["id"] == "elementwise_map_010" else t
                for t in ds.tasks]
    assert load_conditioning(ds) == {}  # the record changed: the stored verdict no longer applies


def test_measure_runs_external_candidates_as_untrusted_beside_the_family_ones(small, tmp_path):
    """A run over family variants (trusted: pipelined) and an external candidate (one process at a time) gives
    one result per candidate in one store and one summary."""
    from cudaperf.dataset.measure import MEASURE_SETTINGS, measure

    tid = small.tasks[0]["id"]
    fam = [c for c in small.candidates if c["task_id"] == tid][:1]
    ext = tmp_path / "c.jsonl"
    ext.write_text(json.dumps({"task_id": tid, "name": "model_1", "code": fam[0]["code"]}) + "\n")
    added = add_candidates(small, ext)
    summary = measure(small, fam + added, store_path=tmp_path / "run.jsonl", run_id="mix",
                      settings=MEASURE_SETTINGS)
    assert summary.batch.n_jobs == 2 and len(summary.batch.results) == 2
    rows = {m["candidate_id"]: m for m in small.measurements if m["run_id"] == "mix"}
    assert set(rows) == {fam[0]["candidate_id"], added[0]["candidate_id"]}


def test_add_candidates_measure_without_a_gpu_scores_only_what_fails_before_the_gpu(tmp_path):
    """`dataset add-candidates FILE --measure` on a machine without a GPU (real nvcc): an answer that is not CUDA
    and one that does not compile get their scored failures; the correct one is compiled and left unscored (never
    a silent 0), and `measure --external-only` selects it, and only it, to go on."""
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.dataset.measure import select_candidates
    from cudaperf.harness.environment import gpu_count

    if gpu_count():
        pytest.skip("this machine has a GPU: tests/gpu/test_gpu_dataset.py covers it")
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=1)
    ds.save()
    tid = ds.tasks[0]["id"]
    good = next(c["code"] for c in ds.candidates if c["name"] == "naive_b256")
    spec = json.loads(ds.tasks[0]["task"])
    rows = [{"task_id": tid, "name": "model_ok", "completion": f"Here it is:\n```cuda\n{good}\n```\n"},
            {"task_id": tid, "name": "model_broken", "code": good.replace("if (i < n)", "if (i < n_elems)")},
            {"task_id": tid, "name": "model_not_cuda", "code": spec["reference_c"]}]
    ext = tmp_path / "answers.jsonl"
    ext.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = CliRunner().invoke(app, ["dataset", "add-candidates", str(ext), "--measure", "-d", str(ds.root)])
    out = " ".join(r.output.split())
    assert r.exit_code == 0, out
    assert "added 3 candidates" in out and "measuring 3 candidates of 1 tasks" in out and "no GPU visible" in out
    ds = Dataset.load(ds.root)
    by_name = {m["candidate_id"].split("/", 1)[1]: m for m in ds.measurements}
    assert by_name["model_broken"]["status"] == "scored" and by_name["model_broken"]["failure_kind"] == "compile_error"
    assert by_name["model_not_cuda"]["status"] == "scored"
    assert by_name["model_not_cuda"]["failure_kind"] == "static_check"
    assert by_name["model_ok"]["status"] == "unscored" and by_name["model_ok"]["speedup"] is None
    assert [c["name"] for c in select_candidates(ds, origin="external")] == ["model_ok"]
    assert {c["origin"] for c in select_candidates(ds, origin="family")} == {"family"}


def test_a_row_field_outside_the_schema_does_not_change_the_saved_version(small):
    """An ingested row once carried a field (``cpu``) that the Parquet schema did not: it was dropped on save but
    hashed before, so the version printed by ``ingest`` was not the version of the dataset on disk."""
    c = small.candidates[0]
    small.measurements = [{**_row(c, "r1", True, 2.0), "not_a_column": "x"}]
    v = small.save()
    assert Dataset.load(small.root).version() == v


def test_measurements_keep_the_cpu_model(small):
    c = small.candidates[0]
    small.measurements = [{**_row(c, "r1", True, 2.0), "cpu": "Intel(R) Xeon(R) Processor x32"}]
    small.save()
    assert Dataset.load(small.root).measurements[0]["cpu"] == "Intel(R) Xeon(R) Processor x32"


def _windowed_row(c, run, base_ms, cand_ms, at=None):
    """A row of the current method: both sides timed in several windows, the run's speedup from its fastest."""
    return {**_row(c, run, True, base_ms / cand_ms), "measured_at": at or run, "baseline_best_window_ms": base_ms,
            "candidate_best_window_ms": cand_ms}


def test_runs_timed_in_windows_pool_each_sides_fastest_window(small):
    from cudaperf.dataset.measure import candidate_summary, pooled_speedup

    a, b, c, d = small.candidates[:4]
    small.measurements = [
        # a: three windowed runs; each side's fastest window may come from a different run
        _windowed_row(a, "r1", 30.0, 2.0), _windowed_row(a, "r2", 20.0, 4.0), _windowed_row(a, "r3", 25.0, 1.6),
        # b: an earlier single-window run (no best-window times) and a windowed one: the windowed one alone counts
        _row(b, "r0", True, 9.0), _windowed_row(b, "r1", 12.0, 4.0),
        # c: single-window runs only: the geometric mean, as before
        _row(c, "r0", True, 2.0), _row(c, "r1", True, 8.0),
        # d: wrong in one run: not valid, whatever its other runs say
        _windowed_row(d, "r1", 10.0, 1.0), _row(d, "r2", False, 1.0),
    ]
    cs = candidate_summary(small)
    assert cs[a["candidate_id"]]["speedup"] == pytest.approx(20.0 / 1.6)  # not the mean of 15, 5 and 15.6
    assert cs[a["candidate_id"]]["pooled_runs"] == 3
    assert cs[b["candidate_id"]]["speedup"] == pytest.approx(3.0) and cs[b["candidate_id"]]["pooled_runs"] == 1
    assert cs[b["candidate_id"]]["runs"] == 2
    assert cs[c["candidate_id"]]["speedup"] == pytest.approx(4.0) and cs[c["candidate_id"]]["pooled_runs"] == 0
    assert not cs[d["candidate_id"]]["valid"] and math.isnan(cs[d["candidate_id"]]["speedup"])
    with pytest.raises(ValueError, match="several windows"):
        pooled_speedup([_row(c, "r0", True, 2.0)])


def test_pooled_reproducibility_alternates_the_latest_runs_between_two_sides(small):
    from cudaperf.dataset.measure import reproducibility_pooled

    a, b, c = small.candidates[:3]
    times = ["2026-11-30T04:0%d" % i for i in range(7)]
    # a: 7 windowed runs, stored out of order; the oldest (a 100 ms baseline) is not among the latest 6.
    # Sides by time: runs 1, 3, 5 (baselines 30, 24, 20; candidates 2, 3, 2.5) against 2, 4, 6 (baselines 22, 26,
    # 21; candidates 2.4, 2.2, 1.75).
    base = [100.0, 30.0, 22.0, 24.0, 26.0, 20.0, 21.0]
    cand = [1.0, 2.0, 2.4, 3.0, 2.2, 2.5, 1.75]
    rows = [_windowed_row(a, f"r{i}", base[i], cand[i], times[i]) for i in range(7)]
    rows = rows[3:] + rows[:3]
    # b: 6 runs, one of them wrong: 5 correct runs are too few; c: 5 runs: too few
    rows += [_windowed_row(b, f"r{i}", 10.0, 1.0, times[i]) for i in range(5)] + [_row(b, "r5", False, 1.0)]
    rows += [_windowed_row(c, f"r{i}", 10.0, 1.0, times[i]) for i in range(5)]
    # a candidate of another task, measured once: the sample's task is half of the measured C tasks
    assert a["task_id"] == b["task_id"] == c["task_id"]
    rows.append(_row(next(x for x in small.candidates if x["task_id"] != a["task_id"]), "r0", True, 2.0))
    small.measurements = rows
    r = reproducibility_pooled(small)
    assert r["candidates"] == 1 and r["runs_per_side"] == 3
    assert r["tasks"] == 1 and r["task_kinds"] == ["c"] and r["share_of_measured_tasks"] == pytest.approx(0.5)
    # what the labels rest on: a pools 7 windowed runs, c 5; b is invalid (one run wrong); the other task's
    # candidate has one single-window run
    assert stats(small)["label_runs"] == {"c": {"0": 1, "5": 1, "7": 1}}
    # re-measuring toward a precision: the valid candidates whose labels rest on fewer runs (b, invalid, never)
    from cudaperf.dataset.measure import select_candidates

    other = rows[-1]["candidate_id"]
    assert {x["candidate_id"] for x in select_candidates(small, remeasure=True, below_pooled_runs=6)} == {
        c["candidate_id"], other}
    assert [x["candidate_id"] for x in select_candidates(small, remeasure=True, below_pooled_runs=1)] == [other]
    assert r["speedup_median_abs_log_ratio"] == pytest.approx(abs(math.log((20.0 / 2.0) / (21.0 / 1.75))))
    assert r["baseline_median_abs_log_ratio"] == pytest.approx(abs(math.log(20.0 / 21.0)))
    assert r["baseline_median_log_ratio"] == pytest.approx(math.log(20.0 / 21.0))  # signed: side 1 ran faster
    assert r["speedup_ci95"] == pytest.approx([r["speedup_median_abs_log_ratio"]] * 2)  # one task: no spread
    assert r["candidate_median_abs_log_ratio"] == pytest.approx(abs(math.log(2.0 / 1.75)))
    assert reproducibility_pooled(small, runs_per_side=4) == {"runs_per_side": 4, "candidates": 0}
    assert reproducibility_pooled(small, runs_per_side=2)["candidates"] == 3


def test_the_pooled_figure_s_interval_resamples_whole_tasks():
    from cudaperf.dataset.measure import median_ci95_over_tasks

    # ten tasks of one candidate each, 0.01 to 0.10: the median 0.055 lies inside, and no bound leaves the values
    spread = {f"t{i}": [i / 100] for i in range(1, 11)}
    lo, hi = median_ci95_over_tasks(spread)
    assert 0.01 <= lo < 0.055 < hi <= 0.10
    assert median_ci95_over_tasks(spread) == [lo, hi]  # a fixed seed: the same interval every time
    # 16 values of 0.01 and 4 of 0.10. Over twenty tasks of one candidate, a draw almost never has ten high ones:
    # the interval is the low value. In three tasks (8 low, 8 low, 4 high), a draw takes a task's candidates
    # together, and one in four draws has the high task twice: the interval reaches the high value.
    independent = {f"t{i}": [0.01 if i < 16 else 0.10] for i in range(20)}
    clustered = {"low1": [0.01] * 8, "low2": [0.01] * 8, "high": [0.10] * 4}
    assert median_ci95_over_tasks(independent) == [0.01, 0.01]
    assert median_ci95_over_tasks(clustered) == [0.01, 0.10]


def test_a_sample_is_extended_to_its_fraction_of_a_grown_dataset(tmp_path):
    """`measure --remeasure --sample F --extend-sample RUN`: the tasks RUN measured stay in the sample, and only
    new tasks, drawn from the others, bring it to F of the selected tasks; the same draw every time."""
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.dataset.measure import select_candidates

    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=20)
    first = {}
    for c in ds.candidates:
        first.setdefault(c["task_id"], c)
    rows = [_row(c, "m", True, 2.0) for c in first.values()]  # every task measured once
    old_sample = ["elementwise_map_003", "elementwise_map_007"]
    rows += [_row(first[t], "repro", True, 2.0) for t in old_sample]
    ds.measurements = rows
    ds.save()
    selected = {c["task_id"] for c in select_candidates(ds, remeasure=True)}
    more = select_candidates(ds, remeasure=True, sample_tasks=0.25, extend_sample_run="repro")
    tasks = {c["task_id"] for c in more}
    assert len(tasks) == round(0.25 * len(selected)) - 2 and not tasks & set(old_sample) and tasks <= selected
    assert {c["candidate_id"] for c in more} == {c["candidate_id"] for c in ds.candidates
                                                 if c["task_id"] in tasks and c["candidate_id"] in
                                                 {r["candidate_id"] for r in rows}}
    assert more == select_candidates(ds, remeasure=True, sample_tasks=0.25, extend_sample_run="repro")
    assert {c["task_id"] for c in select_candidates(ds, remeasure=True, sample_tasks=0.25, seed=1,
                                                    extend_sample_run="repro")} != tasks
    assert select_candidates(ds, remeasure=True, sample_tasks=0.05, extend_sample_run="repro") == []
    with pytest.raises(ValueError, match="no measurements of run 'nope'"):
        select_candidates(ds, remeasure=True, sample_tasks=0.25, extend_sample_run="nope")
    with pytest.raises(ValueError, match="needs the sample's fraction"):
        select_candidates(ds, remeasure=True, extend_sample_run="repro")

    runner = CliRunner()
    for args, said in ((["--extend-sample", "repro"], "--extend-sample needs --sample"),
                       (["--below-runs", "3"], "--below-runs needs --remeasure"),
                       (["--sample", "0.25", "--extend-sample", "nope"], "no measurements of run 'nope'"),
                       (["--sample", "0.05", "--extend-sample", "repro"], "make 0.05 of the selected tasks")):
        remeasure = [] if "--below-runs" in args else ["--remeasure"]
        r = runner.invoke(app, ["dataset", "measure", *remeasure, "-d", str(ds.root), *args])
        out = " ".join(r.output.split())
        assert said in out, out
        assert (r.exit_code == 0) == ("make" in said), out
    assert Dataset.load(ds.root).version() == ds.version()  # nothing measured, nothing changed


def test_the_two_label_methods_are_compared_where_both_measured(small):
    """`label_methods_agreement`: a candidate measured by the earlier single-window method and by windowed runs
    gives the log ratio of its two labels; a task whose candidates' labels rest on different methods is named."""
    from cudaperf.dataset.measure import label_methods_agreement

    first = small.tasks[0]["id"]
    a, b = [c for c in small.candidates if c["task_id"] == first][:2]
    other = next(c for c in small.candidates if c["task_id"] != first)
    small.measurements = [_row(a, "old1", True, 2.0), _row(a, "old2", True, 2.42),  # geometric mean 2.2
                          _windowed_row(a, "w1", 20.0, 10.0, "t1"), _windowed_row(a, "w2", 21.0, 11.0, "t2"),
                          _row(b, "old1", True, 3.0),  # b: the earlier method only, in a's task
                          _windowed_row(other, "w1", 30.0, 10.0, "t1"), _row(other, "old1", False, 1.0)]
    r = label_methods_agreement(small)
    assert r["candidates"] == 1 and r["tasks"] == 1  # other is invalid (one wrong run): left out
    assert r["median_log_ratio"] == pytest.approx(math.log(2.2 / (20.0 / 10.0)))
    assert r["median_abs_log_ratio"] == pytest.approx(r["median_log_ratio"])
    assert r["mixed_tasks"] == [first]  # a's label pools windowed runs, b's is the earlier method's
    small.measurements = small.measurements[2:] + [_windowed_row(b, "w1", 30.0, 10.0, "t1")]
    r = label_methods_agreement(small)  # now both labels rest on windowed runs, and b's is compared
    assert r["candidates"] == 1 and r["mixed_tasks"] == []
    assert r["median_log_ratio"] == pytest.approx(math.log(3.0 / 3.0), abs=1e-12)


def test_ingest_reads_gzipped_stores_and_refuses_what_is_not_this_datasets(small, tmp_path):
    """`dataset ingest` takes a store as the device scripts bring it back (gzipped); a store whose results name
    no candidate of the dataset, or a file that is not a store, is an error with nothing ingested; results of
    unknown candidates beside known ones are named and left out."""
    import gzip
    from dataclasses import replace

    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.harness.result import EvaluationResult, GpuEvidence, Stage, TestOutcome, TimingStats

    c = small.candidates[0]
    base = EvaluationResult(
        task_id=c["task_id"], task_kind="c_function", candidate_id=c["name"], code_sha256=c["code_sha256"],
        status="scored", stage=Stage.TIMED, correct=True, failure=None, tests=(TestOutcome(0, {"n": 3}, True),),
        pass_fraction=1.0, candidate_timing=TimingStats.from_samples_ms([1.0, 1.1, 0.9]),
        baseline_timing=TimingStats.from_samples_ms([4.0, 4.1, 3.9]), speedup=4.0,
        gpu_evidence=GpuEvidence("cupti", 3, 1, 0.5), seeds=(1,))
    stranger = replace(base, task_id="no_such_task")
    runner = CliRunner()

    def store(name, *results, gz=False):
        text = "".join(r.to_json() + "\n" for r in results)
        p = tmp_path / name
        p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        return str(p)

    def ingest(path):
        r = runner.invoke(app, ["dataset", "ingest", path, "--run-id", "r", "-d", str(small.root)])
        return r.exit_code, " ".join(r.output.split())  # rich wraps long lines

    version = Dataset.load(small.root).version()
    code, out = ingest(store("x.jsonl", stranger))
    assert code == 2 and "names a candidate of the dataset" in out and "no_such_task" in out
    (tmp_path / "p.jsonl").write_text('{"candidate_id": "x"}\n')
    code, out = ingest(str(tmp_path / "p.jsonl"))
    assert code == 2 and "not an evaluation result" in out
    assert Dataset.load(small.root).version() == version  # nothing ingested

    code, out = ingest(store("y.jsonl.gz", base, stranger, gz=True))
    assert code == 0, out
    assert "ingested 1 results" in out and "1 results name no candidate" in out
    rows = [m for m in Dataset.load(small.root).measurements if m["run_id"] == "r"]
    assert [(m["candidate_id"], m["speedup"]) for m in rows] == [(c["candidate_id"], 4.0)]

    # several stores: each run named after its file; one bad store stops them all before any is ingested
    twice = replace(base, speedup=2.0)
    a, b = store("run-a.jsonl", base), store("run-b.jsonl.gz", twice, gz=True)
    version = Dataset.load(small.root).version()
    r = runner.invoke(app, ["dataset", "ingest", a, str(tmp_path / "p.jsonl"), "-d", str(small.root)])
    assert r.exit_code == 2 and Dataset.load(small.root).version() == version
    r = runner.invoke(app, ["dataset", "ingest", a, b, "--run-id", "r2", "-d", str(small.root)])
    assert r.exit_code == 2 and "--run-id names one run" in " ".join(r.output.split())
    r = runner.invoke(app, ["dataset", "ingest", a, b, "-d", str(small.root)])
    assert r.exit_code == 0, r.output
    runs = {m["run_id"]: m["speedup"] for m in Dataset.load(small.root).measurements}
    assert runs == {"r": 4.0, "run-a": 4.0, "run-b": 2.0}


def test_a_superseded_run_stops_counting_and_can_count_again(small, tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.dataset.measure import candidate_summary, select_candidates

    c = small.candidates[0]
    small.measurements = [_row(c, "old", True, 4.0), _row(c, "new", True, 1.0)]
    small.save()
    runner = CliRunner()
    r = runner.invoke(app, ["dataset", "supersede", "old", "-d", str(small.root)])
    assert r.exit_code != 0 and "--why" in r.output
    r = runner.invoke(app, ["dataset", "supersede", "nope", "--why", "x", "-d", str(small.root)])
    assert r.exit_code != 0 and "no run 'nope'" in r.output
    r = runner.invoke(app, ["dataset", "supersede", "old", "--why", "timed the poison fill", "-d", str(small.root)])
    assert r.exit_code == 0, r.output
    ds = Dataset.load(small.root)
    assert ds.version() != small.version()  # the reason is part of the content
    assert len(ds.measurements) == 2  # kept for the record
    s = candidate_summary(ds)[c["candidate_id"]]
    assert s["runs"] == 1 and s["speedup"] == pytest.approx(1.0)
    assert [x["superseded"] for x in stats(ds)["runs"] if x["run_id"] == "old"] == ["timed the poison fill"]
    supersede_new = runner.invoke(app, ["dataset", "supersede", "new", "--why", "also", "-d", str(small.root)])
    assert supersede_new.exit_code == 0
    ds = Dataset.load(small.root)
    assert c["candidate_id"] in {x["candidate_id"] for x in select_candidates(ds)}  # left to measure again
    assert c["candidate_id"] not in {x["candidate_id"] for x in select_candidates(ds, remeasure=True)}
    r = runner.invoke(app, ["dataset", "supersede", "old", "--undo", "-d", str(small.root)])
    assert r.exit_code == 0, r.output
    assert candidate_summary(Dataset.load(small.root))[c["candidate_id"]]["speedup"] == pytest.approx(4.0)


def test_every_field_of_a_measurement_row_is_a_stored_column():
    """A row field outside the Parquet schema is silently lost on save (the CPU model and the torch.compile
    baseline once were)."""
    from cudaperf.dataset.measure import measurement_row
    from cudaperf.dataset.store import MEASUREMENT_SCHEMA
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

    task = find_task(load_builtin_tasks(), "saxpy")
    code = next(c for c in builtin_candidates() if c.task_id == "saxpy").source
    row = measurement_row(evaluate(task, code), "saxpy/x", "r")
    assert set(row) <= {f.name for f in MEASUREMENT_SCHEMA}, set(row) - {f.name for f in MEASUREMENT_SCHEMA}


def test_remeasure_selects_only_measured_candidates():
    """``--remeasure`` measures again what has a scored measurement, and nothing else (its help says so)."""
    from cudaperf.dataset.conditioning import load_conditioning
    from cudaperf.dataset.measure import live_measurements, select_candidates
    from cudaperf.dataset.store import default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    measured = {m["candidate_id"] for m in live_measurements(ds) if m["status"] == "scored"}
    again = {c["candidate_id"] for c in select_candidates(ds, remeasure=True)}
    fresh = {c["candidate_id"] for c in select_candidates(ds)}
    assert again and again <= measured and not again & fresh
    ill = set(load_conditioning(ds))
    assert again | fresh == {c["candidate_id"] for c in ds.candidates if c["task_id"] not in ill}


def test_run_pairs_say_whether_the_host_speed_moved_with_the_baseline(tmp_path):
    """Rows that carry the baseline window's one-core calibration time: a run pair reports how far it moved and
    how its drift correlates with the baseline's, task by task."""
    from cudaperf.dataset.measure import reproducibility_by_run_pair

    small = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(small, families=["elementwise_map"], n_tasks=6)
    by_task = {}
    for c in small.candidates:
        by_task.setdefault(c["task_id"], c)
    firsts = list(by_task.values())
    assert len(firsts) >= 5
    rows = []
    for k, c in enumerate(firsts):
        slow = 1.0 + 0.1 * k  # run r2's host is slower on task k, and its baseline by as much
        rows.append({**_row(c, "r1", True, 2.0), "baseline_compute_ms": 4.0})
        rows.append({**_row(c, "r2", True, 2.0 * slow), "baseline_compute_ms": 4.0 * slow,
                     "baseline_median_ms": 2.0 * slow})
    small.measurements = rows
    (pair,) = reproducibility_by_run_pair(small, min_common=5)
    assert pair["host_speed_tasks"] == len(firsts)
    assert pair["baseline_host_speed_correlation"] == pytest.approx(1.0)
    assert pair["host_speed_median_abs_log_ratio"] > 0
    v = small.version()
    small.measurements = [{k: x for k, x in r.items() if k != "baseline_compute_ms"} for r in rows]
    without = small.version()
    small.measurements = [{**r, "baseline_compute_ms": None} for r in small.measurements]
    assert small.version() == without != v  # an empty new column leaves the version as it was


def test_run_pairs_report_the_fastest_windows_drift_where_both_runs_have_windows(tmp_path):
    """Runs timed in several windows store each side's fastest window; a pair of such runs reports that drift
    beside the medians', and says whether the two runs used the same timing method."""
    from cudaperf.dataset.measure import reproducibility_by_run_pair

    small = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(small, families=["elementwise_map"], n_tasks=6)
    cands = small.candidates[:6]
    rows = []
    for c in cands:
        rows.append({**_row(c, "r1", True, 2.0), "baseline_best_window_ms": 1.8, "candidate_best_window_ms": 0.9})
        rows.append({**_row(c, "r2", True, 2.0), "baseline_best_window_ms": 1.8 * math.exp(0.05),
                     "candidate_best_window_ms": 0.9})
        rows.append({**_row(c, "r3", True, 2.0), "timing_method": "other"})
    small.measurements = rows
    pairs = {(p["run_a"], p["run_b"]): p for p in reproducibility_by_run_pair(small, min_common=5)}
    p12 = pairs[("r1", "r2")]
    assert p12["same_timing_method"] and p12["baseline_best_window_abs_log_ratio"] == pytest.approx(0.05)
    assert p12["candidate_best_window_abs_log_ratio"] == 0
    assert not pairs[("r1", "r3")]["same_timing_method"]
    assert "baseline_best_window_abs_log_ratio" not in pairs[("r1", "r3")]  # r3 has no windows
    from cudaperf.dataset.measure import reproducibility_of_method

    cur = reproducibility_of_method(small, list(pairs.values()), "t")  # r1 and r2 were timed with "t", r3 not
    assert cur == {"run_pairs": 1, "candidates": 6, "speedup_median_abs_log_ratio": 0.0}
    assert reproducibility_of_method(small, list(pairs.values()), "none")["run_pairs"] == 0
