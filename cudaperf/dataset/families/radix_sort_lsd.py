"""LSD radix sort of n 32-bit unsigned keys, optionally carrying a payload, by a KB-bit field of the key.

The sort key of a record is s(k) = ((k ^ FLIP) >> SHIFT) & (2^KB - 1): FLIP = 0 sorts ascending, FLIP = 0xFFFFFFFF
descending, FLIP = 0x80000000 in the order of the keys read as signed ints, and a small FLIP (0x3F, 0x7FF) over a
presorted input gives a nearly sorted problem. The sort runs P = ceil(KB / D) passes over D-bit digits (D = 4..8,
2^D buckets), each pass a stable counting sort: a digit histogram, an exclusive scan, a stable scatter. okeys (and
ovals) receive the whole records in increasing s order; records with equal s keep their input order. What varies
with the index: D, KB, SHIFT, FLIP, the key distribution (full 32-bit range, a narrow range, few distinct keys,
presorted), the payload (none, int, float, double, unsigned short, long long) and n.

The outputs are copies of input records, fully determined by the inputs because the sort is stable; they are
compared exactly (zero tolerance). There is no floating-point arithmetic at all.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

TILE = 4096
PAYLOADS = [None, "int", "float", "double", "unsigned short", "long long"]
DISTS = ["full", "few", "nearly", "narrow"]
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"


def _kmask(p: dict) -> int:
    return (1 << p["KB"]) - 1


def _sig(p: dict, ext: bool) -> str:
    vt = p["vt"]
    pre = 'extern "C" ' if ext else ""
    vin = f", const {vt}* vals" if vt else ""
    vout = f", {vt}* ovals" if vt else ""
    return f"{pre}void radix_sort(int n, const unsigned int* keys{vin}, unsigned int* okeys{vout})"


def _defs(p: dict) -> str:
    return (HEAD + f"#define DB {p['D']}\n#define NK {1 << p['D']}\n#define PASSES {p['P']}\n#define TILE {TILE}\n\n"
            "__device__ __forceinline__ unsigned int digit_of(unsigned int k, int sh) {\n"
            f"    return ((((k ^ 0x{p['FLIP']:08X}u) >> {p['SHIFT']}) & 0x{_kmask(p):08X}u) >> sh) & (NK - 1u);\n}}\n\n")


# ---------------------------------------------------------------------------------------------------------------
# kernels (text); V* fragments vanish when the task has no payload

def _vp(p: dict) -> dict:
    vt = p["vt"]
    return {
        "vin": f", const {vt}* __restrict__ vals" if vt else "",
        "vout": f", {vt}* __restrict__ ovals" if vt else "",
        "vmove": "            ovals[pos] = vals[i];\n" if vt else "",
        "vmove2": "        ovals[pos] = vals[i];\n" if vt else "",
    }


COUNT_SMEM = (
    "__global__ void count_smem(int n, int tiles, int sh, const unsigned int* __restrict__ keys, int* cnt) {\n"
    "    __shared__ int h[NK];\n"
    "    for (int b = threadIdx.x; b < NK; b += blockDim.x) h[b] = 0;\n"
    "    __syncthreads();\n"
    "    int lo = blockIdx.x * TILE;\n"
    "    int hi = n - lo < TILE ? n : lo + TILE;\n"
    "    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) atomicAdd(&h[digit_of(keys[i], sh)], 1);\n"
    "    __syncthreads();\n"
    "    for (int b = threadIdx.x; b < NK; b += blockDim.x) cnt[(size_t)b * tiles + blockIdx.x] = h[b];\n}\n\n")

COUNT_GLOBAL = (
    "__global__ void count_global(int n, int tiles, int sh, const unsigned int* __restrict__ keys, int* cnt) {\n"
    "    int lo = blockIdx.x * TILE;\n"
    "    int hi = n - lo < TILE ? n : lo + TILE;\n"
    "    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x)\n"
    "        atomicAdd(&cnt[(size_t)digit_of(keys[i], sh) * tiles + blockIdx.x], 1);\n}\n\n")


def _scatter_rounds(p: dict, nwarps: int, lo: str, hi: str) -> str:
    """Stable scatter of records [lo, hi) in rounds of blockDim: a record's destination is the running offset of
    its digit (off), plus the records of that digit in lower warps of the round (wc), plus its rank among the
    lanes of its warp with the same digit (__match_any_sync). After the round, the leader of each (warp, digit)
    group adds its count to off[d] with a shared atomicAdd: several warps may hold the same digit, and a plain
    ``off[d] +=`` from each of them races (updates are lost and later rounds overwrite earlier records: every
    variant built on this scatter failed on the H200, 2026-12-03)."""
    v = _vp(p)
    return (f"    for (int base = {lo}; base < {hi}; base += blockDim.x) {{\n"
            "        int i = base + threadIdx.x;\n"
            f"        bool valid = i < {hi};\n"
            "        int d = valid ? (int)digit_of(keys[i], sh) : -1;\n"
            "        unsigned int peers = __match_any_sync(0xffffffffu, d);\n"
            "        int rank = __popc(peers & ((1u << lane) - 1u));\n"
            "        if (valid && rank == 0) wc[warp][d] = __popc(peers);\n"
            "        __syncthreads();\n"
            "        if (valid) {\n"
            "            int pos = off[d] + rank;\n"
            "            for (int w = 0; w < warp; ++w) pos += wc[w][d];\n"
            "            okeys[pos] = keys[i];\n"
            + v["vmove"] +
            "        }\n"
            "        __syncthreads();\n"
            "        if (valid && rank == 0) { atomicAdd(&off[d], wc[warp][d]); wc[warp][d] = 0; }\n"
            "        __syncthreads();\n"
            "    }\n")


def _scatter_tiles(p: dict, threads: int) -> str:
    v = _vp(p)
    nw = threads // 32
    return ("__global__ void scatter_tiles(int n, int tiles, int sh, const unsigned int* __restrict__ keys"
            + v["vin"] + ", const int* __restrict__ offs, unsigned int* __restrict__ okeys" + v["vout"] + ") {\n"
            "    __shared__ int off[NK];\n"
            f"    __shared__ int wc[{nw}][NK];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    for (int b = threadIdx.x; b < NK; b += blockDim.x) {\n"
            "        off[b] = offs[(size_t)b * tiles + blockIdx.x];\n"
            f"        for (int w = 0; w < {nw}; ++w) wc[w][b] = 0;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    int lo = blockIdx.x * TILE;\n"
            "    int hi = n - lo < TILE ? n : lo + TILE;\n"
            + _scatter_rounds(p, nw, "lo", "hi") + "}\n\n")


SCAN = (
    "__device__ int block_inclusive_1024(int v, int* ws) {\n"
    "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
    "    for (int o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += t; }\n"
    "    if (lane == 31) ws[w] = v;\n"
    "    __syncthreads();\n"
    "    if (w == 0) {\n"
    "        int s = ws[lane];\n"
    "        for (int o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += t; }\n"
    "        ws[lane] = s;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (w > 0) v += ws[w - 1];\n"
    "    return v;\n}\n\n"
    "__global__ void scan_chunks(int len, int* data, int* sums) {\n"
    "    __shared__ int ws[32];\n"
    "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
    "    int v = i < len ? data[i] : 0;\n"
    "    int inc = block_inclusive_1024(v, ws);\n"
    "    if (i < len) data[i] = inc - v;\n"
    "    if (threadIdx.x == 1023) sums[blockIdx.x] = inc;\n}\n\n"
    "__global__ void scan_sums(int g, int* sums) {\n"
    "    __shared__ int ws[32];\n"
    "    __shared__ int carry;\n"
    "    if (threadIdx.x == 0) carry = 0;\n"
    "    __syncthreads();\n"
    "    for (int base = 0; base < g; base += 1024) {\n"
    "        int i = base + threadIdx.x;\n"
    "        int v = i < g ? sums[i] : 0;\n"
    "        int inc = block_inclusive_1024(v, ws);\n"
    "        if (i < g) sums[i] = carry + inc - v;\n"
    "        __syncthreads();\n"
    "        if (threadIdx.x == 1023) carry += inc;\n"
    "        __syncthreads();\n"
    "    }\n}\n\n"
    "__global__ void add_sums(int len, int* data, const int* __restrict__ sums) {\n"
    "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
    "    if (i < len) data[i] += sums[blockIdx.x];\n}\n\n")

DEVICE_SCAN = ("        scan_chunks<<<g, 1024>>>(len, cnt, sums);\n"
               "        scan_sums<<<1, 1024>>>(g, sums);\n"
               "        add_sums<<<g, 1024>>>(len, cnt, sums);\n")


def _alloc(p: dict, pinned: bool = False) -> str:
    vt = p["vt"]
    s = ("    if (n <= 0) return;\n"
         "    size_t kb = (size_t)n * sizeof(unsigned int);\n"
         "    unsigned int *ka, *kb2;\n"
         "    cudaMalloc(&ka, kb); cudaMalloc(&kb2, kb);\n")
    if vt:
        s += (f"    size_t vb = (size_t)n * sizeof({vt});\n"
              f"    {vt} *va, *vb2;\n"
              "    cudaMalloc(&va, vb); cudaMalloc(&vb2, vb);\n")
    if pinned:
        s += ("    unsigned int* hk; cudaMallocHost(&hk, kb);\n"
              "    memcpy(hk, keys, kb);\n"
              "    cudaMemcpyAsync(ka, hk, kb, cudaMemcpyHostToDevice, 0);\n")
        if vt:
            s += (f"    {vt}* hv; cudaMallocHost(&hv, vb);\n"
                  "    memcpy(hv, vals, vb);\n"
                  "    cudaMemcpyAsync(va, hv, vb, cudaMemcpyHostToDevice, 0);\n")
    else:
        s += "    cudaMemcpy(ka, keys, kb, cudaMemcpyHostToDevice);\n"
        if vt:
            s += "    cudaMemcpy(va, vals, vb, cudaMemcpyHostToDevice);\n"
    return s


def _swap(p: dict) -> str:
    s = "        { unsigned int* t = ka; ka = kb2; kb2 = t; }\n"
    if p["vt"]:
        s += f"        {{ {p['vt']}* t = va; va = vb2; vb2 = t; }}\n"
    return s


def _finish(p: dict, pinned: bool = False) -> str:
    vt = p["vt"]
    if pinned:
        s = ("    cudaMemcpyAsync(hk, ka, kb, cudaMemcpyDeviceToHost, 0);\n"
             + ("    cudaMemcpyAsync(hv, va, vb, cudaMemcpyDeviceToHost, 0);\n" if vt else "")
             + "    cudaStreamSynchronize(0);\n"
             "    memcpy(okeys, hk, kb);\n"
             + ("    memcpy(ovals, hv, vb);\n    cudaFreeHost(hv);\n" if vt else "")
             + "    cudaFreeHost(hk);\n")
    else:
        s = ("    cudaMemcpy(okeys, ka, kb, cudaMemcpyDeviceToHost);\n"
             + ("    cudaMemcpy(ovals, va, vb, cudaMemcpyDeviceToHost);\n" if vt else ""))
    s += "    cudaFree(ka); cudaFree(kb2);\n"
    if vt:
        s += "    cudaFree(va); cudaFree(vb2);\n"
    return s + "}\n"


def _scatter_call(p: dict, threads: int) -> str:
    va = ", va" if p["vt"] else ""
    vb = ", vb2" if p["vt"] else ""
    return f"        scatter_tiles<<<tiles, {threads}>>>(n, tiles, sh, ka{va}, cnt, kb2{vb});\n"


# ---------------------------------------------------------------------------------------------------------------
# variants

def _global_host_scan(p: dict) -> str:
    return (_defs(p) + COUNT_GLOBAL + _scatter_tiles(p, 256) + _sig(p, True) + " {\n" + _alloc(p)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    size_t cb = (size_t)NK * tiles * sizeof(int);\n"
            "    int* cnt; cudaMalloc(&cnt, cb);\n"
            "    int* h = (int*)malloc(cb);\n"
            "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            "        int sh = pass * DB;\n"
            "        cudaMemset(cnt, 0, cb);\n"
            "        count_global<<<tiles, 256>>>(n, tiles, sh, ka, cnt);\n"
            "        cudaMemcpy(h, cnt, cb, cudaMemcpyDeviceToHost);\n"
            "        int run = 0;\n"
            "        for (size_t j = 0; j < (size_t)NK * tiles; ++j) { int c = h[j]; h[j] = run; run += c; }\n"
            "        cudaMemcpy(cnt, h, cb, cudaMemcpyHostToDevice);\n"
            + _scatter_call(p, 256) + _swap(p) +
            "    }\n"
            "    free(h);\n"
            "    cudaFree(cnt);\n" + _finish(p))


def _smem_device_scan(p: dict, threads: int, pinned: bool) -> str:
    return (_defs(p) + COUNT_SMEM + SCAN + _scatter_tiles(p, threads) + _sig(p, True) + " {\n" + _alloc(p, pinned)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    int len = NK * tiles;\n"
            "    int g = (len + 1023) / 1024;\n"
            "    int *cnt, *sums;\n"
            "    cudaMalloc(&cnt, (size_t)len * sizeof(int)); cudaMalloc(&sums, (size_t)g * sizeof(int));\n"
            "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            "        int sh = pass * DB;\n"
            f"        count_smem<<<tiles, {threads}>>>(n, tiles, sh, ka, cnt);\n"
            + DEVICE_SCAN + _scatter_call(p, threads) + _swap(p) +
            "    }\n"
            "    cudaFree(cnt); cudaFree(sums);\n" + _finish(p, pinned))


def _in_loop(p: dict) -> str:
    vt = p["vt"]
    back = ("        cudaMemcpy(okeys, ka, kb, cudaMemcpyDeviceToHost);\n"
            + ("        cudaMemcpy(ovals, va, vb, cudaMemcpyDeviceToHost);\n" if vt else "")
            + "        if (pass + 1 < PASSES) {\n"
            "            cudaMemcpy(ka, okeys, kb, cudaMemcpyHostToDevice);\n"
            + ("            cudaMemcpy(va, ovals, vb, cudaMemcpyHostToDevice);\n" if vt else "")
            + "        }\n")
    fin = "    cudaFree(ka); cudaFree(kb2);\n" + ("    cudaFree(va); cudaFree(vb2);\n" if vt else "") + "}\n"
    return (_defs(p) + COUNT_SMEM + _scatter_tiles(p, 256) + _sig(p, True) + " {\n" + _alloc(p)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    size_t cb = (size_t)NK * tiles * sizeof(int);\n"
            "    int* cnt; cudaMalloc(&cnt, cb);\n"
            "    int* h = (int*)malloc(cb);\n"
            "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            "        int sh = pass * DB;\n"
            "        count_smem<<<tiles, 256>>>(n, tiles, sh, ka, cnt);\n"
            "        cudaMemcpy(h, cnt, cb, cudaMemcpyDeviceToHost);\n"
            "        int run = 0;\n"
            "        for (size_t j = 0; j < (size_t)NK * tiles; ++j) { int c = h[j]; h[j] = run; run += c; }\n"
            "        cudaMemcpy(cnt, h, cb, cudaMemcpyHostToDevice);\n"
            + _scatter_call(p, 256) + _swap(p) + back +
            "    }\n"
            "    free(h);\n"
            "    cudaFree(cnt);\n" + fin)


def _bucket_launches(p: dict) -> str:
    """Per pass: tile histograms and a device scan, then one launch per bucket: every block walks its tile and
    places the records of that bucket (ranks from warp ballots and a prefix over the warps)."""
    v = _vp(p)
    va = ", va" if p["vt"] else ""
    vb = ", vb2" if p["vt"] else ""
    kern = ("__global__ void scatter_bucket(int n, int tiles, int sh, int b, const unsigned int* __restrict__ keys"
            + v["vin"] + ", const int* __restrict__ offs, unsigned int* __restrict__ okeys" + v["vout"] + ") {\n"
            "    __shared__ int wsum[8];\n"
            "    __shared__ int base_pos;\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    if (threadIdx.x == 0) base_pos = offs[(size_t)b * tiles + blockIdx.x];\n"
            "    __syncthreads();\n"
            "    int lo = blockIdx.x * TILE;\n"
            "    int hi = n - lo < TILE ? n : lo + TILE;\n"
            "    for (int base = lo; base < hi; base += 256) {\n"
            "        int i = base + threadIdx.x;\n"
            "        bool mine = i < hi && (int)digit_of(keys[i], sh) == b;\n"
            "        unsigned int bal = __ballot_sync(0xffffffffu, mine);\n"
            "        if (lane == 0) wsum[warp] = __popc(bal);\n"
            "        __syncthreads();\n"
            "        int before = 0, total = 0;\n"
            "        for (int w = 0; w < 8; ++w) { int c = wsum[w]; if (w < warp) before += c; total += c; }\n"
            "        if (mine) {\n"
            "            int pos = base_pos + before + __popc(bal & ((1u << lane) - 1u));\n"
            "            okeys[pos] = keys[i];\n"
            + v["vmove"] +
            "        }\n"
            "        __syncthreads();\n"
            "        if (threadIdx.x == 0) base_pos += total;\n"
            "        __syncthreads();\n"
            "    }\n}\n\n")
    return (_defs(p) + COUNT_SMEM + SCAN + kern + _sig(p, True) + " {\n" + _alloc(p)
            + "    int tiles = (n + TILE - 1) / TILE;\n"
            "    int len = NK * tiles;\n"
            "    int g = (len + 1023) / 1024;\n"
            "    int *cnt, *sums;\n"
            "    cudaMalloc(&cnt, (size_t)len * sizeof(int)); cudaMalloc(&sums, (size_t)g * sizeof(int));\n"
            "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            "        int sh = pass * DB;\n"
            "        count_smem<<<tiles, 256>>>(n, tiles, sh, ka, cnt);\n"
            + DEVICE_SCAN +
            "        for (int b = 0; b < NK; ++b)\n"
            f"            scatter_bucket<<<tiles, 256>>>(n, tiles, sh, b, ka{va}, cnt, kb2{vb});\n"
            + _swap(p) +
            "    }\n"
            "    cudaFree(cnt); cudaFree(sums);\n" + _finish(p))


def _single_block(p: dict) -> str:
    """One block of 512 threads runs every pass: a shared histogram, a serial scan of the buckets by thread 0,
    the stable scatter in rounds; the block swaps its two global buffers between passes."""
    vt = p["vt"]
    v = _vp(p)
    kparams = ("unsigned int* ka, unsigned int* kb2" + (f", {vt}* va, {vt}* vb2" if vt else ""))
    swap_dev = ("        { unsigned int* t = src; src = dst; dst = t; }\n"
                + (f"        {{ {vt}* t = vsrc; vsrc = vdst; vdst = t; }}\n" if vt else ""))
    body = _scatter_rounds(p, 16, "0", "n").replace("keys[i]", "src[i]").replace("okeys[pos]", "dst[pos]")
    body = body.replace("ovals[pos] = vals[i]", "vdst[pos] = vsrc[i]")
    kern = (f"__global__ void sort_one_block(int n, {kparams}) {{\n"
            "    __shared__ int off[NK];\n"
            "    __shared__ int wc[16][NK];\n"
            "    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
            "    unsigned int* src = ka; unsigned int* dst = kb2;\n"
            + (f"    {vt}* vsrc = va; {vt}* vdst = vb2;\n" if vt else "")
            + "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            "        int sh = pass * DB;\n"
            "        for (int b = threadIdx.x; b < NK; b += blockDim.x) {\n"
            "            off[b] = 0;\n"
            "            for (int w = 0; w < 16; ++w) wc[w][b] = 0;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&off[digit_of(src[i], sh)], 1);\n"
            "        __syncthreads();\n"
            "        if (threadIdx.x == 0) {\n"
            "            int run = 0;\n"
            "            for (int b = 0; b < NK; ++b) { int c = off[b]; off[b] = run; run += c; }\n"
            "        }\n"
            "        __syncthreads();\n"
            + body + swap_dev +
            "        __syncthreads();\n"
            "    }\n}\n\n")
    # after PASSES swaps the sorted data is in ka when PASSES is even, else in kb2
    res = ("    if (PASSES % 2 == 1) {\n" + _swap(p).replace("        ", "        ", 1) + "    }\n")
    return (_defs(p) + kern + _sig(p, True) + " {\n" + _alloc(p)
            + f"    sort_one_block<<<1, 512>>>(n, ka, kb2{', va, vb2' if vt else ''});\n" + res + _finish(p))


def _reference(p: dict) -> str:
    vt = p["vt"]
    D, NK = p["D"], 1 << p["D"]
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"#define NK {NK}\n#define PASSES {p['P']}\n\n"
            "static inline unsigned int sort_key(unsigned int k) {\n"
            f"    return ((k ^ 0x{p['FLIP']:08X}u) >> {p['SHIFT']}) & 0x{_kmask(p):08X}u;\n}}\n\n"
            + _sig(p, False) + " {\n"
            "    if (n <= 0) return;\n"
            "    size_t kb = (size_t)n * sizeof(unsigned int);\n"
            "    unsigned int* src = (unsigned int*)malloc(kb);\n"
            "    unsigned int* dst = (unsigned int*)malloc(kb);\n"
            "    memcpy(src, keys, kb);\n"
            + (f"    size_t vb = (size_t)n * sizeof({vt});\n"
               f"    {vt}* vsrc = ({vt}*)malloc(vb);\n"
               f"    {vt}* vdst = ({vt}*)malloc(vb);\n"
               "    memcpy(vsrc, vals, vb);\n" if vt else "")
            + "    int cnt[NK];\n"
            "    for (int pass = 0; pass < PASSES; ++pass) {\n"
            f"        int sh = pass * {D};\n"
            "        for (int b = 0; b < NK; ++b) cnt[b] = 0;\n"
            "        for (int i = 0; i < n; ++i) cnt[(sort_key(src[i]) >> sh) & (NK - 1)]++;\n"
            "        int run = 0;\n"
            "        for (int b = 0; b < NK; ++b) { int c = cnt[b]; cnt[b] = run; run += c; }\n"
            "        for (int i = 0; i < n; ++i) {\n"
            "            int q = cnt[(sort_key(src[i]) >> sh) & (NK - 1)]++;\n"
            "            dst[q] = src[i];\n"
            + ("            vdst[q] = vsrc[i];\n" if vt else "")
            + "        }\n"
            "        unsigned int* t = src; src = dst; dst = t;\n"
            + (f"        {vt}* tv = vsrc; vsrc = vdst; vdst = tv;\n" if vt else "")
            + "    }\n"
            "    memcpy(okeys, src, kb);\n"
            "    free(src); free(dst);\n"
            + ("    memcpy(ovals, vsrc, vb);\n    free(vsrc); free(vdst);\n" if vt else "")
            + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    D = [4, 5, 6, 7, 8][index % 5]
    dist = DISTS[(index // 5) % 4]
    vt = PAYLOADS[(index + index // 5) % len(PAYLOADS)]
    order = ["asc", "desc", "signed"][(index // 2 + int(rng.integers(3))) % 3]
    if dist == "nearly":
        KB = 32
        SHIFT = 0
        FLIP = int(rng.choice([0x3F, 0x7FF, 0xFF, 0x1FFF]))
        kd = {"kind": "sorted", "low": 0, "high": 4294967296}
    elif dist == "full":
        KB = int(rng.choice([32, 32, 28, 24, 30]))
        SHIFT = int(rng.integers(0, 33 - KB))
        FLIP = {"asc": 0, "desc": 0xFFFFFFFF, "signed": 0x80000000}[order]
        kd = {"kind": "randint", "low": 0, "high": 4294967296}
    elif dist == "narrow":
        KB = int(rng.choice([16, 20, 24, 18, 12]))
        SHIFT = int(rng.integers(0, 3))
        FLIP = 0 if order != "desc" else 0xFFFFFFFF
        kd = {"kind": "randint", "low": 0, "high": 1 << (KB + SHIFT)}
    else:  # few distinct keys: many ties, so stability shows
        KB = int(rng.choice([32, 24, 16]))
        SHIFT = 0
        FLIP = {"asc": 0, "desc": 0xFFFFFFFF, "signed": 0x80000000}[order]
        base = int(rng.integers(0, 1 << 30))
        kd = {"kind": "randint", "low": base, "high": base + int(rng.choice([3, 17, 100, 1000]))}
    P = -(-KB // D)
    p = {"D": D, "KB": KB, "SHIFT": SHIFT, "FLIP": FLIP, "P": P, "vt": vt, "dist": dist}
    vsize = {None: 0, "int": 4, "float": 4, "double": 8, "unsigned short": 2, "long long": 8}[vt]
    ns_per_pass = 2.2 + 0.25 * vsize
    n_time = int(min(12_000_000, 26e6 / (P * ns_per_pass))) + int(rng.integers(0, 5000))
    args = [{"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "keys", "role": "in", "ctype": "unsigned int", "length": "n", "dist": kd}]
    if vt:
        if vt in ("float", "double"):
            vd = {"kind": "uniform", "low": -1000.0, "high": 1000.0}
        elif vt == "unsigned short":
            vd = {"kind": "randint", "low": 0, "high": 65536}
        else:
            vd = {"kind": "randint", "low": -2_000_000_000, "high": 2_000_000_000}
        args.append({"name": "vals", "role": "in", "ctype": vt, "length": "n", "dist": vd})
    args.append({"name": "okeys", "role": "out", "ctype": "unsigned int", "length": "n"})
    if vt:
        args.append({"name": "ovals", "role": "out", "ctype": vt, "length": "n"})
    order_text = {0: "ascending", 0xFFFFFFFF: "descending (all bits flipped)",
                  0x80000000: "in signed order (sign bit flipped)"}.get(FLIP, f"with the low bits flipped by 0x{FLIP:X} "
                                                                        "(the input is presorted: a nearly sorted problem)")
    task = {
        "function_name": "radix_sort",
        "description": (f"Stable LSD radix sort of n 32-bit keys{' with ' + vt + ' payloads' if vt else ''} by "
                        f"s(k) = ((k ^ 0x{FLIP:08X}) >> {SHIFT}) & 0x{_kmask(p):08X}, {order_text}: {P} passes of "
                        f"{D}-bit digits, each a stable counting sort. okeys{'/ovals' if vt else ''} receive the "
                        "records in increasing s order; equal s keep their input order."),
        "returns": "void",
        "args": args,
        "size_configs": [{"n": 1}, {"n": 1000 + int(rng.integers(0, 300))},
                         {"n": 3 * TILE + 777 + int(rng.integers(0, 500))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["sort", "radix_sort", "stable", "integer", "multi_kernel"],
    }
    variants = (
        Variant("global_atomics_host_scan", ("atomics", "host_compute", "multi_pass", "pageable", "block_256"),
                _global_host_scan(p)),
        Variant("smem_tiles_device_scan", ("shared_tiling", "atomics", "two_level", "multi_pass", "warp_shuffle",
                                           "device_resident", "block_256"), _smem_device_scan(p, 256, False)),
        Variant("smem_tiles_pinned_b128", ("shared_tiling", "atomics", "two_level", "multi_pass", "warp_shuffle",
                                           "pinned", "block_128"), _smem_device_scan(p, 128, True)),
        Variant("bucket_launches", ("many_launches", "multi_pass", "two_level", "branch_divergent", "block_256"),
                _bucket_launches(p)),
        Variant("single_block", ("single_thread", "shared_tiling", "atomics", "fused", "block_512"),
                _single_block(p)),
        Variant("in_loop_transfers", ("in_loop_transfers", "extra_transfers", "host_compute", "shared_tiling",
                                      "multi_pass", "block_256"), _in_loop(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time, "keys": kd})


FAMILY = Family(
    name="radix_sort_lsd",
    description="stable LSD radix sort of 32-bit keys (optional payload) by a bit field, 4..8-bit digits per pass",
    generate=generate,
    n_tasks=50,
    tags=("sort", "integer"),
)
