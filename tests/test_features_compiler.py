"""Compiler-tier features: the occupancy formula by hand, the source reader, and real sandboxed nvcc builds."""

from __future__ import annotations

import math
import time

import pytest

from cudaperf.features import compiler as cf
from cudaperf.features.compiler import (
    SM_LIMITS,
    compiler_features,
    kernel_base_name,
    occupancy,
    occupancy_detail,
    parse_ptxas,
    parse_sass,
    read_launches,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))


needs_sass = pytest.mark.skipif(cf.sass_tools() is None, reason="cuobjdump/nvdisasm not installed")


# ---------------------------------------------------------------------------------------------------------------
# occupancy (hand-computed, sm_90: 64 warps, 32 blocks, 64 K registers, 228 KB shared memory per SM)


def test_occupancy_full_with_few_registers():
    # 8 warps/block; registers: 32*32=1024/warp -> 16 warps per sub-partition -> 64 warps -> 8 blocks; warps: 8
    assert occupancy(32, 0, 256) == 1.0


def test_occupancy_halved_by_registers():
    # 64*32 = 2048 registers/warp -> 8 warps per sub-partition -> 32 warps -> 4 blocks of 8 warps -> 32/64
    d = occupancy_detail(64, 0, 256)
    assert (d.blocks_per_sm, d.limiter, d.occupancy) == (4, "registers", 0.5)


def test_no_block_fits_when_registers_exceed_the_block_limit():
    # 128*32 = 4096 registers/warp x 32 warps = 131072 > 65536 -> 0 blocks
    d = occupancy_detail(128, 0, 1024)
    assert d.blocks_per_sm == 0 and d.occupancy == 0.0 and "registers" in d.reason


def test_occupancy_limited_by_shared_memory():
    # floor(228 KB / (48 KB + 1 KB reserved)) = 4 blocks x 4 warps = 16 of 64 warps
    d = occupancy_detail(32, 48 * 1024, 128)
    assert (d.blocks_per_sm, d.limiter, d.occupancy) == (4, "shared_memory", 0.25)


def test_occupancy_rounding_and_limits():
    assert occupancy(32, 0, 32) == 0.5  # 32 blocks of 1 warp: the block limit
    assert occupancy(32, 0, 100) == pytest.approx(64 / 64)  # 4 warps/block (rounded up), 16 blocks
    assert occupancy(33, 0, 256) == pytest.approx(0.75)  # 33*32 -> 1280/warp: 12 warps/partition = 6 blocks
    assert occupancy(32, 227 * 1024 + 1, 128) == 0.0  # over the per-block maximum
    assert occupancy(32, 0, 2048) == 0.0  # block too large
    assert occupancy(32, 0, 256, "sm_86") == pytest.approx(1.0)  # 48 warps max: 6 blocks of 8 warps
    with pytest.raises(ValueError):
        occupancy(32, 0, 256, "sm_10")


def test_sm90_limits_are_the_documented_ones():
    lim = SM_LIMITS["sm_90"]
    assert (lim.registers_per_sm, lim.max_threads_per_sm, lim.max_blocks_per_sm) == (65536, 2048, 32)
    assert (lim.shared_bytes_per_sm, lim.max_shared_bytes_per_block) == (228 * 1024, 227 * 1024)
    assert (lim.shared_reserved_per_block, lim.shared_allocation_unit, lim.register_allocation_unit) == (1024, 128, 256)


# ---------------------------------------------------------------------------------------------------------------
# parsers


def test_parse_ptxas_lines():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z3devf
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
"""
    k = parse_ptxas(log)
    assert list(k) == ["_Z1kPf"]
    r = k["_Z1kPf"]
    assert (r.registers_per_thread, r.shared_bytes_per_block, r.barriers) == (32, 4096, 1)
    assert (r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes) == (16, 4, 8)


def test_parse_sass_skips_padding_and_move_idioms():
    sass = """\t\tFunction : _Z1kPf
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   HFMA2.MMA R9, -RZ, RZ, 1.875, 0 ;
        /*0020*/              @!P0 LDG.E R3, desc[UR4][R2.64] ;
        /*0030*/                   FFMA R3, R3, R3, R9 ;
        /*0040*/                   STG.E desc[UR4][R2.64], R3 ;
        /*0050*/                   EXIT ;
        /*0060*/                   BRA 0x60;
        /*0070*/                   NOP;
"""
    c = parse_sass(sass)["_Z1kPf"]
    assert c["sass_instructions"] == 5
    assert (c["sass_global_loads"], c["sass_global_stores"], c["sass_fp_ops"], c["sass_branches"]) == (1, 1, 1, 0)


def test_read_launches_resolves_simple_constants():
    src = """
#define BS 128
const int T = 64;
__global__ void __launch_bounds__(512) lb(float* x) {}
__global__ void a(float* x) {}
template <typename U> __global__ void b(U* x) {}
void run(float* x, int n) {
    dim3 blk(16, 16);
    a<<<n, BS>>>(x);            // 128
    b<float><<<dim3(4), dim3(T, 2), 0, 0>>>(x);  // 128
    a<<<1, blk>>>(x);           // 256
    a<<<1, n>>>(x);             // unknown
}"""
    info = read_launches(src)
    assert info.launches["a"] == [128, 256, None]
    assert info.launches["b"] == [128]
    assert info.launch_bounds == {"lb": 512}
    assert cf.choose_block_size("lb(float*)", info, None) == (512, "__launch_bounds__")
    assert cf.choose_block_size("a(float*)", info, 64)[0] == 64
    assert cf.choose_block_size("a(float*)", info, None)[0] == 128


def test_kernel_base_name():
    assert kernel_base_name("void ns::scale<float, 3>(float*, int)") == "scale"
    assert kernel_base_name("copy(float const*, float*, int)") == "copy"
    assert kernel_base_name("saxpy") == "saxpy"


# ---------------------------------------------------------------------------------------------------------------
# real nvcc (CPU only), in the sandbox

SHARED = """
__global__ void reverse(float* d, int n) {
    __shared__ float t[256];
    int i = threadIdx.x;
    t[i] = d[i];
    __syncthreads();
    d[i] = t[n - 1 - i];
}
void run(float* d) { reverse<<<1, 256>>>(d, 256); }
"""


def test_shared_array_barrier_and_occupancy():
    f = compiler_features(SHARED)
    assert f.compile_ok
    assert list(f.per_kernel) == ["reverse(float*, int)"]
    k = f.per_kernel["reverse(float*, int)"]
    assert k["shared_bytes_per_block"] == 1024
    assert 1 <= k["registers_per_thread"] <= 32
    assert k["spill_store_bytes"] == 0 and k["stack_bytes"] == 0
    assert k["block_size"] == 256
    assert k["theoretical_occupancy"] == occupancy(int(k["registers_per_thread"]), 1024, 256) == 1.0
    assert f.values["kernels"] == 1 and f.values["theoretical_occupancy"] == 1.0


@needs_sass
def test_sass_counts_barrier_shared_and_global():
    k = compiler_features(SHARED).values
    assert k["sass_barriers"] >= 1
    assert k["sass_shared_loads"] >= 1 and k["sass_shared_stores"] >= 1
    assert k["sass_global_loads"] >= 1 and k["sass_global_stores"] >= 1


@needs_sass
def test_sass_counts_atomics_copy_and_fp():
    src = """
__global__ void hist(const int* v, int* h, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&h[v[i] & 255], 1); }
__global__ void copy(const float* a, float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = a[i]; }
__global__ void axpy(float s, const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i] + y[i]; }
"""
    f = compiler_features(src, block_size=128)
    by_base = {kernel_base_name(k): v for k, v in f.per_kernel.items()}
    assert by_base["hist"]["sass_atomics"] >= 1
    assert by_base["copy"]["sass_global_loads"] >= 1 and by_base["copy"]["sass_global_stores"] >= 1
    assert by_base["copy"]["sass_fp_ops"] == 0 and by_base["axpy"]["sass_fp_ops"] >= 1
    ax = by_base["axpy"]
    assert ax["static_arithmetic_intensity"] == ax["sass_fp_ops"] / (ax["sass_global_loads"] + ax["sass_global_stores"] + 1)
    assert f.values["sass_atomics"] == sum(v["sass_atomics"] for v in f.per_kernel.values())
    assert f.values["theoretical_occupancy"] == pytest.approx(
        sum(v["theoretical_occupancy"] for v in f.per_kernel.values()) / 3)
    assert all(v["block_size"] == 128 for v in f.per_kernel.values())


def test_dynamic_local_array_uses_the_stack_and_launch_bounds_cap_spills():
    src = """
__global__ void __launch_bounds__(128) local(float* out, int k) {
    float a[512];
    for (int i = 0; i < 512; i++) a[i] = out[i * k];
    out[threadIdx.x] = a[(threadIdx.x * k) % 512];
}
__global__ void __launch_bounds__(1024, 2) spill(const float* in, float* out, int n) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = in[j * n + threadIdx.x];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) % 64] + in[i];
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    out[threadIdx.x] = s;
}
"""
    f = compiler_features(src)
    by_base = {kernel_base_name(k): v for k, v in f.per_kernel.items()}
    assert by_base["local"]["stack_bytes"] >= 2048
    assert by_base["local"]["block_size"] == 128  # from __launch_bounds__
    assert by_base["spill"]["registers_per_thread"] <= 32
    assert by_base["spill"]["spill_store_bytes"] > 0 and by_base["spill"]["spill_load_bytes"] > 0
    assert f.values["spill_store_bytes"] == by_base["spill"]["spill_store_bytes"] + by_base["local"]["spill_store_bytes"]
    assert f.values["stack_bytes"] == max(v["stack_bytes"] for v in by_base.values())


def test_unknown_block_size_gives_nan_with_a_reason():
    f = compiler_features("__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n"
                          "void run(float* x, int b) { k<<<1, b>>>(x); }\n")
    assert f.compile_ok and math.isnan(f.values["theoretical_occupancy"])
    assert "not a constant" in f.reasons["theoretical_occupancy"]
    assert not math.isnan(f.values["registers_per_thread"])


def test_broken_code_does_not_raise():
    f = compiler_features("__global__ void k(float* x) { x[0] = ; }")
    assert not f.compile_ok
    assert "error" in f.log and len(f.log) <= 4000
    assert all(math.isnan(v) for v in f.values.values())
    assert set(f.reasons) == set(f.values) and f.per_kernel == {}


def test_source_without_kernels():
    f = compiler_features("__device__ float twice(float x) { return 2 * x; }\n")
    assert f.compile_ok and f.values["kernels"] == 0 and math.isnan(f.values["registers_per_thread"])
    assert "no __global__ kernel" in f.reasons["registers_per_thread"]


def test_second_call_is_served_from_the_cache(monkeypatch):
    src = SHARED.replace("reverse", "reverse2")
    first = compiler_features(src)

    def no_compile(*a, **k):
        raise AssertionError("compiled again")

    monkeypatch.setattr(cf, "_compile_record", no_compile)
    t0 = time.monotonic()
    again = compiler_features(src, block_size=64)  # occupancy is recomputed; the compile record is reused
    assert time.monotonic() - t0 < 0.1
    assert again.per_kernel.keys() == first.per_kernel.keys()
    assert again.values["registers_per_thread"] == first.values["registers_per_thread"]
    assert again.values["block_size"] == 64


def test_candidate_compiles_in_the_sandbox(tmp_path):
    # A header the harness user can read but the sandbox user cannot: outside the sandbox this compiles.
    from cudaperf.harness.sandbox import base_level

    if base_level() != "namespaces+nobody":
        pytest.skip("the sandbox does not switch users here")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "secret.h").write_text("#define SECRET 1\n")
    f = compiler_features(f'#include "{private / "secret.h"}"\n__global__ void k(int* x) {{ *x = SECRET; }}\n')
    assert not f.compile_ok and "secret.h" in f.log


def test_a_pytorch_fast_path_unit_compiles_with_its_forced_header():
    pytest.importorskip("torch")
    from cudaperf.dataset.pytorch_families import TORCH_FAMILIES

    v = next(v for v in TORCH_FAMILIES["row_softmax"](0).variants if v.name == "block_per_row_b256")
    f = compiler_features(v.code)
    assert f.values["kernels"] == 1 and f.values["block_size"] == 256
    assert f.values["shared_bytes_per_block"] > 0 and f.values["registers_per_thread"] > 0
