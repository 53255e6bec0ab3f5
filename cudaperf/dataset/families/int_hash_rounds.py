"""Per-element integer mixing: ``out[i] = R rounds of a mixing step applied to in[i] ^ hash(i)``.

Parameters: the word type (uint32_t / uint64_t), the round kind (xorshift-multiply, multiply-rotate,
collatz-like with a data-dependent branch, xorshift triple), its constants, the round count and the sizes.
Compute-bound with exact integer output.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["xsmul", "mulrot", "collatz", "xorshift"]


def _lit(t: str, v: int) -> str:
    return f"(({t}){v:#x}ull)"


def _round_body(kind: str, t: str, w: int, c: dict) -> str:
    """C statements transforming x (type t) in round r (int)."""
    L = lambda v: _lit(t, v)  # noqa: E731
    if kind == "xsmul":
        return (f"x ^= x >> {c['a']}; x *= {L(c['M'])}; x ^= x >> {c['b']}; "
                f"x += ({t})(r + 1) * {L(c['K'])};")
    if kind == "mulrot":
        return (f"x = x * {L(c['M'])} + {L(c['K'])}; x = (x << {c['a']}) | (x >> {w - c['a']}); "
                f"x ^= x >> {c['b']};")
    if kind == "collatz":
        return (f"x = (x & 1) ? (x * 3 + 1) : (x >> 1); x ^= ({t})r * {L(c['K'])}; "
                f"if ((x >> {c['a']}) & 1) x += {L(c['M'])};")
    return (f"x ^= x << {c['a']}; x ^= x >> {c['b']}; x ^= x << {c['c']}; x += {L(c['K'])} ^ ({t})r;")


def _consts(kind: str, w: int, rng: np.random.Generator) -> dict:
    mask = (1 << w) - 1
    M = int(rng.integers(1, 1 << 62)) & mask | 1
    K = int(rng.integers(1, 1 << 62)) & mask
    if kind == "xorshift":
        trip = [(13, 17, 5), (7, 9, 8), (5, 21, 12), (11, 7, 12)] if w == 32 else \
            [(13, 7, 17), (21, 35, 4), (12, 25, 27), (17, 31, 8)]
        a, b, cc = trip[int(rng.integers(len(trip)))]
        return {"a": a, "b": b, "c": cc, "K": K, "M": M}
    a = int(rng.integers(5, w - 5))
    b = int(rng.integers(7, w // 2 + 3))
    return {"a": a, "b": b, "K": K, "M": M}


HEAD = "#include <cuda_runtime.h>\n#include <stdint.h>\n\n"


def _dev(t: str, body: str, rounds: int, unroll: bool = False) -> str:
    pr = "    #pragma unroll 8\n" if unroll else ""
    return (f"__device__ __forceinline__ {t} hround({t} x, int r) {{ {body} return x; }}\n"
            f"__device__ __forceinline__ {t} hinit({t} v, unsigned long long i) {{\n"
            f"    return v ^ ({t})(i * 0x9E3779B97F4A7C15ull);\n}}\n"
            f"__device__ __forceinline__ {t} hmix({t} v, unsigned long long i) {{\n"
            f"    {t} x = hinit(v, i);\n{pr}    for (int r = 0; r < {rounds}; ++r) x = hround(x, r);\n"
            "    return x;\n}\n\n")


def _sig(t: str) -> str:
    return f'extern "C" void hash_rounds(int n, const {t}* in, {t}* out)'


def _alloc(t: str) -> str:
    return (f"    size_t bytes = (size_t)n * sizeof({t});\n    {t} *din, *dout;\n"
            "    cudaMalloc(&din, bytes); cudaMalloc(&dout, bytes);\n"
            "    cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice);\n")


TAIL = ("    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);\n"
        "    cudaFree(din); cudaFree(dout);\n}\n")


def _naive(t, body, R, block):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_kernel(int n, const {t}* in, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = hmix(in[i], (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + f"    hash_kernel<<<(n + {block - 1}) / {block}, {block}>>>(n, din, dout);\n" + TAIL)


def _grid_stride(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_kernel(int n, const {t}* __restrict__ in, {t}* __restrict__ out) {{\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        out[i] = hmix(__ldg(in + i), (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    hash_kernel<<<sms * 16, 256>>>(n, din, dout);\n" + TAIL)


def _unrolled2(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_kernel(int n, const {t}* __restrict__ in, {t}* __restrict__ out) {{\n"
            "    int half = (n + 1) / 2;\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= half) return;\n"
            "    int j = i + half;\n"
            f"    {t} x = hinit(in[i], (unsigned long long)i);\n"
            f"    {t} y = j < n ? hinit(in[j], (unsigned long long)j) : ({t})0;\n"
            "    #pragma unroll 4\n"
            f"    for (int r = 0; r < {R}; ++r) {{ x = hround(x, r); y = hround(y, r); }}\n"
            "    out[i] = x;\n    if (j < n) out[j] = y;\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    int half = (n + 1) / 2;\n"
            "    hash_kernel<<<(half + 127) / 128, 128>>>(n, din, dout);\n" + TAIL)


def _vectorized(t, body, R):
    if t == "uint32_t":
        v, w, comps = "uint4", 4, ["x", "y", "z", "w"]
    else:
        v, w, comps = "ulonglong2", 2, ["x", "y"]
    lines = "\n".join(f"    r.{c} = hmix(a.{c}, base + {k});" for k, c in enumerate(comps))
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_vec(int nv, const {v}* __restrict__ in, {v}* __restrict__ out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= nv) return;\n"
            f"    {v} a = in[i], r;\n"
            f"    unsigned long long base = (unsigned long long)i * {w};\n{lines}\n    out[i] = r;\n}}\n\n"
            f"__global__ void hash_tail(int start, int n, const {t}* in, {t}* out) {{\n"
            "    int i = start + threadIdx.x;\n"
            "    if (i < n) out[i] = hmix(in[i], (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + f"    int nv = n / {w};\n"
            f"    if (nv > 0) hash_vec<<<(nv + 255) / 256, 256>>>(nv, (const {v}*)din, ({v}*)dout);\n"
            f"    if (nv * {w} < n) hash_tail<<<1, {w}>>>(nv * {w}, n, din, dout);\n" + TAIL)


def _per_round(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void init_kernel(int n, const {t}* in, {t}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) x[i] = hinit(in[i], (unsigned long long)i);\n}\n\n"
            f"__global__ void round_kernel(int n, int r, {t}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) x[i] = hround(x[i], r);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    int blocks = (n + 255) / 256;\n"
            "    init_kernel<<<blocks, 256>>>(n, din, dout);\n"
            f"    for (int r = 0; r < {R}; ++r) round_kernel<<<blocks, 256>>>(n, r, dout);\n" + TAIL)


def _streams(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_kernel(int n, unsigned long long off, const {t}* in, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = hmix(in[i], off + (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n"
            f"    size_t bytes = (size_t)n * sizeof({t});\n    {t} *din, *dout;\n"
            "    cudaMalloc(&din, bytes); cudaMalloc(&dout, bytes);\n"
            "    cudaHostRegister((void*)in, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)out, bytes, cudaHostRegisterDefault);\n"
            "    const int S = 4;\n    cudaStream_t s[S];\n"
            "    for (int k = 0; k < S; ++k) cudaStreamCreate(&s[k]);\n"
            "    int chunk = (n + S - 1) / S;\n"
            "    for (int k = 0; k < S; ++k) {\n"
            "        int lo = k * chunk; int m = n - lo < chunk ? n - lo : chunk;\n"
            "        if (m <= 0) break;\n"
            f"        size_t b = (size_t)m * sizeof({t});\n"
            "        cudaMemcpyAsync(din + lo, in + lo, b, cudaMemcpyHostToDevice, s[k]);\n"
            "        hash_kernel<<<(m + 255) / 256, 256, 0, s[k]>>>(m, (unsigned long long)lo, din + lo, dout + lo);\n"
            "        cudaMemcpyAsync(out + lo, dout + lo, b, cudaMemcpyDeviceToHost, s[k]);\n"
            "    }\n"
            "    for (int k = 0; k < S; ++k) { cudaStreamSynchronize(s[k]); cudaStreamDestroy(s[k]); }\n"
            "    cudaHostUnregister((void*)in); cudaHostUnregister((void*)out);\n"
            "    cudaFree(din); cudaFree(dout);\n}\n")


def _chunked(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_kernel(int m, unsigned long long off, const {t}* in, {t}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < m) out[i] = hmix(in[i], off + (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n"
            f"    const int C = 1 << 15;\n    {t} *din, *dout;\n"
            f"    size_t cb = (size_t)C * sizeof({t});\n"
            "    cudaMalloc(&din, cb); cudaMalloc(&dout, cb);\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            f"        size_t b = (size_t)m * sizeof({t});\n"
            "        cudaMemcpy(din, in + lo, b, cudaMemcpyHostToDevice);\n"
            "        hash_kernel<<<(m + 127) / 128, 128>>>(m, (unsigned long long)lo, din, dout);\n"
            "        cudaMemcpy(out + lo, dout, b, cudaMemcpyDeviceToHost);\n"
            "    }\n    cudaFree(din); cudaFree(dout);\n}\n")


def _strided(t, body, R):
    return (HEAD + _dev(t, body, R)
            + f"__global__ void hash_strided(int n, int rows, const {t}* in, {t}* out) {{\n"
            "    int tid = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int cols = (n + rows - 1) / rows;\n"
            "    if (tid >= rows * cols) return;\n"
            "    int i = (tid % rows) * cols + tid / rows;\n"
            "    if (i < n) out[i] = hmix(in[i], (unsigned long long)i);\n}\n\n"
            + _sig(t) + " {\n    if (n <= 0) return;\n" + _alloc(t)
            + "    int rows = 2048; int cols = (n + rows - 1) / rows; int total = rows * cols;\n"
            "    hash_strided<<<(total + 255) / 256, 256>>>(n, rows, din, dout);\n" + TAIL)


def _reference(t: str, body: str, R: int) -> str:
    return ("#include <stdint.h>\n\n"
            f"static {t} hround({t} x, int r) {{ {body} return x; }}\n\n"
            f"void hash_rounds(int n, const {t}* in, {t}* out) {{\n"
            "    for (int i = 0; i < n; ++i) {\n"
            f"        {t} x = in[i] ^ ({t})((unsigned long long)i * 0x9E3779B97F4A7C15ull);\n"
            f"        for (int r = 0; r < {R}; ++r) x = hround(x, r);\n"
            "        out[i] = x;\n    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "uint32_t" if index % 2 == 0 else "uint64_t"
    w = 32 if t == "uint32_t" else 64
    kind = KINDS[(index // 2) % len(KINDS)]
    c = _consts(kind, w, rng)
    body = _round_body(kind, t, w, c)
    R = [24, 32, 48, 64, 96][int(rng.integers(5))]
    # element count so that the sequential reference does about 1.8e7 round steps at the timing size
    per_round_cost = {"xsmul": 2.5, "mulrot": 1.0, "collatz": 3.0, "xorshift": 1.0}[kind]
    n_time = int(1.8e7 / (R * per_round_cost)) // 1000 * 1000 + int(rng.integers(1, 999))
    hi = (1 << 32) if w == 32 else (1 << 62)
    task = {
        "function_name": "hash_rounds",
        "description": (f"out[i] = {R} rounds of a {kind} mixing step over {t} (round r: {body}) applied to "
                        "in[i] ^ (i * 0x9E3779B97F4A7C15)."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "in", "role": "in", "ctype": t, "length": "n", "dist": {"kind": "randint", "low": 0, "high": hi}},
            {"name": "out", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": [{"n": 999}, {"n": 70001 + int(rng.integers(500))}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(t, body, R),
        "tags": ["compute-bound", "integer", t],
    }
    bd = "branch_divergent" if kind == "collatz" else "branchless"
    variants = (
        Variant("naive_b256", ("naive", "coalesced", "block_256", "pageable", bd), _naive(t, body, R, 256)),
        Variant("naive_b32", ("naive", "coalesced", "block_32", "pageable"), _naive(t, body, R, 32)),
        Variant("naive_b1024", ("naive", "coalesced", "block_1024", "pageable"), _naive(t, body, R, 1024)),
        Variant("grid_stride", ("grid_stride", "coalesced", "readonly_cache", "block_256", "pageable"),
                _grid_stride(t, body, R)),
        Variant("unrolled_two_per_thread", ("unrolled", "register_blocking", "coalesced", "block_128", "pageable"),
                _unrolled2(t, body, R)),
        Variant("vectorized", ("vectorized", "coalesced", "block_256", "pageable"), _vectorized(t, body, R)),
        Variant("launch_per_round", ("many_launches", "device_resident", "coalesced", "block_256", "pageable"),
                _per_round(t, body, R)),
        Variant("streams_pinned", ("async_streams", "pinned", "coalesced", "block_256"), _streams(t, body, R)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "block_128", "pageable"),
                _chunked(t, body, R)),
        Variant("strided", ("strided", "block_256", "pageable"), _strided(t, body, R)),
    )
    return GeneratedTask(task, variants, {"type": t, "kind": kind, "rounds": R, "consts": c, "n_time": n_time})


FAMILY = Family(
    name="int_hash_rounds",
    description="per-element integer mixing: R rounds of xorshift/multiply-rotate/collatz-like steps (uint32/uint64)",
    generate=generate,
    n_tasks=50,
    tags=("elementwise", "integer", "compute-bound"),
)
