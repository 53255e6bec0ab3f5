"""GPU behaviour of the dataset tools: external candidates added and measured (``pytest -m gpu``)."""

from __future__ import annotations

import json

import pytest

from cudaperf.dataset.build import build
from cudaperf.dataset.measure import candidate_summary, stats
from cudaperf.dataset.store import Dataset

pytestmark = pytest.mark.gpu


def _completion(code: str, k: int) -> str:
    """A model's answer as it comes: some prose, then the code in a fence."""
    return f"Attempt {k}: here is a CUDA version of the function.\n\n```cuda\n{code}\n```\nIt keeps the signature.\n"


def test_external_candidates_are_added_and_measured_as_untrusted_code(tmp_path):
    """`dataset add-candidates FILE --measure` on a program with twelve model-style answers: the eight correct
    ones (the family's own strategies, as completions) are timed against the sequential baseline; a wrong one, one
    that computes on the host, one that does not compile and one that is not CUDA are the candidates' failures,
    each its own kind. Every answer gets one scored row, and the stats count them beside the family's variants."""
    from typer.testing import CliRunner

    from cudaperf.cli import app

    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=1)
    ds.save()
    task = ds.tasks[0]
    spec = json.loads(task["task"]) if isinstance(task["task"], str) else task["task"]
    family = [c for c in ds.candidates if c["task_id"] == task["id"]]
    assert len(family) >= 8
    rows = [{"task_id": task["id"], "name": f"model_{k}", "completion": _completion(c["code"], k)}
            for k, c in enumerate(family[:8])]
    good = next(c["code"] for c in family if c["name"] == "naive_b256")
    assert "x * y" in good and "if (i < n)" in good
    # on the host, with a kernel launched on a path never taken: it passes the static checks
    host = spec["reference_c"].replace(f"void {spec['function_name']}(", f'extern "C" void {spec["function_name"]}(', 1)
    body = host.index("{", host.index('extern "C"'))
    host = ("#include <cuda_runtime.h>\n__global__ void never() {}\n" + host[:body + 1]
            + "\n    if (n < 0) never<<<1, 1>>>();" + host[body + 1:])
    for name, text in (("model_wrong", _completion(good.replace("x * y", "x + y"), 8)),
                       ("model_host", _completion(host, 9)),
                       ("model_broken", _completion(good.replace("if (i < n)", "if (i < n_elems)"), 10)),
                       ("model_not_cuda", _completion(spec["reference_c"], 11))):
        rows.append({"task_id": task["id"], "name": name, "completion": text})
    ext = tmp_path / "model_answers.jsonl"
    ext.write_text("".join(json.dumps(r) + "\n" for r in rows))

    r = CliRunner().invoke(app, ["dataset", "add-candidates", str(ext), "--measure", "-d", str(ds.root)])
    out = " ".join(r.output.split())
    assert r.exit_code == 0, out
    assert "added 12 candidates" in out and "12 candidates" in out and "no GPU visible" not in out

    ds = Dataset.load(ds.root)
    external = {c["candidate_id"]: c for c in ds.candidates if c.get("origin") == "external"}
    assert len(external) == 12 and all("```" not in c["code"] for c in external.values())  # code extracted
    by_name = {m["candidate_id"].split("/", 1)[1]: m for m in ds.measurements if m["candidate_id"] in external}
    assert len(by_name) == 12 and all(m["status"] == "scored" for m in by_name.values())
    for k in range(8):
        m = by_name[f"model_{k}"]
        assert m["correct"] and m["stage"] == "timed" and m["speedup"] > 0, m
        assert m["kernels_in_timed_call"] >= 1
    assert by_name["model_wrong"]["failure_kind"] == "wrong_output" and not by_name["model_wrong"]["correct"]
    assert by_name["model_host"]["failure_kind"] == "no_gpu_work"
    assert by_name["model_broken"]["failure_kind"] == "compile_error"
    assert by_name["model_not_cuda"]["failure_kind"] == "static_check"
    cs = candidate_summary(ds)
    assert sum(cs[c]["valid"] for c in external) == 8
    s = stats(ds)
    assert s["n_candidates"] == len(family) + 12 and s["n_measured_candidates"] == 12

    # nothing left for `measure --external-only`; the family's variants are still there to measure
    r = CliRunner().invoke(app, ["dataset", "measure", "--external-only", "-d", str(ds.root)])
    assert r.exit_code == 0 and "nothing to measure" in " ".join(r.output.split())
