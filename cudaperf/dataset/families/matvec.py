"""Iterated matrix-vector products on a square row-major n x n matrix (float/double): iters times
y <- s * A y, y <- alpha * s * A y + b, or the transposed y <- s * A^T y (+ b), with s = 2 / n so the entries
(all positive) stay bounded.

Parameters: direct or transposed, plain or affine, the element type, n and the iteration count. Iterating keeps
A on the device, so the good variants (coalesced, warp/block reductions) win even with A's transfer counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

SIZES = [2048, 2500, 3001, 3500, 2222, 2801, 3333, 1999]


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


def _sig(affine: bool) -> str:
    if affine:
        return "void matvec(int n, int iters, @T@ alpha, const @T@* A, const @T@* b, @T@* y)"
    return "void matvec(int n, int iters, const @T@* A, @T@* y)"


def _epi_fn(affine: bool, raw: bool = False) -> str:
    body = "acc" if raw else ("alpha * (acc * s) + bv[i]" if affine else "acc * s")
    return ("__device__ __forceinline__ @T@ epi(@T@ acc, int i, @T@ s, @T@ alpha, const @T@* bv) {\n"
            f"    (void)i; (void)s; (void)alpha; (void)bv;\n    return {body};\n}}\n\n")


KP = "int cnt, int n, const @T@* __restrict__ A, const @T@* __restrict__ x, @T@* __restrict__ yo, @T@ s, @T@ alpha, const @T@* bv"

# ---- direct kernels: output i = row i of A dotted with x
K_THREAD_ROW = ("__global__ void mv(" + KP + ") {\n"
                "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= cnt) return;\n"
                "    const @T@* row = A + (size_t)i * n;\n    @T@ acc = 0;\n"
                "    for (int j = 0; j < n; ++j) acc += row[j] * x[j];\n"
                "    yo[i] = epi(acc, i, s, alpha, bv);\n}\n\n")
K_WARP_ROW = ("__global__ void mv(" + KP + ") {\n"
              "    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n    int lane = threadIdx.x & 31;\n"
              "    if (w >= cnt) return;   // uniform per warp\n"
              "    const @T@* row = A + (size_t)w * n;\n    @T@ acc = 0;\n"
              "    for (int j = lane; j < n; j += 32) acc += row[j] * x[j];\n"
              "    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);\n"
              "    if (lane == 0) yo[w] = epi(acc, w, s, alpha, bv);\n}\n\n")
K_WARP_ROW_VEC = ("__global__ void mv(" + KP + ") {\n"
                  "    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n    int lane = threadIdx.x & 31;\n"
                  "    if (w >= cnt) return;\n"
                  "    const @T@* row = A + (size_t)w * n;\n    @T@ acc = 0;\n"
                  "    if (n % @VW@ == 0) {\n"
                  "        const @V@* rv = (const @V@*)row;\n        const @V@* xv = (const @V@*)x;\n"
                  "        for (int j = lane; j < n / @VW@; j += 32) {\n"
                  "            @V@ a = rv[j], c = xv[j];\n            acc += @DOTV@;\n        }\n"
                  "    } else {\n"
                  "        for (int j = lane; j < n; j += 32) acc += row[j] * x[j];\n    }\n"
                  "    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);\n"
                  "    if (lane == 0) yo[w] = epi(acc, w, s, alpha, bv);\n}\n\n")
K_BLOCK_ROW = ("__global__ void mv(" + KP + ") {\n"
               "    __shared__ @T@ red[256];\n"
               "    int i = blockIdx.x, tid = threadIdx.x;\n"
               "    const @T@* row = A + (size_t)i * n;\n    @T@ acc = 0;\n"
               "    for (int j = tid; j < n; j += 256) acc += row[j] * x[j];\n"
               "    red[tid] = acc;\n    __syncthreads();\n"
               "    for (int h = 128; h > 0; h >>= 1) {\n"
               "        if (tid < h) red[tid] += red[tid + h];\n        __syncthreads();\n    }\n"
               "    if (tid == 0) yo[i] = epi(red[0], i, s, alpha, bv);\n}\n\n")
K_ROW_XSHARED = ("// thread per row; x staged through shared memory 256 entries at a time\n"
                 "__global__ void mv(" + KP + ") {\n"
                 "    __shared__ @T@ xs[256];\n"
                 "    int tid = threadIdx.x, i = blockIdx.x * 256 + tid;\n    @T@ acc = 0;\n"
                 "    for (int j0 = 0; j0 < n; j0 += 256) {\n"
                 "        int m = n - j0 < 256 ? n - j0 : 256;\n"
                 "        if (tid < m) xs[tid] = x[j0 + tid];\n        __syncthreads();\n"
                 "        if (i < cnt) for (int q = 0; q < m; ++q) acc += A[(size_t)i * n + j0 + q] * xs[q];\n"
                 "        __syncthreads();\n    }\n"
                 "    if (i < cnt) yo[i] = epi(acc, i, s, alpha, bv);\n}\n\n")

# ---- transposed kernels: output j = column j of A dotted with x
K_THREAD_COL = ("__global__ void mv(" + KP + ") {\n"
                "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n    if (j >= cnt) return;\n"
                "    @T@ acc = 0;\n"
                "    for (int i = 0; i < n; ++i) acc += A[(size_t)i * n + j] * x[i];\n"
                "    yo[j] = epi(acc, j, s, alpha, bv);\n}\n\n")
K_WARP_COL = ("// a warp per column: lanes read down the column, 32 rows apart\n"
              "__global__ void mv(" + KP + ") {\n"
              "    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n    int lane = threadIdx.x & 31;\n"
              "    if (w >= cnt) return;\n    @T@ acc = 0;\n"
              "    for (int i = lane; i < n; i += 32) acc += A[(size_t)i * n + w] * x[i];\n"
              "    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);\n"
              "    if (lane == 0) yo[w] = epi(acc, w, s, alpha, bv);\n}\n\n")
K_BLOCK_COL = ("__global__ void mv(" + KP + ") {\n"
               "    __shared__ @T@ red[256];\n"
               "    int j = blockIdx.x, tid = threadIdx.x;\n    @T@ acc = 0;\n"
               "    for (int i = tid; i < n; i += 256) acc += A[(size_t)i * n + j] * x[i];\n"
               "    red[tid] = acc;\n    __syncthreads();\n"
               "    for (int h = 128; h > 0; h >>= 1) {\n"
               "        if (tid < h) red[tid] += red[tid + h];\n        __syncthreads();\n    }\n"
               "    if (tid == 0) yo[j] = epi(red[0], j, s, alpha, bv);\n}\n\n")
K_COL_XSHARED = ("// thread per column; x staged through shared memory 256 entries at a time\n"
                 "__global__ void mv(" + KP + ") {\n"
                 "    __shared__ @T@ xs[256];\n"
                 "    int tid = threadIdx.x, j = blockIdx.x * 256 + tid;\n    @T@ acc = 0;\n"
                 "    for (int i0 = 0; i0 < n; i0 += 256) {\n"
                 "        int m = n - i0 < 256 ? n - i0 : 256;\n"
                 "        if (tid < m) xs[tid] = x[i0 + tid];\n        __syncthreads();\n"
                 "        if (j < cnt) for (int q = 0; q < m; ++q) acc += A[(size_t)(i0 + q) * n + j] * xs[q];\n"
                 "        __syncthreads();\n    }\n"
                 "    if (j < cnt) yo[j] = epi(acc, j, s, alpha, bv);\n}\n\n")
K_TWO_LEVEL = ("// stage 1: gridDim.y row slices each sum their part of every column; stage 2 adds the slices in order\n"
               "__global__ void mv_part(int n, int slice, const @T@* __restrict__ A, const @T@* __restrict__ x,"
               " @T@* __restrict__ part) {\n"
               "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n    if (j >= n) return;\n"
               "    int i0 = blockIdx.y * slice;\n    int i1 = i0 + slice < n ? i0 + slice : n;\n"
               "    @T@ acc = 0;\n"
               "    for (int i = i0; i < i1; ++i) acc += A[(size_t)i * n + j] * x[i];\n"
               "    part[(size_t)blockIdx.y * n + j] = acc;\n}\n\n"
               "__global__ void mv_finish(int n, int nparts, const @T@* __restrict__ part, @T@* __restrict__ yo,"
               " @T@ s, @T@ alpha, const @T@* bv) {\n"
               "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n    if (j >= n) return;\n"
               "    @T@ acc = 0;\n"
               "    for (int p = 0; p < nparts; ++p) acc += part[(size_t)p * n + j];\n"
               "    yo[j] = epi(acc, j, s, alpha, bv);\n}\n\n")


def _host(affine: bool, body: str, extra_alloc: str = "", extra_free: str = "", copy_a_once: bool = True) -> str:
    return ('extern "C" ' + _sig(affine) + " {\n"
            "    if (n <= 0 || iters <= 0) return;\n"
            "    size_t na = (size_t)n * n * sizeof(@T@), nv = (size_t)n * sizeof(@T@);\n"
            "    @T@ *dA, *dy, *dt, *db = 0;\n"
            "    cudaMalloc(&dA, na);\n    cudaMalloc(&dy, nv);\n    cudaMalloc(&dt, nv);\n"
            + ("    cudaMemcpy(dA, A, na, cudaMemcpyHostToDevice);\n" if copy_a_once else "")
            + "    cudaMemcpy(dy, y, nv, cudaMemcpyHostToDevice);\n"
            + ("    cudaMalloc(&db, nv);\n    cudaMemcpy(db, b, nv, cudaMemcpyHostToDevice);\n    @T@ al = alpha;\n"
               if affine else "    @T@ al = 0;\n")
            + "    @T@ s = (@T@)(2.0 / (double)n);\n" + extra_alloc
            + "    for (int it = 0; it < iters; ++it) {\n" + body
            + "        @T@* tmp = dy; dy = dt; dt = tmp;\n    }\n"
            "    cudaMemcpy(y, dy, nv, cudaMemcpyDeviceToHost);\n" + extra_free
            + "    cudaFree(dA);\n    cudaFree(dy);\n    cudaFree(dt);\n"
            "    if (db) cudaFree(db);\n}\n")


HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"


def _simple(affine, kernel, launch, copy_each_iter=False):
    body = ("        cudaMemcpy(dA, A, na, cudaMemcpyHostToDevice);\n" if copy_each_iter else "") + launch
    return HEAD + _epi_fn(affine) + kernel + _host(affine, body, copy_a_once=not copy_each_iter)


L_THREAD = "        mv<<<(n + @B@ - 1) / @B@, @B@>>>(n, n, dA, dy, dt, s, al, db);\n"
L_WARP = "        mv<<<(n * 32 + 255) / 256, 256>>>(n, n, dA, dy, dt, s, al, db);\n"
L_BLOCK = "        mv<<<n, 256>>>(n, n, dA, dy, dt, s, al, db);\n"


def _chunked(affine, kernel, trans):
    if trans:
        launch = ("        for (int c0 = 0; c0 < n; c0 += 32) {\n"
                  "            int cnt = n - c0 < 32 ? n - c0 : 32;\n"
                  "            mv<<<1, 32>>>(cnt, n, dA + c0, dy, dt + c0, s, al, db ? db + c0 : db);\n        }\n")
    else:
        launch = ("        for (int r0 = 0; r0 < n; r0 += 64) {\n"
                  "            int cnt = n - r0 < 64 ? n - r0 : 64;\n"
                  "            mv<<<(cnt * 32 + 255) / 256, 256>>>(cnt, n, dA + (size_t)r0 * n, dy, dt + r0, s, al,"
                  " db ? db + r0 : db);\n        }\n")
    return HEAD + _epi_fn(affine) + kernel + _host(affine, launch)


def _host_compute(affine, kernel, launch):
    epi = "alpha * (h[i] * s) + b[i]" if affine else "h[i] * s"
    body = (launch
            + "        cudaMemcpy(h, dt, nv, cudaMemcpyDeviceToHost);\n"
            f"        for (int i = 0; i < n; ++i) h[i] = {epi};\n"
            "        cudaMemcpy(dt, h, nv, cudaMemcpyHostToDevice);\n")
    return (HEAD + _epi_fn(affine, raw=True) + kernel
            + _host(affine, body, "    @T@* h = (@T@*)malloc(nv);\n", "    free(h);\n"))


def _two_level(affine):
    launch = ("        mv_part<<<dim3((n + 255) / 256, nparts), 256>>>(n, slice, dA, dy, part);\n"
              "        mv_finish<<<(n + 255) / 256, 256>>>(n, nparts, part, dt, s, al, db);\n")
    alloc = ("    int nparts = 16;\n    int slice = (n + nparts - 1) / nparts;\n"
             "    nparts = (n + slice - 1) / slice;\n"
             "    @T@* part;\n    cudaMalloc(&part, (size_t)nparts * nv);\n")
    return HEAD + _epi_fn(affine) + K_TWO_LEVEL + _host(affine, launch, alloc, "    cudaFree(part);\n")


def _reference(affine: bool, trans: bool) -> str:
    epi = "alpha * (acc * s) + b[i]" if affine else "acc * s"
    if trans:
        core = ("        for (int j = 0; j < n; ++j) t[j] = 0;\n"
                "        for (int i = 0; i < n; ++i) {\n"
                "            @T@ xi = y[i];\n            const @T@* row = A + (size_t)i * n;\n"
                "            for (int j = 0; j < n; ++j) t[j] += row[j] * xi;\n        }\n"
                f"        for (int i = 0; i < n; ++i) {{ @T@ acc = t[i]; t[i] = {epi}; }}\n")
    else:
        core = ("        for (int i = 0; i < n; ++i) {\n"
                "            const @T@* row = A + (size_t)i * n;\n            @T@ acc = 0;\n"
                "            for (int j = 0; j < n; ++j) acc += row[j] * y[j];\n"
                f"            t[i] = {epi};\n        }}\n")
    return ("#include <stdlib.h>\n#include <string.h>\n\n" + _sig(affine) + " {\n"
            "    if (n <= 0 || iters <= 0) return;\n"
            "    @T@ s = (@T@)(2.0 / (double)n);\n"
            "    @T@* t = (@T@*)malloc((size_t)n * sizeof(@T@));\n"
            "    for (int it = 0; it < iters; ++it) {\n" + core
            + "        memcpy(y, t, (size_t)n * sizeof(@T@));\n    }\n    free(t);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    trans = (index // 2) % 2 == 1
    affine = (index // 4) % 2 == 1
    n = SIZES[index % len(SIZES)] + int(rng.integers(0, 8))
    ns = {(False, "float"): 3.2, (False, "double"): 2.6, (True, "float"): 1.1, (True, "double"): 2.0}[(trans, t)]
    iters = max(3, min(60, int(float(rng.uniform(70, 120)) * 1e6 / (n * n * ns))))
    vec, vw = ("float4", 4) if t == "float" else ("double2", 2)
    dotv = "a.x * c.x + a.y * c.y + a.z * c.z + a.w * c.w" if vw == 4 else "a.x * c.x + a.y * c.y"
    tol = {"rtol": 1e-3, "atol": 1e-6} if t == "float" else {"rtol": 1e-9, "atol": 1e-12}
    args = [{"name": "n", "role": "scalar", "ctype": "int"}, {"name": "iters", "role": "scalar", "ctype": "int"}]
    if affine:
        args.append({"name": "alpha", "role": "scalar", "ctype": t, "dist": {"kind": "uniform", "low": 0.3, "high": 0.9}})
    args.append({"name": "A", "role": "in", "ctype": t, "length": "n * n", "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}})
    if affine:
        args.append({"name": "b", "role": "in", "ctype": t, "length": "n", "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}})
    args.append({"name": "y", "role": "inout", "ctype": t, "length": "n", "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}})
    op = "A^T y" if trans else "A y"
    what = f"y <- alpha * s * {op} + b" if affine else f"y <- s * {op}"
    task = {
        "function_name": "matvec",
        "description": (f"iters times {what} with s = 2/n, for a square row-major n x n {t} matrix A "
                        "(each iteration uses the previous y)."),
        "returns": "void",
        "args": args,
        "size_configs": [{"n": 7, "iters": 3}, {"n": 100 + int(rng.integers(1, 30)), "iters": 5},
                         {"n": 513 + int(rng.integers(0, 40)), "iters": 4}, {"n": n, "iters": iters}],
        "tolerance": tol,
        "reference_c": _sub(_reference(affine, trans), T=t),
        "tags": ["dense", "matvec", "iterative", t],
    }
    fill = {"T": t, "V": vec, "VW": vw, "DOTV": dotv}
    if trans:
        v = [
            ("thread_per_col", ("naive", "coalesced", "block_256", "device_resident", "double_buffered"),
             _simple(affine, K_THREAD_COL, _sub(L_THREAD, B=256))),
            ("thread_per_col_b64", ("naive", "coalesced", "block_64", "device_resident", "double_buffered"),
             _simple(affine, K_THREAD_COL, _sub(L_THREAD, B=64))),
            ("col_x_shared", ("shared_tiling", "coalesced", "block_256", "device_resident"),
             _simple(affine, K_COL_XSHARED, _sub(L_THREAD, B=256))),
            ("two_level_slices", ("two_level", "multi_pass", "coalesced", "block_256", "device_resident"),
             _two_level(affine)),
            ("warp_per_col", ("warp_shuffle", "block_per_row", "strided", "block_256", "device_resident"),
             _simple(affine, K_WARP_COL, L_WARP)),
            ("block_per_col", ("tree_reduction", "block_per_row", "strided", "block_256", "device_resident"),
             _simple(affine, K_BLOCK_COL, L_BLOCK)),
            ("col_chunk_launches", ("many_launches", "naive", "coalesced", "block_32", "device_resident"),
             _chunked(affine, K_THREAD_COL, True)),
            ("host_epilogue", ("host_compute", "in_loop_transfers", "naive", "coalesced", "block_256"),
             _host_compute(affine, K_THREAD_COL, _sub(L_THREAD, B=256))),
            ("copy_a_every_iter", ("in_loop_transfers", "naive", "coalesced", "block_256"),
             _simple(affine, K_THREAD_COL, _sub(L_THREAD, B=256), copy_each_iter=True)),
        ]
    else:
        v = [
            ("warp_per_row", ("warp_shuffle", "block_per_row", "coalesced", "block_256", "device_resident",
                              "double_buffered"), _simple(affine, K_WARP_ROW, L_WARP)),
            ("warp_per_row_vec", ("warp_shuffle", "block_per_row", "vectorized", "coalesced", "block_256",
                                  "device_resident"), _simple(affine, K_WARP_ROW_VEC, L_WARP)),
            ("block_per_row", ("tree_reduction", "block_per_row", "coalesced", "block_256", "device_resident"),
             _simple(affine, K_BLOCK_ROW, L_BLOCK)),
            ("thread_per_row", ("thread_per_row", "strided", "block_128", "device_resident"),
             _simple(affine, K_THREAD_ROW, _sub(L_THREAD, B=128))),
            ("row_x_shared", ("thread_per_row", "shared_tiling", "strided", "block_256", "device_resident"),
             _simple(affine, K_ROW_XSHARED, _sub(L_THREAD, B=256))),
            ("row_chunk_launches", ("many_launches", "warp_shuffle", "block_per_row", "block_256",
                                    "device_resident"), _chunked(affine, K_WARP_ROW, False)),
            ("host_epilogue", ("host_compute", "in_loop_transfers", "warp_shuffle", "block_per_row", "block_256"),
             _host_compute(affine, K_WARP_ROW, L_WARP)),
            ("copy_a_every_iter", ("in_loop_transfers", "warp_shuffle", "block_per_row", "block_256"),
             _simple(affine, K_WARP_ROW, L_WARP, copy_each_iter=True)),
        ]
    variants = tuple(Variant(name, tags, _sub(code, **fill)) for name, tags, code in v)
    return GeneratedTask(task, variants, {"type": t, "transposed": trans, "affine": affine, "n": n, "iters": iters})


FAMILY = Family(
    name="matvec",
    description="iterated y <- s A y or s A^T y (optionally alpha * ... + b) on square row-major matrices",
    generate=generate,
    n_tasks=50,
    tags=("dense",),
)
