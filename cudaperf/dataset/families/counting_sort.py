"""Stable counting sort of n records (key, payload) by a small digit d(key) in [0, K).

okeys/ovals receive the records ordered by digit; records with equal digits keep their input order (stability),
so the output is one permutation, fully determined by the inputs. What varies with the index: how the digit comes
from the key (the key itself, K-1 minus the key for a descending sort, a residue or a bit field of R rounds of an
integer mix of a 32-bit key, or a float key quantized into K equal buckets with the edges clamped), K (2 to 1024),
the payload type (int, float, double, long long, unsigned short, unsigned char) and n.

The outputs are copies of input records, compared exactly (zero tolerance). The only floating-point work, the
bucket of a float key, is one subtraction and one multiplication in float (nothing to fuse into an FMA), so C and
CUDA compute the same digit; the integer mixes are exact 32-bit arithmetic.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["mod", "direct", "bits", "bucket", "desc"]
PAYLOADS = ["int", "float", "double", "long long", "unsigned short", "unsigned char"]
MULTS = [0x2C1B3C6D, 0x297A2D39, 0x7FEB352D, 0x846CA68B, 0x5BD1E995, 0x1B873593, 0xCC9E2D51, 0x68E31DA4]
KS = {"mod": [3, 5, 10, 37, 100, 255, 500, 1000, 7, 24],
      "direct": [2, 4, 16, 60, 128, 300, 1024, 12],
      "bits": [2, 8, 32, 64, 256, 1024, 16, 512],
      "bucket": [10, 50, 64, 200, 1000, 20, 333],
      "desc": [3, 8, 100, 256, 640, 1000, 31]}
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
TILE = 4096


def _kt(p: dict) -> str:
    return {"mod": "unsigned int", "bits": "unsigned int", "bucket": "float"}.get(p["kind"], "int")


def _digit(qual: str, p: dict) -> str:
    kind, K = p["kind"], p["K"]
    kt = _kt(p)
    if kind == "direct":
        body = "    return v;\n"
    elif kind == "desc":
        body = f"    return {K - 1} - v;\n"
    elif kind == "bucket":
        body = (f"    float q = (v - ({p['lo']!r}f)) * {p['scale']!r}f;\n"
                f"    if (q < 0.0f) return 0;\n"
                f"    if (q >= {float(K)!r}f) return {K - 1};\n"
                "    return (int)q;\n")
    else:
        mix = ""
        if p["rounds"]:
            mix = (f"    for (unsigned int r = 0; r < {p['rounds']}u; ++r) {{\n"
                   f"        v = (v ^ (v >> {p['a']})) * 0x{p['m']:08X}u + (2u * r + 1u);\n"
                   f"        v ^= v >> {p['b']};\n"
                   "    }\n")
        final = f"(int)(v % {K}u)" if kind == "mod" else f"(int)((v >> {p['shift']}) & {K - 1}u)"
        body = mix + f"    return {final};\n"
    return f"{qual} int digit({kt} v) {{\n{body}}}\n\n"


def _sig(p: dict) -> str:
    kt, vt = _kt(p), p["vt"]
    return (f'extern "C" void counting_sort(int n, const {kt}* keys, const {vt}* vals, {kt}* okeys, '
            f"{vt}* ovals)")


def _pre(p: dict) -> str:
    return HEAD + f"#define NK {p['K']}\n#define TILE {TILE}\n\n" + _digit("__device__ __forceinline__", p)


def _alloc(p: dict, pinned: bool = False) -> str:
    kt, vt = _kt(p), p["vt"]
    s = ("    if (n <= 0) return;\n"
         f"    size_t kb = (size_t)n * sizeof({kt}), vb = (size_t)n * sizeof({vt});\n"
         f"    {kt} *dk, *dok; {vt} *dv, *dov; int* dig;\n"
         "    cudaMalloc(&dk, kb); cudaMalloc(&dok, kb); cudaMalloc(&dv, vb); cudaMalloc(&dov, vb);\n"
         "    cudaMalloc(&dig, (size_t)n * sizeof(int));\n")
    if pinned:
        s += (f"    {kt}* hk; {vt}* hv;\n"
              "    cudaMallocHost(&hk, kb); cudaMallocHost(&hv, vb);\n"
              "    memcpy(hk, keys, kb); memcpy(hv, vals, vb);\n"
              "    cudaMemcpyAsync(dk, hk, kb, cudaMemcpyHostToDevice, 0);\n"
              "    cudaMemcpyAsync(dv, hv, vb, cudaMemcpyHostToDevice, 0);\n")
    else:
        s += ("    cudaMemcpy(dk, keys, kb, cudaMemcpyHostToDevice);\n"
              "    cudaMemcpy(dv, vals, vb, cudaMemcpyHostToDevice);\n")
    return s


def _finish(pinned: bool = False) -> str:
    if pinned:
        return ("    cudaMemcpyAsync(hk, dok, kb, cudaMemcpyDeviceToHost, 0);\n"
                "    cudaMemcpyAsync(hv, dov, vb, cudaMemcpyDeviceToHost, 0);\n"
                "    cudaStreamSynchronize(0);\n"
                "    memcpy(okeys, hk, kb); memcpy(ovals, hv, vb);\n"
                "    cudaFreeHost(hk); cudaFreeHost(hv);\n"
                "    cudaFree(dk); cudaFree(dok); cudaFree(dv); cudaFree(dov); cudaFree(dig);\n}\n")
    return ("    cudaMemcpy(okeys, dok, kb, cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(ovals, dov, vb, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dk); cudaFree(dok); cudaFree(dv); cudaFree(dov); cudaFree(dig);\n}\n")


def _count_tiles(p: dict) -> str:
    """Per tile of TILE records: digits stored, a shared-memory histogram (atomics), written key-major to cnt."""
    kt = _kt(p)
    return (f"__global__ void count_tiles(int n, int tiles, const {kt}* __restrict__ keys, int* dig, int* cnt) {{\n"
            "    __shared__ int h[NK];\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) h[b] = 0;\n"
            "    __syncthreads();\n"
            "    int lo = blockIdx.x * TILE;\n"
            "    int hi = n - lo < TILE ? n : lo + TILE;\n"
            "    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {\n"
            "        int d = digit(keys[i]);\n"
            "        dig[i] = d;\n"
            "        atomicAdd(&h[d], 1);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) cnt[(size_t)b * tiles + blockIdx.x] = h[b];\n}\n\n")


def _rounds(p: dict, lo: str, hi: str) -> str:
    """Block-wide stable scatter of records [lo, hi) in rounds of blockDim: rank among equal digits within the warp
    (__match_any_sync), plus the counts of lower warps (wc), plus the running offset of the digit (off)."""
    return (f"    for (int base = {lo}; base < {hi}; base += blockDim.x) {{\n"
            "        int i = base + threadIdx.x;\n"
            f"        bool valid = i < {hi};\n"
            "        int d = valid ? dig[i] : -1;\n"
            "        unsigned int peers = __match_any_sync(0xffffffffu, d);\n"
            "        int rank = __popc(peers & ((1u << lane) - 1u));\n"
            "        if (valid && rank == 0) wc[warp][d] = __popc(peers);\n"
            "        __syncthreads();\n"
            "        if (valid) {\n"
            "            int pos = off[d] + rank;\n"
            "            for (int w = 0; w < warp; ++w) pos += wc[w][d];\n"
            "            okeys[pos] = keys[i];\n"
            "            ovals[pos] = vals[i];\n"
            "        }\n"
            "        __syncthreads();\n"
            "        if (valid && rank == 0) { atomicAdd(&off[d], wc[warp][d]); wc[warp][d] = 0; }\n"
            "        __syncthreads();\n"
            "    }\n")


def _scatter_tiles(p: dict, threads: int) -> str:
    kt, vt = _kt(p), p["vt"]
    return (f"__global__ void scatter_tiles(int n, int tiles, const {kt}* __restrict__ keys, "
            f"const {vt}* __restrict__ vals, const int* __restrict__ dig, const int* __restrict__ offs, "
            f"{kt}* okeys, {vt}* ovals) {{\n"
            "    __shared__ int off[NK];\n"
            f"    __shared__ int wc[{threads // 32}][NK];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) {\n"
            "        off[b] = offs[(size_t)b * tiles + blockIdx.x];\n"
            f"        for (int w = 0; w < {threads // 32}; ++w) wc[w][b] = 0;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    int lo = blockIdx.x * TILE;\n"
            "    int hi = n - lo < TILE ? n : lo + TILE;\n"
            + _rounds(p, "lo", "hi") + "}\n\n")


SCAN = (
    "__global__ void scan_chunks(int len, int* data, int* sums) {\n"
    "    __shared__ int s[1024];\n"
    "    int t = threadIdx.x;\n"
    "    int i = blockIdx.x * 1024 + t;\n"
    "    int v = i < len ? data[i] : 0;\n"
    "    s[t] = v;\n"
    "    __syncthreads();\n"
    "    for (int o = 1; o < 1024; o <<= 1) {\n"
    "        int add = t >= o ? s[t - o] : 0;\n"
    "        __syncthreads();\n"
    "        s[t] += add;\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (i < len) data[i] = s[t] - v;\n"
    "    if (t == 1023) sums[blockIdx.x] = s[1023];\n}\n\n"
    "__global__ void scan_sums(int g, int* sums) {\n"
    "    __shared__ int s[1024];\n"
    "    __shared__ int carry;\n"
    "    int t = threadIdx.x;\n"
    "    if (t == 0) carry = 0;\n"
    "    __syncthreads();\n"
    "    for (int base = 0; base < g; base += 1024) {\n"
    "        int i = base + t;\n"
    "        int v = i < g ? sums[i] : 0;\n"
    "        s[t] = v;\n"
    "        __syncthreads();\n"
    "        for (int o = 1; o < 1024; o <<= 1) {\n"
    "            int add = t >= o ? s[t - o] : 0;\n"
    "            __syncthreads();\n"
    "            s[t] += add;\n"
    "            __syncthreads();\n"
    "        }\n"
    "        if (i < g) sums[i] = carry + s[t] - v;\n"
    "        __syncthreads();\n"
    "        if (t == 1023) carry += s[1023];\n"
    "        __syncthreads();\n"
    "    }\n}\n\n"
    "__global__ void add_sums(int len, int* data, const int* sums) {\n"
    "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
    "    if (i < len) data[i] += sums[blockIdx.x];\n}\n\n")

DEVICE_SCAN = ("    int len = NK * tiles;\n"
               "    int g = (len + 1023) / 1024;\n"
               "    int* sums; cudaMalloc(&sums, (size_t)g * sizeof(int));\n"
               "    scan_chunks<<<g, 1024>>>(len, cnt, sums);\n"
               "    scan_sums<<<1, 1024>>>(g, sums);\n"
               "    add_sums<<<g, 1024>>>(len, cnt, sums);\n"
               "    cudaFree(sums);\n")


def _tiles_host_scan(p: dict) -> str:
    return (_pre(p) + _count_tiles(p) + _scatter_tiles(p, 256) + _sig(p) + " {\n" + _alloc(p)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    size_t cb = (size_t)NK * tiles * sizeof(int);\n"
            "    int* cnt; cudaMalloc(&cnt, cb);\n"
            "    count_tiles<<<tiles, 256>>>(n, tiles, dk, dig, cnt);\n"
            "    int* h = (int*)malloc(cb);\n"
            "    cudaMemcpy(h, cnt, cb, cudaMemcpyDeviceToHost);\n"
            "    int run = 0;\n"
            "    for (size_t j = 0; j < (size_t)NK * tiles; ++j) { int c = h[j]; h[j] = run; run += c; }\n"
            "    cudaMemcpy(cnt, h, cb, cudaMemcpyHostToDevice);\n"
            "    free(h);\n"
            "    scatter_tiles<<<tiles, 256>>>(n, tiles, dk, dv, dig, cnt, dok, dov);\n"
            "    cudaFree(cnt);\n" + _finish())


def _tiles_device_scan(p: dict, threads: int, pinned: bool) -> str:
    return (_pre(p) + _count_tiles(p) + SCAN + _scatter_tiles(p, threads) + _sig(p) + " {\n" + _alloc(p, pinned)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    int* cnt; cudaMalloc(&cnt, (size_t)NK * tiles * sizeof(int));\n"
            f"    count_tiles<<<tiles, {threads}>>>(n, tiles, dk, dig, cnt);\n"
            + DEVICE_SCAN
            + f"    scatter_tiles<<<tiles, {threads}>>>(n, tiles, dk, dv, dig, cnt, dok, dov);\n"
            "    cudaFree(cnt);\n" + _finish(pinned))


def _key_ranges(p: dict) -> str:
    """After the per-tile counts and a device scan, each block takes one tile and each of its 8 warps one eighth of
    the digit range: the warp walks the whole tile in order, 32 records at a time, and places the records whose
    digit is its own (ranks among equal digits from __match_any_sync)."""
    kt, vt = _kt(p), p["vt"]
    return (_pre(p) + _count_tiles(p) + SCAN
            + f"__global__ void scatter_key_ranges(int n, int tiles, const {kt}* __restrict__ keys, "
            f"const {vt}* __restrict__ vals, const int* __restrict__ dig, const int* __restrict__ offs, "
            f"{kt}* okeys, {vt}* ovals) {{\n"
            "    __shared__ int off[NK];\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) off[b] = offs[(size_t)b * tiles + blockIdx.x];\n"
            "    __syncthreads();\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    int klo = warp * NK / 8, khi = (warp + 1) * NK / 8;\n"
            "    if (klo >= khi) return;\n"
            "    int lo = blockIdx.x * TILE;\n"
            "    int hi = n - lo < TILE ? n : lo + TILE;\n"
            "    for (int base = lo; base < hi; base += 32) {\n"
            "        int i = base + lane;\n"
            "        int d = i < hi ? dig[i] : -1;\n"
            "        bool mine = d >= klo && d < khi;\n"
            "        unsigned int peers = __match_any_sync(0xffffffffu, mine ? d : -1);\n"
            "        int rank = __popc(peers & ((1u << lane) - 1u));\n"
            "        if (mine) {\n"
            "            int pos = off[d] + rank;\n"
            "            okeys[pos] = keys[i];\n"
            "            ovals[pos] = vals[i];\n"
            "        }\n"
            "        __syncwarp();\n"
            "        if (mine && rank == 0) off[d] += __popc(peers);\n"
            "        __syncwarp();\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    int* cnt; cudaMalloc(&cnt, (size_t)NK * tiles * sizeof(int));\n"
            "    count_tiles<<<tiles, 256>>>(n, tiles, dk, dig, cnt);\n"
            + DEVICE_SCAN
            + "    scatter_key_ranges<<<tiles, 256>>>(n, tiles, dk, dv, dig, cnt, dok, dov);\n"
            "    cudaFree(cnt);\n" + _finish())


def _single_block(p: dict, threads: int) -> str:
    """One block does everything: the histogram, a serial scan of the K counts, then the stable scatter of the
    whole array in rounds of blockDim records."""
    kt, vt = _kt(p), p["vt"]
    return (_pre(p)
            + f"__global__ void sort_one_block(int n, const {kt}* __restrict__ keys, const {vt}* __restrict__ vals, "
            f"int* dig, {kt}* okeys, {vt}* ovals) {{\n"
            "    __shared__ int off[NK];\n"
            f"    __shared__ int wc[{threads // 32}][NK];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) {\n"
            "        off[b] = 0;\n"
            f"        for (int w = 0; w < {threads // 32}; ++w) wc[w][b] = 0;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int i = threadIdx.x; i < n; i += blockDim.x) {\n"
            "        int d = digit(keys[i]);\n"
            "        dig[i] = d;\n"
            "        atomicAdd(&off[d], 1);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "        int run = 0;\n"
            "        for (int b = 0; b < NK; ++b) { int c = off[b]; off[b] = run; run += c; }\n"
            "    }\n"
            "    __syncthreads();\n"
            + _rounds(p, "0", "n") + "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + f"    sort_one_block<<<1, {threads}>>>(n, dk, dv, dig, dok, dov);\n" + _finish())


def _single_thread(p: dict) -> str:
    kt, vt = _kt(p), p["vt"]
    return (_pre(p)
            + f"__global__ void sort_serial(int n, const {kt}* keys, const {vt}* vals, int* dig, {kt}* okeys, "
            f"{vt}* ovals) {{\n"
            "    __shared__ int pos[NK];\n"
            "    for (int b = 0; b < NK; ++b) pos[b] = 0;\n"
            "    for (int i = 0; i < n; ++i) { int d = digit(keys[i]); dig[i] = d; pos[d]++; }\n"
            "    int run = 0;\n"
            "    for (int b = 0; b < NK; ++b) { int c = pos[b]; pos[b] = run; run += c; }\n"
            "    for (int i = 0; i < n; ++i) {\n"
            "        int q = pos[dig[i]]++;\n"
            "        okeys[q] = keys[i];\n"
            "        ovals[q] = vals[i];\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    sort_serial<<<1, 1>>>(n, dk, dv, dig, dok, dov);\n" + _finish())


def _host_ranks(p: dict) -> str:
    """The GPU computes the digits; they come back to the host, which computes every record's destination; the
    destinations go back and a kernel moves the records."""
    kt, vt = _kt(p), p["vt"]
    return (_pre(p)
            + f"__global__ void digits(int n, const {kt}* keys, int* dig) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) dig[i] = digit(keys[i]);\n}\n\n"
            + f"__global__ void move_records(int n, const int* dest, const {kt}* keys, const {vt}* vals, "
            f"{kt}* okeys, {vt}* ovals) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) { int q = dest[i]; okeys[q] = keys[i]; ovals[q] = vals[i]; }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    digits<<<(n + 255) / 256, 256>>>(n, dk, dig);\n"
            "    int* h = (int*)malloc((size_t)n * sizeof(int));\n"
            "    cudaMemcpy(h, dig, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    int pos[NK];\n"
            "    for (int b = 0; b < NK; ++b) pos[b] = 0;\n"
            "    for (int i = 0; i < n; ++i) pos[h[i]]++;\n"
            "    int run = 0;\n"
            "    for (int b = 0; b < NK; ++b) { int c = pos[b]; pos[b] = run; run += c; }\n"
            "    for (int i = 0; i < n; ++i) h[i] = pos[h[i]]++;\n"
            "    cudaMemcpy(dig, h, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    free(h);\n"
            "    move_records<<<(n + 255) / 256, 256>>>(n, dig, dk, dv, dok, dov);\n" + _finish())


def _reference(p: dict) -> str:
    kt, vt = _kt(p), p["vt"]
    return ("#include <stdlib.h>\n\n" + f"#define NK {p['K']}\n\n" + _digit("static inline", p)
            + f"void counting_sort(int n, const {kt}* keys, const {vt}* vals, {kt}* okeys, {vt}* ovals) {{\n"
            "    if (n <= 0) return;\n"
            "    int pos[NK];\n"
            "    int* d = (int*)malloc((size_t)n * sizeof(int));\n"
            "    for (int b = 0; b < NK; ++b) pos[b] = 0;\n"
            "    for (int i = 0; i < n; ++i) { d[i] = digit(keys[i]); pos[d[i]]++; }\n"
            "    int run = 0;\n"
            "    for (int b = 0; b < NK; ++b) { int c = pos[b]; pos[b] = run; run += c; }\n"
            "    for (int i = 0; i < n; ++i) {\n"
            "        int q = pos[d[i]]++;\n"
            "        okeys[q] = keys[i];\n"
            "        ovals[q] = vals[i];\n"
            "    }\n"
            "    free(d);\n}\n")


DIGIT_TEXT = {
    "direct": "d(k) = k (keys are ints in [0, {K}))",
    "desc": "d(k) = {Km1} - k (keys are ints in [0, {K}): a stable descending sort)",
    "bucket": "d(k) = (int)((k - ({lo})f) * {scale}f) computed in float, clamped to [0, {Km1}]",
    "mod": "d(k) = h % {K}, where h is {R} rounds of v = (v ^ (v >> {a})) * 0x{m:08X} + (2r + 1); v ^= v >> {b} "
           "(r = 0, 1, ...) applied to the 32-bit key",
    "bits": "d(k) = (h >> {shift}) & {Km1}, where h is {R} rounds of v = (v ^ (v >> {a})) * 0x{m:08X} + (2r + 1); "
            "v ^= v >> {b} (r = 0, 1, ...) applied to the 32-bit key",
}


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    ks = KS[kind]
    K = ks[(index // len(KINDS)) % len(ks)]
    vt = PAYLOADS[(index + index // len(KINDS)) % len(PAYLOADS)]
    p: dict = {"kind": kind, "K": K, "vt": vt, "rounds": 0}
    if kind in ("mod", "bits"):
        p.update(rounds=int([1, 2, 3, 4, 6, 0, 8][(index // 5 + int(rng.integers(3))) % 7]),
                 a=int(rng.integers(13, 18)), b=int(rng.integers(11, 17)), m=int(rng.choice(MULTS)),
                 shift=int(rng.integers(0, 33 - K.bit_length())))
        if kind == "mod" and p["rounds"] == 0:
            p["rounds"] = 1
        kd = {"kind": "randint", "low": 0, "high": 4294967295}
    elif kind == "bucket":
        lo = float(np.float32(rng.choice([-2.0, 0.0, -100.0, 1.5])))
        width = float(rng.choice([1.0, 4.0, 250.0]))
        p.update(lo=lo, scale=float(np.float32(K / width)))
        kd = {"kind": "uniform", "low": lo - 0.1 * width, "high": lo + 1.1 * width}
    else:
        kd = {"kind": "randint", "low": 0, "high": K}
    if vt in ("float", "double"):
        vd = {"kind": "uniform", "low": -1000.0, "high": 1000.0}
    elif vt == "unsigned char":
        vd = {"kind": "randint", "low": 0, "high": 256}
    elif vt == "unsigned short":
        vd = {"kind": "randint", "low": 0, "high": 65536}
    else:
        vd = {"kind": "randint", "low": -2_000_000_000, "high": 2_000_000_000}
    # the reference's cost per record (ns), roughly: the digit, then a scatter into K runs (costlier for more K)
    ns_per = 5.0 + p["rounds"] + (1.0 if K <= 4 else 2.0 if K <= 16 else 7.0) + (3.0 if vt in ("double", "long long") else 0.0)
    n_time = int(min(16_000_000, 70e6 / ns_per)) + int(rng.integers(0, 5000))
    kt = _kt(p)
    desc_digit = DIGIT_TEXT[kind].format(K=K, Km1=K - 1, R=p["rounds"], lo=p.get("lo"), scale=p.get("scale"),
                                         a=p.get("a"), b=p.get("b"), m=p.get("m", 0), shift=p.get("shift"))
    task = {
        "function_name": "counting_sort",
        "description": (f"Stable counting sort of n records (keys[i], vals[i]) by the digit d(keys[i]) in "
                        f"[0, {K}), {desc_digit}: okeys/ovals receive the records in increasing digit order, "
                        "records with equal digits in their input order. Payloads are "
                        f"{vt}."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "keys", "role": "in", "ctype": kt, "length": "n", "dist": kd},
            {"name": "vals", "role": "in", "ctype": vt, "length": "n", "dist": vd},
            {"name": "okeys", "role": "out", "ctype": kt, "length": "n"},
            {"name": "ovals", "role": "out", "ctype": vt, "length": "n"},
        ],
        "size_configs": [{"n": 1}, {"n": 333}, {"n": 3 * TILE + 1000 + int(rng.integers(0, 500))},
                         {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["sort", "counting_sort", "stable", "integer"],
    }
    sb = 512 if K <= 512 else 256
    variants = (
        Variant("tiles_host_scan", ("atomics", "shared_tiling", "host_compute", "two_level", "block_256",
                                    "pageable"), _tiles_host_scan(p)),
        Variant("tiles_device_scan", ("atomics", "shared_tiling", "multi_pass", "two_level", "device_resident",
                                      "block_256"), _tiles_device_scan(p, 256, False)),
        Variant("tiles_device_scan_pinned_b128", ("atomics", "shared_tiling", "multi_pass", "pinned",
                                                  "block_128"), _tiles_device_scan(p, 128, True)),
        Variant("warp_key_ranges", ("block_per_row", "two_level", "multi_pass", "branch_divergent", "block_256"),
                _key_ranges(p)),
        Variant("single_block", ("single_thread", "shared_tiling", "atomics", f"block_{sb}"), _single_block(p, sb)),
        Variant("single_thread", ("single_thread", "naive"), _single_thread(p)),
        Variant("host_ranks", ("host_compute", "extra_transfers", "naive", "block_256"), _host_ranks(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time, "keys": kd})


FAMILY = Family(
    name="counting_sort",
    description="stable counting sort of (key, payload) records by a small digit (K = 2..1024) of the key",
    generate=generate,
    n_tasks=50,
    tags=("sort", "integer"),
)
