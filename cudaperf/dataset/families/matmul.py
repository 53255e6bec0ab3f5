"""Dense matrix products C = A B, C = alpha A B, or C = alpha A B + beta C for row-major m x k and k x n matrices
(float/double).

Parameters: the form (plain, scaled, accumulate), the element type and the shape (square, tall, wide, deep k,
sizes not multiples of the tile). Compute-bound: the good variants (tiled, register-blocked) win by far.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

FORMS = ["plain", "alpha", "acc"]
SHAPES = [(640, 640, 640), (1500, 256, 700), (300, 1800, 500), (320, 333, 2500), (777, 555, 600),
          (1024, 512, 513), (450, 900, 700), (2001, 300, 400), (500, 500, 1000), (900, 700, 450)]


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


def _sig(form: str) -> str:
    if form == "plain":
        return "void matmul(int m, int n, int k, const @T@* A, const @T@* B, @T@* C)"
    if form == "alpha":
        return "void matmul(int m, int n, int k, @T@ alpha, const @T@* A, const @T@* B, @T@* C)"
    return "void matmul(int m, int n, int k, @T@ alpha, @T@ beta, const @T@* A, const @T@* B, @T@* C)"


def _epi(form: str, acc: str, cref: str) -> str:
    if form == "plain":
        return acc
    if form == "alpha":
        return f"alpha * {acc}"
    return f"alpha * {acc} + beta * {cref}"


def _params(form: str) -> str:
    """Extra kernel parameters and the matching call arguments."""
    return {"plain": "", "alpha": ", @T@ alpha", "acc": ", @T@ alpha, @T@ beta"}[form]


def _args(form: str) -> str:
    return {"plain": "", "alpha": ", alpha", "acc": ", alpha, beta"}[form]


HEAD = "#include <cuda_runtime.h>\n\n"


def _host(form: str, launch: str, pre: str = "") -> str:
    copy_c = ("    cudaMemcpy(dC, C, sc, cudaMemcpyHostToDevice);\n" if form == "acc" else "")
    return ('extern "C" ' + _sig(form) + " {\n"
            "    if (m <= 0 || n <= 0) return;\n"
            "    size_t sa = (size_t)m * k * sizeof(@T@), sb = (size_t)k * n * sizeof(@T@), sc = (size_t)m * n * sizeof(@T@);\n"
            "    @T@ *dA, *dB, *dC;\n"
            "    cudaMalloc(&dA, sa > 0 ? sa : 1);\n    cudaMalloc(&dB, sb > 0 ? sb : 1);\n    cudaMalloc(&dC, sc);\n"
            "    cudaMemcpy(dA, A, sa, cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dB, B, sb, cudaMemcpyHostToDevice);\n" + copy_c + pre + launch
            + "    cudaMemcpy(C, dC, sc, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dA);\n    cudaFree(dB);\n    cudaFree(dC);\n}\n")


def _naive(t, form, strided):
    if strided:
        idx = ("    int i = blockIdx.x * blockDim.x + threadIdx.x;   // threads of a warp walk down a column of C\n"
               "    int j = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = "dim3 grid((m + 15) / 16, (n + 15) / 16)"
    else:
        idx = ("    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "    int i = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = "dim3 grid((n + 15) / 16, (m + 15) / 16)"
    k = ("__global__ void mm_naive(int m, int n, int k, const @T@* __restrict__ A, const @T@* __restrict__ B,"
         " @T@* C" + _params(form) + ") {\n" + idx
         + "    if (i >= m || j >= n) return;\n"
         "    @T@ acc = 0;\n"
         "    for (int p = 0; p < k; ++p) acc += A[(size_t)i * k + p] * B[(size_t)p * n + j];\n"
         f"    C[(size_t)i * n + j] = {_epi(form, 'acc', 'C[(size_t)i * n + j]')};\n}}\n\n")
    launch = f"    dim3 block(16, 16);\n    {grid};\n    mm_naive<<<grid, block>>>(m, n, k, dA, dB, dC{_args(form)});\n"
    return _sub(HEAD + k + _host(form, launch), T=t)


def _tiled(t, form, ts):
    k = (f"// {ts}x{ts} tiles of A and B staged through shared memory\n"
         "__global__ void mm_tiled(int m, int n, int k, const @T@* __restrict__ A, const @T@* __restrict__ B,"
         " @T@* C" + _params(form) + ") {\n"
         "    __shared__ @T@ As[@S@][@S@];\n    __shared__ @T@ Bs[@S@][@S@];\n"
         "    int tx = threadIdx.x, ty = threadIdx.y;\n"
         "    int j = blockIdx.x * @S@ + tx;\n    int i = blockIdx.y * @S@ + ty;\n"
         "    @T@ acc = 0;\n"
         "    for (int p0 = 0; p0 < k; p0 += @S@) {\n"
         "        As[ty][tx] = (i < m && p0 + tx < k) ? A[(size_t)i * k + p0 + tx] : (@T@)0;\n"
         "        Bs[ty][tx] = (p0 + ty < k && j < n) ? B[(size_t)(p0 + ty) * n + j] : (@T@)0;\n"
         "        __syncthreads();\n"
         "#pragma unroll\n"
         "        for (int q = 0; q < @S@; ++q) acc += As[ty][q] * Bs[q][tx];\n"
         "        __syncthreads();\n    }\n"
         f"    if (i < m && j < n) C[(size_t)i * n + j] = {_epi(form, 'acc', 'C[(size_t)i * n + j]')};\n}}\n\n")
    launch = (f"    dim3 block(@S@, @S@);\n    dim3 grid((n + @S@ - 1) / @S@, (m + @S@ - 1) / @S@);\n"
              f"    mm_tiled<<<grid, block>>>(m, n, k, dA, dB, dC{_args(form)});\n")
    return _sub(HEAD + k + _host(form, launch), T=t, S=ts)


def _regblock(t, form):
    k = ("// 16x16 threads compute a 32x32 tile of C, 2x2 outputs per thread kept in registers; k tiles of 16\n"
         "__global__ void mm_reg(int m, int n, int k, const @T@* __restrict__ A, const @T@* __restrict__ B,"
         " @T@* C" + _params(form) + ") {\n"
         "    __shared__ @T@ As[32][17];\n    __shared__ @T@ Bs[16][32];\n"
         "    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;\n"
         "    int row0 = blockIdx.y * 32, col0 = blockIdx.x * 32;\n"
         "    @T@ c00 = 0, c01 = 0, c10 = 0, c11 = 0;\n"
         "    for (int p0 = 0; p0 < k; p0 += 16) {\n"
         "        for (int e = tid; e < 512; e += 256) {\n"
         "            int r = e / 16, c = e % 16;\n"
         "            int gi = row0 + r, gp = p0 + c;\n"
         "            As[r][c] = (gi < m && gp < k) ? A[(size_t)gi * k + gp] : (@T@)0;\n"
         "            int br = e / 32, bc = e % 32;\n"
         "            int bp = p0 + br, gj = col0 + bc;\n"
         "            Bs[br][bc] = (bp < k && gj < n) ? B[(size_t)bp * n + gj] : (@T@)0;\n"
         "        }\n"
         "        __syncthreads();\n"
         "#pragma unroll\n"
         "        for (int q = 0; q < 16; ++q) {\n"
         "            @T@ a0 = As[ty][q], a1 = As[ty + 16][q];\n"
         "            @T@ b0 = Bs[q][tx], b1 = Bs[q][tx + 16];\n"
         "            c00 += a0 * b0; c01 += a0 * b1;\n"
         "            c10 += a1 * b0; c11 += a1 * b1;\n"
         "        }\n"
         "        __syncthreads();\n    }\n"
         + "".join(f"    if (row0 + ty + {16 * u} < m && col0 + tx + {16 * v} < n) "
                   f"C[(size_t)(row0 + ty + {16 * u}) * n + col0 + tx + {16 * v}] = "
                   + _epi(form, f"c{u}{v}", f"C[(size_t)(row0 + ty + {16 * u}) * n + col0 + tx + {16 * v}]") + ";\n"
                   for u in (0, 1) for v in (0, 1))
         + "}\n\n")
    launch = ("    dim3 block(16, 16);\n    dim3 grid((n + 31) / 32, (m + 31) / 32);\n"
              f"    mm_reg<<<grid, block>>>(m, n, k, dA, dB, dC{_args(form)});\n")
    return _sub(HEAD + k + _host(form, launch), T=t)


def _ksplit(t, form):
    scale = {"plain": "acc", "alpha": "alpha * acc", "acc": "alpha * acc"}[form]
    prep = {"plain": "__global__ void mm_init(int total, @T@* C) {\n"
                     "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n    if (e < total) C[e] = 0;\n}\n\n",
            "alpha": "__global__ void mm_init(int total, @T@* C) {\n"
                     "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n    if (e < total) C[e] = 0;\n}\n\n",
            "acc": "__global__ void mm_init(int total, @T@* C, @T@ beta) {\n"
                   "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n    if (e < total) C[e] = beta * C[e];\n}\n\n"}[form]
    init_args = ", beta" if form == "acc" else ""
    scal = {"plain": "", "alpha": ", @T@ alpha", "acc": ", @T@ alpha"}[form]
    sarg = {"plain": "", "alpha": ", alpha", "acc": ", alpha"}[form]
    k = ("// k split into gridDim.z slices; each slice's 16x16 tiled partial product is added to C atomically\n"
         + prep
         + "__global__ void mm_ksplit(int m, int n, int k, int kslice, const @T@* __restrict__ A,"
         " const @T@* __restrict__ B, @T@* C" + scal + ") {\n"
         "    __shared__ @T@ As[16][16];\n    __shared__ @T@ Bs[16][16];\n"
         "    int tx = threadIdx.x, ty = threadIdx.y;\n"
         "    int j = blockIdx.x * 16 + tx, i = blockIdx.y * 16 + ty;\n"
         "    int kb = blockIdx.z * kslice;\n"
         "    int ke = kb + kslice < k ? kb + kslice : k;\n"
         "    @T@ acc = 0;\n"
         "    for (int p0 = kb; p0 < ke; p0 += 16) {\n"
         "        As[ty][tx] = (i < m && p0 + tx < ke) ? A[(size_t)i * k + p0 + tx] : (@T@)0;\n"
         "        Bs[ty][tx] = (p0 + ty < ke && j < n) ? B[(size_t)(p0 + ty) * n + j] : (@T@)0;\n"
         "        __syncthreads();\n"
         "        for (int q = 0; q < 16; ++q) acc += As[ty][q] * Bs[q][tx];\n"
         "        __syncthreads();\n    }\n"
         f"    if (i < m && j < n) atomicAdd(&C[(size_t)i * n + j], {scale});\n}}\n\n")
    launch = ("    int total = m * n;\n"
              f"    mm_init<<<(total + 255) / 256, 256>>>(total, dC{init_args});\n"
              "    int splits = 4;\n"
              "    int kslice = ((k + splits - 1) / splits + 15) / 16 * 16;\n"
              "    if (kslice < 16) kslice = 16;\n"
              "    splits = (k + kslice - 1) / kslice;\n"
              "    if (splits < 1) splits = 1;\n"
              "    dim3 block(16, 16);\n    dim3 grid((n + 15) / 16, (m + 15) / 16, splits);\n"
              f"    mm_ksplit<<<grid, block>>>(m, n, k, kslice, dA, dB, dC{sarg});\n")
    return _sub(HEAD + k + _host(form, launch), T=t)


def _transposed_b(t, form):
    k = ("__global__ void transpose_b(int k, int n, const @T@* B, @T@* BT) {\n"
         "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    int p = blockIdx.y * blockDim.y + threadIdx.y;\n"
         "    if (j < n && p < k) BT[(size_t)j * k + p] = B[(size_t)p * n + j];\n}\n\n"
         "// C[i][j] = dot(A row i, BT row j): neighbouring threads (j) read BT rows k elements apart\n"
         "__global__ void mm_bt(int m, int n, int k, const @T@* A, const @T@* BT, @T@* C" + _params(form) + ") {\n"
         "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    int i = blockIdx.y * blockDim.y + threadIdx.y;\n"
         "    if (i >= m || j >= n) return;\n"
         "    @T@ acc = 0;\n"
         "    for (int p = 0; p < k; ++p) acc += A[(size_t)i * k + p] * BT[(size_t)j * k + p];\n"
         f"    C[(size_t)i * n + j] = {_epi(form, 'acc', 'C[(size_t)i * n + j]')};\n}}\n\n")
    launch = ("    @T@* dBT;\n    cudaMalloc(&dBT, sb > 0 ? sb : 1);\n"
              "    dim3 tb(32, 8);\n    dim3 tg((n + 31) / 32, (k + 7) / 8);\n"
              "    if (k > 0) transpose_b<<<tg, tb>>>(k, n, dB, dBT);\n"
              "    dim3 block(32, 8);\n    dim3 grid((n + 31) / 32, (m + 7) / 8);\n"
              f"    mm_bt<<<grid, block>>>(m, n, k, dA, dBT, dC{_args(form)});\n"
              "    cudaFree(dBT);\n")
    return _sub(HEAD + k + _host(form, launch), T=t)


def _reference(t, form):
    code = ("#include <stdlib.h>\n\n" + _sig(form) + " {\n"
            "    if (m <= 0 || n <= 0) return;\n"
            "    @T@* row = (@T@*)malloc((size_t)n * sizeof(@T@));\n"
            "    for (int i = 0; i < m; ++i) {\n"
            "        for (int j = 0; j < n; ++j) row[j] = 0;\n"
            "        for (int p = 0; p < k; ++p) {\n"
            "            @T@ a = A[(size_t)i * k + p];\n"
            "            const @T@* b = B + (size_t)p * n;\n"
            "            for (int j = 0; j < n; ++j) row[j] += a * b[j];\n"
            "        }\n"
            f"        for (int j = 0; j < n; ++j) C[(size_t)i * n + j] = {_epi(form, 'row[j]', 'C[(size_t)i * n + j]')};\n"
            "    }\n    free(row);\n}\n")
    return _sub(code, T=t)


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    form = FORMS[index % 3]
    m, n, k = SHAPES[index % len(SHAPES)]
    scale = 0.85 if t == "float" else 0.65
    f = (1.0 + 0.15 * float(rng.uniform(-1, 1))) * scale
    m, n, k = int(m * f) | 1, int(n * f), int(k * f) + 1
    tol = {"rtol": 1e-3, "atol": 1e-3} if t == "float" else {"rtol": 1e-9, "atol": 1e-9}
    args = [{"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "k", "role": "scalar", "ctype": "int"}]
    if form in ("alpha", "acc"):
        args.append({"name": "alpha", "role": "scalar", "ctype": t, "dist": {"kind": "uniform", "low": 0.5, "high": 2.0}})
    if form == "acc":
        args.append({"name": "beta", "role": "scalar", "ctype": t, "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}})
    args += [
        {"name": "A", "role": "in", "ctype": t, "length": "m * k", "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
        {"name": "B", "role": "in", "ctype": t, "length": "k * n", "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
        {"name": "C", "role": "inout" if form == "acc" else "out", "ctype": t, "length": "m * n",
         "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
    ]
    what = {"plain": "C = A B", "alpha": "C = alpha * A B", "acc": "C = alpha * A B + beta * C"}[form]
    task = {
        "function_name": "matmul",
        "description": f"{what} for a row-major m x k matrix A and k x n matrix B of {t}s (C is m x n).",
        "returns": "void",
        "args": args,
        "size_configs": [{"m": 7, "n": 9, "k": 5},
                         {"m": 33 + int(rng.integers(8)), "n": 65, "k": 47 + int(rng.integers(8))},
                         {"m": 130, "n": 97 + int(rng.integers(30)), "k": 200},
                         {"m": m, "n": n, "k": k}],
        "tolerance": tol,
        "reference_c": _reference(t, form),
        "tags": ["dense", "compute-bound", t],
    }
    variants = (
        Variant("naive_16x16", ("naive", "coalesced", "block_256", "pageable"), _naive(t, form, False)),
        Variant("naive_rows_fastest", ("naive", "strided", "block_256"), _naive(t, form, True)),
        Variant("tiled_16", ("shared_tiling", "coalesced", "block_256", "unrolled"), _tiled(t, form, 16)),
        Variant("tiled_32", ("shared_tiling", "coalesced", "block_1024", "unrolled"), _tiled(t, form, 32)),
        Variant("regblock_2x2", ("shared_tiling", "register_blocking", "coalesced", "block_256", "unrolled"),
                _regblock(t, form)),
        Variant("ksplit_atomics", ("shared_tiling", "atomics", "multi_pass", "block_256"), _ksplit(t, form)),
        Variant("transposed_b_strided", ("naive", "strided", "multi_pass", "block_256"), _transposed_b(t, form)),
    )
    return GeneratedTask(task, variants, {"type": t, "form": form, "m": m, "n": n, "k": k})


FAMILY = Family(
    name="matmul",
    description="C = A B (optionally scaled by alpha and accumulated with beta C), row-major, float/double",
    generate=generate,
    n_tasks=50,
    tags=("dense",),
)
