"""Row-wise top-k: for each row of an R x C matrix, the k best entries (k = 1..32, k <= C), best first.

"Best" is a strict total order on (score, column): a higher score (or a lower one, by task) first, ties broken by
the smaller column index, so the k selected entries and their order are unique. vals[r*k + j] is the j-th best
entry's value (the matrix entry itself) and idx[r*k + j] its column. What varies with the index: the score (the
value, its negation order, its absolute value, the distance to a constant c0, or for ints the residue modulo M, which
makes ties very common), the element type (float, double, int), k, the row length C and the number of rows R.

The outputs are copied entries and column indices, compared exactly (zero tolerance). Scores use at most one
subtraction and an absolute value (|x - c0|), the same IEEE operation in C and CUDA (nothing to fuse), so both
sides rank the entries identically.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

MODES_F = ["max", "min", "absmax", "near"]
MODES_I = ["max", "min", "absmax", "near", "mod"]
KS = [1, 2, 3, 4, 5, 8, 10, 16, 20, 32, 7, 12]
CS = [100, 257, 512, 1000, 2048, 3000, 4096, 10000, 33000, 640]
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"


def _lit(t: str, v) -> str:
    if t == "int":
        return str(int(v))
    if t == "float":
        return f"{float(np.float32(v))!r}f"
    return f"{float(v)!r}"


def _abs(t: str, e: str) -> str:
    return {"float": f"fabsf({e})", "double": f"fabs({e})"}.get(t, f"(({e}) < 0 ? -({e}) : ({e}))")


def _fns(qual: str, p: dict) -> str:
    """key(): the score of a value; better(): the strict total order on (score, column); push(): insert into a
    best-first list of at most KK entries."""
    t, mode = p["t"], p["mode"]
    if mode in ("max", "min"):
        key = "v"
    elif mode == "absmax":
        key = _abs(t, "v")
    elif mode == "near":
        key = _abs(t, f"v - {_lit(t, p['c0'])}")
    else:
        key = f"v % {p['M']}"
    op = "<" if mode in ("min", "near") else ">"
    return (f"{qual} {t} key({t} v) {{ return {key}; }}\n\n"
            f"{qual} bool better({t} a, int ia, {t} b, int ib) {{\n"
            f"    return a {op} b || (a == b && ia < ib);\n}}\n\n"
            f"{qual} void push({t}* bs, int* bi, int* cnt, {t} s, int c) {{\n"
            "    if (*cnt == KK && !better(s, c, bs[KK - 1], bi[KK - 1])) return;\n"
            "    int j = *cnt < KK ? (*cnt)++ : KK - 1;\n"
            "    while (j > 0 && better(s, c, bs[j - 1], bi[j - 1])) { bs[j] = bs[j - 1]; bi[j] = bi[j - 1]; --j; }\n"
            "    bs[j] = s; bi[j] = c;\n}\n\n")


def _pre(p: dict, qual: str = "__device__") -> str:
    math = "#include <math.h>\n" if p["t"] != "int" else ""
    return HEAD + math + f"#define KK {p['k']}\n\n" + _fns(qual, p)


def _sig(p: dict) -> str:
    t = p["t"]
    return f'extern "C" void topk_rows(int R, int C, const {t}* x, {t}* vals, int* idx)'


def _alloc(p: dict, pinned: bool = False) -> str:
    t = p["t"]
    s = ("    if (R <= 0 || C <= 0) return;\n"
         f"    size_t xb = (size_t)R * C * sizeof({t});\n"
         f"    size_t vb = (size_t)R * KK * sizeof({t}), ib = (size_t)R * KK * sizeof(int);\n"
         f"    {t} *dx, *dv; int* di;\n"
         "    cudaMalloc(&dx, xb); cudaMalloc(&dv, vb); cudaMalloc(&di, ib);\n")
    if not pinned:
        s += "    cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice);\n"
    return s


FINISH = ("    cudaMemcpy(vals, dv, vb, cudaMemcpyDeviceToHost);\n"
          "    cudaMemcpy(idx, di, ib, cudaMemcpyDeviceToHost);\n"
          "    cudaFree(dx); cudaFree(dv); cudaFree(di);\n}\n")


def _thread_per_row(p: dict) -> str:
    t = p["t"]
    return (_pre(p)
            + f"__global__ void topk_thread(int R, int C, const {t}* x, {t}* vals, int* idx) {{\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= R) return;\n"
            f"    const {t}* row = x + (size_t)r * C;\n"
            f"    {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "    for (int c = 0; c < C; ++c) push(bs, bi, &cnt, key(row[c]), c);\n"
            "    for (int j = 0; j < KK; ++j) { vals[(size_t)r * KK + j] = row[bi[j]]; idx[(size_t)r * KK + j] = bi[j]; }\n"
            "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    topk_thread<<<(R + 127) / 128, 128>>>(R, C, dx, dv, di);\n" + FINISH)


def _warp_kernel(p: dict, name: str) -> str:
    """One warp per row: per-lane lists over columns lane, lane+32, ...; then KK rounds of a butterfly arg-best."""
    t = p["t"]
    return (f"__global__ void {name}(int R, int C, int r0, const {t}* __restrict__ x, {t}* vals, int* idx) {{\n"
            "    int lane = threadIdx.x & 31;\n"
            "    int r = r0 + (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    if (r >= R) return;\n"
            f"    const {t}* row = x + (size_t)r * C;\n"
            f"    {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "    for (int c = lane; c < C; c += 32) push(bs, bi, &cnt, key(row[c]), c);\n"
            "    int h = 0;\n"
            "    for (int j = 0; j < KK; ++j) {\n"
            f"        {t} s = h < cnt ? bs[h] : ({t})0;\n"
            "        int i = h < cnt ? bi[h] : -1;\n"
            "        for (int o = 16; o > 0; o >>= 1) {\n"
            f"            {t} os = __shfl_xor_sync(0xffffffffu, s, o);\n"
            "            int oi = __shfl_xor_sync(0xffffffffu, i, o);\n"
            "            if (oi >= 0 && (i < 0 || better(os, oi, s, i))) { s = os; i = oi; }\n"
            "        }\n"
            "        if (h < cnt && bi[h] == i) ++h;\n"
            "        if (lane == 0) { vals[(size_t)r * KK + j] = row[i]; idx[(size_t)r * KK + j] = i; }\n"
            "    }\n}\n\n")


def _warp_per_row(p: dict) -> str:
    return (_pre(p) + _warp_kernel(p, "topk_warp") + _sig(p) + " {\n" + _alloc(p)
            + "    topk_warp<<<(R + 7) / 8, 256>>>(R, C, 0, dx, dv, di);\n" + FINISH)


def _warp_streams(p: dict) -> str:
    t = p["t"]
    return (_pre(p) + _warp_kernel(p, "topk_warp_chunk") + _sig(p) + " {\n" + _alloc(p, pinned=True)
            + f"    {t}* hx; {t}* hv; int* hi;\n"
            "    cudaMallocHost(&hx, xb); cudaMallocHost(&hv, vb); cudaMallocHost(&hi, ib);\n"
            "    memcpy(hx, x, xb);\n"
            "    const int NSTR = 4;\n"
            "    cudaStream_t st[NSTR];\n"
            "    for (int s = 0; s < NSTR; ++s) cudaStreamCreate(&st[s]);\n"
            "    int per = (R + NSTR - 1) / NSTR;\n"
            "    for (int s = 0; s < NSTR; ++s) {\n"
            "        int r0 = s * per;\n"
            "        if (r0 >= R) break;\n"
            "        int m = R - r0 < per ? R - r0 : per;\n"
            "        size_t off = (size_t)r0 * C, ko = (size_t)r0 * KK;\n"
            f"        cudaMemcpyAsync(dx + off, hx + off, (size_t)m * C * sizeof({t}), cudaMemcpyHostToDevice, st[s]);\n"
            "        topk_warp_chunk<<<(m + 7) / 8, 256, 0, st[s]>>>(r0 + m, C, r0, dx, dv, di);\n"
            f"        cudaMemcpyAsync(hv + ko, dv + ko, (size_t)m * KK * sizeof({t}), cudaMemcpyDeviceToHost, st[s]);\n"
            "        cudaMemcpyAsync(hi + ko, di + ko, (size_t)m * KK * sizeof(int), cudaMemcpyDeviceToHost, st[s]);\n"
            "    }\n"
            "    for (int s = 0; s < NSTR; ++s) { cudaStreamSynchronize(st[s]); cudaStreamDestroy(st[s]); }\n"
            "    memcpy(vals, hv, vb); memcpy(idx, hi, ib);\n"
            "    cudaFreeHost(hx); cudaFreeHost(hv); cudaFreeHost(hi);\n"
            "    cudaFree(dx); cudaFree(dv); cudaFree(di);\n}\n")


def _many_launches(p: dict) -> str:
    return (_pre(p) + _warp_kernel(p, "topk_rows_chunk") + _sig(p) + " {\n" + _alloc(p)
            + "    const int CH = 64;\n"
            "    for (int r0 = 0; r0 < R; r0 += CH) {\n"
            "        int m = R - r0 < CH ? R - r0 : CH;\n"
            "        topk_rows_chunk<<<m, 32>>>(r0 + m, C, r0, dx, dv, di);\n"
            "    }\n" + FINISH)


def _block_tree(p: dict) -> str:
    t = p["t"]
    return (_pre(p) + "#define BT 128\n\n"
            + f"__global__ void topk_block(int R, int C, const {t}* __restrict__ x, {t}* vals, int* idx) {{\n"
            f"    __shared__ {t} sv[BT];\n"
            "    __shared__ int si[BT];\n"
            "    int tid = threadIdx.x;\n"
            "    int r = blockIdx.x;\n"
            f"    const {t}* row = x + (size_t)r * C;\n"
            f"    {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "    for (int c = tid; c < C; c += BT) push(bs, bi, &cnt, key(row[c]), c);\n"
            "    int h = 0;\n"
            "    for (int j = 0; j < KK; ++j) {\n"
            "        bool has = h < cnt;\n"
            f"        sv[tid] = has ? bs[h] : ({t})0;\n"
            "        si[tid] = has ? bi[h] : -1;\n"
            "        __syncthreads();\n"
            "        for (int o = BT / 2; o > 0; o >>= 1) {\n"
            "            if (tid < o && si[tid + o] >= 0 && (si[tid] < 0 || better(sv[tid + o], si[tid + o], sv[tid], si[tid]))) {\n"
            "                sv[tid] = sv[tid + o]; si[tid] = si[tid + o];\n"
            "            }\n"
            "            __syncthreads();\n"
            "        }\n"
            "        int win = si[0];\n"
            "        if (has && bi[h] == win) ++h;\n"
            "        if (tid == 0) { vals[(size_t)r * KK + j] = row[win]; idx[(size_t)r * KK + j] = win; }\n"
            "        __syncthreads();\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    topk_block<<<R, BT>>>(R, C, dx, dv, di);\n" + FINISH)


def _bitonic(p: dict) -> str:
    """Block of 64 per row: per-thread lists, then all 64*KP candidates (padded) bitonic-sorted in shared memory."""
    t = p["t"]
    kp = 1 << (p["k"] - 1).bit_length()
    return (_pre(p) + f"#define BT 64\n#define KP {kp}\n#define P (BT * KP)\n\n"
            + f"__device__ __forceinline__ bool before({t} a, int ia, {t} b, int ib) {{\n"
            "    return ia >= 0 && (ib < 0 || better(a, ia, b, ib));\n}\n\n"
            + f"__global__ void topk_bitonic(int R, int C, const {t}* __restrict__ x, {t}* vals, int* idx) {{\n"
            f"    __shared__ {t} sv[P];\n"
            "    __shared__ int si[P];\n"
            "    int tid = threadIdx.x;\n"
            "    int r = blockIdx.x;\n"
            f"    const {t}* row = x + (size_t)r * C;\n"
            f"    {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "    for (int c = tid; c < C; c += BT) push(bs, bi, &cnt, key(row[c]), c);\n"
            "    for (int j = 0; j < KP; ++j) {\n"
            "        bool has = j < cnt;\n"
            f"        sv[tid * KP + j] = has ? bs[j] : ({t})0;\n"
            "        si[tid * KP + j] = has ? bi[j] : -1;\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int k = 2; k <= P; k <<= 1) {\n"
            "        for (int j = k >> 1; j > 0; j >>= 1) {\n"
            "            for (int q = tid; q < P / 2; q += BT) {\n"
            "                int a = (q / j) * 2 * j + (q % j);\n"
            "                int b = a + j;\n"
            "                bool up = (a & k) == 0;\n"
            "                bool sw = up ? before(sv[b], si[b], sv[a], si[a]) : before(sv[a], si[a], sv[b], si[b]);\n"
            "                if (sw) {\n"
            f"                    {t} tv = sv[a]; sv[a] = sv[b]; sv[b] = tv;\n"
            "                    int ti = si[a]; si[a] = si[b]; si[b] = ti;\n"
            "                }\n"
            "            }\n"
            "            __syncthreads();\n"
            "        }\n"
            "    }\n"
            "    for (int j = tid; j < KK; j += BT) { int c = si[j]; vals[(size_t)r * KK + j] = row[c]; idx[(size_t)r * KK + j] = c; }\n"
            "}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    topk_bitonic<<<R, BT>>>(R, C, dx, dv, di);\n" + FINISH)


def _host_merge(p: dict) -> str:
    """Thread per (row, segment of SEG columns) on the GPU; the host merges each row's per-segment lists."""
    t = p["t"]
    return (_pre(p, "__host__ __device__") + "#define SEG 256\n\n"
            + f"__global__ void topk_segments(int R, int C, int nseg, const {t}* x, {t}* cs, int* ci) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= R * nseg) return;\n"
            "    int r = g / nseg, sg = g % nseg;\n"
            "    int lo = sg * SEG, hi = lo + SEG < C ? lo + SEG : C;\n"
            f"    const {t}* row = x + (size_t)r * C;\n"
            f"    {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "    for (int c = lo; c < hi; ++c) push(bs, bi, &cnt, key(row[c]), c);\n"
            "    for (int j = 0; j < KK; ++j) {\n"
            f"        cs[(size_t)g * KK + j] = j < cnt ? bs[j] : ({t})0;\n"
            "        ci[(size_t)g * KK + j] = j < cnt ? bi[j] : -1;\n"
            "    }\n}\n\n"
            + _sig(p) + " {\n"
            "    if (R <= 0 || C <= 0) return;\n"
            "    int nseg = (C + SEG - 1) / SEG;\n"
            f"    size_t xb = (size_t)R * C * sizeof({t});\n"
            "    size_t m = (size_t)R * nseg * KK;\n"
            f"    {t} *dx, *dcs; int* dci;\n"
            f"    cudaMalloc(&dx, xb); cudaMalloc(&dcs, m * sizeof({t})); cudaMalloc(&dci, m * sizeof(int));\n"
            "    cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice);\n"
            "    topk_segments<<<(R * nseg + 127) / 128, 128>>>(R, C, nseg, dx, dcs, dci);\n"
            f"    {t}* hcs = ({t}*)malloc(m * sizeof({t}));\n"
            "    int* hci = (int*)malloc(m * sizeof(int));\n"
            f"    cudaMemcpy(hcs, dcs, m * sizeof({t}), cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(hci, dci, m * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    for (int r = 0; r < R; ++r) {\n"
            f"        {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "        for (size_t e = (size_t)r * nseg * KK; e < (size_t)(r + 1) * nseg * KK; ++e)\n"
            "            if (hci[e] >= 0) push(bs, bi, &cnt, hcs[e], hci[e]);\n"
            "        for (int j = 0; j < KK; ++j) {\n"
            "            vals[(size_t)r * KK + j] = x[(size_t)r * C + bi[j]];\n"
            "            idx[(size_t)r * KK + j] = bi[j];\n"
            "        }\n"
            "    }\n"
            "    free(hcs); free(hci);\n"
            "    cudaFree(dx); cudaFree(dcs); cudaFree(dci);\n}\n")


def _reference(p: dict) -> str:
    t = p["t"]
    math = "#include <math.h>\n" if t != "int" else ""
    return (math + "#include <stdbool.h>\n#include <stddef.h>\n\n" + f"#define KK {p['k']}\n\n"
            + _fns("static inline", p)
            + f"void topk_rows(int R, int C, const {t}* x, {t}* vals, int* idx) {{\n"
            "    for (int r = 0; r < R; ++r) {\n"
            f"        const {t}* row = x + (size_t)r * C;\n"
            f"        {t} bs[KK]; int bi[KK]; int cnt = 0;\n"
            "        for (int c = 0; c < C; ++c) push(bs, bi, &cnt, key(row[c]), c);\n"
            "        for (int j = 0; j < KK; ++j) {\n"
            "            vals[(size_t)r * KK + j] = row[bi[j]];\n"
            "            idx[(size_t)r * KK + j] = bi[j];\n"
            "        }\n"
            "    }\n}\n")


MODE_TEXT = {
    "max": "the largest values first",
    "min": "the smallest values first",
    "absmax": "the largest absolute values first",
    "near": "the values closest to c0 = {c0} first (smallest |x - c0|, computed in the element type)",
    "mod": "the largest residues x % {M} first (x >= 0)",
}


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = ["float", "int", "double"][index % 3]
    modes = MODES_I if t == "int" else MODES_F
    mode = modes[(index // 3) % len(modes)]
    k = KS[(index * 7 + index // 12) % len(KS)]
    C = CS[(index * 3 + index // 10) % len(CS)]
    C = max(C, k) + int(rng.integers(0, 9))
    p: dict = {"t": t, "mode": mode, "k": k}
    if t == "int":
        if mode == "mod":
            p["M"] = int(rng.choice([7, 10, 64, 1000]))
            dist = {"kind": "randint", "low": 0, "high": 2_000_000_000}
        else:
            hi = int(rng.choice([50, 1000, 1_000_000_000]))
            dist = {"kind": "randint", "low": -hi if mode in ("absmax", "near") or index % 2 else 0, "high": hi}
            if mode == "near":
                p["c0"] = int(rng.integers(-hi // 2, hi // 2 + 1))
    else:
        a = float(rng.choice([1.0, 10.0, 1000.0]))
        dist = {"kind": "uniform", "low": -a, "high": a}
        if mode == "near":
            p["c0"] = float(np.float32(rng.uniform(-a / 2, a / 2)))
    # the reference's cost per element (ns), roughly: a compare per element, insertions grow with k and ties
    # (a compare per element; about k (1 + ln(C/k)) insertions per row, each a mispredicted branch and a shift of
    # up to k entries)
    ins = k * (1.0 + np.log(C / k)) * (15.0 + 0.7 * k) / C
    ns_per = 1.2 + (0.6 if t == "double" else 0.0) + (0.4 if mode in ("absmax", "near", "mod") else 0.0) + ins
    R_time = max(64, int(70e6 / ns_per / C)) + int(rng.integers(0, 17))
    order = MODE_TEXT[mode].format(c0=_lit(t, p.get("c0", 0)), M=p.get("M"))
    task = {
        "function_name": "topk_rows",
        "description": (f"x is an R x C row-major matrix of {t} (C >= {k}). For each row r, select its {k} best "
                        f"entries, {order}, ties broken by the smaller column index; vals[r*{k} + j] is the value "
                        f"of the j-th selected entry and idx[r*{k} + j] its column (j = 0 is the best)."),
        "returns": "void",
        "args": [
            {"name": "R", "role": "scalar", "ctype": "int"},
            {"name": "C", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "R * C", "dist": dist},
            {"name": "vals", "role": "out", "ctype": t, "length": f"R * {k}"},
            {"name": "idx", "role": "out", "ctype": "int", "length": f"R * {k}"},
        ],
        "size_configs": [{"R": 3, "C": k}, {"R": 5, "C": k + 77}, {"R": 37, "C": 1000 + int(rng.integers(0, 300))},
                         {"R": R_time, "C": C}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["topk", "selection", t],
    }
    variants = (
        Variant("warp_per_row_shuffle", ("block_per_row", "warp_shuffle", "coalesced", "block_256", "pageable"),
                _warp_per_row(p)),
        Variant("warp_per_row_streams", ("block_per_row", "warp_shuffle", "pinned", "async_streams", "block_256"),
                _warp_streams(p)),
        Variant("block_per_row_tree", ("block_per_row", "tree_reduction", "shared_tiling", "block_128"),
                _block_tree(p)),
        Variant("block_bitonic", ("block_per_row", "sorting_network", "shared_tiling", "block_64"), _bitonic(p)),
        Variant("thread_per_row", ("thread_per_row", "strided", "naive", "block_128"), _thread_per_row(p)),
        Variant("segments_host_merge", ("host_compute", "two_level", "thread_per_row", "block_128"),
                _host_merge(p)),
        Variant("launch_per_row_chunk", ("many_launches", "warp_shuffle", "block_per_row", "block_32"),
                _many_launches(p)),
    )
    return GeneratedTask(task, variants, {**p, "C_time": C, "R_time": R_time, "dist": dist})


FAMILY = Family(
    name="topk_rows",
    description="row-wise top-k (k = 1..32) by value, absolute value, distance to a constant or residue, ties by column",
    generate=generate,
    n_tasks=50,
    tags=("selection",),
)
