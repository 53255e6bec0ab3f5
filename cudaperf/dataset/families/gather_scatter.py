"""Gathers y[i] = f(x[idx[i]]) and scatters y[idx[i]] = f(x[i]) through index arrays.

Gathers use a random permutation or random indices in [0, n) (repeats allowed); scatters always use a permutation
so every y element is written exactly once. The map f varies per task (float/double math with libm calls, or an
integer hash of R rounds for int), heavy enough that the GPU wins with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

FLOAT_F = [
    "sqrt{f}(fabs{f}(v)) * {c1} + v * v",
    "exp{f}(-v * v) + {half} * v",
    "sin{f}(v) * cos{f}({two} * v)",
    "v / ({one} + fabs{f}(v)) + log{f}({one} + v * v)",
    "tanh{f}(v) * {c1} - atan{f}(v)",
    "cbrt{f}(v) + exp{f}({half} * v)",
]
HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n\n"


def _lit(t: str, v: str) -> str:
    return f"{v}f" if t == "float" else v


def _f_fn(qual: str, p: dict) -> str:
    t = p["type"]
    if t == "int":
        return (f"{qual} int fmap(int x) {{\n    unsigned int v = (unsigned int)x;\n"
                f"    for (int r = 0; r < {p['rounds']}; ++r) {{\n"
                f"        v ^= v >> 16; v *= 0x{p['m']:08X}u; v ^= v >> 13; v += 0x9E3779B9u;\n"
                "    }\n    return (int)(v >> 1);\n}\n\n")
    return f"{qual} {t} fmap({t} v) {{ return {p['expr']}; }}\n\n"


def _pre(p: dict) -> str:
    return HEAD + _f_fn("__device__ __forceinline__", p)


def _sig(p: dict) -> str:
    t = p["type"]
    return f'extern "C" void {p["fname"]}(int n, const {t}* x, const int* idx, {t}* y)'


def _stmt(p: dict, i: str) -> str:
    """The per-element statement for index expression ``i``."""
    if p["mode"] == "gather":
        return f"y[{i}] = fmap(x[idx[{i}]]);"
    return f"y[idx[{i}]] = fmap(x[{i}]);"


def _io(p: dict) -> str:
    t = p["type"]
    return ("    if (n <= 0) return;\n"
            f"    size_t bytes = (size_t)n * sizeof({t}), ibytes = (size_t)n * sizeof(int);\n"
            f"    {t} *dx, *dy; int* di;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes); cudaMalloc(&di, ibytes);\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(di, idx, ibytes, cudaMemcpyHostToDevice);\n")


OUT = ("    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
       "    cudaFree(dx); cudaFree(dy); cudaFree(di);\n}\n")


def _kparams(p: dict, restrict: bool = False) -> str:
    t = p["type"]
    r = " __restrict__" if restrict else ""
    return f"int n, const {t}*{r} x, const int*{r} idx, {t}*{r} y"


def _naive(p: dict, block: int) -> str:
    return (_pre(p)
            + f"__global__ void gs_kernel({_kparams(p)}) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {_stmt(p, 'i')}\n}}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + f"    gs_kernel<<<(n + {block - 1}) / {block}, {block}>>>(n, dx, di, dy);\n" + OUT)


def _grid_stride(p: dict) -> str:
    if p["mode"] == "gather":
        st = "y[i] = fmap(__ldg(&x[__ldg(&idx[i])]));"
    else:
        st = "y[__ldg(&idx[i])] = fmap(__ldg(&x[i]));"
    return (_pre(p)
            + f"__global__ void gs_kernel({_kparams(p, True)}) {{\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            f"        {st}\n}}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    gs_kernel<<<sms * 16, 512>>>(n, dx, di, dy);\n" + OUT)


def _vectorized(p: dict) -> str:
    if p["mode"] == "gather":
        body = ("        int4 k = idx4[q];\n"
                "        int b = 4 * q;\n"
                "        y[b] = fmap(x[k.x]); y[b + 1] = fmap(x[k.y]); y[b + 2] = fmap(x[k.z]); y[b + 3] = fmap(x[k.w]);\n")
    else:
        body = ("        int4 k = idx4[q];\n"
                "        int b = 4 * q;\n"
                "        y[k.x] = fmap(x[b]); y[k.y] = fmap(x[b + 1]); y[k.z] = fmap(x[b + 2]); y[k.w] = fmap(x[b + 3]);\n")
    return (_pre(p)
            + f"__global__ void gs_vec({_kparams(p, True)}) {{\n"
            "    int q = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    const int4* idx4 = reinterpret_cast<const int4*>(idx);\n"
            f"    if (q < n / 4) {{\n{body}    }}\n"
            "    int tail = 4 * (n / 4) + q;\n"
            f"    if (q < 4 && tail < n) {{ int i = tail; {_stmt(p, 'i')} }}\n}}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    int nq = n / 4 > 4 ? n / 4 : 4;\n"
            "    gs_vec<<<(nq + 127) / 128, 128>>>(n, dx, di, dy);\n" + OUT)


def _strided(p: dict) -> str:
    return (_pre(p)
            + f"__global__ void gs_strided(int rows, {_kparams(p)}) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int cols = (n + rows - 1) / rows;\n"
            "    int i = (t % rows) * cols + t / rows;\n"
            f"    if (t < rows * cols && i < n) {_stmt(p, 'i')}\n}}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    int rows = 2048; int cols = (n + rows - 1) / rows; int total = rows * cols;\n"
            "    gs_strided<<<(total + 255) / 256, 256>>>(rows, n, dx, di, dy);\n" + OUT)


def _streams(p: dict) -> str:
    t = p["type"]
    g = p["mode"] == "gather"
    if g:
        chunk_in = ("        cudaMemcpyAsync(di + lo, idx + lo, (size_t)m * sizeof(int), cudaMemcpyHostToDevice, st[k]);\n")
        chunk_out = f"        cudaMemcpyAsync(y + lo, dy + lo, (size_t)m * sizeof({t}), cudaMemcpyDeviceToHost, st[k]);\n"
        pre_loop = "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
        kern = "        gs_chunk<<<(m + 255) / 256, 256, 0, st[k]>>>(lo, m, dx, di, dy);\n"
        post = ""
    else:
        chunk_in = (f"        cudaMemcpyAsync(dx + lo, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice, st[k]);\n"
                    "        cudaMemcpyAsync(di + lo, idx + lo, (size_t)m * sizeof(int), cudaMemcpyHostToDevice, st[k]);\n")
        chunk_out = ""
        pre_loop = ""
        kern = "        gs_chunk<<<(m + 255) / 256, 256, 0, st[k]>>>(lo, m, dx, di, dy);\n"
        post = "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
    st = ("y[i] = fmap(x[idx[i]]);" if g else "y[idx[i]] = fmap(x[i]);")
    return (_pre(p)
            + f"__global__ void gs_chunk(int lo, int m, const {t}* x, const int* idx, {t}* y) {{\n"
            "    int i = lo + blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < lo + m) {st}\n}}\n\n"
            + _sig(p) + " {\n"
            "    if (n <= 0) return;\n"
            f"    size_t bytes = (size_t)n * sizeof({t}), ibytes = (size_t)n * sizeof(int);\n"
            f"    {t} *dx, *dy; int* di;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes); cudaMalloc(&di, ibytes);\n"
            "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)idx, ibytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n"
            + pre_loop
            + "    const int NS = 4;\n"
            "    cudaStream_t st[NS];\n"
            "    for (int k = 0; k < NS; ++k) cudaStreamCreate(&st[k]);\n"
            "    int chunk = (n + NS - 1) / NS;\n"
            "    for (int k = 0; k < NS; ++k) {\n"
            "        int lo = k * chunk;\n"
            "        if (lo >= n) break;\n"
            "        int m = n - lo < chunk ? n - lo : chunk;\n"
            + chunk_in + kern + chunk_out
            + "    }\n"
            "    for (int k = 0; k < NS; ++k) { cudaStreamSynchronize(st[k]); cudaStreamDestroy(st[k]); }\n"
            + post
            + "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)idx); cudaHostUnregister((void*)y);\n"
            "    cudaFree(dx); cudaFree(dy); cudaFree(di);\n}\n")


def _chunked(p: dict) -> str:
    t = p["type"]
    g = p["mode"] == "gather"
    st = ("y[i] = fmap(x[idx[i]]);" if g else "y[idx[i]] = fmap(x[i]);")
    if g:
        setup = (f"    {t} *dx, *dy; int* di;\n"
                 "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, (size_t)C * sizeof(" + t + ")); cudaMalloc(&di, (size_t)C * sizeof(int));\n"
                 "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n")
        loop = ("        cudaMemcpy(di, idx + lo, (size_t)m * sizeof(int), cudaMemcpyHostToDevice);\n"
                "        gs_part<<<(m + 127) / 128, 128>>>(m, dx, di, dy);\n"
                f"        cudaMemcpy(y + lo, dy, (size_t)m * sizeof({t}), cudaMemcpyDeviceToHost);\n")
        post = ""
    else:
        setup = (f"    {t} *dx, *dy; int* di;\n"
                 "    cudaMalloc(&dx, (size_t)C * sizeof(" + t + ")); cudaMalloc(&dy, bytes); cudaMalloc(&di, (size_t)C * sizeof(int));\n")
        loop = (f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
                "        cudaMemcpy(di, idx + lo, (size_t)m * sizeof(int), cudaMemcpyHostToDevice);\n"
                "        gs_part<<<(m + 127) / 128, 128>>>(m, dx, di, dy);\n")
        post = "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
    return (_pre(p)
            + f"__global__ void gs_part(int m, const {t}* x, const int* idx, {t}* y) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < m) {st}\n}}\n\n"
            + _sig(p) + " {\n"
            "    if (n <= 0) return;\n"
            f"    size_t bytes = (size_t)n * sizeof({t});\n"
            "    const int C = 1 << 16;\n"
            + setup
            + "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C;\n"
            + loop + "    }\n" + post
            + "    cudaFree(dx); cudaFree(dy); cudaFree(di);\n}\n")


def _host_f(p: dict) -> str:
    """The device only moves the data; f is applied on the host afterwards."""
    g = p["mode"] == "gather"
    st = "y[i] = x[idx[i]];" if g else "y[idx[i]] = x[i];"
    return (_pre(p).replace("__device__ __forceinline__", "static inline")
            + f"__global__ void move_kernel({_kparams(p)}) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {st}\n}}\n\n"
            + _sig(p) + " {\n" + _io(p)
            + "    move_kernel<<<(n + 255) / 256, 256>>>(n, dx, di, dy);\n"
            "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n"
            "    for (int i = 0; i < n; ++i) y[i] = fmap(y[i]);\n"
            "    cudaFree(dx); cudaFree(dy); cudaFree(di);\n}\n")


def _reference(p: dict) -> str:
    t = p["type"]
    st = "y[i] = fmap(x[idx[i]]);" if p["mode"] == "gather" else "y[idx[i]] = fmap(x[i]);"
    return ("#include <math.h>\n\n" + _f_fn("static inline", p)
            + f"void {p['fname']}(int n, const {t}* x, const int* idx, {t}* y) {{\n"
            f"    for (int i = 0; i < n; ++i) {st}\n}}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = ["float", "double", "int"][index % 3]
    mode = "gather" if index % 2 == 0 else "scatter"
    perm = mode == "scatter" or (index // 2) % 2 == 0
    p: dict = {"type": t, "mode": mode, "fname": mode}
    if t == "int":
        p.update(rounds=int(rng.choice([3, 4, 6])),
                 m=int(rng.choice([0x7FEB352D, 0x846CA68B, 0x85EBCA6B, 0xC2B2AE35])))
        fdesc = (f"{p['rounds']} rounds of (v ^= v >> 16; v *= 0x{p['m']:08X}; v ^= v >> 13; v += 0x9E3779B9) on "
                 "(unsigned)v, then >> 1")
        dist = {"kind": "randint", "low": -2_000_000_000, "high": 2_000_000_000}
        tol = {"rtol": 0.0, "atol": 0.0}
        n_time = 800_000
    else:
        e = FLOAT_F[(index // 3 + int(rng.integers(2))) % len(FLOAT_F)]
        sfx = "f" if t == "float" else ""
        c1 = float(rng.choice([0.5, 1.5, 2.0]))
        p["expr"] = e.format(f=sfx, one=_lit(t, "1.0"), half=_lit(t, "0.5"), two=_lit(t, "2.0"),
                             c1=_lit(t, repr(c1)))
        fdesc = p["expr"]
        lo = 0.1 if "cbrt" in e else -3.0
        dist = {"kind": "uniform", "low": lo, "high": 3.0}
        tol = {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-11}
        n_time = 1_000_000 if t == "float" else 700_000
        if any(k in e for k in ("tanh", "atan", "cbrt")):
            n_time //= 3
    n_time += int(rng.integers(1, 5000))
    idist = {"kind": "permutation"} if perm else {"kind": "randint", "low": 0, "high": "n"}
    what = ("y[i] = f(x[idx[i]])" if mode == "gather" else "y[idx[i]] = f(x[i])")
    task = {
        "function_name": mode,
        "description": (f"{mode.capitalize()} over {t}: {what} for i < n, idx "
                        f"{'a permutation of 0..n-1' if perm else 'random indices in [0, n)'}, with f(v) = {fdesc}."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": dist},
            {"name": "idx", "role": "in", "ctype": "int", "length": "n", "dist": idist},
            {"name": "y", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": [{"n": 3}, {"n": 1001}, {"n": 65537 + int(rng.integers(5000))}, {"n": n_time}],
        "tolerance": tol,
        "reference_c": _reference(p),
        "tags": [mode, "indirect", t],
    }
    variants = (
        Variant("naive_b256", ("naive", "block_256", "pageable"), _naive(p, 256)),
        Variant("naive_b32", ("naive", "block_32", "pageable"), _naive(p, 32)),
        Variant("grid_stride_ldg", ("grid_stride", "readonly_cache", "block_512", "pageable"), _grid_stride(p)),
        Variant("vectorized_idx", ("vectorized", "register_blocking", "block_128"), _vectorized(p)),
        Variant("streams_pinned", ("async_streams", "pinned", "block_256"), _streams(p)),
        Variant("strided", ("strided", "block_256"), _strided(p)),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "block_128"), _chunked(p)),
        Variant("host_map", ("host_compute", "naive", "block_256"), _host_f(p)),
    )
    return GeneratedTask(task, variants, {k: v for k, v in p.items()} | {"perm": perm, "n_time": n_time})


FAMILY = Family(
    name="gather_scatter",
    description="gathers y[i] = f(x[idx[i]]) and permutation scatters y[idx[i]] = f(x[i]) with heavy f",
    generate=generate,
    n_tasks=50,
    tags=("indirect", "memory-bound"),
)
