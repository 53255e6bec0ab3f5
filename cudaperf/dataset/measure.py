"""Measure dataset candidates with the harness on the local GPUs; summarise, filter and plot the measurements."""

from __future__ import annotations

import math
import random
import socket
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cudaperf.dataset.build import dataset_tasks
from cudaperf.dataset.pytorch_families.common import TASK_PREFIX as TORCH_TASK_PREFIX
from cudaperf.dataset.store import Dataset
from cudaperf.harness.executor import BatchSummary, Job
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore

MEASURE_SETTINGS = HarnessSettings(budget_ms=400.0, max_reps=48, timing_timeout_s=120.0, test_timeout_s=60.0,
                                   pipeline_candidates=True, timing_rounds=3, speedup_estimator="best_window",
                                   burst_preparation=True)
"""The harness settings of a dataset measurement: the default tests, and a 0.4 s timing budget per candidate
(>= 5 timed calls, stopping early once the cv is below 2 %), split into 3 windows interleaved with the task's
other candidates and 3 windows of the baseline (each a process of its own). A speedup rests on each side's
fastest window (``speedup_estimator="best_window"``): the H200 machines' host is slow for whole windows at a
time, by up to 1.5x, and the fastest of 3 windows drifts less between runs than the median of all calls
(0.088 against 0.134 median |log ratio| over the same two runs; docs/BENCHMARKS.md). The dataset's own variants
are trusted not to attack each other, so a task's candidates stay alive together and the next one's tests
overlap the previous one's end (``pipeline_candidates``). Tasks are prepared in
bursts (``burst_preparation``): on two H200s it cut each GPU's time between tasks from 26-30 % of a run to 10-15 %
(docs/BENCHMARKS.md). ``cudaperf dataset measure --timing-rounds 1 --speedup-estimator median
--no-burst-preparation`` gives the single-window measurement of the earlier runs."""


def dataset_seed(task_id: str) -> int:
    """The fixed seed of a dataset task's hidden inputs: every run of every candidate of the task sees the same
    inputs, so runs differ only by measurement noise. (Rewards during training use fresh seeds instead.)"""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"dataset-seed:{task_id}".encode()).digest()[:8], "big") >> 2

MIN_VALID = 5
MIN_BEST_SPEEDUP = 1.5


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{socket.gethostname()[:12]}-{uuid.uuid4().hex[:6]}"


def measurement_row(r: EvaluationResult, candidate_id: str, run_id: str) -> dict[str, Any]:
    env = r.environment
    ct, bt = r.candidate_timing, r.baseline_timing
    return {
        "candidate_id": candidate_id, "task_id": r.task_id, "code_sha256": r.code_sha256, "run_id": run_id,
        "measured_at": r.created_at, "status": r.status, "correct": bool(r.correct), "stage": str(r.stage.value
                                                                                                   if hasattr(r.stage, "value") else r.stage),
        "failure_kind": r.failure.kind.value if r.failure else None,
        "failure": r.failure.message[:500] if r.failure else None,
        "pass_fraction": r.pass_fraction, "speedup": r.speedup,
        "candidate_median_ms": ct.median_ms if ct else None, "candidate_cv": ct.cv if ct else None,
        "baseline_median_ms": bt.median_ms if bt else None, "baseline_cv": bt.cv if bt else None,
        "kernels_in_timed_call": r.gpu_evidence.kernels_in_timed_call if r.gpu_evidence else None,
        "gpu": env.gpu if env else None, "driver": env.driver if env else None, "cuda": env.cuda if env else None,
        "host": env.host if env else None, "cpu": env.cpu if env else None, "timing_method": env.timing_method if env else None,
        "seed": r.seeds[0] if r.seeds else None,
        "compiled_baseline_median_ms": r.compiled_baseline_timing.median_ms if r.compiled_baseline_timing else None,
        # the host around the baseline's window (cudaperf.harness.hostload): one core's speed, memory, steal
        "baseline_compute_ms": bt.host.compute_ms if bt and bt.host else None,
        "baseline_memory_ms": bt.host.memory_ms if bt and bt.host else None,
        "baseline_steal_frac": bt.host.steal_frac if bt and bt.host else None,
        # the fastest window's median, where timing came in several windows (speedup_estimator "best_window")
        "baseline_best_window_ms": bt.best_window_ms if bt and bt.windows_ms else None,
        "candidate_best_window_ms": ct.best_window_ms if ct and ct.windows_ms else None,
    }


@dataclass(frozen=True)
class MeasureSummary:
    run_id: str
    n_candidates: int
    n_tasks: int
    batch: BatchSummary
    wall_s: float


def select_candidates(ds: Dataset, *, families: Sequence[str] | None = None, remeasure: bool = False,
                      sample_tasks: float | None = None, seed: int = 0, limit_tasks: int | None = None,
                      candidate_ids: Sequence[str] | None = None,
                      tasks_per_family: int | None = None, held_out_first: bool = False,
                      include_ill_conditioned: bool = False,
                      extend_sample_run: str | None = None, origin: str | None = None,
                      below_pooled_runs: int | None = None) -> list[dict[str, Any]]:
    """Candidates to measure: by default those with no scored measurement yet, with ``remeasure`` only those that
    have one (a new run measures them again); ``sample_tasks`` draws that
    fraction of the tasks (all their candidates) with ``seed``, for re-measurement. Tasks whose reference is
    ill-conditioned (:mod:`cudaperf.dataset.conditioning`) are left out unless ``include_ill_conditioned``.

    ``extend_sample_run`` grows an earlier sample with the dataset: the tasks that run measured count as part of
    the sample, and only tasks drawn (with ``seed``) from the others are returned, as many as bring the sample to
    ``sample_tasks`` of the selected tasks. The same dataset and seed give the same extension, run after run.
    ``origin`` ("family" or "external") keeps only the family variants or only the candidates added from outside
    (origin ``external`` or ``model``).
    ``below_pooled_runs`` keeps only the valid candidates whose label rests on fewer runs than that
    (:func:`label_runs`): the re-measurements that bring every label to a given precision."""
    from cudaperf.dataset.conditioning import load_conditioning

    measured = {m["candidate_id"] for m in live_measurements(ds) if m["status"] == "scored"}
    ill = set() if include_ill_conditioned else set(load_conditioning(ds))
    cands = [c for c in ds.candidates if (families is None or c["family"] in families)
             and (candidate_ids is None or c["candidate_id"] in candidate_ids) and c["task_id"] not in ill
             and (origin is None or ((c.get("origin") or "family") == "family") == (origin == "family"))]
    cands = [c for c in cands if (c["candidate_id"] in measured) == remeasure]
    if below_pooled_runs is not None:
        cs = candidate_summary(ds)
        cands = [c for c in cands if cs[c["candidate_id"]]["valid"]
                 and label_runs(c, cs[c["candidate_id"]]) < below_pooled_runs]
    task_ids = sorted({c["task_id"] for c in cands})
    if extend_sample_run is not None and sample_tasks is None:
        raise ValueError("extending a sample needs the sample's fraction (sample_tasks, --sample)")
    if sample_tasks is not None and extend_sample_run is not None:
        base = {m["task_id"] for m in ds.measurements if m["run_id"] == extend_sample_run}
        if not base:
            raise ValueError(f"no measurements of run {extend_sample_run!r} in the dataset: it cannot be the base "
                             f"of a sample (`cudaperf dataset stats --json` lists the runs)")
        others = sorted(set(task_ids) - base)
        n_more = max(0, round(sample_tasks * len(task_ids)) - len(base & set(task_ids)))
        task_ids = sorted(random.Random(seed).sample(others, min(n_more, len(others))))
    elif sample_tasks is not None:
        rng = random.Random(seed)
        task_ids = sorted(rng.sample(task_ids, max(1, round(sample_tasks * len(task_ids))))) if task_ids else []
    if tasks_per_family is not None:
        fam_of = {t["id"]: t["family"] for t in ds.tasks}
        rng = random.Random(seed)
        by_fam: dict[str, list[str]] = defaultdict(list)
        for t in task_ids:
            by_fam[fam_of[t]].append(t)
        task_ids = sorted(t for ts in by_fam.values() for t in rng.sample(ts, min(tasks_per_family, len(ts))))
    if limit_tasks is not None:
        if held_out_first:
            task_ids = interleaved_task_order(ds, set(task_ids), held_out_first=True)
        task_ids = task_ids[:limit_tasks]
    keep = set(task_ids)
    return [c for c in cands if c["task_id"] in keep]


def interleaved_task_order(ds: Dataset, task_ids: set[str], *, held_out_first: bool = False,
                           groups_in_turn: bool = False) -> list[str]:
    """Tasks in the order a measurement runs them: the first task of every family, then the second of every
    family, and so on, so that a run cut short by its time limit still covers every family evenly.
    ``held_out_first``: the held-out tasks of both splits (the task split's test part, then the test families)
    before the rest, each group interleaved the same way: what a ranker evaluation needs first.
    ``groups_in_turn`` (with ``held_out_first``): the three groups take turns instead (a task split test task, a
    test family's task, one of the other tasks, ...), so that a run cut short leaves tasks to train on as well as to
    test on."""
    info = {t["id"]: t for t in ds.tasks}

    def group(t: str) -> int:
        if not held_out_first:
            return 0
        row = info.get(t, {})
        return 0 if row.get("split_task") == "test" else 1 if row.get("split_family") == "test" else 2

    by_fam: dict[tuple[int, str], list[str]] = defaultdict(list)
    for t in sorted(task_ids):
        by_fam[(group(t), info.get(t, {}).get("family", ""))].append(t)
    order = [t for _, _, _, t in sorted((g, i, fam, t) for (g, fam), ts in by_fam.items() for i, t in enumerate(ts))]
    if not (held_out_first and groups_in_turn):
        return order
    groups: dict[int, list[str]] = defaultdict(list)
    for t in order:
        groups[group(t)].append(t)
    turns = [groups[g] for g in sorted(groups)]
    return [ts[i] for i in range(max(map(len, turns), default=0)) for ts in turns if i < len(ts)]


def _prepare_workers(settings: HarnessSettings) -> int:
    """Threads preparing tasks: 2 beside the GPUs' work; with ``burst_preparation`` the GPUs wait for a burst, so
    up to a quarter of the cores (at most 8) make it short."""
    import os

    if not settings.burst_preparation:
        return 2
    return max(2, min(8, (os.cpu_count() or 1) // 4))


def measure(ds: Dataset, candidates: list[dict[str, Any]], *, store_path: Path | None = None,
            run_id: str | None = None, settings: HarnessSettings = MEASURE_SETTINGS,
            gpus: Sequence[int] | None = None, progress: Callable[[str, int, int], None] | None = None,
            max_seconds: float | None = None, held_out_first: bool = False,
            compile_baseline: bool = False, executor=None) -> MeasureSummary:
    """Evaluate ``candidates`` through the harness (compile pool, then one worker per GPU); results go to a
    resumable JSONL store and, as rows, into ``ds.measurements`` (the caller saves). ``max_seconds``: start no
    candidate after this long, so a run fits a machine's time limit and ends cleanly; rerun to go on.
    PyTorch tasks' candidates run after the C ones (:mod:`cudaperf.harness.batch_pytorch`; the dataset's own
    variants are trusted, so ``MEASURE_SETTINGS`` lets a task's runners start together), against the eager
    baseline and, with ``compile_baseline``, ``torch.compile``'s too. ``executor``: where they run
    (:mod:`cudaperf.harness.executors`, an executor or its spec; default this machine's GPUs)."""
    from cudaperf.harness.executors import make_executor

    executor = make_executor(executor, gpus=gpus)
    run_id = run_id or new_run_id()
    store = ResultStore(store_path or ds.root / "runs" / f"{run_id}.jsonl")
    tasks = dataset_tasks(ds)
    by_key = by_result_key(candidates)
    order = interleaved_task_order(ds, {c["task_id"] for c in candidates}, held_out_first=held_out_first)
    rank = {t: i for i, t in enumerate(order)}
    ranked = sorted(candidates, key=lambda c: rank[c["task_id"]])
    t0 = time.monotonic()
    summary = None
    # The families' own variants are trusted (pipelined or interleaved processes, runners started together);
    # external candidates (model-generated ones, say) run one process at a time, as any untrusted candidate does.
    try:
        for trusted in (True, False):
            part = [c for c in ranked if (c.get("origin", "family") == "family") == trusted]
            if not part:
                continue
            left = None if max_seconds is None else max(0.0, max_seconds - (time.monotonic() - t0))
            s = executor.evaluate([tasks[t] for t in order], [Job(c["task_id"], c["name"], c["code"]) for c in part],
                          store, settings=settings if trusted else replace(settings, pipeline_candidates=False,
                                                                           timing_rounds=1),
                          progress=progress, prepare_ahead=24, seed_of=dataset_seed,
                          prepare_workers=_prepare_workers(settings),
                          max_seconds=left, compile_baseline=compile_baseline)
            summary = s if summary is None else summary.plus(s)
    finally:  # a harness fault still leaves the finished results in the dataset (the caller saves it)
        ingest(ds, store.read(), run_id, by_key)
    assert summary is not None, "measure() needs at least one candidate"
    return MeasureSummary(run_id, len(candidates), len({c["task_id"] for c in candidates}), summary,
                          time.monotonic() - t0)


def by_result_key(candidates: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Candidate rows by the key of their harness results, (task id, candidate name)."""
    return {(c["task_id"], c["name"]): c for c in candidates}


def ingest(ds: Dataset, results: Sequence[EvaluationResult], run_id: str,
           by_key: dict[tuple[str, str], dict[str, Any]] | None = None) -> int:
    """Add harness results to the measurements table (one row per candidate and run; a later result for the
    same key replaces an earlier one, so a resumed run keeps its latest word)."""
    if by_key is None:
        by_key = by_result_key(ds.candidates)
    rows = {(m["candidate_id"], m["run_id"]): m for m in ds.measurements}
    n = 0
    for r in results:
        c = by_key.get((r.task_id, r.candidate_id))
        if c is None:
            continue
        rows[(c["candidate_id"], run_id)] = measurement_row(r, c["candidate_id"], run_id)
        n += 1
    ds.measurements = list(rows.values())
    return n


# ---------------------------------------------------------------------------------------------------------------
# Summaries


def _gmean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else math.nan


def live_measurements(ds: Dataset) -> list[dict[str, Any]]:
    """The measurements that count: all but those of superseded runs (``cudaperf dataset supersede``), which stay
    in the table for the record."""
    return [m for m in ds.measurements if not m.get("superseded")]


def supersede(ds: Dataset, run_id: str, why: str | None) -> int:
    """Mark every row of ``run_id`` superseded for the reason ``why`` (None: count again); the rows it changed."""
    n = 0
    for k, m in enumerate(ds.measurements):
        if m["run_id"] == run_id and m.get("superseded") != why:
            ds.measurements[k] = {**m, "superseded": why}
            n += 1
    return n


def _windowed(m: dict[str, Any]) -> bool:
    """Was this row timed in several windows, both sides (``speedup_estimator="best_window"``)?"""
    return bool(m.get("baseline_best_window_ms")) and bool(m.get("candidate_best_window_ms"))


def pooled_speedup(rows: Sequence[dict[str, Any]]) -> float:
    """One speedup from several runs of a candidate: the baseline's fastest window over the runs against the
    candidate's fastest window over the runs. The H200 machines' host is slow for minutes at a time, and that
    noise only adds time, so each side's fastest window over runs minutes apart comes closest to its unloaded
    time: three runs a side reproduced the 10 % sample to 0.038 median |log ratio|, where the geometric mean of
    the same runs' speedups gave 0.063 (docs/BENCHMARKS.md, session 10)."""
    if not rows or not all(_windowed(m) for m in rows):
        raise ValueError("pooled_speedup needs rows timed in several windows (both best-window times set)")
    return min(m["baseline_best_window_ms"] for m in rows) / min(m["candidate_best_window_ms"] for m in rows)


def candidate_summary(ds: Dataset) -> dict[str, dict[str, Any]]:
    """Per candidate over its scored measurements (superseded runs left out): valid (correct in every scored
    run), speedup, runs. The speedup pools the runs that timed in several windows (:func:`pooled_speedup`);
    a candidate with none, measured by the earlier single-window method only, gets the geometric mean of its
    runs' speedups. ``pooled_runs`` says how many runs the speedup pools (0: the geometric mean)."""
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in live_measurements(ds):
        if m["status"] == "scored":
            per[m["candidate_id"]].append(m)
    out = {}
    for c in ds.candidates:
        ms = per.get(c["candidate_id"], [])
        valid = bool(ms) and all(m["correct"] for m in ms)
        windowed = [m for m in ms if _windowed(m)] if valid else []
        if windowed:
            sp = pooled_speedup(windowed)
        else:
            sp = _gmean([m["speedup"] for m in ms if m["correct"] and m["speedup"]]) if valid else math.nan
        out[c["candidate_id"]] = {"measured": bool(ms), "valid": valid, "speedup": sp, "runs": len(ms),
                                  "pooled_runs": len(windowed),
                                  "failure_kinds": sorted({m["failure_kind"] for m in ms if m["failure_kind"]})}
    return out


def family_kind(family: str) -> str:
    """"pytorch" for a PyTorch family (``pt_*``), "c" for the others: the kinds that stats report apart."""
    return "pytorch" if family.startswith(TORCH_TASK_PREFIX) else "c"


def label_runs(candidate: dict[str, Any], summary: dict[str, Any]) -> int:
    """How many runs a valid candidate's label rests on: for a C task, the windowed runs its speedup pools (0 when
    only the earlier single-window method measured it, whatever the number of those runs); for a PyTorch task,
    its scored runs, whose speedups the label averages (geometric mean)."""
    if family_kind(candidate["family"]) == "pytorch":
        return summary["runs"]
    return summary["pooled_runs"]


def task_filter(ds: Dataset, cs: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """The paper's filter per task: ``kept``, or why it is dropped (unmeasured, too few valid variants, no variant
    at least 1.5x faster than the sequential C, or than eager PyTorch for a PyTorch task)."""
    from cudaperf.dataset.conditioning import load_conditioning

    cs = cs or candidate_summary(ds)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in ds.candidates:
        by_task[c["task_id"]].append(cs[c["candidate_id"]])
    ill = load_conditioning(ds)
    verdict = {}
    for t in ds.tasks:
        if t["id"] in ill:
            verdict[t["id"]] = "reference ill-conditioned (fused multiply-adds move it beyond the tolerance)"
            continue
        rows = by_task.get(t["id"], [])
        if not any(r["measured"] for r in rows):
            verdict[t["id"]] = "unmeasured"
            continue
        valid = [r for r in rows if r["valid"]]
        best = max((r["speedup"] for r in valid if not math.isnan(r["speedup"])), default=0.0)
        complete = all(r["measured"] for r in rows)
        if not complete and (len(valid) < MIN_VALID or best < MIN_BEST_SPEEDUP):
            verdict[t["id"]] = "partly measured"
        elif len(valid) < MIN_VALID:
            verdict[t["id"]] = f"fewer than {MIN_VALID} valid variants"
        elif best < MIN_BEST_SPEEDUP:
            than = "eager PyTorch" if t["family"].startswith(TORCH_TASK_PREFIX) else "sequential"
            verdict[t["id"]] = f"no variant >= {MIN_BEST_SPEEDUP}x faster than {than}"
        else:
            verdict[t["id"]] = "kept"
    return verdict


def reproducibility(ds: Dataset) -> dict[str, Any]:
    """|log(speedup_a / speedup_b)| over candidates correct in two or more scored runs (first two runs; superseded
    runs left out)."""
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in sorted(live_measurements(ds), key=lambda m: m["measured_at"] or ""):
        if m["status"] == "scored" and m["correct"] and m["speedup"]:
            per[m["candidate_id"]].append(m)
    diffs = sorted(abs(math.log(v[0]["speedup"] / v[1]["speedup"])) for v in per.values() if len(v) >= 2)
    if not diffs:
        return {"pairs": 0}
    return {"pairs": len(diffs), "median_abs_log_ratio": statistics.median(diffs),
            "p90_abs_log_ratio": diffs[int(0.9 * (len(diffs) - 1))], "max_abs_log_ratio": diffs[-1]}


def reproducibility_by_run_pair(ds: Dataset, min_common: int = 5) -> list[dict[str, Any]]:
    """For every pair of runs that measured at least ``min_common`` of the same candidates (correct in both): the
    median |log ratio| of the speedup and, separately, of the baseline's and the candidate's median times, with
    the signed medians of the latter two (run b against run a). Which side moves, and whether it moves together
    across a run, tells machine drift (the baseline) from measurement noise (the candidate)."""
    per_run: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for m in ds.measurements:
        if m["status"] == "scored" and m["correct"] and m["speedup"]:
            per_run[m["run_id"]][m["candidate_id"]] = m
    runs = sorted(per_run, key=lambda r: min(str(m["measured_at"] or "") for m in per_run[r].values()))
    out = []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            common = sorted(set(per_run[a]) & set(per_run[b]))
            if len(common) < min_common:
                continue

            def logs(key: str) -> list[float]:
                return [math.log(per_run[b][c][key] / per_run[a][c][key]) for c in common
                        if per_run[a][c].get(key) and per_run[b][c].get(key)]

            sp, base, cand = logs("speedup"), logs("baseline_median_ms"), logs("candidate_median_ms")
            methods = {m.get("timing_method") for r in (a, b) for m in per_run[r].values()}
            row = {"run_a": a, "run_b": b, "candidates": len(common), "same_timing_method": len(methods) == 1,
                   "speedup_median_abs_log_ratio": statistics.median(abs(x) for x in sp),
                   "baseline_median_abs_log_ratio": statistics.median(abs(x) for x in base) if base else None,
                   "baseline_median_log_ratio": statistics.median(base) if base else None,
                   "candidate_median_abs_log_ratio": statistics.median(abs(x) for x in cand) if cand else None,
                   "candidate_median_log_ratio": statistics.median(cand) if cand else None}
            # Where both runs timed in several windows: the fastest windows' drift (what "best_window" rests on)
            for side in ("baseline", "candidate"):
                bw = logs(f"{side}_best_window_ms")
                if len(bw) >= min_common:
                    row[f"{side}_best_window_abs_log_ratio"] = statistics.median(abs(x) for x in bw)
            # Did the host's one-core speed move with the baseline? (runs that recorded it, per task)
            per_task = {}
            for c in common:
                ma, mb = per_run[a][c], per_run[b][c]
                if ma.get("baseline_compute_ms") and mb.get("baseline_compute_ms") and ma.get("baseline_median_ms") \
                        and mb.get("baseline_median_ms"):
                    per_task[ma["task_id"]] = (math.log(mb["baseline_median_ms"] / ma["baseline_median_ms"]),
                                               math.log(mb["baseline_compute_ms"] / ma["baseline_compute_ms"]))
            if per_task:
                bs, hs = zip(*per_task.values())
                row["host_speed_median_abs_log_ratio"] = statistics.median(abs(h) for h in hs)
                row["host_speed_tasks"] = len(per_task)
                if len(per_task) >= 5 and len(set(bs)) > 1 and len(set(hs)) > 1:  # correlation needs spread
                    row["baseline_host_speed_correlation"] = statistics.correlation(bs, hs)
            out.append(row)
    return out


def reproducibility_of_method(ds: Dataset, pairs: list[dict[str, Any]], timing_method: str) -> dict[str, Any]:
    """The run pairs (of ``pairs``) whose rows were all timed with ``timing_method``: how many, and the median over
    them of each pair's median |log speedup ratio|. With ``MEASURE_SETTINGS.timing_method``: how well the
    dataset's current measurement repeats, apart from the earlier runs' methods."""
    methods: dict[str, set] = defaultdict(set)
    for m in ds.measurements:
        methods[m["run_id"]].add(m.get("timing_method"))
    same = [p for p in pairs if methods[p["run_a"]] == methods[p["run_b"]] == {timing_method}]
    if not same:
        return {"run_pairs": 0}
    return {"run_pairs": len(same), "candidates": sum(p["candidates"] for p in same),
            "speedup_median_abs_log_ratio": statistics.median(p["speedup_median_abs_log_ratio"] for p in same)}


def median_ci95_over_tasks(by_task: dict[str, list[float]], resamples: int = 2000,
                           seed: int = 0) -> list[float]:
    """A 95 % interval for the median of the values of ``by_task``, by resampling whole tasks with replacement
    (a task's candidates share its inputs and its baseline, so they do not vary independently); fixed ``seed``."""
    rng = random.Random(seed)
    keys = sorted(by_task)
    meds = sorted(statistics.median([v for t in rng.choices(keys, k=len(keys)) for v in by_task[t]])
                  for _ in range(resamples))
    return [meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]]


def reproducibility_pooled(ds: Dataset, runs_per_side: int = 3) -> dict[str, Any]:
    """How well a label pooled over ``runs_per_side`` runs (:func:`pooled_speedup`) repeats: over candidates
    correct in at least twice that many runs timed in several windows, their latest 2k runs in the order they
    ran, alternating between two sides (1st, 3rd, 5th against 2nd, 4th, 6th), each side pooled; the median
    |log ratio| of the two sides' speedups with a 95 % interval over tasks, and of each side's time alone; the
    baseline's signed median too (side 1 against side 2), non-zero when the host ran faster in one side's runs."""
    k = runs_per_side
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in live_measurements(ds):
        if m["status"] == "scored" and m["correct"] and _windowed(m):
            per[m["candidate_id"]].append(m)
    sp, base, cand = [], [], []  # speedup |log ratio|; each side's time, signed log ratio
    by_task: dict[str, list[float]] = defaultdict(list)
    for rows in per.values():
        if len(rows) < 2 * k:
            continue
        latest = sorted(rows, key=lambda m: str(m["measured_at"] or ""))[-2 * k:]
        a, b = latest[0::2], latest[1::2]
        sp.append(abs(math.log(pooled_speedup(a) / pooled_speedup(b))))
        by_task[rows[0]["task_id"]].append(sp[-1])
        for side, out in (("baseline", base), ("candidate", cand)):
            key = f"{side}_best_window_ms"
            out.append(math.log(min(m[key] for m in a) / min(m[key] for m in b)))
    tasks = set(by_task)
    if not sp:
        return {"runs_per_side": k, "candidates": 0}
    # what share of the measured tasks of the same kinds (C, PyTorch) the sample covers
    family = {t["id"]: t["family"] for t in ds.tasks}

    def kind(task_id: str) -> str:
        return family_kind(family.get(task_id, ""))

    kinds = {kind(t) for t in tasks}
    measured = {m["task_id"] for m in live_measurements(ds) if m["status"] == "scored" and kind(m["task_id"]) in kinds}
    return {"runs_per_side": k, "candidates": len(sp), "tasks": len(tasks), "task_kinds": sorted(kinds),
            "share_of_measured_tasks": len(tasks) / len(measured),
            "speedup_median_abs_log_ratio": statistics.median(sp),
            "speedup_ci95": median_ci95_over_tasks(by_task),
            "baseline_median_abs_log_ratio": statistics.median(abs(x) for x in base),
            "baseline_median_log_ratio": statistics.median(base),
            "candidate_median_abs_log_ratio": statistics.median(abs(x) for x in cand)}


def label_methods_agreement(ds: Dataset) -> dict[str, Any]:
    """How the two label methods compare on the candidates that both measured (correct in every such run): the
    geometric mean of the earlier single-window runs' speedups against the pooled windowed label. The signed
    median log ratio is a difference of scale (positive: the earlier method reads faster); it matters where one
    task's candidates rest on different methods (``mixed_tasks``)."""
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in live_measurements(ds):
        if m["status"] == "scored":
            per[m["candidate_id"]].append(m)
    ratios, tasks = [], set()
    method_of: dict[str, set[bool]] = defaultdict(set)  # task -> methods its valid candidates' labels rest on
    for rows in per.values():
        if not all(m["correct"] for m in rows):
            continue
        windowed = [m for m in rows if _windowed(m)]
        method_of[rows[0]["task_id"]].add(bool(windowed))
        earlier = [m["speedup"] for m in rows if not _windowed(m) and m["speedup"]]
        if windowed and earlier:
            ratios.append(math.log(_gmean(earlier) / pooled_speedup(windowed)))
            tasks.add(rows[0]["task_id"])
    out: dict[str, Any] = {"candidates": len(ratios), "tasks": len(tasks),
                           "mixed_tasks": sorted(t for t, v in method_of.items() if len(v) == 2)}
    if ratios:
        out["median_log_ratio"] = statistics.median(ratios)
        out["median_abs_log_ratio"] = statistics.median(abs(r) for r in ratios)
    return out


def stats(ds: Dataset) -> dict[str, Any]:
    cs = candidate_summary(ds)
    verdict = task_filter(ds, cs)
    families = sorted({t["family"] for t in ds.tasks})
    fam_rows = {}
    for f in families:
        ids = [c["candidate_id"] for c in ds.candidates if c["family"] == f]
        tids = [t["id"] for t in ds.tasks if t["family"] == f]
        fam_rows[f] = {"tasks": len(tids), "candidates": len(ids),
                       "measured": sum(cs[i]["measured"] for i in ids), "valid": sum(cs[i]["valid"] for i in ids),
                       "kept_tasks": sum(verdict[t] == "kept" for t in tids),
                       "split_family": next(t["split_family"] for t in ds.tasks if t["family"] == f)}
    by_tag: dict[str, list[float]] = defaultdict(list)
    for c in ds.candidates:
        s = cs[c["candidate_id"]]
        if s["valid"] and not math.isnan(s["speedup"]):
            for tag in c["tags"]:
                by_tag[tag].append(s["speedup"])
    dropped: dict[str, int] = defaultdict(int)
    for v in verdict.values():
        if v != "kept":
            dropped[v] += 1
    failures: dict[str, int] = defaultdict(int)
    for s in cs.values():
        for k in s["failure_kinds"]:
            failures[k] += 1
    splits = defaultdict(int)
    for t in ds.tasks:
        splits[f"task:{t['split_task']}"] += 1
        splits[f"family:{t['split_family']}"] += 1
    # what each valid candidate's label rests on (label_runs), by kind of task
    by_runs: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for c in ds.candidates:
        s = cs[c["candidate_id"]]
        if s["valid"]:
            by_runs[family_kind(c["family"])][label_runs(c, s)] += 1
    return {
        "version": ds.version(),
        "n_tasks": len(ds.tasks),
        "n_families": len(families),
        "n_candidates": len(ds.candidates),
        "n_measured_candidates": sum(s["measured"] for s in cs.values()),
        "n_valid_candidates": sum(s["valid"] for s in cs.values()),
        "n_measurements": len(ds.measurements),
        "n_kept_tasks": sum(v == "kept" for v in verdict.values()),
        "dropped_tasks": dict(dropped),
        "candidate_failures": dict(failures),
        "splits": dict(splits),
        "test_families": sorted({t["family"] for t in ds.tasks if t["split_family"] == "test"}),
        "speedup_by_strategy": {k: {"n": len(v), "median": statistics.median(v), "gmean": _gmean(v)}
                                for k, v in sorted(by_tag.items())},
        "reproducibility": reproducibility(ds),
        "reproducibility_by_run_pair": (pairs := reproducibility_by_run_pair(ds)),
        "reproducibility_measure_default": reproducibility_of_method(ds, pairs, MEASURE_SETTINGS.timing_method),
        "reproducibility_pooled": reproducibility_pooled(ds),
        "label_runs": {k: {str(n): v[n] for n in sorted(v)} for k, v in sorted(by_runs.items())},
        "label_methods_agreement": label_methods_agreement(ds),
        "families": fam_rows,
        "runs": run_summaries(ds),
    }


def run_summaries(ds: Dataset) -> list[dict[str, Any]]:
    """Per measurement run: rows, GPUs and hosts seen, and the span from its first result to its last (the GPU
    time the run took, less the machine's start and its first candidate)."""
    import datetime as dt

    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in ds.measurements:
        by[m["run_id"]].append(m)
    out = []
    for rid in sorted(by):
        rows = by[rid]
        times = sorted(dt.datetime.fromisoformat(m["measured_at"]) for m in rows
                       if m.get("measured_at") and m["measured_at"][:4].isdigit())
        out.append({"run_id": rid, "n": len(rows), "n_scored": sum(m["status"] == "scored" for m in rows),
                    "gpus": sorted({m["gpu"] for m in rows if m.get("gpu")}),
                    "hosts": sorted({m["host"] for m in rows if m.get("host")}),
                    "first": times[0].isoformat() if times else None, "last": times[-1].isoformat() if times else None,
                    "span_s": (times[-1] - times[0]).total_seconds() if len(times) > 1 else None,
                    "superseded": next((m["superseded"] for m in rows if m.get("superseded")), None)})
    return out


def plot_speedup_by_strategy(ds: Dataset, out: Path, *, pytorch: bool = False) -> Path:
    """Box plots per strategy tag over valid candidates: the speedup over the task's baseline (left) and the
    speedup relative to the median valid variant of the same task (right; this removes how much each task favours
    the GPU, leaving what the strategy itself does). The C tasks' baseline is the sequential C, the PyTorch tasks'
    is eager PyTorch on the GPU, so the two kinds are plotted apart: ``pytorch`` picks the PyTorch tasks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = candidate_summary(ds)
    kind_of = {t["id"]: t["family"].startswith(TORCH_TASK_PREFIX) for t in ds.tasks}
    cands = [c for c in ds.candidates if kind_of.get(c["task_id"], False) == pytorch]
    per_task: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        s = cs[c["candidate_id"]]
        if s["valid"] and not math.isnan(s["speedup"]):
            per_task[c["task_id"]].append(s["speedup"])
    task_median = {t: statistics.median(v) for t, v in per_task.items()}
    absolute: dict[str, list[float]] = defaultdict(list)
    relative: dict[str, list[float]] = defaultdict(list)
    for c in cands:
        s = cs[c["candidate_id"]]
        if s["valid"] and not math.isnan(s["speedup"]):
            for tag in c["tags"]:
                absolute[tag].append(s["speedup"])
                relative[tag].append(s["speedup"] / task_median[c["task_id"]])
    if not absolute:
        raise ValueError(f"no valid measured candidates of {'PyTorch' if pytorch else 'C'} tasks to plot")
    tags = sorted(relative, key=lambda t: statistics.median(relative[t]))
    fig, axes = plt.subplots(1, 2, figsize=(14, max(4, 0.3 * len(tags))), sharey=True)
    base = "eager PyTorch" if pytorch else "sequential C"
    for ax, data, label, ref in ((axes[0], absolute, f"speedup over {base}", MIN_BEST_SPEEDUP),
                                 (axes[1], relative, "speedup / the task's median variant", None)):
        ax.boxplot([data[t] for t in tags], orientation="horizontal", showfliers=False)
        ax.set_xscale("log")
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        if ref:
            ax.axvline(ref, color="tab:green", lw=0.8, ls=":")
        ax.set_xlabel(f"{label} (log scale)")
    axes[0].set_yticks(range(1, len(tags) + 1), [f"{t} (n={len(relative[t])})" for t in tags], fontsize=8)
    n_tasks = len(per_task)
    fig.suptitle(f"cudaperf dataset {ds.version()}: speedup by strategy, {'PyTorch' if pytorch else 'C'} tasks "
                 f"({sum(len(v) for v in per_task.values())} valid candidates of {n_tasks} tasks)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
