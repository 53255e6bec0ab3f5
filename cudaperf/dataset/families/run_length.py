"""Segmented reductions over CSR-style offsets: out[s] = reduce of g(x[j]) for off[s] <= j < off[s+1].

off has S+1 non-decreasing entries from 0 to n (empty segments occur). g(x) hashes the key with R rounds of an
integer mix and maps it to a value; the reduction varies per task: a long long sum, an int max or min (-1 for an
empty segment), or a count of a predicate. The mean segment length varies from a few elements to thousands, so
thread-, warp- and block-per-segment strategies trade places.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <limits.h>\n\n"
MULTS = [0x7FEB352D, 0x846CA68B, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F]


def _ops(p: dict) -> dict:
    op = p["op"]
    if op == "sum":
        return {"ot": "long long", "ident": "0LL", "comb": "a + b", "g": f"(long long)(h >> {p['shift']}) - {p['bias']}LL",
                "fin": "r"}
    if op == "max":
        return {"ot": "int", "ident": "-1", "comb": "a > b ? a : b", "g": "(int)(h >> 1)", "fin": "r"}
    if op == "min":
        return {"ot": "int", "ident": "INT_MAX", "comb": "a < b ? a : b", "g": f"(int)(h % {p['mod']}u)",
                "fin": "r == INT_MAX ? -1 : r"}
    return {"ot": "int", "ident": "0", "comb": "a + b", "g": f"(h & 1023u) < {p['thr']}u ? 1 : 0", "fin": "r"}


def _fns(qual: str, p: dict) -> str:
    o = _ops(p)
    ot = o["ot"]
    return (f"{qual} unsigned int mixk(unsigned int v) {{\n"
            f"    for (int r = 0; r < {p['rounds']}; ++r) {{\n"
            f"        v ^= v >> 16; v *= 0x{p['m']:08X}u; v ^= v >> 15; v += 0x632BE5ABu;\n"
            "    }\n    return v;\n}\n\n"
            f"{qual} {ot} gval(unsigned int x) {{ unsigned int h = mixk(x); return {o['g']}; }}\n\n"
            f"{qual} {ot} comb({ot} a, {ot} b) {{ return {o['comb']}; }}\n\n"
            f"{qual} {ot} fin({ot} r) {{ return {o['fin']}; }}\n\n")


def _pre(p: dict) -> str:
    o = _ops(p)
    return HEAD + f"#define IDENT ({o['ident']})\n\n" + _fns("__device__ __forceinline__", p)


def _ot(p: dict) -> str:
    return _ops(p)["ot"]


def _sig(p: dict) -> str:
    return f'extern "C" void segreduce(int S, int n, const int* off, const unsigned int* x, {_ot(p)}* out)'


def _io(p: dict) -> str:
    ot = _ot(p)
    return ("    if (S <= 0) return;\n"
            f"    size_t obytes = (size_t)S * sizeof({ot});\n"
            "    size_t xbytes = (size_t)(n > 0 ? n : 1) * sizeof(unsigned int);\n"
            f"    int* doff; unsigned int* dx; {ot}* dout;\n"
            "    cudaMalloc(&doff, (size_t)(S + 1) * sizeof(int)); cudaMalloc(&dx, xbytes); cudaMalloc(&dout, obytes);\n"
            "    cudaMemcpy(doff, off, (size_t)(S + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    if (n > 0) cudaMemcpy(dx, x, (size_t)n * sizeof(unsigned int), cudaMemcpyHostToDevice);\n")


OUT = ("    cudaMemcpy(out, dout, obytes, cudaMemcpyDeviceToHost);\n"
       "    cudaFree(doff); cudaFree(dx); cudaFree(dout);\n}\n")


def _thread_per_seg(p: dict) -> str:
    ot = _ot(p)
    return (_pre(p)
            + f"__global__ void seg_thread(int S, const int* off, const unsigned int* x, {ot}* out) {{\n"
            "    int s = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (s >= S) return;\n"
            f"    {ot} r = IDENT;\n"
            "    for (int j = off[s]; j < off[s + 1]; ++j) r = comb(r, gval(x[j]));\n"
            "    out[s] = fin(r);\n}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    seg_thread<<<(S + 255) / 256, 256>>>(S, doff, dx, dout);\n" + OUT)


def _group_per_seg(p: dict, width: int, block: int) -> str:
    """A group of ``width`` lanes (a warp or a sub-warp) per segment, shuffle reduction within the group."""
    ot = _ot(p)
    return (_pre(p)
            + f"__global__ void seg_group(int S, const int* __restrict__ off, const unsigned int* __restrict__ x,"
            f" {ot}* out) {{\n"
            f"    int g = (blockIdx.x * blockDim.x + threadIdx.x) / {width};\n"
            f"    int lane = threadIdx.x % {width};\n"
            "    int s = g < S ? g : S - 1;   /* whole groups stay active for the shuffles */\n"
            "    int lo = off[s], hi = off[s + 1];\n"
            f"    {ot} r = IDENT;\n"
            f"    for (int j = lo + lane; j < hi; j += {width}) r = comb(r, gval(x[j]));\n"
            "#pragma unroll\n"
            f"    for (int o = {width // 2}; o > 0; o >>= 1) r = comb(r, __shfl_down_sync(0xffffffffu, r, o, {width}));\n"
            "    if (lane == 0 && g < S) out[s] = fin(r);\n}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + f"    long long threads = (long long)S * {width};\n"
            f"    seg_group<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>(S, doff, dx, dout);\n" + OUT)


def _block_per_seg(p: dict) -> str:
    ot = _ot(p)
    return (_pre(p)
            + f"__global__ void seg_block(const int* off, const unsigned int* x, {ot}* out) {{\n"
            f"    __shared__ {ot} sh[256];\n"
            "    int s = blockIdx.x;\n"
            "    int lo = off[s], hi = off[s + 1];\n"
            f"    {ot} r = IDENT;\n"
            "    for (int j = lo + threadIdx.x; j < hi; j += 256) r = comb(r, gval(x[j]));\n"
            "    sh[threadIdx.x] = r;\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (threadIdx.x < h) sh[threadIdx.x] = comb(sh[threadIdx.x], sh[threadIdx.x + h]);\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (threadIdx.x == 0) out[s] = fin(sh[0]);\n}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    seg_block<<<S, 256>>>(doff, dx, dout);\n" + OUT)


def _flat_atomics(p: dict) -> str:
    ot = _ot(p)
    op = p["op"]
    if op == "sum":
        atom = "atomicAdd((unsigned long long*)&acc[s], (unsigned long long)v);"
    elif op == "max":
        atom = "atomicMax(&acc[s], v);"
    elif op == "min":
        atom = "atomicMin(&acc[s], v);"
    else:
        atom = "if (v) atomicAdd(&acc[s], v);"
    return (_pre(p)
            + f"__global__ void init_acc(int S, {ot}* acc) {{\n"
            "    int s = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (s < S) acc[s] = IDENT;\n}\n\n"
            + f"__global__ void flat_accumulate(int S, int n, const int* off, const unsigned int* x, {ot}* acc) {{\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (j >= n) return;\n"
            "    /* the segment of j: the last s with off[s] <= j (skips empty segments) */\n"
            "    int lo = 0, hi = S;\n"
            "    while (hi - lo > 1) { int mid = (lo + hi) >> 1; if (off[mid] <= j) lo = mid; else hi = mid; }\n"
            "    int s = lo;\n"
            f"    {ot} v = gval(x[j]);\n"
            f"    {atom}\n}}\n\n"
            + f"__global__ void finish(int S, {ot}* acc) {{\n"
            "    int s = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (s < S) acc[s] = fin(acc[s]);\n}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    init_acc<<<(S + 255) / 256, 256>>>(S, dout);\n"
            "    if (n > 0) flat_accumulate<<<(n + 255) / 256, 256>>>(S, n, doff, dx, dout);\n"
            "    finish<<<(S + 255) / 256, 256>>>(S, dout);\n" + OUT)


def _host_reduce(p: dict) -> str:
    ot = _ot(p)
    return (_pre(p).replace("#define IDENT", "#include <stdlib.h>\n#define IDENT")
            + _fns("static inline", p).replace("mixk", "h_mixk").replace("gval", "h_gval")
            .replace("comb", "h_comb").replace("fin(", "h_fin(")
            + f"__global__ void map_kernel(int n, const unsigned int* x, {ot}* g) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) g[i] = gval(x[i]);\n}\n\n"
            + _sig(p) + " {\n"
            "    if (S <= 0) return;\n"
            f"    {ot}* hg = ({ot}*)malloc((size_t)(n > 0 ? n : 1) * sizeof({ot}));\n"
            "    if (n > 0) {\n"
            f"        unsigned int* dx; {ot}* dg;\n"
            f"        cudaMalloc(&dx, (size_t)n * sizeof(unsigned int)); cudaMalloc(&dg, (size_t)n * sizeof({ot}));\n"
            "        cudaMemcpy(dx, x, (size_t)n * sizeof(unsigned int), cudaMemcpyHostToDevice);\n"
            "        map_kernel<<<(n + 255) / 256, 256>>>(n, dx, dg);\n"
            f"        cudaMemcpy(hg, dg, (size_t)n * sizeof({ot}), cudaMemcpyDeviceToHost);\n"
            "        cudaFree(dx); cudaFree(dg);\n"
            "    }\n"
            "    for (int s = 0; s < S; ++s) {\n"
            f"        {ot} r = IDENT;\n"
            "        for (int j = off[s]; j < off[s + 1]; ++j) r = h_comb(r, hg[j]);\n"
            "        out[s] = h_fin(r);\n"
            "    }\n"
            "    free(hg);\n}\n")


def _single_thread(p: dict) -> str:
    ot = _ot(p)
    return (_pre(p)
            + f"__global__ void seg_serial(int S, const int* off, const unsigned int* x, {ot}* out) {{\n"
            "    for (int s = 0; s < S; ++s) {\n"
            f"        {ot} r = IDENT;\n"
            "        for (int j = off[s]; j < off[s + 1]; ++j) r = comb(r, gval(x[j]));\n"
            "        out[s] = fin(r);\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    seg_serial<<<1, 1>>>(S, doff, dx, dout);\n" + OUT)


def _chunked(p: dict) -> str:
    """Batches of segments: copy the batch's slice of x, one warp per segment, copy the batch's results out."""
    ot = _ot(p)
    return (_pre(p)
            + f"__global__ void seg_warp(int m, const int* off, int base, const unsigned int* x, {ot}* out) {{\n"
            "    int g = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
            "    int lane = threadIdx.x & 31;\n"
            "    int s = g < m ? g : m - 1;\n"
            "    int lo = off[s] - base, hi = off[s + 1] - base;\n"
            f"    {ot} r = IDENT;\n"
            "    for (int j = lo + lane; j < hi; j += 32) r = comb(r, gval(x[j]));\n"
            "    for (int o = 16; o > 0; o >>= 1) r = comb(r, __shfl_down_sync(0xffffffffu, r, o));\n"
            "    if (lane == 0 && g < m) out[s] = fin(r);\n}\n\n"
            + _sig(p) + " {\n"
            "    if (S <= 0) return;\n"
            "    const int B = 4096;\n"
            f"    int* doff; unsigned int* dx; {ot}* dout;\n"
            "    cudaMalloc(&doff, (size_t)(B + 1) * sizeof(int));\n"
            f"    cudaMalloc(&dout, (size_t)B * sizeof({ot}));\n"
            "    size_t cap = 1 << 16;\n"
            "    cudaMalloc(&dx, cap * sizeof(unsigned int));\n"
            "    for (int s0 = 0; s0 < S; s0 += B) {\n"
            "        int m = S - s0 < B ? S - s0 : B;\n"
            "        int base = off[s0];\n"
            "        size_t len = (size_t)(off[s0 + m] - base);\n"
            "        if (len > cap) { cudaFree(dx); cap = len; cudaMalloc(&dx, cap * sizeof(unsigned int)); }\n"
            "        cudaMemcpy(doff, off + s0, (size_t)(m + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
            "        if (len > 0) cudaMemcpy(dx, x + base, len * sizeof(unsigned int), cudaMemcpyHostToDevice);\n"
            "        seg_warp<<<(m * 32 + 127) / 128, 128>>>(m, doff, base, dx, dout);\n"
            f"        cudaMemcpy(out + s0, dout, (size_t)m * sizeof({ot}), cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(doff); cudaFree(dx); cudaFree(dout);\n}\n")


def _reference(p: dict) -> str:
    ot = _ot(p)
    return ("#include <limits.h>\n\n" + f"#define IDENT ({_ops(p)['ident']})\n\n" + _fns("static inline", p)
            + f"void segreduce(int S, int n, const int* off, const unsigned int* x, {ot}* out) {{\n"
            "    (void)n;\n"
            "    for (int s = 0; s < S; ++s) {\n"
            f"        {ot} r = IDENT;\n"
            "        for (int j = off[s]; j < off[s + 1]; ++j) r = comb(r, gval(x[j]));\n"
            "        out[s] = fin(r);\n"
            "    }\n}\n")


OPS = ["sum", "max", "min", "count"]
AVG_LEN = [6, 40, 300, 3000, 20]


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    op = OPS[index % 4]
    avg = AVG_LEN[index % 5]
    p: dict = {"op": op, "rounds": int(rng.choice([2, 3, 4])), "m": int(rng.choice(MULTS))}
    if op == "sum":
        p.update(shift=int(rng.integers(0, 12)), bias=int(rng.integers(0, 1 << 19)))
        what = f"the sum (long long) of g = (long long)(h >> {p['shift']}) - {p['bias']}; 0 for an empty segment"
    elif op == "max":
        what = "the max of g = (int)(h >> 1); -1 for an empty segment"
    elif op == "min":
        p["mod"] = int(rng.choice([1000, 65536, 1_000_003]))
        what = f"the min of g = (int)(h % {p['mod']}); -1 for an empty segment"
    else:
        p["thr"] = int(rng.integers(50, 950))
        what = f"the number of j with (h & 1023) < {p['thr']}"
    n_time = 6_000_000 + int(rng.integers(0, 500_000))
    S_time = max(1, n_time // avg)
    task = {
        "function_name": "segreduce",
        "description": (f"Segmented reduction: for each s < S, out[s] = {what}, over j in [off[s], off[s+1]), where "
                        f"h is {p['rounds']} rounds of the mix (v ^= v >> 16; v *= 0x{p['m']:08X}; v ^= v >> 15; "
                        "v += 0x632BE5AB) of x[j]. off holds S+1 non-decreasing offsets from 0 to n."),
        "returns": "void",
        "args": [
            {"name": "S", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "off", "role": "in", "ctype": "int", "length": "S + 1", "dist": {"kind": "offsets", "high": "n"}},
            {"name": "x", "role": "in", "ctype": "unsigned int", "length": "n",
             "dist": {"kind": "randint", "low": 0, "high": 4294967295}},
            {"name": "out", "role": "out", "ctype": _ot(p), "length": "S"},
        ],
        "size_configs": [{"S": 50, "n": 20}, {"S": 1, "n": 1000}, {"S": 37, "n": 999},
                         {"S": max(3, 70001 // avg), "n": 70001 + int(rng.integers(3000))},
                         {"S": S_time, "n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["segmented", "reduction", "integer"],
    }
    variants = (
        Variant("warp_per_segment", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", "block_256"),
                _group_per_seg(p, 32, 256)),
        Variant("group8_per_segment", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", "block_128"),
                _group_per_seg(p, 8, 128)),
        Variant("thread_per_segment", ("thread_per_row", "naive", "strided", "block_256"), _thread_per_seg(p)),
        Variant("block_per_segment", ("block_per_row", "tree_reduction", "shared_tiling", "block_256"),
                _block_per_seg(p)),
        Variant("flat_atomics", ("atomics", "naive", "coalesced", "multi_pass", "block_256"), _flat_atomics(p)),
        Variant("host_reduce", ("host_compute", "extra_transfers", "naive", "block_256"), _host_reduce(p)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "warp_shuffle", "block_128"),
                _chunked(p)),
        Variant("single_thread", ("single_thread",), _single_thread(p)),
    )
    return GeneratedTask(task, variants, {**p, "avg_len": avg, "n_time": n_time, "S_time": S_time})


FAMILY = Family(
    name="run_length",
    description="segmented reductions (sum/max/min/count of hashed values) over CSR offsets",
    generate=generate,
    n_tasks=50,
    tags=("segmented", "integer"),
)
