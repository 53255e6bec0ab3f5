"""Repeated CSR sparse matrix-vector products: ``x_{t+1} = A x_t`` for ``iters`` steps, ``y = x_iters``.

Parameters: element type (float/double), average row length (2..128; row lengths vary since the row pointers are
random cuts), the number of steps (2..~40, more for sparser matrices) and the matrix size. Values and x are non-negative (values scaled by the
average row length so the iterates stay bounded), so any summation order stays within the tolerance. Several
steps on device-resident data let a good GPU variant win with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

DEGREES = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 5, 10, 20, 40, 80, 7, 14]
# tasks 20..49 (the first 20 are in the shipped dataset and stay as they are): average row lengths no earlier task
# had, each once
DEGREES_MORE = [9, 11, 13, 15, 17, 18, 19, 21, 22, 26, 28, 30, 36, 44, 52, 56, 60, 72, 88, 100, 112, 120, 27, 34, 42,
                50, 66, 76, 90, 104]
SIG = "int n, int nnz, int iters, const int* row_ptr, const int* col_idx, const {t}* vals, const {t}* x, {t}* y"
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"


def _setup(t: str, need_rows: bool = True) -> str:
    s = (f'extern "C" void spmv({SIG.format(t=t)}) {{\n'
         "    if (n <= 0) return;\n"
         f"    size_t vb = (size_t)n * sizeof({t});\n"
         "    int *drp, *dci;\n"
         f"    {t} *dv, *da, *db;\n"
         "    cudaMalloc(&drp, (size_t)(n + 1) * sizeof(int));\n"
         "    cudaMalloc(&dci, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int));\n"
         f"    cudaMalloc(&dv, (size_t)(nnz > 0 ? nnz : 1) * sizeof({t}));\n"
         "    cudaMalloc(&da, vb); cudaMalloc(&db, vb);\n"
         "    cudaMemcpy(drp, row_ptr, (size_t)(n + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
         "    if (nnz > 0) {\n"
         "        cudaMemcpy(dci, col_idx, (size_t)nnz * sizeof(int), cudaMemcpyHostToDevice);\n"
         f"        cudaMemcpy(dv, vals, (size_t)nnz * sizeof({t}), cudaMemcpyHostToDevice);\n"
         "    }\n"
         "    cudaMemcpy(da, x, vb, cudaMemcpyHostToDevice);\n")
    return s


FINISH = ("    cudaMemcpy(y, da, vb, cudaMemcpyDeviceToHost);\n"
          "    cudaFree(drp); cudaFree(dci); cudaFree(dv); cudaFree(da); cudaFree(db);\n}\n")
SWAP = "        { {t}* tmp = da; da = db; db = tmp; }\n"


def _loop(t: str, launch: str) -> str:
    return ("    for (int it = 0; it < iters; ++it) {\n" + launch
            + SWAP.replace("{t}", t) + "    }\n")


def _scalar(t: str, block: int) -> str:
    return (HEAD
            + f"__global__ void spmv_row(int n, const int* rp, const int* ci, const {t}* v, const {t}* xin, {t}* xout) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {t} s = 0;\n"
            "    for (int k = rp[i]; k < rp[i + 1]; ++k) s += v[k] * xin[ci[k]];\n"
            "    xout[i] = s;\n}\n\n"
            + _setup(t)
            + _loop(t, f"        spmv_row<<<(n + {block - 1}) / {block}, {block}>>>(n, drp, dci, dv, da, db);\n")
            + FINISH)


def _warp(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_warp(int n, const int* __restrict__ rp, const int* __restrict__ ci,"
            f" const {t}* __restrict__ v, const {t}* __restrict__ xin, {t}* __restrict__ xout) {{\n"
            "    long long gt = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long row = gt >> 5;\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (row >= n) return;  // the whole warp shares the row, so it leaves together\n"
            "    int lo = rp[row], hi = rp[row + 1];\n"
            f"    {t} s = 0;\n"
            "    for (int k = lo + lane; k < hi; k += 32) s += v[k] * xin[ci[k]];\n"
            "#pragma unroll\n"
            "    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);\n"
            "    if (lane == 0) xout[row] = s;\n}\n\n"
            + _setup(t)
            + "    unsigned blocks = (unsigned)(((long long)n * 32 + 127) / 128);\n"
            + _loop(t, "        spmv_warp<<<blocks, 128>>>(n, drp, dci, dv, da, db);\n")
            + FINISH)


def _block(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_block(int n, const int* rp, const int* ci, const {t}* v, const {t}* xin, {t}* xout) {{\n"
            f"    __shared__ {t} part[128];\n"
            "    int row = blockIdx.x;\n"
            "    int lo = rp[row], hi = rp[row + 1];\n"
            f"    {t} s = 0;\n"
            "    for (int k = lo + threadIdx.x; k < hi; k += blockDim.x) s += v[k] * xin[ci[k]];\n"
            "    part[threadIdx.x] = s;\n"
            "    __syncthreads();\n"
            "    for (int st = 64; st > 0; st >>= 1) {\n"
            "        if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (threadIdx.x == 0) xout[row] = part[0];\n}\n\n"
            + _setup(t)
            + _loop(t, "        spmv_block<<<n, 128>>>(n, drp, dci, dv, da, db);\n")
            + FINISH)


def _subwarp(t: str) -> str:
    return (HEAD
            + "#define LANES 8\n\n"
            + f"__global__ void spmv_sub(int n, const int* __restrict__ rp, const int* __restrict__ ci,"
            f" const {t}* __restrict__ v, const {t}* __restrict__ xin, {t}* __restrict__ xout) {{\n"
            "    long long gt = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long row = gt / LANES;\n"
            "    int lane = threadIdx.x % LANES;\n"
            "    bool valid = row < n;\n"
            f"    {t} s = 0;\n"
            "    if (valid) {\n"
            "        int lo = __ldg(rp + row), hi = __ldg(rp + row + 1);\n"
            "        for (int k = lo + lane; k < hi; k += LANES) s += __ldg(v + k) * __ldg(xin + __ldg(ci + k));\n"
            "    }\n"
            "    // every lane of the warp takes part in the shuffles (no early exit)\n"
            "#pragma unroll\n"
            "    for (int off = LANES / 2; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off, LANES);\n"
            "    if (valid && lane == 0) xout[row] = s;\n}\n\n"
            + _setup(t)
            + "    unsigned blocks = (unsigned)(((long long)n * LANES + 255) / 256);\n"
            + _loop(t, "        spmv_sub<<<blocks, 256>>>(n, drp, dci, dv, da, db);\n")
            + FINISH)


def _chunks(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_part(int r0, int r1, const int* rp, const int* ci, const {t}* v, const {t}* xin,"
            f" {t}* xout) {{\n"
            "    int i = r0 + blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= r1) return;\n"
            f"    {t} s = 0;\n"
            "    for (int k = rp[i]; k < rp[i + 1]; ++k) s += v[k] * xin[ci[k]];\n"
            "    xout[i] = s;\n}\n\n"
            + _setup(t)
            + _loop(t, "        for (int r0 = 0; r0 < n; r0 += 4096) {\n"
                       "            int r1 = r0 + 4096 < n ? r0 + 4096 : n;\n"
                       "            spmv_part<<<(r1 - r0 + 255) / 256, 256>>>(r0, r1, drp, dci, dv, da, db);\n"
                       "        }\n")
            + FINISH)


def _atomics(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_coo(int nnz, const int* ri, const int* ci, const {t}* v, const {t}* xin, {t}* xout) {{\n"
            "    int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (k >= nnz) return;\n"
            "    atomicAdd(xout + ri[k], v[k] * xin[ci[k]]);\n}\n\n"
            + _setup(t)
            + "    // expand the row pointers into one row index per nonzero on the host\n"
            "    int* hri = (int*)malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof(int));\n"
            "    for (int i = 0; i < n; ++i) for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) hri[k] = i;\n"
            "    int* dri;\n"
            "    cudaMalloc(&dri, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int));\n"
            "    if (nnz > 0) cudaMemcpy(dri, hri, (size_t)nnz * sizeof(int), cudaMemcpyHostToDevice);\n"
            + _loop(t, "        cudaMemset(db, 0, vb);\n"
                       "        if (nnz > 0) spmv_coo<<<(nnz + 255) / 256, 256>>>(nnz, dri, dci, dv, da, db);\n")
            + "    cudaFree(dri); free(hri);\n"
            + FINISH)


def _roundtrip(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_row(int n, const int* rp, const int* ci, const {t}* v, const {t}* xin, {t}* xout) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {t} s = 0;\n"
            "    for (int k = rp[i]; k < rp[i + 1]; ++k) s += v[k] * xin[ci[k]];\n"
            "    xout[i] = s;\n}\n\n"
            + _setup(t)
            + f"    {t}* hbuf = ({t}*)malloc(vb);\n"
            + _loop(t, "        spmv_row<<<(n + 127) / 128, 128>>>(n, drp, dci, dv, da, db);\n"
                       "        // bring the vector home and send it back every step\n"
                       "        cudaMemcpy(hbuf, db, vb, cudaMemcpyDeviceToHost);\n"
                       "        cudaMemcpy(db, hbuf, vb, cudaMemcpyHostToDevice);\n")
            + "    free(hbuf);\n"
            + FINISH)


def _serial(t: str) -> str:
    return (HEAD
            + f"__global__ void spmv_serial(int n, int chunk, const int* rp, const int* ci, const {t}* v,"
            f" const {t}* xin, {t}* xout) {{\n"
            "    long long lo = (long long)(blockIdx.x * blockDim.x + threadIdx.x) * chunk;\n"
            "    long long hi = lo + chunk < n ? lo + chunk : n;\n"
            "    for (long long i = lo; i < hi; ++i) {\n"
            f"        {t} s = 0;\n"
            "        for (int k = rp[i]; k < rp[i + 1]; ++k) s += v[k] * xin[ci[k]];\n"
            "        xout[i] = s;\n    }\n}\n\n"
            + _setup(t)
            + "    int chunk = (n + 32 * 64 - 1) / (32 * 64);\n"
            + _loop(t, "        spmv_serial<<<32, 64>>>(n, chunk, drp, dci, dv, da, db);\n")
            + FINISH)


def _reference(t: str) -> str:
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"void spmv({SIG.format(t=t)}) {{\n"
            f"    {t}* cur = ({t}*)malloc((size_t)n * sizeof({t}) + 1);\n"
            f"    {t}* nxt = ({t}*)malloc((size_t)n * sizeof({t}) + 1);\n"
            f"    memcpy(cur, x, (size_t)n * sizeof({t}));\n"
            "    for (int it = 0; it < iters; ++it) {\n"
            "        for (int i = 0; i < n; ++i) {\n"
            f"            {t} s = 0;\n"
            "            for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) s += vals[k] * cur[col_idx[k]];\n"
            "            nxt[i] = s;\n"
            "        }\n"
            f"        {t}* tmp = cur; cur = nxt; nxt = tmp;\n"
            "    }\n"
            f"    memcpy(y, cur, (size_t)n * sizeof({t}));\n"
            "    free(cur); free(nxt);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    d = DEGREES[index] if index < len(DEGREES) else DEGREES_MORE[index - len(DEGREES)]
    # nonzeros times steps at the timing size; n stays moderate so that x mostly fits in the CPU caches
    # (random gathers from a huge x would make the reference memory-latency bound and far too slow)
    # (short rows cost the reference far more per nonzero: loop exits mispredict)
    work = 35e6 * float(rng.uniform(0.9, 1.2)) * min(1.0, d / 12)
    n_time = int(min(int(rng.choice([250_000, 320_000, 400_000])), work / (2 * d))) + int(rng.integers(1, 97))
    iters = max(2, int(round(work / (n_time * d))))
    n_mid = max(101, 100_000 // d) + int(rng.integers(1, 30))
    configs = [{"n": 37, "nnz": 37 * d}, {"n": n_mid, "nnz": n_mid * d}, {"n": 1, "nnz": d},
               {"n": n_time, "nnz": n_time * d}]
    hi = 1.5 / d
    tol = {"rtol": 5e-4, "atol": 1e-6} if t == "float" else {"rtol": 1e-10, "atol": 1e-14}
    task = {
        "function_name": "spmv",
        "description": (f"{iters} repeated sparse matrix-vector products with an n x n CSR matrix over {t}s: "
                        "x_0 = x, x_{t+1}[i] = sum_{k=row_ptr[i]}^{row_ptr[i+1]-1} vals[k] * x_t[col_idx[k]], "
                        f"y = x_iters (iters = {iters}). Average row length {d}; values non-negative."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "nnz", "role": "scalar", "ctype": "int"},
            {"name": "iters", "role": "scalar", "ctype": "int", "dist": {"kind": "const", "value": iters}},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "n + 1",
             "dist": {"kind": "offsets", "high": "nnz"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "nnz",
             "dist": {"kind": "randint", "low": 0, "high": "n"}},
            {"name": "vals", "role": "in", "ctype": t, "length": "nnz",
             "dist": {"kind": "uniform", "low": 0.0, "high": hi}},
            {"name": "x", "role": "in", "ctype": t, "length": "n", "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}},
            {"name": "y", "role": "out", "ctype": t, "length": "n"},
        ],
        "size_configs": configs,
        "tolerance": tol,
        "reference_c": _reference(t),
        "tags": ["sparse", "memory-bound", "iterative", t],
    }
    dr = ("double_buffered", "device_resident")
    variants = (
        Variant("thread_per_row_b256", ("thread_per_row", "naive", *dr, "block_256", "pageable"), _scalar(t, 256)),
        Variant("thread_per_row_b1024", ("thread_per_row", "naive", *dr, "block_1024", "pageable"), _scalar(t, 1024)),
        Variant("warp_per_row", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", *dr, "block_128"),
                _warp(t)),
        Variant("subwarp8_ldg", ("warp_shuffle", "readonly_cache", "coalesced", *dr, "block_256"), _subwarp(t)),
        Variant("block_per_row", ("block_per_row", "tree_reduction", *dr, "block_128"), _block(t)),
        Variant("row_chunk_launches", ("many_launches", "thread_per_row", "double_buffered", "block_256"),
                _chunks(t)),
        Variant("coo_atomics", ("atomics", "host_compute", "coalesced", "double_buffered", "block_256"), _atomics(t)),
        Variant("host_roundtrip", ("thread_per_row", "in_loop_transfers", "extra_transfers", "block_128"),
                _roundtrip(t)),
        Variant("serial_row_chunks", ("small_grid", "thread_per_row", "block_64", "double_buffered"), _serial(t)),
    )
    return GeneratedTask(task, variants, {"type": t, "avg_row": d, "iters": iters, "n_time": n_time})


FAMILY = Family(
    name="spmv_csr",
    description="repeated CSR sparse matrix-vector products x <- A x (float/double), varied densities",
    generate=generate,
    n_tasks=50,
    tags=("sparse",),
)
