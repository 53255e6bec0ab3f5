"""Max / min / argmax / argmin (lowest index on ties) of a key k(x[i]) over arrays of various types.

Keys are computed exactly the same way on the CPU and the GPU (so arg-reductions are well defined): a polynomial
in float or double evaluated with correctly rounded multiplies and adds (``__fmul_rn``/``__fadd_rn`` on the
device, so no FMA contraction), or a 64-bit integer mixing hash of int/unsigned/short inputs, masked to a few
bits so that ties are frequent. Parameters: element type, operation (value, index, or both written to arrays),
polynomial coefficients / hash mask, and sizes.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

OPS = ["argmax", "min", "both_max", "argmin", "max", "both_min"]
TYPES = ["float", "int", "double", "unsigned int", "short"]


class Spec:
    def __init__(self, t, k, op, fn, key_c, key_cu, worst, ord_fn):
        self.t, self.k, self.op, self.fn = t, k, op, fn
        self.key_c, self.key_cu, self.worst, self.ord_fn = key_c, key_cu, worst, ord_fn
        self.is_max = op in ("argmax", "max", "both_max")

    @property
    def returns(self) -> str:
        if self.op.startswith("both"):
            return "void"
        return "int" if self.op.startswith("arg") else self.k

    @property
    def sig(self) -> str:
        extra = f", {self.k}* best, int* where" if self.op.startswith("both") else ""
        return f'extern "C" {self.returns} {self.fn}(int n, const {self.t}* x{extra})'

    def finish(self, v: str, i: str) -> str:
        if self.op.startswith("both"):
            return f"best[0] = {v}; where[0] = {i}; return;"
        return f"return {i};" if self.op.startswith("arg") else f"return {v};"

    @property
    def head(self) -> str:
        k, cmp = self.k, (">" if self.is_max else "<")
        return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <math.h>\n\n"
                f"__device__ __forceinline__ {k} keyf({self.t} x) {{\n{self.key_cu}\n}}\n\n"
                f"__host__ __device__ __forceinline__ bool better({k} v, int i, {k} bv, int bi) {{\n"
                f"    return v {cmp} bv || (v == bv && i < bi);\n}}\n\n"
                f"__host__ __device__ __forceinline__ {k} worst_key() {{ return {self.worst}; }}\n\n"
                f"__device__ __forceinline__ void warp_best({k}& v, int& i) {{\n"
                "    for (int o = 16; o > 0; o >>= 1) {\n"
                f"        {k} ov = __shfl_down_sync(0xffffffffu, v, o); int oi = __shfl_down_sync(0xffffffffu, i, o);\n"
                "        if (better(ov, oi, v, i)) { v = ov; i = oi; }\n    }\n}\n\n")

    def entry(self) -> str:
        return f"{self.sig} {{\n    if (n <= 0) {{ {self.finish('worst_key()', '-1')} }}\n"

    def upload(self) -> str:
        return (f"    size_t bytes = (size_t)n * sizeof({self.t});\n    {self.t}* dx;\n"
                "    cudaMalloc(&dx, bytes);\n    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n")

    # block-level combine via shared memory tree of (value, index) pairs; B threads
    def tree(self, b: int) -> str:
        return (f"    for (int h = {b // 2}; h > 0; h >>= 1) {{\n"
                "        if (t < h && better(sv[t + h], si[t + h], sv[t], si[t])) { sv[t] = sv[t + h]; si[t] = si[t + h]; }\n"
                "        __syncthreads();\n    }\n")


def _two_phase_atomic(s: Spec) -> str:
    k, t = s.k, s.t
    atom = "atomicMax" if s.is_max else "atomicMin"
    init = "0ULL" if s.is_max else "~0ULL"
    return (s.head + f"__device__ __forceinline__ unsigned long long ordkey({k} v) {{\n{s.ord_fn}\n}}\n\n"
            f"__global__ void best_key(int n, const {t}* x, unsigned long long* ob) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {atom}(ob, ordkey(keyf(x[i])));\n}}\n\n"
            f"__global__ void first_index(int n, const {t}* x, const unsigned long long* ob, int* oi) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n && ordkey(keyf(x[i])) == ob[0]) atomicMin(oi, i);\n}\n\n"
            f"__global__ void fetch_value(const {t}* x, const int* oi, {k}* ov) {{ ov[0] = keyf(x[oi[0]]); }}\n\n"
            + s.entry() + s.upload()
            + f"    unsigned long long* dob; int* doi; {k}* dov;\n"
            f"    cudaMalloc(&dob, sizeof(unsigned long long)); cudaMalloc(&doi, sizeof(int)); cudaMalloc(&dov, sizeof({k}));\n"
            f"    unsigned long long init = {init}; int big = 0x7fffffff;\n"
            "    cudaMemcpy(dob, &init, sizeof(init), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(doi, &big, sizeof(int), cudaMemcpyHostToDevice);\n"
            "    int blocks = (n + 255) / 256;\n"
            "    best_key<<<blocks, 256>>>(n, dx, dob);\n"
            "    first_index<<<blocks, 256>>>(n, dx, dob, doi);\n"
            "    fetch_value<<<1, 1>>>(dx, doi, dov);\n"
            f"    {k} v; int bi;\n"
            f"    cudaMemcpy(&v, dov, sizeof({k}), cudaMemcpyDeviceToHost); cudaMemcpy(&bi, doi, sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dob); cudaFree(doi); cudaFree(dov);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _pair_final_kernel(s: Spec, b: int) -> str:
    k = s.k
    return (f"__global__ void final_pairs(int m, const {k}* pv, const int* pi, {k}* ov, int* oi) {{\n"
            f"    __shared__ {k} sv[{b}]; __shared__ int si[{b}];\n"
            f"    int t = threadIdx.x; {k} v = worst_key(); int i = 0x7fffffff;\n"
            f"    for (int j = t; j < m; j += {b}) if (better(pv[j], pi[j], v, i)) {{ v = pv[j]; i = pi[j]; }}\n"
            "    sv[t] = v; si[t] = i;\n    __syncthreads();\n"
            + s.tree(b)
            + "    if (t == 0) { ov[0] = sv[0]; oi[0] = si[0]; }\n}\n\n")


def _fetch_pair(s: Spec) -> str:
    k = s.k
    return (f"    {k} v; int bi;\n"
            f"    cudaMemcpy(&v, dov, sizeof({k}), cudaMemcpyDeviceToHost); cudaMemcpy(&bi, doi, sizeof(int), cudaMemcpyDeviceToHost);\n")


def _tree_two_pass(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void block_best(int n, const {t}* x, {k}* pv, int* pi) {{\n"
            f"    __shared__ {k} sv[256]; __shared__ int si[256];\n"
            "    int t = threadIdx.x; int i = blockIdx.x * 256 + t;\n"
            "    if (i < n) { sv[t] = keyf(x[i]); si[t] = i; } else { sv[t] = worst_key(); si[t] = 0x7fffffff; }\n"
            "    __syncthreads();\n" + s.tree(256)
            + "    if (t == 0) { pv[blockIdx.x] = sv[0]; pi[blockIdx.x] = si[0]; }\n}\n\n"
            + _pair_final_kernel(s, 256)
            + s.entry() + s.upload()
            + "    int blocks = (n + 255) / 256;\n"
            f"    {k} *pv, *dov; int *pi, *doi;\n"
            f"    cudaMalloc(&pv, (size_t)blocks * sizeof({k})); cudaMalloc(&pi, (size_t)blocks * sizeof(int));\n"
            f"    cudaMalloc(&dov, sizeof({k})); cudaMalloc(&doi, sizeof(int));\n"
            "    block_best<<<blocks, 256>>>(n, dx, pv, pi);\n"
            "    final_pairs<<<1, 256>>>(blocks, pv, pi, dov, doi);\n"
            + _fetch_pair(s)
            + "    cudaFree(dx); cudaFree(pv); cudaFree(pi); cudaFree(dov); cudaFree(doi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _block_shuffle_body(s: Spec, nwarps: int) -> str:
    k = s.k
    return ("    warp_best(v, i);\n"
            f"    __shared__ {k} wv[{nwarps}]; __shared__ int wi[{nwarps}];\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) { wv[w] = v; wi[w] = i; }\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            f"        if (lane < {nwarps}) {{ v = wv[lane]; i = wi[lane]; }} else {{ v = worst_key(); i = 0x7fffffff; }}\n"
            "        warp_best(v, i);\n")


def _shuffle_grid(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void gs_best(int n, const {t}* __restrict__ x, {k}* pv, int* pi) {{\n"
            f"    {k} v = worst_key(); int i = 0x7fffffff;\n"
            "    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {\n"
            f"        {k} c = keyf(x[j]); if (better(c, j, v, i)) {{ v = c; i = j; }}\n    }}\n"
            + _block_shuffle_body(s, 8)
            + "        if (lane == 0) { pv[blockIdx.x] = v; pi[blockIdx.x] = i; }\n    }\n}\n\n"
            + _pair_final_kernel(s, 256)
            + s.entry() + s.upload()
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = sms * 8; int need = (n + 255) / 256; if (blocks > need) blocks = need;\n"
            f"    {k} *pv, *dov; int *pi, *doi;\n"
            f"    cudaMalloc(&pv, (size_t)blocks * sizeof({k})); cudaMalloc(&pi, (size_t)blocks * sizeof(int));\n"
            f"    cudaMalloc(&dov, sizeof({k})); cudaMalloc(&doi, sizeof(int));\n"
            "    gs_best<<<blocks, 256>>>(n, dx, pv, pi);\n"
            "    final_pairs<<<1, 256>>>(blocks, pv, pi, dov, doi);\n"
            + _fetch_pair(s)
            + "    cudaFree(dx); cudaFree(pv); cudaFree(pi); cudaFree(dov); cudaFree(doi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


VEC = {"float": ("float4", 4), "double": ("double2", 2), "int": ("int4", 4), "unsigned int": ("uint4", 4),
       "short": ("short4", 4)}


def _vectorized(s: Spec) -> str:
    k, t = s.k, s.t
    vt, w = VEC[t]
    comps = ["x", "y", "z", "w"][:w]
    upd = "".join(f"        {{ {k} c = keyf(q.{c}); if (better(c, {w} * j + {o}, v, i)) {{ v = c; i = {w} * j + {o}; }} }}\n"
                  for o, c in enumerate(comps))
    return (s.head + f"__global__ void vec_best(int n, const {t}* __restrict__ x, {k}* pv, int* pi) {{\n"
            f"    {k} v = worst_key(); int i = 0x7fffffff;\n"
            f"    int nv = n / {w}; const {vt}* xv = reinterpret_cast<const {vt}*>(x);\n"
            "    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;\n"
            f"    for (int j = tid; j < nv; j += stride) {{\n        {vt} q = __ldg(xv + j);\n{upd}    }}\n"
            f"    for (int j = nv * {w} + tid; j < n; j += stride) {{ {k} c = keyf(__ldg(x + j)); if (better(c, j, v, i)) {{ v = c; i = j; }} }}\n"
            + _block_shuffle_body(s, 8)
            + "        if (lane == 0) { pv[blockIdx.x] = v; pi[blockIdx.x] = i; }\n    }\n}\n\n"
            + _pair_final_kernel(s, 1024)
            + s.entry() + s.upload()
            + f"    int blocks = (n / {w} + 255) / 256; if (blocks > 2048) blocks = 2048; if (blocks < 1) blocks = 1;\n"
            f"    {k} *pv, *dov; int *pi, *doi;\n"
            f"    cudaMalloc(&pv, (size_t)blocks * sizeof({k})); cudaMalloc(&pi, (size_t)blocks * sizeof(int));\n"
            f"    cudaMalloc(&dov, sizeof({k})); cudaMalloc(&doi, sizeof(int));\n"
            "    vec_best<<<blocks, 256>>>(n, dx, pv, pi);\n"
            "    final_pairs<<<1, 1024>>>(blocks, pv, pi, dov, doi);\n"
            + _fetch_pair(s)
            + "    cudaFree(dx); cudaFree(pv); cudaFree(pi); cudaFree(dov); cudaFree(doi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _single_block(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void one_block(int n, const {t}* x, {k}* ov, int* oi) {{\n"
            f"    __shared__ {k} sv[1024]; __shared__ int si[1024];\n"
            f"    int t = threadIdx.x; {k} v = worst_key(); int i = 0x7fffffff;\n"
            f"    for (int j = t; j < n; j += 1024) {{ {k} c = keyf(x[j]); if (better(c, j, v, i)) {{ v = c; i = j; }} }}\n"
            "    sv[t] = v; si[t] = i;\n    __syncthreads();\n" + s.tree(1024)
            + "    if (t == 0) { ov[0] = sv[0]; oi[0] = si[0]; }\n}\n\n"
            + s.entry() + s.upload()
            + f"    {k}* dov; int* doi; cudaMalloc(&dov, sizeof({k})); cudaMalloc(&doi, sizeof(int));\n"
            "    one_block<<<1, 1024>>>(n, dx, dov, doi);\n"
            + _fetch_pair(s)
            + "    cudaFree(dx); cudaFree(dov); cudaFree(doi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _host_finish(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void block_best4(int n, const {t}* x, {k}* pv, int* pi) {{\n"
            f"    __shared__ {k} sv[512]; __shared__ int si[512];\n"
            f"    int t = threadIdx.x; {k} v = worst_key(); int i = 0x7fffffff;\n"
            "    for (int r = 0; r < 4; ++r) {\n"
            "        size_t j = (size_t)blockIdx.x * 2048 + (size_t)r * 512 + t;\n"
            f"        if (j < (size_t)n) {{ {k} c = keyf(x[j]); if (better(c, (int)j, v, i)) {{ v = c; i = (int)j; }} }}\n    }}\n"
            "    sv[t] = v; si[t] = i;\n    __syncthreads();\n" + s.tree(512)
            + "    if (t == 0) { pv[blockIdx.x] = sv[0]; pi[blockIdx.x] = si[0]; }\n}\n\n"
            + s.entry() + s.upload()
            + "    int blocks = (int)(((size_t)n + 2047) / 2048);\n"
            f"    {k}* pv; int* pi;\n"
            f"    cudaMalloc(&pv, (size_t)blocks * sizeof({k})); cudaMalloc(&pi, (size_t)blocks * sizeof(int));\n"
            "    block_best4<<<blocks, 512>>>(n, dx, pv, pi);\n"
            f"    {k}* hv = ({k}*)malloc((size_t)blocks * sizeof({k})); int* hi = (int*)malloc((size_t)blocks * sizeof(int));\n"
            f"    cudaMemcpy(hv, pv, (size_t)blocks * sizeof({k}), cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(hi, pi, (size_t)blocks * sizeof(int), cudaMemcpyDeviceToHost);\n"
            f"    {k} v = hv[0]; int bi = hi[0];\n"
            "    for (int b = 1; b < blocks; ++b) if (better(hv[b], hi[b], v, bi)) { v = hv[b]; bi = hi[b]; }\n"
            "    free(hv); free(hi); cudaFree(dx); cudaFree(pv); cudaFree(pi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _small_grid(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void serial_chunks(int n, int chunk, const {t}* x, {k}* pv, int* pi) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    size_t lo = (size_t)g * chunk; size_t hi = lo + chunk; if (hi > (size_t)n) hi = n;\n"
            f"    {k} v = worst_key(); int i = 0x7fffffff;\n"
            f"    for (size_t j = lo; j < hi; ++j) {{ {k} c = keyf(x[j]); if (better(c, (int)j, v, i)) {{ v = c; i = (int)j; }} }}\n"
            "    pv[g] = v; pi[g] = i;\n}\n\n"
            + s.entry() + s.upload()
            + "    const int T = 32 * 128; int chunk = (n + T - 1) / T;\n"
            f"    {k}* pv; int* pi; cudaMalloc(&pv, T * sizeof({k})); cudaMalloc(&pi, T * sizeof(int));\n"
            "    serial_chunks<<<32, 128>>>(n, chunk, dx, pv, pi);\n"
            f"    {k}* hv = ({k}*)malloc(T * sizeof({k})); int* hi = (int*)malloc(T * sizeof(int));\n"
            f"    cudaMemcpy(hv, pv, T * sizeof({k}), cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(hi, pi, T * sizeof(int), cudaMemcpyDeviceToHost);\n"
            f"    {k} v = hv[0]; int bi = hi[0];\n"
            "    for (int g = 1; g < T; ++g) if (better(hv[g], hi[g], v, bi)) { v = hv[g]; bi = hi[g]; }\n"
            "    free(hv); free(hi); cudaFree(dx); cudaFree(pv); cudaFree(pi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _chunked(s: Spec) -> str:
    k, t = s.k, s.t
    return (s.head + f"__global__ void chunk_best(int m, int base, const {t}* x, {k}* pv, int* pi) {{\n"
            f"    __shared__ {k} sv[128]; __shared__ int si[128];\n"
            "    int t = threadIdx.x; int j = blockIdx.x * 128 + t;\n"
            "    if (j < m) { sv[t] = keyf(x[j]); si[t] = base + j; } else { sv[t] = worst_key(); si[t] = 0x7fffffff; }\n"
            "    __syncthreads();\n" + s.tree(128)
            + "    if (t == 0) { pv[blockIdx.x] = sv[0]; pi[blockIdx.x] = si[0]; }\n}\n\n"
            + s.entry()
            + f"    const int C = 1 << 16;\n    {t}* dx; {k}* pv; int* pi;\n"
            f"    cudaMalloc(&dx, (size_t)C * sizeof({t})); cudaMalloc(&pv, (C / 128) * sizeof({k})); cudaMalloc(&pi, (C / 128) * sizeof(int));\n"
            f"    {k} hv[C / 128]; int hi[C / 128];\n"
            f"    {k} v = worst_key(); int bi = 0x7fffffff;\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C; int blocks = (m + 127) / 128;\n"
            f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "        chunk_best<<<blocks, 128>>>(m, lo, dx, pv, pi);\n"
            f"        cudaMemcpy(hv, pv, (size_t)blocks * sizeof({k}), cudaMemcpyDeviceToHost);\n"
            "        cudaMemcpy(hi, pi, (size_t)blocks * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        for (int b = 0; b < blocks; ++b) if (better(hv[b], hi[b], v, bi)) { v = hv[b]; bi = hi[b]; }\n    }\n"
            "    cudaFree(dx); cudaFree(pv); cudaFree(pi);\n"
            f"    {s.finish('v', 'bi')}\n}}\n")


def _fmt(c: float, t: str) -> str:
    return f"{c:.6f}f" if t == "float" else f"{c:.9f}"


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = TYPES[index % len(TYPES)]
    op = OPS[index % len(OPS)]
    if t in ("float", "double"):
        k = t
        deg = 3 + index % 4
        coefs = [float(c) for c in rng.uniform(-1.5, 1.5, deg + 1)]
        mul, add = ("__fmul_rn", "__fadd_rn") if t == "float" else ("__dmul_rn", "__dadd_rn")
        c_lines = [f"    {t} p = {_fmt(coefs[0], t)};"] + [f"    p = p * x + {_fmt(c, t)};" for c in coefs[1:]]
        cu_lines = [f"    {t} p = {_fmt(coefs[0], t)};"] + [f"    p = {add}({mul}(p, x), {_fmt(c, t)});" for c in coefs[1:]]
        zero = "0.0f" if t == "float" else "0.0"
        # + 0 turns -0 into +0 so that equal keys have equal bit patterns
        key_c = "\n".join(c_lines) + f"\n    return p + {zero};"
        key_cu = "\n".join(cu_lines) + f"\n    return {add}(p, {zero});"
        worst = ("-INFINITY" if op.endswith("max") else "INFINITY")
        if t == "float":
            ord_fn = ("    unsigned int u = __float_as_uint(v);\n"
                      "    return (unsigned long long)((u & 0x80000000u) ? ~u : (u | 0x80000000u));")
        else:
            ord_fn = ("    unsigned long long u = (unsigned long long)__double_as_longlong(v);\n"
                      "    return (u & 0x8000000000000000ULL) ? ~u : (u | 0x8000000000000000ULL);")
        lo, hi = [(-1.0, 1.0), (-2.0, 2.0), (-1.5, 0.5), (0.0, 2.0)][int(rng.integers(4))]
        dist = {"kind": "uniform", "low": lo, "high": hi}
        n_time = (24_000_000 if t == "float" else 12_000_000) // (1 + deg // 4)
        key_desc = "p(x) = " + " + ".join(f"{c:.6f}*x^{deg - j}" for j, c in enumerate(coefs)) + \
            f", evaluated by Horner's rule in {t} with separately rounded multiplies and adds (no FMA)"
        tol = {"rtol": 0.0, "atol": 0.0}
    else:
        k = "long long"
        bits = [12, 16, 20, 24, 28][index % 5]
        mask = (1 << bits) - 1
        body = ("    unsigned long long h = (unsigned long long)(unsigned int)x;\n"
                "    h ^= h >> 16; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 31;\n"
                f"    return (long long)(h & 0x{mask:X}ULL);")
        key_c = key_cu = body
        worst = "-1LL" if op.endswith("max") else "0x7fffffffffffffffLL"
        ord_fn = "    return (unsigned long long)v;"
        lo, hi = {"int": (-(1 << 30), 1 << 30), "unsigned int": (0, 1 << 31), "short": (-32768, 32768)}[t]
        dist = {"kind": "randint", "low": lo, "high": hi}
        n_time = 16_000_000
        key_desc = (f"a 64-bit mixing hash of (unsigned int)x (murmur3-style finaliser), masked to its low {bits} bits "
                    "(many ties)")
        tol = {"rtol": 0.0, "atol": 0.0}
    n_time += int(rng.integers(0, 2000))
    fn = {"argmax": "argmax_key", "argmin": "argmin_key", "max": "max_key", "min": "min_key",
          "both_max": "max_with_index", "both_min": "min_with_index"}[op] + "_" + t.replace(" ", "")
    s = Spec(t, k, op, fn, key_c, key_cu, worst, ord_fn)
    args = [{"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": dist}]
    if op.startswith("both"):
        args += [{"name": "best", "role": "out", "ctype": k, "length": 1},
                 {"name": "where", "role": "out", "ctype": "int", "length": 1}]
    cmp = ">" if s.is_max else "<"
    ref = ("#include <math.h>\n\n"
           f"static {k} keyf({t} x) {{\n{key_c}\n}}\n\n"
           f"{s.returns} {fn}(int n, const {t}* x{', ' + k + '* best, int* where' if op.startswith('both') else ''}) {{\n"
           f"    {k} b = keyf(x[0]); int bi = 0;\n"
           f"    for (int i = 1; i < n; ++i) {{ {k} v = keyf(x[i]); if (v {cmp} b) {{ b = v; bi = i; }} }}\n"
           + {"argmax": "    return bi;\n", "argmin": "    return bi;\n", "max": "    return b;\n", "min": "    return b;\n",
              "both_max": "    best[0] = b; where[0] = bi;\n", "both_min": "    best[0] = b; where[0] = bi;\n"}[op]
           + "}\n")
    what = {"argmax": "returns the lowest index i with the largest key k(x[i])",
            "argmin": "returns the lowest index i with the smallest key k(x[i])",
            "max": "returns the largest key k(x[i])", "min": "returns the smallest key k(x[i])",
            "both_max": "writes the largest key k(x[i]) to best[0] and the lowest index attaining it to where[0]",
            "both_min": "writes the smallest key k(x[i]) to best[0] and the lowest index attaining it to where[0]"}[op]
    task = {
        "function_name": fn,
        "description": f"For {t} x[0..n) (n >= 1), {what}; k(x) is {key_desc}.",
        "returns": s.returns,
        "args": args,
        "size_configs": [{"n": 1000 + int(rng.integers(0, 500))}, {"n": 70_001 + int(rng.integers(0, 25000))},
                         {"n": 77}, {"n": n_time}],
        "tolerance": tol,
        "reference_c": ref,
        "tags": ["reduction", "argreduce" if "arg" in op or "both" in op else "minmax", t.replace(" ", "_")],
    }
    variants = (
        Variant("two_phase_atomic", ("naive", "atomics", "multi_pass", "coalesced", "block_256", "pageable"),
                _two_phase_atomic(s)),
        Variant("tree_two_pass", ("tree_reduction", "two_level", "multi_pass", "coalesced", "block_256", "pageable"),
                _tree_two_pass(s)),
        Variant("shuffle_grid_stride", ("grid_stride", "warp_shuffle", "two_level", "multi_pass", "coalesced",
                                        "block_256", "pageable"), _shuffle_grid(s)),
        Variant("vectorized_shuffle", ("vectorized", "grid_stride", "warp_shuffle", "two_level", "multi_pass",
                                       "readonly_cache", "coalesced", "block_256", "pageable"), _vectorized(s)),
        Variant("single_block", ("single_thread", "tree_reduction", "coalesced", "block_1024", "pageable"),
                _single_block(s)),
        Variant("host_finish", ("tree_reduction", "two_level", "host_compute", "coalesced", "block_512", "pageable"),
                _host_finish(s)),
        Variant("small_grid_serial", ("small_grid", "strided", "host_compute", "block_128", "pageable"), _small_grid(s)),
        Variant("chunked_sync", ("in_loop_transfers", "many_launches", "tree_reduction", "host_compute", "block_128"),
                _chunked(s)),
    )
    return GeneratedTask(task, variants, {"type": t, "op": op, "key": key_desc, "n_time": n_time})


FAMILY = Family(
    name="minmax_reduce",
    description="max / min / argmax / argmin (lowest index on ties) of exact keys over float, double and integer arrays",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
