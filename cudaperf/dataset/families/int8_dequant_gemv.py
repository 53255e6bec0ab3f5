"""int8 weights with float scales times a few vectors (weight-only or weight-and-activation quantization):
``Y[b][r]`` for b < NB, with the rows x cols matrix W stored as ``signed char`` and dequantized by scales.

Four modes, drawn per task:
- ``fx`` (float x), per-row scales: ``Y = S[r] * sum_c (float)W[r][c] * X_b[c]``, the sum in float in order;
- ``fx`` with groups of G columns (G = 32, 64 or 128): ``Y = sum_g S[r][g] * (sum_{c in g} (float)W * X_b)``;
- ``qx`` (x quantized too: int8 XQ with one float scale XS[b] per vector), per-row scales:
  ``Y = (S[r] * XS[b]) * (float)(sum_c (int)W[r][c] * (int)XQ_b[c])``, the dot product in int32, exact;
- ``qx`` with groups: ``Y = XS[b] * sum_g S[r][g] * (float)(int32 dot of group g)``.

Other parameters: NB (1..8, compile-time), the weight range (full int8 or int4 values held in int8), the scale
ranges, the x range and the shape (cols 512..8192, some not multiples of 4; rows sized so the reference does
about 4e7 (float) or 1.5e8 (int) multiply-adds at the timing size).

Why CPU and GPU agree: in ``qx`` per-row mode the int32 dot product is exact in any order (|W * XQ| <= 16129,
cols <= 8200, so every partial sum is below 2^31 in magnitude), and the variants end with the reference's
expression ``(S[r] * XS[b]) * (float)acc``: no addition, nothing to contract, the same bits (tolerance rtol 1e-5
as a formality). In the float modes the variants reassociate float sums (lanes, trees, 4-wide chunks, group
scales applied per element or per chunk instead of per group: ``S_g * (a + b)`` against ``S_g * a + S_g * b``).
With M the typical output magnitude (sqrt(cols) * rms(W) * rms(x) * mean(S), at the timing size), a reassociated
sum of N terms differs by about sqrt(N) * 6e-8 * M; the tolerance is rtol 1e-3, atol 1e-4 * M, while one missing
term moves an output by about M / sqrt(cols).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

COLS = [512, 1024, 1536, 2048, 3072, 4096, 5120, 8192, 1000, 2500, 768]
NBS_FX = [1, 2, 4, 3]
NBS_QX = [4, 8, 6, 2, 8]
GROUPS = [0, 32, 64, 128, 0, 64]
WMAX = [127, 127, 7]
S_RANGES = [(0.002, 0.01), (0.0005, 0.004), (0.01, 0.05), (0.004, 0.008)]
XRANGES = [1.0, 0.5, 2.0, 4.0]


class Spec:
    def __init__(self, qx: bool, g: int, nb: int, fn: str):
        self.qx, self.g, self.nb, self.fn = qx, g, nb, fn

    @property
    def xt(self) -> str:
        return "signed char" if self.qx else "float"

    @property
    def acc_t(self) -> str:
        return "int" if (self.qx and not self.g) else "float"

    def defines(self) -> str:
        s = f"#define NB {self.nb}\n"
        if self.g:
            s += f"#define G {self.g}\n#define NGR(cols) (((cols) + G - 1) / G)\n"
        else:
            s += "#define NGR(cols) 1\n"
        return s

    def term(self, w: str, x: str, r: str, c: str) -> str:
        """One element's contribution to a thread's acc_t partial sum."""
        sg = f"S[(size_t)({r}) * ng + ({c}) / G]"
        if self.qx:
            return f"{sg} * (float)((int)({w}) * (int)({x}))" if self.g else f"(int)({w}) * (int)({x})"
        return f"{sg} * ((float)({w}) * ({x}))" if self.g else f"(float)({w}) * ({x})"

    def finish(self) -> str:
        if self.qx:
            return "XS[b] * acc" if self.g else "(S[r] * XS[b]) * (float)acc"
        return "acc" if self.g else "S[r] * acc"

    @property
    def sig(self) -> str:
        if self.qx:
            return (f'extern "C" void {self.fn}(int rows, int cols, const signed char* W, const float* S, '
                    "const signed char* XQ, const float* XS, float* Y)")
        return (f'extern "C" void {self.fn}(int rows, int cols, const signed char* W, const float* S, '
                "const float* X, float* Y)")

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n" + self.defines()
                + f"typedef {self.acc_t} acc_t;\ntypedef {self.xt} x_t;\n\n"
                "__device__ __forceinline__ float finish(acc_t acc, int r, int b, const float* S, const float* XS) {\n"
                f"    (void)r; (void)b; (void)S; (void)XS;\n    return {self.finish()};\n}}\n\n"
                "__device__ __forceinline__ acc_t warp_sum(acc_t v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")

    def setup(self, copy_w: bool = True) -> str:
        s = (self.sig + " {\n"
             "    if (rows <= 0 || cols <= 0) return;\n"
             "    size_t wb = (size_t)rows * cols, sb = (size_t)rows * NGR(cols) * sizeof(float);\n"
             "    size_t xb = (size_t)NB * cols * sizeof(x_t), yb = (size_t)NB * rows * sizeof(float);\n"
             "    signed char* d_w; float *d_s, *d_y, *d_xs = NULL; x_t* d_x;\n"
             "    cudaMalloc(&d_w, wb); cudaMalloc(&d_s, sb); cudaMalloc(&d_x, xb); cudaMalloc(&d_y, yb);\n")
        if copy_w:
            s += "    cudaMemcpy(d_w, W, wb, cudaMemcpyHostToDevice);\n"
        s += "    cudaMemcpy(d_s, S, sb, cudaMemcpyHostToDevice);\n"
        if self.qx:
            s += ("    cudaMemcpy(d_x, XQ, xb, cudaMemcpyHostToDevice);\n"
                  "    cudaMalloc(&d_xs, NB * sizeof(float));\n"
                  "    cudaMemcpy(d_xs, XS, NB * sizeof(float), cudaMemcpyHostToDevice);\n")
        else:
            s += "    cudaMemcpy(d_x, X, xb, cudaMemcpyHostToDevice);\n"
        return s


TAIL = ("    cudaMemcpy(Y, d_y, yb, cudaMemcpyDeviceToHost);\n"
        "    cudaFree(d_w); cudaFree(d_s); cudaFree(d_x); cudaFree(d_y);\n    if (d_xs) cudaFree(d_xs);\n}\n")
KP = ("int rows, int cols, const signed char* __restrict__ W, const float* __restrict__ S, "
      "const x_t* __restrict__ X, const float* __restrict__ XS, float* __restrict__ Y")
ARGS = "rows, cols, d_w, d_s, d_x, d_xs, d_y"
ZERO = ("    int ng = NGR(cols);\n    (void)ng;\n"
        "    acc_t acc[NB];\n#pragma unroll\n    for (int b = 0; b < NB; ++b) acc[b] = 0;\n")
WARP_ID = ("    int r = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
           "    if (r >= rows) return;  // r is the same in the whole warp\n")
WARP_OUT = ("#pragma unroll\n    for (int b = 0; b < NB; ++b) acc[b] = warp_sum(acc[b]);\n"
            "    if (lane == 0) {\n#pragma unroll\n"
            "        for (int b = 0; b < NB; ++b) Y[(size_t)b * rows + r] = finish(acc[b], r, b, S, XS);\n    }\n}\n\n")
WARP_LAUNCH = "    {k}<<<(unsigned)(((size_t)rows * 32 + 255) / 256), 256>>>(" + ARGS + ");\n"


def _step(s: Spec, indent: str, wexpr: str = "wr[c]", r: str = "r") -> str:
    return (f"{indent}int w = (int){wexpr};\n#pragma unroll\n"
            f"{indent}for (int b = 0; b < NB; ++b) acc[b] += "
            + s.term("w", "X[(size_t)b * cols + c]", r, "c") + ";\n")


def _thread_per_row(s: Spec) -> str:
    return (s.head()
            + "__global__ void gemv_thread(" + KP + ") {\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= rows) return;\n"
            "    const signed char* wr = W + (size_t)r * cols;\n" + ZERO
            + "    for (int c = 0; c < cols; ++c) {\n" + _step(s, "        ") + "    }\n"
            "#pragma unroll\n"
            "    for (int b = 0; b < NB; ++b) Y[(size_t)b * rows + r] = finish(acc[b], r, b, S, XS);\n}\n\n"
            + s.setup() + "    gemv_thread<<<(rows + 127) / 128, 128>>>(" + ARGS + ");\n" + TAIL)


def _warp_per_row(s: Spec) -> str:
    return (s.head()
            + "__global__ void gemv_warp(" + KP + ") {\n" + WARP_ID
            + "    const signed char* wr = W + (size_t)r * cols;\n" + ZERO
            + "    for (int c = lane; c < cols; c += 32) {\n" + _step(s, "        ") + "    }\n" + WARP_OUT
            + s.setup() + WARP_LAUNCH.format(k="gemv_warp") + TAIL)


def _chunk(s: Spec) -> str:
    """The 4-element chunk at column c (c % 4 == 0, inside one group since G % 4 == 0) of row r, lane-local."""
    sg = "S[(size_t)r * ng + c / G]"
    if s.qx:
        body = ("            int wi = wv[k];\n#pragma unroll\n"
                "            for (int b = 0; b < NB; ++b) {\n"
                "                int xi = *reinterpret_cast<const int*>(X + (size_t)b * cols + c);\n")
        body += (f"                acc[b] += {sg} * (float)__dp4a(wi, xi, 0);\n" if s.g
                 else "                acc[b] = __dp4a(wi, xi, acc[b]);  // 4 int8 products + acc, exact\n")
        return body + "            }\n"
    body = ("            char4 q = wv[k];\n"
            "            float w0 = (float)q.x, w1 = (float)q.y, w2 = (float)q.z, w3 = (float)q.w;\n#pragma unroll\n"
            "            for (int b = 0; b < NB; ++b) {\n"
            "                float4 xv = *reinterpret_cast<const float4*>(X + (size_t)b * cols + c);\n"
            "                float d = w0 * xv.x + w1 * xv.y + w2 * xv.z + w3 * xv.w;\n")
    body += f"                acc[b] += {sg} * d;\n" if s.g else "                acc[b] += d;\n"
    return body + "            }\n"


def _warp_char4(s: Spec) -> str:
    vt = "int" if s.qx else "char4"
    what = "__dp4a on packed int8 (4 products per instruction)" if s.qx else "char4 loads, float math"
    return (s.head()
            + f"/* a warp per row; rows whose length is a multiple of 4 go 4 bytes at a time: {what} */\n"
            "__global__ void gemv_warp4(" + KP + ") {\n" + WARP_ID
            + "    const signed char* wr = W + (size_t)r * cols;\n" + ZERO
            + "    if ((cols & 3) == 0) {  // the row and every x vector start 4-byte aligned\n"
            f"        const {vt}* wv = reinterpret_cast<const {vt}*>(wr);\n"
            "        for (int k = lane; k < (cols >> 2); k += 32) {\n"
            "            int c = k << 2;\n" + _chunk(s)
            + "        }\n    } else {\n"
            "        for (int c = lane; c < cols; c += 32) {\n" + _step(s, "            ") + "        }\n    }\n"
            + WARP_OUT + s.setup() + WARP_LAUNCH.format(k="gemv_warp4") + TAIL)


def _block_per_row(s: Spec) -> str:
    return (s.head()
            + "__global__ void gemv_block(" + KP + ") {\n"
            "    __shared__ acc_t red[NB][256];\n"
            "    int r = blockIdx.x, tid = threadIdx.x;\n"
            "    const signed char* wr = W + (size_t)r * cols;\n" + ZERO
            + "    for (int c = tid; c < cols; c += 256) {\n" + _step(s, "        ") + "    }\n"
            "#pragma unroll\n    for (int b = 0; b < NB; ++b) red[b][tid] = acc[b];\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) {\n#pragma unroll\n"
            "            for (int b = 0; b < NB; ++b) red[b][tid] += red[b][tid + h];\n        }\n"
            "        __syncthreads();\n    }\n"
            "    if (tid < NB) { int b = tid; Y[(size_t)b * rows + r] = finish(red[b][0], r, b, S, XS); }\n}\n\n"
            + s.setup() + "    gemv_block<<<rows, 256>>>(" + ARGS + ");\n" + TAIL)


def _warp_rows4(s: Spec) -> str:
    return (s.head()
            + "#define RPW 4\n"
            "/* a warp computes RPW consecutive rows: each x value loaded once serves RPW rows (registers) */\n"
            "__global__ void gemv_rows4(" + KP + ") {\n"
            "    int r0 = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * RPW, lane = threadIdx.x & 31;\n"
            "    if (r0 >= rows) return;  // the same in the whole warp\n"
            "    int ng = NGR(cols);\n    (void)ng;\n"
            "    int nr = rows - r0 < RPW ? rows - r0 : RPW;\n"
            "    acc_t acc[RPW][NB];\n"
            "#pragma unroll\n    for (int q = 0; q < RPW; ++q)\n"
            "#pragma unroll\n        for (int b = 0; b < NB; ++b) acc[q][b] = 0;\n"
            "    for (int c = lane; c < cols; c += 32) {\n"
            "        x_t xv[NB];\n#pragma unroll\n"
            "        for (int b = 0; b < NB; ++b) xv[b] = X[(size_t)b * cols + c];\n"
            "#pragma unroll\n"
            "        for (int q = 0; q < RPW; ++q) {\n"
            "            if (q < nr) {\n"
            "                int r = r0 + q;\n"
            "                int w = (int)W[(size_t)r * cols + c];\n#pragma unroll\n"
            "                for (int b = 0; b < NB; ++b) acc[q][b] += " + s.term("w", "xv[b]", "r", "c") + ";\n"
            "            }\n        }\n    }\n"
            "#pragma unroll\n"
            "    for (int q = 0; q < RPW; ++q) {\n"
            "        if (q < nr) {  // the same in the whole warp\n"
            "            int r = r0 + q;\n#pragma unroll\n"
            "            for (int b = 0; b < NB; ++b) {\n"
            "                acc_t v = warp_sum(acc[q][b]);\n"
            "                if (lane == 0) Y[(size_t)b * rows + r] = finish(v, r, b, S, XS);\n"
            "            }\n        }\n    }\n}\n\n"
            + s.setup()
            + "    int warps = (rows + RPW - 1) / RPW;\n"
            "    gemv_rows4<<<(unsigned)(((size_t)warps * 32 + 127) / 128), 128>>>(" + ARGS + ");\n" + TAIL)


def _shared_x(s: Spec) -> str:
    return (s.head()
            + "#define TX 1024\n"
            "/* 8 rows per block, a warp each; the NB vectors staged through shared memory TX columns at a time */\n"
            "__global__ void gemv_sx(" + KP + ") {\n"
            "    __shared__ x_t sx[NB][TX];\n"
            "    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
            "    int r = blockIdx.x * 8 + warp;\n"
            "    bool valid = r < rows;  // the same in the whole warp\n"
            "    const signed char* wr = W + (size_t)(valid ? r : 0) * cols;\n" + ZERO
            + "    for (int c0 = 0; c0 < cols; c0 += TX) {\n"
            "        int m = cols - c0 < TX ? cols - c0 : TX;\n"
            "        for (int i = threadIdx.x; i < NB * TX; i += 256) {\n"
            "            int b = i / TX, c = i % TX;\n"
            "            if (c < m) sx[b][c] = X[(size_t)b * cols + c0 + c];\n        }\n"
            "        __syncthreads();\n"
            "        if (valid) {\n"
            "            for (int cc = lane; cc < m; cc += 32) {\n"
            "                int c = c0 + cc;\n"
            "                int w = (int)wr[c];\n#pragma unroll\n"
            "                for (int b = 0; b < NB; ++b) acc[b] += " + s.term("w", "sx[b][cc]", "r", "c") + ";\n"
            "            }\n        }\n"
            "        __syncthreads();\n    }\n"
            "    if (!valid) return;\n"
            + WARP_OUT + s.setup()
            + "    gemv_sx<<<(rows + 7) / 8, 256>>>(" + ARGS + ");\n" + TAIL)


def _pinned_streams(s: Spec) -> str:
    return (s.head()
            + "__global__ void gemv_rows(int r0, int nr, " + KP + ") {\n"
            "    int k = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (k >= nr) return;\n"
            "    int r = r0 + k;\n"
            "    const signed char* wr = W + (size_t)r * cols;\n" + ZERO
            + "    for (int c = lane; c < cols; c += 32) {\n" + _step(s, "        ") + "    }\n" + WARP_OUT
            + s.setup(copy_w=False)
            + "    /* W crosses in 4 chunks of rows through a pinned buffer; chunk k's copy overlaps chunk k-1's\n"
            "       kernel and the host's staging of chunk k+1 */\n"
            "    signed char* h_w;\n"
            "    cudaMallocHost(&h_w, wb);\n"
            "    cudaStream_t st[4];\n"
            "    for (int k = 0; k < 4; ++k) cudaStreamCreate(&st[k]);\n"
            "    int chunk = (rows + 3) / 4;\n"
            "    for (int k = 0; k < 4; ++k) {\n"
            "        int r0 = k * chunk;\n"
            "        if (r0 >= rows) break;\n"
            "        int nr = rows - r0 < chunk ? rows - r0 : chunk;\n"
            "        size_t off = (size_t)r0 * cols, cnt = (size_t)nr * cols;\n"
            "        memcpy(h_w + off, W + off, cnt);\n"
            "        cudaMemcpyAsync(d_w + off, h_w + off, cnt, cudaMemcpyHostToDevice, st[k]);\n"
            "        gemv_rows<<<(unsigned)(((size_t)nr * 32 + 255) / 256), 256, 0, st[k]>>>(r0, nr, " + ARGS + ");\n"
            "    }\n"
            "    cudaDeviceSynchronize();\n"
            "    for (int k = 0; k < 4; ++k) cudaStreamDestroy(st[k]);\n"
            "    cudaFreeHost(h_w);\n" + TAIL)


def _host_widen(s: Spec) -> str:
    wt = "int" if s.qx else "float"
    return (s.head()
            + f"__global__ void gemv_wide(int rows, int cols, const {wt}* __restrict__ Wd, "
            "const float* __restrict__ S, const x_t* __restrict__ X, const float* __restrict__ XS, "
            "float* __restrict__ Y) {\n" + WARP_ID
            + f"    const {wt}* wr = Wd + (size_t)r * cols;\n" + ZERO
            + "    for (int c = lane; c < cols; c += 32) {\n"
            f"        {wt} w = wr[c];\n#pragma unroll\n"
            "        for (int b = 0; b < NB; ++b) acc[b] += " + s.term("w", "X[(size_t)b * cols + c]", "r", "c")
            + ";\n    }\n" + WARP_OUT
            + s.setup(copy_w=False)
            + f"    /* the weights widened to {wt} on the host: four times the bytes cross PCIe */\n"
            f"    {wt}* h_d = ({wt}*)malloc(wb * sizeof({wt}));\n"
            f"    for (size_t i = 0; i < wb; ++i) h_d[i] = ({wt})W[i];\n"
            f"    {wt}* d_d;\n    cudaMalloc(&d_d, wb * sizeof({wt}));\n"
            f"    cudaMemcpy(d_d, h_d, wb * sizeof({wt}), cudaMemcpyHostToDevice);\n"
            "    gemv_wide<<<(unsigned)(((size_t)rows * 32 + 255) / 256), 256>>>(rows, cols, d_d, d_s, d_x, d_xs,"
            " d_y);\n"
            "    cudaFree(d_d);\n    free(h_d);\n" + TAIL)


def _reference(s: Spec) -> str:
    if s.qx:
        sig = (f"void {s.fn}(int rows, int cols, const signed char* W, const float* S, const signed char* XQ, "
               "const float* XS, float* Y)")
        xv = "(int)XQ[(size_t)b * cols + c]"
    else:
        sig = f"void {s.fn}(int rows, int cols, const signed char* W, const float* S, const float* X, float* Y)"
        xv = "X[(size_t)b * cols + c]"
    if s.g:
        pt, pz = ("int", "0") if s.qx else ("float", "0.0f")
        prod = f"(int)wr[c] * {xv}" if s.qx else f"(float)wr[c] * {xv}"
        cast = "(float)part" if s.qx else "part"
        out = "XS[b] * acc" if s.qx else "acc"
        body = ("            float acc = 0.0f;\n"
                "            for (int g = 0; g < ng; ++g) {\n"
                "                int c0 = g * G, c1 = c0 + G < cols ? c0 + G : cols;\n"
                f"                {pt} part = {pz};\n"
                f"                for (int c = c0; c < c1; ++c) part += {prod};\n"
                f"                acc += S[(size_t)r * ng + g] * {cast};\n"
                "            }\n"
                f"            Y[(size_t)b * rows + r] = {out};\n")
        pre = "    int ng = (cols + G - 1) / G;\n"
    else:
        if s.qx:
            body = ("            int acc = 0;\n"
                    f"            for (int c = 0; c < cols; ++c) acc += (int)wr[c] * {xv};\n"
                    "            Y[(size_t)b * rows + r] = (S[r] * XS[b]) * (float)acc;\n")
        else:
            body = ("            float acc = 0.0f;\n"
                    f"            for (int c = 0; c < cols; ++c) acc += (float)wr[c] * {xv};\n"
                    "            Y[(size_t)b * rows + r] = S[r] * acc;\n")
        pre = ""
    defs = f"#define NB {s.nb}\n" + (f"#define G {s.g}\n" if s.g else "")
    return ("#include <stddef.h>\n\n" + defs + "\n" + sig + " {\n" + pre
            + "    for (int r = 0; r < rows; ++r) {\n"
            "        const signed char* wr = W + (size_t)r * cols;\n"
            "        for (int b = 0; b < NB; ++b) {\n" + body + "        }\n    }\n}\n")


def _rms_int(m: int) -> float:
    k = np.arange(-m, m + 1, dtype=np.float64)
    return float(np.sqrt(np.mean(k * k)))


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    qx = index % 2 == 1
    g = GROUPS[(index // 2 + int(rng.integers(2))) % len(GROUPS)]
    nb = (NBS_QX if qx else NBS_FX)[(index // 2) % (len(NBS_QX) if qx else len(NBS_FX))]
    cols = COLS[(index * 3 + int(rng.integers(3))) % len(COLS)]
    if index % 5 == 3:
        cols += int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)  # not a multiple of 4
    wmax = WMAX[(index // 3) % len(WMAX)]
    s_lo, s_hi = S_RANGES[int(rng.integers(len(S_RANGES)))]
    xr = XRANGES[int(rng.integers(len(XRANGES)))]
    xs_lo, xs_hi = 0.004, 0.012
    s = Spec(qx, g, nb, "int8_gemv")
    macs = (1.5e8 if qx else 4.0e7) * (0.8 + 0.5 * float(rng.random()))
    rows = max(64, int(macs / (cols * nb)))
    # the typical output magnitude at the timing size
    xrms = _rms_int(127) * (xs_lo + xs_hi) / 2 if qx else xr / np.sqrt(3.0)
    mag = float(np.sqrt(cols) * _rms_int(wmax) * xrms * (s_lo + s_hi) / 2)
    exact = qx and not g
    tol = {"rtol": 1e-5, "atol": float(f"{1e-6 * mag:.3g}")} if exact else \
        {"rtol": 1e-3, "atol": float(f"{1e-4 * mag:.3g}")}
    slen = f"rows * ((cols + {g - 1}) / {g})" if g else "rows"
    args = [
        {"name": "rows", "role": "scalar", "ctype": "int"},
        {"name": "cols", "role": "scalar", "ctype": "int"},
        {"name": "W", "role": "in", "ctype": "signed char", "length": "rows * cols",
         "dist": {"kind": "randint", "low": -wmax, "high": wmax + 1}},
        {"name": "S", "role": "in", "ctype": "float", "length": slen,
         "dist": {"kind": "uniform", "low": s_lo, "high": s_hi}},
    ]
    if qx:
        args += [{"name": "XQ", "role": "in", "ctype": "signed char", "length": f"{nb} * cols",
                  "dist": {"kind": "randint", "low": -127, "high": 128}},
                 {"name": "XS", "role": "in", "ctype": "float", "length": nb,
                  "dist": {"kind": "uniform", "low": xs_lo, "high": xs_hi}}]
    else:
        args.append({"name": "X", "role": "in", "ctype": "float", "length": f"{nb} * cols",
                     "dist": {"kind": "uniform", "low": -xr, "high": xr}})
    args.append({"name": "Y", "role": "out", "ctype": "float", "length": f"{nb} * rows"})
    scales = (f"S holds rows x ng scales, ng = (cols + {g - 1}) / {g} (group g covers columns [{g}g, {g}g + {g}))"
              if g else "S holds one scale per row")
    if qx:
        what = (f"XQ is {nb} x cols int8 (vector b at XQ[b * cols]) with scales XS[b]; "
                + ("Y[b * rows + r] = XS[b] * (sum over groups g in order of S[r * ng + g] * (float)(int32 sum "
                   "over c in g of W[r][c] * XQ_b[c])), the outer sum in float" if g else
                   "Y[b * rows + r] = (S[r] * XS[b]) * (float)(int32 sum over c of W[r][c] * XQ_b[c])"))
    else:
        what = (f"X is {nb} x cols float (vector b at X[b * cols]); "
                + ("Y[b * rows + r] = sum over groups g in order of S[r * ng + g] * (sum over c in g in order of "
                   "(float)W[r][c] * X_b[c]), all in float" if g else
                   "Y[b * rows + r] = S[r] * (sum over c in order of (float)W[r][c] * X_b[c]), in float"))
    task = {
        "function_name": "int8_gemv",
        "description": (f"int8 weights with float scales times {nb} vector(s): W is rows x cols row-major signed "
                        f"char (values in [-{wmax}, {wmax}]); {scales}; {what}."),
        "returns": "void",
        "args": args,
        "size_configs": [{"rows": 37, "cols": 100}, {"rows": 64, "cols": 256}, {"rows": 5, "cols": 13},
                         {"rows": 259, "cols": 771},
                         {"rows": 3 + int(rng.integers(1, 60)), "cols": 4 * int(rng.integers(200, 600))},
                         {"rows": rows, "cols": cols}],
        "tolerance": tol,
        "reference_c": _reference(s),
        "tags": ["matvec", "int8", "quantized", "mixed-precision", "memory-bound"]
        + (["integer"] if qx else ["float"]),
    }
    vtags = ("vectorized", "block_per_row", "warp_shuffle", "coalesced", "mixed_precision", "block_256", "pageable")
    variants = (
        Variant("thread_per_row", ("thread_per_row", "naive", "strided", "mixed_precision", "block_128",
                                   "pageable"), _thread_per_row(s)),
        Variant("warp_per_row", ("block_per_row", "warp_shuffle", "coalesced", "mixed_precision", "block_256",
                                 "pageable"), _warp_per_row(s)),
        Variant("warp_dp4a" if qx else "warp_char4", vtags, _warp_char4(s)),
        Variant("block_per_row_tree", ("block_per_row", "tree_reduction", "coalesced", "mixed_precision",
                                       "block_256", "pageable"), _block_per_row(s)),
        Variant("warp_4rows_regs", ("register_blocking", "block_per_row", "warp_shuffle", "unrolled",
                                    "mixed_precision", "block_128", "pageable"), _warp_rows4(s)),
        Variant("shared_x_tiles", ("shared_tiling", "block_per_row", "warp_shuffle", "mixed_precision",
                                   "block_256", "pageable"), _shared_x(s)),
        Variant("pinned_row_streams", ("async_streams", "pinned", "block_per_row", "warp_shuffle",
                                       "mixed_precision", "block_256"), _pinned_streams(s)),
        Variant("host_widen_weights", ("host_compute", "extra_transfers", "block_per_row", "warp_shuffle",
                                       "block_256", "pageable"), _host_widen(s)),
    )
    params = {"mode": "qx" if qx else "fx", "group": g, "NB": nb, "cols": cols, "rows": rows, "w_max": wmax,
              "s_range": [s_lo, s_hi], "x_range": None if qx else xr, "magnitude": mag}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="int8_dequant_gemv",
    description="int8 weights with per-row or per-group float scales times float or int8 vectors",
    generate=generate,
    n_tasks=50,
    tags=("mixed-precision", "memory-bound"),
)
