"""Batch normalization, training-mode forward pass, over an N x C x HW tensor (float or double).

Per channel c, over the N * HW values of the batch and spatial dimensions: mu = mean, v = biased variance (two
passes in double in the reference), inv = 1 / sqrt(v + EPS), then y = ((double)x - mu) * inv * gamma[c] + beta[c]
rounded to the element type; mean[c] and var[c] are written too. Tasks with running statistics also update
running_mean = (1 - MOM) * running_mean + MOM * mu and running_var = (1 - MOM) * running_var + MOM * v * cnt /
(cnt - 1) (v itself when cnt = 1), in double.

What varies with the index: the element type, the layout (NCHW: x[(n*C + c)*HW + p], or channels-last NHWC:
x[(n*HW + p)*C + c]; HW = 1 is a plain N x C batch), EPS, the running statistics and their momentum, the shape
(few channels with large images to thousands of channels of a flat batch) and the input offset and spread. The
variants reduce in other orders (trees, Welford merges, sum and sum of squares, atomics), so the tolerance allows
reassociation: rtol 1e-4 / atol 1e-5 for float, 1e-9 / 1e-11 for double.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# (C, HW) at the timing size; N follows from the element budget
SHAPES = [(64, 784), (128, 196), (256, 49), (512, 1), (1024, 1), (96, 1024), (2048, 1), (160, 100), (64, 1024),
          (384, 16), (4096, 1), (192, 225)]
EPSS = ["1e-5", "1e-3", "1e-2", "1e-5"]
MOMS = ["0.1", "0.01", "0.05"]


class Spec:
    def __init__(self, t: str, nchw: bool, eps: str, running: bool, mom: str, fn: str):
        self.t, self.nchw, self.eps, self.running, self.mom, self.fn = t, nchw, eps, running, mom, fn

    @property
    def args(self) -> str:
        t = self.t
        return (f"int N, int C, int HW, const {t}* x, const {t}* gamma, const {t}* beta, {t}* y, {t}* mean, "
                f"{t}* var" + (f", {t}* running_mean, {t}* running_var" if self.running else ""))

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}({self.args})'

    def head(self) -> str:
        run = ("    double uv = cnt > 1.0 ? v * cnt / (cnt - 1.0) : v;\n"
               "    rm[c] = (real_t)((1.0 - MOM) * (double)rm[c] + MOM * mu);\n"
               "    rv[c] = (real_t)((1.0 - MOM) * (double)rv[c] + MOM * uv);\n" if self.running else "")
        idx = ("    return ((size_t)(q / (unsigned)HW) * C + c) * HW + q % (unsigned)HW;\n" if self.nchw
               else "    return (size_t)q * C + c;\n")
        chan = ("    return (int)((i / (size_t)HW) % (size_t)C);\n" if self.nchw
                else "    return (int)(i % (size_t)C);\n")
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n\n"
                f"typedef {self.t} real_t;\n#define EPS {self.eps}\n#define MOM {self.mom}\n\n"
                "/* element q (0 <= q < N*HW, batch-major) of channel c */\n"
                "__host__ __device__ __forceinline__ size_t bn_idx(int c, unsigned q, int C, int HW) {\n"
                + idx + "}\n\n"
                "/* the channel of flat element i */\n"
                "__host__ __device__ __forceinline__ int bn_chan(size_t i, int C, int HW) {\n" + chan + "}\n\n"
                "__host__ __device__ __forceinline__ void bn_finish(int c, double mu, double v, double cnt,"
                " real_t* mean, real_t* var, real_t* rm, real_t* rv) {\n"
                "    mean[c] = (real_t)mu; var[c] = (real_t)v;\n" + run + "}\n\n"
                "__device__ __forceinline__ double warp_sum(double v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")

    KP = ("int N, int C, int HW, const real_t* __restrict__ x, const real_t* __restrict__ g,"
          " const real_t* __restrict__ b, real_t* y, real_t* mean, real_t* var, real_t* rm, real_t* rv")
    KA = "N, C, HW, d_x, d_g, d_b, d_y, d_mean, d_var, d_rm, d_rv"

    def setup(self, pinned: bool = False) -> str:
        run = ("    cudaMalloc(&d_rm, cb); cudaMalloc(&d_rv, cb);\n"
               "    cudaMemcpy(d_rm, running_mean, cb, cudaMemcpyHostToDevice);\n"
               "    cudaMemcpy(d_rv, running_var, cb, cudaMemcpyHostToDevice);\n" if self.running else "")
        copy = ("    cudaHostRegister((void*)x, n * sizeof(real_t), cudaHostRegisterDefault);\n"
                "    cudaHostRegister((void*)y, n * sizeof(real_t), cudaHostRegisterDefault);\n" if pinned else "")
        return (f"{self.sig} {{\n"
                "    if (N <= 0 || C <= 0 || HW <= 0) return;\n"
                "    size_t n = (size_t)N * C * HW, cb = (size_t)C * sizeof(real_t);\n"
                "    unsigned nq = (unsigned)((size_t)N * HW);\n"
                "    real_t *d_x, *d_g, *d_b, *d_y, *d_mean, *d_var, *d_rm = 0, *d_rv = 0;\n"
                "    cudaMalloc(&d_x, n * sizeof(real_t)); cudaMalloc(&d_y, n * sizeof(real_t));\n"
                "    cudaMalloc(&d_g, cb); cudaMalloc(&d_b, cb); cudaMalloc(&d_mean, cb); cudaMalloc(&d_var, cb);\n"
                + copy
                + "    cudaMemcpy(d_x, x, n * sizeof(real_t), cudaMemcpyHostToDevice);\n"
                "    cudaMemcpy(d_g, gamma, cb, cudaMemcpyHostToDevice);\n"
                "    cudaMemcpy(d_b, beta, cb, cudaMemcpyHostToDevice);\n" + run)

    def tail(self, pinned: bool = False) -> str:
        run = ("    cudaMemcpy(running_mean, d_rm, cb, cudaMemcpyDeviceToHost);\n"
               "    cudaMemcpy(running_var, d_rv, cb, cudaMemcpyDeviceToHost);\n" if self.running else "")
        unreg = "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y);\n" if pinned else ""
        return ("    cudaMemcpy(y, d_y, n * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
                "    cudaMemcpy(mean, d_mean, cb, cudaMemcpyDeviceToHost);\n"
                "    cudaMemcpy(var, d_var, cb, cudaMemcpyDeviceToHost);\n" + run + unreg
                + "    cudaFree(d_x); cudaFree(d_y); cudaFree(d_g); cudaFree(d_b); cudaFree(d_mean); cudaFree(d_var);\n"
                "    if (d_rm) cudaFree(d_rm);\n    if (d_rv) cudaFree(d_rv);\n}\n")


def _thread_per_channel(s: Spec) -> str:
    return (s.head()
            + f"__global__ void bn_thread({Spec.KP}) {{\n"
            "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (c >= C) return;\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW;\n"
            "    double sm = 0.0;\n"
            "    for (unsigned q = 0; q < nq; ++q) sm += (double)x[bn_idx(c, q, C, HW)];\n"
            "    double mu = sm / (double)nq, ss = 0.0;\n"
            "    for (unsigned q = 0; q < nq; ++q) { double d = (double)x[bn_idx(c, q, C, HW)] - mu; ss += d * d; }\n"
            "    double v = ss / (double)nq, inv = 1.0 / sqrt(v + EPS);\n"
            "    double gc = (double)g[c], bc = (double)b[c];\n"
            "    for (unsigned q = 0; q < nq; ++q) {\n"
            "        size_t i = bn_idx(c, q, C, HW);\n"
            "        y[i] = (real_t)(((double)x[i] - mu) * inv * gc + bc);\n"
            "    }\n"
            "    bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n}\n\n"
            + s.setup()
            + f"    bn_thread<<<(C + 63) / 64, 64>>>({Spec.KA});\n" + s.tail())


BLOCK_SUM256 = ("__device__ double block_sum256(double v, double* sh) {\n"
                "    int tid = threadIdx.x;\n"
                "    sh[tid] = v;\n"
                "    __syncthreads();\n"
                "    for (int h = 128; h > 0; h >>= 1) {\n"
                "        if (tid < h) sh[tid] += sh[tid + h];\n"
                "        __syncthreads();\n"
                "    }\n"
                "    double r = sh[0];\n"
                "    __syncthreads();  // sh is reused by the next call\n"
                "    return r;\n}\n\n")


def _block_two_pass(s: Spec) -> str:
    return (s.head() + BLOCK_SUM256
            + f"__global__ void bn_block({Spec.KP}) {{\n"
            "    __shared__ double sh[256];\n"
            "    int c = blockIdx.x, tid = threadIdx.x;\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW;\n"
            "    double a = 0.0;\n"
            "    for (unsigned q = tid; q < nq; q += 256) a += (double)x[bn_idx(c, q, C, HW)];\n"
            "    double mu = block_sum256(a, sh) / (double)nq;\n"
            "    a = 0.0;\n"
            "    for (unsigned q = tid; q < nq; q += 256) { double d = (double)x[bn_idx(c, q, C, HW)] - mu;"
            " a += d * d; }\n"
            "    double v = block_sum256(a, sh) / (double)nq, inv = 1.0 / sqrt(v + EPS);\n"
            "    double gc = (double)g[c], bc = (double)b[c];\n"
            "    for (unsigned q = tid; q < nq; q += 256) {\n"
            "        size_t i = bn_idx(c, q, C, HW);\n"
            "        y[i] = (real_t)(((double)x[i] - mu) * inv * gc + bc);\n"
            "    }\n"
            "    if (tid == 0) bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n}\n\n"
            + s.setup()
            + f"    bn_block<<<C, 256>>>({Spec.KA});\n" + s.tail())


def _welford_warp(s: Spec) -> str:
    return (s.head()
            + "/* a warp per channel: per-lane Welford, merged across lanes (Chan et al.), one pass for the stats */\n"
            f"__global__ void bn_welford({Spec.KP}) {{\n"
            "    int c = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (c >= C) return;  // whole warps leave together\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW;\n"
            "    double cn = 0.0, mu = 0.0, m2 = 0.0;\n"
            "    for (unsigned q = lane; q < nq; q += 32) {\n"
            "        double v = (double)x[bn_idx(c, q, C, HW)];\n"
            "        cn += 1.0;\n"
            "        double d = v - mu;\n"
            "        mu += d / cn;\n"
            "        m2 += d * (v - mu);\n"
            "    }\n"
            "    for (int o = 16; o > 0; o >>= 1) {\n"
            "        double cn2 = __shfl_xor_sync(0xffffffffu, cn, o);\n"
            "        double mu2 = __shfl_xor_sync(0xffffffffu, mu, o);\n"
            "        double m22 = __shfl_xor_sync(0xffffffffu, m2, o);\n"
            "        double tot = cn + cn2;\n"
            "        if (tot > 0.0) {\n"
            "            double d = mu2 - mu, f = cn2 / tot;\n"
            "            m2 = m2 + m22 + d * d * cn * f;\n"
            "            mu = mu + d * f;\n"
            "            cn = tot;\n"
            "        }\n"
            "    }\n"
            "    mu = __shfl_sync(0xffffffffu, mu, 0);  // every lane uses lane 0's merge\n"
            "    m2 = __shfl_sync(0xffffffffu, m2, 0);\n"
            "    double v = m2 / (double)nq, inv = 1.0 / sqrt(v + EPS);\n"
            "    double gc = (double)g[c], bc = (double)b[c];\n"
            "    for (unsigned q = lane; q < nq; q += 32) {\n"
            "        size_t i = bn_idx(c, q, C, HW);\n"
            "        y[i] = (real_t)(((double)x[i] - mu) * inv * gc + bc);\n"
            "    }\n"
            "    if (lane == 0) bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n}\n\n"
            + s.setup()
            + f"    bn_welford<<<(unsigned)(((size_t)C * 32 + 127) / 128), 128>>>({Spec.KA});\n" + s.tail())


def _atomic_partials(s: Spec) -> str:
    return (s.head()
            + "#define CHUNK 8192\n\n"
            "/* block (c, chunk): the chunk's sum and sum of squares of channel c, added atomically */\n"
            "__global__ void bn_partial(int N, int C, int HW, const real_t* __restrict__ x, double* acc) {\n"
            "    __shared__ double wa[8], wb[8];\n"
            "    int c = blockIdx.x;\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW, q0 = blockIdx.y * CHUNK;\n"
            "    unsigned q1 = q0 + CHUNK < nq ? q0 + CHUNK : nq;\n"
            "    double a = 0.0, b2 = 0.0;\n"
            "    for (unsigned q = q0 + threadIdx.x; q < q1; q += 256) {\n"
            "        double v = (double)x[bn_idx(c, q, C, HW)];\n"
            "        a += v; b2 += v * v;\n"
            "    }\n"
            "    a = warp_sum(a); b2 = warp_sum(b2);\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) { wa[w] = a; wb[w] = b2; }\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        a = lane < 8 ? wa[lane] : 0.0; b2 = lane < 8 ? wb[lane] : 0.0;\n"
            "        a = warp_sum(a); b2 = warp_sum(b2);\n"
            "        if (lane == 0) { atomicAdd(acc + 2 * (size_t)c, a); atomicAdd(acc + 2 * (size_t)c + 1, b2); }\n"
            "    }\n}\n\n"
            "__global__ void bn_stats(int C, unsigned nq, const double* acc, double* mu_inv, real_t* mean,"
            " real_t* var, real_t* rm, real_t* rv) {\n"
            "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (c >= C) return;\n"
            "    double mu = acc[2 * (size_t)c] / (double)nq;\n"
            "    double v = acc[2 * (size_t)c + 1] / (double)nq - mu * mu;\n"
            "    if (v < 0.0) v = 0.0;\n"
            "    mu_inv[2 * (size_t)c] = mu; mu_inv[2 * (size_t)c + 1] = 1.0 / sqrt(v + EPS);\n"
            "    bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n}\n\n"
            "__global__ void bn_normalize(size_t n, int C, int HW, const real_t* __restrict__ x,"
            " const double* __restrict__ mu_inv, const real_t* __restrict__ g, const real_t* __restrict__ b,"
            " real_t* y) {\n"
            "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
            " i += (size_t)gridDim.x * blockDim.x) {\n"
            "        int c = bn_chan(i, C, HW);\n"
            "        y[i] = (real_t)(((double)x[i] - mu_inv[2 * c]) * mu_inv[2 * c + 1] * (double)g[c]"
            " + (double)b[c]);\n"
            "    }\n}\n\n"
            + s.setup()
            + "    double *d_acc, *d_mi;\n"
            "    cudaMalloc(&d_acc, 2 * (size_t)C * sizeof(double));\n"
            "    cudaMalloc(&d_mi, 2 * (size_t)C * sizeof(double));\n"
            "    cudaMemset(d_acc, 0, 2 * (size_t)C * sizeof(double));\n"
            "    bn_partial<<<dim3(C, (nq + CHUNK - 1) / CHUNK), 256>>>(N, C, HW, d_x, d_acc);\n"
            "    bn_stats<<<(C + 127) / 128, 128>>>(C, nq, d_acc, d_mi, d_mean, d_var, d_rm, d_rv);\n"
            "    bn_normalize<<<1024, 256>>>(n, C, HW, d_x, d_mi, d_g, d_b, d_y);\n"
            "    cudaFree(d_acc); cudaFree(d_mi);\n" + s.tail())


def _channel_tile(s: Spec) -> str:
    return (s.head()
            + "/* 32 channels per block on threadIdx.x, 16 row walkers on threadIdx.y (channels-last friendly) */\n"
            f"__global__ void bn_tile({Spec.KP}) {{\n"
            "    __shared__ double red[16][33];\n"
            "    int tx = threadIdx.x, ty = threadIdx.y;\n"
            "    int c = blockIdx.x * 32 + tx;\n"
            "    bool ok = c < C;\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW;\n"
            "    double a = 0.0;\n"
            "    if (ok) for (unsigned q = ty; q < nq; q += 16) a += (double)x[bn_idx(c, q, C, HW)];\n"
            "    red[ty][tx] = a;\n"
            "    __syncthreads();\n"
            "    if (ty == 0) { double t = 0.0; for (int k = 0; k < 16; ++k) t += red[k][tx]; red[0][tx] = t; }\n"
            "    __syncthreads();\n"
            "    double mu = red[0][tx] / (double)nq;\n"
            "    __syncthreads();  // red is written again below\n"
            "    a = 0.0;\n"
            "    if (ok) for (unsigned q = ty; q < nq; q += 16) { double d = (double)x[bn_idx(c, q, C, HW)] - mu;"
            " a += d * d; }\n"
            "    red[ty][tx] = a;\n"
            "    __syncthreads();\n"
            "    if (ty == 0) { double t = 0.0; for (int k = 0; k < 16; ++k) t += red[k][tx]; red[0][tx] = t; }\n"
            "    __syncthreads();\n"
            "    double v = red[0][tx] / (double)nq, inv = 1.0 / sqrt(v + EPS);\n"
            "    if (!ok) return;\n"
            "    double gc = (double)g[c], bc = (double)b[c];\n"
            "    for (unsigned q = ty; q < nq; q += 16) {\n"
            "        size_t i = bn_idx(c, q, C, HW);\n"
            "        y[i] = (real_t)(((double)x[i] - mu) * inv * gc + bc);\n"
            "    }\n"
            "    if (ty == 0) bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n}\n\n"
            + s.setup()
            + f"    bn_tile<<<(C + 31) / 32, dim3(32, 16)>>>({Spec.KA});\n" + s.tail())


def _block_sumsq_pinned(s: Spec) -> str:
    return (s.head()
            + "/* a 512-thread block per channel: sum and sum of squares in one pass, then y = x * scale + shift */\n"
            f"__global__ void bn_sumsq({Spec.KP}) {{\n"
            "    __shared__ double wa[16], wb[16];\n"
            "    __shared__ double st[2];\n"
            "    int c = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
            "    unsigned nq = (unsigned)N * (unsigned)HW;\n"
            "    double a = 0.0, b2 = 0.0;\n"
            "    for (unsigned q = tid; q < nq; q += 512) { double v = (double)x[bn_idx(c, q, C, HW)];"
            " a += v; b2 += v * v; }\n"
            "    a = warp_sum(a); b2 = warp_sum(b2);\n"
            "    if (lane == 0) { wa[w] = a; wb[w] = b2; }\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        a = lane < 16 ? wa[lane] : 0.0; b2 = lane < 16 ? wb[lane] : 0.0;\n"
            "        a = warp_sum(a); b2 = warp_sum(b2);\n"
            "        if (lane == 0) {\n"
            "            double mu = a / (double)nq, v = b2 / (double)nq - mu * mu;\n"
            "            if (v < 0.0) v = 0.0;\n"
            "            st[0] = mu; st[1] = v;\n"
            "            bn_finish(c, mu, v, (double)nq, mean, var, rm, rv);\n"
            "        }\n"
            "    }\n"
            "    __syncthreads();\n"
            "    double mu = st[0], inv = 1.0 / sqrt(st[1] + EPS);\n"
            "    /* scale and shift stay in double: the shift (beta - mu * scale) cancels against x * scale, and\n"
            "       rounded to the element type they would be off by |mu| * scale ulps, beyond the tolerance when\n"
            "       the variance is small against mu^2 (a channel of one value: scale = gamma / sqrt(EPS)) */\n"
            "    double sc = inv * (double)g[c];\n"
            "    double sf = (double)b[c] - mu * sc;\n"
            "    for (unsigned q = tid; q < nq; q += 512) {\n"
            "        size_t i = bn_idx(c, q, C, HW);\n"
            "        y[i] = (real_t)((double)x[i] * sc + sf);\n"
            "    }\n}\n\n"
            + s.setup(pinned=True)
            + f"    bn_sumsq<<<C, 512>>>({Spec.KA});\n" + s.tail(pinned=True))


def _host_stats(s: Spec) -> str:
    walk = ("    for (int nn = 0; nn < N; ++nn) for (int c = 0; c < C; ++c) for (int p = 0; p < HW; ++p) {\n"
            "        size_t i = ((size_t)nn * C + c) * HW + p;\n" if s.nchw else
            "    for (size_t qq = 0; qq < nq; ++qq) for (int c = 0; c < C; ++c) {\n"
            "        size_t i = qq * C + c;\n")
    run = "running_mean, running_var" if s.running else "(real_t*)0, (real_t*)0"
    return (s.head()
            + "/* the host's scale and shift per channel, in double (the shift cancels against x * scale) */\n"
            "__global__ void bn_apply(size_t n, int C, int HW, const real_t* __restrict__ x,"
            " const double* __restrict__ sc, const double* __restrict__ sf, real_t* y) {\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    int c = bn_chan(i, C, HW);\n"
            "    y[i] = (real_t)((double)x[i] * sc[c] + sf[c]);\n}\n\n"
            + f"{s.sig} {{\n"
            "    if (N <= 0 || C <= 0 || HW <= 0) return;\n"
            "    size_t n = (size_t)N * C * HW, nq = (size_t)N * HW, sb = 2 * (size_t)C * sizeof(double);\n"
            "    double* st = (double*)calloc(2 * (size_t)C, sizeof(double));\n"
            "    double* hs = (double*)malloc(sb);\n"
            + walk + "        st[c] += (double)x[i];\n    }\n"
            "    for (int c = 0; c < C; ++c) st[c] /= (double)nq;\n"
            + walk + "        double d = (double)x[i] - st[c]; st[C + c] += d * d;\n    }\n"
            "    for (int c = 0; c < C; ++c) {\n"
            "        double mu = st[c], v = st[C + c] / (double)nq, inv = 1.0 / sqrt(v + EPS);\n"
            "        hs[c] = inv * (double)gamma[c];\n"
            "        hs[C + c] = (double)beta[c] - mu * hs[c];\n"
            f"        bn_finish(c, mu, v, (double)nq, mean, var, {run});\n"
            "    }\n"
            "    real_t *d_x, *d_y;\n"
            "    double* d_s;\n"
            "    cudaMalloc(&d_x, n * sizeof(real_t)); cudaMalloc(&d_y, n * sizeof(real_t));\n"
            "    cudaMalloc(&d_s, sb);\n"
            "    cudaMemcpy(d_x, x, n * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(d_s, hs, sb, cudaMemcpyHostToDevice);\n"
            "    bn_apply<<<(unsigned)((n + 255) / 256), 256>>>(n, C, HW, d_x, d_s, d_s + C, d_y);\n"
            "    cudaMemcpy(y, d_y, n * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_x); cudaFree(d_y); cudaFree(d_s); free(st); free(hs);\n}\n")


def _reference(s: Spec) -> str:
    t = s.t
    walk = ("    for (int nn = 0; nn < N; ++nn) for (int c = 0; c < C; ++c) for (int p = 0; p < HW; ++p) {\n"
            "        size_t i = ((size_t)nn * C + c) * HW + p;\n" if s.nchw else
            "    for (size_t q = 0; q < cnt; ++q) for (int c = 0; c < C; ++c) {\n"
            "        size_t i = q * C + c;\n")
    run = ("        double uv = cnt > 1 ? v * (double)cnt / (double)(cnt - 1) : v;\n"
           f"        running_mean[c] = ({t})((1.0 - MOM) * (double)running_mean[c] + MOM * mu);\n"
           f"        running_var[c] = ({t})((1.0 - MOM) * (double)running_var[c] + MOM * uv);\n"
           if s.running else "")
    return ("#include <math.h>\n#include <stdlib.h>\n\n"
            f"#define EPS {s.eps}\n#define MOM {s.mom}\n\n"
            f"void {s.fn}({s.args}) {{\n"
            "    if (N <= 0 || C <= 0 || HW <= 0) return;\n"
            "    size_t cnt = (size_t)N * HW;\n"
            "    double* sm = (double*)calloc((size_t)C, sizeof(double));\n"
            "    double* sq = (double*)calloc((size_t)C, sizeof(double));\n"
            "    double* inv = (double*)malloc((size_t)C * sizeof(double));\n"
            + walk + "        sm[c] += (double)x[i];\n    }\n"
            "    for (int c = 0; c < C; ++c) sm[c] /= (double)cnt;\n"
            + walk + "        double d = (double)x[i] - sm[c]; sq[c] += d * d;\n    }\n"
            "    for (int c = 0; c < C; ++c) {\n"
            "        double mu = sm[c], v = sq[c] / (double)cnt;\n"
            "        inv[c] = 1.0 / sqrt(v + EPS);\n"
            f"        mean[c] = ({t})mu; var[c] = ({t})v;\n" + run
            + "    }\n"
            + walk + f"        y[i] = ({t})(((double)x[i] - sm[c]) * inv[c] * (double)gamma[c] + (double)beta[c]);\n"
            "    }\n"
            "    free(sm); free(sq); free(inv);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    nchw = (index // 2) % 2 == 0
    eps = EPSS[(index + int(rng.integers(2))) % len(EPSS)]
    running = index % 3 != 2
    mom = MOMS[int(rng.integers(len(MOMS)))]
    c_t, hw_t = SHAPES[(index * 7 + index // 12) % len(SHAPES)]
    c_t += 0 if index < 12 else int(rng.integers(0, 5))
    total = (8_000_000 if t == "float" else 6_000_000) + int(rng.integers(0, 500_000))
    n_t = max(2, total // (c_t * hw_t))
    fn = "batchnorm_train_" + ("nchw_" if nchw else "nhwc_") + t
    s = Spec(t, nchw, eps, running, mom, fn)
    off = [0.0, 0.5, -1.0, 2.0][int(rng.integers(4))]
    half = [1.0, 0.5, 2.0][int(rng.integers(3))]
    layout = ("NCHW: x[(n*C + c)*HW + p]" if nchw else "channels-last NHWC: x[(n*HW + p)*C + c]")
    args = [
        {"name": "N", "role": "scalar", "ctype": "int"},
        {"name": "C", "role": "scalar", "ctype": "int"},
        {"name": "HW", "role": "scalar", "ctype": "int"},
        {"name": "x", "role": "in", "ctype": t, "length": "N * C * HW",
         "dist": {"kind": "uniform", "low": off - half, "high": off + half}},
        {"name": "gamma", "role": "in", "ctype": t, "length": "C",
         "dist": {"kind": "uniform", "low": 0.5, "high": 1.5}},
        {"name": "beta", "role": "in", "ctype": t, "length": "C",
         "dist": {"kind": "uniform", "low": -0.5, "high": 0.5}},
        {"name": "y", "role": "out", "ctype": t, "length": "N * C * HW"},
        {"name": "mean", "role": "out", "ctype": t, "length": "C"},
        {"name": "var", "role": "out", "ctype": t, "length": "C"},
    ]
    if running:
        args += [{"name": "running_mean", "role": "inout", "ctype": t, "length": "C",
                  "dist": {"kind": "uniform", "low": -0.1, "high": 0.1}},
                 {"name": "running_var", "role": "inout", "ctype": t, "length": "C",
                  "dist": {"kind": "uniform", "low": 0.5, "high": 1.5}}]
    task = {
        "function_name": fn,
        "description": (f"Training-mode batch normalization of a {t} tensor with N, C, HW >= 1, layout {layout}. "
                        "Per channel c over its cnt = N*HW values (in double): mu = mean, v = biased variance "
                        f"(sum of (x - mu)^2 / cnt), inv = 1 / sqrt(v + {eps}); "
                        f"y = ({t})(((double)x - mu) * inv * gamma[c] + beta[c]); mean[c] = mu, var[c] = v"
                        + (f"; running_mean[c] = (1 - {mom}) * running_mean[c] + {mom} * mu, running_var[c] = "
                           f"(1 - {mom}) * running_var[c] + {mom} * v * cnt / (cnt - 1) (v when cnt = 1), in double"
                           if running else "") + "."),
        "returns": "void",
        "args": args,
        "size_configs": [{"N": 3, "C": 5, "HW": 7}, {"N": 17, "C": 33, "HW": 1}, {"N": 2, "C": 70, "HW": 45},
                         {"N": 1, "C": 3, "HW": 1}, {"N": 64, "C": 130, "HW": 9},
                         {"N": 5, "C": 4, "HW": 10_000 + int(rng.integers(1, 99))},
                         {"N": n_t, "C": c_t, "HW": hw_t}],
        "tolerance": {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-11},
        "reference_c": _reference(s),
        "tags": ["reduction", "normalization", "memory-bound", t],
    }
    # consecutive threads on consecutive channels (coalesced in NHWC) or on consecutive values of a channel
    # (coalesced in NCHW)
    by_chan = ("strided",) if nchw else ("coalesced",)
    by_val = ("coalesced",) if nchw else ("strided",)
    variants = (
        Variant("thread_per_channel", ("thread_per_row", "naive", "multi_pass", "block_64", "pageable") + by_chan,
                _thread_per_channel(s)),
        Variant("block_two_pass", ("block_per_row", "tree_reduction", "block_256", "pageable") + by_val,
                _block_two_pass(s)),
        Variant("welford_warp", ("block_per_row", "warp_shuffle", "fused", "block_128", "pageable")
                + by_val, _welford_warp(s)),
        Variant("atomic_partials", ("two_level", "atomics", "multi_pass", "grid_stride", "warp_shuffle",
                                    "block_256", "pageable") + by_val[:1 if nchw else 0], _atomic_partials(s)),
        Variant("channel_tile", ("shared_tiling", "tree_reduction", "block_512", "pageable") + by_chan,
                _channel_tile(s)),
        Variant("block_sumsq_pinned", ("block_per_row", "warp_shuffle", "two_level", "fused", "block_512",
                                       "pinned"), _block_sumsq_pinned(s)),
        Variant("host_stats", ("host_compute", "naive", "coalesced", "block_256", "pageable"), _host_stats(s)),
    )
    params = {"type": t, "layout": "nchw" if nchw else "nhwc", "eps": eps, "running": running,
              "momentum": mom if running else None, "N_time": n_t, "C_time": c_t, "HW_time": hw_t,
              "offset": off, "half_range": half}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="batchnorm_train_forward",
    description="training-mode batch norm (NCHW / NHWC): per-channel mean and biased variance, normalize, affine",
    generate=generate,
    n_tasks=50,
    tags=("reduction", "memory-bound"),
)
