"""The spatial PyTorch families (pool2d, depthwise_conv2d, row_cumsum): valid problems that are not degenerate, varied
across indices, and variants that pass the static checks and build with nvcc (run on the GPU: tests/gpu)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.spatial import depthwise_conv2d, pool2d, row_cumsum  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402
from cudaperf.tasks.pytorch import degenerate_reasons  # noqa: E402

FAMILIES = [pool2d, depthwise_conv2d, row_cumsum]


@pytest.mark.parametrize("family", FAMILIES)
def test_problems_are_valid_varied_and_not_degenerate(family):
    gens = [family(i) for i in range(6)]
    assert len({g.task.source for g in gens}) == 6 and len({str(g.params) for g in gens}) == 6
    assert len({g.task.id for g in gens}) == 6
    for g in gens[:3]:
        assert degenerate_reasons(g.task) == [], (g.task.id, g.params)
    for g in gens:
        assert len(g.variants) >= 6 and len({v.code for v in g.variants}) == len(g.variants)
        assert len({v.name for v in g.variants}) == len(g.variants)
    assert family(2).task.source == gens[2].task.source  # deterministic by index
    assert [v.code for v in family(2).variants] == [v.code for v in gens[2].variants]


def test_row_cumsum_tolerance_scales_with_the_row():
    """atol grows with the columns and the terms' magnitude, and stays far below one element's value."""
    gens = [row_cumsum(i) for i in range(12)]
    for g in gens:
        atol, rtol = g.task.tolerance.fp32
        assert rtol == 1e-4 and 0 < atol < 0.2, (g.task.id, atol)
    by_cols = sorted((g.params["cols"], g.params["atol"]) for g in gens if g.params["f"] != "scale")
    assert by_cols[0][1] < by_cols[-1][1] or by_cols[0][0] == by_cols[-1][0]


@pytest.mark.parametrize("family,index", [(f, i) for f in FAMILIES for i in (0, 1)])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
