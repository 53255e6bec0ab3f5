"""CPU checks of the C families, most written after issue 28's families first ran on a GPU (an NVIDIA H200,
2026-12-03): each covers a failure seen there and would have found it, or its cause, without a GPU.

- ``radix_sort_lsd``: the C reference sorts as its description says, and the variants' stable scatter updates its
  shared running offsets atomically (with a plain ``off[d] +=``, racing between warps, 10 of 12 variants failed);
- ``batchnorm_train_forward``: the scale-and-shift form of the normalisation, computed as the variants compute it,
  matches the reference within the tolerance on the hidden inputs (rounded to float it did not, on a channel of
  one value).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from cudaperf.dataset.families import all_families
from cudaperf.dataset.family import build_task
from cudaperf.harness.compare import compare_arrays
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


# ---------------------------------------------------------------------------------------------------------------
# batchnorm_train_forward

def _bn_scale_shift(case, p: dict, t: str, rounded: bool) -> np.ndarray:
    """y as the scale-and-shift variants (block_sumsq_pinned, host_stats) compute it: per channel scale = inv *
    gamma and shift = beta - mu * scale, then y = x * scale + shift rounded once; ``rounded``: scale and shift
    rounded to the element type first (the variants before the fix, failing on the H200)."""
    N, C, HW = (int(case.config[k]) for k in ("N", "C", "HW"))
    x = np.asarray(case.values["x"]).astype(np.float64)
    xs = x.reshape(N, C, HW).transpose(1, 0, 2) if p["layout"] == "nchw" else x.reshape(N, HW, C).transpose(2, 0, 1)
    xs = xs.reshape(C, N * HW)
    mu = xs.mean(axis=1)
    v = ((xs - mu[:, None]) ** 2).mean(axis=1)
    inv = 1.0 / np.sqrt(v + float(p["eps"]))
    g = np.asarray(case.values["gamma"]).astype(np.float64)
    bta = np.asarray(case.values["beta"]).astype(np.float64)
    sc, sf = inv * g, bta - mu * inv * g
    np_t = np.float32 if t == "float" else np.float64
    if rounded:
        sc, sf = sc.astype(np_t).astype(np.float64), sf.astype(np_t).astype(np.float64)
    y = xs * sc[:, None] + sf[:, None]  # one rounding, as nvcc's fused multiply-add
    y = y.reshape(C, N, HW).transpose(1, 0, 2) if p["layout"] == "nchw" else y.reshape(C, N, HW).transpose(1, 2, 0)
    return y.reshape(-1).astype(np_t)


def test_batchnorm_scale_and_shift_in_double_meets_the_tolerance_and_in_float_did_not():
    """On the hidden inputs of every task, the scale-and-shift form in double agrees with the reference within the
    tolerance. The shift (beta - mu * scale) cancels against x * scale; rounded to float, the pair is off by about
    |mu| * scale * 2^-24, and scale = gamma / sqrt(EPS) on a channel of one value ({'N': 1, 'C': 3, 'HW': 1}):
    1.4e-5 for mu = 2, gamma = 1.5 and EPS = 1e-5, past the float tolerance (atol 1e-5, rtol 1e-4). That was the
    H200's failure of batchnorm_train_forward_000: a real defect of the variants, which rounded what the task
    computes in double, not of the test size."""
    fam = FAMILIES["batchnorm_train_forward"]
    rounded_failed = []
    for i in range(0, fam.n_tasks, 2):  # every other task: both layouts and element types, each EPS
        b = build_task(fam, i)
        t, tol = b.params["type"], b.task.tolerance
        prep = prepare_c_function(b.task, SETTINGS, seed=77 + i, time_baseline=False)
        for case, out in zip(prep.test_cases, prep.expected_tests):
            want = np.asarray(out.values["y"])
            got = _bn_scale_shift(case, b.params, t, rounded=False)
            m = compare_arrays("y", want, got, tol, is_float=True)
            assert m is None, f"{b.task.id} {case.config}: {m}"
            if compare_arrays("y", want, _bn_scale_shift(case, b.params, t, rounded=True),
                              tol, is_float=True) is not None:
                rounded_failed.append((b.task.id, dict(case.config)))
    assert rounded_failed, "the float-rounded form should fail somewhere (it did on the H200)"
    assert all(c == {"N": 1, "C": 3, "HW": 1} for _, c in rounded_failed), rounded_failed
    for i in range(fam.n_tasks):  # and the variants compute the form modelled above, in double
        code = {v.name: v.code for v in build_task(fam, i).variants}
        assert "double sc = inv * (double)g[c];" in code["block_sumsq_pinned"]
        assert "y[i] = (real_t)((double)x[i] * sc + sf);" in code["block_sumsq_pinned"]
        assert "const double* __restrict__ sc, const double* __restrict__ sf" in code["host_stats"]
        assert "y[i] = (real_t)((double)x[i] * sc[c] + sf[c]);" in code["host_stats"]
