"""A small fused pipeline: direct 2-D convolution (valid padding), an activation, then P x P max pooling.

The image has CIN channels of H x W (img[(ci*H + y)*W + x]); COUT filters of CIN x K x K
(filt[((co*CIN + ci)*K + ky)*K + kx]) and a bias per filter. conv[co][oy][ox] = bias[co] + sum over ci, ky, kx (in
that order) of img[ci][oy+ky][ox+kx] * filt[co][ci][ky][kx] for oy < OH = H-K+1, ox < OW = W-K+1; the activation
(ReLU or leaky ReLU) follows; then out[co][py][px] = max over the P x P window at (py*P, px*P), for py < PH = OH/P,
px < PW = OW/P (a last partial window is dropped).

What varies with the index: the element type (mostly float), CIN (1..3), COUT (1..8), K (3..5), P (2 or 3), the
activation, the input ranges and the image shape (square or wide or tall). Sums keep the reference's order, but
nvcc contracts to fused multiply-adds: rtol 1e-4 / atol 1e-5 for float, 1e-9 / 1e-12 for double. The maximum is
exact.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

CINS = [1, 3, 1, 2, 3]
COUTS = [1, 4, 8, 2, 6, 3, 8]
KS = [3, 5, 4, 3, 5]
ACTS = ["relu", "leaky", "relu"]


class Spec:
    def __init__(self, t: str, cin: int, cout: int, k: int, p: int, act: str, slope: float, fn: str):
        self.t, self.cin, self.cout, self.k, self.p, self.act, self.fn = t, cin, cout, k, p, act, fn
        self.suf = "f" if t == "float" else ""
        self.slope_lit = repr(slope) + self.suf

    @property
    def args(self) -> str:
        t = self.t
        return f"int H, int W, const {t}* img, const {t}* filt, const {t}* bias, {t}* out"

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}({self.args})'

    @property
    def nf(self) -> int:
        return self.cout * self.cin * self.k * self.k

    def act_def(self) -> str:
        if self.act == "relu":
            return "#define ACT(v) ((v) > 0 ? (v) : 0)\n"
        return f"#define ACT(v) ((v) > 0 ? (v) : (v) * {self.slope_lit})\n"

    def head(self) -> str:
        f = self.t == "float"
        return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
                f"typedef {self.t} real_t;\n"
                f"#define CIN {self.cin}\n#define COUT {self.cout}\n#define K {self.k}\n#define P {self.p}\n"
                f"#define NF {self.nf}\n"
                + self.act_def()
                + f"#define RMAX(a, b) {'fmaxf' if f else 'fmax'}(a, b)\n"
                "#define IMG(ci, y, x) img[((size_t)(ci) * H + (y)) * W + (x)]\n"
                "#define FW(co, ci, ky, kx) filt[(((co) * CIN + (ci)) * K + (ky)) * K + (kx)]\n\n"
                "/* conv output (co, oy, ox) before the activation, in the reference's order */\n"
                "__device__ __forceinline__ real_t conv_at(const real_t* __restrict__ img,"
                " const real_t* __restrict__ filt, const real_t* __restrict__ bias, int H, int W, int co, int oy,"
                " int ox) {\n"
                "    real_t acc = bias[co];\n"
                "#pragma unroll\n"
                "    for (int ci = 0; ci < CIN; ++ci) {\n"
                "#pragma unroll\n"
                "        for (int ky = 0; ky < K; ++ky) {\n"
                "#pragma unroll\n"
                "            for (int kx = 0; kx < K; ++kx) acc += IMG(ci, oy + ky, ox + kx) * FW(co, ci, ky, kx);\n"
                "        }\n"
                "    }\n"
                "    return acc;\n}\n\n")

    def setup(self) -> str:
        return (f"{self.sig} {{\n"
                "    int OH = H - K + 1, OW = W - K + 1;\n"
                "    if (OH < P || OW < P) return;\n"
                "    int PH = OH / P, PW = OW / P;\n"
                "    size_t ni = (size_t)CIN * H * W, no = (size_t)COUT * PH * PW;\n"
                "    real_t *d_img, *d_f, *d_b, *d_out;\n"
                "    cudaMalloc(&d_img, ni * sizeof(real_t)); cudaMalloc(&d_f, NF * sizeof(real_t));\n"
                "    cudaMalloc(&d_b, COUT * sizeof(real_t)); cudaMalloc(&d_out, no * sizeof(real_t));\n"
                "    cudaMemcpy(d_img, img, ni * sizeof(real_t), cudaMemcpyHostToDevice);\n"
                "    cudaMemcpy(d_f, filt, NF * sizeof(real_t), cudaMemcpyHostToDevice);\n"
                "    cudaMemcpy(d_b, bias, COUT * sizeof(real_t), cudaMemcpyHostToDevice);\n")

    TAIL = ("    cudaMemcpy(out, d_out, no * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_img); cudaFree(d_f); cudaFree(d_b); cudaFree(d_out);\n}\n")


CONV_ACT_2D = (
    "/* conv + activation into buf (COUT x OH x OW); 32 x 4 threads, blockIdx.z = filter */\n"
    "__global__ void crp_conv_act(int H, int W, const real_t* __restrict__ img, const real_t* __restrict__ filt,"
    " const real_t* __restrict__ bias, real_t* buf) {\n"
    "    int OH = H - K + 1, OW = W - K + 1;\n"
    "    int ox = blockIdx.x * 32 + threadIdx.x, oy = blockIdx.y * 4 + threadIdx.y, co = blockIdx.z;\n"
    "    if (ox >= OW || oy >= OH) return;\n"
    "    real_t v = conv_at(img, filt, bias, H, W, co, oy, ox);\n"
    "    buf[((size_t)co * OH + oy) * OW + ox] = ACT(v);\n}\n\n")

POOL_K = (
    "__global__ void crp_pool(int OH, int OW, const real_t* __restrict__ buf, real_t* out) {\n"
    "    int PH = OH / P, PW = OW / P;\n"
    "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i >= (size_t)COUT * PH * PW) return;\n"
    "    int px = (int)(i % PW), py = (int)((i / PW) % PH), co = (int)(i / ((size_t)PW * PH));\n"
    "    const real_t* b = buf + ((size_t)co * OH + (size_t)py * P) * OW + (size_t)px * P;\n"
    "    real_t m = b[0];\n"
    "    for (int dy = 0; dy < P; ++dy)\n"
    "        for (int dx = 0; dx < P; ++dx) m = RMAX(m, b[(size_t)dy * OW + dx]);\n"
    "    out[i] = m;\n}\n\n")

BUF = ("    real_t* d_buf;\n"
       "    cudaMalloc(&d_buf, (size_t)COUT * OH * OW * sizeof(real_t));\n")


def _three_kernels(s: Spec) -> str:
    return (s.head()
            + "__global__ void crp_conv(int H, int W, const real_t* img, const real_t* filt, const real_t* bias,"
            " real_t* buf) {\n"
            "    int OH = H - K + 1, OW = W - K + 1;\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= (size_t)COUT * OH * OW) return;\n"
            "    int ox = (int)(i % OW), oy = (int)((i / OW) % OH), co = (int)(i / ((size_t)OW * OH));\n"
            "    buf[i] = conv_at(img, filt, bias, H, W, co, oy, ox);\n}\n\n"
            "__global__ void crp_act(size_t n, real_t* buf) {\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) { real_t v = buf[i]; buf[i] = ACT(v); }\n}\n\n"
            + POOL_K + s.setup() + BUF
            + "    size_t nc = (size_t)COUT * OH * OW;\n"
            "    crp_conv<<<(unsigned)((nc + 255) / 256), 256>>>(H, W, d_img, d_f, d_b, d_buf);\n"
            "    crp_act<<<(unsigned)((nc + 255) / 256), 256>>>(nc, d_buf);\n"
            "    crp_pool<<<(unsigned)((no + 255) / 256), 256>>>(OH, OW, d_buf, d_out);\n"
            "    cudaFree(d_buf);\n" + Spec.TAIL)


def _conv_act_then_pool(s: Spec) -> str:
    return (s.head() + CONV_ACT_2D + POOL_K + s.setup() + BUF
            + "    crp_conv_act<<<dim3((OW + 31) / 32, (OH + 3) / 4, COUT), dim3(32, 4)>>>(H, W, d_img, d_f, d_b,"
            " d_buf);\n"
            "    crp_pool<<<(unsigned)((no + 127) / 128), 128>>>(OH, OW, d_buf, d_out);\n"
            "    cudaFree(d_buf);\n" + Spec.TAIL)


POOLED_AT = (
    "/* pooled output (co, py, px) from its P x P conv outputs */\n"
    "__device__ __forceinline__ real_t pooled_at(const real_t* __restrict__ img, const real_t* __restrict__ filt,"
    " const real_t* __restrict__ bias, int H, int W, int co, int py, int px) {\n"
    "    real_t m = 0;\n"
    "#pragma unroll\n"
    "    for (int dy = 0; dy < P; ++dy) {\n"
    "#pragma unroll\n"
    "        for (int dx = 0; dx < P; ++dx) {\n"
    "            real_t v = conv_at(img, filt, bias, H, W, co, py * P + dy, px * P + dx);\n"
    "            v = ACT(v);\n"
    "            m = (dy == 0 && dx == 0) ? v : RMAX(m, v);\n"
    "        }\n"
    "    }\n"
    "    return m;\n}\n\n")


def _fused(s: Spec) -> str:
    return (s.head() + POOLED_AT
            + "__global__ void crp_fused(int H, int W, const real_t* __restrict__ img, const real_t* __restrict__ filt,"
            " const real_t* __restrict__ bias, real_t* out) {\n"
            "    int OH = H - K + 1, OW = W - K + 1, PH = OH / P, PW = OW / P;\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= (size_t)COUT * PH * PW) return;\n"
            "    int px = (int)(i % PW), py = (int)((i / PW) % PH), co = (int)(i / ((size_t)PW * PH));\n"
            "    out[i] = pooled_at(img, filt, bias, H, W, co, py, px);\n}\n\n"
            + s.setup()
            + "    crp_fused<<<(unsigned)((no + 127) / 128), 128>>>(H, W, d_img, d_f, d_b, d_out);\n" + Spec.TAIL)


def _grid_stride(s: Spec) -> str:
    return (s.head() + POOLED_AT
            + "__global__ void crp_gs(int H, int W, const real_t* __restrict__ img, const real_t* __restrict__ filt,"
            " const real_t* __restrict__ bias, real_t* out) {\n"
            "    int OH = H - K + 1, OW = W - K + 1, PH = OH / P, PW = OW / P;\n"
            "    size_t total = (size_t)COUT * PH * PW;\n"
            "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;"
            " i += (size_t)gridDim.x * blockDim.x) {\n"
            "        int px = (int)(i % PW), py = (int)((i / PW) % PH), co = (int)(i / ((size_t)PW * PH));\n"
            "        out[i] = pooled_at(img, filt, bias, H, W, co, py, px);\n"
            "    }\n}\n\n"
            + s.setup()
            + "    crp_gs<<<64, 256>>>(H, W, d_img, d_f, d_b, d_out);\n" + Spec.TAIL)


def _tile_size(s: Spec) -> int:
    size = 4 if s.t == "float" else 8
    for tp in (16, 8):
        ti = tp * s.p + s.k - 1
        if (s.cin * ti * (ti + 1) + s.nf + s.cout) * size <= 44 * 1024:
            return tp
    return 4


def _shared_tile(s: Spec) -> str:
    tp = _tile_size(s)
    return (s.head()
            + f"#define TP {tp}\n#define TI (TP * P + K - 1)\n\n"
            "/* a TP x TP tile of pooled outputs per block, every filter per thread; the input tile with its halo\n"
            "   and the filters staged in shared memory */\n"
            "__global__ void crp_tile(int H, int W, const real_t* __restrict__ img, const real_t* __restrict__ filt,"
            " const real_t* __restrict__ bias, real_t* out) {\n"
            "    __shared__ real_t tile[CIN][TI][TI + 1];\n"
            "    __shared__ real_t sf[NF];\n"
            "    __shared__ real_t sb[COUT];\n"
            "    int OH = H - K + 1, OW = W - K + 1, PH = OH / P, PW = OW / P;\n"
            "    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TP + tx;\n"
            "    int y0 = blockIdx.y * TP * P, x0 = blockIdx.x * TP * P;\n"
            "    for (int t = tid; t < CIN * TI * TI; t += TP * TP) {\n"
            "        int ci = t / (TI * TI), r = (t / TI) % TI, c = t % TI;\n"
            "        int gy = y0 + r, gx = x0 + c;\n"
            "        tile[ci][r][c] = (gy < H && gx < W) ? IMG(ci, gy, gx) : (real_t)0;\n"
            "    }\n"
            "    for (int t = tid; t < NF; t += TP * TP) sf[t] = filt[t];\n"
            "    for (int t = tid; t < COUT; t += TP * TP) sb[t] = bias[t];\n"
            "    __syncthreads();\n"
            "    int px = blockIdx.x * TP + tx, py = blockIdx.y * TP + ty;\n"
            "    if (px >= PW || py >= PH) return;\n"
            "    for (int co = 0; co < COUT; ++co) {\n"
            "        real_t m = 0;\n"
            "#pragma unroll\n"
            "        for (int dy = 0; dy < P; ++dy) {\n"
            "#pragma unroll\n"
            "            for (int dx = 0; dx < P; ++dx) {\n"
            "                real_t acc = sb[co];\n"
            "                for (int ci = 0; ci < CIN; ++ci) {\n"
            "#pragma unroll\n"
            "                    for (int ky = 0; ky < K; ++ky) {\n"
            "#pragma unroll\n"
            "                        for (int kx = 0; kx < K; ++kx)\n"
            "                            acc += tile[ci][ty * P + dy + ky][tx * P + dx + kx]"
            " * sf[((co * CIN + ci) * K + ky) * K + kx];\n"
            "                    }\n"
            "                }\n"
            "                real_t v = ACT(acc);\n"
            "                m = (dy == 0 && dx == 0) ? v : RMAX(m, v);\n"
            "            }\n"
            "        }\n"
            "        out[((size_t)co * PH + py) * PW + px] = m;\n"
            "    }\n}\n\n"
            + s.setup()
            + "    crp_tile<<<dim3((PW + TP - 1) / TP, (PH + TP - 1) / TP), dim3(TP, TP)>>>(H, W, d_img, d_f, d_b,"
            " d_out);\n" + Spec.TAIL)


def _constant(s: Spec) -> str:
    return (s.head()
            + "__constant__ real_t c_f[NF];\n__constant__ real_t c_b[COUT];\n\n"
            "/* a thread per pooled position computes every filter at once: each input value is read once per conv\n"
            "   output and multiplied by COUT filter taps broadcast from constant memory */\n"
            "__global__ void crp_const(int H, int W, const real_t* __restrict__ img, real_t* out) {\n"
            "    int OH = H - K + 1, OW = W - K + 1, PH = OH / P, PW = OW / P;\n"
            "    int px = blockIdx.x * 32 + threadIdx.x, py = blockIdx.y * 4 + threadIdx.y;\n"
            "    if (px >= PW || py >= PH) return;\n"
            "    real_t m[COUT];\n"
            "#pragma unroll\n"
            "    for (int dy = 0; dy < P; ++dy) {\n"
            "#pragma unroll\n"
            "        for (int dx = 0; dx < P; ++dx) {\n"
            "            real_t acc[COUT];\n"
            "#pragma unroll\n"
            "            for (int co = 0; co < COUT; ++co) acc[co] = c_b[co];\n"
            "            int oy = py * P + dy, ox = px * P + dx;\n"
            "#pragma unroll\n"
            "            for (int ci = 0; ci < CIN; ++ci) {\n"
            "#pragma unroll\n"
            "                for (int ky = 0; ky < K; ++ky) {\n"
            "#pragma unroll\n"
            "                    for (int kx = 0; kx < K; ++kx) {\n"
            "                        real_t v = IMG(ci, oy + ky, ox + kx);\n"
            "#pragma unroll\n"
            "                        for (int co = 0; co < COUT; ++co)"
            " acc[co] += v * c_f[((co * CIN + ci) * K + ky) * K + kx];\n"
            "                    }\n"
            "                }\n"
            "            }\n"
            "#pragma unroll\n"
            "            for (int co = 0; co < COUT; ++co) {\n"
            "                real_t a = ACT(acc[co]);\n"
            "                m[co] = (dy == 0 && dx == 0) ? a : RMAX(m[co], a);\n"
            "            }\n"
            "        }\n"
            "    }\n"
            "#pragma unroll\n"
            "    for (int co = 0; co < COUT; ++co) out[((size_t)co * PH + py) * PW + px] = m[co];\n}\n\n"
            + f"{s.sig} {{\n"
            "    int OH = H - K + 1, OW = W - K + 1;\n"
            "    if (OH < P || OW < P) return;\n"
            "    int PH = OH / P, PW = OW / P;\n"
            "    size_t ni = (size_t)CIN * H * W, no = (size_t)COUT * PH * PW;\n"
            "    real_t *d_img, *d_out;\n"
            "    cudaMalloc(&d_img, ni * sizeof(real_t)); cudaMalloc(&d_out, no * sizeof(real_t));\n"
            "    cudaMemcpy(d_img, img, ni * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpyToSymbol(c_f, filt, NF * sizeof(real_t));\n"
            "    cudaMemcpyToSymbol(c_b, bias, COUT * sizeof(real_t));\n"
            "    crp_const<<<dim3((PW + 31) / 32, (PH + 3) / 4), dim3(32, 4)>>>(H, W, d_img, d_out);\n"
            "    cudaMemcpy(out, d_out, no * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_img); cudaFree(d_out);\n}\n")


def _host_pool(s: Spec) -> str:
    return (s.head() + CONV_ACT_2D
            + f"{s.sig} {{\n"
            "    int OH = H - K + 1, OW = W - K + 1;\n"
            "    if (OH < P || OW < P) return;\n"
            "    int PH = OH / P, PW = OW / P;\n"
            "    size_t ni = (size_t)CIN * H * W, nc = (size_t)COUT * OH * OW;\n"
            "    real_t *d_img, *d_f, *d_b, *d_buf;\n"
            "    cudaMalloc(&d_img, ni * sizeof(real_t)); cudaMalloc(&d_f, NF * sizeof(real_t));\n"
            "    cudaMalloc(&d_b, COUT * sizeof(real_t)); cudaMalloc(&d_buf, nc * sizeof(real_t));\n"
            "    cudaMemcpy(d_img, img, ni * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(d_f, filt, NF * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(d_b, bias, COUT * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    crp_conv_act<<<dim3((OW + 31) / 32, (OH + 3) / 4, COUT), dim3(32, 4)>>>(H, W, d_img, d_f, d_b,"
            " d_buf);\n"
            "    real_t* hb = (real_t*)malloc(nc * sizeof(real_t));\n"
            "    cudaMemcpy(hb, d_buf, nc * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            "    for (int co = 0; co < COUT; ++co)\n"
            "        for (int py = 0; py < PH; ++py)\n"
            "            for (int px = 0; px < PW; ++px) {\n"
            "                const real_t* b = hb + ((size_t)co * OH + (size_t)py * P) * OW + (size_t)px * P;\n"
            "                real_t m = b[0];\n"
            "                for (int dy = 0; dy < P; ++dy)\n"
            "                    for (int dx = 0; dx < P; ++dx)\n"
            "                        if (b[(size_t)dy * OW + dx] > m) m = b[(size_t)dy * OW + dx];\n"
            "                out[((size_t)co * PH + py) * PW + px] = m;\n"
            "            }\n"
            "    free(hb); cudaFree(d_img); cudaFree(d_f); cudaFree(d_b); cudaFree(d_buf);\n}\n")


def _reference(s: Spec) -> str:
    t = s.t
    return ("#include <stdlib.h>\n\n"
            f"#define CIN {s.cin}\n#define COUT {s.cout}\n#define K {s.k}\n#define P {s.p}\n"
            + s.act_def() + "\n"
            f"void {s.fn}({s.args}) {{\n"
            "    int OH = H - K + 1, OW = W - K + 1;\n"
            "    if (OH < P || OW < P) return;\n"
            "    int PH = OH / P, PW = OW / P;\n"
            f"    {t}* buf = ({t}*)malloc((size_t)COUT * OH * OW * sizeof({t}));\n"
            "    for (int co = 0; co < COUT; ++co)\n"
            "        for (int oy = 0; oy < OH; ++oy)\n"
            "            for (int ox = 0; ox < OW; ++ox) {\n"
            f"                {t} acc = bias[co];\n"
            "                for (int ci = 0; ci < CIN; ++ci)\n"
            "                    for (int ky = 0; ky < K; ++ky)\n"
            "                        for (int kx = 0; kx < K; ++kx)\n"
            "                            acc += img[((size_t)ci * H + oy + ky) * W + ox + kx]"
            " * filt[((co * CIN + ci) * K + ky) * K + kx];\n"
            "                buf[((size_t)co * OH + oy) * OW + ox] = acc;\n"
            "            }\n"
            "    for (size_t i = 0; i < (size_t)COUT * OH * OW; ++i) buf[i] = ACT(buf[i]);\n"
            "    for (int co = 0; co < COUT; ++co)\n"
            "        for (int py = 0; py < PH; ++py)\n"
            "            for (int px = 0; px < PW; ++px) {\n"
            f"                const {t}* b = buf + ((size_t)co * OH + (size_t)py * P) * OW + (size_t)px * P;\n"
            f"                {t} m = b[0];\n"
            "                for (int dy = 0; dy < P; ++dy)\n"
            "                    for (int dx = 0; dx < P; ++dx)\n"
            "                        if (b[(size_t)dy * OW + dx] > m) m = b[(size_t)dy * OW + dx];\n"
            "                out[((size_t)co * PH + py) * PW + px] = m;\n"
            "            }\n"
            "    free(buf);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "double" if index % 4 == 3 else "float"
    cin = CINS[index % len(CINS)]
    cout = COUTS[(index // 2 + int(rng.integers(2))) % len(COUTS)]
    k = KS[(index // 3 + index) % len(KS)]
    p = 3 if index % 5 == 4 else 2
    act = ACTS[(index // 4) % len(ACTS)]
    slope = [0.1, 0.05, 0.2][int(rng.integers(3))]
    fn = f"conv{k}x{k}_" + ("relu" if act == "relu" else "leaky") + f"_pool{p}_{t}"
    s = Spec(t, cin, cout, k, p, act, slope, fn)
    macs = cout * cin * k * k
    # gcc vectorizes some of these loops and not others: the reference's time per multiply-add spans about 0.08 to
    # 1.2 ns on one core, so the cheapest tasks take about 15 ms and the dearest about 200 ms. (The budget was a
    # third of this: conv2d_relu_maxpool_000's reference took 5 ms, its kernels 5 to 60 us of a call that the
    # copies filled, and shared_tile_halo's 8.5 us fell under the harness's floor for GPU work on the H200.)
    budget = (1.8e8 if t == "float" else 1.5e8) * (0.8 + 0.4 * float(rng.random()))
    pixels = min(8_000_000, int(budget / (macs + 6)))
    aspect = [1.0, 2.0, 0.5, 1.0, 1.5][int(rng.integers(5))]
    h_t = max(k + p, int(np.sqrt(pixels / aspect)) + int(rng.integers(0, 8)))
    w_t = max(k + p, int(pixels / h_t))
    lo_img = [-1.0, 0.0, -0.5][int(rng.integers(3))]
    fa = round(float(1.5 / np.sqrt(cin * k * k)), 4)
    out_len = f"{cout} * ((H - {k - 1}) / {p}) * ((W - {k - 1}) / {p})"
    act_txt = ("ReLU (v > 0 ? v : 0)" if act == "relu" else f"leaky ReLU (v > 0 ? v : v * {s.slope_lit})")
    task = {
        "function_name": fn,
        "description": (f"Convolution + activation + max pooling ({t}). img has {cin} channel(s) of H x W, "
                        f"img[(ci*H + y)*W + x]; filt holds {cout} filter(s) of {cin} x {k} x {k}, "
                        f"filt[((co*{cin} + ci)*{k} + ky)*{k} + kx]; bias[co]. Valid convolution: OH = H - {k - 1}, "
                        f"OW = W - {k - 1}, conv[co][oy][ox] = bias[co] + sum over ci, ky, kx (in that order, "
                        f"acc += img * filt) of img[ci][oy+ky][ox+kx] * filt[co][ci][ky][kx]; then {act_txt}; then "
                        f"out[(co*PH + py)*PW + px] = max of the activated conv over rows py*{p}..py*{p}+{p - 1} and "
                        f"columns px*{p}..px*{p}+{p - 1}, PH = OH / {p}, PW = OW / {p} (H, W >= {k - 1 + p})."),
        "returns": "void",
        "args": [
            {"name": "H", "role": "scalar", "ctype": "int"},
            {"name": "W", "role": "scalar", "ctype": "int"},
            {"name": "img", "role": "in", "ctype": t, "length": f"{cin} * H * W",
             "dist": {"kind": "uniform", "low": lo_img, "high": 1.0}},
            {"name": "filt", "role": "in", "ctype": t, "length": str(s.nf),
             "dist": {"kind": "uniform", "low": -fa, "high": fa}},
            {"name": "bias", "role": "in", "ctype": t, "length": str(cout),
             "dist": {"kind": "uniform", "low": -0.2, "high": 0.2}},
            {"name": "out", "role": "out", "ctype": t, "length": out_len},
        ],
        "size_configs": [{"H": 9 + k, "W": 11 + k}, {"H": k - 1 + p, "W": k + p}, {"H": 37, "W": 64},
                         {"H": 131, "W": 77 + int(rng.integers(0, 5))}, {"H": 300, "W": 41},
                         {"H": h_t, "W": w_t}],
        "tolerance": {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-12},
        "reference_c": _reference(s),
        "tags": ["convolution", "stencil", "pooling", "compute-bound", t],
    }
    tp = _tile_size(s)
    variants = (
        Variant("three_kernels", ("multi_pass", "naive", "coalesced", "block_256", "pageable"), _three_kernels(s)),
        Variant("conv_act_then_pool", ("multi_pass", "fused", "coalesced", "block_128", "pageable"),
                _conv_act_then_pool(s)),
        Variant("fused_per_output", ("fused", "naive", "readonly_cache", "block_128", "pageable"), _fused(s)),
        Variant("grid_stride_small", ("fused", "grid_stride", "small_grid", "readonly_cache", "block_256",
                                      "pageable"), _grid_stride(s)),
        Variant("shared_tile_halo", ("shared_tiling", "fused", "register_blocking", "unrolled",
                                     "block_256" if tp == 16 else "block_64", "pageable"), _shared_tile(s)),
        Variant("constant_filters", ("constant_memory", "fused", "register_blocking", "unrolled", "block_128",
                                     "pageable"), _constant(s)),
        Variant("host_pool", ("host_compute", "extra_transfers", "fused", "block_128", "pageable"), _host_pool(s)),
    )
    params = {"type": t, "CIN": cin, "COUT": cout, "K": k, "P": p, "act": act,
              "slope": slope if act == "leaky" else None, "H_time": h_t, "W_time": w_t, "tile": tp}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="conv2d_relu_maxpool",
    description="direct 2-D convolution (few channels, K 3..5), ReLU / leaky ReLU and P x P max pooling, fused or not",
    generate=generate,
    n_tasks=50,
    tags=("stencil", "compute-bound"),
)
