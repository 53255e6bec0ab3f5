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
