"""Generated PyTorch problems and their fast-path variants: valid problems that are not degenerate, varied
across indices, and variants that pass the static checks and build with nvcc (run on the GPU: tests/gpu)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families import TORCH_FAMILIES, elementwise_chain, row_reduce, row_softmax  # noqa: E402
from cudaperf.harness.torch_fast import build_fast_candidate, check_fast_candidate  # noqa: E402
from cudaperf.tasks.pytorch import degenerate_reasons  # noqa: E402


@pytest.mark.parametrize("family", [elementwise_chain, row_reduce, row_softmax])
def test_problems_are_valid_varied_and_not_degenerate(family):
    gens = [family(i) for i in range(6)]
    assert len({g.task.source for g in gens}) == 6 and len({str(g.params) for g in gens}) == 6
    for g in gens[:3]:
        assert degenerate_reasons(g.task) == [], (g.task.id, g.params)
        assert len(g.variants) >= 6 and len({v.code for v in g.variants}) == len(g.variants)
    assert family(2).task.source == gens[2].task.source  # deterministic by index


@pytest.mark.parametrize("family,index", [(elementwise_chain, 0), (elementwise_chain, 1), (row_reduce, 0),
                                          (row_softmax, 0)])
def test_every_variant_passes_the_checks_and_builds(family, index):
    for v in family(index).variants:
        assert check_fast_candidate(v.code).ok, (v.name, check_fast_candidate(v.code).reasons)
        b = build_fast_candidate(v.code)
        assert b.stage == "ok", (v.name, b.info.log[-2000:])


def test_family_registry():
    assert {"elementwise_chain", "row_reduce", "row_softmax", "linear_act", "layer_norm", "col_reduce"} <= set(
        TORCH_FAMILIES)


def test_kernel_names_for_the_profiler_match_every_variants_kernels():
    """The run-time evidence check looks for the candidate's kernel names among the kernels the profiler saw: every
    variant's names must be its real kernels (``__launch_bounds__`` after ``void`` once read as a kernel named
    ``__launch_bounds__``, and four correct variants were refused on the H200)."""
    from cudaperf.harness.run_pytorch import _KERNEL

    for name, make in TORCH_FAMILIES.items():
        for v in make(0).variants:
            own = _KERNEL.findall(v.code)
            assert own and not any(k.startswith("__") for k in own), (name, v.name, own)
            for k in own:
                assert f"{k}<<<" in v.code.replace(" ", "") or f"{k}<" in v.code, (name, v.name, k)
