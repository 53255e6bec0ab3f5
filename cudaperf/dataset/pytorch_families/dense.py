"""``bmm_batched``, ``conv2d_bias_relu`` and ``half_linear``: dense compute (a batched GEMM, a direct convolution, a
linear layer in half precision) where the variants differ in how they tile, stage and block the multiply-adds.

``bmm_batched``: ``torch.bmm`` of a (B, M, K) and a (B, K, N) operand, either of them stored transposed (the input is
(B, K, M) or (B, N, K) and the forward transposes it: the kernels read it in place), the product optionally scaled
by a constant and optionally plus a bias over N (drawn at init from a seeded generator). The index picks B (the
batch), M, N, K (32 to 1024, some not multiples of 4, 16 or 64), the layouts, the scale, the bias and the second
operand's spread (1/sqrt(K) times 0.5 to 2, so that outputs are of order 1). Variants: a thread per output over a
flat grid, 2-D blocks per batch with blockIdx.z as the batch (the batch loops past gridDim.z's 65535), shared tiles of
16 and 32 loaded along each operand's contiguous dimension, 4x4 register blocking over 64x64 tiles, a warp per output
with float4 loads along K (for the operands stored K-contiguous), and a block per output row with the A row staged in
shared memory. Each output is a sum of at most 1024 products of O(1/sqrt(K)) terms, in another order than cuBLAS's
(tiles, shuffles, split-k): a few 1e-6 apart at outputs of order 1. 1e-3 absolute and relative, ``linear_act``'s rule
for dot products of this length, still catches a missing or wrong term.

``conv2d_bias_relu``: ``nn.Conv2d(Cin, Cout, k, stride, padding)`` with a bias (PyTorch's default initialisation
under the harness's seed) over an NCHW input, then ReLU for about two thirds of the problems. The index picks N (the
batch), Cin and Cout (3 to 64, some odd), the plane (28x28 to 128x128, some odd or not square), k (3 or 5), the stride
(1 or 2), the padding (0 to k // 2) and the input's spread. Variants: a thread per output (NCHW walk), an output tile
of 16x16 per block with the input tile and its halo staged in shared memory one input channel at a time, the
weights of one output channel in shared memory per block, four output channels per thread in registers, the shared
input tile with four output channels per thread, im2col into a scratch buffer then a tiled GEMM with the bias and
activation in its epilogue (in chunks of images that keep the scratch under 64 MB), and a channel-last walk
(consecutive threads on consecutive output channels: strided stores). Each output is a dot product of at most
Cin * k * k = 1600 terms of order 1/sqrt(fan_in) plus a bias; cuDNN, even with TF32 off, may choose Winograd or
FFT algorithms whose float32 errors are larger than a direct sum's (1e-6 to 1e-5 of the terms' scale): 1e-3 absolute
and relative, the rule of the other dot-product families.

``half_linear``: a linear layer in float16, ``act(fc(x))`` with ``fc = nn.Linear(K, N, bias).half()`` (PyTorch's
default initialisation in float32 under the harness's seed, then cast) over a float16 input ``x.half()``, the output
float16 or cast back to float32 (``.float()``) by index, the activation (none, ReLU, GELU, SiLU, tanh, sigmoid) by
index. PyTorch accumulates the products in float32 and rounds the layer's output (bias added) to float16 once, then
the activation of that half value once more; the variants do the same, accumulating in float32 from half loads.
The index picks M (the batch), K and N (some K odd or not multiples of 8: the vector loads' scalar paths), the bias
and the input's spread. Variants: naive (a thread per output writing float32 sums, then an epilogue kernel for the
bias, the roundings and the activation), a thread per output on a 2-D grid with the epilogue fused, ``__half2``
vectorised loads, shared tiles of halves (16 and 32), a warp per output with 8-half (16-byte) loads and shuffles,
and 2x2 and 4x4 register blocking (tiles converted to float in shared memory). Tolerance: the output is rounded to
float16, a relative step of 2^-11 to 2^-10. A variant's float32 sum in another order (or cuBLAS's split-k, whose
partial sums PyTorch lets cuBLAS reduce in float16 by default) lands on the other side of a rounding boundary now
and then: one ulp, and with an activation a second rounding of a value already one ulp off: at most about 2e-3
relative. 5e-3 relative with 2e-3 absolute (outputs near zero, after GELU or SiLU of a negative value, inherit a
fraction of their input's ulp); float32 outputs carry the same float16 rounding and get the same tolerance.
"""

from __future__ import annotations

import itertools
import math

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, REG4_TILES, GeneratedTorchTask, TorchVariant,
                                                      check_tags, problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask

_WARP_SUM = """__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}

__host__ __device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}
"""

# ---------------------------------------------------------------------------------------------------------------
# bmm_batched: C[b] = A[b] B[b] (* alpha) (+ bias), A or B stored transposed

_BMM_HEAD = """constexpr bool TRANS_A = {trans_a};  /* a is (batch, K, M): A[m][k] = a[k * M + m]; else (batch, M, K) */
constexpr bool TRANS_B = {trans_b};  /* b is (batch, N, K): B[k][n] = b[n * K + k]; else (batch, K, N) */
constexpr bool HAS_BIAS = {bias};   /* + bias[n] */
constexpr float ALPHA = {alpha};     /* the product's scale (1: none) */

/* element (m, k) of one batch's A, (k, n) of its B */
__device__ __forceinline__ float load_a(const float* __restrict__ a, int m, int k, int M, int K) {{
    return TRANS_A ? a[(long long)k * M + m] : a[(long long)m * K + k];
}}
__device__ __forceinline__ float load_b(const float* __restrict__ b, int k, int n, int K, int N) {{
    return TRANS_B ? b[(long long)n * K + k] : b[(long long)k * N + n];
}}

/* the Model's epilogue: (A B) * alpha, then + bias */
__device__ __forceinline__ float epilogue(float acc, const float* __restrict__ bias, int n) {{
    const float v = acc * ALPHA;
    return HAS_BIAS ? v + bias[n] : v;
}}
""" + _WARP_SUM.replace("{", "{{").replace("}", "}}")
_BMM_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* a, b, [bias (N)] */
    if (n_in != (HAS_BIAS ? 3 : 2) || n_out != 1 || in[0].ndim != 3 || in[1].ndim != 3) return 1;
    if (in[0].dtype != DT_FLOAT32 || in[1].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    const int Bn = (int)in[0].shape[0];
    const int M = (int)in[0].shape[TRANS_A ? 2 : 1], K = (int)in[0].shape[TRANS_A ? 1 : 2];
    const int N = (int)in[1].shape[TRANS_B ? 1 : 2];
    if (in[1].shape[0] != Bn || in[1].shape[TRANS_B ? 2 : 1] != K) return 1;
    if (HAS_BIAS && (in[2].dtype != DT_FLOAT32 || in[2].numel != N)) return 1;
    if (out[0].numel != (long long)Bn * M * N) return 1;
    if (out[0].numel == 0) return 0;
    const float* a = (const float*)in[0].data;
    const float* b = (const float*)in[1].data;
    const float* bias = HAS_BIAS ? (const float*)in[2].data : 0;
    float* c = (float*)out[0].data;
    const unsigned zb = (unsigned)(Bn < 65535 ? Bn : 65535);  /* gridDim.z; kernels loop over the rest */
    (void)zb;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_BMM_NAIVE = """
/* one thread per output over a flat grid: i = (batch * M + m) * N + n */
__global__ void bmm_naive(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                          float* __restrict__ c, int Bn, int M, int N, int K) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)Bn * M * N) return;
    const int n = (int)(i % N);
    const long long r = i / N;
    const int m = (int)(r % M), bb = (int)(r / M);
    const float* ab = a + (long long)bb * M * K;
    const float* bm = b + (long long)bb * K * N;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(load_a(ab, m, k, M, K), load_b(bm, k, n, K, N), acc);
    c[i] = epilogue(acc, bias, n);
}
"""
_BMM_NAIVE_LAUNCH = """    const long long total = (long long)Bn * M * N;
    bmm_naive<<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(a, b, bias, c, Bn, M, N, K);"""
_BMM_2D = """
/* 16 x 16 threads per block over (n, m), blockIdx.z the batch (a loop when the batch exceeds gridDim.z) */
__global__ void bmm_2d(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                       float* __restrict__ c, int Bn, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    for (int bb = blockIdx.z; bb < Bn; bb += gridDim.z) {
        const float* ab = a + (long long)bb * M * K;
        const float* bm = b + (long long)bb * K * N;
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc = fmaf(load_a(ab, m, k, M, K), load_b(bm, k, n, K, N), acc);
        c[((long long)bb * M + m) * N + n] = epilogue(acc, bias, n);
    }
}
"""
_BMM_2D_LAUNCH = """    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16), zb);
    bmm_2d<<<grid, dim3(16, 16), 0, stream>>>(a, b, bias, c, Bn, M, N, K);"""
_BMM_TILED = """
/* T x T outputs per block of T x T threads; k through shared memory T at a time. Each tile is loaded along its
   operand's contiguous dimension (consecutive threads, consecutive addresses) and stored as as[m][k], bs[k][n]. */
template <int T>
__global__ void __launch_bounds__(T * T) bmm_tiled(const float* __restrict__ a, const float* __restrict__ b,
                                                   const float* __restrict__ bias, float* __restrict__ c,
                                                   int Bn, int M, int N, int K) {
    __shared__ float as[T][T + 1];
    __shared__ float bs[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * T, n0 = blockIdx.x * T;
    const int m = m0 + ty, n = n0 + tx;
    for (int bb = blockIdx.z; bb < Bn; bb += gridDim.z) {  /* the same trip count for every thread of the block */
        const float* ab = a + (long long)bb * M * K;
        const float* bm = b + (long long)bb * K * N;
        float acc = 0.f;
        for (int k0 = 0; k0 < K; k0 += T) {
            if (TRANS_A) {  /* a[k][m]: tx walks m */
                const int mm = m0 + tx, kk = k0 + ty;
                as[tx][ty] = (mm < M && kk < K) ? ab[(long long)kk * M + mm] : 0.f;
            } else {        /* a[m][k]: tx walks k */
                const int mm = m0 + ty, kk = k0 + tx;
                as[ty][tx] = (mm < M && kk < K) ? ab[(long long)mm * K + kk] : 0.f;
            }
            if (TRANS_B) {  /* b[n][k]: tx walks k */
                const int nn = n0 + ty, kk = k0 + tx;
                bs[tx][ty] = (nn < N && kk < K) ? bm[(long long)nn * K + kk] : 0.f;
            } else {        /* b[k][n]: tx walks n */
                const int kk = k0 + ty, nn = n0 + tx;
                bs[ty][tx] = (kk < K && nn < N) ? bm[(long long)kk * N + nn] : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < T; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
            __syncthreads();
        }
        if (m < M && n < N) c[((long long)bb * M + m) * N + n] = epilogue(acc, bias, n);
    }
}
"""


def _bmm_tiled_launch(t: int) -> str:
    return (f"    const dim3 grid((unsigned)((N + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}), zb);\n"
            f"    bmm_tiled<{t}><<<grid, dim3({t}, {t}), 0, stream>>>(a, b, bias, c, Bn, M, N, K);")


_BMM_REG4 = """
/* 256 threads (16 x 16) per 64 x 64 tile of one batch's C: each thread keeps 4 x 4 outputs in registers, at rows
   tr + 16i and columns tc + 16j of the tile; k goes through shared memory 16 at a time, both tiles stored k-major
   (as[k][m], bs[k][n]) and loaded along their operand's contiguous dimension */
__global__ void __launch_bounds__(256) bmm_reg4(const float* __restrict__ a, const float* __restrict__ b,
                                                const float* __restrict__ bias, float* __restrict__ c,
                                                int Bn, int M, int N, int K) {
    __shared__ float as[16][64 + 4];
    __shared__ float bs[16][64 + 4];
    const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    for (int bb = blockIdx.z; bb < Bn; bb += gridDim.z) {
        const float* ab = a + (long long)bb * M * K;
        const float* bm = b + (long long)bb * K * N;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
        for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
            for (int p = 0; p < 4; ++p) {  /* 1024 elements of each tile, 4 per thread */
                const int e = tid + 256 * p;
                if (TRANS_A) {  /* 16 rows of k, 64 consecutive m each */
                    const int r = e / 64, q = e % 64;
                    as[r][q] = (k0 + r < K && m0 + q < M) ? ab[(long long)(k0 + r) * M + m0 + q] : 0.f;
                } else {        /* 64 rows of m, 16 consecutive k each */
                    const int r = e / 16, q = e % 16;
                    as[q][r] = (m0 + r < M && k0 + q < K) ? ab[(long long)(m0 + r) * K + k0 + q] : 0.f;
                }
                if (TRANS_B) {  /* 64 rows of n, 16 consecutive k each */
                    const int r = e / 16, q = e % 16;
                    bs[q][r] = (n0 + r < N && k0 + q < K) ? bm[(long long)(n0 + r) * K + k0 + q] : 0.f;
                } else {        /* 16 rows of k, 64 consecutive n each */
                    const int r = e / 64, q = e % 64;
                    bs[r][q] = (k0 + r < K && n0 + q < N) ? bm[(long long)(k0 + r) * N + n0 + q] : 0.f;
                }
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < 16; ++kk) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    av[i] = as[kk][tr + 16 * i];
                    bv[i] = bs[kk][tc + 16 * i];
                }
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + tr + 16 * i;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + tc + 16 * j;
                if (m < M && n < N) c[((long long)bb * M + m) * N + n] = epilogue(acc[i][j], bias, n);
            }
        }
    }
}
"""
_BMM_REG4_LAUNCH = """    const dim3 grid((unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64), zb);
    bmm_reg4<<<grid, 256, 0, stream>>>(a, b, bias, c, Bn, M, N, K);"""
_BMM_WARP = """
/* one warp per output: the lanes stride over k, four at a time, then a shuffle sum. An operand stored K-contiguous
   (A untransposed, B transposed) is read as float4 when K % 4 == 0 and the pointers are 16-byte aligned (every row
   then starts on a float4); the other is gathered four scalars at a time. */
__global__ void bmm_warp(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                         float* __restrict__ c, int Bn, int M, int N, int K, bool vec) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)Bn * M * N) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const int n = (int)(o % N);
    const long long r = o / N;
    const int m = (int)(r % M), bb = (int)(r / M);
    const float* ab = a + (long long)bb * M * K;
    const float* bm = b + (long long)bb * K * N;
    float acc = 0.f;
    if (vec) {
        for (int q = lane; q < K / 4; q += 32) {
            const int k = 4 * q;
            float4 av, bv;
            if (!TRANS_A) av = reinterpret_cast<const float4*>(ab + (long long)m * K)[q];
            else av = make_float4(load_a(ab, m, k, M, K), load_a(ab, m, k + 1, M, K), load_a(ab, m, k + 2, M, K),
                                  load_a(ab, m, k + 3, M, K));
            if (TRANS_B) bv = reinterpret_cast<const float4*>(bm + (long long)n * K)[q];
            else bv = make_float4(load_b(bm, k, n, K, N), load_b(bm, k + 1, n, K, N), load_b(bm, k + 2, n, K, N),
                                  load_b(bm, k + 3, n, K, N));
            acc = fmaf(av.x, bv.x, fmaf(av.y, bv.y, fmaf(av.z, bv.z, fmaf(av.w, bv.w, acc))));
        }
    } else {
        for (int k = lane; k < K; k += 32) acc = fmaf(load_a(ab, m, k, M, K), load_b(bm, k, n, K, N), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) c[o] = epilogue(acc, bias, n);
}
"""
_BMM_WARP_LAUNCH = """    const bool vec = K % 4 == 0 && aligned16(a) && aligned16(b);
    const long long warps = (long long)Bn * M * N;  /* 8 a block */
    bmm_warp<<<(unsigned)((warps + 7) / 8), 256, 0, stream>>>(a, b, bias, c, Bn, M, N, K, vec);"""
_BMM_ROW = """
/* a block per output row (batch, m): the row of A staged in shared memory (K floats, dynamic), then the threads
   walk the row's N outputs, each a dot product of the staged row with a column of B */
__global__ void __launch_bounds__(128) bmm_row_shared(const float* __restrict__ a, const float* __restrict__ b,
                                                      const float* __restrict__ bias, float* __restrict__ c,
                                                      int M, int N, int K) {
    extern __shared__ float arow[];
    const long long row = blockIdx.x;  /* bb * M + m */
    const int m = (int)(row % M), bb = (int)(row / M);
    const float* ab = a + (long long)bb * M * K;
    const float* bm = b + (long long)bb * K * N;
    for (int k = threadIdx.x; k < K; k += blockDim.x) arow[k] = load_a(ab, m, k, M, K);
    __syncthreads();
    for (int n = threadIdx.x; n < N; n += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc = fmaf(arow[k], load_b(bm, k, n, K, N), acc);
        c[row * N + n] = epilogue(acc, bias, n);
    }
}
"""
_BMM_ROW_LAUNCH = """    const size_t smem = (size_t)K * sizeof(float);
    if (smem > 48 * 1024 && cudaFuncSetAttribute(bmm_row_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    bmm_row_shared<<<(unsigned)((long long)Bn * M), 128, smem, stream>>>(a, b, bias, c, M, N, K);"""


def _bmm_variants(trans_a: bool, trans_b: bool, bias: bool, alpha: float) -> list[TorchVariant]:
    head = _BMM_HEAD.format(trans_a=str(trans_a).lower(), trans_b=str(trans_b).lower(), bias=str(bias).lower(),
                            alpha=f"{alpha!r}f")
    specs = [
        ("thread_per_output_flat", ["naive", "block_128"], _BMM_NAIVE, _BMM_NAIVE_LAUNCH),
        ("blocks_2d_batch_in_z", ["naive", "coalesced", "block_256"], _BMM_2D, _BMM_2D_LAUNCH),
        ("shared_tiles_16", ["shared_tiling", "coalesced", "block_256"], _BMM_TILED, _bmm_tiled_launch(16)),
        ("shared_tiles_32", ["shared_tiling", "coalesced", "unrolled", "block_1024"], _BMM_TILED,
         _bmm_tiled_launch(32)),
        ("register_blocked_4x4", ["register_blocking", "shared_tiling", "unrolled", "block_256"], _BMM_REG4,
         _BMM_REG4_LAUNCH),
        ("warp_per_output_vec4", ["warp_shuffle", "vectorized", "block_256"], _BMM_WARP, _BMM_WARP_LAUNCH),
        ("block_per_row_shared_a", ["block_per_row", "shared_tiling", "block_128"], _BMM_ROW, _BMM_ROW_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _BMM_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


_BMM_SHAPES = [c for c in itertools.product([2, 3, 4, 6, 8, 16, 32, 64, 128, 256],
                                            [32, 64, 100, 128, 200, 256, 384, 500, 512, 768, 1000, 1024],
                                            [32, 64, 100, 128, 200, 256, 384, 500, 512, 768, 1000, 1024],
                                            [32, 64, 100, 128, 255, 256, 500, 512, 768, 1024])
               # 2 B M N K from 3 to 32 GFLOP (cuBLAS's float32 GEMM, about 50 TFLOP/s on an H200: 0.06 to 0.6 ms);
               # each operand and the output at most 16M floats
               if 3e9 <= 2 * c[0] * c[1] * c[2] * c[3] <= 3.2e10
               and max(c[0] * c[1] * c[3], c[0] * c[3] * c[2], c[0] * c[1] * c[2]) <= 2**24]


def bmm_batched(index: int) -> GeneratedTorchTask:
    rng = rng_for("bmm_batched", index)
    shapes = shuffled("bmm_batched", _BMM_SHAPES)
    batch, m, n, k = shapes[index % len(shapes)]
    trans_a, trans_b = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
    alpha = float(rng.choice([0.5, 0.125, 2.0, 0.3])) if rng.random() < 0.5 else 1.0
    bias = bool(rng.random() < 0.5)
    spread = round(float(rng.uniform(0.5, 2.0)) / math.sqrt(k), 5)
    init_seed = int(rng.integers(1, 2**31 - 1))
    lhs = "a.transpose(1, 2)" if trans_a else "a"
    rhs = "b.transpose(1, 2)" if trans_b else "b"
    expr = f"torch.bmm({lhs}, {rhs})" + (f" * {alpha!r}" if alpha != 1.0 else "") + (" + self.bias" if bias else "")
    a_shape = f"batch_size, {k}, {m}" if trans_a else f"batch_size, {m}, {k}"
    b_shape = f"batch_size, {n}, {k}" if trans_b else f"batch_size, {k}, {n}"
    doc = (f"C = {expr.replace('self.', '')}: a batched GEMM of (batch_size, {m}, {k}) by (batch_size, {k}, {n})"
           f"{', A stored transposed' if trans_a else ''}{', B stored transposed' if trans_b else ''}"
           f"{', with a bias over the columns drawn at init' if bias else ''}.")
    source = problem_source(
        doc, expr, f"torch.randn({a_shape}), torch.randn({b_shape}) * {spread}", forward_args="a, b",
        batch_size=batch,
        init_body=(f"gen = torch.Generator().manual_seed({init_seed})\n"
                   f"self.bias = nn.Parameter(torch.empty({n}).uniform_(-1.0, 1.0, generator=gen))") if bias else "")
    tid = task_id("bmm_batched", index)
    # see the module docstring: dot products of at most 1024 terms, linear_act's 1e-3 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"bmm {m}x{k} by {k}x{n}" + (", A^T" if trans_a else "") +
                                   (", B^T" if trans_b else "") + (f", scaled by {alpha:g}" if alpha != 1.0 else "") +
                                   (", plus a bias" if bias else ""),
                       tolerance=DtypeTolerance(fp32=(1e-3, 1e-3)))
    variants = _bmm_variants(trans_a, trans_b, bias, alpha)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "bmm_batched", index,
                              {"batch": batch, "m": m, "n": n, "k": k, "trans_a": trans_a, "trans_b": trans_b,
                               "alpha": alpha, "bias": bias, "spread": spread, "init_seed": init_seed},
                              tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# conv2d_bias_relu: y = [relu](conv2d(x, w, b, stride, padding)) over NCHW

_CONV_HEAD = """constexpr int KS = {k};       /* square kernel */
constexpr int STRIDE = {stride};
constexpr int PAD = {pad};      /* zeros on every side */
constexpr bool RELU = {relu};

__device__ __forceinline__ float post(float v) {{
    return RELU ? fmaxf(v, 0.f) : v;
}}
"""
_CONV_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* x (N, Cin, H, W), conv.weight (Cout, Cin, KS, KS), conv.bias (Cout) */
    if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4) return 1;
    if (in[0].dtype != DT_FLOAT32 || in[1].dtype != DT_FLOAT32 || in[2].dtype != DT_FLOAT32 ||
        out[0].dtype != DT_FLOAT32)
        return 1;
    const int Nb = (int)in[0].shape[0], Cin = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
    const int Cout = (int)in[1].shape[0];
    if (in[1].shape[1] != Cin || in[1].shape[2] != KS || in[1].shape[3] != KS || in[2].numel != Cout) return 1;
    const int Ho = (H + 2 * PAD - KS) / STRIDE + 1, Wo = (W + 2 * PAD - KS) / STRIDE + 1;
    if (Ho <= 0 || Wo <= 0 || out[0].numel != (long long)Nb * Cout * Ho * Wo) return 1;
    if (out[0].numel == 0) return 0;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;
    const float* b = (const float*)in[2].data;
    float* y = (float*)out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_CONV_TAPS = """    float acc = 0.f;
    for (int ci = 0; ci < Cin; ++ci) {
        const float* xc = x + (n * Cin + ci) * H * W;
        const float* wc = w + ((long long)co * Cin + ci) * KS * KS;
        for (int kh = 0; kh < KS; ++kh) {
            const int hi = ho * STRIDE - PAD + kh;
            if (hi < 0 || hi >= H) continue;
            for (int kw = 0; kw < KS; ++kw) {
                const int wi = wo * STRIDE - PAD + kw;
                if (wi >= 0 && wi < W) acc = fmaf(xc[(long long)hi * W + wi], wc[kh * KS + kw], acc);
            }
        }
    }
"""
"""One output's sum over its input channels and taps, the same in the direct variants (they differ in how a
thread finds its output: n, co, ho, wo)."""
_CONV_NAIVE = """
/* one thread per output, NCHW order (consecutive threads: consecutive wo of one output row) */
__global__ void conv_naive(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                           float* __restrict__ y, long long total, int Cin, int H, int W, int Cout, int Ho, int Wo) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int wo = (int)(i % Wo);
    long long t = i / Wo;
    const int ho = (int)(t % Ho);
    t /= Ho;
    const int co = (int)(t % Cout);
    const long long n = t / Cout;
""" + _CONV_TAPS + """    y[i] = post(acc + b[co]);
}
"""
_CONV_NAIVE_LAUNCH = """    const long long total = out[0].numel;
    conv_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, w, b, y, total, Cin, H, W, Cout, Ho, Wo);"""
_CONV_TILE = """
constexpr int TO = 16;                           /* outputs per block side */
constexpr int TI = (TO - 1) * STRIDE + KS;       /* the input tile's side, halo included */

/* a block of 16 x 16 threads per 16 x 16 output tile of one (n, group of CB output channels) (grid.z, looping past
   65535): the input tile with its halo staged in shared memory one input channel at a time (zeros outside the
   image), then each thread's CB outputs from it (CB = 1: one output channel per block) */
template <int CB>
__global__ void __launch_bounds__(256) conv_tile(const float* __restrict__ x, const float* __restrict__ w,
                                                 const float* __restrict__ b, float* __restrict__ y, int Nb,
                                                 int Cin, int H, int W, int Cout, int Ho, int Wo) {
    __shared__ float tile[TI][TI + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TO + tx;
    const int wo = blockIdx.x * TO + tx, ho = blockIdx.y * TO + ty;
    const int hi0 = blockIdx.y * TO * STRIDE - PAD, wi0 = blockIdx.x * TO * STRIDE - PAD;
    const int groups = (Cout + CB - 1) / CB;
    for (long long z = blockIdx.z; z < (long long)Nb * groups; z += gridDim.z) {
        const int co0 = (int)(z % groups) * CB;
        const long long n = z / groups;
        float acc[CB];
#pragma unroll
        for (int j = 0; j < CB; ++j) acc[j] = 0.f;
        for (int ci = 0; ci < Cin; ++ci) {
            const float* xc = x + (n * Cin + ci) * H * W;
            for (int e = tid; e < TI * TI; e += TO * TO) {
                const int r = e / TI, q = e % TI, hi = hi0 + r, wi = wi0 + q;
                tile[r][q] = (hi >= 0 && hi < H && wi >= 0 && wi < W) ? xc[(long long)hi * W + wi] : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int j = 0; j < CB; ++j) {
                const int co = co0 + j < Cout ? co0 + j : Cout - 1;  /* a clamped channel's sum is not stored */
                const float* wc = w + ((long long)co * Cin + ci) * KS * KS;
#pragma unroll
                for (int kh = 0; kh < KS; ++kh)
#pragma unroll
                    for (int kw = 0; kw < KS; ++kw)
                        acc[j] = fmaf(tile[ty * STRIDE + kh][tx * STRIDE + kw], wc[kh * KS + kw], acc[j]);
            }
            __syncthreads();
        }
        if (ho < Ho && wo < Wo) {
#pragma unroll
            for (int j = 0; j < CB; ++j)
                if (co0 + j < Cout) y[((n * Cout + co0 + j) * Ho + ho) * Wo + wo] = post(acc[j] + b[co0 + j]);
        }
    }
}
"""


def _conv_tile_launch(cb: int) -> str:
    return f"""    const long long zs = (long long)Nb * ((Cout + {cb - 1}) / {cb});
    const dim3 grid((unsigned)((Wo + TO - 1) / TO), (unsigned)((Ho + TO - 1) / TO),
                    (unsigned)(zs < 65535 ? zs : 65535));
    conv_tile<{cb}><<<grid, dim3(TO, TO), 0, stream>>>(x, w, b, y, Nb, Cin, H, W, Cout, Ho, Wo);"""


_CONV_WSHARED = """
/* a block per (output channel (grid.y), chunk of the N * Ho * Wo positions): the channel's Cin * KS * KS weights
   staged in shared memory once, then a grid-stride walk over the positions */
__global__ void __launch_bounds__(128) conv_wshared(const float* __restrict__ x, const float* __restrict__ w,
                                                    const float* __restrict__ b, float* __restrict__ y, int Nb,
                                                    int Cin, int H, int W, int Cout, int Ho, int Wo) {
    extern __shared__ float ws[];
    const int co = blockIdx.y;
    const int ckk = Cin * KS * KS;
    for (int e = threadIdx.x; e < ckk; e += blockDim.x) ws[e] = w[(long long)co * ckk + e];
    __syncthreads();
    const long long P = (long long)Ho * Wo, total = Nb * P;
    const float bc = b[co];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long n = i / P;
        const int p = (int)(i % P), ho = p / Wo, wo = p % Wo;
        float acc = 0.f;
        for (int ci = 0; ci < Cin; ++ci) {
            const float* xc = x + (n * Cin + ci) * H * W;
            const float* wc = ws + ci * KS * KS;
#pragma unroll
            for (int kh = 0; kh < KS; ++kh) {
                const int hi = ho * STRIDE - PAD + kh;
#pragma unroll
                for (int kw = 0; kw < KS; ++kw) {
                    const int wi = wo * STRIDE - PAD + kw;
                    if (hi >= 0 && hi < H && wi >= 0 && wi < W)
                        acc = fmaf(xc[(long long)hi * W + wi], wc[kh * KS + kw], acc);
                }
            }
        }
        y[(n * Cout + co) * P + p] = post(acc + bc);
    }
}
"""
_CONV_WSHARED_LAUNCH = """    const long long total = (long long)Nb * Ho * Wo, chunks = (total + 127) / 128;
    const size_t smem = (size_t)Cin * KS * KS * sizeof(float);
    if (smem > 48 * 1024 && cudaFuncSetAttribute(conv_wshared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    conv_wshared<<<dim3((unsigned)(chunks < 2048 ? chunks : 2048), (unsigned)Cout), 128, smem, stream>>>(
        x, w, b, y, Nb, Cin, H, W, Cout, Ho, Wo);"""
_CONV_COUT4 = """
constexpr int CB = 4;  /* output channels per thread */

/* one thread per (n, group of CB output channels, position): each input value read once for CB accumulators in
   registers; consecutive threads on consecutive wo */
__global__ void conv_cout_regs(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, long long total, int Cin, int H, int W, int Cout, int Ho,
                               int Wo) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;  /* total = N * groups * Ho * Wo */
    const int groups = (Cout + CB - 1) / CB;
    const int wo = (int)(i % Wo);
    long long t = i / Wo;
    const int ho = (int)(t % Ho);
    t /= Ho;
    const int co0 = (int)(t % groups) * CB;
    const long long n = t / groups;
    const float* wr[CB];
#pragma unroll
    for (int j = 0; j < CB; ++j) wr[j] = w + (long long)(co0 + j < Cout ? co0 + j : Cout - 1) * Cin * KS * KS;
    float acc[CB];
#pragma unroll
    for (int j = 0; j < CB; ++j) acc[j] = 0.f;
    for (int ci = 0; ci < Cin; ++ci) {
        const float* xc = x + (n * Cin + ci) * H * W;
#pragma unroll
        for (int kh = 0; kh < KS; ++kh) {
            const int hi = ho * STRIDE - PAD + kh;
#pragma unroll
            for (int kw = 0; kw < KS; ++kw) {
                const int wi = wo * STRIDE - PAD + kw;
                const float v = (hi >= 0 && hi < H && wi >= 0 && wi < W) ? xc[(long long)hi * W + wi] : 0.f;
                const int o = (ci * KS + kh) * KS + kw;
#pragma unroll
                for (int j = 0; j < CB; ++j) acc[j] = fmaf(v, wr[j][o], acc[j]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < CB; ++j)
        if (co0 + j < Cout) y[((n * Cout + co0 + j) * Ho + ho) * Wo + wo] = post(acc[j] + b[co0 + j]);
}
"""
_CONV_COUT4_LAUNCH = """    const long long total = (long long)Nb * ((Cout + CB - 1) / CB) * Ho * Wo;
    conv_cout_regs<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, w, b, y, total, Cin, H, W, Cout, Ho, Wo);"""
_CONV_IM2COL = """
/* pass 1: col[r][q], r = (ci * KS + kh) * KS + kw over Cin * KS * KS rows, q = (image - n0) * Ho * Wo + position
   over the chunk's images: the input under each tap, zero in the padding */
__global__ void im2col(const float* __restrict__ x, float* __restrict__ col, int n0, long long Q, int Cin, int H,
                       int W, int Ho, int Wo) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)Cin * KS * KS * Q) return;
    const long long q = i % Q;
    const int r = (int)(i / Q);
    const int kw = r % KS, kh = r / KS % KS, ci = r / (KS * KS);
    const long long P = (long long)Ho * Wo;
    const long long n = n0 + q / P;
    const int p = (int)(q % P), ho = p / Wo, wo = p % Wo;
    const int hi = ho * STRIDE - PAD + kh, wi = wo * STRIDE - PAD + kw;
    col[i] = (hi >= 0 && hi < H && wi >= 0 && wi < W) ? x[((n * Cin + ci) * H + hi) * W + wi] : 0.f;
}

/* pass 2: Y[co][q] = W[co][:] . col[:][q] (the weight tensor is the (Cout, Cin * KS * KS) matrix), 16 x 16 tiles
   through shared memory, the bias and activation in the epilogue, stored back in NCHW */
__global__ void __launch_bounds__(256) gemm_col(const float* __restrict__ w, const float* __restrict__ col,
                                                const float* __restrict__ b, float* __restrict__ y, int n0,
                                                long long Q, int Cout, int ckk, long long P) {
    __shared__ float wt[16][17];  /* wt[co][r] */
    __shared__ float ct[16][17];  /* ct[r][q] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int co = blockIdx.y * 16 + ty;
    const long long q = (long long)blockIdx.x * 16 + tx;
    float acc = 0.f;
    for (int r0 = 0; r0 < ckk; r0 += 16) {
        wt[ty][tx] = (co < Cout && r0 + tx < ckk) ? w[(long long)co * ckk + r0 + tx] : 0.f;
        ct[ty][tx] = (r0 + ty < ckk && q < Q) ? col[(long long)(r0 + ty) * Q + q] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) acc = fmaf(wt[ty][kk], ct[kk][tx], acc);
        __syncthreads();
    }
    if (co < Cout && q < Q) {
        const long long n = n0 + q / P, p = q % P;
        y[(n * Cout + co) * P + p] = post(acc + b[co]);
    }
}
"""
_CONV_IM2COL_LAUNCH = """    const long long P = (long long)Ho * Wo, ckk = (long long)Cin * KS * KS;
    const long long per_image = ckk * P;
    long long chunk = (1LL << 24) / per_image;  /* images per pass: the scratch stays at most 64 MB */
    if (chunk < 1) chunk = 1;
    if (chunk > Nb) chunk = Nb;
    float* col = 0;
    if (cudaMallocAsync((void**)&col, (size_t)(chunk * per_image) * sizeof(float), stream) != cudaSuccess) return 3;
    for (int n0 = 0; n0 < Nb; n0 += (int)chunk) {
        const long long imgs = Nb - n0 < chunk ? Nb - n0 : chunk, Q = imgs * P, cells = ckk * Q;
        im2col<<<(unsigned)((cells + 255) / 256), 256, 0, stream>>>(x, col, n0, Q, Cin, H, W, Ho, Wo);
        gemm_col<<<dim3((unsigned)((Q + 15) / 16), (unsigned)((Cout + 15) / 16)), dim3(16, 16), 0, stream>>>(
            w, col, b, y, n0, Q, Cout, (int)ckk, P);
    }
    if (cudaFreeAsync(col, stream) != cudaSuccess) return 3;"""
_CONV_CHANNEL = """
/* one thread per output, channel-last walk: consecutive threads take consecutive output channels at one position,
   so they read the same inputs (broadcasts) but weights Cin * KS * KS floats apart and store Ho * Wo floats apart */
__global__ void conv_channel_walk(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, long long total, int Cin, int H,
                                  int W, int Cout, int Ho, int Wo) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int co = (int)(i % Cout);
    long long t = i / Cout;
    const int wo = (int)(t % Wo);
    t /= Wo;
    const int ho = (int)(t % Ho);
    const long long n = t / Ho;
""" + _CONV_TAPS + """    y[((n * Cout + co) * Ho + ho) * Wo + wo] = post(acc + b[co]);
}
"""
_CONV_CHANNEL_LAUNCH = """    const long long total = out[0].numel;
    conv_channel_walk<<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(x, w, b, y, total, Cin, H, W, Cout, Ho,
                                                                          Wo);"""


def _conv_variants(k: int, stride: int, pad: int, relu: bool) -> list[TorchVariant]:
    head = _CONV_HEAD.format(k=k, stride=stride, pad=pad, relu=str(relu).lower())
    specs = [
        ("thread_per_output", ["naive", "coalesced", "block_256"], _CONV_NAIVE, _CONV_NAIVE_LAUNCH),
        ("shared_input_tile_halo", ["shared_tiling", "coalesced", "block_256"], _CONV_TILE, _conv_tile_launch(1)),
        ("shared_tile_four_channels", ["shared_tiling", "register_blocking", "unrolled", "block_256"], _CONV_TILE,
         _conv_tile_launch(4)),
        ("weights_shared_per_channel", ["shared_tiling", "grid_stride", "block_128"], _CONV_WSHARED,
         _CONV_WSHARED_LAUNCH),
        ("four_channels_per_thread", ["register_blocking", "unrolled", "coalesced", "block_256"], _CONV_COUT4,
         _CONV_COUT4_LAUNCH),
        ("im2col_then_gemm", ["multi_pass", "shared_tiling", "fused", "block_256"], _CONV_IM2COL,
         _CONV_IM2COL_LAUNCH),
        ("channel_last_walk", ["strided", "block_128"], _CONV_CHANNEL, _CONV_CHANNEL_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _CONV_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


def _conv_out(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


_CONV_PLANES = [(28, 28), (32, 32), (56, 56), (63, 65), (64, 64), (100, 100), (112, 112), (127, 97), (128, 128)]
_CONV_SHAPES = [c for c in itertools.product([2, 4, 8, 16, 32], [3, 8, 13, 16, 32, 48, 64], [6, 16, 24, 32, 45, 64],
                                             _CONV_PLANES, [3, 5], [1, 2])
                # 2 N Cout Ho Wo Cin k^2 (at padding k // 2) from 0.5 to 16 GFLOP (cuDNN in float32 on these few
                # channels: 0.05 to a few ms); the input at most 16M floats, the output 32M; one image's im2col (Cin
                # k^2 by Ho Wo) at most 16M floats
                if 5e8 <= 2 * c[0] * c[2] * _conv_out(c[3][0], c[4], c[5], c[4] // 2)
                * _conv_out(c[3][1], c[4], c[5], c[4] // 2) * c[1] * c[4] ** 2 <= 1.6e10
                and c[0] * c[1] * c[3][0] * c[3][1] <= 2**24 and c[0] * c[2] * c[3][0] * c[3][1] <= 2**25
                and c[1] * c[4] ** 2 * c[3][0] * c[3][1] <= 2**24]


def conv2d_bias_relu(index: int) -> GeneratedTorchTask:
    rng = rng_for("conv2d_bias_relu", index)
    shapes = shuffled("conv2d_bias_relu", _CONV_SHAPES)
    batch, cin, cout, (h, w), k, stride = shapes[index % len(shapes)]
    pad = int(rng.integers(0, k // 2 + 1))
    relu = bool(rng.random() < 2 / 3)
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    conv = "self.conv(x)"
    expr = f"torch.relu({conv})" if relu else conv
    ho, wo = _conv_out(h, k, stride, pad), _conv_out(w, k, stride, pad)
    doc = (f"y = {expr.replace('self.', '')}: nn.Conv2d({cin}, {cout}, {k}, stride={stride}, padding={pad}) with a "
           f"bias over a (batch_size, {cin}, {h}, {w}) input (scale {spread}){', then ReLU' if relu else ''}; "
           f"the output is (batch_size, {cout}, {ho}, {wo}).")
    source = problem_source(doc, expr, f"torch.randn(batch_size, {cin}, {h}, {w}) * {spread}", batch_size=batch,
                            init_body=f"self.conv = nn.Conv2d({cin}, {cout}, {k}, stride={stride}, padding={pad})")
    tid = task_id("conv2d_bias_relu", index)
    # see the module docstring: dot products of at most 1600 terms; cuDNN may use Winograd or FFT; 1e-3
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"conv2d {cin}->{cout}, {k}x{k}, stride {stride}, padding {pad}" +
                                   (", then ReLU" if relu else ""),
                       tolerance=DtypeTolerance(fp32=(1e-3, 1e-3)))
    variants = _conv_variants(k, stride, pad, relu)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "conv2d_bias_relu", index,
                              {"batch": batch, "cin": cin, "cout": cout, "h": h, "w": w, "kernel": k,
                               "stride": stride, "pad": pad, "relu": relu, "spread": spread}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# half_linear: y = act(x @ W^T + b) in float16 with float32 accumulation, output float16 or float32

_HL_HEAD = """#include <cuda_fp16.h>

constexpr bool HAS_BIAS = {bias};
constexpr bool OUT_HALF = {out_half};  /* float16 output; otherwise float32 holding the float16 values (.float()) */

__device__ __forceinline__ float act(float v) {{
    return {act};
}}

/* output i = (m, n) as the Model computes it: the float32 sum plus the bias rounded to half (the layer's output),
   then the activation of that half value in float32, rounded to half again (exact when there is no activation) */
__device__ __forceinline__ void store_out(void* __restrict__ y, long long i, float acc,
                                          const __half* __restrict__ bias, int n) {{
    const float v = __half2float(__float2half_rn(acc + (HAS_BIAS ? __half2float(bias[n]) : 0.f)));
    const __half r = __float2half_rn(act(v));
    if (OUT_HALF) static_cast<__half*>(y)[i] = r;
    else static_cast<float*>(y)[i] = __half2float(r);
}}
"""
_HL_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* x (M, K) float16, fc.weight (N, K) float16, [fc.bias (N) float16] */
    if (n_in != (HAS_BIAS ? 3 : 2) || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2) return 1;
    if (in[0].dtype != DT_FLOAT16 || in[1].dtype != DT_FLOAT16) return 1;
    if (out[0].dtype != (OUT_HALF ? DT_FLOAT16 : DT_FLOAT32)) return 1;
    const int M = (int)in[0].shape[0], K = (int)in[0].shape[1], N = (int)in[1].shape[0];
    if (in[1].shape[1] != K) return 1;
    if (HAS_BIAS && (in[2].dtype != DT_FLOAT16 || in[2].numel != N)) return 1;
    if (out[0].numel != (long long)M * N) return 1;
    if (out[0].numel == 0) return 0;
    const __half* x = (const __half*)in[0].data;
    const __half* w = (const __half*)in[1].data;
    const __half* bias = HAS_BIAS ? (const __half*)in[2].data : 0;
    void* y = out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_HL_NAIVE = """
/* pass 1: one thread per output, the float32 sum of half products into a float32 scratch matrix */
__global__ void linear_sum(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ s,
                           int M, int N, int K) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * N) return;
    const int m = (int)(i / N), n = (int)(i % N);
    const __half* xr = x + (long long)m * K;
    const __half* wr = w + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(__half2float(xr[k]), __half2float(wr[k]), acc);
    s[i] = acc;
}

/* pass 2: the bias, the roundings and the activation */
__global__ void linear_epilogue(const float* __restrict__ s, const __half* __restrict__ bias, void* __restrict__ y,
                                long long total, int N) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) store_out(y, i, s[i], bias, (int)(i % N));
}
"""
_HL_NAIVE_LAUNCH = """    const long long total = (long long)M * N;
    float* s = 0;
    if (cudaMallocAsync((void**)&s, (size_t)total * sizeof(float), stream) != cudaSuccess) return 3;
    linear_sum<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, w, s, M, N, K);
    linear_epilogue<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(s, bias, y, total, N);
    if (cudaFreeAsync(s, stream) != cudaSuccess) return 3;"""
_HL_NAIVE_2D = """
/* one thread per output on a 2-D grid (x: n, y: m), the bias and activation in the same kernel */
__global__ void linear_2d(const __half* __restrict__ x, const __half* __restrict__ w, const __half* __restrict__ bias,
                          void* __restrict__ y, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const __half* xr = x + (long long)m * K;
    const __half* wr = w + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(__half2float(xr[k]), __half2float(wr[k]), acc);
    store_out(y, (long long)m * N + n, acc, bias, n);
}
"""
_HL_NAIVE_2D_LAUNCH = """    const dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));
    linear_2d<<<grid, dim3(16, 16), 0, stream>>>(x, w, bias, y, M, N, K);"""
_HL_HALF2 = """
/* one thread per output, the rows read as __half2 pairs (two halves a load) when K is even and both pointers are
   4-byte aligned (every row then starts on a pair); otherwise one half at a time */
__global__ void __launch_bounds__(128) linear_half2(const __half* __restrict__ x, const __half* __restrict__ w,
                                                    const __half* __restrict__ bias, void* __restrict__ y, int M,
                                                    int N, int K, bool vec) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * N) return;
    const int m = (int)(i / N), n = (int)(i % N);
    const __half* xr = x + (long long)m * K;
    const __half* wr = w + (long long)n * K;
    float acc = 0.f;
    if (vec) {
        const __half2* x2 = reinterpret_cast<const __half2*>(xr);
        const __half2* w2 = reinterpret_cast<const __half2*>(wr);
        for (int q = 0; q < K / 2; ++q) {
            const float2 a = __half22float2(x2[q]), b = __half22float2(w2[q]);
            acc = fmaf(a.x, b.x, acc);
            acc = fmaf(a.y, b.y, acc);
        }
    } else {
        for (int k = 0; k < K; ++k) acc = fmaf(__half2float(xr[k]), __half2float(wr[k]), acc);
    }
    store_out(y, i, acc, bias, n);
}
"""
_HL_HALF2_LAUNCH = """    const unsigned long long bits =
        reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(w);
    const bool vec = K % 2 == 0 && (bits & 3) == 0;
    const long long total = (long long)M * N;
    linear_half2<<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(x, w, bias, y, M, N, K, vec);"""
_HL_TILED = """
/* a T x T tile of outputs per block of T x T threads: the x and W tiles staged in shared memory as halves (half the
   bytes of float tiles), converted to float at each product */
template <int T>
__global__ void __launch_bounds__(T * T) linear_tiled(const __half* __restrict__ x, const __half* __restrict__ w,
                                                      const __half* __restrict__ bias, void* __restrict__ y, int M,
                                                      int N, int K) {
    __shared__ __half xs[T][T + 2];  /* xs[m][k] */
    __shared__ __half ws[T][T + 2];  /* ws[n][k], padded: thread tx reads row tx */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
    const int wn = blockIdx.x * T + ty;  /* the weight row this thread loads */
    const __half zero = __float2half_rn(0.f);
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        const int k = k0 + tx;
        xs[ty][tx] = (m < M && k < K) ? x[(long long)m * K + k] : zero;
        ws[ty][tx] = (wn < N && k < K) ? w[(long long)wn * K + k] : zero;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) acc = fmaf(__half2float(xs[ty][kk]), __half2float(ws[tx][kk]), acc);
        __syncthreads();
    }
    if (m < M && n < N) store_out(y, (long long)m * N + n, acc, bias, n);
}
"""


def _hl_tiled_launch(t: int) -> str:
    return (f"    const dim3 grid((unsigned)((N + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}));\n"
            f"    linear_tiled<{t}><<<grid, dim3({t}, {t}), 0, stream>>>(x, w, bias, y, M, N, K);")


_HL_WARP = _WARP_SUM + """
/* one warp per output: the lanes stride over the rows 8 halves (16 bytes, a uint4) at a time when K % 8 == 0 and
   both pointers are 16-byte aligned, one half at a time otherwise; a shuffle sum */
__global__ void linear_warp(const __half* __restrict__ x, const __half* __restrict__ w, const __half* __restrict__ bias,
                            void* __restrict__ y, int M, int N, int K, bool vec) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)M * N) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const int m = (int)(o / N), n = (int)(o % N);
    const __half* xr = x + (long long)m * K;
    const __half* wr = w + (long long)n * K;
    float acc = 0.f;
    if (vec) {
        const uint4* x8 = reinterpret_cast<const uint4*>(xr);
        const uint4* w8 = reinterpret_cast<const uint4*>(wr);
        for (int q = lane; q < K / 8; q += 32) {
            const uint4 av = x8[q], bv = w8[q];
            const __half2* a2 = reinterpret_cast<const __half2*>(&av);
            const __half2* b2 = reinterpret_cast<const __half2*>(&bv);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 a = __half22float2(a2[j]), b = __half22float2(b2[j]);
                acc = fmaf(a.x, b.x, acc);
                acc = fmaf(a.y, b.y, acc);
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) acc = fmaf(__half2float(xr[k]), __half2float(wr[k]), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) store_out(y, o, acc, bias, n);
}
"""
_HL_WARP_LAUNCH = """    const bool vec = K % 8 == 0 && aligned16(x) && aligned16(w);
    const long long warps = (long long)M * N;  /* 8 a block */
    linear_warp<<<(unsigned)((warps + 7) / 8), 256, 0, stream>>>(x, w, bias, y, M, N, K, vec);"""
_HL_REG2 = """
/* 256 threads (16 x 16) per 32 x 32 tile: each thread keeps 2 x 2 outputs in registers, at rows ty + 16i and
   columns tx + 16j of the tile; k goes through shared memory 16 at a time, the halves converted to float on the
   way in and stored k-major (xs[k][m], ws[k][n]) */
__global__ void __launch_bounds__(256) linear_reg2(const __half* __restrict__ x, const __half* __restrict__ w,
                                                   const __half* __restrict__ bias, void* __restrict__ y, int M,
                                                   int N, int K) {
    __shared__ float xs[16][32 + 1];
    __shared__ float ws[16][32 + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int m0 = blockIdx.y * 32, n0 = blockIdx.x * 32;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {  /* 512 elements of each tile, 2 per thread; 16 consecutive k per row */
            const int e = tid + 256 * p, r = e / 16, k = e % 16, gk = k0 + k;
            xs[k][r] = (m0 + r < M && gk < K) ? __half2float(x[(long long)(m0 + r) * K + gk]) : 0.f;
            ws[k][r] = (n0 + r < N && gk < K) ? __half2float(w[(long long)(n0 + r) * K + gk]) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            const float a0 = xs[kk][ty], a1 = xs[kk][ty + 16], b0 = ws[kk][tx], b1 = ws[kk][tx + 16];
            acc[0][0] = fmaf(a0, b0, acc[0][0]);
            acc[0][1] = fmaf(a0, b1, acc[0][1]);
            acc[1][0] = fmaf(a1, b0, acc[1][0]);
            acc[1][1] = fmaf(a1, b1, acc[1][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < M && n < N) store_out(y, (long long)m * N + n, acc[i][j], bias, n);
        }
}
"""
_HL_REG2_LAUNCH = """    const dim3 grid((unsigned)((N + 31) / 32), (unsigned)((M + 31) / 32));
    linear_reg2<<<grid, dim3(16, 16), 0, stream>>>(x, w, bias, y, M, N, K);"""
_HALF_TILE_LOADS = {  # common.REG4_TILES's float loads, reading halves instead
    "? A[(long long)(m0 + r) * K + gk] :": "? __half2float(A[(long long)(m0 + r) * K + gk]) :",
    "? B[(long long)(n0 + r) * K + gk] :": "? __half2float(B[(long long)(n0 + r) * K + gk]) :",
}


def _half_reg4_tiles() -> str:
    text = REG4_TILES
    for old, new in _HALF_TILE_LOADS.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


_HL_REG4 = """
/* 256 threads (16 x 16) per 64 x 64 tile: 4 x 4 outputs per thread in registers, at rows tr + 16i and columns
   tc + 16j; k through shared memory 16 at a time, the halves converted to float on the way in (tiles k-major) */
__global__ void __launch_bounds__(256) linear_reg4(const __half* __restrict__ A, const __half* __restrict__ B,
                                                   const __half* __restrict__ bias, void* __restrict__ y, int M,
                                                   int N, int K) {
""" + _half_reg4_tiles() + """#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + tr + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tc + 16 * j;
            if (m < M && n < N) store_out(y, (long long)m * N + n, acc[i][j], bias, n);
        }
    }
}
"""
_HL_REG4_LAUNCH = """    linear_reg4<<<dim3((unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64)), 256, 0, stream>>>(
        x, w, bias, y, M, N, K);"""

_HL_ACTS = ("none", "relu", "gelu", "silu", "tanh", "sigmoid")


def _half_variants(bias: bool, out_half: bool, act: str) -> list[TorchVariant]:
    head = _HL_HEAD.format(bias=str(bias).lower(), out_half=str(out_half).lower(),
                           act="v" if act == "none" else ACTIVATIONS[act][1].format(v="v"))
    mp = "mixed_precision"
    specs = [
        ("naive_sum_then_epilogue", ["naive", "multi_pass", mp, "block_256"], _HL_NAIVE, _HL_NAIVE_LAUNCH),
        ("naive_2d_fused_epilogue", ["naive", "fused", mp, "block_256"], _HL_NAIVE_2D, _HL_NAIVE_2D_LAUNCH),
        ("half2_vectorized", ["vectorized", "fused", mp, "block_128"], _HL_HALF2, _HL_HALF2_LAUNCH),
        ("shared_half_tiles_16", ["shared_tiling", "coalesced", "fused", mp, "block_256"], _HL_TILED,
         _hl_tiled_launch(16)),
        ("shared_half_tiles_32", ["shared_tiling", "coalesced", "fused", mp, "block_1024"], _HL_TILED,
         _hl_tiled_launch(32)),
        ("warp_per_output_shuffle", ["warp_shuffle", "vectorized", "coalesced", "fused", mp, "block_256"], _HL_WARP,
         _HL_WARP_LAUNCH),
        ("register_blocked_2x2", ["register_blocking", "shared_tiling", "fused", mp, "block_256"], _HL_REG2,
         _HL_REG2_LAUNCH),
        ("register_blocked_4x4", ["register_blocking", "shared_tiling", "unrolled", "fused", mp, "block_256"],
         _HL_REG4, _HL_REG4_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _HL_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


_HL_SHAPES = [c for c in itertools.product([16, 32, 64, 128, 256, 512, 1024, 2048],
                                           [256, 510, 512, 777, 768, 1000, 1024, 1500, 2048, 3000, 4096],
                                           [128, 250, 256, 512, 768, 1000, 1024, 2048, 4096])
              # 2 M K N from 1 to 16 GFLOP: eager PyTorch runs it on tensor cores (tens of microseconds with the
              # activation's and the cast's launches), the variants accumulate in float32 on CUDA cores
              if 1e9 <= 2 * c[0] * c[1] * c[2] <= 1.6e10]


def half_linear(index: int) -> GeneratedTorchTask:
    rng = rng_for("half_linear", index)
    shapes = shuffled("half_linear", _HL_SHAPES)
    batch, in_f, out_f = shapes[index % len(shapes)]
    bias = bool(rng.random() < 0.75)
    act = str(rng.choice(_HL_ACTS))
    out_half = bool(rng.random() < 0.5)
    spread = round(float(rng.uniform(0.5, 2.5)), 3)
    expr = "self.fc(x)" if act == "none" else ACTIVATIONS[act][0].format(v="self.fc(x)")
    if not out_half:
        expr = f"{expr}.float()" if act == "none" else f"({expr}).float()"
    doc = (f"y = {expr.replace('self.', '').replace('torch.nn.functional.', 'F.')} in float16: fc = nn.Linear({in_f}, "
           f"{out_f}, bias={bias}) initialised in float32 then cast to half, over a float16 (batch_size, {in_f}) "
           f"input (scale {spread}); float32 accumulation, the output "
           f"{'float16' if out_half else 'cast back to float32'}.")
    source = problem_source(doc, expr, f"(torch.randn(batch_size, {in_f}) * {spread}).half()", batch_size=batch,
                            init_body=f"self.fc = nn.Linear({in_f}, {out_f}, bias={bias}).half()")
    tid = task_id("half_linear", index)
    # see the module docstring: one or two float16 roundings of the output, each possibly one ulp (2^-11 to
    # 2^-10 relative) apart from the reference's; 5e-3 relative, 2e-3 absolute, for float16 and float32 outputs
    tol = (2e-3, 5e-3)
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"half linear {in_f}->{out_f}" + (f" then {act}" if act != "none" else "") +
                                   ("" if out_half else ", float32 output"),
                       tolerance=DtypeTolerance(fp32=tol, fp16=tol))
    variants = _half_variants(bias, out_half, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "half_linear", index,
                              {"batch": batch, "in_features": in_f, "out_features": out_f, "bias": bias, "act": act,
                               "out_half": out_half, "spread": spread}, tuple(variants))
