"""Generate the dataset's tasks and variants from the families; fixed splits by task and by family."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Sequence

from cudaperf.dataset.family import build_task
from cudaperf.dataset.families import all_families
from cudaperf.dataset.store import Dataset
from cudaperf.harness.records import code_sha256
from cudaperf.tasks.schema import Task, task_from_dict

SPLIT_RULES = {
    "split_task": "sha256('task-split:' + task id) as a fraction u of 2^64: u < 0.8 train, u < 0.9 val, else test",
    "split_family": "sha256('family-split:' + family) as a fraction u: u < 0.2 test (families never seen in "
                    "training), else train",
}


def _unit(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2.0**64


def task_split(task_id: str) -> str:
    u = _unit(f"task-split:{task_id}")
    return "train" if u < 0.8 else "val" if u < 0.9 else "test"


def family_split(family: str) -> str:
    return "test" if _unit(f"family-split:{family}") < 0.2 else "train"


TORCH_TASKS_PER_FAMILY = 36
"""PyTorch problems per PyTorch family that ``cudaperf dataset build`` makes by default (the shipped dataset holds
the first 8 of each shipped family; 36 since session 28, for issue 28's 1,000 problems: indices 0 to 39 of each of
the 21 families of then gave 40 distinct problems, none degenerate)."""


def torch_family_names() -> dict[str, str]:
    """Dataset family name (``pt_`` + generator name) -> generator name, for the PyTorch families."""
    from cudaperf.dataset.pytorch_families import TORCH_FAMILIES
    from cudaperf.dataset.pytorch_families.common import TASK_PREFIX

    return {f"{TASK_PREFIX}{n}": n for n in TORCH_FAMILIES}


def build(ds: Dataset, *, families: Sequence[str] | None = None, n_tasks: int | None = None,
          progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """(Re)generate the family tasks and variants into ``ds`` (in memory; the caller saves): the C families and
    the PyTorch ones (named ``pt_*``; a problem whose reference output is degenerate is left out and reported).

    External candidates and measurements are kept when their task still exists and, for measurements, when the
    candidate's code is unchanged (same sha256); measurements of changed or removed variants are dropped.
    """
    fams = all_families()
    tfams = torch_family_names()
    unknown = sorted(set(families or ()) - set(fams) - set(tfams))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(sorted(fams) + sorted(tfams))}")
    names = list(families or sorted(fams) + sorted(tfams))
    todo: list[tuple[str, int]] = []
    for n in names:
        count = n_tasks if n_tasks is not None else fams[n].n_tasks if n in fams else TORCH_TASKS_PER_FAMILY
        todo += [(n, i) for i in range(count)]
    regenerated = set(names)
    tasks = [t for t in ds.tasks if t["family"] not in regenerated]
    cands = [c for c in ds.candidates if c["family"] not in regenerated or c["origin"] != "family"]
    degenerate: dict[str, list[str]] = {}
    for k, (name, i) in enumerate(todo, 1):
        if name in fams:
            bt = build_task(fams[name], i)
            tid, task_dict, params, variants = bt.task.id, bt.task_dict, bt.params, bt.variants
        else:
            tid, task_dict, params, variants, why = _torch_task(tfams[name], i)
            if why:
                degenerate[tid] = why
                continue
        tasks.append({"id": tid, "family": name, "index": i, "task": json.dumps(task_dict),
                      "params": json.dumps(params, default=str), "split_task": task_split(tid),
                      "split_family": family_split(name)})
        for v in variants:
            cands.append({"candidate_id": f"{tid}/{v.name}", "task_id": tid, "family": name,
                          "name": v.name, "tags": list(v.tags), "origin": "family", "code": v.code,
                          "code_sha256": code_sha256(v.code)})
        if progress:
            progress(k, len(todo))
    task_ids = {t["id"] for t in tasks}
    cands = [c for c in cands if c["task_id"] in task_ids]
    by_id = {c["candidate_id"]: c["code_sha256"] for c in cands}
    kept = [m for m in ds.measurements if by_id.get(m["candidate_id"]) == m["code_sha256"]]
    dropped = len(ds.measurements) - len(kept)
    ds.tasks, ds.candidates, ds.measurements = tasks, cands, kept
    return {"families": len({t["family"] for t in tasks}), "tasks": len(tasks), "candidates": len(cands),
            "measurements_kept": len(kept), "measurements_dropped": dropped, "degenerate": degenerate}


def _torch_task(generator: str, index: int):
    """One generated PyTorch problem: (id, task record, params, variants, why it is degenerate or [])."""
    from cudaperf.dataset.pytorch_families import TORCH_FAMILIES
    from cudaperf.tasks.pytorch import degenerate_reasons, pytorch_task_to_dict

    g = TORCH_FAMILIES[generator](index)
    return g.task.id, pytorch_task_to_dict(g.task), g.params, g.variants, degenerate_reasons(g.task)


def dataset_tasks(ds: Dataset) -> dict[str, Task]:
    """The dataset's tasks as harness task records (C kinds and ``PyTorchTask``), by id."""
    return {t["id"]: task_from_dict({**json.loads(t["task"]), "id": t["id"]}) for t in ds.tasks}
