"""Which C tasks have an ill-conditioned reference, checked once on the CPU and stored beside the dataset.

A task is ill-conditioned when its reference, built with fused multiply-adds (what nvcc does by default), gives
outputs outside the task's own tolerance on the task's inputs (:func:`cudaperf.dataset.validate.conditioning_problem`):
a correct translation can then fail, as every variant of ``elementwise_map_010`` did on the H200. Such tasks are
left out of measurement (their GPU time would buy nothing) and the filter names the reason.

``DIR/conditioning.parquet``: one row per checked task (task_id, task_sha256 of its record, ill_conditioned,
reason). A row whose task record changed is ignored and recomputed. Hosts without FMA instructions cannot check
and record nothing.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from cudaperf.dataset.store import Dataset

SCHEMA = pa.schema([("task_id", pa.string()), ("task_sha256", pa.string()), ("ill_conditioned", pa.bool_()),
                    ("reason", pa.string())])
FILE = "conditioning.parquet"
SEED = 1234


def _task_sha(row: dict) -> str:
    return hashlib.sha256(str(row["task"]).encode()).hexdigest()


def _read(root: Path) -> list[dict]:
    path = root / FILE
    return pq.read_table(path).to_pylist() if path.exists() else []


def load_conditioning(ds: Dataset) -> dict[str, str]:
    """Ill-conditioned tasks (id -> reason) among the stored rows that match the current task records."""
    sha = {t["id"]: _task_sha(t) for t in ds.tasks}
    return {r["task_id"]: r["reason"] for r in _read(ds.root)
            if r["ill_conditioned"] and sha.get(r["task_id"]) == r["task_sha256"]}


def compute_conditioning(ds: Dataset, *, jobs: int = 2, progress: Callable[[int, int], None] | None = None,
                         task_ids: set[str] | None = None) -> int:
    """Check the C function tasks without a current row (or only ``task_ids``); rows are saved as they come.
    Returns how many tasks were checked. Raises RuntimeError on a host without FMA instructions."""
    import threading

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.validate import SETTINGS, conditioning_problem, host_has_fma
    from cudaperf.harness.run_c_function import prepare_c_function
    from cudaperf.tasks.schema import CFunctionTask

    if not host_has_fma():
        raise RuntimeError("this host has no FMA instructions: the conditioning check compares a reference built "
                           "with and without fused multiply-adds, so run it on an x86-64 host with FMA")
    sha = {t["id"]: _task_sha(t) for t in ds.tasks}
    rows = {r["task_id"]: r for r in _read(ds.root) if sha.get(r["task_id"]) == r["task_sha256"]}
    tasks = [t for tid, t in dataset_tasks(ds).items() if isinstance(t, CFunctionTask) and tid not in rows
             and (task_ids is None or tid in task_ids)]
    lock = threading.Lock()
    done = [0]

    def one(task) -> None:
        prep = prepare_c_function(task, SETTINGS, seed=SEED, time_baseline=True, defer_baseline=True)
        why = conditioning_problem(task, prep)
        with lock:
            rows[task.id] = {"task_id": task.id, "task_sha256": sha[task.id], "ill_conditioned": why is not None,
                             "reason": why or ""}
            done[0] += 1
            if done[0] % 20 == 0 or done[0] == len(tasks):
                _write(ds.root, list(rows.values()))
            if progress:
                progress(done[0], len(tasks))

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, tasks))
    _write(ds.root, list(rows.values()))
    return len(tasks)


def _write(root: Path, rows: list[dict]) -> None:
    tmp = root / (FILE + ".tmp")
    pq.write_table(pa.Table.from_pylist(sorted(rows, key=lambda r: r["task_id"]), schema=SCHEMA), tmp)
    tmp.replace(root / FILE)
