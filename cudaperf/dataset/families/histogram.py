"""Histograms: counts[b] = number of i with bin(x[i]) == b, for B bins (B from 16 to 4096).

Two kinds of keys: 32-bit integer keys binned by a hash (R rounds of an integer mix, then a residue modulo B or a
shift), and float values quantized into B equal-width bins over [lo, hi) with out-of-range values clamped into the
edge bins. The float quantization uses one subtraction and one multiplication (no fused operation possible), so
CPU and GPU agree exactly on every bin.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

MULTS = [0x7FEB352D, 0x846CA68B, 0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F, 0x165667B1, 0x2C1B3C6D]
BINS = [16, 37, 64, 100, 256, 500, 1024, 1999, 2048, 4096]
HEAD = "#include <cuda_runtime.h>\n\n"


def _bin_fn(qual: str, p: dict) -> str:
    B = p["bins"]
    if p["kind"] == "hash":
        final = f"(int)(v % {B}u)" if B & (B - 1) else f"(int)((v >> {p['shift']}) & {B - 1}u)"
        return (f"{qual} int binof(unsigned int v) {{\n"
                f"    for (int r = 0; r < {p['rounds']}; ++r) {{\n"
                f"        v ^= v >> {p['s1']}; v *= 0x{p['m1']:08X}u; v ^= v >> {p['s2']}; v *= 0x{p['m2']:08X}u;"
                " v += (unsigned int)r;\n"
                f"    }}\n    return {final};\n}}\n\n")
    return (f"{qual} int binof(float v) {{\n"
            f"    float q = (v - ({p['lo']!r}f)) * {p['scale']!r}f;\n"
            f"    return q < 0.0f ? 0 : (q >= {float(B)!r}f ? {B - 1} : (int)q);\n}}\n\n")


def _kt(p: dict) -> str:
    return "unsigned int" if p["kind"] == "hash" else "float"


def _sig(p: dict) -> str:
    return f'extern "C" void hist(int n, const {_kt(p)}* x, int* counts)'


def _pre(p: dict) -> str:
    return HEAD + f"#define NB {p['bins']}\n\n" + _bin_fn("__device__ __forceinline__", p)


def _setup(p: dict) -> str:
    kt = _kt(p)
    return ("    int* dc; cudaMalloc(&dc, NB * sizeof(int));\n"
            "    cudaMemset(dc, 0, NB * sizeof(int));\n"
            "    if (n <= 0) { cudaMemcpy(counts, dc, NB * sizeof(int), cudaMemcpyDeviceToHost); cudaFree(dc); return; }\n"
            f"    size_t xbytes = (size_t)n * sizeof({kt});\n"
            f"    {kt}* dx; cudaMalloc(&dx, xbytes);\n"
            "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n")


TAIL = ("    cudaMemcpy(counts, dc, NB * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "    cudaFree(dx); cudaFree(dc);\n}\n")

SMS = "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"


def _global_atomics(p: dict) -> str:
    kt = _kt(p)
    return (_pre(p)
            + f"__global__ void hist_global(int n, const {kt}* x, int* c) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) atomicAdd(&c[binof(x[i])], 1);\n}\n\n"
            + _sig(p) + " {\n" + _setup(p)
            + "    hist_global<<<(n + 255) / 256, 256>>>(n, dx, dc);\n" + TAIL)


def _shared_priv(p: dict) -> str:
    kt = _kt(p)
    return (_pre(p)
            + f"__global__ void hist_shared(int n, const {kt}* __restrict__ x, int* c) {{\n"
            "    __shared__ int sh[NB];\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) sh[b] = 0;\n"
            "    __syncthreads();\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        atomicAdd(&sh[binof(x[i])], 1);\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x)\n"
            "        if (sh[b]) atomicAdd(&c[b], sh[b]);\n}\n\n"
            + _sig(p) + " {\n" + _setup(p) + SMS
            + "    int blocks = (n + 255) / 256; if (blocks > sms * 4) blocks = sms * 4;\n"
            "    hist_shared<<<blocks, 256>>>(n, dx, dc);\n" + TAIL)


def _warp_priv(p: dict) -> str:
    kt = _kt(p)
    copies = max(1, min(8, 8192 // p["bins"]))
    return (_pre(p) + f"#define COPIES {copies}\n\n"
            + f"__global__ void hist_warp(int n, const {kt}* __restrict__ x, int* c) {{\n"
            "    __shared__ int sh[COPIES * NB];\n"
            "    for (int b = threadIdx.x; b < COPIES * NB; b += blockDim.x) sh[b] = 0;\n"
            "    __syncthreads();\n"
            "    int* mine = sh + ((threadIdx.x >> 5) % COPIES) * NB;\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        atomicAdd(&mine[binof(x[i])], 1);\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) {\n"
            "        int s = 0;\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < COPIES; ++k) s += sh[k * NB + b];\n"
            "        if (s) atomicAdd(&c[b], s);\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _setup(p) + SMS
            + "    int blocks = (n + 255) / 256; if (blocks > sms * 8) blocks = sms * 8;\n"
            "    hist_warp<<<blocks, 256>>>(n, dx, dc);\n" + TAIL)


def _per_bin(p: dict) -> str:
    kt = _kt(p)
    return (_pre(p)
            + f"__global__ void to_bins(int n, const {kt}* x, int* bins) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) bins[i] = binof(x[i]);\n}\n\n"
            "__global__ void count_per_bin(int n, const int* bins, int* c) {\n"
            "    __shared__ int tile[1024];\n"
            "    int b = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int cnt = 0;\n"
            "    for (int base = 0; base < n; base += 1024) {\n"
            "        for (int k = threadIdx.x; k < 1024; k += blockDim.x)\n"
            "            tile[k] = base + k < n ? bins[base + k] : -1;\n"
            "        __syncthreads();\n"
            "        for (int k = 0; k < 1024; ++k) cnt += (tile[k] == b);\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (b < NB) c[b] = cnt;\n}\n\n"
            + _sig(p) + " {\n" + _setup(p)
            + "    int* db; cudaMalloc(&db, (size_t)n * sizeof(int));\n"
            "    to_bins<<<(n + 255) / 256, 256>>>(n, dx, db);\n"
            "    count_per_bin<<<(NB + 127) / 128, 128>>>(n, db, dc);\n"
            "    cudaFree(db);\n" + TAIL)


def _host_finish(p: dict) -> str:
    kt = _kt(p)
    return (_pre(p) + "#include <stdlib.h>\n#include <string.h>\n\n"
            + f"__global__ void hist_partial(int n, const {kt}* __restrict__ x, int* part) {{\n"
            "    __shared__ int sh[NB];\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) sh[b] = 0;\n"
            "    __syncthreads();\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        atomicAdd(&sh[binof(x[i])], 1);\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) part[(size_t)blockIdx.x * NB + b] = sh[b];\n}\n\n"
            + _sig(p) + " {\n"
            "    const int G = 64;\n"
            "    memset(counts, 0, NB * sizeof(int));\n"
            "    if (n <= 0) return;\n"
            f"    size_t xbytes = (size_t)n * sizeof({kt});\n"
            f"    {kt}* dx; int* dpart;\n"
            "    cudaMalloc(&dx, xbytes); cudaMalloc(&dpart, (size_t)G * NB * sizeof(int));\n"
            "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    hist_partial<<<G, 512>>>(n, dx, dpart);\n"
            "    int* hp = (int*)malloc((size_t)G * NB * sizeof(int));\n"
            "    cudaMemcpy(hp, dpart, (size_t)G * NB * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    for (int g = 0; g < G; ++g)\n"
            "        for (int b = 0; b < NB; ++b) counts[b] += hp[(size_t)g * NB + b];\n"
            "    free(hp); cudaFree(dx); cudaFree(dpart);\n}\n")


def _partials_vec(p: dict) -> str:
    kt = _kt(p)
    v4 = "uint4" if p["kind"] == "hash" else "float4"
    return (_pre(p)
            + f"__global__ void hist_vec(int n, const {kt}* __restrict__ x, int* part) {{\n"
            "    __shared__ int sh[NB];\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) sh[b] = 0;\n"
            "    __syncthreads();\n"
            f"    const {v4}* x4 = reinterpret_cast<const {v4}*>(x);\n"
            "    int n4 = n / 4;\n"
            "    int stride = gridDim.x * blockDim.x;\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {\n"
            f"        {v4} v = x4[i];\n"
            "        atomicAdd(&sh[binof(v.x)], 1); atomicAdd(&sh[binof(v.y)], 1);\n"
            "        atomicAdd(&sh[binof(v.z)], 1); atomicAdd(&sh[binof(v.w)], 1);\n"
            "    }\n"
            "    for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)\n"
            "        atomicAdd(&sh[binof(x[i])], 1);\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) part[(size_t)blockIdx.x * NB + b] = sh[b];\n}\n\n"
            "__global__ void reduce_partials(int g, const int* part, int* c) {\n"
            "    int b = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (b >= NB) return;\n"
            "    int s = 0;\n"
            "    for (int k = 0; k < g; ++k) s += part[(size_t)k * NB + b];\n"
            "    c[b] = s;\n}\n\n"
            + _sig(p) + " {\n" + _setup(p) + SMS
            + "    int g = sms * 2;\n"
            "    int* dpart; cudaMalloc(&dpart, (size_t)g * NB * sizeof(int));\n"
            "    hist_vec<<<g, 256>>>(n, dx, dpart);\n"
            "    reduce_partials<<<(NB + 127) / 128, 128>>>(g, dpart, dc);\n"
            "    cudaFree(dpart);\n" + TAIL)


def _chunk_atomics(p: dict) -> str:
    """Few threads, each walks a contiguous chunk (neighbouring threads a chunk apart), global atomics."""
    kt = _kt(p)
    return (_pre(p)
            + f"__global__ void hist_chunks(int n, int chunk, const {kt}* x, int* c) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long lo = (long long)t * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            "    for (long long i = lo; i < hi; ++i) atomicAdd(&c[binof(x[i])], 1);\n}\n\n"
            + _sig(p) + " {\n" + _setup(p)
            + "    const int T = 8192;\n"
            "    int chunk = (n + T - 1) / T;\n"
            "    hist_chunks<<<T / 64, 64>>>(n, chunk, dx, dc);\n" + TAIL)


def _chunked_transfers(p: dict) -> str:
    kt = _kt(p)
    return (_pre(p)
            + f"__global__ void hist_shared(int n, const {kt}* __restrict__ x, int* c) {{\n"
            "    __shared__ int sh[NB];\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x) sh[b] = 0;\n"
            "    __syncthreads();\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        atomicAdd(&sh[binof(x[i])], 1);\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NB; b += blockDim.x)\n"
            "        if (sh[b]) atomicAdd(&c[b], sh[b]);\n}\n\n"
            + _sig(p) + " {\n"
            "    int* dc; cudaMalloc(&dc, NB * sizeof(int));\n"
            "    cudaMemset(dc, 0, NB * sizeof(int));\n"
            "    const int C = 1 << 18;\n"
            f"    {kt}* dx; cudaMalloc(&dx, (size_t)C * sizeof({kt}));\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({kt}), cudaMemcpyHostToDevice);\n"
            "        int blocks = (m + 1023) / 1024;\n"
            "        hist_shared<<<blocks, 128>>>(m, dx, dc);\n"
            "    }\n" + TAIL)


def _reference(p: dict) -> str:
    kt = _kt(p)
    return (f"#define NB {p['bins']}\n\n" + _bin_fn("static inline", p)
            + f"void hist(int n, const {kt}* x, int* counts) {{\n"
            "    for (int b = 0; b < NB; ++b) counts[b] = 0;\n"
            "    for (int i = 0; i < n; ++i) counts[binof(x[i])]++;\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    B = BINS[index % len(BINS)]
    kind = "hash" if index % 4 != 3 else "float"
    p: dict = {"bins": B, "kind": kind}
    if kind == "hash":
        i1 = int(rng.integers(len(MULTS)))
        p.update(rounds=int([2, 3, 4, 6][(index // 3) % 4]), m1=MULTS[i1],
                 m2=MULTS[(i1 + 1 + int(rng.integers(len(MULTS) - 1))) % len(MULTS)],
                 s1=int(rng.integers(13, 18)), s2=int(rng.integers(11, 17)),
                 shift=int(rng.integers(0, 33 - B.bit_length())))
        n_time = int(min(12_000_000, 30_000_000 // p["rounds"])) + int(rng.integers(1, 1000))
        dist = {"kind": "randint", "low": 0, "high": 4294967295}
        final = (f"h mod {B}" if B & (B - 1) else f"(h >> {p['shift']}) & {B - 1}")
        desc = (f"Histogram of n 32-bit keys into {B} bins: counts[b] = #{{i : bin(x[i]) == b}}, bin(x) = {final} "
                f"where h is {p['rounds']} rounds of the integer mix (v ^= v >> {p['s1']}; v *= 0x{p['m1']:08X}; "
                f"v ^= v >> {p['s2']}; v *= 0x{p['m2']:08X}; v += r) of x. counts is fully overwritten.")
    else:
        lo = float(np.float32(rng.choice([-4.0, -1.0, 0.0, -2.5])))
        width = float(rng.choice([2.0, 5.0, 8.0]))
        scale = float(np.float32(B / width))
        p.update(lo=lo, scale=scale)
        n_time = 6_000_000 + int(rng.integers(1, 1000))
        dist = {"kind": "uniform", "low": lo - 0.25 * width, "high": lo + 1.25 * width}
        desc = (f"Histogram of n floats into {B} bins: bin(x) = (int)((x - ({lo})f) * {scale}f) computed in float, "
                f"clamped to [0, {B - 1}] (values below the range go to bin 0, above to bin {B - 1}); "
                "counts[b] = #{i : bin(x[i]) == b}, fully overwritten.")
    task = {
        "function_name": "hist",
        "description": desc,
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": _kt(p), "length": "n", "dist": dist},
            {"name": "counts", "role": "out", "ctype": "int", "length": B},
        ],
        "size_configs": [{"n": 3}, {"n": 1001}, {"n": 65537 + int(rng.integers(5000))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["histogram", "integer", "atomics"],
    }
    variants = (
        Variant("shared_privatized", ("shared_tiling", "atomics", "grid_stride", "coalesced", "block_256",
                                      "pageable"), _shared_priv(p)),
        Variant("warp_privatized", ("shared_tiling", "atomics", "grid_stride", "coalesced", "block_256"),
                _warp_priv(p)),
        Variant("partials_vec", ("vectorized", "shared_tiling", "two_level", "multi_pass", "grid_stride",
                                 "block_256"), _partials_vec(p)),
        Variant("host_finish", ("shared_tiling", "two_level", "host_compute", "grid_stride", "block_512"),
                _host_finish(p)),
        Variant("global_atomics", ("naive", "atomics", "coalesced", "block_256"), _global_atomics(p)),
        Variant("per_bin_count", ("thread_per_row", "shared_tiling", "multi_pass", "block_128"), _per_bin(p)),
        Variant("chunk_atomics", ("small_grid", "strided", "atomics", "block_64"), _chunk_atomics(p)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "shared_tiling", "atomics",
                                      "block_128"), _chunked_transfers(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time})


FAMILY = Family(
    name="histogram",
    description="histograms of hashed integer keys or quantized floats into 16..4096 bins",
    generate=generate,
    n_tasks=50,
    tags=("histogram", "integer"),
)
