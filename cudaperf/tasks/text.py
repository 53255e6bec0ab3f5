"""Text2CUDA tasks: a natural-language description and an interface; the trusted C reference stays hidden.

Our reading of CUDA-Harness (docs/TEXT2CUDA.md): the policy sees what the function must compute and its interface
(argument names, C types, which are inputs and outputs, element counts as expressions of the size parameters),
never a program. The harness still needs a trusted reference to synthesise expected outputs, so a
:class:`TextTask` *is* a :class:`~cudaperf.tasks.schema.CFunctionTask` (same function, arguments, size
configurations, tolerance, reference) with the text added: the harness judges it through the ``c_function`` path
unchanged (hidden inputs drawn per evaluation, expected outputs from the reference in its own process, every trust
check), while the prompt builder shows ``[DESCRIPTION]`` and ``[INTERFACE]`` in place of ``[SEQ_CODE]``.

The shipped set (``cudaperf/data/text_tasks/text_tasks.jsonl``) is derived from the built-in dataset's held-out
C-function tasks (``load_taskset("test:c")``): one line per task, ``{"id", "source_id", "family", "description",
"interface"}``, written by :func:`build_text_rows` (a per-family lead sentence of ours, the dataset's exact rule
for the task, and a sentence per argument the two leave unnamed). :func:`load_text_tasks` joins each line with
its C task and validates it (the C task exists in the test split, the description names every argument, the
interface names every argument with its type, no line of the reference appears in the text).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from cudaperf.jsonl import json_objects
from cudaperf.tasks.schema import ArgSpec, CFunctionTask, TaskError

TEXT_TASKS_FILE = Path(__file__).resolve().parent.parent / "data" / "text_tasks" / "text_tasks.jsonl"
SOURCE_SET = "test:c"
"""The task set the text tasks are derived from (their C ids are ids of this set)."""


@dataclass(frozen=True)
class TextTask(CFunctionTask):
    """A ``c_function`` task framed as text: ``description`` (what to compute) and ``interface`` are what the
    policy sees; ``reference_c`` is for the harness only. ``kind`` stays ``c_function`` (the harness path);
    ``framing`` is ``text``."""

    interface: str = ""
    source_id: str = ""
    """The id of the C-function task it was derived from (the same id: the two framings pair by it)."""
    framing: str = "text"


def is_text_task(task: object) -> bool:
    return isinstance(task, TextTask)


def task_label(task: object) -> str:
    """The kind a record shows: ``text`` for a text task, else the task's kind."""
    return "text" if is_text_task(task) else getattr(task, "kind", "?")


# --------------------------------------------------------------------------------------------------- interface

_ROLE_WORDS = {"in": "input array (read only)", "out": "output array (write every element)",
               "inout": "input and output array (read, then overwritten)", "scalar": "input scalar"}


def interface_text(task: CFunctionTask) -> str:
    """The [INTERFACE] block: the C signature, each argument's type, role and element count, and the sizes."""
    lines = [f"extern \"C\" {task.signature}", "arguments, in order:"]
    sizes = set(task.size_params)
    for a in task.args:
        if a.role == "scalar":
            lines.append(f"  {a.name}: {a.ctype}, {_ROLE_WORDS[a.role]}, {_scalar_values(a, sizes)}")
        else:
            vals = f", {_array_values(a)}" if a.role != "out" else ""
            lines.append(f"  {a.name}: {a.ctype}*, {_ROLE_WORDS[a.role]}, {a.length} elements{vals}")
    if task.returns != "void":
        lines.append(f"returns: {task.returns}")
    params = ", ".join(task.size_params)
    smallest = min(task.size_configs, key=lambda c: sum(c.values()))
    largest = task.size_configs[task.timing_config]
    lines.append(f"size parameters: {params} (from {_sizes(smallest)} up to {_sizes(largest)})")
    lines.append("all pointers are host pointers; outputs must be in host memory when the function returns")
    return "\n".join(lines) + "\n"


def _scalar_values(a: ArgSpec, size_params: set[str]) -> str:
    """What values a scalar argument takes in the tests."""
    if a.name in size_params:
        return "a size parameter"
    d = a.dist
    if d.kind == "const":
        return f"always {d.value}"
    if d.kind in ("uniform", "randint"):
        return f"drawn per test in [{d.low}, {d.high})"
    return f"drawn per test ({d.kind})"


def _array_values(a: ArgSpec) -> str:
    """What an input array holds in the tests."""
    d = a.dist
    return {"uniform": f"values in [{d.low}, {d.high})", "randint": f"values in [{d.low}, {d.high})",
            "const": f"every value {d.value}", "permutation": "a permutation of 0 .. length-1",
            "arange": "0, 1, 2, ...", "offsets": f"non-decreasing offsets from 0 to {d.high}",
            "sorted": f"sorted ascending, values in [{d.low}, {d.high})"}.get(d.kind, d.kind)


def _sizes(c: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in c.items())


# --------------------------------------------------------------------------------------------------- descriptions

FAMILY_LEADS: dict[str, str] = {
    "bfs_csr": "Compute breadth-first-search levels on a directed graph of nv vertices and ne edges given in CSR "
               "form (row_ptr, col_idx), starting from several sources around src, into level.",
    "conv1d": "Apply a 1-D correlation with the weights w (2r+1 taps) to each of nsig signals of length n in x, "
              "writing y.",
    "elementwise_map": "Apply a scalar function elementwise to the n pairs (x[i], y[i]), writing z.",
    "gather_scatter": "Gather x through the index array idx and transform each gathered value, writing y (n "
                      "elements).",
    "image_filter": "Filter the h x w image src with a fixed small kernel, writing dst.",
    "int_hash_rounds": "Hash each of the n words of in independently with a fixed number of integer mixing rounds, "
                       "writing out.",
    "matmul": "Multiply two dense row-major matrices A (m x k) and B (k x n) into C (m x n).",
    "matvec": "Iterate a scaled transposed matrix-vector product with the n x n matrix A and the vector b, "
              "updating y in place.",
    "mean_variance": "For each of nseg segments of x delimited by offsets, compute a mean and a variance, writing "
                     "mean and var.",
    "minmax_reduce": "Reduce the n values of x to an extreme key and the position where it occurs.",
    "nbody": "Compute the gravitational acceleration (ax, ay, az) of each of n bodies with positions (px, py, pz) "
             "and masses m, softened by eps2.",
    "pairwise_distance": "Compute the distance between every row of P (m rows) and every row of Q (n rows), each "
                         "of dimension d, writing the m x n matrix D.",
    "pixel_ops": "Transform each pixel of the h x w RGB image rgb through a fixed colour pipeline, writing out.",
    "prefix_scan": "Compute an exclusive prefix sum over a transform of the n values of x, writing y.",
    "row_softmax": "Normalise or reduce each row of the m x k matrix x on its own (a softmax-style pass over the "
                   "row), writing out.",
    "run_length": "For each of S segments delimited by off, count the elements of x in the segment that satisfy a "
                  "hash predicate, writing out (n elements in all).",
    "segment_sort": "Sort each fixed-length segment of x independently (S segments), writing y.",
    "spmv_csr": "Apply an n x n sparse matrix in CSR form (row_ptr, col_idx, vals, nnz nonzeros) iters times to "
                "the vector x, writing the result y.",
    "stencil1d": "Run steps Jacobi sweeps of a 1-D stencil over the n values of u, in place.",
    "stencil2d": "Run steps Jacobi sweeps of a 2-D stencil over the ny x nx grid u, in place.",
    "stencil3d": "Run steps Jacobi sweeps of a 3-D stencil over the nz x ny x nx box u, in place.",
    "stream_compact": "Keep the elements of x (n values) that satisfy a predicate, packed in order into y, and "
                      "return how many were kept.",
    "string_match": "Count the positions where the pattern pat of m bytes matches the text of n bytes.",
    "transpose": "Transpose the rows x cols matrix in into out, converting each element.",
    "wavefront_dp": "Score the local alignment of each of npairs string pairs (a of length m, b of length n), "
                    "writing score.",
}

UNDERSPECIFIED: dict[str, str] = {
    "monte_carlo": "the dataset's rule names the estimator only as 'integral' and the uniform draw loosely: the text "
                   "does not fix the function that is integrated",
    "sum_reduce": "the rule names 'a 64-bit mixing hash' without its constants",
    "fractal_iter": "the rule does not fix the pixel-to-plane mapping or the escape radius",
    "minmax_reduce_001": "the rule names a 'murmur3-style finaliser' without its constants",
}
"""Families (or task ids) left out of the text set: their one-line rule does not determine the output, so a text
framing would test guessing, not translation."""


def names_argument(text: str, name: str) -> bool:
    """Whether ``text`` names the argument ``name`` as a word (``x`` in ``x[i]``, not in ``max``)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def _arg_sentence(a: ArgSpec) -> str:
    if a.role == "scalar":
        return f"{a.name} is a {a.ctype} input scalar."
    return f"{a.name} is a {a.ctype} {'output' if a.role == 'out' else 'input' if a.role == 'in' else 'in/out'} " \
           f"array of {a.length} elements."


def describe(task: CFunctionTask, family: str) -> str:
    """The description of ``task``: the family's lead, the task's exact rule, a sentence per argument not named."""
    lead = FAMILY_LEADS[family]
    rule = task.description.strip()
    text = f"{lead} Exactly: {rule}"
    if task.returns != "void" and "return" not in text:
        text += f" The function returns a {task.returns}."
    missing = [a for a in task.args if not names_argument(text, a.name)]
    if missing:
        text += " " + " ".join(_arg_sentence(a) for a in missing)
    return text


def _excluded(task_id: str, family: str) -> str | None:
    return UNDERSPECIFIED.get(task_id) or UNDERSPECIFIED.get(family)


def build_text_rows(c_tasks: Iterable[CFunctionTask], families: Mapping[str, str]) -> list[dict[str, Any]]:
    """The lines of the text-task file for the given C tasks (``families``: task id -> family)."""
    rows = []
    for t in c_tasks:
        fam = families[t.id]
        if _excluded(t.id, fam) or fam not in FAMILY_LEADS:
            continue
        rows.append({"id": t.id, "source_id": t.id, "family": fam, "description": describe(t, fam),
                     "interface": interface_text(t)})
    return rows


# --------------------------------------------------------------------------------------------------- loading

def _reference_lines(reference_c: str) -> list[str]:
    """Lines of the reference long enough that seeing one in a text would mean the code leaked."""
    return [ln.strip() for ln in reference_c.splitlines() if len(ln.strip()) >= 24 and not ln.strip().startswith("#")]


def check_text_task(task: TextTask) -> None:
    """Raise TaskError when the text does not name an argument, or holds a line of the reference."""
    for a in task.args:
        if not names_argument(task.description, a.name):
            raise TaskError(f"text task {task.id}: the description does not name the argument {a.name!r}")
        if not re.search(rf"^\s*{re.escape(a.name)}: {re.escape(a.ctype)}\b", task.interface, re.M):
            raise TaskError(f"text task {task.id}: the interface does not give {a.name!r} with its type {a.ctype}")
    for ln in _reference_lines(task.reference_c):
        if ln in task.description or ln in task.interface:
            raise TaskError(f"text task {task.id}: the text holds a line of the reference ({ln[:40]!r})")


def text_task(c_task: CFunctionTask, description: str, interface: str) -> TextTask:
    base = {f.name: getattr(c_task, f.name) for f in fields(CFunctionTask)}
    base["description"] = description
    return TextTask(**base, interface=interface, source_id=c_task.id)


def load_text_tasks(path: str | Path | None = None, c_tasks: Mapping[str, CFunctionTask] | None = None
                    ) -> list[TextTask]:
    """The text tasks of ``path`` (default: the shipped file), each joined with its C task of the test split and
    checked; TaskError naming the line at fault."""
    path = Path(path) if path else TEXT_TASKS_FILE
    if c_tasks is None:
        from cudaperf.eval.tasksets import load_taskset

        c_tasks = {t.id: t for t in load_taskset(SOURCE_SET).tasks}
    if not path.is_file():
        raise TaskError(f"text task file not found: {path}")
    out: list[TextTask] = []
    seen: set[str] = set()
    for n, row in json_objects(path, TaskError):
        for key in ("id", "source_id", "description", "interface"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise TaskError(f"{path}:{n}: field {key!r} must be a non-empty string")
        src = c_tasks.get(row["source_id"])
        if not isinstance(src, CFunctionTask):
            raise TaskError(f"{path}:{n}: source_id {row['source_id']!r} is not a C-function task of {SOURCE_SET}")
        if row["id"] != src.id or row["id"] in seen:
            raise TaskError(f"{path}:{n}: id {row['id']!r} must be its source's id, once")
        seen.add(row["id"])
        task = text_task(src, row["description"], row["interface"])
        try:
            check_text_task(task)
        except TaskError as exc:
            raise TaskError(f"{path}:{n}: {exc}") from None
        out.append(task)
    if not out:
        raise TaskError(f"{path}: no text tasks")
    return out


def write_text_tasks(path: str | Path | None = None) -> Path:
    """(Re)write the shipped file from the test split (``python -m cudaperf.tasks.text``)."""
    from cudaperf.eval.tasksets import load_taskset

    ts = load_taskset(SOURCE_SET)
    rows = build_text_rows(ts.tasks, {t.id: ts.meta[t.id]["family"] for t in ts.tasks})
    path = Path(path) if path else TEXT_TASKS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write_text_tasks())
