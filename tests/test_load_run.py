"""benchmarks/load_run.py on this machine: the real batch executor over honest dataset variants and copies of the
adversarial suite's whole-program entries (no GPU: what the CPU decides must match, the rest stays unscored), and
a rerun that resumes without redoing or duplicating a scored result."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "load_run", Path(__file__).resolve().parents[1] / "benchmarks" / "load_run.py")
load_run = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(load_run)


def _scored_keys(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["task_id"], r["candidate_id"]) for r in rows if r["status"] == "scored"]


def test_hostile_copies_are_distinct_sources_of_every_entry():
    tasks, rows, entry_of, left_out = load_run.hostile_copies(3, {"c_program"})
    entries = [e for e in load_run.suite.load_manifest() if e["task_kind"] == "c_program"]
    assert len(rows) == 3 * len(entries) and not left_out
    assert len({text for _, _, text in rows}) == len(rows), "a copy is not a distinct source"
    assert {e["file"] for e in entry_of.values()} == {e["file"] for e in entries}
    assert set(tasks) == {"collatz_longest"}


def test_load_run_decides_what_the_cpu_can_and_resumes(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--honest", "2", "--clean", "1", "--hostile-copies", "2",
            "--hostile-kinds", "c_program", "--budget-ms", "50"]
    assert load_run.main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    load = summary["batches"]["load"]
    n_entries = sum(e["task_kind"] == "c_program" for e in load_run.suite.load_manifest())
    assert load["jobs"] == 2 + 2 * n_entries and load["hostile_jobs"] == 2 * n_entries
    assert load["results"] == load["jobs"], "a job has no result"
    assert load["hostile_unexpected"] == 0, load["hostile_unexpected_list"]
    assert summary["batches"]["clean"]["results"] == 1
    if not summary["gpu"]:  # the static verdicts came, nothing was run
        assert load["verdicts"].get("static_check", 0) >= 2 * 6
        assert "correct" not in load["verdicts"]
    first = _scored_keys(tmp_path / "load.jsonl")
    assert first and len(first) == len(set(first))

    assert load_run.main(args) == 0  # a rerun: every scored job skipped, none written twice
    again = _scored_keys(tmp_path / "load.jsonl")
    assert sorted(again) == sorted(first)
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["load"]["calls"] == 2 and progress["load"]["last_call"]["new_scored"] == 0
    err = capsys.readouterr().err
    assert "left for a rerun" in err
    assert "load: " in err and " s: compile " in err  # the batch's progress, logged while it runs


def test_progress_is_logged_per_stage_at_its_end_and_sparingly_between():
    lines: list[str] = []
    progress = load_run.progress_log("load", lines.append, every_s=3600)
    for k in range(1, 6):
        progress("compile", k, 5)
    progress("run", 1, 5)
    progress("run", 2, 5)
    assert [line.split(": ", 2)[2] for line in lines] == ["compile 1/5", "compile 5/5", "run 1/5"]


def test_honest_rows_reuse_the_pool_as_distinct_sources():
    tasks, pool = load_run.honest_pool(7, max_tasks=3)
    assert pool and {t for t, _, _ in pool} <= set(tasks) and len({t for t, _, _ in pool}) == 3
    rows = load_run.honest_rows(pool, 2 * len(pool) + 1)
    assert len(rows) == 2 * len(pool) + 1
    assert len({c for _, c, _ in rows}) == len(rows) and len({text for _, _, text in rows}) == len(rows)
    assert rows[:len(pool)] == pool  # each variant once first, unchanged
    assert rows[len(pool)][1] == pool[0][1] + "#1" and rows[len(pool)][2].endswith("</OUTPUT_CUDA>\n")
    assert load_run.honest_rows(pool, 2) == pool[:2]


def test_a_hostile_speedup_above_its_entrys_cap_is_unexpected():
    """The judge holds credited hostile results to their manifest cap, not only to the verdict: the H200's record of
    saxpy_pinned_left_probe.cu (load run, session 27: correct, 1.33x) is expected under the entry's cap and counts
    as unexpected under a lower one."""
    from cudaperf.harness.result import EvaluationResult

    record = json.loads((Path(__file__).parent / "fixtures" / "trust" / "h200_pinned_left_probe_result.json")
                        .read_text())
    r = EvaluationResult.from_dict(record)
    assert r.correct and r.speedup is not None and r.speedup > 1.0
    entry = next(e for e in load_run.suite.load_manifest() if e["file"].endswith("saxpy_pinned_left_probe.cu"))
    assert r.speedup <= entry["max_speedup"]
    assert load_run.judge([r], {r.candidate_id: entry}, gpu=False)["hostile_unexpected"] == 0
    capped = {**entry, "max_speedup": r.speedup * 0.99}
    fig = load_run.judge([r], {r.candidate_id: capped}, gpu=False)
    assert fig["hostile_unexpected"] == 1 and fig["hostile_unexpected_list"][0]["speedup"] == r.speedup


def test_the_hostile_table_has_a_row_per_entry_with_its_verdict_and_match():
    from cudaperf.harness.result import EvaluationResult

    record = json.loads((Path(__file__).parent / "fixtures" / "trust" / "h200_pinned_left_probe_result.json")
                        .read_text())
    r = EvaluationResult.from_dict(record)
    entry = next(e for e in load_run.suite.load_manifest() if e["file"].endswith("saxpy_pinned_left_probe.cu"))
    rows = load_run.hostile_table([r], {r.candidate_id: entry}, gpu=False).splitlines()
    assert len(rows) == 3 and rows[2].startswith(f"| `{entry['file']}` | c_function |")
    assert f"timed {r.speedup:.2f}x" in rows[2] and "| timed | yes |" in rows[2]
    low = load_run.hostile_table([r], {r.candidate_id: {**entry, "max_speedup": 1.0}}, gpu=False).splitlines()
    assert "| timed | NO |" in low[2]
