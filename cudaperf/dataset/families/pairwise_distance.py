"""Pairwise distances between point sets P (m x d) and Q (n x d), row-major.

Two modes. "matrix": the m x n matrix of squared-L2, L1 or cosine distances (float/double, tolerance).
"nearest": for every row of P the index of the nearest row of Q (ties -> smallest index) and its distance, with
squared-L2 or L1 on integer-valued float coordinates, so every summation order is exact and indices compare exactly.
Parameters: mode, metric, type, dimension d, and sizes.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n\n"
DIMS_MATRIX = [3, 8, 16, 32, 64, 5, 12, 24, 48, 4]
# matrix tasks 16..39 (task indices 20..49; the first 20 are in the shipped dataset and stay as they are): dimensions
# no earlier task had, each once
DIMS_MATRIX_MORE = [6, 20, 96, 7, 36, 10, 128, 14, 44, 9, 28, 72, 11, 60, 18, 100, 13, 40, 22, 80, 15, 56, 30, 17]
# nearest-row tasks 4..9 (task indices 24, 29, ..., 49); at most 32 (shared_q_tiles' MAXD)
DIMS_NEAR_MORE = [4, 6, 10, 12, 20, 32]
DIMS_NEAR = [2, 3, 4, 8, 16, 32, 6, 10, 20, 12]


def _metric_dev(t: str, metric: str) -> str:
    f = "f" if t == "float" else ""
    upd = {"l2sq": f"{t} df = p - q; s.a0 += df * df;",
           "l1": f"s.a0 += fabs{f}(p - q);",
           "cosine": "s.a0 += p * q; s.a1 += p * p; s.a2 += q * q;"}[metric]
    one = "1.0f" if t == "float" else "1.0"
    fin = f"{one} - s.a0 / (sqrt{f}(s.a1) * sqrt{f}(s.a2))" if metric == "cosine" else "s.a0"
    return (f"struct Acc {{ {t} a0, a1, a2; }};\n"
            "__device__ __forceinline__ void acc_init(Acc& s) { s.a0 = 0; s.a1 = 0; s.a2 = 0; }\n"
            f"__device__ __forceinline__ void acc_add(Acc& s, {t} p, {t} q) {{ {upd} }}\n"
            f"__device__ __forceinline__ {t} acc_fin(const Acc& s) {{ return {fin}; }}\n\n")


# ------------------------------------------------------------------------------------------------ matrix mode

def _mhost(t: str, launch: str, extra_alloc: str = "", extra_free: str = "") -> str:
    return (f'extern "C" void pdist(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n'
            "    if (m <= 0 || n <= 0) return;\n"
            f"    size_t pb = (size_t)m * d * sizeof({t}), qb = (size_t)n * d * sizeof({t}),"
            f" db = (size_t)m * n * sizeof({t});\n"
            f"    {t} *dP, *dQ, *dD;\n"
            "    cudaMalloc(&dP, pb > 0 ? pb : 1); cudaMalloc(&dQ, qb > 0 ? qb : 1); cudaMalloc(&dD, db);\n"
            "    cudaMemcpy(dP, P, pb, cudaMemcpyHostToDevice); cudaMemcpy(dQ, Q, qb, cudaMemcpyHostToDevice);\n"
            + extra_alloc + launch
            + "    cudaMemcpy(D, dD, db, cudaMemcpyDeviceToHost);\n" + extra_free
            + "    cudaFree(dP); cudaFree(dQ); cudaFree(dD);\n}\n")


def _m_naive(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void pd_naive(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int i = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (i >= m || j >= n) return;\n"
            "    Acc s; acc_init(s);\n"
            "    for (int k = 0; k < d; ++k) acc_add(s, P[(size_t)i * d + k], Q[(size_t)j * d + k]);\n"
            "    D[(size_t)i * n + j] = acc_fin(s);\n}\n\n"
            + _mhost(t, "    dim3 block(16, 16), grid((n + 15) / 16, (m + 15) / 16);\n"
                        "    pd_naive<<<grid, block>>>(m, n, d, dP, dQ, dD);\n"))


def _m_swapped(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void pd_swapped(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n"
            "    // x walks the rows of P: neighbouring threads write D a whole row apart\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int j = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (i >= m || j >= n) return;\n"
            "    Acc s; acc_init(s);\n"
            "    for (int k = 0; k < d; ++k) acc_add(s, P[(size_t)i * d + k], Q[(size_t)j * d + k]);\n"
            "    D[(size_t)i * n + j] = acc_fin(s);\n}\n\n"
            + _mhost(t, "    dim3 block(32, 8), grid((m + 31) / 32, (n + 7) / 8);\n"
                        "    pd_swapped<<<grid, block>>>(m, n, d, dP, dQ, dD);\n"))


def _m_tiled(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric) + "#define TB 16\n\n"
            + f"__global__ void pd_tiled(int m, int n, int d, const {t}* __restrict__ P, const {t}* __restrict__ Q,"
            f" {t}* __restrict__ D) {{\n"
            f"    __shared__ {t} sP[TB][TB + 1], sQ[TB][TB + 1];\n"
            "    int tx = threadIdx.x, ty = threadIdx.y;\n"
            "    int i = blockIdx.y * TB + ty, j = blockIdx.x * TB + tx;\n"
            "    int pi = blockIdx.y * TB + ty, qj = blockIdx.x * TB + ty;\n"
            "    Acc s; acc_init(s);\n"
            "    for (int k0 = 0; k0 < d; k0 += TB) {\n"
            "        int k = k0 + tx;\n"
            "        sP[ty][tx] = (pi < m && k < d) ? P[(size_t)pi * d + k] : 0;\n"
            "        sQ[ty][tx] = (qj < n && k < d) ? Q[(size_t)qj * d + k] : 0;\n"
            "        __syncthreads();\n"
            "        int kk = d - k0 < TB ? d - k0 : TB;\n"
            "        for (int c = 0; c < kk; ++c) acc_add(s, sP[ty][c], sQ[tx][c]);\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (i < m && j < n) D[(size_t)i * n + j] = acc_fin(s);\n}\n\n"
            + _mhost(t, "    dim3 block(TB, TB), grid((n + TB - 1) / TB, (m + TB - 1) / TB);\n"
                        "    pd_tiled<<<grid, block>>>(m, n, d, dP, dQ, dD);\n"))


def _m_regblock(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric) + "#define RJ 4\n\n"
            + f"__global__ void pd_rb(int m, int n, int d, const {t}* __restrict__ P, const {t}* __restrict__ Q,"
            f" {t}* __restrict__ D) {{\n"
            "    // each thread: one row i and RJ columns j, j + W, ... (W = threads along x in the grid)\n"
            "    int W = gridDim.x * blockDim.x;\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int i = blockIdx.y;\n"
            "    Acc s[RJ];\n"
            "#pragma unroll\n    for (int c = 0; c < RJ; ++c) acc_init(s[c]);\n"
            "    for (int k = 0; k < d; ++k) {\n"
            f"        {t} p = __ldg(P + (size_t)i * d + k);\n"
            "#pragma unroll\n"
            "        for (int c = 0; c < RJ; ++c) {\n"
            "            int jj = j + c * W;\n"
            "            if (jj < n) acc_add(s[c], p, __ldg(Q + (size_t)jj * d + k));\n"
            "        }\n    }\n"
            "#pragma unroll\n"
            "    for (int c = 0; c < RJ; ++c) if (j + c * W < n) D[(size_t)i * n + j + c * W] = acc_fin(s[c]);\n}\n\n"
            + _mhost(t, "    int cols = (n + RJ - 1) / RJ;\n"
                        "    dim3 grid((cols + 127) / 128, m);\n"
                        "    pd_rb<<<grid, 128>>>(m, n, d, dP, dQ, dD);\n"))


def _m_transposed(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void transpose_q(int n, int d, const {t}* Q, {t}* Qt) {{\n"
            "    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= (long long)n * d) return;\n"
            "    int j = (int)(g / d), k = (int)(g % d);\n"
            "    Qt[(size_t)k * n + j] = Q[g];\n}\n\n"
            + f"__global__ void pd_t(int m, int n, int d, const {t}* __restrict__ P, const {t}* __restrict__ Qt,"
            f" {t}* __restrict__ D) {{\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int i = blockIdx.y;\n"
            "    if (j >= n) return;\n"
            "    Acc s; acc_init(s);\n"
            "    for (int k = 0; k < d; ++k) acc_add(s, P[(size_t)i * d + k], Qt[(size_t)k * n + j]);\n"
            "    D[(size_t)i * n + j] = acc_fin(s);\n}\n\n"
            + _mhost(t, "    long long nd = (long long)n * d;\n"
                        "    if (nd > 0) transpose_q<<<(unsigned)((nd + 255) / 256), 256>>>(n, d, dQ, dQt);\n"
                        "    dim3 grid((n + 255) / 256, m);\n"
                        "    pd_t<<<grid, 256>>>(m, n, d, dP, dQt, dD);\n",
                     f"    {t}* dQt; cudaMalloc(&dQt, qb > 0 ? qb : 1);\n", "    cudaFree(dQt);\n"))


def _m_thread_row(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void pd_rows(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= m) return;\n"
            "    for (int j = 0; j < n; ++j) {\n"
            "        Acc s; acc_init(s);\n"
            "        for (int k = 0; k < d; ++k) acc_add(s, P[(size_t)i * d + k], Q[(size_t)j * d + k]);\n"
            "        D[(size_t)i * n + j] = acc_fin(s);\n"
            "    }\n}\n\n"
            + _mhost(t, "    pd_rows<<<(m + 63) / 64, 64>>>(m, n, d, dP, dQ, dD);\n"))


def _m_block_row(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void pd_brow(int m, int n, int d, const {t}* __restrict__ P, const {t}* __restrict__ Q,"
            f" {t}* __restrict__ D) {{\n"
            f"    extern __shared__ {t} p[];\n"
            "    int i = blockIdx.x;\n"
            "    for (int k = threadIdx.x; k < d; k += blockDim.x) p[k] = P[(size_t)i * d + k];\n"
            "    __syncthreads();\n"
            "    for (int j = threadIdx.x; j < n; j += blockDim.x) {\n"
            "        Acc s; acc_init(s);\n"
            "        for (int k = 0; k < d; ++k) acc_add(s, p[k], Q[(size_t)j * d + k]);\n"
            "        D[(size_t)i * n + j] = acc_fin(s);\n"
            "    }\n}\n\n"
            + _mhost(t, f"    pd_brow<<<m, 256, (size_t)(d > 0 ? d : 1) * sizeof({t})>>>(m, n, d, dP, dQ, dD);\n"))


def _m_chunks(t: str, metric: str) -> str:
    return (HEAD + _metric_dev(t, metric)
            + f"__global__ void pd_chunk(int r0, int rows, int n, int d, const {t}* P, const {t}* Q, {t}* Dc) {{\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int r = blockIdx.y;\n"
            "    if (j >= n || r >= rows) return;\n"
            "    Acc s; acc_init(s);\n"
            "    for (int k = 0; k < d; ++k) acc_add(s, P[(size_t)(r0 + r) * d + k], Q[(size_t)j * d + k]);\n"
            "    Dc[(size_t)r * n + j] = acc_fin(s);\n}\n\n"
            + f'extern "C" void pdist(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n'
            "    if (m <= 0 || n <= 0) return;\n"
            "    const int R = 32;\n"
            f"    size_t pb = (size_t)m * d * sizeof({t}), qb = (size_t)n * d * sizeof({t});\n"
            f"    {t} *dP, *dQ, *dC;\n"
            "    cudaMalloc(&dP, pb > 0 ? pb : 1); cudaMalloc(&dQ, qb > 0 ? qb : 1);\n"
            f"    cudaMalloc(&dC, (size_t)R * n * sizeof({t}));\n"
            "    cudaMemcpy(dP, P, pb, cudaMemcpyHostToDevice); cudaMemcpy(dQ, Q, qb, cudaMemcpyHostToDevice);\n"
            "    for (int r0 = 0; r0 < m; r0 += R) {\n"
            "        int rows = m - r0 < R ? m - r0 : R;\n"
            "        dim3 grid((n + 127) / 128, rows);\n"
            "        pd_chunk<<<grid, 128>>>(r0, rows, n, d, dP, dQ, dC);\n"
            f"        cudaMemcpy(D + (size_t)r0 * n, dC, (size_t)rows * n * sizeof({t}), cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(dP); cudaFree(dQ); cudaFree(dC);\n}\n")


def _m_reference(t: str, metric: str) -> str:
    f = "f" if t == "float" else ""
    one = "1.0f" if t == "float" else "1.0"
    upd = {"l2sq": f"{t} df = p - q; a0 += df * df;", "l1": f"a0 += fabs{f}(p - q);",
           "cosine": "a0 += p * q; a1 += p * p; a2 += q * q;"}[metric]
    fin = f"{one} - a0 / (sqrt{f}(a1) * sqrt{f}(a2))" if metric == "cosine" else "a0"
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"void pdist(int m, int n, int d, const {t}* P, const {t}* Q, {t}* D) {{\n"
            "    for (int i = 0; i < m; ++i)\n"
            "        for (int j = 0; j < n; ++j) {\n"
            f"            {t} a0 = 0, a1 = 0, a2 = 0;\n"
            "            for (int k = 0; k < d; ++k) {\n"
            f"                {t} p = P[(size_t)i * d + k], q = Q[(size_t)j * d + k];\n"
            f"                {upd}\n"
            "            }\n"
            "            (void)a1; (void)a2;\n"
            f"            D[(size_t)i * n + j] = {fin};\n"
            "        }\n}\n")


# ------------------------------------------------------------------------------------------------ nearest mode

NSIG = "int m, int n, int d, const float* P, const float* Q, int* idx, float* best"


def _dist_dev(metric: str) -> str:
    upd = "float df = P[(size_t)i * d + k] - Q[(size_t)j * d + k]; s += df * df;" if metric == "l2sq" else \
        "s += fabsf(P[(size_t)i * d + k] - Q[(size_t)j * d + k]);"
    return ("__device__ __forceinline__ float dist(const float* P, const float* Q, int d, int i, int j) {\n"
            f"    float s = 0.0f;\n    for (int k = 0; k < d; ++k) {{ {upd} }}\n    return s;\n}}\n\n"
            "// (a, ia) better than (b, ib): smaller distance, ties to the smaller index\n"
            "__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {\n"
            "    return a < b || (a == b && ia < ib);\n}\n\n")


def _nhost(launch: str, extra_alloc: str = "", extra_free: str = "") -> str:
    return (f'extern "C" void nearest({NSIG}) {{\n'
            "    if (m <= 0 || n <= 0) return;\n"
            "    size_t pb = (size_t)m * d * sizeof(float), qb = (size_t)n * d * sizeof(float);\n"
            "    float *dP, *dQ, *dB; int* dI;\n"
            "    cudaMalloc(&dP, pb > 0 ? pb : 1); cudaMalloc(&dQ, qb > 0 ? qb : 1);\n"
            "    cudaMalloc(&dB, (size_t)m * sizeof(float)); cudaMalloc(&dI, (size_t)m * sizeof(int));\n"
            "    cudaMemcpy(dP, P, pb, cudaMemcpyHostToDevice); cudaMemcpy(dQ, Q, qb, cudaMemcpyHostToDevice);\n"
            + extra_alloc + launch
            + "    cudaMemcpy(idx, dI, (size_t)m * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    cudaMemcpy(best, dB, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost);\n" + extra_free
            + "    cudaFree(dP); cudaFree(dQ); cudaFree(dB); cudaFree(dI);\n}\n")


def _n_thread_row(metric: str) -> str:
    return (HEAD + _dist_dev(metric)
            + "__global__ void nn_rows(int m, int n, int d, const float* P, const float* Q, int* idx, float* best) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= m) return;\n"
            "    float bd = INFINITY; int bj = -1;\n"
            "    for (int j = 0; j < n; ++j) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "    idx[i] = bj; best[i] = bd;\n}\n\n"
            + _nhost("    nn_rows<<<(m + 127) / 128, 128>>>(m, n, d, dP, dQ, dI, dB);\n"))


def _n_shared_q(metric: str) -> str:
    upd = "float df = p[k] - sq[c * d + k]; s += df * df;" if metric == "l2sq" else "s += fabsf(p[k] - sq[c * d + k]);"
    return (HEAD + "#define TQ 64\n#define MAXD 32\n\n"
            + "__global__ void nn_tiled(int m, int n, int d, const float* __restrict__ P, const float* __restrict__ Q,"
            " int* idx, float* best) {\n"
            "    __shared__ float sq[TQ * MAXD];\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    float p[MAXD];\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < MAXD; ++k) p[k] = (i < m && k < d) ? P[(size_t)i * d + k] : 0.0f;\n"
            "    float bd = INFINITY; int bj = -1;\n"
            "    for (int j0 = 0; j0 < n; j0 += TQ) {\n"
            "        int cnt = n - j0 < TQ ? n - j0 : TQ;\n"
            "        for (int e = threadIdx.x; e < cnt * d; e += blockDim.x) sq[e] = Q[(size_t)j0 * d + e];\n"
            "        __syncthreads();\n"
            "        for (int c = 0; c < cnt; ++c) {\n"
            "            float s = 0.0f;\n"
            "#pragma unroll\n"
            f"            for (int k = 0; k < MAXD; ++k) {{ if (k < d) {{ {upd} }} }}\n"
            "            if (s < bd) { bd = s; bj = j0 + c; }\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (i < m) { idx[i] = bj; best[i] = bd; }\n}\n\n"
            + _nhost("    nn_tiled<<<(m + 255) / 256, 256>>>(m, n, d, dP, dQ, dI, dB);\n"))


def _n_warp(metric: str) -> str:
    return (HEAD + _dist_dev(metric)
            + "__global__ void nn_warp(int m, int n, int d, const float* __restrict__ P, const float* __restrict__ Q,"
            " int* idx, float* best) {\n"
            "    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (row >= m) return;  // whole warps leave together\n"
            "    int i = (int)row;\n"
            "    float bd = INFINITY; int bj = 0x7fffffff;\n"
            "    for (int j = lane; j < n; j += 32) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "#pragma unroll\n"
            "    for (int off = 16; off > 0; off >>= 1) {\n"
            "        float od = __shfl_down_sync(0xffffffffu, bd, off);\n"
            "        int oj = __shfl_down_sync(0xffffffffu, bj, off);\n"
            "        if (better(od, oj, bd, bj)) { bd = od; bj = oj; }\n"
            "    }\n"
            "    if (lane == 0) { idx[i] = bj; best[i] = bd; }\n}\n\n"
            + _nhost("    unsigned blocks = (unsigned)(((long long)m * 32 + 127) / 128);\n"
                     "    nn_warp<<<blocks, 128>>>(m, n, d, dP, dQ, dI, dB);\n"))


def _n_block(metric: str) -> str:
    return (HEAD + _dist_dev(metric)
            + "__global__ void nn_block(int m, int n, int d, const float* P, const float* Q, int* idx, float* best) {\n"
            "    __shared__ float sd[256];\n    __shared__ int sj[256];\n"
            "    int i = blockIdx.x;\n"
            "    float bd = INFINITY; int bj = 0x7fffffff;\n"
            "    for (int j = threadIdx.x; j < n; j += blockDim.x) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "    sd[threadIdx.x] = bd; sj[threadIdx.x] = bj;\n"
            "    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (threadIdx.x < h && better(sd[threadIdx.x + h], sj[threadIdx.x + h], sd[threadIdx.x], sj[threadIdx.x])) {\n"
            "            sd[threadIdx.x] = sd[threadIdx.x + h]; sj[threadIdx.x] = sj[threadIdx.x + h];\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (threadIdx.x == 0) { idx[i] = sj[0]; best[i] = sd[0]; }\n}\n\n"
            + _nhost("    nn_block<<<m, 256>>>(m, n, d, dP, dQ, dI, dB);\n"))


def _n_two_level(metric: str) -> str:
    return (HEAD + _dist_dev(metric) + "#define SPLIT 16\n\n"
            + "__global__ void nn_part(int m, int n, int d, const float* P, const float* Q, float* pd, int* pj) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int part = blockIdx.y;\n"
            "    if (i >= m) return;\n"
            "    int chunk = (n + SPLIT - 1) / SPLIT;\n"
            "    int j0 = part * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;\n"
            "    float bd = INFINITY; int bj = 0x7fffffff;\n"
            "    for (int j = j0; j < j1; ++j) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "    pd[(size_t)part * m + i] = bd; pj[(size_t)part * m + i] = bj;\n}\n\n"
            "__global__ void nn_final(int m, const float* pd, const int* pj, int* idx, float* best) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= m) return;\n"
            "    float bd = INFINITY; int bj = 0x7fffffff;\n"
            "    for (int p = 0; p < SPLIT; ++p) {\n"
            "        float s = pd[(size_t)p * m + i]; int j = pj[(size_t)p * m + i];\n"
            "        if (better(s, j, bd, bj)) { bd = s; bj = j; }\n"
            "    }\n"
            "    idx[i] = bj; best[i] = bd;\n}\n\n"
            + _nhost("    dim3 grid((m + 127) / 128, SPLIT);\n"
                     "    nn_part<<<grid, 128>>>(m, n, d, dP, dQ, ppd, ppj);\n"
                     "    nn_final<<<(m + 127) / 128, 128>>>(m, ppd, ppj, dI, dB);\n",
                     "    float* ppd; int* ppj;\n"
                     "    cudaMalloc(&ppd, (size_t)SPLIT * m * sizeof(float)); cudaMalloc(&ppj, (size_t)SPLIT * m * sizeof(int));\n",
                     "    cudaFree(ppd); cudaFree(ppj);\n"))


def _n_host_argmin(metric: str) -> str:
    return (HEAD + _dist_dev(metric)
            + "__global__ void nn_matrix(int m, int n, int d, const float* P, const float* Q, float* Dm) {\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int i = blockIdx.y;\n"
            "    if (j >= n) return;\n"
            "    Dm[(size_t)i * n + j] = dist(P, Q, d, i, j);\n}\n\n"
            + f'extern "C" void nearest({NSIG}) {{\n'
            "    if (m <= 0 || n <= 0) return;\n"
            "    size_t pb = (size_t)m * d * sizeof(float), qb = (size_t)n * d * sizeof(float);\n"
            "    size_t mb = (size_t)m * n * sizeof(float);\n"
            "    float *dP, *dQ, *dM;\n"
            "    cudaMalloc(&dP, pb > 0 ? pb : 1); cudaMalloc(&dQ, qb > 0 ? qb : 1); cudaMalloc(&dM, mb);\n"
            "    cudaMemcpy(dP, P, pb, cudaMemcpyHostToDevice); cudaMemcpy(dQ, Q, qb, cudaMemcpyHostToDevice);\n"
            "    dim3 grid((n + 255) / 256, m);\n"
            "    nn_matrix<<<grid, 256>>>(m, n, d, dP, dQ, dM);\n"
            "    float* hM = (float*)malloc(mb);\n"
            "    cudaMemcpy(hM, dM, mb, cudaMemcpyDeviceToHost);\n"
            "    // the arg-min runs on the host over the whole copied matrix\n"
            "    for (int i = 0; i < m; ++i) {\n"
            "        const float* row = hM + (size_t)i * n;\n"
            "        float bd = row[0]; int bj = 0;\n"
            "        for (int j = 1; j < n; ++j) if (row[j] < bd) { bd = row[j]; bj = j; }\n"
            "        idx[i] = bj; best[i] = bd;\n"
            "    }\n"
            "    free(hM);\n"
            "    cudaFree(dP); cudaFree(dQ); cudaFree(dM);\n}\n")


def _n_atomics(metric: str) -> str:
    return (HEAD + _dist_dev(metric) + "#define JC 64\n\n"
            + "__global__ void nn_atomic(int m, int n, int d, const float* P, const float* Q, unsigned long long* key) {\n"
            "    // distances are >= 0, so their bit patterns order like the values; the index breaks ties\n"
            "    int i = blockIdx.y;\n"
            "    int j0 = (blockIdx.x * blockDim.x + threadIdx.x) * JC;\n"
            "    if (j0 >= n) return;\n"
            "    int j1 = j0 + JC < n ? j0 + JC : n;\n"
            "    float bd = INFINITY; int bj = j0;\n"
            "    for (int j = j0; j < j1; ++j) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "    unsigned long long k = ((unsigned long long)__float_as_uint(bd) << 32) | (unsigned)bj;\n"
            "    atomicMin(key + i, k);\n}\n\n"
            "__global__ void nn_decode(int m, const unsigned long long* key, int* idx, float* best) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= m) return;\n"
            "    unsigned long long k = key[i];\n"
            "    idx[i] = (int)(unsigned)(k & 0xffffffffull); best[i] = __uint_as_float((unsigned)(k >> 32));\n}\n\n"
            + _nhost("    cudaMemset(dK, 0xFF, (size_t)m * sizeof(unsigned long long));\n"
                     "    int per = (n + JC - 1) / JC;\n"
                     "    dim3 grid((per + 63) / 64, m);\n"
                     "    nn_atomic<<<grid, 64>>>(m, n, d, dP, dQ, dK);\n"
                     "    nn_decode<<<(m + 255) / 256, 256>>>(m, dK, dI, dB);\n",
                     "    unsigned long long* dK; cudaMalloc(&dK, (size_t)m * sizeof(unsigned long long));\n",
                     "    cudaFree(dK);\n"))


def _n_small_grid(metric: str) -> str:
    return (HEAD + _dist_dev(metric)
            + "__global__ void nn_gs(int m, int n, int d, const float* P, const float* Q, int* idx, float* best) {\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {\n"
            "        float bd = INFINITY; int bj = -1;\n"
            "        for (int j = 0; j < n; ++j) { float s = dist(P, Q, d, i, j); if (s < bd) { bd = s; bj = j; } }\n"
            "        idx[i] = bj; best[i] = bd;\n"
            "    }\n}\n\n"
            + _nhost("    nn_gs<<<64, 32>>>(m, n, d, dP, dQ, dI, dB);\n"))


def _n_reference(metric: str) -> str:
    upd = "float df = P[(size_t)i * d + k] - Q[(size_t)j * d + k]; s += df * df;" if metric == "l2sq" else \
        "s += fabsf(P[(size_t)i * d + k] - Q[(size_t)j * d + k]);"
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"void nearest({NSIG}) {{\n"
            "    for (int i = 0; i < m; ++i) {\n"
            "        float bd = 0.0f; int bj = -1;\n"
            "        for (int j = 0; j < n; ++j) {\n"
            "            float s = 0.0f;\n"
            f"            for (int k = 0; k < d; ++k) {{ {upd} }}\n"
            "            if (bj < 0 || s < bd) { bd = s; bj = j; }\n"
            "        }\n"
            "        idx[i] = bj; best[i] = bd;\n"
            "    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    mode = "matrix" if index % 5 != 4 else "nearest"  # 16 matrix tasks, 4 nearest-neighbour tasks
    if mode == "matrix":
        k = index - index // 5  # 0..15
        t = "float" if k % 2 == 0 else "double"
        metric = ["l2sq", "l1", "cosine"][k % 3]
        d = DIMS_MATRIX[k % len(DIMS_MATRIX)] if k < 16 else DIMS_MATRIX_MORE[k - 16]
        work = 120e6 * float(rng.uniform(0.8, 1.2)) * (0.6 if metric == "cosine" else 1.0)
        pairs = work / d
        m_t = int((pairs * float(rng.choice([0.5, 1.0, 2.0]))) ** 0.5) + int(rng.integers(1, 17))
        n_t = int(pairs / m_t) + int(rng.integers(1, 17))
        dist = {"kind": "uniform", "low": -1.0, "high": 1.0} if metric == "cosine" else \
            {"kind": "uniform", "low": 0.0, "high": 1.0}
        tol = {"rtol": 1e-4, "atol": 1e-4} if t == "float" else {"rtol": 1e-10, "atol": 1e-10}
        mname = {"l2sq": "squared Euclidean distance sum_k (p_k - q_k)^2",
                 "l1": "L1 distance sum_k |p_k - q_k|",
                 "cosine": "cosine distance 1 - (p.q) / (sqrt(p.p) * sqrt(q.q))"}[metric]
        task = {
            "function_name": "pdist",
            "description": (f"Pairwise {mname} between the rows of P (m x d) and Q (n x d), {t}, row-major; "
                            f"D[i*n+j] = dist(P[i], Q[j]) (D is m x n), sums in increasing k; d = {d}."),
            "returns": "void",
            "args": [
                {"name": "m", "role": "scalar", "ctype": "int"},
                {"name": "n", "role": "scalar", "ctype": "int"},
                {"name": "d", "role": "scalar", "ctype": "int", "dist": {"kind": "const", "value": d}},
                {"name": "P", "role": "in", "ctype": t, "length": "m * d", "dist": dist},
                {"name": "Q", "role": "in", "ctype": t, "length": "n * d", "dist": dist},
                {"name": "D", "role": "out", "ctype": t, "length": "m * n"},
            ],
            "size_configs": [{"m": 5, "n": 7}, {"m": 33, "n": 129}, {"m": 200, "n": 301}, {"m": m_t, "n": n_t}],
            "tolerance": tol,
            "reference_c": _m_reference(t, metric),
            "tags": ["distance", "compute-bound", t],
        }
        variants = (
            Variant("naive_2d", ("naive", "coalesced", "block_256", "pageable"), _m_naive(t, metric)),
            Variant("swapped_2d", ("naive", "strided", "block_256"), _m_swapped(t, metric)),
            Variant("tiled_shared", ("shared_tiling", "coalesced", "block_256"), _m_tiled(t, metric)),
            Variant("register_blocked", ("register_blocking", "unrolled", "readonly_cache", "block_128"),
                    _m_regblock(t, metric)),
            Variant("transposed_q", ("multi_pass", "coalesced", "block_256"), _m_transposed(t, metric)),
            Variant("thread_per_row", ("thread_per_row", "strided", "small_grid", "block_64"),
                    _m_thread_row(t, metric)),
            Variant("block_per_row", ("block_per_row", "shared_tiling", "coalesced", "block_256"),
                    _m_block_row(t, metric)),
            Variant("row_chunk_copies", ("many_launches", "in_loop_transfers", "block_128"), _m_chunks(t, metric)),
        )
        params = {"mode": mode, "type": t, "metric": metric, "d": d, "m": m_t, "n": n_t}
        return GeneratedTask(task, variants, params)

    k = index // 5  # 0..3
    metric = "l2sq" if k % 2 == 0 else "l1"
    d = [2, 3, 8, 16][k] if k < 4 else DIMS_NEAR_MORE[k - 4]
    work = 110e6 * float(rng.uniform(0.8, 1.2))
    pairs = work / d
    m_t = int((pairs * 0.5) ** 0.5) + int(rng.integers(1, 17))
    n_t = int(pairs / m_t) + int(rng.integers(1, 17))
    hi = int(rng.choice([8, 16, 32]))
    dist = {"kind": "randint", "low": 0, "high": hi}
    mname = "squared Euclidean distance sum_k (p_k - q_k)^2" if metric == "l2sq" else "L1 distance sum_k |p_k - q_k|"
    task = {
        "function_name": "nearest",
        "description": (f"For every row i of P (m x d floats) find the row j of Q (n x d floats) with the smallest "
                        f"{mname}; idx[i] = j (ties go to the smallest j), best[i] = that distance. Coordinates are "
                        f"small integers stored as floats, so distances are exact; d = {d}."),
        "returns": "void",
        "args": [
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "d", "role": "scalar", "ctype": "int", "dist": {"kind": "const", "value": d}},
            {"name": "P", "role": "in", "ctype": "float", "length": "m * d", "dist": dist},
            {"name": "Q", "role": "in", "ctype": "float", "length": "n * d", "dist": dist},
            {"name": "idx", "role": "out", "ctype": "int", "length": "m"},
            {"name": "best", "role": "out", "ctype": "float", "length": "m"},
        ],
        "size_configs": [{"m": 5, "n": 1}, {"m": 37, "n": 129}, {"m": 301, "n": 257}, {"m": m_t, "n": n_t}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _n_reference(metric),
        "tags": ["distance", "nearest-neighbour", "compute-bound", "float"],
    }
    variants = (
        Variant("thread_per_row", ("thread_per_row", "naive", "block_128"), _n_thread_row(metric)),
        Variant("shared_q_tiles", ("thread_per_row", "shared_tiling", "unrolled", "block_256"), _n_shared_q(metric)),
        Variant("warp_per_row", ("block_per_row", "warp_shuffle", "coalesced", "block_128"), _n_warp(metric)),
        Variant("block_per_row", ("block_per_row", "tree_reduction", "block_256"), _n_block(metric)),
        Variant("two_level_split", ("two_level", "multi_pass", "block_128"), _n_two_level(metric)),
        Variant("host_argmin", ("host_compute", "extra_transfers", "block_256"), _n_host_argmin(metric)),
        Variant("packed_atomic_min", ("atomics", "block_64"), _n_atomics(metric)),
        Variant("tiny_grid_stride", ("grid_stride", "small_grid", "block_32"), _n_small_grid(metric)),
    )
    return GeneratedTask(task, variants, {"mode": mode, "metric": metric, "d": d, "m": m_t, "n": n_t, "high": hi})


FAMILY = Family(
    name="pairwise_distance",
    description="pairwise L2sq/L1/cosine distance matrices (float/double) and exact nearest-row search",
    generate=generate,
    n_tasks=50,
    tags=("distance",),
)
