"""Evaluation runs side by side (``cudaperf compare RUN_DIR ...``): the base model against its fine-tuned adapters,
one model on two task splits, two endpoints on one benchmark.

Each run's metrics are computed from its records as ``cudaperf report`` computes them (:func:`build_metrics`; a
partial run too); a directory that holds only an archived ``metrics.json`` (no ``turns.jsonl``) is read from it.
One row a run: compile rate, pass@1 and pass@k (k the largest that every run's samples allow, of the reported ks),
speedup@1 (geo-mean over the tasks with a correct sample, and their count), fast_1@1, the unscored samples and
policy errors (never counted as failures), and the generation's answers a minute and tokens a turn.

What makes two rows comparable is checked and said, never silently assumed: another benchmark, another task set
(how many tasks each has that the first lacks), other samples, turns, temperature, top-p, token budget or
compile-only setting each give a warning. Against the first run (the baseline), each later run's *gains* are the
tasks it has a correct sample for and the baseline has none, its *losses* the reverse (task ids listed, up to
:data:`LISTED_TASKS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cudaperf.eval.report import RunFormatError, build_metrics, load_run

LISTED_TASKS = 8
"""Task ids listed a gain or loss row (the count is always whole)."""
COMPARED_SETTINGS = ("benchmark", "samples", "turns", "temperature", "top_p", "max_new_tokens", "compile_only")


@dataclass(frozen=True)
class RunRow:
    """One run's headline figures (fractions in [0, 1]; None where there is nothing to measure)."""

    label: str
    run_dir: str
    policy: str
    benchmark: str
    tasks_spec: str
    tasks: int
    """Tasks with a counted sample."""
    samples: int
    turns: int
    counted_samples: int
    compile_rate: float | None
    pass_at: dict[int, float | None]
    speedup_at_1: float | None
    speedup_tasks_at_1: int
    fast_1_at_1: float | None
    correct_samples: int
    unscored_samples: int
    policy_error_samples: int
    answers_per_min: float | None
    completion_tokens_per_turn: float | None
    stopped_share: float | None
    """Answers that ended by themselves (EOS), not at the token budget."""
    solved: frozenset[str] = field(default=frozenset(), repr=False)
    task_ids: frozenset[str] = field(default=frozenset(), repr=False)
    settings: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Comparison:
    rows: tuple[RunRow, ...]
    ks: tuple[int, ...]
    warnings: tuple[str, ...]
    gains: dict[str, tuple[str, ...]]
    """label -> tasks solved by that run and not by the first."""
    losses: dict[str, tuple[str, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks), "warnings": list(self.warnings),
                "runs": [{**{k: v for k, v in r.__dict__.items() if k not in ("solved", "task_ids", "pass_at")},
                          "pass_at": {str(k): v for k, v in r.pass_at.items()}, "solved_tasks": sorted(r.solved)}
                         for r in self.rows],
                "gains": {k: list(v) for k, v in self.gains.items()},
                "losses": {k: list(v) for k, v in self.losses.items()}}


def run_metrics(run_dir: str | Path) -> dict[str, Any]:
    """The metrics of a run directory: computed from its records, or its archived ``metrics.json``."""
    d = Path(run_dir)
    if not d.is_dir():
        raise RunFormatError(f"{d}: no such directory")
    if (d / "turns.jsonl").exists():
        return build_metrics(load_run(d))
    archived = d / "metrics.json"
    if archived.is_file():
        try:
            m = json.loads(archived.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RunFormatError(f"{archived}: not JSON ({exc})") from None
        if not isinstance(m, dict) or "run" not in m or "final" not in m:
            raise RunFormatError(f"{archived}: not a cudaperf metrics.json (no run and final sections)")
        return m
    raise RunFormatError(f"{d}: neither an evaluation run (turns.jsonl) nor its metrics.json: give a directory "
                         "that cudaperf eval wrote")


def _row(label: str, m: Mapping[str, Any]) -> RunRow:
    r, f = m["run"], m["final"]
    at = f.get("at_k", {})
    a1 = at.get("1") or {}
    recs = m.get("load", {}).get("records") or 0
    finish = m.get("finish_reasons") or {}
    tasks = m.get("tasks") or []
    return RunRow(
        label=label, run_dir=str(r.get("run_dir", "")), policy=str(r.get("policy", "")),
        benchmark=str(r.get("benchmark", "")), tasks_spec=str(r.get("tasks", "")), tasks=int(f.get("tasks", 0)),
        samples=int(r.get("samples", 0)), turns=int(r.get("turns", 0)), counted_samples=int(f.get("samples", 0)),
        compile_rate=f.get("compile_rate"),
        pass_at={int(k): v.get("pass_at_k") for k, v in at.items()},
        speedup_at_1=a1.get("speedup_geomean"), speedup_tasks_at_1=int(a1.get("speedup_tasks") or 0),
        fast_1_at_1=(a1.get("fast_p") or {}).get("1"), correct_samples=int(f.get("correct_samples", 0)),
        unscored_samples=int(f.get("unscored_samples", 0)), policy_error_samples=int(f.get("policy_error_samples", 0)),
        answers_per_min=(m.get("latency_s") or {}).get("answers_per_min"),
        completion_tokens_per_turn=(m.get("tokens") or {}).get("completion_tokens_per_turn"),
        stopped_share=(finish.get("stop", 0) / recs) if recs else None,
        solved=frozenset(t["task_id"] for t in tasks if t.get("correct")),
        task_ids=frozenset(t["task_id"] for t in tasks),
        settings={k: r.get(k) for k in COMPARED_SETTINGS})


def compare(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> Comparison:
    """The runs side by side, the first as the baseline (see the module docstring)."""
    if not run_dirs:
        raise ValueError("give at least one run directory")
    if labels is not None and len(labels) != len(run_dirs):
        raise ValueError(f"{len(run_dirs)} run directories but {len(labels)} labels")
    names = list(labels) if labels is not None else [Path(d).name or str(d) for d in run_dirs]
    if len(set(names)) != len(names):
        raise ValueError(f"labels must differ (got {names}): give --label for each run")
    rows = tuple(_row(n, run_metrics(d)) for n, d in zip(names, run_dirs))
    base = rows[0]
    warnings = []
    for r in rows[1:]:
        for k in COMPARED_SETTINGS:
            if r.settings.get(k) != base.settings.get(k):
                warnings.append(f"{r.label}: {k} {r.settings.get(k)!r}, {base.label}: {base.settings.get(k)!r}")
        only, missing = r.task_ids - base.task_ids, base.task_ids - r.task_ids
        if only or missing:
            warnings.append(f"{r.label} and {base.label} hold other tasks: {len(only)} only in {r.label}, "
                            f"{len(missing)} only in {base.label} (pass rates are over each run's own tasks)")
    common = set.intersection(*(set(r.pass_at) for r in rows))  # the ks every run reports
    top = max((k for k in common if all(k <= r.samples for r in rows)), default=None)
    ks = tuple(sorted(k for k in {1, top} if k is not None and k in common))
    gains = {r.label: tuple(sorted(r.solved - base.solved)) for r in rows[1:]}
    losses = {r.label: tuple(sorted(base.solved - r.solved)) for r in rows[1:]}
    return Comparison(rows=rows, ks=ks, warnings=tuple(warnings), gains=gains, losses=losses)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _speed(r: RunRow, none: str = "no correct sample") -> str:
    return none if r.speedup_at_1 is None else f"{r.speedup_at_1:.3g}x ({r.speedup_tasks_at_1})"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def table_rows(cmp: Comparison, policy: bool = True) -> tuple[list[str], list[list[str]]]:
    """Column heads and one row of cells a run (the Markdown table; the terminal one leaves the policy out and
    lists it below)."""
    head = ["run", *(["policy"] if policy else []), "tasks", "samples", "compile", *(f"pass@{k}" for k in cmp.ks),
            "speedup@1", "fast_1@1", "correct", "unscored", "policy errors", "answers/min", "tokens/turn", "EOS"]
    rows = []
    for r in cmp.rows:
        rows.append([r.label, *([r.policy] if policy else []), str(r.tasks), str(r.counted_samples),
                     _pct(r.compile_rate), *(_pct(r.pass_at.get(k)) for k in cmp.ks), _speed(r),
                     _pct(r.fast_1_at_1), str(r.correct_samples), str(r.unscored_samples),
                     str(r.policy_error_samples), _num(r.answers_per_min), _num(r.completion_tokens_per_turn, ".0f"),
                     _pct(r.stopped_share)])
    return head, rows


def _listed(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:LISTED_TASKS])
    return f"{len(ids)}" + (f" ({shown}{', ...' if len(ids) > LISTED_TASKS else ''})" if ids else "")


def to_markdown(cmp: Comparison) -> str:
    """A Markdown table (for docs/BENCHMARKS.md), then the gains, losses and warnings as lines."""
    head, rows = table_rows(cmp)
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in esc]
    base = cmp.rows[0].label
    for label in cmp.gains:
        lines.append(f"\n{label} against {base}: tasks gained {_listed(cmp.gains[label])}; "
                     f"lost {_listed(cmp.losses[label])}")
    lines += [f"\nwarning: {w}" for w in cmp.warnings]
    return "\n".join(lines) + "\n"


def print_comparison(cmp: Comparison, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title="final outcome of each run", caption="n: counted samples (not the unscored); pass@k: Chen "
                  "et al.'s estimator; speedup@1: geo-mean over the tasks with a correct sample (their count)")
    table.add_column("run", no_wrap=True, min_width=min(24, max(len(r.label) for r in cmp.rows)))
    for h in ["tasks", "n", "compile", *(f"pass@{k}" for k in cmp.ks), "speedup@1", "fast_1@1"]:
        table.add_column(h, justify="right", no_wrap=True)
    for r in cmp.rows:
        table.add_row(escape(r.label), str(r.tasks), str(r.counted_samples), _pct(r.compile_rate),
                      *(_pct(r.pass_at.get(k)) for k in cmp.ks), _speed(r, "-"), _pct(r.fast_1_at_1))
    console.print(table)
    for r in cmp.rows:
        console.print(f"{escape(r.label)}: {escape(r.policy)} on {escape(r.tasks_spec)} ({r.samples} samples x "
                      f"{r.turns} turns, {escape(r.run_dir)}); {r.correct_samples} correct, {r.unscored_samples} "
                      f"unscored, {r.policy_error_samples} policy errors, {_num(r.answers_per_min)} answers/min, "
                      f"{_num(r.completion_tokens_per_turn, '.0f')} tokens a turn, {_pct(r.stopped_share)} ended by EOS",
                      highlight=False)
    base = cmp.rows[0].label
    for label in cmp.gains:
        console.print(f"{escape(label)} against {escape(base)}: tasks gained {escape(_listed(cmp.gains[label]))}; "
                      f"lost {escape(_listed(cmp.losses[label]))}", highlight=False)
    for w in cmp.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


__all__ = ["Comparison", "LISTED_TASKS", "RunRow", "compare", "print_comparison", "run_metrics", "table_rows",
           "to_markdown"]
