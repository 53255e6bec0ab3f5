"""The ``index_add_rows``, ``topk_rows`` and ``histc_bins`` PyTorch families: parameters that cover what the
variants must handle, inputs drawn in range, tolerances that two float32 summation orders respect (index_add) or
that are exact by construction (topk, histc: the variants' binning is ATen's, checked against torch.histc), and
variants that differ, pass the static checks, build with nvcc and, run on the CPU under an emulation of the CUDA
they use (``tests/cuda_cpu_emulator.py``: threads as fibers with real barriers and warp intrinsics, poisoned
shared memory and scratch, launch limits), give the reference's outputs in several thread schedules; their launch
configurations are also checked at the problems' full sizes. The checks every generated family shares are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cuda_cpu_emulator as emu  # noqa: E402
from cudaperf.dataset.pytorch_families.irregular import histc_bins, index_add_rows, topk_rows  # noqa: E402
from cudaperf.tasks.pytorch import degenerate_reasons, problem_namespace  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402

FAMILIES = [index_add_rows, topk_rows, histc_bins]


def _first(family, pred) -> int:
    return next(i for i in range(50) if pred(family(i).params))


def _problem(g, batch: int | None = None, seed: int = 0):
    """(inputs, reference output) of ``g`` with the module-level batch_size set to ``batch``."""
    ns = problem_namespace(g.task)
    if batch is not None:
        ns["batch_size"] = batch
    torch.manual_seed(1234)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    torch.manual_seed(seed)
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        return inputs, model(*inputs)


def test_no_parameters_or_buffers():
    for family in FAMILIES:
        ns = problem_namespace(family(0).task)
        model = ns["Model"](*ns["get_init_inputs"]())
        assert not list(model.named_parameters()) and not list(model.named_buffers())


def test_index_add_problems_cover_patterns_widths_and_layouts():
    gens = [index_add_rows(i) for i in range(50)]
    assert {g.params["pattern"] for g in gens} == {"uniform", "sorted", "skewed", "few"}
    assert {g.params["layout"] for g in gens} == {"2d", "3d"}
    dims = {g.params["dim"] for g in gens}
    assert any(d % 4 for d in dims) and any(d % 32 for d in dims) and min(dims) == 16 and max(dims) == 512
    assert any(g.params["alpha"] == 1.0 for g in gens) and any(g.params["alpha"] < 0 for g in gens)
    for g in gens:
        p = g.params
        assert 2**22 <= p["index_len"] * p["dim"] <= 2**25 and p["rows"] * p["dim"] <= 2**24
        assert (p["rows"] <= 256) == (p["pattern"] == "few")


@pytest.mark.parametrize("pattern", ["uniform", "sorted", "skewed", "few"])
def test_index_add_indices_are_in_range_repeat_and_respect_the_hot_bound(pattern):
    g = index_add_rows(_first(index_add_rows, lambda p: p["pattern"] == pattern))
    n, m = g.params["rows"], g.params["index_len"]
    for seed in range(2):
        (base, index, src), y = _problem(g, seed=seed)
        assert index.dtype == torch.int64 and tuple(index.shape) == (m,)
        assert int(index.min()) >= 0 and int(index.max()) < n
        counts = torch.bincount(index, minlength=n)
        assert int(counts.max()) > 1  # targets repeat
        assert int(counts.max()) <= g.params["hot_count"], (g.params, int(counts.max()))
        if pattern == "sorted":
            assert bool((index[1:] >= index[:-1]).all())
        if pattern == "skewed":  # the hot rows are spread over the table, not at its start
            assert int(counts.argmax()) != 0 or int(counts[1:].max()) > 1
        assert tuple(base.shape)[1:] == tuple(src.shape)[1:] and y.shape == base.shape


def test_index_add_tolerance_covers_two_float32_orders_of_the_busiest_row():
    """The problem of the 50 with the largest c_max * s: its busiest rows summed in two random float32 orders (the
    atomics' and the reference's) stay within a third of the tolerance of each other."""
    g = max((index_add_rows(i) for i in range(50)),
            key=lambda g: g.params["hot_count"] * abs(g.params["alpha"]) * g.params["spread"])
    c = int(g.params["hot_count"])
    s = np.float32(g.params["spread"])
    a = np.float32(g.params["alpha"])
    rng = np.random.default_rng(0)
    rows = 64
    base = rng.standard_normal(rows).astype(np.float32)
    terms = (rng.standard_normal((rows, c)).astype(np.float32) * s) * a

    def ordered(perm):
        acc = base.copy()
        for j in range(c):
            acc += terms[np.arange(rows), perm[:, j]]
        return acc

    y1 = ordered(np.argsort(rng.random((rows, c)), axis=1))
    y2 = ordered(np.argsort(rng.random((rows, c)), axis=1))
    atol, rtol = g.task.tolerance.fp32
    ratio = np.abs(y1.astype(np.float64) - y2) / (atol + rtol * np.abs(y2.astype(np.float64)))
    assert float(ratio.max()) < 1 / 3, (g.params, float(ratio.max()))
    assert float(np.abs(terms).mean()) > 10 * atol  # a missed or doubled term is far outside it


def test_topk_problems_cover_k_lengths_orders_and_data():
    gens = [topk_rows(i) for i in range(50)]
    ks = {g.params["k"] for g in gens}
    assert 1 in ks and max(ks) >= 30 and len(ks) >= 15
    lengths = {g.params["length"] for g in gens}
    assert min(lengths) == 64 and max(lengths) == 8192 and any(n % 32 for n in lengths)
    assert {g.params["largest"] for g in gens} == {True, False}
    assert {g.params["data"] for g in gens} == {"normal", "ties", "ramp"}
    assert {g.params["heads"] is None for g in gens} == {True, False}
    for g in gens:
        rows = g.params["batch"] * (g.params["heads"] or 1)
        assert 2**20 <= rows * g.params["length"] <= 2**25 and g.task.tolerance.fp32 == (0.0, 0.0)


@pytest.mark.parametrize("data", ["normal", "ties", "ramp"])
def test_topk_reference_returns_input_values_and_ties_really_tie(data):
    g = topk_rows(_first(topk_rows, lambda p: p["data"] == data))
    (x,), y = _problem(g, batch=3)
    k = g.params["k"]
    assert y.shape == (*x.shape[:-1], k)
    xs = x.reshape(-1, x.shape[-1])
    ys = y.reshape(-1, k)
    for r in range(xs.shape[0]):
        order = torch.sort(xs[r], descending=g.params["largest"]).values[:k]
        assert torch.equal(order, ys[r])
    if data == "ties":  # equal values inside the top k: a variant that drops all copies of a value fails
        assert any(len(set(ys[r].tolist())) < k for r in range(ys.shape[0])) or k == 1


def test_histc_problems_cover_bins_inputs_and_data():
    gens = [histc_bins(i) for i in range(50)]
    bins = {g.params["bins"] for g in gens}
    assert min(bins) == 16 and max(bins) == 4096 and any(b % 32 for b in bins)
    assert {len(g.params["widths"]) for g in gens} == {1, 2, 3}
    assert {g.params["data"] for g in gens} == {"normal", "uniform", "grid", "exponential"}
    for g in gens:
        total = g.params["batch"] * sum(g.params["widths"])
        assert 2**20 <= total <= 2**24 and g.params["min"] < g.params["max"]
        assert g.task.tolerance.fp32 == (0.0, 0.0)
        for v in (g.params["min"], g.params["max"]):
            assert float(np.float32(v)) == v and v * 16 == round(v * 16)  # exact in float32 and in the C literal


def _histc_formula(x: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    """The variants' bin_of in numpy: (x - lo) * bins / (hi - lo), float32 at every step, the last bin closed."""
    x = x.astype(np.float32).ravel()
    lo32, hi32 = np.float32(lo), np.float32(hi)
    v = x[(x >= lo32) & (x <= hi32)]
    b = (((v - lo32) * np.float32(bins)).astype(np.float32) / (hi32 - lo32)).astype(np.float32).astype(np.int64)
    return np.bincount(np.minimum(b, bins - 1), minlength=bins).astype(np.float32)


@pytest.mark.parametrize("data", ["normal", "uniform", "grid", "exponential"])
def test_histc_formula_is_torch_histc_exactly_and_ranges_cut(data):
    g = histc_bins(_first(histc_bins, lambda p: p["data"] == data))
    inputs, y = _problem(g, batch=64)
    p = g.params
    expect = sum(_histc_formula(x.numpy(), p["bins"], p["min"], p["max"]) for x in inputs)
    assert np.array_equal(y.numpy(), expect)
    allx = torch.cat([x.reshape(-1) for x in inputs])
    inside = int(((allx >= p["min"]) & (allx <= p["max"])).sum())
    assert float(y.sum()) == inside and 0 < inside < allx.numel()  # some values outside the range
    if data == "grid":  # values on bin edges and on max itself (the closed last bin)
        assert bool((allx == p["max"]).any()) and bool((allx == p["min"]).any())


@pytest.mark.parametrize("family,pred", [(index_add_rows, lambda p: p["pattern"] == "skewed"),
                                         (index_add_rows, lambda p: p["pattern"] == "few"),
                                         (topk_rows, lambda p: p["data"] == "ties" and p["length"] == 8192),
                                         (topk_rows, lambda p: not p["largest"]),
                                         (histc_bins, lambda p: p["data"] == "exponential"),
                                         (histc_bins, lambda p: len(p["widths"]) == 3)])
def test_other_forms_are_not_degenerate(family, pred):
    g = family(_first(family, pred))
    assert degenerate_reasons(g.task) == [], (g.task.id, g.params)


# one problem per family by default (six or seven nvcc builds each); the code differs with alpha (index_add_rows), k
# and the order (topk_rows), the bins, the range and the number of inputs (histc_bins)
@pytest.mark.parametrize("family,index", [(index_add_rows, 0), (topk_rows, 0),
                                          (histc_bins, _first(histc_bins, lambda p: p["bins"] == 4096))])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))


@pytest.mark.slow
@pytest.mark.parametrize("family,index", [(index_add_rows, _first(index_add_rows, lambda p: p["alpha"] == 1.0)),
                                          (topk_rows, _first(topk_rows, lambda p: p["k"] == 32 or p["k"] == 1)),
                                          (topk_rows, _first(topk_rows, lambda p: not p["largest"])),
                                          (histc_bins, _first(histc_bins, lambda p: len(p["widths"]) == 3))])
def test_every_variant_of_the_other_forms_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))


# ---------------------------------------------------------------------------------------------------------------
# the variants run under the CPU emulation


def _emulate(g, batch: int, schedules=("round_robin", "lowest_first"), seed: int = 0, only=None) -> list[str]:
    """Every variant of ``g`` at ``batch`` under the emulation: what went wrong (empty: outputs within the task's
    tolerance of torch's, nothing the emulation objects to, in every schedule)."""
    inputs, ref = _problem(g, batch=batch, seed=seed)
    atol, rtol = g.task.tolerance.fp32
    bad = []
    exe = emu.build([v.code for v in g.variants])  # one g++ run: variant k is unit k
    for k, v in enumerate(g.variants):
        if only and v.name not in only:
            continue
        for s in schedules:
            r = emu.run(exe, inputs, [(tuple(ref.shape), "float32")], unit=k, schedule=s)
            if not r.clean:
                bad.append(f"{v.name} [{s}]: rc {r.rc}, modified {r.inputs_modified}, guards {r.guards_broken}, "
                           f"leaked {r.leaked}: {'; '.join(r.errors)[:600]}")
                continue
            got = torch.from_numpy(r.outputs[0]).double()
            excess = (got - ref.double()).abs() - (atol + rtol * ref.double().abs())
            if not bool(torch.isfinite(got).all()) or float(excess.max()) > 0:
                bad.append(f"{v.name} [{s}]: {int((excess > 0).sum())} of {got.numel()} outputs off, the worst by "
                           f"{float(excess.max()):.3g} beyond the tolerance")
    return bad


def _full_size_launches(g) -> list[str]:
    """Every variant's host code at the problem's two batch sizes (launches checked against the limits, not run):
    the inputs are meta tensors, the output's shape is the reference's on them."""
    bad = []
    b0 = problem_namespace(g.task)["batch_size"]
    for batch in (b0, b0 // 2 + 1):
        with torch.device("meta"):
            inputs, ref = _problem(g, batch=batch)
        exe = emu.build([v.code for v in g.variants])
        for k, v in enumerate(g.variants):
            r = emu.run(exe, inputs, [(tuple(ref.shape), "float32")], unit=k, dry=True)
            if r.rc != 0 or r.errors or not r.launches:
                bad.append(f"{v.name} at batch {batch}: rc {r.rc}, {len(r.launches)} launches: "
                           f"{'; '.join(r.errors)[:400]}")
    return bad


@pytest.mark.parametrize("family,index,batch", [
    (index_add_rows, _first(index_add_rows, lambda p: p["pattern"] == "skewed" and p["rows"] * p["dim"] <= 2**21),
     300),
    (topk_rows, _first(topk_rows, lambda p: p["data"] == "ties" and p["length"] % 32 != 0), 3),
    (histc_bins, _first(histc_bins, lambda p: p["data"] == "grid" and len(p["widths"]) > 1), 5)])
def test_every_variant_gives_the_reference_under_the_emulation(family, index, batch):
    bad = _emulate(family(index), batch)
    assert not bad, "\n".join(bad)


_EMULATED = [
    (index_add_rows, lambda p: p["pattern"] == "uniform" and p["rows"] * p["dim"] <= 2**21, 257),
    (index_add_rows, lambda p: p["pattern"] == "sorted" and p["rows"] * p["dim"] <= 2**21, 129),
    (index_add_rows, lambda p: p["pattern"] == "few" and p["dim"] % 4 != 0, 700),
    (index_add_rows, lambda p: p["layout"] == "3d" and p["rows"] * p["dim"] <= 2**21, 65),
    (topk_rows, lambda p: p["data"] == "ramp" and p["largest"], 2),
    (topk_rows, lambda p: p["data"] == "ramp" and not p["largest"], 2),
    (topk_rows, lambda p: p["length"] == 8192, 2),
    (topk_rows, lambda p: p["length"] <= 100 and p["heads"], 5),
    (topk_rows, lambda p: p["k"] >= 28 and p["data"] == "ties", 3),
    (histc_bins, lambda p: p["bins"] > 3072, 3),
    (histc_bins, lambda p: p["data"] == "exponential", 7),
    (histc_bins, lambda p: len(p["widths"]) == 3, 2),
    (histc_bins, lambda p: p["bins"] <= 32, 9),
]


_FOUR_SCHEDULES = ("round_robin", "round_robin_reversed", "lowest_first", "highest_first")


@pytest.mark.slow
@pytest.mark.parametrize("family,pred,batch", _EMULATED)
def test_every_variant_of_more_problems_gives_the_reference_in_every_schedule(family, pred, batch):
    bad = _emulate(family(_first(family, pred)), batch, schedules=_FOUR_SCHEDULES, seed=3)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("family", FAMILIES)
def test_launches_fit_the_limits_at_full_size(family):
    """The host code of every variant of three problems at their two batch sizes: grids, blocks and shared memory
    within the GPU's limits (nothing runs)."""
    bad = []
    for i in range(3):
        bad += _full_size_launches(family(i))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("mutation", ["missing_barrier", "dropped_last_element", "one_bin_off", "tie_dropped"])
def test_the_emulation_catches_a_broken_variant(mutation):
    """The emulation is a check that can fail: variants broken on purpose give wrong outputs or errors."""
    if mutation == "missing_barrier":  # the shared histogram counted into before every bin is zeroed
        g, name = histc_bins(0), "shared_per_block"
        old, new = "h[b] = 0u;\n    __syncthreads();", "h[b] = 0u;\n"
    elif mutation == "dropped_last_element":  # the thread-per-row insertion skips each row's last element
        g, name = topk_rows(_first(topk_rows, lambda p: p["data"] == "ramp" and p["largest"])), \
            "thread_per_row_insertion"
        old, new = "for (int c = 0; c < L; ++c)", "for (int c = 0; c < L - 1; ++c)"
    elif mutation == "one_bin_off":  # the last bin left open: values equal to max dropped
        g, name = histc_bins(_first(histc_bins, lambda p: p["data"] == "grid")), "warp_aggregated_atomics"
        old, new = "return b < BINS ? b : BINS - 1;", "return b < BINS ? b : -1;"
    else:  # every copy of a tied value taken in one round, whatever k still wants
        g, name = topk_rows(_first(topk_rows, lambda p: p["data"] == "ties" and p["k"] > 1)), "warp_threshold_rounds"
        old, new = "const int n = cnt < K - taken ? cnt : K - taken;", "const int n = cnt;"
    v = next(v for v in g.variants if v.name == name)
    assert old in v.code
    broken = type(v)(v.name, v.tags, v.code.replace(old, new))
    inputs, ref = _problem(g, batch=4)
    r = emu.run(emu.build(broken.code), inputs, [(tuple(ref.shape), "float32")])
    assert not r.clean or not torch.equal(torch.from_numpy(r.outputs[0]), ref)
    ok = emu.run(emu.build(v.code), inputs, [(tuple(ref.shape), "float32")])
    assert ok.clean and math.isclose(float((torch.from_numpy(ok.outputs[0]) - ref).abs().max()), 0.0)
