"""0/1 knapsack by dynamic programming over capacity rows, for a batch of instances (exact integers).

Instance q has n items with integer weights wt[q*n + k] >= 1 and values val[q*n + k] >= 1. After items 0..k the
row holds, for every capacity c = 0..W, the best total value of a subset of those items whose weight is at most c
("at most" tasks, every row starting at 0) or exactly c ("exact" tasks, unreachable capacities starting at a large
negative sentinel and reported as -1). The output is either the best value at capacity W per instance, or the
whole final row of every instance.

What varies with the index: the objective (at most / exactly W), the output (best value / whole row), the shape
(a batch of thousands of small instances with capacities in the hundreds, or one to four large instances with
capacities in the tens of thousands and hundreds of items), the weight range (relative to W) and the value range.

CPU and GPU agree exactly: each row entry is a maximum of sums of small ints, the same numbers whatever order the
capacities of a row are visited in (a row reads only the previous row) and whether two items are merged into one
step (max distributes over +); no sum overflows (values below 1000, a few hundred items, sentinel -2^29).
The tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
SIG_ARGS = "int ninst, int n, int W, const int* wt, const int* val, int* out"
SIG = f'extern "C" void knapsack({SIG_ARGS})'
NEG = "(-(1 << 29))"


def _defs(exact: bool) -> str:
    """INIT(c): the empty-set row; FIN(x): how a row entry is reported."""
    if exact:
        return (f"#define INIT(c) ((c) == 0 ? 0 : {NEG})\n"
                "#define FIN(x) ((x) < 0 ? -1 : (x))\n")
    return "#define INIT(c) 0\n#define FIN(x) (x)\n"


def _reference(exact: bool, row_out: bool) -> str:
    fin = ("        for (int c = 0; c <= W; ++c) out[(size_t)q * (W + 1) + c] = FIN(dp[c]);\n" if row_out else
           "        out[q] = FIN(dp[W]);\n")
    return ("#include <stdlib.h>\n\n" + _defs(exact) + "\n"
            f"void knapsack({SIG_ARGS}) {{\n"
            "    int* dp = (int*)malloc((size_t)(W + 1) * sizeof(int));\n"
            "    for (int q = 0; q < ninst; ++q) {\n"
            "        for (int c = 0; c <= W; ++c) dp[c] = INIT(c);\n"
            "        const int* w = wt + (size_t)q * n;\n"
            "        const int* v = val + (size_t)q * n;\n"
            "        for (int k = 0; k < n; ++k) {\n"
            "            int wk = w[k], vk = v[k];\n"
            "            for (int c = W; c >= wk; --c) {\n"
            "                int cand = dp[c - wk] + vk;\n"
            "                if (cand > dp[c]) dp[c] = cand;\n"
            "            }\n"
            "        }\n" + fin
            + "    }\n    free(dp);\n}\n")


OUTLEN = {True: "(size_t)ninst * (W + 1)", False: "(size_t)ninst"}

IN = ("    if (ninst <= 0 || W < 0) return;\n"
      "    size_t items = (size_t)ninst * n, cells = (size_t)ninst * (W + 1);\n"
      "    int *dwt, *dval, *dA, *dB, *dout;\n"
      "    cudaMalloc(&dwt, (items ? items : 1) * sizeof(int));\n"
      "    cudaMalloc(&dval, (items ? items : 1) * sizeof(int));\n"
      "    cudaMalloc(&dA, cells * sizeof(int)); cudaMalloc(&dB, cells * sizeof(int));\n"
      "    cudaMalloc(&dout, {outlen} * sizeof(int));\n"
      "    cudaMemcpy(dwt, wt, items * sizeof(int), cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(dval, val, items * sizeof(int), cudaMemcpyHostToDevice);\n")
OUT = ("    cudaMemcpy(out, dout, {outlen} * sizeof(int), cudaMemcpyDeviceToHost);\n"
       "    cudaFree(dwt); cudaFree(dval); cudaFree(dA); cudaFree(dB); cudaFree(dout);\n")

GRID_KERNELS = (
    "__global__ void kn_init(size_t cells, int W, int* cur) {\n"
    "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (idx >= cells) return;\n"
    "    int c = (int)(idx % (size_t)(W + 1));\n"
    "    cur[idx] = INIT(c);\n}\n\n"
    "__global__ void kn_item(size_t cells, int n, int W, int k, const int* wt, const int* val, const int* cur,"
    " int* nxt) {\n"
    "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (idx >= cells) return;\n"
    "    size_t q = idx / (size_t)(W + 1);\n"
    "    int c = (int)(idx - q * (size_t)(W + 1));\n"
    "    int wk = wt[q * n + k], vk = val[q * n + k];\n"
    "    int x = cur[idx];\n"
    "    if (c >= wk) { int y = cur[idx - wk] + vk; if (y > x) x = y; }\n"
    "    nxt[idx] = x;\n}\n\n")


def _final_kernel(row_out: bool) -> str:
    if row_out:
        return ("__global__ void kn_final(size_t cells, int W, const int* cur, int* out) {\n"
                "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (idx >= cells) return;\n"
                "    int x = cur[idx];\n"
                "    out[idx] = FIN(x);\n}\n\n")
    return ("__global__ void kn_final(size_t cells, int W, const int* cur, int* out) {\n"
            "    size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (q >= cells / (size_t)(W + 1)) return;\n"
            "    int x = cur[q * (size_t)(W + 1) + W];\n"
            "    out[q] = FIN(x);\n}\n\n")


def _io(row_out: bool) -> tuple[str, str]:
    return IN.replace("{outlen}", OUTLEN[row_out]), OUT.replace("{outlen}", OUTLEN[row_out])


def _launch_per_item(pre: str, row_out: bool, block: int) -> str:
    i, o = _io(row_out)
    return (pre + GRID_KERNELS + _final_kernel(row_out)
            + SIG + " {\n" + i
            + f"    unsigned blocks = (unsigned)((cells + {block - 1}) / {block});\n"
            f"    kn_init<<<blocks, {block}>>>(cells, W, dA);\n"
            "    int *cur = dA, *nxt = dB;\n"
            "    for (int k = 0; k < n; ++k) {\n"
            f"        kn_item<<<blocks, {block}>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n"
            f"    kn_final<<<blocks, {block}>>>(cells, W, cur, dout);\n" + o + "}\n")


def _small_grid(pre: str, row_out: bool) -> str:
    i, o = _io(row_out)
    return (pre + "__global__ void kn_init_gs(size_t cells, int W, int* cur) {\n"
            "    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < cells;"
            " idx += (size_t)gridDim.x * blockDim.x)\n"
            "        cur[idx] = INIT((int)(idx % (size_t)(W + 1)));\n}\n\n"
            "__global__ void kn_item_gs(size_t cells, int n, int W, int k, const int* wt, const int* val,"
            " const int* cur, int* nxt) {\n"
            "    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < cells;"
            " idx += (size_t)gridDim.x * blockDim.x) {\n"
            "        size_t q = idx / (size_t)(W + 1);\n"
            "        int c = (int)(idx - q * (size_t)(W + 1));\n"
            "        int wk = wt[q * n + k], vk = val[q * n + k];\n"
            "        int x = cur[idx];\n"
            "        if (c >= wk) { int y = cur[idx - wk] + vk; if (y > x) x = y; }\n"
            "        nxt[idx] = x;\n"
            "    }\n}\n\n"
            + _final_kernel(row_out)
            + SIG + " {\n" + i
            + "    kn_init_gs<<<4, 128>>>(cells, W, dA);\n"
            "    int *cur = dA, *nxt = dB;\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        kn_item_gs<<<4, 128>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n"
            "    kn_final<<<(unsigned)((cells + 127) / 128), 128>>>(cells, W, cur, dout);\n" + o + "}\n")


def _two_items(pre: str, row_out: bool) -> str:
    """Items k and k+1 in one launch: max over the four subsets of the pair (an odd last item alone)."""
    i, o = _io(row_out)
    return (pre + GRID_KERNELS
            + "__global__ void kn_pair(size_t cells, int n, int W, int k, const int* wt, const int* val,"
            " const int* cur, int* nxt) {\n"
            "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx >= cells) return;\n"
            "    size_t q = idx / (size_t)(W + 1);\n"
            "    int c = (int)(idx - q * (size_t)(W + 1));\n"
            "    int w1 = wt[q * n + k], v1 = val[q * n + k];\n"
            "    int w2 = wt[q * n + k + 1], v2 = val[q * n + k + 1];\n"
            "    int x = cur[idx];\n"
            "    if (c >= w1) { int y = cur[idx - w1] + v1; x = y > x ? y : x; }\n"
            "    if (c >= w2) { int y = cur[idx - w2] + v2; x = y > x ? y : x; }\n"
            "    if (c >= w1 + w2) { int y = cur[idx - w1 - w2] + v1 + v2; x = y > x ? y : x; }\n"
            "    nxt[idx] = x;\n}\n\n"
            + _final_kernel(row_out)
            + SIG + " {\n" + i
            + "    unsigned blocks = (unsigned)((cells + 511) / 512);\n"
            "    kn_init<<<blocks, 512>>>(cells, W, dA);\n"
            "    int *cur = dA, *nxt = dB;\n"
            "    int k = 0;\n"
            "    for (; k + 1 < n; k += 2) {\n"
            "        kn_pair<<<blocks, 512>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n"
            "    if (k < n) {\n"
            "        kn_item<<<blocks, 512>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n"
            "    kn_final<<<blocks, 512>>>(cells, W, cur, dout);\n" + o + "}\n")


def _block_body(row_out: bool) -> str:
    fin = ("    for (int c = threadIdx.x; c <= W; c += blockDim.x) out[(size_t)q * (W + 1) + c] = FIN(cur[c]);\n"
           if row_out else "    if (threadIdx.x == 0) out[q] = FIN(cur[W]);\n")
    return ("    for (int c = threadIdx.x; c <= W; c += blockDim.x) cur[c] = INIT(c);\n"
            "    __syncthreads();\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        int wk = w[k], vk = v[k];\n"
            "        for (int c = threadIdx.x; c <= W; c += blockDim.x) {\n"
            "            int x = cur[c];\n"
            "            if (c >= wk) { int y = cur[c - wk] + vk; if (y > x) x = y; }\n"
            "            nxt[c] = x;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n" + fin)


def _block_loop(pre: str, row_out: bool, block: int) -> str:
    """A block per instance loops over the items, rows ping-ponging in global memory, __syncthreads between."""
    i, o = _io(row_out)
    return (pre + "__global__ void kn_block(int n, int W, const int* wt, const int* val, int* bufA, int* bufB,"
            " int* out) {\n"
            "    int q = blockIdx.x;\n"
            "    int* cur = bufA + (size_t)q * (W + 1);\n"
            "    int* nxt = bufB + (size_t)q * (W + 1);\n"
            "    const int* w = wt + (size_t)q * n;\n"
            "    const int* v = val + (size_t)q * n;\n"
            + _block_body(row_out) + "}\n\n"
            + SIG + " {\n" + i
            + f"    kn_block<<<ninst, {block}>>>(n, W, dwt, dval, dA, dB, dout);\n" + o + "}\n")


def _block_shared(pre: str, row_out: bool, wmax: int, block: int) -> str:
    """A block per instance, both rows in shared memory (W <= the timing capacity)."""
    i, o = _io(row_out)
    return (pre + f"#define WMAX {wmax}\n\n"
            "__global__ void kn_block_sh(int n, int W, const int* wt, const int* val, int* out) {\n"
            "    __shared__ int rows[2 * (WMAX + 1)];\n"
            "    int q = blockIdx.x;\n"
            "    int* cur = rows;\n"
            "    int* nxt = rows + (W + 1);\n"
            "    const int* w = wt + (size_t)q * n;\n"
            "    const int* v = val + (size_t)q * n;\n"
            + _block_body(row_out) + "}\n\n"
            + "__global__ void kn_block_gl(int n, int W, const int* wt, const int* val, int* bufA, int* bufB,"
            " int* out) {\n"
            "    int q = blockIdx.x;\n"
            "    int* cur = bufA + (size_t)q * (W + 1);\n"
            "    int* nxt = bufB + (size_t)q * (W + 1);\n"
            "    const int* w = wt + (size_t)q * n;\n"
            "    const int* v = val + (size_t)q * n;\n"
            + _block_body(row_out) + "}\n\n"
            + SIG + " {\n" + i
            + f"    if (W <= WMAX) kn_block_sh<<<ninst, {block}>>>(n, W, dwt, dval, dout);\n"
            f"    else kn_block_gl<<<ninst, {block}>>>(n, W, dwt, dval, dA, dB, dout);\n" + o + "}\n")


def _thread_per_instance(pre: str, row_out: bool, block: int) -> str:
    """A thread per instance runs the sequential in-place DP; rows interleaved (capacity-major) for coalescing."""
    i, o = _io(row_out)
    fin = ("    for (int c = 0; c <= W; ++c) out[(size_t)q * (W + 1) + c] = FIN(rows[(size_t)c * ninst + q]);\n"
           if row_out else "    out[q] = FIN(rows[(size_t)W * ninst + q]);\n")
    return (pre + "__global__ void kn_thread(int ninst, int n, int W, const int* wt, const int* val, int* rows,"
            " int* out) {\n"
            "    int q = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (q >= ninst) return;\n"
            "    for (int c = 0; c <= W; ++c) rows[(size_t)c * ninst + q] = INIT(c);\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        int wk = wt[(size_t)q * n + k], vk = val[(size_t)q * n + k];\n"
            "        for (int c = W; c >= wk; --c) {\n"
            "            int y = rows[(size_t)(c - wk) * ninst + q] + vk;\n"
            "            if (y > rows[(size_t)c * ninst + q]) rows[(size_t)c * ninst + q] = y;\n"
            "        }\n"
            "    }\n" + fin + "}\n\n"
            + SIG + " {\n" + i
            + f"    kn_thread<<<(ninst + {block - 1}) / {block}, {block}>>>(ninst, n, W, dwt, dval, dA, dout);\n"
            + o + "}\n")


def _host_half(pre: str, row_out: bool) -> str:
    """The host runs the first half of the items of every instance; the GPU finishes, a launch per item."""
    i, o = _io(row_out)
    return (pre + GRID_KERNELS + _final_kernel(row_out)
            + SIG + " {\n" + i
            + "    int h = n / 2;\n"
            "    int* hrow = (int*)malloc(cells * sizeof(int));\n"
            "    for (int q = 0; q < ninst; ++q) {\n"
            "        int* dp = hrow + (size_t)q * (W + 1);\n"
            "        for (int c = 0; c <= W; ++c) dp[c] = INIT(c);\n"
            "        for (int k = 0; k < h; ++k) {\n"
            "            int wk = wt[(size_t)q * n + k], vk = val[(size_t)q * n + k];\n"
            "            for (int c = W; c >= wk; --c) if (dp[c - wk] + vk > dp[c]) dp[c] = dp[c - wk] + vk;\n"
            "        }\n"
            "    }\n"
            "    cudaMemcpy(dA, hrow, cells * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    free(hrow);\n"
            "    unsigned blocks = (unsigned)((cells + 255) / 256);\n"
            "    int *cur = dA, *nxt = dB;\n"
            "    for (int k = h; k < n; ++k) {\n"
            "        kn_item<<<blocks, 256>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n"
            "    kn_final<<<blocks, 256>>>(cells, W, cur, dout);\n" + o + "}\n")


def _copy_each_row(pre: str, row_out: bool) -> str:
    """A launch per item, and every new row copied back to the host; the output read from the last copy."""
    fin = ("    for (size_t x = 0; x < cells; ++x) out[x] = FIN(hrow[x]);\n" if row_out else
           "    for (int q = 0; q < ninst; ++q) out[q] = FIN(hrow[(size_t)q * (W + 1) + W]);\n")
    return (pre + GRID_KERNELS
            + SIG + " {\n"
            "    if (ninst <= 0 || W < 0) return;\n"
            "    size_t items = (size_t)ninst * n, cells = (size_t)ninst * (W + 1);\n"
            "    int *dwt, *dval, *dA, *dB;\n"
            "    cudaMalloc(&dwt, (items ? items : 1) * sizeof(int));\n"
            "    cudaMalloc(&dval, (items ? items : 1) * sizeof(int));\n"
            "    cudaMalloc(&dA, cells * sizeof(int)); cudaMalloc(&dB, cells * sizeof(int));\n"
            "    cudaMemcpy(dwt, wt, items * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dval, val, items * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    int* hrow = (int*)malloc(cells * sizeof(int));\n"
            "    unsigned blocks = (unsigned)((cells + 255) / 256);\n"
            "    kn_init<<<blocks, 256>>>(cells, W, dA);\n"
            "    cudaMemcpy(hrow, dA, cells * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    int *cur = dA, *nxt = dB;\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        kn_item<<<blocks, 256>>>(cells, n, W, k, dwt, dval, cur, nxt);\n"
            "        cudaMemcpy(hrow, nxt, cells * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        int* t = cur; cur = nxt; nxt = t;\n"
            "    }\n" + fin
            + "    free(hrow);\n"
            "    cudaFree(dwt); cudaFree(dval); cudaFree(dA); cudaFree(dB);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = ["le_best", "le_row", "eq_row"][index % 3]
    exact = kind == "eq_row"
    row_out = kind != "le_best"
    shape = "single" if (index // 3) % 2 else "batch"
    wlo = [1, 1, 3, 10, 25][int(rng.integers(5))]
    div = [4, 8, 16, 40, 100][(index // 2 + int(rng.integers(3))) % 5]
    vmax = [10, 100, 1000, 50, 500][int(rng.integers(5))]
    vlo = 1 if vmax <= 50 else int(rng.integers(1, 20))
    if shape == "batch":
        W = [150, 240, 400, 640, 1000, 1600][(index // 2 + int(rng.integers(4))) % 6] + int(rng.integers(0, 17))
        n = [16, 24, 40, 64, 100][(index + int(rng.integers(3))) % 5] + int(rng.integers(0, 4))
        ninst = int(np.clip(0.35e8 / (n * W), 64, 200_000)) + int(rng.integers(0, 16))
        cfgs = [{"ninst": 1, "n": 1, "W": 0}, {"ninst": 3, "n": 7, "W": 50}, {"ninst": 37, "n": 13, "W": 129},
                {"ninst": 5, "n": n, "W": W}, {"ninst": ninst, "n": n, "W": W}]
    else:
        ninst = [1, 2, 2, 3, 4][int(rng.integers(5))]
        n = [200, 300, 400, 500, 640][(index + int(rng.integers(3))) % 5] + int(rng.integers(0, 10))
        W = int(np.clip(6e7 / (ninst * n), 20_000, 100_000)) + int(rng.integers(0, 100))
        cfgs = [{"ninst": 1, "n": 1, "W": 0}, {"ninst": 2, "n": 9, "W": 300}, {"ninst": 1, "n": 33, "W": 1001},
                {"ninst": 3, "n": 20, "W": 5000}, {"ninst": ninst, "n": n, "W": W}]
    obj = "of weight exactly c (-1 when no subset weighs c)" if exact else "of weight at most c"
    out_desc = (f"out[q*(W+1) + c] = the best total value of a subset of instance q's items {obj}, for every "
                "capacity c = 0..W" if row_out else
                f"out[q] = the best total value of a subset of instance q's items {obj.replace('c', 'W', 1)}")
    task = {
        "function_name": "knapsack",
        "description": (f"0/1 knapsack for ninst instances of n items each: item k of instance q weighs "
                        f"wt[q*n + k] (integers in [{wlo}, W/{div} + {wlo + 2})) and is worth val[q*n + k] "
                        f"(integers in [{vlo}, {vmax})); {out_desc}."),
        "returns": "void",
        "args": [
            {"name": "ninst", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "W", "role": "scalar", "ctype": "int"},
            {"name": "wt", "role": "in", "ctype": "int", "length": "ninst * n",
             "dist": {"kind": "randint", "low": wlo, "high": f"W / {div} + {wlo + 2}"}},
            {"name": "val", "role": "in", "ctype": "int", "length": "ninst * n",
             "dist": {"kind": "randint", "low": vlo, "high": vmax}},
            {"name": "out", "role": "out", "ctype": "int", "length": "ninst * (W + 1)" if row_out else "ninst"},
        ],
        "size_configs": cfgs,
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(exact, row_out),
        "tags": ["dynamic-programming", "integer", shape],
    }
    pre = HEAD + _defs(exact) + "\n"
    variants = [
        Variant("launch_per_item_b256", ("many_launches", "double_buffered", "device_resident", "coalesced",
                                         "block_256", "pageable"), _launch_per_item(pre, row_out, 256)),
        Variant("two_items_per_launch", ("many_launches", "fused", "double_buffered", "device_resident",
                                         "coalesced", "block_512", "pageable"), _two_items(pre, row_out)),
        Variant("small_grid", ("small_grid", "grid_stride", "many_launches", "double_buffered", "block_128",
                               "pageable"), _small_grid(pre, row_out)),
        Variant("host_first_half", ("host_compute", "many_launches", "double_buffered", "block_256", "pageable"),
                _host_half(pre, row_out)),
        Variant("copy_each_row", ("in_loop_transfers", "extra_transfers", "many_launches", "double_buffered",
                                  "block_256", "pageable"), _copy_each_row(pre, row_out)),
    ]
    if shape == "batch":
        variants += [
            Variant("block_loop_b128", ("block_per_row", "fused", "double_buffered", "block_128", "pageable"),
                    _block_loop(pre, row_out, 128)),
            Variant("block_shared_b256", ("block_per_row", "shared_tiling", "fused", "double_buffered",
                                          "block_256", "pageable"), _block_shared(pre, row_out, W, 256)),
            Variant("thread_per_instance", ("thread_per_row", "coalesced", "block_64", "pageable"),
                    _thread_per_instance(pre, row_out, 64)),
        ]
    else:
        variants += [
            Variant("block_loop_b1024", ("block_per_row", "single_thread", "fused", "double_buffered",
                                         "block_1024", "pageable"), _block_loop(pre, row_out, 1024)),
            Variant("launch_per_item_b64", ("many_launches", "double_buffered", "device_resident", "coalesced",
                                            "block_64", "pageable"), _launch_per_item(pre, row_out, 64)),
        ]
    return GeneratedTask(task, tuple(variants), {"kind": kind, "shape": shape, "ninst": ninst, "n": n, "W": W,
                                                 "wlo": wlo, "wdiv": div, "vlo": vlo, "vmax": vmax})


FAMILY = Family(
    name="knapsack_dp",
    description="0/1 knapsack DP over capacity rows (at most / exactly W; best value or whole row), batched or large",
    generate=generate,
    n_tasks=50,
    tags=("dynamic-programming", "integer"),
)
