"""An append-only JSONL store of evaluation results; the key of a record is (task_id, candidate_id).

Each result is appended and flushed as soon as it exists, so an interrupted batch loses at most the evaluation in
flight. On resume, scored results are kept and skipped; unscored ones (harness faults) are tried again. A torn
line (a crash mid-write; the next append starts on a fresh line) is skipped and counted. A line that is whole JSON
but not an evaluation result means the file is something else: reading it is a :class:`StoreFormatError`, so that
a wrong path neither loses results nor gets results appended to it. A store compressed with gzip (``.gz``, as the
device scripts bring them back) can be read, not appended to.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path
from typing import Iterator

from cudaperf.harness.result import EvaluationResult


class StoreFormatError(ValueError):
    """A result store that is not one: a line is JSON but not an evaluation result, or a compressed store was
    to be appended to."""


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.torn_lines = 0
        """Lines the last :meth:`read` skipped as torn (not whole JSON)."""

    def __iter__(self) -> Iterator[EvaluationResult]:
        yield from self.read()

    @property
    def compressed(self) -> bool:
        return self.path.suffix == ".gz"

    def read(self) -> list[EvaluationResult]:
        if not self.path.exists():
            return []
        out: list[EvaluationResult] = []
        torn = 0
        opener = gzip.open if self.compressed else open
        with opener(self.path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    torn += 1  # a torn line from an interrupted write
                    continue
                try:
                    out.append(EvaluationResult.from_dict(record))
                except (TypeError, KeyError, ValueError, AttributeError) as exc:
                    raise StoreFormatError(f"{self.path}:{line_no}: not an evaluation result "
                                           f"({type(exc).__name__}: {exc}); is this a result store?") from exc
        self.torn_lines = torn
        return out

    def done_keys(self) -> set[tuple[str, str]]:
        """Keys of scored results (unscored ones are retried)."""
        return {(r.task_id, r.candidate_id) for r in self.read() if r.status == "scored"}

    def check_writable(self) -> None:
        """Raise :class:`StoreFormatError` unless results can be appended here: not a compressed store, and every
        line so far a result (or torn)."""
        if self.compressed:
            raise StoreFormatError(f"{self.path} is compressed: results cannot be appended to it (gunzip it first "
                                   "to resume the run)")
        self.read()

    def append(self, result: EvaluationResult) -> None:
        if self.compressed:
            self.check_writable()
        append_line(self.path, result.to_json() + "\n", self._lock)

    def latest(self) -> dict[tuple[str, str], EvaluationResult]:
        """The last record per key (a retried unscored result is superseded by its retry)."""
        return {(r.task_id, r.candidate_id): r for r in self.read()}


def append_line(path: Path, line: str, lock: threading.Lock) -> None:
    """Append one whole line, flushed and synced. A torn last line left by a crash is ended first, so the new line
    starts on a line of its own (readers skip the torn one)."""
    with lock:
        with path.open("a", encoding="utf-8") as fh:
            if fh.tell() > 0:
                with path.open("rb") as rf:
                    rf.seek(-1, os.SEEK_END)
                    if rf.read(1) != b"\n":
                        fh.write("\n")
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
