"""Single-head attention, row by row: for each of q query rows, scores against its l key rows (dot products over
D), a numerically stable softmax, then the weighted sum of the value rows (float).

For query row i with allowed keys j in [lo_i, hi_i) (all keys, a causal mask aligned to the last key, or a
window around the query's relative position): ``s_j = (sum_t Q[i][t] * K[j][t]) * SCALE``, ``m = max_j s_j``,
``p_j = expf(s_j - m)``, ``out[i][:] = (sum_j p_j * V[j][:]) / (sum_j p_j)``. Parameters varied with the index:
the head size D (16..128), the value size DV (16..128), the mask, the key layout (l x D rows, or D x l
transposed), the scale SCALE (a temperature over sqrt(D)), the input range and the sizes (l up to 4096 at the
timing size; the reference does about 1e8 multiply-adds there).

Why CPU and GPU agree within the tolerance: the reference accumulates everything in float in index order; a
GPU variant reassociates the dot products (lanes split D), the max (exact in any order), the denominator and the
weighted sums (trees, shuffles, tiles), and the online-softmax variants rescale partial sums by expf(m_old -
m_new) as the maximum grows. Each reassociated float sum of N terms differs by about sqrt(N) * 6e-8 of the sum
of its absolute values (at most N * 6e-8): a score's absolute error stays below ~1e-5 (scores are O(1..10)),
which changes each weight p_j by that relative amount; the weighted sum of <= 4096 values in [-1, 1] with
positive weights, divided by the denominator, then differs by ~1e-5 of the largest |V|. Inputs are scaled so
scores spread over a few units (the softmax is neither flat nor one-hot) and every row has at least one key.
Tolerance: rtol 1e-3, atol 5e-5 (outputs are convex combinations of values in [-1, 1], mean |out| 0.06..0.23,
so atol is relative to the output's scale); the float reference itself differs from a double-precision
evaluation by at most 3e-6 on sampled tasks (q = 300, l = 1500), so two float evaluations differ by less.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

DS = [16, 32, 48, 64, 80, 96, 128, 64, 32, 128]
LS = [512, 1024, 1536, 2048, 3000, 4096, 777, 2500, 1200, 3500]
MASKS = ["none", "causal", "window", "none", "causal"]
WINDOWS = [16, 32, 64, 128, 200]
TEMPS = [1.0, 0.5, 2.0, 1.5, 0.75]


class Spec:
    def __init__(self, d: int, dv: int, mask: str, window: int, kt: bool, scale: float, fn: str):
        self.d, self.dv, self.mask, self.window, self.kt, self.scale, self.fn = d, dv, mask, window, kt, scale, fn

    @property
    def scale_lit(self) -> str:
        return f"{float(np.float32(self.scale))!r}f"

    def range_body(self) -> str:
        if self.mask == "none":
            return "    (void)i; (void)q;\n    *lo = 0; *hi = l;\n"
        if self.mask == "causal":
            return ("    int h = l - q + 1 + i;\n"
                    "    if (h < 1) h = 1;\n    if (h > l) h = l;\n"
                    "    *lo = 0; *hi = h;\n")
        return ("    int c = (int)(((long long)i * l) / q);\n"
                f"    int a = c - {self.window}, b = c + {self.window} + 1;\n"
                "    *lo = a < 0 ? 0 : a; *hi = b > l ? l : b;\n")

    def maxk_body(self) -> str:
        if self.mask == "window":
            return f"    return l < {2 * self.window + 1} ? l : {2 * self.window + 1};\n"
        return "    return l;\n"

    def range_text(self) -> str:
        if self.mask == "none":
            return "every row attends to all l keys"
        if self.mask == "causal":
            return "row i attends to keys j < clamp(l - q + 1 + i, 1, l) (causal, aligned to the last key)"
        return (f"row i attends to keys j with |j - c_i| <= {self.window}, c_i = (int)((long long)i * l / q) "
                "(a window around the row's relative position)")

    def key_macro(self) -> str:
        if self.kt:
            return "#define KEY(Km, j, t, l) (Km)[(size_t)(t) * (l) + (j)]\n"
        return "#define KEY(Km, j, t, l) (Km)[(size_t)(j) * D + (t)]\n"

    @property
    def sig(self) -> str:
        return (f'extern "C" void {self.fn}(int q, int l, const float* Qm, const float* Km, const float* Vm, '
                "float* out)")

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"#define D {self.d}\n#define DV {self.dv}\n#define SCALE {self.scale_lit}\n"
                "#define DR ((D + 31) / 32)\n#define DVR ((DV + 31) / 32)\n#define NEG_BIG (-3.0e38f)\n"
                + self.key_macro() + "\n"
                "__host__ __device__ __forceinline__ void key_range(int i, int q, int l, int* lo, int* hi) {\n"
                + self.range_body() + "}\n\n"
                "/* the most keys one row attends to: the width of a row's score scratch */\n"
                "__host__ __device__ __forceinline__ int max_keys(int l) {\n"
                + self.maxk_body() + "}\n\n"
                "__device__ __forceinline__ float warp_max(float v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
                "    return v;\n}\n\n"
                "__device__ __forceinline__ float warp_sum(float v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")


SETUP = ("    if (q <= 0 || l <= 0) return;\n"
         "    size_t qb = (size_t)q * D * sizeof(float), kb = (size_t)l * D * sizeof(float);\n"
         "    size_t vb = (size_t)l * DV * sizeof(float), ob = (size_t)q * DV * sizeof(float);\n"
         "    float *d_q, *d_k, *d_v, *d_o;\n"
         "    cudaMalloc(&d_q, qb); cudaMalloc(&d_k, kb); cudaMalloc(&d_v, vb); cudaMalloc(&d_o, ob);\n"
         "    cudaMemcpy(d_q, Qm, qb, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(d_k, Km, kb, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(d_v, Vm, vb, cudaMemcpyHostToDevice);\n")
TAIL = ("    cudaMemcpy(out, d_o, ob, cudaMemcpyDeviceToHost);\n"
        "    cudaFree(d_q); cudaFree(d_k); cudaFree(d_v); cudaFree(d_o);\n}\n")


def _thread_per_row(s: Spec) -> str:
    return (s.head()
            + "__global__ void att_thread(int q, int l, const float* Qm, const float* Km, const float* Vm,"
            " float* sc, float* out) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= q) return;\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    const float* qi = Qm + (size_t)i * D; float* si = sc + (size_t)i * max_keys(l);\n"
            "    float mx = NEG_BIG;\n"
            "    for (int j = lo; j < hi; ++j) {\n"
            "        float d = 0.0f;\n"
            "        for (int t = 0; t < D; ++t) d += qi[t] * KEY(Km, j, t, l);\n"
            "        d *= SCALE; si[j - lo] = d; mx = fmaxf(mx, d);\n"
            "    }\n"
            "    float den = 0.0f;\n"
            "    for (int j = lo; j < hi; ++j) { float p = expf(si[j - lo] - mx); si[j - lo] = p; den += p; }\n"
            "    float* oi = out + (size_t)i * DV;\n"
            "    for (int t = 0; t < DV; ++t) {\n"
            "        float a = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) a += si[j - lo] * Vm[(size_t)j * DV + t];\n"
            "        oi[t] = a / den;\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    float* d_s; cudaMalloc(&d_s, (size_t)q * max_keys(l) * sizeof(float));\n"
            "    att_thread<<<(q + 127) / 128, 128>>>(q, l, d_q, d_k, d_v, d_s, d_o);\n"
            "    cudaFree(d_s);\n" + TAIL)


def _block_per_row(s: Spec) -> str:
    return (s.head()
            + "/* one block per query row: the row and its scores in shared memory, tree reductions */\n"
            "__global__ void att_block(int q, int l, const float* Qm, const float* Km, const float* Vm,"
            " float* out) {\n"
            "    extern __shared__ float smem[];\n"
            "    float* sq = smem; float* red = smem + D; float* ss = smem + D + 256;\n"
            "    int i = blockIdx.x, tid = threadIdx.x;\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    for (int t = tid; t < D; t += 256) sq[t] = Qm[(size_t)i * D + t];\n"
            "    __syncthreads();\n"
            "    float mx = NEG_BIG;\n"
            "    for (int j = lo + tid; j < hi; j += 256) {\n"
            "        float d = 0.0f;\n"
            "        for (int t = 0; t < D; ++t) d += sq[t] * KEY(Km, j, t, l);\n"
            "        d *= SCALE; ss[j - lo] = d; mx = fmaxf(mx, d);\n"
            "    }\n"
            "    red[tid] = mx;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] = fmaxf(red[tid], red[tid + h]);\n"
            "        __syncthreads();\n    }\n"
            "    mx = red[0];\n    __syncthreads();\n"
            "    float den = 0.0f;\n"
            "    for (int j = lo + tid; j < hi; j += 256) { float p = expf(ss[j - lo] - mx); ss[j - lo] = p; den += p; }\n"
            "    red[tid] = den;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] += red[tid + h];\n"
            "        __syncthreads();\n    }\n"
            "    den = red[0];\n"
            "    for (int t = tid; t < DV; t += 256) {\n"
            "        float a = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) a += ss[j - lo] * Vm[(size_t)j * DV + t];\n"
            "        out[(size_t)i * DV + t] = a / den;\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    size_t sm = (size_t)(D + 256 + max_keys(l)) * sizeof(float);\n"
            "    if (sm > 48 * 1024) cudaFuncSetAttribute(att_block, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);\n"
            "    att_block<<<q, 256, sm>>>(q, l, d_q, d_k, d_v, d_o);\n" + TAIL)


def _warp_per_row(s: Spec) -> str:
    return (s.head()
            + "__global__ void att_warp(int q, int l, const float* __restrict__ Qm, const float* __restrict__ Km,"
            " const float* __restrict__ Vm, float* sc, float* out) {\n"
            "    int i = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (i >= q) return;  // the whole warp leaves together\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    const float* qi = Qm + (size_t)i * D; float* si = sc + (size_t)i * max_keys(l);\n"
            "    float mx = NEG_BIG;\n"
            "    for (int j = lo + lane; j < hi; j += 32) {\n"
            "        float d = 0.0f;\n"
            "        for (int t = 0; t < D; ++t) d += qi[t] * KEY(Km, j, t, l);\n"
            "        d *= SCALE; si[j - lo] = d; mx = fmaxf(mx, d);\n"
            "    }\n"
            "    mx = warp_max(mx);\n"
            "    float den = 0.0f;\n"
            "    for (int j = lo + lane; j < hi; j += 32) { float p = expf(si[j - lo] - mx); si[j - lo] = p; den += p; }\n"
            "    den = warp_sum(den);\n"
            "    __syncwarp();\n"
            "    for (int t = lane; t < DV; t += 32) {\n"
            "        float a = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) a += si[j - lo] * Vm[(size_t)j * DV + t];\n"
            "        out[(size_t)i * DV + t] = a / den;\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    float* d_s; cudaMalloc(&d_s, (size_t)q * max_keys(l) * sizeof(float));\n"
            "    att_warp<<<(q + 3) / 4, 128>>>(q, l, d_q, d_k, d_v, d_s, d_o);\n"
            "    cudaFree(d_s);\n" + TAIL)


def _online_warp(s: Spec) -> str:
    return (s.head()
            + "/* one pass over the keys per warp: online softmax, lanes own dimensions t = lane + 32 r */\n"
            "__global__ void att_online(int q, int l, const float* __restrict__ Qm, const float* __restrict__ Km,"
            " const float* __restrict__ Vm, float* out) {\n"
            "    int i = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (i >= q) return;\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    float qr[DR], acc[DVR];\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < DR; ++r) { int t = lane + 32 * r; qr[r] = t < D ? Qm[(size_t)i * D + t] : 0.0f; }\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < DVR; ++r) acc[r] = 0.0f;\n"
            "    float m = NEG_BIG, den = 0.0f;\n"
            "    for (int j = lo; j < hi; ++j) {\n"
            "        float part = 0.0f;\n"
            "#pragma unroll\n"
            "        for (int r = 0; r < DR; ++r) { int t = lane + 32 * r; if (t < D) part += qr[r] * KEY(Km, j, t, l); }\n"
            "        float sj = warp_sum(part) * SCALE;  // identical in every lane\n"
            "        const float* vj = Vm + (size_t)j * DV;\n"
            "        if (sj > m) {\n"
            "            float corr = expf(m - sj);\n"
            "            den = den * corr + 1.0f;\n"
            "#pragma unroll\n"
            "            for (int r = 0; r < DVR; ++r) { int t = lane + 32 * r; acc[r] = acc[r] * corr + (t < DV ? vj[t] : 0.0f); }\n"
            "            m = sj;\n"
            "        } else {\n"
            "            float p = expf(sj - m);\n"
            "            den += p;\n"
            "#pragma unroll\n"
            "            for (int r = 0; r < DVR; ++r) { int t = lane + 32 * r; if (t < DV) acc[r] += p * vj[t]; }\n"
            "        }\n"
            "    }\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < DVR; ++r) { int t = lane + 32 * r; if (t < DV) out[(size_t)i * DV + t] = acc[r] / den; }\n"
            "}\n\n"
            + s.sig + " {\n" + SETUP
            + "    att_online<<<(q + 1) / 2, 64>>>(q, l, d_q, d_k, d_v, d_o);\n" + TAIL)


def _tiled(s: Spec) -> str:
    return (s.head()
            + "/* 8 query rows per block (a warp each); tiles of 32 keys and values staged through shared memory\n"
            "   and shared by the 8 rows; online softmax across tiles */\n"
            "__global__ void att_tiled(int q, int l, const float* __restrict__ Qm, const float* __restrict__ Km,"
            " const float* __restrict__ Vm, float* out) {\n"
            "    __shared__ float sK[32][D + 1];\n"
            "    __shared__ float sV[32][DV];\n"
            "    __shared__ float sQ[8][D];\n"
            "    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
            "    int i = blockIdx.x * 8 + w;\n"
            "    bool valid = i < q;\n"
            "    int lo = 0, hi = 0;\n"
            "    if (valid) key_range(i, q, l, &lo, &hi);\n"
            "    int blo = l, bhi = 0;  // the keys any row of the block needs (the same in every thread)\n"
            "    for (int r = 0; r < 8; ++r) {\n"
            "        int ii = blockIdx.x * 8 + r;\n"
            "        if (ii < q) { int a, b; key_range(ii, q, l, &a, &b); if (a < blo) blo = a; if (b > bhi) bhi = b; }\n"
            "    }\n"
            "    for (int t = lane; t < D; t += 32) sQ[w][t] = valid ? Qm[(size_t)i * D + t] : 0.0f;\n"
            "    float acc[DVR];\n"
            "#pragma unroll\n"
            "    for (int r = 0; r < DVR; ++r) acc[r] = 0.0f;\n"
            "    float m = NEG_BIG, den = 0.0f;\n"
            "    for (int j0 = blo; j0 < bhi; j0 += 32) {\n"
            "        __syncthreads();\n"
            "        for (int x = threadIdx.x; x < 32 * D; x += 256) {\n"
            "            int jj = x / D, t = x % D, j = j0 + jj;\n"
            "            sK[jj][t] = j < bhi ? KEY(Km, j, t, l) : 0.0f;\n"
            "        }\n"
            "        for (int x = threadIdx.x; x < 32 * DV; x += 256) {\n"
            "            int jj = x / DV, t = x % DV, j = j0 + jj;\n"
            "            sV[jj][t] = j < bhi ? Vm[(size_t)j * DV + t] : 0.0f;\n"
            "        }\n"
            "        __syncthreads();\n"
            "        int j = j0 + lane;\n"
            "        bool in = valid && j >= lo && j < hi;\n"
            "        float sj = NEG_BIG;\n"
            "        if (in) {\n"
            "            float d = 0.0f;\n"
            "            for (int t = 0; t < D; ++t) d += sQ[w][t] * sK[lane][t];\n"
            "            sj = d * SCALE;\n"
            "        }\n"
            "        float tm = warp_max(sj);\n"
            "        if (tm > NEG_BIG) {  // uniform in the warp: some key of this tile is in the row's range\n"
            "            float mn = fmaxf(m, tm);\n"
            "            float corr = expf(m - mn);\n"
            "            float p = in ? expf(sj - mn) : 0.0f;\n"
            "            den = den * corr + warp_sum(p);\n"
            "#pragma unroll\n"
            "            for (int r = 0; r < DVR; ++r) acc[r] *= corr;\n"
            "            for (int jj = 0; jj < 32; ++jj) {\n"
            "                float pj = __shfl_sync(0xffffffffu, p, jj);\n"
            "                if (pj != 0.0f) {\n"
            "#pragma unroll\n"
            "                    for (int r = 0; r < DVR; ++r) { int t = lane + 32 * r; if (t < DV) acc[r] += pj * sV[jj][t]; }\n"
            "                }\n"
            "            }\n"
            "            m = mn;\n"
            "        }\n"
            "    }\n"
            "    if (valid) {\n"
            "#pragma unroll\n"
            "        for (int r = 0; r < DVR; ++r) { int t = lane + 32 * r; if (t < DV) out[(size_t)i * DV + t] = acc[r] / den; }\n"
            "    }\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    att_tiled<<<(q + 7) / 8, 256>>>(q, l, d_q, d_k, d_v, d_o);\n" + TAIL)


SCORES_K = ("__global__ void att_scores(int q, int l, const float* Qm, const float* Km, float* sc) {\n"
            "    int mk = max_keys(l);\n"
            "    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (x >= (size_t)q * mk) return;\n"
            "    int i = (int)(x / mk);\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    int j = lo + (int)(x % mk);\n"
            "    if (j >= hi) return;\n"
            "    const float* qi = Qm + (size_t)i * D;\n"
            "    float d = 0.0f;\n"
            "    for (int t = 0; t < D; ++t) d += qi[t] * KEY(Km, j, t, l);\n"
            "    sc[x] = d * SCALE;\n}\n\n")
WSUM_K = ("__global__ void att_wsum(int q, int l, const float* p, const float* den, const float* Vm, float* out) {\n"
          "    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    if (x >= (size_t)q * DV) return;\n"
          "    int i = (int)(x / DV), t = (int)(x % DV);\n"
          "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
          "    const float* pi = p + (size_t)i * max_keys(l);\n"
          "    float a = 0.0f;\n"
          "    for (int j = lo; j < hi; ++j) a += pi[j - lo] * Vm[(size_t)j * DV + t];\n"
          "    out[x] = a / den[i];\n}\n\n")


def _host_softmax(s: Spec) -> str:
    return (s.head() + SCORES_K + WSUM_K + s.sig + " {\n" + SETUP
            + "    int mk = max_keys(l);\n"
            "    size_t sb = (size_t)q * mk * sizeof(float);\n"
            "    float *d_s, *d_den;\n"
            "    cudaMalloc(&d_s, sb); cudaMalloc(&d_den, (size_t)q * sizeof(float));\n"
            "    float* hs = (float*)malloc(sb); float* hden = (float*)malloc((size_t)q * sizeof(float));\n"
            "    unsigned nb = (unsigned)(((size_t)q * mk + 255) / 256);\n"
            "    att_scores<<<nb, 256>>>(q, l, d_q, d_k, d_s);\n"
            "    cudaMemcpy(hs, d_s, sb, cudaMemcpyDeviceToHost);\n"
            "    for (int i = 0; i < q; ++i) {\n"
            "        int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "        float* si = hs + (size_t)i * mk;\n"
            "        float mx = si[0];\n"
            "        for (int j = lo + 1; j < hi; ++j) if (si[j - lo] > mx) mx = si[j - lo];\n"
            "        float den = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) { float p = expf(si[j - lo] - mx); si[j - lo] = p; den += p; }\n"
            "        hden[i] = den;\n"
            "    }\n"
            "    cudaMemcpy(d_s, hs, sb, cudaMemcpyHostToDevice);\n"
            "    cudaMemcpy(d_den, hden, (size_t)q * sizeof(float), cudaMemcpyHostToDevice);\n"
            "    att_wsum<<<(unsigned)(((size_t)q * DV + 255) / 256), 256>>>(q, l, d_s, d_den, d_v, d_o);\n"
            "    free(hs); free(hden); cudaFree(d_s); cudaFree(d_den);\n" + TAIL)


def _multi_kernel(s: Spec) -> str:
    return (s.head() + SCORES_K + WSUM_K
            + "__global__ void att_softmax_rows(int q, int l, float* sc, float* den) {\n"
            "    __shared__ float red[512];\n"
            "    int i = blockIdx.x, tid = threadIdx.x;\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    float* si = sc + (size_t)i * max_keys(l);\n"
            "    float mx = NEG_BIG;\n"
            "    for (int j = lo + tid; j < hi; j += 512) mx = fmaxf(mx, si[j - lo]);\n"
            "    red[tid] = mx;\n    __syncthreads();\n"
            "    for (int h = 256; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] = fmaxf(red[tid], red[tid + h]);\n"
            "        __syncthreads();\n    }\n"
            "    mx = red[0];\n    __syncthreads();\n"
            "    float s = 0.0f;\n"
            "    for (int j = lo + tid; j < hi; j += 512) { float p = expf(si[j - lo] - mx); si[j - lo] = p; s += p; }\n"
            "    red[tid] = s;\n    __syncthreads();\n"
            "    for (int h = 256; h > 0; h >>= 1) {\n"
            "        if (tid < h) red[tid] += red[tid + h];\n"
            "        __syncthreads();\n    }\n"
            "    if (tid == 0) den[i] = red[0];\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    int mk = max_keys(l);\n"
            "    size_t sb = (size_t)q * mk * sizeof(float);\n"
            "    float *d_s, *d_den;\n"
            "    cudaMalloc(&d_s, sb); cudaMalloc(&d_den, (size_t)q * sizeof(float));\n"
            "    att_scores<<<(unsigned)(((size_t)q * mk + 511) / 512), 512>>>(q, l, d_q, d_k, d_s);\n"
            "    att_softmax_rows<<<q, 512>>>(q, l, d_s, d_den);\n"
            "    att_wsum<<<(unsigned)(((size_t)q * DV + 511) / 512), 512>>>(q, l, d_s, d_den, d_v, d_o);\n"
            "    cudaFree(d_s); cudaFree(d_den);\n" + TAIL)


def _vectorized(s: Spec) -> str:
    if s.kt:
        kload = ("            part = qv.x * KEY(Km, j, 4 * lane, l) + qv.y * KEY(Km, j, 4 * lane + 1, l)"
                 " + qv.z * KEY(Km, j, 4 * lane + 2, l) + qv.w * KEY(Km, j, 4 * lane + 3, l);\n")
    else:
        kload = ("            float4 kv = reinterpret_cast<const float4*>(Km + (size_t)j * D)[lane];\n"
                 "            part = qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;\n")
    return (s.head()
            + "/* online softmax, a warp per row, lanes own 4 consecutive dimensions (float4 loads; D, DV <= 128 and\n"
            "   multiples of 4) */\n"
            "__global__ void att_vec(int q, int l, const float* __restrict__ Qm, const float* __restrict__ Km,"
            " const float* __restrict__ Vm, float* out) {\n"
            "    int i = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;\n"
            "    if (i >= q) return;\n"
            "    int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "    bool qa = 4 * lane < D, va = 4 * lane < DV;\n"
            "    float4 qv = qa ? reinterpret_cast<const float4*>(Qm + (size_t)i * D)[lane] : make_float4(0.f, 0.f, 0.f, 0.f);\n"
            "    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);\n"
            "    float m = NEG_BIG, den = 0.0f;\n"
            "    for (int j = lo; j < hi; ++j) {\n"
            "        float part = 0.0f;\n"
            "        if (qa) {\n" + kload + "        }\n"
            "        float sj = warp_sum(part) * SCALE;\n"
            "        float4 v = va ? reinterpret_cast<const float4*>(Vm + (size_t)j * DV)[lane] : make_float4(0.f, 0.f, 0.f, 0.f);\n"
            "        if (sj > m) {\n"
            "            float c = expf(m - sj);\n"
            "            den = den * c + 1.0f;\n"
            "            acc.x = acc.x * c + v.x; acc.y = acc.y * c + v.y; acc.z = acc.z * c + v.z; acc.w = acc.w * c + v.w;\n"
            "            m = sj;\n"
            "        } else {\n"
            "            float p = expf(sj - m);\n"
            "            den += p;\n"
            "            acc.x += p * v.x; acc.y += p * v.y; acc.z += p * v.z; acc.w += p * v.w;\n"
            "        }\n"
            "    }\n"
            "    if (va) reinterpret_cast<float4*>(out + (size_t)i * DV)[lane] = "
            "make_float4(acc.x / den, acc.y / den, acc.z / den, acc.w / den);\n}\n\n"
            + s.sig + " {\n" + SETUP
            + "    att_vec<<<(q + 3) / 4, 128>>>(q, l, d_q, d_k, d_v, d_o);\n" + TAIL)


def _reference(s: Spec) -> str:
    key = "Km[(size_t)t * l + j]" if s.kt else "Km[(size_t)j * D + t]"
    return ("#include <math.h>\n#include <stdlib.h>\n\n"
            f"#define D {s.d}\n#define DV {s.dv}\n#define SCALE {s.scale_lit}\n\n"
            "static inline void key_range(int i, int q, int l, int* lo, int* hi) {\n" + s.range_body() + "}\n\n"
            f"void {s.fn}(int q, int l, const float* Qm, const float* Km, const float* Vm, float* out) {{\n"
            "    if (q <= 0 || l <= 0) return;\n"
            "    float* sc = (float*)malloc((size_t)l * sizeof(float));\n"
            "    float acc[DV];\n"
            "    for (int i = 0; i < q; ++i) {\n"
            "        int lo, hi; key_range(i, q, l, &lo, &hi);\n"
            "        const float* qi = Qm + (size_t)i * D;\n"
            "        float mx = -3.0e38f;\n"
            "        for (int j = lo; j < hi; ++j) {\n"
            "            float d = 0.0f;\n"
            f"            for (int t = 0; t < D; ++t) d += qi[t] * {key};\n"
            "            d *= SCALE;\n"
            "            sc[j] = d;\n"
            "            if (d > mx) mx = d;\n"
            "        }\n"
            "        float den = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) { float p = expf(sc[j] - mx); sc[j] = p; den += p; }\n"
            "        for (int t = 0; t < DV; ++t) acc[t] = 0.0f;\n"
            "        for (int j = lo; j < hi; ++j) {\n"
            "            const float p = sc[j]; const float* vj = Vm + (size_t)j * DV;\n"
            "            for (int t = 0; t < DV; ++t) acc[t] += p * vj[t];\n"
            "        }\n"
            "        for (int t = 0; t < DV; ++t) out[(size_t)i * DV + t] = acc[t] / den;\n"
            "    }\n"
            "    free(sc);\n}\n")


def _pairs(mask: str, window: int, q: int, l: int) -> int:
    i = np.arange(q, dtype=np.int64)
    if mask == "none":
        return q * l
    if mask == "causal":
        return int(np.clip(l - q + 1 + i, 1, l).sum())
    c = (i * l) // q
    return int((np.minimum(l, c + window + 1) - np.maximum(0, c - window)).sum())


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    d = DS[index % len(DS)]
    dv = [d, 32, 64, 16, 128, d][(index // 3 + int(rng.integers(2))) % 6]
    mask = MASKS[(index // 2) % len(MASKS)]
    window = WINDOWS[int(rng.integers(len(WINDOWS)))]
    kt = (index % 4) in (1, 2)
    temp = TEMPS[(index + int(rng.integers(5))) % len(TEMPS)]
    scale = temp / float(np.sqrt(d))
    # Q and K in [-a, a]: the scores' standard deviation is temp * a^2 / 3, between about 1.5 and 3
    a = float(np.sqrt(3.0 * (1.5 + 1.5 * float(rng.random())) / temp))
    l_time = LS[(index + int(rng.integers(3))) % len(LS)] + int(rng.integers(0, 17))
    fn = "attention_rows"
    s = Spec(d, dv, mask, window, kt, scale, fn)
    # about 1e8 multiply-adds in the reference's dot products at the timing size (plus one expf per pair)
    budget = 1.0e8 * (0.8 + 0.4 * float(rng.random()))
    if mask == "causal":  # self-attention shape (q = l): about l * l / 2 pairs
        l_time = int(np.sqrt(2.0 * budget / (d + 8 + dv / 8))) + int(rng.integers(0, 17))
        q_time = l_time
    else:
        q_time = 16
        while q_time < 200_000 and _pairs(mask, window, q_time, l_time) * (d + 8 + dv / 8) < budget:
            q_time = int(q_time * 1.25) + 1
    task = {
        "function_name": fn,
        "description": (f"Attention rows (float): Qm is q x {d}, "
                        + (f"Km is {d} x l (transposed: key j's dimension t at Km[t * l + j])" if kt
                           else f"Km is l x {d} (row-major)")
                        + f", Vm is l x {dv}, out is q x {dv}; {s.range_text()}. For row i over its keys j: "
                        f"s_j = (sum over t in order of Qm[i][t] * K[j][t]) * {s.scale_lit} (float), m = max s_j, "
                        "p_j = expf(s_j - m), out[i][:] = (sum_j p_j * Vm[j][:]) / (sum_j p_j), all in float."),
        "returns": "void",
        "args": [
            {"name": "q", "role": "scalar", "ctype": "int"},
            {"name": "l", "role": "scalar", "ctype": "int"},
            {"name": "Qm", "role": "in", "ctype": "float", "length": f"q * {d}",
             "dist": {"kind": "uniform", "low": -round(a, 4), "high": round(a, 4)}},
            {"name": "Km", "role": "in", "ctype": "float", "length": f"l * {d}",
             "dist": {"kind": "uniform", "low": -round(a, 4), "high": round(a, 4)}},
            {"name": "Vm", "role": "in", "ctype": "float", "length": f"l * {dv}",
             "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
            {"name": "out", "role": "out", "ctype": "float", "length": f"q * {dv}"},
        ],
        "size_configs": [{"q": 37, "l": 129}, {"q": 64, "l": 64}, {"q": 5, "l": 1}, {"q": 100, "l": 333},
                         {"q": 90 + int(rng.integers(1, 31)), "l": 1000 + int(rng.integers(1, 999))},
                         {"q": q_time, "l": l_time}],
        "tolerance": {"rtol": 1e-3, "atol": 5e-5},
        "reference_c": _reference(s),
        "tags": ["attention", "reduction", "softmax", "compute-bound", "float"],
    }
    variants = (
        Variant("thread_per_row_3pass", ("thread_per_row", "naive", "strided", "block_128", "pageable"),
                _thread_per_row(s)),
        Variant("block_per_row_shared", ("block_per_row", "shared_tiling", "tree_reduction", "block_256",
                                         "pageable"), _block_per_row(s)),
        Variant("warp_per_row_shuffle", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache",
                                         "block_128", "pageable"), _warp_per_row(s)),
        Variant("online_warp_fused", ("fused", "block_per_row", "warp_shuffle", "register_blocking", "unrolled",
                                      "block_64", "pageable"), _online_warp(s)),
        Variant("tiled_kv_shared", ("shared_tiling", "fused", "warp_shuffle", "block_per_row", "register_blocking",
                                    "block_256", "pageable"), _tiled(s)),
        Variant("host_softmax", ("host_compute", "extra_transfers", "multi_pass", "naive", "block_256",
                                 "pageable"), _host_softmax(s)),
        Variant("multi_kernel", ("multi_pass", "naive", "tree_reduction", "block_per_row", "block_512",
                                 "pageable"), _multi_kernel(s)),
        Variant("vectorized_online", ("vectorized", "fused", "warp_shuffle", "block_per_row", "coalesced",
                                      "block_128", "pageable"), _vectorized(s)),
    )
    params = {"D": d, "DV": dv, "mask": mask, "window": window if mask == "window" else None,
              "k_transposed": kt, "scale": scale, "range": a, "q_time": q_time, "l_time": l_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="attention_rows",
    description="single-head attention rows: dot-product scores, stable softmax and weighted value sums (float)",
    generate=generate,
    n_tasks=50,
    tags=("reduction", "compute-bound"),
)
