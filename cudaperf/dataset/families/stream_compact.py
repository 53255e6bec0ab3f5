"""Stream compaction: copy the elements of x that satisfy a predicate to y, in order, and return their count.

y[0 .. count) holds the selected elements in their original order and y[count .. n) is set to 0, so the output is
fully determined. The predicate varies per task: thresholds, ranges, residues, |x - c| < t for floats, and for
some int tasks a hashed test (R rounds of an integer mix) that gives the sequential loop real work per element.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant
from cudaperf.dataset.families.prefix_scan import _add_kernel, _recursive_scan, _shfl_block_scan

HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n\n"


def _pred_fn(qual: str, p: dict) -> str:
    t = p["type"]
    mix = ""
    if p.get("rounds"):
        mix = (f"{qual} unsigned int mixk(unsigned int v) {{\n"
               f"    for (int r = 0; r < {p['rounds']}; ++r) {{\n"
               "        v ^= v >> 16; v *= 0x7FEB352Du; v ^= v >> 15; v *= 0x846CA68Bu; v += (unsigned int)r;\n"
               "    }\n    return v;\n}\n\n")
    return mix + f"{qual} int pred({t} v) {{ return {p['pred']}; }}\n\n"


def _pre(p: dict) -> str:
    return HEAD + _pred_fn("__device__ __forceinline__", p)


def _sig(t: str) -> str:
    return f'extern "C" int compact(int n, const {t}* x, {t}* y)'


def _io(t: str) -> str:
    return ("    if (n <= 0) return 0;\n"
            f"    size_t bytes = (size_t)n * sizeof({t});\n"
            f"    {t} *dx, *dy;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes);\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            "    cudaMemset(dy, 0, bytes);\n")


OUT = ("    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
       "    cudaFree(dx); cudaFree(dy);\n")


def _int_scan_pieces() -> str:
    return _shfl_block_scan("int", False) + _add_kernel("int") + _recursive_scan("int")


def _block_kernels(t: str) -> str:
    return (f"__global__ void count_blocks(int n, const {t}* __restrict__ x, int* bc) {{\n"
            "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
            "    int p = i < n ? pred(x[i]) : 0;\n"
            "    int c = __syncthreads_count(p);\n"
            "    if (threadIdx.x == 0) bc[blockIdx.x] = c;\n}\n\n"
            f"__global__ void scatter_blocks(int n, const {t}* __restrict__ x, const int* boff, {t}* y) {{\n"
            "    __shared__ int wsum[32];\n"
            "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
            f"    {t} v = i < n ? x[i] : ({t})0;\n"
            "    int p = i < n ? pred(v) : 0;\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    unsigned int m = __ballot_sync(0xffffffffu, p);\n"
            "    int within = __popc(m & ((1u << lane) - 1u));\n"
            "    if (lane == 0) wsum[w] = __popc(m);\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        int s = wsum[lane], inc = s;\n"
            "#pragma unroll\n"
            "        for (int o = 1; o < 32; o <<= 1) {\n"
            "            int u = __shfl_up_sync(0xffffffffu, inc, o);\n"
            "            if (lane >= o) inc += u;\n"
            "        }\n"
            "        wsum[lane] = inc - s;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    int base = blockIdx.x > 0 ? boff[blockIdx.x - 1] : 0;\n"
            "    if (p) y[base + wsum[w] + within] = v;\n}\n\n")


def _scan_based(p: dict) -> str:
    t = p["type"]
    return (_pre(p) + _int_scan_pieces()
            + f"__global__ void flag_kernel(int n, const {t}* x, int* f) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) f[i] = pred(x[i]);\n}\n\n"
            + f"__global__ void scatter_kernel(int n, const {t}* x, const int* f, {t}* y) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    int prev = i > 0 ? f[i - 1] : 0;\n"
            "    if (f[i] != prev) y[prev] = x[i];\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    int* f; cudaMalloc(&f, (size_t)n * sizeof(int));\n"
            "    flag_kernel<<<(n + 255) / 256, 256>>>(n, dx, f);\n"
            "    scan_inplace(f, n);\n"
            "    scatter_kernel<<<(n + 255) / 256, 256>>>(n, dx, f, dy);\n"
            "    int count = 0;\n"
            "    cudaMemcpy(&count, f + (n - 1), sizeof(int), cudaMemcpyDeviceToHost);\n"
            + OUT + "    cudaFree(f);\n    return count;\n}\n")


def _block_counts(p: dict, host: bool) -> str:
    t = p["type"]
    if host:
        mid = ("    int* hb = (int*)malloc((size_t)nb * sizeof(int));\n"
               "    cudaMemcpy(hb, bc, (size_t)nb * sizeof(int), cudaMemcpyDeviceToHost);\n"
               "    for (int b = 1; b < nb; ++b) hb[b] += hb[b - 1];\n"
               "    int count = hb[nb - 1];\n"
               "    cudaMemcpy(bc, hb, (size_t)nb * sizeof(int), cudaMemcpyHostToDevice);\n"
               "    free(hb);\n"
               "    scatter_blocks<<<nb, 1024>>>(n, dx, bc, dy);\n")
        pieces = "#include <stdlib.h>\n\n"
    else:
        mid = ("    scan_inplace(bc, nb);\n"
               "    scatter_blocks<<<nb, 1024>>>(n, dx, bc, dy);\n"
               "    int count = 0;\n"
               "    cudaMemcpy(&count, bc + (nb - 1), sizeof(int), cudaMemcpyDeviceToHost);\n")
        pieces = _int_scan_pieces()
    return (_pre(p) + pieces + _block_kernels(t)
            + _sig(t) + " {\n" + _io(t)
            + "    int nb = (n + 1023) / 1024;\n"
            "    int* bc; cudaMalloc(&bc, (size_t)nb * sizeof(int));\n"
            "    count_blocks<<<nb, 1024>>>(n, dx, bc);\n"
            + mid + OUT + "    cudaFree(bc);\n    return count;\n}\n")


def _atomics_sort(p: dict) -> str:
    t = p["type"]
    return (_pre(p) + "#include <stdlib.h>\n#include <string.h>\n\n"
            + f"__global__ void collect(int n, const {t}* x, int* cnt, int* idx) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n && pred(x[i])) idx[atomicAdd(cnt, 1)] = i;\n}\n\n"
            "static int cmp_int(const void* a, const void* b) {\n"
            "    int u = *(const int*)a, v = *(const int*)b;\n"
            "    return (u > v) - (u < v);\n}\n\n"
            + _sig(t) + " {\n"
            "    if (n <= 0) return 0;\n"
            f"    size_t bytes = (size_t)n * sizeof({t});\n"
            f"    {t}* dx; int *dcnt, *didx;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dcnt, sizeof(int)); cudaMalloc(&didx, (size_t)n * sizeof(int));\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            "    cudaMemset(dcnt, 0, sizeof(int));\n"
            "    collect<<<(n + 255) / 256, 256>>>(n, dx, dcnt, didx);\n"
            "    int count = 0;\n"
            "    cudaMemcpy(&count, dcnt, sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    int* hidx = (int*)malloc((size_t)(count > 0 ? count : 1) * sizeof(int));\n"
            "    cudaMemcpy(hidx, didx, (size_t)count * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    qsort(hidx, (size_t)count, sizeof(int), cmp_int);   /* restore the original order on the host */\n"
            "    for (int j = 0; j < count; ++j) y[j] = x[hidx[j]];\n"
            f"    if (count < n) memset(y + count, 0, (size_t)(n - count) * sizeof({t}));\n"
            "    free(hidx); cudaFree(dx); cudaFree(dcnt); cudaFree(didx);\n"
            "    return count;\n}\n")


def _single_thread(p: dict) -> str:
    t = p["type"]
    return (_pre(p)
            + f"__global__ void flag_kernel(int n, const {t}* x, unsigned char* f) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) f[i] = (unsigned char)pred(x[i]);\n}\n\n"
            + f"__global__ void serial_compact(int n, const {t}* x, const unsigned char* f, {t}* y, int* cnt) {{\n"
            "    int k = 0;\n"
            "    for (int i = 0; i < n; ++i) if (f[i]) y[k++] = x[i];\n"
            "    *cnt = k;\n}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    unsigned char* f; int* dcnt;\n"
            "    cudaMalloc(&f, (size_t)n); cudaMalloc(&dcnt, sizeof(int));\n"
            "    flag_kernel<<<(n + 255) / 256, 256>>>(n, dx, f);\n"
            "    serial_compact<<<1, 1>>>(n, dx, f, dy, dcnt);\n"
            "    int count = 0;\n"
            "    cudaMemcpy(&count, dcnt, sizeof(int), cudaMemcpyDeviceToHost);\n"
            + OUT + "    cudaFree(f); cudaFree(dcnt);\n    return count;\n}\n")


def _thread_chunks(p: dict) -> str:
    """8192 threads, each owns a contiguous chunk: count pass, serial scan of the counts, write pass."""
    t = p["type"]
    return (_pre(p)
            + f"__global__ void chunk_count(int n, int chunk, const {t}* x, int* cnt) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long lo = (long long)t * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            "    int c = 0;\n"
            "    for (long long i = lo; i < hi; ++i) c += pred(x[i]);\n"
            "    cnt[t] = c;\n}\n\n"
            "__global__ void scan_counts(int m, int* cnt) {\n"
            "    int acc = 0;\n"
            "    for (int k = 0; k < m; ++k) { int c = cnt[k]; cnt[k] = acc; acc += c; }\n"
            "    cnt[m] = acc;\n}\n\n"
            + f"__global__ void chunk_write(int n, int chunk, const {t}* x, const int* off, {t}* y) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long lo = (long long)t * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            "    int k = off[t];\n"
            f"    for (long long i = lo; i < hi; ++i) {{ {t} v = x[i]; if (pred(v)) y[k++] = v; }}\n}}\n\n"
            + _sig(t) + " {\n" + _io(t)
            + "    const int T = 8192;\n"
            "    int chunk = (n + T - 1) / T;\n"
            "    int* cnt; cudaMalloc(&cnt, (T + 1) * sizeof(int));\n"
            "    chunk_count<<<T / 128, 128>>>(n, chunk, dx, cnt);\n"
            "    scan_counts<<<1, 1>>>(T, cnt);\n"
            "    chunk_write<<<T / 128, 128>>>(n, chunk, dx, cnt, dy);\n"
            "    int count = 0;\n"
            "    cudaMemcpy(&count, cnt + T, sizeof(int), cudaMemcpyDeviceToHost);\n"
            + OUT + "    cudaFree(cnt);\n    return count;\n}\n")


def _chunked_transfers(p: dict) -> str:
    t = p["type"]
    return (_pre(p) + "#include <string.h>\n\n" + _int_scan_pieces() + _block_kernels(t)
            + _sig(t) + " {\n"
            "    if (n <= 0) return 0;\n"
            "    const int C = 1 << 20;\n"
            f"    {t} *dx, *dy; int* bc;\n"
            f"    cudaMalloc(&dx, (size_t)C * sizeof({t})); cudaMalloc(&dy, (size_t)C * sizeof({t}));\n"
            "    cudaMalloc(&bc, (C / 1024) * sizeof(int));\n"
            "    int total = 0;\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            "        int nb = (m + 1023) / 1024;\n"
            f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "        count_blocks<<<nb, 1024>>>(m, dx, bc);\n"
            "        scan_inplace(bc, nb);\n"
            "        scatter_blocks<<<nb, 1024>>>(m, dx, bc, dy);\n"
            "        int c = 0;\n"
            "        cudaMemcpy(&c, bc + (nb - 1), sizeof(int), cudaMemcpyDeviceToHost);\n"
            f"        if (c > 0) cudaMemcpy(y + total, dy, (size_t)c * sizeof({t}), cudaMemcpyDeviceToHost);\n"
            "        total += c;\n"
            "    }\n"
            f"    if (total < n) memset(y + total, 0, (size_t)(n - total) * sizeof({t}));\n"
            "    cudaFree(dx); cudaFree(dy); cudaFree(bc);\n"
            "    return total;\n}\n")


def _reference(p: dict) -> str:
    t = p["type"]
    return ("#include <math.h>\n\n" + _pred_fn("static inline", p)
            + f"int compact(int n, const {t}* x, {t}* y) {{\n"
            "    int k = 0;\n"
            "    for (int i = 0; i < n; ++i) if (pred(x[i])) y[k++] = x[i];\n"
            "    for (int i = k; i < n; ++i) y[i] = 0;\n"
            "    return k;\n}\n")


def _predicate(index: int, rng: np.random.Generator) -> tuple[dict, dict, str]:
    k = index % 5
    if k == 0:
        thr = int(rng.integers(-300_000, 300_000))
        return ({"type": "int", "pred": f"v > {thr}"}, {"kind": "randint", "low": -1_000_000, "high": 1_000_000},
                f"x > {thr}")
    if k == 1:
        m = int(rng.choice([2, 3, 5, 7]))
        r = int(rng.integers(0, m))
        return ({"type": "int", "pred": f"v % {m} == {r}"}, {"kind": "randint", "low": 0, "high": 1_000_000_000},
                f"x % {m} == {r} (x >= 0)")
    if k == 2:
        rounds = int(rng.choice([2, 3, 4]))
        thr = int(rng.integers(200, 800))
        return ({"type": "int", "rounds": rounds, "pred": f"(mixk((unsigned int)v) & 1023u) < {thr}u"},
                {"kind": "randint", "low": -2_000_000_000, "high": 2_000_000_000},
                f"(h & 1023) < {thr} where h is {rounds} rounds of the mix (v ^= v >> 16; v *= 0x7FEB352D; "
                "v ^= v >> 15; v *= 0x846CA68B; v += r) of (unsigned)x")
    if k == 3:
        c = float(np.float32(rng.uniform(-0.5, 0.5)))
        w = float(np.float32(rng.uniform(0.3, 0.7)))
        return ({"type": "float", "pred": f"fabsf(v - ({c!r}f)) < {w!r}f"}, {"kind": "uniform", "low": -1.0, "high": 1.0},
                f"|x - ({c})| < {w} (float arithmetic)")
    lo = int(rng.integers(-5000, 0))
    hi = lo + int(rng.integers(2000, 8000))
    return ({"type": "int", "pred": f"v >= {lo} && v < {hi}"}, {"kind": "randint", "low": -10_000, "high": 10_000},
            f"{lo} <= x < {hi}")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    p, dist, pdesc = _predicate(index, rng)
    t = p["type"]
    n_time = (4_000_000 if p.get("rounds") else 5_000_000) + int(rng.integers(1, 5000))
    task = {
        "function_name": "compact",
        "description": (f"Stream compaction over {t}: copy every x[i] with {pdesc} to y in the original order, "
                        "set the rest of y (y[count..n)) to 0, and return count."),
        "returns": "int",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": dist},
            {"name": "y", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": [{"n": 1}, {"n": 999}, {"n": 70001 + int(rng.integers(5000))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["compaction", "scan", t],
    }
    variants = (
        Variant("block_counts_ballot", ("warp_shuffle", "two_level", "multi_pass", "coalesced", "block_1024",
                                        "pageable"), _block_counts(p, False)),
        Variant("block_counts_host", ("warp_shuffle", "two_level", "host_compute", "extra_transfers",
                                      "block_1024"), _block_counts(p, True)),
        Variant("scan_based", ("multi_pass", "warp_shuffle", "coalesced", "block_256"), _scan_based(p)),
        Variant("atomics_host_sort", ("atomics", "host_compute", "naive", "block_256"), _atomics_sort(p)),
        Variant("thread_chunks", ("small_grid", "strided", "multi_pass", "single_thread", "block_128"),
                _thread_chunks(p)),
        Variant("single_thread", ("single_thread", "naive", "block_256"), _single_thread(p)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "warp_shuffle", "host_compute",
                                      "block_1024"), _chunked_transfers(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time})


FAMILY = Family(
    name="stream_compact",
    description="order-preserving stream compaction with per-task predicates; count returned, tail zeroed",
    generate=generate,
    n_tasks=50,
    tags=("compaction",),
)
