"""Monte Carlo estimates from a counter-based generator (splitmix64 of (seed, sample index, stream)).

Sample ``i = g * per_group + s`` of group ``g`` draws its uniforms from ``mix64(seed ^ mix64(i * 16 + k))``, so
every implementation sees the same random numbers whatever its thread mapping. Kinds: hit counts inside a
d-dimensional quarter ball (exact integer arithmetic on 30-bit coordinates, exact comparison), integrals of a
varied function over a box (double), European and Asian option prices with Box-Muller normals (double).
One estimate per group of samples. ``seed`` is an input scalar.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

INTEGRANDS = [  # (expression in x [and y], low, high, dims)
    ("exp(-x * x)", 0.0, 2.0, 1),
    ("sin(x) * sin(x)", 0.0, 3.0, 1),
    ("1.0 / (1.0 + x * x)", 0.0, 1.0, 1),
    ("sqrt(1.0 - x * x)", 0.0, 1.0, 1),
    ("log1p(x) * x", 0.0, 2.0, 1),
    ("exp(-x) * sin(3.0 * x)", 0.0, 4.0, 1),
    ("exp(-(x * x + y * y))", -1.0, 1.0, 2),
    ("cos(x * y) / (1.0 + x * x + y * y)", -2.0, 2.0, 2),
    ("sqrt(x * x + y * y) * exp(-x)", 0.0, 1.5, 2),
]

KINDS = ["pi_hits", "integral", "european", "integral", "asian"]

COMMON = """QUAL unsigned long long mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
QUAL unsigned long long rnd(unsigned long long seed, unsigned long long i, int k) {
    return mix64(seed ^ mix64(i * 16ull + (unsigned long long)k));
}
QUAL double unif(unsigned long long r) { return (double)(r >> 11) * 1.1102230246251565e-16; }
QUAL double unif_pos(unsigned long long r) { return (double)((r >> 11) + 1ull) * 1.1102230246251565e-16; }
"""


def _sample_fn(kind: str, p: dict) -> tuple[str, str, str]:
    """(sample function text with QUAL/ACC placeholders, accumulator type, finish expression of acc)."""
    if kind == "pi_hits":
        d = p["dims"]
        body = ("QUAL ACC sample_val(unsigned long long seed, unsigned long long i) {\n"
                "    unsigned long long s = 0;\n"
                f"    for (int k = 0; k < {d}; ++k) {{ unsigned long long c = rnd(seed, i, k) >> 34; s += c * c; }}\n"
                f"    return s < {p['thresh']}ull ? 1u : 0u;\n}}\n")
        return body, "unsigned int", "acc"
    if kind == "integral":
        expr, lo, hi, dims = p["integrand"]
        w = hi - lo
        ys = f"    double y = {lo!r} + {w!r} * unif(rnd(seed, i, 1));\n" if dims == 2 else ""
        body = ("QUAL ACC sample_val(unsigned long long seed, unsigned long long i) {\n"
                f"    double x = {lo!r} + {w!r} * unif(rnd(seed, i, 0));\n{ys}"
                f"    return {expr};\n}}\n")
        vol = w ** dims
        return body, "double", f"{vol!r} * (acc / (double)per_group)"
    S0, K, r, sig, T = p["S0"], p["K"], p["r"], p["sigma"], p["T"]
    disc = float(np.exp(-r * T))
    pay = "S > K ? S - K : 0.0" if p["call"] else "K > S ? K - S : 0.0"
    if kind == "european":
        drift = (r - 0.5 * sig * sig) * T
        vol = sig * float(np.sqrt(T))
        body = ("QUAL ACC sample_val(unsigned long long seed, unsigned long long i) {\n"
                "    double u1 = unif_pos(rnd(seed, i, 0)), u2 = unif(rnd(seed, i, 1));\n"
                "    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);\n"
                f"    double S = {S0!r} * exp({drift!r} + {vol!r} * z);\n"
                f"    const double K = {K!r};\n    return {pay};\n}}\n")
    else:
        m = p["steps"]
        dt = T / m
        drift = (r - 0.5 * sig * sig) * dt
        vol = sig * float(np.sqrt(dt))
        body = ("QUAL ACC sample_val(unsigned long long seed, unsigned long long i) {\n"
                f"    double S = {S0!r}, sum = 0.0;\n"
                f"    for (int k = 0; k < {m}; k += 2) {{\n"
                "        double u1 = unif_pos(rnd(seed, i, k)), u2 = unif(rnd(seed, i, k + 1));\n"
                "        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;\n"
                f"        S = S * exp({drift!r} + {vol!r} * (rad * cos(th))); sum += S;\n"
                f"        S = S * exp({drift!r} + {vol!r} * (rad * sin(th))); sum += S;\n"
                "    }\n"
                f"    S = sum / {m}.0;\n"
                f"    const double K = {K!r};\n    return {pay};\n}}\n")
    return body, "double", f"{disc!r} * (acc / (double)per_group)"


HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n\n"


def _pre(fn: str, acc: str, fin: str, out_t: str) -> str:
    dq = "__device__ __forceinline__"
    return (HEAD + COMMON.replace("QUAL", dq) + fn.replace("QUAL", dq).replace("ACC", acc)
            + f"{dq} {out_t} finish({acc} acc, int per_group) {{ (void)per_group; return ({out_t})({fin}); }}\n\n")


def _sig(out_t: str) -> str:
    return f'extern "C" void mc_estimate(unsigned long long seed, int ngroups, int per_group, {out_t}* out)'


GUARD = "    if (ngroups <= 0 || per_group <= 0) return;\n"


def _alloc(out_t):
    return f"    {out_t}* d_out = 0;\n    cudaMalloc(&d_out, (size_t)ngroups * sizeof({out_t}));\n"


def _tail(out_t):
    return (f"    cudaMemcpy(out, d_out, (size_t)ngroups * sizeof({out_t}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_out);\n}\n")


def _thread_per_group(pre, acc, out_t, block, grid_expr=None):
    launch = (f"    mc_kernel<<<{grid_expr}, {block}>>>(seed, ngroups, per_group, d_out);\n" if grid_expr else
              f"    mc_kernel<<<(ngroups + {block - 1}) / {block}, {block}>>>(seed, ngroups, per_group, d_out);\n")
    return (pre + f"__global__ void mc_kernel(unsigned long long seed, int ngroups, int per_group, {out_t}* out) {{\n"
            "    for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < ngroups; g += gridDim.x * blockDim.x) {\n"
            f"        {acc} acc = 0;\n"
            "        unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            "        for (int s = 0; s < per_group; ++s) acc += sample_val(seed, base + s);\n"
            "        out[g] = finish(acc, per_group);\n    }\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t) + launch + _tail(out_t))


def _block_tree(pre, acc, out_t):
    return (pre + f"__global__ void mc_kernel(unsigned long long seed, int per_group, {out_t}* out) {{\n"
            f"    __shared__ {acc} sh[256];\n"
            "    int g = blockIdx.x;\n"
            "    unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            f"    {acc} acc = 0;\n"
            "    for (int s = threadIdx.x; s < per_group; s += blockDim.x) acc += sample_val(seed, base + s);\n"
            "    sh[threadIdx.x] = acc;\n    __syncthreads();\n"
            "    for (int w = blockDim.x / 2; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) out[g] = finish(sh[0], per_group);\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + "    mc_kernel<<<ngroups, 256>>>(seed, per_group, d_out);\n" + _tail(out_t))


def _block_shuffle(pre, acc, out_t):
    return (pre + f"__global__ void mc_kernel(unsigned long long seed, int per_group, {out_t}* out) {{\n"
            f"    __shared__ {acc} warp_sums[4];\n"
            "    int g = blockIdx.x;\n"
            "    unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            f"    {acc} acc = 0;\n"
            "    for (int s = threadIdx.x; s < per_group; s += blockDim.x) acc += sample_val(seed, base + s);\n"
            "    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
            "    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            f"        {acc} t = warp_sums[0] + warp_sums[1] + warp_sums[2] + warp_sums[3];\n"
            "        out[g] = finish(t, per_group);\n    }\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + "    mc_kernel<<<ngroups, 128>>>(seed, per_group, d_out);\n" + _tail(out_t))


def _warp_per_group(pre, acc, out_t):
    return (pre + f"__global__ void mc_kernel(unsigned long long seed, int ngroups, int per_group, {out_t}* out) {{\n"
            "    int lane = threadIdx.x & 31;\n"
            "    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
            "    int nwarps = (gridDim.x * blockDim.x) >> 5;\n"
            "    for (int g = warp; g < ngroups; g += nwarps) {\n"
            "        unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            f"        {acc} acc = 0;\n"
            "        for (int s = lane; s < per_group; s += 32) acc += sample_val(seed, base + s);\n"
            "        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
            "        if (lane == 0) out[g] = finish(acc, per_group);\n    }\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = (ngroups + 7) / 8; if (blocks > sms * 16) blocks = sms * 16;\n"
            "    mc_kernel<<<blocks, 256>>>(seed, ngroups, per_group, d_out);\n" + _tail(out_t))


def _atomics(pre, acc, out_t):
    return (pre + f"__global__ void mc_samples(unsigned long long seed, int per_group, long long total, {acc}* acc) {{\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= total) return;\n"
            "    atomicAdd(&acc[i / per_group], sample_val(seed, (unsigned long long)i));\n}\n\n"
            f"__global__ void mc_finish(int ngroups, int per_group, const {acc}* acc, {out_t}* out) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g < ngroups) out[g] = finish(acc[g], per_group);\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + f"    {acc}* d_acc = 0;\n    cudaMalloc(&d_acc, (size_t)ngroups * sizeof({acc}));\n"
            f"    cudaMemset(d_acc, 0, (size_t)ngroups * sizeof({acc}));\n"
            "    long long total = (long long)ngroups * per_group;\n"
            "    mc_samples<<<(unsigned)((total + 255) / 256), 256>>>(seed, per_group, total, d_acc);\n"
            "    mc_finish<<<(ngroups + 255) / 256, 256>>>(ngroups, per_group, d_acc, d_out);\n"
            "    cudaFree(d_acc);\n" + _tail(out_t))


def _two_level(pre, acc, out_t):
    return (pre + f"__global__ void mc_partial(unsigned long long seed, int per_group, int chunks, {acc}* part) {{\n"
            f"    __shared__ {acc} sh[256];\n"
            "    int c = blockIdx.x, g = blockIdx.y;\n"
            "    unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            f"    {acc} acc = 0;\n"
            "    for (int k = 0; k < 4; ++k) {\n"
            "        int s = c * 1024 + k * 256 + threadIdx.x;\n"
            "        if (s < per_group) acc += sample_val(seed, base + s);\n    }\n"
            "    sh[threadIdx.x] = acc;\n    __syncthreads();\n"
            "    for (int w = 128; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) part[(size_t)g * chunks + c] = sh[0];\n}\n\n"
            f"__global__ void mc_combine(int ngroups, int per_group, int chunks, const {acc}* part, {out_t}* out) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= ngroups) return;\n"
            f"    {acc} t = 0;\n"
            "    for (int c = 0; c < chunks; ++c) t += part[(size_t)g * chunks + c];\n"
            "    out[g] = finish(t, per_group);\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + "    int chunks = (per_group + 1023) / 1024;\n"
            f"    {acc}* d_part = 0;\n    cudaMalloc(&d_part, (size_t)ngroups * chunks * sizeof({acc}));\n"
            "    mc_partial<<<dim3(chunks, ngroups), 256>>>(seed, per_group, chunks, d_part);\n"
            "    mc_combine<<<(ngroups + 127) / 128, 128>>>(ngroups, per_group, chunks, d_part, d_out);\n"
            "    cudaFree(d_part);\n" + _tail(out_t))


def _launch_per_group(pre, acc, out_t):
    return (pre + f"__global__ void mc_group(unsigned long long seed, int g, int per_group, {out_t}* out) {{\n"
            f"    __shared__ {acc} sh[128];\n"
            "    unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            f"    {acc} acc = 0;\n"
            "    for (int s = threadIdx.x; s < per_group; s += blockDim.x) acc += sample_val(seed, base + s);\n"
            "    sh[threadIdx.x] = acc;\n    __syncthreads();\n"
            "    for (int w = 64; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) out[g] = finish(sh[0], per_group);\n}\n\n"
            + _sig(out_t) + " {\n" + GUARD + _alloc(out_t)
            + "    for (int g = 0; g < ngroups; ++g) mc_group<<<1, 128>>>(seed, g, per_group, d_out);\n"
            + _tail(out_t))


def _reference(fn: str, acc: str, fin: str, out_t: str) -> str:
    return ("#include <math.h>\n\n" + COMMON.replace("QUAL", "static inline")
            + fn.replace("QUAL", "static").replace("ACC", acc) + "\n"
            f"void mc_estimate(unsigned long long seed, int ngroups, int per_group, {out_t}* out) {{\n"
            "    for (int g = 0; g < ngroups; ++g) {\n"
            f"        {acc} acc = 0;\n"
            "        unsigned long long base = (unsigned long long)g * (unsigned long long)per_group;\n"
            "        for (int s = 0; s < per_group; ++s) acc += sample_val(seed, base + s);\n"
            f"        out[g] = ({out_t})({fin});\n    }}\n}}\n")




def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    p: dict = {"kind": kind}
    if kind == "pi_hits":
        p["dims"] = [2, 3, 4][index % 3]
        p["radius"] = [1.0, 0.9, 0.75, 0.6][(index // 5) % 4]
        p["thresh"] = int(p["radius"] ** 2 * (1 << 60))
        ns = 11.0 * p["dims"] + 20.0  # reference ns per sample (calibrated)
    elif kind == "integral":
        p["integrand"] = INTEGRANDS[(index // 5 * 2 + index % 5 // 3 + int(rng.integers(3))) % len(INTEGRANDS)]
        ns = 35.0 if p["integrand"][3] == 1 else 120.0
    else:
        p.update(S0=float(np.round(rng.uniform(80, 120), 2)), K=float(np.round(rng.uniform(85, 115), 2)),
                 r=float(np.round(rng.uniform(0.0, 0.06), 3)), sigma=float(np.round(rng.uniform(0.1, 0.45), 3)),
                 T=float(np.round(rng.uniform(0.25, 2.0), 2)), call=bool(index % 2 == 0))
        if kind == "asian":
            p["steps"] = [4, 8, 12][int(rng.integers(3))]
            ns = 80.0 * p["steps"]
        else:
            ns = 190.0
    fn, acc, fin = _sample_fn(kind, p)
    out_t = "unsigned int" if kind == "pi_hits" else "double"
    per_group = [1024, 2048, 4096, 8192][int(rng.integers(4))]
    samples = 1.2e8 / ns  # about 120 ms of reference time
    ngroups = max(16, int(samples / per_group)) + int(rng.integers(0, 5))
    task = {
        "function_name": "mc_estimate",
        "description": (f"Monte Carlo ({kind}): out[g] for g < ngroups from samples g*per_group .. "
                        "(g+1)*per_group-1, whose uniforms are splitmix64(seed ^ splitmix64(i*16 + k))."),
        "returns": "void",
        "args": [
            {"name": "seed", "role": "scalar", "ctype": "unsigned long long",
             "dist": {"kind": "randint", "low": 1, "high": 1 << 62}},
            {"name": "ngroups", "role": "scalar", "ctype": "int"},
            {"name": "per_group", "role": "scalar", "ctype": "int"},
            {"name": "out", "role": "out", "ctype": out_t, "length": "ngroups"},
        ],
        "size_configs": [{"ngroups": 7, "per_group": 1000}, {"ngroups": 45, "per_group": 1777},
                         {"ngroups": ngroups, "per_group": per_group}],
        "tolerance": {"rtol": 1e-8, "atol": 1e-9},
        "reference_c": _reference(fn, acc, fin, out_t),
        "tags": ["compute-bound", "monte-carlo", "integer" if kind == "pi_hits" else "double"],
    }
    pre = _pre(fn, acc, fin, out_t)
    variants = (
        Variant("thread_per_group", ("thread_per_row", "block_128", "pageable"),
                _thread_per_group(pre, acc, out_t, 128)),
        Variant("block_tree", ("block_per_row", "tree_reduction", "coalesced", "block_256", "pageable"),
                _block_tree(pre, acc, out_t)),
        Variant("block_shuffle", ("block_per_row", "warp_shuffle", "block_128", "pageable"),
                _block_shuffle(pre, acc, out_t)),
        Variant("warp_per_group", ("block_per_row", "warp_shuffle", "grid_stride", "block_256", "pageable"),
                _warp_per_group(pre, acc, out_t)),
        Variant("sample_atomics", ("naive", "atomics", "multi_pass", "block_256", "pageable"),
                _atomics(pre, acc, out_t)),
        Variant("two_level", ("two_level", "tree_reduction", "multi_pass", "block_256", "pageable"),
                _two_level(pre, acc, out_t)),
        Variant("launch_per_group", ("many_launches", "tree_reduction", "block_128", "pageable"),
                _launch_per_group(pre, acc, out_t)),
        Variant("small_grid", ("small_grid", "thread_per_row", "grid_stride", "block_64", "pageable"),
                _thread_per_group(pre, acc, out_t, 64, grid_expr="2")),
    )
    return GeneratedTask(task, variants, {**p, "ngroups_time": ngroups, "per_group_time": per_group})


FAMILY = Family(
    name="monte_carlo",
    description="Monte Carlo estimates (quarter-ball hits, integrals, option prices) from a counter-based RNG",
    generate=generate,
    n_tasks=50,
    tags=("compute-bound", "monte-carlo", "reduction"),
)
