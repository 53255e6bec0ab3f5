"""Feature tables of the dataset's candidates, computed once and stored beside the dataset.

``DIR/features_<tier>.parquet``: one row per candidate (candidate_id, code_sha256, features as JSON with NaN as
null). A row whose code hash no longer matches its candidate is recomputed. The ranker reads these tables
instead of recomputing (the compiler tier compiles every candidate: about 0.75 s each on this project's CPU
machine). The profile tier is measured on a GPU under Nsight Compute (about 5 s per candidate on the H200), by
default for the measured valid candidates only.
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from cudaperf.dataset.store import Dataset

SCHEMA = pa.schema([("candidate_id", pa.string()), ("code_sha256", pa.string()), ("features", pa.string())])


def tier_function(tier: str, ds: Dataset | None = None) -> Callable[[dict], dict[str, float]]:
    """The function of one candidate row that computes a tier's features (the profile tier needs ``ds``)."""
    if tier == "paper":
        from cudaperf.ranker.train import paper_features

        return lambda c: paper_features(c["code"])
    if tier == "compiler":
        from cudaperf.features.compiler import compiler_features

        def fn(c: dict) -> dict[str, float]:
            return {f"compiler.{k}": float(v) for k, v in compiler_features(c["code"]).values.items()}

        return fn
    if tier == "profile":
        assert ds is not None
        return _profile_function(ds)
    raise ValueError(f"unknown feature tier {tier!r}: paper, compiler or profile")


def _profile_function(ds: Dataset) -> Callable[[dict], dict[str, float]]:
    """Nsight Compute counters of a candidate on its task's timing-size input (the dataset's fixed seed), one
    candidate per GPU at a time. A candidate that fails under the profiler gets NaN everywhere; ncu missing or
    refused raises (a harness fault)."""
    import queue

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import MEASURE_SETTINGS, dataset_seed
    from cudaperf.features.profile import PROFILE_FEATURES, ProfilerUnavailable, find_ncu, profile_features
    from cudaperf.harness.environment import gpu_count

    if find_ncu() is None:
        raise ProfilerUnavailable("Nsight Compute (ncu) was not found: the profile tier needs it and a GPU")
    n = gpu_count()
    if n == 0:
        raise ProfilerUnavailable("no NVIDIA GPU is visible: the profile tier runs candidates under ncu")
    tasks = dataset_tasks(ds)
    free: queue.Queue[int] = queue.Queue()
    for g in range(n):
        free.put(g)

    def fn(c: dict) -> dict[str, float]:
        gpu = free.get()
        try:
            pf = profile_features(tasks[c["task_id"]], c["code"], settings=MEASURE_SETTINGS, gpu_index=gpu,
                                  seed=dataset_seed(c["task_id"]))
        finally:
            free.put(gpu)
        if not pf.ok and pf.attributed_to == "harness":
            raise ProfilerUnavailable(pf.error or "ncu failed")
        return {f"profile.{k}": float(pf.values.get(k, math.nan)) if pf.ok else math.nan for k in PROFILE_FEATURES}

    return fn


def profile_prebuild(ds: Dataset) -> Callable[[dict], bool]:
    """Compile a candidate into the build cache, as the profile tier will build it (static check, nvcc), so that
    profiling finds it built: CPU work that can run ahead of the GPUs. True when it built."""
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import MEASURE_SETTINGS
    from cudaperf.harness.evaluate import build_candidate, check_candidate

    tasks = dataset_tasks(ds)

    def prebuild(c: dict) -> bool:
        chk = check_candidate(tasks[c["task_id"]], c["code"], "profile", MEASURE_SETTINGS)
        return chk.result is None and build_candidate(tasks[c["task_id"]], chk.code, MEASURE_SETTINGS).stage == "ok"

    return prebuild


def c_function_task_ids(ds: Dataset) -> set[str]:
    """The dataset's C function tasks (every family but the PyTorch ones): those the profile tier can run."""
    from cudaperf.dataset.pytorch_families.common import TASK_PREFIX

    return {t["id"] for t in ds.tasks if not t["family"].startswith(TASK_PREFIX)}


def measured_valid_ids(ds: Dataset) -> set[str]:
    """Candidates with a valid measurement (correct in every scored run): the ones a ranker trains on."""
    from cudaperf.dataset.measure import candidate_summary

    return {k for k, v in candidate_summary(ds).items() if v["valid"]}


def table_path(ds: Dataset, tier: str) -> Path:
    return ds.root / f"features_{tier}.parquet"


def load_features(ds: Dataset, tier: str) -> dict[str, dict[str, float]]:
    """Stored features of candidates whose code is unchanged (by candidate id)."""
    path = table_path(ds, tier)
    if not path.exists():
        return {}
    sha = {c["candidate_id"]: c["code_sha256"] for c in ds.candidates}
    out = {}
    for r in pq.read_table(path).to_pylist():
        if sha.get(r["candidate_id"]) == r["code_sha256"]:
            out[r["candidate_id"]] = {k: (math.nan if v is None else float(v)) for k, v in json.loads(r["features"]).items()}
    return out


def write_features(ds: Dataset, tier: str, features: dict[str, dict[str, float]]) -> Path:
    """Replace ``features_<tier>.parquet`` with ``features`` (by candidate id; NaN stored as null)."""
    sha = {c["candidate_id"]: c["code_sha256"] for c in ds.candidates}
    rows = [{"candidate_id": k, "code_sha256": sha[k],
             "features": json.dumps({n: (None if isinstance(x, float) and math.isnan(x) else x) for n, x in v.items()})}
            for k, v in sorted(features.items())]
    path = table_path(ds, tier)
    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp, compression="zstd")
    tmp.replace(path)
    return path


def in_task_order(cands: list[dict], task_order: Sequence[str]) -> list[dict]:
    """The candidates of ``task_order``'s tasks first, task by task in that order, then the rest; each task's
    candidates, and the rest, keep their order."""
    rank = {t: i for i, t in enumerate(task_order)}
    return sorted(cands, key=lambda c: rank.get(c["task_id"], len(rank)))


def compute_features(ds: Dataset, tier: str, *, jobs: int = 2, candidate_ids=None,
                     progress: Callable[[int, int], None] | None = None, save_every: int = 200,
                     task_order: Sequence[str] | None = None, max_minutes: float | None = None) -> int:
    """Compute missing or stale rows of ``features_<tier>.parquet``; saves as it goes. Returns rows computed.

    ``task_order``: the candidates of these tasks first, task by task in this order (the rest after them in the
    dataset's order), so that a run cut short leaves whole tasks. ``max_minutes``: start no candidate after
    that many minutes; those not started stay missing, for the next run."""
    fn = tier_function(tier, ds)
    compile_jobs = 0
    if tier == "profile":
        from cudaperf.harness.environment import gpu_count

        jobs = max(1, gpu_count())
        compile_jobs = max(1, (os.cpu_count() or 2) - jobs)  # nvcc ahead of the GPUs, on the other cores
    have = load_features(ds, tier)
    cands = [c for c in ds.candidates if c["candidate_id"] not in have
             and (candidate_ids is None or c["candidate_id"] in candidate_ids)]
    if tier == "profile":  # ncu runs the C function candidates; PyTorch variants have no profile tier yet
        c_tasks = c_function_task_ids(ds)
        cands = [c for c in cands if c["task_id"] in c_tasks]
    if task_order is not None:
        cands = in_task_order(cands, task_order)
    deadline = None if max_minutes is None else time.monotonic() + 60.0 * max_minutes

    def run(c: dict) -> dict[str, float] | None:
        if deadline is not None and time.monotonic() > deadline:
            return None
        return fn(c)

    def save() -> None:
        write_features(ds, tier, have)

    builder = None
    if compile_jobs and cands:
        prebuild = profile_prebuild(ds)

        def ahead(c: dict) -> bool:
            return (deadline is None or time.monotonic() <= deadline) and prebuild(c)

        builder = ThreadPoolExecutor(max_workers=compile_jobs)
        for c in cands:  # in the order the GPUs take them; a candidate not built yet is built by its GPU worker
            builder.submit(ahead, c)
    done = 0
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for c, feats in zip(cands, pool.map(run, cands)):
                if feats is None:
                    continue
                have[c["candidate_id"]] = feats
                done += 1
                if progress:
                    progress(done, len(cands))
                if done % save_every == 0:
                    save()
    finally:
        if builder is not None:
            builder.shutdown(wait=False, cancel_futures=True)
        if done:
            save()  # what was computed before a fault is kept
    return done
