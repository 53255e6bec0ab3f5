"""The run report: metrics.json against hand-computed values of a small run (3 tasks x 4 samples x 2 turns),
carried-forward and best-by-turn semantics, reading errors (no run, malformed, torn, duplicate lines), and
report.html: self-contained, one inlined PNG per plot, strings from the run escaped."""

from __future__ import annotations

import base64
import io
import json
import math
import re

import pytest
from rich.console import Console

from cudaperf.eval.metrics import MetricSettings
from cudaperf.eval.records import RunHeader, TurnRecord
from cudaperf.eval.report import (
    PAPER_RESULTS,
    RunFormatError,
    RunLoadWarning,
    best_by_turn,
    build_metrics,
    load_run,
    outcome_at,
    print_summary,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def header(task_ids, benchmark="c_test", samples=4, turns=2, **kw) -> RunHeader:
    return RunHeader(policy="replay:test", tasks="c_test", benchmark=benchmark, task_ids=tuple(task_ids),
                     samples=samples, turns=turns, temperature=0.7, top_p=0.9, max_new_tokens=1536, seed=0,
                     compile_only=False, reward_preset="paper", target_speedup=10.0,
                     created_at="2026-12-01T10:00:00Z", cudaperf_version="0.1.0", **kw)


def rec(task, sample, turn, outcome, speedup=None, *, family="saxpy", level=None, stop=None, message=None,
        candidate_cv=None, baseline_cv=None, task_kind="c_function") -> TurnRecord:
    """outcome: ``correct``, ``unscored``, ``policy_error`` or a failure kind."""
    compiled = outcome in ("correct", "wrong_output", "timeout", "crash")
    stage = {"correct": "timed" if speedup else "correct", "wrong_output": "ran", "timeout": "compiled",
             "crash": "compiled", "compile_error": "checked", "no_code": "none", "unscored": "compiled",
             "policy_error": "none"}[outcome]
    status = outcome if outcome in ("unscored", "policy_error") else "scored"
    failure = None if outcome in ("correct", "policy_error") else ("harness_error" if outcome == "unscored"
                                                                   else outcome)
    return TurnRecord(
        task_id=task, task_kind=task_kind, sample=sample, turn=turn, candidate_id=f"s{sample}-t{turn}",
        family=family, level=level, status=status, stage=stage, compiled=compiled, correct=outcome == "correct",
        failure_kind=failure, failure_message=message or (None if failure is None else f"{failure} here"),
        speedup=speedup, candidate_cv=candidate_cv, baseline_cv=baseline_cv, kernel_ms=None, memcpy_ms=None,
        reward=None if status != "scored" else 1.0, reward_terms={}, features={}, prompt_tokens=100,
        completion_tokens=50, finish_reason="stop", latency_s=1.0, feedback="", stop=stop)


def write_run(d, hdr: RunHeader, records, tail: str = ""):
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps(hdr.to_dict()))
    (d / "turns.jsonl").write_text("".join(r.to_json() + "\n" for r in records) + tail)
    return d


def small_run_records():
    """3 tasks x 4 samples x up to 2 turns (the expected figures are worked out in the tests)."""
    return [
        # t_a (saxpy): final = [4 (turn 1), 2 (turn 0 beats the turn-1 1x), compile_error, 8 (solved at turn 0)]
        rec("t_a", 0, 0, "wrong_output"), rec("t_a", 0, 1, "correct", 4.0, stop="turn_limit"),
        rec("t_a", 1, 0, "correct", 2.0), rec("t_a", 1, 1, "correct", 1.0, stop="turn_limit"),
        rec("t_a", 2, 0, "compile_error"), rec("t_a", 2, 1, "compile_error", stop="repeated_failure"),
        rec("t_a", 3, 0, "correct", 8.0, stop="solved"),
        # t_b (stencil): final = [3 (turn 1, after an unscored turn 0), wrong_output, wrong_output, timeout]
        rec("t_b", 0, 0, "unscored", family="stencil"),
        rec("t_b", 0, 1, "correct", 3.0, family="stencil", stop="turn_limit"),
        rec("t_b", 1, 0, "no_code", family="stencil"),
        rec("t_b", 1, 1, "wrong_output", family="stencil", stop="turn_limit"),
        rec("t_b", 2, 0, "wrong_output", family="stencil"),
        rec("t_b", 2, 1, "wrong_output", family="stencil", stop="repeated_failure"),
        rec("t_b", 3, 0, "compile_error", family="stencil"),
        rec("t_b", 3, 1, "timeout", family="stencil", stop="turn_limit"),
        # t_c (saxpy): every turn unscored: reported, not counted
        *[rec("t_c", s, t, "unscored", stop="turn_limit" if t == 1 else None) for s in range(4) for t in range(2)],
    ]


@pytest.fixture
def small_run(tmp_path):
    return write_run(tmp_path / "run", header(["t_a", "t_b", "t_c"], excluded={"t_x": "defective reference"}),
                     small_run_records())


# ---------------------------------------------------------------------------------------------------- metrics

def test_final_summary_hand_computed(small_run):
    m = build_metrics(load_run(small_run))
    f = m["final"]
    assert f["tasks"] == 2 and f["uncounted_tasks"] == {"t_c": "all 4 samples unscored"}
    assert (f["samples"], f["unscored_samples"], f["correct_samples"]) == (8, 4, 4)
    assert f["compile_rate"] == pytest.approx(7 / 8)          # t_a 3 of 4, t_b 4 of 4
    a1, a3 = f["at_k"]["1"], f["at_k"]["3"]
    assert a1["pass_at_k"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert a1["speedup_geomean"] == pytest.approx(math.sqrt(14 / 3 * 3))   # t_a mean(4, 2, 8); t_b 3
    assert a1["speedup_tasks"] == 2
    assert a1["fast_p"]["1"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert a1["fast_p"]["2"] == pytest.approx((2 / 4 + 1 / 4) / 2)       # 2.0 is not > 2
    assert a1["fast_p"]["3"] == pytest.approx((2 / 4 + 0) / 2)           # 3.0 is not > 3
    # pass@3: t_a 1 (n - c = 1 < 3), t_b 1 - C(3,3)/C(4,3) = 3/4
    assert a3["pass_at_k"] == pytest.approx((1 + 3 / 4) / 2)
    # speedup@3: t_a over [8, 4, 2, 0]: 8*3/4 + 4*1/4 = 7; t_b over [3, 0, 0, 0]: (3*3/4) / (3/4) = 3
    assert a3["speedup_geomean"] == pytest.approx(math.sqrt(7 * 3))
    assert "5" not in f["at_k"]                               # n = 4 < 5


def test_per_turn_carries_forward_and_best_by_turn(small_run):
    m = build_metrics(load_run(small_run))
    t0, t1 = m["by_turn"]
    # turn 0: t_a [wrong, 2, compile_error, 8]; t_b [unscored (left out), no_code, wrong, compile_error]
    assert (t0["samples"], t0["unscored_samples"]) == (7, 5)
    assert t0["pass_at_1"] == pytest.approx((2 / 4 + 0 / 3) / 2)
    assert t0["speedup_geomean_at_1"] == pytest.approx(5.0) and t0["speedup_tasks_at_1"] == 1
    assert t0["fast_1_at_1"] == pytest.approx((2 / 4 + 0) / 2)
    assert t0["compile_rate"] == pytest.approx(4 / 7)
    # turn 1: t_a [4, 1, compile_error, 8 carried forward]; t_b [3, wrong, wrong, timeout]
    assert t1["samples"] == 8                                 # n stays: sample 3 of t_a is carried forward
    assert t1["pass_at_1"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert t1["speedup_geomean_at_1"] == pytest.approx(math.sqrt(13 / 3 * 3))
    assert t1["fast_1_at_1"] == pytest.approx((2 / 4 + 1 / 4) / 2)    # 1.0x is not faster than 1
    assert t1["compile_rate"] == pytest.approx(7 / 8)
    b0, b1 = m["best_by_turn"]
    assert b0 == t0
    # best by turn 1 keeps sample 1's 2x of turn 0 over its 1x of turn 1
    assert b1["speedup_geomean_at_1"] == pytest.approx(math.sqrt(14 / 3 * 3))
    assert b1["pass_at_1"] == m["final"]["at_k"]["1"]["pass_at_k"]
    assert b1["fast_1_at_1"] == pytest.approx((3 / 4 + 1 / 4) / 2)


def test_outcome_and_best_functions():
    traj = [rec("t", 0, 0, "correct", 2.0), rec("t", 0, 1, "wrong_output"), rec("t", 0, 2, "compile_error")]
    assert outcome_at(traj, 1).turn == 1
    assert outcome_at(traj, 7).turn == 2                      # carried forward
    assert best_by_turn(traj, 2).turn == 0                    # correct beats not correct
    traj = [rec("t", 0, 0, "compile_error"), rec("t", 0, 1, "wrong_output"), rec("t", 0, 2, "no_code")]
    assert best_by_turn(traj, 2).turn == 1                    # compiled beats not compiled
    traj = [rec("t", 0, 0, "correct", 2.0), rec("t", 0, 1, "correct", 5.0), rec("t", 0, 2, "correct", 5.0)]
    assert best_by_turn(traj, 2).turn == 1                    # higher speedup; a tie keeps the earlier
    assert best_by_turn(traj, 0).turn == 0
    traj = [rec("t", 0, 0, "wrong_output"), rec("t", 0, 1, "unscored")]
    assert best_by_turn(traj, 1).turn == 0                    # a scored record beats an unscored one
    traj = [rec("t", 0, 0, "policy_error"), rec("t", 0, 1, "no_code")]
    assert best_by_turn(traj, 1).turn == 1                    # a policy error is not counted (default)
    counted = MetricSettings(policy_errors_count_as_failures=True)
    assert best_by_turn(traj, 1, counted).turn == 0           # both failures at stage none: the earlier
    traj = [rec("t", 0, 0, "no_code"), rec("t", 0, 1, "compile_error")]
    assert best_by_turn(traj, 1).turn == 1                    # neither compiled: the further stage


def test_breakdowns_tokens_and_tasks(small_run):
    m = build_metrics(load_run(small_run))
    assert m["stages"] == {"correct": 4, "compile_error": 1, "timeout": 1, "wrong_output": 2, "unscored": 4}
    assert list(m["stages"]) == ["correct", "compile_error", "timeout", "wrong_output", "unscored"]
    assert m["stop_reasons"] == {"solved": 1, "turn_limit": 9, "repeated_failure": 2}
    assert m["tokens"]["prompt_tokens_total"] == 23 * 100     # 7 + 8 + 8 records
    assert m["tokens"]["completion_tokens_per_sample"] == pytest.approx(23 * 50 / 12)
    assert m["latency_s"]["total_s"] == pytest.approx(23.0) and m["latency_s"]["p90_s"] == pytest.approx(1.0)
    assert set(m["groups"]["family"]) == {"saxpy", "stencil"}
    saxpy = m["groups"]["family"]["saxpy"]
    assert saxpy["tasks"] == 1 and saxpy["uncounted_tasks"] == {"t_c": "all 4 samples unscored"}
    assert saxpy["at_k"]["1"]["pass_at_k"] == pytest.approx(3 / 4)
    assert m["groups"]["level"] == {} and m["groups"]["task_kind"] == {}
    by_id = {t["task_id"]: t for t in m["tasks"]}
    assert (by_id["t_a"]["best_speedup"], by_id["t_a"]["correct"], by_id["t_a"]["n"]) == (8.0, 3, 4)
    assert by_id["t_a"]["failing_stages"] == {"compile_error": 1}
    assert list(by_id["t_b"]["failing_stages"].items()) == [("timeout", 1), ("wrong_output", 2)]
    assert by_id["t_b"]["furthest_failure"]["kind"] == "wrong_output"   # ran beats compiled (the timeout)
    assert by_id["t_c"]["n"] == 0 and by_id["t_c"]["unscored"] == 4
    assert m["excluded"] == {"t_x": "defective reference"}
    assert m["final_speedups"] == [2.0, 3.0, 4.0, 8.0]
    assert m["paper"]["benchmark"] == "own C set"
    assert m["paper"]["models"]["CUDAPerf"]["5"] == {"pass": 0.89, "speedup_geomean": 11.02}


def test_levels_kinds_and_no_paper_for_other_benchmarks(tmp_path):
    records = [rec("level1_1_x", 0, 0, "correct", 1.5, family=None, level="level1", task_kind="pytorch"),
               rec("level2_1_y", 0, 0, "wrong_output", family=None, level="level2", task_kind="pytorch"),
               rec("mine", 0, 0, "correct", 2.0, family=None, task_kind="cuda_kernel")]
    d = write_run(tmp_path / "r", header(["level1_1_x", "level2_1_y", "mine", "never"], benchmark="file",
                                         samples=1, turns=1), records)
    m = build_metrics(load_run(d))
    assert set(m["groups"]["level"]) == {"level1", "level2"}
    assert m["groups"]["level"]["level1"]["at_k"]["1"]["pass_at_k"] == 1.0
    assert set(m["groups"]["task_kind"]) == {"cuda_kernel"}   # only tasks with neither family nor level
    assert m["groups"]["family"] == {}
    assert m["tasks_without_records"] == ["never"]
    assert m["paper"] is None


def test_noise_margin_reaches_the_report(tmp_path):
    records = [rec("t", 0, 0, "correct", 1.05, candidate_cv=0.03, baseline_cv=0.04),
               rec("t", 1, 0, "correct", 1.2, candidate_cv=0.03, baseline_cv=0.04)]
    d = write_run(tmp_path / "r", header(["t"], samples=2, turns=1), records)
    assert build_metrics(load_run(d))["final"]["at_k"]["1"]["fast_p"]["1"] == pytest.approx(1 / 2)
    plain = MetricSettings(noise=type(MetricSettings().noise)(noise_sigmas=0.0))
    assert build_metrics(load_run(d), plain)["final"]["at_k"]["1"]["fast_p"]["1"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------- reading

def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        load_run(tmp_path / "nope")
    with pytest.raises(RunFormatError, match="not a run directory: it has no run.json"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text('{"policy": "x"')
    with pytest.raises(RunFormatError, match=r"run.json:1: not valid JSON"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text('{"policy": "x"}')
    with pytest.raises(RunFormatError, match="run header lacks .*task_ids"):
        load_run(tmp_path)


def test_torn_last_line_is_ignored_with_a_warning(tmp_path):
    records = small_run_records()
    torn = records[0].to_json()[:37]
    d = write_run(tmp_path / "r", header(["t_a", "t_b", "t_c"]), records, tail=torn)
    with pytest.warns(RunLoadWarning, match=rf"turns.jsonl:{len(records) + 1}: torn last line"):
        run = load_run(d)
    assert len(run.records) == len(records)
    assert any("torn" in w for w in run.warnings)


def test_malformed_lines_name_file_and_line(tmp_path):
    records = small_run_records()[:3]
    good = [r.to_json() for r in records]
    hdr = header(["t_a"])
    cases = [
        ("{not json", r"turns.jsonl:2: not valid JSON"),
        ("[1, 2]", r"turns.jsonl:2: expected a JSON object"),
        (json.dumps({k: v for k, v in records[0].to_dict().items() if k != "correct"}),
         r"turns.jsonl:2: record lacks correct"),
        (json.dumps({**records[0].to_dict(), "sample": "0"}), r"turns.jsonl:2: sample must be an integer"),
        (json.dumps({**records[0].to_dict(), "speedup": 2.0}), r"turns.jsonl:2: speedup 2.0 given for a sample that"),
        (json.dumps({**records[0].to_dict(), "status": "done"}), r"turns.jsonl:2: status must be one of"),
        (json.dumps({**records[0].to_dict(), "stop": "tired"}), r"turns.jsonl:2: stop must be one of"),
    ]
    for bad, pattern in cases:
        d = tmp_path / f"r{cases.index((bad, pattern))}"
        d.mkdir()
        (d / "run.json").write_text(json.dumps(hdr.to_dict()))
        # a malformed line followed by good ones, and a malformed but newline-terminated last line: both errors
        (d / "turns.jsonl").write_text("\n".join([good[0], bad, *good[1:]]) + "\n")
        with pytest.raises(RunFormatError, match=pattern):
            load_run(d)
        (d / "turns.jsonl").write_text("\n".join([good[0], bad]) + "\n")
        with pytest.raises(RunFormatError, match=pattern):
            load_run(d)


def test_duplicates_keep_the_first(tmp_path):
    first = rec("t", 0, 0, "correct", 2.0)
    again = rec("t", 0, 0, "correct", 9.0)
    d = write_run(tmp_path / "r", header(["t"], samples=1, turns=1), [first, again])
    with pytest.warns(RunLoadWarning, match=r"turns.jsonl:2: duplicate of line 1"):
        run = load_run(d)
    assert [r.speedup for r in run.records] == [2.0]
    assert build_metrics(run)["final"]["at_k"]["1"]["speedup_geomean"] == pytest.approx(2.0)


def test_no_turns_yet(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "run.json").write_text(json.dumps(header(["t"]).to_dict()))
    with pytest.warns(RunLoadWarning, match="no turn completed"):
        paths = write_report(d)
    m = json.loads(paths.metrics_json.read_text())
    assert m["final"]["tasks"] == 0 and m["tasks_without_records"] == ["t"]
    assert paths.plots == ()
    assert "No counted sample" in paths.report_html.read_text()


# ---------------------------------------------------------------------------------------------------- html

def inlined_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_report_html_is_self_contained_with_one_png_per_plot(small_run):
    paths = write_report(small_run)
    page = paths.report_html.read_text()
    assert paths.plots == ("turns", "stages", "speedups")
    assert page.count('<img src="data:image/png;base64,') == len(paths.plots)
    assert 'src="http' not in page and "<link" not in page and "url(" not in page and "<script" not in page
    import matplotlib.image

    for png in inlined_pngs(page):
        assert png.startswith(PNG_MAGIC)
        assert matplotlib.image.imread(io.BytesIO(png), format="png").ndim == 3
    assert "paper: CUDAPerf" in page and "89% / 11.02x" in page
    assert json.loads(paths.metrics_json.read_text()) == build_metrics(load_run(small_run))
    assert "t_x" in page and "defective reference" in page   # the excluded task, listed


def test_hostile_strings_are_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    records = [rec(evil, 0, 0, "wrong_output", family='"><b>fam', message="<img src=x onerror=alert(2)>")]
    d = write_run(tmp_path / "r", header([evil], samples=1, turns=1, excluded={"<i>x</i>": "<u>why</u>"}), records)
    page = write_report(d).report_html.read_text()
    assert "<script" not in page and "<img src=x" not in page and "<i>x</i>" not in page and '"><b>' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


def test_one_task_without_a_correct_sample(tmp_path):
    records = [rec("only", s, 0, "compile_error", stop="repeated_failure") for s in range(3)]
    d = write_run(tmp_path / "r", header(["only"], samples=3, turns=1), records)
    paths = write_report(d)
    page = paths.report_html.read_text()
    assert paths.plots == ("turns", "stages")                 # no speedup to plot
    assert page.count('<img src="data:image/png;base64,') == 2
    assert "No correct sample" in page
    m = json.loads(paths.metrics_json.read_text())
    assert m["final"]["at_k"]["1"]["pass_at_k"] == 0.0 and m["final"]["at_k"]["1"]["speedup_geomean"] is None
    assert m["final"]["at_k"]["3"]["fast_p"]["0"] == 0.0


def test_print_summary(small_run):
    m = json.loads(write_report(small_run).metrics_json.read_text())
    console = Console(record=True, width=140)
    print_summary(m, console)
    text = console.export_text()
    assert "pass@k" in text and "fast_1.5" in text
    assert "50.0%" in text                                    # pass@1
    assert f"{math.sqrt(14):.3g}x (2)" in text                # geo-mean speedup@1 over 2 tasks
    assert "4 unscored" in text
    assert "most frequent failures: 2 x wrong_output: wrong_output here; 1 x compile_error" in text


def test_paper_constant_covers_the_three_benchmarks():
    assert set(PAPER_RESULTS) == {"own C set", "BabelTower", "KernelBench"}
    for entry in PAPER_RESULTS.values():
        for by_k in entry["models"].values():
            assert set(by_k) == {1, 3, 5}
            assert by_k[1][0] <= by_k[3][0] <= by_k[5][0]     # pass@k grows with k in the paper's tables


def test_batched_latency_is_counted_once_and_failures_group_by_reason(tmp_path):
    """Four answers of one batched call (latency 8 s on each) and two requests of their own (1 s each): the
    generation wall is 8 + 2 s, not 34; failures that differ only in names and numbers count together."""
    from dataclasses import replace

    msg = "candidate.cu({line}): error: identifier \"{name}\" is undefined\n   x = {name};"
    recs = [replace(rec(f"t{i}", 0, 0, "compile_error", message=msg.format(line=10 + i, name=f"v{i}"),
                        stop="turn_limit"), latency_s=8.0, gen_batch=4) for i in range(4)]
    recs += [replace(rec("t4", 0, 0, "compile_error", message="candidate.cu(3): error: expected a \";\"",
                         stop="turn_limit"), latency_s=1.0),
             replace(rec("t5", 0, 0, "no_code", message="no code found", stop="turn_limit"), latency_s=1.0)]
    d = write_run(tmp_path / "r", header([f"t{i}" for i in range(6)], samples=1, turns=1), recs)
    m = build_metrics(load_run(d))
    lat = m["latency_s"]
    assert lat["total_s"] == pytest.approx(34.0) and lat["generation_wall_s"] == pytest.approx(10.0)
    assert lat["batched_records"] == 4 and lat["answers_per_min"] == pytest.approx(6 * 60 / 10.0)
    reasons = m["failure_reasons"]
    assert reasons[0] == {"category": "compile_error", "reason": 'identifier "…" is undefined', "samples": 4,
                          "tasks": 4, "example_task": "t0"}
    assert {(r["category"], r["reason"], r["samples"]) for r in reasons[1:]} == {
        ("compile_error", 'expected a "…"', 1), ("no_code", "no code found", 1)}
    write_report(d)
    page = (d / "report.html").read_text()
    assert "Why samples failed" in page and "generation wall" in page and "4 of 6 answers came from batched" in page


def test_a_bad_gen_batch_is_a_format_error(tmp_path):
    from dataclasses import replace

    d = write_run(tmp_path / "r", header(["t"], samples=1, turns=1),
                  [replace(rec("t", 0, 0, "no_code", stop="turn_limit"), gen_batch=0)])
    with pytest.raises(RunFormatError, match="gen_batch must be an integer >= 1"):
        load_run(d)
