"""The CPU emulator of fast-path units (``tests/cuda_cpu_emulator.py``) that the families' tests run their variants
on: it computes what a correct unit computes in every schedule, and it reports each mistake it is there to catch (a
missing barrier, a read or write past a tensor, a barrier after an early return, a warp intrinsic some lanes never
reach, a launch the CUDA runtime refuses or one over ``__launch_bounds__``, a misaligned float4, an output or a
shared array never written, a modified input, leaked scratch), and its float16 conversions round as the GPU's do."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import cuda_cpu_emulator as emu

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulator builds with g++")

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
# y[i] = the sum of x over i's warp, by shuffles (every lane holds the sum)
_WARP_SUM = """
__global__ void warp_total(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (i < n) y[i] = v;
}
""" + _ENTRY % "    warp_total<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(x, y, n);"
_BIG = """
__global__ void big(const float* x, float* y, long long n) {
    extern __shared__ float s[];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = s[31 - threadIdx.x];
}
"""
_UNITS = {
    "ok": _REVERSE + _ENTRY % _LAUNCH,
    "no_barrier": _REVERSE.replace("__syncthreads();", "") + _ENTRY % _LAUNCH,
    "read_past_end": _REVERSE.replace("i < n ? x[i]", "i <= n ? x[i]") + _ENTRY % _LAUNCH,
    "write_past_end": _REVERSE.replace("if (i < n) y[i]", "if (i <= n) y[i]") + _ENTRY % _LAUNCH,
    "barrier_after_return": _REVERSE.replace("    s[threadIdx.x] = i < n",
                                             "    if (i >= n) return;\n    s[threadIdx.x] = i < n") + _ENTRY % _LAUNCH,
    "skips_last": _REVERSE.replace("if (i < n)", "if (i < n - 1)") + _ENTRY % _LAUNCH,
    "shared_unwritten": _REVERSE.replace("s[threadIdx.x] = i < n", "if (threadIdx.x) s[threadIdx.x] = i < n")
    + _ENTRY % _LAUNCH,
    "modifies_input": _REVERSE.replace("if (i < n) y[i]", "if (i < n) ((float*)x)[i] = 0.f;\n    if (i < n) y[i]")
    + _ENTRY % _LAUNCH,
    "leaks_scratch": _REVERSE + _ENTRY % ("    float* tmp;\n    cudaMallocAsync(&tmp, 64, stream);\n" + _LAUNCH),
    "too_many_threads": _REVERSE + _ENTRY % _LAUNCH.replace("256, 0, stream", "512, 0, stream"),
    "block_too_large": _REVERSE + _ENTRY % _LAUNCH.replace("256, 0, stream", "2048, 0, stream"),
    "grid_y": _REVERSE + _ENTRY % "    rev<<<dim3(1, 70000), 256, 0, stream>>>(x, y, n);",
    "empty_grid": _REVERSE + _ENTRY % "    rev<<<0, 256, 0, stream>>>(x, y, n);",
    "big_smem": _BIG + _ENTRY % "    big<<<1, 32, 64 * 1024, stream>>>(x, y, n);",
    "big_smem_opted_in": _BIG + _ENTRY % """    if (cudaFuncSetAttribute(big, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024)) return 3;
    big<<<1, 32, 64 * 1024, stream>>>(x, y, n);""",
    "big_smem_opted_too_little": _BIG + _ENTRY % """    cudaFuncSetAttribute(big, cudaFuncAttributeMaxDynamicSharedMemorySize, 50000);
    big<<<1, 32, 64 * 1024, stream>>>(x, y, n);""",
    "float4_unchecked": """
__global__ void quad(const float* x, float* y, long long n) {
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * q + 3 < n) reinterpret_cast<float4*>(y)[q] = reinterpret_cast<const float4*>(x)[q];
}
""" + _ENTRY % "    quad<<<(unsigned)((n / 4 + 63) / 64), 64, 0, stream>>>(x, y, n);",
    "warp_sum": _WARP_SUM,
    "warp_after_return": _WARP_SUM.replace("    float v = i < n", "    if (i >= n) return;\n    float v = i < n"),
    "half_round_trip": """
__global__ void round_trip(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __half2float(__float2half_rn(x[i]));
}
""" + _ENTRY % "    round_trip<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);",
}
_NAMES = list(_UNITS)


@pytest.fixture(scope="module")
def exe():
    """Every unit above in one program, under ASan and UBSan."""
    return emu.build(list(_UNITS.values()), sanitize=True)


def _run(exe, name, x, **kw):
    return emu.run(exe, [x], [(x.shape, "float32")], unit=_NAMES.index(name), **kw)


def _expected(x):
    assert len(x) % 256 == 0
    return (x.reshape(-1, 256)[:, ::-1] * 2).reshape(-1)


def _warp_sums(x):
    n = len(x)
    padded = np.pad(x, (0, -n % 32)).reshape(-1, 32).sum(1, keepdims=True, dtype=np.float64)
    return np.broadcast_to(padded, (len(padded), 32)).reshape(-1)[:n]


def test_correct_units_give_the_expected_outputs_in_every_schedule(exe):
    x = np.arange(512, dtype=np.float32)
    xs = np.random.default_rng(0).standard_normal(200).astype(np.float32)
    for s in emu.SCHEDULES:
        r = _run(exe, "ok", x, schedule=s, seed=7)
        assert r.clean and np.array_equal(r.outputs[0], _expected(x)), (s, r.log)
        assert r.launches == [{"name": "rev", "grid": (2, 1, 1), "block": (256, 1, 1), "smem": 0, "status": "ok"}]
        w = _run(exe, "warp_sum", xs, schedule=s, seed=7)
        assert w.clean and np.allclose(w.outputs[0], _warp_sums(xs), atol=1e-5), (s, w.log)


def test_a_missing_barrier_shows_in_one_thread_order_or_the_other(exe):
    x = np.arange(512, dtype=np.float32)
    wrong = [not np.array_equal(_run(exe, "no_barrier", x, schedule=o).outputs[0], _expected(x))
             for o in ("forward", "reverse")]
    assert any(wrong)


def test_a_read_past_the_end_is_reported(exe):
    r = _run(exe, "read_past_end", np.arange(500, dtype=np.float32))
    assert r.rc is None and any("AddressSanitizer" in e for e in r.errors), r.log


def test_a_write_past_the_end_is_reported_with_or_without_the_sanitizers(exe):
    x = np.arange(500, dtype=np.float32)
    r = _run(exe, "write_past_end", x)
    assert any("AddressSanitizer" in e for e in r.errors), r.log
    plain = emu.run(emu.build(_UNITS["write_past_end"]), [x], [(x.shape, "float32")])  # the guard zones
    assert plain.guards_broken == 1 << 16 and not plain.clean


def test_a_barrier_after_an_early_return_is_reported(exe):
    r = _run(exe, "barrier_after_return", np.arange(500, dtype=np.float32))
    assert any("__syncthreads() reached by some threads" in e for e in r.errors), r.log


def test_a_warp_intrinsic_some_lanes_never_reach_is_reported(exe):
    r = _run(exe, "warp_after_return", np.arange(200, dtype=np.float32))  # 200 is not a multiple of 32
    assert any("never reach" in e for e in r.errors), r.log


def test_outputs_and_shared_memory_never_written_stay_nan(exe):
    r = _run(exe, "skips_last", np.arange(512, dtype=np.float32))
    assert r.rc == 0 and int(np.isnan(r.outputs[0]).sum()) == 1
    s = _run(exe, "shared_unwritten", np.arange(512, dtype=np.float32))
    assert s.rc == 0 and int(np.isnan(s.outputs[0]).sum()) == 2  # s[0] of each block, read by its thread 255


def test_a_modified_input_and_leaked_scratch_are_reported(exe):
    x = np.arange(512, dtype=np.float32)
    m = _run(exe, "modifies_input", x)
    assert m.inputs_modified == 1 and not m.clean
    leak = _run(exe, "leaks_scratch", x)
    assert leak.leaked == 1 and not leak.clean and np.array_equal(leak.outputs[0], _expected(x))


@pytest.mark.parametrize("name,status", [("too_many_threads", "over_launch_bounds"),
                                         ("block_too_large", "block_too_large"), ("grid_y", "grid_too_large"),
                                         ("empty_grid", "empty_grid_or_block"),
                                         ("big_smem", "dynamic_smem_over_48kb_without_opt_in"),
                                         ("big_smem_opted_too_little", "dynamic_smem_over_48kb_without_opt_in")])
def test_launches_the_runtime_refuses_fail_as_on_a_gpu(exe, name, status):
    for dry in (False, True):
        r = _run(exe, name, np.zeros(64, dtype=np.float32), dry=dry)
        assert r.rc == 2 and [x["status"] for x in r.launches] == [status], r.log
        assert any(status in e for e in r.errors), r.log


def test_dynamic_shared_memory_past_48_kb_after_opting_in(exe):
    x = np.arange(64, dtype=np.float32)
    r = _run(exe, "big_smem_opted_in", x)
    assert r.rc == 0 and not r.errors and np.array_equal(r.outputs[0][:32], x[:32][::-1])


def test_a_misaligned_float4_is_reported(exe):
    x = np.arange(64, dtype=np.float32)
    ok = _run(exe, "float4_unchecked", x)
    assert ok.clean and np.array_equal(ok.outputs[0], x)
    bad = _run(exe, "float4_unchecked", x, misalign=True)
    assert any("misaligned" in e for e in bad.errors), bad.log


def test_dry_runs_take_any_size_without_memory(exe):
    n = 3 * 2**30  # 12 GB of floats: never allocated
    r = emu.run(exe, [((n,), "float32")], [((n,), "float32")], unit=_NAMES.index("ok"), dry=True)
    assert r.rc == 0 and not r.errors and r.launches[0]["grid"] == ((n + 255) // 256, 1, 1) and not r.outputs


def test_half_conversions_round_to_nearest_even_as_the_gpu_does(exe):
    rng = np.random.default_rng(0)
    mags = np.exp2(rng.uniform(-27, 17, 20000)).astype(np.float32)  # subnormal halves to beyond 65504
    edges = np.array([0, 65504, 65519.99, 65520, 2**-24, 2**-25, 1.5 * 2**-25, 2**-14, 1 + 2**-11, 1 + 3 * 2**-11,
                      np.inf, np.nan], np.float32)
    vals = np.concatenate([mags, -mags, edges, -edges]).astype(np.float32)
    r = _run(exe, "half_round_trip", vals)
    with np.errstate(over="ignore"):  # beyond 65520: infinity, as on the GPU
        want = vals.astype(np.float16).astype(np.float32)
    got = r.outputs[0]
    assert r.clean and np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


_WARP_OPS = """
__global__ void ops(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const int lane = threadIdx.x % 32;
    const float v = x[threadIdx.x];
    const unsigned key = (unsigned)v % 3u;
    const unsigned ball = __ballot_sync(0xffffffffu, v > 10.f);
    const unsigned same = __match_any_sync(0xffffffffu, key);
    y[8 * threadIdx.x + 0] = __shfl_sync(0xffffffffu, v, 31 - lane);
    y[8 * threadIdx.x + 1] = __shfl_down_sync(0xffffffffu, v, 3);
    y[8 * threadIdx.x + 2] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    y[8 * threadIdx.x + 3] = __shfl_xor_sync(0xffffffffu, v, 5, 16);
    y[8 * threadIdx.x + 4] = (float)__popc(ball);
    y[8 * threadIdx.x + 5] = (float)__popc(same);
    y[8 * threadIdx.x + 6] = __any_sync(0xffffffffu, v == 40.f) ? 1.f : 0.f;
    y[8 * threadIdx.x + 7] = __all_sync(0xffffffffu, v >= 0.f) ? 1.f : 0.f;
}
""" + _ENTRY % "    ops<<<1, 64, 0, stream>>>(x, y, n);"


def test_shuffles_votes_and_match_any_exchange_real_values():
    x = np.arange(64, dtype=np.float32)
    exe = emu.build(_WARP_OPS)
    for s in ("round_robin", "lowest_first", "random"):
        r = emu.run(exe, [x], [((64 * 8,), "float32")], schedule=s)
        assert r.clean, r.log
        y = r.outputs[0].reshape(64, 8)
        for t in range(64):
            lane, w = t % 32, t // 32 * 32
            assert y[t, 0] == w + 31 - lane
            assert y[t, 1] == (t + 3 if lane + 3 < 32 else t)
            assert y[t, 2] == (t - 2 if lane % 8 >= 2 else t)
            assert y[t, 3] == (w + (lane ^ 5) if (lane ^ 5) // 16 == lane // 16 else t)
            assert y[t, 4] == sum(v > 10 for v in x[w:w + 32])
            assert y[t, 5] == sum(int(v) % 3 == t % 3 for v in x[w:w + 32])
            assert y[t, 6] == (1.0 if w == 32 else 0.0) and y[t, 7] == 1.0


def test_lanes_at_different_warp_intrinsics_are_reported():
    code = _WARP_OPS.replace("const unsigned ball = __ballot_sync(0xffffffffu, v > 10.f);",
                             "const unsigned ball = lane < 16 ? __ballot_sync(0xffffffffu, v > 10.f) :\n"
                             "__ballot_sync(0xffffffffu, v > 11.f);")
    r = emu.run(emu.build(code), [np.arange(64, dtype=np.float32)], [((64 * 8,), "float32")])
    assert any("different warp intrinsics" in e for e in r.errors) and not r.clean


def test_translate_rewrites_launches_shared_memory_and_launch_bounds():
    text = emu.translate('extern "C" int kernel_forward() { k<256><<<dim3(2, 3), 64, smem, stream>>>(a, f(b, c)); }\n'
                         "template <int T>\n__global__ void __launch_bounds__(T * 2) k(float* a) {\n"
                         "    extern __shared__ __align__(16) float buf[];\n    __shared__ __align__(16) float t[4], u;\n}")
    assert ('emu::launch(reinterpret_cast<const void*>(&k<256>), "k<256>", (long)((256) * 2), '
            "[=]() { k<256>(a, f(b, c)); }, dim3(2, 3), 64, smem, stream)") in text
    assert "float* buf = (float*)emu::dynamic_shared();" in text
    assert "static __attribute__((aligned(16))) float t[4], u; emu::shared(&t, sizeof(t)); emu::shared(&u, sizeof(u));" in text
    assert emu.launch_bounds("__global__ void __launch_bounds__(64) r(float* y) {}") == {"r": ((), "64")}
    templated = "template <int T, int R>\n__global__ void __launch_bounds__(T * R, 2) tiles(float* y) {}\n"
    assert emu.bound_of(templated, "tiles<32,4>") == 128 and emu.bound_of(templated, "other") is None
