"""Load the BabelTower C -> CUDA evaluation set (with unit tests) as :class:`CudaKernelTask` records.

The data file is ``unit_total_eval_cases.jsonl`` (233 JSON lines; see ``shared/data/babeltower/README.md``). Each
line holds a tokenized C function (``cpp_code``), its tokenized reference kernel (``cuda_code``), a host wrapper
that launches the kernel (``cuda_wrapper``), test statements for both sides and the expected printouts.

The tokenized sources compile as they are, with one exception handled by :func:`detokenize`: string literals,
whose inner spaces were split into tokens and whose real spaces became ``▁`` (U+2581).

The file carries no licence and is not shipped with the package: :func:`find_babeltower` locates it (explicit
path, ``$CUDAPERF_BABELTOWER``, or ``../shared/data/babeltower/`` next to the repository) and returns None when it
is absent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from cudaperf.tasks.schema import CudaKernelTask, TaskError, Tolerance

BABELTOWER_FILE = "unit_total_eval_cases.jsonl"
BABELTOWER_ENV = "CUDAPERF_BABELTOWER"
_REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_BABELTOWER_PATH = _REPO_ROOT.parent / "shared" / "data" / "babeltower" / BABELTOWER_FILE
"""Where a development checkout finds the data: ``<repo>/../shared/data/babeltower/``."""

_FIELDS_STR = ("cpp_code", "cuda_code", "cuda_wrapper")
_FIELDS_LIST = ("consistent_cpp_inputs", "consistent_cuda_inputs", "consistent_outputs")

# The SentencePiece-style space marker used inside tokenized string literals.
_SPACE_MARK = "\u2581"
_STRING_LIT = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_C_KEYWORDS = frozenset(
    "if for while switch return sizeof do else case default goto break continue".split()
)


def find_babeltower(explicit: str | Path | None = None) -> Path | None:
    """The BabelTower jsonl file, or None if it cannot be found.

    Looks at ``explicit`` (the file or a directory holding it), then ``$CUDAPERF_BABELTOWER`` (same), then
    :data:`DEFAULT_BABELTOWER_PATH`. An explicit path or environment value that does not exist gives None rather
    than falling through, so a mistyped path is not silently replaced by another file.
    """
    for cand in (explicit, os.environ.get(BABELTOWER_ENV) or None):
        if cand is None:
            continue
        p = _as_file(Path(cand).expanduser())
        return p if p.is_file() else None
    p = DEFAULT_BABELTOWER_PATH
    return p if p.is_file() else None


def _as_file(p: Path) -> Path:
    return p / BABELTOWER_FILE if p.is_dir() else p


def detokenize(code: str) -> str:
    """Undo the tokenization where it breaks compilation: inside string literals only.

    ``" % i ▁ ! = ▁ % i \\n "`` becomes ``"%i != %i\\n"``: the spaces between tokens are dropped and ``▁`` turns
    back into a space. Everything outside string literals is left as it is (spaces around tokens are harmless).
    """

    def fix(m: re.Match[str]) -> str:
        inner = m.group(0)[1:-1]
        inner = re.sub(r"\s+", "", inner).replace(_SPACE_MARK, " ")
        return f'"{inner}"'

    return _STRING_LIT.sub(fix, code)


def _function_name(code: str, where: str, field: str, marker: str | None = None) -> str:
    """The name of the first function defined in ``code`` (after ``marker`` if given)."""
    start = 0
    if marker is not None:
        start = code.find(marker)
        if start < 0:
            raise TaskError(f"{where}: field {field!r} has no {marker} function")
        start += len(marker)
    for m in re.finditer(r"([A-Za-z_]\w*)\s*\(", code[start:]):
        if m.group(1) not in _C_KEYWORDS:
            return m.group(1)
    raise TaskError(f"{where}: cannot find a function name in field {field!r}")


def _task(row: Any, lineno: int, where: str) -> CudaKernelTask:
    if not isinstance(row, dict):
        raise TaskError(f"{where}: a BabelTower row must be a JSON object, got {type(row).__name__}")
    for key in _FIELDS_STR:
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise TaskError(f"{where}: field {key!r} must be a non-empty string")
    for key in _FIELDS_LIST:
        val = row.get(key)
        if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
            raise TaskError(f"{where}: field {key!r} must be a list of strings")
    n = {len(row[k]) for k in _FIELDS_LIST}
    if len(n) != 1 or 0 in n:
        lens = ", ".join(f"{k}={len(row[k])}" for k in _FIELDS_LIST)
        raise TaskError(f"{where}: the test lists must be non-empty and of equal length ({lens})")
    return CudaKernelTask(
        id=f"babeltower-{lineno:03d}",
        function_name=_function_name(row["cpp_code"], where, "cpp_code"),
        kernel_name=_function_name(row["cuda_code"], where, "cuda_code", marker="__global__"),
        reference_c=detokenize(row["cpp_code"]),
        reference_kernel=detokenize(row["cuda_code"]),
        wrapper=row["cuda_wrapper"],
        test_calls_c=tuple(row["consistent_cpp_inputs"]),
        test_calls_cuda=tuple(row["consistent_cuda_inputs"]),
        expected_outputs=tuple(row["consistent_outputs"]),
        tolerance=Tolerance(rtol=1e-4, atol=1e-5),
        tags=("babeltower",),
    )


def load_babeltower(path: str | Path) -> list[CudaKernelTask]:
    """All BabelTower tasks in ``path`` (the jsonl file, or the directory holding it), in file order.

    Task ids are ``babeltower-NNN`` with NNN the line number counted from 0. Raises :class:`TaskError` naming the
    file and line of the first missing or malformed record.
    """
    p = _as_file(Path(path))
    if not p.is_file():
        raise TaskError(f"BabelTower file not found: {p}")
    tasks: list[CudaKernelTask] = []
    try:
        lines = p.read_text(encoding="utf-8").split("\n")  # not splitlines(): JSON may hold raw U+2028
    except UnicodeDecodeError as exc:
        raise TaskError(f"{p}: not UTF-8 text: {exc}") from None
    while lines and not lines[-1].strip():  # trailing blank lines are harmless
        lines.pop()
    for lineno, line in enumerate(lines):
        where = f"{p}:{lineno + 1} (babeltower-{lineno:03d})"
        if not line.strip():
            raise TaskError(f"{where}: empty line (line numbers are task ids, so blank lines are not allowed)")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        tasks.append(_task(row, lineno, where))
    if not tasks:
        raise TaskError(f"{p}: no BabelTower rows")
    return tasks
