"""The profile tier on the GPU: ncu (clock control off) inside the sandbox on real candidates."""

from __future__ import annotations

import pytest

from cudaperf.dataset.family import build_task
from cudaperf.dataset.families import all_families
from cudaperf.features.profile import find_ncu, profile_features
from cudaperf.tasks import builtin_candidates, find_task, load_builtin_tasks

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)")]


@pytest.fixture(scope="module")
def emap():
    bt = build_task(all_families()["elementwise_map"], 0)
    return bt.task, {v.name: v.code for v in bt.variants}


def test_coalesced_and_strided_access_are_told_apart(emap):
    task, code = emap
    good = profile_features(task, code["naive_b256"], seed=1)
    bad = profile_features(task, code["strided"], seed=1)
    assert good.ok and bad.ok, (good.error, bad.error)
    assert good.values["coalescing"] > 0.9
    assert bad.values["coalescing"] < 0.3
    assert bad.values["gld_sectors_per_request"] > 4 * good.values["gld_sectors_per_request"]
    assert good.values["flops"] > 0 and good.values["dram_bytes"] > 0
    assert good.per_kernel.keys() == {"map_kernel"}


def test_tiny_blocks_lower_achieved_occupancy(emap):
    task, code = emap
    b256 = profile_features(task, code["naive_b256"], seed=2)
    b32 = profile_features(task, code["naive_b32"], seed=2)
    assert 0 < b32.values["achieved_occupancy"] < b256.values["achieved_occupancy"] <= 1.0


def test_atomics_are_counted():
    task = find_task(load_builtin_tasks(), "histogram")
    src = next(c for c in builtin_candidates() if c.task_id == "histogram" and c.label == "fast").source
    pf = profile_features(task, src, seed=3)
    assert pf.ok, pf.error
    assert pf.values["atomics"] > 0


def test_a_crashing_candidate_is_the_candidates_failure():
    task = find_task(load_builtin_tasks(), "saxpy")
    src = ('#include <cuda_runtime.h>\n__global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n'
           'extern "C" void saxpy(int n, float a, const float* x, float* y) { k<<<1, 32>>>((float*)0); '
           'cudaDeviceSynchronize(); }\n')
    pf = profile_features(task, src, seed=4)
    assert pf.attributed_to == "candidate"


def test_dataset_profile_table_for_the_measured_candidates(tmp_path):
    """`cudaperf dataset features --tier profile`: counters of the measured valid candidates, stored and reused."""
    from cudaperf.dataset.build import build
    from cudaperf.dataset.features import compute_features, load_features, measured_valid_ids
    from cudaperf.dataset.store import Dataset

    ds = Dataset.load(tmp_path / "ds", missing_ok=True)
    build(ds, families=["elementwise_map"], n_tasks=1)
    keep = ds.candidates[:3]
    ds.measurements = [{"candidate_id": c["candidate_id"], "task_id": c["task_id"], "code_sha256": c["code_sha256"],
                        "run_id": "r", "measured_at": "r", "status": "scored", "correct": True, "stage": "timed",
                        "failure_kind": None, "failure": None, "pass_fraction": 1.0, "speedup": 2.0,
                        "candidate_median_ms": 1.0, "candidate_cv": 0.01, "baseline_median_ms": 2.0,
                        "baseline_cv": 0.01, "kernels_in_timed_call": 1, "gpu": "g", "driver": "d", "cuda": "c",
                        "host": "h", "timing_method": "t", "seed": 1} for c in keep]
    ds.save()
    ids = measured_valid_ids(ds)
    assert ids == {c["candidate_id"] for c in keep}
    assert compute_features(ds, "profile", candidate_ids=ids) == 3
    table = load_features(ds, "profile")
    assert set(table) == ids
    assert all(0.0 < v["profile.coalescing"] <= 1.0 and v["profile.launches"] >= 1 for v in table.values())
    assert compute_features(ds, "profile", candidate_ids=ids) == 0  # stored: nothing to redo
