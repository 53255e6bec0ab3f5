"""Shared by the PyTorch family test modules (``tests/test_pytorch_families_*.py``): a problem's model and inputs
as the harness makes them, and every variant of a problem past the fast path's static checks and built by nvcc."""

from __future__ import annotations

from cudaperf.harness.torch_fast import build_fast_candidate, check_fast_candidate
from cudaperf.tasks.pytorch import problem_namespace


def model_and_inputs(g, batch: int | None = None, input_seed: int = 0, init_seed: int = 1234):
    """The problem's ``Model`` (initialised under ``init_seed``, in eval mode) and its inputs (drawn under
    ``input_seed``); ``batch`` replaces the module's ``batch_size``, which ``get_inputs`` reads, as the harness does
    for its second size."""
    import torch

    ns = problem_namespace(g.task)
    if batch is not None:
        ns["batch_size"] = batch
    torch.manual_seed(init_seed)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    torch.manual_seed(input_seed)
    return model, ns["get_inputs"]()


def check_and_build(generated) -> None:
    """Every variant of ``generated`` (a family's problem) passes the static checks and builds; the message names
    the variant and ends with the compiler's log."""
    for v in generated.variants:
        chk = check_fast_candidate(v.code)
        assert chk.ok, (v.name, chk.reasons)
        b = build_fast_candidate(v.code)
        assert b.stage == "ok", (v.name, b.info.log[-2000:])
