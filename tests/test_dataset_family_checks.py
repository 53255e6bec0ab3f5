"""CPU checks of the C families, most written after issue 28's families first ran on a GPU (an NVIDIA H200,
2026-12-03): each covers a failure seen there and would have found it, or its cause, without a GPU.

- every launch of every variant stays within CUDA's grid and block limits at every size configuration
  (``bf16_layer_stats``' ``grid2d_atomics`` put 261,301 rows on ``gridDim.y``; the launch failed);
- ``radix_sort_lsd``: the C reference sorts as its description says, and the variants' stable scatter updates its
  shared running offsets atomically (with a plain ``off[d] +=``, racing between warps, 10 of 12 variants failed);
- ``batchnorm_train_forward``: the scale-and-shift form of the normalisation, computed as the variants compute it,
  matches the reference within the tolerance on the hidden inputs (rounded to float it did not, on a channel of
  one value);
- the generator makes at least 3,000 C tasks, and the shipped ones regenerate byte for byte.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from cudaperf.dataset.families import all_families
from cudaperf.dataset.family import build_task
from cudaperf.dataset.launch_dims import GRID_LIMITS, launch_problems, launches, task_launch_problems
from cudaperf.harness.compare import compare_arrays
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings

FAMILIES = all_families()
SETTINGS = HarnessSettings(budget_ms=300.0, max_reps=10, min_reps=2)


# ---------------------------------------------------------------------------------------------------------------
# launch extents

TWO_D = """
#define TB 256
__global__ void k(int rows, int cols, float* acc) { }
extern "C" void f(int rows, int cols, const float* x, float* y) {
    float* acc; cudaMalloc(&acc, (size_t)rows * sizeof(float));
    dim3 grid((unsigned)((cols + TB - 1) / TB), (unsigned)rows);
    k<<<grid, TB>>>(rows, cols, acc);
}
"""


def test_a_grid_with_the_rows_on_y_is_flagged_past_65535_rows():
    assert launch_problems(TWO_D, {"rows": 65535, "cols": 64}) == []
    (p,) = launch_problems(TWO_D, {"rows": 65536, "cols": 64})
    assert "gridDim.y = (unsigned)rows = 65536 exceeds 65535" in p
    swapped = TWO_D.replace("dim3 grid((unsigned)((cols + TB - 1) / TB), (unsigned)rows)",
                            "dim3 grid((unsigned)rows, (unsigned)((cols + TB - 1) / TB))")
    assert launch_problems(swapped, {"rows": 261301, "cols": 64}) == []
    assert launch_problems(swapped, {"rows": 100, "cols": 256 * 65536}) != []


def test_the_reader_follows_clamps_chunk_loops_ternaries_and_inline_dim3():
    code = """
#define R 4096
__global__ void k2(int n) { }
extern "C" void f(int m, int n, float* out) {
    int parts = (m + 7) / 8; if (parts > 1000) parts = 1000;
    for (int r0 = 0; r0 < m; r0 += R) {
        int rows = m - r0 < R ? m - r0 : R;
        k2<<<dim3((n + 127) / 128, rows, parts), dim3(32, 4)>>>(n);
    }
    int big = 70000;
    k2<<<dim3(1, 1, big), 1024>>>(n);
}
"""
    (first, second) = launches(code, {"m": 9000, "n": 10})
    assert first.grid == (1, 4096, 1000) and first.block == (32, 4, 1)  # first chunk, clamped parts
    assert launches(code, {"m": 100, "n": 10})[0].grid == (1, 100, 13)
    assert [p.split(":")[0] for p in launch_problems(code, {"m": 9000, "n": 10})] == ["k2"]
    assert "gridDim.z = big = 70000 exceeds 65535" in launch_problems(code, {"m": 9000, "n": 10})[0]
    # over 1024 threads per block
    assert any("threads per block" in p for p in launch_problems(code.replace("dim3(32, 4)", "dim3(64, 32)"),
                                                                 {"m": 1, "n": 1}))


def test_an_extent_the_reader_cannot_evaluate_is_reported_not_passed():
    code = """
extern "C" void f(int n, const int* len, float* out) {
    int most = 0;
    for (int i = 0; i < n; ++i) if (len[i] > most) most = len[i];
    k<<<dim3(n, (most + 255) / 256), 256>>>(n);
}
"""
    (p,) = launch_problems(code, {"n": 5})
    assert "gridDim.y = (most + 255) / 256 cannot be evaluated here" in p
    assert launch_problems(code, {"n": 5}, unknown=False) == []


# variants whose y or z extent depends on the input data, with why it stays within the limit
DATA_DEPENDENT = {
    ("mean_variance", "chunk_atomic"): "gridDim.y = ceil(longest segment / 4096) <= ceil(total length / 4096)",
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_launch_of_every_task_stays_within_cudas_limits(name):
    fam = FAMILIES[name]
    for i in range(fam.n_tasks):
        b = build_task(fam, i)
        for v in b.variants:
            problems = task_launch_problems(b.task, v.code)
            if (name, v.name) in DATA_DEPENDENT:
                assert all("cannot be evaluated" in p for p in problems), problems
                for cfg in b.task.size_configs:  # the longest segment is at most all the elements
                    total = cfg.get("n", cfg.get("nseg", 1) * cfg.get("len", 1))
                    assert math.ceil(total / 4096) <= GRID_LIMITS["y"]
                continue
            assert problems == [], f"{b.task.id}/{v.name}: {problems}"


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


# ---------------------------------------------------------------------------------------------------------------
# the generator's size

def test_the_generator_makes_at_least_3000_c_tasks_and_the_enumerated_families_50_distinct_settings():
    assert sum(f.n_tasks for f in FAMILIES.values()) >= 3000
    settings = {"conv1d": lambda p: (p["radius"], p["type"], p["padding"]),
                "pairwise_distance": lambda p: (p["mode"], p.get("type"), p["metric"], p["d"]),
                "spmv_csr": lambda p: (p["avg_row"], p["type"])}
    for name, key in settings.items():
        fam = FAMILIES[name]
        assert fam.n_tasks == 50
        keys = [key(build_task(fam, i).params) for i in range(fam.n_tasks)]
        assert len(set(keys)) == 50, f"{name}: settings repeat"


def test_the_shipped_c_tasks_regenerate_byte_for_byte():
    """Every C task in the shipped dataset (the first 20 or 24 of each older family) comes out of its family as it
    was measured: the task record and every variant's code, so that extending a family's settings past them (as
    ``conv1d``, ``pairwise_distance`` and ``spmv_csr`` were, to 50) leaves their measurements valid."""
    import json

    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    code = {c["candidate_id"]: c["code"] for c in ds.candidates if c["origin"] == "family"}
    checked = 0
    for t in ds.tasks:
        if t["family"] not in FAMILIES:
            continue
        b = build_task(FAMILIES[t["family"]], int(t["index"]))
        assert json.dumps(b.task_dict) == t["task"], t["id"]
        shipped = sorted(k for k in code if k.startswith(t["id"] + "/"))
        assert shipped == sorted(f"{t['id']}/{v.name}" for v in b.variants), t["id"]
        for v in b.variants:
            assert code[f"{t['id']}/{v.name}"] == v.code, f"{t['id']}/{v.name}"
        checked += 1
    assert checked >= 600
