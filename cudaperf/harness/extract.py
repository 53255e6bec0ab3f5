"""Find the CUDA code in a model completion.

Order: the last ``<OUTPUT_CUDA>...</OUTPUT_CUDA>`` block (the paper's output format); else the last fenced code
block that defines a ``__global__`` function (else the last fenced block); else the whole text when it already
looks like CUDA source (a ``.cu`` file given as a candidate). Finding nothing is a result (``None``), not an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = re.compile(r"<OUTPUT_CUDA>(.*?)(?:</OUTPUT_CUDA>|\Z)", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


@dataclass(frozen=True)
class Extraction:
    code: str | None
    method: str
    """``tag``, ``fence``, ``raw`` or ``none``."""


def extract_code(completion: str) -> Extraction:
    for tag in reversed([m.group(1) for m in _TAG.finditer(completion)]):
        code = tag.strip("\n")
        inner = _FENCE.search(code)  # a fence inside the tag: take its body
        if inner and "```" in code:
            code = inner.group(2)
        if code.strip():  # a tag holding only blanks or an empty fence holds no code: try the one before
            return Extraction(code=code.strip("\n") + "\n", method="tag")
    fences = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(completion)]
    fences = [(lang, body) for lang, body in fences if body.strip()]
    if fences:
        with_kernel = [b for _, b in fences if "__global__" in b]
        body = with_kernel[-1] if with_kernel else fences[-1][1]
        return Extraction(code=body.strip("\n") + "\n", method="fence")
    if "__global__" in completion or re.search(r"^\s*#\s*include\b", completion, re.M):
        return Extraction(code=completion, method="raw")
    return Extraction(code=None, method="none")
