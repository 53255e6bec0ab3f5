"""Typed task records for the three C->CUDA task kinds, with validation.

A task is the trusted side of an evaluation: the sequential reference, how to make inputs, and how close a
candidate's outputs must be. Records are frozen dataclasses; ``task_from_dict`` validates a plain mapping (one
JSONL line, one Parquet row) and raises :class:`TaskError` naming the task and the field at fault.

Kinds
-----
``c_function``
    A sequential C function. Every argument has a role (``in``, ``out``, ``inout`` array, or ``scalar``), an
    element type, and for arrays a length expression over the task's size parameters and scalar arguments
    (``"n"``, ``"rows * cols"``). The candidate is one CUDA translation unit defining the same function with C
    linkage and host pointers; the harness writes the driver that calls it.
``c_program``
    A whole C program that reads stdin and writes stdout. Test inputs come from a trusted generator program
    (C source, compiled with gcc, called as ``gen SEED CONFIG_INDEX``); expected outputs come from running the
    reference. The candidate is a whole CUDA program.
``cuda_kernel``
    BabelTower style: the candidate supplies only the ``__global__`` kernel; the task's host wrapper launches it.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

TaskKind = Literal["c_function", "c_program", "cuda_kernel"]
ArgRole = Literal["in", "out", "inout", "scalar"]


class TaskError(ValueError):
    """A task record is malformed. The message names the task id and the field."""


# C element types the harness can generate, transport and compare: C spelling -> (numpy dtype, is_float).
C_TYPES: dict[str, tuple[str, bool]] = {
    "float": ("float32", True),
    "double": ("float64", True),
    "int": ("int32", False),
    "unsigned int": ("uint32", False),
    "long long": ("int64", False),
    "unsigned long long": ("uint64", False),
    "short": ("int16", False),
    "unsigned short": ("uint16", False),
    "char": ("int8", False),
    "signed char": ("int8", False),
    "unsigned char": ("uint8", False),
    "int64_t": ("int64", False),
    "int32_t": ("int32", False),
    "uint32_t": ("uint32", False),
    "uint64_t": ("uint64", False),
    "uint8_t": ("uint8", False),
}


def numpy_dtype(ctype: str) -> str:
    return C_TYPES[ctype][0]


def is_float_type(ctype: str) -> bool:
    return C_TYPES[ctype][1]


# ---------------------------------------------------------------------------------------------------------------
# Safe integer expressions ("n", "rows * cols", "(n + 1) / 2", "min(n, 64)") over size parameters and scalars.

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,  # C integer division for the non-negative sizes used here
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS = {"min": min, "max": max}


def _parse_expr(expr: object) -> ast.Expression:
    try:
        return ast.parse(str(expr), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse expression {expr!r}: {exc.msg}") from None
    except (MemoryError, RecursionError):  # CPython's parser on deeply nested input
        raise ValueError(f"cannot parse expression {str(expr)[:60]!r}...: nested too deeply") from None


def eval_expr(expr: str | int | float, env: Mapping[str, int | float]) -> int | float:
    """Evaluate an arithmetic expression over ``env``. Raises ``ValueError`` on anything else."""
    if isinstance(expr, (int, float)):
        return expr
    tree = _parse_expr(expr)

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ValueError(f"unknown name {node.id!r} in expression {expr!r} (known: {sorted(env)})")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(ev(a) for a in node.args))
        raise ValueError(f"unsupported syntax in expression {expr!r}")

    return ev(tree)


def expr_names(expr: str | int | float) -> set[str]:
    if isinstance(expr, (int, float)):
        return set()
    tree = _parse_expr(expr)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCS}


# ---------------------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Distribution:
    """How to draw values for one argument.

    ``kind``: ``uniform`` (floats in [low, high)), ``randint`` (integers in [low, high)), ``const`` (``value``),
    ``permutation`` (a permutation of 0..length-1, for index arrays), ``arange`` (0, 1, 2, ...),
    ``offsets`` (CSR row pointers: non-decreasing integers from 0 to ``high``, e.g. ``high: "nnz"``),
    ``sorted`` (``uniform``/``randint`` values in [low, high), sorted ascending).
    ``low``, ``high`` and ``value`` may be expressions over the size parameters (``"n"``).
    """

    kind: Literal["uniform", "randint", "const", "permutation", "arange", "offsets", "sorted"] = "uniform"
    low: float | int | str = -1.0
    high: float | int | str = 1.0
    value: float | int | str = 0


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a ``c_function`` task, in call order."""

    name: str
    role: ArgRole
    ctype: str
    length: str | int | None = None
    """Element count for arrays, an expression over size parameters and scalar arguments; None for scalars."""
    dist: Distribution = field(default_factory=Distribution)
    """Input distribution (arrays with role in/inout; scalars not fixed by the size configuration)."""

    @property
    def is_array(self) -> bool:
        return self.role != "scalar"

    @property
    def is_input(self) -> bool:
        return self.role in ("in", "inout", "scalar")

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")


@dataclass(frozen=True)
class Tolerance:
    """Per-task comparison: floats pass when ``|got - expected| <= atol + rtol * |expected|``; integers exactly."""

    rtol: float = 1e-4
    atol: float = 1e-5


@dataclass(frozen=True)
class CFunctionTask:
    id: str
    function_name: str
    reference_c: str
    """Trusted sequential C source defining ``function_name`` (and any static helpers)."""
    args: tuple[ArgSpec, ...]
    size_configs: tuple[Mapping[str, int], ...]
    """Values of the size parameters; tests cycle through these, timing uses ``timing_config``."""
    returns: str = "void"
    tolerance: Tolerance = field(default_factory=Tolerance)
    timing_config: int = -1
    """Index into ``size_configs`` of the configuration used for timing (default: the last, the largest)."""
    description: str = ""
    tags: tuple[str, ...] = ()
    kind: Literal["c_function"] = "c_function"

    @property
    def signature(self) -> str:
        params = ", ".join(c_param_decl(a) for a in self.args)
        return f"{self.returns} {self.function_name}({params})"

    @property
    def size_params(self) -> tuple[str, ...]:
        return tuple(self.size_configs[0].keys())


@dataclass(frozen=True)
class CProgramTask:
    id: str
    reference_c: str
    """Trusted C program: reads stdin, writes stdout."""
    input_generator_c: str
    """Trusted C program called as ``gen SEED CONFIG_INDEX`` that prints one test input on stdout."""
    n_configs: int = 2
    compare: Literal["exact", "numeric"] = "numeric"
    tolerance: Tolerance = field(default_factory=Tolerance)
    timing_config: int = -1
    description: str = ""
    tags: tuple[str, ...] = ()
    kind: Literal["c_program"] = "c_program"


@dataclass(frozen=True)
class CudaKernelTask:
    """BabelTower style: a C function, its reference kernel, the host wrapper that launches it, fixed tests."""

    id: str
    function_name: str
    kernel_name: str
    reference_c: str
    reference_kernel: str
    wrapper: str
    test_calls_c: tuple[str, ...]
    test_calls_cuda: tuple[str, ...]
    expected_outputs: tuple[str, ...]
    tolerance: Tolerance = field(default_factory=lambda: Tolerance(rtol=1e-4, atol=1e-5))
    description: str = ""
    tags: tuple[str, ...] = ()
    kind: Literal["cuda_kernel"] = "cuda_kernel"


Task = CFunctionTask | CProgramTask | CudaKernelTask


def c_param_decl(arg: ArgSpec) -> str:
    if arg.role == "scalar":
        return f"{arg.ctype} {arg.name}"
    const = "const " if arg.role == "in" else ""
    return f"{const}{arg.ctype}* {arg.name}"


# ---------------------------------------------------------------------------------------------------------------
# Validation from plain mappings


def _req(d: Mapping[str, Any], key: str, tid: str, typ: type | tuple[type, ...]) -> Any:
    if key not in d or d[key] is None:
        raise TaskError(f"task {tid}: missing required field {key!r}")
    val = d[key]
    if not isinstance(val, typ):
        names = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise TaskError(f"task {tid}: field {key!r} must be {names}, got {type(val).__name__}")
    return val


def _int(d: Mapping[str, Any], key: str, tid: str, default: int) -> int:
    """An optional integer field (a bool or a float with a fraction is not one)."""
    val = d.get(key, default)
    ok = isinstance(val, int) or (isinstance(val, float) and math.isfinite(val) and val == int(val))
    if isinstance(val, bool) or not ok:
        raise TaskError(f"task {tid}: field {key!r} must be an integer, got {val!r}")
    return int(val)


def _tags(d: Mapping[str, Any], tid: str) -> tuple[str, ...]:
    tags = d.get("tags") or ()
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"task {tid}: field 'tags' must be a list of strings, got {tags!r}")
    return tuple(tags)


def _tolerance(d: Mapping[str, Any] | None, tid: str, default: Tolerance) -> Tolerance:
    if d is None:
        return default
    if not isinstance(d, Mapping):
        raise TaskError(f"task {tid}: field 'tolerance' must be an object with rtol and atol")
    try:
        tol = Tolerance(rtol=float(d.get("rtol", default.rtol)), atol=float(d.get("atol", default.atol)))
    except (TypeError, ValueError, OverflowError):
        raise TaskError(f"task {tid}: tolerance values must be numbers, got {dict(d)}") from None
    if tol.rtol < 0 or tol.atol < 0 or not (math.isfinite(tol.rtol) and math.isfinite(tol.atol)):
        raise TaskError(f"task {tid}: tolerance must be finite and non-negative, got {tol}")
    return tol


DISTRIBUTION_KINDS = ("uniform", "randint", "const", "permutation", "arange", "offsets", "sorted")


def _dist(d: Any, tid: str, arg: str) -> Distribution:
    if d is None:
        return Distribution()
    if not isinstance(d, Mapping):
        raise TaskError(f"task {tid}: argument {arg!r}: 'dist' must be an object")
    kind = d.get("kind", "uniform")
    if kind not in DISTRIBUTION_KINDS:
        raise TaskError(f"task {tid}: argument {arg!r}: unknown distribution kind {kind!r}")
    return Distribution(kind=kind, low=d.get("low", -1.0), high=d.get("high", 1.0), value=d.get("value", 0))


def _c_function(d: Mapping[str, Any], tid: str) -> CFunctionTask:
    name = _req(d, "function_name", tid, str)
    ref = _req(d, "reference_c", tid, str)
    raw_args = _req(d, "args", tid, (list, tuple))
    if not raw_args:
        raise TaskError(f"task {tid}: 'args' is empty")
    args: list[ArgSpec] = []
    for i, a in enumerate(raw_args):
        if not isinstance(a, Mapping):
            raise TaskError(f"task {tid}: args[{i}] must be an object")
        an = a.get("name")
        if not isinstance(an, str) or not an.isidentifier():
            raise TaskError(f"task {tid}: args[{i}] needs a valid C identifier as 'name', got {an!r}")
        role = a.get("role")
        if role not in ("in", "out", "inout", "scalar"):
            raise TaskError(f"task {tid}: argument {an!r}: role must be in, out, inout or scalar, got {role!r}")
        ctype = a.get("ctype")
        if not isinstance(ctype, str) or ctype not in C_TYPES:
            raise TaskError(f"task {tid}: argument {an!r}: unsupported ctype {ctype!r} (supported: {sorted(C_TYPES)})")
        length = a.get("length")
        if role != "scalar" and length is None:
            raise TaskError(f"task {tid}: array argument {an!r} needs a 'length' expression")
        args.append(ArgSpec(name=an, role=role, ctype=ctype, length=length, dist=_dist(a.get("dist"), tid, an)))
    if len({a.name for a in args}) != len(args):
        raise TaskError(f"task {tid}: argument names repeat")
    if not any(a.is_output for a in args) and d.get("returns", "void") == "void":
        raise TaskError(f"task {tid}: the function has no output array and returns void: nothing to check")
    configs = _req(d, "size_configs", tid, (list, tuple))
    if len(configs) < 2:
        raise TaskError(f"task {tid}: needs >= 2 size configurations, got {len(configs)}")
    keys = None
    for i, c in enumerate(configs):
        if not isinstance(c, Mapping) or not c or not all(isinstance(v, int) and v >= 0 for v in c.values()):
            raise TaskError(f"task {tid}: size_configs[{i}] must map parameter names to non-negative integers")
        if keys is None:
            keys = set(c)
        elif set(c) != keys:
            raise TaskError(f"task {tid}: size_configs[{i}] has parameters {sorted(c)}, expected {sorted(keys)}")
    scalar_names = {a.name for a in args if a.role == "scalar"}
    known = set(keys or ()) | scalar_names
    for a in args:
        exprs = [a.length] if a.is_array else []
        exprs += [a.dist.low, a.dist.high, a.dist.value]
        for e in exprs:
            try:
                unknown = expr_names(e) - known
            except ValueError as exc:
                raise TaskError(f"task {tid}: argument {a.name!r}: {exc}") from None
            if unknown:
                raise TaskError(f"task {tid}: argument {a.name!r}: expression {e!r} uses unknown names {sorted(unknown)}")
    returns = d.get("returns", "void")
    if returns != "void" and (not isinstance(returns, str) or returns not in C_TYPES):
        raise TaskError(f"task {tid}: unsupported return type {returns!r}")
    floats = [a for a in args if a.is_output and is_float_type(a.ctype)]
    default_tol = Tolerance(rtol=1e-9, atol=1e-12) if floats and all(a.ctype == "double" for a in floats) else Tolerance()
    timing_config = _int(d, "timing_config", tid, -1)
    if not -len(configs) <= timing_config < len(configs):
        raise TaskError(f"task {tid}: timing_config {timing_config} out of range for {len(configs)} configurations")
    return CFunctionTask(
        id=tid,
        function_name=name,
        reference_c=ref,
        args=tuple(args),
        size_configs=tuple(dict(c) for c in configs),
        returns=returns,
        tolerance=_tolerance(d.get("tolerance"), tid, default_tol),
        timing_config=timing_config,
        description=str(d.get("description", "")),
        tags=_tags(d, tid),
    )


def _c_program(d: Mapping[str, Any], tid: str) -> CProgramTask:
    compare = d.get("compare", "numeric")
    if compare not in ("exact", "numeric"):
        raise TaskError(f"task {tid}: compare must be 'exact' or 'numeric', got {compare!r}")
    n_configs = _int(d, "n_configs", tid, 2)
    if n_configs < 2:
        raise TaskError(f"task {tid}: needs n_configs >= 2 input size configurations")
    return CProgramTask(
        id=tid,
        reference_c=_req(d, "reference_c", tid, str),
        input_generator_c=_req(d, "input_generator_c", tid, str),
        n_configs=n_configs,
        compare=compare,
        tolerance=_tolerance(d.get("tolerance"), tid, Tolerance()),
        timing_config=_int(d, "timing_config", tid, -1),
        description=str(d.get("description", "")),
        tags=_tags(d, tid),
    )


def _cuda_kernel(d: Mapping[str, Any], tid: str) -> CudaKernelTask:
    calls_c = tuple(_req(d, "test_calls_c", tid, (list, tuple)))
    calls_cuda = tuple(_req(d, "test_calls_cuda", tid, (list, tuple)))
    expected = tuple(_req(d, "expected_outputs", tid, (list, tuple)))
    if not (len(calls_c) == len(calls_cuda) == len(expected)) or not expected:
        raise TaskError(f"task {tid}: test_calls_c, test_calls_cuda and expected_outputs must be non-empty and of equal length")
    return CudaKernelTask(
        id=tid,
        function_name=_req(d, "function_name", tid, str),
        kernel_name=_req(d, "kernel_name", tid, str),
        reference_c=_req(d, "reference_c", tid, str),
        reference_kernel=_req(d, "reference_kernel", tid, str),
        wrapper=_req(d, "wrapper", tid, str),
        test_calls_c=calls_c,
        test_calls_cuda=calls_cuda,
        expected_outputs=expected,
        tolerance=_tolerance(d.get("tolerance"), tid, Tolerance(rtol=1e-4, atol=1e-5)),
        description=str(d.get("description", "")),
        tags=_tags(d, tid),
    )


def task_from_dict(d: Mapping[str, Any]) -> Task:
    """Validate one task record. Raises :class:`TaskError` with the task id and the field at fault."""
    if not isinstance(d, Mapping):
        raise TaskError(f"a task record must be an object, got {type(d).__name__}")
    tid = d.get("id")
    if not isinstance(tid, str) or not tid:
        raise TaskError("task record without a string 'id'")
    kind = d.get("kind")
    if kind == "c_function":
        return _c_function(d, tid)
    if kind == "c_program":
        return _c_program(d, tid)
    if kind == "cuda_kernel":
        return _cuda_kernel(d, tid)
    if kind == "pytorch":
        from cudaperf.tasks.pytorch import pytorch_task_from_dict

        return pytorch_task_from_dict(dict(d))  # type: ignore[return-value]
    raise TaskError(f"task {tid}: unknown kind {kind!r} (expected c_function, c_program, cuda_kernel or pytorch)")


def task_to_dict(task: Task) -> dict[str, Any]:
    """The inverse of :func:`task_from_dict` (JSON-ready)."""
    from dataclasses import asdict

    return asdict(task)


def array_lengths(task: CFunctionTask, env: Mapping[str, int | float]) -> dict[str, int]:
    out = {}
    for a in task.args:
        if a.is_array:
            n = int(eval_expr(a.length, env))  # type: ignore[arg-type]
            if n < 0:
                raise TaskError(f"task {task.id}: argument {a.name!r} length {a.length!r} evaluates to {n}")
            out[a.name] = n
    return out
