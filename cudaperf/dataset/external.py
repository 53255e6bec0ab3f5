"""External candidates (for example model-generated variants) added to the dataset in the family format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cudaperf.dataset.family import STRATEGY_TAGS
from cudaperf.dataset.store import Dataset
from cudaperf.harness.records import code_sha256
from cudaperf.harness.extract import extract_code
from cudaperf.jsonl import json_objects


class AddError(ValueError):
    """A malformed candidates file: the message names the file, the line and the field."""


def add_candidates(ds: Dataset, path: Path) -> list[dict[str, Any]]:
    """Read ``path`` (JSONL rows ``{task_id, name, code | completion, tags?}``) and add the candidates; a row
    whose (task, name) exists already is an error, so nothing is overwritten silently. Returns the new rows."""
    if not path.exists():
        raise AddError(f"file not found: {path}")
    tasks = {t["id"]: t for t in ds.tasks}
    existing = {c["candidate_id"] for c in ds.candidates}
    new: list[dict[str, Any]] = []
    for lineno, row in json_objects(path, AddError):
        tid, name = row.get("task_id"), row.get("name")
        if tid not in tasks:
            raise AddError(f"{path}:{lineno}: unknown task_id {tid!r}")
        if not isinstance(name, str) or not name:
            raise AddError(f"{path}:{lineno}: 'name' must be a non-empty string")
        text = row.get("code") if row.get("code") is not None else row.get("completion")
        if not isinstance(text, str):
            raise AddError(f"{path}:{lineno}: needs a string 'code' or 'completion'")
        code = extract_code(text).code or text
        tags = row.get("tags") or []
        if not isinstance(tags, list) or any(t not in STRATEGY_TAGS for t in tags):
            raise AddError(f"{path}:{lineno}: 'tags' must be a list of strategy tags "
                           f"(unknown: {[t for t in tags if t not in STRATEGY_TAGS] if isinstance(tags, list) else tags})")
        cid = f"{tid}/{name}"
        if cid in existing:
            raise AddError(f"{path}:{lineno}: candidate {cid} exists already (choose another name)")
        existing.add(cid)
        new.append({"candidate_id": cid, "task_id": tid, "family": tasks[tid]["family"], "name": name,
                    "tags": list(tags), "origin": "external", "code": code, "code_sha256": code_sha256(code)})
    ds.candidates = ds.candidates + new
    return new
