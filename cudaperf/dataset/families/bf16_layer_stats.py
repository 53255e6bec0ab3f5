"""Per-row statistics of a bf16 matrix (the statistics of a layer norm or RMS norm): rows x cols values stored
as bf16 bit patterns (``unsigned short``), float outputs per row.

Modes, drawn per task (n = cols, all arithmetic in float, sums in order c = 0..n-1):
- ``meanvar``: ``mean[r] = (sum x) / n``, ``var[r] = (sum (x - mean)^2) / (n - DDOF)`` (two passes; DDOF 0 or 1);
- ``mean_rstd``: ``mean[r]`` as above and ``rstd[r] = 1 / sqrtf((sum (x - mean)^2) / n + EPS)``;
- ``rms``: ``rms[r] = sqrtf((sum x^2) / n + EPS)``;
- ``rrms``: ``rrms[r] = 1 / sqrtf((sum x^2) / n + EPS)``.
Other parameters: the value range (bf16 patterns of one sign, log-uniform magnitudes), EPS and the shape (cols
64..8192, some not multiples of 8; rows sized so the reference reads about 4e7 values at the timing size: 2e7
values twice in the two-pass modes).

Why CPU and GPU agree within the tolerance: decoding is exact; the variants reassociate the float sums (lanes,
trees, atomics), use Welford's one-pass update with Chan's merge, or accumulate in double. Values have one sign
and log-uniform magnitudes over a few octaves, so the mean is far from 0 and the variance at least a tenth of
the mean square: the float two-pass variance and the other methods differ by about sqrt(n) * 6e-8 relative
(below 1e-5), and an order-dependent float atomic sum by as much. Tolerance: rtol 2e-4, atol 1e-7 (outputs are
at least ~1e-3).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant
from cudaperf.dataset.families._lowp import BF16_RANGES, C_BF16, CU_BF16, flit

COLS = [64, 128, 256, 768, 1024, 2048, 4096, 8192, 100, 1000, 3000, 5000]
MODES = ["meanvar", "mean_rstd", "rms", "rrms", "meanvar"]
RANGES = ["pos_small", "neg_small", "pos_unit", "neg_unit", "pos_wide"]
EPSS = [1e-5, 1e-6, 1e-5, 1e-3]


class Spec:
    def __init__(self, mode: str, ddof: int, eps: float, fn: str):
        self.mode, self.ddof, self.eps, self.fn = mode, ddof, eps, fn

    @property
    def two_pass(self) -> bool:
        return self.mode in ("meanvar", "mean_rstd")

    @property
    def outs(self) -> list[str]:
        return {"meanvar": ["mean", "var"], "mean_rstd": ["mean", "rstd"], "rms": ["rms"],
                "rrms": ["rrms"]}[self.mode]

    def defines(self) -> str:
        return f"#define DDOF {self.ddof}\n#define EPS {flit(self.eps)}\n"

    def out_body(self) -> str:
        """Statements writing row r's outputs from p1 (sum of x, or of x^2) and p2 (sum of squared deviations)."""
        if self.mode == "meanvar":
            return "    mean[r] = p1 / (float)n;\n    var[r] = p2 / (float)(n - DDOF);\n"
        if self.mode == "mean_rstd":
            return "    mean[r] = p1 / (float)n;\n    rstd[r] = 1.0f / sqrtf(p2 / (float)n + EPS);\n"
        if self.mode == "rms":
            return "    rms[r] = sqrtf(p1 / (float)n + EPS);\n"
        return "    rrms[r] = 1.0f / sqrtf(p1 / (float)n + EPS);\n"

    @property
    def out_params(self) -> str:
        return ", ".join(f"float* {o}" for o in self.outs)

    @property
    def out_args(self) -> str:
        return ", ".join(f"d_{o}" for o in self.outs)

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}(int rows, int cols, const unsigned short* X, {self.out_params})'

    @property
    def p1(self) -> str:
        """What the first pass sums (of the decoded value x)."""
        return "x" if self.two_pass else "x * x"

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                + self.defines() + "\n" + CU_BF16
                + f"__device__ __forceinline__ void write_out(int r, int n, float p1, float p2, {self.out_params}) "
                "{\n    (void)p2;\n" + self.out_body() + "}\n\n"
                "__device__ __forceinline__ float warp_sum(float v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")

    def setup(self, copy_x: bool = True) -> str:
        s = (self.sig + " {\n"
             "    if (rows <= 0 || cols <= 0) return;\n"
             "    size_t xb = (size_t)rows * cols * sizeof(unsigned short), ob = (size_t)rows * sizeof(float);\n"
             "    unsigned short* d_x;\n    cudaMalloc(&d_x, xb);\n")
        for o in self.outs:
            s += f"    float* d_{o};\n    cudaMalloc(&d_{o}, ob);\n"
        if copy_x:
            s += "    cudaMemcpy(d_x, X, xb, cudaMemcpyHostToDevice);\n"
        return s

    def tail(self) -> str:
        s = "".join(f"    cudaMemcpy({o}, d_{o}, ob, cudaMemcpyDeviceToHost);\n" for o in self.outs)
        return s + "    cudaFree(d_x);\n" + "".join(f"    cudaFree(d_{o});\n" for o in self.outs) + "}\n"

    @property
    def kp(self) -> str:
        return f"int rows, int cols, const unsigned short* __restrict__ X, {self.out_params}"

    @property
    def ka(self) -> str:
        return "rows, cols, d_x, " + self.out_args


WARP_LAUNCH = "    {k}<<<(unsigned)(((size_t)rows * 32 + 255) / 256), 256>>>({a});\n"
WARP_ID = ("    int r = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
           "    if (r >= rows) return;  // the same in the whole warp\n"
           "    const unsigned short* xr = X + (size_t)r * cols;\n    int n = cols;\n")


def _thread_per_row(s: Spec) -> str:
    p2 = ("    float m = p1 / (float)n, p2 = 0.0f;\n"
          "    for (int c = 0; c < n; ++c) { float d = bf16_to_float(xr[c]) - m; p2 += d * d; }\n"
          if s.two_pass else "    float p2 = 0.0f;\n")
    return (s.head()
            + "__global__ void stats_thread(" + s.kp + ") {\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= rows) return;\n"
            "    const unsigned short* xr = X + (size_t)r * cols;\n    int n = cols;\n"
            "    float p1 = 0.0f;\n"
            f"    for (int c = 0; c < n; ++c) {{ float x = bf16_to_float(xr[c]); p1 += {s.p1}; }}\n" + p2
            + f"    write_out(r, n, p1, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + f"    stats_thread<<<(rows + 127) / 128, 128>>>({s.ka});\n" + s.tail())


def _warp_two_pass(s: Spec) -> str:
    p2 = ("    float m = p1 / (float)n, p2 = 0.0f;\n"
          "    for (int c = lane; c < n; c += 32) { float d = bf16_to_float(xr[c]) - m; p2 += d * d; }\n"
          "    p2 = warp_sum(p2);\n" if s.two_pass else "    float p2 = 0.0f;\n")
    return (s.head()
            + "__global__ void stats_warp(" + s.kp + ") {\n" + WARP_ID
            + "    float p1 = 0.0f;\n"
            f"    for (int c = lane; c < n; c += 32) {{ float x = bf16_to_float(xr[c]); p1 += {s.p1}; }}\n"
            "    p1 = warp_sum(p1);  // every lane holds the row's sum\n" + p2
            + f"    if (lane == 0) write_out(r, n, p1, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + WARP_LAUNCH.format(k="stats_warp", a=s.ka) + s.tail())


def _warp_uint4(s: Spec) -> str:
    def loop(expr: str, acc: str) -> str:
        return ("    if ((n & 7) == 0) {  // 16-byte aligned rows: 8 bf16 per load\n"
                "        const uint4* xv = reinterpret_cast<const uint4*>(xr);\n"
                "        for (int k = lane; k < (n >> 3); k += 32) {\n"
                "            uint4 q = __ldg(xv + k);\n"
                "            float v[8] = {bf16_lo(q.x), bf16_hi(q.x), bf16_lo(q.y), bf16_hi(q.y),\n"
                "                          bf16_lo(q.z), bf16_hi(q.z), bf16_lo(q.w), bf16_hi(q.w)};\n"
                "#pragma unroll\n"
                f"            for (int j = 0; j < 8; ++j) {{ float x = v[j]; {acc} += {expr}; }}\n"
                "        }\n    } else {\n"
                f"        for (int c = lane; c < n; c += 32) {{ float x = bf16_to_float(xr[c]); {acc} += {expr}; }}\n"
                "    }\n")
    p2 = ("    float m = p1 / (float)n, p2 = 0.0f;\n" + loop("(x - m) * (x - m)", "p2") + "    p2 = warp_sum(p2);\n"
          if s.two_pass else "    float p2 = 0.0f;\n")
    return (s.head()
            + "__global__ void stats_warp_u4(" + s.kp + ") {\n" + WARP_ID
            + "    float p1 = 0.0f;\n" + loop(s.p1, "p1") + "    p1 = warp_sum(p1);\n" + p2
            + f"    if (lane == 0) write_out(r, n, p1, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + WARP_LAUNCH.format(k="stats_warp_u4", a=s.ka) + s.tail())


def _block_shared_row(s: Spec) -> str:
    p2 = ("    float m = tot / (float)n, q = 0.0f;\n"
          "    for (int c = tid; c < n; c += 256) { float d = row[c] - m; q += d * d; }\n"
          "    float p2 = block_sum(q, red);\n" if s.two_pass else "    float p2 = 0.0f;\n")
    return (s.head()
            + "__device__ float block_sum(float v, float* red) {  // 256 threads; every thread gets the sum\n"
            "    int tid = threadIdx.x;\n"
            "    red[tid] = v;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] += red[tid + h];\n        __syncthreads();\n    }\n"
            "    float t = red[0];\n    __syncthreads();  // red is reused\n    return t;\n}\n\n"
            + ("/* a block per row: the row decoded once into shared memory (cols floats), both passes read it "
               "there */\n" if s.two_pass else "/* a block per row, a tree in shared memory */\n")
            + "__global__ void stats_block(" + s.kp + ") {\n"
            "    extern __shared__ float sm[];\n"
            "    float* red = sm;\n"
            + ("    float* row = sm + 256;\n" if s.two_pass else "")
            + "    int r = blockIdx.x, tid = threadIdx.x, n = cols;\n"
            "    const unsigned short* xr = X + (size_t)r * cols;\n"
            "    float a = 0.0f;\n"
            "    for (int c = tid; c < n; c += 256) { float x = bf16_to_float(xr[c]); "
            + ("row[c] = x; " if s.two_pass else "") + f"a += {s.p1}; }}\n"
            "    float tot = block_sum(a, red);\n" + p2
            + f"    if (tid == 0) write_out(r, n, tot, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup()
            + f"    size_t smb = (size_t)(256{' + cols' if s.two_pass else ''}) * sizeof(float);\n"
            "    if (smb > 48 * 1024) cudaFuncSetAttribute(stats_block, cudaFuncAttributeMaxDynamicSharedMemorySize,"
            " (int)smb);\n"
            f"    stats_block<<<rows, 256, smb>>>({s.ka});\n" + s.tail())


def _warp_welford(s: Spec) -> str:
    return (s.head()
            + "/* one pass: each lane runs Welford's update over its elements, the lanes' (count, mean, M2) are\n"
            "   merged with Chan's formula through shuffles */\n"
            "__global__ void stats_welford(" + s.kp + ") {\n" + WARP_ID
            + "    float cnt = 0.0f, mu = 0.0f, m2 = 0.0f;\n"
            "    for (int c = lane; c < n; c += 32) {\n"
            "        float x = bf16_to_float(xr[c]);\n"
            "        cnt += 1.0f;\n"
            "        float d = x - mu;\n"
            "        mu += d / cnt;\n"
            "        m2 += d * (x - mu);\n    }\n"
            "    for (int o = 16; o > 0; o >>= 1) {\n"
            "        float cb = __shfl_xor_sync(0xffffffffu, cnt, o);\n"
            "        float mb = __shfl_xor_sync(0xffffffffu, mu, o);\n"
            "        float qb = __shfl_xor_sync(0xffffffffu, m2, o);\n"
            "        float t = cnt + cb;\n"
            "        float f = t > 0.0f ? cb / t : 0.0f;  // lanes with no elements (n < 32) merge as nothing\n"
            "        float d = mb - mu;\n"
            "        mu += d * f;\n"
            "        m2 += qb + d * d * cnt * f;\n"
            "        cnt = t;\n    }\n"
            f"    if (lane == 0) write_out(r, n, mu * (float)n, m2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + WARP_LAUNCH.format(k="stats_welford", a=s.ka) + s.tail())


def _block64(s: Spec) -> str:
    p2 = ("    float m = p1 / (float)n, q = 0.0f;\n"
          "    for (int c = tid; c < n; c += 64) { float d = bf16_to_float(xr[c]) - m; q += d * d; }\n"
          "    float p2 = pair_sum(q, part);\n" if s.two_pass else "    float p2 = 0.0f;\n")
    return (s.head()
            + "__device__ float pair_sum(float v, float* part) {  // 64 threads: two warps, then the pair\n"
            "    v = warp_sum(v);\n"
            "    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;\n"
            "    __syncthreads();\n    float t = part[0] + part[1];\n    __syncthreads();\n    return t;\n}\n\n"
            "__global__ void stats_b64(" + s.kp + ") {\n"
            "    __shared__ float part[2];\n"
            "    int r = blockIdx.x, tid = threadIdx.x, n = cols;\n"
            "    const unsigned short* xr = X + (size_t)r * cols;\n"
            "    float a = 0.0f;\n"
            f"    for (int c = tid; c < n; c += 64) {{ float x = bf16_to_float(xr[c]); a += {s.p1}; }}\n"
            "    float p1 = pair_sum(a, part);\n" + p2
            + f"    if (tid == 0) write_out(r, n, p1, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + f"    stats_b64<<<rows, 64>>>({s.ka});\n" + s.tail())


def _warp_double(s: Spec) -> str:
    if s.two_pass:
        body = ("    double a = 0.0, q = 0.0;\n"
                "    for (int c = lane; c < n; c += 32) {\n"
                "        double x = (double)bf16_to_float(xr[c]);\n        a += x; q += x * x;\n    }\n"
                "    for (int o = 16; o > 0; o >>= 1) {\n"
                "        a += __shfl_xor_sync(0xffffffffu, a, o);\n"
                "        q += __shfl_xor_sync(0xffffffffu, q, o);\n    }\n"
                "    double md = a / (double)n;\n"
                "    double dev = q - a * md;  // sum of squared deviations, one pass in double\n"
                "    if (dev < 0.0) dev = 0.0;\n"
                "    float p1 = (float)a, p2 = (float)dev;\n")
    else:
        body = ("    double q = 0.0;\n"
                "    for (int c = lane; c < n; c += 32) { double x = (double)bf16_to_float(xr[c]); q += x * x; }\n"
                "    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);\n"
                "    float p1 = (float)q, p2 = 0.0f;\n")
    return (s.head()
            + "/* one pass, a warp per row, sums in double */\n"
            "__global__ void stats_dbl(" + s.kp + ") {\n" + WARP_ID + body
            + f"    if (lane == 0) write_out(r, n, p1, p2, {', '.join(s.outs)});\n}}\n\n"
            + s.setup() + WARP_LAUNCH.format(k="stats_dbl", a=s.ka) + s.tail())


def _atomics(s: Spec) -> str:
    pass2 = ("__global__ void dev_part(int rows, int cols, const unsigned short* __restrict__ X, "
             "const float* __restrict__ acc1, float* acc2) {\n"
             "    __shared__ float red[256];\n"
             "    int r = blockIdx.x, c = blockIdx.y * 256 + threadIdx.x;\n"
             "    float m = acc1[r] / (float)cols, v = 0.0f;\n"
             "    if (c < cols) { float d = bf16_to_float(X[(size_t)r * cols + c]) - m; v = d * d; }\n"
             "    v = block_sum(v, red);\n"
             "    if (threadIdx.x == 0) atomicAdd(&acc2[r], v);\n}\n\n") if s.two_pass else ""
    launch2 = "    dev_part<<<grid, 256>>>(rows, cols, d_x, acc1, acc2);\n" if s.two_pass else ""
    return (s.head()
            + "__device__ float block_sum(float v, float* red) {  // 256 threads, the sum in thread 0\n"
            "    int tid = threadIdx.x;\n"
            "    red[tid] = v;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] += red[tid + h];\n        __syncthreads();\n    }\n"
            "    return red[0];\n}\n\n"
            "/* a 2-D grid: block (r, i) sums values 256 i .. 256 i + 255 of row r and adds its sum to the row's\n"
            "   accumulator (rows on x, whose limit is 2^31 - 1; the column chunks, at most 33, on y) */\n"
            "__global__ void sum_part(int rows, int cols, const unsigned short* __restrict__ X, float* acc1) {\n"
            "    __shared__ float red[256];\n"
            "    int r = blockIdx.x, c = blockIdx.y * 256 + threadIdx.x;\n"
            "    float v = 0.0f;\n"
            f"    if (c < cols) {{ float x = bf16_to_float(X[(size_t)r * cols + c]); v = {s.p1}; }}\n"
            "    v = block_sum(v, red);\n"
            "    if (threadIdx.x == 0) atomicAdd(&acc1[r], v);\n}\n\n" + pass2
            + "__global__ void finish_rows(int rows, int cols, const float* acc1, const float* acc2, "
            + s.out_params + ") {\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= rows) return;\n"
            f"    write_out(r, cols, acc1[r], acc2[r], {', '.join(s.outs)});\n}}\n\n"
            + s.setup()
            + "    float *acc1, *acc2;\n"
            "    cudaMalloc(&acc1, ob); cudaMalloc(&acc2, ob);\n"
            "    cudaMemset(acc1, 0, ob); cudaMemset(acc2, 0, ob);\n"
            "    dim3 grid((unsigned)rows, (unsigned)((cols + 255) / 256));\n"
            "    sum_part<<<grid, 256>>>(rows, cols, d_x, acc1);\n" + launch2
            + f"    finish_rows<<<(rows + 255) / 256, 256>>>(rows, cols, acc1, acc2, {s.out_args});\n"
            "    cudaFree(acc1); cudaFree(acc2);\n" + s.tail())


def _host_finish(s: Spec) -> str:
    """A warp per row sums on the GPU and the raw sums (p1, and p2 in the two-pass modes) come back in the output
    arrays; the host turns them into the statistics, the reference's last step. (This variant used to decode the
    whole matrix to float on the host and copy twice the bytes: its kernel ran for 30 to 60 us of a 250 to 300 ms
    call, at the harness's floor for GPU work on the H200.)"""
    p2 = ("    float m = p1 / (float)n, p2 = 0.0f;\n"
          "    for (int c = lane; c < n; c += 32) { float d = bf16_to_float(xr[c]) - m; p2 += d * d; }\n"
          "    p2 = warp_sum(p2);\n" if s.two_pass else "")
    o1 = s.outs[0]
    o2 = s.outs[1] if s.two_pass else None
    store = f"        {o1}[r] = p1;\n" + (f"        {o2}[r] = p2;\n" if o2 else "")
    load = (f"        float p1 = {o1}[r]" + (f", p2 = {o2}[r];\n" if o2 else ", p2 = 0.0f;\n        (void)p2;\n"))
    body = "".join("    " + line + "\n" for line in s.out_body().strip("\n").split("\n"))
    return (s.head()
            + f"__global__ void sums_warp(int rows, int cols, const unsigned short* __restrict__ X, "
            f"{s.out_params}) {{\n" + WARP_ID
            + "    float p1 = 0.0f;\n"
            f"    for (int c = lane; c < n; c += 32) {{ float x = bf16_to_float(xr[c]); p1 += {s.p1}; }}\n"
            "    p1 = warp_sum(p1);\n" + p2
            + "    if (lane == 0) {\n" + store + "    }\n}\n\n"
            + s.setup()
            + f"    sums_warp<<<(unsigned)(((size_t)rows * 32 + 255) / 256), 256>>>({s.ka});\n"
            "    /* the raw sums come back in the output arrays; the host finishes each row */\n"
            + "".join(f"    cudaMemcpy({o}, d_{o}, ob, cudaMemcpyDeviceToHost);\n" for o in s.outs)
            + "    int n = cols;\n"
            "    for (int r = 0; r < rows; ++r) {\n" + load + body + "    }\n"
            "    cudaFree(d_x);\n" + "".join(f"    cudaFree(d_{o});\n" for o in s.outs) + "}\n")


def _reference(s: Spec) -> str:
    if s.two_pass:
        core = ("        float p1 = 0.0f;\n"
                "        for (int c = 0; c < n; ++c) p1 += bf16_to_float(xr[c]);\n"
                "        float m = p1 / (float)n, p2 = 0.0f;\n"
                "        for (int c = 0; c < n; ++c) { float d = bf16_to_float(xr[c]) - m; p2 += d * d; }\n")
    else:
        core = ("        float p1 = 0.0f, p2 = 0.0f;\n"
                "        for (int c = 0; c < n; ++c) { float x = bf16_to_float(xr[c]); p1 += x * x; }\n"
                "        (void)p2;\n")
    body = "".join("    " + line + "\n" for line in s.out_body().strip("\n").split("\n"))
    return ("#include <math.h>\n#include <stddef.h>\n#include <string.h>\n\n" + s.defines() + "\n" + C_BF16
            + f"void {s.fn}(int rows, int cols, const unsigned short* X, {s.out_params}) {{\n"
            "    int n = cols;\n"
            "    for (int r = 0; r < rows; ++r) {\n"
            "        const unsigned short* xr = X + (size_t)r * cols;\n" + core + body + "    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    mode = MODES[index % len(MODES)]
    ddof = int(index % 3 == 2) if mode == "meanvar" else 0
    eps = EPSS[int(rng.integers(len(EPSS)))]
    cols = COLS[(index * 7 + int(rng.integers(3))) % len(COLS)]
    if index % 4 == 3:
        cols += int(rng.integers(1, 8))  # not a multiple of 8
    key = RANGES[(index // 2 + int(rng.integers(2))) % len(RANGES)]
    s = Spec(mode, ddof, eps, "bf16_layer_stats")
    reads = (2.0e7 if s.two_pass else 4.0e7) * (0.8 + 0.5 * float(rng.random()))  # one pass or two
    rows = max(64, int(reads / cols))
    lo, hi, text = BF16_RANGES[key]
    args = [{"name": "rows", "role": "scalar", "ctype": "int"},
            {"name": "cols", "role": "scalar", "ctype": "int"},
            {"name": "X", "role": "in", "ctype": "unsigned short", "length": "rows * cols",
             "dist": {"kind": "randint", "low": lo, "high": hi}}]
    args += [{"name": o, "role": "out", "ctype": "float", "length": "rows"} for o in s.outs]
    what = {"meanvar": f"mean[r] = p1 / n and var[r] = p2 / (n - {ddof})",
            "mean_rstd": f"mean[r] = p1 / n and rstd[r] = 1 / sqrtf(p2 / n + {flit(eps)})",
            "rms": f"rms[r] = sqrtf(q / n + {flit(eps)})",
            "rrms": f"rrms[r] = 1 / sqrtf(q / n + {flit(eps)})"}[mode]
    sums = ("p1 = sum of x over the row, then p2 = sum of (x - p1 / n)^2 (two passes)" if s.two_pass
            else "q = sum of x * x over the row")
    task = {
        "function_name": s.fn,
        "description": (f"Per-row statistics of a bf16 matrix: X is rows x cols row-major, each entry a bf16 bit "
                        f"pattern (unsigned short; its float is the pattern shifted left 16 bits; {text}). For each "
                        f"row, with n = cols and all arithmetic in float, sums in column order: {sums}; {what}."),
        "returns": "void",
        "args": args,
        "size_configs": [{"rows": 37, "cols": 100}, {"rows": 64, "cols": 256}, {"rows": 5, "cols": 13},
                         {"rows": 300, "cols": 777},
                         {"rows": 3 + int(rng.integers(1, 40)), "cols": 8 * int(rng.integers(300, 1000))},
                         {"rows": rows, "cols": cols}],
        "tolerance": {"rtol": 2e-4, "atol": 1e-7},
        "reference_c": _reference(s),
        "tags": ["reduction", "bf16", "mixed-precision", "normalization", "memory-bound", "float"],
    }
    variants = [
        Variant("thread_per_row", ("thread_per_row", "naive", "strided", "mixed_precision", "block_128",
                                   "pageable"), _thread_per_row(s)),
        Variant("warp_two_pass" if s.two_pass else "warp_per_row",
                ("block_per_row", "warp_shuffle", "coalesced", "mixed_precision", "block_256", "pageable"),
                _warp_two_pass(s)),
        Variant("warp_uint4_loads", ("block_per_row", "warp_shuffle", "vectorized", "readonly_cache", "unrolled",
                                     "mixed_precision", "block_256", "pageable"), _warp_uint4(s)),
        Variant("block_row_in_shared" if s.two_pass else "block_tree",
                ("block_per_row", "tree_reduction", "mixed_precision", "block_256", "pageable")
                + (("shared_tiling",) if s.two_pass else ()), _block_shared_row(s)),
        Variant("warp_double_one_pass", ("block_per_row", "warp_shuffle", "fused", "mixed_precision", "block_256",
                                         "pageable"), _warp_double(s)),
        Variant("grid2d_atomics", ("atomics", "multi_pass", "two_level", "tree_reduction", "mixed_precision",
                                   "block_256", "pageable"), _atomics(s)),
        Variant("host_finish", ("host_compute", "block_per_row", "warp_shuffle", "coalesced", "mixed_precision",
                                "block_256", "pageable"), _host_finish(s)),
    ]
    if s.two_pass:
        variants.append(Variant("warp_welford", ("block_per_row", "warp_shuffle", "fused", "mixed_precision",
                                                 "block_256", "pageable"), _warp_welford(s)))
    else:
        variants.append(Variant("block64_pair", ("block_per_row", "warp_shuffle", "two_level", "mixed_precision",
                                                 "block_64", "pageable"), _block64(s)))
    params = {"mode": mode, "ddof": ddof, "eps": eps, "cols": cols, "rows": rows, "range": key}
    return GeneratedTask(task, tuple(variants), params)


FAMILY = Family(
    name="bf16_layer_stats",
    description="per-row mean/variance, rstd or RMS of bf16-stored rows, float outputs",
    generate=generate,
    n_tasks=50,
    tags=("mixed-precision", "reduction", "memory-bound"),
)
