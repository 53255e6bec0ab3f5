"""The ``linear_act``, ``layer_norm`` and ``col_reduce`` PyTorch families: valid problems that are not degenerate,
varied across indices, deterministic, and variants that differ, pass the static checks and build with nvcc (their
outputs are checked on the GPU)."""

from __future__ import annotations

import ast
import re

import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.blocks import col_reduce, layer_norm, linear_act  # noqa: E402
from cudaperf.dataset.pytorch_families.common import task_id  # noqa: E402
from cudaperf.harness.static_checks import strip_comments_and_strings  # noqa: E402
from cudaperf.tasks.pytorch import degenerate_reasons, problem_namespace  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402

FAMILIES = [linear_act, layer_norm, col_reduce]


@pytest.mark.parametrize("family", FAMILIES)
def test_problems_are_valid_varied_and_not_degenerate(family):
    gens = [family(i) for i in range(6)]
    assert len({g.task.source for g in gens}) == 6 and len({str(g.params) for g in gens}) == 6
    for i, g in enumerate(gens):
        assert g.task.id == task_id(family.__name__, i) and g.family == family.__name__ and g.index == i
        names = {n.name for n in ast.parse(g.task.source).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names
    for g in gens[:3]:
        assert degenerate_reasons(g.task) == [], (g.task.id, g.params)
        assert len(g.variants) >= 6 and len({v.code for v in g.variants}) == len(g.variants)
        assert len({v.name for v in g.variants}) == len(g.variants)


@pytest.mark.parametrize("family", FAMILIES)
def test_problems_are_deterministic_by_index(family):
    a, b = family(2), family(2)
    assert a.task.source == b.task.source and a.params == b.params and a.task.tolerance == b.task.tolerance
    assert [(v.name, v.tags, v.code) for v in a.variants] == [(v.name, v.tags, v.code) for v in b.variants]


@pytest.mark.parametrize("family,params", [(linear_act, ["linear.weight", "linear.bias"]),
                                           (layer_norm, ["ln.weight", "ln.bias"]), (col_reduce, [])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, params):
    g = family(0)
    ns = problem_namespace(g.task)
    model = ns["Model"](*ns["get_init_inputs"]())
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == params
    if family is linear_act:
        w, b = (p for _, p in model.named_parameters())
        assert tuple(w.shape) == (g.params["out_features"], g.params["in_features"])
        assert tuple(b.shape) == (g.params["out_features"],)


def test_layer_norm_affine_parameters_are_drawn_deterministically():
    ns = problem_namespace(layer_norm(0).task)
    torch.manual_seed(0)
    m1 = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(1)
    m2 = ns["Model"](*ns["get_init_inputs"]())
    assert torch.equal(m1.ln.weight, m2.ln.weight) and torch.equal(m1.ln.bias, m2.ln.bias)
    assert not torch.equal(m1.ln.weight, torch.ones_like(m1.ln.weight))
    assert float(m1.ln.bias.detach().abs().max()) > 0.1
    other = problem_namespace(layer_norm(1).task)["Model"]()
    assert not torch.equal(m1.ln.weight[:16], other.ln.weight[:16])


_LAUNCH = re.compile(r"(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>", re.S)


@pytest.mark.parametrize("family", FAMILIES)
def test_variants_launch_differently(family):
    g = family(0)
    launches = []
    for v in g.variants:
        found = _LAUNCH.findall(strip_comments_and_strings(v.code))
        assert found and all("stream" in cfg for _, cfg in found), v.name  # every launch on the given stream
        launches.append(tuple((name, " ".join(cfg.split())) for name, cfg in found))
    assert len(set(launches)) == len(launches), launches
    assert len({frozenset(v.tags) for v in g.variants}) >= 5


@pytest.mark.parametrize("family,index", [(f, i) for f in FAMILIES for i in (0, 1)])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
