"""The ``gelu_mlp``, ``group_norm`` and ``scaled_dot_attention`` PyTorch families: valid problems that are not
degenerate, varied across indices, deterministic, with tolerances that a float64 evaluation respects, and variants
that differ, pass the static checks and build with nvcc (their outputs are checked on the GPU).
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.fused import gelu_mlp, group_norm, scaled_dot_attention  # noqa: E402
from cudaperf.tasks.pytorch import problem_namespace  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402

FAMILIES = [gelu_mlp, group_norm, scaled_dot_attention]


@pytest.mark.parametrize("family,params", [(gelu_mlp, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]),
                                           (group_norm, ["gn.weight", "gn.bias"]), (scaled_dot_attention, [])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, params):
    g = family(0)
    ns = problem_namespace(g.task)
    model = ns["Model"](*ns["get_init_inputs"]())
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == params
    if family is gelu_mlp:
        shapes = [tuple(p.shape) for _, p in model.named_parameters()]
        h, i, o = g.params["hidden"], g.params["in_features"], g.params["out_features"]
        assert shapes == [(h, i), (h,), (o, h), (o,)]


def test_group_norm_affine_parameters_are_drawn_deterministically():
    ns = problem_namespace(group_norm(0).task)
    torch.manual_seed(0)
    m1 = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(1)
    m2 = ns["Model"](*ns["get_init_inputs"]())
    assert torch.equal(m1.gn.weight, m2.gn.weight) and torch.equal(m1.gn.bias, m2.gn.bias)
    assert not torch.equal(m1.gn.weight, torch.ones_like(m1.gn.weight))
    assert float(m1.gn.bias.detach().abs().max()) > 0.1


def test_group_norm_groups_stay_within_the_tolerance_analysis():
    for i in range(50):
        p = group_norm(i).params
        assert p["channels"] % p["groups"] == 0
        assert p["channels"] // p["groups"] * p["size"] ** 2 <= 65536 and abs(p["shift"]) <= 2 * p["spread"]


def test_attention_problems_cover_masks_and_lengths():
    gens = [scaled_dot_attention(i) for i in range(50)]
    assert 10 <= sum(g.params["causal"] for g in gens) <= 40
    assert all(g.params["lq"] == g.params["lk"] for g in gens if g.params["causal"])
    assert any(g.params["lq"] != g.params["lk"] for g in gens)
    assert {g.params["d"] for g in gens} == {32, 64, 96, 128}
    assert any(g.params["lk"] % 32 for g in gens) and max(g.params["lk"] for g in gens) <= 1024


@pytest.mark.parametrize("family", FAMILIES)
def test_float64_reference_is_within_the_tolerance(family):
    """The problem's own float32 output against a float64 evaluation: the tolerance leaves room for another
    summation order (the variants') on top of the reference's."""
    for index in (0, 1):
        g = family(index)
        ns = problem_namespace(g.task)
        torch.manual_seed(1234)
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        torch.manual_seed(0)
        inputs = ns["get_inputs"]()
        with torch.no_grad():
            y32 = model(*inputs)
            y64 = model.double()(*[x.double() for x in inputs])
        atol, rtol = g.task.tolerance.fp32
        err = ((y32.double() - y64).abs() / (atol + rtol * y64.abs())).max()
        assert float(err) < 0.2, (g.task.id, float(err))


@pytest.mark.parametrize("family,index", [(f, i) for f in FAMILIES for i in (0, 1, 2)])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
