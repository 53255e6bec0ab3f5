"""Prefix sums (inclusive or exclusive) of a transformed integer input: y = scan(g(x)).

``g`` first mixes the 32-bit key with R rounds of an integer hash (R and the constants vary), then maps it to the
output type: a bounded residue or a 0/1 predicate for ``int`` (the sums stay far from overflow), a signed or
shifted value for ``long long``, the full word for ``unsigned int`` (sums wrap around modulo 2^32). The hash gives
the sequential loop enough work per byte that a GPU wins with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

MULTS = [0x7FEB352D, 0x846CA68B, 0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F, 0x165667B1, 0x2C1B3C6D]
HEAD = "#include <cuda_runtime.h>\n\n"


def _mix_fn(qual: str, rounds: int, m1: int, m2: int, s1: int, s2: int) -> str:
    return (f"{qual} unsigned int mixk(unsigned int v) {{\n"
            f"    for (int r = 0; r < {rounds}; ++r) {{\n"
            f"        v ^= v >> {s1}; v *= 0x{m1:08X}u; v ^= v >> {s2}; v *= 0x{m2:08X}u; v += (unsigned int)r;\n"
            "    }\n    return v;\n}\n")


def _g_fn(qual: str, t: str, gexpr: str) -> str:
    return f"{qual} {t} gval(unsigned int x) {{ unsigned int h = mixk(x); return {gexpr}; }}\n\n"


def _prelude(t: str, p: dict) -> str:
    q = "__device__ __forceinline__"
    return HEAD + _mix_fn(q, p["rounds"], p["m1"], p["m2"], p["s1"], p["s2"]) + _g_fn(q, t, p["gexpr"])


def _sig(t: str) -> str:
    return f'extern "C" void pscan(int n, const unsigned int* x, {t}* y)'


# ---------------------------------------------------------------------------------------------------------------
# Shared device pieces (as text)

def _map_kernel(t: str, block: int) -> str:
    return (f"__global__ void map_kernel(int n, const unsigned int* x, {t}* g) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) g[i] = gval(x[i]);\n}\n\n")


def _shift_kernel(t: str) -> str:
    return (f"__global__ void shift_kernel(int n, const {t}* incl, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) out[i] = i > 0 ? incl[i - 1] : ({t})0;\n}}\n\n")


def _finish(t: str, exclusive: bool, src: str) -> str:
    """Copy the inclusive scan in device buffer ``src`` to y (shifting for an exclusive scan)."""
    if not exclusive:
        return f"    cudaMemcpy(y, {src}, bytes, cudaMemcpyDeviceToHost);\n"
    return (f"    {{\n        {t}* dex; cudaMalloc(&dex, bytes);\n"
            f"        shift_kernel<<<(n + 255) / 256, 256>>>(n, {src}, dex);\n"
            "        cudaMemcpy(y, dex, bytes, cudaMemcpyDeviceToHost);\n        cudaFree(dex);\n    }\n")


def _shfl_block_scan(t: str, fused: bool) -> str:
    """1024-thread block scan with warp shuffles; writes the inclusive scan in place and the block total."""
    src = "i < n ? gval(x[i])" if fused else "i < n ? d[i]"
    params = f"int n, const unsigned int* __restrict__ x, {t}* d, {t}* sums" if fused else f"int n, {t}* d, {t}* sums"
    name = "block_scan_fused" if fused else "block_scan"
    return (f"__global__ void {name}({params}) {{\n"
            f"    __shared__ {t} ws[32];\n"
            "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
            f"    {t} v = {src} : ({t})0;\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "#pragma unroll\n"
            "    for (int o = 1; o < 32; o <<= 1) {\n"
            f"        {t} u = __shfl_up_sync(0xffffffffu, v, o);\n"
            "        if (lane >= o) v += u;\n"
            "    }\n"
            "    if (lane == 31) ws[w] = v;\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            f"        {t} s = ws[lane];\n"
            "#pragma unroll\n"
            "        for (int o = 1; o < 32; o <<= 1) {\n"
            f"            {t} u = __shfl_up_sync(0xffffffffu, s, o);\n"
            "            if (lane >= o) s += u;\n"
            "        }\n"
            "        ws[lane] = s;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    if (w > 0) v += ws[w - 1];\n"
            "    if (i < n) d[i] = v;\n"
            "    if (sums != 0 && threadIdx.x == 1023) sums[blockIdx.x] = v;\n}\n\n")


def _add_kernel(t: str) -> str:
    return (f"__global__ void add_offsets(int n, {t}* d, const {t}* sums) {{\n"
            "    int i = blockIdx.x * 1024 + threadIdx.x;\n"
            "    if (blockIdx.x > 0 && i < n) d[i] += sums[blockIdx.x - 1];\n}\n\n")


def _recursive_scan(t: str) -> str:
    return (f"static void scan_inplace({t}* d, int n) {{\n"
            "    int nb = (n + 1023) / 1024;\n"
            "    if (nb <= 1) { block_scan<<<1, 1024>>>(n, d, 0); return; }\n"
            f"    {t}* sums; cudaMalloc(&sums, (size_t)nb * sizeof({t}));\n"
            "    block_scan<<<nb, 1024>>>(n, d, sums);\n"
            "    scan_inplace(sums, nb);\n"
            "    add_offsets<<<nb, 1024>>>(n, d, sums);\n"
            "    cudaFree(sums);\n}\n\n")


def _alloc(t: str) -> str:
    return (f"    size_t bytes = (size_t)n * sizeof({t});\n"
            "    size_t xbytes = (size_t)n * sizeof(unsigned int);\n"
            f"    unsigned int* dx; {t}* d;\n"
            "    cudaMalloc(&dx, xbytes); cudaMalloc(&d, bytes);\n"
            "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n")


# ---------------------------------------------------------------------------------------------------------------
# Variants

def _single_thread(t: str, p: dict, exclusive: bool) -> str:
    body = ("        y[i] = acc; acc += g[i];\n" if exclusive else "        acc += g[i]; y[i] = acc;\n")
    return (_prelude(t, p) + _map_kernel(t, 256)
            + f"__global__ void serial_scan(int n, const {t}* g, {t}* y) {{\n"
            f"    {t} acc = 0;\n    for (int i = 0; i < n; ++i) {{\n{body}    }}\n}}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + f"    {t}* dy; cudaMalloc(&dy, bytes);\n"
            "    map_kernel<<<(n + 255) / 256, 256>>>(n, dx, d);\n"
            "    serial_scan<<<1, 1>>>(n, d, dy);\n"
            "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(d); cudaFree(dy);\n}\n")


def _hillis_steele(t: str, p: dict, exclusive: bool) -> str:
    return (_prelude(t, p) + _map_kernel(t, 256) + _shift_kernel(t)
            + f"__global__ void hs_step(int n, int off, const {t}* in, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = i >= off ? in[i] + in[i - off] : in[i];\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + f"    {t}* e; cudaMalloc(&e, bytes);\n"
            "    map_kernel<<<(n + 255) / 256, 256>>>(n, dx, d);\n"
            f"    {t}* a = d; {t}* b = e;\n"
            "    for (int off = 1; off < n; off <<= 1) {\n"
            "        hs_step<<<(n + 255) / 256, 256>>>(n, off, a, b);\n"
            f"        {t}* tmp = a; a = b; b = tmp;\n"
            "    }\n"
            + _finish(t, exclusive, "a")
            + "    cudaFree(dx); cudaFree(d); cudaFree(e);\n}\n")


def _smem_scan(t: str, p: dict, exclusive: bool) -> str:
    """Block scan in shared memory (Hillis-Steele, double-buffered in smem), 512 threads, recursive block sums."""
    return (_prelude(t, p) + _map_kernel(t, 256) + _shift_kernel(t)
            + f"__global__ void block_scan(int n, {t}* d, {t}* sums) {{\n"
            f"    __shared__ {t} buf[2][512];\n"
            "    int tid = threadIdx.x;\n"
            "    int i = blockIdx.x * 512 + tid;\n"
            f"    buf[0][tid] = i < n ? d[i] : ({t})0;\n"
            "    __syncthreads();\n"
            "    int cur = 0;\n"
            "    for (int off = 1; off < 512; off <<= 1) {\n"
            f"        {t} v = buf[cur][tid];\n"
            "        if (tid >= off) v += buf[cur][tid - off];\n"
            "        buf[1 - cur][tid] = v;\n"
            "        cur = 1 - cur;\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (i < n) d[i] = buf[cur][tid];\n"
            "    if (sums != 0 && tid == 511) sums[blockIdx.x] = buf[cur][511];\n}\n\n"
            + f"__global__ void add_offsets(int n, {t}* d, const {t}* sums) {{\n"
            "    int i = blockIdx.x * 512 + threadIdx.x;\n"
            "    if (blockIdx.x > 0 && i < n) d[i] += sums[blockIdx.x - 1];\n}\n\n"
            + f"static void scan_inplace({t}* d, int n) {{\n"
            "    int nb = (n + 511) / 512;\n"
            "    if (nb <= 1) { block_scan<<<1, 512>>>(n, d, 0); return; }\n"
            f"    {t}* sums; cudaMalloc(&sums, (size_t)nb * sizeof({t}));\n"
            "    block_scan<<<nb, 512>>>(n, d, sums);\n"
            "    scan_inplace(sums, nb);\n"
            "    add_offsets<<<nb, 512>>>(n, d, sums);\n"
            "    cudaFree(sums);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    map_kernel<<<(n + 255) / 256, 256>>>(n, dx, d);\n"
            "    scan_inplace(d, n);\n"
            + _finish(t, exclusive, "d")
            + "    cudaFree(dx); cudaFree(d);\n}\n")


def _warp_fused(t: str, p: dict, exclusive: bool, pinned: bool) -> str:
    reg = ("    cudaHostRegister((void*)x, xbytes, cudaHostRegisterDefault);\n"
           "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n") if pinned else ""
    unreg = "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y);\n" if pinned else ""
    return (_prelude(t, p) + _shift_kernel(t) + _shfl_block_scan(t, True) + _shfl_block_scan(t, False)
            + _add_kernel(t) + _recursive_scan(t)
            + _sig(t) + " {\n    if (n <= 0) return;\n"
            + f"    size_t bytes = (size_t)n * sizeof({t});\n"
            "    size_t xbytes = (size_t)n * sizeof(unsigned int);\n"
            + reg
            + f"    unsigned int* dx; {t}* d;\n"
            "    cudaMalloc(&dx, xbytes); cudaMalloc(&d, bytes);\n"
            "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    int nb = (n + 1023) / 1024;\n"
            "    if (nb == 1) {\n"
            "        block_scan_fused<<<1, 1024>>>(n, dx, d, 0);\n"
            "    } else {\n"
            f"        {t}* sums; cudaMalloc(&sums, (size_t)nb * sizeof({t}));\n"
            "        block_scan_fused<<<nb, 1024>>>(n, dx, d, sums);\n"
            "        scan_inplace(sums, nb);\n"
            "        add_offsets<<<nb, 1024>>>(n, d, sums);\n"
            "        cudaFree(sums);\n"
            "    }\n"
            + _finish(t, exclusive, "d")
            + unreg + "    cudaFree(dx); cudaFree(d);\n}\n")


def _host_carry(t: str, p: dict, exclusive: bool) -> str:
    return (_prelude(t, p) + _shift_kernel(t) + _shfl_block_scan(t, True) + _add_kernel(t)
            + "#include <stdlib.h>\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n"
            + f"    size_t bytes = (size_t)n * sizeof({t});\n"
            "    size_t xbytes = (size_t)n * sizeof(unsigned int);\n"
            f"    unsigned int* dx; {t}* d; {t}* dsums;\n"
            "    int nb = (n + 1023) / 1024;\n"
            f"    size_t sbytes = (size_t)nb * sizeof({t});\n"
            "    cudaMalloc(&dx, xbytes); cudaMalloc(&d, bytes); cudaMalloc(&dsums, sbytes);\n"
            "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    block_scan_fused<<<nb, 1024>>>(n, dx, d, dsums);\n"
            f"    {t}* hs = ({t}*)malloc(sbytes);\n"
            "    cudaMemcpy(hs, dsums, sbytes, cudaMemcpyDeviceToHost);\n"
            "    for (int b = 1; b < nb; ++b) hs[b] += hs[b - 1];   /* serial carry pass on the host */\n"
            "    cudaMemcpy(dsums, hs, sbytes, cudaMemcpyHostToDevice);\n"
            "    add_offsets<<<nb, 1024>>>(n, d, dsums);\n"
            + _finish(t, exclusive, "d")
            + "    free(hs); cudaFree(dx); cudaFree(d); cudaFree(dsums);\n}\n")


def _chunk_serial(t: str, p: dict, exclusive: bool) -> str:
    """4096 threads each scan a contiguous chunk serially (neighbouring threads a chunk apart)."""
    return (_prelude(t, p) + _shift_kernel(t)
            + f"__global__ void chunk_scan(int n, int chunk, const unsigned int* x, {t}* d, {t}* tot) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long lo = (long long)t * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            f"    {t} acc = 0;\n"
            "    for (long long i = lo; i < hi; ++i) { acc += gval(x[i]); d[i] = acc; }\n"
            "    tot[t] = acc;\n}\n\n"
            + f"__global__ void scan_totals(int m, {t}* tot) {{\n"
            "    for (int k = 1; k < m; ++k) tot[k] += tot[k - 1];\n}\n\n"
            + f"__global__ void chunk_add(int n, int chunk, {t}* d, const {t}* tot) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t == 0) return;\n"
            "    long long lo = (long long)t * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            f"    {t} c = tot[t - 1];\n"
            "    for (long long i = lo; i < hi; ++i) d[i] += c;\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    const int T = 4096;\n"
            "    int chunk = (n + T - 1) / T;\n"
            f"    {t}* tot; cudaMalloc(&tot, T * sizeof({t}));\n"
            "    chunk_scan<<<T / 128, 128>>>(n, chunk, dx, d, tot);\n"
            "    scan_totals<<<1, 1>>>(T, tot);\n"
            "    chunk_add<<<T / 128, 128>>>(n, chunk, d, tot);\n"
            + _finish(t, exclusive, "d")
            + "    cudaFree(dx); cudaFree(d); cudaFree(tot);\n}\n")


def _chunked_transfers(t: str, p: dict, exclusive: bool) -> str:
    out_expr = ("(i > 0 ? loc[i - 1] : (" + t + ")0)") if exclusive else "loc[i]"
    return (_prelude(t, p) + _shfl_block_scan(t, True) + _shfl_block_scan(t, False) + _add_kernel(t)
            + _recursive_scan(t)
            + f"__global__ void apply_carry(int m, const {t}* loc, const {t}* carry, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < m) out[i] = carry[0] + {out_expr};\n}}\n\n"
            + f"__global__ void bump_carry(int m, const {t}* loc, {t}* carry) {{ carry[0] += loc[m - 1]; }}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n"
            "    const int C = 1 << 20;\n"
            f"    unsigned int* dx; {t}* loc; {t}* out; {t}* carry;\n"
            "    cudaMalloc(&dx, (size_t)C * sizeof(unsigned int));\n"
            f"    cudaMalloc(&loc, (size_t)C * sizeof({t})); cudaMalloc(&out, (size_t)C * sizeof({t}));\n"
            f"    cudaMalloc(&carry, sizeof({t})); cudaMemset(carry, 0, sizeof({t}));\n"
            f"    {t}* sums; cudaMalloc(&sums, (size_t)(C / 1024) * sizeof({t}));\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            "        int nb = (m + 1023) / 1024;\n"
            "        cudaMemcpy(dx, x + lo, (size_t)m * sizeof(unsigned int), cudaMemcpyHostToDevice);\n"
            "        block_scan_fused<<<nb, 1024>>>(m, dx, loc, sums);\n"
            "        if (nb > 1) { scan_inplace(sums, nb); add_offsets<<<nb, 1024>>>(m, loc, sums); }\n"
            "        apply_carry<<<(m + 255) / 256, 256>>>(m, loc, carry, out);\n"
            "        bump_carry<<<1, 1>>>(m, loc, carry);\n"
            f"        cudaMemcpy(y + lo, out, (size_t)m * sizeof({t}), cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(dx); cudaFree(loc); cudaFree(out); cudaFree(carry); cudaFree(sums);\n}\n")


def _reference(t: str, p: dict, exclusive: bool) -> str:
    body = "        y[i] = acc; acc += v;\n" if exclusive else "        acc += v; y[i] = acc;\n"
    q = "static inline"
    return (_mix_fn(q, p["rounds"], p["m1"], p["m2"], p["s1"], p["s2"]) + _g_fn(q, t, p["gexpr"])
            + f"void pscan(int n, const unsigned int* x, {t}* y) {{\n"
            f"    {t} acc = 0;\n"
            f"    for (int i = 0; i < n; ++i) {{\n        {t} v = gval(x[i]);\n{body}    }}\n}}\n")


TYPES = ["int", "long long", "unsigned int"]


def _gexpr(t: str, index: int, rng: np.random.Generator) -> tuple[str, str]:
    k = (index // 3) % 3
    if t == "int":
        if k == 1:
            thr = int(rng.integers(100, 900))
            return f"(h & 1023u) < {thr}u ? 1 : 0", f"1 if (h mod 1024) < {thr} else 0"
        m = int(rng.choice([97, 200, 251]))
        return f"(int)(h % {m}u)", f"h mod {m}"
    if t == "long long":
        if k == 1:
            s = int(rng.integers(4, 12))
            return f"(long long)(h >> {s})", f"h >> {s}"
        return "(long long)(int)h", "h reinterpreted as a signed 32-bit int"
    if k == 1:
        return "h * 3u + 7u", "3h + 7 (mod 2^32)"
    return "h", "h"


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = TYPES[index % 3]
    exclusive = (index // 2) % 2 == 1
    rounds = int([3, 4, 6, 8][(index // 5) % 4])
    i1 = int(rng.integers(len(MULTS)))
    m1, m2 = MULTS[i1], MULTS[(i1 + 1 + int(rng.integers(len(MULTS) - 1))) % len(MULTS)]
    s1, s2 = int(rng.integers(13, 18)), int(rng.integers(11, 17))
    gexpr, gdesc = _gexpr(t, index, rng)
    p = {"rounds": rounds, "m1": m1, "m2": m2, "s1": s1, "s2": s2, "gexpr": gexpr}
    # int sums stay below 2^31: residues < 251 over at most 8M elements.
    n_time = int(min(6_000_000, 18_000_000 // rounds)) + int(rng.integers(1, 1000))
    kind = "exclusive" if exclusive else "inclusive"
    desc = (f"{kind.capitalize()} prefix sum over {t}: y[i] = sum of g(x[j]) for j {'<' if exclusive else '<='} i, "
            f"where g(x) = {gdesc} with h = {rounds} rounds of the integer mix "
            f"(v ^= v >> {s1}; v *= 0x{m1:08X}; v ^= v >> {s2}; v *= 0x{m2:08X}; v += r) applied to x"
            + ("; sums wrap modulo 2^32." if t == "unsigned int" else "."))
    task = {
        "function_name": "pscan",
        "description": desc,
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": "unsigned int", "length": "n",
             "dist": {"kind": "randint", "low": 0, "high": 4294967295}},
            {"name": "y", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": [{"n": 5}, {"n": 777}, {"n": 70001 + int(rng.integers(3000))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(t, p, exclusive),
        "tags": ["scan", "integer", kind],
    }
    variants = (
        Variant("warp_fused", ("warp_shuffle", "fused", "two_level", "multi_pass", "coalesced", "block_1024",
                               "pageable"), _warp_fused(t, p, exclusive, False)),
        Variant("warp_fused_pinned", ("warp_shuffle", "fused", "two_level", "multi_pass", "coalesced", "block_1024",
                                      "pinned"), _warp_fused(t, p, exclusive, True)),
        Variant("smem_block_scan", ("shared_tiling", "two_level", "multi_pass", "coalesced", "block_512",
                                    "pageable"), _smem_scan(t, p, exclusive)),
        Variant("host_carry", ("warp_shuffle", "two_level", "host_compute", "extra_transfers", "block_1024"),
                _host_carry(t, p, exclusive)),
        Variant("hillis_steele_global", ("naive", "many_launches", "multi_pass", "double_buffered", "block_256"),
                _hillis_steele(t, p, exclusive)),
        Variant("chunk_serial", ("small_grid", "strided", "multi_pass", "single_thread", "block_128"),
                _chunk_serial(t, p, exclusive)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "warp_shuffle", "block_1024"),
                _chunked_transfers(t, p, exclusive)),
        Variant("single_thread", ("single_thread", "naive", "pageable"), _single_thread(t, p, exclusive)),
    )
    params = {"type": t, "exclusive": exclusive, "rounds": rounds, "g": gexpr, "n_time": n_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="prefix_scan",
    description="inclusive/exclusive prefix sums of hashed integer inputs (int, long long, wrapping unsigned)",
    generate=generate,
    n_tasks=50,
    tags=("scan", "integer"),
)
