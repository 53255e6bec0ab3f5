"""Candidates from outside the families added to the dataset in the family format: a file of rows (origin
``external``) or a ``cudaperf eval`` run's answers (origin ``model``, each with its ``source``: the policy, the run,
the sample and the turn). Either is untrusted code, measured like any candidate."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class RunAdded:
    """What :func:`add_from_eval_run` did with a run's answers."""
    added: list[dict[str, Any]]
    answers: int
    """The run's kernel answers (its ``candidate`` generations)."""
    no_code: int = 0
    duplicates: int = 0
    """Answers whose code a candidate of the same task already has (a family variant, another answer)."""
    already: int = 0
    """Answers added from this run before (the same candidate id): adding a run again adds only its new answers."""
    other_tasks: dict[str, int] = field(default_factory=dict)
    """Answers to tasks this dataset does not have, by task id."""


def _slug(policy: str) -> str:
    """A policy's name for candidate names: ``hf:/models/qwen`` -> ``hf-qwen``."""
    kind, sep, rest = policy.partition(":")
    if "/" in rest:
        rest = rest.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{kind}{sep}{rest}").strip("-")[:40] or "model"


def add_from_eval_run(ds: Dataset, run_dir: Path) -> RunAdded:
    """Add every kernel answer of the ``cudaperf eval`` run in ``run_dir`` to its task as a candidate of origin
    ``model``: named ``POLICY-RUN-sS-tT`` (RUN: 8 hex digits of the run's header), its ``source`` naming the policy,
    the run directory, its creation time, the sample and the turn. Answers without code, answers whose code the
    task already has, and answers to tasks the dataset does not hold are counted, not added. A run added again
    adds only the answers it did not have before (an eval resumed since)."""
    from cudaperf.eval.report import RunFormatError, load_run

    try:
        header = load_run(run_dir).header
    except (FileNotFoundError, RunFormatError) as exc:
        raise AddError(str(exc)) from None
    gens = Path(run_dir) / "generations.jsonl"
    if not gens.is_file():
        raise AddError(f"{run_dir}: no generations.jsonl (the run has no answers yet)")
    tasks = {t["id"]: t for t in ds.tasks}
    if not set(header.task_ids) & set(tasks):
        raise AddError(f"{run_dir}: none of its {len(header.task_ids)} tasks is in the dataset at {ds.root} "
                       "(eval the dataset's own tasks: --tasks train:c --dataset DIR)")
    head = json.dumps(header.to_dict(), sort_keys=True, default=str)
    tag = f"{_slug(header.policy)}-{hashlib.sha256(head.encode()).hexdigest()[:8]}"
    existing = {c["candidate_id"] for c in ds.candidates}
    codes = {(c["task_id"], c["code_sha256"]) for c in ds.candidates}
    new: list[dict[str, Any]] = []
    answers = no_code = duplicates = already = 0
    other: dict[str, int] = {}
    lines = gens.read_bytes().split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if lineno == len(lines):
                continue  # a torn last line: the run was killed while writing it
            raise AddError(f"{gens}:{lineno}: not valid JSON") from None
        if not isinstance(row, dict) or row.get("purpose") != "candidate":
            continue  # a spec turn or a summary: not a kernel
        answers += 1
        tid, sample, turn = row.get("task_id"), row.get("sample"), row.get("turn")
        text = (row.get("generation") or {}).get("text")
        if not isinstance(tid, str) or not isinstance(sample, int) or not isinstance(turn, int) \
                or not isinstance(text, str):
            raise AddError(f"{gens}:{lineno}: a generation needs task_id, sample, turn and generation.text")
        if tid not in tasks:
            other[tid] = other.get(tid, 0) + 1
            continue
        code = extract_code(text).code
        if code is None:
            no_code += 1
            continue
        cid = f"{tid}/{tag}-s{sample}-t{turn}"
        if cid in existing:
            already += 1
            continue
        sha = code_sha256(code)
        if (tid, sha) in codes:
            duplicates += 1
            continue
        existing.add(cid)
        codes.add((tid, sha))
        new.append({"candidate_id": cid, "task_id": tid, "family": tasks[tid]["family"],
                    "name": cid.split("/", 1)[1], "tags": [], "origin": "model", "code": code, "code_sha256": sha,
                    "source": f"model={header.policy} run={Path(run_dir).resolve()} created={header.created_at} "
                              f"sample={sample} turn={turn}"})
    ds.candidates = ds.candidates + new
    return RunAdded(new, answers, no_code, duplicates, already, other)
