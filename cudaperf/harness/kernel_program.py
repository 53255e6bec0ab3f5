"""Test programs and printout comparison for BabelTower-style ``cuda_kernel`` tasks (pure functions, no processes).

A task's tests are C++ statements that declare arguments and call ``wrapper(fn, args...)``. :data:`PRINT_HELPER`
supplies that ``wrapper``: it calls ``fn`` and prints the return value and every argument after the call, in the
format of the expected outputs::

    Return value: void
    Arguments after function call: (4, 0.3, [ 0.2, 0.3, 0.4, 0.5 ], 1, [ 0, 0, 0.4, 0.5 ], 1)

:func:`build_cpu_program` and :func:`build_cuda_program` wrap the reference C function (or the task's CUDA host
wrapper plus a kernel) and all the tests into one program that prints ``@@CUDAPERF_TEST <i>@@`` before test ``i``
and ``@@CUDAPERF_TEST_END <i>@@`` after it; :func:`parse_program_output` cuts the output back into one printout
per test (None when a test did not finish), and :func:`compare_printout` compares a printout with the expected one
number by number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Union

from cudaperf.tasks.schema import CudaKernelTask, Tolerance

TEST_MARK = "@@CUDAPERF_TEST {i}@@"
TEST_END_MARK = "@@CUDAPERF_TEST_END {i}@@"
CUDA_ERROR_MARK = "@@CUDAPERF_CUDA_ERROR {i} {name}@@"
CUDA_ERROR_EXIT = 3
"""Exit status of a CUDA test program after a CUDA error."""

CPU_CXX_FLAGS = ("-O2", "-ftrivial-auto-var-init=zero")
"""Suggested g++ flags for :func:`build_cpu_program`. Some tests print output arrays that the function leaves
partly unwritten (declared ``float y[3];`` and never fully filled): the expected outputs show zeros there, so
automatic variables are zero-initialized (GCC >= 12) to make those elements deterministic instead of stack garbage."""

CUDA_HOST_FLAGS = ("-Xcompiler", "-ftrivial-auto-var-init=zero")
"""The same for nvcc's host compiler (when it is GCC >= 12), for :func:`build_cuda_program`."""

PRINT_RTOL_FLOOR = 1e-5
"""Expected values were printed with 6 significant digits: no relative tolerance below this is meaningful."""

# ---------------------------------------------------------------------------------------------------------------
# C++ sources

PRINT_HELPER = r"""
// ---- cudaperf: the wrapper(fn, args...) helper the tests call ----
#include <cstddef>
#include <iostream>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cudaperf_print {

// Print one value as std::cout does by default. Arrays whose size is part of the type (the tests pass local
// arrays by name, so the forwarding reference keeps T[N]) print every element as [ a, b, c ]; a pointer has no
// known length and prints as <pointer> (no BabelTower test passes one).
template <class T>
void put(const T& v) {
    if constexpr (std::is_array_v<T>) {
        std::cout << "[ ";
        for (std::size_t i = 0; i < std::extent_v<T>; ++i) {
            if (i) std::cout << ", ";
            put(v[i]);
        }
        std::cout << " ]";
    } else if constexpr (std::is_pointer_v<T> || std::is_null_pointer_v<T>) {
        std::cout << "<pointer>";
    } else {
        std::cout << v;
    }
}

// What is printed after the call: an array argument is printed from the array itself (its contents after the
// call); any other argument is copied before the call and printed as passed (a by-value parameter cannot change,
// and the copy is safe from out-of-bounds writes into the caller's temporaries).
template <class T>
struct ArrayArg {
    T* array;
};

template <class T>
auto hold(T& v) {
    if constexpr (std::is_array_v<T>) {
        return ArrayArg<T>{&v};
    } else {
        return std::remove_cv_t<T>(v);
    }
}

template <class T>
void put_held(const ArrayArg<T>& a) { put(*a.array); }

template <class T>
void put_held(const T& v) { put(v); }

}  // namespace cudaperf_print

// Call fn(args...), then print the return value and every argument (arrays as they are after the call).
template <class F, class... A>
void wrapper(F&& fn, A&&... args) {
    std::tuple<decltype(cudaperf_print::hold(args))...> held(cudaperf_print::hold(args)...);
    using R = decltype(fn(args...));
    if constexpr (std::is_void_v<R>) {
        fn(args...);
        std::cout << "Return value: void\n";
    } else {
        auto&& r = fn(args...);
        std::cout << "Return value: ";
        cudaperf_print::put(r);
        std::cout << "\n";
    }
    std::cout << "Arguments after function call: (";
    std::apply(
        [](const auto&... h) {
            std::size_t k = 0;
            ((std::cout << (k++ ? ", " : ""), cudaperf_print::put_held(h)), ...);
            (void)k;
        },
        held);
    std::cout << ")\n" << std::flush;
}
// ---- end of the wrapper helper ----
"""

_STD_HEADERS = """\
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cmath>
#include <cfloat>
#include <climits>
#include <math.h>
#include <stdlib.h>
#include <algorithm>
#include <iostream>
"""

# The C functions call min/max unqualified (as CUDA host code can): give the CPU build global versions. A task
# that defines its own min/max wins overload resolution (a non-template beats a template).
_CPU_MINMAX = """\
#include <type_traits>
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b) { return b < a ? b : a; }
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b) { return a < b ? b : a; }
"""


def _main(calls: tuple[str, ...] | list[str], after_test: str) -> str:
    # The markers carry a nonce from argv[1], chosen per run by the harness: a kernel cannot know it, so it cannot
    # print fake test boundaries (with device printf) around fake outputs.
    out = ["#include <string>", "int main(int argc, char** argv) {", "    std::ios::sync_with_stdio(true);",
           '    const std::string nonce_ = argc > 1 ? std::string(" ") + argv[1] : std::string();']
    for i, call in enumerate(calls):
        out.append(f'    std::cout << "@@CUDAPERF_TEST {i}" << nonce_ << "@@\\n" << std::flush;')
        out.append("    {")
        out.append(call.rstrip())
        out.append("    }")  # the call may end in a // comment without a newline: the brace goes on its own line
        out.append("    std::cout << std::flush; std::fflush(stdout);")
        if after_test:
            out.append(after_test.replace("@I@", str(i)))
        out.append(f'    std::cout << "@@CUDAPERF_TEST_END {i}" << nonce_ << "@@\\n" << std::flush;')
    out.append("    return 0;")
    out.append("}")
    return "\n".join(out) + "\n"


def build_cpu_program(task: CudaKernelTask) -> str:
    """A complete C++ program (for ``g++ -O2``): the reference C function and every ``test_calls_c`` test."""
    return "\n".join(
        [
            f"// cudaperf CPU test program for {task.id} ({task.function_name})",
            _STD_HEADERS,
            _CPU_MINMAX,
            "// ---- reference C function ----",
            task.reference_c,
            PRINT_HELPER,
            _main(task.test_calls_c, after_test=""),
        ]
    )


_CUDA_CHECK = (
    "    { cudaError_t e_ = cudaDeviceSynchronize(); cudaError_t l_ = cudaGetLastError();"
    " if (e_ == cudaSuccess) e_ = l_;"
    " if (e_ != cudaSuccess) {"
    ' std::cout << "@@CUDAPERF_CUDA_ERROR @I@ " << cudaGetErrorName(e_) << "@@\\n" << std::flush;'
    f" std::exit({CUDA_ERROR_EXIT}); }} }}"
)


def build_cuda_program(task: CudaKernelTask, kernel_source: str) -> str:
    """A complete CUDA program (for ``nvcc``): ``kernel_source`` (a candidate's kernel, or
    ``task.reference_kernel``), the task's host wrapper, and every ``test_calls_cuda`` test.

    After each test it synchronizes and checks ``cudaGetLastError``; on an error it prints
    ``@@CUDAPERF_CUDA_ERROR <i> <error name>@@`` and exits with status 3.
    """
    return "\n".join(
        [
            f"// cudaperf CUDA test program for {task.id} ({task.kernel_name})",
            "#include <cuda_runtime.h>",
            _STD_HEADERS,
            "// ---- kernel ----",
            kernel_source,
            "// ---- host wrapper ----",
            task.wrapper,
            PRINT_HELPER,
            _main(task.test_calls_cuda, after_test=_CUDA_CHECK),
        ]
    )


# ---------------------------------------------------------------------------------------------------------------
# Program output

_MARK_RE = re.compile(r"@@CUDAPERF_TEST (\d+)@@\n")
_END_RE = re.compile(r"@@CUDAPERF_TEST_END (\d+)@@\n")
_ERR_RE = re.compile(r"@@CUDAPERF_CUDA_ERROR (\d+) ([^@\n]*)@@\n?")


def parse_program_output(stdout: str, n_tests: int, nonce: str = "") -> list[str | None]:
    """Each test's printout, cut from a test program's stdout; None for a test that did not finish (not reached,
    crashed, timed out, or hit a CUDA error). ``nonce`` is the value the program was given as ``argv[1]``."""
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    mark_re, end_re = _MARK_RE, _END_RE
    if nonce:
        mark_re = re.compile(rf"@@CUDAPERF_TEST (\d+) {re.escape(nonce)}@@\n")
        end_re = re.compile(rf"@@CUDAPERF_TEST_END (\d+) {re.escape(nonce)}@@\n")
    for m in mark_re.finditer(stdout):
        starts.setdefault(int(m.group(1)), m.end())
    for m in end_re.finditer(stdout):
        ends.setdefault(int(m.group(1)), m.start())
    out: list[str | None] = []
    for i in range(n_tests):
        s, e = starts.get(i), ends.get(i)
        out.append(stdout[s:e] if s is not None and e is not None and e >= s else None)
    return out


def find_cuda_error(stdout: str) -> tuple[int, str] | None:
    """``(test index, CUDA error name)`` if the program reported a CUDA error, else None."""
    m = _ERR_RE.search(stdout)
    return (int(m.group(1)), m.group(2)) if m else None


# ---------------------------------------------------------------------------------------------------------------
# Printout comparison


@dataclass(frozen=True)
class PrintoutComparison:
    """The result of comparing one test's printout with the expected one.

    ``argument``: where the first mismatch is: -1 for the return value, ``k`` for the k-th argument (from 0),
    None when the printouts could not be matched up at all (or they passed). ``element``: the element index inside
    an array argument (row-major for nested arrays); for printouts not in the wrapper format, the token index.
    ``max_abs_err`` / ``max_rel_err``: over every pair of finite numbers compared (0 when there were none).
    """

    passed: bool
    message: str
    argument: int | None = None
    element: int | None = None
    expected_value: str | None = None
    got_value: str | None = None
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0


_NUM_RE = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan(?:\([^)]*\))?)", re.IGNORECASE
)
_INT_RE = re.compile(r"[+-]?\d+")
_HEAD = "Return value: "
_ARGS = "\nArguments after function call: ("
_TAIL = ")\n"

Leaf = str
Value = Union[Leaf, list]  # a leaf, or an array (a list of values)


class _Unparsable(Exception):
    pass


def _normalize(text: str) -> str:
    # Expected outputs were captured through Python's universal newlines: a \r printed as a char became \n.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _parse_array(s: str, i: int) -> tuple[list, int]:
    """Parse ``[ a, b ]`` starting at s[i] == '['; return the items and the index after ``]``."""
    assert s.startswith("[ ", i)
    i += 2
    items: list = []
    if s.startswith(" ]", i):  # empty array: "[  ]"
        return items, i + 2
    while True:
        if s.startswith("[ ", i) and not s.startswith("[ ]", i):
            val, i = _parse_array(s, i)
        else:
            j = i + 1  # an element is at least one character (a printed char may be ',' ' ' or ']')
            while j < len(s) and not (s.startswith(", ", j) or s.startswith(" ]", j)):
                j += 1
            if j >= len(s):
                raise _Unparsable
            val, i = s[i:j], j
        items.append(val)
        if s.startswith(" ]", i):
            return items, i + 2
        if s.startswith(", ", i):
            i += 2
            continue
        raise _Unparsable


def _parse_args(s: str) -> list[Value]:
    args: list[Value] = []
    if s == "":
        return args
    i = 0
    while True:
        if s.startswith("[ ", i):
            val, i = _parse_array(s, i)
        else:
            j = s.find(", ", i + 1)
            j = len(s) if j < 0 else j
            val, i = s[i:j], j
        args.append(val)
        if i == len(s):
            return args
        if not s.startswith(", ", i):
            raise _Unparsable
        i += 2


def _parse_printout(text: str) -> tuple[Leaf, list[Value]]:
    if not text.startswith(_HEAD):
        raise _Unparsable
    k = text.find(_ARGS)
    if k < 0 or not text.endswith(_TAIL):
        raise _Unparsable
    body = text[k + len(_ARGS) : -len(_TAIL)]
    return text[len(_HEAD) : k], _parse_args(body)


def _shape(v: Value) -> object:
    return None if isinstance(v, str) else tuple(_shape(x) for x in v)


def _flat(v: Value) -> list[Leaf]:
    if isinstance(v, str):
        return [v]
    return [leaf for x in v for leaf in _flat(x)]


def _describe(v: Value) -> str:
    if isinstance(v, str):
        return "a scalar"
    return f"an array of {len(v)}"


def _number(tok: str) -> float | None:
    t = tok.strip()
    if not _NUM_RE.fullmatch(t):
        return None
    low = t.lower().lstrip("+")
    if "nan" in low:
        return math.nan
    if "inf" in low:
        return -math.inf if low.startswith("-") else math.inf
    return float(t)


class _Checker:
    """Compares leaves one by one, remembering the first mismatch and the largest errors."""

    def __init__(self, tol: Tolerance) -> None:
        self.atol = tol.atol
        self.rtol = max(tol.rtol, PRINT_RTOL_FLOOR)
        self.first: tuple[str, int | None, int | None, str, str] | None = None
        self.max_abs = 0.0
        self.max_rel = 0.0

    def leaf(self, exp: str, got: str, arg: int | None, elem: int | None) -> None:
        problem = self._leaf(exp, got)
        if problem is not None and self.first is None:
            self.first = (problem, arg, elem, exp, got)

    def _leaf(self, exp: str, got: str) -> str | None:
        if exp == got:
            return None
        e, g = _number(exp), _number(got)
        if e is None or g is None:
            if e is not None:
                return "expected a number"
            return "text differs"
        if math.isnan(e):
            return None if math.isnan(g) else "expected nan"
        if math.isinf(e):
            return None if g == e else f"expected {'-' if e < 0 else ''}inf"
        if math.isnan(g) or math.isinf(g):
            return "got a non-finite value where a finite number was expected"
        err = abs(g - e)
        rel = err / abs(e) if e != 0 else (0.0 if err == 0 else math.inf)
        self.max_abs = max(self.max_abs, err)
        self.max_rel = max(self.max_rel, rel)
        if _INT_RE.fullmatch(exp.strip()) and _INT_RE.fullmatch(got.strip()) and len(exp.strip().lstrip("+-")) > 6:
            # More than 6 digits without an exponent: printed from an integer type, so compare exactly.
            return None if int(exp) == int(got) else "integer differs"
        if err <= self.atol + self.rtol * abs(e):
            return None
        return "outside tolerance"

    def result(self, where: str) -> PrintoutComparison:
        if self.first is None:
            return PrintoutComparison(True, "ok", max_abs_err=self.max_abs, max_rel_err=self.max_rel)
        problem, arg, elem, exp, got = self.first
        if arg is None:
            place = f"token {elem}"
        elif arg == -1:
            place = "return value"
        else:
            place = f"argument {arg}" + (f" element {elem}" if elem is not None else "")
        return PrintoutComparison(
            False,
            f"{where}{place}: expected {exp!r}, got {got!r} ({problem}; "
            f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g})",
            argument=arg,
            element=elem,
            expected_value=exp,
            got_value=got,
            max_abs_err=self.max_abs,
            max_rel_err=self.max_rel,
        )


_TOKEN_RE = re.compile(_NUM_RE.pattern + r"|\w+|\S", re.IGNORECASE)


def _compare_tokens(expected: str, got: str, tol: Tolerance) -> PrintoutComparison:
    """Fallback for printouts not in the wrapper format: numbers, words and single characters, in order."""
    te, tg = _TOKEN_RE.findall(expected), _TOKEN_RE.findall(got)
    chk = _Checker(tol)
    for n, (a, b) in enumerate(zip(te, tg)):
        chk.leaf(a, b, None, n)
    if chk.first is None and len(te) != len(tg):
        return PrintoutComparison(
            False,
            f"unstructured printout: expected {len(te)} tokens, got {len(tg)}",
            max_abs_err=chk.max_abs,
            max_rel_err=chk.max_rel,
        )
    return chk.result("unstructured printout, ")


def compare_printout(expected: str, got: str | None, tol: Tolerance) -> PrintoutComparison:
    """Compare one test's printout with the expected one.

    Numbers pass when ``|got - exp| <= atol + max(rtol, 1e-5) * |exp|`` (the expected values were printed with 6
    significant digits); integers printed with more than 6 digits must match exactly; nan matches nan or -nan,
    inf matches the same inf, and a non-finite value where a finite one is expected fails. Other text (``void``,
    printed chars) must match exactly. A different argument count, or an array of a different length, fails.
    """
    if got is None:
        return PrintoutComparison(False, "no printout: the test did not finish (crash, timeout or CUDA error)")
    exp_n, got_n = _normalize(expected), _normalize(got)
    if exp_n == got_n:
        return PrintoutComparison(True, "ok (identical)")
    try:
        exp_ret, exp_args = _parse_printout(exp_n)
    except _Unparsable:
        return _compare_tokens(exp_n, got_n, tol)
    try:
        got_ret, got_args = _parse_printout(got_n)
    except _Unparsable:
        short = got_n if len(got_n) <= 200 else got_n[:200] + "..."
        return PrintoutComparison(
            False,
            f"printout not in the expected format (Return value: ... Arguments after function call: (...)): "
            f"{short!r}",
        )
    chk = _Checker(tol)
    if len(exp_args) != len(got_args):
        return PrintoutComparison(False, f"argument count differs: expected {len(exp_args)}, got {len(got_args)}")
    for k, (ea, ga) in enumerate(zip(exp_args, got_args)):
        if _shape(ea) != _shape(ga):
            return PrintoutComparison(
                False,
                f"argument {k}: expected {_describe(ea)}, got {_describe(ga)}",
                argument=k,
            )
    chk.leaf(exp_ret, got_ret, -1, None)
    for k, (ea, ga) in enumerate(zip(exp_args, got_args)):
        if isinstance(ea, str):
            chk.leaf(ea, ga, k, None)  # type: ignore[arg-type]
        else:
            for n, (a, b) in enumerate(zip(_flat(ea), _flat(ga))):
                chk.leaf(a, b, k, n)
    return chk.result("")


# ---------------------------------------------------------------------------------------------------------------
# Hidden tests: the visible tests' statements with other sizes and fresh values

_ARRAY_INIT = re.compile(r"((?:const\s+)?(?:unsigned\s+|signed\s+)?\w+)\s+(\w+)\s*\[\s*(\d*)\s*\]\s*=\s*\{([^{}]*)\};")
_ARRAY_DECL = re.compile(r"((?:const\s+)?(?:unsigned\s+|signed\s+)?\w+)\s+(\w+)\s*\[\s*(\d+)\s*\];")
_SCALAR = re.compile(r"((?:const\s+)?(?:unsigned\s+|signed\s+)?\w+)\s+(\w+)\s*=\s*([-+]?[\w.]+);")
_WRAPPER_CALL = re.compile(r"wrapper\s*\(\s*(\w+)\s*,(.*)\)\s*;")
_INT_TYPES = ("int", "long", "short", "size_t", "unsigned", "int64_t", "int32_t", "uint32_t", "uint64_t")
_FLOAT_TYPES = ("float", "double")
HIDDEN_MAX_ELEMENTS = 1 << 15
"""The largest array a hidden test declares (arrays are ``static``: off the stack)."""


@dataclass(frozen=True)
class HiddenCall:
    """One hidden test: the same statements for the C reference and the CUDA program, and how it was made."""

    call_c: str
    call_cuda: str
    how: str


def _parse_test(call: str) -> tuple[list[tuple[str, ...]], str, list[str]] | None:
    """A visible test's statements as (kind, ...) items and the wrapper call's function and arguments, or None when
    a statement is of a form this generator does not rewrite (kept visible-only)."""
    items: list[tuple[str, ...]] = []
    fn, args = "", []
    for raw in call.split("\n"):
        line = re.sub(r"//.*$", "", raw).strip()
        if not line:
            continue
        for stmt in re.findall(r"[^;]*;", line) if not line.startswith("wrapper") else [line]:
            stmt = stmt.strip()
            if m := _ARRAY_INIT.fullmatch(stmt):
                items.append(("init", m.group(1), m.group(2), m.group(3), m.group(4)))
            elif m := _ARRAY_DECL.fullmatch(stmt):
                items.append(("decl", m.group(1), m.group(2), m.group(3)))
            elif m := _SCALAR.fullmatch(stmt):
                items.append(("scalar", m.group(1), m.group(2), m.group(3)))
            elif m := _WRAPPER_CALL.fullmatch(stmt):
                fn, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
            else:
                return None
    return (items, fn, args) if fn else None


def _is_int_type(ctype: str) -> bool:
    return any(w in ctype.split() for w in _INT_TYPES) and not any(w in ctype for w in _FLOAT_TYPES)


def _grow(v: int, k: int) -> int:
    return v * k + 1 if v >= 2 else v


_FLOAT_LITERAL = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?")


def _fresh_float(literal: str, rng) -> str:
    """A fresh float literal near ``literal``: its sign, 0.5 to 1.5 times its magnitude (0 becomes 0.05 to 1), four
    significant digits, the ``f`` suffix kept. So a kernel right only for the visible thresholds and factors meets
    others."""
    v = float(literal.rstrip("fF"))
    new = rng.uniform(0.05, 1.0) if v == 0 else v * rng.uniform(0.5, 1.5)
    text = f"{new:.4g}"
    if not any(ch in text for ch in ".eE"):
        text += ".0"
    return text + ("f" if literal.endswith(("f", "F")) else "")


def hidden_calls(task: CudaKernelTask, seed: int) -> tuple[list[HiddenCall], str]:
    """Hidden tests for ``task`` from its largest visible test (the one with the most array elements): integer
    scalars of 2 or more grow to ``v*k + 1`` (odd sizes, for k = 3 and 7), every array to its length times
    ``(k + 1)**2`` (capped at :data:`HIDDEN_MAX_ELEMENTS`), float arrays get fresh random values of the magnitude
    of the visible ones, integer and char arrays values drawn from the visible ones (so index arrays stay in range);
    a third test keeps the sizes and draws fresh values. The second and third also redraw float scalars and float
    literal arguments (thresholds, factors) near the visible ones (:func:`_fresh_float`); the first keeps them.
    Returns the calls (not yet validated: see
    :func:`cudaperf.harness.run_cuda_kernel.prepare_hidden_tests`) and, when there are none, why."""
    import random

    rng = random.Random(seed)
    parsed = []
    for c, cu in zip(task.test_calls_c, task.test_calls_cuda):
        pc, pcu = _parse_test(c), _parse_test(cu)
        if pc is None or pcu is None or pc[0] != pcu[0] or pc[2] != pcu[2]:
            continue
        size = sum(len(it[4].split(",")) if it[0] == "init" else int(it[3] or 0) if it[0] == "decl" else 0
                   for it in pc[0])
        parsed.append((size, pc, pcu[1]))
    if not parsed:
        return [], "no visible test is made only of array and scalar declarations and one wrapper call"
    _, (items, fn_c, args), fn_cuda = max(parsed, key=lambda p: p[0])
    out = []
    for k, how in ((3, "sizes v*3+1"), (7, "sizes v*7+1"), (1, "visible sizes, fresh values")):
        lines = []
        for it in items:
            if it[0] == "scalar":
                _, ctype, name, val = it
                if _is_int_type(ctype) and re.fullmatch(r"\d+", val) and k > 1:
                    val = str(_grow(int(val), k))
                elif k != 3 and any(w in ctype for w in _FLOAT_TYPES) and _FLOAT_LITERAL.fullmatch(val):
                    val = _fresh_float(val, rng)
                lines.append(f"{ctype} {name} = {val};")
                continue
            ctype, name = it[1], it[2]
            values = [v.strip() for v in it[4].split(",") if v.strip()] if it[0] == "init" else []
            length = len(values) if it[0] == "init" and not it[3] else int(it[3] or len(values) or 1)
            new_len = min(HIDDEN_MAX_ELEMENTS, length * (k + 1) ** 2) if k > 1 else length
            if it[0] == "decl" or not values:
                lines.append(f"static {ctype} {name}[{new_len}];")
                continue
            if any(w in ctype for w in _FLOAT_TYPES):
                nums = [abs(float(v.rstrip("fF"))) for v in values if re.fullmatch(r"[-+]?[\d.]+(?:e[-+]?\d+)?[fF]?", v)]
                mag = max(nums) if nums and max(nums) > 0 else 1.0
                fresh = [f"{rng.uniform(-mag, mag):.4g}" for _ in range(new_len)]
                if nums and min(float(v.rstrip("fF")) for v in values
                                if re.fullmatch(r"[-+]?[\d.]+(?:e[-+]?\d+)?[fF]?", v)) >= 0:
                    fresh = [f"{rng.uniform(0, mag):.4g}" for _ in range(new_len)]
            else:
                fresh = [rng.choice(values) for _ in range(new_len)]
            lines.append(f"static {ctype} {name}[{new_len}] = {{{', '.join(fresh)}}};")
        new_args = []
        for a in args:
            if re.fullmatch(r"\d+", a) and k > 1:
                a = str(_grow(int(a), k))
            elif k != 3 and _FLOAT_LITERAL.fullmatch(a) and not re.fullmatch(r"[-+]?\d+", a):
                a = _fresh_float(a, rng)  # a float literal argument (a threshold, a factor): fresh too
            new_args.append(a)
        body = "\n".join(lines)
        out.append(HiddenCall(f"{body}\nwrapper({fn_c}, {', '.join(new_args)});\n",
                              f"{body}\nwrapper({fn_cuda}, {', '.join(new_args)});\n", how))
    return out, ""
