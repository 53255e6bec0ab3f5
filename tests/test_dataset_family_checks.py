"""CPU checks of the C families, most written after issue 28's families first ran on a GPU (an NVIDIA H200,
2026-12-03): each covers a failure seen there and would have found it, or its cause, without a GPU.

- ``radix_sort_lsd``: the C reference sorts as its description says, and the variants' stable scatter updates its
  shared running offsets atomically (with a plain ``off[d] +=``, racing between warps, 10 of 12 variants failed).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from cudaperf.dataset.families import all_families
from cudaperf.dataset.family import build_task
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings

FAMILIES = all_families()
SETTINGS = HarnessSettings(budget_ms=300.0, max_reps=10, min_reps=2)


# ---------------------------------------------------------------------------------------------------------------
# radix_sort_lsd

def _radix_order(keys: np.ndarray, p: dict) -> np.ndarray:
    s = ((keys.astype(np.uint64) ^ p["FLIP"]) >> p["SHIFT"]) & ((1 << p["KB"]) - 1)
    return np.argsort(s, kind="stable")


@pytest.mark.parametrize("index", [0, 1, 5, 6, 10, 12, 15, 17, 22, 38, 49])
def test_radix_sort_reference_is_the_stable_sort_its_description_states(index):
    """The C reference on the hidden inputs against numpy's stable argsort by s(k) = ((k ^ FLIP) >> SHIFT) &
    (2^KB - 1), keys read as unsigned 32-bit: the H200's failures were not the reference's (its bucket_launches
    variant, built on another scatter, was correct on every test)."""
    b = build_task(FAMILIES["radix_sort_lsd"], index)
    prep = prepare_c_function(b.task, SETTINGS, seed=1000 + index, time_baseline=False)
    vt = b.params["vt"]
    big = 0
    for case, out in zip(prep.test_cases, prep.expected_tests):
        keys = np.asarray(case.values["keys"])
        assert keys.dtype == np.uint32
        order = _radix_order(keys, b.params)
        np.testing.assert_array_equal(out.values["okeys"], keys[order])
        if vt:
            np.testing.assert_array_equal(out.values["ovals"], np.asarray(case.values["vals"])[order])
        big += int((keys >= 2**31).sum())
    if b.params["dist"] in ("full", "nearly"):
        assert big > 0  # keys past 2^31 are there: a signed reading would sort them differently


def test_radix_sort_scatter_updates_its_shared_offsets_atomically():
    """Each round of the stable scatter, the leader lane of every (warp, digit) group adds the group's count to the
    digit's running offset; several warps may hold the same digit, so the add must be atomic. With ``off[d] +=``
    (a read-modify-write that races between warps) every variant using this scatter failed its multi-round tests
    on the H200, and bucket_launches, which scatters otherwise, passed them."""
    fam = FAMILIES["radix_sort_lsd"]
    for i in range(fam.n_tasks):
        for v in build_task(fam, i).variants:
            if "wc[warp][d]" not in v.code:
                continue
            assert "atomicAdd(&off[d], wc[warp][d])" in v.code, f"radix_sort_lsd_{i:03d}/{v.name}"
            assert not re.search(r"\boff\[d\]\s*\+=", v.code), f"radix_sort_lsd_{i:03d}/{v.name}"
