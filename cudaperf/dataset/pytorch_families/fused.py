"""``gelu_mlp``, ``group_norm`` and ``scaled_dot_attention``: multi-operation PyTorch problems that eager runs as
several kernels (or library calls), so that the variants can fuse, tile and split the work in genuinely different
ways.

``gelu_mlp``: ``y = fc2(gelu(fc1(x)))`` with ``nn.Linear(in, hidden)`` and ``nn.Linear(hidden, out)`` (PyTorch's
default initialisation under the harness's seed) and GELU in its erf or tanh form. The index picks the batch, the
three widths (some not multiples of 32), the GELU form and the input's scale. Variants: naive GEMMs with the GELU as
a third kernel, naive 2-D GEMMs with the GELU in the first one's epilogue, shared-memory tiles of 16 and 32 with the
fused epilogue, 4x4 register blocking, a warp per output with float4 loads, and one fused kernel per four rows (the
hidden rows stay in shared memory). Outputs are of order 1: two dot products of at most 2000 terms of order
1/sqrt(fan_in), summed by every variant in another order than cuBLAS (tiles, shuffles, split-k): a few 1e-6 apart.
GELU's erff/tanhf differ from PyTorch's by ulps. 1e-3 absolute and relative is ``linear_act``'s rule.

``group_norm``: ``nn.GroupNorm(G, C, eps)`` over an NCHW input with a weight and bias drawn at init from a seeded
generator. The index picks N (the batch), C, G, the plane (7x7 to 56x56, some not multiples of 4), eps and the
input's offset and spread. A group is ``C/G * H * W`` contiguous floats (at most 65536). Variants: a thread per
group, a block per group with shared-memory trees, a warp per group with shuffles, two kernels (statistics, then
normalise), a block per group with a one-pass Welford merge, float4 loads, and several blocks per group with
atomics on shifted sums. Outputs are of order 1; mean and variance are sums of up to 65536 floats in another order
than PyTorch's (a sequential thread's is the worst), and the input's offset is at most twice its spread; a float32
simulation of the sequential order stays below 3.5e-5 of the exact output: 1e-4 absolute and relative is
``layer_norm``'s rule and still catches a wrong group, channel or statistic.

``scaled_dot_attention``: ``softmax(q @ k^T * s [masked causally]) @ v`` over (B, heads, L, d) tensors, with
``s = t / sqrt(d)`` (t a temperature, 1 for about half the problems), written as eager operations (matmul, scale,
optional ``masked_fill`` of the upper triangle, softmax, matmul). The index picks B (the batch), heads, the query
and key lengths (64 to 1024, equal when causal), d (32, 64, 96 or 128), the mask, t and the inputs' spread. Variants:
three kernels (scores, softmax, weighted sum) naive and with shared-memory tiled GEMMs, a block per query row, a
warp per query row with an online softmax, a thread per query row, and flash-attention style K/V tiles through
shared memory with 4 and 8 query rows per block. Each output is a convex combination of rows of v (order 1);
scores are dot products of at most 128 terms and the softmax sums at most 1024 exponentials, in another order than
cuBLAS and PyTorch's softmax and with the scale folded in elsewhere: differences of a few 1e-7 relative, amplified
by the score's magnitude (below ~20) to a few 1e-6. 1e-4 absolute and relative.
"""

from __future__ import annotations

import itertools
import math

from cudaperf.dataset.pytorch_families.common import (BLOCK_SUM, REG4_TILES, GeneratedTorchTask, TorchVariant,
                                                      check_tags, problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


# ---------------------------------------------------------------------------------------------------------------
# gelu_mlp: y = fc2(gelu(fc1(x)))

GELU_FORMS = {
    "erf": ("torch.nn.functional.gelu({v})",
            "0.5f * v * (1.f + erff(v * 0.70710678118654752f))"),
    "tanh": ("torch.nn.functional.gelu({v}, approximate='tanh')",
             "0.5f * v * (1.f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)))"),
}

_MLP_HEAD = """__device__ __forceinline__ float gelu(float v) {{
    return {gelu};
}}

__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}}
"""
_MLP_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 5 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2 || in[3].ndim != 2) return 1;
    if (in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    const int M = (int)in[0].shape[0], K = (int)in[0].shape[1];  /* x: (M, K) */
    const int H = (int)in[1].shape[0], N = (int)in[3].shape[0];  /* fc1.weight: (H, K); fc2.weight: (N, H) */
    if (in[1].shape[1] != K || in[2].numel != H || in[3].shape[1] != H || in[4].numel != N) return 1;
    if (out[0].numel != (long long)M * N) return 1;
    const float* x = (const float*)in[0].data;
    const float* w1 = (const float*)in[1].data;
    const float* b1 = (const float*)in[2].data;
    const float* w2 = (const float*)in[3].data;
    const float* b2 = (const float*)in[4].data;
    float* y = (float*)out[0].data;
    if (M == 0 || N == 0) return 0;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_MLP_SCRATCH = """    float* h = 0;  /* the hidden activations, (M, H) */
    if (cudaMallocAsync((void**)&h, (size_t)M * H * sizeof(float), stream) != cudaSuccess) return 3;
{body}
    if (cudaFreeAsync(h, stream) != cudaSuccess) return 3;"""

_MLP_NAIVE = """
/* C[m][n] = A[m] . B[n] + bias[n] (then GELU when ACT): one thread per output, row-major */
template <bool ACT>
__global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                           float* __restrict__ C, int M, int N, int K) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * N) return;
    const int m = (int)(i / N), n = (int)(i % N);
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
    const float v = acc + bias[n];
    C[i] = ACT ? gelu(v) : v;
}

__global__ void gelu_inplace(float* __restrict__ h, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) h[i] = gelu(h[i]);
}
"""
_MLP_NAIVE_LAUNCH = _MLP_SCRATCH.format(body="""    const long long nh = (long long)M * H, ny = (long long)M * N;
    gemm_naive<false><<<(unsigned)((nh + 255) / 256), 256, 0, stream>>>(x, w1, b1, h, M, H, K);
    gelu_inplace<<<(unsigned)((nh + 255) / 256), 256, 0, stream>>>(h, nh);
    gemm_naive<false><<<(unsigned)((ny + 255) / 256), 256, 0, stream>>>(h, w2, b2, y, M, N, H);""")
_MLP_NAIVE_2D = """
/* one thread per output on a 2-D grid; GELU applied in the epilogue when ACT */
template <bool ACT>
__global__ void gemm_naive_2d(const float* __restrict__ A, const float* __restrict__ B,
                              const float* __restrict__ bias, float* __restrict__ C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
    const float v = acc + bias[n];
    C[(long long)m * N + n] = ACT ? gelu(v) : v;
}
"""
_MLP_NAIVE_2D_LAUNCH = _MLP_SCRATCH.format(body="""    const dim3 block(16, 16);
    gemm_naive_2d<true><<<dim3((unsigned)((H + 15) / 16), (unsigned)((M + 15) / 16)), block, 0, stream>>>(
        x, w1, b1, h, M, H, K);
    gemm_naive_2d<false><<<dim3((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16)), block, 0, stream>>>(
        h, w2, b2, y, M, N, H);""")
_MLP_TILED = """
/* a T x T output tile per block of T x T threads; A and B tiles of T columns of k through shared memory */
template <int T, bool ACT>
__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                           float* __restrict__ C, int M, int N, int K) {
    __shared__ float as[T][T + 1];  /* as[m][k] */
    __shared__ float bs[T][T + 1];  /* bs[n][k], padded: thread tx reads row tx */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
    const int bn = blockIdx.x * T + ty;  /* the B row this thread loads */
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        const int k = k0 + tx;
        as[ty][tx] = (m < M && k < K) ? A[(long long)m * K + k] : 0.f;
        bs[ty][tx] = (bn < N && k < K) ? B[(long long)bn * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) acc = fmaf(as[ty][kk], bs[tx][kk], acc);
        __syncthreads();
    }
    if (m < M && n < N) {
        const float v = acc + bias[n];
        C[(long long)m * N + n] = ACT ? gelu(v) : v;
    }
}
"""


def _tiled_launch(t: int) -> str:
    return _MLP_SCRATCH.format(body=f"""    const dim3 block({t}, {t});
    const dim3 grid1((unsigned)((H + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}));
    const dim3 grid2((unsigned)((N + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}));
    gemm_tiled<{t}, true><<<grid1, block, 0, stream>>>(x, w1, b1, h, M, H, K);
    gemm_tiled<{t}, false><<<grid2, block, 0, stream>>>(h, w2, b2, y, M, N, H);""")


_MLP_REGBLOCK = """
/* 256 threads (16 x 16) per 64 x 64 output tile: each thread keeps 4 x 4 outputs in registers, at rows tr + 16i and
   columns tc + 16j of the tile; k goes through shared memory 16 at a time, both tiles stored k-major */
template <bool ACT>
__global__ void __launch_bounds__(256) gemm_reg4(const float* __restrict__ A, const float* __restrict__ B,
                                                 const float* __restrict__ bias, float* __restrict__ C,
                                                 int M, int N, int K) {
""" + REG4_TILES + """#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + tr + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tc + 16 * j;
            if (m < M && n < N) {
                const float v = acc[i][j] + bias[n];
                C[(long long)m * N + n] = ACT ? gelu(v) : v;
            }
        }
    }
}
"""
_MLP_REGBLOCK_LAUNCH = _MLP_SCRATCH.format(body="""\
    const dim3 grid1((unsigned)((H + 63) / 64), (unsigned)((M + 63) / 64));
    const dim3 grid2((unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64));
    gemm_reg4<true><<<grid1, 256, 0, stream>>>(x, w1, b1, h, M, H, K);
    gemm_reg4<false><<<grid2, 256, 0, stream>>>(h, w2, b2, y, M, N, H);""")
_MLP_WARP = """
/* one warp per output: the lanes stride over the dot product (float4 when rows and pointers allow), then shuffles */
template <bool ACT>
__global__ void gemm_warp(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                          float* __restrict__ C, int M, int N, int K) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)M * N) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const int m = (int)(o / N), n = (int)(o % N);
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(A) | reinterpret_cast<unsigned long long>(B);
    float acc = 0.f;
    if (K % 4 == 0 && (bits & 15) == 0) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        for (int q = lane; q < K / 4; q += 32) {
            const float4 u = a4[q], v = b4[q];
            acc = fmaf(u.x, v.x, acc);
            acc = fmaf(u.y, v.y, acc);
            acc = fmaf(u.z, v.z, acc);
            acc = fmaf(u.w, v.w, acc);
        }
    } else {
        for (int k = lane; k < K; k += 32) acc = fmaf(a[k], b[k], acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        const float v = acc + bias[n];
        C[o] = ACT ? gelu(v) : v;
    }
}
"""
_MLP_WARP_LAUNCH = _MLP_SCRATCH.format(body="""\
    const long long wh = (long long)M * H, wy = (long long)M * N;  /* warps, 8 a block */
    gemm_warp<true><<<(unsigned)((wh + 7) / 8), 256, 0, stream>>>(x, w1, b1, h, M, H, K);
    gemm_warp<false><<<(unsigned)((wy + 7) / 8), 256, 0, stream>>>(h, w2, b2, y, M, N, H);""")
_MLP_FUSED = """
/* the whole MLP in one kernel: a block per R rows of x. The rows go to shared memory, each warp computes hidden
   units (a dot product with a fc1 row for all R rows at once, reduced with shuffles) into shared memory, then the
   outputs the same way from the hidden rows; the hidden activations never reach global memory. */
template <int R>
__global__ void __launch_bounds__(256) mlp_fused_rows(const float* __restrict__ x, const float* __restrict__ w1,
                                                      const float* __restrict__ b1, const float* __restrict__ w2,
                                                      const float* __restrict__ b2, float* __restrict__ y,
                                                      int M, int K, int H, int N) {
    extern __shared__ float sm[];
    float* xs = sm;          /* R x K */
    float* hs = sm + R * K;  /* R x H */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int r0 = blockIdx.x * R;
    for (int e = threadIdx.x; e < R * K; e += 256) {
        const int rr = e / K, k = e % K;
        xs[e] = r0 + rr < M ? x[(long long)(r0 + rr) * K + k] : 0.f;
    }
    __syncthreads();
    for (int j = warp; j < H; j += 8) {
        const float* wj = w1 + (long long)j * K;
        float acc[R];
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = 0.f;
        for (int k = lane; k < K; k += 32) {
            const float wv = wj[k];
#pragma unroll
            for (int rr = 0; rr < R; ++rr) acc[rr] = fmaf(xs[rr * K + k], wv, acc[rr]);
        }
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = warp_sum(acc[rr]);
        if (lane == 0) {
            const float bj = b1[j];
#pragma unroll
            for (int rr = 0; rr < R; ++rr) hs[rr * H + j] = gelu(acc[rr] + bj);
        }
    }
    __syncthreads();
    for (int j = warp; j < N; j += 8) {
        const float* wj = w2 + (long long)j * H;
        float acc[R];
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = 0.f;
        for (int k = lane; k < H; k += 32) {
            const float wv = wj[k];
#pragma unroll
            for (int rr = 0; rr < R; ++rr) acc[rr] = fmaf(hs[rr * H + k], wv, acc[rr]);
        }
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = warp_sum(acc[rr]);
        if (lane == 0) {
            const float bj = b2[j];
#pragma unroll
            for (int rr = 0; rr < R; ++rr)
                if (r0 + rr < M) y[(long long)(r0 + rr) * N + j] = acc[rr] + bj;
        }
    }
}
"""
_MLP_FUSED_LAUNCH = """    const size_t smem = (size_t)4 * (K + H) * sizeof(float);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(mlp_fused_rows<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    mlp_fused_rows<4><<<(unsigned)((M + 3) / 4), 256, smem, stream>>>(x, w1, b1, w2, b2, y, M, K, H, N);"""


def _mlp_variants(gelu_c: str) -> list[TorchVariant]:
    head = _MLP_HEAD.format(gelu=gelu_c)
    specs = [
        ("naive_three_kernels", ["naive", "many_launches", "multi_pass", "block_256"], _MLP_NAIVE, _MLP_NAIVE_LAUNCH),
        ("naive_2d_gelu_epilogue", ["naive", "fused", "block_256"], _MLP_NAIVE_2D, _MLP_NAIVE_2D_LAUNCH),
        ("tiled_16", ["shared_tiling", "fused", "coalesced", "block_256"], _MLP_TILED, _tiled_launch(16)),
        ("tiled_32", ["shared_tiling", "fused", "coalesced", "block_1024"], _MLP_TILED, _tiled_launch(32)),
        ("register_blocked_4x4", ["register_blocking", "shared_tiling", "unrolled", "fused", "block_256"],
         _MLP_REGBLOCK, _MLP_REGBLOCK_LAUNCH),
        ("warp_per_output_vec4", ["warp_shuffle", "vectorized", "coalesced", "block_256"], _MLP_WARP,
         _MLP_WARP_LAUNCH),
        ("fused_block_per_4_rows", ["block_per_row", "fused", "warp_shuffle", "shared_tiling", "register_blocking",
                                    "block_256"], _MLP_FUSED, _MLP_FUSED_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _MLP_ENTRY.format(launch=launch))
            for name, tags, kernel, launch in specs]


_MLP_SHAPES = [c for c in itertools.product([64, 128, 256, 512], [128, 256, 384, 500, 512, 1000],
                                            [256, 512, 768, 1000, 1024, 1536], [64, 128, 250, 256, 512, 1000])
               # the batch times the two layers' multiply-adds: 2M to 600M
               if 2_000_000 <= c[0] * c[2] * (c[1] + c[3]) <= 600_000_000]


def gelu_mlp(index: int) -> GeneratedTorchTask:
    rng = rng_for("gelu_mlp", index)
    shapes = shuffled("gelu_mlp", _MLP_SHAPES)
    batch, in_f, hidden, out_f = shapes[index % len(shapes)]
    form = str(rng.choice(sorted(GELU_FORMS)))
    spread = round(float(rng.uniform(0.5, 2.5)), 3)
    act_t, act_c = GELU_FORMS[form]
    expr = f"self.fc2({act_t.format(v='self.fc1(x)')})"
    source = problem_source(
        f"y = fc2(gelu(fc1(x))) (GELU's {form} form): nn.Linear({in_f}, {hidden}), GELU, nn.Linear({hidden}, "
        f"{out_f}), over a (batch_size, {in_f}) input (scale {spread}).", expr,
        f"torch.randn(batch_size, {in_f}) * {spread}", batch_size=batch,
        init_body=f"self.fc1 = nn.Linear({in_f}, {hidden})\nself.fc2 = nn.Linear({hidden}, {out_f})")
    tid = task_id("gelu_mlp", index)
    # see the module docstring: linear_act's 1e-3 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"MLP {in_f}->{hidden}->{out_f} with GELU ({form})",
                       tolerance=DtypeTolerance(fp32=(1e-3, 1e-3)))
    variants = _mlp_variants(act_c)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "gelu_mlp", index, {"batch": batch, "in_features": in_f, "hidden": hidden,
                                                        "out_features": out_f, "gelu": form, "spread": spread},
                              tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# group_norm: nn.GroupNorm(G, C, eps) over (N, C, H, W) with a seeded weight and bias

_GN_HEAD = """constexpr int G = {groups};  /* groups */

__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}}
"""
_GN_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 3 || n_out != 1 || in[0].ndim < 2 || in[0].dtype != DT_FLOAT32) return 1;
    const long long Nb = in[0].shape[0], C = in[0].shape[1];
    if (C % G != 0 || in[1].numel != C || in[2].numel != C || out[0].numel != in[0].numel) return 1;
    const long long groups = Nb * G;
    if (groups == 0 || in[0].numel == 0) return 0;
    const long long HW = in[0].numel / (Nb * C);  /* the plane: H * W */
    const int cpg = (int)(C / G);                  /* channels per group */
    const int glen = (int)(cpg * HW);              /* a group: cpg planes, contiguous */
    const int hw = (int)HW;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;   /* weight (C) */
    const float* bt = (const float*)in[2].data;  /* bias (C) */
    float* y = (float*)out[0].data;
    const float eps = {eps}f;
    (void)cpg;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_GN_THREAD = """
__global__ void gn_thread(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bt,
                          float* __restrict__ y, long long groups, int glen, int hw, int cpg, float eps) {
    /* one thread per (sample, group): three sequential passes over its glen floats */
    const long long gi = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (gi >= groups) return;
    const float* xg = x + gi * glen;
    float* yg = y + gi * glen;
    float s = 0.f;
    for (int e = 0; e < glen; ++e) s += xg[e];
    const float mean = s / (float)glen;
    float q = 0.f;
    for (int e = 0; e < glen; ++e) {
        const float d = xg[e] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(q / (float)glen + eps);
    const int c0 = (int)(gi % G) * cpg;
    for (int cc = 0; cc < cpg; ++cc) {
        const float a = rstd * w[c0 + cc], b = bt[c0 + cc];
        for (int p = 0; p < hw; ++p) yg[cc * hw + p] = (xg[cc * hw + p] - mean) * a + b;
    }
}
"""
_GN_BLOCK = BLOCK_SUM + """
/* one block per (sample, group): a shared-memory tree for the sum, again for the centred squares, then normalise */
template <int B>
__global__ void gn_block(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bt,
                         float* __restrict__ y, int glen, int hw, int cpg, float eps) {
    __shared__ float sh[B];
    const long long gi = blockIdx.x;
    const float* xg = x + gi * glen;
    float* yg = y + gi * glen;
    float s = 0.f;
    for (int e = threadIdx.x; e < glen; e += B) s += xg[e];
    const float mean = block_sum<B>(s, sh) / (float)glen;
    float q = 0.f;
    for (int e = threadIdx.x; e < glen; e += B) {
        const float d = xg[e] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum<B>(q, sh) / (float)glen + eps);
    const int c0 = (int)(gi % G) * cpg;
    for (int e = threadIdx.x; e < glen; e += B) {
        const int c = c0 + e / hw;
        yg[e] = (xg[e] - mean) * (rstd * w[c]) + bt[c];
    }
}
"""
_GN_WARP = """
/* one warp per (sample, group), 4 per block: two strided passes reduced with xor shuffles, then normalise */
__global__ void gn_warp(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bt,
                        float* __restrict__ y, long long groups, int glen, int hw, int cpg, float eps) {
    const long long gi = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (gi >= groups) return;  /* whole warps leave together */
    const float* xg = x + gi * glen;
    float* yg = y + gi * glen;
    float s = 0.f;
    for (int e = lane; e < glen; e += 32) s += xg[e];
    const float mean = warp_sum(s) / (float)glen;
    float q = 0.f;
    for (int e = lane; e < glen; e += 32) {
        const float d = xg[e] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(warp_sum(q) / (float)glen + eps);
    const int c0 = (int)(gi % G) * cpg;
    for (int e = lane; e < glen; e += 32) {
        const int c = c0 + e / hw;
        yg[e] = (xg[e] - mean) * (rstd * w[c]) + bt[c];
    }
}
"""
_GN_BLOCK_SUM_WARPS = """
/* a block sum of NW warps: shuffles within each warp, then the warps' partials through shared memory */
template <int NW>
__device__ __forceinline__ float block_sum_warps(float v, float* part) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < NW; ++i) t += part[i];
    __syncthreads();  /* part is written again by the next reduction */
    return t;
}
"""
_GN_TWO_KERNELS = _GN_BLOCK_SUM_WARPS + """
/* pass 1: a block per (sample, group) computes the mean and 1/std into st */
__global__ void __launch_bounds__(256) gn_stats(const float* __restrict__ x, float2* __restrict__ st, int glen,
                                                float eps) {
    __shared__ float part[8];
    const float* xg = x + (long long)blockIdx.x * glen;
    float s = 0.f;
    for (int e = threadIdx.x; e < glen; e += 256) s += xg[e];
    const float mean = block_sum_warps<8>(s, part) / (float)glen;
    float q = 0.f;
    for (int e = threadIdx.x; e < glen; e += 256) {
        const float d = xg[e] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum_warps<8>(q, part) / (float)glen + eps);
    if (threadIdx.x == 0) st[blockIdx.x] = make_float2(mean, rstd);
}

/* pass 2: one thread per element */
__global__ void gn_apply(const float* __restrict__ x, const float2* __restrict__ st, const float* __restrict__ w,
                         const float* __restrict__ bt, float* __restrict__ y, long long n, long long C, int glen,
                         int hw) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float2 s = st[i / glen];
    const int c = (int)((i / hw) % C);
    y[i] = (x[i] - s.x) * (s.y * w[c]) + bt[c];
}
"""
_GN_TWO_KERNELS_LAUNCH = """    float2* st = 0;
    if (cudaMallocAsync((void**)&st, (size_t)groups * sizeof(float2), stream) != cudaSuccess) return 3;
    const long long n = in[0].numel;
    gn_stats<<<(unsigned)groups, 256, 0, stream>>>(x, st, glen, eps);
    gn_apply<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, st, w, bt, y, n, C, glen, hw);
    if (cudaFreeAsync(st, stream) != cudaSuccess) return 3;"""
_GN_WELFORD = """
/* merge Welford statistics (count, mean, sum of squared deviations) b into a (Chan et al.) */
__device__ __forceinline__ void welford_merge(float& n, float& mean, float& m2, float nb, float mb, float m2b) {
    const float nt = n + nb;
    if (nb > 0.f) {
        const float d = mb - mean, f = nb / nt;
        mean += d * f;
        m2 += m2b + d * d * n * f;
    }
    n = nt;
}

/* one block of 512 per (sample, group): each thread runs Welford over its strided elements in one pass, the lanes
   merge with shuffles, warp 0 merges the 16 warps' statistics from shared memory; then normalise */
__global__ void __launch_bounds__(512) gn_welford(const float* __restrict__ x, const float* __restrict__ w,
                                                  const float* __restrict__ bt, float* __restrict__ y, int glen,
                                                  int hw, int cpg, float eps) {
    __shared__ float pn[16], pm[16], pq[16];
    __shared__ float stat[2];
    const long long gi = blockIdx.x;
    const float* xg = x + gi * glen;
    float* yg = y + gi * glen;
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    for (int e = threadIdx.x; e < glen; e += 512) {
        const float v = xg[e];
        n += 1.f;
        const float d = v - mean;
        mean += d / n;
        m2 += d * (v - mean);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float nb = __shfl_xor_sync(0xffffffffu, n, o);
        const float mb = __shfl_xor_sync(0xffffffffu, mean, o);
        const float qb = __shfl_xor_sync(0xffffffffu, m2, o);
        welford_merge(n, mean, m2, nb, mb, qb);
    }
    if (lane == 0) {
        pn[wid] = n;
        pm[wid] = mean;
        pq[wid] = m2;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float tn = pn[0], tm = pm[0], tq = pq[0];
        for (int k = 1; k < 16; ++k) welford_merge(tn, tm, tq, pn[k], pm[k], pq[k]);
        stat[0] = tm;
        stat[1] = rsqrtf(tq / (float)glen + eps);
    }
    __syncthreads();
    const float mu = stat[0], rstd = stat[1];
    const int c0 = (int)(gi % G) * cpg;
    for (int e = threadIdx.x; e < glen; e += 512) {
        const int c = c0 + e / hw;
        yg[e] = (xg[e] - mu) * (rstd * w[c]) + bt[c];
    }
}
"""
_GN_VEC4 = _GN_BLOCK_SUM_WARPS + """
/* one block of 256 per (sample, group) reading float4 when a plane is a whole number of float4s (then a float4
   never straddles two channels); otherwise the scalar loops */
__global__ void __launch_bounds__(256) gn_vec4(const float* __restrict__ x, const float* __restrict__ w,
                                               const float* __restrict__ bt, float* __restrict__ y, int glen,
                                               int hw, int cpg, float eps) {
    __shared__ float part[8];
    const long long gi = blockIdx.x;
    const float* xg = x + gi * glen;
    float* yg = y + gi * glen;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    const bool vec = hw % 4 == 0 && (bits & 15) == 0;  /* glen = cpg * hw: every group starts 16-byte aligned */
    const int nq = glen / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xg);
    float s = 0.f;
    if (vec) {
        for (int q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (int e = threadIdx.x; e < glen; e += 256) s += xg[e];
    }
    const float mean = block_sum_warps<8>(s, part) / (float)glen;
    float sq = 0.f;
    if (vec) {
        for (int q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
            sq += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (int e = threadIdx.x; e < glen; e += 256) {
            const float d = xg[e] - mean;
            sq += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum_warps<8>(sq, part) / (float)glen + eps);
    const int c0 = (int)(gi % G) * cpg;
    if (vec) {
        float4* y4 = reinterpret_cast<float4*>(yg);
        for (int q = threadIdx.x; q < nq; q += 256) {
            const int c = c0 + (4 * q) / hw;
            const float a = rstd * w[c], b = bt[c];
            const float4 v = x4[q];
            y4[q] = make_float4((v.x - mean) * a + b, (v.y - mean) * a + b, (v.z - mean) * a + b,
                                (v.w - mean) * a + b);
        }
    } else {
        for (int e = threadIdx.x; e < glen; e += 256) {
            const int c = c0 + e / hw;
            yg[e] = (xg[e] - mean) * (rstd * w[c]) + bt[c];
        }
    }
}
"""
_GN_ATOMIC = _GN_BLOCK_SUM_WARPS + """
constexpr int CHUNK = 2048;  /* elements per block: 8 per thread */

/* pass 1: grid (chunks, groups); each block sums x - p and (x - p)^2 over its chunk, p the group's first element
   (a shift that keeps E[(x-p)^2] - E[x-p]^2 well conditioned), and adds both to the group's totals atomically */
__global__ void __launch_bounds__(256) gn_partial(const float* __restrict__ x, float* __restrict__ acc, int glen) {
    __shared__ float part[8];
    const long long gi = blockIdx.y;
    const float* xg = x + gi * glen;
    const float p = xg[0];
    const int e0 = blockIdx.x * CHUNK;
    const int e1 = e0 + CHUNK < glen ? e0 + CHUNK : glen;
    float s = 0.f, q = 0.f;
    for (int e = e0 + threadIdx.x; e < e1; e += 256) {
        const float d = xg[e] - p;
        s += d;
        q += d * d;
    }
    s = block_sum_warps<8>(s, part);
    q = block_sum_warps<8>(q, part);
    if (threadIdx.x == 0) {
        atomicAdd(&acc[2 * gi], s);
        atomicAdd(&acc[2 * gi + 1], q);
    }
}

/* pass 2: one thread per element, the statistics from the totals */
__global__ void gn_finish(const float* __restrict__ x, const float* __restrict__ acc, const float* __restrict__ w,
                          const float* __restrict__ bt, float* __restrict__ y, long long n, long long C, int glen,
                          int hw, float eps) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long gi = i / glen;
    const float p = x[gi * glen];
    const float ds = acc[2 * gi] / (float)glen;  /* mean - p */
    const float var = fmaxf(acc[2 * gi + 1] / (float)glen - ds * ds, 0.f);
    const float rstd = rsqrtf(var + eps);
    const int c = (int)((i / hw) % C);
    y[i] = (x[i] - (p + ds)) * (rstd * w[c]) + bt[c];
}
"""
_GN_ATOMIC_LAUNCH = """    float* acc = 0;
    if (cudaMallocAsync((void**)&acc, (size_t)groups * 2 * sizeof(float), stream) != cudaSuccess) return 3;
    if (cudaMemsetAsync(acc, 0, (size_t)groups * 2 * sizeof(float), stream) != cudaSuccess) {
        cudaFreeAsync(acc, stream);
        return 3;
    }
    const long long n = in[0].numel;
    gn_partial<<<dim3((unsigned)((glen + CHUNK - 1) / CHUNK), (unsigned)groups), 256, 0, stream>>>(x, acc, glen);
    gn_finish<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, acc, w, bt, y, n, C, glen, hw, eps);
    if (cudaFreeAsync(acc, stream) != cudaSuccess) return 3;"""


def _gn_variants(groups: int, eps: float) -> list[TorchVariant]:
    head = _GN_HEAD.format(groups=groups)
    specs = [
        ("thread_per_group", ["thread_per_row", "strided", "block_64"], _GN_THREAD,
         "    gn_thread<<<(unsigned)((groups + 63) / 64), 64, 0, stream>>>(x, w, bt, y, groups, glen, hw, cpg, eps);"),
        ("block_per_group_tree", ["block_per_row", "tree_reduction", "shared_tiling", "coalesced", "block_256"],
         _GN_BLOCK, "    gn_block<256><<<(unsigned)groups, 256, 0, stream>>>(x, w, bt, y, glen, hw, cpg, eps);"),
        ("warp_per_group", ["block_per_row", "warp_shuffle", "coalesced", "block_128"], _GN_WARP,
         "    gn_warp<<<(unsigned)((groups + 3) / 4), 128, 0, stream>>>(x, w, bt, y, groups, glen, hw, cpg, eps);"),
        ("stats_then_normalize", ["multi_pass", "two_level", "warp_shuffle", "coalesced", "block_256"],
         _GN_TWO_KERNELS, _GN_TWO_KERNELS_LAUNCH),
        ("welford_one_pass", ["block_per_row", "warp_shuffle", "two_level", "block_512"], _GN_WELFORD,
         "    gn_welford<<<(unsigned)groups, 512, 0, stream>>>(x, w, bt, y, glen, hw, cpg, eps);"),
        ("block_vec4", ["block_per_row", "vectorized", "warp_shuffle", "two_level", "block_256"], _GN_VEC4,
         "    gn_vec4<<<(unsigned)groups, 256, 0, stream>>>(x, w, bt, y, glen, hw, cpg, eps);"),
        ("split_group_atomics", ["atomics", "multi_pass", "two_level", "warp_shuffle", "coalesced", "block_256"],
         _GN_ATOMIC, _GN_ATOMIC_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _GN_ENTRY.format(eps=repr(eps), launch=launch))
            for name, tags, kernel, launch in specs]


_GN_SHAPES = [(n, c, g, s) for n, c, g, s in itertools.product([2, 4, 8, 16, 32], [32, 48, 64, 96, 128, 256],
                                                               [2, 3, 4, 8, 16, 32], [7, 14, 16, 28, 32, 56])
              if c % g == 0 and g < c
              and (c // g) * s * s <= 65536                     # a group: at most 65536 floats
              and 250_000 <= n * c * s * s <= 8_000_000         # 1 to 32 MB of input
              and n * g >= 8]


def group_norm(index: int) -> GeneratedTorchTask:
    rng = rng_for("group_norm", index)
    shapes = shuffled("group_norm", _GN_SHAPES)
    n, c, g, s = shapes[index % len(shapes)]
    eps = float(rng.choice([1e-6, 1e-5, 1e-4, 1e-3]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shift = round(float(rng.uniform(-1.0, 1.0)), 3)
    init_seed = int(rng.integers(1, 2**31 - 1))
    source = problem_source(
        f"y = GroupNorm({g}, {c}, eps={eps!r})(x) over a (batch_size, {c}, {s}, {s}) input, with a weight and bias "
        "drawn at init.", "self.gn(x)", f"torch.randn(batch_size, {c}, {s}, {s}) * {spread} + {shift}",
        batch_size=n,
        init_body=(f"self.gn = nn.GroupNorm({g}, {c}, eps={eps!r})\n"
                   f"gen = torch.Generator().manual_seed({init_seed})\n"
                   "with torch.no_grad():\n"
                   "    self.gn.weight.uniform_(0.5, 1.5, generator=gen)\n"
                   "    self.gn.bias.uniform_(-0.5, 0.5, generator=gen)"))
    tid = task_id("group_norm", index)
    # see the module docstring: layer_norm's 1e-4 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"group norm, {g} groups of {c // g} channels of {s}x{s}",
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _gn_variants(g, eps)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "group_norm", index, {"batch": n, "channels": c, "groups": g, "size": s,
                                                          "eps": eps, "spread": spread, "shift": shift,
                                                          "init_seed": init_seed}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# scaled_dot_attention: softmax(q k^T * s [causal]) v over (B, heads, L, d)

_AT_HEAD = """constexpr int D = {d};             /* head dimension (a multiple of 32) */
constexpr bool CAUSAL = {causal};  /* key j is masked for query i when j > i */

__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}}
__device__ __forceinline__ float warp_max(float v) {{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}}
/* the keys query i attends to: [0, key_end) */
__device__ __forceinline__ int key_end(int i, int Lk) {{ return CAUSAL ? (i + 1 < Lk ? i + 1 : Lk) : Lk; }}
"""
_AT_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4 || in[2].ndim != 4) return 1;
    if (in[0].dtype != DT_FLOAT32 || in[1].dtype != DT_FLOAT32 || in[2].dtype != DT_FLOAT32) return 1;
    const long long BH = in[0].shape[0] * in[0].shape[1];  /* batch x heads */
    const int Lq = (int)in[0].shape[2], Lk = (int)in[1].shape[2];
    if (in[0].shape[3] != D || in[1].shape[3] != D || in[2].shape[3] != D || in[2].shape[2] != Lk) return 1;
    if (in[1].shape[0] * in[1].shape[1] != BH || in[2].shape[0] * in[2].shape[1] != BH) return 1;
    if (out[0].numel != BH * Lq * D) return 1;
    if (BH == 0 || Lq == 0) return 0;
    if (Lk == 0) return 1;
    const float* q = (const float*)in[0].data;
    const float* k = (const float*)in[1].data;
    const float* v = (const float*)in[2].data;
    float* o = (float*)out[0].data;
    const float scale = {scale}f;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_AT_SCRATCH = """    float* S = 0;  /* scores, then probabilities: (BH, Lq, Lk) */
    const long long ns = BH * Lq * Lk, rows = BH * Lq;
    if (cudaMallocAsync((void**)&S, (size_t)ns * sizeof(float), stream) != cudaSuccess) return 3;
{body}
    if (cudaFreeAsync(S, stream) != cudaSuccess) return 3;"""
_AT_SOFTMAX = """
/* a warp per row of S: the row's max, the sum of exponentials, then S becomes the probabilities (masked scores are
   -inf and become 0; key 0 is never masked, so the max is finite) */
__global__ void softmax_rows(float* __restrict__ S, long long rows, int Lk) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    float* s = S + r * Lk;
    float m = -INFINITY;
    for (int j = lane; j < Lk; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float l = 0.f;
    for (int j = lane; j < Lk; j += 32) {
        const float e = expf(s[j] - m);
        s[j] = e;
        l += e;
    }
    const float inv = 1.f / warp_sum(l);
    for (int j = lane; j < Lk; j += 32) s[j] *= inv;
}
"""
_AT_NAIVE = _AT_SOFTMAX + """
/* a thread per score */
__global__ void scores_naive(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ S,
                             long long ns, int Lq, int Lk, float scale) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= ns) return;
    const int j = (int)(idx % Lk);
    const long long t = idx / Lk;
    const int i = (int)(t % Lq);
    const long long bh = t / Lq;
    if (j >= key_end(i, Lk)) {
        S[idx] = -INFINITY;
        return;
    }
    const float* qi = q + t * D;
    const float* kj = k + (bh * Lk + j) * D;
    float acc = 0.f;
    for (int c = 0; c < D; ++c) acc = fmaf(qi[c], kj[c], acc);
    S[idx] = acc * scale;
}

/* a thread per output element: consecutive threads take consecutive columns of v */
__global__ void pv_naive(const float* __restrict__ S, const float* __restrict__ v, float* __restrict__ o,
                         long long no, int Lq, int Lk) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= no) return;
    const int c = (int)(idx % D);
    const long long t = idx / D;  /* (bh, i) */
    const long long bh = t / Lq;
    const float* p = S + t * Lk;
    const float* vb = v + bh * Lk * D + c;
    const int je = key_end((int)(t % Lq), Lk);
    float acc = 0.f;
    for (int j = 0; j < je; ++j) acc = fmaf(p[j], vb[(long long)j * D], acc);
    o[idx] = acc;
}
"""
_AT_NAIVE_LAUNCH = _AT_SCRATCH.format(body="""    const long long no = rows * D;
    scores_naive<<<(unsigned)((ns + 255) / 256), 256, 0, stream>>>(q, k, S, ns, Lq, Lk, scale);
    softmax_rows<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(S, rows, Lk);
    pv_naive<<<(unsigned)((no + 255) / 256), 256, 0, stream>>>(S, v, o, no, Lq, Lk);""")
_AT_TILED = _AT_SOFTMAX + """
/* S = q k^T * scale per (batch, head) (blockIdx.z): 16 x 16 tiles through shared memory */
__global__ void scores_tiled(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ S, int Lq,
                             int Lk, float scale) {
    __shared__ float qs[16][17];  /* qs[i][c] */
    __shared__ float ks[16][17];  /* ks[j][c] */
    const long long bh = blockIdx.z;
    const float* qb = q + bh * Lq * D;
    const float* kb = k + bh * Lk * D;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * 16 + ty, j = blockIdx.x * 16 + tx;
    const int kj = blockIdx.x * 16 + ty;  /* the key row this thread loads */
    float acc = 0.f;
    for (int c0 = 0; c0 < D; c0 += 16) {  /* D is a multiple of 16 */
        qs[ty][tx] = i < Lq ? qb[(long long)i * D + c0 + tx] : 0.f;
        ks[ty][tx] = kj < Lk ? kb[(long long)kj * D + c0 + tx] : 0.f;
        __syncthreads();
#pragma unroll
        for (int cc = 0; cc < 16; ++cc) acc = fmaf(qs[ty][cc], ks[tx][cc], acc);
        __syncthreads();
    }
    if (i < Lq && j < Lk) S[(bh * Lq + i) * Lk + j] = j < key_end(i, Lk) ? acc * scale : -INFINITY;
}

/* o = P v per (batch, head): 16 x 16 output tiles, P and v tiles of 16 keys through shared memory */
__global__ void pv_tiled(const float* __restrict__ S, const float* __restrict__ v, float* __restrict__ o, int Lq,
                         int Lk) {
    __shared__ float ps[16][17];  /* ps[i][j] */
    __shared__ float vs[16][17];  /* vs[j][c] */
    const long long bh = blockIdx.z;
    const float* pb = S + bh * Lq * Lk;
    const float* vb = v + bh * Lk * D;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * 16 + ty, c = blockIdx.x * 16 + tx;  /* c < D: D is a multiple of 16 */
    float acc = 0.f;
    for (int j0 = 0; j0 < Lk; j0 += 16) {
        ps[ty][tx] = (i < Lq && j0 + tx < Lk) ? pb[(long long)i * Lk + j0 + tx] : 0.f;
        vs[ty][tx] = j0 + ty < Lk ? vb[(long long)(j0 + ty) * D + blockIdx.x * 16 + tx] : 0.f;
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) acc = fmaf(ps[ty][jj], vs[jj][tx], acc);
        __syncthreads();
    }
    if (i < Lq) o[(bh * Lq + i) * D + c] = acc;
}
"""
_AT_TILED_LAUNCH = _AT_SCRATCH.format(body="""    const dim3 block(16, 16);
    scores_tiled<<<dim3((unsigned)((Lk + 15) / 16), (unsigned)((Lq + 15) / 16), (unsigned)BH), block, 0, stream>>>(
        q, k, S, Lq, Lk, scale);
    softmax_rows<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(S, rows, Lk);
    pv_tiled<<<dim3(D / 16, (unsigned)((Lq + 15) / 16), (unsigned)BH), block, 0, stream>>>(S, v, o, Lq, Lk);""")
_AT_BLOCK = """
__device__ float block_reduce128(float v, float* red, bool is_max) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = 64; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float a = red[threadIdx.x], b = red[threadIdx.x + s];
            red[threadIdx.x] = is_max ? fmaxf(a, b) : a + b;
        }
        __syncthreads();
    }
    const float r = red[0];
    __syncthreads();  /* red is written again by the next reduction */
    return r;
}

/* a block of 128 per query row: the q row and the row's scores in shared memory, shared-memory trees for the max
   and the sum, then the first D threads form the output from the probabilities */
__global__ void __launch_bounds__(128) attn_block_row(const float* __restrict__ q, const float* __restrict__ k,
                                                      const float* __restrict__ v, float* __restrict__ o, int Lq,
                                                      int Lk, float scale) {
    extern __shared__ float sm[];
    float* qs = sm;           /* D */
    float* ps = sm + D;       /* Lk */
    float* red = ps + Lk;     /* 128 */
    const long long t = blockIdx.x;  /* (bh, i) */
    const long long bh = t / Lq;
    const int i = (int)(t % Lq);
    const int je = key_end(i, Lk);
    const float* kb = k + bh * Lk * D;
    for (int c = threadIdx.x; c < D; c += 128) qs[c] = q[t * D + c];
    __syncthreads();
    float m = -INFINITY;
    for (int j = threadIdx.x; j < je; j += 128) {
        const float* kj = kb + (long long)j * D;
        float acc = 0.f;
#pragma unroll 8
        for (int c = 0; c < D; ++c) acc = fmaf(qs[c], kj[c], acc);
        ps[j] = acc * scale;
        m = fmaxf(m, acc * scale);
    }
    m = block_reduce128(m, red, true);
    float l = 0.f;
    for (int j = threadIdx.x; j < je; j += 128) {
        const float e = expf(ps[j] - m);
        ps[j] = e;
        l += e;
    }
    l = block_reduce128(l, red, false);  /* its barriers also order the ps writes before the reads below */
    const float inv = 1.f / l;
    const float* vb = v + bh * Lk * D;
    for (int c = threadIdx.x; c < D; c += 128) {
        float acc = 0.f;
        for (int j = 0; j < je; ++j) acc = fmaf(ps[j], vb[(long long)j * D + c], acc);
        o[t * D + c] = acc * inv;
    }
}
"""
_AT_BLOCK_LAUNCH = """    const size_t smem = (size_t)(D + Lk + 128) * sizeof(float);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(attn_block_row, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    attn_block_row<<<(unsigned)(BH * Lq), 128, smem, stream>>>(q, k, v, o, Lq, Lk, scale);"""
_AT_WARP = """
/* a warp per query row, 4 per block: lane l owns columns l, l + 32, ... of q and of the output; for each key the
   lanes' partial dot products are summed with xor shuffles and an online softmax rescales the running output */
__global__ void __launch_bounds__(128) attn_warp_online(const float* __restrict__ q, const float* __restrict__ k,
                                                        const float* __restrict__ v, float* __restrict__ o,
                                                        long long rows, int Lq, int Lk, float scale) {
    constexpr int R = D / 32;
    const long long t = (long long)blockIdx.x * 4 + threadIdx.x / 32;  /* (bh, i) */
    const int lane = threadIdx.x % 32;
    if (t >= rows) return;  /* whole warps leave together */
    const long long bh = t / Lq;
    const int je = key_end((int)(t % Lq), Lk);
    float qv[R], acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        qv[r] = q[t * D + lane + 32 * r] * scale;
        acc[r] = 0.f;
    }
    const float* kb = k + bh * Lk * D;
    const float* vb = v + bh * Lk * D;
    float m = -INFINITY, l = 0.f;
    for (int j = 0; j < je; ++j) {
        float s = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) s = fmaf(qv[r], kb[(long long)j * D + lane + 32 * r], s);
        s = warp_sum(s);
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn);  /* 0 for the first key (m = -inf) */
        const float p = expf(s - mn);
        l = l * corr + p;
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(p, vb[(long long)j * D + lane + 32 * r], acc[r] * corr);
        m = mn;
    }
    const float inv = 1.f / l;
#pragma unroll
    for (int r = 0; r < R; ++r) o[t * D + lane + 32 * r] = acc[r] * inv;
}
"""
_AT_THREAD = """
/* a thread per query row: the q row and the running output in per-thread arrays, one online-softmax pass over the
   keys (the lanes of a warp read the same key rows, which the caches broadcast) */
__global__ void attn_thread_row(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                float* __restrict__ o, long long rows, int Lq, int Lk, float scale) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    const long long bh = t / Lq;
    const int je = key_end((int)(t % Lq), Lk);
    float qv[D], acc[D];
    for (int c = 0; c < D; ++c) {
        qv[c] = q[t * D + c] * scale;
        acc[c] = 0.f;
    }
    const float* kb = k + bh * Lk * D;
    const float* vb = v + bh * Lk * D;
    float m = -INFINITY, l = 0.f;
    for (int j = 0; j < je; ++j) {
        const float* kj = kb + (long long)j * D;
        float s = 0.f;
        for (int c = 0; c < D; ++c) s = fmaf(qv[c], kj[c], s);
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn);
        const float p = expf(s - mn);
        l = l * corr + p;
        const float* vj = vb + (long long)j * D;
        for (int c = 0; c < D; ++c) acc[c] = fmaf(p, vj[c], acc[c] * corr);
        m = mn;
    }
    const float inv = 1.f / l;
    for (int c = 0; c < D; ++c) o[t * D + c] = acc[c] * inv;
}
"""
_AT_FLASH = """
/* flash-attention style: a block of NW warps takes NW consecutive query rows of one (batch, head) (blockIdx.y), one
   row per warp. Tiles of 32 keys and their values go through shared memory, shared by the block's rows; lane j of
   a warp computes the score of key j0 + j, the warp takes the tile's max and sum with shuffles, rescales its running
   output (lane l owns columns l, l + 32, ...) and adds the tile's weighted values. */
template <int NW>
__global__ void __launch_bounds__(NW * 32) attn_flash(const float* __restrict__ q, const float* __restrict__ k,
                                                      const float* __restrict__ v, float* __restrict__ o, int Lq,
                                                      int Lk, float scale) {
    constexpr int R = D / 32;
    __shared__ float ks[32][D + 1];  /* padded: lane j reads row j */
    __shared__ float vs[32][D];
    __shared__ float qs[NW][D];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const long long bh = blockIdx.y;
    const int i0 = blockIdx.x * NW, i = i0 + w;
    const bool active = i < Lq;  /* uniform within a warp */
    const float* qb = q + bh * Lq * D;
    const float* kb = k + bh * Lk * D;
    const float* vb = v + bh * Lk * D;
    for (int e = threadIdx.x; e < NW * D; e += NW * 32) {
        const int r = e / D, c = e % D;
        qs[r][c] = i0 + r < Lq ? qb[(long long)(i0 + r) * D + c] * scale : 0.f;
    }
    /* the keys any row of the block needs (the same for the whole block: the loop below has barriers) */
    const int last = i0 + NW - 1 < Lq - 1 ? i0 + NW - 1 : Lq - 1;
    const int kend = key_end(last, Lk);
    const int je = key_end(i, Lk);
    float m = -INFINITY, l = 0.f, acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int j0 = 0; j0 < kend; j0 += 32) {
        __syncthreads();  /* the previous tile is consumed (and, the first time, qs is written) */
        for (int e = threadIdx.x; e < 32 * D; e += NW * 32) {
            const int r = e / D, c = e % D, j = j0 + r;
            ks[r][c] = j < Lk ? kb[(long long)j * D + c] : 0.f;
            vs[r][c] = j < Lk ? vb[(long long)j * D + c] : 0.f;
        }
        __syncthreads();
        if (active && j0 < je) {  /* warp-uniform; no barrier inside */
            const int j = j0 + lane;
            float s = -INFINITY;
            if (j < je) {
                float t = 0.f;
#pragma unroll 8
                for (int c = 0; c < D; ++c) t = fmaf(qs[w][c], ks[lane][c], t);
                s = t;
            }
            const float mn = fmaxf(m, warp_max(s));  /* finite: key j0 < je is valid */
            const float corr = expf(m - mn);
            const float p = j < je ? expf(s - mn) : 0.f;
            l = l * corr + warp_sum(p);
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] *= corr;
            const int nj = je - j0 < 32 ? je - j0 : 32;
            for (int jj = 0; jj < nj; ++jj) {
                const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] = fmaf(pj, vs[jj][lane + 32 * r], acc[r]);
            }
            m = mn;
        }
    }
    if (active) {
        const float inv = 1.f / l;
#pragma unroll
        for (int r = 0; r < R; ++r) o[(bh * Lq + i) * D + lane + 32 * r] = acc[r] * inv;
    }
}
"""


def _flash_launch(nw: int) -> str:
    return (f"    attn_flash<{nw}><<<dim3((unsigned)((Lq + {nw - 1}) / {nw}), (unsigned)BH), {nw * 32}, 0, stream>>>("
            "q, k, v, o, Lq, Lk, scale);")


def _attention_variants(d: int, causal: bool, scale: float) -> list[TorchVariant]:
    head = _AT_HEAD.format(d=d, causal="true" if causal else "false")
    rows = "    const long long rows = BH * Lq;\n"
    specs = [
        ("three_kernels_naive", ["naive", "multi_pass", "block_256"], _AT_NAIVE, _AT_NAIVE_LAUNCH),
        ("three_kernels_tiled", ["shared_tiling", "multi_pass", "warp_shuffle", "coalesced", "block_256"], _AT_TILED,
         _AT_TILED_LAUNCH),
        ("block_per_query_row", ["block_per_row", "shared_tiling", "tree_reduction", "block_128"], _AT_BLOCK,
         _AT_BLOCK_LAUNCH),
        ("warp_per_query_online", ["warp_shuffle", "fused", "coalesced", "block_128"], _AT_WARP,
         rows + "    attn_warp_online<<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>(q, k, v, o, rows, Lq, Lk, "
                "scale);"),
        ("thread_per_query_row", ["thread_per_row", "fused", "block_64"], _AT_THREAD,
         rows + "    attn_thread_row<<<(unsigned)((rows + 63) / 64), 64, 0, stream>>>(q, k, v, o, rows, Lq, Lk, "
                "scale);"),
        ("flash_tiles_4_rows", ["shared_tiling", "warp_shuffle", "fused", "coalesced", "block_128"], _AT_FLASH,
         _flash_launch(4)),
        ("flash_tiles_8_rows", ["shared_tiling", "warp_shuffle", "fused", "coalesced", "block_256"], _AT_FLASH,
         _flash_launch(8)),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _AT_ENTRY.format(scale=repr(scale), launch=launch))
            for name, tags, kernel, launch in specs]


def _attention_shapes(self_attention: bool) -> list[tuple]:
    out = []
    for b, h, lq, lk, d in itertools.product([1, 2, 4, 8], [1, 2, 4, 8, 12, 16], [64, 128, 200, 256, 333, 500, 1024],
                                             [64, 128, 200, 256, 333, 500, 1024], [32, 64, 96, 128]):
        if (lq == lk) == self_attention and 2**22 <= b * h * lq * lk * d <= 2**29:  # 4M to 512M multiply-adds
            out.append((b, h, lq, lk, d))
    return out


_AT_SHAPES = {"self": _attention_shapes(True), "cross": _attention_shapes(False)}


def scaled_dot_attention(index: int) -> GeneratedTorchTask:
    rng = rng_for("scaled_dot_attention", index)
    kind = str(rng.choice(["causal", "self", "cross"], p=[0.4, 0.2, 0.4]))
    causal = kind == "causal"
    shapes = shuffled(f"scaled_dot_attention:{'cross' if kind == 'cross' else 'self'}",
                       _AT_SHAPES["cross" if kind == "cross" else "self"])
    b, h, lq, lk, d = shapes[index % len(shapes)]
    temp = 1.0 if rng.random() < 0.5 else round(float(rng.uniform(0.5, 2.0)), 3)
    scale = float(f"{temp / math.sqrt(d):.6g}")
    spread = round(float(rng.uniform(0.5, 1.5)), 3)
    scores = f"(q @ k.transpose(-2, -1)) * {scale!r}"
    if causal:
        scores = (f"({scores}).masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, "
                  "device=q.device).triu(1), float('-inf'))")
    expr = f"torch.softmax({scores}, dim=-1) @ v"
    kind = {"causal": "causal self-attention", "self": "self-attention", "cross": "cross-attention"}[kind]
    source = problem_source(
        f"y = softmax(q @ k^T * {scale!r}{' with a causal mask' if causal else ''}) @ v ({kind}): q of shape "
        f"(batch_size, {h}, {lq}, {d}), k and v of shape (batch_size, {h}, {lk}, {d}); the scale is {temp} / "
        f"sqrt({d}).", expr, ", ".join(f"torch.randn(batch_size, {h}, {n}, {d}) * {spread}" for n in (lq, lk, lk)),
        forward_args="q, k, v", batch_size=b)
    tid = task_id("scaled_dot_attention", index)
    # see the module docstring
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"{kind}, {h} heads, L {lq}x{lk}, d {d}",
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _attention_variants(d, causal, scale)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "scaled_dot_attention", index,
                              {"batch": b, "heads": h, "lq": lq, "lk": lk, "d": d, "causal": causal, "temp": temp,
                               "scale": scale, "spread": spread}, tuple(variants))
