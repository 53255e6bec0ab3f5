"""Longest-common-subsequence lengths for a batch of string pairs of varied lengths (exact integers).

Pair p compares the byte string a[aoff[p] .. aoff[p+1]) with b[boff[p] .. boff[p+1]); the offsets are random cuts,
so the lengths vary from 0 to many times their mean and the work per pair (la * lb cells) is irregular. Two symbols
match when their classes x >> SHIFT are equal (SHIFT 0: plain equality; larger: symbols grouped by their high
bits). The DP is L[i][j] = L[i-1][j-1] + 1 on a match, else max(L[i-1][j], L[i][j-1]), with a zero first row and
column. The output is either the LCS length L[la][lb] or the indel distance la + lb - 2 L[la][lb].

What varies with the index: the output (LCS length / indel distance), the alphabet (2 to 26 symbols), the class
shift, the mean lengths of the two strings and the number of pairs.

Variants: a thread per pair with two DP rows (global) or a rolling row (local memory), a block per pair over
anti-diagonals in shared memory, a warp per pair over strips of 32 rows (shuffles), and bit-parallel LCS
(V' = (V + (V & M)) | (V & ~M), the length being the zero bits of V; Allison-Dix / Hyyro) with 64-bit or 32-bit
words per thread, or a warp per pair whose lanes hold consecutive words and resolve the addition's carries by
carry-lookahead over two ballots.

CPU and GPU agree exactly: every value is an int built by +1 and max of small ints; the bit-parallel form computes
the same lengths. The tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

ALPHABETS = [2, 4, 8, 20, 26, 4, 16, 3]
MEANS = [16, 24, 40, 64, 100, 160, 200, 48]
HEAD = "#include <cuda_runtime.h>\n\n"
DQ = "__device__ __forceinline__"
SIG_ARGS = "int npairs, const int* aoff, const unsigned char* a, const int* boff, const unsigned char* b, int* out"
SIG = f'extern "C" void lcs_batch({SIG_ARGS})'
KARGS = "int npairs, const int* aoff, const unsigned char* a, const int* boff, const unsigned char* b"
KCALL = "npairs, daoff, da, dboff, db"
PAIR = ("    const unsigned char* A = a + aoff[p]; int la = aoff[p + 1] - aoff[p];\n"
        "    const unsigned char* B = b + boff[p]; int lb = boff[p + 1] - boff[p];\n")


def _fns(shift: int, nclass: int, indel: bool) -> str:
    fin = "return la + lb - 2 * l;" if indel else "(void)la; (void)lb; return l;"
    return (f"#define NCLS {nclass}\n"
            f"QUAL int cls(int x) {{ return x >> {shift}; }}\n"
            "QUAL int mx2(int x, int y) { return x > y ? x : y; }\n"
            f"QUAL int fin(int l, int la, int lb) {{ {fin} }}\n")


def _row_dp(row: str) -> str:
    """Rolling-row DP of one pair (A, la, B, lb in scope); leaves the LCS length in ``l``."""
    R = lambda j: row.format(j=j)  # noqa: E731
    return (f"    for (int j = 0; j <= lb; ++j) {R('j')} = 0;\n"
            "    for (int i = 1; i <= la; ++i) {\n"
            "        int diag = 0, left = 0;\n"
            "        int ca = cls(A[i - 1]);\n"
            "        for (int j = 1; j <= lb; ++j) {\n"
            f"            int up = {R('j')};\n"
            "            int v = ca == cls(B[j - 1]) ? diag + 1 : mx2(up, left);\n"
            f"            diag = up; {R('j')} = v; left = v;\n"
            "        }\n"
            "    }\n"
            f"    int l = {R('lb')};\n")


def _reference(fns: str) -> str:
    return ("#include <stdlib.h>\n\n" + fns.replace("QUAL", "static inline") + "\n"
            f"void lcs_batch({SIG_ARGS}) {{\n"
            "    int maxlb = 0;\n"
            "    for (int p = 0; p < npairs; ++p) { int q = boff[p + 1] - boff[p]; if (q > maxlb) maxlb = q; }\n"
            "    int* row = (int*)malloc((size_t)(maxlb + 1) * sizeof(int));\n"
            "    for (int p = 0; p < npairs; ++p) {\n"
            + "".join("    " + ln + "\n" for ln in (PAIR + _row_dp("row[{j}]")).splitlines())
            + "        out[p] = fin(l, la, lb);\n"
            "    }\n    free(row);\n}\n")


IN = ("    if (npairs <= 0) return;\n"
      "    int ta = aoff[npairs], tb = boff[npairs];\n"
      "    int *daoff, *dboff, *dout; unsigned char *da, *db;\n"
      "    cudaMalloc(&daoff, (size_t)(npairs + 1) * sizeof(int));\n"
      "    cudaMalloc(&dboff, (size_t)(npairs + 1) * sizeof(int));\n"
      "    cudaMalloc(&dout, (size_t)npairs * sizeof(int));\n"
      "    cudaMalloc(&da, (size_t)ta + 1); cudaMalloc(&db, (size_t)tb + 1);\n"
      "    cudaMemcpy(daoff, aoff, (size_t)(npairs + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(dboff, boff, (size_t)(npairs + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(da, a, (size_t)ta, cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(db, b, (size_t)tb, cudaMemcpyHostToDevice);\n")
OUT = ("    cudaMemcpy(out, dout, (size_t)npairs * sizeof(int), cudaMemcpyDeviceToHost);\n"
       "    cudaFree(daoff); cudaFree(dboff); cudaFree(dout); cudaFree(da); cudaFree(db);\n")


def _thread_two_rows(pre: str, block: int) -> str:
    """Thread per pair; a previous and a current DP row in global scratch at the pair's own offset."""
    return (pre + f"__global__ void lcs_rows({KARGS}, int* scratch, int* out) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "    int* prv = scratch + 2 * ((size_t)boff[p] + p);\n"
            "    int* cur = prv + lb + 1;\n"
            "    for (int j = 0; j <= lb; ++j) prv[j] = 0;\n"
            "    cur[0] = 0;\n"
            "    for (int i = 1; i <= la; ++i) {\n"
            "        int ca = cls(A[i - 1]);\n"
            "        for (int j = 1; j <= lb; ++j)\n"
            "            cur[j] = ca == cls(B[j - 1]) ? prv[j - 1] + 1 : mx2(prv[j], cur[j - 1]);\n"
            "        int* t = prv; prv = cur; cur = t;\n"
            "    }\n"
            "    out[p] = fin(prv[lb], la, lb);\n}\n\n"
            + SIG + " {\n" + IN
            + "    int* scratch; cudaMalloc(&scratch, 2 * ((size_t)tb + npairs) * sizeof(int));\n"
            f"    lcs_rows<<<(npairs + {block - 1}) / {block}, {block}>>>({KCALL}, scratch, dout);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def _thread_local(pre: str, lmax: int, block: int) -> str:
    """Thread per pair; one rolling row in a local array (global scratch when lb exceeds it)."""
    return (pre + f"#define LMAX {lmax}\n\n"
            f"__global__ void lcs_local({KARGS}, int* scratch, int* out) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n"
            "    int loc[LMAX + 1];\n" + PAIR
            + "    int* row = lb <= LMAX ? loc : scratch + (size_t)boff[p] + p;\n"
            + _row_dp("row[{j}]")
            + "    out[p] = fin(l, la, lb);\n}\n\n"
            + SIG + " {\n" + IN
            + "    int* scratch; cudaMalloc(&scratch, ((size_t)tb + npairs) * sizeof(int));\n"
            f"    lcs_local<<<(npairs + {block - 1}) / {block}, {block}>>>({KCALL}, scratch, dout);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def _block_wave(pre: str, block: int) -> str:
    """Block per pair over anti-diagonals: three diagonals (indexed by i) in dynamic shared memory, or in global
    scratch at the pair's offset when the longest a would not fit."""
    return (pre + f"__global__ void lcs_wave({KARGS}, int L, int* gbuf, int* out) {{\n"
            "    extern __shared__ int sdiag[];\n"
            "    int p = blockIdx.x;\n" + PAIR
            + "    int* buf = sdiag;\n"
            "    if (gbuf) { buf = gbuf + 3 * ((size_t)aoff[p] + p); L = la + 1; }\n"
            "    int* d2 = buf; int* d1 = buf + L; int* d0 = buf + 2 * L;\n"
            "    for (int d = 0; d <= la + lb; ++d) {\n"
            "        int ilo = d - lb > 0 ? d - lb : 0, ihi = d < la ? d : la;\n"
            "        for (int i = ilo + threadIdx.x; i <= ihi; i += blockDim.x) {\n"
            "            int j = d - i, v = 0;\n"
            "            if (i > 0 && j > 0)\n"
            "                v = cls(A[i - 1]) == cls(B[j - 1]) ? d2[i - 1] + 1 : mx2(d1[i - 1], d1[i]);\n"
            "            d0[i] = v;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        int* t = d2; d2 = d1; d1 = d0; d0 = t;\n"
            "    }\n"
            "    if (threadIdx.x == 0) out[p] = fin(d1[la], la, lb);\n}\n\n"
            + SIG + " {\n" + IN
            + "    int maxla = 0;\n"
            "    for (int p = 0; p < npairs; ++p) { int q = aoff[p + 1] - aoff[p]; if (q > maxla) maxla = q; }\n"
            "    int L = maxla + 1;\n"
            "    size_t sbytes = (size_t)3 * L * sizeof(int);\n"
            "    int* gbuf = 0;\n"
            "    if (sbytes > 40 * 1024) {\n"
            "        cudaMalloc(&gbuf, (size_t)3 * ((size_t)ta + npairs) * sizeof(int));\n"
            "        sbytes = 0;\n"
            "    }\n"
            f"    lcs_wave<<<npairs, {block}, sbytes>>>({KCALL}, L, gbuf, dout);\n"
            "    if (gbuf) cudaFree(gbuf);\n" + OUT + "}\n")


def _warp_strips(pre: str, block: int) -> str:
    """Warp per pair: strips of 32 rows of a; lane r owns row i0 + r and runs one column behind lane r - 1, whose
    values arrive by __shfl_up_sync; the strip's last row goes to a global row for the next strip."""
    return (pre + f"__global__ void lcs_warp({KARGS}, int* rows, int* out) {{\n"
            "    int p = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "    int* row = rows + (size_t)boff[p] + p;\n"
            "    for (int j = lane; j <= lb; j += 32) row[j] = 0;\n"
            "    if (la == 0) {\n"
            "        if (lane == 0) out[p] = fin(0, la, lb);\n"
            "        return;\n"
            "    }\n"
            "    __syncwarp();\n"
            "    for (int i0 = 1; i0 <= la; i0 += 32) {\n"
            "        int i = i0 + lane;\n"
            "        bool active = i <= la;\n"
            "        int ca = active ? cls(A[i - 1]) : -1;\n"
            "        int left = 0, diag = 0, cur = 0;\n"
            "        for (int s = 0; s < lb + 31; ++s) {\n"
            "            int nb = __shfl_up_sync(0xffffffffu, cur, 1);\n"
            "            int j = s - lane + 1;\n"
            "            if (active && j >= 1 && j <= lb) {\n"
            "                int up = lane == 0 ? row[j] : nb;\n"
            "                int v = ca == cls(B[j - 1]) ? diag + 1 : mx2(up, left);\n"
            "                diag = up; left = v; cur = v;\n"
            "                if (lane == 31) row[j] = v;\n"
            "            }\n"
            "            __syncwarp();\n"
            "        }\n"
            "        if (i == la) out[p] = fin(left, la, lb);\n"
            "        __syncwarp();\n"
            "    }\n}\n\n"
            + SIG + " {\n" + IN
            + "    int* rows; cudaMalloc(&rows, ((size_t)tb + npairs) * sizeof(int));\n"
            "    size_t threads = (size_t)npairs * 32;\n"
            f"    lcs_warp<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>({KCALL}, rows, dout);\n"
            "    cudaFree(rows);\n" + OUT + "}\n")


def _bits_thread(pre: str, wb: int, block: int) -> str:
    """Thread per pair, bit-parallel over a in words of ``wb`` bits: per class a match mask of la bits, and the
    vector V (ones at first); per symbol of b, V = (V + (V & M)) | (V & ~M) with the carry rippling across the
    words; the LCS length is the number of zero bits of V (the bits past la stay ones)."""
    wt = "unsigned long long" if wb == 64 else "unsigned int"
    popc = "__popcll" if wb == 64 else "__popc"
    return (pre + f"typedef {wt} word;\n#define WB {wb}\n\n"
            f"__global__ void lcs_bits({KARGS}, word* scratch, int* out) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "    int nw = (la + WB - 1) / WB;\n"
            "    size_t base = ((size_t)aoff[p] + (size_t)(WB - 1) * p) / WB;\n"
            "    word* V = scratch + base * (NCLS + 1);\n"
            "    word* M = V + nw;\n"
            "    for (int w = 0; w < nw; ++w) V[w] = ~(word)0;\n"
            "    for (int k = 0; k < NCLS * nw; ++k) M[k] = 0;\n"
            "    for (int i = 0; i < la; ++i) M[cls(A[i]) * nw + i / WB] |= (word)1 << (i % WB);\n"
            "    for (int j = 0; j < lb; ++j) {\n"
            "        const word* Mj = M + cls(B[j]) * nw;\n"
            "        word carry = 0;\n"
            "        for (int w = 0; w < nw; ++w) {\n"
            "            word v = V[w], m = Mj[w];\n"
            "            word s1 = v + (v & m);\n"
            "            word c1 = s1 < v;\n"
            "            word s2 = s1 + carry;\n"
            "            word c2 = s2 < s1;\n"
            "            V[w] = s2 | (v & ~m);\n"
            "            carry = c1 | c2;\n"
            "        }\n"
            "    }\n"
            "    int l = 0;\n"
            f"    for (int w = 0; w < nw; ++w) l += {popc}(~V[w]);\n"
            "    out[p] = fin(l, la, lb);\n}\n\n"
            + SIG + " {\n" + IN
            + "    size_t words = (NCLS + 1) * (((size_t)ta + (size_t)(WB - 1) * npairs) / WB + 1);\n"
            "    word* scratch; cudaMalloc(&scratch, words * sizeof(word));\n"
            f"    lcs_bits<<<(npairs + {block - 1}) / {block}, {block}>>>({KCALL}, scratch, dout);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def _bits_warp(pre: str, block: int) -> str:
    """Warp per pair, bit-parallel in 32-bit words: the masks built with ballots; per symbol of b, lane w of a chunk
    of 32 words adds its word pair and the carries between lanes come from carry-lookahead over the ballots of the
    words that overflow (generate) and that are all ones (propagate): c = (X + Y + cin) ^ X ^ Y with X = G | P and
    Y = G; the chunk's carry out feeds the next chunk."""
    return (pre + f"__global__ void lcs_warp_bits({KARGS}, unsigned* scratch, int* out) {{\n"
            "    int p = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "    int nw = (la + 31) / 32;\n"
            "    size_t base = ((size_t)aoff[p] + (size_t)31 * p) / 32;\n"
            "    unsigned* V = scratch + base * (NCLS + 1);\n"
            "    unsigned* M = V + nw;\n"
            "    for (int w = 0; w < nw; ++w) {\n"
            "        int i = w * 32 + lane;\n"
            "        int c = i < la ? cls(A[i]) : -1;\n"
            "        for (int q = 0; q < NCLS; ++q) {\n"
            "            unsigned m = __ballot_sync(0xffffffffu, c == q);\n"
            "            if (lane == 0) M[q * nw + w] = m;\n"
            "        }\n"
            "    }\n"
            "    for (int w = lane; w < nw; w += 32) V[w] = 0xffffffffu;\n"
            "    __syncwarp();\n"
            "    int nch = (nw + 31) / 32;\n"
            "    for (int j = 0; j < lb; ++j) {\n"
            "        const unsigned* Mj = M + cls(B[j]) * nw;\n"
            "        unsigned cin = 0;\n"
            "        for (int ch = 0; ch < nch; ++ch) {\n"
            "            int w = ch * 32 + lane;\n"
            "            bool ok = w < nw;\n"
            "            unsigned v = ok ? V[w] : 0u, m = ok ? Mj[w] : 0u;\n"
            "            unsigned s = v + (v & m);\n"
            "            unsigned G = __ballot_sync(0xffffffffu, s < v);\n"
            "            unsigned P = __ballot_sync(0xffffffffu, s == 0xffffffffu);\n"
            "            unsigned long long X = G | P, Y = G;\n"
            "            unsigned long long C = (X + Y + cin) ^ X ^ Y;\n"
            "            unsigned c = (unsigned)(C >> lane) & 1u;\n"
            "            if (ok) V[w] = (s + c) | (v & ~m);\n"
            "            cin = (unsigned)(C >> 32) & 1u;\n"
            "        }\n"
            "    }\n"
            "    int l = 0;\n"
            "    for (int w = lane; w < nw; w += 32) l += __popc(~V[w]);\n"
            "    for (int o = 16; o > 0; o >>= 1) l += __shfl_down_sync(0xffffffffu, l, o);\n"
            "    if (lane == 0) out[p] = fin(l, la, lb);\n}\n\n"
            + SIG + " {\n" + IN
            + "    size_t words = (NCLS + 1) * (((size_t)ta + (size_t)31 * npairs) / 32 + 1);\n"
            "    unsigned* scratch; cudaMalloc(&scratch, words * sizeof(unsigned));\n"
            "    size_t threads = (size_t)npairs * 32;\n"
            f"    lcs_warp_bits<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>({KCALL}, scratch, dout);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    indel = index % 2 == 1
    alpha = ALPHABETS[(index // 2 + int(rng.integers(3))) % len(ALPHABETS)]
    shift = [0, 0, 1, 2][(index // 3 + int(rng.integers(2))) % 4] if alpha >= 4 else 0
    nclass = ((alpha - 1) >> shift) + 1
    ma = MEANS[(index // 2 + int(rng.integers(3))) % len(MEANS)] + int(rng.integers(0, 4))
    mb = MEANS[(index // 3 + int(rng.integers(4))) % len(MEANS)] + int(rng.integers(0, 6))
    npairs = int(np.clip(2.0e7 / (ma * mb), 400, 150_000)) + int(rng.integers(0, 50))
    fns = _fns(shift, nclass, indel)
    what = "la + lb - 2 * LCS(a_p, b_p) (the indel distance)" if indel else "LCS(a_p, b_p)"
    match = ("equal symbols match" if shift == 0 else
             f"two symbols x, y match when x >> {shift} == y >> {shift} ({nclass} classes)")
    task = {
        "function_name": "lcs_batch",
        "description": (f"out[p] = {what}, the length of the longest common subsequence, where a_p = "
                        f"a[aoff[p] .. aoff[p+1]) and b_p = b[boff[p] .. boff[p+1]) are byte strings over an "
                        f"alphabet of {alpha} symbols of varied lengths (mean about {ma} and {mb}) and {match}, "
                        "for every pair p < npairs."),
        "returns": "void",
        "args": [
            {"name": "npairs", "role": "scalar", "ctype": "int"},
            {"name": "aoff", "role": "in", "ctype": "int", "length": "npairs + 1",
             "dist": {"kind": "offsets", "high": "ta"}},
            {"name": "a", "role": "in", "ctype": "unsigned char", "length": "ta",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
            {"name": "boff", "role": "in", "ctype": "int", "length": "npairs + 1",
             "dist": {"kind": "offsets", "high": "tb"}},
            {"name": "b", "role": "in", "ctype": "unsigned char", "length": "tb",
             "dist": {"kind": "randint", "low": 0, "high": alpha}},
            {"name": "out", "role": "out", "ctype": "int", "length": "npairs"},
        ],
        "size_configs": [{"npairs": 1, "ta": 0, "tb": 9}, {"npairs": 5, "ta": 37, "tb": 61},
                         {"npairs": 77, "ta": 77 * ma // 2 + 3, "tb": 77 * mb // 2 + 1},
                         {"npairs": 3, "ta": 1100 + 2 * ma, "tb": 2 * mb + 250},
                         {"npairs": npairs, "ta": npairs * ma, "tb": npairs * mb}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(fns),
        "tags": ["dynamic-programming", "integer", "irregular", "string"],
    }
    pre = HEAD + fns.replace("QUAL", DQ) + "\n"
    variants = (
        Variant("thread_two_rows_b128", ("thread_per_row", "strided", "block_128", "pageable"),
                _thread_two_rows(pre, 128)),
        Variant("thread_local_row_b64", ("thread_per_row", "block_64", "pageable"),
                _thread_local(pre, 256 if mb < 100 else 512, 64)),
        Variant("block_wavefront_b256", ("block_per_row", "shared_tiling", "block_256", "pageable"),
                _block_wave(pre, 256)),
        Variant("warp_strips_b128", ("block_per_row", "warp_shuffle", "block_128", "pageable"),
                _warp_strips(pre, 128)),
        Variant("bits64_thread_b64", ("bit_packed", "thread_per_row", "block_64", "pageable"),
                _bits_thread(pre, 64, 64)),
        Variant("bits32_thread_b256", ("bit_packed", "thread_per_row", "block_256", "pageable"),
                _bits_thread(pre, 32, 256)),
        Variant("bits_warp_lookahead", ("bit_packed", "block_per_row", "warp_shuffle", "block_128", "pageable"),
                _bits_warp(pre, 128)),
    )
    return GeneratedTask(task, variants, {"output": "indel" if indel else "lcs", "alphabet": alpha,
                                          "shift": shift, "classes": nclass, "mean_la": ma, "mean_lb": mb,
                                          "npairs_time": npairs})


FAMILY = Family(
    name="lcs_length_batch",
    description="longest-common-subsequence lengths (or indel distances) for a batch of string pairs",
    generate=generate,
    n_tasks=50,
    tags=("dynamic-programming", "integer", "irregular"),
)
