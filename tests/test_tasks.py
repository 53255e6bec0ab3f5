"""Task records: loading, validation errors, bundled set, input generation and the real C driver (gcc)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from cudaperf.harness.compile import build_reference
from cudaperf.harness.driver import driver_source
from cudaperf.tasks import builtin_candidates, load_builtin_tasks, load_tasks, task_from_dict
from cudaperf.tasks.inputs import generate_case, read_outputs, write_inputs
from cudaperf.tasks.schema import CFunctionTask, TaskError, eval_expr

GOOD = {
    "id": "t1",
    "kind": "c_function",
    "function_name": "scale",
    "reference_c": "void scale(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) y[i] = 2 * x[i]; }",
    "args": [
        {"name": "n", "role": "scalar", "ctype": "int"},
        {"name": "x", "role": "in", "ctype": "float", "length": "n"},
        {"name": "y", "role": "out", "ctype": "float", "length": "n"},
    ],
    "size_configs": [{"n": 10}, {"n": 1001}, {"n": 4097}],
}


def test_good_record_loads():
    t = task_from_dict(GOOD)
    assert isinstance(t, CFunctionTask)
    assert t.signature == "void scale(int n, const float* x, float* y)"
    assert t.size_params == ("n",)


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"kind": "cobol"}, "unknown kind"),
        ({"function_name": None}, "missing required field 'function_name'"),
        ({"args": []}, "'args' is empty"),
        ({"size_configs": [{"n": 3}]}, "needs >= 2 size configurations"),
        ({"size_configs": [{"n": 3}, {"m": 4}]}, "has parameters"),
        ({"args": [{"name": "x", "role": "in", "ctype": "float"}]}, "needs a 'length'"),
        ({"args": [{"name": "x", "role": "input", "ctype": "float", "length": "n"}]}, "role must be"),
        ({"args": [{"name": "x", "role": "out", "ctype": "complex", "length": "n"}]}, "unsupported ctype"),
        ({"args": [{"name": "y", "role": "out", "ctype": "float", "length": "n * k"}]}, "unknown names ['k']"),
        ({"args": [{"name": "x", "role": "in", "ctype": "float", "length": "n"}]}, "nothing to check"),
        ({"tolerance": {"rtol": -1}}, "non-negative"),
        ({"timing_config": 7}, "out of range"),
    ],
)
def test_validation_errors_name_the_task_and_field(patch, message):
    bad = {**GOOD, **patch}
    with pytest.raises(TaskError) as exc:
        task_from_dict(bad)
    assert message in str(exc.value)
    if "id" in bad:
        assert "t1" in str(exc.value)


def test_jsonl_errors_carry_file_and_line(tmp_path):
    p = tmp_path / "tasks.jsonl"
    p.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(TaskError, match=r"tasks.jsonl:2: not valid JSON"):
        load_tasks(p)
    p.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(TaskError, match="repeats"):
        load_tasks(p)
    p.write_text(json.dumps({**GOOD, "args": "x"}) + "\n")
    with pytest.raises(TaskError, match=r"tasks.jsonl:1: task t1: field 'args' must be"):
        load_tasks(p)
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "missing.jsonl")


def test_parquet_roundtrip(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [dict(GOOD, id=f"t{i}") for i in range(3)]
    rows = [{**r, "args": json.loads(json.dumps(r["args"]))} for r in rows]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    tasks = load_tasks(tmp_path / "t.parquet")
    assert [t.id for t in tasks] == ["t0", "t1", "t2"]


def test_bundled_set_has_20_c_functions_with_three_candidates_each():
    tasks = load_builtin_tasks("c_functions")
    assert len(tasks) >= 20
    labels: dict[str, set[str]] = {}
    for c in builtin_candidates("c_functions"):
        labels.setdefault(c.task_id, set()).add(c.label)
    for t in tasks:
        assert {"fast", "slow", "wrong"} <= labels.get(t.id, set()), t.id
        assert len(t.size_configs) >= 2
        assert any(v % 32 for cfg in t.size_configs for v in cfg.values()), f"{t.id}: all sizes multiples of 32"


def test_expressions():
    assert eval_expr("rows * cols + 1", {"rows": 3, "cols": 4}) == 13
    assert eval_expr("min(n, 64)", {"n": 100}) == 64
    with pytest.raises(ValueError):
        eval_expr("__import__('os')", {})
    with pytest.raises(ValueError):
        eval_expr("n ** m", {"n": 2})


def test_generation_is_seeded_and_fresh_seeds_differ():
    t = task_from_dict(GOOD)
    a = generate_case(t, 1, seed=5)
    b = generate_case(t, 1, seed=5)
    c = generate_case(t, 1, seed=6)
    assert np.array_equal(a.values["x"], b.values["x"])
    assert not np.array_equal(a.values["x"], c.values["x"])
    assert a.values["x"].shape == (1001,) and a.values["n"] == 1001


def test_driver_runs_every_bundled_reference_with_gcc(tmp_path):
    """The generated driver compiles with the real gcc and calls every bundled reference on small inputs."""
    for task in load_builtin_tasks("c_functions"):
        exe = build_reference(driver_source(task), task.reference_c)
        cases = [generate_case(task, 0, seed=s) for s in (1, 2)]
        write_inputs(tmp_path / "in.bin", task, cases)
        p = subprocess.run([str(exe), "test", str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                            str(tmp_path / "st.txt")], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, (task.id, p.stderr)
        outs = read_outputs(tmp_path / "out.bin", task, 2)
        assert len(outs) == 2 and all(o.status == 0 for o in outs), task.id
        for o in outs:
            for name, v in o.values.items():
                arr = np.atleast_1d(np.asarray(v, dtype=np.float64))
                assert not np.isnan(arr).all(), f"{task.id}: output {name} left poisoned by the reference"


def test_driver_poisons_out_arrays(tmp_path):
    """An implementation that writes nothing returns NaN-poisoned outputs (never stale zeros)."""
    t = task_from_dict({**GOOD, "reference_c": "void scale(int n, const float* x, float* y) { (void)n; (void)x; (void)y; }"})
    exe = build_reference(driver_source(t), t.reference_c)
    write_inputs(tmp_path / "in.bin", t, [generate_case(t, 0, seed=1)])
    subprocess.run([str(exe), "test", str(tmp_path / "in.bin"), str(tmp_path / "o.bin"), str(tmp_path / "s")],
                   check=True, timeout=60)
    (out,) = read_outputs(tmp_path / "o.bin", t, 1)
    assert np.isnan(out.values["y"]).all()


def test_driver_timing_mode_reports_samples(tmp_path):
    t = task_from_dict(GOOD)
    exe = build_reference(driver_source(t), t.reference_c)
    cases = [generate_case(t, 2, seed=s) for s in (1, 2, 3)]
    write_inputs(tmp_path / "in.bin", t, cases)
    subprocess.run([str(exe), "time", str(tmp_path / "in.bin"), str(tmp_path / "o.bin"), str(tmp_path / "s"),
                    "5", "20", "100", "0.0", "1"], check=True, timeout=60)
    samples = [l for l in (tmp_path / "s").read_text().splitlines() if l.startswith("time_ns")]
    assert 5 <= len(samples) <= 20
    outs = read_outputs(tmp_path / "o.bin", t, 3)
    for case, out in zip(cases, outs):
        np.testing.assert_allclose(out.values["y"], 2 * case.values["x"], rtol=1e-6)
