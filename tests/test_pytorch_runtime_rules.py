"""The run-time boundary behind the PyTorch static checks (session 20): the profiled call's GPU time must be
carried by the candidate's own kernels (copies and fills aside), and the precision settings the runner pinned must
be the same after the candidate's last call. Pure rules on the runner's records, and the runner's own reading of
the settings with the real torch."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from cudaperf.harness.run_pytorch import flags_problem, foreign_compute_problem
from cudaperf.harness.settings import HarnessSettings

S = HarnessSettings()
OWN = {"bias_relu_kernel"}


def test_library_kernels_carrying_the_compute_get_no_credit():
    gemm = {"void bias_relu_kernel(float*, float const*, long long, int)": 12.0,
            "sm90_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x32": 400.0,
            "Memcpy DtoD (Device -> Device)": 50.0}
    why = foreign_compute_problem(gemm, OWN, S)
    assert why and "97 %" in why and "sm90_xmma_gemm" in why
    ops = {"void bias_relu_kernel(float*)": 10.0,  # a matmul made of broadcast * and sum: ATen's compute kernels
           "void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<float>>": 300.0,
           "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t>>": 200.0}
    assert foreign_compute_problem(ops, OWN, S) is not None


def test_own_kernels_with_copies_and_fills_keep_their_credit():
    honest = {"void bias_relu_kernel(float*)": 120.0,
              "void at::native::elementwise_kernel<128, 2, direct_copy_kernel_cuda>": 300.0,  # .contiguous()
              "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>": 40.0,  # zeros
              "Memset (Device)": 2.0}
    assert foreign_compute_problem(honest, OWN, S) is None
    small = {"void bias_relu_kernel(float*)": 90.0, "void at::native::softmax_warp_forward<float>": 10.0}
    assert foreign_compute_problem(small, OWN, S) is None  # a tenth: within the 20 %
    assert foreign_compute_problem(None, OWN, S) is None  # no figures, no rule
    assert foreign_compute_problem({"cublas_gemm": 9.0}, OWN, HarnessSettings(max_foreign_compute_share=1.0)) is None


def test_changed_precision_settings_get_no_credit():
    pinned = {"matmul.allow_tf32": False, "float32_matmul_precision": "highest", "matmul.fp32_precision": "ieee"}
    assert flags_problem(pinned, dict(pinned)) is None
    why = flags_problem(pinned, {**pinned, "matmul.fp32_precision": "tf32", "matmul.allow_tf32": "raised RuntimeError"})
    assert why and "tf32" in why and "allow_tf32" in why
    assert flags_problem(None, pinned) is None and flags_problem(pinned, None) is None


def test_the_runner_sees_tf32_switched_on_through_either_api():
    """The runner's reading with the real torch: the new API (``fp32_precision = "tf32"``) makes the legacy
    getters raise, which is recorded, not skipped (a candidate could otherwise hide the switch)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cudaperf" / "harness" / "native"))
    try:
        import torch_runner
    finally:
        sys.path.pop(0)
    warnings.simplefilter("ignore")
    m = torch.backends.cuda.matmul
    saved = torch_runner.precision_flags()
    try:
        m.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        pinned = torch_runner.precision_flags()
        assert flags_problem(pinned, torch_runner.precision_flags()) is None
        if hasattr(m, "fp32_precision"):
            m.fp32_precision = "tf32"
            assert flags_problem(pinned, torch_runner.precision_flags()) is not None
            m.fp32_precision = "ieee"
        if hasattr(torch.backends, "fp32_precision"):  # the global switch of the new API, through an alias
            backends = torch.backends
            before = backends.fp32_precision
            backends.fp32_precision = "tf32"
            assert "fp32_precision" in (flags_problem(pinned, torch_runner.precision_flags()) or "")
            backends.fp32_precision = before
        if hasattr(m, "allow_fp16_reduced_precision_reduction"):
            before = m.allow_fp16_reduced_precision_reduction
            m.allow_fp16_reduced_precision_reduction = not before
            assert "reduced_precision" in (flags_problem(pinned, torch_runner.precision_flags()) or "")
            m.allow_fp16_reduced_precision_reduction = before
        assert flags_problem(pinned, torch_runner.precision_flags()) is None
        torch.set_float32_matmul_precision("high")
        assert flags_problem(pinned, torch_runner.precision_flags()) is not None
    finally:
        torch.set_float32_matmul_precision(saved.get("float32_matmul_precision", "highest")
                                           if not str(saved.get("float32_matmul_precision")).startswith("raised")
                                           else "highest")
