"""Helpers the command modules share: consoles, errors, task and dataset loading, settings, progress bars."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cudaperf.tasks.schema import Task, TaskError

console = Console()
err = Console(stderr=True)

TASKS_HELP = ("Where tasks come from: a .jsonl/.parquet file or a task directory; 'builtin' (the bundled "
              "c_function examples, default); 'babeltower' or a path to BabelTower's unit_total_eval_cases.jsonl; "
              "'pytorch' (the project's PyTorch problems) or 'pytorch:PATH' (KernelBench-format .py files, e.g. "
              "a KernelBench checkout's level1 directory).")

DATASET_HELP = "Dataset directory (default: the one shipped in the package, cudaperf/data/dataset)."

PHASE_LABELS = {"compile": "compiling", "run": "running on GPU", "pytorch-compile": "compiling (PyTorch)",
                "pytorch-run": "running (PyTorch)"}


def _load(tasks: str) -> list[Task]:
    from cudaperf.tasks import load_builtin_tasks, load_tasks
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    if tasks == "builtin":
        return load_builtin_tasks()
    if tasks == "pytorch" or tasks.startswith("pytorch:"):
        from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

        return load_pytorch_tasks(builtin_pytorch_dir() if tasks == "pytorch" else tasks[len("pytorch:"):])
    if tasks == "babeltower" or tasks.endswith("unit_total_eval_cases.jsonl"):
        path = find_babeltower(None if tasks == "babeltower" else tasks)
        if path is None:
            raise TaskError("BabelTower data not found: pass its path or set CUDAPERF_BABELTOWER")
        return load_babeltower(path)
    return load_tasks(tasks)


def _fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``msg`` as an error (verbatim: brackets in it, such as a config table's ``[rollout]``, are text, not
    rich markup) and exit with ``code``."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(msg)}")
    raise typer.Exit(code)


def _settings(time: bool, reps: int, budget_ms: float):
    from cudaperf.harness.settings import HarnessSettings

    return HarnessSettings(time_candidates=time, min_reps=reps, budget_ms=budget_ms)


def _print_result(res) -> None:
    from cudaperf.harness.evaluate import verdict_line

    style = "green" if res.correct else ("yellow" if res.status == "unscored" else "red")
    console.print(f"[bold]{res.task_id}[/] / {res.candidate_id}: [{style}]{verdict_line(res)}[/]")
    if res.failure and res.failure.message and not res.correct:
        console.print(f"  {res.failure.kind.value} ({res.failure.attributed_to}): {res.failure.message[:1500]}")
    if res.tests:
        console.print(f"  tests: {sum(t.passed for t in res.tests)}/{len(res.tests)} passed "
                      f"(p = {res.pass_fraction:.2f})")
    if res.candidate_timing and res.baseline_timing:
        c, b = res.candidate_timing, res.baseline_timing
        console.print(f"  time: candidate median {c.median_ms:.3f} ms (cv {c.cv:.3f}, n {c.n}); "
                      f"sequential C median {b.median_ms:.3f} ms (cv {b.cv:.3f}, n {b.n})")
    ev = res.gpu_evidence
    if ev and ev.kernel_ms is not None:
        console.print(f"  GPU time per call: kernels {ev.kernel_ms:.3f} ms, copies {ev.memcpy_ms:.3f} ms "
                      f"({(ev.htod_bytes or 0) / 1e6:.1f} MB in, {(ev.dtoh_bytes or 0) / 1e6:.1f} MB out), "
                      f"{ev.kernels_in_timed_call} kernel launches")
    if res.speedup_flag:
        console.print(f"  [yellow]{res.speedup_flag}[/]")


def _read_completions(path: Path, default_task: str | None) -> list[tuple[str, str, str]]:
    """(task_id, candidate_id, completion) from a .jsonl of completions."""
    from cudaperf.jsonl import json_objects

    out = []
    for lineno, row in json_objects(path, TaskError):
        comp, tid = row.get("completion"), row.get("task_id") or default_task
        if not isinstance(comp, str) or not tid:
            raise TaskError(f"{path}:{lineno}: each line needs a string 'completion' and a 'task_id' "
                            f"(or pass --task)")
        out.append((tid, str(row.get("candidate_id") or f"line{lineno}"), comp))
    return out


def _dataset_dir(path: Optional[Path]) -> Path:
    from cudaperf.dataset.store import default_dataset_dir

    return path or default_dataset_dir()


def _open_dataset(path: Optional[Path], missing_ok: bool = False):
    from cudaperf.dataset.store import Dataset, DatasetError

    try:
        return Dataset.load(_dataset_dir(path), missing_ok=missing_ok)
    except DatasetError as exc:
        _fail(str(exc))


def _bar():
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=False)
