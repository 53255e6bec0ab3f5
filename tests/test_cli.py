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


def test_check_runs_the_pytorch_checks_on_modelnew_files(fixtures_dir, tmp_path):
    ok = runner.invoke(app, ["check", str(fixtures_dir / "pytorch" / "relu_modelnew.py")])
    assert ok.exit_code == 0 and "ModelNew" in ok.output
    cheat = tmp_path / "cheat.py"
    cheat.write_text(
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "src = '__global__ void noop(float* x) { }\\ntorch::Tensor run(torch::Tensor a) "
        "{ noop<<<1, 1>>>(a.data_ptr<float>()); return a; }'\n"
        "ext = load_inline(name='x', cpp_sources='torch::Tensor run(torch::Tensor a);', cuda_sources=src, "
        "functions=['run'])\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        ext.run(a)\n"
        "        return torch.matmul(a, b)\n")
    bad = runner.invoke(app, ["check", str(cheat)])
    assert bad.exit_code == 1 and "torch.matmul" in bad.output


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


PAPER_KEYS = {"coal", "ai", "occ", "div", "xfer", "atomics", "syncthreads", "kernels", "tpb", "gmem_access", "ops"}


def test_features_json_has_the_eleven_keys_and_nulls(fixtures_dir, tmp_path):
    r = runner.invoke(app, ["features", str(fixtures_dir / "saxpy" / "oob.cu"), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert PAPER_KEYS <= set(d) and d["kernels"] == 1 and d["tpb"] == 256
    broken = tmp_path / "b.cu"
    broken.write_text("__global__ void k(float* a) { a[threadIdx.x] = ")  # truncated
    d = json.loads(runner.invoke(app, ["features", str(broken), "--json"]).output)
    assert d["parse_errors"] > 0 and d["tpb"] is None and "tpb" in d["reasons"]
    bad = runner.invoke(app, ["features", str(broken), "--tier", "profile"])
    assert bad.exit_code == 2 and "needs the task it solves: --task" in " ".join(bad.output.split())
    bad = runner.invoke(app, ["features", str(broken), "--tier", "roofline"])
    assert bad.exit_code == 2 and "choose paper, compiler or profile" in " ".join(bad.output.split())


def test_features_compiler_tier(fixtures_dir):
    r = runner.invoke(app, ["features", str(fixtures_dir / "saxpy" / "oob.cu"), "--tier", "compiler", "--json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)["compiler"]
    assert c["compile_ok"] and c["values"]["registers_per_thread"] > 0
    assert c["values"]["block_size"] == 256 and 0 < c["values"]["theoretical_occupancy"] <= 1
