"""The PyTorch fast path on the GPU: a library built by nvcc alone computes on torch's tensors and stream."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch with a CUDA device")]


def test_fast_module_adds_on_the_current_stream():
    from pathlib import Path

    from cudaperf.harness.torch_fast import FastModule, build_fast_candidate

    b = build_fast_candidate((Path(__file__).parent.parent / "fixtures" / "torch_fast" / "add.cu").read_text())
    assert b.stage == "ok", b.info.log
    mod = FastModule(b.exe)
    a = torch.randn(1_000_003, device="cuda")
    c = torch.randn(1_000_003, device="cuda")
    out = torch.full_like(a, float("nan"))
    mod([a, c], [out], torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.equal(out, a + c)
