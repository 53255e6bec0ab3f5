"""An append-only JSONL store of evaluation results; the key of a record is (task_id, candidate_id).

Each result is appended and flushed as soon as it exists, so an interrupted batch loses at most the evaluation in
flight. On resume, scored results are kept and skipped; unscored ones (harness faults) are tried again. A torn
last line (a crash mid-write) is ignored.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Iterator

from cudaperf.harness.result import EvaluationResult


class ResultStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[EvaluationResult]:
        yield from self.read()

    def read(self) -> list[EvaluationResult]:
        if not self.path.exists():
            return []
        out = []
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(EvaluationResult.from_dict(json.loads(line)))
                except (json.JSONDecodeError, TypeError, KeyError, ValueError):
                    continue  # a torn line from an interrupted write
        return out

    def done_keys(self) -> set[tuple[str, str]]:
        """Keys of scored results (unscored ones are retried)."""
        return {(r.task_id, r.candidate_id) for r in self.read() if r.status == "scored"}

    def append(self, result: EvaluationResult) -> None:
        line = result.to_json() + "\n"
        with self._lock:
            with self.path.open("a", encoding="utf-8") as fh:
                # A previous crash may have left a torn line without a newline: start on a fresh line.
                if fh.tell() > 0:
                    with self.path.open("rb") as rf:
                        rf.seek(-1, os.SEEK_END)
                        if rf.read(1) != b"\n":
                            fh.write("\n")
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def latest(self) -> dict[tuple[str, str], EvaluationResult]:
        """The last record per key (a retried unscored result is superseded by its retry)."""
        return {(r.task_id, r.candidate_id): r for r in self.read()}
