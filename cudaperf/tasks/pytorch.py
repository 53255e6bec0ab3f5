"""PyTorch->CUDA tasks in KernelBench's format, and what can be checked about them without a GPU.

A problem is a Python file defining ``class Model(nn.Module)`` with ``forward``, ``get_inputs()`` and
``get_init_inputs()``. :func:`load_pytorch_tasks` reads such files (a user's KernelBench checkout, or the
project's own problems in ``cudaperf/data/pytorch``) into :class:`PyTorchTask` records; the files are parsed,
never run, when loading. :func:`degenerate_reasons` runs a problem's reference (trusted code) on the CPU to flag
problems where zeros or constants would pass. :func:`check_pytorch_candidate`, the static check of a
KernelBench-style candidate (``class ModelNew`` with inline CUDA), lives in :mod:`cudaperf.harness.pytorch_checks`
beside the other static checks; it is re-exported here for callers of the old name.

Running candidates on a GPU (build, correctness, timing) is not in this module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudaperf.harness.pytorch_checks import PyTorchCheck, check_pytorch_candidate
from cudaperf.tasks.schema import TaskError

__all__ = ["PRECISION_POLICY", "DtypeTolerance", "PyTorchCheck", "PyTorchTask", "builtin_pytorch_dir",
           "check_pytorch_candidate", "degenerate_reasons", "load_pytorch_tasks", "pytorch_task_from_dict",
           "pytorch_task_to_dict", "task_id_for"]

PRECISION_POLICY = "fp32, TF32 off for matmul and cuDNN, for reference and candidate alike"


@dataclass(frozen=True)
class DtypeTolerance:
    """``|got - expected| <= atol + rtol * |expected|``, per output dtype."""

    fp32: tuple[float, float] = (1e-4, 1e-4)
    fp16: tuple[float, float] = (1e-2, 1e-2)
    bf16: tuple[float, float] = (2e-2, 2e-2)


@dataclass(frozen=True)
class PyTorchTask:
    id: str
    source: str
    """Trusted Python source defining Model, get_inputs and get_init_inputs."""
    path: str = ""
    tolerance: DtypeTolerance = field(default_factory=DtypeTolerance)
    precision: str = PRECISION_POLICY
    description: str = ""
    tags: tuple[str, ...] = ()
    kind: Literal["pytorch"] = "pytorch"


def _problem_errors(tree: ast.Module) -> list[str]:
    names = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    errors = []
    model = names.get("Model")
    if not isinstance(model, ast.ClassDef):
        errors.append("no class Model")
    elif not any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in model.body):
        errors.append(f"line {model.lineno}: class Model has no forward method")
    for fn in ("get_inputs", "get_init_inputs"):
        if not isinstance(names.get(fn), ast.FunctionDef):
            errors.append(f"no function {fn}()")
    return errors


def task_id_for(path: Path, root: Path) -> str:
    """The relative path without ``.py``, folders joined by ``_``: a file's stem is kept whole (KernelBench's
    ``level1/1_Square_matrix_multiplication_.py`` is ``level1_1_Square_matrix_multiplication_``), and only other
    characters than letters, digits and ``_`` become ``_``."""
    rel = path.relative_to(root) if path != root else Path(path.name)
    return "_".join(re.sub(r"[^A-Za-z0-9_]+", "_", part) for part in rel.with_suffix("").parts)


def load_pytorch_tasks(path: str | Path) -> list[PyTorchTask]:
    """Problems from one ``.py`` file or every ``.py`` file under a directory (sorted; ids from relative paths,
    e.g. ``level1_19_ReLU``). Raises TaskError naming the file (and line) of the first malformed problem."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"{path}: no such file or directory")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.py") if p.name != "__init__.py")
    if not files:
        raise TaskError(f"{path}: no .py problem files")
    root = path.parent if path.is_file() else path
    tasks = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text, filename=str(f))
        except SyntaxError as exc:
            raise TaskError(f"{f}:{exc.lineno}: not valid Python: {exc.msg}") from None
        errors = _problem_errors(tree)
        if errors:
            raise TaskError(f"{f}: not a KernelBench-format problem: {'; '.join(errors)}")
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        tasks.append(PyTorchTask(id=task_id_for(f, root), source=text, path=str(f),
                                 description=(ast.get_docstring(model) or "").strip()))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise TaskError(f"{path}: two problems map to the same id")
    return tasks


def pytorch_task_to_dict(task: PyTorchTask) -> dict:
    """A JSON-ready record of ``task`` (the dataset's ``tasks`` table stores it)."""
    tol = task.tolerance
    return {"kind": "pytorch", "id": task.id, "source": task.source, "path": task.path,
            "tolerance": {"fp32": list(tol.fp32), "fp16": list(tol.fp16), "bf16": list(tol.bf16)},
            "precision": task.precision, "description": task.description, "tags": list(task.tags)}


def pytorch_task_from_dict(d: dict) -> PyTorchTask:
    """The inverse of :func:`pytorch_task_to_dict`; the source is parsed (not run) and must define a problem."""
    tid = d.get("id")
    if not isinstance(tid, str) or not tid:
        raise TaskError("pytorch task record without a string 'id'")
    source = d.get("source")
    if not isinstance(source, str):
        raise TaskError(f"task {tid}: 'source' must be the problem's Python source")
    try:
        errors = _problem_errors(ast.parse(source))
    except SyntaxError as exc:
        raise TaskError(f"task {tid}: source line {exc.lineno}: not valid Python: {exc.msg}") from None
    except (MemoryError, RecursionError):  # CPython's parser on deeply nested input
        raise TaskError(f"task {tid}: 'source' is nested too deeply to parse") from None
    if errors:
        raise TaskError(f"task {tid}: not a KernelBench-format problem: {'; '.join(errors)}")
    tol_d = d.get("tolerance") or {}
    try:
        tol = DtypeTolerance(**{k: (float(v[0]), float(v[1])) for k, v in tol_d.items()})
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        raise TaskError(f"task {tid}: tolerance must map fp32/fp16/bf16 to [atol, rtol]: {exc}") from None
    return PyTorchTask(id=tid, source=source, path=str(d.get("path", "")), tolerance=tol,
                       precision=str(d.get("precision", PRECISION_POLICY)),
                       description=str(d.get("description", "")), tags=_tags(d, tid))


def _tags(d: dict, tid: str) -> tuple[str, ...]:
    tags = d.get("tags") or ()
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"task {tid}: field 'tags' must be a list of strings, got {tags!r}")
    return tuple(tags)


def builtin_pytorch_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "data" / "pytorch"


# ---------------------------------------------------------------------------------------------------------------
# Degenerate problems: outputs for which zeros, a constant, or an input-independent answer would pass


def degenerate_reasons(task: PyTorchTask, seeds: tuple[int, int] = (0, 1), device: str = "cpu",
                       rel_floor: float = 1e-6) -> list[str]:
    """Why ``task`` is degenerate (empty list: it is not). With the model fixed (same init seed) and two input
    draws: *tiny* (every output's max |value| below 1e-6), *constant* (an output's values all within
    ``rel_floor`` of its mean, relative to its magnitude), *input-insensitive* (the two draws give outputs within
    the task's tolerance of each other, so returning one fixed answer would pass)."""
    import torch

    a = _run_fixed_model(task, seeds, device)
    reasons = []
    for k, (x, y) in enumerate(zip(*a)):
        if not torch.is_floating_point(x):
            x, y = x.double(), y.double()
        mag = float(x.abs().max()) if x.numel() else 0.0
        if mag < 1e-6:
            reasons.append(f"output {k}: tiny (max |value| {mag:.2e}): zeros would pass")
            continue
        if x.numel() > 1 and float((x - x.mean()).abs().max()) <= rel_floor * mag:
            reasons.append(f"output {k}: constant ({float(x.mean()):.4g} everywhere)")
        atol, rtol = task.tolerance.fp32
        if x.shape == y.shape and bool(torch.allclose(y, x, rtol=rtol, atol=atol)):
            reasons.append(f"output {k}: input-insensitive (two input draws give the same output within tolerance)")
    return reasons


def problem_namespace(task: PyTorchTask) -> dict:
    """The problem's module namespace (``Model``, ``get_inputs``, ``get_init_inputs``): its source executed. Trusted
    code only (a task's problem, never a candidate)."""
    ns: dict = {"__name__": f"cudaperf_problem_{task.id}"}
    exec(compile(task.source, task.path or task.id, "exec"), ns)
    return ns


def _run_fixed_model(task: PyTorchTask, seeds: tuple[int, int], device: str):
    import torch

    ns = problem_namespace(task)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1234)
    model = ns["Model"](*ns["get_init_inputs"]()).to(device).eval()
    outs = []
    for s in seeds:
        torch.manual_seed(s)
        inputs = [x.to(device) if hasattr(x, "to") else x for x in ns["get_inputs"]()]
        with torch.no_grad():
            out = model(*inputs)
        outs.append(tuple(out) if isinstance(out, (tuple, list)) else (out,))
    return outs
