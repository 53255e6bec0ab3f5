"""Weighted edit distances for a batch of string pairs of varied lengths (exact integers).

Pair p compares the byte string a[aoff[p] .. aoff[p+1]) with b[boff[p] .. boff[p+1]). The offsets are random
cuts, so the lengths vary from 0 to many times their mean and the work per pair (la * lb cells) is irregular. The
DP is D[i][j] = min(D[i-1][j-1] + sub(a_i, b_j), D[i-1][j] + DEL, D[i][j-1] + INS) with D[i][0] = i * DEL and
either D[0][j] = j * INS with the answer D[la][lb] (global distance) or D[0][j] = 0 with the answer
min_j D[la][j] (infix: the cheapest edit of a into any substring of b).

What varies with the index: the cost model (plain Levenshtein; separate insertion, deletion and substitution
costs; a substitution cost growing with the symbols' distance up to a cap; a cheap substitution within a symbol
class and a dear one across classes), the global or infix form, the alphabet size (2 to 256 symbols), the mean
lengths of the two strings and the number of pairs.

CPU and GPU agree exactly: every value is an int formed by additions and minimums of small integers, which any
evaluation order (row by row, anti-diagonal, strips of 32 rows) computes identically; the tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

COSTS = ["lev", "weighted", "distance", "classes"]
ALPHABETS = [2, 4, 20, 26, 64, 256, 4, 8]
MEANS = [12, 20, 32, 48, 64, 96, 128, 200]
HEAD = "#include <cuda_runtime.h>\n\n"
DQ = "__device__ __forceinline__"
SIG_ARGS = ("int npairs, const int* aoff, const unsigned char* a, const int* boff, const unsigned char* b, "
            "int* dist")
SIG = f'extern "C" void edit_batch({SIG_ARGS})'


def _costs(p: dict) -> str:
    """QUAL-prefixed helpers: subc(x, y), mn2, top(j), with INS_C / DEL_C defined."""
    kind = p["cost"]
    if kind == "lev":
        sub = "return x == y ? 0 : 1;"
    elif kind == "weighted":
        sub = f"return x == y ? 0 : {p['sub']};"
    elif kind == "distance":
        sub = f"int d = x > y ? x - y : y - x; return (d < {p['cap']} ? d : {p['cap']}) * {p['sub']};"
    else:
        sub = (f"return x == y ? 0 : ((x >> {p['shift']}) == (y >> {p['shift']}) ? {p['sub']} : "
               f"{p['sub2']});")
    top = f"return j * INS_C;" if p["form"] == "global" else "(void)j; return 0;"
    return (f"#define INS_C {p['ins']}\n#define DEL_C {p['del']}\n"
            f"QUAL int subc(int x, int y) {{ {sub} }}\n"
            "QUAL int mn2(int x, int y) { return x < y ? x : y; }\n"
            f"QUAL int top(int j) {{ {top} }}\n")


def _row_dp(infix: bool, row: str, res: str) -> str:
    """Sequential DP of one pair (A, la, B, lb in scope) over a rolling row; stores the answer in ``res``."""
    R = lambda j: row.format(j=j)  # noqa: E731
    fin = (f"        int best = {R('0')};\n"
           f"        for (int j = 1; j <= lb; ++j) best = mn2(best, {R('j')});\n"
           f"        {res} = best;\n" if infix else f"        {res} = {R('lb')};\n")
    return (f"        for (int j = 0; j <= lb; ++j) {R('j')} = top(j);\n"
            "        for (int i = 1; i <= la; ++i) {\n"
            f"            int diag = {R('0')};\n"
            "            int left = i * DEL_C;\n"
            f"            {R('0')} = left;\n"
            "            int ca = A[i - 1];\n"
            "            for (int j = 1; j <= lb; ++j) {\n"
            f"                int up = {R('j')};\n"
            "                int v = mn2(diag + subc(ca, B[j - 1]), mn2(up + DEL_C, left + INS_C));\n"
            f"                diag = up; {R('j')} = v; left = v;\n"
            "            }\n"
            "        }\n" + fin)


PAIR = ("        const unsigned char* A = a + aoff[p]; int la = aoff[p + 1] - aoff[p];\n"
        "        const unsigned char* B = b + boff[p]; int lb = boff[p + 1] - boff[p];\n")


def _reference(fns: str, infix: bool) -> str:
    return ("#include <stdlib.h>\n\n" + fns.replace("QUAL", "static inline") + "\n"
            f"void edit_batch({SIG_ARGS}) {{\n"
            "    int maxlb = 0;\n"
            "    for (int p = 0; p < npairs; ++p) { int l = boff[p + 1] - boff[p]; if (l > maxlb) maxlb = l; }\n"
            "    int* row = (int*)malloc((size_t)(maxlb + 1) * sizeof(int));\n"
            "    for (int p = 0; p < npairs; ++p) {\n" + PAIR
            + _row_dp(infix, "row[{j}]", "dist[p]")
            + "    }\n    free(row);\n}\n")


# ----------------------------------------------------------------------------------------------------------------
# host-side pieces shared by the variants

IN = ("    if (npairs <= 0) return;\n"
      "    int ta = aoff[npairs], tb = boff[npairs];\n"
      "    int *daoff, *dboff, *ddist; unsigned char *da, *db;\n"
      "    cudaMalloc(&daoff, (size_t)(npairs + 1) * sizeof(int));\n"
      "    cudaMalloc(&dboff, (size_t)(npairs + 1) * sizeof(int));\n"
      "    cudaMalloc(&ddist, (size_t)npairs * sizeof(int));\n"
      "    cudaMalloc(&da, (size_t)ta + 1); cudaMalloc(&db, (size_t)tb + 1);\n"
      "    cudaMemcpy(daoff, aoff, (size_t)(npairs + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(dboff, boff, (size_t)(npairs + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(da, a, (size_t)ta, cudaMemcpyHostToDevice);\n"
      "    cudaMemcpy(db, b, (size_t)tb, cudaMemcpyHostToDevice);\n")
OUT = ("    cudaMemcpy(dist, ddist, (size_t)npairs * sizeof(int), cudaMemcpyDeviceToHost);\n"
       "    cudaFree(daoff); cudaFree(dboff); cudaFree(ddist); cudaFree(da); cudaFree(db);\n")
MAXLA = ("    int maxla = 0, maxd = 0;\n"
         "    for (int p = 0; p < npairs; ++p) {\n"
         "        int la = aoff[p + 1] - aoff[p], lb = boff[p + 1] - boff[p];\n"
         "        if (la > maxla) maxla = la;\n"
         "        if (la + lb > maxd) maxd = la + lb;\n"
         "    }\n")
KARGS = "int npairs, const int* aoff, const unsigned char* a, const int* boff, const unsigned char* b"
KCALL = "npairs, daoff, da, dboff, db"


def _thread_local(pre: str, infix: bool, lmax: int, block: int) -> str:
    """Thread per pair; the rolling row in a local array, or in global scratch when lb exceeds it."""
    return (pre + f"#define LMAX {lmax}\n\n"
            f"__global__ void edit_thread({KARGS}, int* scratch, int* dist) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n"
            "    int loc[LMAX + 1];\n" + PAIR
            + "        int* row = lb <= LMAX ? loc : scratch + (size_t)boff[p] + p;\n"
            + _row_dp(infix, "row[{j}]", "dist[p]") + "}\n\n"
            + SIG + " {\n" + IN
            + "    int* scratch; cudaMalloc(&scratch, ((size_t)tb + npairs) * sizeof(int));\n"
            f"    edit_thread<<<(npairs + {block - 1}) / {block}, {block}>>>({KCALL}, scratch, ddist);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def _thread_global(pre: str, infix: bool, block: int) -> str:
    """Thread per pair; every rolling row in global scratch at the pair's own offset (threads far apart)."""
    return (pre + f"__global__ void edit_thread_g({KARGS}, int* scratch, int* dist) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "        int* row = scratch + (size_t)boff[p] + p;\n"
            + _row_dp(infix, "row[{j}]", "dist[p]") + "}\n\n"
            + SIG + " {\n" + IN
            + "    int* scratch; cudaMalloc(&scratch, ((size_t)tb + npairs) * sizeof(int));\n"
            f"    edit_thread_g<<<(npairs + {block - 1}) / {block}, {block}>>>({KCALL}, scratch, ddist);\n"
            "    cudaFree(scratch);\n" + OUT + "}\n")


def _wave_body(infix: bool) -> str:
    """Anti-diagonal wavefront of pair p by the whole block over three diagonals at buf (length L each); the
    answer written to dist[p] by thread 0. Needs sred (a shared int) for the infix minimum."""
    init = ("        if (threadIdx.x == 0) *sred = 0x7fffffff;\n"
            "        __syncthreads();\n" if infix else "")
    track = "                if (i == la && v < mn) mn = v;\n" if infix else ""
    fin = ("        atomicMin(sred, mn);\n"
           "        __syncthreads();\n"
           "        if (threadIdx.x == 0) dist[p] = *sred;\n" if infix else
           "        if (threadIdx.x == 0) dist[p] = d1[la];\n")
    return (init
            + "        int* d2 = buf; int* d1 = buf + L; int* d0 = buf + 2 * L;\n"
            "        int mn = 0x7fffffff;\n"
            "        for (int d = 0; d <= la + lb; ++d) {\n"
            "            int ilo = d - lb > 0 ? d - lb : 0, ihi = d < la ? d : la;\n"
            "            for (int i = ilo + threadIdx.x; i <= ihi; i += blockDim.x) {\n"
            "                int j = d - i, v;\n"
            "                if (i == 0) v = top(j);\n"
            "                else if (j == 0) v = i * DEL_C;\n"
            "                else v = mn2(d2[i - 1] + subc(A[i - 1], B[j - 1]), mn2(d1[i - 1] + DEL_C, d1[i] + INS_C));\n"
            "                d0[i] = v;\n" + track
            + "            }\n"
            "            __syncthreads();\n"
            "            int* t = d2; d2 = d1; d1 = d0; d0 = t;\n"
            "        }\n" + fin
            + "        __syncthreads();\n")


def _block_wave(pre: str, infix: bool, block: int) -> str:
    """Block per pair, anti-diagonals in dynamic shared memory (global scratch when they would not fit)."""
    return (pre + f"__global__ void edit_wave({KARGS}, int L, int* gbuf, int* dist) {{\n"
            "    extern __shared__ int sdiag[];\n"
            "    __shared__ int sredv;\n"
            "    int* sred = &sredv;\n"
            "    int p = blockIdx.x;\n" + PAIR
            + "        int* buf = gbuf ? gbuf + 3 * ((size_t)aoff[p] + p) : sdiag;\n"
            "        if (gbuf) L = la + 1;\n"
            + _wave_body(infix) + "}\n\n"
            + SIG + " {\n" + IN + MAXLA
            + "    int L = maxla + 1;\n"
            "    size_t sbytes = (size_t)3 * L * sizeof(int);\n"
            "    int* gbuf = 0;\n"
            "    if (sbytes > 48 * 1024) { cudaMalloc(&gbuf, (size_t)3 * ((size_t)ta + npairs) * sizeof(int)); sbytes = 0; }\n"
            f"    edit_wave<<<npairs, {block}, sbytes>>>({KCALL}, L, gbuf, ddist);\n"
            "    if (gbuf) cudaFree(gbuf);\n" + OUT + "}\n")


def _single_block(pre: str, infix: bool, block: int) -> str:
    """One block walks the pairs one after another, each by anti-diagonals."""
    return (pre + f"__global__ void edit_one_block({KARGS}, int L, int* gbuf, int* dist) {{\n"
            "    extern __shared__ int sdiag[];\n"
            "    __shared__ int sredv;\n"
            "    int* sred = &sredv;\n"
            "    int* buf = gbuf ? gbuf : sdiag;\n"
            "    for (int p = 0; p < npairs; ++p) {\n" + PAIR
            + _wave_body(infix) + "    }\n}\n\n"
            + SIG + " {\n" + IN + MAXLA
            + "    int L = maxla + 1;\n"
            "    size_t sbytes = (size_t)3 * L * sizeof(int);\n"
            "    int* gbuf = 0;\n"
            "    if (sbytes > 48 * 1024) { cudaMalloc(&gbuf, sbytes); sbytes = 0; }\n"
            f"    edit_one_block<<<1, {block}, sbytes>>>({KCALL}, L, gbuf, ddist);\n"
            "    if (gbuf) cudaFree(gbuf);\n" + OUT + "}\n")


def _warp_strips(pre: str, infix: bool, block: int) -> str:
    """Warp per pair: strips of 32 rows of a, lane r owns row i0 + r and runs r steps behind lane r - 1; values
    pass down the strip by __shfl_up_sync, and the strip's last row goes to a global row for the next strip."""
    upd = ("                    if (i == la && v < best) best = v;\n" if infix else "")
    fin = ("            if (i == la) dist[p] = best;\n" if infix else
           "            if (i == la) dist[p] = left;\n")
    return (pre + f"__global__ void edit_warp({KARGS}, int* rows, int* dist) {{\n"
            "    int p = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + "    int* row = rows + (size_t)boff[p] + p;\n"
            "    for (int j = lane; j <= lb; j += 32) row[j] = top(j);\n"
            "    if (la == 0) {\n"
            + ("        if (lane == 0) dist[p] = 0;\n" if infix else "        if (lane == 0) dist[p] = top(lb);\n")
            + "        return;\n    }\n"
            "    __syncwarp();\n"
            "    for (int i0 = 1; i0 <= la; i0 += 32) {\n"
            "        int i = i0 + lane;\n"
            "        bool active = i <= la;\n"
            "        int ca = active ? A[i - 1] : 0;\n"
            "        int left = i * DEL_C, diag = (i - 1) * DEL_C, cur = 0;\n"
            "        int best = left;\n"
            "        for (int s = 0; s < lb + 31; ++s) {\n"
            "            int nb = __shfl_up_sync(0xffffffffu, cur, 1);\n"
            "            int j = s - lane + 1;\n"
            "            if (active && j >= 1 && j <= lb) {\n"
            "                int up = lane == 0 ? row[j] : nb;\n"
            "                int v = mn2(diag + subc(ca, B[j - 1]), mn2(up + DEL_C, left + INS_C));\n"
            "                diag = up; left = v; cur = v;\n"
            + upd
            + "                if (lane == 31) row[j] = v;\n"
            "            }\n"
            "            __syncwarp();\n"
            "        }\n" + fin
            + "        __syncwarp();\n"
            "    }\n}\n\n"
            + SIG + " {\n" + IN
            + "    int* rows; cudaMalloc(&rows, ((size_t)tb + npairs) * sizeof(int));\n"
            f"    size_t threads = (size_t)npairs * 32;\n"
            f"    edit_warp<<<(unsigned)((threads + {block - 1}) / {block}), {block}>>>({KCALL}, rows, ddist);\n"
            "    cudaFree(rows);\n" + OUT + "}\n")


def _diag_launches(pre: str, infix: bool) -> str:
    """One launch per anti-diagonal d over every pair's cells (flattened: pair p owns aoff[p] + p .. + la)."""
    fin = ("    if (i == la) atomicMin(&dist[p], v);\n" if infix else
           "    if (i == la && j == lb) dist[p] = v;\n")
    init = ("    cudaMemset(ddist, 0x7f, (size_t)npairs * sizeof(int));\n" if infix else "")
    return (pre + "__global__ void owner_kernel(int npairs, const int* aoff, int* owner) {\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n"
            "    int base = aoff[p] + p, la = aoff[p + 1] - aoff[p];\n"
            "    for (int i = 0; i <= la; ++i) owner[base + i] = p;\n}\n\n"
            f"__global__ void diag_kernel(int d, int cells, const int* owner, {KARGS}, const int* d2,"
            " const int* d1, int* d0, int* dist) {\n"
            "    int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (k >= cells) return;\n"
            "    int p = owner[k];\n"
            "    int i = k - (aoff[p] + p);\n"
            "    int la = aoff[p + 1] - aoff[p], lb = boff[p + 1] - boff[p];\n"
            "    int j = d - i;\n"
            "    if (j < 0 || j > lb) return;\n"
            "    int v;\n"
            "    if (i == 0) v = top(j);\n"
            "    else if (j == 0) v = i * DEL_C;\n"
            "    else v = mn2(d2[k - 1] + subc(a[aoff[p] + i - 1], b[boff[p] + j - 1]),"
            " mn2(d1[k - 1] + DEL_C, d1[k] + INS_C));\n"
            "    d0[k] = v;\n" + fin + "}\n\n"
            + SIG + " {\n" + IN + MAXLA
            + "    (void)maxla;\n"
            "    int cells = ta + npairs;\n"
            "    int *owner, *buf0, *buf1, *buf2;\n"
            "    cudaMalloc(&owner, (size_t)cells * sizeof(int));\n"
            "    cudaMalloc(&buf0, (size_t)cells * sizeof(int)); cudaMalloc(&buf1, (size_t)cells * sizeof(int));\n"
            "    cudaMalloc(&buf2, (size_t)cells * sizeof(int));\n" + init
            + "    owner_kernel<<<(npairs + 127) / 128, 128>>>(npairs, daoff, owner);\n"
            "    int *d2 = buf0, *d1 = buf1, *d0 = buf2;\n"
            "    unsigned blocks = (unsigned)((cells + 255) / 256);\n"
            "    for (int d = 0; d <= maxd; ++d) {\n"
            f"        diag_kernel<<<blocks, 256>>>(d, cells, owner, {KCALL}, d2, d1, d0, ddist);\n"
            "        int* t = d2; d2 = d1; d1 = d0; d0 = t;\n"
            "    }\n"
            "    cudaFree(owner); cudaFree(buf0); cudaFree(buf1); cudaFree(buf2);\n" + OUT + "}\n")


def _host_short(pre: str, fns: str, infix: bool, cut: int) -> str:
    """The host computes the pairs with a string shorter than ``cut``; a thread per pair computes the others."""
    host_fns = fns.replace("QUAL", "static inline").replace("subc", "hsubc").replace("mn2", "hmn2")
    host_fns = host_fns.replace("int top(", "int htop(").replace("INS_C", "H_INS_C").replace("DEL_C", "H_DEL_C")
    host_dp = (_row_dp(infix, "row[{j}]", "dist[p]").replace("subc", "hsubc").replace("mn2", "hmn2")
               .replace("top(", "htop(").replace("INS_C", "H_INS_C").replace("DEL_C", "H_DEL_C"))
    return (pre + host_fns + "\n"
            f"__global__ void edit_long({KARGS}, int* scratch, int* dist) {{\n"
            "    int p = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npairs) return;\n" + PAIR
            + f"        if (la < {cut} || lb < {cut}) return;\n"
            "        int* row = scratch + (size_t)boff[p] + p;\n"
            + _row_dp(infix, "row[{j}]", "dist[p]") + "}\n\n"
            + SIG + " {\n" + IN
            + "    int* scratch; cudaMalloc(&scratch, ((size_t)tb + npairs) * sizeof(int));\n"
            f"    edit_long<<<(npairs + 127) / 128, 128>>>({KCALL}, scratch, ddist);\n"
            "    cudaFree(scratch);\n"
            "    cudaMemcpy(dist, ddist, (size_t)npairs * sizeof(int), cudaMemcpyDeviceToHost);\n"
            f"    int* row = (int*)malloc(({cut} + 1) * sizeof(int));\n"
            "    for (int p = 0; p < npairs; ++p) {\n" + PAIR
            + f"        if (la >= {cut} && lb >= {cut}) continue;\n"
            f"        if (lb > {cut}) {{ free(row); row = (int*)malloc(((size_t)lb + 1) * sizeof(int)); }}\n"
            + host_dp + "    }\n    free(row);\n"
            "    cudaFree(daoff); cudaFree(dboff); cudaFree(ddist); cudaFree(da); cudaFree(db);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    cost = COSTS[index % len(COSTS)]
    form = "infix" if (index // 4) % 3 == 1 else "global"
    p: dict = {"cost": cost, "form": form}
    if cost == "lev":
        p.update(ins=1, sub=1, **{"del": 1})
    else:
        p.update(ins=int(rng.integers(1, 5)), sub=int(rng.integers(1, 5)), **{"del": int(rng.integers(1, 5))})
    if cost == "distance":
        p["cap"] = int(rng.integers(2, 9))
    if cost == "classes":
        p["shift"] = int(rng.integers(1, 4))
        p["sub2"] = p["sub"] + int(rng.integers(1, 4))
    alpha = ALPHABETS[(index + int(rng.integers(3))) % len(ALPHABETS)]
    ma = MEANS[(index // 2 + int(rng.integers(3))) % len(MEANS)]
    mb = MEANS[(index // 3 + int(rng.integers(4))) % len(MEANS)]
    if form == "infix" and mb < 2 * ma:
        mb = min(400, 3 * ma)  # search a (a pattern) inside a longer b (a text)
    mb += int(rng.integers(0, 5))
    ma += int(rng.integers(0, 3))
    npairs = int(np.clip(3.5e7 / (ma * mb), 400, 150_000)) + int(rng.integers(0, 50))
    fns = _costs(p)
    infix = form == "infix"
    desc_cost = {"lev": "unit costs (Levenshtein)",
                 "weighted": f"insertion {p['ins']}, deletion {p['del']}, substitution {p['sub']}",
                 "distance": (f"insertion {p['ins']}, deletion {p['del']}, substitution {p['sub']} * "
                              f"min(|x - y|, {p.get('cap')})"),
                 "classes": (f"insertion {p['ins']}, deletion {p['del']}, substitution {p['sub']} within a class "
                             f"(equal x >> {p.get('shift')}) and {p.get('sub2')} across classes")}[cost]
    what = ("the weighted edit distance from a_p to b_p" if not infix else
            "the cheapest weighted edit of a_p into any substring of b_p (infix match; empty substring allowed)")
    task = {
        "function_name": "edit_batch",
        "description": (f"dist[p] = {what}, with {desc_cost}, where a_p = a[aoff[p] .. aoff[p+1]) and "
                        f"b_p = b[boff[p] .. boff[p+1]) are byte strings over an alphabet of {alpha} symbols of "
                        f"varied lengths (mean about {ma} and {mb}), for every pair p < npairs."),
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
            {"name": "dist", "role": "out", "ctype": "int", "length": "npairs"},
        ],
        "size_configs": [{"npairs": 1, "ta": 0, "tb": 9}, {"npairs": 5, "ta": 37, "tb": 61},
                         {"npairs": 77, "ta": 77 * ma // 2 + 3, "tb": 77 * mb // 2 + 1},
                         {"npairs": 3, "ta": 2 * ma + 100, "tb": 2 * mb + 250},
                         {"npairs": npairs, "ta": npairs * ma, "tb": npairs * mb}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(fns, infix),
        "tags": ["dynamic-programming", "integer", "irregular", "string"],
    }
    pre = HEAD + fns.replace("QUAL", DQ) + "\n"
    at = ("atomics",) if infix else ()
    variants = (
        Variant("thread_local_row_b64", ("thread_per_row", "block_64", "pageable"),
                _thread_local(pre, infix, 256 if mb < 120 else 512, 64)),
        Variant("thread_global_row_b256", ("thread_per_row", "strided", "block_256", "pageable"),
                _thread_global(pre, infix, 256)),
        Variant("block_wavefront_b128", ("block_per_row", "shared_tiling", *at, "block_128", "pageable"),
                _block_wave(pre, infix, 128)),
        Variant("warp_strips", ("block_per_row", "warp_shuffle", "block_128", "pageable"),
                _warp_strips(pre, infix, 128)),
        Variant("launch_per_diagonal", ("many_launches", "device_resident", "double_buffered", "coalesced",
                                        *at, "block_256", "pageable"), _diag_launches(pre, infix)),
        Variant("single_block", ("single_thread", "shared_tiling", *at, "block_256", "pageable"),
                _single_block(pre, infix, 256)),
        Variant("host_short_pairs", ("host_compute", "thread_per_row", "strided", "block_128", "pageable"),
                _host_short(pre + "#include <stdlib.h>\n", fns, infix, 16)),
    )
    return GeneratedTask(task, variants, {**p, "alphabet": alpha, "mean_la": ma, "mean_lb": mb,
                                          "npairs_time": npairs})


FAMILY = Family(
    name="edit_distance_batch",
    description="weighted edit distances (global or infix) for a batch of string pairs of varied lengths",
    generate=generate,
    n_tasks=50,
    tags=("dynamic-programming", "integer", "irregular"),
)
