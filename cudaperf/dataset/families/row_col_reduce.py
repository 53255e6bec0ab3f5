"""Row or column reductions (sum, mean, max) of f(x) over an m x k row-major matrix, f a libm map.

out has m (row reductions) or k (column reductions) doubles; f is evaluated in the element type (float or double)
and accumulated in double. Parameters: the axis and reduction, f, the element type, the shape at the timing size
(wide, square-ish, tall and narrow) and the input range. Row reductions favour warp/block-per-row kernels, column
reductions favour thread-per-column or tiled kernels: the strided choice is among the variants of each.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

OPS = ["row_sum", "col_sum", "row_mean", "col_max", "row_max", "col_mean"]
FUNCS = ["exp{f}(x)", "sqrt{f}(fabs{f}(x))", "log1p{f}(x * x)", "sin{f}(x)", "tanh{f}(x)", "exp{f}(-x * x)",
         "atan{f}(x)", "cbrt{f}(x)", "cos{f}(x) * x"]
SHAPES_K = [16, 64, 300, 1000, 4096, 30000, 200000, 2048, 128, 7]


class Spec:
    def __init__(self, t, op, fexpr, fn):
        self.t, self.op, self.fexpr, self.fn = t, op, fexpr, fn
        self.axis, self.red = op.split("_")
        self.is_max = self.red == "max"
        self.nout = "m" if self.axis == "row" else "k"
        self.cnt = "k" if self.axis == "row" else "m"

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}(int m, int k, const {self.t}* x, double* out)'

    @property
    def head(self) -> str:
        comb = "a > b ? a : b" if self.is_max else "a + b"
        ident = "-INFINITY" if self.is_max else "0.0"
        fin = "a / (double)cnt" if self.red == "mean" else "a"
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"__host__ __device__ __forceinline__ double fv({self.t} x) {{ return (double)({self.fexpr}); }}\n\n"
                f"__host__ __device__ __forceinline__ double comb(double a, double b) {{ return {comb}; }}\n\n"
                f"__host__ __device__ __forceinline__ double ident() {{ return {ident}; }}\n\n"
                f"__host__ __device__ __forceinline__ double fin(double a, int cnt) {{ return {fin}; }}\n\n"
                "__device__ __forceinline__ double warp_comb(double v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v = comb(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
                "    return v;\n}\n\n"
                "__device__ __forceinline__ unsigned long long ordbits(double v) {\n"
                "    unsigned long long u = (unsigned long long)__double_as_longlong(v);\n"
                "    return (u >> 63) ? ~u : (u | 0x8000000000000000ULL);\n}\n\n"
                "__device__ __forceinline__ double unord(unsigned long long o) {\n"
                "    unsigned long long u = (o >> 63) ? (o ^ 0x8000000000000000ULL) : ~o;\n"
                "    return __longlong_as_double((long long)u);\n}\n\n")

    def entry(self) -> str:
        return (f"{self.sig} {{\n    if (m <= 0 || k <= 0) return;\n"
                f"    size_t nin = (size_t)m * k; int nout = {self.nout}; (void)nout;\n"
                f"    {self.t}* dx; double* dout;\n"
                f"    cudaMalloc(&dx, nin * sizeof({self.t})); cudaMalloc(&dout, (size_t)nout * sizeof(double));\n"
                f"    cudaMemcpy(dx, x, nin * sizeof({self.t}), cudaMemcpyHostToDevice);\n")

    def exit(self) -> str:
        return ("    cudaMemcpy(out, dout, (size_t)nout * sizeof(double), cudaMemcpyDeviceToHost);\n"
                "    cudaFree(dx); cudaFree(dout);\n}\n")

    def pinned_entry(self) -> str:
        return (f"{self.sig} {{\n    if (m <= 0 || k <= 0) return;\n"
                f"    size_t nin = (size_t)m * k; int nout = {self.nout};\n"
                f"    {self.t}* dx; double* dout;\n"
                f"    cudaMalloc(&dx, nin * sizeof({self.t})); cudaMalloc(&dout, (size_t)nout * sizeof(double));\n"
                f"    cudaHostRegister((void*)x, nin * sizeof({self.t}), cudaHostRegisterDefault);\n"
                f"    cudaMemcpyAsync(dx, x, nin * sizeof({self.t}), cudaMemcpyHostToDevice, 0);\n")

    def pinned_exit(self) -> str:
        return ("    cudaMemcpy(out, dout, (size_t)nout * sizeof(double), cudaMemcpyDeviceToHost);\n"
                "    cudaHostUnregister((void*)x);\n"
                "    cudaFree(dx); cudaFree(dout);\n}\n")


# ------------------------------------------------------------------------------------------------ row reductions

def _row_thread(s: Spec, block: int, small: bool) -> str:
    t = s.t
    launch = (f"    row_thread<<<4, {block}>>>(m, k, dx, dout);\n" if small
              else f"    row_thread<<<(m + {block - 1}) / {block}, {block}>>>(m, k, dx, dout);\n")
    return (s.head + f"__global__ void row_thread(int m, int k, const {t}* x, double* out) {{\n"
            "    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x) {\n"
            f"        const {t}* row = x + (size_t)r * k; double a = ident();\n"
            "        for (int j = 0; j < k; ++j) a = comb(a, fv(row[j]));\n"
            "        out[r] = fin(a, k);\n    }\n}\n\n"
            + s.entry() + launch + s.exit())


def _warp_row_kernel(s: Spec) -> str:
    t = s.t
    return (f"__global__ void row_warp(int m, int k, const {t}* __restrict__ x, double* __restrict__ out) {{\n"
            "    int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= m) return;  // whole warp leaves together\n"
            f"    const {t}* row = x + (size_t)r * k; double a = ident();\n"
            "    for (int j = lane; j < k; j += 32) a = comb(a, fv(__ldg(row + j)));\n"
            "    a = warp_comb(a);\n"
            "    if (lane == 0) out[r] = fin(a, k);\n}\n\n")


def _row_warp(s: Spec) -> str:
    return s.head + _warp_row_kernel(s) + s.entry() + "    row_warp<<<(m + 7) / 8, 256>>>(m, k, dx, dout);\n" + s.exit()


def _row_warp_pinned(s: Spec) -> str:
    return (s.head + _warp_row_kernel(s) + s.pinned_entry()
            + "    row_warp<<<(m + 7) / 8, 256>>>(m, k, dx, dout);\n" + s.pinned_exit())


def _row_block(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void row_block(int m, int k, const {t}* x, double* out) {{\n"
            "    __shared__ double sh[256];\n"
            "    int r = blockIdx.x, tid = threadIdx.x;\n"
            f"    const {t}* row = x + (size_t)r * k; double a = ident();\n"
            "    for (int j = tid; j < k; j += 256) a = comb(a, fv(row[j]));\n"
            "    sh[tid] = a;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) sh[tid] = comb(sh[tid], sh[tid + h]);\n"
            "        __syncthreads();\n    }\n"
            "    if (tid == 0) out[r] = fin(sh[0], k);\n}\n\n"
            + s.entry() + "    row_block<<<m, 256>>>(m, k, dx, dout);\n" + s.exit())


def _atomic_combine(s: Spec, ptr: str, v: str) -> str:
    if s.is_max:
        return f"atomicMax({ptr}, ordbits({v}));"
    return f"atomicAdd({ptr}, {v});"


def _acc_buffers(s: Spec) -> tuple[str, str, str]:
    """Declarations of the atomic accumulator buffer, its init, and the finishing kernel launch."""
    acc_t = "unsigned long long" if s.is_max else "double"
    decl = (f"    {acc_t}* dacc; cudaMalloc(&dacc, (size_t)nout * sizeof({acc_t}));\n"
            f"    cudaMemset(dacc, 0, (size_t)nout * sizeof({acc_t}));\n")
    kern = (f"__global__ void finish_acc(int nout, int cnt, const {acc_t}* acc, double* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < nout) out[i] = fin({'unord(acc[i])' if s.is_max else 'acc[i]'}, cnt);\n}}\n\n")
    launch = f"    finish_acc<<<(nout + 255) / 256, 256>>>(nout, {s.cnt}, dacc, dout);\n    cudaFree(dacc);\n"
    return decl, kern, launch


def _row_tile_atomic(s: Spec) -> str:
    t = s.t
    decl, kern, launch = _acc_buffers(s)
    acc_t = "unsigned long long" if s.is_max else "double"
    return (s.head + kern
            + f"__global__ void row_segments(int m, int k, const {t}* __restrict__ x, {acc_t}* acc) {{\n"
            "    __shared__ double ws[8];\n"
            "    int r = blockIdx.x; size_t base = (size_t)r * k; int c0 = blockIdx.y * 1024;\n"
            "    double a = ident();\n"
            "    for (int q = 0; q < 4; ++q) { int j = c0 + q * 256 + threadIdx.x; if (j < k) a = comb(a, fv(x[base + j])); }\n"
            "    a = warp_comb(a);\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) ws[w] = a;\n    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        a = lane < 8 ? ws[lane] : ident();\n"
            "        a = warp_comb(a);\n"
            f"        if (lane == 0) {_atomic_combine(s, 'acc + r', 'a')}\n    }}\n}}\n\n"
            + s.entry() + decl
            + "    dim3 grid(m, (k + 1023) / 1024);\n"
            "    row_segments<<<grid, 256>>>(m, k, dx, dacc);\n" + launch + s.exit())


def _map_then_host(s: Spec) -> str:
    t = s.t
    if s.axis == "row":
        host = ("    for (int r = 0; r < m; ++r) { double a = ident(); for (int j = 0; j < k; ++j) a = comb(a, hf[(size_t)r * k + j]); out[r] = fin(a, k); }\n")
    else:
        host = ("    for (int j = 0; j < k; ++j) out[j] = ident();\n"
                "    for (int r = 0; r < m; ++r) for (int j = 0; j < k; ++j) out[j] = comb(out[j], hf[(size_t)r * k + j]);\n"
                "    for (int j = 0; j < k; ++j) out[j] = fin(out[j], m);\n")
    return (s.head + f"__global__ void map_f(size_t nin, const {t}* x, double* f) {{\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < nin) f[i] = fv(x[i]);\n}\n\n"
            + f"{s.sig} {{\n    if (m <= 0 || k <= 0) return;\n"
            f"    size_t nin = (size_t)m * k; {t}* dx; double* df;\n"
            f"    cudaMalloc(&dx, nin * sizeof({t})); cudaMalloc(&df, nin * sizeof(double));\n"
            f"    cudaMemcpy(dx, x, nin * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "    map_f<<<(unsigned)((nin + 255) / 256), 256>>>(nin, dx, df);\n"
            "    double* hf = (double*)malloc(nin * sizeof(double));\n"
            "    cudaMemcpy(hf, df, nin * sizeof(double), cudaMemcpyDeviceToHost);\n"
            + host + "    free(hf); cudaFree(dx); cudaFree(df);\n}\n")


# --------------------------------------------------------------------------------------------- column reductions

def _col_thread(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void col_thread(int m, int k, const {t}* x, double* out) {{\n"
            "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (c >= k) return;\n"
            "    double a = ident();\n"
            "    for (int r = 0; r < m; ++r) a = comb(a, fv(x[(size_t)r * k + c]));\n"
            "    out[c] = fin(a, m);\n}\n\n"
            + s.entry() + "    col_thread<<<(k + 255) / 256, 256>>>(m, k, dx, dout);\n" + s.exit())


def _col_block(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void col_block(int m, int k, const {t}* x, double* out) {{\n"
            "    __shared__ double sh[256];\n"
            "    int c = blockIdx.x, tid = threadIdx.x;\n"
            "    double a = ident();\n"
            "    for (int r = tid; r < m; r += 256) a = comb(a, fv(x[(size_t)r * k + c]));\n"
            "    sh[tid] = a;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) sh[tid] = comb(sh[tid], sh[tid + h]);\n"
            "        __syncthreads();\n    }\n"
            "    if (tid == 0) out[c] = fin(sh[0], m);\n}\n\n"
            + s.entry() + "    col_block<<<k, 256>>>(m, k, dx, dout);\n" + s.exit())


def _col_tiled_atomic(s: Spec) -> str:
    t = s.t
    decl, kern, launch = _acc_buffers(s)
    acc_t = "unsigned long long" if s.is_max else "double"
    return (s.head + kern
            + f"__global__ void col_tiles(int m, int k, int rows_per, const {t}* __restrict__ x, {acc_t}* acc) {{\n"
            "    __shared__ double sh[8][33];\n"
            "    int tx = threadIdx.x, ty = threadIdx.y; int c = blockIdx.x * 32 + tx;\n"
            "    int r0 = blockIdx.y * rows_per; int r1 = r0 + rows_per < m ? r0 + rows_per : m;\n"
            "    double a = ident();\n"
            "    if (c < k) for (int r = r0 + ty; r < r1; r += 8) a = comb(a, fv(x[(size_t)r * k + c]));\n"
            "    sh[ty][tx] = a;\n    __syncthreads();\n"
            "    for (int h = 4; h > 0; h >>= 1) {\n"
            "        if (ty < h) sh[ty][tx] = comb(sh[ty][tx], sh[ty + h][tx]);\n"
            "        __syncthreads();\n    }\n"
            f"    if (ty == 0 && c < k) {_atomic_combine(s, 'acc + c', 'sh[0][tx]')}\n}}\n\n"
            + s.entry() + decl
            + "    int cb = (k + 31) / 32; int want = 264 * 4 / cb; if (want < 1) want = 1;\n"
            "    int rows_per = (m + want - 1) / want; if (rows_per < 64) rows_per = 64;\n"
            "    dim3 grid(cb, (m + rows_per - 1) / rows_per), block(32, 8);\n"
            "    col_tiles<<<grid, block>>>(m, k, rows_per, dx, dacc);\n" + launch + s.exit())


def _col_partials_kernels(s: Spec) -> str:
    t = s.t
    return (f"__global__ void col_chunks(int m, int k, int rows_per, const {t}* __restrict__ x, double* part) {{\n"
            "    int c = blockIdx.x * blockDim.x + threadIdx.x; int ch = blockIdx.y;\n"
            "    if (c >= k) return;\n"
            "    int r0 = ch * rows_per; int r1 = r0 + rows_per < m ? r0 + rows_per : m;\n"
            "    double a = ident();\n"
            "    for (int r = r0; r < r1; ++r) a = comb(a, fv(x[(size_t)r * k + c]));\n"
            "    part[(size_t)ch * k + c] = a;\n}\n\n"
            "__global__ void col_finish(int m, int k, int nch, const double* part, double* out) {\n"
            "    int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (c >= k) return;\n"
            "    double a = ident();\n"
            "    for (int q = 0; q < nch; ++q) a = comb(a, part[(size_t)q * k + c]);\n"
            "    out[c] = fin(a, m);\n}\n\n")


def _col_partials_launch() -> str:
    return ("    int cb = (k + 127) / 128; int want = 264 * 8 / cb; if (want < 1) want = 1;\n"
            "    int rows_per = (m + want - 1) / want; if (rows_per < 32) rows_per = 32;\n"
            "    int nch = (m + rows_per - 1) / rows_per;\n"
            "    double* dpart; cudaMalloc(&dpart, (size_t)nch * k * sizeof(double));\n"
            "    col_chunks<<<dim3(cb, nch), 128>>>(m, k, rows_per, dx, dpart);\n"
            "    col_finish<<<cb, 128>>>(m, k, nch, dpart, dout);\n"
            "    cudaFree(dpart);\n")


def _col_partials(s: Spec) -> str:
    return s.head + _col_partials_kernels(s) + s.entry() + _col_partials_launch() + s.exit()


def _col_partials_pinned(s: Spec) -> str:
    return s.head + _col_partials_kernels(s) + s.pinned_entry() + _col_partials_launch() + s.pinned_exit()


def _col_transpose(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void transpose_tile(int m, int k, const {t}* x, {t}* xt) {{\n"
            f"    __shared__ {t} tile[32][33];\n"
            "    int c = blockIdx.x * 32 + threadIdx.x;\n"
            "    for (int q = threadIdx.y; q < 32; q += 8) {\n"
            "        int r = blockIdx.y * 32 + q;\n"
            "        if (r < m && c < k) tile[q][threadIdx.x] = x[(size_t)r * k + c];\n    }\n"
            "    __syncthreads();\n"
            "    int r = blockIdx.y * 32 + threadIdx.x;\n"
            "    for (int q = threadIdx.y; q < 32; q += 8) {\n"
            "        int cc = blockIdx.x * 32 + q;\n"
            "        if (r < m && cc < k) xt[(size_t)cc * m + r] = tile[threadIdx.x][q];\n    }\n}\n\n"
            f"__global__ void row_warp(int rows, int len, const {t}* __restrict__ x, double* __restrict__ out) {{\n"
            "    int r = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (r >= rows) return;\n"
            f"    const {t}* row = x + (size_t)r * len; double a = ident();\n"
            "    for (int j = lane; j < len; j += 32) a = comb(a, fv(row[j]));\n"
            "    a = warp_comb(a);\n"
            "    if (lane == 0) out[r] = fin(a, len);\n}\n\n"
            + s.entry()
            + f"    {t}* dxt; cudaMalloc(&dxt, nin * sizeof({t}));\n"
            "    transpose_tile<<<dim3((k + 31) / 32, (m + 31) / 32), dim3(32, 8)>>>(m, k, dx, dxt);\n"
            "    row_warp<<<(k + 7) / 8, 256>>>(k, m, dxt, dout);\n"
            "    cudaFree(dxt);\n" + s.exit())


def _reference(s: Spec) -> str:
    t = s.t
    comb = "if (v > a) a = v;" if s.is_max else "a += v;"
    ident = "-INFINITY" if s.is_max else "0.0"
    fin = lambda a, c: f"{a} / (double){c}" if s.red == "mean" else a  # noqa: E731
    if s.axis == "row":
        body = ("    for (int r = 0; r < m; ++r) {\n"
                f"        double a = {ident};\n"
                f"        for (int j = 0; j < k; ++j) {{ double v = fv(x[(size_t)r * k + j]); {comb} }}\n"
                f"        out[r] = {fin('a', 'k')};\n    }}\n")
    else:
        body = (f"    for (int j = 0; j < k; ++j) out[j] = {ident};\n"
                "    for (int r = 0; r < m; ++r)\n"
                "        for (int j = 0; j < k; ++j) {\n"
                f"            double v = fv(x[(size_t)r * k + j]); double a = out[j]; {comb} out[j] = a;\n        }}\n"
                + (f"    for (int j = 0; j < k; ++j) out[j] = {fin('out[j]', 'm')};\n" if s.red == "mean" else ""))
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"static double fv({t} x) {{ return (double)({s.fexpr}); }}\n\n"
            f"void {s.fn}(int m, int k, const {t}* x, double* out) {{\n" + body + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    op = OPS[index % len(OPS)]
    f = FUNCS[index % len(FUNCS)].format(f="f" if t == "float" else "")
    fn = f"{op}_f_{t}"
    s = Spec(t, op, f, fn)
    k_time = SHAPES_K[index % len(SHAPES_K)] + (int(rng.integers(1, 9)) if index >= len(SHAPES_K) else 0)
    heavy = any(h in f for h in ("log1p", "tanh", "atan", "cbrt"))
    total = (2_000_000 if heavy else 5_000_000) if t == "float" else (1_500_000 if heavy else 3_000_000)
    m_time = max(4, total // k_time)
    lo, hi = [(-1.0, 1.0), (-2.0, 2.0), (0.0, 3.0)][int(rng.integers(3))]
    axis_name = "row" if s.axis == "row" else "column"
    red_name = {"sum": "sum", "mean": "mean", "max": "maximum"}[s.red]
    task = {
        "function_name": fn,
        "description": (f"For an m x k row-major {t} matrix x, out[{'r' if s.axis == 'row' else 'j'}] = the {red_name} "
                        f"over each {axis_name} of f(x) with f(x) = {f} evaluated in {t} and accumulated in double "
                        f"(out has {s.nout} doubles; any summation order is accepted within the tolerance)."),
        "returns": "void",
        "args": [
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "k", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "m * k", "dist": {"kind": "uniform", "low": lo, "high": hi}},
            {"name": "out", "role": "out", "ctype": "double", "length": s.nout},
        ],
        "size_configs": [{"m": 37, "k": 129}, {"m": 1000, "k": 7}, {"m": 5, "k": 3001}, {"m": 1, "k": 1},
                         {"m": 333, "k": 257}, {"m": m_time, "k": k_time}],
        "tolerance": {"rtol": 1e-5, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-9},
        "reference_c": _reference(s),
        "tags": ["reduction", "rows" if s.axis == "row" else "columns", "compute-bound", t],
    }
    if s.axis == "row":
        variants = (
            Variant("thread_per_row", ("thread_per_row", "strided", "grid_stride", "block_128", "pageable"),
                    _row_thread(s, 128, False)),
            Variant("warp_per_row", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", "block_256",
                                     "pageable"), _row_warp(s)),
            Variant("block_per_row", ("block_per_row", "tree_reduction", "coalesced", "block_256", "pageable"),
                    _row_block(s)),
            Variant("segment_atomic", ("atomics", "warp_shuffle", "two_level", "multi_pass", "coalesced", "block_256",
                                       "pageable"), _row_tile_atomic(s)),
            Variant("map_then_host", ("naive", "host_compute", "extra_transfers", "coalesced", "block_256", "pageable"),
                    _map_then_host(s)),
            Variant("warp_per_row_pinned", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", "pinned",
                                            "block_256"), _row_warp_pinned(s)),
            Variant("few_threads_rows", ("thread_per_row", "small_grid", "strided", "grid_stride", "block_32",
                                         "pageable"), _row_thread(s, 32, True)),
        )
    else:
        variants = (
            Variant("thread_per_col", ("naive", "thread_per_row", "coalesced", "block_256", "pageable"),
                    _col_thread(s)),
            Variant("block_per_col", ("block_per_row", "strided", "tree_reduction", "block_256", "pageable"),
                    _col_block(s)),
            Variant("tiled_atomic", ("shared_tiling", "tree_reduction", "atomics", "two_level", "multi_pass",
                                     "coalesced", "block_256", "pageable"), _col_tiled_atomic(s)),
            Variant("map_then_host", ("naive", "host_compute", "extra_transfers", "coalesced", "block_256", "pageable"),
                    _map_then_host(s)),
            Variant("row_chunk_partials", ("two_level", "multi_pass", "coalesced", "block_128", "pageable"),
                    _col_partials(s)),
            Variant("row_chunk_partials_pinned", ("two_level", "multi_pass", "coalesced", "block_128", "pinned"),
                    _col_partials_pinned(s)),
            Variant("transpose_then_rows", ("shared_tiling", "multi_pass", "warp_shuffle", "coalesced", "block_256",
                                            "pageable"), _col_transpose(s)),
        )
    return GeneratedTask(task, variants, {"type": t, "op": op, "f": f, "m_time": m_time, "k_time": k_time})


FAMILY = Family(
    name="row_col_reduce",
    description="row / column sums, means and maxima of f(x) over an m x k matrix (float/double, double accumulation)",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
