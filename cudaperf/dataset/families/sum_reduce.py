"""Sum reductions ``s = sum_i f(x[i])`` of float (double accumulation), double, or int (long long) arrays.

Parameters: the element type, the per-element map f (identity, squares, transcendental maps for floats; 64-bit
integer mixing or modular squares for ints, heavy enough that the GPU wins with the transfers counted), the
input range, and whether the sum is returned as a C scalar or written to a 1-element ``result`` array.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# (expression in x with {f} the libm suffix, positive over the input range, input range, timing n)
FLOAT_EXPRS = [
    ("x", (0.0, 1.0), 48_000_003),
    ("exp{f}(-x * x)", (-2.0, 2.0), 12_000_057),
    ("sqrt{f}(x * x + {one})", (-3.0, 3.0), 24_000_031),
    ("log1p{f}(x * x)", (-2.0, 2.0), 5_000_017),
    ("{c15} + sin{f}(x) * cos{f}({two} * x)", (-3.0, 3.0), 4_000_009),
    ("exp{f}(sin{f}(x))", (-4.0, 4.0), 6_000_023),
    ("atan{f}(x) * atan{f}(x)", (-2.0, 2.0), 8_000_001),
    ("tanh{f}(x) + {one}", (-2.0, 2.0), 8_000_043),
    ("cbrt{f}(x * x + {one})", (-2.0, 2.0), 6_000_011),
    ("x * x + fabs{f}(x)", (-1.0, 1.0), 48_000_013),
]
INT_EXPRS = [
    # 64-bit mixing (murmur3 finaliser), low 20 bits
    ("mix", 32_000_011),
    # modular square in 64 bits
    ("modsq", 32_000_029),
    # splitmix-like mixing, low 16 bits, minus a bias (mixed signs)
    ("split", 28_000_019),
]

INT_FUNCS = {
    "mix": ("unsigned long long h = (unsigned long long)(unsigned int)x;\n"
            "    h ^= h >> 15; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 29;\n"
            "    return (long long)(h & 0xFFFFFULL);"),
    "modsq": "long long v = (long long)x;\n    return (v * v + 7 * v) % 1000003LL;",
    "split": ("unsigned long long z = (unsigned long long)(long long)x + 0x9e3779b97f4a7c15ULL;\n"
              "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL; z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;\n"
              "    z ^= z >> 31;\n    return (long long)(z & 0xFFFFULL) - 30000LL;"),
}


def _lit(t: str, v: str) -> str:
    return f"{v}f" if t == "float" else v


def _fexpr(e: str, t: str) -> str:
    return e.format(f="f" if t == "float" else "", one=_lit(t, "1.0"), two=_lit(t, "2.0"), c15=_lit(t, "1.5"))


class Spec:
    def __init__(self, t: str, a: str, body: str, fn: str, ret: bool):
        self.t, self.a, self.body, self.fn, self.ret = t, a, body, fn, ret

    @property
    def sig(self) -> str:
        if self.ret:
            return f'extern "C" {self.a} {self.fn}(int n, const {self.t}* x)'
        return f'extern "C" void {self.fn}(int n, const {self.t}* x, {self.a}* result)'

    def finish(self, v: str) -> str:
        return f"return {v};" if self.ret else f"result[0] = {v}; return;"

    @property
    def head(self) -> str:
        a = self.a
        atom = ("atomicAdd(p, v);" if a == "double"
                else "atomicAdd((unsigned long long*)p, (unsigned long long)v);")
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"__device__ __forceinline__ {a} fval({self.t} x) {{\n    {self.body}\n}}\n\n"
                f"__device__ __forceinline__ void acc_atomic({a}* p, {a} v) {{ {atom} }}\n\n"
                f"__device__ __forceinline__ {a} warp_sum({a} v) {{\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")

    def entry(self) -> str:
        return f"{self.sig} {{\n    if (n <= 0) {{ {self.finish('0')} }}\n"

    def upload(self) -> str:
        return (f"    size_t bytes = (size_t)n * sizeof({self.t});\n    {self.t}* dx;\n"
                "    cudaMalloc(&dx, bytes);\n    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n")


def _atomic_naive(s: Spec) -> str:
    a = s.a
    return (s.head + f"__global__ void sum_atomic(int n, const {s.t}* x, {a}* acc) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) acc_atomic(acc, fval(x[i]));\n}\n\n"
            + s.entry() + s.upload()
            + f"    {a}* dacc; cudaMalloc(&dacc, sizeof({a})); cudaMemset(dacc, 0, sizeof({a}));\n"
            "    sum_atomic<<<(n + 255) / 256, 256>>>(n, dx, dacc);\n"
            f"    {a} total = 0; cudaMemcpy(&total, dacc, sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dacc);\n"
            f"    {s.finish('total')}\n}}\n")


def _tree_two_pass(s: Spec) -> str:
    a = s.a
    return (s.head + f"__global__ void block_tree(int n, const {s.t}* x, {a}* part) {{\n"
            f"    __shared__ {a} sh[256];\n"
            "    int t = threadIdx.x; int i = blockIdx.x * 256 + t;\n"
            f"    sh[t] = i < n ? fval(x[i]) : ({a})0;\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (t < h) sh[t] += sh[t + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            f"__global__ void final_tree(int m, const {a}* part, {a}* out) {{\n"
            f"    __shared__ {a} sh[256];\n"
            f"    int t = threadIdx.x; {a} v = 0;\n"
            "    for (int i = t; i < m; i += 256) v += part[i];\n"
            "    sh[t] = v;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (t < h) sh[t] += sh[t + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (t == 0) out[0] = sh[0];\n}\n\n"
            + s.entry() + s.upload()
            + "    int blocks = (n + 255) / 256;\n"
            f"    {a} *dpart, *dout;\n    cudaMalloc(&dpart, (size_t)blocks * sizeof({a})); cudaMalloc(&dout, sizeof({a}));\n"
            "    block_tree<<<blocks, 256>>>(n, dx, dpart);\n"
            "    final_tree<<<1, 256>>>(blocks, dpart, dout);\n"
            f"    {a} total; cudaMemcpy(&total, dout, sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dpart); cudaFree(dout);\n"
            f"    {s.finish('total')}\n}}\n")


def _shuffle_atomic(s: Spec) -> str:
    a = s.a
    return (s.head + f"__global__ void sum_gs(int n, const {s.t}* __restrict__ x, {a}* acc) {{\n"
            f"    __shared__ {a} ws[8];\n"
            f"    {a} v = 0;\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += fval(x[i]);\n"
            "    v = warp_sum(v);\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) ws[w] = v;\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            f"        v = lane < 8 ? ws[lane] : ({a})0;\n"
            "        v = warp_sum(v);\n"
            "        if (lane == 0) acc_atomic(acc, v);\n    }\n}\n\n"
            + s.entry() + s.upload()
            + f"    {a}* dacc; cudaMalloc(&dacc, sizeof({a})); cudaMemset(dacc, 0, sizeof({a}));\n"
            "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = sms * 8; int need = (n + 255) / 256; if (blocks > need) blocks = need;\n"
            "    sum_gs<<<blocks, 256>>>(n, dx, dacc);\n"
            f"    {a} total = 0; cudaMemcpy(&total, dacc, sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dacc);\n"
            f"    {s.finish('total')}\n}}\n")


def _vectorized(s: Spec) -> str:
    a, t = s.a, s.t
    vt, w = {"float": ("float4", 4), "double": ("double2", 2), "int": ("int4", 4)}[t]
    comps = ["x", "y", "z", "w"][:w]
    add = " + ".join(f"fval(q.{c})" for c in comps)
    return (s.head + f"__global__ void sum_vec(int n, const {t}* __restrict__ x, {a}* __restrict__ part) {{\n"
            f"    __shared__ {a} ws[8];\n"
            f"    int nv = n / {w};\n"
            f"    const {vt}* xv = reinterpret_cast<const {vt}*>(x);\n"
            "    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;\n"
            f"    {a} v = 0;\n"
            f"    for (int i = tid; i < nv; i += stride) {{ {vt} q = __ldg(xv + i); v += {add}; }}\n"
            f"    for (int i = nv * {w} + tid; i < n; i += stride) v += fval(__ldg(x + i));\n"
            "    v = warp_sum(v);\n"
            "    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;\n"
            "    if (lane == 0) ws[wp] = v;\n"
            "    __syncthreads();\n"
            "    if (wp == 0) {\n"
            f"        v = lane < 8 ? ws[lane] : ({a})0;\n"
            "        v = warp_sum(v);\n"
            "        if (lane == 0) part[blockIdx.x] = v;\n    }\n}\n\n"
            f"__global__ void sum_parts(int m, const {a}* part, {a}* out) {{\n"
            f"    __shared__ {a} ws[32];\n"
            f"    {a} v = 0;\n"
            "    for (int i = threadIdx.x; i < m; i += blockDim.x) v += part[i];\n"
            "    v = warp_sum(v);\n"
            "    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;\n"
            "    if (lane == 0) ws[wp] = v;\n"
            "    __syncthreads();\n"
            "    if (wp == 0) {\n"
            f"        v = ws[lane];\n"
            "        v = warp_sum(v);\n"
            "        if (lane == 0) out[0] = v;\n    }\n}\n\n"
            + s.entry() + s.upload()
            + f"    int blocks = (n / {w} + 255) / 256; if (blocks > 1024) blocks = 1024; if (blocks < 1) blocks = 1;\n"
            f"    {a} *dpart, *dout;\n    cudaMalloc(&dpart, (size_t)blocks * sizeof({a})); cudaMalloc(&dout, sizeof({a}));\n"
            "    sum_vec<<<blocks, 256>>>(n, dx, dpart);\n"
            "    sum_parts<<<1, 1024>>>(blocks, dpart, dout);\n"
            f"    {a} total; cudaMemcpy(&total, dout, sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dpart); cudaFree(dout);\n"
            f"    {s.finish('total')}\n}}\n")


def _single_block(s: Spec) -> str:
    a = s.a
    return (s.head + f"__global__ void one_block(int n, const {s.t}* x, {a}* out) {{\n"
            f"    __shared__ {a} sh[1024];\n"
            f"    int t = threadIdx.x; {a} v = 0;\n"
            "    for (int i = t; i < n; i += 1024) v += fval(x[i]);\n"
            "    sh[t] = v;\n    __syncthreads();\n"
            "    for (int h = 512; h > 0; h >>= 1) {\n"
            "        if (t < h) sh[t] += sh[t + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (t == 0) out[0] = sh[0];\n}\n\n"
            + s.entry() + s.upload()
            + f"    {a}* dout; cudaMalloc(&dout, sizeof({a}));\n"
            "    one_block<<<1, 1024>>>(n, dx, dout);\n"
            f"    {a} total; cudaMemcpy(&total, dout, sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dx); cudaFree(dout);\n"
            f"    {s.finish('total')}\n}}\n")


def _host_finish(s: Spec) -> str:
    a = s.a
    return (s.head + f"__global__ void block_sum4(int n, const {s.t}* x, {a}* part) {{\n"
            f"    __shared__ {a} sh[512];\n"
            "    int t = threadIdx.x; size_t base = (size_t)blockIdx.x * 2048;\n"
            f"    {a} v = 0;\n"
            "    for (int k = 0; k < 4; ++k) { size_t i = base + (size_t)k * 512 + t; if (i < (size_t)n) v += fval(x[i]); }\n"
            "    sh[t] = v;\n    __syncthreads();\n"
            "    for (int h = 256; h > 0; h >>= 1) {\n"
            "        if (t < h) sh[t] += sh[t + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + s.entry() + s.upload()
            + "    int blocks = (int)(((size_t)n + 2047) / 2048);\n"
            f"    {a}* dpart; cudaMalloc(&dpart, (size_t)blocks * sizeof({a}));\n"
            "    block_sum4<<<blocks, 512>>>(n, dx, dpart);\n"
            f"    {a}* hpart = ({a}*)malloc((size_t)blocks * sizeof({a}));\n"
            f"    cudaMemcpy(hpart, dpart, (size_t)blocks * sizeof({a}), cudaMemcpyDeviceToHost);\n"
            f"    {a} total = 0;\n    for (int b = 0; b < blocks; ++b) total += hpart[b];\n"
            "    free(hpart); cudaFree(dx); cudaFree(dpart);\n"
            f"    {s.finish('total')}\n}}\n")


def _pinned_streams(s: Spec) -> str:
    a, t = s.a, s.t
    return (s.head + f"__global__ void chunk_sum(int m, const {t}* __restrict__ x, {a}* acc) {{\n"
            f"    __shared__ {a} ws[8];\n"
            f"    {a} v = 0;\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) v += fval(x[i]);\n"
            "    v = warp_sum(v);\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) ws[w] = v;\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            f"        v = lane < 8 ? ws[lane] : ({a})0;\n"
            "        v = warp_sum(v);\n"
            "        if (lane == 0) acc_atomic(acc, v);\n    }\n}\n\n"
            + s.entry()
            + "    const int C = 1 << 21;\n"
            "    int nch = (n + C - 1) / C;\n"
            f"    {t} *hbuf[2], *dbuf[2]; cudaStream_t st[2];\n"
            "    for (int k = 0; k < 2; ++k) {\n"
            f"        cudaMallocHost(&hbuf[k], (size_t)C * sizeof({t}));\n"
            f"        cudaMalloc(&dbuf[k], (size_t)C * sizeof({t}));\n"
            "        cudaStreamCreate(&st[k]);\n    }\n"
            f"    {a}* dacc; cudaMalloc(&dacc, (size_t)nch * sizeof({a})); cudaMemset(dacc, 0, (size_t)nch * sizeof({a}));\n"
            "    for (int c = 0; c < nch; ++c) {\n"
            "        int k = c & 1; size_t lo = (size_t)c * C; int m = (int)((size_t)n - lo < (size_t)C ? (size_t)n - lo : (size_t)C);\n"
            "        cudaStreamSynchronize(st[k]);\n"
            f"        memcpy(hbuf[k], x + lo, (size_t)m * sizeof({t}));\n"
            f"        cudaMemcpyAsync(dbuf[k], hbuf[k], (size_t)m * sizeof({t}), cudaMemcpyHostToDevice, st[k]);\n"
            "        int blocks = (m + 255) / 256; if (blocks > 512) blocks = 512;\n"
            "        chunk_sum<<<blocks, 256, 0, st[k]>>>(m, dbuf[k], dacc + c);\n    }\n"
            "    cudaDeviceSynchronize();\n"
            f"    {a}* hacc = ({a}*)malloc((size_t)nch * sizeof({a}));\n"
            f"    cudaMemcpy(hacc, dacc, (size_t)nch * sizeof({a}), cudaMemcpyDeviceToHost);\n"
            f"    {a} total = 0;\n    for (int c = 0; c < nch; ++c) total += hacc[c];\n"
            "    free(hacc); cudaFree(dacc);\n"
            "    for (int k = 0; k < 2; ++k) { cudaStreamDestroy(st[k]); cudaFreeHost(hbuf[k]); cudaFree(dbuf[k]); }\n"
            f"    {s.finish('total')}\n}}\n")


def _chunked(s: Spec) -> str:
    a, t = s.a, s.t
    return (s.head + f"__global__ void tree128(int m, const {t}* x, {a}* part) {{\n"
            f"    __shared__ {a} sh[128];\n"
            "    int t = threadIdx.x; int i = blockIdx.x * 128 + t;\n"
            f"    sh[t] = i < m ? fval(x[i]) : ({a})0;\n"
            "    __syncthreads();\n"
            "    for (int h = 64; h > 0; h >>= 1) {\n"
            "        if (t < h) sh[t] += sh[t + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + s.entry()
            + f"    const int C = 1 << 16;\n    {t}* dx; {a}* dpart;\n"
            f"    cudaMalloc(&dx, (size_t)C * sizeof({t})); cudaMalloc(&dpart, (C / 128) * sizeof({a}));\n"
            f"    {a} hpart[C / 128]; {a} total = 0;\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C; int blocks = (m + 127) / 128;\n"
            f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "        tree128<<<blocks, 128>>>(m, dx, dpart);\n"
            f"        cudaMemcpy(hpart, dpart, (size_t)blocks * sizeof({a}), cudaMemcpyDeviceToHost);\n"
            "        for (int b = 0; b < blocks; ++b) total += hpart[b];\n    }\n"
            "    cudaFree(dx); cudaFree(dpart);\n"
            f"    {s.finish('total')}\n}}\n")


def _small_grid(s: Spec) -> str:
    a, t = s.a, s.t
    return (s.head + f"__global__ void serial_chunks(int n, int chunk, const {t}* x, {a}* part) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    size_t lo = (size_t)g * chunk; size_t hi = lo + chunk; if (hi > (size_t)n) hi = n;\n"
            f"    {a} v = 0;\n"
            "    for (size_t i = lo; i < hi; ++i) v += fval(x[i]);\n"
            "    part[g] = v;\n}\n\n"
            + s.entry() + s.upload()
            + "    const int T = 64 * 64; int chunk = (n + T - 1) / T;\n"
            f"    {a}* dpart; cudaMalloc(&dpart, T * sizeof({a}));\n"
            "    serial_chunks<<<64, 64>>>(n, chunk, dx, dpart);\n"
            f"    {a}* hpart = ({a}*)malloc(T * sizeof({a}));\n"
            f"    cudaMemcpy(hpart, dpart, T * sizeof({a}), cudaMemcpyDeviceToHost);\n"
            f"    {a} total = 0;\n    for (int g = 0; g < T; ++g) total += hpart[g];\n"
            "    free(hpart); cudaFree(dx); cudaFree(dpart);\n"
            f"    {s.finish('total')}\n}}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = ["float", "double", "int"][index % 3]
    ret = index % 2 == 0
    k = index // 3
    fn = "sum_" + ("returned" if ret else "into") + f"_{t}"
    if t == "int":
        name, n_time = INT_EXPRS[k % len(INT_EXPRS)]
        a = "long long"
        body = INT_FUNCS[name]
        lo, hi = [(-100000, 100000), (0, 1 << 30), (-1 << 30, 1 << 30)][int(rng.integers(3))]
        dist = {"kind": "randint", "low": lo, "high": hi}
        desc_f = {"mix": "a 64-bit mixing hash of x, low 20 bits", "modsq": "(x*x + 7*x) mod 1000003 in 64 bits",
                  "split": "a splitmix-style 64-bit hash of x, low 16 bits, minus 30000"}[name]
        tol = {"rtol": 0.0, "atol": 0.0}
        expr = name
    else:
        pool = FLOAT_EXPRS if t == "float" else FLOAT_EXPRS[1:]
        e, (lo, hi), n_time = pool[k % len(pool)]
        expr = _fexpr(e, t)
        a = "double"
        body = f"return (double)({expr});"
        if t == "double":
            n_time = n_time // 2
        dist = {"kind": "uniform", "low": lo, "high": hi}
        desc_f = expr
        tol = {"rtol": 1e-5, "atol": 1e-6} if t == "float" else {"rtol": 1e-9, "atol": 1e-9}
    n_time += int(rng.integers(0, 1000))
    s = Spec(t, a, body, fn, ret)
    args = [{"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": dist}]
    if not ret:
        args.append({"name": "result", "role": "out", "ctype": a, "length": 1})
    ref_body = f"static {a} fval({t} x) {{\n    {body}\n}}\n\n"
    if ret:
        ref_fn = (f"{a} {fn}(int n, const {t}* x) {{\n    {a} s = 0;\n"
                  "    for (int i = 0; i < n; ++i) s += fval(x[i]);\n    return s;\n}\n")
    else:
        ref_fn = (f"void {fn}(int n, const {t}* x, {a}* result) {{\n    {a} s = 0;\n"
                  "    for (int i = 0; i < n; ++i) s += fval(x[i]);\n    result[0] = s;\n}\n")
    where = "returned" if ret else "written to result[0]"
    task = {
        "function_name": fn,
        "description": (f"Sum over i < n of f(x[i]) for {t} x, accumulated in {a} and {where}, with f(x) = {desc_f}."
                        + (" Any summation order is accepted within the tolerance." if t != "int" else "")),
        "returns": a if ret else "void",
        "args": args,
        "size_configs": [{"n": 1000 + int(rng.integers(0, 500))}, {"n": 77_777 + int(rng.integers(0, 20000))},
                         {"n": 200}, {"n": n_time}],
        "tolerance": tol,
        "reference_c": "#include <math.h>\n\n" + ref_body + ref_fn,
        "tags": ["reduction", "memory-bound" if expr in ("x", "x * x + fabsf(x)") else "compute-bound", t],
    }
    variants = (
        Variant("atomic_per_element", ("naive", "atomics", "coalesced", "block_256", "pageable"), _atomic_naive(s)),
        Variant("tree_two_pass", ("tree_reduction", "multi_pass", "two_level", "coalesced", "block_256", "pageable"),
                _tree_two_pass(s)),
        Variant("shuffle_block_atomic", ("grid_stride", "warp_shuffle", "atomics", "coalesced", "block_256", "pageable"),
                _shuffle_atomic(s)),
        Variant("vectorized_shuffle", ("vectorized", "grid_stride", "warp_shuffle", "two_level", "multi_pass",
                                       "readonly_cache", "coalesced", "block_256", "pageable"), _vectorized(s)),
        Variant("single_block", ("single_thread", "tree_reduction", "coalesced", "block_1024", "pageable"),
                _single_block(s)),
        Variant("host_finish", ("tree_reduction", "two_level", "host_compute", "coalesced", "block_512", "pageable"),
                _host_finish(s)),
        Variant("pinned_streams", ("pinned", "async_streams", "double_buffered", "grid_stride", "warp_shuffle",
                                   "atomics", "host_compute", "block_256"), _pinned_streams(s)),
        Variant("chunked_sync", ("in_loop_transfers", "many_launches", "tree_reduction", "host_compute", "block_128"),
                _chunked(s)),
        Variant("small_grid_serial", ("small_grid", "strided", "host_compute", "block_64", "pageable"), _small_grid(s)),
    )
    return GeneratedTask(task, variants, {"type": t, "f": expr, "returns_scalar": ret, "n_time": n_time})


FAMILY = Family(
    name="sum_reduce",
    description="sum of f(x[i]) over float (double accumulation), double or int (long long) arrays",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
