"""The dataset's PyTorch side on the CPU: generated problems stored next to the C tasks (same tables, splits and
filter), task records that round-trip, and a measurement that builds every variant and, with no GPU, records
each as unscored (a harness fault, never a 0) with the reason."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.build import build, dataset_tasks, torch_family_names  # noqa: E402
from cudaperf.dataset.measure import measure, select_candidates, stats, task_filter  # noqa: E402
from cudaperf.dataset.pytorch_families import TORCH_FAMILIES  # noqa: E402
from cudaperf.dataset.store import Dataset  # noqa: E402
from cudaperf.harness.environment import gpu_count  # noqa: E402
from cudaperf.harness.settings import HarnessSettings  # noqa: E402
from cudaperf.tasks.pytorch import PyTorchTask, pytorch_task_from_dict, pytorch_task_to_dict  # noqa: E402
from cudaperf.tasks.schema import TaskError, task_from_dict  # noqa: E402


@pytest.fixture()
def torch_ds(tmp_path):
    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    info = build(ds, families=["pt_row_softmax", "elementwise_map"], n_tasks=2)
    ds.save()
    return ds, info


def test_pytorch_families_are_dataset_families():
    names = torch_family_names()
    assert set(names.values()) == set(TORCH_FAMILIES)
    assert all(n.startswith("pt_") for n in names)


def test_pytorch_tasks_are_stored_beside_c_tasks(torch_ds):
    ds, info = torch_ds
    assert info["degenerate"] == {}
    again = Dataset.load(ds.root)
    tasks = dataset_tasks(again)
    pt = {k: t for k, t in tasks.items() if isinstance(t, PyTorchTask)}
    assert sorted(pt) == ["pt_row_softmax_000", "pt_row_softmax_001"]
    gen = TORCH_FAMILIES["row_softmax"](1)
    assert pt["pt_row_softmax_001"].source == gen.task.source
    assert pt["pt_row_softmax_001"].tolerance == gen.task.tolerance
    rows = [c for c in again.candidates if c["task_id"] == "pt_row_softmax_001"]
    assert sorted(c["name"] for c in rows) == sorted(v.name for v in gen.variants)
    assert all(c["family"] == "pt_row_softmax" and c["tags"] for c in rows)
    assert {t["split_family"] for t in again.tasks if t["family"] == "pt_row_softmax"} <= {"train", "test"}
    assert again.save() == ds.version()  # the round trip changes nothing


def test_pytorch_task_records_round_trip_and_reject_bad_input():
    t = TORCH_FAMILIES["row_reduce"](0).task
    d = json.loads(json.dumps(pytorch_task_to_dict(t)))
    assert pytorch_task_from_dict(d) == t
    assert task_from_dict(d) == t
    with pytest.raises(TaskError, match="not a KernelBench-format problem"):
        pytorch_task_from_dict({**d, "source": "import torch\n"})
    with pytest.raises(TaskError, match="not valid Python"):
        pytorch_task_from_dict({**d, "source": "def (:\n"})
    with pytest.raises(TaskError, match="tolerance"):
        pytorch_task_from_dict({**d, "tolerance": {"fp32": [1e-3]}})


@pytest.mark.skipif(gpu_count() > 0, reason="checks the no-GPU path")
def test_measure_without_a_gpu_builds_every_variant_and_leaves_them_unscored(torch_ds, tmp_path):
    ds, _ = torch_ds
    cands = [c for c in select_candidates(ds, families=["pt_row_softmax"]) if c["task_id"] == "pt_row_softmax_000"]
    seen = []
    summary = measure(ds, cands, store_path=tmp_path / "run.jsonl", run_id="cpu",
                      settings=HarnessSettings(budget_ms=50), progress=lambda p, i, n: seen.append(p))
    assert summary.batch.pytorch is not None and summary.batch.pytorch.n_done == len(cands) >= 6
    assert "pytorch-run" in seen
    rows = [m for m in ds.measurements if m["run_id"] == "cpu"]
    assert len(rows) == len(cands)
    assert all(m["status"] == "unscored" and m["stage"] == "compiled" for m in rows), rows[0]
    assert all("GPU" in m["failure"] for m in rows)
    assert task_filter(ds)["pt_row_softmax_000"] == "unmeasured"  # unscored rows are not measurements
    assert stats(ds)["n_tasks"] == len(ds.tasks)
    # resumable: a rerun with the same store retries unscored results only (all of them here)
    again = measure(ds, cands, store_path=tmp_path / "run.jsonl", run_id="cpu",
                    settings=HarnessSettings(budget_ms=50))
    assert again.batch.pytorch.n_skipped == 0



def test_a_harness_fault_mid_run_keeps_the_finished_results(torch_ds, tmp_path, monkeypatch):
    """On the H200 a worker died of a harness fault (a wrong CUDA_VISIBLE_DEVICES) after 147 results had been
    stored: the error must still surface, but the finished results must reach the dataset."""
    import cudaperf.harness.batch_pytorch as bp

    ds, _ = torch_ds
    cands = [c for c in select_candidates(ds, families=["pt_row_softmax"]) if c["task_id"] == "pt_row_softmax_000"]
    real = bp.run_pytorch_batch

    def dies_after_two(tasks, jobs, store, **kw):
        real(tasks, jobs[:2], store, **kw)
        raise RuntimeError("CUDA error: invalid device ordinal")

    monkeypatch.setattr(bp, "run_pytorch_batch", dies_after_two)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        measure(ds, cands, store_path=tmp_path / "run.jsonl", run_id="fault", settings=HarnessSettings(budget_ms=50))
    assert len([m for m in ds.measurements if m["run_id"] == "fault"]) == 2

def test_shipped_dataset_has_the_pytorch_problems():
    from cudaperf.dataset.store import default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    pt = [t for t in ds.tasks if t["family"].startswith("pt_")]
    from cudaperf.dataset.pytorch_families import NOT_YET_SHIPPED

    unshipped = {n for n, g in torch_family_names().items() if g in NOT_YET_SHIPPED}
    assert len(pt) >= 60 and {t["family"] for t in pt} == set(torch_family_names()) - unshipped
    per_task: dict[str, int] = {}
    for c in ds.candidates:
        if c["family"].startswith("pt_"):
            per_task[c["task_id"]] = per_task.get(c["task_id"], 0) + 1
    assert min(per_task.values()) >= 6 and len(per_task) == len(pt)
    assert {t["split_family"] for t in pt} == {"train", "test"}  # some PyTorch families are held out whole
