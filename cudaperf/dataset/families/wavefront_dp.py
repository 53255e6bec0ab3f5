"""Batched dynamic programming with anti-diagonal dependencies over many string pairs (exact integers).

Pair p compares a[p*m .. p*m+m) with b[p*n .. p*n+n) (bytes over a small alphabet) and scores it with one of:
edit distance with weighted substitution/indel costs, LCS length, Needleman-Wunsch global score, or
Smith-Waterman local score (the best cell). Parameters: the score kind and its costs, the alphabet size, the
string lengths m and n, and the number of pairs.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["edit", "lcs", "nw", "sw"]


def _scoring(kind: str, p: dict) -> tuple[str, bool]:
    """(QUAL-prefixed helper functions cell() and bound(), local flag)."""
    if kind == "edit":
        cell = (f"int s = dg + (ca == cb ? 0 : {p['sub']}); int t = (up < lf ? up : lf) + {p['gap']};"
                " return s < t ? s : t;")
        bound = f"return k * {p['gap']};"
    elif kind == "lcs":
        cell = "(void)0; return ca == cb ? dg + 1 : (up > lf ? up : lf);"
        bound = "(void)k; return 0;"
    elif kind == "nw":
        cell = (f"int s = dg + (ca == cb ? {p['match']} : -{p['mismatch']}); int t = (up > lf ? up : lf) - {p['gap']};"
                " return s > t ? s : t;")
        bound = f"return -k * {p['gap']};"
    else:
        cell = (f"int s = dg + (ca == cb ? {p['match']} : -{p['mismatch']}); int t = (up > lf ? up : lf) - {p['gap']};"
                " int v = s > t ? s : t; return v > 0 ? v : 0;")
        bound = "(void)k; return 0;"
    fns = (f"QUAL int cell(int dg, int up, int lf, unsigned char ca, unsigned char cb) {{ {cell} }}\n"
           f"QUAL int bound(int k) {{ {bound} }}\n")
    return fns, kind == "sw"


HEAD = "#include <cuda_runtime.h>\n\n"
DQ = "__device__ __forceinline__"
SIG = ('extern "C" void dp_batch(int npairs, int m, int n, const unsigned char* a, const unsigned char* b,'
       ' int* score)')
GUARD = "    if (npairs <= 0) return;\n"
ALLOC = ("    unsigned char *da, *db; int* ds;\n"
         "    size_t abytes = (size_t)npairs * m, bbytes = (size_t)npairs * n;\n"
         "    cudaMalloc(&da, abytes ? abytes : 1); cudaMalloc(&db, bbytes ? bbytes : 1);\n"
         "    cudaMalloc(&ds, (size_t)npairs * sizeof(int));\n"
         "    cudaMemcpy(da, a, abytes, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(db, b, bbytes, cudaMemcpyHostToDevice);\n")
TAIL = ("    cudaMemcpy(score, ds, (size_t)npairs * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "    cudaFree(da); cudaFree(db); cudaFree(ds);\n}\n")


def _row_loop(local: bool, row: str) -> str:
    """Body of the sequential row-by-row DP for one pair; ``row(j)`` is the storage expression."""
    R = lambda j: row.format(j=j)  # noqa: E731
    best = "            if (v > best) best = v;\n" if local else ""
    return (f"    for (int j = 0; j <= n; ++j) {R('j')} = bound(j);\n"
            "    int best = 0;\n"
            "    for (int i = 1; i <= m; ++i) {\n"
            f"        int diag = {R('0')}; {R('0')} = bound(i);\n"
            "        unsigned char ca = A[i - 1];\n"
            "        for (int j = 1; j <= n; ++j) {\n"
            f"            int up = {R('j')};\n"
            f"            int v = cell(diag, up, {R('j - 1')}, ca, B[j - 1]);\n"
            f"            diag = up; {R('j')} = v;\n{best}"
            "        }\n    }\n"
            f"    int result = {'best' if local else R('n')};\n")


def _thread_local(pre, local, nmax, block, grid=None):
    launch = (f"    dp_kernel<<<{grid}, {block}>>>(npairs, m, n, da, db, ds);\n" if grid else
              f"    dp_kernel<<<(npairs + {block - 1}) / {block}, {block}>>>(npairs, m, n, da, db, ds);\n")
    return (pre + "__global__ void dp_kernel(int npairs, int m, int n, const unsigned char* a,"
            " const unsigned char* b, int* score) {\n"
            f"    int rowbuf[{nmax + 1}];\n"
            "    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < npairs; p += gridDim.x * blockDim.x) {\n"
            "    const unsigned char* A = a + (size_t)p * m; const unsigned char* B = b + (size_t)p * n;\n"
            + _row_loop(local, "rowbuf[{j}]")
            + "    score[p] = result;\n    }\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC + launch + TAIL)


def _thread_global(pre, local, interleaved):
    row = "rows[(size_t)({j}) * npairs + p]" if interleaved else "rows[(size_t)p * (n + 1) + ({j})]"
    return (pre + "__global__ void dp_kernel(int npairs, int m, int n, const unsigned char* a,"
            " const unsigned char* b, int* rows, int* score) {\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n"
            "    const unsigned char* A = a + (size_t)p * m; const unsigned char* B = b + (size_t)p * n;\n"
            + _row_loop(local, row)
            + "    score[p] = result;\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    int* rows; cudaMalloc(&rows, (size_t)npairs * (n + 1) * sizeof(int));\n"
            "    dp_kernel<<<(npairs + 127) / 128, 128>>>(npairs, m, n, da, db, rows, ds);\n"
            "    cudaFree(rows);\n" + TAIL)


def _block_wavefront(pre, local, mmax, nmax, block):
    fin = ("    atomicMax(&sbest, best);\n    __syncthreads();\n"
           "    if (threadIdx.x == 0) score[p] = sbest;\n" if local else
           "    if (threadIdx.x == 0) score[p] = d1[m];\n")
    return (pre + "__global__ void dp_wave(int m, int n, const unsigned char* a, const unsigned char* b,"
            " int* score) {\n"
            f"    __shared__ int buf[3][{mmax + 1}];\n"
            f"    __shared__ unsigned char sa[{mmax}], sb[{nmax}];\n"
            "    __shared__ int sbest;\n"
            "    int p = blockIdx.x;\n"
            "    for (int i = threadIdx.x; i < m; i += blockDim.x) sa[i] = a[(size_t)p * m + i];\n"
            "    for (int j = threadIdx.x; j < n; j += blockDim.x) sb[j] = b[(size_t)p * n + j];\n"
            "    if (threadIdx.x == 0) sbest = 0;\n"
            "    __syncthreads();\n"
            "    int* d2 = buf[0]; int* d1 = buf[1]; int* d0 = buf[2];\n"
            "    int best = 0;\n"
            "    for (int d = 0; d <= m + n; ++d) {\n"
            "        for (int i = threadIdx.x; i <= m; i += blockDim.x) {\n"
            "            int j = d - i;\n"
            "            if (j < 0 || j > n) continue;\n"
            "            int v;\n"
            "            if (i == 0) v = bound(j);\n"
            "            else if (j == 0) v = bound(i);\n"
            "            else { v = cell(d2[i - 1], d1[i - 1], d1[i], sa[i - 1], sb[j - 1]); if (v > best) best = v; }\n"
            "            d0[i] = v;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        int* t = d2; d2 = d1; d1 = d0; d0 = t;\n"
            "    }\n" + fin + "}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + f"    dp_wave<<<npairs, {block}>>>(m, n, da, db, ds);\n" + TAIL)


def _diag_launches(pre, local):
    fin = ("    int best = 0;\n    for (int i = 0; i <= m; ++i) { int v = bestbuf[(size_t)p * (m + 1) + i];"
           " if (v > best) best = v; }\n    score[p] = best;\n" if local else
           "    score[p] = last[(size_t)p * (m + 1) + m];\n")
    upd = ("        if (j > 0 && v > bestbuf[idx]) bestbuf[idx] = v;\n" if local else "")
    return (pre + "__global__ void dp_diag(int d, int npairs, int m, int n, const unsigned char* a,"
            " const unsigned char* b, const int* d2, const int* d1, int* d0, int* bestbuf) {\n"
            "    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (idx >= (long long)npairs * (m + 1)) return;\n"
            "    int p = (int)(idx / (m + 1)), i = (int)(idx % (m + 1));\n"
            "    int j = d - i;\n"
            "    if (j < 0 || j > n) return;\n"
            "    int v;\n"
            "    if (i == 0) v = bound(j);\n"
            "    else if (j == 0) v = bound(i);\n"
            "    else {\n"
            "        v = cell(d2[idx - 1], d1[idx - 1], d1[idx], a[(size_t)p * m + i - 1], b[(size_t)p * n + j - 1]);\n"
            f"{upd}"
            "    }\n"
            "    d0[idx] = v;\n}\n\n"
            "__global__ void dp_final(int npairs, int m, const int* last, const int* bestbuf, int* score) {\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n" + fin + "}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    size_t cells = (size_t)npairs * (m + 1);\n"
            "    int *buf0, *buf1, *buf2, *bestbuf;\n"
            "    cudaMalloc(&buf0, cells * sizeof(int)); cudaMalloc(&buf1, cells * sizeof(int));\n"
            "    cudaMalloc(&buf2, cells * sizeof(int)); cudaMalloc(&bestbuf, cells * sizeof(int));\n"
            "    cudaMemset(bestbuf, 0, cells * sizeof(int));\n"
            "    int *d2 = buf0, *d1 = buf1, *d0 = buf2;\n"
            "    unsigned blocks = (unsigned)((cells + 255) / 256);\n"
            "    for (int d = 0; d <= m + n; ++d) {\n"
            "        dp_diag<<<blocks, 256>>>(d, npairs, m, n, da, db, d2, d1, d0, bestbuf);\n"
            "        int* t = d2; d2 = d1; d1 = d0; d0 = t;\n"
            "    }\n"
            "    dp_final<<<(npairs + 255) / 256, 256>>>(npairs, m, d1, bestbuf, ds);\n"
            "    cudaFree(buf0); cudaFree(buf1); cudaFree(buf2); cudaFree(bestbuf);\n" + TAIL)


def _chunked(pre, local, nmax):
    return (pre + "__global__ void dp_kernel(int cnt, int m, int n, const unsigned char* a,"
            " const unsigned char* b, int* score) {\n"
            f"    int rowbuf[{nmax + 1}];\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= cnt) return;\n"
            "    const unsigned char* A = a + (size_t)p * m; const unsigned char* B = b + (size_t)p * n;\n"
            + _row_loop(local, "rowbuf[{j}]")
            + "    score[p] = result;\n}\n\n"
            + SIG + " {\n" + GUARD
            + "    const int C = 256;\n"
            "    unsigned char *da, *db; int* ds;\n"
            "    cudaMalloc(&da, (size_t)C * m + 1); cudaMalloc(&db, (size_t)C * n + 1);\n"
            "    cudaMalloc(&ds, (size_t)C * sizeof(int));\n"
            "    for (int lo = 0; lo < npairs; lo += C) {\n"
            "        int cnt = npairs - lo < C ? npairs - lo : C;\n"
            "        cudaMemcpy(da, a + (size_t)lo * m, (size_t)cnt * m, cudaMemcpyHostToDevice);\n"
            "        cudaMemcpy(db, b + (size_t)lo * n, (size_t)cnt * n, cudaMemcpyHostToDevice);\n"
            "        dp_kernel<<<(cnt + 63) / 64, 64>>>(cnt, m, n, da, db, ds);\n"
            "        cudaMemcpy(score + lo, ds, (size_t)cnt * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(da); cudaFree(db); cudaFree(ds);\n}\n")


def _reference(fns: str, local: bool) -> str:
    return ("#include <stdlib.h>\n\n" + fns.replace("QUAL", "static inline") + "\n"
            "void dp_batch(int npairs, int m, int n, const unsigned char* a, const unsigned char* b, int* score) {\n"
            "    int* row = (int*)malloc((size_t)(n + 1) * sizeof(int));\n"
            "    for (int p = 0; p < npairs; ++p) {\n"
            "    const unsigned char* A = a + (size_t)p * m; const unsigned char* B = b + (size_t)p * n;\n"
            + _row_loop(local, "row[{j}]")
            + "    score[p] = result;\n    }\n    free(row);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    p: dict = {"kind": kind}
    if kind == "edit":
        p.update(sub=int(rng.integers(1, 4)), gap=int(rng.integers(1, 3)))
    elif kind in ("nw", "sw"):
        p.update(match=int(rng.integers(1, 4)), mismatch=int(rng.integers(1, 4)), gap=int(rng.integers(1, 4)))
    alpha = [2, 4, 4, 8, 20][int(rng.integers(5))]
    lens = [48, 64, 96, 128, 160, 200, 256]
    m = lens[(index // 4 + int(rng.integers(3))) % len(lens)] + int(rng.integers(0, 5))
    n = lens[(index // 4 + int(rng.integers(4))) % len(lens)] + int(rng.integers(0, 5))
    npairs = max(200, int(3e7 / (m * n))) + int(rng.integers(0, 30))  # about 3e7 cells for the reference
    fns, local = _scoring(kind, p)
    desc = {"edit": f"weighted edit distance (substitution {p.get('sub')}, insertion/deletion {p.get('gap')})",
            "lcs": "length of the longest common subsequence",
            "nw": (f"Needleman-Wunsch global alignment score (match +{p.get('match')}, mismatch "
                   f"-{p.get('mismatch')}, gap -{p.get('gap')})"),
            "sw": (f"Smith-Waterman local alignment score (match +{p.get('match')}, mismatch "
                   f"-{p.get('mismatch')}, linear gap -{p.get('gap')}; best cell, >= 0)")}[kind]
    task = {
        "function_name": "dp_batch",
        "description": (f"score[p] = {desc} of the strings a[p*m .. p*m+m) and b[p*n .. p*n+n) over an alphabet "
                        f"of {alpha} symbols, for every pair p < npairs."),
        "returns": "void",
        "args": [
            {"name": "npairs", "role": "scalar", "ctype": "int"},
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "a", "role": "in", "ctype": "unsigned char", "length": "npairs * m",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
            {"name": "b", "role": "in", "ctype": "unsigned char", "length": "npairs * n",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
            {"name": "score", "role": "out", "ctype": "int", "length": "npairs"},
        ],
        "size_configs": [{"npairs": 5, "m": 7, "n": 13}, {"npairs": 97, "m": m, "n": n - 3},
                         {"npairs": 33, "m": 1, "n": 1}, {"npairs": npairs, "m": m, "n": n}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(fns, local),
        "tags": ["dynamic-programming", "integer", "wavefront"],
    }
    pre = HEAD + fns.replace("QUAL", DQ) + "\n"
    variants = (
        Variant("thread_per_pair_local", ("thread_per_row", "block_128", "pageable"),
                _thread_local(pre, local, n, 128)),
        Variant("thread_per_pair_global_strided", ("thread_per_row", "strided", "block_128", "pageable"),
                _thread_global(pre, local, False)),
        Variant("thread_per_pair_global_interleaved", ("thread_per_row", "coalesced", "block_128", "pageable"),
                _thread_global(pre, local, True)),
        Variant("block_wavefront_b128", ("block_per_row", "shared_tiling", "atomics", "block_128", "pageable"),
                _block_wavefront(pre, local, m, n, 128)),
        Variant("block_wavefront_b32", ("block_per_row", "shared_tiling", "atomics", "block_32", "pageable"),
                _block_wavefront(pre, local, m, n, 32)),
        Variant("launch_per_diagonal", ("many_launches", "device_resident", "double_buffered", "coalesced",
                                        "block_256", "pageable"), _diag_launches(pre, local)),
        Variant("small_grid", ("small_grid", "thread_per_row", "grid_stride", "block_32", "pageable"),
                _thread_local(pre, local, n, 32, grid="4")),
        Variant("chunked_transfers", ("in_loop_transfers", "many_launches", "thread_per_row", "block_64"),
                _chunked(pre, local, n)),
    )
    return GeneratedTask(task, variants, {**p, "alphabet": alpha, "m": m, "n": n, "npairs_time": npairs})


FAMILY = Family(
    name="wavefront_dp",
    description="batched edit distance / LCS / Needleman-Wunsch / Smith-Waterman over many string pairs",
    generate=generate,
    n_tasks=50,
    tags=("dynamic-programming", "integer"),
)
