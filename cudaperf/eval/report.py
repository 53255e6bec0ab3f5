"""The report of an evaluation run: ``metrics.json``, a self-contained ``report.html``, and a terminal summary.

Input: a run directory (:mod:`cudaperf.eval.records`): ``run.json`` (the :class:`RunHeader`) and ``turns.jsonl``
(one :class:`TurnRecord` per task, sample and turn).

Semantics:

* A trajectory is one (task_id, sample). Its outcome at turn t is its record of turn t if it got there, else its
  last record before t carried forward, so a task's n stays the same over turns (a trajectory that stopped early,
  solved or given up, keeps its last result).
* Best-by-turn at t is the best of the trajectory's records of turns <= t: a counted record (scored, or a policy
  error where those count) beats one that is not (unscored); then correct beats not correct; among correct ones,
  a known speedup beats an unknown one and the higher speedup wins; among incorrect ones, compiled beats not
  compiled, then the further harness stage wins; a tie keeps the earlier turn.
* Under ``--strategy evolve`` (records carry ``accepted``) best-by-turn is the last accepted candidate (the best
  the evolution kept), falling back to the rule above when none was accepted (:func:`final_by_turn`). A text
  task's spec turn (``phase = "spec"``) is not judged and is in no metric.
* "Final" is best-by-turn at the run's last turn: the outcome of a sample that is allowed to refine. The summary
  (:func:`cudaperf.eval.metrics.summarize`) is computed over the final outcomes, and pass@1, geo-mean speedup@1,
  fast_1@1 and compile rate per turn and best-by-turn.
* Reading: no ``run.json`` is not a run directory; a malformed line of ``turns.jsonl`` is an error naming file:line
  and what is wrong, except a torn last line (no newline, not JSON: a run killed mid-write), which is skipped with
  a warning; a repeated (task_id, sample, turn) keeps the first record, with a warning. Warnings are emitted as
  :class:`RunLoadWarning` and also kept in ``metrics.json`` and the report.
* ``report.html`` has no external resource: CSS inline, plots (matplotlib, Agg canvas, no pyplot state) inlined as
  base64 PNG. Every string taken from the run is escaped.
* The paper's figures (:data:`PAPER_RESULTS`) are shown beside ours when the run's benchmark is one the paper
  reports; the paper does not say how its speedup@k is computed, so the two speedup columns compare loosely.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import statistics
import warnings
from collections import Counter
from dataclasses import MISSING, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cudaperf.eval.metrics import (
    STATUSES,
    MetricSettings,
    SampleOutcome,
    Summary,
    p_key,
    summarize,
)
from cudaperf.eval.records import STOP_REASONS, RunHeader, TurnRecord
from cudaperf.harness.result import FailureKind, Stage

PAPER_SOURCE = ("Mahmud, Ahmed, Jannesari, \"Multi-turn RL with Structural and Performance Aware Rewards for CUDA "
                "Kernel Generation\", arXiv 2607.20908 (CC BY 4.0), Table 4 (appendix A.16: pass@1, 3, 5); the "
                "pass@5 columns are also Table 1. Correctness = all test cases passed; performance = geometric "
                "mean of speedup over the sequential program (C) or eager PyTorch (KernelBench).")

PAPER_RESULTS: dict[str, dict[str, Any]] = {
    "own C set": {"tasks": 290, "models": {
        "Qwen-3-32B": {1: (0.31, 1.2), 3: (0.44, 2.3), 5: (0.72, 6.2)},
        "QiMeng-MuPa (best baseline)": {1: (0.20, 0.91), 3: (0.49, 2.1), 5: (0.63, 5.9)},
        "CUDAPerf": {1: (0.45, 3.1), 3: (0.64, 5.7), 5: (0.89, 11.02)},
    }},
    "BabelTower": {"tasks": 233, "models": {
        "Qwen-3-32B": {1: (0.66, 1.1), 3: (0.72, 1.9), 5: (0.86, 4.92)},
        "QiMeng-MuPa (best baseline)": {1: (0.82, 1.2), 3: (0.89, 2.4), 5: (0.94, 6.01)},
        "CUDAPerf": {1: (0.76, 2.5), 3: (0.91, 4.9), 5: (0.94, 9.02)},
    }},
    "KernelBench": {"tasks": 250, "models": {
        "Qwen-3-32B": {1: (0.29, 0.22), 3: (0.41, 0.25), 5: (0.56, 0.53)},
        "CUDA-Agent (best baseline)": {1: (0.34, 1.2), 3: (0.69, 2.3), 5: (0.86, 3.09)},
        "CUDAPerf": {1: (0.55, 1.9), 3: (0.82, 2.8), 5: (0.93, 6.41)},
    }},
}
"""The paper's (pass@k correctness, geo-mean speedup) per benchmark, model and k, from :data:`PAPER_SOURCE`
(PAPER-SPEC §8)."""

PAPER_BENCHMARK = {"c_test": "own C set", "c_test_family": "own C set", "babeltower": "BabelTower",
                   "kernelbench": "KernelBench"}
"""The run header's ``benchmark`` -> the paper's benchmark it matches."""

FAILURE_MESSAGE_CHARS = 300
"""How much of a failure message the per-task table keeps (the full text is in turns.jsonl)."""

_STAGE_ORDER = [s.value for s in Stage]
_FAILURE_ORDER = [f.value for f in FailureKind]


class RunFormatError(ValueError):
    """A run directory, or a line in it, that cannot be read."""


class RunLoadWarning(UserWarning):
    """Something in a run directory that was skipped or resolved (a torn last line, a duplicate record)."""


@dataclass(frozen=True)
class Run:
    run_dir: Path
    header: RunHeader
    records: tuple[TurnRecord, ...]
    """In file order, duplicates removed."""
    warnings: tuple[str, ...]

    def trajectories(self) -> dict[tuple[str, int], tuple[TurnRecord, ...]]:
        """(task_id, sample) -> its records by turn."""
        by: dict[tuple[str, int], list[TurnRecord]] = {}
        for r in self.records:
            by.setdefault((r.task_id, r.sample), []).append(r)
        return {key: tuple(sorted(rs, key=lambda r: r.turn)) for key, rs in sorted(by.items())}

    def task_ids(self) -> tuple[str, ...]:
        """The header's tasks in its order, then any task that has records but is not in the header."""
        seen = dict.fromkeys(self.header.task_ids)
        extra = sorted({r.task_id for r in self.records} - set(seen))
        return tuple(seen) + tuple(extra)


@dataclass(frozen=True)
class ReportPaths:
    metrics_json: Path
    report_html: Path
    plots: tuple[str, ...]
    """The plots inlined in the report, in order (``turns``, ``stages``, ``speedups``)."""


# ---------------------------------------------------------------------------------------------------- reading

def _required(cls) -> set[str]:
    return {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}


def _load_header(path: Path) -> RunHeader:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFormatError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise RunFormatError(f"{path}: not UTF-8 text ({exc.reason})") from None
    if not isinstance(raw, dict):
        raise RunFormatError(f"{path}: expected a JSON object (the run header), got {type(raw).__name__}")
    missing = sorted(_required(RunHeader) - raw.keys())
    if missing:
        raise RunFormatError(f"{path}: run header lacks {', '.join(missing)}")
    if not isinstance(raw["task_ids"], list) or not all(isinstance(t, str) for t in raw["task_ids"]):
        raise RunFormatError(f"{path}: task_ids must be a list of strings")
    for name in ("samples", "turns"):
        v = raw[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise RunFormatError(f"{path}: {name} must be an integer >= 1, got {v!r}")
    if not isinstance(raw.get("excluded", {}), dict):
        raise RunFormatError(f"{path}: excluded must be an object (task id -> reason)")
    return RunHeader.from_dict(raw)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_STR = ("task_id", "task_kind", "candidate_id", "status", "stage", "finish_reason", "feedback")
_OPT_STR = ("family", "level", "failure_kind", "failure_message", "stop", "speedup_flag", "gen_error")
_OPT_NONNEG = ("candidate_cv", "baseline_cv", "kernel_ms", "memcpy_ms")


def _record_problem(d: dict[str, Any]) -> str | None:
    """What is wrong with one decoded turns.jsonl line, or None."""
    missing = sorted(_required(TurnRecord) - d.keys())
    if missing:
        return f"record lacks {', '.join(missing)}"
    for name in _STR:
        if not isinstance(d[name], str):
            return f"{name} must be a string, got {d[name]!r}"
    for name in _OPT_STR:
        if d.get(name) is not None and not isinstance(d[name], str):
            return f"{name} must be a string or null, got {d[name]!r}"
    for name in ("sample", "turn"):
        if not _is_int(d[name]) or d[name] < 0:
            return f"{name} must be an integer >= 0, got {d[name]!r}"
    for name in ("compiled", "correct"):
        if not isinstance(d[name], bool):
            return f"{name} must be true or false, got {d[name]!r}"
    if d["status"] not in STATUSES:
        return f"status must be one of {', '.join(STATUSES)}, got {d['status']!r}"
    if d["stage"] not in _STAGE_ORDER:
        return f"stage must be one of {', '.join(_STAGE_ORDER)}, got {d['stage']!r}"
    if d.get("stop") is not None and d["stop"] not in STOP_REASONS:
        return f"stop must be one of {', '.join(STOP_REASONS)} or null, got {d['stop']!r}"
    sp = d["speedup"]
    if sp is not None:
        if not _is_num(sp) or sp <= 0:
            return f"speedup must be a finite number > 0 or null, got {sp!r}"
        if not d["correct"]:
            return f"speedup {sp!r} given for a sample that is not correct"
    for name in _OPT_NONNEG:
        if d[name] is not None and (not _is_num(d[name]) or d[name] < 0):
            return f"{name} must be a finite number >= 0 or null, got {d[name]!r}"
    if d["reward"] is not None and not _is_num(d["reward"]):
        return f"reward must be a finite number or null, got {d['reward']!r}"
    for name in ("prompt_tokens", "completion_tokens"):
        if d[name] is not None and (not _is_int(d[name]) or d[name] < 0):
            return f"{name} must be an integer >= 0 or null, got {d[name]!r}"
    if not _is_num(d["latency_s"]) or d["latency_s"] < 0:
        return f"latency_s must be a finite number >= 0, got {d['latency_s']!r}"
    gb = d.get("gen_batch")
    if gb is not None and (not _is_int(gb) or gb < 1):
        return f"gen_batch must be an integer >= 1 or null, got {gb!r}"
    for name in ("reward_terms", "features"):
        if not isinstance(d[name], dict):
            return f"{name} must be an object, got {type(d[name]).__name__}"
    return None


def load_run(run_dir: str | Path) -> Run:
    """Read a run directory. Raises FileNotFoundError (no such directory) or :class:`RunFormatError` (not a run
    directory, a malformed header or line: file:line and what is wrong); warns (:class:`RunLoadWarning`) for a
    torn last line or a duplicate record, both skipped."""
    d = Path(run_dir)
    if not d.exists():
        raise FileNotFoundError(f"{d}: no such run directory")
    if not d.is_dir():
        raise RunFormatError(f"{d} is not a directory (expected a run directory)")
    head = d / "run.json"
    if not head.is_file():
        raise RunFormatError(f"{d} is not a run directory: it has no run.json")
    header = _load_header(head)
    notes: list[str] = []
    records: list[TurnRecord] = []
    path = d / "turns.jsonl"
    if not path.is_file():
        notes.append(f"{path}: not there yet (no turn completed): the report has no records")
    else:
        data = path.read_bytes()
        lines = data.split(b"\n")
        first_at: dict[tuple[str, int, int], int] = {}
        for i, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            last_unterminated = i == len(lines)  # the piece after the final newline
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                if last_unterminated:
                    notes.append(f"{path}:{i}: torn last line ({len(raw)} bytes, no newline; a run killed while "
                                 "writing) ignored")
                    continue
                what = exc.msg if isinstance(exc, json.JSONDecodeError) else f"not UTF-8 ({exc.reason})"
                raise RunFormatError(f"{path}:{i}: not valid JSON ({what})") from None
            if not isinstance(obj, dict):
                raise RunFormatError(f"{path}:{i}: expected a JSON object (a turn record), got {type(obj).__name__}")
            if obj.get("phase") == "spec":  # a text task's spec turn: recorded, never judged, in no metric
                continue
            problem = _record_problem(obj)
            if problem:
                raise RunFormatError(f"{path}:{i}: {problem}")
            rec = TurnRecord.from_dict(obj)
            key = (rec.task_id, rec.sample, rec.turn)
            if key in first_at:
                notes.append(f"{path}:{i}: duplicate of line {first_at[key]} (task {rec.task_id!r}, sample "
                             f"{rec.sample}, turn {rec.turn}): the first is kept")
                continue
            first_at[key] = i
            records.append(rec)
    known = set(header.task_ids)
    stray = sorted({r.task_id for r in records} - known)
    if stray:
        notes.append(f"{len(stray)} task(s) have records but are not in run.json's task_ids: "
                     + ", ".join(repr(t) for t in stray[:10]) + (" ..." if len(stray) > 10 else ""))
    run = Run(run_dir=d, header=header, records=tuple(records), warnings=())
    for (task, sample), traj in run.trajectories().items():
        turns = [r.turn for r in traj]
        if turns != list(range(len(turns))):
            notes.append(f"trajectory (task {task!r}, sample {sample}) has turns {turns}, not 0..{len(turns) - 1}: "
                         "a missing turn takes the outcome of the one before it")
    for note in notes:
        warnings.warn(note, RunLoadWarning, stacklevel=2)
    return replace(run, warnings=tuple(notes))


# ---------------------------------------------------------------------------------------------------- semantics

def _counts(rec: TurnRecord, settings: MetricSettings) -> bool:
    return rec.status == "scored" or (rec.status == "policy_error" and settings.policy_errors_count_as_failures)


def _rank(rec: TurnRecord, settings: MetricSettings) -> tuple:
    timed = rec.correct and rec.speedup is not None
    return (_counts(rec, settings), rec.correct, timed, rec.speedup if timed else 0.0, rec.compiled,
            _STAGE_ORDER.index(rec.stage))


def outcome_at(traj: Sequence[TurnRecord], turn: int) -> TurnRecord | None:
    """The trajectory's record of ``turn``, else its last record before it (carried forward); None when it has no
    record at or before ``turn``. ``traj`` is sorted by turn."""
    found = None
    for r in traj:
        if r.turn > turn:
            break
        found = r
    return found


def best_by_turn(traj: Sequence[TurnRecord], turn: int, settings: MetricSettings = MetricSettings()
                 ) -> TurnRecord | None:
    """The best of the trajectory's records of turns <= ``turn`` (module docstring); ties keep the earlier."""
    best = None
    for r in traj:
        if r.turn > turn:
            break
        if best is None or _rank(r, settings) > _rank(best, settings):
            best = r
    return best


def final_by_turn(traj: Sequence[TurnRecord], turn: int, settings: MetricSettings = MetricSettings()
                  ) -> TurnRecord | None:
    """A trajectory's outcome over turns <= ``turn``: under ``--strategy evolve`` (records with ``accepted`` set)
    its last accepted candidate, the best it kept, else :func:`best_by_turn` (which is also the answer under
    ``refine``, and for an evolve trajectory that never had a correct candidate)."""
    upto = [r for r in traj if r.turn <= turn]
    if any(r.accepted is not None for r in upto):
        kept = [r for r in upto if r.accepted]
        if kept:
            return kept[-1]
    return best_by_turn(traj, turn, settings)


def outcome_category(rec: TurnRecord) -> str:
    """``correct``, ``unscored``, ``policy_error``, the failure kind, or ``stopped_at_<stage>`` (not correct and no
    failure recorded, e.g. a compile-only run)."""
    if rec.status == "unscored":
        return "unscored"
    if rec.status == "policy_error":
        return "policy_error"
    if rec.correct:
        return "correct"
    return rec.failure_kind or f"stopped_at_{rec.stage}"


FAILURE_REASONS_SHOWN = 12
"""Rows of the report's "why samples failed" table (metrics.json keeps them all)."""

_QUOTED = re.compile(r"'[^'\n]{0,80}'|\"[^\"\n]{0,80}\"")
_NUMBER = re.compile(r"\d+(\.\d+)?")


def failure_reason(rec: TurnRecord) -> str:
    """The reason of a failed record with what varies between candidates taken out (quoted names, numbers), so
    that candidates failing the same way count together: the static checks' first reason, nvcc's first error."""
    msg = (rec.failure_message or "").strip()
    if rec.failure_kind in ("compile_error", "link_error"):
        m = re.search(r"error\s*:\s*(.+)", msg)
        msg = m.group(1) if m else msg
    msg = msg.split("\n", 1)[0].split("; ", 1)[0]
    msg = _NUMBER.sub("N", _QUOTED.sub(lambda q: q.group(0)[0] + "…" + q.group(0)[0], msg))
    return (msg[:157] + "...") if len(msg) > 160 else (msg or "(no message)")


def failure_reasons(finals: Sequence[TurnRecord | None]) -> list[dict[str, Any]]:
    """The final outcomes that failed (scored, not correct), grouped by category and :func:`failure_reason`,
    most frequent first: category, reason, samples, tasks, an example task."""
    groups: dict[tuple[str, str], list[TurnRecord]] = {}
    for r in finals:
        if r is None or r.status != "scored" or r.correct:
            continue
        groups.setdefault((outcome_category(r), failure_reason(r)), []).append(r)
    rows = [{"category": cat, "reason": why, "samples": len(rs), "tasks": len({r.task_id for r in rs}),
             "example_task": min(r.task_id for r in rs)} for (cat, why), rs in groups.items()]
    return sorted(rows, key=lambda d: (-d["samples"], d["category"], d["reason"]))


def _category_order(cat: str) -> tuple[int, int, str]:
    if cat == "correct":
        return (0, 0, cat)
    if cat in _FAILURE_ORDER:
        return (1, _FAILURE_ORDER.index(cat), cat)
    if cat.startswith("stopped_at_") and cat[len("stopped_at_"):] in _STAGE_ORDER:
        return (2, _STAGE_ORDER.index(cat[len("stopped_at_"):]), cat)
    return (3, {"policy_error": 0, "unscored": 1}.get(cat, -1), cat)


def _ordered_counts(cats: Sequence[str]) -> dict[str, int]:
    c = Counter(cats)
    return {k: c[k] for k in sorted(c, key=_category_order)}


# ---------------------------------------------------------------------------------------------------- metrics

def _samples_by_task(by_task: Mapping[str, Sequence[Sequence[TurnRecord]]],
                     pick: Callable[[Sequence[TurnRecord]], TurnRecord | None]) -> dict[str, list[SampleOutcome]]:
    out: dict[str, list[SampleOutcome]] = {}
    for t, trajs in by_task.items():
        picked = [pick(traj) for traj in trajs]
        out[t] = [SampleOutcome.of(r) for r in picked if r is not None]
    return out


def _turn_row(turn: int, s: Summary) -> dict[str, Any]:
    a = s.at(1)
    return {"turn": turn, "samples": s.samples, "unscored_samples": s.unscored_samples,
            "pass_at_1": a.pass_at_k if a else None, "speedup_geomean_at_1": a.speedup_geomean if a else None,
            "speedup_tasks_at_1": a.speedup_tasks if a else 0, "fast_1_at_1": a.fast_p[p_key(1.0)] if a else None,
            "compile_rate": s.compile_rate}


def _quantile(xs: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    v = sorted(xs)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def build_metrics(run: Run, settings: MetricSettings = MetricSettings()) -> dict[str, Any]:
    """Everything ``metrics.json`` holds (a JSON-ready dict); the module docstring gives the semantics."""
    h = run.header
    trajs = run.trajectories()
    with_records = {task for task, _ in trajs}
    tasks = [t for t in run.task_ids() if t in with_records]
    last_turn = max((r.turn for r in run.records), default=-1)
    by_task: dict[str, list[tuple[TurnRecord, ...]]] = {t: [] for t in tasks}
    for (task, _), traj in trajs.items():
        by_task[task].append(traj)

    def final(traj):
        return final_by_turn(traj, last_turn, settings)

    final_by_task = _samples_by_task(by_task, final)
    summary = summarize(final_by_task, settings)
    turn_settings = replace(settings, ks=(1,), fast_p_thresholds=(1.0,))
    by_turn, best_turn = [], []
    for t in range(last_turn + 1):
        by_turn.append(_turn_row(t, summarize(
            _samples_by_task(by_task, lambda traj: outcome_at(traj, t)), turn_settings)))
        best_turn.append(_turn_row(t, summarize(
            _samples_by_task(by_task, lambda traj: final_by_turn(traj, t, settings)), turn_settings)))

    finals = {key: final(traj) for key, traj in trajs.items()}
    first = {}
    for r in run.records:
        first.setdefault(r.task_id, r)

    groups: dict[str, dict[str, Any]] = {"family": {}, "level": {}, "task_kind": {}}
    for attr in ("family", "level", "task_kind"):
        names: dict[str, list[str]] = {}
        for t in tasks:
            r = first[t]
            if attr == "task_kind" and (r.family is not None or r.level is not None):
                continue
            name = getattr(r, attr)
            if name is not None:
                names.setdefault(name, []).append(t)
        for name in sorted(names):
            groups[attr][name] = summarize({t: final_by_task[t] for t in names[name]}, settings).to_dict()

    per_task = []
    for t in tasks:
        recs = [final(traj) for traj in by_task[t]]
        st = summarize({t: final_by_task[t]}, replace(settings, ks=(1,), fast_p_thresholds=(1.0,)))
        speeds = [r.speedup for r in recs if r.status == "scored" and r.correct and r.speedup is not None]
        a1 = st.at(1)
        failed = [r for r in recs if _counts(r, settings) and not r.correct]
        worst_first = max(failed, key=lambda r: _rank(r, settings), default=None)  # the one that got furthest
        per_task.append({
            "task_id": t, "task_kind": first[t].task_kind, "family": first[t].family, "level": first[t].level,
            "trajectories": len(recs), "n": st.samples, "unscored": st.unscored_samples,
            "policy_errors": st.policy_error_samples, "compiled": st.compiled_samples, "correct": st.correct_samples,
            "best_speedup": max(speeds) if speeds else None,
            "speedup_at_1": a1.speedup_geomean if a1 else None,
            "furthest_failure": None if worst_first is None else {
                "kind": outcome_category(worst_first), "stage": worst_first.stage,
                "message": (worst_first.failure_message or "")[:FAILURE_MESSAGE_CHARS]},
            "failing_stages": _ordered_counts([outcome_category(r) for r in recs if outcome_category(r) != "correct"]),
        })

    stops = Counter((traj[-1].stop or "unfinished") for traj in trajs.values())
    recs = run.records
    prompt = [r.prompt_tokens for r in recs if r.prompt_tokens is not None]
    completion = [r.completion_tokens for r in recs if r.completion_tokens is not None]
    lat = [r.latency_s for r in recs]
    # a batched call's wall is on each of its answers: counted once, as a share per answer
    gen_wall = math.fsum(r.latency_s / (r.gen_batch or 1) for r in recs)
    n_traj = len(trajs)
    tokens = {
        "records": len(recs),
        "records_with_prompt_tokens": len(prompt), "records_with_completion_tokens": len(completion),
        "prompt_tokens_total": sum(prompt), "completion_tokens_total": sum(completion),
        "prompt_tokens_per_sample": sum(prompt) / n_traj if n_traj else None,
        "completion_tokens_per_sample": sum(completion) / n_traj if n_traj else None,
        "completion_tokens_per_turn": sum(completion) / len(completion) if completion else None,
    }
    latency = {
        "records": len(lat), "total_s": math.fsum(lat) if lat else 0.0,
        "mean_s": statistics.fmean(lat) if lat else None, "median_s": statistics.median(lat) if lat else None,
        "p90_s": _quantile(lat, 0.9) if lat else None, "max_s": max(lat) if lat else None,
        "per_sample_s": math.fsum(lat) / n_traj if n_traj else None,
        "batched_records": sum(r.gen_batch is not None and r.gen_batch > 1 for r in recs),
        "generation_wall_s": gen_wall,
        "answers_per_min": 60.0 * len(recs) / gen_wall if gen_wall > 0 else None,
    }
    paper = None
    if h.benchmark in PAPER_BENCHMARK:
        name = PAPER_BENCHMARK[h.benchmark]
        entry = PAPER_RESULTS[name]
        paper = {"benchmark": name, "tasks": entry["tasks"], "source": PAPER_SOURCE,
                 "models": {m: {str(k): {"pass": ps[0], "speedup_geomean": ps[1]} for k, ps in by_k.items()}
                            for m, by_k in entry["models"].items()}}
    return {
        "run": {"run_dir": str(run.run_dir), "policy": h.policy, "benchmark": h.benchmark, "tasks": h.tasks,
                "n_tasks": len(h.task_ids), "samples": h.samples, "turns": h.turns, "temperature": h.temperature,
                "top_p": h.top_p, "max_new_tokens": h.max_new_tokens, "seed": h.seed, "compile_only": h.compile_only,
                "reward_preset": h.reward_preset, "target_speedup": h.target_speedup, "created_at": h.created_at,
                "cudaperf_version": h.cudaperf_version},
        "load": {"records": len(recs), "trajectories": n_traj, "turns_reached": last_turn + 1,
                 "warnings": list(run.warnings)},
        "settings": settings.to_dict(),
        "final": summary.to_dict(),
        "by_turn": by_turn,
        "best_by_turn": best_turn,
        "stages": _ordered_counts([outcome_category(r) for r in finals.values() if r is not None]),
        "failure_reasons": failure_reasons(list(finals.values())),
        "groups": groups,
        "stop_reasons": {k: stops[k] for k in (*STOP_REASONS, "unfinished") if stops[k]},
        "finish_reasons": dict(sorted(Counter(r.finish_reason for r in recs).items())),
        "tokens": tokens,
        "latency_s": latency,
        "tasks": per_task,
        "final_speedups": sorted(r.speedup for r in finals.values()
                                 if r is not None and r.status == "scored" and r.correct and r.speedup is not None),
        "excluded": dict(h.excluded),
        "tasks_without_records": [t for t in h.task_ids if t not in with_records],
        "paper": paper,
    }


# ---------------------------------------------------------------------------------------------------- plots

def _canvas(width_in: float, height_in: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _plot_turns(m: dict[str, Any]) -> bytes:
    from matplotlib.ticker import FuncFormatter

    fig = _canvas(10, 3.6)
    ax1, ax2 = fig.subplots(1, 2)
    turns = [r["turn"] for r in m["by_turn"]]

    def series(rows, key):
        return [math.nan if r[key] is None else r[key] for r in rows]

    for key, label, color in (("pass_at_1", "pass@1", "tab:blue"), ("fast_1_at_1", "fast_1@1", "tab:orange")):
        ax1.plot(turns, series(m["best_by_turn"], key), "-o", color=color, label=f"{label}, best by turn")
        ax1.plot(turns, series(m["by_turn"], key), "--s", color=color, alpha=0.6, label=f"{label}, at turn")
    ax1.set_ylim(-0.02, 1.02)
    ax1.set_xlabel("turn (0 = first attempt)")
    ax1.set_ylabel("share of tasks")
    ax1.set_title("correctness by turn")
    ax1.legend(fontsize=8, loc="best")
    sp_best = series(m["best_by_turn"], "speedup_geomean_at_1")
    sp_at = series(m["by_turn"], "speedup_geomean_at_1")
    if all(math.isnan(v) for v in sp_best + sp_at):
        ax2.text(0.5, 0.5, "no correct sample", ha="center", va="center", transform=ax2.transAxes, fontsize=13)
        ax2.set_yticks([])
        ax2.set_xticks(turns)
    else:
        ax2.plot(turns, sp_best, "-o", color="tab:green", label="best by turn")
        ax2.plot(turns, sp_at, "--s", color="tab:green", alpha=0.6, label="at turn")
        ax2.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax2.set_yscale("log", base=2)
        ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax2.legend(fontsize=8, loc="best")
    ax2.set_xlabel("turn (0 = first attempt)")
    ax2.set_ylabel("geo-mean speedup@1")
    ax2.set_title("speed by turn (tasks with a correct sample)", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_xticks(turns)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def _plot_stages(stages: Mapping[str, int]) -> bytes:
    from matplotlib.ticker import MaxNLocator

    cats = list(stages)
    fig = _canvas(7, 0.45 * max(len(cats), 2) + 1.2)
    ax = fig.subplots()
    colors = ["tab:green" if c == "correct" else "tab:gray" if c in ("unscored", "policy_error") else "tab:red"
              for c in cats]
    ys = list(range(len(cats)))[::-1]
    ax.barh(ys, [stages[c] for c in cats], color=colors)
    ax.set_yticks(ys)
    ax.set_yticklabels(cats)
    for y, c in zip(ys, cats):
        ax.text(stages[c], y, f" {stages[c]}", va="center", fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("samples (final outcome)")
    ax.set_title("where the final samples ended")
    ax.margins(x=0.12)
    fig.tight_layout()
    return _png(fig)


def _plot_speedups(speedups: Sequence[float]) -> bytes:
    from matplotlib.ticker import MaxNLocator

    logs = [math.log2(s) for s in speedups]
    lo, hi = math.floor(min(logs) * 2) / 2, math.ceil(max(logs) * 2) / 2
    if hi <= lo:
        hi = lo + 0.5
    lo, hi = min(lo, -0.5), max(hi, 0.5)  # keep 1x in view
    bins = [lo + 0.5 * i for i in range(int(round((hi - lo) / 0.5)) + 1)]
    fig = _canvas(7, 3.4)
    ax = fig.subplots()
    ax.hist(logs, bins=bins, color="tab:green", edgecolor="white")
    ax.axvline(0.0, color="black", lw=1.2, ls="--", label="1x (baseline speed)")
    ticks = list(range(math.floor(lo), math.ceil(hi) + 1))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{2.0 ** t:g}x" for t in ticks], fontsize=8)
    ax.set_xlabel("speedup (log2 scale, bins of half a doubling)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("correct samples")
    ax.set_title(f"speedups of the {len(speedups)} correct final samples")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


# ---------------------------------------------------------------------------------------------------- html

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
td.l .id, .id { text-align: left; font-family: ui-monospace, monospace; word-break: break-all; max-width: 28em; }
.note { color: #555; font-size: 0.88em; } .warn { color: #8a4b00; }
img { max-width: 100%; display: block; margin: 0.6em 0; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pct(x: float | None) -> str:
    return "&mdash;" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "&mdash;" if x is None else f"{x:.3g}x"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int | Sequence[int] = 1) -> str:
    """Cells are HTML already (escape before); ``left``: the first so many columns, or these columns, are
    left-aligned."""
    lcols = set(range(left)) if isinstance(left, int) else set(left)

    def cell(tag, i, c):
        return f'<{tag} class="l">{c}</{tag}>' if i in lcols else f"<{tag}>{c}</{tag}>"

    th = "".join(cell("th", i, h) for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _metrics_section(m: dict[str, Any]) -> str:
    f = m["final"]
    paper = m["paper"]
    models = list(paper["models"]) if paper else []
    head = ["k", "tasks", "pass@k", "speedup@k (geo-mean)", "tasks with a correct sample"]
    head += [f"paper: {_e(name)}" for name in models]
    rows = []
    ks = sorted({int(k) for k in f["at_k"]} | ({int(k) for mod in paper["models"].values() for k in mod}
                                               if paper else set()))
    for k in map(str, ks):
        a = f["at_k"].get(k)
        if a is None:
            row = [k, "0", "no task has n &ge; k", "&mdash;", "&mdash;"]
        else:
            sp = _x(a["speedup_geomean"]) if a["speedup_tasks"] else "no correct sample"
            row = [k, f"{a['tasks']}" + (f" ({a['tasks_n_below_k']} with n &lt; k left out)"
                                         if a["tasks_n_below_k"] else ""), _pct(a["pass_at_k"]), sp,
                   str(a["speedup_tasks"])]
        for name in models:
            ps = paper["models"][name].get(k)
            row.append(f"{100 * ps['pass']:g}% / {ps['speedup_geomean']:g}x" if ps else "&mdash;")  # as printed
        rows.append(row)
    out = ["<h2>Metrics (final outcome: best of each sample's turns)</h2>"]
    if not f["samples"]:
        out.append("<p><b>No counted sample</b>: nothing to compute metrics over.</p>")
    if rows:
        out.append(_table(head, rows))
    if f["samples"] and not f["correct_samples"]:
        out.append("<p><b>No correct sample</b> in this run: speedup@k is undefined and every fast_p is 0.</p>")
    out.append(f"<p>compile rate {_pct(f['compile_rate'])} ({f['compiled_samples']} of {f['samples']} counted "
               f"samples); {f['correct_samples']} correct ({f['correct_untimed_samples']} of them not timed); "
               f"{f['unscored_samples']} unscored (harness faults, not counted); {f['policy_error_samples']} policy "
               f"errors ({'counted as failures' if m['settings']['policy_errors_count_as_failures'] else 'not counted'}"
               f"); tasks counted: {f['tasks']}.</p>")
    if paper:
        out.append(f"<p class=\"note\">Paper ({_e(paper['benchmark'])}, {paper['tasks']} tasks): "
                   f"{_e(paper['source'])} The paper does not define its speedup@k; ours is the expected best "
                   "correct speedup of a k-draw given a correct one, geo-mean over tasks with a correct sample.</p>")
    if f["at_k"]:
        ps = m["settings"]["fast_p_thresholds"]
        rows = [[k] + [_pct(a["fast_p"][p_key(p)]) for p in ps] for k, a in f["at_k"].items()]
        out.append("<h3>fast_p@k: share of all counted tasks with a correct sample faster than p</h3>")
        out.append(_table(["k"] + [f"p = {p:g}" for p in ps], rows))
        out.append(f"<p class=\"note\">{_e(m['settings']['noise_margin_rule'])}.</p>")
    return "".join(out)


def _group_tables(m: dict[str, Any]) -> str:
    out = []
    titles = {"family": "By family", "level": "By level", "task_kind": "By task kind (tasks with no family or level)"}
    for attr, groups in m["groups"].items():
        if not groups:
            continue
        kmax = max((int(k) for g in groups.values() for k in g["at_k"]), default=1)
        rows = []
        for name, g in groups.items():
            a1, ak = g["at_k"].get("1"), g["at_k"].get(str(kmax))
            rows.append([f'<span class="id">{_e(name)}</span>', str(g["tasks"]), str(g["samples"]),
                         _pct(a1["pass_at_k"]) if a1 else "&mdash;", _pct(ak["pass_at_k"]) if ak else "&mdash;",
                         (_x(a1["speedup_geomean"]) + f" ({a1['speedup_tasks']})") if a1 and a1["speedup_tasks"]
                         else "no correct sample",
                         _pct(a1["fast_p"].get("1")) if a1 else "&mdash;", _pct(g["compile_rate"]),
                         str(g["unscored_samples"])])
        out.append(f"<h3>{titles[attr]}</h3>")
        out.append(_table([_e(attr), "tasks", "samples", "pass@1", f"pass@{kmax}", "speedup@1 (tasks)", "fast_1@1",
                           "compile rate", "unscored"], rows))
    return "<h2>Groups</h2>" + "".join(out) if out else ""


def _reasons_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    shown = rows[:FAILURE_REASONS_SHOWN]
    more = len(rows) - len(shown)
    note = (f"<p class=\"note\">Failed final outcomes grouped by reason (quoted names and numbers taken out); "
            f"{len(shown)} most frequent of {len(rows)}" + (f"; the other {more} are in metrics.json" if more else "")
            + ".</p>")
    return ("<h3>Why samples failed</h3>" + _table(["reason", "final outcome", "samples", "tasks", "e.g. task"],
            [[_e(d["reason"]), _e(d["category"]), str(d["samples"]), str(d["tasks"]), _e(d["example_task"])]
             for d in shown]) + note)


def _usage_section(m: dict[str, Any]) -> str:
    t, lat = m["tokens"], m["latency_s"]

    def num(v, fmt="{:,.0f}"):
        return "&mdash;" if v is None else fmt.format(v)

    rows = [["prompt tokens", num(t["prompt_tokens_total"]), num(t["prompt_tokens_per_sample"]),
             f"{t['records_with_prompt_tokens']} of {t['records']}"],
            ["completion tokens", num(t["completion_tokens_total"]), num(t["completion_tokens_per_sample"]),
             f"{t['records_with_completion_tokens']} of {t['records']}"]]
    out = ["<h2>Generation</h2>", _table(["", "total", "per sample", "turns that reported it"], rows)]
    out.append(_table(["latency of the call that made each answer", "total", "per sample", "mean per turn",
                       "median", "p90", "max"],
                      [["seconds", num(lat["total_s"], "{:,.1f}"), num(lat["per_sample_s"], "{:,.1f}"),
                        num(lat["mean_s"], "{:,.2f}"), num(lat["median_s"], "{:,.2f}"), num(lat["p90_s"], "{:,.2f}"),
                        num(lat["max_s"], "{:,.2f}")]]))
    note = (f"{lat['batched_records']} of {lat['records']} answers came from batched calls, whose wall is on each "
            "of their answers above; here it is counted once" if lat["batched_records"] else
            "every answer was a request of its own")
    out.append(_table(["generation wall", "answers per minute", ""],
                      [[num(lat["generation_wall_s"], "{:,.1f} s"), num(lat["answers_per_min"], "{:,.1f}"), _e(note)]]))
    if m["stop_reasons"]:
        out.append(_table(["why trajectories ended", "count"], [[_e(k), str(v)] for k, v in m["stop_reasons"].items()]))
    if m["finish_reasons"]:
        out.append(_table(["finish reason of the completions", "count"],
                          [[_e(k), str(v)] for k, v in m["finish_reasons"].items()]))
    return "".join(out)


def _tasks_section(m: dict[str, Any]) -> str:
    out = ["<h2>Tasks not in the metrics</h2>"]
    lists = [(m["excluded"], "excluded from the run (run.json)"),
             (m["final"]["uncounted_tasks"], "in the run, no counted sample"),
             ({t: "no record (the run did not reach it)" for t in m["tasks_without_records"]}, "without records")]
    any_ = False
    for items, title in lists:
        if items:
            any_ = True
            out.append(f"<h3>{len(items)} {_e(title)}</h3>")
            out.append(_table(["task", "why"], [[f'<span class="id">{_e(t)}</span>', _e(why)]
                                                for t, why in items.items()], left=2))
    if not any_:
        out.append("<p>None: every task of the run is counted.</p>")
    rows = []
    for t in m["tasks"]:
        fails = ", ".join(f"{_e(k)} {v}" for k, v in t["failing_stages"].items()) or "&mdash;"
        group = t["family"] or t["level"] or t["task_kind"]
        ff = t["furthest_failure"]
        furthest = "&mdash;" if ff is None else f"{_e(ff['kind'])} (stage {_e(ff['stage'])}): {_e(ff['message'])}"
        rows.append([f'<span class="id">{_e(t["task_id"])}</span>', _e(group),
                     _x(t["best_speedup"]) if t["best_speedup"] is not None
                     else "no correct sample" if t["n"] else "no counted sample",
                     f"{t['correct']} / {t['n']}", str(t["unscored"]), fails, furthest])
    out.append("<h2>Per task (final outcomes)</h2>")
    if rows:
        out.append(_table(["task", "family / level / kind", "best speedup", "correct / n", "unscored",
                           "failing stages (final samples, pipeline order)", "furthest failure"], rows,
                          left=(0, 1, 5, 6)))
    else:
        out.append("<p>No task has a record yet.</p>")
    return "".join(out)


def render_html(m: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The report page of a :func:`build_metrics` dict, and the names of the plots it inlines."""
    r = m["run"]
    plots: list[tuple[str, str, bytes]] = []
    if m["by_turn"]:
        plots.append(("turns", "pass@1, fast_1@1 and geo-mean speedup@1 by turn", _plot_turns(m)))
    if m["stages"]:
        plots.append(("stages", "final outcome of each sample", _plot_stages(m["stages"])))
    speeds = m["final_speedups"]
    if speeds:
        plots.append(("speedups", "speedup distribution of correct final samples", _plot_speedups(speeds)))

    def img(name):
        for n, alt, png in plots:
            if n == name:
                return f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{_e(alt)}">'
        return ""

    settings_rows = [["policy", _e(r["policy"])], ["benchmark", _e(r["benchmark"])], ["tasks", _e(r["tasks"])],
                     ["task count", str(r["n_tasks"])], ["samples per task", str(r["samples"])],
                     ["turn limit", str(r["turns"])], ["turns reached", str(m["load"]["turns_reached"])],
                     ["temperature / top_p", f"{r['temperature']:g} / {r['top_p']:g}"],
                     ["max new tokens", str(r["max_new_tokens"])], ["seed", str(r["seed"])],
                     ["reward preset", _e(r["reward_preset"])], ["target speedup", "none (turn limit only)" if r["target_speedup"] is None else f"{r['target_speedup']:g}x"],
                     ["compile only", "yes" if r["compile_only"] else "no"],
                     ["run created", _e(r["created_at"] or "not recorded")],
                     ["report written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")],
                     ["cudaperf version", _e(r["cudaperf_version"] or "not recorded")],
                     ["records / trajectories", f"{m['load']['records']} / {m['load']['trajectories']}"]]
    warn = ""
    if m["load"]["warnings"]:
        warn = ("<h3 class=\"warn\">Reading the run</h3><ul>"
                + "".join(f'<li class="warn">{_e(w)}</li>' for w in m["load"]["warnings"]) + "</ul>")
    turns = ("<h2>By turn</h2>" + img("turns")
             + "<p class=\"note\">At turn: each sample's record of that turn (its last one carried forward once it "
               "stopped). Best by turn: the best of its turns so far.</p>") if m["by_turn"] else ""
    stages = ("<h2>Stage breakdown</h2>" + img("stages")
              + _table(["final outcome", "samples"], [[_e(k), str(v)] for k, v in m["stages"].items()])
              + _reasons_table(m.get("failure_reasons") or [])) if m["stages"] else ""
    dist = "<h2>Speedup distribution</h2>" + (img("speedups") if speeds else
                                              "<p><b>No correct sample</b>: there is no speedup to plot.</p>")
    body = "".join([
        f"<h1>Evaluation report: {_e(r['policy'])} on {_e(r['benchmark'])}</h1>",
        f"<p class=\"note\">run directory {_e(Path(r['run_dir']).name)}</p>",
        "<h2>Run settings</h2>", _table(["setting", "value"], settings_rows, left=2), warn,
        _metrics_section(m), turns, stages, dist, _group_tables(m), _usage_section(m), _tasks_section(m),
    ])
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>cudaperf report: "
            f"{_e(r['policy'])} on {_e(r['benchmark'])}</title><style>{_CSS}</style></head><body>{body}</body></html>")
    return page, tuple(n for n, _, _ in plots)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_report(run_dir: str | Path, settings: MetricSettings = MetricSettings()) -> ReportPaths:
    """Read the run, write ``metrics.json`` and ``report.html`` into it (each replaced atomically). Raises as
    :func:`load_run`; needs matplotlib (``pip install 'cudaperf[plots]'``)."""
    run = load_run(run_dir)
    m = build_metrics(run, settings)
    page, plots = render_html(m)
    mj, rh = run.run_dir / "metrics.json", run.run_dir / "report.html"
    _write_atomic(mj, json.dumps(m, indent=2, allow_nan=False) + "\n")
    _write_atomic(rh, page)
    return ReportPaths(metrics_json=mj, report_html=rh, plots=plots)


def print_summary(metrics: Mapping[str, Any], console=None) -> None:
    """A compact table of a ``metrics.json`` dict: pass@k, speedup@k, fast_p@k for p in 1, 1.5, 2, compile rate,
    unscored count."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    r, f = metrics["run"], metrics["final"]
    table = Table(title=f"{r['policy']} on {r['benchmark']}: {f['tasks']} tasks, {r['samples']} samples x "
                        f"{r['turns']} turns (final outcome)")
    for col in ("k", "tasks", "pass@k", "speedup@k", "fast_1", "fast_1.5", "fast_2"):
        table.add_column(col, justify="right")

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    for k, a in f["at_k"].items():
        sp = f"{a['speedup_geomean']:.3g}x ({a['speedup_tasks']})" if a["speedup_tasks"] else "no correct sample"
        table.add_row(k, str(a["tasks"]), pct(a["pass_at_k"]), sp,
                      *(pct(a["fast_p"].get(p_key(p))) for p in (1.0, 1.5, 2.0)))
    table.caption = ("speedup@k: geo-mean over tasks with a correct sample (their count); fast_p: share of all tasks "
                     "with a correct sample faster than p, with the noise margin")
    console.print(table)
    console.print(f"compile rate {pct(f['compile_rate'])} of {f['samples']} counted samples; "
                  f"{f['correct_samples']} correct; {f['unscored_samples']} unscored (not counted); "
                  f"{f['policy_error_samples']} policy errors"
                  + (f"; {len(f['uncounted_tasks'])} task(s) without a counted sample" if f["uncounted_tasks"] else ""))
    reasons = metrics.get("failure_reasons") or []
    if reasons:  # what a user asks first of a low compile rate: what stopped the samples
        console.print("most frequent failures: " + "; ".join(
            f"{d['samples']} x {escape(d['category'])}: {escape(d['reason'][:90])}" for d in reasons[:3]),
            highlight=False)
    for w in metrics["load"]["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
