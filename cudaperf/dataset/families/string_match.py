"""Count the positions of a text where a pattern matches: exactly, with wildcards, or within a Hamming distance.

``count_matches(n, text, m, pat)`` returns how many of the positions 0 .. n-m at which ``pat`` (m bytes) matches
``text``. Text and pattern are drawn over a small alphabet so that matches happen. Parameters: the match rule
(exact; wildcard where pattern byte 0 matches anything; at most K mismatches), the alphabet size, the pattern
length (4..64) and the text length. Exact integer result.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["exact", "hamming", "wildcard", "hamming"]


def _match_stmt(kind: str, K: int, tx: str, px: str, full: bool, ind: str = "    ") -> str:
    """Statements setting ``int hit`` for the position whose k-th text byte is ``tx`` (with {k}) and pattern
    byte ``px``; early exit (as the reference) or full comparison of all m bytes."""
    T, Pp = tx.format(k="k"), px.format(k="k")
    if kind == "wildcard":
        neq = f"({Pp} != 0 && {T} != {Pp})" if not full else f"(({Pp} != 0) & ({T} != {Pp}))"
    else:
        neq = f"({T} != {Pp})"
    if full:
        cond = f"mis <= {K}" if kind == "hamming" else "mis == 0"
        return (f"{ind}int mis = 0;\n{ind}for (int k = 0; k < m; ++k) mis += {neq};\n"
                f"{ind}int hit = ({cond});\n")
    if kind == "hamming":
        return (f"{ind}int hit = 1, mis = 0;\n"
                f"{ind}for (int k = 0; k < m; ++k) {{ mis += {neq}; if (mis > {K}) {{ hit = 0; break; }} }}\n")
    return f"{ind}int hit = 1;\n{ind}for (int k = 0; k < m; ++k) if {neq} {{ hit = 0; break; }}\n"


HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
DQ = "__device__ __forceinline__"
SIG = 'extern "C" long long count_matches(int n, const unsigned char* text, int m, const unsigned char* pat)'
SETUP = ("    if (m <= 0 || n < m) return 0;\n"
         "    long long P = (long long)n - m + 1;\n"
         "    unsigned char *dt, *dp; unsigned long long* dc;\n"
         "    cudaMalloc(&dt, (size_t)n); cudaMalloc(&dp, (size_t)m); cudaMalloc(&dc, sizeof(unsigned long long));\n"
         "    cudaMemcpy(dt, text, (size_t)n, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(dp, pat, (size_t)m, cudaMemcpyHostToDevice);\n"
         "    cudaMemset(dc, 0, sizeof(unsigned long long));\n")
TAIL = ("    unsigned long long h = 0;\n"
        "    cudaMemcpy(&h, dc, sizeof h, cudaMemcpyDeviceToHost);\n"
        "    cudaFree(dt); cudaFree(dp); cudaFree(dc);\n"
        "    return (long long)h;\n}\n")

WARP_SUM = "    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);\n"


def _naive_atomic(pre, M):
    return (pre + "__global__ void match_kernel(long long P, const unsigned char* t, const unsigned char* p, int m,"
            " unsigned long long* count) {\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= P) return;\n"
            + M("t[i + {k}]", "p[{k}]")
            + "    if (hit) atomicAdd(count, 1ull);\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    match_kernel<<<(unsigned)((P + 255) / 256), 256>>>(P, dt, dp, m, dc);\n" + TAIL)


def _block_tree(pre, M):
    return (pre + "__global__ void match_kernel(long long P, const unsigned char* t, const unsigned char* p, int m,"
            " unsigned long long* count) {\n"
            "    __shared__ unsigned int sh[256];\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    unsigned int c = 0;\n"
            "    if (i < P) {\n" + M("t[i + {k}]", "p[{k}]", ind="        ") + "        c = hit;\n    }\n"
            "    sh[threadIdx.x] = c;\n"
            "    __syncthreads();\n"
            "    for (int w = 128; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0 && sh[0]) atomicAdd(count, (unsigned long long)sh[0]);\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    match_kernel<<<(unsigned)((P + 255) / 256), 256>>>(P, dt, dp, m, dc);\n" + TAIL)


def _grid_shuffle(pre, M, full):
    return (pre + "__global__ void match_kernel(long long P, const unsigned char* __restrict__ t,"
            " const unsigned char* __restrict__ p, int m, unsigned long long* count) {\n"
            "    unsigned long long c = 0;\n"
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < P;"
            " i += (long long)gridDim.x * blockDim.x) {\n"
            + M("t[i + {k}]", "p[{k}]", full=full, ind="        ") + "        c += hit;\n    }\n"
            + WARP_SUM
            + "    if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    match_kernel<<<sms * 8, 256>>>(P, dt, dp, m, dc);\n" + TAIL)


def _constant(pre, M):
    return (pre + "__constant__ unsigned char cpat[64];\n\n"
            "__global__ void match_kernel(long long P, const unsigned char* t, int m, unsigned long long* count) {\n"
            "    __shared__ unsigned long long warp_sums[4];\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    unsigned long long c = 0;\n"
            "    if (i < P) {\n" + M("t[i + {k}]", "cpat[{k}]", ind="        ") + "        c = hit;\n    }\n"
            + WARP_SUM
            + "    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = c;\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "        unsigned long long s = warp_sums[0] + warp_sums[1] + warp_sums[2] + warp_sums[3];\n"
            "        if (s) atomicAdd(count, s);\n    }\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    cudaMemcpyToSymbol(cpat, pat, (size_t)m);\n"
            "    match_kernel<<<(unsigned)((P + 127) / 128), 128>>>(P, dt, m, dc);\n" + TAIL)


def _shared_tile(pre, M):
    return (pre + "__global__ void match_kernel(long long P, int n, const unsigned char* t, const unsigned char* p,"
            " int m, unsigned long long* count) {\n"
            "    __shared__ unsigned char tile[256 + 64];\n"
            "    __shared__ unsigned char sp[64];\n"
            "    __shared__ unsigned int sh[256];\n"
            "    long long base = (long long)blockIdx.x * 256;\n"
            "    for (int j = threadIdx.x; j < 256 + m - 1; j += blockDim.x)\n"
            "        if (base + j < n) tile[j] = t[base + j];\n"
            "    for (int j = threadIdx.x; j < m; j += blockDim.x) sp[j] = p[j];\n"
            "    __syncthreads();\n"
            "    long long i = base + threadIdx.x;\n"
            "    unsigned int c = 0;\n"
            "    if (i < P) {\n" + M("tile[threadIdx.x + {k}]", "sp[{k}]", ind="        ") + "        c = hit;\n    }\n"
            "    sh[threadIdx.x] = c;\n"
            "    __syncthreads();\n"
            "    for (int w = 128; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0 && sh[0]) atomicAdd(count, (unsigned long long)sh[0]);\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    match_kernel<<<(unsigned)((P + 255) / 256), 256>>>(P, n, dt, dp, m, dc);\n" + TAIL)


def _chunk_per_thread(pre, M):
    return (pre + "__global__ void match_kernel(long long P, const unsigned char* t, const unsigned char* p, int m,"
            " unsigned long long* count) {\n"
            "    const long long CH = 4096;\n"
            "    long long lo = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * CH;\n"
            "    if (lo >= P) return;\n"
            "    long long hi = lo + CH < P ? lo + CH : P;\n"
            "    unsigned long long c = 0;\n"
            "    for (long long i = lo; i < hi; ++i) {\n" + M("t[i + {k}]", "p[{k}]", ind="        ")
            + "        c += hit;\n    }\n"
            "    if (c) atomicAdd(count, c);\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    long long threads = (P + 4095) / 4096;\n"
            "    match_kernel<<<(unsigned)((threads + 63) / 64), 64>>>(P, dt, dp, m, dc);\n" + TAIL)


def _flags_host_sum(pre, M):
    return (pre + "__global__ void flag_kernel(long long P, const unsigned char* t, const unsigned char* p, int m,"
            " unsigned char* flags) {\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= P) return;\n" + M("t[i + {k}]", "p[{k}]") + "    flags[i] = (unsigned char)hit;\n}\n\n"
            "__global__ void block_sums(long long P, const unsigned char* flags, unsigned int* part) {\n"
            "    __shared__ unsigned int sh[512];\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    sh[threadIdx.x] = i < P ? flags[i] : 0u;\n"
            "    __syncthreads();\n"
            "    for (int w = 256; w > 0; w >>= 1) {\n"
            "        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + SIG + " {\n"
            "    if (m <= 0 || n < m) return 0;\n"
            "    long long P = (long long)n - m + 1;\n"
            "    unsigned char *dt, *dp, *df; unsigned int* dpart;\n"
            "    unsigned nb = (unsigned)((P + 511) / 512);\n"
            "    cudaMalloc(&dt, (size_t)n); cudaMalloc(&dp, (size_t)m); cudaMalloc(&df, (size_t)P);\n"
            "    cudaMalloc(&dpart, (size_t)nb * sizeof(unsigned int));\n"
            "    cudaMemcpy(dt, text, (size_t)n, cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(dp, pat, (size_t)m, cudaMemcpyHostToDevice);\n"
            "    flag_kernel<<<(unsigned)((P + 255) / 256), 256>>>(P, dt, dp, m, df);\n"
            "    block_sums<<<nb, 512>>>(P, df, dpart);\n"
            "    unsigned int* hp = (unsigned int*)malloc((size_t)nb * sizeof(unsigned int));\n"
            "    cudaMemcpy(hp, dpart, (size_t)nb * sizeof(unsigned int), cudaMemcpyDeviceToHost);\n"
            "    long long total = 0;\n"
            "    for (unsigned b = 0; b < nb; ++b) total += hp[b];\n"
            "    free(hp);\n"
            "    cudaFree(dt); cudaFree(dp); cudaFree(df); cudaFree(dpart);\n"
            "    return total;\n}\n")


def _reference(M) -> str:
    return ("long long count_matches(int n, const unsigned char* text, int m, const unsigned char* pat) {\n"
            "    long long c = 0;\n"
            "    if (m <= 0 || n < m) return 0;\n"
            "    for (long long i = 0; i + m <= n; ++i) {\n" + M("text[i + {k}]", "pat[{k}]", ind="        ")
            + "        c += hit;\n    }\n"
            "    return c;\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    if kind == "exact":
        alpha = [2, 2, 3, 4][int(rng.integers(4))]
        m = int(rng.integers(4, 11))
        K = 0
        cost = 15.0
    elif kind == "wildcard":
        alpha = [3, 4][int(rng.integers(2))]
        m = int(rng.integers(6, 17))
        K = 0
        cost = 18.0
    else:
        alpha = [2, 4, 4, 8][int(rng.integers(4))]
        m = [16, 24, 32, 40, 48, 64][(index // 4 + int(rng.integers(3))) % 6]
        miss = (alpha - 1) / alpha
        K = max(1, int(round(m * miss * float(rng.uniform(0.55, 0.8)))))
        cost = 3.0 * (1.0 + 1.2 * min(m, (K + 1) / miss))
    n_time = int(min(2.0e8, 1.3e8 / cost)) // 16 * 16 + int(rng.integers(1, 15))
    def M(tx, px, full=False, ind="    "):
        return _match_stmt(kind, K, tx, px, full, ind)

    rule = {"exact": "every byte equal",
            "wildcard": "every pattern byte equal to the text byte or 0 (a wildcard)",
            "hamming": f"at most {K} mismatching bytes"}[kind]
    task = {
        "function_name": "count_matches",
        "description": (f"Count the positions i in [0, n-m] where pat (m = {m} bytes over {alpha} symbols) matches "
                        f"text[i .. i+m): {rule}."),
        "returns": "long long",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "text", "role": "in", "ctype": "unsigned char", "length": "n",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "pat", "role": "in", "ctype": "unsigned char", "length": "m",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
        ],
        "size_configs": [{"n": 1000, "m": m}, {"n": 99991, "m": m}, {"n": m + 3, "m": m}, {"n": n_time, "m": m}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(M),
        "tags": ["string", "integer", "reduction"],
    }
    pre = HEAD
    variants = (
        Variant("naive_atomic", ("naive", "atomics", "coalesced", "branch_divergent", "block_256", "pageable"),
                _naive_atomic(pre, M)),
        Variant("block_tree", ("naive", "tree_reduction", "atomics", "block_256", "pageable"), _block_tree(pre, M)),
        Variant("grid_stride_shuffle", ("grid_stride", "warp_shuffle", "atomics", "readonly_cache", "block_256",
                                        "pageable"), _grid_shuffle(pre, M, False)),
        Variant("grid_stride_full_compare", ("grid_stride", "warp_shuffle", "atomics", "branchless", "block_256",
                                             "pageable"), _grid_shuffle(pre, M, True)),
        Variant("constant_pattern", ("constant_memory", "warp_shuffle", "atomics", "block_128", "pageable"),
                _constant(pre, M)),
        Variant("shared_tile", ("shared_tiling", "tree_reduction", "atomics", "block_256", "pageable"),
                _shared_tile(pre, M)),
        Variant("chunk_per_thread", ("thread_per_row", "strided", "atomics", "block_64", "pageable"),
                _chunk_per_thread(pre, M)),
        Variant("flags_host_sum", ("multi_pass", "two_level", "tree_reduction", "host_compute", "block_512",
                                   "pageable"), _flags_host_sum(pre, M)),
    )
    return GeneratedTask(task, variants, {"kind": kind, "alphabet": alpha, "m": m, "K": K, "n_time": n_time})


FAMILY = Family(
    name="string_match",
    description="count exact / wildcard / Hamming-distance pattern occurrences in a text over a small alphabet",
    generate=generate,
    n_tasks=50,
    tags=("string", "integer"),
)
