"""Read the facts behind the paper features from a CUDA syntax tree (tree-sitter, CUDA grammar).

:func:`read_source` parses a source once and walks every function body in source order, keeping a symbolic value
(:mod:`cudaperf.features._symbolic`) for each local variable. It returns :class:`SourceFacts`: per kernel the
global array accesses with their ``threadIdx.x`` stride, operation / atomic / barrier counts and divergent ``if``
statements; for the whole file the kernel launches with their block size, and the ``cudaMemcpy*`` calls.

Formulas (what the facts are turned into) live in :mod:`cudaperf.features.paper`; nothing here raises on odd
input: what cannot be followed becomes an unknown value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from cudaperf.features._symbolic import (
    THREAD_X,
    Dim3,
    Form,
    LocalArray,
    Pointer,
    Value,
    as_form,
    join_values,
)

Node = Any  # tree_sitter.Node (kept loose so this module imports without tree-sitter installed)

BUILTIN_VECTORS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
BUILTIN_CONSTANTS = {"warpSize": 32}
POPC_CALLS = frozenset({"__popc", "__popcll"})
SYNC_CALLS = frozenset({"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp"})
PINNED_CALLS = frozenset({"cudaMallocHost", "cudaHostAlloc", "cudaHostRegister"})
CAST_CALLS = frozenset({"reinterpret_cast", "static_cast", "const_cast"})
ARITH_OPS = frozenset({"+", "-", "*", "/"})
ARITH_ASSIGN = frozenset({"+=", "-=", "*=", "/="})
_THREAD_ALL = frozenset({"threadIdx.x", "threadIdx.y", "threadIdx.z"})
_MAX_EVAL_DEPTH = 150
_MAX_WALK_DEPTH = 200

# Nodes whose children may hold functions or file-scope declarations (descended when looking for them).
_CONTAINERS = frozenset({
    "translation_unit", "template_declaration", "linkage_specification", "declaration_list", "namespace_definition",
    "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef", "ERROR",
    "class_specifier", "struct_specifier", "field_declaration_list",
})
_STATEMENTS = frozenset({
    "compound_statement", "expression_statement", "declaration", "if_statement", "for_statement", "while_statement",
    "do_statement", "switch_statement", "case_statement", "return_statement", "labeled_statement",
    "for_range_loop", "break_statement", "continue_statement", "goto_statement", "preproc_if", "preproc_ifdef",
    "preproc_else", "preproc_elif", "preproc_def", "preproc_call", "preproc_function_def", "ERROR",
    "attributed_statement", "try_statement", "type_definition", "comment", "else_clause",
})


# ---------------------------------------------------------------------------------------------------- facts
@dataclass
class GlobalAccess:
    """One subscript on a global pointer. ``stride`` = d(index)/d(threadIdx.x), None when unresolved."""

    array: str
    stride: float | None
    line: int
    expr: str


@dataclass
class KernelFacts:
    """What one ``__global__`` function's body contains (its own body only, not the functions it calls)."""

    name: str
    line: int
    accesses: list[GlobalAccess] = field(default_factory=list)
    subscripts: int = 0
    ops: int = 0
    popc: int = 0
    ifs: int = 0
    divergent_ifs: int = 0
    atomics: int = 0
    syncs: int = 0


@dataclass
class LaunchFacts:
    """One ``kernel<<<grid, block, ...>>>`` launch; ``tpb`` is None with a ``reason`` when unresolved."""

    kernel: str
    line: int
    block: str
    tpb: float | None
    reason: str | None


@dataclass
class SourceFacts:
    """Everything :func:`read_source` found in one source."""

    kernels: list[KernelFacts] = field(default_factory=list)
    launches: list[LaunchFacts] = field(default_factory=list)
    memcpy: int = 0
    memcpy_in_loops: int = 0
    memcpy_async: int = 0
    pinned: int = 0
    syncs: int = 0
    parse_errors: int = 0
    global_macro: bool = False


# ---------------------------------------------------------------------------------------------------- parsing
_PARSER: Any = None


def parser() -> Any:
    """The shared tree-sitter parser for CUDA (created on first use)."""
    global _PARSER
    if _PARSER is None:
        import tree_sitter_cuda
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_cuda.language()))
    return _PARSER


def text(node: Node) -> str:
    """The source text of ``node``."""
    return node.text.decode("utf-8", "replace")


def count_parse_errors(root: Node) -> int:
    """How many ERROR and MISSING nodes the tree holds (0 without walking when the tree is clean)."""
    if not root.has_error:
        return 0
    n, stack = 0, [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            n += 1
        if node.has_error:
            stack.extend(node.children)
    return n


def parse_number(literal: str) -> int | float | None:
    """The value of a C number literal (``0x1Fu``, ``1.5f``, ``1e-3``, ``017``), or None."""
    s = literal.lower().replace("'", "")
    try:
        if s.startswith(("0x", "0b")):
            return int(s.rstrip("ul"), 0)
        if any(c in s for c in ".e") or s.endswith("f"):
            return float(s.rstrip("fl"))
        s = s.rstrip("ul")
        return int(s, 8) if len(s) > 1 and s.startswith("0") else int(s)
    except ValueError:
        return None


def callee_name(fn: Node | None) -> str:
    """The called function's simple name (``atomicAdd`` for ``::atomicAdd``, ``k`` for ``k<256>``)."""
    while fn is not None:
        if fn.type in ("identifier", "field_identifier"):
            return text(fn)
        if fn.type == "qualified_identifier":
            fn = fn.child_by_field_name("name")
        elif fn.type == "template_function":
            fn = fn.child_by_field_name("name")
        elif fn.type == "field_expression":
            fn = fn.child_by_field_name("field")
        elif fn.type == "parenthesized_expression":
            fn = fn.named_children[0] if fn.named_children else None
        else:
            return text(fn)
    return ""


@dataclass
class _Declarator:
    name: str
    pointer: bool
    array: bool


def unwrap_declarator(node: Node | None) -> _Declarator | None:
    """Name and shape of a declarator (``*p``, ``a[]``, ``&r``, ``(*f)``), or None when it has no name."""
    pointer = array = False
    while node is not None:
        t = node.type
        if t in ("identifier", "field_identifier"):
            return _Declarator(text(node), pointer, array)
        if t in ("pointer_declarator", "abstract_pointer_declarator"):
            pointer = True
        elif t in ("array_declarator", "abstract_array_declarator"):
            array = True
        elif t not in ("init_declarator", "reference_declarator", "parenthesized_declarator", "function_declarator",
                       "qualified_identifier", "template_function"):
            return None
        nxt = node.child_by_field_name("declarator") or node.child_by_field_name("name")
        if nxt is None and t in ("reference_declarator", "parenthesized_declarator"):
            nxt = node.named_children[-1] if node.named_children else None
        node = nxt
    return None


def _qualifiers(decl: Node) -> set[str]:
    """Qualifier and storage words of a declaration (``const``, ``constexpr``, ``__shared__``, ``extern``...)."""
    out: set[str] = set()
    for c in decl.children:
        if c.type in ("type_qualifier", "storage_class_specifier"):
            out.add(text(c).strip())
        elif not c.is_named:
            out.add(c.type)
    return out


def _declarators(decl: Node) -> list[Node]:
    return decl.children_by_field_name("declarator")


def _first_named(node: Node | None) -> Node | None:
    if node is None:
        return None
    for c in node.named_children:
        if c.type != "comment":
            return c
    return None


# ---------------------------------------------------------------------------------------------------- constants
class Constants:
    """File-scope compile-time values: ``#define``, ``const``/``constexpr`` declarations, enumerators.

    Entries are evaluated lazily (a ``#define`` may use one written after it); a cycle gives None.
    """

    def __init__(self) -> None:
        self._thunks: dict[str, Callable[[], Value]] = {}
        self._cache: dict[str, Value | None] = {}
        self._busy: set[str] = set()

    def define(self, name: str, thunk: Callable[[], Value]) -> None:
        """Register ``name``; ``thunk`` computes its value on first lookup."""
        self._thunks[name] = thunk
        self._cache.pop(name, None)

    def lookup(self, name: str) -> Value | None:
        """The value of ``name``, or None when it is not a known constant."""
        if name in self._cache:
            return self._cache[name]
        thunk = self._thunks.get(name)
        if thunk is None or name in self._busy:
            return None
        self._busy.add(name)
        try:
            value: Value | None = thunk()
        finally:
            self._busy.discard(name)
        self._cache[name] = value
        return value

    def __contains__(self, name: str) -> bool:
        return name in self._thunks


# ---------------------------------------------------------------------------------------------------- walker
class _Walker:
    """Walks one function body in source order, tracking local values and recording facts.

    With ``kernel`` set it records kernel facts (accesses, ops, ifs, ...) into it; launches and memcpy calls are
    recorded into ``facts`` for every function.
    """

    def __init__(self, reader: _SourceReader, kernel: KernelFacts | None = None) -> None:
        self.reader = reader
        self.facts = reader.facts
        self.kernel = kernel
        self.scopes: list[dict[str, tuple[Value, int]]] = [{}]
        self.ctrl_depth = 0
        self.loop_depth = 0
        self.walk_depth = 0

    # ------------------------------------------------------------------ environment
    def bind(self, name: str, value: Value) -> None:
        """Declare ``name`` in the innermost scope."""
        self.scopes[-1][name] = (value, self.ctrl_depth)

    def lookup(self, name: str) -> Value:
        """A name's value: local, then file constant, then built-in, else a free symbol."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name][0]
        const = self.reader.constants.lookup(name)
        if const is not None:
            return const
        if name in BUILTIN_CONSTANTS:
            return Form.const(BUILTIN_CONSTANTS[name])
        return Form.symbol(name)

    def store(self, name: str, value: Value) -> None:
        """Assign to an existing local; inside a branch or loop deeper than its declaration the values join."""
        for scope in reversed(self.scopes):
            if name in scope:
                old, depth = scope[name]
                scope[name] = (join_values(old, value) if self.ctrl_depth > depth else value, depth)
                return

    # ------------------------------------------------------------------ expressions
    def eval(self, node: Node | None, depth: int = 0) -> Value:
        """The symbolic value of an expression node (never raises; unknown when it cannot be followed)."""
        if node is None or depth > _MAX_EVAL_DEPTH:
            return Form.unknown()
        handler = _EVAL.get(node.type)
        if handler is not None:
            return handler(self, node, depth + 1)
        return self._eval_other(node)

    def form(self, node: Node | None, depth: int = 0) -> Form:
        """:meth:`eval` as a :class:`Form`."""
        return as_form(self.eval(node, depth))

    def _eval_other(self, node: Node) -> Form:
        # Last resort for node kinds not followed: keep thread dependence visible to the divergence count.
        return Form.unknown(_THREAD_ALL if b"threadIdx" in node.text else frozenset())

    def _eval_number(self, node: Node, depth: int) -> Value:
        v = parse_number(text(node))
        return Form.unknown() if v is None else Form.const(v)

    def _eval_identifier(self, node: Node, depth: int) -> Value:
        return self.lookup(text(node))

    def _eval_bool(self, node: Node, depth: int) -> Value:
        return Form.const(1 if node.type == "true" else 0)

    def _eval_field(self, node: Node, depth: int) -> Value:
        arg, fld = node.child_by_field_name("argument"), node.child_by_field_name("field")
        fname = text(fld) if fld is not None else ""
        if arg is not None and arg.type == "identifier" and text(arg) in BUILTIN_VECTORS and fname in ("x", "y", "z"):
            return Form.symbol(f"{text(arg)}.{fname}")
        base = self.eval(arg, depth)
        if isinstance(base, Dim3) and fname in ("x", "y", "z"):
            return base.dims["xyz".index(fname)]
        return Form.unknown_of(as_form(base))

    def _eval_inner(self, node: Node, depth: int) -> Value:
        return self.eval(_first_named(node), depth)

    def _eval_cast(self, node: Node, depth: int) -> Value:
        return self.eval(node.child_by_field_name("value"), depth)

    def _eval_unary(self, node: Node, depth: int) -> Value:
        op = node.child_by_field_name("operator")
        arg = self.form(node.child_by_field_name("argument"), depth)
        o = op.type if op is not None else ""
        if o == "-":
            return -arg
        if o == "+":
            return arg
        c = arg.const_value
        if c is not None and isinstance(c, int):
            return Form.const(int(not c) if o == "!" else ~c)
        return Form.unknown_of(arg)

    def _eval_binary(self, node: Node, depth: int) -> Value:
        op_node = node.child_by_field_name("operator")
        op = op_node.type if op_node is not None else ""
        left = self.eval(node.child_by_field_name("left"), depth)
        right = self.eval(node.child_by_field_name("right"), depth)
        if isinstance(left, Pointer) and op in ("+", "-") and not isinstance(right, Pointer):
            delta = as_form(right)
            return left.shifted(delta if op == "+" else -delta)
        if isinstance(right, Pointer) and op == "+" and not isinstance(left, Pointer):
            return right.shifted(as_form(left))
        return binary_form(op, as_form(left), as_form(right))

    def _eval_conditional(self, node: Node, depth: int) -> Value:
        cond = self.form(node.child_by_field_name("condition"), depth)
        a = self.eval(node.child_by_field_name("consequence"), depth)
        b = self.eval(node.child_by_field_name("alternative"), depth)
        c = cond.const_value
        if c is not None:
            return a if c else b
        if a == b and not cond.opaque:
            return a
        return Form.unknown_of(cond, as_form(a), as_form(b))

    def _eval_subscript(self, node: Node, depth: int) -> Value:
        base = self.eval(node.child_by_field_name("argument"), depth)
        index = self.form(_subscript_index(node), depth)
        base_form = base.offset if isinstance(base, Pointer) else Form.unknown() if isinstance(base, LocalArray) \
            else as_form(base)
        return Form.unknown_of(base_form, index)  # a load: depends on where it reads

    def _eval_pointer_expr(self, node: Node, depth: int) -> Value:
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        if op is not None and op.type == "&" and arg is not None and arg.type == "subscript_expression":
            base = self.eval(arg.child_by_field_name("argument"), depth)
            if isinstance(base, Pointer):
                return base.shifted(self.form(_subscript_index(arg), depth))
        value = self.eval(arg, depth)
        if isinstance(value, Pointer):
            return Form.unknown_of(value.offset)
        return Form.unknown_of(as_form(value))

    def _eval_call(self, node: Node, depth: int) -> Value:
        fn = node.child_by_field_name("function")
        name = callee_name(fn)
        args = [c for c in (node.child_by_field_name("arguments") or node).named_children if c.type != "comment"]
        if fn is not None and fn.type == "template_function" and name in CAST_CALLS and args:
            return self.eval(args[0], depth)
        values = [self.eval(a, depth) for a in args]
        if name == "dim3":
            return Dim3.of([as_form(v) for v in values])
        return Form.unknown_of(*(as_form(v) for v in values))

    def _eval_assign(self, node: Node, depth: int) -> Value:
        return self.eval(node.child_by_field_name("right"), depth)

    def _eval_comma(self, node: Node, depth: int) -> Value:
        return self.eval(node.child_by_field_name("right"), depth)

    def _eval_update(self, node: Node, depth: int) -> Value:
        return self.eval(node.child_by_field_name("argument"), depth)

    def _eval_sizeof(self, node: Node, depth: int) -> Value:
        return Form.unknown()

    def _eval_list(self, node: Node, depth: int) -> Value:
        items = [c for c in node.named_children if c.type != "comment"]
        return self.eval(items[0], depth) if len(items) == 1 else Form.unknown_of(*(self.form(i, depth) for i in items))

    # ------------------------------------------------------------------ statements
    def walk(self, node: Node | None) -> None:
        """Walk a statement (or anything statement-like, including ERROR nodes)."""
        if node is None or self.walk_depth > _MAX_WALK_DEPTH:
            return
        self.walk_depth += 1
        try:
            handler = _WALK.get(node.type)
            if handler is not None:
                handler(self, node)
            elif node.type in _STATEMENTS or node.type.endswith("_statement"):
                self._walk_generic(node)
            else:
                self.scan(node)
                self.apply_effects(node)
        finally:
            self.walk_depth -= 1

    def _walk_generic(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in _STATEMENTS or child.type.endswith("_statement"):
                self.walk(child)
            else:
                self.scan(child)
                self.apply_effects(child)

    def _walk_compound(self, node: Node) -> None:
        self.scopes.append({})
        try:
            for child in node.named_children:
                self.walk(child)
        finally:
            self.scopes.pop()

    def _walk_expression_statement(self, node: Node) -> None:
        for child in node.named_children:
            self.scan(child)
            self.apply_effects(child)

    def _walk_declaration(self, node: Node) -> None:
        quals = _qualifiers(node)
        type_node = node.child_by_field_name("type")
        type_name = text(type_node) if type_node is not None else ""
        for d in _declarators(node):
            self._declare(d, quals, type_name)

    def _declare(self, d: Node, quals: set[str], type_name: str) -> None:
        if d.type == "function_declarator":
            self._declare_vexing(d, type_name)
            return
        info = unwrap_declarator(d)
        value_node = d.child_by_field_name("value") if d.type == "init_declarator" else None
        if value_node is not None:
            self.scan(value_node)
        if d.type == "array_declarator" or (d.type == "init_declarator" and info and info.array):
            for size in _array_sizes(d):
                self.scan(size)
        if info is None:
            return
        if "__shared__" in quals or info.array:
            self.bind(info.name, LocalArray(info.name, shared="__shared__" in quals))
            return
        self.bind(info.name, self._initial_value(value_node, type_name))

    def _declare_vexing(self, d: Node, type_name: str) -> None:
        """``dim3 block(T, RY);`` parses as a function declaration when the arguments are bare names: read it as
        a variable constructed from those names (nobody declares functions inside a function body)."""
        info = unwrap_declarator(d.child_by_field_name("declarator"))
        params = d.child_by_field_name("parameters")
        if info is None or params is None:
            return
        args = []
        for p in params.named_children:
            if p.type != "parameter_declaration" or p.child_by_field_name("declarator") is not None:
                return
            args.append(p.child_by_field_name("type"))
        self.bind(info.name, self._construct(args, type_name))

    def _construct(self, args: list[Node], type_name: str) -> Value:
        """The value of ``type_name name(args...)`` / ``type_name name{args...}``."""
        if type_name == "dim3":
            return Dim3.of([self.form(a) for a in args])
        return self.eval(args[0]) if len(args) == 1 else Form.unknown_of(*(self.form(a) for a in args))

    def _initial_value(self, value_node: Node | None, type_name: str) -> Value:
        if type_name == "dim3":
            if value_node is None:
                return Dim3.of([])
            if value_node.type in ("argument_list", "initializer_list"):
                return self._construct([a for a in value_node.named_children if a.type != "comment"], type_name)
            v = self.eval(value_node)
            return v if isinstance(v, Dim3) else Dim3.of([as_form(v)])
        if value_node is None:
            return Form.unknown()
        return self.eval(value_node)

    def _walk_if(self, node: Node) -> None:
        cond = node.child_by_field_name("condition")
        self.scan(cond)
        if self.kernel is not None:
            self.kernel.ifs += 1
            if self._condition_form(cond).depends_on_prefix("threadIdx."):
                self.kernel.divergent_ifs += 1
        self.ctrl_depth += 1
        try:
            self.walk(node.child_by_field_name("consequence"))
            alt = node.child_by_field_name("alternative")
            if alt is not None:
                self.walk(_first_named(alt) if alt.type == "else_clause" else alt)
        finally:
            self.ctrl_depth -= 1

    def _condition_form(self, cond: Node | None) -> Form:
        if cond is None:
            return Form.unknown()
        if cond.type == "condition_clause":
            value = cond.child_by_field_name("value")
            if value is not None and value.type == "declaration":
                for d in _declarators(value):
                    return self.form(d.child_by_field_name("value"))
            return self.form(value if value is not None else _first_named(cond))
        return self.form(cond)

    def _walk_for(self, node: Node) -> None:
        self.scopes.append({})
        try:
            init = node.child_by_field_name("initializer")
            if init is not None and init.type == "declaration":
                self.walk(init)
            elif init is not None:
                self.scan(init)
                self.apply_effects(init)
            self._loop(node, node.child_by_field_name("condition"), node.child_by_field_name("update"))
        finally:
            self.scopes.pop()

    def _loop(self, node: Node, condition: Node | None, update: Node | None, body_first: bool = False) -> None:
        self.ctrl_depth += 1
        self.loop_depth += 1
        try:
            if update is not None:
                self.apply_effects(update)  # loop-carried: joins with the value before the loop
            if not body_first:
                self.scan(condition)
            self.scan(update)
            self.walk(node.child_by_field_name("body"))
            if body_first:
                self.scan(condition)
        finally:
            self.ctrl_depth -= 1
            self.loop_depth -= 1

    def _walk_range_for(self, node: Node) -> None:
        self.scopes.append({})
        try:
            self.scan(node.child_by_field_name("right"))
            info = unwrap_declarator(node.child_by_field_name("declarator"))
            if info is not None:
                self.bind(info.name, Form.unknown())
            self._loop(node, None, None)
        finally:
            self.scopes.pop()

    def _walk_while(self, node: Node) -> None:
        self._loop(node, node.child_by_field_name("condition"), None)

    def _walk_do(self, node: Node) -> None:
        self._loop(node, node.child_by_field_name("condition"), None, body_first=True)

    def _walk_switch(self, node: Node) -> None:
        self.scan(node.child_by_field_name("condition"))
        self.ctrl_depth += 1
        try:
            self.walk(node.child_by_field_name("body"))
        finally:
            self.ctrl_depth -= 1

    def _walk_define(self, node: Node) -> None:
        self.reader.register_define(node)

    def _walk_skip(self, node: Node) -> None:
        return None

    # ------------------------------------------------------------------ side effects on locals
    def apply_effects(self, node: Node | None) -> None:
        """Update locals for assignments / increments at the top of an expression (or in a comma list)."""
        if node is None:
            return
        t = node.type
        if t in ("comma_expression", "parenthesized_expression"):
            for c in node.named_children:
                self.apply_effects(c)
        elif t == "assignment_expression":
            self._assign(node)
        elif t == "update_expression":
            arg = node.child_by_field_name("argument")
            op = node.child_by_field_name("operator")
            if arg is not None and arg.type == "identifier" and op is not None:
                old = self.lookup(text(arg))
                one = Form.const(1 if op.type == "++" else -1)
                self.store(text(arg), old.shifted(one) if isinstance(old, Pointer) else as_form(old) + one)

    def _assign(self, node: Node) -> None:
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op_node = node.child_by_field_name("operator")
        op = op_node.type if op_node is not None else "="
        if left is None:
            return
        if left.type == "identifier":
            name = text(left)
            new = self.eval(right) if op == "=" else _compound(op, self.lookup(name), self.eval(right))
            self.store(name, new)
        elif left.type == "field_expression":
            self._assign_field(left, op, right)

    def _assign_field(self, left: Node, op: str, right: Node | None) -> None:
        arg, fld = left.child_by_field_name("argument"), left.child_by_field_name("field")
        if arg is None or fld is None or arg.type != "identifier" or text(fld) not in ("x", "y", "z"):
            return
        base = self.lookup(text(arg))
        if isinstance(base, Dim3):
            i = "xyz".index(text(fld))
            new = self.form(right) if op == "=" else as_form(_compound(op, base.dims[i], self.eval(right)))
            self.store(text(arg), base.with_dim(i, new))

    # ------------------------------------------------------------------ facts
    def scan(self, node: Node | None) -> None:
        """Record the facts inside an expression subtree (calls, subscripts, operators, launches)."""
        if node is None:
            return
        stack = [node]
        kernel = self.kernel
        while stack:
            n = stack.pop()
            t = n.type
            if t == "call_expression":
                self._on_call(n)
            elif kernel is not None:
                if t == "subscript_expression":
                    stack.extend(self._on_subscript(n, kernel))
                    continue
                if t == "binary_expression":
                    op = n.child_by_field_name("operator")
                    if op is not None and op.type in ARITH_OPS:
                        kernel.ops += 1
                elif t == "assignment_expression":
                    op = n.child_by_field_name("operator")
                    if op is not None and op.type in ARITH_ASSIGN:
                        kernel.ops += 1
            stack.extend(n.named_children)

    def _on_subscript(self, node: Node, kernel: KernelFacts) -> list[Node]:
        """Record one access (a chain ``a[i][j]`` counts once, by its last index); return the children to scan."""
        chain = [node]
        root = node.child_by_field_name("argument")
        while root is not None and root.type == "subscript_expression":
            chain.append(root)
            root = root.child_by_field_name("argument")
        kernel.subscripts += 1
        base = self.eval(root)
        if isinstance(base, Pointer) and base.global_:
            index = base.offset + self.form(_subscript_index(node))
            stride = index.coefficient(THREAD_X)
            kernel.accesses.append(GlobalAccess(base.base, None if stride is None else float(stride),
                                                node.start_point[0] + 1, text(node)[:120]))
        rest = [root] if root is not None else []
        return rest + [i for s in chain if (i := _subscript_index(s)) is not None]

    def _on_call(self, node: Node) -> None:
        name = callee_name(node.child_by_field_name("function"))
        facts, kernel = self.facts, self.kernel
        config = next((c for c in node.children if c.type == "kernel_call_syntax"), None)
        if config is not None:
            facts.launches.append(self._launch(name, config))
        if name.startswith("cudaMemcpy"):
            facts.memcpy += 1
            facts.memcpy_in_loops += self.loop_depth > 0
            facts.memcpy_async += name.endswith("Async")
        elif name in PINNED_CALLS:
            facts.pinned += 1
        elif name in SYNC_CALLS:
            facts.syncs += 1
            if kernel is not None:
                kernel.syncs += 1
        elif kernel is not None:
            if name.startswith("atomic"):
                kernel.atomics += 1
            elif name in POPC_CALLS:
                kernel.popc += 1

    def _launch(self, kernel_name: str, config: Node) -> LaunchFacts:
        args = [c for c in config.named_children if c.type != "comment"]
        line = config.start_point[0] + 1
        if len(args) < 2:
            return LaunchFacts(kernel_name, line, "", None, "launch configuration has no block argument")
        block = args[1]
        value = self.eval(block)
        size = value.product() if isinstance(value, Dim3) else as_form(value)
        c = size.const_value
        if c is None:
            reads = ", ".join(sorted(size.symbols())) or "unknown values"
            return LaunchFacts(kernel_name, line, text(block), None,
                               f"block size `{text(block)}` is not a compile-time constant (reads {reads})")
        if c <= 0:
            return LaunchFacts(kernel_name, line, text(block), None, f"block size `{text(block)}` evaluates to {c}")
        return LaunchFacts(kernel_name, line, text(block), float(c), None)


def _subscript_index(node: Node) -> Node | None:
    idx = node.child_by_field_name("indices") or node.child_by_field_name("index")
    if idx is not None and idx.type == "subscript_argument_list":
        return _first_named(idx)
    return idx


def _array_sizes(d: Node) -> list[Node]:
    out = []
    while d is not None:
        if d.type == "array_declarator":
            size = d.child_by_field_name("size")
            if size is not None:
                out.append(size)
        d = d.child_by_field_name("declarator")
    return out


def _compound(op: str, old: Value, right: Value) -> Value:
    """The value after ``old op= right``."""
    base = op[:-1]
    if isinstance(old, Pointer) and base in ("+", "-"):
        delta = as_form(right)
        return old.shifted(delta if base == "+" else -delta)
    return binary_form(base, as_form(old), as_form(right))


def binary_form(op: str, a: Form, b: Form) -> Form:
    """``a op b`` for C operators: exact for ``+ - *``, shifts by constants and constant folding; else unknown."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    ca, cb = a.const_value, b.const_value
    if op == "<<" and isinstance(cb, int) and 0 <= cb < 63:
        return a.scale(1 << cb)
    if op == "/" and cb == 1:
        return a
    if ca is not None and cb is not None:
        folded = _fold(op, ca, cb)
        if folded is not None:
            return Form.const(folded)
    return Form.unknown_of(a, b)


def _fold(op: str, a: int | float, b: int | float) -> int | float | None:
    both_int = isinstance(a, int) and isinstance(b, int)
    try:
        if op == "/":
            if b == 0:
                return None
            return int(a / b) if both_int else a / b
        if op == "%" and both_int and b != 0:
            return int(math.fmod(a, b))
        if both_int and op in ("<<", ">>", "&", "|", "^"):
            if op == ">>":
                return a >> b if b >= 0 else None
            return {"<<": lambda: a << b if 0 <= b < 63 else None, "&": lambda: a & b,
                    "|": lambda: a | b, "^": lambda: a ^ b}[op]()
        compare: dict[str, Callable[[], bool]] = {
            "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
            "==": lambda: a == b, "!=": lambda: a != b, "&&": lambda: bool(a) and bool(b),
            "||": lambda: bool(a) or bool(b),
        }
        if op in compare:
            return int(compare[op]())
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    return None


_EVAL: dict[str, Callable[[_Walker, Node, int], Value]] = {
    "number_literal": _Walker._eval_number,
    "identifier": _Walker._eval_identifier,
    "type_identifier": _Walker._eval_identifier,
    "true": _Walker._eval_bool,
    "false": _Walker._eval_bool,
    "field_expression": _Walker._eval_field,
    "parenthesized_expression": _Walker._eval_inner,
    "cast_expression": _Walker._eval_cast,
    "unary_expression": _Walker._eval_unary,
    "binary_expression": _Walker._eval_binary,
    "conditional_expression": _Walker._eval_conditional,
    "subscript_expression": _Walker._eval_subscript,
    "pointer_expression": _Walker._eval_pointer_expr,
    "call_expression": _Walker._eval_call,
    "assignment_expression": _Walker._eval_assign,
    "comma_expression": _Walker._eval_comma,
    "update_expression": _Walker._eval_update,
    "sizeof_expression": _Walker._eval_sizeof,
    "alignof_expression": _Walker._eval_sizeof,
    "initializer_list": _Walker._eval_list,
    "argument_list": _Walker._eval_list,
    "char_literal": _Walker._eval_sizeof,
    "string_literal": _Walker._eval_sizeof,
}

_WALK: dict[str, Callable[[_Walker, Node], None]] = {
    "compound_statement": _Walker._walk_compound,
    "expression_statement": _Walker._walk_expression_statement,
    "declaration": _Walker._walk_declaration,
    "if_statement": _Walker._walk_if,
    "for_statement": _Walker._walk_for,
    "for_range_loop": _Walker._walk_range_for,
    "while_statement": _Walker._walk_while,
    "do_statement": _Walker._walk_do,
    "switch_statement": _Walker._walk_switch,
    "preproc_def": _Walker._walk_define,
    "comment": _Walker._walk_skip,
    "preproc_call": _Walker._walk_skip,
    "preproc_function_def": _Walker._walk_skip,
    "preproc_include": _Walker._walk_skip,
}


# ---------------------------------------------------------------------------------------------------- the reader
class _SourceReader:
    """Parses one source and fills :class:`SourceFacts`."""

    def __init__(self, source: bytes) -> None:
        self.source = source
        self.facts = SourceFacts()
        self.constants = Constants()

    def read(self) -> SourceFacts:
        tree = parser().parse(self.source)
        root = tree.root_node
        self.facts.parse_errors = count_parse_errors(root)
        functions: list[Node] = []
        loose: list[Node] = []
        self._collect(root, functions, loose)
        for fn in functions:
            self._read_function(fn)
        if loose:  # statements outside any readable function (broken code): still count launches and copies
            walker = _Walker(self)
            for node in loose:
                walker.walk(node)
        return self.facts

    # ------------------------------------------------------------------ file scope
    def _collect(self, node: Node, functions: list[Node], loose: list[Node]) -> None:
        """Register file-scope constants; gather function definitions and stray statements in source order."""
        for child in node.named_children:
            t = child.type
            if t == "function_definition":
                functions.append(child)
            elif t == "preproc_def":
                self.register_define(child)
            elif t == "declaration":
                self._register_declaration(child)
            elif t == "enum_specifier":
                self._register_enum(child)
            elif t in _CONTAINERS:
                if t == "linkage_specification":
                    body = child.child_by_field_name("body")
                    if body is not None and body.type == "function_definition":
                        functions.append(body)
                        continue
                self._collect(child, functions, loose)
            elif node.type == "ERROR" and (t in _STATEMENTS or t.endswith(("_statement", "_expression"))):
                loose.append(child)
            elif t == "type_definition" or t == "expression_statement":
                loose.append(child)

    def register_define(self, node: Node) -> None:
        """Record an object-like ``#define NAME value`` (``#define __global__`` is noted: it disables kernels)."""
        name_node, value_node = node.child_by_field_name("name"), node.child_by_field_name("value")
        if name_node is None:
            return
        name = text(name_node)
        if name == "__global__":
            self.facts.global_macro = True
        if value_node is None:
            return
        body = value_node.text.replace(b"\\\n", b" ").strip()
        self.constants.define(name, lambda: self._eval_macro(body))

    def _eval_macro(self, body: bytes) -> Value:
        tree = parser().parse(b"int __cudaperf_macro = (" + body + b"\n);")
        decl = _first_named(tree.root_node)
        if decl is None or decl.type != "declaration" or tree.root_node.has_error:
            return Form.unknown()
        for d in _declarators(decl):
            return _Walker(self).eval(d.child_by_field_name("value"))
        return Form.unknown()

    def _register_declaration(self, decl: Node) -> None:
        quals = _qualifiers(decl)
        if not quals & {"const", "constexpr"}:
            return
        type_node = decl.child_by_field_name("type")
        type_name = text(type_node) if type_node is not None else ""
        for d in _declarators(decl):
            info = unwrap_declarator(d)
            if info is None or info.pointer or info.array or d.type != "init_declarator":
                continue
            value = d.child_by_field_name("value")
            self.constants.define(info.name, lambda v=value: _Walker(self)._initial_value(v, type_name))

    def _register_enum(self, node: Node) -> None:
        body = node.child_by_field_name("body")
        if body is None:
            return
        previous: Callable[[], Value] = lambda: Form.const(-1)
        for e in body.named_children:
            if e.type != "enumerator" or e.child_by_field_name("name") is None:
                continue
            value = e.child_by_field_name("value")
            if value is not None:
                thunk: Callable[[], Value] = lambda v=value: _Walker(self).eval(v)
            else:
                thunk = lambda p=previous: as_form(p()) + Form.const(1)
            self.constants.define(text(e.child_by_field_name("name")), thunk)
            previous = thunk

    # ------------------------------------------------------------------ functions
    def _read_function(self, fn: Node) -> None:
        is_kernel = any(c.type == "__global__" for c in fn.children) and not self.facts.global_macro
        declarator = fn.child_by_field_name("declarator")
        fdecl = declarator
        while fdecl is not None and fdecl.type != "function_declarator":
            fdecl = fdecl.child_by_field_name("declarator")
        name_info = unwrap_declarator(fdecl.child_by_field_name("declarator")) if fdecl is not None else None
        name = name_info.name if name_info else "?"
        kernel = KernelFacts(name, fn.start_point[0] + 1) if is_kernel else None
        walker = _Walker(self, kernel)
        params = fdecl.child_by_field_name("parameters") if fdecl is not None else None
        for p in params.named_children if params is not None else []:
            info = unwrap_declarator(p.child_by_field_name("declarator"))
            if info is None:
                continue
            if info.pointer or info.array:
                walker.bind(info.name, Pointer(info.name, Form.const(0), global_=is_kernel))
            else:
                walker.bind(info.name, Form.symbol(info.name))
        walker.walk(fn.child_by_field_name("body"))
        if kernel is not None:
            self.facts.kernels.append(kernel)


def read_source(source: str | bytes) -> SourceFacts:
    """Parse ``source`` and return the facts the paper features are computed from.

    Raises only when tree-sitter itself cannot be loaded (the caller turns that into NaN features).
    """
    data = source.encode("utf-8", "replace") if isinstance(source, str) else source
    return _SourceReader(data).read()
