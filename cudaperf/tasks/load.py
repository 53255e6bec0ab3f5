"""Load task records from JSONL, Parquet, or the bundled example set, validating each one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from cudaperf.tasks.schema import Task, TaskError, task_from_dict

BUILTIN_C_FUNCTIONS = "c_functions"
BUILTIN_SETS = ("c_functions", "c_programs")


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if not path.exists():
        raise TaskError(f"task file not found: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path}: row {i}", row
        return
    with path.open("rb") as fh:  # JSON Lines: lines end at b"\n"; each line is decoded on its own
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TaskError(f"{path}:{lineno}: not valid UTF-8 (byte {exc.start} of the line)") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path}:{lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
            except (ValueError, RecursionError) as exc:  # e.g. an integer of > 4300 digits, nesting too deep
                raise TaskError(f"{path}:{lineno}: not valid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
            yield f"{path}:{lineno}", row


def load_tasks(path: str | Path) -> list[Task]:
    """Every task in a ``.jsonl`` or ``.parquet`` file, or in a bundled-layout directory.

    Raises :class:`TaskError` naming the file, the line and the field of the first malformed record, or a
    repeated id.
    """
    path = Path(path)
    if path.is_dir():
        return load_task_dir(path)
    tasks: list[Task] = []
    seen: set[str] = set()
    for where, row in _rows(path):
        try:
            task = task_from_dict(row)
        except TaskError as exc:
            raise TaskError(f"{where}: {exc}") from None
        if task.id in seen:
            raise TaskError(f"{where}: task id {task.id!r} repeats")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise TaskError(f"{path}: no tasks in file")
    return tasks


@dataclass(frozen=True)
class BundledCandidate:
    task_id: str
    label: str
    """``fast``, ``slow`` or ``wrong`` for the bundled examples."""
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


def load_task_dir(root: Path) -> list[Task]:
    """A directory with one sub-directory per task: ``task.json`` plus ``reference.c`` (and, for ``c_program``
    tasks, ``generator.c``). The directory name is the default id; ``kind`` defaults to ``c_function``."""
    tasks = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        meta_path = sub / "task.json"
        if not meta_path.exists():
            continue
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TaskError(f"{meta_path}: not valid JSON: {exc.msg}") from None
        meta.setdefault("id", sub.name)
        meta.setdefault("kind", "c_function")
        for key, fname in (("reference_c", "reference.c"), ("input_generator_c", "generator.c")):
            if key not in meta and (sub / fname).exists():
                meta[key] = (sub / fname).read_text(encoding="utf-8")
        try:
            tasks.append(task_from_dict(meta))
        except TaskError as exc:
            raise TaskError(f"{meta_path}: {exc}") from None
    if not tasks:
        raise TaskError(f"{root}: no task directories (each needs a task.json)")
    return tasks


def builtin_dir(name: str = BUILTIN_C_FUNCTIONS) -> Path:
    return Path(__file__).resolve().parent.parent / "data" / name


def load_builtin_tasks(name: str | None = None) -> list[Task]:
    """The bundled example tasks: ``c_functions`` (>= 20 c_function tasks) and ``c_programs``; all by default."""
    names = (name,) if name else BUILTIN_SETS
    return [t for n in names for t in load_task_dir(builtin_dir(n))]


def builtin_candidates(name: str | None = None) -> list[BundledCandidate]:
    """Every bundled candidate ``<task>/<label>.cu`` (fast, slow, wrong, ...), in task order then label order."""
    out = []
    for n in (name,) if name else BUILTIN_SETS:
        for sub in sorted(p for p in builtin_dir(n).iterdir() if p.is_dir()):
            for cu in sorted(sub.glob("*.cu")):
                out.append(BundledCandidate(task_id=sub.name, label=cu.stem, path=cu))
    return out


def find_task(tasks: list[Task], task_id: str) -> Task:
    for t in tasks:
        if t.id == task_id:
            return t
    raise TaskError(f"no task with id {task_id!r} (have {len(tasks)} tasks, e.g. {[t.id for t in tasks[:5]]})")
