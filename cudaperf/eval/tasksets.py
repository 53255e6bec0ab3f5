"""Task sets ``cudaperf eval --tasks SPEC`` understands, with what the report groups by (family, level).

=====================  ==========================================================================================
``small[:N]``          12 (or N) held-out C tasks of the built-in dataset's task split, spread over its families
                       (the default; minutes on one GPU)
``test``               the built-in dataset's held-out tasks by task (kept by the paper's filter), C and PyTorch;
                       ``test:c`` / ``test:pytorch`` for one kind
``test-family``        the held-out families' tasks (families never seen in training); ``:c`` / ``:pytorch`` too
``train``              the training split by task, every task (the paper's filter not applied: tasks it drops are
                       the ones model-written variants can help); ``:c`` / ``:pytorch`` too. For generating
                       variants (``cudaperf dataset add-candidates RUN_DIR``), not for measuring a policy
``babeltower[:PATH]``  BabelTower's 233 kernels, less its documented defective tasks (listed in the run)
``kernelbench:DIR``    a KernelBench checkout's problems (``DIR`` = the checkout, its ``KernelBench`` folder or one
                       ``levelN`` folder); the level is read from the path
``pytorch``            the project's bundled PyTorch problems
``builtin``            the bundled example tasks (22 C functions and one C program)
``text``               Text2CUDA: the shipped text tasks (a description and an interface; the C reference hidden),
                       derived from ``test:c`` (docs/TEXT2CUDA.md)
``text-as-c``          the same tasks, same ids, as C-to-CUDA (the C source shown): the two framings compare
a path                 a task file (.jsonl / .parquet) or a task directory
=====================  ==========================================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.tasks.schema import Task, TaskError

SMALL_N_TASKS = 12

BABELTOWER_DEFECTS: dict[str, str] = {
    "babeltower-013": "the wrapper launches the kernel on the test's host stack arrays (no cudaMalloc)",
    "babeltower-186": "the wrapper passes `new double[length]` host pointers to the kernel",
    "babeltower-026": "a test with a size of 0 gives a launch with 0 blocks",
    "babeltower-041": "a test with a size of 0 gives a launch with 0 blocks",
    "babeltower-115": "a test with a size of 0 gives a launch with 0 blocks",
    "babeltower-064": "grid (32, (n/1024+31)/32) has y = 0 for every n < 1024",
    "babeltower-099": "the wrapper's parameter order differs from the C function's; a 0 lands in numElements",
    "babeltower-126": "block dim3(16,16,16) = 4096 threads",
    "babeltower-159": "cudaMemcpy(hData, data, ..., HostToDevice) with hData a host array",
    "babeltower-165": "cudaMemcpy device-to-host from host stack arrays; the kernel is never launched",
    "babeltower-033": "n = 3 writes into a 1-element buffer; the expected output is where the overflow landed",
    "babeltower-074": "the kernel reads index >= 63 of 8-element arrays; the expected inf is stack garbage",
    "babeltower-196": "reads vec[1..2] of a 1-element array; expected values come from a neighbouring array",
    "babeltower-035": "the wrapper copies width*height*depth = 4 outputs into the test's 3-element stack array "
                      "`output4[3]` (SIGSEGV)",
    "babeltower-195": "the test calls the CPU function with filters = 2 and a 1-element `mean2[]`: mean[1] is "
                      "written past the stack array (SIGSEGV); the wrapper would copy 2 floats into it as well",
    "babeltower-063": "X = Y = Z = 2 gives n = 8 and n*n = 64 elements, copied both ways through the test's "
                      "4-element stack arrays (stack smashing)",
}
"""BabelTower tasks whose own reference fails its own tests: data defects (docs/BENCHMARKS.md, "BabelTower")."""


@dataclass(frozen=True)
class TaskSet:
    spec: str
    benchmark: str
    tasks: tuple[Task, ...]
    meta: dict[str, dict[str, str | None]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)


def _dataset_set(spec: str, column: str, kind: str | None, limit_spread: int | None = None,
                 dataset: Path | None = None, split: str = "test") -> TaskSet:
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import candidate_summary, task_filter
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(dataset or default_dataset_dir())
    tasks = dataset_tasks(ds)
    rows = [t for t in ds.tasks if t[column] == split]
    if kind == "c":
        rows = [t for t in rows if not t["family"].startswith("pt_")]
    elif kind == "pytorch":
        rows = [t for t in rows if t["family"].startswith("pt_")]
    if split == "train":  # every training task: those the filter drops lack variants that a model could add
        verdict = {t["id"]: "kept" for t in rows}
    else:
        verdict = task_filter(ds, candidate_summary(ds))
    excluded = {t["id"]: f"dropped by the dataset's filter: {verdict[t['id']]}" for t in rows
                if verdict.get(t["id"]) != "kept"}
    rows = sorted((t for t in rows if verdict.get(t["id"]) == "kept"), key=lambda t: (t["family"], t["id"]))
    if limit_spread is not None:  # round-robin over families, so a small set covers many
        by_fam: dict[str, list[dict]] = {}
        for t in rows:
            by_fam.setdefault(t["family"], []).append(t)
        picked: list[dict] = []
        while len(picked) < limit_spread and any(by_fam.values()):
            for fam in sorted(by_fam):
                if by_fam[fam] and len(picked) < limit_spread:
                    picked.append(by_fam[fam].pop(0))
        rows = sorted(picked, key=lambda t: (t["family"], t["id"]))
        excluded = {}
    bench = "c_train" if split == "train" else "c_test_family" if column == "split_family" else "c_test"
    if kind == "pytorch":
        bench = bench.replace("c_", "pytorch_")
    elif kind is None and any(t["family"].startswith("pt_") for t in rows):
        bench = bench.replace("c_", "mixed_")
    return TaskSet(spec, bench, tuple(tasks[t["id"]] for t in rows),
                   {t["id"]: {"family": t["family"], "level": None} for t in rows}, excluded)


def _text_set(spec: str, as_c: bool) -> TaskSet:
    from cudaperf.tasks.text import SOURCE_SET, load_text_tasks

    src = load_taskset(SOURCE_SET)
    by_id = {t.id: t for t in src.tasks}
    texts = load_text_tasks(c_tasks=by_id)
    tasks = tuple(by_id[t.source_id] for t in texts) if as_c else tuple(texts)
    meta = {t.id: dict(src.meta[t.id]) for t in tasks}
    return TaskSet(spec, "text_as_c" if as_c else "text", tasks, meta)


def _kernelbench_level(path: str) -> str | None:
    m = re.search(r"level\s*_?(\d+)", path, re.I)
    return f"level{m.group(1)}" if m else None


def load_taskset(spec: str, dataset: Path | None = None) -> TaskSet:
    """The tasks of ``spec`` (see the module docstring); TaskError with what is wrong and what is accepted.
    ``dataset``: the dataset directory whose splits ``small``, ``test``, ``test-family`` and ``train`` name
    (default: the one shipped in the package)."""
    name, _, arg = spec.partition(":")
    if dataset is not None and not (Path(dataset) / "tasks.parquet").exists():
        raise TaskError(f"--dataset {dataset}: no dataset there ({Path(dataset) / 'tasks.parquet'} is missing)")
    if name == "small" and arg.isdigit():
        return _dataset_set(spec, "split_task", "c", limit_spread=int(arg), dataset=dataset)
    if name in ("small", "test", "test-family", "train"):
        if arg not in ("", "c", "pytorch"):
            raise TaskError(f"--tasks {spec}: after '{name}:' give 'c' or 'pytorch'")
        if name == "small":
            return _dataset_set(spec, "split_task", arg or "c", limit_spread=SMALL_N_TASKS, dataset=dataset)
        return _dataset_set(spec, "split_family" if name == "test-family" else "split_task", arg or None,
                            dataset=dataset, split="train" if name == "train" else "test")
    if name == "babeltower" or spec.endswith("unit_total_eval_cases.jsonl"):
        from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

        path = find_babeltower(arg or None) if name == "babeltower" else find_babeltower(spec)
        if path is None:
            raise TaskError("BabelTower data not found: give --tasks babeltower:PATH or set CUDAPERF_BABELTOWER")
        all_tasks = load_babeltower(path)
        excluded = {t.id: f"data defect: {BABELTOWER_DEFECTS[t.id]}" for t in all_tasks if t.id in BABELTOWER_DEFECTS}
        kept = tuple(t for t in all_tasks if t.id not in BABELTOWER_DEFECTS)
        return TaskSet(spec, "babeltower", kept, {t.id: {"family": None, "level": None} for t in kept}, excluded)
    if name == "kernelbench":
        from cudaperf.tasks.pytorch import load_pytorch_tasks

        if not arg:
            raise TaskError("--tasks kernelbench:DIR needs the path of a KernelBench checkout (or of a level folder)")
        root = Path(arg)
        if (root / "KernelBench").is_dir():
            root = root / "KernelBench"
        tasks = load_pytorch_tasks(root)
        excluded = {}
        if not _kernelbench_level(root.name):  # the whole benchmark: its 250 problems are levels 1 to 3
            excluded = {t.id: "level 4 is not among KernelBench's 250 problems (levels 1-3); give its folder to run it"
                        for t in tasks if _kernelbench_level(t.id) == "level4"}
            tasks = [t for t in tasks if t.id not in excluded]
        return TaskSet(spec, "kernelbench", tuple(tasks),
                       {t.id: {"family": None, "level": _kernelbench_level(t.id) or _kernelbench_level(root.name)}
                        for t in tasks}, excluded)
    if name == "pytorch" and not arg:
        from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

        tasks = load_pytorch_tasks(builtin_pytorch_dir())
        return TaskSet(spec, "pytorch", tuple(tasks), {t.id: {"family": None, "level": None} for t in tasks})
    if name in ("text", "text-as-c") and not arg:
        return _text_set(spec, as_c=name == "text-as-c")
    if name == "builtin" and not arg:
        from cudaperf.tasks import load_builtin_tasks

        tasks = load_builtin_tasks()
        return TaskSet(spec, "builtin", tuple(tasks), {t.id: {"family": None, "level": None} for t in tasks})
    path = Path(spec)
    if not path.exists():
        raise TaskError(f"--tasks {spec}: not a task set (small, test[:c|:pytorch], test-family[:c|:pytorch], "
                        "train[:c|:pytorch], babeltower[:PATH], kernelbench:DIR, pytorch, builtin, text, text-as-c) and no such file or directory")
    if path.suffix == ".py" or (path.is_dir() and not (path / "task.json").exists()
                                and any(path.rglob("*.py")) and not any(path.glob("*.jsonl"))):
        from cudaperf.tasks.pytorch import load_pytorch_tasks

        tasks = load_pytorch_tasks(path)
        return TaskSet(spec, "pytorch_files", tuple(tasks), {t.id: {"family": None, "level": None} for t in tasks})
    from cudaperf.tasks import load_tasks

    tasks = load_tasks(path)
    return TaskSet(spec, "file", tuple(tasks), {t.id: {"family": None, "level": None} for t in tasks})


def select(ts: TaskSet, *, limit: int | None = None, task_ids: list[str] | None = None) -> TaskSet:
    """A subset: the named ids (each must exist), then the first ``limit``."""
    tasks = list(ts.tasks)
    if task_ids:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in task_ids if i not in by_id]
        if unknown:
            raise TaskError(f"--task-ids: {unknown[:5]} not in --tasks {ts.spec} ({len(tasks)} tasks)")
        tasks = [by_id[i] for i in task_ids]
    if limit is not None:
        if limit < 1:
            raise TaskError("--limit must be >= 1")
        tasks = tasks[:limit]
    ids = {t.id for t in tasks}
    return TaskSet(ts.spec, ts.benchmark, tuple(tasks), {k: v for k, v in ts.meta.items() if k in ids}, ts.excluded)
