"""``swiglu_mlp``, ``conv1d_causal`` and ``rotary_embedding``: the pieces of a modern transformer or state-space block
that eager PyTorch runs as several kernels, so that the variants can fuse, tile and vectorise them in different ways.

``swiglu_mlp``: ``y = down(silu(gate(x)) * up(x))`` with three ``nn.Linear`` layers (PyTorch's default
initialisation under the harness's seed), all with or all without a bias (by index). The index picks the batch, the
three widths (the hidden width a multiple of 16 or not, some widths not multiples of 4: the float4 variant's scalar
path) and the input's scale. Variants: naive GEMMs with the SiLU-and-product as a separate kernel, one naive 2-D
kernel computing the gate and up dot products together and writing ``silu(a) * b``, shared-memory tiles of 16 and
32 (the gate and up tiles share the input's), 4x4 register blocking, a warp per output with float4 loads, and one
fused kernel per four rows (the hidden rows stay in shared memory). Outputs are of order 0.1 to 1: dot products of
at most 1536 terms of order 1/sqrt(fan_in), summed by every variant in another order than cuBLAS: a few 1e-6
apart; expf-based SiLU differs from PyTorch's by ulps. 1e-3 absolute and relative, ``gelu_mlp``'s rule.

``conv1d_causal``: a depthwise causal convolution over (B, C, L), ``nn.Conv1d(C, C, K, groups=C, padding=K - 1)``
with a bias, cut to the first L outputs (Mamba's short convolution), then SiLU or nothing. The index picks B (the
batch), C, L (some not multiples of 4 or of the block), K (2 to 7) and the activation. Variants: a thread per output
walking time-major, shared tiles of L with a K - 1 halo (128 and 256 threads), a register window sliding along 32
outputs per thread, the weights and bias in constant memory, a channel-major walk (consecutive threads on
consecutive channels, uncoalesced), and four outputs per thread with float4 loads and stores. Each output is a sum
of at most 7 products of O(1) values plus a bias, in another order than the reference's: a few ulps; 1e-4 absolute
and relative.

``rotary_embedding``: rotary position embedding (RoPE) of a (B, heads, T, D) query tensor at int64 positions (a
forward input, drawn below 2048, 8192 or 32768). The Model holds ``inv_freq = 1 / base ** (arange(0, D, 2) / D)``
as a float32 buffer (made in ``__init__``; the kernels get it after the forward inputs, so none has to redo the
``pow``) and computes the angles ``float(position) * inv_freq`` in float32 (one rounding, which every variant
reproduces exactly: ``(float)pos * inv_freq[i]``), then their cos and sin, and rotates pairs of elements: the two
halves of a row (GPT-NeoX / Llama ``rotate_half``) or adjacent elements (GPT-J / RoFormer), by index. The index also
picks the batch, heads, T, D (32 to 128, one not a multiple of 8), the base and the input's scale. Variants: a
thread per pair, a thread per row, a thread per (batch, position, pair) looping over the heads with its cos and sin
in registers, a block per position with the position's cos/sin table in shared memory, float2 and float4 loads (a
scalar kernel where the row does not split into whole vectors), and two kernels (a cos/sin table, then the
rotation). Outputs are of the input's order; sincosf is within 2 ulps of the correctly rounded cos and sin of the
same float32 angle (CUDA's documented bound, no fast math) and the rotation is two products and a sum (contracted to
an fma or not): errors of a few 1e-7 relative to the row's size. 1e-4 absolute and relative still catches angles
computed another way (a ``powf`` for ``inv_freq``, ``__sinf``, a double-precision angle), which at positions in the
thousands are wrong by 1e-4 to 1e-2.
"""

from __future__ import annotations

import itertools

from cudaperf.dataset.pytorch_families.common import (REG4_TILES, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


# ---------------------------------------------------------------------------------------------------------------
# swiglu_mlp: y = down(silu(gate(x)) * up(x))

_SW_HEAD = """constexpr bool BIAS = {bias};  /* the three layers have biases */

__device__ __forceinline__ float silu(float v) {{
    return v / (1.f + expf(-v));
}}

__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}}
"""
_SW_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* x, gate.weight, [gate.bias], up.weight, [up.bias], down.weight, [down.bias] */
    if (n_in != (BIAS ? 7 : 4) || n_out != 1 || in[0].ndim != 2) return 1;
    if (in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    const TensorArg& tg = in[1];
    const TensorArg& tu = in[BIAS ? 3 : 2];
    const TensorArg& td = in[BIAS ? 5 : 3];
    if (tg.ndim != 2 || tu.ndim != 2 || td.ndim != 2) return 1;
    const int M = (int)in[0].shape[0], K = (int)in[0].shape[1];  /* x: (M, K) */
    const int H = (int)tg.shape[0], N = (int)td.shape[0];         /* gate, up: (H, K); down: (N, H) */
    if (tg.shape[1] != K || tu.shape[0] != H || tu.shape[1] != K || td.shape[1] != H) return 1;
    if (BIAS && (in[2].numel != H || in[4].numel != H || in[6].numel != N)) return 1;
    if (out[0].numel != (long long)M * N) return 1;
    const float* x = (const float*)in[0].data;
    const float* wg = (const float*)tg.data;
    const float* wu = (const float*)tu.data;
    const float* wd = (const float*)td.data;
    const float* bg = BIAS ? (const float*)in[2].data : 0;  /* null: no bias */
    const float* bu = BIAS ? (const float*)in[4].data : 0;
    const float* bd = BIAS ? (const float*)in[6].data : 0;
    float* y = (float*)out[0].data;
    if (M == 0 || N == 0) return 0;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_SW_SCRATCH = """    float* h = 0;  /* silu(gate) * up, (M, H) */
    if (cudaMallocAsync((void**)&h, (size_t)M * H * sizeof(float), stream) != cudaSuccess) return 3;
{body}
    if (cudaFreeAsync(h, stream) != cudaSuccess) return 3;"""

_SW_NAIVE = """
/* C[m][n] = A[m] . B[n] (+ bias[n]): one thread per output, row-major */
__global__ void gemm_naive(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                           float* __restrict__ C, int M, int N, int K) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * N) return;
    const int m = (int)(i / N), n = (int)(i % N);
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
    C[i] = acc + (bias ? bias[n] : 0.f);
}

/* g = silu(g) * u, in place */
__global__ void silu_mul(float* g, const float* __restrict__ u, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] = silu(g[i]) * u[i];
}
"""
_SW_NAIVE_LAUNCH = """    float* g = 0;  /* gate(x) then silu(gate) * up, and up(x): two (M, H) buffers */
    const long long nh = (long long)M * H, ny = (long long)M * N;
    if (cudaMallocAsync((void**)&g, (size_t)nh * 2 * sizeof(float), stream) != cudaSuccess) return 3;
    float* u = g + nh;
    gemm_naive<<<(unsigned)((nh + 255) / 256), 256, 0, stream>>>(x, wg, bg, g, M, H, K);
    gemm_naive<<<(unsigned)((nh + 255) / 256), 256, 0, stream>>>(x, wu, bu, u, M, H, K);
    silu_mul<<<(unsigned)((nh + 255) / 256), 256, 0, stream>>>(g, u, nh);
    gemm_naive<<<(unsigned)((ny + 255) / 256), 256, 0, stream>>>(g, wd, bd, y, M, N, H);
    if (cudaFreeAsync(g, stream) != cudaSuccess) return 3;"""
_SW_NAIVE_2D = """
/* h[m][n] = silu(x[m] . wg[n] + bg[n]) * (x[m] . wu[n] + bu[n]): both dot products in one thread, 2-D grid */
__global__ void gate_up_2d(const float* __restrict__ A, const float* __restrict__ Bg, const float* __restrict__ Bu,
                           const float* __restrict__ bg, const float* __restrict__ bu, float* __restrict__ Hh,
                           int M, int H, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= H) return;
    const float* a = A + (long long)m * K;
    const float* g = Bg + (long long)n * K;
    const float* u = Bu + (long long)n * K;
    float ag = 0.f, au = 0.f;
    for (int k = 0; k < K; ++k) {
        const float av = a[k];
        ag = fmaf(av, g[k], ag);
        au = fmaf(av, u[k], au);
    }
    Hh[(long long)m * H + n] = silu(ag + (bg ? bg[n] : 0.f)) * (au + (bu ? bu[n] : 0.f));
}

/* C = A B^T (+ bias): one thread per output on a 2-D grid */
__global__ void gemm_2d(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                        float* __restrict__ C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(a[k], b[k], acc);
    C[(long long)m * N + n] = acc + (bias ? bias[n] : 0.f);
}
"""
_SW_NAIVE_2D_LAUNCH = _SW_SCRATCH.format(body="""    const dim3 block(16, 16);
    gate_up_2d<<<dim3((unsigned)((H + 15) / 16), (unsigned)((M + 15) / 16)), block, 0, stream>>>(
        x, wg, wu, bg, bu, h, M, H, K);
    gemm_2d<<<dim3((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16)), block, 0, stream>>>(
        h, wd, bd, y, M, N, H);""")
_SW_TILED = """
/* a T x T tile of h per block of T x T threads: the x tile is shared by the gate and up tiles (k through shared
   memory T at a time), the epilogue writes silu(gate) * up */
template <int T>
__global__ void gate_up_tiled(const float* __restrict__ A, const float* __restrict__ Bg, const float* __restrict__ Bu,
                              const float* __restrict__ bg, const float* __restrict__ bu, float* __restrict__ Hh,
                              int M, int H, int K) {
    __shared__ float as[T][T + 1];  /* as[m][k] */
    __shared__ float gs[T][T + 1];  /* gs[n][k], padded: thread tx reads row tx */
    __shared__ float us[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
    const int bn = blockIdx.x * T + ty;  /* the weight row this thread loads */
    float ag = 0.f, au = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        const int k = k0 + tx;
        as[ty][tx] = (m < M && k < K) ? A[(long long)m * K + k] : 0.f;
        gs[ty][tx] = (bn < H && k < K) ? Bg[(long long)bn * K + k] : 0.f;
        us[ty][tx] = (bn < H && k < K) ? Bu[(long long)bn * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) {
            const float av = as[ty][kk];
            ag = fmaf(av, gs[tx][kk], ag);
            au = fmaf(av, us[tx][kk], au);
        }
        __syncthreads();
    }
    if (m < M && n < H) Hh[(long long)m * H + n] = silu(ag + (bg ? bg[n] : 0.f)) * (au + (bu ? bu[n] : 0.f));
}

/* C = A B^T (+ bias), T x T tiles through shared memory */
template <int T>
__global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                           float* __restrict__ C, int M, int N, int K) {
    __shared__ float as[T][T + 1];
    __shared__ float bs[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
    const int bn = blockIdx.x * T + ty;
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
    if (m < M && n < N) C[(long long)m * N + n] = acc + (bias ? bias[n] : 0.f);
}
"""


def _sw_tiled_launch(t: int) -> str:
    return _SW_SCRATCH.format(body=f"""    const dim3 block({t}, {t});
    const dim3 grid1((unsigned)((H + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}));
    const dim3 grid2((unsigned)((N + {t - 1}) / {t}), (unsigned)((M + {t - 1}) / {t}));
    gate_up_tiled<{t}><<<grid1, block, 0, stream>>>(x, wg, wu, bg, bu, h, M, H, K);
    gemm_tiled<{t}><<<grid2, block, 0, stream>>>(h, wd, bd, y, M, N, H);""")


_SW_REGBLOCK = """
/* 256 threads (16 x 16) per 64 x 64 tile: each thread keeps 4 x 4 outputs in registers (of both the gate and the up
   product in the first kernel), at rows tr + 16i and columns tc + 16j of the tile; k goes through shared memory 16
   at a time, the tiles stored k-major */
__global__ void __launch_bounds__(256) gate_up_reg4(const float* __restrict__ A, const float* __restrict__ Bg,
                                                    const float* __restrict__ Bu, const float* __restrict__ bg,
                                                    const float* __restrict__ bu, float* __restrict__ Hh,
                                                    int M, int H, int K) {
    __shared__ float as[16][64 + 4];
    __shared__ float gs[16][64 + 4];
    __shared__ float us[16][64 + 4];
    const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float ag[4][4], au[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) ag[i][j] = au[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {  /* 1024 elements of each tile, 4 per thread; 16 consecutive k per row */
            const int e = tid + 256 * p, r = e / 16, k = e % 16, gk = k0 + k;
            const bool kin = gk < K;
            as[k][r] = (m0 + r < M && kin) ? A[(long long)(m0 + r) * K + gk] : 0.f;
            gs[k][r] = (n0 + r < H && kin) ? Bg[(long long)(n0 + r) * K + gk] : 0.f;
            us[k][r] = (n0 + r < H && kin) ? Bu[(long long)(n0 + r) * K + gk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], g[4], u[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = as[kk][tr + 16 * i];
                g[i] = gs[kk][tc + 16 * i];
                u[i] = us[kk][tc + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    ag[i][j] = fmaf(a[i], g[j], ag[i][j]);
                    au[i][j] = fmaf(a[i], u[j], au[i][j]);
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + tr + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tc + 16 * j;
            if (m < M && n < H)
                Hh[(long long)m * H + n] = silu(ag[i][j] + (bg ? bg[n] : 0.f)) * (au[i][j] + (bu ? bu[n] : 0.f));
        }
    }
}

/* C = A B^T (+ bias), the same 64 x 64 tiles and 4 x 4 outputs per thread */
__global__ void __launch_bounds__(256) gemm_reg4(const float* __restrict__ A, const float* __restrict__ B,
                                                 const float* __restrict__ bias, float* __restrict__ C,
                                                 int M, int N, int K) {
""" + REG4_TILES + """#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + tr + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tc + 16 * j;
            if (m < M && n < N) C[(long long)m * N + n] = acc[i][j] + (bias ? bias[n] : 0.f);
        }
    }
}
"""
_SW_REGBLOCK_LAUNCH = _SW_SCRATCH.format(body="""\
    const dim3 grid1((unsigned)((H + 63) / 64), (unsigned)((M + 63) / 64));
    const dim3 grid2((unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64));
    gate_up_reg4<<<grid1, 256, 0, stream>>>(x, wg, wu, bg, bu, h, M, H, K);
    gemm_reg4<<<grid2, 256, 0, stream>>>(h, wd, bd, y, M, N, H);""")
_SW_WARP = """
/* lane-strided dot products of a row of A with one row of B (or two: the gate and up rows), float4 when the rows
   and pointers allow it; the caller reduces with shuffles */
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

/* one warp per element of h: both dot products, then silu(gate) * up */
__global__ void gate_up_warp(const float* __restrict__ A, const float* __restrict__ Bg, const float* __restrict__ Bu,
                             const float* __restrict__ bg, const float* __restrict__ bu, float* __restrict__ Hh,
                             int M, int H, int K) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)M * H) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const int m = (int)(o / H), n = (int)(o % H);
    const float* a = A + (long long)m * K;
    const float* g = Bg + (long long)n * K;
    const float* u = Bu + (long long)n * K;
    float ag = 0.f, au = 0.f;
    if (K % 4 == 0 && aligned16(A) && aligned16(Bg) && aligned16(Bu)) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* g4 = reinterpret_cast<const float4*>(g);
        const float4* u4 = reinterpret_cast<const float4*>(u);
        for (int q = lane; q < K / 4; q += 32) {
            const float4 av = a4[q], gv = g4[q], uv = u4[q];
            ag = fmaf(av.x, gv.x, fmaf(av.y, gv.y, fmaf(av.z, gv.z, fmaf(av.w, gv.w, ag))));
            au = fmaf(av.x, uv.x, fmaf(av.y, uv.y, fmaf(av.z, uv.z, fmaf(av.w, uv.w, au))));
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            ag = fmaf(a[k], g[k], ag);
            au = fmaf(a[k], u[k], au);
        }
    }
    ag = warp_sum(ag);
    au = warp_sum(au);
    if (lane == 0) Hh[o] = silu(ag + (bg ? bg[n] : 0.f)) * (au + (bu ? bu[n] : 0.f));
}

/* one warp per output of C = A B^T (+ bias) */
__global__ void gemm_warp(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
                          float* __restrict__ C, int M, int N, int K) {
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)M * N) return;
    const int m = (int)(o / N), n = (int)(o % N);
    const float* a = A + (long long)m * K;
    const float* b = B + (long long)n * K;
    float acc = 0.f;
    if (K % 4 == 0 && aligned16(A) && aligned16(B)) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        for (int q = lane; q < K / 4; q += 32) {
            const float4 u = a4[q], v = b4[q];
            acc = fmaf(u.x, v.x, fmaf(u.y, v.y, fmaf(u.z, v.z, fmaf(u.w, v.w, acc))));
        }
    } else {
        for (int k = lane; k < K; k += 32) acc = fmaf(a[k], b[k], acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) C[o] = acc + (bias ? bias[n] : 0.f);
}
"""
_SW_WARP_LAUNCH = _SW_SCRATCH.format(body="""\
    const long long wh = (long long)M * H, wy = (long long)M * N;  /* warps, 8 a block */
    gate_up_warp<<<(unsigned)((wh + 7) / 8), 256, 0, stream>>>(x, wg, wu, bg, bu, h, M, H, K);
    gemm_warp<<<(unsigned)((wy + 7) / 8), 256, 0, stream>>>(h, wd, bd, y, M, N, H);""")
_SW_FUSED = """
/* the whole MLP in one kernel: a block of 8 warps per R rows of x. The rows go to shared memory; each warp takes
   hidden units j (the gate and up rows' dot products with all R rows at once, reduced with shuffles) and writes
   silu(gate) * up to shared memory; then the outputs the same way from the hidden rows. h never reaches global
   memory. */
template <int R>
__global__ void __launch_bounds__(256) swiglu_fused_rows(const float* __restrict__ x, const float* __restrict__ wg,
                                                         const float* __restrict__ bg, const float* __restrict__ wu,
                                                         const float* __restrict__ bu, const float* __restrict__ wd,
                                                         const float* __restrict__ bd, float* __restrict__ y,
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
        const float* gj = wg + (long long)j * K;
        const float* uj = wu + (long long)j * K;
        float ag[R], au[R];
#pragma unroll
        for (int rr = 0; rr < R; ++rr) ag[rr] = au[rr] = 0.f;
        for (int k = lane; k < K; k += 32) {
            const float gv = gj[k], uv = uj[k];
#pragma unroll
            for (int rr = 0; rr < R; ++rr) {
                const float xv = xs[rr * K + k];
                ag[rr] = fmaf(xv, gv, ag[rr]);
                au[rr] = fmaf(xv, uv, au[rr]);
            }
        }
#pragma unroll
        for (int rr = 0; rr < R; ++rr) {
            ag[rr] = warp_sum(ag[rr]);
            au[rr] = warp_sum(au[rr]);
        }
        if (lane == 0) {
            const float gb = bg ? bg[j] : 0.f, ub = bu ? bu[j] : 0.f;
#pragma unroll
            for (int rr = 0; rr < R; ++rr) hs[rr * H + j] = silu(ag[rr] + gb) * (au[rr] + ub);
        }
    }
    __syncthreads();
    for (int j = warp; j < N; j += 8) {
        const float* dj = wd + (long long)j * H;
        float acc[R];
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = 0.f;
        for (int k = lane; k < H; k += 32) {
            const float dv = dj[k];
#pragma unroll
            for (int rr = 0; rr < R; ++rr) acc[rr] = fmaf(hs[rr * H + k], dv, acc[rr]);
        }
#pragma unroll
        for (int rr = 0; rr < R; ++rr) acc[rr] = warp_sum(acc[rr]);
        if (lane == 0) {
            const float db = bd ? bd[j] : 0.f;
#pragma unroll
            for (int rr = 0; rr < R; ++rr)
                if (r0 + rr < M) y[(long long)(r0 + rr) * N + j] = acc[rr] + db;
        }
    }
}
"""
_SW_FUSED_LAUNCH = """    const size_t smem = (size_t)4 * (K + H) * sizeof(float);
    if (smem > 48 * 1024 && cudaFuncSetAttribute(swiglu_fused_rows<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    swiglu_fused_rows<4><<<(unsigned)((M + 3) / 4), 256, smem, stream>>>(x, wg, bg, wu, bu, wd, bd, y, M, K, H, N);"""


def _swiglu_variants(bias: bool) -> list[TorchVariant]:
    head = _SW_HEAD.format(bias="true" if bias else "false")
    specs = [
        ("naive_four_kernels", ["naive", "many_launches", "multi_pass", "block_256"], _SW_NAIVE, _SW_NAIVE_LAUNCH),
        ("gate_up_fused_naive_2d", ["naive", "fused", "block_256"], _SW_NAIVE_2D, _SW_NAIVE_2D_LAUNCH),
        ("tiled_16", ["shared_tiling", "fused", "coalesced", "block_256"], _SW_TILED, _sw_tiled_launch(16)),
        ("tiled_32", ["shared_tiling", "fused", "coalesced", "block_1024"], _SW_TILED, _sw_tiled_launch(32)),
        ("register_blocked_4x4", ["register_blocking", "shared_tiling", "unrolled", "fused", "block_256"],
         _SW_REGBLOCK, _SW_REGBLOCK_LAUNCH),
        ("warp_per_output_vec4", ["warp_shuffle", "vectorized", "coalesced", "fused", "block_256"], _SW_WARP,
         _SW_WARP_LAUNCH),
        ("fused_block_per_4_rows", ["block_per_row", "fused", "warp_shuffle", "shared_tiling", "register_blocking",
                                    "block_256"], _SW_FUSED, _SW_FUSED_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _SW_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


_SW_SHAPES = [c for c in itertools.product([32, 64, 128, 256, 512], [128, 256, 384, 510, 512, 768],
                                           [256, 344, 512, 688, 1000, 1022, 1024, 1376, 1536],
                                           [128, 250, 256, 500, 512, 768])
              # the batch times the three layers' multiply-adds: 2M to 600M
              if 2_000_000 <= c[0] * c[2] * (2 * c[1] + c[3]) <= 600_000_000]


def swiglu_mlp(index: int) -> GeneratedTorchTask:
    rng = rng_for("swiglu_mlp", index)
    shapes = shuffled("swiglu_mlp", _SW_SHAPES)
    batch, in_f, hidden, out_f = shapes[index % len(shapes)]
    bias = bool(rng.random() < 0.5)
    spread = round(float(rng.uniform(0.5, 2.5)), 3)
    expr = "self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))"
    source = problem_source(
        f"y = down(silu(gate(x)) * up(x)) (a SwiGLU MLP): gate and up nn.Linear({in_f}, {hidden}), down "
        f"nn.Linear({hidden}, {out_f}), {'with' if bias else 'without'} biases, over a (batch_size, {in_f}) input "
        f"(scale {spread}).", expr, f"torch.randn(batch_size, {in_f}) * {spread}", batch_size=batch,
        init_body=f"self.gate = nn.Linear({in_f}, {hidden}, bias={bias})\n"
                  f"self.up = nn.Linear({in_f}, {hidden}, bias={bias})\n"
                  f"self.down = nn.Linear({hidden}, {out_f}, bias={bias})")
    tid = task_id("swiglu_mlp", index)
    # see the module docstring: gelu_mlp's 1e-3 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"SwiGLU MLP {in_f}->{hidden}->{out_f}" + (" with biases" if bias else ""),
                       tolerance=DtypeTolerance(fp32=(1e-3, 1e-3)))
    variants = _swiglu_variants(bias)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "swiglu_mlp", index, {"batch": batch, "in_features": in_f, "hidden": hidden,
                                                          "out_features": out_f, "bias": bias, "spread": spread},
                              tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# conv1d_causal: depthwise causal conv over (B, C, L), left padding K - 1, optional SiLU

_CV_HEAD = """constexpr int K = {k};  /* taps: y[l] = b + sum_k w[k] * x[l - (K - 1) + k], x[j < 0] = 0 */

__device__ __forceinline__ float post(float v) {{
    return {post};
}}
"""
_CV_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* x (B, C, L), conv.weight (C, 1, K), conv.bias (C) */
    if (n_in != 3 || n_out != 1 || in[0].ndim != 3 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32)
        return 1;
    const long long Bn = in[0].shape[0];
    const int C = (int)in[0].shape[1], L = (int)in[0].shape[2];
    if (in[1].numel != (long long)C * K || in[2].numel != C || out[0].numel != in[0].numel) return 1;
    const long long rows = Bn * C, n = rows * L;
    if (n == 0) return 0;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;
    const float* b = (const float*)in[2].data;
    float* y = (float*)out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_CV_NAIVE = """
/* one thread per output, time-major (consecutive threads: consecutive l of one row) */
__global__ void conv_naive(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                           float* __restrict__ y, long long n, int C, int L) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int l = (int)(i % L);
    const long long row = i / L;
    const int c = (int)(row % C);
    const float* xr = x + row * L;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
        const int j = l - (K - 1) + k;
        if (j >= 0) acc += w[c * K + k] * xr[j];
    }
    y[i] = post(acc + b[c]);
}
"""
_CV_SHARED = """
/* a block per (row, tile of TL outputs): the tile's inputs and the K - 1 before it (the halo, zeros before the
   row's start) through shared memory; grid.x walks the rows, grid.y the tiles */
template <int TL>
__global__ void __launch_bounds__(TL) conv_tile(const float* __restrict__ x, const float* __restrict__ w,
                                                const float* __restrict__ b, float* __restrict__ y, int C, int L) {
    __shared__ float xs[TL + K - 1];
    const long long row = blockIdx.x;
    const int l0 = blockIdx.y * TL;
    const int c = (int)(row % C);
    const float* xr = x + row * L;
    for (int e = threadIdx.x; e < TL + K - 1; e += TL) {
        const int j = l0 - (K - 1) + e;
        xs[e] = (j >= 0 && j < L) ? xr[j] : 0.f;
    }
    float wr[K];
#pragma unroll
    for (int k = 0; k < K; ++k) wr[k] = w[c * K + k];
    __syncthreads();
    const int l = l0 + threadIdx.x;
    if (l < L) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) acc = fmaf(wr[k], xs[threadIdx.x + k], acc);
        y[row * L + l] = post(acc + b[c]);
    }
}
"""


def _cv_tile_launch(tl: int) -> str:
    return (f"    const dim3 grid((unsigned)rows, (unsigned)((L + {tl - 1}) / {tl}));\n"
            f"    conv_tile<{tl}><<<grid, {tl}, 0, stream>>>(x, w, b, y, C, L);")


_CV_WINDOW = """
/* one thread per (row, chunk of R outputs): the weights and a window of the last K inputs in registers, sliding
   along L (each input read once per thread); consecutive threads are R floats apart */
template <int R>
__global__ void conv_window(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                            float* __restrict__ y, long long rows, int C, int L) {
    const int nch = (L + R - 1) / R;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nch) return;
    const int ch = (int)(i % nch);
    const long long row = i / nch;
    const int c = (int)(row % C);
    const float* xr = x + row * L;
    float* yr = y + row * L;
    float wr[K], win[K];  /* win[k] = x[l - (K - 1) + k] for the current l */
#pragma unroll
    for (int k = 0; k < K; ++k) wr[k] = w[c * K + k];
    const float bc = b[c];
    const int l0 = ch * R;
#pragma unroll
    for (int k = 0; k < K - 1; ++k) {
        const int j = l0 - (K - 1) + k;  /* < l0 < L */
        win[k] = j >= 0 ? xr[j] : 0.f;
    }
    const int l1 = l0 + R < L ? l0 + R : L;
    for (int l = l0; l < l1; ++l) {
        win[K - 1] = xr[l];
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) acc = fmaf(wr[k], win[k], acc);
        yr[l] = post(acc + bc);
#pragma unroll
        for (int k = 0; k < K - 1; ++k) win[k] = win[k + 1];
    }
}
"""
_CV_WINDOW_LAUNCH = """    const long long threads = rows * ((L + 31) / 32);
    conv_window<32><<<(unsigned)((threads + 127) / 128), 128, 0, stream>>>(x, w, b, y, rows, C, L);"""
_CV_CONSTANT = """
constexpr int MAX_W = 8192, MAX_C = 1024;  /* 36 KB of the 64 KB constant bank */
static __constant__ float c_w[MAX_W];
static __constant__ float c_b[MAX_C];

/* one thread per output, time-major; the weights and bias in constant memory (the threads of a warp share a
   channel except across a row's end: broadcasts) */
__global__ void conv_const(const float* __restrict__ x, float* __restrict__ y, long long n, int C, int L) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int l = (int)(i % L);
    const long long row = i / L;
    const int c = (int)(row % C);
    const float* xr = x + row * L;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int j = l - (K - 1) + k;
        acc += (j >= 0 ? xr[j] : 0.f) * c_w[c * K + k];
    }
    y[i] = post(acc + c_b[c]);
}
"""
_CV_CONSTANT_LAUNCH = """    if ((long long)C * K > MAX_W || C > MAX_C) return 3;
    if (cudaMemcpyToSymbolAsync(c_w, w, (size_t)C * K * sizeof(float), 0, cudaMemcpyDeviceToDevice, stream)
            != cudaSuccess ||
        cudaMemcpyToSymbolAsync(c_b, b, (size_t)C * sizeof(float), 0, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return 3;
    conv_const<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n, C, L);"""
_CV_CHANNEL = """
/* one thread per output, channel-major: consecutive threads take consecutive channels at the same time step, so
   their reads and writes are L floats apart (uncoalesced) */
__global__ void conv_channel_walk(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, long long n, int C, int L) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = (int)(i % C);
    const long long t = i / C;
    const int l = (int)(t % L);
    const long long row = (t / L) * C + c;
    const float* xr = x + row * L;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
        const int j = l - (K - 1) + k;
        if (j >= 0) acc += w[c * K + k] * xr[j];
    }
    y[row * L + l] = post(acc + b[c]);
}
"""
_CV_VEC4 = """
/* four consecutive outputs per thread: v[j] = x[l0 - 8 + j] (j < 12) covers the K - 1 <= 6 inputs before l0, loaded
   as three float4 when rows are whole float4s (L % 4 == 0, aligned pointers) and the outputs stored as one float4;
   otherwise the same with scalar, bounds-checked loads and stores */
__global__ void conv_vec4(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long rows, int C, int L, bool vec) {
    const int nq = (L + 3) / 4;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * nq) return;
    const int q = (int)(i % nq);
    const long long row = i / nq;
    const int c = (int)(row % C);
    const int l0 = 4 * q;
    const float* xr = x + row * L;
    float* yr = y + row * L;
    float v[12];
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll
        for (int p = 0; p < 3; ++p) {
            const int qq = q - 2 + p;  /* <= q < nq */
            const float4 t = qq >= 0 ? x4[qq] : make_float4(0.f, 0.f, 0.f, 0.f);
            v[4 * p] = t.x;
            v[4 * p + 1] = t.y;
            v[4 * p + 2] = t.z;
            v[4 * p + 3] = t.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 12; ++j) {
            const int jj = l0 - 8 + j;
            v[j] = (jj >= 0 && jj < L) ? xr[jj] : 0.f;
        }
    }
    float wr[K];
#pragma unroll
    for (int k = 0; k < K; ++k) wr[k] = w[c * K + k];
    const float bc = b[c];
    float o[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) acc = fmaf(wr[k], v[8 + r - (K - 1) + k], acc);
        o[r] = post(acc + bc);
    }
    if (vec) {
        reinterpret_cast<float4*>(yr)[q] = make_float4(o[0], o[1], o[2], o[3]);
    } else {
#pragma unroll
        for (int r = 0; r < 4; ++r)
            if (l0 + r < L) yr[l0 + r] = o[r];
    }
}
"""
_CV_VEC4_LAUNCH = """    const unsigned long long bits =
        reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    const bool vec = L % 4 == 0 && (bits & 15) == 0;
    const long long threads = rows * ((L + 3) / 4);
    conv_vec4<<<(unsigned)((threads + 255) / 256), 256, 0, stream>>>(x, w, b, y, rows, C, L, vec);"""


def _conv_variants(k: int, act: str) -> list[TorchVariant]:
    head = _CV_HEAD.format(k=k, post="v" if act == "none" else "v / (1.f + expf(-v))")
    flat = "<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, w, b, y, n, C, L);"
    specs = [
        ("thread_per_output_time_major", ["naive", "coalesced", "block_256"], _CV_NAIVE, f"    conv_naive{flat}"),
        ("shared_tile_halo_256", ["shared_tiling", "coalesced", "block_256"], _CV_SHARED, _cv_tile_launch(256)),
        ("shared_tile_halo_128", ["shared_tiling", "coalesced", "unrolled", "block_128"], _CV_SHARED,
         _cv_tile_launch(128)),
        ("register_window_32", ["register_blocking", "unrolled", "strided", "block_128"], _CV_WINDOW,
         _CV_WINDOW_LAUNCH),
        ("constant_weights", ["constant_memory", "coalesced", "unrolled", "block_256"], _CV_CONSTANT,
         _CV_CONSTANT_LAUNCH),
        ("channel_major_walk", ["strided", "block_256"], _CV_CHANNEL, f"    conv_channel_walk{flat}"),
        ("four_outputs_vec4", ["vectorized", "register_blocking", "coalesced", "block_256"], _CV_VEC4,
         _CV_VEC4_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _CV_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


_CV_SHAPES = [c for c in itertools.product([2, 4, 8, 16], [64, 128, 192, 256, 384, 512, 768, 1024],
                                           [256, 333, 1000, 1023, 2048, 3000, 4096], [2, 3, 4, 5, 6, 7])
              if 2**20 <= c[0] * c[1] * c[2] <= 2**24]  # 1M to 16M elements


def conv1d_causal(index: int) -> GeneratedTorchTask:
    rng = rng_for("conv1d_causal", index)
    shapes = shuffled("conv1d_causal", _CV_SHAPES)
    batch, c, length, k = shapes[index % len(shapes)]
    act = "silu" if rng.random() < 0.5 else "none"
    conv = f"self.conv(x)[..., :{length}]"
    expr = f"torch.nn.functional.silu({conv})" if act == "silu" else conv
    doc = (f"y = {expr.replace('torch.nn.functional.', 'F.')}: a depthwise causal convolution of (batch_size, {c}, "
           f"{length}) with {k} taps ({c} groups, padding {k - 1} on both sides, the last {k - 1} outputs dropped, "
           f"bias){', then SiLU' if act == 'silu' else ''}.")
    source = problem_source(doc, expr, f"torch.randn(batch_size, {c}, {length})", batch_size=batch,
                            init_body=f"self.conv = nn.Conv1d({c}, {c}, {k}, groups={c}, padding={k - 1}, bias=True)")
    tid = task_id("conv1d_causal", index)
    # see the module docstring: at most 7 products and a bias, 1e-4 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"depthwise causal conv1d, {k} taps" + (" then SiLU" if act == "silu" else ""),
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _conv_variants(k, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "conv1d_causal", index, {"batch": batch, "channels": c, "length": length,
                                                             "kernel": k, "act": act}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# rotary_embedding: RoPE of (B, H, T, D) at int64 positions, inv_freq a float32 buffer

_RO_HEAD = """constexpr bool INTERLEAVED = {interleaved};  /* pairs (2p, 2p + 1); otherwise (p, p + D / 2) */

/* the offsets in a row of the two elements of pair p (p < half = D / 2) */
__device__ __forceinline__ int first_of(int p, int half) {{ return INTERLEAVED ? 2 * p : p; }}
__device__ __forceinline__ int second_of(int p, int half) {{ return INTERLEAVED ? 2 * p + 1 : p + half; }}

/* the angle of pair p at position pos: the float32 product the Model computes (one rounding) */
__device__ __forceinline__ float angle(long long pos, const float* __restrict__ inv, int p) {{
    return (float)pos * inv[p];
}}

/* (a, b) rotated by the angle whose cos and sin are c and s */
__device__ __forceinline__ void rotate(float& a, float& b, float c, float s) {{
    const float ra = a * c - b * s, rb = b * c + a * s;
    a = ra;
    b = rb;
}}
"""
_RO_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    /* x (B, H, T, D) float32, positions (T) int64, inv_freq (D / 2) float32 */
    if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    if (in[1].dtype != DT_INT64 || in[2].dtype != DT_FLOAT32) return 1;
    const long long Bn = in[0].shape[0], Hn = in[0].shape[1];
    const int T = (int)in[0].shape[2], D = (int)in[0].shape[3], half = D / 2;
    if (D % 2 != 0 || in[1].numel != T || in[2].numel != half || out[0].numel != in[0].numel) return 1;
    const long long rows = Bn * Hn * T, pairs = rows * half;
    if (pairs == 0) return 0;
    const float* x = (const float*)in[0].data;
    const long long* pos = (const long long*)in[1].data;
    const float* inv = (const float*)in[2].data;
    float* y = (float*)out[0].data;
    (void)Bn; (void)Hn;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_RO_PAIR = """
/* one thread per pair: its angle, sincosf, the rotation */
__global__ void rope_pair(const float* __restrict__ x, const long long* __restrict__ pos, const float* __restrict__ inv,
                          float* __restrict__ y, long long pairs, int T, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= pairs) return;
    const int half = D / 2;
    const int p = (int)(i % half);
    const long long row = i / half;
    const int t = (int)(row % T);
    float s, c;
    sincosf(angle(pos[t], inv, p), &s, &c);
    const long long o1 = row * D + first_of(p, half), o2 = row * D + second_of(p, half);
    float a = x[o1], b = x[o2];
    rotate(a, b, c, s);
    y[o1] = a;
    y[o2] = b;
}
"""
_RO_PAIR_LAUNCH = "    rope_pair<<<(unsigned)((pairs + 255) / 256), 256, 0, stream>>>(x, pos, inv, y, pairs, T, D);"
_RO_ROW = """
/* one thread per row (batch, head, position): every pair of the row in turn (consecutive threads D floats apart) */
__global__ void rope_row(const float* __restrict__ x, const long long* __restrict__ pos, const float* __restrict__ inv,
                         float* __restrict__ y, long long rows, int T, int D) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const int half = D / 2;
    const long long pp = pos[row % T];
    const float* xr = x + row * D;
    float* yr = y + row * D;
    for (int p = 0; p < half; ++p) {
        float s, c;
        sincosf(angle(pp, inv, p), &s, &c);
        float a = xr[first_of(p, half)], b = xr[second_of(p, half)];
        rotate(a, b, c, s);
        yr[first_of(p, half)] = a;
        yr[second_of(p, half)] = b;
    }
}
"""
_RO_HEADS = """
/* one thread per (batch, position, pair): the cos and sin once, in registers, for every head */
__global__ void rope_heads(const float* __restrict__ x, const long long* __restrict__ pos,
                           const float* __restrict__ inv, float* __restrict__ y, long long work, int Hn, int T, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= work) return;  /* work = B * T * half */
    const int half = D / 2;
    const int p = (int)(i % half);
    const long long bt = i / half;
    const int t = (int)(bt % T);
    const long long bb = bt / T;
    float s, c;
    sincosf(angle(pos[t], inv, p), &s, &c);
    const int f1 = first_of(p, half), f2 = second_of(p, half);
    for (int h = 0; h < Hn; ++h) {
        const long long base = ((bb * Hn + h) * T + t) * D;
        float a = x[base + f1], b = x[base + f2];
        rotate(a, b, c, s);
        y[base + f1] = a;
        y[base + f2] = b;
    }
}
"""
_RO_HEADS_LAUNCH = """    const long long work = Bn * T * half;
    rope_heads<<<(unsigned)((work + 127) / 128), 128, 0, stream>>>(x, pos, inv, y, work, (int)Hn, T, D);"""
_RO_SHARED = """
/* a block per position (grid.x) and a slice of the (batch, head) rows (grid.y): the position's cos/sin table (half
   entries) in shared memory, computed once, then the block's rows at that position */
__global__ void __launch_bounds__(128) rope_shared_pos(const float* __restrict__ x, const long long* __restrict__ pos,
                                                       const float* __restrict__ inv, float* __restrict__ y,
                                                       long long bh, int T, int D) {
    extern __shared__ float2 cs[];  /* (cos, sin) of each pair */
    const int half = D / 2;
    const int t = blockIdx.x;
    const long long pp = pos[t];
    for (int p = threadIdx.x; p < half; p += blockDim.x) {
        float s, c;
        sincosf(angle(pp, inv, p), &s, &c);
        cs[p] = make_float2(c, s);
    }
    __syncthreads();
    const long long work = bh * half;
    const long long stride = (long long)gridDim.y * blockDim.x;
    for (long long e = (long long)blockIdx.y * blockDim.x + threadIdx.x; e < work; e += stride) {
        const long long r = e / half;
        const int p = (int)(e % half);
        const long long base = (r * T + t) * D;
        const float2 cv = cs[p];
        float a = x[base + first_of(p, half)], b = x[base + second_of(p, half)];
        rotate(a, b, cv.x, cv.y);
        y[base + first_of(p, half)] = a;
        y[base + second_of(p, half)] = b;
    }
}
"""
_RO_SHARED_LAUNCH = """    const long long bh = Bn * Hn;
    const unsigned slices = (unsigned)(bh < 16 ? bh : 16);
    rope_shared_pos<<<dim3((unsigned)T, slices), 128, (size_t)half * sizeof(float2), stream>>>(
        x, pos, inv, y, bh, T, D);"""
_RO_VEC = _RO_PAIR + """
template <int V>
__device__ __forceinline__ void load_vec(const float* p, float* r) {
    if constexpr (V == 4) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        r[0] = t.x; r[1] = t.y; r[2] = t.z; r[3] = t.w;
    } else {
        const float2 t = *reinterpret_cast<const float2*>(p);
        r[0] = t.x; r[1] = t.y;
    }
}

template <int V>
__device__ __forceinline__ void store_vec(float* p, const float* r) {
    if constexpr (V == 4) *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1], r[2], r[3]);
    else *reinterpret_cast<float2*>(p) = make_float2(r[0], r[1]);
}

/* one thread per vector of V floats of a row. Interleaved: the vector holds V / 2 whole pairs. Halves: the thread
   loads the vector at q * V of the first half and the one at q * V of the second, V pairs. The caller checks that a
   row splits into whole, aligned vectors (D % V == 0, or half % V == 0 for halves). */
template <int V>
__global__ void rope_vec(const float* __restrict__ x, const long long* __restrict__ pos, const float* __restrict__ inv,
                         float* __restrict__ y, long long vecs, int T, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= vecs) return;
    const int half = D / 2;
    const int per_row = INTERLEAVED ? D / V : half / V;
    const int q = (int)(i % per_row);
    const long long row = i / per_row;
    const float pf = (float)pos[row % T];
    const float* xr = x + row * D;
    float* yr = y + row * D;
    if (INTERLEAVED) {
        float v[V];
        load_vec<V>(xr + q * V, v);
#pragma unroll
        for (int j = 0; j < V / 2; ++j) {
            float s, c;
            sincosf(pf * inv[q * (V / 2) + j], &s, &c);
            rotate(v[2 * j], v[2 * j + 1], c, s);
        }
        store_vec<V>(yr + q * V, v);
    } else {
        float a[V], b[V];
        load_vec<V>(xr + q * V, a);
        load_vec<V>(xr + half + q * V, b);
#pragma unroll
        for (int j = 0; j < V; ++j) {
            float s, c;
            sincosf(pf * inv[q * V + j], &s, &c);
            rotate(a[j], b[j], c, s);
        }
        store_vec<V>(yr + q * V, a);
        store_vec<V>(yr + half + q * V, b);
    }
}
"""


def _ro_vec_launch(v: int, block: int) -> str:
    return f"""    const unsigned long long bits =
        reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    const bool whole = INTERLEAVED ? D % {v} == 0 : half % {v} == 0;
    if (whole && (bits & {4 * v - 1}) == 0) {{
        const long long vecs = rows * (INTERLEAVED ? D / {v} : half / {v});
        rope_vec<{v}><<<(unsigned)((vecs + {block - 1}) / {block}), {block}, 0, stream>>>(x, pos, inv, y, vecs, T, D);
    }} else {{
{_RO_PAIR_LAUNCH.replace("    ", "        ", 1)}
    }}"""


_RO_TABLE = """
/* pass 1: the (cos, sin) table of every (position, pair) */
__global__ void rope_table(const long long* __restrict__ pos, const float* __restrict__ inv, float2* __restrict__ tab,
                           int T, int half) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * half) return;
    const int t = (int)(i / half), p = (int)(i % half);
    float s, c;
    sincosf(angle(pos[t], inv, p), &s, &c);
    tab[i] = make_float2(c, s);
}

/* pass 2: one thread per pair, its cos and sin read from the table */
__global__ void rope_apply(const float* __restrict__ x, const float2* __restrict__ tab, float* __restrict__ y,
                           long long pairs, int T, int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= pairs) return;
    const int half = D / 2;
    const int p = (int)(i % half);
    const long long row = i / half;
    const int t = (int)(row % T);
    const float2 cv = tab[(long long)t * half + p];
    const long long o1 = row * D + first_of(p, half), o2 = row * D + second_of(p, half);
    float a = x[o1], b = x[o2];
    rotate(a, b, cv.x, cv.y);
    y[o1] = a;
    y[o2] = b;
}
"""
_RO_TABLE_LAUNCH = """    float2* tab = 0;
    const long long nt = (long long)T * half;
    if (cudaMallocAsync((void**)&tab, (size_t)nt * sizeof(float2), stream) != cudaSuccess) return 3;
    rope_table<<<(unsigned)((nt + 255) / 256), 256, 0, stream>>>(pos, inv, tab, T, half);
    rope_apply<<<(unsigned)((pairs + 255) / 256), 256, 0, stream>>>(x, tab, y, pairs, T, D);
    if (cudaFreeAsync(tab, stream) != cudaSuccess) return 3;"""


def _rope_variants(interleaved: bool) -> list[TorchVariant]:
    head = _RO_HEAD.format(interleaved="true" if interleaved else "false")
    specs = [
        ("thread_per_pair", ["naive", "coalesced", "block_256"], _RO_PAIR, _RO_PAIR_LAUNCH),
        ("thread_per_row", ["thread_per_row", "strided", "block_128"], _RO_ROW,
         "    rope_row<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, pos, inv, y, rows, T, D);"),
        ("heads_loop_registers", ["register_blocking", "coalesced", "block_128"], _RO_HEADS, _RO_HEADS_LAUNCH),
        ("block_per_position_shared_table", ["shared_tiling", "block_per_row", "coalesced", "block_128"], _RO_SHARED,
         _RO_SHARED_LAUNCH),
        ("vectorized_float2", ["vectorized", "coalesced", "block_128"], _RO_VEC, _ro_vec_launch(2, 128)),
        ("vectorized_float4", ["vectorized", "coalesced", "unrolled", "block_256"], _RO_VEC, _ro_vec_launch(4, 256)),
        ("table_two_kernels", ["multi_pass", "coalesced", "block_256"], _RO_TABLE, _RO_TABLE_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _RO_ENTRY.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


_RO_SHAPES = [c for c in itertools.product([1, 2, 4, 8], [4, 8, 12, 16, 32], [128, 256, 500, 1024, 2048],
                                           [32, 64, 80, 96, 100, 128])
              if 2**20 <= c[0] * c[1] * c[2] * c[3] <= 2**24]  # 1M to 16M elements

_RO_FORWARD = {
    False: """x1, x2 = x[..., :{h}], x[..., {h}:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)""",
    True: """x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)""",
}


def _rope_source(doc: str, heads: int, t: int, d: int, base: float, interleaved: bool, max_pos: int, spread: float,
                 batch: int) -> str:
    forward = _RO_FORWARD[interleaved].format(h=d // 2)
    return f'''import torch
from torch import nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()
        inv_freq = 1.0 / ({base!r} ** (torch.arange(0, {d}, 2, dtype=torch.float32) / {d}))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x, positions):
        # the angles in float32 whatever x's dtype (as Llama does): float(position) * inv_freq, one rounding
        ang = positions.to(torch.float32)[:, None] * self.inv_freq.to(torch.float32)[None, :]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        {forward}


batch_size = {batch}


def get_inputs():
    return [torch.randn(batch_size, {heads}, {t}, {d}) * {spread}, torch.randint(0, {max_pos}, ({t},))]


def get_init_inputs():
    return []
'''


def rotary_embedding(index: int) -> GeneratedTorchTask:
    rng = rng_for("rotary_embedding", index)
    shapes = shuffled("rotary_embedding", _RO_SHAPES)
    batch, heads, t, d = shapes[index % len(shapes)]
    interleaved = bool(rng.random() < 0.5)
    base = float(rng.choice([10000.0, 100000.0, 500000.0]))
    max_pos = int(rng.choice([2048, 8192, 32768]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    layout = "adjacent pairs (2i, 2i+1), GPT-J style" if interleaved else f"halves (i, i+{d // 2}), rotate_half style"
    doc = (f"Rotary position embedding of x (batch_size, {heads}, {t}, {d}) at int64 positions (< {max_pos}), base "
           f"{base:g}: pair i of a row, {layout}, is rotated by the angle float(position) * inv_freq[i], "
           f"inv_freq = 1 / base ** (arange(0, {d}, 2) / {d}) (a float32 buffer, passed after the forward inputs).")
    source = _rope_source(doc, heads, t, d, base, interleaved, max_pos, spread, batch)
    tid = task_id("rotary_embedding", index)
    # see the module docstring: sincosf within 2 ulps of the same float32 angle's cos and sin; 1e-4
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"RoPE, D {d}, {'interleaved' if interleaved else 'half-split'}, base {base:g}",
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _rope_variants(interleaved)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "rotary_embedding", index,
                              {"batch": batch, "heads": heads, "seq": t, "d": d, "interleaved": interleaved,
                               "base": base, "max_pos": max_pos, "spread": spread}, tuple(variants))
