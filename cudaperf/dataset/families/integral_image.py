"""Integral image (summed-area table) of an h x w image, then q box queries answered from it.

sat[y][x] = sum of pix(img[i][j]) over i <= y, j <= x, computed in two passes as the task describes (inclusive
scans along the rows, then down the columns). Box k spans rows min(qy[2k], qy[2k+1]) .. max(...) and columns
min(qx[2k], qx[2k+1]) .. max(...), inclusive; res[k] is its sum S = A - B - C + D from the four corners of the
table (terms outside the image are 0), or its mean S / area in double. What varies with the index: the pixel type
and the table's type (unsigned char/short -> int, int/unsigned short -> long long, integer-valued float -> float,
double -> double), the pixel transform (the value, its square, |v - c|, a threshold indicator), sums or means,
the image's shape and the number of queries.

Integer tables are exact in any order of summation (no overflow at the sizes drawn), so they and their box sums
are compared exactly; a mean is one correctly rounded division of two exact integers in double, the same on both
sides. Float images hold small non-negative integers (0..3) and h * w * 3 < 2^24, so every partial sum is an
integer below 2^24 and float additions are exact in any order: exact too. Only the double images (uniform values
in [0, 1)) change with reassociation: a parallel scan sums in another order than the C loops, which moves a table
entry by a few ulps of the entry (<= 2^21 * 2^-52 * log2(n), about 1e-8) and the box sums, differences of such
entries, by the same absolute amount; the tolerance for those tasks is rtol 1e-9, atol 1e-6.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# (pixel type, table type, transform kind, pixel distribution)
COMBOS = [
    ("unsigned char", "int", "value", (0, 256)),
    ("short", "int", "value", (-500, 500)),
    ("int", "long long", "value", (-1_000_000, 1_000_000)),
    ("unsigned short", "long long", "square", (0, 4096)),
    ("float", "float", "value", (0, 4)),
    ("double", "double", "value", None),
    ("unsigned char", "int", "threshold", (0, 256)),
    ("int", "long long", "absdev", (-100_000, 100_000)),
    ("unsigned short", "int", "value", (0, 200)),
    ("short", "long long", "square", (-3000, 3000)),
]
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"


def _pix(p: dict, qual: str) -> str:
    it, st, kind = p["it"], p["st"], p["kind"]
    if kind == "value":
        body = f"return ({st})v;"
    elif kind == "square":
        body = f"return ({st})v * ({st})v;"
    elif kind == "threshold":
        body = f"return v > {p['c']} ? ({st})1 : ({st})0;"
    else:
        body = f"return v < {p['c']} ? ({st})({p['c']} - v) : ({st})(v - {p['c']});"
    return f"{qual} {st} pix({it} v) {{ {body} }}\n\n"


def _box(p: dict, qual: str) -> str:
    st, rt = p["st"], p["rt"]
    ret = "s" if p["mode"] == "sum" else "(double)s / ((double)(y1 - y0 + 1) * (double)(x1 - x0 + 1))"
    return (f"{qual} {rt} box(int w, const {st}* sat, int ya, int yb, int xa, int xb) {{\n"
            "    int y0 = ya < yb ? ya : yb, y1 = ya < yb ? yb : ya;\n"
            "    int x0 = xa < xb ? xa : xb, x1 = xa < xb ? xb : xa;\n"
            f"    {st} a = sat[(size_t)y1 * w + x1];\n"
            f"    {st} b = y0 > 0 ? sat[(size_t)(y0 - 1) * w + x1] : ({st})0;\n"
            f"    {st} c = x0 > 0 ? sat[(size_t)y1 * w + (x0 - 1)] : ({st})0;\n"
            f"    {st} d = (y0 > 0 && x0 > 0) ? sat[(size_t)(y0 - 1) * w + (x0 - 1)] : ({st})0;\n"
            f"    {st} s = a - b - c + d;\n"
            f"    return {ret};\n}}\n\n")


def _sig(p: dict, ext: bool) -> str:
    return (('extern "C" ' if ext else "") + f"void integral_query(int h, int w, int q, const {p['it']}* img, "
            f"const int* qy, const int* qx, {p['st']}* sat, {p['rt']}* res)")


def _pre(p: dict) -> str:
    D = "__device__ __forceinline__"
    return HEAD + _pix(p, D) + _box(p, D)


def _query_kernel(p: dict) -> str:
    return (f"__global__ void box_queries(int w, int q, const int* __restrict__ qy, const int* __restrict__ qx, "
            f"const {p['st']}* __restrict__ sat, {p['rt']}* __restrict__ res) {{\n"
            "    int k = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (k < q) res[k] = box(w, sat, qy[2 * k], qy[2 * k + 1], qx[2 * k], qx[2 * k + 1]);\n}\n\n")


def _rows_thread(p: dict) -> str:
    it, st = p["it"], p["st"]
    return (f"__global__ void rows_thread(int h, int w, const {it}* __restrict__ img, {st}* __restrict__ sat) {{\n"
            "    int y = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (y >= h) return;\n"
            f"    {st} run = 0;\n"
            "    for (int x = 0; x < w; ++x) {\n"
            "        size_t i = (size_t)y * w + x;\n"
            "        run += pix(img[i]);\n"
            "        sat[i] = run;\n"
            "    }\n}\n\n")


def _cols_thread(p: dict) -> str:
    st = p["st"]
    return (f"__global__ void cols_thread(int h, int w, {st}* __restrict__ sat) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (x >= w) return;\n"
            f"    {st} run = sat[x];\n"
            "    for (int y = 1; y < h; ++y) {\n"
            "        size_t i = (size_t)y * w + x;\n"
            "        run += sat[i];\n"
            "        sat[i] = run;\n"
            "    }\n}\n\n")


def _rows_warp(p: dict, name: str, from_img: bool) -> str:
    """One warp per row: chunks of 32 scanned with __shfl_up_sync, a running carry between chunks."""
    it, st = p["it"], p["st"]
    src = f"const {it}* __restrict__ src" if from_img else f"const {st}* src"
    load = "pix(row[x])" if from_img else "row[x]"
    return (f"__global__ void {name}(int rows, int cols, {src}, {st}* dst) {{\n"
            "    int r = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5);\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (r >= rows) return;\n"
            "    const auto* row = src + (size_t)r * cols;\n"
            f"    {st}* out = dst + (size_t)r * cols;\n"
            f"    {st} carry = 0;\n"
            "    for (int base = 0; base < cols; base += 32) {\n"
            "        int x = base + lane;\n"
            f"        {st} v = x < cols ? {load} : ({st})0;\n"
            "        for (int o = 1; o < 32; o <<= 1) {\n"
            f"            {st} t = __shfl_up_sync(0xffffffffu, v, o);\n"
            "            if (lane >= o) v += t;\n"
            "        }\n"
            "        if (x < cols) out[x] = carry + v;\n"
            "        carry += __shfl_sync(0xffffffffu, v, 31);\n"
            "    }\n}\n\n")


def _alloc(p: dict, pinned: bool = False) -> str:
    it, st, rt = p["it"], p["st"], p["rt"]
    s = ("    if (h <= 0 || w <= 0) return;\n"
         f"    size_t n = (size_t)h * w, ib = n * sizeof({it}), sb = n * sizeof({st});\n"
         f"    size_t qb = (size_t)2 * q * sizeof(int), rb = (size_t)q * sizeof({rt});\n"
         f"    {it}* dimg; {st}* dsat; int *dqy, *dqx; {rt}* dres;\n"
         "    cudaMalloc(&dimg, ib); cudaMalloc(&dsat, sb);\n"
         "    cudaMalloc(&dqy, qb ? qb : 1); cudaMalloc(&dqx, qb ? qb : 1); cudaMalloc(&dres, rb ? rb : 1);\n")
    if pinned:
        s += (f"    size_t hb = ib > sb ? ib : sb;\n"
              "    if (qb > hb) hb = qb;\n"
              "    if (rb > hb) hb = rb;\n"
              "    unsigned char* stage; cudaMallocHost(&stage, hb);\n"
              "    memcpy(stage, img, ib);\n"
              "    cudaMemcpy(dimg, stage, ib, cudaMemcpyHostToDevice);\n"
              "    memcpy(stage, qy, qb);\n"
              "    cudaMemcpy(dqy, stage, qb, cudaMemcpyHostToDevice);\n"
              "    memcpy(stage, qx, qb);\n"
              "    cudaMemcpy(dqx, stage, qb, cudaMemcpyHostToDevice);\n")
    else:
        s += ("    cudaMemcpy(dimg, img, ib, cudaMemcpyHostToDevice);\n"
              "    cudaMemcpy(dqy, qy, qb, cudaMemcpyHostToDevice);\n"
              "    cudaMemcpy(dqx, qx, qb, cudaMemcpyHostToDevice);\n")
    return s


def _queries_and_finish(threads: int = 256, pinned: bool = False) -> str:
    s = f"    if (q > 0) box_queries<<<(q + {threads - 1}) / {threads}, {threads}>>>(w, q, dqy, dqx, dsat, dres);\n"
    if pinned:
        s += ("    cudaMemcpy(stage, dsat, sb, cudaMemcpyDeviceToHost);\n"
              "    memcpy(sat, stage, sb);\n"
              "    cudaMemcpy(stage, dres, rb, cudaMemcpyDeviceToHost);\n"
              "    memcpy(res, stage, rb);\n"
              "    cudaFreeHost(stage);\n")
    else:
        s += ("    cudaMemcpy(sat, dsat, sb, cudaMemcpyDeviceToHost);\n"
              "    cudaMemcpy(res, dres, rb, cudaMemcpyDeviceToHost);\n")
    return s + "    cudaFree(dimg); cudaFree(dsat); cudaFree(dqy); cudaFree(dqx); cudaFree(dres);\n}\n"


def _naive(p: dict) -> str:
    return (_pre(p) + _rows_thread(p) + _cols_thread(p) + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p)
            + "    rows_thread<<<(h + 127) / 128, 128>>>(h, w, dimg, dsat);\n"
            "    cols_thread<<<(w + 127) / 128, 128>>>(h, w, dsat);\n" + _queries_and_finish(128))


def _warp_rows(p: dict) -> str:
    return (_pre(p) + _rows_warp(p, "rows_warp", True) + _cols_thread(p) + _query_kernel(p) + _sig(p, True) + " {\n"
            + _alloc(p)
            + "    rows_warp<<<(unsigned)(((size_t)h * 32 + 255) / 256), 256>>>(h, w, dimg, dsat);\n"
            "    cols_thread<<<(w + 255) / 256, 256>>>(h, w, dsat);\n" + _queries_and_finish())


def _transpose_kernel(p: dict) -> str:
    st = p["st"]
    return (f"__global__ void transpose_tiles(int rows, int cols, const {st}* __restrict__ src, "
            f"{st}* __restrict__ dst) {{\n"
            f"    __shared__ {st} tile[32][33];\n"
            "    int bx = blockIdx.x * 32, by = blockIdx.y * 32;\n"
            "    for (int j = threadIdx.y; j < 32; j += 8) {\n"
            "        int y = by + j, x = bx + threadIdx.x;\n"
            "        if (y < rows && x < cols) tile[j][threadIdx.x] = src[(size_t)y * cols + x];\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int j = threadIdx.y; j < 32; j += 8) {\n"
            "        int y = bx + j, x = by + threadIdx.x;\n"
            "        if (y < cols && x < rows) dst[(size_t)y * rows + x] = tile[threadIdx.x][j];\n"
            "    }\n}\n\n")


def _transpose_scans(p: dict) -> str:
    """Row scans with warp shuffles, a shared-memory transpose, the same row scans on the transposed table (the
    column pass, now coalesced), and the transpose back."""
    st = p["st"]
    return (_pre(p) + _rows_warp(p, "rows_warp", True) + _rows_warp(p, "rows_warp_inplace", False)
            + _transpose_kernel(p) + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p)
            + f"    {st}* tmp; cudaMalloc(&tmp, sb);\n"
            "    rows_warp<<<(unsigned)(((size_t)h * 32 + 255) / 256), 256>>>(h, w, dimg, dsat);\n"
            "    dim3 tb(32, 8);\n"
            "    transpose_tiles<<<dim3((w + 31) / 32, (h + 31) / 32), tb>>>(h, w, dsat, tmp);\n"
            "    rows_warp_inplace<<<(unsigned)(((size_t)w * 32 + 255) / 256), 256>>>(w, h, tmp, tmp);\n"
            "    transpose_tiles<<<dim3((h + 31) / 32, (w + 31) / 32), tb>>>(w, h, tmp, dsat);\n"
            "    cudaFree(tmp);\n" + _queries_and_finish())


def _blelloch(p: dict) -> str:
    """One block of 512 threads per row: chunks of 1024 pixels scanned in shared memory by a Blelloch up-sweep
    and down-sweep (exclusive), plus the pixel itself, plus the running carry of the row; pinned staging."""
    it, st = p["it"], p["st"]
    kern = (f"__global__ void rows_blelloch(int h, int w, const {it}* __restrict__ img, {st}* __restrict__ sat) {{\n"
            f"    __shared__ {st} s[1024];\n"
            f"    __shared__ {st} carry;\n"
            "    int y = blockIdx.x;\n"
            f"    const {it}* row = img + (size_t)y * w;\n"
            f"    {st}* out = sat + (size_t)y * w;\n"
            "    int t = threadIdx.x, i0 = 2 * t, i1 = 2 * t + 1;\n"
            "    if (t == 0) carry = 0;\n"
            "    for (int base = 0; base < w; base += 1024) {\n"
            f"        {st} v0 = base + i0 < w ? pix(row[base + i0]) : ({st})0;\n"
            f"        {st} v1 = base + i1 < w ? pix(row[base + i1]) : ({st})0;\n"
            "        s[i0] = v0;\n"
            "        s[i1] = v1;\n"
            "        for (int d = 1; d < 1024; d <<= 1) {\n"
            "            __syncthreads();\n"
            "            int ai = (t + 1) * 2 * d - 1;\n"
            "            if (ai < 1024) s[ai] += s[ai - d];\n"
            "        }\n"
            "        __syncthreads();\n"
            f"        {st} total = s[1023];\n"
            "        __syncthreads();\n"
            "        if (t == 0) s[1023] = 0;\n"
            "        for (int d = 512; d >= 1; d >>= 1) {\n"
            "            __syncthreads();\n"
            "            int ai = (t + 1) * 2 * d - 1;\n"
            "            if (ai < 1024) {\n"
            f"                {st} x = s[ai - d];\n"
            "                s[ai - d] = s[ai];\n"
            "                s[ai] += x;\n"
            "            }\n"
            "        }\n"
            "        __syncthreads();\n"
            "        if (base + i0 < w) out[base + i0] = carry + (s[i0] + v0);\n"
            "        if (base + i1 < w) out[base + i1] = carry + (s[i1] + v1);\n"
            "        __syncthreads();\n"
            "        if (t == 0) carry += total;\n"
            "        __syncthreads();\n"
            "    }\n}\n\n")
    return (_pre(p) + kern + _cols_thread(p) + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p, True)
            + "    rows_blelloch<<<h, 512>>>(h, w, dimg, dsat);\n"
            "    cols_thread<<<(w + 511) / 512, 512>>>(h, w, dsat);\n" + _queries_and_finish(512, True))


def _host_cols(p: dict) -> str:
    """Row scans on the GPU (warp shuffles); the table comes to the host for the column pass and goes back for the
    queries."""
    return (_pre(p) + _rows_warp(p, "rows_warp", True) + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p)
            + "    rows_warp<<<(unsigned)(((size_t)h * 32 + 255) / 256), 256>>>(h, w, dimg, dsat);\n"
            "    cudaMemcpy(sat, dsat, sb, cudaMemcpyDeviceToHost);\n"
            "    for (int y = 1; y < h; ++y)\n"
            "        for (int x = 0; x < w; ++x) sat[(size_t)y * w + x] += sat[(size_t)(y - 1) * w + x];\n"
            "    cudaMemcpy(dsat, sat, sb, cudaMemcpyHostToDevice);\n" + _queries_and_finish())


def _single_thread(p: dict) -> str:
    it, st = p["it"], p["st"]
    kern = (f"__global__ void sat_serial(int h, int w, const {it}* img, {st}* sat) {{\n"
            "    for (int y = 0; y < h; ++y) {\n"
            f"        {st} run = 0;\n"
            "        for (int x = 0; x < w; ++x) {\n"
            "            size_t i = (size_t)y * w + x;\n"
            "            run += pix(img[i]);\n"
            "            sat[i] = y > 0 ? run + sat[i - w] : run;\n"
            "        }\n"
            "    }\n}\n\n")
    return (_pre(p) + kern + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p)
            + "    sat_serial<<<1, 1>>>(h, w, dimg, dsat);\n" + _queries_and_finish())


def _row_launches(p: dict) -> str:
    """Row scans by one thread per row; the column pass as one launch per row, adding the finished row above."""
    st = p["st"]
    kern = (f"__global__ void add_row_above(int w, int y, {st}* __restrict__ sat) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (x < w) sat[(size_t)y * w + x] += sat[(size_t)(y - 1) * w + x];\n}\n\n")
    return (_pre(p) + _rows_thread(p) + kern + _query_kernel(p) + _sig(p, True) + " {\n" + _alloc(p)
            + "    rows_thread<<<(h + 1023) / 1024, 1024>>>(h, w, dimg, dsat);\n"
            "    for (int y = 1; y < h; ++y) add_row_above<<<(w + 1023) / 1024, 1024>>>(w, y, dsat);\n"
            + _queries_and_finish(1024))


def _reference(p: dict) -> str:
    it, st = p["it"], p["st"]
    return ("#include <stdlib.h>\n\n" + _pix(p, "static inline") + _box(p, "static inline") + _sig(p, False) + " {\n"
            "    if (h <= 0 || w <= 0) return;\n"
            "    for (int y = 0; y < h; ++y) {\n"
            f"        {st} run = 0;\n"
            "        for (int x = 0; x < w; ++x) {\n"
            "            size_t i = (size_t)y * w + x;\n"
            "            run += pix(img[i]);\n"
            "            sat[i] = run;\n"
            "        }\n"
            "    }\n"
            "    for (int y = 1; y < h; ++y)\n"
            "        for (int x = 0; x < w; ++x) sat[(size_t)y * w + x] += sat[(size_t)(y - 1) * w + x];\n"
            "    for (int k = 0; k < q; ++k) res[k] = box(w, sat, qy[2 * k], qy[2 * k + 1], qx[2 * k], qx[2 * k + 1]);\n"
            "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    it, st, kind, rngv = COMBOS[index % len(COMBOS)]
    mode = "mean" if (index // len(COMBOS) + index) % 2 else "sum"
    p = {"it": it, "st": st, "kind": kind, "mode": mode, "rt": st if mode == "sum" else "double"}
    if kind == "threshold":
        p["c"] = int(rng.integers(40, 200))
    elif kind == "absdev":
        p["c"] = int(rng.integers(-20_000, 20_000))
    if it == "double":
        idist = {"kind": "uniform", "low": 0.0, "high": 1.0}
        tol = {"rtol": 1e-9, "atol": 1e-6}
    else:
        idist = {"kind": "randint", "low": rngv[0], "high": rngv[1]}
        tol = {"rtol": 0.0, "atol": 0.0}
    # timing size: the table (about 1-3 ns a pixel) and the queries (four scattered reads each)
    pixels = int(rng.choice([4_000_000, 5_000_000, 5_500_000])) if it == "float" else \
        int(rng.choice([6_000_000, 8_000_000, 7_000_000]))
    aspect = float(rng.choice([1.0, 0.5, 2.0, 0.3, 3.0, 1.3]))
    w = max(64, int((pixels / aspect) ** 0.5)) + int(rng.integers(0, 31))
    h = max(64, pixels // w)
    q_time = int(rng.choice([1_000_000, 1_500_000, 2_000_000, 3_000_000])) + int(rng.integers(0, 1000))
    desc_pix = {"value": "v", "square": "v * v", "threshold": f"(v > {p.get('c')} ? 1 : 0)",
                "absdev": f"|v - ({p.get('c')})|"}[kind]
    task = {
        "function_name": "integral_query",
        "description": (f"Integral image of pix(v) = {desc_pix} over an h x w {it} image (row-major) into sat "
                        f"({st}): inclusive scans along the rows, then down the columns. Then q boxes: box k spans "
                        "rows min..max of qy[2k], qy[2k+1] and columns min..max of qx[2k], qx[2k+1], inclusive; "
                        f"res[k] = its {'sum' if mode == 'sum' else 'mean (sum / area, in double)'} from the four "
                        "table corners A - B - C + D."),
        "returns": "void",
        "args": [
            {"name": "h", "role": "scalar", "ctype": "int"},
            {"name": "w", "role": "scalar", "ctype": "int"},
            {"name": "q", "role": "scalar", "ctype": "int"},
            {"name": "img", "role": "in", "ctype": it, "length": "h * w", "dist": idist},
            {"name": "qy", "role": "in", "ctype": "int", "length": "2 * q", "dist": {"kind": "randint", "low": 0, "high": "h"}},
            {"name": "qx", "role": "in", "ctype": "int", "length": "2 * q", "dist": {"kind": "randint", "low": 0, "high": "w"}},
            {"name": "sat", "role": "out", "ctype": st, "length": "h * w"},
            {"name": "res", "role": "out", "ctype": p["rt"], "length": "q"},
        ],
        "size_configs": [{"h": 3, "w": 5, "q": 4},
                         {"h": 33 + int(rng.integers(0, 20)), "w": 70 + int(rng.integers(0, 30)), "q": 57},
                         {"h": 200 + int(rng.integers(0, 60)), "w": 1100 + int(rng.integers(0, 100)),
                          "q": 1000 + int(rng.integers(0, 100))},
                         {"h": h, "w": w, "q": q_time}],
        "tolerance": tol,
        "reference_c": _reference(p),
        "tags": ["scan", "integral_image", "2d", "multi_pass"] + (["integer"] if tol["rtol"] == 0 else []),
    }
    variants = (
        Variant("thread_per_row_then_col", ("naive", "thread_per_row", "strided", "multi_pass", "block_128"),
                _naive(p)),
        Variant("warp_rows_coalesced_cols", ("warp_shuffle", "block_per_row", "coalesced", "multi_pass",
                                             "block_256"), _warp_rows(p)),
        Variant("transpose_scans", ("warp_shuffle", "shared_tiling", "coalesced", "multi_pass", "block_256"),
                _transpose_scans(p)),
        Variant("blelloch_block_rows_pinned", ("block_per_row", "tree_reduction", "shared_tiling", "pinned",
                                               "multi_pass", "block_512"), _blelloch(p)),
        Variant("host_column_pass", ("host_compute", "extra_transfers", "warp_shuffle", "block_per_row",
                                     "block_256"), _host_cols(p)),
        Variant("single_thread", ("single_thread", "naive"), _single_thread(p)),
        Variant("row_launches", ("many_launches", "thread_per_row", "strided", "coalesced", "block_1024"),
                _row_launches(p)),
    )
    return GeneratedTask(task, variants, {**p, "h_time": h, "w_time": w, "q_time": q_time})


FAMILY = Family(
    name="integral_image",
    description="summed-area table of an h x w image (row then column scans) and box-sum/mean queries from it",
    generate=generate,
    n_tasks=50,
    tags=("scan", "2d"),
)
