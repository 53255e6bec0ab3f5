"""The CPU emulator of fast-path units (``tests/cpu_cuda.py``) that the layout families' tests run their variants
on: it reproduces a correct unit's outputs, and it reports the mistakes it is there to catch (a read past a tensor, a
missing barrier, a barrier after an early return, a launch the CUDA runtime refuses, a misaligned float4, an output
never written)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cpu_cuda import build, emulate, translate

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    const long long n = in[0].numel;
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
# a block of 256 reverses each chunk of 256 elements through shared memory (and doubles them)
_REVERSE = """
__global__ void __launch_bounds__(256) rev(const float* __restrict__ x, float* __restrict__ y, long long n) {
    __shared__ float s[256];
    const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = s[255 - threadIdx.x] * 2.f;
}
"""
_LAUNCH = "    rev<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);"
_UNITS = {
    "ok": _REVERSE + _ENTRY % _LAUNCH,
    "no_barrier": _REVERSE.replace("__syncthreads();", "") + _ENTRY % _LAUNCH,
    "read_past_end": _REVERSE.replace("i < n ? x[i]", "i <= n ? x[i]") + _ENTRY % _LAUNCH,
    "barrier_after_return": _REVERSE.replace("    s[threadIdx.x] = i < n",
                                             "    if (i >= n) return;\n    s[threadIdx.x] = i < n") + _ENTRY % _LAUNCH,
    "skips_last": _REVERSE.replace("if (i < n)", "if (i < n - 1)") + _ENTRY % _LAUNCH,
    "too_many_threads": _REVERSE + _ENTRY % _LAUNCH.replace("256, 0, stream", "512, 0, stream"),
    "grid_y": _REVERSE + _ENTRY % "    rev<<<dim3(1, 70000), 256, 0, stream>>>(x, y, n);",
    "big_smem": """
__global__ void big(const float* x, float* y, long long n) {
    extern __shared__ float s[];
    s[threadIdx.x] = x[threadIdx.x];
    y[threadIdx.x] = s[threadIdx.x];
}
""" + _ENTRY % "    big<<<1, 32, 64 * 1024, stream>>>(x, y, n);",
    "big_smem_opted_in": """
__global__ void big(const float* x, float* y, long long n) {
    extern __shared__ float s[];
    s[threadIdx.x] = x[threadIdx.x];
    y[threadIdx.x] = s[threadIdx.x];
}
""" + _ENTRY % """    if (cudaFuncSetAttribute(big, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024)) return 3;
    big<<<1, 32, 64 * 1024, stream>>>(x, y, n);""",
    "float4_unchecked": """
__global__ void quad(const float* x, float* y, long long n) {
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * q + 3 < n) reinterpret_cast<float4*>(y)[q] = reinterpret_cast<const float4*>(x)[q];
}
""" + _ENTRY % "    quad<<<(unsigned)((n / 4 + 63) / 64), 64, 0, stream>>>(x, y, n);",
}
_NAMES = list(_UNITS)


@pytest.fixture(scope="module")
def exe():
    return build(list(_UNITS.values()))


def _run(exe, name, x, **kw):
    return emulate(exe, _NAMES.index(name), [x], [x.shape], **kw)


def _expected(x):
    assert len(x) % 256 == 0
    return (x.reshape(-1, 256)[:, ::-1] * 2).reshape(-1)


def test_a_correct_unit_gives_the_expected_outputs_in_either_thread_order(exe):
    x = np.arange(512, dtype=np.float32)
    for order in ("forward", "reverse"):
        r = _run(exe, "ok", x, order=order)
        assert r.rc == 0 and not r.errors and np.array_equal(r.outputs[0], _expected(x)), r.log
        assert r.launches == ["rev grid 2 1 1 block 256 1 1 smem 0"]


def test_a_missing_barrier_shows_in_one_thread_order_or_the_other(exe):
    x = np.arange(512, dtype=np.float32)
    wrong = [not np.array_equal(_run(exe, "no_barrier", x, order=o).outputs[0], _expected(x))
             for o in ("forward", "reverse")]
    assert any(wrong)


def test_a_read_past_the_end_is_reported(exe):
    r = _run(exe, "read_past_end", np.arange(500, dtype=np.float32))
    assert any("AddressSanitizer" in e for e in r.errors), r.log


def test_a_barrier_after_an_early_return_is_reported(exe):
    r = _run(exe, "barrier_after_return", np.arange(500, dtype=np.float32))
    assert any("__syncthreads reached" in e for e in r.errors), r.log


def test_an_output_never_written_stays_nan(exe):
    r = _run(exe, "skips_last", np.arange(512, dtype=np.float32))
    assert r.rc == 0 and int(np.isnan(r.outputs[0]).sum()) == 1


@pytest.mark.parametrize("name,what", [("too_many_threads", "__launch_bounds__"), ("grid_y", "grid 1x70000x1"),
                                       ("big_smem", "dynamic shared memory")])
def test_launches_the_runtime_refuses_fail_as_on_a_gpu(exe, name, what):
    for dry in (False, True):
        r = _run(exe, name, np.zeros(64, dtype=np.float32), dry=dry)
        assert r.rc == 2 and any(what in e for e in r.errors), r.log


def test_dynamic_shared_memory_past_48_kb_after_opting_in(exe):
    r = _run(exe, "big_smem_opted_in", np.arange(64, dtype=np.float32))
    assert r.rc == 0 and not r.errors and np.array_equal(r.outputs[0][:32], np.arange(32, dtype=np.float32))


def test_a_misaligned_float4_is_reported(exe):
    x = np.arange(64, dtype=np.float32)
    ok = _run(exe, "float4_unchecked", x)
    assert ok.rc == 0 and not ok.errors and np.array_equal(ok.outputs[0], x)
    bad = _run(exe, "float4_unchecked", x, misalign=True)
    assert any("misaligned" in e for e in bad.errors), bad.log


def test_translate_rewrites_launches_and_dynamic_shared_memory():
    text = translate('extern "C" int kernel_forward() { k<256><<<dim3(2, 3), 64, smem, stream>>>(a, f(b, c)); }\n'
                     "__global__ void __launch_bounds__(128) g() { extern __shared__ float buf[]; }")
    assert 'emu_launch("k<256>", emu_config(dim3(2, 3), 64, smem, stream), k<256>, a, f(b, c));' in text
    assert "float* buf = (float*)emu_dyn_smem;" in text and "emu_set_bounds(g, (128))" in text
    assert 'extern "C"' not in text
