"""CUDA-sensitive code: which characters of a CUDA answer are tied to execution constraints, and which tokens.

CuSeT (:mod:`cudaperf.train.cuset`) needs to know, per answer token, whether it is *CUDA-sensitive*. The paper's
abstract defines CUDA sensitivity only as "code tokens or regions tightly coupled with execution constraints"; the
classes below are this project's reading of that, read from the tree-sitter CUDA parse of the answer
(:func:`cudaperf.features._reader.parser`, the parser the structural features use):

=========  ==========================================================================================================
``index``  the built-in vectors (``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` and ``warpSize``) wherever they
           appear; the declarations and assignments of *index variables* (a local whose value uses a built-in or
           another index variable, followed through the function; a value read from memory, ``a[i]``, is data and
           makes no index variable); updates of index variables (``i += stride``, ``s >>= 1``, ``i++``); and the
           ``[...]`` of subscripts whose index uses one
``bound``  comparisons in ``if`` / ``for`` / ``while`` / ``do`` / ``?:`` conditions that use a built-in or an index
           variable (``if (i < n)``, ``for (...; t < n; ...)``, ``tid < s``)
``launch`` the launch configuration ``<<<...>>>``, ``dim3`` declarations, and the declarations and assignments of the
           locals that the configuration names (``int blocks = (n + 255) / 256;``)
``shared`` ``__shared__`` declarations (static and ``extern``)
``sync``   barrier and warp-synchronous calls: ``__syncthreads*``, ``__syncwarp``, ``__threadfence*``, the
           ``__shfl*_sync`` / ``__ballot_sync`` / ``__any_sync`` / ``__all_sync`` / ``__match_*_sync`` family,
           ``__activemask``
``atomic`` calls of ``atomic*`` functions (``atomicAdd``, ``atomicCAS``, ``atomicMax_block``, ...)
``memory`` device memory management and transfers: ``cudaMalloc*``, ``cudaMemcpy*``, ``cudaMemset*``,
           ``cudaFree*``, ``cudaHostAlloc``
=========  ==========================================================================================================

A span covers the whole construct (the whole call with its arguments, the whole declaration, the whole
comparison). A token is sensitive when its character range (the fast tokenizer's ``offset_mapping``) overlaps a
span, so a token that straddles the edge of a construct counts. Nothing here raises on broken code: tree-sitter
parses what it can, and an unparsable answer has fewer spans.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

SENSITIVE_CLASSES = ("index", "bound", "launch", "shared", "sync", "atomic", "memory")
"""Every class, in the order the module docstring lists them; the default set."""

BUILTIN_VECTORS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
BUILTIN_SCALARS = frozenset({"warpSize"})
COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
SYNC_PREFIXES = ("__syncthreads", "__syncwarp", "__threadfence", "__shfl", "__ballot_sync", "__any_sync",
                 "__all_sync", "__match_", "__activemask", "__reduce_")
MEMORY_PREFIXES = ("cudaMalloc", "cudaMemcpy", "cudaMemset", "cudaFree", "cudaHostAlloc")
_CONDITION_PARENTS = frozenset({"if_statement", "while_statement", "do_statement", "for_statement",
                                "conditional_expression"})
_MAX_DEPTH = 400

Node = Any  # tree_sitter.Node


@dataclass(frozen=True)
class SensitiveSpan:
    start_char: int
    """First character of the construct in the code."""
    end_char: int
    """One past its last character."""
    cls: str
    """Its class (one of :data:`SENSITIVE_CLASSES`)."""


# --------------------------------------------------------------------------------------------------- the tree

def _walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself first), in document order, without recursion."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _text(node: Node) -> str:
    return node.text.decode("utf-8", "replace")


def _call_name(call: Node) -> str | None:
    fn = call.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "identifier":
        return _text(fn)
    if fn.type in ("qualified_identifier", "template_function"):  # ::atomicAdd, atomicAdd<float>
        name = fn.child_by_field_name("name") or fn.children[-1]
        return _text(name).rsplit("::", 1)[-1]
    return None


def _declared_name(declarator: Node | None) -> str | None:
    """The identifier a declarator declares (through pointers, references, arrays and parentheses)."""
    depth = 0
    while declarator is not None and depth < 20:
        if declarator.type == "identifier":
            return _text(declarator)
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in declarator.children if c.type.endswith("declarator") or c.type == "identifier"),
                         None)
        declarator = inner
        depth += 1
    return None


def _uses_index(node: Node, index_vars: set[str]) -> bool:
    """Whether ``node`` uses a built-in or an index variable outside any subscript (a value read from memory is
    data, not an index)."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = n.type
        if t == "subscript_expression":
            continue
        if t == "identifier":
            name = _text(n)
            if name in BUILTIN_VECTORS or name in BUILTIN_SCALARS or name in index_vars:
                return True
        stack.extend(n.children)
    return False


def _functions(root: Node) -> list[Node]:
    return [n for n in _walk(root) if n.type == "function_definition"]


def _assignment(n: Node) -> tuple[str | None, Node | None, str] | None:
    """(the local it sets, its value, the operator) for an init_declarator or an assignment, else None."""
    if n.type == "init_declarator":
        return _declared_name(n.child_by_field_name("declarator")), n.child_by_field_name("value"), "="
    if n.type == "assignment_expression":
        left, op = n.child_by_field_name("left"), n.child_by_field_name("operator")
        name = _text(left) if left is not None and left.type == "identifier" else None
        return name, n.child_by_field_name("right"), (op.type if op is not None else "=")
    return None


def _names_in(node: Node) -> set[str]:
    return {_text(n) for n in _walk(node) if n.type == "identifier"}


# --------------------------------------------------------------------------------------------------- the spans

def _byte_to_char(code: str, data: bytes):
    if len(data) == len(code):
        return lambda b: b
    starts = []  # byte offset of each character
    pos = 0
    for ch in code:
        starts.append(pos)
        pos += len(ch.encode("utf-8", "replace"))
    starts.append(pos)
    return lambda b: bisect.bisect_left(starts, b)


def cuda_sensitive_spans(code: str, classes: Iterable[str] = SENSITIVE_CLASSES) -> tuple[SensitiveSpan, ...]:
    """The CUDA-sensitive constructs of ``code`` (character offsets), sorted by start; see the module docstring.
    ValueError for an unknown class."""
    from cudaperf.features._reader import parser

    wanted = frozenset(classes)
    unknown = sorted(wanted - set(SENSITIVE_CLASSES))
    if unknown:
        raise ValueError(f"unknown CUDA-sensitive class(es) {unknown}; the classes are {', '.join(SENSITIVE_CLASSES)}")
    data = code.encode("utf-8", "replace")
    root = parser().parse(data).root_node
    to_char = _byte_to_char(code, data)
    out: list[SensitiveSpan] = []

    def add(node: Node, cls: str) -> None:
        if cls in wanted and node.end_byte > node.start_byte:
            out.append(SensitiveSpan(to_char(node.start_byte), to_char(node.end_byte), cls))

    for n in _walk(root):  # file-wide constructs
        t = n.type
        if t == "field_expression":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier" and _text(arg) in BUILTIN_VECTORS:
                add(n, "index")
        elif t == "identifier" and (_text(n) in BUILTIN_SCALARS or (_text(n) in BUILTIN_VECTORS
                                                                     and n.parent is not None
                                                                     and n.parent.type != "field_expression")):
            add(n, "index")
        elif t == "kernel_call_syntax":
            add(n, "launch")
        elif t == "declaration":
            quals = {_text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")}
            if "__shared__" in quals:
                add(n, "shared")
            typ = n.child_by_field_name("type")
            if typ is not None and _text(typ) == "dim3":
                add(n, "launch")
        elif t == "call_expression":
            name = _call_name(n) or ""
            if name.startswith(SYNC_PREFIXES):
                add(n, "sync")
            elif name.startswith("atomic"):
                add(n, "atomic")
            elif name.startswith(MEMORY_PREFIXES):
                add(n, "memory")

    for fn in _functions(root):  # index variables, bounds and launch variables are per function
        launch_vars: set[str] = set()
        for n in _walk(fn):
            if n.type == "kernel_call_syntax":
                launch_vars |= _names_in(n)
        # Index variables in document order (flow-sensitive, loops not iterated): a declaration or plain
        # assignment with an index value makes one, with any other value unmakes it (a reused name such as a
        # second `for (int k = 0; ...)` is a new variable); a compound assignment keeps it.
        index_vars: set[str] = set()
        for n in _walk(fn):
            t = n.type
            setting = _assignment(n)
            if setting is not None:
                name, value, op = setting
                if name is None:
                    continue
                uses = value is not None and _uses_index(value, index_vars)
                if uses or (op != "=" and name in index_vars):
                    index_vars.add(name)
                    add(n, "index")
                elif op == "=":
                    index_vars.discard(name)
                if name in launch_vars:
                    add(n, "launch")
            elif t == "update_expression":
                arg = n.child_by_field_name("argument")
                if arg is not None and arg.type == "identifier" and _text(arg) in index_vars:
                    add(n, "index")
            elif t == "subscript_expression":
                idx = n.child_by_field_name("indices") or next(
                    (c for c in n.children if c.type == "subscript_argument_list"), None)
                if idx is not None and _uses_index(idx, index_vars):
                    add(idx, "index")
            elif t == "binary_expression":
                op = n.child_by_field_name("operator")
                if op is not None and op.type in COMPARISONS and _in_condition(n) and _uses_index(n, index_vars):
                    add(n, "bound")
    return tuple(sorted(set(out), key=lambda s: (s.start_char, s.end_char, s.cls)))


def _in_condition(node: Node) -> bool:
    """Whether ``node`` lies inside the condition of an if / for / while / do / ?: (not in its body)."""
    child, parent, depth = node, node.parent, 0
    while parent is not None and depth < _MAX_DEPTH:
        if parent.type in _CONDITION_PARENTS:
            cond = parent.child_by_field_name("condition")
            return cond is not None and cond.start_byte <= child.start_byte and child.end_byte <= cond.end_byte
        if parent.type in ("compound_statement", "function_definition", "translation_unit"):
            return False
        child, parent, depth = parent, parent.parent, depth + 1
    return False


def merge_spans(spans: Iterable[SensitiveSpan | tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint ``(start, end)`` character ranges covering the spans (overlapping or touching ones joined)."""
    ranges = sorted((s.start_char, s.end_char) if isinstance(s, SensitiveSpan) else (int(s[0]), int(s[1]))
                    for s in spans)
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def token_sensitivity(offsets: Sequence[tuple[int, int]], ranges: Sequence[tuple[int, int]],
                      shift_chars: int = 0) -> list[int]:
    """1 for each token whose character range overlaps one of ``ranges`` (sorted, disjoint, as
    :func:`merge_spans` gives, in the code's coordinates), else 0. ``offsets`` are the tokenizer's
    ``offset_mapping`` in a text where the code starts at ``shift_chars``; empty ranges (special tokens) are 0."""
    starts = [a + shift_chars for a, _ in ranges]
    ends = [b + shift_chars for _, b in ranges]
    out = []
    for s, e in offsets:
        if e <= s:
            out.append(0)
            continue
        k = bisect.bisect_left(starts, e) - 1  # the last range starting before the token ends
        out.append(1 if k >= 0 and ends[k] > s else 0)
    return out
