"""A variant's kernel launch extents, evaluated on the CPU at a task's sizes.

CUDA caps a grid at 2^31 - 1 blocks in x and 65535 in y and z, and a block at 1024 threads; a launch past a cap
fails (the kernel does not run and the outputs stay as they were). Hidden tests are small, so such a launch shows
only at the timing size, on a GPU: ``bf16_layer_stats``' ``grid2d_atomics`` put the rows on ``gridDim.y`` and
returned zeros for the 261,301 rows of its timing size (H200, 2026-12-03). :func:`launch_problems` finds that on
the CPU. It reads each launch ``KERNEL<<<GRID, BLOCK, ...>>>`` of the host function, ``GRID`` and ``BLOCK``
written as ``dim3(...)``, as a ``dim3 NAME(...)`` declared before, or as one expression (the x extent), and
evaluates the extents from the task's scalars at one size configuration, the code's ``#define`` constants and
``typedef`` types, and the host function's statements read in order: declarations (``int OH = H - K + 1;``,
``size_t n = ..., cb = ...;``), assignments, ``if (C) x = E;`` clamps, and the first clause of a ``for`` (a launch
inside a loop is read in the loop's first iteration: for the families' chunk loops, the largest chunk).

It reads the families' own host code; it is not a C interpreter. Casts are dropped, ``/`` is floor division (the
operands are non-negative), ``a ? b : c``, ``&&``, ``||`` and ``!`` are understood, and a name changed by a
statement it does not read (``while (cap < n) cap <<= 1;``, ``++k`` outside a ``for`` header, a value read from an
array) is unknown from there on. A y or z extent it cannot evaluate is reported, so that every 2-D and 3-D grid is
either checked or looked at; an x extent or a block it cannot evaluate is left alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Mapping

from cudaperf.tasks.schema import eval_expr

GRID_LIMITS = {"x": 2**31 - 1, "y": 65535, "z": 65535}
BLOCK_LIMITS = {"x": 1024, "y": 1024, "z": 64}
MAX_BLOCK_THREADS = 1024

_SIZEOF = {"char": 1, "unsigned char": 1, "signed char": 1, "short": 2, "unsigned short": 2, "int": 4,
           "unsigned int": 4, "unsigned": 4, "float": 4, "long long": 8, "unsigned long long": 8, "long": 8,
           "unsigned long": 8, "double": 8, "size_t": 8, "int2": 8, "int4": 16, "float2": 8, "float4": 16,
           "double2": 16, "uint2": 8, "uint4": 16}
_SCALAR_TYPES = (r"unsigned\s+long\s+long|unsigned\s+long|unsigned\s+int|unsigned\s+short|unsigned\s+char|"
                 r"long\s+long|unsigned|size_t|int|long|short")
_CAST = re.compile(rf"\(\s*(?:const\s+)?(?:{_SCALAR_TYPES}|char|float|double)\s*\)")
_DECL = re.compile(rf"^(?:const\s+)?(?:{_SCALAR_TYPES})\s+(?!\*)(.+)$", re.S)
_ASSIGN = re.compile(r"^(\w+)\s*((?:\+|-|\*|/|%|&|\||\^|<<|>>)?=)(?!=)\s*(.+)$", re.S)
_ANY_ASSIGN = re.compile(r"\b(\w+)\s*(?:\+|-|\*|/|%|&|\||\^|<<|>>)?=(?!=)")
_INCDEC = re.compile(r"(?:\+\+|--)\s*(\w+)|(\w+)\s*(?:\+\+|--)")
_LAUNCH = re.compile(r"(\w+)\s*<<<")
_NAME_CALL = re.compile(r"^(\w+)\s*\((.*)\)$", re.S)
_SIZEOF_RE = re.compile(r"\bsizeof\s*\(\s*([\w\s]+?)\s*\)")
_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")
_FLOAT_SUFFIX = re.compile(r"\b(\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)[fF]\b")
_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "//", "%=": "%", "<<=": "<<", ">>=": ">>", "&=": "&",
             "|=": "|", "^=": "^"}


class Unknown(Exception):
    """A value the reader cannot work out (with the reason)."""


def _strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    return re.sub(r"//[^\n]*", " ", code)


def _split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside parentheses, brackets and braces."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out]


def _closing(text: str, open_at: int) -> int:
    """The index of the parenthesis closing the one at ``open_at`` (-1 when it does not close)."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def host_code(code: str) -> str:
    """The host function of a variant: from its ``extern "C"`` on (the families write it last)."""
    i = code.find('extern "C"')
    return code[i:] if i >= 0 else code


def _ternary(e: str) -> str:
    """C's ``a ? b : c`` (at any depth) as Python's ``(b) if (a) else (c)``."""
    depth, q = 0, -1
    for i, ch in enumerate(e):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "?" and depth == 0:
            q = i
            break
    if q < 0:
        out, i = [], 0
        while i < len(e):
            j = _closing(e, i) if e[i] == "(" else -1
            if j > 0:
                out.append("(" + _ternary(e[i + 1:j]) + ")")
                i = j + 1
            else:
                out.append(e[i])
                i += 1
        return "".join(out)
    depth, nest = 0, 0
    for j in range(q + 1, len(e)):
        ch = e[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == "?":
            nest += 1
        elif depth == 0 and ch == ":":
            if nest == 0:
                return f"(({_ternary(e[q + 1:j])}) if ({_ternary(e[:q])}) else ({_ternary(e[j + 1:])}))"
            nest -= 1
    raise Unknown(f"a ? without its : in {e!r}")


def _compile(expr: str, sizes: Mapping[str, int]):
    """A C expression as compiled Python and the names it reads, or :class:`Unknown`."""
    def sizeof(m: re.Match) -> str:
        t = " ".join(m.group(1).split())
        if t not in sizes:
            raise Unknown(f"sizeof({t})")
        return str(sizes[t])

    try:
        e = _SIZEOF_RE.sub(sizeof, expr)
        e = _CAST.sub(" ", e)
        e = _INT_SUFFIX.sub(r"\1", e)
        e = _FLOAT_SUFFIX.sub(r"\1", e)
        e = e.replace("&&", " and ").replace("||", " or ")
        e = re.sub(r"!(?!=)", " not ", e).replace("/", "//")
        tree = ast.parse(_ternary(" ".join(e.split())), mode="eval")
    except Unknown as exc:
        return exc
    except SyntaxError:
        return Unknown(f"cannot read {expr!r}")
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in ("min", "max")):
            return Unknown(f"a call in {expr!r}")
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.Starred)):
            return Unknown(f"cannot read {expr!r}")
        if isinstance(node, ast.Name) and node.id not in ("min", "max") and node.id not in names:
            names.append(node.id)
    return compile(tree, "<launch extent>", "eval"), tuple(names)


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid_text: tuple[str, str, str]
    grid: tuple
    """x, y, z: numbers, or :class:`Unknown` with the reason."""
    block: tuple


class Program:
    """A variant's host function read once into steps; :meth:`launches` replays them at given scalar values."""

    def __init__(self, code: str):
        full = _strip_comments(code)
        defines: dict[str, str] = {}
        for m in re.finditer(r"^[ \t]*#define[ \t]+(\w+)[ \t]+([^\n]+)$", full, flags=re.M):
            defines.setdefault(m.group(1), m.group(2).strip())
        self.sizes = dict(_SIZEOF)
        for m in re.finditer(r"\btypedef\s+([\w\s]+?)\s+(\w+)\s*;", full):
            base = " ".join(m.group(1).split())
            if base in _SIZEOF:
                self.sizes[m.group(2)] = _SIZEOF[base]
        self._compiled: dict[str, object] = {}
        self.defines = {k: self._c(v) for k, v in defines.items()}
        self.steps: list[tuple] = []
        self._dim3_text: dict[str, list[str]] = {}
        host = host_code(full)
        self._read(host[host.find("{") + 1:])

    def _c(self, expr: str):
        if expr not in self._compiled:
            self._compiled[expr] = _compile(expr, self.sizes)
        return self._compiled[expr]

    def _read(self, body: str) -> None:
        for_clauses = 0
        for piece in body.split(";"):
            if for_clauses:  # the rest of a for header: its condition, then `step) body...`
                for_clauses -= 1
                if for_clauses == 1:
                    continue
                depth, close = 0, -1
                for i, ch in enumerate(piece):
                    if ch == "(":
                        depth += 1
                    elif ch == ")":
                        if depth == 0:
                            close = i
                            break
                        depth -= 1
                piece = piece[close + 1:]
            for m in _LAUNCH.finditer(piece):
                end = piece.find(">>>", m.end())
                args = _split_top(piece[m.end():end])
                if len(args) >= 2:
                    gm = re.match(r"dim3\s*\((.*)\)$", args[0], flags=re.S)
                    text = _split_top(gm.group(1)) if gm else self._dim3_text.get(args[0], [args[0]])
                    text = (text + ["1", "1"])[:3]
                    self.steps.append(("launch", m.group(1), tuple(text), self._dim_arg(args[0]),
                                       self._dim_arg(args[1])))
            cut = max(piece.rfind("{"), piece.rfind("}"))
            stmt = piece[cut + 1:].strip()
            if not stmt or "<<<" in stmt:
                continue
            if re.match(r"^for\s*\(", stmt):
                for_clauses = 2
            self._statement(stmt)

    def _dim_arg(self, arg: str):
        m = re.match(r"dim3\s*\(", arg)
        if m and _closing(arg, m.end() - 1) == len(arg) - 1:
            return ("parts", [self._c(x) for x in _split_top(arg[m.end():-1])])
        if re.fullmatch(r"\w+", arg):
            return ("name", arg)
        return ("parts", [self._c(arg)])

    def _statement(self, stmt: str) -> None:
        m = re.match(r"^for\s*\((.*)$", stmt, flags=re.S)
        if m:
            stmt = m.group(1).strip()
        m = re.match(r"^if\s*\(", stmt)
        if m:
            end = _closing(stmt, m.end() - 1)
            if end > 0:
                cond, rest = stmt[m.end():end], stmt[end + 1:].strip().lstrip("{").strip()
                am = _ASSIGN.match(rest)
                if am:
                    self.steps.append(("if", self._c(cond), am.group(1), am.group(2), self._c(am.group(3))))
                    return
                stmt = rest
        d = _DECL.match(stmt)
        if d:
            for part in _split_top(d.group(1)):
                pm = re.match(r"^(\w+)\s*=\s*(.+)$", part, flags=re.S)
                if pm:
                    self.steps.append(("set", pm.group(1), "=", self._c(pm.group(2))))
            return
        m = re.match(r"^dim3\s+(.+)$", stmt, flags=re.S)
        if m:
            for part in _split_top(m.group(1)):
                pm = _NAME_CALL.match(part)
                if pm:
                    self._dim3_text[pm.group(1)] = _split_top(pm.group(2))
                    self.steps.append(("dim3", pm.group(1), [self._c(x) for x in _split_top(pm.group(2))]))
            return
        am = _ASSIGN.match(stmt)
        if am:
            self.steps.append(("set", am.group(1), am.group(2), self._c(am.group(3))))
            return
        changed = [m.group(1) for m in _ANY_ASSIGN.finditer(stmt)]
        changed += [m.group(1) or m.group(2) for m in _INCDEC.finditer(stmt)]
        if changed:
            self.steps.append(("unknown", changed, stmt))

    # -- replay ---------------------------------------------------------------------------------------------------

    def launches(self, scalars: Mapping[str, float]) -> list[Launch]:
        env: dict[str, object] = dict(scalars)
        stack: list[str] = []

        def value(name: str):
            if name in env:
                v = env[name]
                if isinstance(v, Unknown):
                    raise v
                if isinstance(v, tuple):
                    raise Unknown(f"{name} is a dim3")
                return v
            if name in self.defines and name not in stack:
                stack.append(name)
                try:
                    return run(self.defines[name])
                finally:
                    stack.pop()
            raise Unknown(f"{name} is not a scalar of the task, a #define or a local definition read here")

        def run(compiled):
            if isinstance(compiled, Unknown):
                raise compiled
            code, names = compiled
            local = {n: value(n) for n in names}
            try:
                v = eval(code, {"__builtins__": {}, "min": min, "max": max}, local)  # noqa: S307
            except (ArithmeticError, TypeError, ValueError) as exc:
                raise Unknown(str(exc)) from exc
            if isinstance(v, bool):
                v = int(v)
            if not isinstance(v, (int, float)):
                raise Unknown("not a number")
            return v

        def attempt(compiled):
            try:
                return run(compiled)
            except Unknown as exc:
                return exc

        def assign(name: str, op: str, compiled) -> None:
            rhs = attempt(compiled)
            if op == "=" or isinstance(rhs, Unknown):
                env[name] = rhs
                return
            old = env.get(name)
            if not isinstance(old, (int, float)):
                env[name] = Unknown(f"{name} is updated ({op}) before it is known")
                return
            env[name] = eval(f"({old!r}) {_COMPOUND[op]} ({rhs!r})", {"__builtins__": {}})  # noqa: S307

        def dims(arg) -> tuple:
            kind, what = arg
            if kind == "name":
                v = env.get(what)
                parts = list(v[1]) if isinstance(v, tuple) else [attempt(self._c(what))]
            else:
                parts = [attempt(c) for c in what]
            return tuple((parts + [1, 1])[:3])

        out: list[Launch] = []
        for step in self.steps:
            kind = step[0]
            if kind == "set":
                assign(step[1], step[2], step[3])
            elif kind == "if":
                c = attempt(step[1])
                if isinstance(c, Unknown):
                    env[step[2]] = Unknown(f"{step[2]} is set under a condition not read here ({c})")
                elif c:
                    assign(step[2], step[3], step[4])
            elif kind == "dim3":
                env[step[1]] = ("dim3", [attempt(c) for c in step[2]])
            elif kind == "unknown":
                for name in step[1]:
                    env[name] = Unknown(f"{name} is changed by `{' '.join(step[2].split())[:80]}`")
            else:
                out.append(Launch(step[1], step[2], dims(step[3]), dims(step[4])))
        return out


def launches(code: str, scalars: Mapping[str, float]) -> list[Launch]:
    """Every launch of ``code``'s host function, its extents evaluated at these scalar values."""
    return Program(code).launches(scalars)


def launch_problems(code: str, scalars: Mapping[str, float] | list[Mapping[str, float]],
                    unknown: bool = True) -> list[str]:
    """What is wrong with ``code``'s launches at these scalar values (or at each of several sets of them): an
    extent past CUDA's limits, and (``unknown``) a y or z extent this reader cannot evaluate."""
    prog = Program(code)
    problems: list[str] = []
    for sc in ([scalars] if isinstance(scalars, Mapping) else scalars):
        for ln in prog.launches(sc):
            for axis, text, v in zip("xyz", ln.grid_text, ln.grid):
                if isinstance(v, Unknown):
                    if axis != "x" and unknown:
                        problems.append(f"{ln.kernel}: gridDim.{axis} = {text} cannot be evaluated here ({v})")
                elif int(v) > GRID_LIMITS[axis]:
                    problems.append(f"{ln.kernel}: gridDim.{axis} = {text} = {int(v)} exceeds {GRID_LIMITS[axis]} "
                                    f"at {dict(sc)}")
            if any(isinstance(v, Unknown) for v in ln.block):
                continue
            b = [int(v) for v in ln.block]
            for axis, v in zip("xyz", b):
                if v > BLOCK_LIMITS[axis]:
                    problems.append(f"{ln.kernel}: blockDim.{axis} = {v} exceeds {BLOCK_LIMITS[axis]}")
            if b[0] * b[1] * b[2] > MAX_BLOCK_THREADS:
                problems.append(f"{ln.kernel}: {b[0] * b[1] * b[2]} threads per block exceed {MAX_BLOCK_THREADS}")
    return list(dict.fromkeys(problems))


def task_scalars(task, config: Mapping[str, int]) -> dict[str, float]:
    """A task's scalar arguments at one size configuration: the configuration's value, else the largest value of
    the scalar's distribution (launch extents grow with the sizes)."""
    env: dict[str, float] = dict(config)
    for a in task.args:
        if a.role != "scalar" or a.name in env:
            continue
        d = a.dist
        if d.kind == "const":
            env[a.name] = eval_expr(d.value, env)
        elif d.kind in ("randint", "uniform"):
            hi = eval_expr(d.high, env)
            env[a.name] = hi - 1 if d.kind == "randint" else hi
    return env


def task_launch_problems(task, code: str, unknown: bool = True) -> list[str]:
    """:func:`launch_problems` of a variant at every size configuration of its task."""
    return launch_problems(code, [task_scalars(task, c) for c in task.size_configs], unknown)
