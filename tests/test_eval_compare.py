"""cudaperf compare: two constructed runs (the report tests' record builder) against hand-computed figures, the
gains and losses against the baseline, the warnings for runs that are not alike, archived metrics.json directories
(the H200 runs of session 18), the Markdown and JSON outputs, and the errors."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_eval_report import header, rec, write_run
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.eval.compare import compare, to_markdown
from cudaperf.eval.report import RunFormatError

SESSION18 = Path(__file__).resolve().parents[1] / "benchmarks/results/2026-12-01-h200/session18"
runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def two_runs(tmp_path):
    """base: t_a solved once in 3 (2x), t_b never; tuned: t_b solved twice (4x, 1x), t_a never (one compiles)."""
    base = write_run(tmp_path / "base", header(["t_a", "t_b"], samples=3, turns=1), [
        rec("t_a", 0, 0, "correct", 2.0), rec("t_a", 1, 0, "compile_error"), rec("t_a", 2, 0, "wrong_output"),
        rec("t_b", 0, 0, "wrong_output"), rec("t_b", 1, 0, "no_code"), rec("t_b", 2, 0, "compile_error")])
    tuned = write_run(tmp_path / "tuned", header(["t_a", "t_b"], samples=3, turns=1), [
        rec("t_a", 0, 0, "wrong_output"), rec("t_a", 1, 0, "compile_error"), rec("t_a", 2, 0, "compile_error"),
        rec("t_b", 0, 0, "correct", 4.0), rec("t_b", 1, 0, "correct", 1.0), rec("t_b", 2, 0, "wrong_output")])
    return base, tuned


def test_rows_gains_and_losses_are_the_runs(two_runs):
    cmp = compare(two_runs)
    base, tuned = cmp.rows
    assert [r.label for r in cmp.rows] == ["base", "tuned"] and cmp.ks == (1, 3)  # of the reported ks 1, 3, 5
    assert (base.tasks, base.counted_samples, base.correct_samples) == (2, 6, 1)
    assert base.compile_rate == pytest.approx(3 / 6)  # the correct one and the two wrong outputs
    assert base.pass_at[1] == pytest.approx((1 / 3 + 0) / 2) and base.pass_at[3] == pytest.approx(1 / 2)
    assert base.speedup_at_1 == pytest.approx(2.0) and base.speedup_tasks_at_1 == 1
    assert tuned.compile_rate == pytest.approx(4 / 6)
    assert tuned.pass_at[1] == pytest.approx((0 + 2 / 3) / 2) and tuned.pass_at[3] == pytest.approx(1 / 2)
    # speedup@1 of t_b: one draw from {4, 1, wrong}, given that it is correct: (4 + 1) / 2
    assert tuned.speedup_at_1 == pytest.approx(2.5) and tuned.speedup_tasks_at_1 == 1
    assert cmp.gains == {"tuned": ("t_b",)} and cmp.losses == {"tuned": ("t_a",)}
    assert cmp.warnings == ()
    md = to_markdown(cmp)
    assert md.splitlines()[0].startswith("| run | policy | tasks | samples | compile | pass@1 | pass@3 | speedup@1")
    assert "| tuned | replay:test | 2 | 6 | 66.7% | 33.3% | 50.0% | 2.5x (1) |" in md
    assert "tuned against base: tasks gained 1 (t_b); lost 1 (t_a)" in md


def test_runs_that_differ_are_said_to(two_runs, tmp_path):
    base, _ = two_runs
    other = write_run(tmp_path / "other", replace(header(["t_a", "t_c"], samples=5, turns=1), compile_only=True), [
        rec("t_a", s, 0, "correct", 1.5) for s in range(5)] + [rec("t_c", s, 0, "wrong_output") for s in range(5)])
    cmp = compare([base, other], labels=["A", "B"])
    assert cmp.ks == (1, 3)  # the largest reported k that both runs' samples allow
    text = " ".join(cmp.warnings)
    assert "B: samples 5, A: 3" in text and "B: compile_only True, A: False" in text
    assert "B and A hold other tasks: 1 only in B, 1 only in A" in text
    with pytest.raises(ValueError, match="labels must differ"):
        compare([base, other], labels=["A", "A"])
    with pytest.raises(ValueError, match="2 run directories but 1 labels"):
        compare([base, other], labels=["A"])
    with pytest.raises(RunFormatError, match="neither an evaluation run"):
        compare([base, tmp_path])
    with pytest.raises(RunFormatError, match="no such directory"):
        compare([tmp_path / "nope"])


def test_archived_h200_runs_compare_from_their_metrics(tmp_path):
    """Session 18's evaluations of the embedded model before and after 3 minutes of SFT (metrics.json only)."""
    if not (SESSION18 / "eval-base" / "metrics.json").is_file():
        pytest.skip("session 18's records are not in this checkout")
    out = tmp_path / "cmp.json"
    r = runner.invoke(app, ["compare", str(SESSION18 / "eval-base"), str(SESSION18 / "eval-sft-plain"),
                            "--label", "base", "--label", "plain", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "final outcome of each run" in r.output and "plain against base: tasks gained 0; lost 0" in flat(r.output)
    data = json.loads(out.read_text())
    base, plain = data["runs"]
    assert base["counted_samples"] == plain["counted_samples"] == 285 and base["tasks"] == 57
    assert base["compile_rate"] == plain["compile_rate"] == 0.0
    # the SFT run's answers end by themselves more often (161 of 285 against 69, docs/BENCHMARKS.md session 18)
    assert plain["stopped_share"] == pytest.approx(161 / 285) and base["stopped_share"] == pytest.approx(69 / 285)
    md = runner.invoke(app, ["compare", str(SESSION18 / "eval-base"), str(SESSION18 / "eval-sft-cuset"), "--markdown"])
    assert md.exit_code == 0 and md.output.startswith("| run | policy |")


def test_cli_errors(tmp_path, two_runs):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.json").write_text("{not json")
    r = runner.invoke(app, ["compare", str(two_runs[0]), str(bad)])
    assert r.exit_code == 2 and "not JSON" in flat(r.output)
    r = runner.invoke(app, ["compare", str(two_runs[0]), str(two_runs[1]), "--label", "x"])
    assert r.exit_code == 2 and "2 run directories but 1 labels" in flat(r.output)
    shutil.rmtree(bad)
