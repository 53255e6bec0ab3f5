"""JSON-lines input files (completions, candidates, replays): one object per line, errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def json_objects(path: str | Path, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of ``path``; ``error`` with ``FILE:LINE`` and what is wrong for
    a line that is not valid JSON or not a JSON object."""
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
            if not isinstance(row, dict):
                raise error(f"{path}:{lineno}: each line must be a JSON object, not {type(row).__name__}")
            yield lineno, row
