"""A few Lloyd (k-means) iterations: assign each of n points in D dimensions to its nearest of K centroids, then
move every centroid to the mean of its points (an empty cluster keeps its old centroid).

Per iteration: ``assign[i] = argmin_k dist2(p_i, c_k)`` with ties going to the smaller k, where ``dist2`` is
accumulated in double over j = 0..D-1 in order, each product and each sum rounded (``s = s + df * df`` with
``df = (double)p[j] - (double)c[j]``, no fused multiply-add); then ``c_k = (centroid type)(sum of the points of k /
count)``, the sums in double. Outputs: the last iteration's assignments (exact) and the updated centroids
(``cent`` is in/out: the initial centroids in, the final ones out). Parameters varied with the index: the point
type (float with integer values, int or short), the centroid type (float/double), D (2..32), K (3..48), the
number of iterations (1..4), the coordinate range and n (sized so the reference does about 1e8 distance terms).

Why CPU and GPU agree, exactly: the points have integer coordinates, so every cluster's coordinate sum is an
integer below 2^53 and exact in double in any order (atomics, block partials, the host); the centroid is then one
correctly rounded division and one conversion, the same bits on both sides. The distance is computed in the same
order with each step rounded (the variants use __dmul_rn/__dadd_rn so nvcc cannot contract them), so it is
bitwise equal too, and equal distances break to the smaller index on both sides. In the first iteration (integer
centroids) the distances are small integers, exact even with fused multiply-adds; later a build with FMA could
only differ where two distances agree to ~1e-16 relative without being equal (probability ~ n*K*1e-16). The
centroid tolerance (rtol 1e-6) is therefore a formality; the assignments are compared exactly.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

POINT_TYPES = ["float", "int", "short", "float", "int"]
DIMS = [2, 3, 4, 5, 8, 12, 16, 24, 32, 6, 10, 20]
KS = [3, 4, 5, 8, 10, 12, 16, 20, 24, 32, 40, 48]
RANGES = [20, 100, 500, 1000, 50, 250]


class Spec:
    def __init__(self, pt: str, ct: str, d: int, k: int, iters: int, fn: str):
        self.pt, self.ct, self.d, self.k, self.iters, self.fn = pt, ct, d, k, iters, fn

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}(int n, const {self.pt}* pts, {self.ct}* cent, int* assign)'

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"typedef {self.pt} pt_t;\ntypedef {self.ct} ct_t;\n"
                f"#define D {self.d}\n#define K {self.k}\n#define ITERS {self.iters}\n\n"
                "/* squared distance in double, each product and sum rounded (bitwise equal to the C reference) */\n"
                "__device__ __forceinline__ double dist2(const pt_t* p, const ct_t* c) {\n"
                "    double s = 0.0;\n"
                "    for (int j = 0; j < D; ++j) { double df = (double)p[j] - (double)c[j]; "
                "s = __dadd_rn(s, __dmul_rn(df, df)); }\n"
                "    return s;\n}\n\n")


SETUP = ("    if (n <= 0) return;\n"
         "    size_t pb = (size_t)n * D * sizeof(pt_t), cb = (size_t)K * D * sizeof(ct_t);\n"
         "    pt_t* d_p; ct_t* d_c; int* d_a; double* d_sum; int* d_cnt;\n"
         "    cudaMalloc(&d_p, pb); cudaMalloc(&d_c, cb); cudaMalloc(&d_a, (size_t)n * sizeof(int));\n"
         "    cudaMalloc(&d_sum, (size_t)K * D * sizeof(double)); cudaMalloc(&d_cnt, K * sizeof(int));\n"
         "    cudaMemcpy(d_p, pts, pb, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(d_c, cent, cb, cudaMemcpyHostToDevice);\n")
TAIL = ("    cudaMemcpy(cent, d_c, cb, cudaMemcpyDeviceToHost);\n"
        "    cudaMemcpy(assign, d_a, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "    cudaFree(d_p); cudaFree(d_c); cudaFree(d_a); cudaFree(d_sum); cudaFree(d_cnt);\n}\n")
ZERO = ("        cudaMemsetAsync(d_sum, 0, (size_t)K * D * sizeof(double), 0);\n"
        "        cudaMemsetAsync(d_cnt, 0, K * sizeof(int), 0);\n")

ASSIGN_GLOBAL = ("__global__ void km_assign(int n, const pt_t* p, const ct_t* c, int* a) {\n"
                 "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (i >= n) return;\n"
                 "    const pt_t* pi = p + (size_t)i * D;\n"
                 "    int best = 0; double bd = 0.0;\n"
                 "    for (int k = 0; k < K; ++k) {\n"
                 "        double s = dist2(pi, c + k * D);\n"
                 "        if (k == 0 || s < bd) { bd = s; best = k; }\n"
                 "    }\n"
                 "    a[i] = best;\n}\n\n")
ASSIGN_SHARED = ("__global__ void km_assign_sh(int n, const pt_t* p, const ct_t* c, int* a) {\n"
                 "    __shared__ ct_t sc[K * D];\n"
                 "    for (int t = threadIdx.x; t < K * D; t += blockDim.x) sc[t] = c[t];\n"
                 "    __syncthreads();\n"
                 "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (i >= n) return;\n"
                 "    const pt_t* pi = p + (size_t)i * D;\n"
                 "    int best = 0; double bd = 0.0;\n"
                 "    for (int k = 0; k < K; ++k) {\n"
                 "        double s = dist2(pi, sc + k * D);\n"
                 "        if (k == 0 || s < bd) { bd = s; best = k; }\n"
                 "    }\n"
                 "    a[i] = best;\n}\n\n")
UPDATE_ATOMIC = ("__global__ void km_accum(int n, const pt_t* p, const int* a, double* sum, int* cnt) {\n"
                 "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if (i >= n) return;\n"
                 "    int k = a[i];\n"
                 "    atomicAdd(&cnt[k], 1);\n"
                 "    for (int j = 0; j < D; ++j) atomicAdd(&sum[k * D + j], (double)p[(size_t)i * D + j]);\n}\n\n")
FINALIZE = ("__global__ void km_finalize(const double* sum, const int* cnt, ct_t* c) {\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t >= K * D) return;\n"
            "    int m = cnt[t / D];\n"
            "    if (m > 0) c[t] = (ct_t)(sum[t] / (double)m);\n}\n\n")
FIN_LAUNCH = "        km_finalize<<<(K * D + 127) / 128, 128>>>(d_sum, d_cnt, d_c);\n"


def _naive_atomics(s: Spec) -> str:
    return (s.head() + ASSIGN_GLOBAL + UPDATE_ATOMIC + FINALIZE + s.sig + " {\n" + SETUP
            + "    int nb = (n + 255) / 256;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        km_assign<<<nb, 256>>>(n, d_p, d_c, d_a);\n" + ZERO
            + "        km_accum<<<nb, 256>>>(n, d_p, d_a, d_sum, d_cnt);\n" + FIN_LAUNCH
            + "    }\n" + TAIL)


def _shared_two_level(s: Spec) -> str:
    return (s.head() + ASSIGN_SHARED
            + "__global__ void km_accum_sh(int n, const pt_t* p, const int* a, double* sum, int* cnt) {\n"
            "    __shared__ double ss[K * D];\n"
            "    __shared__ int sn[K];\n"
            "    for (int t = threadIdx.x; t < K * D; t += blockDim.x) ss[t] = 0.0;\n"
            "    for (int t = threadIdx.x; t < K; t += blockDim.x) sn[t] = 0;\n"
            "    __syncthreads();\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) {\n"
            "        int k = a[i];\n"
            "        atomicAdd(&sn[k], 1);\n"
            "        for (int j = 0; j < D; ++j) atomicAdd(&ss[k * D + j], (double)p[(size_t)i * D + j]);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int t = threadIdx.x; t < K * D; t += blockDim.x) if (sn[t / D] > 0) atomicAdd(&sum[t], ss[t]);\n"
            "    for (int t = threadIdx.x; t < K; t += blockDim.x) if (sn[t] > 0) atomicAdd(&cnt[t], sn[t]);\n}\n\n"
            + FINALIZE + s.sig + " {\n" + SETUP
            + "    int nb = (n + 127) / 128;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        km_assign_sh<<<nb, 128>>>(n, d_p, d_c, d_a);\n" + ZERO
            + "        km_accum_sh<<<nb, 128>>>(n, d_p, d_a, d_sum, d_cnt);\n" + FIN_LAUNCH
            + "    }\n" + TAIL)


def _constant(s: Spec) -> str:
    return (s.head()
            + "__constant__ ct_t c_cent[K * D];\n\n"
            "__global__ void km_assign_const(int n, const pt_t* __restrict__ p, int* a) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    const pt_t* pi = p + (size_t)i * D;\n"
            "    int best = 0; double bd = 0.0;\n"
            "    for (int k = 0; k < K; ++k) {\n"
            "        double s = 0.0;\n"
            "        for (int j = 0; j < D; ++j) { double df = (double)pi[j] - (double)c_cent[k * D + j]; "
            "s = __dadd_rn(s, __dmul_rn(df, df)); }\n"
            "        if (k == 0 || s < bd) { bd = s; best = k; }\n"
            "    }\n"
            "    a[i] = best;\n}\n\n"
            + UPDATE_ATOMIC + FINALIZE + s.sig + " {\n" + SETUP
            + "    int nb = (n + 511) / 512;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        cudaMemcpyToSymbol(c_cent, d_c, cb, 0, cudaMemcpyDeviceToDevice);\n"
            "        km_assign_const<<<nb, 512>>>(n, d_p, d_a);\n" + ZERO
            + "        km_accum<<<nb, 512>>>(n, d_p, d_a, d_sum, d_cnt);\n" + FIN_LAUNCH
            + "    }\n" + TAIL)


def _fused_partials(s: Spec) -> str:
    return (s.head()
            + "/* assignment and per-block partial sums in one grid-stride kernel; a second kernel combines them */\n"
            "__global__ void km_assign_partial(int n, const pt_t* p, const ct_t* c, int* a, double* part,"
            " int* pcnt) {\n"
            "    __shared__ ct_t sc[K * D];\n"
            "    __shared__ double ss[K * D];\n"
            "    __shared__ int sn[K];\n"
            "    for (int t = threadIdx.x; t < K * D; t += blockDim.x) { sc[t] = c[t]; ss[t] = 0.0; }\n"
            "    for (int t = threadIdx.x; t < K; t += blockDim.x) sn[t] = 0;\n"
            "    __syncthreads();\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
            "        const pt_t* pi = p + (size_t)i * D;\n"
            "        int best = 0; double bd = 0.0;\n"
            "        for (int k = 0; k < K; ++k) {\n"
            "            double s = dist2(pi, sc + k * D);\n"
            "            if (k == 0 || s < bd) { bd = s; best = k; }\n"
            "        }\n"
            "        a[i] = best;\n"
            "        atomicAdd(&sn[best], 1);\n"
            "        for (int j = 0; j < D; ++j) atomicAdd(&ss[best * D + j], (double)pi[j]);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (int t = threadIdx.x; t < K * D; t += blockDim.x) part[(size_t)blockIdx.x * K * D + t] = ss[t];\n"
            "    for (int t = threadIdx.x; t < K; t += blockDim.x) pcnt[blockIdx.x * K + t] = sn[t];\n}\n\n"
            "__global__ void km_combine(int nb, const double* part, const int* pcnt, ct_t* c) {\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t >= K * D) return;\n"
            "    int k = t / D, m = 0; double s = 0.0;\n"
            "    for (int b = 0; b < nb; ++b) { s += part[(size_t)b * K * D + t]; m += pcnt[b * K + k]; }\n"
            "    if (m > 0) c[t] = (ct_t)(s / (double)m);\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int nb = (n + 255) / 256; if (nb > 2 * sms) nb = 2 * sms; if (nb < 1) nb = 1;\n"
            "    double* d_part; int* d_pcnt;\n"
            "    cudaMalloc(&d_part, (size_t)nb * K * D * sizeof(double));\n"
            "    cudaMalloc(&d_pcnt, (size_t)nb * K * sizeof(int));\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        km_assign_partial<<<nb, 256>>>(n, d_p, d_c, d_a, d_part, d_pcnt);\n"
            "        km_combine<<<(K * D + 63) / 64, 64>>>(nb, d_part, d_pcnt, d_c);\n"
            "    }\n"
            "    cudaFree(d_part); cudaFree(d_pcnt);\n" + TAIL)


def _host_update(s: Spec) -> str:
    return (s.head() + ASSIGN_GLOBAL + s.sig + " {\n" + SETUP
            + "    double* hs = (double*)malloc((size_t)K * D * sizeof(double));\n"
            "    int hc[K];\n"
            "    int nb = (n + 127) / 128;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        km_assign<<<nb, 128>>>(n, d_p, d_c, d_a);\n"
            "        cudaMemcpy(assign, d_a, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        memset(hs, 0, (size_t)K * D * sizeof(double)); memset(hc, 0, sizeof(hc));\n"
            "        for (int i = 0; i < n; ++i) {\n"
            "            int k = assign[i]; hc[k]++;\n"
            "            for (int j = 0; j < D; ++j) hs[k * D + j] += (double)pts[(size_t)i * D + j];\n"
            "        }\n"
            "        for (int k = 0; k < K; ++k) if (hc[k] > 0)\n"
            "            for (int j = 0; j < D; ++j) cent[k * D + j] = (ct_t)(hs[k * D + j] / (double)hc[k]);\n"
            "        cudaMemcpy(d_c, cent, cb, cudaMemcpyHostToDevice);\n"
            "    }\n"
            "    free(hs);\n"
            "    cudaFree(d_p); cudaFree(d_c); cudaFree(d_a); cudaFree(d_sum); cudaFree(d_cnt);\n}\n")


def _many_launches(s: Spec) -> str:
    return (s.head()
            + "/* one launch per centroid: keep the best distance so far per point */\n"
            "__global__ void km_one_centroid(int n, int k, const pt_t* p, const ct_t* c, double* bd, int* a) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    double s = dist2(p + (size_t)i * D, c + k * D);\n"
            "    if (k == 0 || s < bd[i]) { bd[i] = s; a[i] = k; }\n}\n\n"
            + UPDATE_ATOMIC + FINALIZE + s.sig + " {\n" + SETUP
            + "    double* d_bd; cudaMalloc(&d_bd, (size_t)n * sizeof(double));\n"
            "    int nb = (n + 63) / 64;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        for (int k = 0; k < K; ++k) km_one_centroid<<<nb, 64>>>(n, k, d_p, d_c, d_bd, d_a);\n" + ZERO
            + "        km_accum<<<nb, 64>>>(n, d_p, d_a, d_sum, d_cnt);\n" + FIN_LAUNCH
            + "    }\n"
            "    cudaFree(d_bd);\n" + TAIL)


def _block_per_cluster(s: Spec) -> str:
    return (s.head() + ASSIGN_SHARED
            + "/* one block per cluster scans every point: fixed-order sums, warp shuffles, no atomics */\n"
            "__global__ void km_cluster_block(int n, const pt_t* p, const int* a, ct_t* c) {\n"
            "    __shared__ double ws[8][D];\n"
            "    __shared__ int wn[8];\n"
            "    int k = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    double acc[D];\n"
            "    for (int j = 0; j < D; ++j) acc[j] = 0.0;\n"
            "    int m = 0;\n"
            "    for (int i = threadIdx.x; i < n; i += 256) {\n"
            "        if (a[i] != k) continue;\n"
            "        ++m;\n"
            "        for (int j = 0; j < D; ++j) acc[j] += (double)p[(size_t)i * D + j];\n"
            "    }\n"
            "    for (int o = 16; o > 0; o >>= 1) {\n"
            "        m += __shfl_down_sync(0xffffffffu, m, o);\n"
            "        for (int j = 0; j < D; ++j) acc[j] += __shfl_down_sync(0xffffffffu, acc[j], o);\n"
            "    }\n"
            "    if (lane == 0) { wn[w] = m; for (int j = 0; j < D; ++j) ws[w][j] = acc[j]; }\n"
            "    __syncthreads();\n"
            "    if (threadIdx.x == 0) {\n"
            "        int tm = 0; for (int q = 0; q < 8; ++q) tm += wn[q];\n"
            "        if (tm > 0) for (int j = 0; j < D; ++j) {\n"
            "            double t = 0.0; for (int q = 0; q < 8; ++q) t += ws[q][j];\n"
            "            c[k * D + j] = (ct_t)(t / (double)tm);\n"
            "        }\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    int nb = (n + 255) / 256;\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        km_assign_sh<<<nb, 256>>>(n, d_p, d_c, d_a);\n"
            "        km_cluster_block<<<K, 256>>>(n, d_p, d_a, d_c);\n"
            "    }\n" + TAIL)


def _single_block(s: Spec) -> str:
    return (s.head()
            + "__global__ void km_block(int n, const pt_t* p, ct_t* c, int* a) {\n"
            "    __shared__ double ss[K * D];\n"
            "    __shared__ int sn[K];\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        for (int t = threadIdx.x; t < K * D; t += blockDim.x) ss[t] = 0.0;\n"
            "        for (int t = threadIdx.x; t < K; t += blockDim.x) sn[t] = 0;\n"
            "        __syncthreads();\n"
            "        for (int i = threadIdx.x; i < n; i += blockDim.x) {\n"
            "            const pt_t* pi = p + (size_t)i * D;\n"
            "            int best = 0; double bd = 0.0;\n"
            "            for (int k = 0; k < K; ++k) {\n"
            "                double s = dist2(pi, c + k * D);\n"
            "                if (k == 0 || s < bd) { bd = s; best = k; }\n"
            "            }\n"
            "            a[i] = best;\n"
            "            atomicAdd(&sn[best], 1);\n"
            "            for (int j = 0; j < D; ++j) atomicAdd(&ss[best * D + j], (double)pi[j]);\n"
            "        }\n"
            "        __syncthreads();\n"
            "        for (int t = threadIdx.x; t < K * D; t += blockDim.x) {\n"
            "            int m = sn[t / D];\n"
            "            if (m > 0) c[t] = (ct_t)(ss[t] / (double)m);\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    km_block<<<1, 1024>>>(n, d_p, d_c, d_a);\n" + TAIL)


def _reference(s: Spec) -> str:
    pt, ct = s.pt, s.ct
    return ("#include <stdlib.h>\n#include <string.h>\n\n"
            f"#define D {s.d}\n#define K {s.k}\n#define ITERS {s.iters}\n\n"
            f"void {s.fn}(int n, const {pt}* pts, {ct}* cent, int* assign) {{\n"
            "    double* sum = (double*)malloc((size_t)K * D * sizeof(double));\n"
            "    int cnt[K];\n"
            "    for (int it = 0; it < ITERS; ++it) {\n"
            "        for (int i = 0; i < n; ++i) {\n"
            f"            const {pt}* p = pts + (size_t)i * D;\n"
            "            int best = 0; double bd = 0.0;\n"
            "            for (int k = 0; k < K; ++k) {\n"
            f"                const {ct}* c = cent + k * D;\n"
            "                double s = 0.0;\n"
            "                for (int j = 0; j < D; ++j) { double df = (double)p[j] - (double)c[j]; s += df * df; }\n"
            "                if (k == 0 || s < bd) { bd = s; best = k; }\n"
            "            }\n"
            "            assign[i] = best;\n"
            "        }\n"
            "        memset(sum, 0, (size_t)K * D * sizeof(double)); memset(cnt, 0, sizeof(cnt));\n"
            "        for (int i = 0; i < n; ++i) {\n"
            "            int k = assign[i]; cnt[k]++;\n"
            "            for (int j = 0; j < D; ++j) sum[k * D + j] += (double)pts[(size_t)i * D + j];\n"
            "        }\n"
            "        for (int k = 0; k < K; ++k) if (cnt[k] > 0)\n"
            f"            for (int j = 0; j < D; ++j) cent[k * D + j] = ({ct})(sum[k * D + j] / (double)cnt[k]);\n"
            "    }\n"
            "    free(sum);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    pt = POINT_TYPES[index % len(POINT_TYPES)]
    ct = "float" if (index // 5) % 2 == 0 else "double"
    d = DIMS[(index + int(rng.integers(4))) % len(DIMS)]
    k = KS[(3 * index + int(rng.integers(3))) % len(KS)]
    while k * d > 1536:
        k //= 2
    iters = 1 + (index + int(rng.integers(2))) % 4
    while k * d * iters < 96 and k < 48:  # enough work per point: more centroids, not more iterations
        k = min(48, 2 * k)
    while k * d * iters < 96:
        iters += 1
    rng_r = RANGES[(index + int(rng.integers(6))) % len(RANGES)]
    fn = f"kmeans_{pt}_{ct}"
    s = Spec(pt, ct, d, k, iters, fn)
    # about 1e8 (point, centroid, dimension) distance terms at the timing size, at most 4e6 points
    work = 1.0e8 * (0.8 + 0.4 * float(rng.random()))
    n_time = min(4_000_000, int(work / (k * d * iters))) + int(rng.integers(1, 255))
    task = {
        "function_name": fn,
        "description": (f"{iters} Lloyd iteration(s) of k-means with K = {k} centroids in D = {d} dimensions: n "
                        f"points pts (n x D row-major {pt}, integer coordinates in [-{rng_r}, {rng_r}]) and the "
                        f"centroids cent (K x D {ct}, in/out). Per iteration: assign[i] = the k minimizing "
                        "dist2 = sum_j ((double)p[j] - (double)c[j])^2, accumulated in double in order j = 0..D-1 "
                        "with each product and sum rounded (no fused multiply-add), ties to the smaller k; then "
                        f"each centroid with points becomes ({ct})(sum of its points in double / count); an empty "
                        "cluster keeps its centroid. Outputs: the last iteration's assignments and the final "
                        "centroids."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "pts", "role": "in", "ctype": pt, "length": f"n * {d}",
             "dist": {"kind": "randint", "low": -rng_r, "high": rng_r + 1}},
            {"name": "cent", "role": "inout", "ctype": ct, "length": k * d,
             "dist": {"kind": "randint", "low": -rng_r, "high": rng_r + 1}},
            {"name": "assign", "role": "out", "ctype": "int", "length": "n"},
        ],
        "size_configs": [{"n": 1000}, {"n": 333}, {"n": 7}, {"n": 20000 + int(rng.integers(1, 999))},
                         {"n": n_time}],
        "tolerance": {"rtol": 1e-6, "atol": 1e-9},
        "reference_c": _reference(s),
        "tags": ["clustering", "reduction", "compute-bound", pt, ct],
    }
    variants = (
        Variant("naive_atomics", ("naive", "atomics", "multi_pass", "device_resident", "block_256", "pageable"),
                _naive_atomics(s)),
        Variant("shared_two_level", ("shared_tiling", "atomics", "two_level", "multi_pass", "device_resident",
                                     "block_128", "pageable"), _shared_two_level(s)),
        Variant("constant_centroids", ("constant_memory", "atomics", "readonly_cache", "multi_pass",
                                       "device_resident", "block_512", "pageable"), _constant(s)),
        Variant("fused_block_partials", ("fused", "grid_stride", "shared_tiling", "two_level", "atomics",
                                         "device_resident", "block_256", "pageable"), _fused_partials(s)),
        Variant("host_update", ("host_compute", "in_loop_transfers", "naive", "block_128", "pageable"),
                _host_update(s)),
        Variant("many_launches", ("many_launches", "naive", "atomics", "multi_pass", "block_64", "pageable"),
                _many_launches(s)),
        Variant("block_per_cluster", ("block_per_row", "warp_shuffle", "shared_tiling", "multi_pass",
                                      "branch_divergent", "block_256", "pageable"), _block_per_cluster(s)),
        Variant("single_block", ("single_thread", "block_1024", "fused", "atomics", "shared_tiling", "pageable"),
                _single_block(s)),
    )
    params = {"point_type": pt, "centroid_type": ct, "D": d, "K": k, "iters": iters, "range": rng_r,
              "n_time": n_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="kmeans_step",
    description="Lloyd iterations of k-means: exact nearest-centroid assignment and centroid means (integer points)",
    generate=generate,
    n_tasks=50,
    tags=("reduction", "compute-bound"),
)
