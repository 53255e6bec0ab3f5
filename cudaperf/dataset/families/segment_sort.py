"""Segmented sort: each of S consecutive segments of fixed length L (a power of two, 32..2048) sorted ascending.

Keys are ints (from a wide or a narrow range, so some tasks have many ties) or floats. The output is a sorted
copy, so it is fully determined whatever sort is used (equal keys are identical values).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

LENS = [32, 64, 128, 256, 512, 1024, 2048]
HEAD = "#include <cuda_runtime.h>\n\n"


def _pre(t: str, L: int) -> str:
    return HEAD + f"#define SEG {L}\n\n"


def _sig(t: str) -> str:
    return f'extern "C" void segsort(int S, const {t}* x, {t}* y)'


def _io(t: str) -> str:
    return ("    if (S <= 0) return;\n"
            "    size_t n = (size_t)S * SEG;\n"
            f"    size_t bytes = n * sizeof({t});\n"
            f"    {t}* d; cudaMalloc(&d, bytes);\n"
            "    cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice);\n")


OUT = "    cudaMemcpy(y, d, bytes, cudaMemcpyDeviceToHost);\n    cudaFree(d);\n}\n"


def _bitonic_block(t: str, L: int) -> str:
    """One block of SEG/2 threads per segment; the whole network in shared memory."""
    return (_pre(t, L)
            + f"__global__ void bitonic_seg({t}* d) {{\n"
            f"    __shared__ {t} s[SEG];\n"
            "    int tid = threadIdx.x;\n"
            f"    {t}* g = d + (size_t)blockIdx.x * SEG;\n"
            "    s[tid] = g[tid]; s[tid + SEG / 2] = g[tid + SEG / 2];\n"
            "    __syncthreads();\n"
            "    for (int k = 2; k <= SEG; k <<= 1) {\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            int i = (tid / j) * 2 * j + (tid % j);\n"
            "            int q = i + j;\n"
            "            bool asc = (i & k) == 0;\n"
            f"            {t} a = s[i], b = s[q];\n"
            "            if ((a > b) == asc && a != b) { s[i] = b; s[q] = a; }\n"
            "            __syncthreads();\n"
            "        }\n"
            "    }\n"
            "    g[tid] = s[tid]; g[tid + SEG / 2] = s[tid + SEG / 2];\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    bitonic_seg<<<S, SEG / 2>>>(d);\n" + OUT)


def _tile_kernel(t: str) -> str:
    return (f"__global__ void bitonic_tile({t}* d, size_t n) {{\n"
            f"    __shared__ {t} s[TILE];\n"
            "    size_t base = (size_t)blockIdx.x * TILE;\n"
            "    int tid = threadIdx.x;\n"
            "    for (int k = tid; k < TILE; k += TILE / 2) if (base + k < n) s[k] = d[base + k];\n"
            "    __syncthreads();\n"
            "    for (int k = 2; k <= SEG; k <<= 1) {\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            int i = (tid / j) * 2 * j + (tid % j);\n"
            "            int q = i + j;\n"
            "            if (base + i < n) {\n"
            "                bool asc = ((i & (SEG - 1)) & k) == 0;\n"
            f"                {t} a = s[i], b = s[q];\n"
            "                if (asc ? (a > b) : (a < b)) { s[i] = b; s[q] = a; }\n"
            "            }\n"
            "            __syncthreads();\n"
            "        }\n"
            "    }\n"
            "    for (int k = tid; k < TILE; k += TILE / 2) if (base + k < n) d[base + k] = s[k];\n}\n\n")


def _bitonic_tile(t: str, L: int) -> str:
    """Tiles of max(SEG, 1024) elements (several short segments per block), TILE/2 threads."""
    return (_pre(t, L) + f"#define TILE {max(L, 1024)}\n\n" + _tile_kernel(t)
            + _sig(t) + " {\n" + _io(t)
            + "    int blocks = (int)((n + TILE - 1) / TILE);\n"
            "    bitonic_tile<<<blocks, TILE / 2>>>(d, n);\n" + OUT)


def _bitonic_streams(t: str, L: int) -> str:
    return (_pre(t, L) + f"#define TILE {max(L, 1024)}\n\n" + _tile_kernel(t)
            + _sig(t) + " {\n"
            "    if (S <= 0) return;\n"
            "    size_t n = (size_t)S * SEG;\n"
            f"    size_t bytes = n * sizeof({t});\n"
            f"    {t}* d; cudaMalloc(&d, bytes);\n"
            "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n"
            "    const int NS = 4;\n"
            "    cudaStream_t st[NS];\n"
            "    for (int k = 0; k < NS; ++k) cudaStreamCreate(&st[k]);\n"
            "    size_t tiles = (n + TILE - 1) / TILE;\n"
            "    size_t per = (tiles + NS - 1) / NS;\n"
            "    for (int k = 0; k < NS; ++k) {\n"
            "        size_t lo = (size_t)k * per * TILE;\n"
            "        if (lo >= n) break;\n"
            "        size_t m = n - lo < per * TILE ? n - lo : per * TILE;\n"
            f"        cudaMemcpyAsync(d + lo, x + lo, m * sizeof({t}), cudaMemcpyHostToDevice, st[k]);\n"
            "        bitonic_tile<<<(unsigned)((m + TILE - 1) / TILE), TILE / 2, 0, st[k]>>>(d + lo, m);\n"
            f"        cudaMemcpyAsync(y + lo, d + lo, m * sizeof({t}), cudaMemcpyDeviceToHost, st[k]);\n"
            "    }\n"
            "    for (int k = 0; k < NS; ++k) { cudaStreamSynchronize(st[k]); cudaStreamDestroy(st[k]); }\n"
            "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y);\n"
            "    cudaFree(d);\n}\n")


def _bitonic_global(t: str, L: int) -> str:
    return (_pre(t, L)
            + f"__global__ void cmp_exchange({t}* d, size_t half, int j, int k) {{\n"
            "    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= half) return;\n"
            "    size_t i = (p / j) * 2 * j + (p % j);\n"
            "    size_t q = i + j;\n"
            "    bool asc = (((int)(i & (SEG - 1))) & k) == 0;\n"
            f"    {t} a = d[i], b = d[q];\n"
            "    if (asc ? (a > b) : (a < b)) { d[i] = b; d[q] = a; }\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    size_t half = n / 2;\n"
            "    int blocks = (int)((half + 255) / 256);\n"
            "    for (int k = 2; k <= SEG; k <<= 1)\n"
            "        for (int j = k >> 1; j > 0; j >>= 1)\n"
            "            cmp_exchange<<<blocks, 256>>>(d, half, j, k);\n" + OUT)


def _odd_even(t: str, L: int) -> str:
    return (_pre(t, L)
            + f"__global__ void odd_even_seg({t}* d) {{\n"
            f"    __shared__ {t} s[SEG];\n"
            "    int tid = threadIdx.x;\n"
            f"    {t}* g = d + (size_t)blockIdx.x * SEG;\n"
            "    s[2 * tid] = g[2 * tid]; s[2 * tid + 1] = g[2 * tid + 1];\n"
            "    __syncthreads();\n"
            "    for (int ph = 0; ph < SEG; ++ph) {\n"
            "        int i = 2 * tid + (ph & 1);\n"
            "        if (i + 1 < SEG) {\n"
            f"            {t} a = s[i], b = s[i + 1];\n"
            "            if (a > b) { s[i] = b; s[i + 1] = a; }\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n"
            "    g[2 * tid] = s[2 * tid]; g[2 * tid + 1] = s[2 * tid + 1];\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    odd_even_seg<<<S, SEG / 2>>>(d);\n" + OUT)


def _insertion(t: str, L: int) -> str:
    return (_pre(t, L)
            + f"__global__ void insertion_seg({t}* d, int S) {{\n"
            "    int sidx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (sidx >= S) return;\n"
            f"    {t}* g = d + (size_t)sidx * SEG;\n"
            "    for (int i = 1; i < SEG; ++i) {\n"
            f"        {t} v = g[i];\n"
            "        int k = i - 1;\n"
            "        while (k >= 0 && g[k] > v) { g[k + 1] = g[k]; --k; }\n"
            "        g[k + 1] = v;\n"
            "    }\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    insertion_seg<<<(S + 63) / 64, 64>>>(d, S);\n" + OUT)


def _rank(t: str, L: int) -> str:
    th = min(L, 1024)
    return (_pre(t, L) + f"#define THREADS {th}\n\n"
            + f"__global__ void rank_seg(const {t}* in, {t}* out) {{\n"
            f"    __shared__ {t} s[SEG];\n"
            "    size_t base = (size_t)blockIdx.x * SEG;\n"
            "    for (int k = threadIdx.x; k < SEG; k += THREADS) s[k] = in[base + k];\n"
            "    __syncthreads();\n"
            "    for (int i = threadIdx.x; i < SEG; i += THREADS) {\n"
            f"        {t} v = s[i];\n"
            "        int r = 0;\n"
            "        for (int k = 0; k < SEG; ++k) {\n"
            f"            {t} u = s[k];\n"
            "            r += (u < v) || (u == v && k < i);\n"
            "        }\n"
            "        out[base + r] = v;\n"
            "    }\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + f"    {t}* o; cudaMalloc(&o, bytes);\n"
            "    rank_seg<<<S, THREADS>>>(d, o);\n"
            "    cudaMemcpy(y, o, bytes, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(o); cudaFree(d);\n}\n")


def _chunked(t: str, L: int) -> str:
    return (_pre(t, L)
            + f"__global__ void bitonic_seg({t}* d) {{\n"
            f"    __shared__ {t} s[SEG];\n"
            "    int tid = threadIdx.x;\n"
            f"    {t}* g = d + (size_t)blockIdx.x * SEG;\n"
            "    for (int k = tid; k < SEG; k += blockDim.x) s[k] = g[k];\n"
            "    __syncthreads();\n"
            "    for (int k = 2; k <= SEG; k <<= 1) {\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            for (int p = tid; p < SEG / 2; p += blockDim.x) {\n"
            "                int i = (p / j) * 2 * j + (p % j);\n"
            "                int q = i + j;\n"
            "                bool asc = (i & k) == 0;\n"
            f"                {t} a = s[i], b = s[q];\n"
            "                if (asc ? (a > b) : (a < b)) { s[i] = b; s[q] = a; }\n"
            "            }\n"
            "            __syncthreads();\n"
            "        }\n"
            "    }\n"
            "    for (int k = tid; k < SEG; k += blockDim.x) g[k] = s[k];\n}\n\n"
            + _sig(t) + " {\n"
            "    if (S <= 0) return;\n"
            "    const int CH = 64;\n"
            f"    {t}* d; cudaMalloc(&d, (size_t)CH * SEG * sizeof({t}));\n"
            "    for (int s0 = 0; s0 < S; s0 += CH) {\n"
            "        int m = S - s0 < CH ? S - s0 : CH;\n"
            f"        size_t b = (size_t)m * SEG * sizeof({t});\n"
            "        cudaMemcpy(d, x + (size_t)s0 * SEG, b, cudaMemcpyHostToDevice);\n"
            "        bitonic_seg<<<m, 64>>>(d);\n"
            "        cudaMemcpy(y + (size_t)s0 * SEG, d, b, cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(d);\n}\n")


def _reference(t: str, L: int) -> str:
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"static int cmp_key(const void* a, const void* b) {{\n"
            f"    {t} u = *(const {t}*)a, v = *(const {t}*)b;\n"
            "    return (u > v) - (u < v);\n}\n\n"
            f"void segsort(int S, const {t}* x, {t}* y) {{\n"
            f"    if (S <= 0) return;\n"
            f"    memcpy(y, x, (size_t)S * {L} * sizeof({t}));\n"
            f"    for (int s = 0; s < S; ++s) qsort(y + (size_t)s * {L}, {L}, sizeof({t}), cmp_key);\n}}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    L = LENS[index % len(LENS)]
    t = ["int", "float", "int", "float"][(index // 2) % 4] if index % 3 else ("int" if index % 2 else "float")
    if t == "int":
        hi = int(rng.choice([100, 1000, 1 << 20, 2_000_000_000]))
        lo = 0 if index % 2 else -hi
        dist = {"kind": "randint", "low": lo, "high": hi}
        rng_desc = f"ints in [{lo}, {hi})"
    else:
        a = float(rng.choice([1.0, 10.0, 1000.0]))
        dist = {"kind": "uniform", "low": -a, "high": a}
        rng_desc = f"floats in [-{a}, {a})"
    n_target = 2_000_000 // (L.bit_length() - 1) + int(rng.integers(0, 100_000))
    S_time = max(8, n_target // L)
    task = {
        "function_name": "segsort",
        "description": (f"Sort each of S consecutive segments of {L} {t} keys ascending: y[s*{L} .. s*{L}+{L - 1}] "
                        f"is segment s of x in ascending order. Keys are {rng_desc}."),
        "returns": "void",
        "args": [
            {"name": "S", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": f"S * {L}", "dist": dist},
            {"name": "y", "role": "out", "ctype": t, "length": f"S * {L}"},
        ],
        "size_configs": [{"S": 1}, {"S": 7}, {"S": max(3, 40_000 // L) + 3}, {"S": S_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(t, L),
        "tags": ["sort", "segmented", t],
    }
    variants = (
        Variant("bitonic_tile", ("sorting_network", "shared_tiling", "coalesced", "block_512", "pageable"),
                _bitonic_tile(t, L)),
        Variant("bitonic_streams", ("sorting_network", "shared_tiling", "async_streams", "pinned", "block_512"),
                _bitonic_streams(t, L)),
        Variant("bitonic_block_per_segment", ("sorting_network", "shared_tiling", "block_per_row", "pageable"),
                _bitonic_block(t, L)),
        Variant("bitonic_global", ("sorting_network", "many_launches", "multi_pass", "block_256"),
                _bitonic_global(t, L)),
        Variant("odd_even_transposition", ("sorting_network", "shared_tiling", "block_per_row"), _odd_even(t, L)),
        Variant("rank_by_counting", ("block_per_row", "shared_tiling", "branchless"), _rank(t, L)),
        Variant("insertion_per_thread", ("thread_per_row", "strided", "branch_divergent", "block_64"),
                _insertion(t, L)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "sorting_network", "block_per_row",
                                      "block_64"), _chunked(t, L)),
    )
    return GeneratedTask(task, variants, {"type": t, "L": L, "S_time": S_time, "dist": dist})


FAMILY = Family(
    name="segment_sort",
    description="sort fixed-length segments (L = 32..2048, int or float keys) ascending",
    generate=generate,
    n_tasks=50,
    tags=("sort",),
)
