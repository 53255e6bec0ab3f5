"""Per-row softmax cross-entropy loss of an m x C row-major logits matrix (float or double), optionally its mean.

Row r with target class t = target[r]: z_j = logits[r][j] * SCALE, mx = max_j z_j, s = sum_j exp(z_j - mx) (the
exponential in the element type, s accumulated in double by the reference), loss[r] = (log(s) + mx) - z_t. Tasks
with an ignore index skip rows whose target is negative (loss 0, left out of the mean). With a mean output,
mean_loss[0] = (sum of (double)loss over the counted rows) / count, 0 when no row counts.

What varies with the index: the element type, the mean output, the ignore index, the logit scale and range, and
the shape (many rows of tens of classes to a few hundred rows of tens of thousands of classes). The variants sum
in other orders (online max/sum merges, trees, shuffles), so the tolerance allows reassociation: rtol 1e-4 and
atol 1e-4 for float (losses are of order log C), 1e-9 for double.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# (classes at the timing size); the row count follows from the element budget
CLASSES = [10, 24, 100, 257, 1000, 1024, 4096, 3000, 20000, 32000, 640, 50]


class Spec:
    def __init__(self, t: str, mean: bool, ignore: bool, scale: float, fn: str):
        self.t, self.mean, self.ignore, self.scale, self.fn = t, mean, ignore, scale, fn
        f = t == "float"
        self.suf = "f" if f else ""
        self.scale_lit = (repr(float(scale)) + self.suf) if scale != 1.0 else ""
        self.vec = "float4" if f else "double2"
        self.vw = 4 if f else 2

    @property
    def args(self) -> str:
        t = self.t
        return (f"int m, int C, const {t}* logits, const int* target, {t}* loss"
                + (f", {t}* mean_loss" if self.mean else ""))

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}({self.args})'

    def zv(self, v: str) -> str:
        return f"({v}) * SCALE" if self.scale_lit else f"({v})"

    def head(self) -> str:
        f = self.t == "float"
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n\n"
                f"typedef {self.t} real_t;\n"
                + (f"#define SCALE {self.scale_lit}\n" if self.scale_lit else "")
                + f"#define ZV(v) {self.zv('v')}\n"
                f"#define REXP(x) {'expf' if f else 'exp'}(x)\n"
                f"#define RLOG(x) {'logf' if f else 'log'}(x)\n"
                f"#define RMAX(a, b) {'fmaxf' if f else 'fmax'}(a, b)\n"
                f"#define NEG_BIG {'(-1.0e30f)' if f else '(-1.0e300)'}\n"
                f"#define IGNORED(t) {'((t) < 0)' if self.ignore else '(0)'}\n\n"
                "/* merge the running (max, scaled sum) pair (m2, s2) into (m, s) */\n"
                "__device__ __forceinline__ void lse_merge(real_t& m, real_t& s, real_t m2, real_t s2) {\n"
                "    real_t M = RMAX(m, m2);\n"
                "    s = s * REXP(m - M) + s2 * REXP(m2 - M);\n"
                "    m = M;\n}\n\n"
                "__device__ __forceinline__ void lse_push(real_t& m, real_t& s, real_t z) {\n"
                "    if (z > m) { s = s * REXP(m - z) + (real_t)1; m = z; } else s += REXP(z - m);\n}\n\n"
                "__device__ __forceinline__ void warp_lse(real_t& m, real_t& s) {\n"
                "    for (int o = 16; o > 0; o >>= 1) {\n"
                "        real_t m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);\n"
                "        lse_merge(m, s, m2, s2);\n"
                "    }\n}\n\n")

    def setup(self, pinned: bool = False) -> str:
        t = self.t
        copy = (f"    cudaHostRegister((void*)logits, n * sizeof({t}), cudaHostRegisterDefault);\n"
                f"    cudaMemcpy(d_x, logits, n * sizeof({t}), cudaMemcpyHostToDevice);\n"
                "    cudaHostUnregister((void*)logits);\n" if pinned else
                f"    cudaMemcpy(d_x, logits, n * sizeof({t}), cudaMemcpyHostToDevice);\n")
        return (f"{self.sig} {{\n"
                + ("    if (m <= 0 || C <= 0) { if (m <= 0) mean_loss[0] = (real_t)0; return; }\n" if self.mean
                   else "    if (m <= 0 || C <= 0) return;\n")
                + "    size_t n = (size_t)m * C;\n"
                "    real_t *d_x, *d_l; int* d_t; double* d_acc;\n"
                "    cudaMalloc(&d_x, n * sizeof(real_t)); cudaMalloc(&d_l, (size_t)m * sizeof(real_t));\n"
                "    cudaMalloc(&d_t, (size_t)m * sizeof(int)); cudaMalloc(&d_acc, 2 * sizeof(double));\n"
                "    cudaMemset(d_acc, 0, 2 * sizeof(double));\n"
                + copy
                + "    cudaMemcpy(d_t, target, (size_t)m * sizeof(int), cudaMemcpyHostToDevice);\n")

    def tail(self, mean_from_acc: bool) -> str:
        out = "    cudaMemcpy(loss, d_l, (size_t)m * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
        if self.mean and mean_from_acc:
            out += ("    double acc[2];\n"
                    "    cudaMemcpy(acc, d_acc, 2 * sizeof(double), cudaMemcpyDeviceToHost);\n"
                    "    mean_loss[0] = acc[1] > 0.0 ? (real_t)(acc[0] / acc[1]) : (real_t)0;\n")
        return out + "    cudaFree(d_x); cudaFree(d_l); cudaFree(d_t); cudaFree(d_acc);\n}\n"

    def acc_add(self, ind: str, val: str) -> str:
        """The row owner adds its loss and a count of one to the two accumulators (mean tasks only)."""
        if not self.mean:
            return ""
        return f"{ind}atomicAdd(acc, (double){val}); atomicAdd(acc + 1, 1.0);\n"

    @property
    def kargs(self) -> str:
        return "int m, int C, const real_t* __restrict__ x, const int* __restrict__ tg, real_t* loss, double* acc"


MEAN_KERNEL = (
    "/* one block of 1024 threads: the mean of the counted rows' losses, in double */\n"
    "__global__ void ce_mean(int m, const real_t* loss, const int* tg, real_t* out) {\n"
    "    __shared__ double sa[1024], sc[1024];\n"
    "    int tid = threadIdx.x;\n"
    "    double a = 0.0, c = 0.0;\n"
    "    for (int r = tid; r < m; r += 1024) if (!IGNORED(tg[r])) { a += (double)loss[r]; c += 1.0; }\n"
    "    sa[tid] = a; sc[tid] = c;\n"
    "    __syncthreads();\n"
    "    for (int h = 512; h > 0; h >>= 1) {\n"
    "        if (tid < h) { sa[tid] += sa[tid + h]; sc[tid] += sc[tid + h]; }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (tid == 0) out[0] = sc[0] > 0.0 ? (real_t)(sa[0] / sc[0]) : (real_t)0;\n}\n\n")


def _mean_launch(s: Spec) -> str:
    if not s.mean:
        return ""
    return ("    real_t* d_mean; cudaMalloc(&d_mean, sizeof(real_t));\n"
            "    ce_mean<<<1, 1024>>>(m, d_l, d_t, d_mean);\n"
            "    cudaMemcpy(mean_loss, d_mean, sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_mean);\n")


def _thread_per_row(s: Spec) -> str:
    return (s.head()
            + f"__global__ void ce_thread({s.kargs}) {{\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= m) return;\n"
            "    int t = tg[r];\n"
            "    if (IGNORED(t)) { loss[r] = (real_t)0; return; }\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = ZV(row[0]);\n"
            "    for (int j = 1; j < C; ++j) mx = RMAX(mx, ZV(row[j]));\n"
            "    double sm = 0.0;\n"
            "    for (int j = 0; j < C; ++j) sm += (double)REXP(ZV(row[j]) - mx);\n"
            "    real_t l = RLOG((real_t)sm) + mx - ZV(row[t]);\n"
            "    loss[r] = l;\n" + s.acc_add("    ", "l") + "}\n\n"
            + s.setup()
            + "    ce_thread<<<(m + 127) / 128, 128>>>(m, C, d_x, d_t, d_l, d_acc);\n" + s.tail(True))


WARP_ONLINE_BODY = (
    "    const real_t* row = x + (size_t)r * C;\n"
    "    real_t mx = NEG_BIG, sm = (real_t)0;\n"
    "    for (int j = lane; j < C; j += 32) lse_push(mx, sm, ZV(row[j]));\n"
    "    warp_lse(mx, sm);\n")


def _warp_online(s: Spec) -> str:
    return (s.head()
            + f"__global__ void ce_warp({s.kargs}) {{\n"
            "    int r = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;  // whole warps leave together\n"
            "    int t = tg[r];\n"
            "    if (IGNORED(t)) { if (lane == 0) loss[r] = (real_t)0; return; }\n"
            + WARP_ONLINE_BODY
            + "    if (lane == 0) {\n"
            "        real_t l = RLOG(sm) + mx - ZV(row[t]);\n"
            "        loss[r] = l;\n" + s.acc_add("        ", "l") + "    }\n}\n\n"
            + s.setup()
            + "    ce_warp<<<(unsigned)(((size_t)m * 32 + 255) / 256), 256>>>(m, C, d_x, d_t, d_l, d_acc);\n"
            + s.tail(True))


def _block_tree(s: Spec) -> str:
    return (s.head() + MEAN_KERNEL
            + f"__global__ void ce_block({s.kargs}) {{\n"
            "    __shared__ real_t red[256];\n"
            "    int r = blockIdx.x, tid = threadIdx.x;\n"
            "    int t = tg[r];\n"
            "    if (IGNORED(t)) { if (tid == 0) loss[r] = (real_t)0; return; }  // the whole block leaves\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = NEG_BIG;\n"
            "    for (int j = tid; j < C; j += 256) mx = RMAX(mx, ZV(row[j]));\n"
            "    red[tid] = mx;\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] = RMAX(red[tid], red[tid + h]);\n"
            "        __syncthreads();\n"
            "    }\n"
            "    mx = red[0];\n"
            "    __syncthreads();\n"
            "    real_t sm = (real_t)0;\n"
            "    for (int j = tid; j < C; j += 256) sm += REXP(ZV(row[j]) - mx);\n"
            "    red[tid] = sm;\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] += red[tid + h];\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (tid == 0) loss[r] = RLOG(red[0]) + mx - ZV(row[t]);\n}\n\n"
            + s.setup()
            + "    ce_block<<<m, 256>>>(m, C, d_x, d_t, d_l, d_acc);\n" + _mean_launch(s) + s.tail(False))


def _two_kernels(s: Spec) -> str:
    return (s.head() + MEAN_KERNEL
            + "/* pass 1: a warp per row writes the row's max and sum of exponentials */\n"
            "__global__ void ce_stats(int m, int C, const real_t* x, real_t* rmax, real_t* rsum) {\n"
            "    int r = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = NEG_BIG;\n"
            "    for (int j = lane; j < C; j += 32) mx = RMAX(mx, ZV(row[j]));\n"
            "    for (int o = 16; o > 0; o >>= 1) mx = RMAX(mx, __shfl_xor_sync(0xffffffffu, mx, o));\n"
            "    real_t sm = (real_t)0;\n"
            "    for (int j = lane; j < C; j += 32) sm += REXP(ZV(row[j]) - mx);\n"
            "    for (int o = 16; o > 0; o >>= 1) sm += __shfl_xor_sync(0xffffffffu, sm, o);\n"
            "    if (lane == 0) { rmax[r] = mx; rsum[r] = sm; }\n}\n\n"
            "/* pass 2: a thread per row gathers its target logit */\n"
            "__global__ void ce_gather(int m, int C, const real_t* x, const int* tg, const real_t* rmax,"
            " const real_t* rsum, real_t* loss) {\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= m) return;\n"
            "    int t = tg[r];\n"
            "    loss[r] = IGNORED(t) ? (real_t)0 : RLOG(rsum[r]) + rmax[r] - ZV(x[(size_t)r * C + t]);\n}\n\n"
            + s.setup()
            + "    real_t *d_max, *d_sum;\n"
            "    cudaMalloc(&d_max, (size_t)m * sizeof(real_t)); cudaMalloc(&d_sum, (size_t)m * sizeof(real_t));\n"
            "    ce_stats<<<(unsigned)(((size_t)m * 32 + 127) / 128), 128>>>(m, C, d_x, d_max, d_sum);\n"
            "    ce_gather<<<(m + 127) / 128, 128>>>(m, C, d_x, d_t, d_max, d_sum, d_l);\n"
            + _mean_launch(s)
            + "    cudaFree(d_max); cudaFree(d_sum);\n" + s.tail(False))


def _vectorized(s: Spec) -> str:
    vw, vec = s.vw, s.vec
    comps = ["x", "y", "z", "w"][:vw]
    push = "".join(f"            lse_push(mx, sm, ZV(v.{c}));\n" for c in comps)
    return (s.head()
            + f"/* a warp per row; {vec} loads when C is a multiple of {vw} (rows then stay aligned) */\n"
            f"__global__ void ce_vec({s.kargs}) {{\n"
            "    int r = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;\n"
            "    int t = tg[r];\n"
            "    if (IGNORED(t)) { if (lane == 0) loss[r] = (real_t)0; return; }\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = NEG_BIG, sm = (real_t)0;\n"
            f"    if (C % {vw} == 0) {{\n"
            f"        const {vec}* rv = reinterpret_cast<const {vec}*>(row);\n"
            f"        for (int j = lane; j < C / {vw}; j += 32) {{\n"
            f"            {vec} v = __ldg(rv + j);\n" + push
            + "        }\n"
            "    } else {\n"
            "        for (int j = lane; j < C; j += 32) lse_push(mx, sm, ZV(__ldg(row + j)));\n"
            "    }\n"
            "    warp_lse(mx, sm);\n"
            "    if (lane == 0) {\n"
            "        real_t l = RLOG(sm) + mx - ZV(row[t]);\n"
            "        loss[r] = l;\n" + s.acc_add("        ", "l") + "    }\n}\n\n"
            + s.setup()
            + "    ce_vec<<<(unsigned)(((size_t)m * 32 + 127) / 128), 128>>>(m, C, d_x, d_t, d_l, d_acc);\n"
            + s.tail(True))


def _block_online_pinned(s: Spec) -> str:
    return (s.head()
            + "/* a 512-thread block per row: per-thread online pairs, warp merges, then the 16 warp pairs */\n"
            f"__global__ void ce_block_online({s.kargs}) {{\n"
            "    __shared__ real_t wm[16], ws[16];\n"
            "    int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
            "    int t = tg[r];\n"
            "    if (IGNORED(t)) { if (tid == 0) loss[r] = (real_t)0; return; }\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = NEG_BIG, sm = (real_t)0;\n"
            "    for (int j = tid; j < C; j += 512) lse_push(mx, sm, ZV(row[j]));\n"
            "    warp_lse(mx, sm);\n"
            "    if (lane == 0) { wm[w] = mx; ws[w] = sm; }\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        mx = lane < 16 ? wm[lane] : NEG_BIG;\n"
            "        sm = lane < 16 ? ws[lane] : (real_t)0;\n"
            "        warp_lse(mx, sm);\n"
            "        if (lane == 0) {\n"
            "            real_t l = RLOG(sm) + mx - ZV(row[t]);\n"
            "            loss[r] = l;\n" + s.acc_add("            ", "l") + "        }\n"
            "    }\n}\n\n"
            + s.setup(pinned=True)
            + "    ce_block_online<<<m, 512>>>(m, C, d_x, d_t, d_l, d_acc);\n" + s.tail(True))


def _host_gather(s: Spec) -> str:
    mean = ("    double tot = 0.0, cnt = 0.0;\n" if s.mean else "")
    add = ("        tot += (double)l; cnt += 1.0;\n" if s.mean else "")
    fin = ("    mean_loss[0] = cnt > 0.0 ? (real_t)(tot / cnt) : (real_t)0;\n" if s.mean else "")
    return (s.head()
            + "/* 64-thread blocks, one per row: the row's log-sum-exp; the host finishes the losses */\n"
            "__global__ void ce_lse(int m, int C, const real_t* x, real_t* lse) {\n"
            "    __shared__ real_t wm[2], ws[2];\n"
            "    int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
            "    const real_t* row = x + (size_t)r * C;\n"
            "    real_t mx = NEG_BIG, sm = (real_t)0;\n"
            "    for (int j = tid; j < C; j += 64) lse_push(mx, sm, ZV(row[j]));\n"
            "    warp_lse(mx, sm);\n"
            "    if (lane == 0) { wm[w] = mx; ws[w] = sm; }\n"
            "    __syncthreads();\n"
            "    if (tid == 0) {\n"
            "        real_t a = wm[0], b = ws[0];\n"
            "        lse_merge(a, b, wm[1], ws[1]);\n"
            "        lse[r] = RLOG(b) + a;\n"
            "    }\n}\n\n"
            + f"{s.sig} {{\n"
            + ("    if (m <= 0 || C <= 0) { if (m <= 0) mean_loss[0] = (real_t)0; return; }\n" if s.mean
               else "    if (m <= 0 || C <= 0) return;\n")
            + "    size_t n = (size_t)m * C;\n"
            "    real_t *d_x, *d_lse;\n"
            "    cudaMalloc(&d_x, n * sizeof(real_t)); cudaMalloc(&d_lse, (size_t)m * sizeof(real_t));\n"
            "    cudaMemcpy(d_x, logits, n * sizeof(real_t), cudaMemcpyHostToDevice);\n"
            "    ce_lse<<<m, 64>>>(m, C, d_x, d_lse);\n"
            "    real_t* h = (real_t*)malloc((size_t)m * sizeof(real_t));\n"
            "    cudaMemcpy(h, d_lse, (size_t)m * sizeof(real_t), cudaMemcpyDeviceToHost);\n"
            + mean
            + "    for (int r = 0; r < m; ++r) {\n"
            "        int t = target[r];\n"
            "        if (IGNORED(t)) { loss[r] = (real_t)0; continue; }\n"
            "        real_t l = h[r] - ZV(logits[(size_t)r * C + t]);\n"
            "        loss[r] = l;\n" + add
            + "    }\n" + fin
            + "    free(h); cudaFree(d_x); cudaFree(d_lse);\n}\n")


def _reference(s: Spec) -> str:
    f = s.t == "float"
    ex, lg = ("expf", "logf") if f else ("exp", "log")
    mean_init = "    double tot = 0.0; long long cnt = 0;\n" if s.mean else ""
    mean_add = "        tot += (double)l; ++cnt;\n" if s.mean else ""
    mean_fin = (f"    mean_loss[0] = cnt > 0 ? ({s.t})(tot / (double)cnt) : ({s.t})0;\n" if s.mean else "")
    ign = ("        if (t < 0) { loss[r] = 0; continue; }\n" if s.ignore else "")
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            + (f"#define SCALE {s.scale_lit}\n" if s.scale_lit else "")
            + f"#define ZV(v) {s.zv('v')}\n\n"
            f"void {s.fn}({s.args}) {{\n" + mean_init
            + "    for (int r = 0; r < m; ++r) {\n"
            f"        const {s.t}* row = logits + (size_t)r * C;\n"
            "        int t = target[r];\n" + ign
            + f"        {s.t} mx = ZV(row[0]);\n"
            "        for (int j = 1; j < C; ++j) if (ZV(row[j]) > mx) mx = ZV(row[j]);\n"
            "        double sm = 0.0;\n"
            f"        for (int j = 0; j < C; ++j) sm += (double){ex}(ZV(row[j]) - mx);\n"
            f"        {s.t} l = {lg}(({s.t})sm) + mx - ZV(row[t]);\n"
            "        loss[r] = l;\n" + mean_add
            + "    }\n" + mean_fin + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    mean = (index // 2) % 2 == 0
    ignore = index % 3 == 1
    scale = [1.0, 1.0, 0.5, 2.0, 0.25][(index + int(rng.integers(2))) % 5]
    c_time = CLASSES[(index * 5 + index // 12) % len(CLASSES)] + (0 if index < 12 else int(rng.integers(0, 9)))
    total = (6_000_000 if t == "float" else 4_000_000) + int(rng.integers(0, 500_000))
    m_time = max(64, total // c_time)
    a = [2.0, 4.0, 8.0, 12.0][int(rng.integers(4))]
    fn = "cross_entropy_" + ("mean_" if mean else "") + t
    s = Spec(t, mean, ignore, scale, fn)
    c_mid = min(c_time, 2000) + int(rng.integers(1, 8))
    args = [
        {"name": "m", "role": "scalar", "ctype": "int"},
        {"name": "C", "role": "scalar", "ctype": "int"},
        {"name": "logits", "role": "in", "ctype": t, "length": "m * C",
         "dist": {"kind": "uniform", "low": -a, "high": a}},
        {"name": "target", "role": "in", "ctype": "int", "length": "m",
         "dist": {"kind": "randint", "low": -1 if ignore else 0, "high": "C"}},
        {"name": "loss", "role": "out", "ctype": t, "length": "m"},
    ]
    if mean:
        args.append({"name": "mean_loss", "role": "out", "ctype": t, "length": "1"})
    ztxt = f"z_j = logits[r*C + j] * {s.scale_lit}" if s.scale_lit else "z_j = logits[r*C + j]"
    task = {
        "function_name": fn,
        "description": (f"Softmax cross-entropy per row of an m x C row-major {t} logits matrix (C >= 1). Row r: "
                        f"{ztxt}, mx = max_j z_j, s = sum_j exp(z_j - mx) (exp in {t}, s accumulated in double), "
                        f"loss[r] = (log(({t})s) + mx) - z_target[r], target[r] in [0, C)"
                        + ("; a negative target means the row is ignored: loss[r] = 0" if ignore else "")
                        + (". mean_loss[0] = (sum of (double)loss[r] over the "
                           + ("non-ignored " if ignore else "") + "rows) / their count (0 if none)." if mean
                           else ".")),
        "returns": "void",
        "args": args,
        "size_configs": [{"m": 37, "C": 129}, {"m": 300, "C": 12}, {"m": max(3, 60_000 // c_mid), "C": c_mid},
                         {"m": 5, "C": 1}, {"m": 64, "C": 1000}, {"m": m_time, "C": c_time}],
        "tolerance": {"rtol": 1e-4, "atol": 1e-4} if t == "float" else {"rtol": 1e-9, "atol": 1e-9},
        "reference_c": _reference(s),
        "tags": ["reduction", "rows", "loss", "compute-bound", t],
    }
    mt = ("atomics",) if mean else ()
    variants = (
        Variant("thread_per_row_3pass", ("thread_per_row", "naive", "strided", "block_128", "pageable") + mt,
                _thread_per_row(s)),
        Variant("warp_online", ("block_per_row", "warp_shuffle", "fused", "coalesced", "block_256", "pageable")
                + mt, _warp_online(s)),
        Variant("block_tree", ("block_per_row", "tree_reduction", "coalesced", "block_256", "pageable"),
                _block_tree(s)),
        Variant("two_kernels", ("multi_pass", "block_per_row", "warp_shuffle", "coalesced", "block_128",
                                "pageable"), _two_kernels(s)),
        Variant("vectorized_warp", ("vectorized", "block_per_row", "warp_shuffle", "readonly_cache", "coalesced",
                                    "block_128", "pageable") + mt, _vectorized(s)),
        Variant("block512_online_pinned", ("block_per_row", "warp_shuffle", "two_level", "coalesced", "block_512",
                                           "pinned") + mt, _block_online_pinned(s)),
        Variant("host_gather", ("host_compute", "block_per_row", "warp_shuffle", "block_64", "pageable"),
                _host_gather(s)),
    )
    params = {"type": t, "mean": mean, "ignore": ignore, "scale": scale, "range": a, "C_time": c_time,
              "m_time": m_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="cross_entropy_rows",
    description="per-row softmax cross-entropy (log-sum-exp minus the target logit), optional mean (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("reduction", "compute-bound"),
)
