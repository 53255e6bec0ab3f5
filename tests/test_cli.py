"""The command line, through typer's runner on the real commands."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cudaperf.cli import app

runner = CliRunner()


def test_help_lists_the_commands():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("evaluate", "check", "doctor", "batch"):
        assert cmd in r.output


def test_check_exit_codes(fixtures_dir, tmp_path):
    ok = runner.invoke(app, ["check", str(fixtures_dir / "saxpy" / "oob.cu")])
    assert ok.exit_code == 0 and "ok" in ok.output
    bad = runner.invoke(app, ["check", str(fixtures_dir / "saxpy" / "define_global.cu")])
    assert bad.exit_code == 1 and "#define __global__" in bad.output
    missing = runner.invoke(app, ["check", str(tmp_path / "nope.cu")])
    assert missing.exit_code == 2 and "not found" in missing.output


def test_evaluate_reports_bad_input_clearly(tmp_path, fixtures_dir):
    r = runner.invoke(app, ["evaluate", "--task", "no_such_task", "--candidate", str(fixtures_dir / "saxpy" / "oob.cu")])
    assert r.exit_code == 2 and "no task with id 'no_such_task'" in r.output
    r = runner.invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(tmp_path / "missing.cu")])
    assert r.exit_code == 2 and "candidate file not found" in r.output
    bad_tasks = tmp_path / "t.jsonl"
    bad_tasks.write_text("{oops\n")
    r = runner.invoke(app, ["evaluate", "--tasks", str(bad_tasks), "--task", "x", "--candidate", str(bad_tasks)])
    assert r.exit_code == 2 and "not valid JSON" in r.output


def test_evaluate_json_record(tmp_path):
    cand = tmp_path / "c.txt"
    cand.write_text("no code at all")
    r = runner.invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(cand), "--json"])
    assert r.exit_code == 0
    rec = json.loads(r.output)
    assert rec["task_id"] == "saxpy" and rec["failure"]["kind"] == "no_code" and rec["status"] == "scored"


def test_doctor_runs():
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 0 and "nvcc" in r.output and "sandbox" in r.output


def test_evaluate_a_jsonl_of_completions_resumes(tmp_path):
    comps = tmp_path / "c.jsonl"
    comps.write_text(json.dumps({"candidate_id": "a", "completion": "no code"}) + "\n"
                     + json.dumps({"candidate_id": "b", "completion": "<OUTPUT_CUDA>#define __global__\n"
                                   "</OUTPUT_CUDA>"}) + "\n")
    store = tmp_path / "store.jsonl"
    r = runner.invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(comps), "--store", str(store),
                            "--json"])
    assert r.exit_code == 0, r.output
    kinds = {json.loads(l)["candidate_id"]: json.loads(l)["failure"]["kind"] for l in store.read_text().splitlines()}
    assert kinds == {"a": "no_code", "b": "static_check"}
    again = runner.invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(comps), "--store", str(store)])
    assert again.exit_code == 0 and "2 already done" in again.output
    assert len(store.read_text().splitlines()) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"completion": 3}\n')
    r = runner.invoke(app, ["evaluate", "--task", "saxpy", "--candidate", str(bad)])
    assert r.exit_code == 2 and "needs a string 'completion'" in r.output
