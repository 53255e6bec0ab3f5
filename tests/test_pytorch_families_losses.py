"""The ``cross_entropy_loss``, ``masked_softmax`` and ``embedding_bag_mean`` PyTorch families: valid problems that
are not degenerate, varied across indices, deterministic, with integer and mask inputs drawn in range, tolerances
that a float64 evaluation (and a float32 simulation of the worst summation order) respects, and variants that
differ, pass the static checks and build with nvcc (their outputs are checked on the GPU).
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.losses import (cross_entropy_loss, embedding_bag_mean,  # noqa: E402
                                                      masked_softmax)
from cudaperf.tasks.pytorch import problem_namespace  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402

FAMILIES = [cross_entropy_loss, masked_softmax, embedding_bag_mean]


def _inputs(g, batch: int | None = None, seed: int = 0) -> list:
    ns = problem_namespace(g.task)
    if batch is not None:
        ns["batch_size"] = batch
    torch.manual_seed(seed)
    return ns["get_inputs"]()


def _first(family, pred) -> int:
    return next(i for i in range(50) if pred(family(i).params))


@pytest.mark.parametrize("family,params", [(cross_entropy_loss, []), (masked_softmax, []),
                                           (embedding_bag_mean, ["bag.weight"])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, params):
    g = family(0)
    ns = problem_namespace(g.task)
    model = ns["Model"](*ns["get_init_inputs"]())
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == params
    if family is embedding_bag_mean:
        assert tuple(model.bag.weight.shape) == (g.params["vocab"], g.params["dim"])


def test_cross_entropy_covers_both_reductions_and_draws_targets_in_range():
    gens = [cross_entropy_loss(i) for i in range(50)]
    assert 10 <= sum(g.params["reduction"] == "mean" for g in gens) <= 40
    classes = {g.params["classes"] for g in gens}
    assert min(classes) == 10 and max(classes) == 32768 and any(c % 4 for c in classes)
    for reduction in ("mean", "none"):
        g = next(g for g in gens if g.params["reduction"] == reduction)
        logits, target = _inputs(g, batch=37)
        assert target.dtype == torch.int64 and tuple(target.shape) == (37,)
        assert int(target.min()) >= 0 and int(target.max()) < g.params["classes"]
        y = problem_namespace(g.task)["Model"]()(logits, target)
        assert tuple(y.shape) == (() if reduction == "mean" else (37,))
        tol = g.task.tolerance.fp32
        assert tol == ((1e-5, 1e-5) if reduction == "mean" else (1e-4, 1e-4))
        v = g.variants[0].code
        assert ("out[0].numel != 1" in v) == (reduction == "mean")


def test_cross_entropy_sequential_float32_sum_stays_within_the_tolerance():
    """The worst summation order, a thread's sequential float32 sum of exp(x - max) over the largest rows at the
    largest spread, against float64: within a third of the per-row tolerance, and its average (the mean's error)
    within a third of the mean's."""
    rng = np.random.default_rng(0)
    c, spread, rows = 32768, 4.0, 48
    x = (rng.standard_normal((rows, c)) * spread).astype(np.float32)
    t = rng.integers(0, c, rows)
    m = x.max(1)
    s32 = np.add.accumulate(np.exp(x - m[:, None]), axis=1, dtype=np.float32)[:, -1]  # sequential, in float32
    l32 = np.log(s32) + (m - x[np.arange(rows), t])
    xd = x.astype(np.float64)
    l64 = np.log(np.exp(xd - m[:, None]).sum(1)) + m - xd[np.arange(rows), t]
    assert float((np.abs(l32 - l64) / (1e-4 + 1e-4 * np.abs(l64))).max()) < 1 / 3
    assert abs(float((l32 - l64).mean())) < (1e-5 + 1e-5 * float(l64.mean())) / 3


def test_masked_softmax_masks_keep_an_element_in_every_row():
    gens = [masked_softmax(i) for i in range(50)]
    assert {(g.params["mask"], g.params["dtype"]) for g in gens} == {(k, d) for k in ("random", "padding")
                                                                      for d in ("bool", "uint8")}
    assert any(g.params["scale"] == 1.0 for g in gens) and any(g.params["scale"] != 1.0 for g in gens)
    assert any(g.params["length"] % 4 for g in gens) and max(g.params["length"] for g in gens) <= 8192
    for kind in ("random", "padding"):
        for dtype in ("bool", "uint8"):
            g = next(g for g in gens if g.params["mask"] == kind and g.params["dtype"] == dtype)
            for seed in range(2):
                x, mask = _inputs(g, batch=300, seed=seed)
                assert mask.dtype == getattr(torch, dtype) and mask.shape == x.shape
                assert bool((mask != 0).any(dim=-1).all()), g.params  # no row is all -inf
                assert float((mask != 0).float().mean()) < 0.95  # the mask does mask
                y = problem_namespace(g.task)["Model"]()(x, mask)
                assert bool(torch.isfinite(y).all()) and bool((y[mask == 0] == 0).all())


def test_embedding_bag_table_is_drawn_deterministically_and_indices_in_range():
    g = embedding_bag_mean(0)
    ns = problem_namespace(g.task)
    torch.manual_seed(0)
    m1 = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(1)
    m2 = ns["Model"](*ns["get_init_inputs"]())
    assert torch.equal(m1.bag.weight, m2.bag.weight)
    assert abs(float(m1.bag.weight.detach().std()) - g.params["spread"]) < 0.05 * g.params["spread"]
    (idx,) = _inputs(g, batch=33)
    assert idx.dtype == torch.int64 and tuple(idx.shape) == (33, g.params["bag"])
    assert int(idx.min()) >= 0 and int(idx.max()) < g.params["vocab"]
    gens = [embedding_bag_mean(i) for i in range(50)]
    assert {g.params["mode"] for g in gens} == {"mean", "sum"}
    assert any(g.params["dim"] % 4 for g in gens) and any(g.params["dim"] % 32 for g in gens)
    assert max(g.params["vocab"] * g.params["dim"] for g in gens) <= 2**25


@pytest.mark.parametrize("family,index", [(cross_entropy_loss, 0), (cross_entropy_loss, 1), (masked_softmax, 0),
                                          (masked_softmax, 1), (embedding_bag_mean, 0), (embedding_bag_mean, 1)])
def test_float64_reference_is_within_the_tolerance(family, index):
    """The problem's own float32 output against a float64 evaluation (the integer and mask inputs left as they
    are): the tolerance leaves room for another summation order (the variants') on top of the reference's."""
    g = family(index)
    ns = problem_namespace(g.task)
    torch.manual_seed(1234)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    torch.manual_seed(0)
    inputs = ns["get_inputs"]()
    with torch.no_grad():
        y32 = model(*inputs)
        y64 = model.double()(*[x.double() if torch.is_floating_point(x) else x for x in inputs])
    assert y64.dtype == torch.float64
    atol, rtol = g.task.tolerance.fp32
    err = ((y32.double() - y64).abs() / (atol + rtol * y64.abs())).max()
    assert float(err) < 0.2, (g.task.id, float(err))


# one problem per family by default (six nvcc builds each, about a minute on two cores); the code differs with
# the reduction (cross_entropy_loss), the scale (masked_softmax), the width and the mode (embedding_bag_mean)
@pytest.mark.parametrize("family,index", [(cross_entropy_loss, _first(cross_entropy_loss,
                                                                      lambda p: p["reduction"] == "mean")),
                                          (masked_softmax, 0),
                                          (embedding_bag_mean, _first(embedding_bag_mean,
                                                                      lambda p: p["dim"] % 4 != 0))])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))


@pytest.mark.slow
@pytest.mark.parametrize("family,index", [(cross_entropy_loss, _first(cross_entropy_loss,
                                                                      lambda p: p["reduction"] == "none")),
                                          (masked_softmax, _first(masked_softmax, lambda p: p["scale"] == 1.0)),
                                          (embedding_bag_mean, _first(embedding_bag_mean,
                                                                      lambda p: p["mode"] == "sum"))])
def test_every_variant_of_the_other_forms_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
