"""Per-row softmax, log-softmax or logsumexp of an m x k row-major matrix (float or double).

Each row: its maximum mx, then s = sum_j exp(x[j] - mx) accumulated in double (the exponential itself in the
element type), then softmax out[j] = exp(x[j] - mx) / s, log-softmax out[j] = (x[j] - mx) - log(s), or
logsumexp out[row] = mx + log(s). Parameters: the operation, the element type, the row length k (from 32 to
100000 at the timing size: many short rows or a few long ones), the input range and the sizes.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

OPS = ["softmax", "log_softmax", "logsumexp"]
KS = [32, 100, 257, 1000, 1024, 4096, 3000, 20000, 100000, 777, 64, 12000]


class Spec:
    def __init__(self, t: str, op: str, fn: str):
        self.t, self.op, self.fn = t, op, fn
        self.exp = "expf" if t == "float" else "exp"
        self.outw = "1" if op == "logsumexp" else "k"

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}(int m, int k, const {self.t}* x, {self.t}* out)'

    @property
    def head(self) -> str:
        t = self.t
        if self.op == "softmax":
            outv = f"return ({t})(ex(x - mx) / s);"
        elif self.op == "log_softmax":
            outv = f"return ({t})((double)(x - mx) - log(s));"
        else:
            outv = f"return ({t})((double)x - (double)mx);  /* unused */"
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"__host__ __device__ __forceinline__ double ex({t} v) {{ return (double){self.exp}(v); }}\n\n"
                f"__host__ __device__ __forceinline__ {t} outv({t} x, {t} mx, double s) {{ {outv} }}\n\n"
                f"__host__ __device__ __forceinline__ {t} lsev({t} mx, double s) {{ return ({t})((double)mx + log(s)); }}\n\n"
                f"__host__ __device__ __forceinline__ {t} tmax({t} a, {t} b) {{ return a > b ? a : b; }}\n\n")

    def write_serial(self, row: str, orow: str) -> str:
        """Write the outputs of one row from one thread (mx, s known)."""
        if self.op == "logsumexp":
            return f"    {orow}[0] = lsev(mx, s);\n"
        return f"    for (int j = 0; j < k; ++j) {orow}[j] = outv({row}[j], mx, s);\n"

    def write_strided(self, row: str, orow: str, first: str, step: str, leader: str) -> str:
        if self.op == "logsumexp":
            return f"    if ({leader}) {orow}[0] = lsev(mx, s);\n"
        return f"    for (int j = {first}; j < k; j += {step}) {orow}[j] = outv({row}[j], mx, s);\n"

    def entry(self) -> str:
        return (f"{self.sig} {{\n    if (m <= 0 || k <= 0) return;\n"
                f"    size_t nin = (size_t)m * k, nout = (size_t)m * {self.outw};\n"
                f"    {self.t} *dx, *dout;\n"
                f"    cudaMalloc(&dx, nin * sizeof({self.t})); cudaMalloc(&dout, nout * sizeof({self.t}));\n"
                f"    cudaMemcpy(dx, x, nin * sizeof({self.t}), cudaMemcpyHostToDevice);\n")

    def exit(self) -> str:
        return (f"    cudaMemcpy(out, dout, nout * sizeof({self.t}), cudaMemcpyDeviceToHost);\n"
                "    cudaFree(dx); cudaFree(dout);\n}\n")


def _thread_per_row(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void row_thread(int m, int k, const {t}* x, {t}* out) {{\n"
            "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (r >= m) return;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = row[0];\n    for (int j = 1; j < k; ++j) mx = tmax(mx, row[j]);\n"
            "    double s = 0.0;\n    for (int j = 0; j < k; ++j) s += ex(row[j] - mx);\n"
            + s.write_serial("row", "orow") + "}\n\n"
            + s.entry()
            + "    row_thread<<<(m + 127) / 128, 128>>>(m, k, dx, dout);\n" + s.exit())


def _block_tree(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void row_block(int m, int k, const {t}* x, {t}* out) {{\n"
            f"    __shared__ {t} smx[256]; __shared__ double ssum[256];\n"
            "    int r = blockIdx.x, tid = threadIdx.x;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = row[0];\n    for (int j = tid; j < k; j += 256) mx = tmax(mx, row[j]);\n"
            "    smx[tid] = mx;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) smx[tid] = tmax(smx[tid], smx[tid + h]);\n"
            "        __syncthreads();\n    }\n"
            "    mx = smx[0];\n"
            "    double s = 0.0;\n    for (int j = tid; j < k; j += 256) s += ex(row[j] - mx);\n"
            "    ssum[tid] = s;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) ssum[tid] += ssum[tid + h];\n"
            "        __syncthreads();\n    }\n"
            "    s = ssum[0];\n"
            + s.write_strided("row", "orow", "tid", "256", "tid == 0") + "}\n\n"
            + s.entry()
            + "    row_block<<<m, 256>>>(m, k, dx, dout);\n" + s.exit())


def _warp_fns(t: str) -> str:
    return (f"__device__ __forceinline__ {t} warp_max({t} v) {{\n"
            "    for (int o = 16; o > 0; o >>= 1) v = tmax(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
            "    return v;\n}\n\n"
            "__device__ __forceinline__ double warp_sum(double v) {\n"
            "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
            "    return v;\n}\n\n")


def _warp_per_row(s: Spec) -> str:
    t = s.t
    return (s.head + _warp_fns(t) + f"__global__ void row_warp(int m, int k, const {t}* __restrict__ x, {t}* __restrict__ out) {{\n"
            "    int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;  // whole warp leaves together\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = row[0];\n    for (int j = lane; j < k; j += 32) mx = tmax(mx, row[j]);\n"
            "    mx = warp_max(mx);\n"
            "    double s = 0.0;\n    for (int j = lane; j < k; j += 32) s += ex(row[j] - mx);\n"
            "    s = warp_sum(s);\n"
            + s.write_strided("row", "orow", "lane", "32", "lane == 0") + "}\n\n"
            + s.entry()
            + "    row_warp<<<(m + 7) / 8, 256>>>(m, k, dx, dout);\n" + s.exit())


def _online(s: Spec) -> str:
    t = s.t
    return (s.head + f"__device__ __forceinline__ void merge_ms({t}& m1, double& s1, {t} m2, double s2) {{\n"
            "    if (s2 == 0.0) return;\n"
            "    if (s1 == 0.0) { m1 = m2; s1 = s2; return; }\n"
            "    if (m2 > m1) { s1 = s1 * exp((double)m1 - (double)m2) + s2; m1 = m2; }\n"
            "    else s1 += s2 * exp((double)m2 - (double)m1);\n}\n\n"
            f"__global__ void row_online(int m, int k, const {t}* __restrict__ x, {t}* __restrict__ out) {{\n"
            "    int r = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = 0; double s = 0.0;\n"
            "    for (int j = lane; j < k; j += 32) {\n"
            f"        {t} v = __ldg(row + j);\n"
            "        if (s == 0.0) { mx = v; s = 1.0; }\n"
            "        else if (v > mx) { s = s * exp((double)mx - (double)v) + 1.0; mx = v; }\n"
            "        else s += ex(v - mx);\n    }\n"
            "    for (int o = 16; o > 0; o >>= 1) {\n"
            f"        {t} m2 = __shfl_xor_sync(0xffffffffu, mx, o); double s2 = __shfl_xor_sync(0xffffffffu, s, o);\n"
            "        merge_ms(mx, s, m2, s2);\n    }\n"
            + s.write_strided("row", "orow", "lane", "32", "lane == 0") + "}\n\n"
            + s.entry()
            + "    row_online<<<(m + 3) / 4, 128>>>(m, k, dx, dout);\n" + s.exit())


def _multi_kernel(s: Spec) -> str:
    t = s.t
    if s.op == "logsumexp":
        final = (f"__global__ void finish_rows(int m, const {t}* rmax, const double* rsum, {t}* out) {{\n"
                 "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (r < m) out[r] = lsev(rmax[r], rsum[r]);\n}\n\n")
        launch = "    finish_rows<<<(m + 255) / 256, 256>>>(m, dmax, dsum, dout);\n"
    else:
        final = (f"__global__ void finish_elems(size_t nin, int k, const {t}* x, const {t}* rmax, const double* rsum, {t}* out) {{\n"
                 "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (i < nin) { size_t r = i / k; out[i] = outv(x[i], rmax[r], rsum[r]); }\n}\n\n")
        launch = "    finish_elems<<<(unsigned)((nin + 255) / 256), 256>>>(nin, k, dx, dmax, dsum, dout);\n"
    return (s.head + f"__global__ void rows_max(int m, int k, const {t}* x, {t}* rmax) {{\n"
            f"    __shared__ {t} sh[128];\n"
            f"    int r = blockIdx.x, tid = threadIdx.x; const {t}* row = x + (size_t)r * k;\n"
            f"    {t} mx = row[0]; for (int j = tid; j < k; j += 128) mx = tmax(mx, row[j]);\n"
            "    sh[tid] = mx; __syncthreads();\n"
            "    for (int h = 64; h > 0; h >>= 1) { if (tid < h) sh[tid] = tmax(sh[tid], sh[tid + h]); __syncthreads(); }\n"
            "    if (tid == 0) rmax[r] = sh[0];\n}\n\n"
            f"__global__ void exps(size_t nin, int k, const {t}* x, const {t}* rmax, double* e) {{\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < nin) e[i] = ex(x[i] - rmax[i / k]);\n}\n\n"
            "__global__ void rows_sum(int m, int k, const double* e, double* rsum) {\n"
            "    __shared__ double sh[128];\n"
            "    int r = blockIdx.x, tid = threadIdx.x; const double* row = e + (size_t)r * k;\n"
            "    double s = 0.0; for (int j = tid; j < k; j += 128) s += row[j];\n"
            "    sh[tid] = s; __syncthreads();\n"
            "    for (int h = 64; h > 0; h >>= 1) { if (tid < h) sh[tid] += sh[tid + h]; __syncthreads(); }\n"
            "    if (tid == 0) rsum[r] = sh[0];\n}\n\n"
            + final + s.entry()
            + f"    {t}* dmax; double *dsum, *de;\n"
            f"    cudaMalloc(&dmax, (size_t)m * sizeof({t})); cudaMalloc(&dsum, (size_t)m * sizeof(double));\n"
            "    cudaMalloc(&de, nin * sizeof(double));\n"
            "    rows_max<<<m, 128>>>(m, k, dx, dmax);\n"
            "    exps<<<(unsigned)((nin + 255) / 256), 256>>>(nin, k, dx, dmax, de);\n"
            "    rows_sum<<<m, 128>>>(m, k, de, dsum);\n"
            + launch + "    cudaFree(dmax); cudaFree(dsum); cudaFree(de);\n" + s.exit())


def _block1024(s: Spec) -> str:
    t = s.t
    return (s.head + _warp_fns(t) + f"__global__ void row_big_block(int m, int k, const {t}* x, {t}* out) {{\n"
            f"    __shared__ {t} wm[32]; __shared__ double wsum[32];\n"
            "    int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = row[0];\n    for (int j = tid; j < k; j += 1024) mx = tmax(mx, row[j]);\n"
            "    mx = warp_max(mx);\n"
            "    if (lane == 0) wm[w] = mx;\n    __syncthreads();\n"
            "    mx = warp_max(wm[lane]);\n"
            "    double s = 0.0;\n    for (int j = tid; j < k; j += 1024) s += ex(row[j] - mx);\n"
            "    s = warp_sum(s);\n"
            "    if (lane == 0) wsum[w] = s;\n    __syncthreads();\n"
            "    s = warp_sum(wsum[lane]);\n"
            + s.write_strided("row", "orow", "tid", "1024", "tid == 0") + "}\n\n"
            + s.entry()
            + "    row_big_block<<<m, 1024>>>(m, k, dx, dout);\n" + s.exit())


def _host_max(s: Spec) -> str:
    t = s.t
    return (s.head + _warp_fns(t) + f"__global__ void rows_given_max(int m, int k, const {t}* x, const {t}* rmax, {t}* out) {{\n"
            "    int r = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = rmax[r];\n"
            "    double s = 0.0;\n    for (int j = lane; j < k; j += 32) s += ex(row[j] - mx);\n"
            "    s = warp_sum(s);\n"
            + s.write_strided("row", "orow", "lane", "32", "lane == 0") + "}\n\n"
            + s.entry()
            + f"    {t}* hmax = ({t}*)malloc((size_t)m * sizeof({t}));\n"
            "    for (int r = 0; r < m; ++r) {\n"
            f"        const {t}* row = x + (size_t)r * k; {t} mx = row[0];\n"
            "        for (int j = 1; j < k; ++j) mx = tmax(mx, row[j]);\n"
            "        hmax[r] = mx;\n    }\n"
            f"    {t}* dmax; cudaMalloc(&dmax, (size_t)m * sizeof({t}));\n"
            f"    cudaMemcpy(dmax, hmax, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "    rows_given_max<<<(m + 3) / 4, 128>>>(m, k, dx, dmax, dout);\n"
            "    free(hmax); cudaFree(dmax);\n" + s.exit())


def _pinned_streams(s: Spec) -> str:
    t = s.t
    return (s.head + _warp_fns(t) + f"__global__ void row_warp(int m, int k, const {t}* __restrict__ x, {t}* __restrict__ out) {{\n"
            "    int r = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;\n"
            f"    const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"    {t} mx = row[0];\n    for (int j = lane; j < k; j += 32) mx = tmax(mx, row[j]);\n"
            "    mx = warp_max(mx);\n"
            "    double s = 0.0;\n    for (int j = lane; j < k; j += 32) s += ex(row[j] - mx);\n"
            "    s = warp_sum(s);\n"
            + s.write_strided("row", "orow", "lane", "32", "lane == 0") + "}\n\n"
            + f"{s.sig} {{\n    if (m <= 0 || k <= 0) return;\n"
            f"    const size_t ow = {s.outw};\n"
            "    int R = (1 << 20) / k; if (R < 1) R = 1; if (R > m) R = m;\n"
            "    int nch = (m + R - 1) / R;\n"
            f"    {t} *hin[2], *hout[2], *din[2], *dout[2]; cudaStream_t st[2]; int pend[2] = {{-1, -1}};\n"
            "    for (int b = 0; b < 2; ++b) {\n"
            f"        cudaMallocHost(&hin[b], (size_t)R * k * sizeof({t})); cudaMallocHost(&hout[b], (size_t)R * ow * sizeof({t}));\n"
            f"        cudaMalloc(&din[b], (size_t)R * k * sizeof({t})); cudaMalloc(&dout[b], (size_t)R * ow * sizeof({t}));\n"
            "        cudaStreamCreate(&st[b]);\n    }\n"
            "    for (int c = 0; c <= nch + 1; ++c) {\n"
            "        int b = c & 1;\n"
            "        cudaStreamSynchronize(st[b]);\n"
            "        if (pend[b] >= 0) {\n"
            "            int r0 = pend[b] * R; int rows = m - r0 < R ? m - r0 : R;\n"
            f"            memcpy(out + (size_t)r0 * ow, hout[b], (size_t)rows * ow * sizeof({t}));\n"
            "            pend[b] = -1;\n        }\n"
            "        if (c >= nch) continue;\n"
            "        int r0 = c * R; int rows = m - r0 < R ? m - r0 : R;\n"
            f"        memcpy(hin[b], x + (size_t)r0 * k, (size_t)rows * k * sizeof({t}));\n"
            f"        cudaMemcpyAsync(din[b], hin[b], (size_t)rows * k * sizeof({t}), cudaMemcpyHostToDevice, st[b]);\n"
            "        row_warp<<<(rows + 3) / 4, 128, 0, st[b]>>>(rows, k, din[b], dout[b]);\n"
            f"        cudaMemcpyAsync(hout[b], dout[b], (size_t)rows * ow * sizeof({t}), cudaMemcpyDeviceToHost, st[b]);\n"
            "        pend[b] = c;\n    }\n"
            "    for (int b = 0; b < 2; ++b) { cudaStreamDestroy(st[b]); cudaFreeHost(hin[b]); cudaFreeHost(hout[b]); cudaFree(din[b]); cudaFree(dout[b]); }\n"
            "}\n")


def _reference(s: Spec) -> str:
    t = s.t
    if s.op == "softmax":
        w = f"        for (int j = 0; j < k; ++j) orow[j] = ({t})((double){s.exp}(row[j] - mx) / s);\n"
    elif s.op == "log_softmax":
        w = f"        for (int j = 0; j < k; ++j) orow[j] = ({t})((double)(row[j] - mx) - log(s));\n"
    else:
        w = f"        orow[0] = ({t})((double)mx + log(s));\n"
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"void {s.fn}(int m, int k, const {t}* x, {t}* out) {{\n"
            "    for (int r = 0; r < m; ++r) {\n"
            f"        const {t}* row = x + (size_t)r * k; {t}* orow = out + (size_t)r * {s.outw};\n"
            f"        {t} mx = row[0];\n"
            "        for (int j = 1; j < k; ++j) if (row[j] > mx) mx = row[j];\n"
            "        double s = 0.0;\n"
            f"        for (int j = 0; j < k; ++j) s += (double){s.exp}(row[j] - mx);\n"
            + w + "    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    op = OPS[index % 3]
    k_time = KS[index % len(KS)] + (0 if index < len(KS) else int(rng.integers(1, 50)))
    total = {("float", True): 4_000_000, ("float", False): 6_000_000, ("double", True): 3_000_000,
             ("double", False): 4_000_000}[(t, op == "softmax")]
    m_time = max(8, total // k_time)
    fn = {"softmax": "softmax_rows", "log_softmax": "log_softmax_rows", "logsumexp": "logsumexp_rows"}[op] + "_" + t
    s = Spec(t, op, fn)
    scale = [1.0, 4.0, 10.0, 30.0][int(rng.integers(4))]
    outw = "m" if op == "logsumexp" else "m * k"
    k_small = min(k_time, 3000) + int(rng.integers(1, 17))
    task = {
        "function_name": fn,
        "description": (f"Row-wise {op} of an m x k row-major {t} matrix x (m, k >= 1): per row mx = max_j x[j], "
                        f"s = sum_j exp(x[j] - mx) (exp in {t}, s accumulated in double), then "
                        + {"softmax": "out[j] = exp(x[j] - mx) / s.",
                           "log_softmax": "out[j] = (x[j] - mx) - log(s) (in double, rounded to the element type).",
                           "logsumexp": "out[row] = mx + log(s)."}[op]),
        "returns": "void",
        "args": [
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "k", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "m * k",
             "dist": {"kind": "uniform", "low": -scale, "high": scale}},
            {"name": "out", "role": "out", "ctype": t, "length": outw},
        ],
        "size_configs": [{"m": 37, "k": 129}, {"m": 300, "k": 31}, {"m": max(1, 90_000 // k_small), "k": k_small},
                         {"m": 3, "k": 1}, {"m": m_time, "k": k_time}],
        "tolerance": {"rtol": 1e-5, "atol": 1e-7} if t == "float" else {"rtol": 1e-9, "atol": 1e-13},
        "reference_c": _reference(s),
        "tags": ["reduction", "rows", "compute-bound", t],
    }
    variants = (
        Variant("thread_per_row", ("thread_per_row", "strided", "block_128", "pageable"), _thread_per_row(s)),
        Variant("block_tree", ("block_per_row", "tree_reduction", "coalesced", "block_256", "pageable"), _block_tree(s)),
        Variant("warp_per_row", ("block_per_row", "warp_shuffle", "coalesced", "block_256", "pageable"),
                _warp_per_row(s)),
        Variant("warp_online", ("block_per_row", "warp_shuffle", "fused", "readonly_cache", "coalesced", "block_128",
                                "pageable"), _online(s)),
        Variant("multi_kernel", ("multi_pass", "naive", "tree_reduction", "coalesced", "block_128", "pageable"),
                _multi_kernel(s)),
        Variant("block1024_shuffle", ("block_per_row", "warp_shuffle", "two_level", "coalesced", "block_1024",
                                      "pageable"), _block1024(s)),
        Variant("host_row_max", ("host_compute", "extra_transfers", "block_per_row", "warp_shuffle", "block_128",
                                 "pageable"), _host_max(s)),
        Variant("pinned_streams", ("pinned", "async_streams", "double_buffered", "block_per_row", "warp_shuffle",
                                   "block_128"), _pinned_streams(s)),
    )
    return GeneratedTask(task, variants, {"type": t, "op": op, "k_time": k_time, "m_time": m_time})


FAMILY = Family(
    name="row_softmax",
    description="per-row softmax / log-softmax / logsumexp of an m x k matrix (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
