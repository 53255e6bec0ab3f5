"""Deduplicate a sorted array: the distinct values in ascending order, and how many there are.

y[0 .. m) receives the distinct values of the ascending array a[0 .. n) (the heads of its runs, in order) and
y[m .. n) is set to 0; the function returns m. Some tasks also write cnt[k], the length of the run of y[k]
(cnt[m .. n) = 0). What varies with the index: the element type (int, unsigned int, long long, float), the mean
run length (from mostly distinct values to runs of a thousand), whether run lengths are written, and the size.

Every output is a copied value, a position difference or a count: the tolerance is zero. A variant that compacts
with atomics must still place the heads in ascending order (the chained variant orders its tiles by ticket).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
TYPES = ["int", "float", "unsigned int", "long long"]
RUNS = [1, 3, 30, 1000, 8]


def _pre(p: dict) -> str:
    return (HEAD + f"typedef {p['t']} elem_t;\n\n"
            "__device__ __forceinline__ bool is_head(const elem_t* a, int i) {\n"
            "    return i == 0 || a[i] != a[i - 1];\n}\n\n")


def _sig(p: dict) -> str:
    extra = ", int* cnt" if p["counts"] else ""
    return f'extern "C" int unique_sorted(int n, const elem_t* a, elem_t* y{extra})'


def _finish_kernel(p: dict) -> str:
    if p["counts"]:
        return ("__global__ void finish(int n, const int* dm, const int* pos, elem_t* y, int* cnt) {\n"
                "    int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (k >= n) return;\n"
                "    int m = *dm;\n"
                "    if (k < m) cnt[k] = (k + 1 < m ? pos[k + 1] : n) - pos[k];\n"
                "    else { y[k] = 0; cnt[k] = 0; }\n}\n\n")
    return ("__global__ void finish(int n, const int* dm, const int* pos, elem_t* y, int* cnt) {\n"
            "    int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (k >= n) return;\n"
            "    (void)pos; (void)cnt;\n"
            "    if (k >= *dm) y[k] = 0;\n}\n\n")


def _alloc(p: dict, pinned: bool = False) -> str:
    s = ("    if (n <= 0) return 0;\n"
         "    size_t bytes = (size_t)n * sizeof(elem_t);\n")
    if pinned:
        s += ("    cudaHostRegister((void*)a, bytes, cudaHostRegisterDefault);\n"
              "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n")
    return s + ("    elem_t *da, *dy;\n"
                "    int *dpos, *dcnt, *dm;\n"
                "    cudaMalloc(&da, bytes); cudaMalloc(&dy, bytes);\n"
                "    cudaMalloc(&dpos, (size_t)n * sizeof(int));\n"
                f"    cudaMalloc(&dcnt, {'(size_t)n' if p['counts'] else '1'} * sizeof(int));\n"
                "    cudaMalloc(&dm, sizeof(int));\n"
                "    cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);\n")


def _end(p: dict, pinned: bool = False) -> str:
    s = ("    finish<<<(n + 255) / 256, 256>>>(n, dm, dpos, dy, dcnt);\n"
         "    int m = 0;\n"
         "    cudaMemcpy(&m, dm, sizeof(int), cudaMemcpyDeviceToHost);\n"
         "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n")
    if p["counts"]:
        s += "    cudaMemcpy(cnt, dcnt, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost);\n"
    if pinned:
        s += "    cudaHostUnregister((void*)a); cudaHostUnregister((void*)y);\n"
    return s + ("    cudaFree(da); cudaFree(dy); cudaFree(dpos); cudaFree(dcnt); cudaFree(dm);\n"
                "    return m;\n}\n")


SCAN_COUNTS = (
    "__global__ void scan_counts(int g, int* bc, int* dm) {\n"
    "    __shared__ int s[1024];\n"
    "    __shared__ int carry;\n"
    "    int t = threadIdx.x;\n"
    "    if (t == 0) carry = 0;\n"
    "    __syncthreads();\n"
    "    for (int base = 0; base < g; base += 1024) {\n"
    "        int i = base + t;\n"
    "        int v = i < g ? bc[i] : 0;\n"
    "        s[t] = v;\n"
    "        __syncthreads();\n"
    "        for (int o = 1; o < 1024; o <<= 1) {\n"
    "            int add = t >= o ? s[t - o] : 0;\n"
    "            __syncthreads();\n"
    "            s[t] += add;\n"
    "            __syncthreads();\n"
    "        }\n"
    "        if (i < g) bc[i] = carry + s[t] - v;\n"
    "        __syncthreads();\n"
    "        if (t == 1023) carry += s[1023];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (t == 0) *dm = carry;\n}\n\n")

COUNT_SYNC = (
    "__global__ void count_heads(int n, const elem_t* a, int* bc) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    int c = __syncthreads_count(i < n && is_head(a, i));\n"
    "    if (threadIdx.x == 0) bc[blockIdx.x] = c;\n}\n\n")


def _flag_scan_scatter(p: dict, block: int, pinned: bool) -> str:
    """Three passes: head counts per block (__syncthreads_count), an exclusive scan of the counts (one block), then
    each block ranks its heads by a Hillis-Steele scan of the flags in shared memory and scatters them."""
    return (_pre(p) + f"#define TPB {block}\n\n" + COUNT_SYNC + SCAN_COUNTS
            + "__global__ void scatter_heads(int n, const elem_t* a, const int* bc, elem_t* y, int* pos) {\n"
            "    __shared__ int s[TPB];\n"
            "    int t = threadIdx.x;\n"
            "    int i = blockIdx.x * TPB + t;\n"
            "    int f = (i < n && is_head(a, i)) ? 1 : 0;\n"
            "    s[t] = f;\n"
            "    __syncthreads();\n"
            "    for (int o = 1; o < TPB; o <<= 1) {\n"
            "        int add = t >= o ? s[t - o] : 0;\n"
            "        __syncthreads();\n"
            "        s[t] += add;\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (f) { int k = bc[blockIdx.x] + s[t] - 1; y[k] = a[i]; pos[k] = i; }\n}\n\n"
            + _finish_kernel(p) + _sig(p) + " {\n" + _alloc(p, pinned)
            + "    int g = (n + TPB - 1) / TPB;\n"
            "    int* bc; cudaMalloc(&bc, (size_t)g * sizeof(int));\n"
            "    count_heads<<<g, TPB>>>(n, da, bc);\n"
            "    scan_counts<<<1, 1024>>>(g, bc, dm);\n"
            "    scatter_heads<<<g, TPB>>>(n, da, bc, dy, dpos);\n"
            "    cudaFree(bc);\n" + _end(p, pinned))


BALLOT_SCATTER = (
    "__global__ void scatter_ballot(int n, const elem_t* a, const int* bc, elem_t* y, int* pos) {\n"
    "    __shared__ int wc[8];\n"
    "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    int i = blockIdx.x * 256 + threadIdx.x;\n"
    "    bool h = i < n && is_head(a, i);\n"
    "    unsigned int b = __ballot_sync(0xffffffffu, h);\n"
    "    if (lane == 0) wc[warp] = __popc(b);\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) {\n"
    "        int run = bc[blockIdx.x];\n"
    "        for (int w = 0; w < 8; ++w) { int c = wc[w]; wc[w] = run; run += c; }\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (h) { int k = wc[warp] + __popc(b & ((1u << lane) - 1u)); y[k] = a[i]; pos[k] = i; }\n}\n\n")


def _warp_ballot(p: dict) -> str:
    """Three passes with warp votes: per-block head counts from __popc of ballots, the scan of the counts (one
    block), then each head's rank from its warp's ballot and the warps' offsets."""
    return (_pre(p)
            + "__global__ void count_ballot(int n, const elem_t* a, int* bc) {\n"
            "    __shared__ int wc[8];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    int i = blockIdx.x * 256 + threadIdx.x;\n"
            "    unsigned int b = __ballot_sync(0xffffffffu, i < n && is_head(a, i));\n"
            "    if (lane == 0) wc[warp] = __popc(b);\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "        int c = 0;\n"
            "        for (int w = 0; w < 8; ++w) c += wc[w];\n"
            "        bc[blockIdx.x] = c;\n"
            "    }\n}\n\n"
            + SCAN_COUNTS + BALLOT_SCATTER + _finish_kernel(p) + _sig(p) + " {\n" + _alloc(p)
            + "    int g = (n + 255) / 256;\n"
            "    int* bc; cudaMalloc(&bc, (size_t)g * sizeof(int));\n"
            "    count_ballot<<<g, 256>>>(n, da, bc);\n"
            "    scan_counts<<<1, 1024>>>(g, bc, dm);\n"
            "    scatter_ballot<<<g, 256>>>(n, da, bc, dy, dpos);\n"
            "    cudaFree(bc);\n" + _end(p))


def _host_scan(p: dict) -> str:
    """Block head counts on the GPU, their exclusive scan on the host, then the ballot scatter on the GPU."""
    return (_pre(p) + "#define TPB 256\n\n" + COUNT_SYNC + BALLOT_SCATTER + _finish_kernel(p) + _sig(p) + " {\n"
            + _alloc(p)
            + "    int g = (n + 255) / 256;\n"
            "    int* bc; cudaMalloc(&bc, (size_t)g * sizeof(int));\n"
            "    count_heads<<<g, 256>>>(n, da, bc);\n"
            "    int* h = (int*)malloc((size_t)g * sizeof(int));\n"
            "    cudaMemcpy(h, bc, (size_t)g * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    int run = 0;\n"
            "    for (int b = 0; b < g; ++b) { int c = h[b]; h[b] = run; run += c; }\n"
            "    cudaMemcpy(bc, h, (size_t)g * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dm, &run, sizeof(int), cudaMemcpyHostToDevice);\n"
            "    free(h);\n"
            "    scatter_ballot<<<g, 256>>>(n, da, bc, dy, dpos);\n"
            "    cudaFree(bc);\n" + _end(p))


def _chained(p: dict) -> str:
    """One pass: each block takes the next tile by an atomic ticket, counts its heads by ballots, waits for the
    previous tile's inclusive total (published with a fence and a flag), publishes its own, and scatters: the
    heads land in ascending order whatever order the blocks run in."""
    return (_pre(p) + "#define TPB 256\n#define ROUNDS 8\n#define TILE (TPB * ROUNDS)\n#define NW (TPB / 32)\n\n"
            + "__global__ void chained_compact(int n, int tiles, const elem_t* a, elem_t* y, int* pos,"
            " unsigned int* ticket, int* incl, int* ready, int* dm) {\n"
            "    __shared__ int s_tile, s_base;\n"
            "    __shared__ int wc[ROUNDS * NW];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    if (threadIdx.x == 0) s_tile = (int)atomicAdd(ticket, 1u);\n"
            "    __syncthreads();\n"
            "    int tile = s_tile;\n"
            "    int start = tile * TILE;\n"
            "    unsigned int masks[ROUNDS];\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < ROUNDS; ++r) {\n"
            "        int i = start + r * TPB + threadIdx.x;\n"
            "        masks[r] = __ballot_sync(0xffffffffu, i < n && is_head(a, i));\n"
            "        if (lane == 0) wc[r * NW + warp] = __popc(masks[r]);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "        int tot = 0;\n"
            "        for (int w = 0; w < ROUNDS * NW; ++w) { int c = wc[w]; wc[w] = tot; tot += c; }\n"
            "        int base = 0;\n"
            "        if (tile > 0) {\n"
            "            while (atomicAdd(&ready[tile - 1], 0) == 0) { }\n"
            "            __threadfence();\n"
            "            base = atomicAdd(&incl[tile - 1], 0);\n"
            "        }\n"
            "        atomicExch(&incl[tile], base + tot);\n"
            "        __threadfence();\n"
            "        atomicExch(&ready[tile], 1);\n"
            "        if (tile == tiles - 1) *dm = base + tot;\n"
            "        s_base = base;\n"
            "    }\n"
            "    __syncthreads();\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < ROUNDS; ++r) {\n"
            "        int i = start + r * TPB + threadIdx.x;\n"
            "        if ((masks[r] >> lane) & 1u) {\n"
            "            int k = s_base + wc[r * NW + warp] + __popc(masks[r] & ((1u << lane) - 1u));\n"
            "            y[k] = a[i];\n"
            "            pos[k] = i;\n"
            "        }\n"
            "    }\n}\n\n"
            + _finish_kernel(p) + _sig(p) + " {\n" + _alloc(p)
            + "    int tiles = (int)(((long long)n + TILE - 1) / TILE);\n"
            "    unsigned int* ticket; int *incl, *ready;\n"
            "    cudaMalloc(&ticket, sizeof(unsigned int));\n"
            "    cudaMalloc(&incl, (size_t)tiles * sizeof(int)); cudaMalloc(&ready, (size_t)tiles * sizeof(int));\n"
            "    cudaMemset(ticket, 0, sizeof(unsigned int));\n"
            "    cudaMemset(ready, 0, (size_t)tiles * sizeof(int));\n"
            "    chained_compact<<<tiles, TPB>>>(n, tiles, da, dy, dpos, ticket, incl, ready, dm);\n"
            "    cudaFree(ticket); cudaFree(incl); cudaFree(ready);\n" + _end(p))


def _single_block(p: dict) -> str:
    """One block of 1024 threads walks the array 1024 elements at a time, ranking heads by ballots; thread 0
    keeps the running count."""
    return (_pre(p)
            + "__global__ void compact_one_block(int n, const elem_t* a, elem_t* y, int* pos, int* dm) {\n"
            "    __shared__ int wc[32];\n"
            "    __shared__ int base, tot;\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    if (threadIdx.x == 0) base = 0;\n"
            "    __syncthreads();\n"
            "    for (int start = 0; start < n; start += 1024) {\n"
            "        int i = start + threadIdx.x;\n"
            "        bool h = i < n && is_head(a, i);\n"
            "        unsigned int b = __ballot_sync(0xffffffffu, h);\n"
            "        if (lane == 0) wc[warp] = __popc(b);\n"
            "        __syncthreads();\n"
            "        if (threadIdx.x == 0) {\n"
            "            int run = 0;\n"
            "            for (int w = 0; w < 32; ++w) { int c = wc[w]; wc[w] = run; run += c; }\n"
            "            tot = run;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        if (h) { int k = base + wc[warp] + __popc(b & ((1u << lane) - 1u)); y[k] = a[i]; pos[k] = i; }\n"
            "        __syncthreads();\n"
            "        if (threadIdx.x == 0) base += tot;\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (threadIdx.x == 0) *dm = base;\n}\n\n"
            + _finish_kernel(p) + _sig(p) + " {\n" + _alloc(p)
            + "    compact_one_block<<<1, 1024>>>(n, da, dy, dpos, dm);\n" + _end(p))


def _reference(p: dict) -> str:
    t = p["t"]
    if p["counts"]:
        return ("#include <stddef.h>\n\n"
                f"int unique_sorted(int n, const {t}* a, {t}* y, int* cnt) {{\n"
                "    int m = 0;\n"
                "    for (int i = 0; i < n; ++i) {\n"
                "        if (i == 0 || a[i] != a[i - 1]) { y[m] = a[i]; cnt[m] = 0; ++m; }\n"
                "        cnt[m - 1] += 1;\n"
                "    }\n"
                "    for (int k = m; k < n; ++k) { y[k] = 0; cnt[k] = 0; }\n"
                "    return m;\n}\n")
    return ("#include <stddef.h>\n\n"
            f"int unique_sorted(int n, const {t}* a, {t}* y) {{\n"
            "    int m = 0;\n"
            "    for (int i = 0; i < n; ++i)\n"
            "        if (i == 0 || a[i] != a[i - 1]) y[m++] = a[i];\n"
            "    for (int k = m; k < n; ++k) y[k] = 0;\n"
            "    return m;\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = TYPES[index % len(TYPES)]
    run = RUNS[(index // 4) % len(RUNS)]
    counts = (index // 2) % 2 == 1
    p = {"t": t, "run": run, "counts": counts}
    base = int(rng.choice([0, -1000, 7, 100_000]))
    if t == "unsigned int":
        base = abs(base)
    if t == "float":
        width = float(rng.choice([1.0, 64.0, 1000.0]))
        lo = float(base)
        dist = {"kind": "sorted", "low": lo, "high": lo + width}
        vdesc = f"floats in [{lo}, {lo + width}) (float resolution makes repeats)"
    else:
        hi = f"{base} + n / {run} + 1" if run > 1 else f"{base} + 4 * n"
        dist = {"kind": "sorted", "low": base, "high": hi}
        vdesc = f"{t}s in [{base}, {hi})"
    # the reference scans at 1-3 ns per element
    n_time = int(rng.integers(16_000_000, 28_000_000)) // (2 if t == "long long" or counts else 1)
    args = [{"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "a", "role": "in", "ctype": t, "length": "n", "dist": dist},
            {"name": "y", "role": "out", "ctype": t, "length": "n"}]
    if counts:
        args.append({"name": "cnt", "role": "out", "ctype": "int", "length": "n"})
    task = {
        "function_name": "unique_sorted",
        "description": (f"a holds n ascending {vdesc}. Write its distinct values in ascending order to y[0 .. m), "
                        "set y[m .. n) to 0 and return m"
                        + ("; cnt[k] receives how many times y[k] occurs in a (cnt[m .. n) = 0)." if counts
                           else ".")),
        "returns": "int",
        "args": args,
        "size_configs": [{"n": 1}, {"n": 777}, {"n": 70_000 + int(rng.integers(0, 5000))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["unique", "compaction", "sorted", t.replace(" ", "_")],
    }
    variants = (
        Variant("flag_scan_scatter", ("multi_pass", "two_level", "shared_tiling", "block_512"),
                _flag_scan_scatter(p, 512, False)),
        Variant("flag_scan_scatter_pinned_b128", ("multi_pass", "two_level", "shared_tiling", "pinned",
                                                  "block_128"), _flag_scan_scatter(p, 128, True)),
        Variant("warp_ballot_scatter", ("warp_vote", "multi_pass", "two_level", "block_256"), _warp_ballot(p)),
        Variant("chained_ticket_single_pass", ("atomics", "warp_vote", "fused", "register_blocking", "unrolled",
                                               "block_256"), _chained(p)),
        Variant("host_scan", ("host_compute", "warp_vote", "extra_transfers", "block_256"), _host_scan(p)),
        Variant("single_block", ("single_thread", "small_grid", "warp_vote", "block_1024"), _single_block(p)),
    )
    return GeneratedTask(task, variants, {**p, "base": base, "dist": dist, "n_time": n_time})


FAMILY = Family(
    name="unique_sorted_count",
    description="deduplicate a sorted array (distinct values in order, their count, optionally run lengths)",
    generate=generate,
    n_tasks=50,
    tags=("compaction", "integer"),
)
