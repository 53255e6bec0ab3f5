"""Shared by the PyTorch family test modules: every variant of a generated problem past the fast path's static
checks and built by nvcc (``tests/test_pytorch_families_*.py``)."""

from __future__ import annotations

from cudaperf.harness.torch_fast import build_fast_candidate, check_fast_candidate


def check_and_build(generated) -> None:
    """Every variant of ``generated`` (a family's problem) passes the static checks and builds; the message names
    the variant and ends with the compiler's log."""
    for v in generated.variants:
        chk = check_fast_candidate(v.code)
        assert chk.ok, (v.name, chk.reasons)
        b = build_fast_candidate(v.code)
        assert b.stage == "ok", (v.name, b.info.log[-2000:])
