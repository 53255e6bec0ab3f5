"""Sort each of m rows of length L ascending: y[r*L .. r*L + L-1] is row r of x, sorted.

L is a size parameter (not a power of two in general), so the sorting networks pad each row inside the kernel to
the next power of two P with a sentinel no smaller than any key (INT_MAX, UINT_MAX, FLT_MAX, DBL_MAX), which sorts
to the end and is never written back. What varies with the index: the key type (int, unsigned int, float,
double), the key range (narrow ranges give many ties), the shape (short rows, L <= 32, by the hundred thousand; or
long rows, L in the hundreds to two thousand, by the thousand) and the row lengths of the hidden tests.

The output is a sorted copy of each row: the same multiset whatever network or comparison order is used (equal
keys are identical values), so the tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <limits.h>\n#include <float.h>\n\n"
SENT = {"int": "INT_MAX", "unsigned int": "UINT_MAX", "float": "FLT_MAX", "double": "DBL_MAX"}
SHORT_L = [12, 17, 20, 24, 27, 31, 32, 9, 30, 23]
LONG_L = [100, 200, 300, 500, 777, 1000, 1500, 2000, 129, 640, 1025, 1300]


def _pre(t: str) -> str:
    return HEAD + f"typedef {t} elem_t;\n#define SENT {SENT[t]}\n\n"


SIG = 'extern "C" void sort_rows(int m, int L, const elem_t* x, elem_t* y)'

IO = ("    if (m <= 0 || L <= 0) return;\n"
      "    size_t n = (size_t)m * L;\n"
      "    size_t bytes = n * sizeof(elem_t);\n"
      "    elem_t *dx, *dy;\n"
      "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes);\n"
      "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
      "    int P = 1;\n"
      "    while (P < L) P <<= 1;\n")
OUT = ("    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
       "    cudaFree(dx); cudaFree(dy);\n}\n")

# The bitonic network over s[0..P-1] in shared memory, pairs spread over the block's threads.
SHARED_NETWORK = (
    "    for (int k = 2; k <= P; k <<= 1) {\n"
    "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
    "            for (int p = threadIdx.x; p < (P >> 1); p += blockDim.x) {\n"
    "                int i = ((p & ~(j - 1)) << 1) | (p & (j - 1));\n"
    "                int q = i + j;\n"
    "                bool asc = (i & k) == 0;\n"
    "                elem_t a = s[i], b = s[q];\n"
    "                if ((a > b) == asc && a != b) { s[i] = b; s[q] = a; }\n"
    "            }\n"
    "            __syncthreads();\n"
    "        }\n"
    "    }\n")

BLOCK_KERNEL = (
    "__global__ void bitonic_row(int L, int P, const elem_t* __restrict__ x, elem_t* __restrict__ y) {\n"
    "    extern __shared__ unsigned char smem[];\n"
    "    elem_t* s = (elem_t*)smem;\n"
    "    const elem_t* row = x + (size_t)blockIdx.x * L;\n"
    "    for (int c = threadIdx.x; c < P; c += blockDim.x) s[c] = c < L ? row[c] : SENT;\n"
    "    __syncthreads();\n"
    + SHARED_NETWORK
    + "    elem_t* out = y + (size_t)blockIdx.x * L;\n"
    "    for (int c = threadIdx.x; c < L; c += blockDim.x) out[c] = s[c];\n}\n\n")


def _block_per_row(t: str) -> str:
    """A block per row, the padded row in shared memory, min(P/2, 1024) threads (at least a warp)."""
    return (_pre(t) + BLOCK_KERNEL + SIG + " {\n" + IO
            + "    size_t sh = (size_t)P * sizeof(elem_t);\n"
            "    if (P <= 64) bitonic_row<<<m, 32, sh>>>(L, P, dx, dy);\n"
            "    else if (P <= 512) bitonic_row<<<m, 256, sh>>>(L, P, dx, dy);\n"
            "    else bitonic_row<<<m, 1024, sh>>>(L, P, dx, dy);\n" + OUT)


def _block_pinned(t: str) -> str:
    """The same network with 128 threads a block, input and output registered as pinned host memory."""
    return (_pre(t) + BLOCK_KERNEL + SIG + " {\n"
            "    if (m <= 0 || L <= 0) return;\n"
            "    size_t n = (size_t)m * L;\n"
            "    size_t bytes = n * sizeof(elem_t);\n"
            "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n"
            "    elem_t *dx, *dy;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes);\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            "    int P = 1;\n"
            "    while (P < L) P <<= 1;\n"
            "    bitonic_row<<<m, 128, (size_t)P * sizeof(elem_t)>>>(L, P, dx, dy);\n"
            "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
            "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y);\n"
            "    cudaFree(dx); cudaFree(dy);\n}\n")


def _global_launches(t: str) -> str:
    """Rows padded into a global m x P buffer; one launch per (k, j) step of the network over all rows."""
    return (_pre(t)
            + "__global__ void pad_rows(size_t total, int L, int P, const elem_t* x, elem_t* buf) {\n"
            "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx >= total) return;\n"
            "    size_t r = idx / P;\n"
            "    int c = (int)(idx - r * P);\n"
            "    buf[idx] = c < L ? x[r * L + c] : SENT;\n}\n\n"
            "__global__ void step(size_t pairs, int P, int j, int k, elem_t* buf) {\n"
            "    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= pairs) return;\n"
            "    int half = P >> 1;\n"
            "    size_t r = p / half;\n"
            "    int pp = (int)(p - r * half);\n"
            "    int i = ((pp & ~(j - 1)) << 1) | (pp & (j - 1));\n"
            "    bool asc = (i & k) == 0;\n"
            "    elem_t* s = buf + r * P;\n"
            "    elem_t a = s[i], b = s[i + j];\n"
            "    if ((a > b) == asc && a != b) { s[i] = b; s[i + j] = a; }\n}\n\n"
            "__global__ void unpad_rows(size_t n, int L, int P, const elem_t* buf, elem_t* y) {\n"
            "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx >= n) return;\n"
            "    size_t r = idx / L;\n"
            "    int c = (int)(idx - r * L);\n"
            "    y[idx] = buf[r * P + c];\n}\n\n"
            + SIG + " {\n" + IO
            + "    size_t total = (size_t)m * P;\n"
            "    elem_t* buf; cudaMalloc(&buf, total * sizeof(elem_t));\n"
            "    pad_rows<<<(unsigned)((total + 255) / 256), 256>>>(total, L, P, dx, buf);\n"
            "    size_t pairs = total / 2;\n"
            "    unsigned blocks = (unsigned)((pairs + 255) / 256);\n"
            "    for (int k = 2; k <= P; k <<= 1)\n"
            "        for (int j = k >> 1; j > 0; j >>= 1)\n"
            "            step<<<blocks, 256>>>(pairs, P, j, k, buf);\n"
            "    unpad_rows<<<(unsigned)((n + 255) / 256), 256>>>(n, L, P, buf, dy);\n"
            "    cudaFree(buf);\n" + OUT)


def _warp_shuffle(t: str) -> str:
    """Short rows (L <= 32): a warp per row, one key per lane in a register, the network by __shfl_xor_sync."""
    return (_pre(t)
            + "__device__ __forceinline__ elem_t kmin(elem_t a, elem_t b) { return b < a ? b : a; }\n"
            "__device__ __forceinline__ elem_t kmax(elem_t a, elem_t b) { return b > a ? b : a; }\n\n"
            "__global__ void warp_sort_rows(int m, int L, const elem_t* __restrict__ x, elem_t* __restrict__ y) {\n"
            "    int lane = threadIdx.x & 31;\n"
            "    int r = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    if (r >= m) return;\n"
            "    elem_t v = lane < L ? x[(size_t)r * L + lane] : SENT;\n"
            "#pragma unroll\n"
            "    for (int k = 2; k <= 32; k <<= 1) {\n"
            "#pragma unroll\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            elem_t o = __shfl_xor_sync(0xffffffffu, v, j);\n"
            "            bool keep_min = ((lane & j) == 0) == ((lane & k) == 0);\n"
            "            v = keep_min ? kmin(v, o) : kmax(v, o);\n"
            "        }\n"
            "    }\n"
            "    if (lane < L) y[(size_t)r * L + lane] = v;\n}\n\n"
            + SIG + " {\n" + IO
            + "    (void)P;\n"
            "    size_t threads = (size_t)m * 32;\n"
            "    warp_sort_rows<<<(unsigned)((threads + 255) / 256), 256>>>(m, L, dx, dy);\n" + OUT)


def _warp_shared(t: str) -> str:
    """Long rows: a single warp (a 32-thread block) per row runs the whole padded network in shared memory,
    __syncwarp between steps."""
    return (_pre(t)
            + "__global__ void warp_bitonic_row(int L, int P, const elem_t* __restrict__ x, elem_t* __restrict__ y) {\n"
            "    extern __shared__ unsigned char smem[];\n"
            "    elem_t* s = (elem_t*)smem;\n"
            "    int lane = threadIdx.x;\n"
            "    const elem_t* row = x + (size_t)blockIdx.x * L;\n"
            "    for (int c = lane; c < P; c += 32) s[c] = c < L ? row[c] : SENT;\n"
            "    __syncwarp();\n"
            "    for (int k = 2; k <= P; k <<= 1) {\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            for (int p = lane; p < (P >> 1); p += 32) {\n"
            "                int i = ((p & ~(j - 1)) << 1) | (p & (j - 1));\n"
            "                bool asc = (i & k) == 0;\n"
            "                elem_t a = s[i], b = s[i + j];\n"
            "                if ((a > b) == asc && a != b) { s[i] = b; s[i + j] = a; }\n"
            "            }\n"
            "            __syncwarp();\n"
            "        }\n"
            "    }\n"
            "    elem_t* out = y + (size_t)blockIdx.x * L;\n"
            "    for (int c = lane; c < L; c += 32) out[c] = s[c];\n}\n\n"
            + SIG + " {\n" + IO
            + "    warp_bitonic_row<<<m, 32, (size_t)P * sizeof(elem_t)>>>(L, P, dx, dy);\n" + OUT)


def _odd_even(t: str) -> str:
    """Odd-even transposition in shared memory: L alternating phases of neighbour compare-exchanges, no padding."""
    return (_pre(t)
            + "__global__ void odd_even_row(int L, const elem_t* __restrict__ x, elem_t* __restrict__ y) {\n"
            "    extern __shared__ unsigned char smem[];\n"
            "    elem_t* s = (elem_t*)smem;\n"
            "    const elem_t* row = x + (size_t)blockIdx.x * L;\n"
            "    for (int c = threadIdx.x; c < L; c += blockDim.x) s[c] = row[c];\n"
            "    __syncthreads();\n"
            "    for (int ph = 0; ph < L; ++ph) {\n"
            "        for (int i = 2 * threadIdx.x + (ph & 1); i + 1 < L; i += 2 * blockDim.x) {\n"
            "            elem_t a = s[i], b = s[i + 1];\n"
            "            if (a > b) { s[i] = b; s[i + 1] = a; }\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n"
            "    elem_t* out = y + (size_t)blockIdx.x * L;\n"
            "    for (int c = threadIdx.x; c < L; c += blockDim.x) out[c] = s[c];\n}\n\n"
            + SIG + " {\n" + IO
            + "    (void)P;\n"
            "    size_t sh = (size_t)L * sizeof(elem_t);\n"
            "    if (L <= 64) odd_even_row<<<m, 32, sh>>>(L, dx, dy);\n"
            "    else if (L <= 512) odd_even_row<<<m, 256, sh>>>(L, dx, dy);\n"
            "    else odd_even_row<<<m, 1024, sh>>>(L, dx, dy);\n" + OUT)


def _insertion(t: str) -> str:
    """A thread per row: copy the row to the output, insertion sort in place in global memory."""
    return (_pre(t)
            + "__global__ void insertion_rows(int m, int L, const elem_t* x, elem_t* y) {\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= m) return;\n"
            "    const elem_t* in = x + (size_t)r * L;\n"
            "    elem_t* g = y + (size_t)r * L;\n"
            "    for (int c = 0; c < L; ++c) g[c] = in[c];\n"
            "    for (int i = 1; i < L; ++i) {\n"
            "        elem_t v = g[i];\n"
            "        int k = i - 1;\n"
            "        while (k >= 0 && g[k] > v) { g[k + 1] = g[k]; --k; }\n"
            "        g[k + 1] = v;\n"
            "    }\n}\n\n"
            + SIG + " {\n" + IO
            + "    (void)P;\n"
            "    insertion_rows<<<(m + 63) / 64, 64>>>(m, L, dx, dy);\n" + OUT)


def _rank(t: str) -> str:
    """A block per row: every key's final position is its rank (keys smaller, or equal and earlier), counted
    against the row in shared memory; the key is scattered there."""
    return (_pre(t)
            + "__global__ void rank_row(int L, const elem_t* __restrict__ x, elem_t* __restrict__ y) {\n"
            "    extern __shared__ unsigned char smem[];\n"
            "    elem_t* s = (elem_t*)smem;\n"
            "    size_t base = (size_t)blockIdx.x * L;\n"
            "    for (int c = threadIdx.x; c < L; c += blockDim.x) s[c] = x[base + c];\n"
            "    __syncthreads();\n"
            "    for (int i = threadIdx.x; i < L; i += blockDim.x) {\n"
            "        elem_t v = s[i];\n"
            "        int r = 0;\n"
            "        for (int k = 0; k < L; ++k) {\n"
            "            elem_t u = s[k];\n"
            "            r += (u < v) | ((u == v) & (k < i));\n"
            "        }\n"
            "        y[base + r] = v;\n"
            "    }\n}\n\n"
            + SIG + " {\n" + IO
            + "    (void)P;\n"
            "    rank_row<<<m, 256, (size_t)L * sizeof(elem_t)>>>(L, dx, dy);\n" + OUT)


def _reference(t: str) -> str:
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"static int cmp_key(const void* a, const void* b) {{\n"
            f"    {t} u = *(const {t}*)a, v = *(const {t}*)b;\n"
            "    return (u > v) - (u < v);\n}\n\n"
            f"void sort_rows(int m, int L, const {t}* x, {t}* y) {{\n"
            "    if (m <= 0 || L <= 0) return;\n"
            f"    memcpy(y, x, (size_t)m * L * sizeof({t}));\n"
            f"    for (int r = 0; r < m; ++r) qsort(y + (size_t)r * L, (size_t)L, sizeof({t}), cmp_key);\n}}\n")


TYPES = ["int", "float", "unsigned int", "double", "int", "float"]


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = TYPES[index % len(TYPES)]
    short = index % 2 == 0
    if short:
        L = SHORT_L[(index // 2) % len(SHORT_L)]
    else:
        L = LONG_L[(index // 2) % len(LONG_L)]
    if t == "int":
        hi = int(rng.choice([50, 1000, 1 << 20, 2_000_000_000]))
        lo = -hi if index % 3 else 0
        dist = {"kind": "randint", "low": lo, "high": hi}
        rng_desc = f"ints in [{lo}, {hi})"
    elif t == "unsigned int":
        hi = int(rng.choice([16, 70000, 4_294_967_295]))
        dist = {"kind": "randint", "low": 0, "high": hi}
        rng_desc = f"unsigned ints in [0, {hi})"
    else:
        a = float(rng.choice([1.0, 100.0, 1e6]))
        lo = -a if index % 4 != 1 else 0.0
        dist = {"kind": "uniform", "low": lo, "high": a}
        rng_desc = f"{t}s in [{lo}, {a})"
    # qsort's cost per key, roughly 6 ns per compare level: aim at ~60 ms at the timing size
    n_target = int(40e6 / (6.0 * max(2.0, np.log2(L)))) + int(rng.integers(0, 50_000))
    m_time = max(16, n_target // L)
    if short:
        tests = [{"m": 1, "L": 1}, {"m": 5, "L": max(2, L - 7)}, {"m": 333 + int(rng.integers(0, 100)), "L": L}]
    else:
        tests = [{"m": 1, "L": 33}, {"m": 3, "L": L}, {"m": 37 + int(rng.integers(0, 20)), "L": L // 2 + 1}]
    task = {
        "function_name": "sort_rows",
        "description": (f"Sort each of the m rows of the row-major m x L {t} matrix x ascending into y: "
                        f"y[r*L .. r*L+L-1] is row r of x in ascending order. L <= {L}, not "
                        f"necessarily a power of two. Keys are {rng_desc}."),
        "returns": "void",
        "args": [
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "L", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "m * L", "dist": dist},
            {"name": "y", "role": "out", "ctype": t, "length": "m * L"},
        ],
        "size_configs": [*tests, {"m": m_time, "L": L}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(t),
        "tags": ["sort", "rows", "short_rows" if short else "long_rows", t.replace(" ", "_")],
    }
    warp = (Variant("warp_shuffle_bitonic", ("sorting_network", "warp_shuffle", "unrolled", "block_256"),
                    _warp_shuffle(t)) if short else
            Variant("warp_shared_bitonic", ("sorting_network", "shared_tiling", "block_per_row", "block_32"),
                    _warp_shared(t)))
    variants = (
        Variant("insertion_per_thread", ("thread_per_row", "strided", "branch_divergent", "block_64"),
                _insertion(t)),
        Variant("bitonic_block_per_row", ("sorting_network", "shared_tiling", "block_per_row", "pageable"),
                _block_per_row(t)),
        Variant("bitonic_block_pinned_b128", ("sorting_network", "shared_tiling", "block_per_row", "pinned",
                                              "block_128"), _block_pinned(t)),
        Variant("bitonic_global_launches", ("sorting_network", "many_launches", "multi_pass", "block_256"),
                _global_launches(t)),
        warp,
        Variant("odd_even_transposition", ("sorting_network", "shared_tiling", "block_per_row"), _odd_even(t)),
        Variant("rank_by_counting", ("block_per_row", "shared_tiling", "branchless", "block_256"), _rank(t)),
    )
    return GeneratedTask(task, variants, {"type": t, "L": L, "short": short, "m_time": m_time, "dist": dist})


FAMILY = Family(
    name="bitonic_sort_rows",
    description="sort each row (length L, not a power of two; int, unsigned, float or double keys) ascending",
    generate=generate,
    n_tasks=50,
    tags=("sort",),
)
