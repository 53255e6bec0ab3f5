"""K power iterations of PageRank, pull form, on a directed graph whose in-edges are given in CSR form.

Row ``v`` of the CSR lists v's in-edges; the source of in-edge ``e`` is ``src(col_idx[e])``, a fixed skewing map
of the drawn column index into ``[0, nv)`` (identity, quadratic ``c*c/nv``, cubic ``c*c/nv*c/nv`` or a stride map
``c - c % S``), so out-degrees are skewed: low vertex ids are hubs, and many vertices have no out-edge at all
(dangling). In-degrees are the random row-pointer cuts (geometric, mean = the average degree). The function
counts out-degrees, starts from ``rank = 1/nv`` and runs ``K`` iterations of

    contrib[u] = rank[u] / outdeg[u]            (0 for a dangling u)
    dsum       = sum of rank[u] over dangling u  (accumulated in double)
    add        = (rank type)(D * dsum / nv + (1 - D) / nv)
    rank'[v]   = add + D * sum over in-edges e of v of contrib[src(e)]   (accumulated in the rank type)

Parameters varied with the index: the rank type (float/double), the damping D (0.7..0.95), K (5..30), the
skewing map, the average degree (3..16) and the graph size (sized for 100-300 ms of the reference).

Why CPU and GPU agree: the out-degrees are exact integer counts. The dangling sum is accumulated in double in
every variant (tree, shuffle or atomic order: relative differences ~1e-16). Each vertex's gather sums at most a
few hundred positive terms in the rank type; another order (warp lanes, atomics in the push form) changes that
sum by at most (in-degree) * eps relative (~1.3e-5 for float at degree 220), and fused multiply-adds change the
last bit of the update. PageRank is a contraction (factor D): an error made in one step is damped by D in the
next, so over all iterations the difference stays below the per-step bound / (1 - D) < 3e-4 relative for float
(D <= 0.95, in-degrees well below 220 at D = 0.95's sizes). Tolerance: rtol 1e-3 (float) / 1e-9 (double); every
rank is at least (1 - D) / nv > 0, so the relative test is meaningful everywhere.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

DAMPINGS = [0.85, 0.8, 0.9, 0.75, 0.7, 0.875, 0.95, 0.82, 0.88, 0.78]
DEGREES = [3, 4, 6, 8, 12, 16, 5, 10]
SKEWS = ["quadratic", "identity", "cubic", "stride"]


class Spec:
    def __init__(self, t: str, damp: float, iters: int, skew: str, stride: int, fn: str):
        self.t, self.damp, self.iters, self.skew, self.stride, self.fn = t, damp, iters, skew, stride, fn

    def src_body(self) -> str:
        if self.skew == "identity":
            return "    (void)nv;\n    return c;\n"
        if self.skew == "quadratic":
            return "    return (int)(((long long)c * c) / nv);\n"
        if self.skew == "cubic":
            return "    return (int)((((long long)c * c) / nv) * c / nv);\n"
        return f"    (void)nv;\n    return c - c % {self.stride};\n"

    def src_text(self) -> str:
        return {"identity": "src(c) = c",
                "quadratic": "src(c) = (int)((long long)c * c / nv)",
                "cubic": "src(c) = (int)(((long long)c * c / nv) * c / nv)",
                "stride": f"src(c) = c - c % {self.stride}"}[self.skew]

    @property
    def sig(self) -> str:
        return (f'extern "C" void {self.fn}(int nv, int ne, const int* row_ptr, const int* col_idx, '
                f'{self.t}* rank)')

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"typedef {self.t} real;\n#define DAMP {self.damp!r}\n#define ITERS {self.iters}\n\n"
                "__host__ __device__ __forceinline__ int esrc(int c, int nv) {\n" + self.src_body() + "}\n\n"
                "__host__ __device__ __forceinline__ real add_term(double dsum, int nv) {\n"
                "    return (real)(DAMP * dsum / nv + (1.0 - DAMP) / nv);\n}\n\n")


DEGREE_K = ("__global__ void pr_degree(int ne, int nv, const int* ci, int* deg) {\n"
            "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (e < ne) atomicAdd(&deg[esrc(ci[e], nv)], 1);\n}\n\n")
# the degree count and the edge sources, computed once
DEGREE_SRC_K = ("__global__ void pr_degree_src(int ne, int nv, const int* ci, int* deg, int* src) {\n"
                "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (e < ne) { int u = esrc(ci[e], nv); src[e] = u; atomicAdd(&deg[u], 1); }\n}\n\n")
INIT_K = ("__global__ void pr_init(int nv, real* r) {\n"
          "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    if (v < nv) r[v] = (real)(1.0 / nv);\n}\n\n")
WARP_SUM = ("__device__ __forceinline__ double warp_sum(double x) {\n"
            "    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);\n"
            "    return x;\n}\n\n")


def _contrib_tree(bs: int) -> str:
    """Contributions, and each block's dangling mass (tree in shared memory) to part[blockIdx.x]."""
    return ("__global__ void pr_contrib(int nv, const int* deg, const real* r, real* c, double* part) {\n"
            f"    __shared__ double sh[{bs}];\n"
            f"    int u = blockIdx.x * {bs} + threadIdx.x;\n"
            "    double dm = 0.0;\n"
            "    if (u < nv) {\n"
            "        int d = deg[u]; real x = r[u];\n"
            "        if (d == 0) { dm = (double)x; c[u] = (real)0; } else c[u] = x / (real)d;\n"
            "    }\n"
            "    sh[threadIdx.x] = dm;\n    __syncthreads();\n"
            f"    for (int h = {bs // 2}; h > 0; h >>= 1) {{\n"
            "        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            "__global__ void pr_finish(int nb, int nv, const double* part, real* add) {\n"
            "    __shared__ double sh[256];\n"
            "    double s = 0.0;\n"
            "    for (int i = threadIdx.x; i < nb; i += 256) s += part[i];\n"
            "    sh[threadIdx.x] = s;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) *add = add_term(sh[0], nv);\n}\n\n")


CONTRIB_WS = ("__global__ void pr_contrib_ws(int nv, const int* deg, const real* r, real* c, double* dsum) {\n"
              "    int u = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    double dm = 0.0;\n"
              "    if (u < nv) {\n"
              "        int d = deg[u]; real x = r[u];\n"
              "        if (d == 0) { dm = (double)x; c[u] = (real)0; } else c[u] = x / (real)d;\n"
              "    }\n"
              "    dm = warp_sum(dm);\n"
              "    if ((threadIdx.x & 31) == 0 && dm != 0.0) atomicAdd(dsum, dm);\n}\n\n")

GATHER_K = ("__global__ void pr_gather(int nv, const int* rp, const int* ci, const real* c, const real* add,"
            " real* out) {\n"
            "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (v >= nv) return;\n"
            "    real s = (real)0;\n"
            "    for (int e = rp[v]; e < rp[v + 1]; ++e) s += c[esrc(ci[e], nv)];\n"
            "    out[v] = *add + (real)DAMP * s;\n}\n\n")


def _setup(s: Spec, src: bool = False, pinned: bool = False) -> str:
    t = s.t
    out = (s.sig + " {\n    if (nv <= 0) return;\n"
           f"    size_t rb = (size_t)nv * sizeof({t});\n"
           "    int *d_rp, *d_ci, *d_deg;\n    real *d_r, *d_n, *d_c;\n"
           "    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));\n"
           "    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
           "    cudaMalloc(&d_deg, (size_t)nv * sizeof(int));\n"
           "    cudaMalloc(&d_r, rb); cudaMalloc(&d_n, rb); cudaMalloc(&d_c, rb);\n")
    if src:
        out += "    int* d_src; cudaMalloc(&d_src, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
    if pinned:
        out += ("    int *h_rp, *h_ci;\n"
                "    cudaMallocHost(&h_rp, (size_t)(nv + 1) * sizeof(int));\n"
                "    cudaMallocHost(&h_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
                "    memcpy(h_rp, row_ptr, (size_t)(nv + 1) * sizeof(int));\n"
                "    if (ne > 0) memcpy(h_ci, col_idx, (size_t)ne * sizeof(int));\n"
                "    cudaMemcpyAsync(d_rp, h_rp, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice, 0);\n"
                "    if (ne > 0) cudaMemcpyAsync(d_ci, h_ci, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice, 0);\n")
    else:
        out += ("    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
                "    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);\n")
    out += "    cudaMemset(d_deg, 0, (size_t)nv * sizeof(int));\n"
    if src:
        out += "    if (ne > 0) pr_degree_src<<<(ne + 255) / 256, 256>>>(ne, nv, d_ci, d_deg, d_src);\n"
    else:
        out += "    if (ne > 0) pr_degree<<<(ne + 255) / 256, 256>>>(ne, nv, d_ci, d_deg);\n"
    return out


def _tail(s: Spec, extra_free: str = "") -> str:
    return ("    cudaMemcpy(rank, d_r, rb, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_deg); cudaFree(d_r); cudaFree(d_n); cudaFree(d_c);\n"
            + extra_free + "}\n")


SWAP = "        { real* t = d_r; d_r = d_n; d_n = t; }\n"


def _thread_per_vertex(s: Spec) -> str:
    return (s.head() + DEGREE_K + INIT_K + _contrib_tree(256) + GATHER_K + _setup(s)
            + "    int nb = (nv + 255) / 256;\n"
            "    double* d_part; cudaMalloc(&d_part, (size_t)nb * sizeof(double));\n"
            "    real* d_add; cudaMalloc(&d_add, sizeof(real));\n"
            "    pr_init<<<nb, 256>>>(nv, d_r);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        pr_contrib<<<nb, 256>>>(nv, d_deg, d_r, d_c, d_part);\n"
            "        pr_finish<<<1, 256>>>(nb, nv, d_part, d_add);\n"
            "        pr_gather<<<nb, 256>>>(nv, d_rp, d_ci, d_c, d_add, d_n);\n"
            + SWAP + "    }\n"
            + _tail(s, "    cudaFree(d_part); cudaFree(d_add);\n"))


def _warp_per_vertex(s: Spec) -> str:
    return (s.head() + WARP_SUM + DEGREE_SRC_K + INIT_K + CONTRIB_WS
            + "__global__ void pr_gather_warp(int nv, const int* __restrict__ rp, const int* __restrict__ src,"
            " const real* __restrict__ c, const double* dsum, real* out) {\n"
            "    int w = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (w >= nv) return;  // the whole warp leaves together\n"
            "    real s = (real)0;\n"
            "    int e1 = rp[w + 1];\n"
            "    for (int e = rp[w] + lane; e < e1; e += 32) s += c[src[e]];\n"
            "    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);\n"
            "    if (lane == 0) out[w] = add_term(*dsum, nv) + (real)DAMP * s;\n}\n\n"
            + _setup(s, src=True)
            + "    double* d_dsum; cudaMalloc(&d_dsum, sizeof(double));\n"
            "    pr_init<<<(nv + 255) / 256, 256>>>(nv, d_r);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        cudaMemsetAsync(d_dsum, 0, sizeof(double), 0);\n"
            "        pr_contrib_ws<<<(nv + 255) / 256, 256>>>(nv, d_deg, d_r, d_c, d_dsum);\n"
            "        pr_gather_warp<<<(nv + 7) / 8, 256>>>(nv, d_rp, d_src, d_c, d_dsum, d_n);\n"
            + SWAP + "    }\n"
            + _tail(s, "    cudaFree(d_src); cudaFree(d_dsum);\n"))


def _push_atomics(s: Spec) -> str:
    return (s.head() + WARP_SUM + DEGREE_SRC_K + INIT_K + CONTRIB_WS
            + "__global__ void pr_dst(int nv, const int* rp, int* dst) {\n"
            "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (v < nv) for (int e = rp[v]; e < rp[v + 1]; ++e) dst[e] = v;\n}\n\n"
            "__global__ void pr_push(int ne, const int* src, const int* dst, const real* c, real* acc) {\n"
            "    int e = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (e < ne) { real x = c[src[e]]; if (x != (real)0) atomicAdd(&acc[dst[e]], x); }\n}\n\n"
            "__global__ void pr_update(int nv, const real* acc, const double* dsum, real* out) {\n"
            "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (v < nv) out[v] = add_term(*dsum, nv) + (real)DAMP * acc[v];\n}\n\n"
            + _setup(s, src=True)
            + "    int* d_dst; cudaMalloc(&d_dst, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
            "    double* d_dsum; cudaMalloc(&d_dsum, sizeof(double));\n"
            "    pr_dst<<<(nv + 127) / 128, 128>>>(nv, d_rp, d_dst);\n"
            "    pr_init<<<(nv + 127) / 128, 128>>>(nv, d_r);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        cudaMemsetAsync(d_dsum, 0, sizeof(double), 0);\n"
            "        cudaMemsetAsync(d_n, 0, rb, 0);\n"
            "        pr_contrib_ws<<<(nv + 127) / 128, 128>>>(nv, d_deg, d_r, d_c, d_dsum);\n"
            "        if (ne > 0) pr_push<<<(ne + 127) / 128, 128>>>(ne, d_src, d_dst, d_c, d_n);\n"
            "        pr_update<<<(nv + 127) / 128, 128>>>(nv, d_n, d_dsum, d_n);\n"
            + SWAP + "    }\n"
            + _tail(s, "    cudaFree(d_src); cudaFree(d_dst); cudaFree(d_dsum);\n"))


def _in_loop_transfers(s: Spec) -> str:
    return (s.head() + DEGREE_K + _contrib_tree(128) + GATHER_K + _setup(s)
            + "    int nb = (nv + 127) / 128;\n"
            "    double* d_part; cudaMalloc(&d_part, (size_t)nb * sizeof(double));\n"
            "    real* d_add; cudaMalloc(&d_add, sizeof(real));\n"
            "    for (int v = 0; v < nv; ++v) rank[v] = (real)(1.0 / nv);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        cudaMemcpy(d_r, rank, rb, cudaMemcpyHostToDevice);\n"
            "        pr_contrib<<<nb, 128>>>(nv, d_deg, d_r, d_c, d_part);\n"
            "        pr_finish<<<1, 256>>>(nb, nv, d_part, d_add);\n"
            "        pr_gather<<<nb, 128>>>(nv, d_rp, d_ci, d_c, d_add, d_n);\n"
            "        cudaMemcpy(rank, d_n, rb, cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_deg); cudaFree(d_r); cudaFree(d_n); cudaFree(d_c);\n"
            "    cudaFree(d_part); cudaFree(d_add);\n}\n")


def _fused(s: Spec) -> str:
    return (s.head() + WARP_SUM + DEGREE_K
            + "__global__ void pr_init_dangling(int nv, const int* deg, real* r, double* dsum0) {\n"
            "    int u = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    double dm = 0.0;\n"
            "    if (u < nv) { real x = (real)(1.0 / nv); r[u] = x; if (deg[u] == 0) dm = (double)x; }\n"
            "    dm = warp_sum(dm);\n"
            "    if ((threadIdx.x & 31) == 0 && dm != 0.0) atomicAdd(dsum0, dm);\n}\n\n"
            "/* one kernel per iteration: contributions computed on the fly, and the new ranks' dangling mass\n"
            "   accumulated for the next iteration */\n"
            "__global__ void pr_fused(int nv, const int* __restrict__ rp, const int* __restrict__ ci,"
            " const int* __restrict__ deg, const real* r, const double* dsum_in, double* dsum_out, real* out) {\n"
            "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    double dm = 0.0;\n"
            "    if (v < nv) {\n"
            "        real s = (real)0;\n"
            "        for (int e = rp[v]; e < rp[v + 1]; ++e) {\n"
            "            int u = esrc(ci[e], nv); int d = deg[u];\n"
            "            if (d != 0) s += r[u] / (real)d;\n"
            "        }\n"
            "        real x = add_term(*dsum_in, nv) + (real)DAMP * s;\n"
            "        out[v] = x;\n"
            "        if (deg[v] == 0) dm = (double)x;\n"
            "    }\n"
            "    dm = warp_sum(dm);\n"
            "    if ((threadIdx.x & 31) == 0 && dm != 0.0) atomicAdd(dsum_out, dm);\n}\n\n"
            + _setup(s)
            + "    double* d_dsum; cudaMalloc(&d_dsum, (ITERS + 1) * sizeof(double));\n"
            "    cudaMemset(d_dsum, 0, (ITERS + 1) * sizeof(double));\n"
            "    int nb = (nv + 255) / 256;\n"
            "    pr_init_dangling<<<nb, 256>>>(nv, d_deg, d_r, d_dsum);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        pr_fused<<<nb, 256>>>(nv, d_rp, d_ci, d_deg, d_r, d_dsum + it, d_dsum + it + 1, d_n);\n"
            + SWAP + "    }\n"
            + _tail(s, "    cudaFree(d_dsum);\n"))


def _host_dangling(s: Spec) -> str:
    return (s.head() + DEGREE_K + INIT_K
            + "__global__ void pr_contrib_only(int nv, const int* deg, const real* r, real* c) {\n"
            "    int u = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (u < nv) { int d = deg[u]; c[u] = d == 0 ? (real)0 : r[u] / (real)d; }\n}\n\n"
            "__global__ void pr_gather_arg(int nv, const int* rp, const int* ci, const real* c, real add,"
            " real* out) {\n"
            "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (v >= nv) return;\n"
            "    real s = (real)0;\n"
            "    for (int e = rp[v]; e < rp[v + 1]; ++e) s += c[esrc(ci[e], nv)];\n"
            "    out[v] = add + (real)DAMP * s;\n}\n\n"
            + _setup(s)
            + "    int* h_deg = (int*)malloc((size_t)nv * sizeof(int));\n"
            "    cudaMemcpy(h_deg, d_deg, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    int nb = (nv + 255) / 256;\n"
            "    pr_init<<<nb, 256>>>(nv, d_r);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        cudaMemcpy(rank, d_r, rb, cudaMemcpyDeviceToHost);\n"
            "        double dsum = 0.0;\n"
            "        for (int u = 0; u < nv; ++u) if (h_deg[u] == 0) dsum += (double)rank[u];\n"
            "        pr_contrib_only<<<nb, 256>>>(nv, d_deg, d_r, d_c);\n"
            "        pr_gather_arg<<<nb, 256>>>(nv, d_rp, d_ci, d_c, add_term(dsum, nv), d_n);\n"
            + SWAP + "    }\n"
            "    free(h_deg);\n"
            + _tail(s))


def _grid_stride_pinned(s: Spec) -> str:
    return (s.head() + DEGREE_SRC_K
            + "__global__ void pr_init_gs(int nv, real* r) {\n"
            "    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x)\n"
            "        r[v] = (real)(1.0 / nv);\n}\n\n"
            "__global__ void pr_contrib_gs(int nv, const int* __restrict__ deg, const real* __restrict__ r,"
            " real* c, double* part) {\n"
            "    __shared__ double sh[512];\n"
            "    double dm = 0.0;\n"
            "    for (int u = blockIdx.x * blockDim.x + threadIdx.x; u < nv; u += gridDim.x * blockDim.x) {\n"
            "        int d = __ldg(deg + u); real x = __ldg(r + u);\n"
            "        if (d == 0) { dm += (double)x; c[u] = (real)0; } else c[u] = x / (real)d;\n"
            "    }\n"
            "    sh[threadIdx.x] = dm;\n    __syncthreads();\n"
            "    for (int h = 256; h > 0; h >>= 1) {\n"
            "        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            "__global__ void pr_gather_gs(int nv, int nb, const int* __restrict__ rp, const int* __restrict__ src,"
            " const real* __restrict__ c, const double* __restrict__ part, real* out) {\n"
            "    __shared__ real add;\n"
            "    if (threadIdx.x == 0) { double d = 0.0; for (int i = 0; i < nb; ++i) d += part[i]; "
            "add = add_term(d, nv); }\n"
            "    __syncthreads();\n"
            "    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {\n"
            "        real s = (real)0;\n"
            "        int e1 = __ldg(rp + v + 1);\n"
            "        for (int e = __ldg(rp + v); e < e1; ++e) s += __ldg(c + __ldg(src + e));\n"
            "        out[v] = add + (real)DAMP * s;\n"
            "    }\n}\n\n"
            + _setup(s, src=True, pinned=True)
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int nb = sms * 2; int need = (nv + 511) / 512; if (nb > need) nb = need; if (nb < 1) nb = 1;\n"
            "    double* d_part; cudaMalloc(&d_part, (size_t)nb * sizeof(double));\n"
            "    pr_init_gs<<<nb, 512>>>(nv, d_r);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        pr_contrib_gs<<<nb, 512>>>(nv, d_deg, d_r, d_c, d_part);\n"
            "        pr_gather_gs<<<nb, 512>>>(nv, nb, d_rp, d_src, d_c, d_part, d_n);\n"
            + SWAP + "    }\n"
            + _tail(s, "    cudaFree(d_src); cudaFree(d_part); cudaFreeHost(h_rp); cudaFreeHost(h_ci);\n"))


def _single_block(s: Spec) -> str:
    return (s.head()
            + "__global__ void pr_block(int nv, int ne, const int* rp, const int* ci, int* deg, real* ra, real* rb_,"
            " real* c) {\n"
            "    __shared__ double sh[1024];\n"
            "    __shared__ real add;\n"
            "    int tid = threadIdx.x;\n"
            "    for (int e = tid; e < ne; e += 1024) atomicAdd(&deg[esrc(ci[e], nv)], 1);\n"
            "    for (int v = tid; v < nv; v += 1024) ra[v] = (real)(1.0 / nv);\n"
            "    __syncthreads();\n"
            "    real* cur = ra; real* nxt = rb_;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        double dm = 0.0;\n"
            "        for (int u = tid; u < nv; u += 1024) {\n"
            "            int d = deg[u]; real x = cur[u];\n"
            "            if (d == 0) { dm += (double)x; c[u] = (real)0; } else c[u] = x / (real)d;\n"
            "        }\n"
            "        sh[tid] = dm;\n        __syncthreads();\n"
            "        for (int h = 512; h > 0; h >>= 1) {\n"
            "            if (tid < h) sh[tid] += sh[tid + h];\n"
            "            __syncthreads();\n        }\n"
            "        if (tid == 0) add = add_term(sh[0], nv);\n"
            "        __syncthreads();\n"
            "        for (int v = tid; v < nv; v += 1024) {\n"
            "            real s = (real)0;\n"
            "            for (int e = rp[v]; e < rp[v + 1]; ++e) s += c[esrc(ci[e], nv)];\n"
            "            nxt[v] = add + (real)DAMP * s;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        real* t = cur; cur = nxt; nxt = t;\n"
            "    }\n}\n\n"
            + s.sig + " {\n    if (nv <= 0) return;\n"
            f"    size_t rb = (size_t)nv * sizeof({s.t});\n"
            "    int *d_rp, *d_ci, *d_deg;\n    real *d_a, *d_b, *d_c;\n"
            "    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));\n"
            "    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
            "    cudaMalloc(&d_deg, (size_t)nv * sizeof(int));\n"
            "    cudaMalloc(&d_a, rb); cudaMalloc(&d_b, rb); cudaMalloc(&d_c, rb);\n"
            "    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);\n"
            "    cudaMemset(d_deg, 0, (size_t)nv * sizeof(int));\n"
            "    pr_block<<<1, 1024>>>(nv, ne, d_rp, d_ci, d_deg, d_a, d_b, d_c);\n"
            "    cudaMemcpy(rank, (ITERS % 2 == 0) ? d_a : d_b, rb, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_deg); cudaFree(d_a); cudaFree(d_b); cudaFree(d_c);\n}\n")


def _reference(s: Spec) -> str:
    t = s.t
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"#define DAMP {s.damp!r}\n#define ITERS {s.iters}\n\n"
            "static inline int esrc(int c, int nv) {\n" + s.src_body() + "}\n\n"
            f"void {s.fn}(int nv, int ne, const int* row_ptr, const int* col_idx, {t}* rank) {{\n"
            "    if (nv <= 0) return;\n"
            "    int* deg = (int*)calloc((size_t)nv, sizeof(int));\n"
            f"    {t}* contrib = ({t}*)malloc((size_t)nv * sizeof({t}));\n"
            f"    {t}* buf = ({t}*)malloc((size_t)nv * sizeof({t}));\n"
            "    for (int e = 0; e < ne; ++e) deg[esrc(col_idx[e], nv)]++;\n"
            f"    {t}* cur = rank; {t}* nxt = buf;\n"
            f"    for (int v = 0; v < nv; ++v) cur[v] = ({t})(1.0 / nv);\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        double dsum = 0.0;\n"
            "        for (int u = 0; u < nv; ++u) {\n"
            f"            if (deg[u] == 0) {{ dsum += (double)cur[u]; contrib[u] = ({t})0; }}\n"
            f"            else contrib[u] = cur[u] / ({t})deg[u];\n"
            "        }\n"
            f"        const {t} add = ({t})(DAMP * dsum / nv + (1.0 - DAMP) / nv);\n"
            "        for (int v = 0; v < nv; ++v) {\n"
            f"            {t} s = ({t})0;\n"
            "            for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) s += contrib[esrc(col_idx[e], nv)];\n"
            f"            nxt[v] = add + ({t})DAMP * s;\n"
            "        }\n"
            f"        {t}* tmp = cur; cur = nxt; nxt = tmp;\n"
            "    }\n"
            f"    if (cur != rank) memcpy(rank, cur, (size_t)nv * sizeof({t}));\n"
            "    free(deg); free(contrib); free(buf);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    damp = DAMPINGS[index % len(DAMPINGS)]
    iters = int(rng.integers(5, 31))
    skew = SKEWS[(index // 2) % len(SKEWS)]
    stride = int(rng.integers(2, 5))
    deg = DEGREES[(index + int(rng.integers(3))) % len(DEGREES)]
    fn = f"pagerank_{t}"
    s = Spec(t, damp, iters, skew, stride, fn)
    # the reference's cost per iteration is about ne edge gathers (each through the skewing map, whose 64-bit
    # division is the dearest part) plus two passes over the nv vertices: size iters * (ne + 2 nv) for 100-300 ms
    units = {"identity": 2.4e7, "quadratic": 1.5e7, "cubic": 1.1e7, "stride": 1.8e7}[skew]
    units *= 0.85 + 0.3 * float(rng.random())
    ne_time = int(units / (iters * (1.0 + 2.0 / deg)))
    nv_time = ne_time // deg + int(rng.integers(1, 97))
    nv1 = 20000 + int(rng.integers(5000))
    task = {
        "function_name": fn,
        "description": (f"{iters} iterations of PageRank (damping {damp}) with {t} ranks, pull form, on a directed "
                        "graph given by its in-edges in CSR form: row v of (row_ptr, col_idx) lists v's in-edges, "
                        f"and the source of in-edge e is {s.src_text()} for c = col_idx[e] (a skewing map: hubs "
                        "and dangling vertices). Count the out-degrees, start from rank = 1/nv, then per "
                        "iteration: contrib[u] = rank[u] / outdeg[u] (0 when dangling), dsum = sum of the dangling "
                        f"ranks (in double), add = ({t})(D * dsum / nv + (1 - D) / nv), rank'[v] = add + D * sum "
                        "of contrib over v's in-edges (in the rank type). rank holds the final ranks."),
        "returns": "void",
        "args": [
            {"name": "nv", "role": "scalar", "ctype": "int"},
            {"name": "ne", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "nv + 1",
             "dist": {"kind": "offsets", "high": "ne"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "rank", "role": "out", "ctype": t, "length": "nv"},
        ],
        "size_configs": [{"nv": 1000, "ne": 1000 * deg}, {"nv": nv1, "ne": nv1 * deg + int(rng.integers(100))},
                         {"nv": 77, "ne": 150}, {"nv": 5, "ne": 3}, {"nv": nv_time, "ne": ne_time}],
        "tolerance": {"rtol": 1e-3, "atol": 1e-12} if t == "float" else {"rtol": 1e-9, "atol": 1e-18},
        "reference_c": _reference(s),
        "tags": ["graph", "irregular", "iterative", t],
    }
    variants = (
        Variant("thread_per_vertex", ("naive", "thread_per_row", "tree_reduction", "two_level", "multi_pass",
                                      "device_resident", "block_256", "pageable"), _thread_per_vertex(s)),
        Variant("warp_per_vertex", ("block_per_row", "warp_shuffle", "coalesced", "atomics", "multi_pass",
                                    "device_resident", "readonly_cache", "block_256", "pageable"),
                _warp_per_vertex(s)),
        Variant("push_atomics", ("atomics", "naive", "multi_pass", "warp_shuffle", "device_resident", "block_128",
                                 "pageable"), _push_atomics(s)),
        Variant("in_loop_transfers", ("in_loop_transfers", "extra_transfers", "thread_per_row", "tree_reduction",
                                      "two_level", "multi_pass", "block_128", "pageable"), _in_loop_transfers(s)),
        Variant("fused_one_kernel", ("fused", "thread_per_row", "warp_shuffle", "atomics", "device_resident",
                                     "readonly_cache", "block_256", "pageable"), _fused(s)),
        Variant("host_dangling", ("host_compute", "in_loop_transfers", "thread_per_row", "multi_pass", "block_256",
                                  "pageable"), _host_dangling(s)),
        Variant("grid_stride_pinned", ("grid_stride", "readonly_cache", "pinned", "two_level", "tree_reduction",
                                       "multi_pass", "device_resident", "block_512"), _grid_stride_pinned(s)),
        Variant("single_block", ("single_thread", "block_1024", "fused", "tree_reduction", "pageable"),
                _single_block(s)),
    )
    params = {"type": t, "damping": damp, "iters": iters, "skew": skew, "stride": stride, "avg_degree": deg,
              "nv_time": nv_time, "ne_time": ne_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="pagerank_csr",
    description="K PageRank power iterations (pull form, dangling mass, skewed out-degrees) on a CSR graph",
    generate=generate,
    n_tasks=50,
    tags=("graph", "iterative"),
)
