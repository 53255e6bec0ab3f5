"""PyTorch->CUDA tasks in KernelBench's format, and what can be checked about them without a GPU.

A problem is a Python file defining ``class Model(nn.Module)`` with ``forward``, ``get_inputs()`` and
``get_init_inputs()``. :func:`load_pytorch_tasks` reads such files (a user's KernelBench checkout, or the
project's own problems in ``cudaperf/data/pytorch``) into :class:`PyTorchTask` records; the files are parsed,
never run, when loading. :func:`degenerate_reasons` runs a problem's reference (trusted code) on the CPU to flag
problems where zeros or constants would pass. :func:`check_pytorch_candidate` is the static check of a
KernelBench-style candidate (``class ModelNew`` with inline CUDA): see its docstring for what it rejects.

Running candidates on a GPU (build, correctness, timing) is not in this module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudaperf.tasks.schema import TaskError

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
    if errors:
        raise TaskError(f"task {tid}: not a KernelBench-format problem: {'; '.join(errors)}")
    tol_d = d.get("tolerance") or {}
    try:
        tol = DtypeTolerance(**{k: (float(v[0]), float(v[1])) for k, v in tol_d.items()})
    except (TypeError, ValueError, IndexError) as exc:
        raise TaskError(f"task {tid}: tolerance must map fp32/fp16/bf16 to [atol, rtol]: {exc}") from None
    return PyTorchTask(id=tid, source=source, path=str(d.get("path", "")), tolerance=tol,
                       precision=str(d.get("precision", PRECISION_POLICY)),
                       description=str(d.get("description", "")), tags=tuple(d.get("tags", ())))


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


def _run_fixed_model(task: PyTorchTask, seeds: tuple[int, int], device: str):
    import torch

    ns: dict = {"__name__": f"cudaperf_problem_{task.id}"}
    exec(compile(task.source, task.path or task.id, "exec"), ns)
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


# ---------------------------------------------------------------------------------------------------------------
# Static checks of KernelBench-style candidates

# torch functions a candidate's forward may call: allocation, shape and device bookkeeping, no arithmetic.
ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "device", "Size", "is_tensor", "no_grad", "inference_mode", "get_default_dtype",
}
# tensor methods that do not compute on the data
ALLOWED_TENSOR_METHODS = {
    "size", "dim", "numel", "stride", "view", "reshape", "contiguous", "is_contiguous", "data_ptr", "to", "cuda",
    "cpu", "float", "double", "half", "int", "long", "flatten", "unsqueeze", "squeeze", "permute", "transpose",
    "t", "expand", "expand_as", "view_as", "reshape_as", "element_size", "get_device", "type", "new_empty",
    "new_zeros", "detach", "requires_grad_", "item", "tolist", "numpy", "chunk", "split", "narrow", "select",
    "unbind", "clone",
}
TORCH_MODULE_NAMES = {"torch", "F", "nn", "functional"}
FORBIDDEN_IMPORTS = {"threading", "multiprocessing", "concurrent", "asyncio", "subprocess", "ctypes", "signal",
                     "time", "timeit", "gc", "importlib", "sys", "builtins"}
_LAUNCH = re.compile(r"<<<")
_GLOBAL = re.compile(r"__global__\s+\w")


@dataclass(frozen=True)
class PyTorchCheck:
    ok: bool
    reasons: tuple[str, ...]


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def check_pytorch_candidate(source: str) -> PyTorchCheck:
    """Static checks of a KernelBench-style candidate (``class ModelNew``, CUDA source in strings built with
    ``load_inline`` or similar). Rejects, each with a reason:

    - no ``class ModelNew``; no string holding a ``__global__`` kernel, or none launched with ``<<<``;
    - ``try``/``except`` anywhere (the classic silent fallback to torch);
    - imports of threading, multiprocessing, asyncio, subprocess, ctypes, time, gc, importlib, sys ... (side
      threads, timer access, patching);
    - extra CUDA streams (``torch.cuda.Stream``, ``torch.cuda.stream``, ``set_stream``) and CUDA graphs;
    - subclasses of ``torch.Tensor`` and ``__torch_function__`` / ``__torch_dispatch__`` (lazy or fake tensors);
    - assignments to attributes of modules (``torch.x = ...``, ``setattr(torch, ...)``): monkey-patching;
    - in ``ModelNew``'s methods: calls of torch compute functions (``torch.*``, ``F.*``, ``nn.functional.*``
      other than allocation and bookkeeping), of tensor compute methods (``x.sum()``, ``x.exp()``...),
      ``nn.*`` layers applied as functions, and the ``@`` operator. Arithmetic operators on tensors cannot be
      told from arithmetic on sizes statically; the run-time evidence (the candidate's own kernels did the
      work) covers them.
    """
    reasons: list[str] = []
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return PyTorchCheck(False, (f"not valid Python (line {exc.lineno}: {exc.msg})",))
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        reasons.append("no class ModelNew")
    else:
        cls = classes["ModelNew"]
        bases = [_dotted(b) for b in cls.bases]
        if any(b not in ("nn.Module", "torch.nn.Module", "Module") for b in bases):
            reasons.append(f"line {cls.lineno}: ModelNew subclasses {', '.join(bases)}: it must derive from "
                           "nn.Module only (subclassing the reference Model inherits its torch forward)")
        if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in cls.body):
            reasons.append(f"line {cls.lineno}: ModelNew defines no forward of its own")
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    cuda = "\n".join(s for s in strings if "__global__" in s)
    if not _GLOBAL.search(cuda):
        reasons.append("no __global__ kernel in the CUDA source")
    elif not _LAUNCH.search(cuda):
        reasons.append("a __global__ kernel is defined but never launched (<<< >>>)")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Try,)) or type(node).__name__ == "TryStar":
            reasons.append(f"line {node.lineno}: try/except (a fallback path) is not allowed")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                if m.split(".")[0] in FORBIDDEN_IMPORTS:
                    reasons.append(f"line {node.lineno}: import of {m} is not allowed")
        elif isinstance(node, ast.ClassDef):
            for b in node.bases:
                if _dotted(b) in ("torch.Tensor", "Tensor"):
                    reasons.append(f"line {node.lineno}: class {node.name} subclasses torch.Tensor")
            for b in node.body:
                if isinstance(b, ast.FunctionDef) and b.name in ("__torch_function__", "__torch_dispatch__"):
                    reasons.append(f"line {b.lineno}: {b.name} overrides torch dispatch")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and _dotted(t).split(".")[0] in TORCH_MODULE_NAMES | {"time"}:
                    reasons.append(f"line {node.lineno}: assignment to {_dotted(t)} (monkey-patching)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == "setattr" and node.args and _dotted(node.args[0]).split(".")[0] in TORCH_MODULE_NAMES:
                reasons.append(f"line {node.lineno}: setattr on {_dotted(node.args[0])} (monkey-patching)")
            if re.search(r"(^|\.)cuda\.(Stream|stream|set_stream|CUDAGraph|graph)$", name) or name.endswith(
                    "ExternalStream"):
                reasons.append(f"line {node.lineno}: {name}: extra streams and graphs are not allowed")
    if "ModelNew" in classes:
        reasons += _forward_compute(classes["ModelNew"])
    return PyTorchCheck(not reasons, tuple(dict.fromkeys(reasons)))


def _forward_compute(cls: ast.ClassDef) -> list[str]:
    reasons = []
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                reasons.append(f"line {node.lineno}: ModelNew.{fn.name} multiplies matrices with @ (a torch op)")
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            head, _, last = name.rpartition(".")
            root = name.split(".")[0]
            if root in TORCH_MODULE_NAMES and head:
                if head.endswith("cuda") or last in ALLOWED_TORCH_CALLS:
                    continue
                reasons.append(f"line {node.lineno}: ModelNew.{fn.name} calls {name} (torch computes, not the "
                               "candidate's kernel)")
            elif isinstance(node.func, ast.Attribute) and not (root == "self" and name.count(".") == 1):
                if last not in ALLOWED_TENSOR_METHODS and last in _TENSOR_COMPUTE:
                    reasons.append(f"line {node.lineno}: ModelNew.{fn.name} calls .{last}() (a torch op)")
    return reasons


_TENSOR_COMPUTE = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "matmul", "mm", "bmm", "mv", "dot", "addmm",
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "std", "var",
    "norm", "exp", "exp_", "log", "log_", "sqrt", "rsqrt", "pow", "abs", "neg", "sin", "cos", "tanh", "sigmoid",
    "relu", "relu_", "softmax", "log_softmax", "clamp", "clamp_", "clip", "where", "masked_fill", "sort",
    "topk", "gather", "scatter", "scatter_add", "index_select", "conv1d", "conv2d", "linear", "einsum", "fill_",
    "copy_", "zero_", "erf", "gelu", "silu", "floor", "ceil", "round", "sign", "reciprocal", "square", "logsumexp",
    "baddbmm", "outer", "kron", "tril", "triu", "flip", "roll", "repeat", "repeat_interleave", "cat", "stack",
}
