"""Element-wise maps ``z[i] = f(x[i], y[i])`` with transcendental expressions, in float or double.

Parameters: the expression (from a pool of 12), the element type, and the sizes. The expressions are heavy
enough (several libm calls per element) that a GPU variant wins even with the transfers in the timed call.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# f(x, y) written with {f} as the libm suffix ("f" for float, "" for double) and {one} etc. for literals.
EXPRESSIONS = [
    "sin{f}(x) * cos{f}(y) + x * y",
    "exp{f}(-x * x) * y + sqrt{f}(x * x + y * y + {one})",
    "log{f}({one} + x * x) - tanh{f}(y) * x",
    "pow{f}(fabs{f}(x) + {one}, {half}) * sin{f}(y)",
    "atan2{f}(y, x + {two}) + exp{f}(-fabs{f}(y))",
    "cbrt{f}(x * y + {two}) * cos{f}(x - y)",
    "sinh{f}(x * {half}) - cosh{f}(y * {half}) + x",
    "erf{f}(x) * {half} + y * exp{f}(-y * y)",
    "hypot{f}(x, y) * log1p{f}(x * x)",
    "sin{f}(x + y) * sin{f}(x - y) + cos{f}(x * y)",
    "tanh{f}(x * y) + atan{f}(x) * {half}",
    "exp{f}(sin{f}(x)) - log{f}({two} + cos{f}(y))",
]

SIZES = [(1 << 22) + 3, (1 << 22) + 1001, 3_000_017, 5_000_011]


def _lit(t: str, v: str) -> str:
    return f"{v}f" if t == "float" else v


def _expr(index: int, t: str) -> str:
    e = EXPRESSIONS[index % len(EXPRESSIONS)]
    return e.format(f="f" if t == "float" else "", one=_lit(t, "1.0"), half=_lit(t, "0.5"), two=_lit(t, "2.0"))


HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n\n"


def _device_fn(t: str, expr: str) -> str:
    return f"__device__ __forceinline__ {t} fmap({t} x, {t} y) {{ return {expr}; }}\n\n"


def _alloc_copy(t: str) -> str:
    return (f"    size_t bytes = (size_t)n * sizeof({t});\n"
            f"    {t} *dx, *dy, *dz;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes); cudaMalloc(&dz, bytes);\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);\n")


FREE = "    cudaFree(dx); cudaFree(dy); cudaFree(dz);\n"


def _naive(t: str, expr: str, block: int) -> str:
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_kernel(int n, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n" + _alloc_copy(t)
            + f"    map_kernel<<<(n + {block - 1}) / {block}, {block}>>>(n, dx, dy, dz);\n"
            "    cudaMemcpy(z, dz, bytes, cudaMemcpyDeviceToHost);\n" + FREE + "}\n")


def _grid_stride(t: str, expr: str) -> str:
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_kernel(int n, const {t}* __restrict__ x, const {t}* __restrict__ y,"
            f" {t}* __restrict__ z) {{\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            "        z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n" + _alloc_copy(t)
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    map_kernel<<<sms * 8, 256>>>(n, dx, dy, dz);\n"
            "    cudaMemcpy(z, dz, bytes, cudaMemcpyDeviceToHost);\n" + FREE + "}\n")


def _vectorized(t: str, expr: str) -> str:
    v = "float4" if t == "float" else "double2"
    w = 4 if t == "float" else 2
    comps = ["x", "y", "z", "w"][:w]
    body = "\n".join(f"        r.{c} = fmap(a.{c}, b.{c});" for c in comps)
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_vec(int nv, const {v}* __restrict__ x, const {v}* __restrict__ y,"
            f" {v}* __restrict__ z) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < nv) {{\n        {v} a = x[i], b = y[i], r;\n{body}\n        z[i] = r;\n    }}\n}}\n\n"
            + f"__global__ void map_tail(int start, int n, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    int i = start + threadIdx.x;\n"
            "    if (i < n) z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n" + _alloc_copy(t)
            + f"    int nv = n / {w};\n"
            f"    if (nv > 0) map_vec<<<(nv + 255) / 256, 256>>>(nv, (const {v}*)dx, (const {v}*)dy, ({v}*)dz);\n"
            f"    if (nv * {w} < n) map_tail<<<1, {w}>>>(nv * {w}, n, dx, dy, dz);\n"
            "    cudaMemcpy(z, dz, bytes, cudaMemcpyDeviceToHost);\n" + FREE + "}\n")


def _streams_registered(t: str, expr: str) -> str:
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_kernel(int n, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n" + f"    size_t bytes = (size_t)n * sizeof({t});\n"
            f"    {t} *dx, *dy, *dz;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes); cudaMalloc(&dz, bytes);\n"
            "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)z, bytes, cudaHostRegisterDefault);\n"
            "    const int S = 4;\n"
            "    cudaStream_t s[S];\n"
            "    for (int k = 0; k < S; ++k) cudaStreamCreate(&s[k]);\n"
            "    int chunk = (n + S - 1) / S;\n"
            "    for (int k = 0; k < S; ++k) {\n"
            "        int lo = k * chunk; int m = n - lo < chunk ? n - lo : chunk;\n"
            "        if (m <= 0) break;\n"
            f"        size_t b = (size_t)m * sizeof({t});\n"
            "        cudaMemcpyAsync(dx + lo, x + lo, b, cudaMemcpyHostToDevice, s[k]);\n"
            "        cudaMemcpyAsync(dy + lo, y + lo, b, cudaMemcpyHostToDevice, s[k]);\n"
            "        map_kernel<<<(m + 255) / 256, 256, 0, s[k]>>>(m, dx + lo, dy + lo, dz + lo);\n"
            "        cudaMemcpyAsync(z + lo, dz + lo, b, cudaMemcpyDeviceToHost, s[k]);\n"
            "    }\n"
            "    for (int k = 0; k < S; ++k) { cudaStreamSynchronize(s[k]); cudaStreamDestroy(s[k]); }\n"
            "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y); cudaHostUnregister((void*)z);\n"
            + FREE + "}\n")


def _chunked_launches(t: str, expr: str) -> str:
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_kernel(int n, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n"
            f"    const int C = 1 << 16;\n    {t} *dx, *dy, *dz;\n"
            f"    size_t cb = (size_t)C * sizeof({t});\n"
            "    cudaMalloc(&dx, cb); cudaMalloc(&dy, cb); cudaMalloc(&dz, cb);\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            f"        size_t b = (size_t)m * sizeof({t});\n"
            "        cudaMemcpy(dx, x + lo, b, cudaMemcpyHostToDevice);\n"
            "        cudaMemcpy(dy, y + lo, b, cudaMemcpyHostToDevice);\n"
            "        map_kernel<<<(m + 127) / 128, 128>>>(m, dx, dy, dz);\n"
            "        cudaMemcpy(z + lo, dz, b, cudaMemcpyDeviceToHost);\n"
            "    }\n" + FREE + "}\n")


def _strided(t: str, expr: str) -> str:
    return (HEAD + _device_fn(t, expr)
            + f"__global__ void map_strided(int n, int rows, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    // thread t handles element (t % rows) * cols + t / rows: neighbouring threads are cols apart\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int cols = (n + rows - 1) / rows;\n"
            "    int i = (t % rows) * cols + t / rows;\n"
            "    if (t < rows * cols && i < n) z[i] = fmap(x[i], y[i]);\n}\n\n"
            + f'extern "C" void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n'
            "    if (n <= 0) return;\n" + _alloc_copy(t)
            + "    int rows = 1024; int cols = (n + rows - 1) / rows; int total = rows * cols;\n"
            "    map_strided<<<(total + 255) / 256, 256>>>(n, rows, dx, dy, dz);\n"
            "    cudaMemcpy(z, dz, bytes, cudaMemcpyDeviceToHost);\n" + FREE + "}\n")


def _reference(t: str, expr: str) -> str:
    cexpr = expr
    return ("#include <math.h>\n\n"
            f"static {t} fmap({t} x, {t} y) {{ return {cexpr}; }}\n\n"
            f"void emap(int n, const {t}* x, const {t}* y, {t}* z) {{\n"
            "    for (int i = 0; i < n; ++i) z[i] = fmap(x[i], y[i]);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    expr = _expr(index // 2, t)
    n_time = SIZES[int(rng.integers(len(SIZES)))] // (1 if t == "float" else 2)
    lo, hi = (-2.0, 2.0) if index % 3 else (-1.0, 1.0)
    tol = {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-11}
    task = {
        "function_name": "emap",
        "description": f"z[i] = f(x[i], y[i]) for i < n over {t}s, with f(x, y) = {expr}.",
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": {"kind": "uniform", "low": lo, "high": hi}},
            {"name": "y", "role": "in", "ctype": t, "length": "n", "dist": {"kind": "uniform", "low": lo, "high": hi}},
            {"name": "z", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": [{"n": 1000}, {"n": 65537 + int(rng.integers(1000))}, {"n": n_time}],
        "tolerance": tol,
        "reference_c": _reference(t, expr),
        "tags": ["elementwise", "compute-bound", t],
    }
    variants = (
        Variant("naive_b256", ("naive", "coalesced", "block_256", "pageable"), _naive(t, expr, 256)),
        Variant("naive_b32", ("naive", "coalesced", "block_32", "pageable"), _naive(t, expr, 32)),
        Variant("naive_b1024", ("naive", "coalesced", "block_1024", "pageable"), _naive(t, expr, 1024)),
        Variant("grid_stride", ("grid_stride", "coalesced", "block_256", "readonly_cache", "pageable"),
                _grid_stride(t, expr)),
        Variant("vectorized", ("vectorized", "coalesced", "block_256", "pageable"), _vectorized(t, expr)),
        Variant("streams_pinned", ("async_streams", "pinned", "coalesced", "block_256"),
                _streams_registered(t, expr)),
        Variant("chunked", ("many_launches", "in_loop_transfers", "block_128"), _chunked_launches(t, expr)),
        Variant("strided", ("strided", "block_256", "pageable"), _strided(t, expr)),
    )
    return GeneratedTask(task, variants, {"type": t, "expression": expr, "n_time": n_time})


FAMILY = Family(
    name="elementwise_map",
    description="z[i] = f(x[i], y[i]) with transcendental expressions (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("elementwise",),
)
