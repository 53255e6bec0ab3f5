"""cudaperf evaluate | batch | check | features | doctor: the harness on one candidate or many."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cudaperf.cli.common import (PHASE_LABELS, TASKS_HELP, _fail, _load, _print_result, _read_completions,
                                 _settings, console, err)
from cudaperf.tasks.schema import TaskError


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``, in the order `cudaperf --help` lists them."""
    for command in (evaluate, batch, check, features, doctor):
        app.command()(command)


def evaluate(
    task: str = typer.Option(..., "--task", "-t", help="Task id (see --tasks)."),
    candidate: Path = typer.Option(..., "--candidate", "-c", help="A .cu file, a completion text file, or a "
                                   ".jsonl of completions ({task_id?, candidate_id?, completion})."),
    tasks: str = typer.Option("builtin", "--tasks", help=TASKS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the full result record(s) as JSON lines."),
    store: Optional[Path] = typer.Option(None, "--store", help="With a .jsonl of completions: append results "
                                         "here and resume (default runs/evaluate.jsonl)."),
    time: bool = typer.Option(True, "--time/--no-time", help="Time correct candidates against the sequential C."),
    reps: int = typer.Option(5, "--reps", help="Minimum timed repetitions."),
    budget_ms: float = typer.Option(2000.0, "--budget-ms", help="Timing budget per candidate (adaptive "
                                    "repetitions stop past it or once cv < 2%)."),
) -> None:
    """Evaluate a candidate (or a JSONL of completions) on a task: hidden tests, GPU evidence, speedup."""
    from cudaperf.harness.evaluate import evaluate as run_eval
    from cudaperf.tasks.load import find_task

    try:
        all_tasks = _load(tasks)
        find_task(all_tasks, task)
    except TaskError as exc:
        _fail(str(exc))
    if not candidate.exists():
        _fail(f"candidate file not found: {candidate}")
    settings = _settings(time, reps, budget_ms)
    if candidate.suffix == ".jsonl":
        try:
            rows = _read_completions(candidate, task)
        except TaskError as exc:
            _fail(str(exc))
        _run_jobs(all_tasks, rows, store or Path("runs/evaluate.jsonl"), settings, as_json)
        return
    the_task = find_task(all_tasks, task)
    res = run_eval(the_task, candidate.read_text(encoding="utf-8", errors="replace"), settings=settings,
                   candidate_id=candidate.name)
    if as_json:
        print(res.to_json())
    else:
        _print_result(res)
    raise typer.Exit(0 if res.status == "scored" else 3)


def _make_executor(spec: str):
    from cudaperf.harness.executors import ExecutorError, make_executor

    try:
        return make_executor(spec)
    except ExecutorError as exc:
        _fail(str(exc))


def _run_jobs(all_tasks, rows, store_path: Path, settings, as_json: bool, executor: str = "local") -> None:
    from cudaperf.harness.executor import Job
    from cudaperf.harness.executors import ExecutorError
    from cudaperf.harness.store import ResultStore

    jobs = [Job(t, c, comp) for t, c, comp in rows]
    store = ResultStore(store_path)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as bar:
        ids = {}

        def progress(phase: str, i: int, n: int) -> None:
            if phase not in ids:
                ids[phase] = bar.add_task(PHASE_LABELS.get(phase, phase), total=n)
            bar.update(ids[phase], completed=i, total=n)

        with _make_executor(executor) as ex:
            try:
                summary = ex.evaluate(all_tasks, jobs, store, settings=settings, progress=progress)
            except (ExecutorError, ValueError) as exc:
                _fail(str(exc))
    latest = store.latest()
    results = [latest[(j.task_id, j.candidate_id)] for j in jobs if (j.task_id, j.candidate_id) in latest]
    if as_json:
        for r in results:
            print(r.to_json())
    else:
        _summary_table(results)
        if executor == "compile-only":
            err.print("[yellow]compile only:[/] candidates were checked and compiled, not run (unscored).")
        elif not summary.gpus:
            err.print("[yellow]no GPU visible:[/] candidates were checked and compiled; running them needs a GPU, "
                      "so those results are unscored (see `cudaperf doctor`).")
        err.print(f"{summary.n_jobs} jobs, {summary.n_skipped} already done; compile {summary.compile_wall_s:.1f} s "
                  f"({summary.compile_per_min:.0f}/min), GPU runs {summary.run_wall_s:.1f} s "
                  f"({summary.run_per_min:.0f}/min) on GPUs {list(summary.gpus) or 'none'}; results in {store_path}")


def _summary_table(results) -> None:
    table = Table(title="evaluation results")
    for col in ("task", "candidate", "verdict", "tests", "speedup", "stage"):
        table.add_column(col)
    for r in results:
        verdict = "correct" if r.correct else ("unscored" if r.status == "unscored" else
                                                (r.failure.kind.value if r.failure else "failed"))
        style = "green" if r.correct else ("yellow" if r.status == "unscored" else "red")
        tests = f"{sum(t.passed for t in r.tests)}/{len(r.tests)}" if r.tests else "-"
        table.add_row(r.task_id, r.candidate_id, f"[{style}]{verdict}[/]", tests,
                      f"{r.speedup:.2f}x" if r.speedup is not None else "-", r.stage.value)
    console.print(table)


def batch(
    tasks: str = typer.Option("builtin", "--tasks", help=TASKS_HELP),
    completions: Optional[Path] = typer.Option(None, "--completions", help="A .jsonl of completions "
                                               "({task_id, candidate_id?, completion}); default: the bundled "
                                               "fast/slow/wrong candidates of the built-in tasks, or the "
                                               "reference kernels for BabelTower."),
    store: Path = typer.Option(Path("runs/examples.jsonl"), "--store", help="Results JSONL (appended; resumes)."),
    as_json: bool = typer.Option(False, "--json", help="Print result records as JSON lines."),
    time: bool = typer.Option(True, "--time/--no-time"),
    reps: int = typer.Option(5, "--reps"),
    budget_ms: float = typer.Option(2000.0, "--budget-ms"),
    executor: str = typer.Option("local", "--executor", help="Where candidates are judged: local | compile-only | "
                                 "ray | ray:auto | ray://HOST:PORT (Ray: pip install 'cudaperf[ray]')."),
) -> None:
    """Evaluate many candidates over all visible GPUs (or a Ray cluster), appending to a resumable JSONL store."""
    from cudaperf.tasks import builtin_candidates
    from cudaperf.tasks.schema import CudaKernelTask

    try:
        all_tasks = _load(tasks)
        if completions is not None:
            rows = _read_completions(completions, None)
        elif tasks == "builtin":
            rows = [(c.task_id, c.label, c.source) for c in builtin_candidates()]
        elif all(isinstance(t, CudaKernelTask) for t in all_tasks):
            rows = [(t.id, "reference", t.reference_kernel) for t in all_tasks]
        else:
            _fail("these tasks have no bundled candidates: pass --completions")
    except TaskError as exc:
        _fail(str(exc))
    _make_executor(executor).close()  # a bad spec or a missing Ray fails now, before any work
    _run_jobs(all_tasks, rows, store, _settings(time, reps, budget_ms), as_json, executor)


def check(
    file: Path = typer.Argument(..., help="A .cu file or a completion text."),
    task: Optional[str] = typer.Option(None, "--task", "-t", help="Task id, for task-specific checks."),
    tasks: str = typer.Option("builtin", "--tasks", help=TASKS_HELP),
) -> None:
    """Run the static checks only. Exit code 1 and the reasons when the candidate is rejected."""
    from cudaperf.harness.extract import extract_code
    from cudaperf.harness.static_checks import check_source
    from cudaperf.tasks.load import find_task
    from cudaperf.tasks.schema import CudaKernelTask

    if not file.exists():
        _fail(f"file not found: {file}")
    kind, kernel = "c_function", None
    if task:
        try:
            t = find_task(_load(tasks), task)
        except TaskError as exc:
            _fail(str(exc))
        kind = t.kind
        kernel = t.kernel_name if isinstance(t, CudaKernelTask) else None
    ext = extract_code(file.read_text(encoding="utf-8", errors="replace"))
    if ext.code is None:
        console.print("[red]rejected[/]: no code found (expected <OUTPUT_CUDA>...</OUTPUT_CUDA> or a code block)")
        raise typer.Exit(1)
    import re

    if re.search(r"\bclass\s+ModelNew\b", ext.code):  # a KernelBench-style PyTorch module: the PyTorch checks
        from cudaperf.harness.pytorch_checks import check_pytorch_candidate

        chk = check_pytorch_candidate(ext.code)
        reasons = list(chk.reasons)
        if chk.ok:
            console.print("[green]ok[/]: a ModelNew module that passes the PyTorch candidate checks")
            return
    else:
        if kind == "pytorch":  # a fast-path unit (kernel_forward)
            from cudaperf.harness.torch_fast import check_fast_candidate

            res = check_fast_candidate(ext.code)
        else:
            res = check_source(ext.code, kind=kind, kernel_name=kernel)
        reasons = list(res.reasons)
        if res.ok:
            console.print(f"[green]ok[/]: kernels {', '.join(res.kernels)}; launched {', '.join(res.launched) or '-'}")
            return
    console.print("[red]rejected[/]:")
    for r in reasons:
        console.print(f"  - {r}")
    raise typer.Exit(1)


def features(
    file: Path = typer.Argument(..., help="A .cu file or a completion text (complete, partial or broken)."),
    tier: str = typer.Option("paper", "--tier", help="paper: the 11 static features of the paper (tree-sitter); "
                             "compiler: adds ptxas resources, theoretical occupancy and the SASS instruction mix "
                             "(nvcc, no GPU)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (NaN as null)."),
    block_size: Optional[int] = typer.Option(None, "--block-size", help="Compiler tier: block size for the "
                                             "occupancy (default: read from the launches)."),
    arch: str = typer.Option("sm_90", "--arch", help="Compiler tier: target architecture."),
    task: Optional[str] = typer.Option(None, "--task", "-t", help="Profile tier: the c_function task the "
                                       "candidate solves (it is run on one hidden input at the timing size)."),
    tasks: str = typer.Option("builtin", "--tasks", help=TASKS_HELP),
    gpu: Optional[int] = typer.Option(None, "--gpu", help="Profile tier: GPU index (default: the first visible)."),
) -> None:
    """Structural features of a CUDA source: the paper's 11 (default), plus the compiler and profile tiers.

    The profile tier runs the candidate under Nsight Compute (ncu --clock-control none) in the sandbox: it needs
    a GPU, ncu, and --task.
    """
    import math

    from cudaperf.features import extract_paper_features, features_to_json
    from cudaperf.harness.extract import extract_code

    if tier not in ("paper", "compiler", "profile"):
        _fail(f"unknown tier {tier!r}: choose paper, compiler or profile")
    if not file.exists():
        _fail(f"file not found: {file}")
    if tier == "profile" and not task:
        _fail("the profile tier runs the candidate, so it needs the task it solves: --task ID (see --tasks)")
    text = file.read_text(encoding="utf-8", errors="replace")
    code = extract_code(text).code or text
    out = features_to_json(extract_paper_features(code))
    if tier == "compiler":
        from cudaperf.features.compiler import compiler_features

        cf = compiler_features(code, arch=arch, block_size=block_size)
        out["compiler"] = {
            "compile_ok": cf.compile_ok,
            "values": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in cf.values.items()},
            "reasons": cf.reasons,
            "per_kernel": {k: {n: (None if isinstance(v, float) and math.isnan(v) else v) for n, v in d.items()}
                           for k, d in cf.per_kernel.items()},
            "log": cf.log,
        }
    if tier == "profile":
        from cudaperf.features.profile import ProfilerUnavailable, profile_features
        from cudaperf.tasks import find_task

        try:
            t = find_task(_load(tasks), task)
        except TaskError as exc:
            _fail(str(exc))
        try:
            pf = profile_features(t, code, gpu_index=gpu)
        except (ProfilerUnavailable, NotImplementedError) as exc:
            _fail(str(exc))
        out["profile"] = pf.to_json()
        if not pf.ok:
            err.print(f"[red]profile tier failed[/] ({pf.attributed_to}): {pf.error}")
    if as_json:
        print(json.dumps(out, allow_nan=False, default=str))
        return
    table = Table(title=f"features of {file.name}")
    table.add_column("feature")
    table.add_column("value")
    table.add_column("note")
    rows = [(k, out[k], out["reasons"].get(k, "")) for k in
            ("coal", "ai", "occ", "div", "xfer", "atomics", "syncthreads", "kernels", "tpb", "gmem_access", "ops")]
    if tier == "compiler":
        rows += [(k, v, out["compiler"]["reasons"].get(k, "")) for k, v in out["compiler"]["values"].items()]
    if tier == "profile" and out["profile"]["ok"]:
        rows += [(f"profile.{k}", v, out["profile"]["reasons"].get(k, "")) for k, v in out["profile"]["values"].items()]
    for name, value, note in rows:
        table.add_row(name, "NaN" if value is None else f"{value:.4g}", note)
    console.print(table)
    if out.get("parse_errors"):
        console.print(f"[yellow]{out['parse_errors']} parse error(s): values read from what parsed[/]")


def doctor(
    decoder: bool = typer.Option(False, "--decoder", help="Also check the local-model decoder (cudaperf eval "
                                 "--decoder graph): a random-weight model decoded with its steps replayed as a CUDA "
                                 "graph on the first GPU (on the CPU without one), against the same steps run "
                                 "eagerly and against transformers' generate. Needs the eval extra."),
) -> None:
    """Check nvcc, gcc, CUPTI, the sandbox and the GPUs; say plainly what is missing."""
    from cudaperf.harness import compile as comp
    from cudaperf.harness.environment import gpu_inventory
    from cudaperf.harness.sandbox import sandbox_level

    problems = 0
    table = Table(title="cudaperf doctor", show_header=False)

    def row(name: str, ok: bool, detail: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        table.add_row(name, "[green]ok[/]" if ok else "[red]missing[/]", detail)

    try:
        row("nvcc", True, f"{comp.nvcc_path()} ({comp.nvcc_version()})")
    except comp.ToolchainError as exc:
        row("nvcc", False, str(exc))
    try:
        row("gcc", True, comp.gcc_version())
    except comp.ToolchainError as exc:
        row("gcc", False, str(exc))
    try:
        cp = comp.cupti_paths()
        row("CUPTI", cp is not None, f"{cp[0]} / {cp[1]}" if cp else
            "not found: GPU-work evidence unavailable, results would be unscored")
    except comp.ToolchainError as exc:
        row("CUPTI", False, str(exc))
    from cudaperf.harness.sandbox import base_level

    level, base = sandbox_level(), base_level()
    row("sandbox", base != "session", f"{level}" + ("" if base != "session" else
                                                    ": no namespaces; stray processes and network not contained"))
    from cudaperf.harness.zygote import zygote_self_check

    ok, detail = zygote_self_check()
    row("zygote", ok, escape(detail))
    inv = gpu_inventory()
    if not inv:
        row("GPU", False, "no NVIDIA GPU visible (nvidia-smi missing or lists none): candidates compile but do "
                          "not run here")
    for idx, name, drv, total, free in inv:
        row(f"GPU {idx}", True, f"{name}, driver {drv}, {free} MiB free of {total} MiB")
    row("arch", True, comp.default_arch())
    if decoder:
        try:
            from cudaperf.policy.decode import self_check
        except ImportError as exc:
            row("decoder", False, f"{exc}: pip install -e '.[eval]'")
        else:
            where = "cuda" if inv else "cpu"
            ok, detail = self_check(where)
            row(f"decoder ({where})", ok, escape(detail))
    console.print(table)
    if problems:
        console.print(f"{problems} problem(s) found.")
    raise typer.Exit(0)
