"""``linear_act``, ``layer_norm`` and ``col_reduce``: a linear layer with an activation, a layer norm over rows,
and a reduction over the rows of each column (dim 0)."""

from __future__ import annotations

from cudaperf.dataset.pytorch_families.common import (
    ACTIVATIONS,
    BLOCK_SUM,
    GeneratedTorchTask,
    TorchVariant,
    check_tags,
    problem_source,
    rng_for,
    task_id,
)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask

# ---------------------------------------------------------------------------------------------------------------
# linear_act: y = act(x @ W^T + b), nn.Linear(in_features, out_features) then an activation

_LIN_HEAD = """__device__ __forceinline__ float act(float v) {{
    return {act};
}}
"""
_LIN_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2 || in[1].shape[1] != in[0].shape[1]) return 1;
    const int M = (int)in[0].shape[0], K = (int)in[0].shape[1], N = (int)in[1].shape[0];
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;  /* (N, K): one row per output feature */
    const float* b = (const float*)in[2].data;
    float* y = (float*)out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

_LIN_NAIVE = """
__global__ void linear_naive(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ y, int M, int N, int K) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* one output, row-major */
    if (i >= (long long)M * N) return;
    const int r = (int)(i / N), c = (int)(i % N);
    const float* xr = x + (long long)r * K;
    const float* wc = w + (long long)c * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(xr[k], wc[k], acc);
    y[i] = act(acc + b[c]);
}
"""
_LIN_NAIVE_2D = """
__global__ void linear_naive_2d(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                float* __restrict__ y, int M, int N, int K) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= M || c >= N) return;
    const float* xr = x + (long long)r * K;
    const float* wc = w + (long long)c * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(xr[k], wc[k], acc);
    y[(long long)r * N + c] = act(acc + b[c]);
}
"""
_LIN_STRIDED = """
__global__ void linear_row_strided(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ y, int M, int N, int K) {
    /* consecutive threads take consecutive rows of x (K floats apart) for one output column: uncoalesced */
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)M * N) return;
    const int r = (int)(i % M), c = (int)(i / M);
    const float* xr = x + (long long)r * K;
    const float* wc = w + (long long)c * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(xr[k], wc[k], acc);
    y[(long long)r * N + c] = act(acc + b[c]);
}
"""
_LIN_TILED = """
template <int T>
__global__ void linear_tiled(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ y, int M, int N, int K) {
    __shared__ float xs[T][T + 1];  /* xs[row][k] of the x tile */
    __shared__ float ws[T][T + 1];  /* ws[n][k] of the weight tile; padded against bank conflicts */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    const int wrow = blockIdx.x * T + ty;  /* the weight row this thread loads */
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        const int k = k0 + tx;
        xs[ty][tx] = (row < M && k < K) ? x[(long long)row * K + k] : 0.f;
        ws[ty][tx] = (wrow < N && k < K) ? w[(long long)wrow * K + k] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) acc = fmaf(xs[ty][kk], ws[tx][kk], acc);
        __syncthreads();
    }
    if (row < M && col < N) y[(long long)row * N + col] = act(acc + b[col]);
}
"""
_LIN_REGBLOCK = """
template <int R>
__global__ void __launch_bounds__(256) linear_regblock(const float* __restrict__ x, const float* __restrict__ w,
                                                       const float* __restrict__ b, float* __restrict__ y,
                                                       int M, int N, int K) {
    /* 256 threads (16 x 16) compute a (16R x 16R) output tile; each thread R x R outputs kept in registers, at rows
       tr + 16i and columns tc + 16j of the tile. The k dimension goes through shared memory 16 at a time. */
    constexpr int TM = 16 * R;
    __shared__ float xs[16][TM + 1];  /* xs[k][m]: the x tile, transposed */
    __shared__ float ws[16][TM + 1];  /* ws[k][n]: the weight tile, transposed */
    const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
    const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TM;
    float acc[R][R];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int e = tid + 256 * j, m = e / 16, k = e % 16, gk = k0 + k;
            const int gm = m0 + m, gn = n0 + m;
            xs[k][m] = (gm < M && gk < K) ? x[(long long)gm * K + gk] : 0.f;
            ws[k][m] = (gn < N && gk < K) ? w[(long long)gn * K + gk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[R], c[R];
#pragma unroll
            for (int i = 0; i < R; ++i) {
                a[i] = xs[kk][tr + 16 * i];
                c[i] = ws[kk][tc + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < R; ++i)
#pragma unroll
                for (int j = 0; j < R; ++j) acc[i][j] = fmaf(a[i], c[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int gm = m0 + tr + 16 * i;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int gn = n0 + tc + 16 * j;
            if (gm < M && gn < N) y[(long long)gm * N + gn] = act(acc[i][j] + b[gn]);
        }
    }
}
"""
_LIN_WARP_VEC = """
__global__ void linear_warp_vec4(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int M, int N, int K) {
    /* one warp per output: the lanes read the x row and the weight row as float4, then a shuffle reduction */
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= (long long)M * N) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const int r = (int)(o / N), c = (int)(o % N);
    const float* xr = x + (long long)r * K;
    const float* wc = w + (long long)c * K;
    float acc = 0.f;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(w);
    if (K % 4 == 0 && (bits & 15) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(wc);
        for (int q = lane; q < K / 4; q += 32) {
            const float4 a = x4[q], e = w4[q];
            acc = fmaf(a.x, e.x, acc);
            acc = fmaf(a.y, e.y, acc);
            acc = fmaf(a.z, e.z, acc);
            acc = fmaf(a.w, e.w, acc);
        }
    } else {
        for (int k = lane; k < K; k += 32) acc = fmaf(xr[k], wc[k], acc);
    }
    for (int s = 16; s > 0; s >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, s);
    if (lane == 0) y[o] = act(acc + b[c]);
}
"""


def _linear_variants(act_c: str) -> list[TorchVariant]:
    head = _LIN_HEAD.format(act=act_c)
    specs = [
        ("naive_b256", ["naive", "block_256"], _LIN_NAIVE,
         "    const long long n = (long long)M * N;\n"
         "    linear_naive<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, w, b, y, M, N, K);"),
        ("naive_2d_16x16", ["naive", "block_256"], _LIN_NAIVE_2D,
         "    dim3 block(16, 16);\n"
         "    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));\n"
         "    linear_naive_2d<<<grid, block, 0, stream>>>(x, w, b, y, M, N, K);"),
        ("row_strided", ["naive", "strided", "block_256"], _LIN_STRIDED,
         "    const long long n = (long long)M * N;\n"
         "    linear_row_strided<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, w, b, y, M, N, K);"),
        ("tiled_16", ["shared_tiling", "coalesced", "block_256"], _LIN_TILED,
         "    dim3 grid((unsigned)((N + 15) / 16), (unsigned)((M + 15) / 16));\n"
         "    linear_tiled<16><<<grid, dim3(16, 16), 0, stream>>>(x, w, b, y, M, N, K);"),
        ("tiled_32", ["shared_tiling", "coalesced", "block_1024"], _LIN_TILED,
         "    dim3 grid((unsigned)((N + 31) / 32), (unsigned)((M + 31) / 32));\n"
         "    linear_tiled<32><<<grid, dim3(32, 32), 0, stream>>>(x, w, b, y, M, N, K);"),
        ("register_blocked_2x2", ["register_blocking", "shared_tiling", "unrolled", "block_256"], _LIN_REGBLOCK,
         "    dim3 grid((unsigned)((N + 31) / 32), (unsigned)((M + 31) / 32));\n"
         "    linear_regblock<2><<<grid, 256, 0, stream>>>(x, w, b, y, M, N, K);"),
        ("register_blocked_4x4", ["register_blocking", "shared_tiling", "unrolled", "block_256"], _LIN_REGBLOCK,
         "    dim3 grid((unsigned)((N + 63) / 64), (unsigned)((M + 63) / 64));\n"
         "    linear_regblock<4><<<grid, 256, 0, stream>>>(x, w, b, y, M, N, K);"),
        ("warp_dot_vec4", ["vectorized", "warp_shuffle", "coalesced", "block_256"], _LIN_WARP_VEC,
         "    const long long n = (long long)M * N;  /* warps */\n"
         "    linear_warp_vec4<<<(unsigned)((n + 7) / 8), 256, 0, stream>>>(x, w, b, y, M, N, K);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _LIN_ENTRY.format(launch=launch))
            for name, tags, kernel, launch in specs]


def linear_act(index: int) -> GeneratedTorchTask:
    rng = rng_for("linear_act", index)
    # Small layers: cuBLAS wins any large GEMM against these hand-written kernels, but at these sizes eager
    # PyTorch's two launches (addmm, then the activation) cost as much as the work, so a fused kernel can win.
    batch = int(rng.choice([64, 128, 256, 512]))
    in_f = int(rng.choice([128, 256, 384, 512, 1000]))
    out_f = int(rng.choice([128, 256, 384, 512, 1000]))
    act = str(rng.choice(sorted(ACTIVATIONS)))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    expr = ACTIVATIONS[act][0].format(v="self.linear(x)")
    doc = ACTIVATIONS[act][0].format(v="x @ W.T + b").replace("torch.nn.functional.", "F.")
    source = problem_source(f"y = {doc}: nn.Linear({in_f}, {out_f}) then {act}, over a (batch_size, {in_f}) "
                            f"input (scale {spread}).", expr, f"torch.randn(batch_size, {in_f}) * {spread}",
                            init_body=f"self.linear = nn.Linear({in_f}, {out_f})", batch_size=batch)
    tid = task_id("linear_act", index)
    # Each output is a dot product of up to 1024 terms of size ~|x|/sqrt(in_features) (nn.Linear's init) plus a
    # bias: values of order 1 (|x| ~ spread <= 2), and fp32 sums of them in another order (tiles, shuffles,
    # cuBLAS's split-k) differ by a few 1e-6. 1e-3 absolute and relative leaves a wide margin (TF32, ~1e-3
    # relative per product, would not be certain to pass) and still catches any wrong or missing term.
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"linear {in_f}->{out_f} then {act}", tolerance=DtypeTolerance(fp32=(1e-3, 1e-3)))
    variants = _linear_variants(ACTIVATIONS[act][1].format(v="v"))
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "linear_act", index, {"batch": batch, "in_features": in_f,
                                                          "out_features": out_f, "act": act, "spread": spread},
                              tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# layer_norm: nn.LayerNorm(cols) with a non-trivial weight and bias over a (rows, cols) input

_LN_HEAD = """__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}
"""
_LN_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || in[1].numel != in[0].shape[1]) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    const float* x = (const float*)in[0].data;
    const float* g = (const float*)in[1].data;   /* weight */
    const float* bt = (const float*)in[2].data;  /* bias */
    float* y = (float*)out[0].data;
    const float eps = {eps}f;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

_LN_THREAD = """
__global__ void ln_thread_row(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ bt,
                              float* __restrict__ y, long long rows, long long cols, float eps) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = 0; c < cols; ++c) s += xr[c];
    const float mean = s / (float)cols;
    float q = 0.f;
    for (long long c = 0; c < cols; ++c) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(q / (float)cols + eps);
    for (long long c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * g[c] + bt[c];
}
"""
_LN_BLOCK = BLOCK_SUM + """
template <int B>
__global__ void ln_block_row(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ bt,
                             float* __restrict__ y, long long cols, float eps) {
    __shared__ float sh[B];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) s += xr[c];
    const float mean = block_sum<B>(s, sh) / (float)cols;
    float q = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum<B>(q, sh) / (float)cols + eps);
    for (long long c = threadIdx.x; c < cols; c += B) yr[c] = (xr[c] - mean) * rstd * g[c] + bt[c];
}
"""
_LN_WARP = """
__global__ void ln_warp_row(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ bt,
                            float* __restrict__ y, long long rows, long long cols, float eps) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32) s += xr[c];
    const float mean = warp_sum(s) / (float)cols;
    float q = 0.f;
    for (long long c = lane; c < cols; c += 32) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(warp_sum(q) / (float)cols + eps);
    for (long long c = lane; c < cols; c += 32) yr[c] = (xr[c] - mean) * rstd * g[c] + bt[c];
}
"""
_LN_WELFORD = """
__global__ void ln_warp_welford(const float* __restrict__ x, const float* __restrict__ g,
                                const float* __restrict__ bt, float* __restrict__ y, long long rows, long long cols,
                                float eps) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float n = 0.f, mean = 0.f, m2 = 0.f;  /* one pass: Welford's running mean and sum of squared deviations */
    for (long long c = lane; c < cols; c += 32) {
        const float v = xr[c];
        n += 1.f;
        const float d = v - mean;
        mean += d / n;
        m2 += d * (v - mean);
    }
    for (int o = 16; o > 0; o >>= 1) {  /* merge the lanes' partial statistics (Chan et al.) */
        const float nb = __shfl_xor_sync(0xffffffffu, n, o);
        const float mb = __shfl_xor_sync(0xffffffffu, mean, o);
        const float m2b = __shfl_xor_sync(0xffffffffu, m2, o);
        const float nt = n + nb;
        if (nt > 0.f) {
            const float d = mb - mean, f = nb / nt;
            mean += d * f;
            m2 += m2b + d * d * n * f;
        }
        n = nt;
    }
    mean = __shfl_sync(0xffffffffu, mean, 0);  /* the lanes' merges may differ in the last bit: take lane 0's */
    m2 = __shfl_sync(0xffffffffu, m2, 0);
    const float rstd = rsqrtf(m2 / (float)cols + eps);
    for (long long c = lane; c < cols; c += 32) yr[c] = (xr[c] - mean) * rstd * g[c] + bt[c];
}
"""
_LN_VEC4 = """
__device__ __forceinline__ float block_sum256(float v, float* warps) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) t += warps[i];
    __syncthreads();  /* warps is written again by the next reduction */
    return t;
}

__global__ void __launch_bounds__(256) ln_block_vec4(const float* __restrict__ x, const float* __restrict__ g,
                                                     const float* __restrict__ bt, float* __restrict__ y,
                                                     long long cols, float eps) {
    __shared__ float warps[8];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)
        | reinterpret_cast<unsigned long long>(g) | reinterpret_cast<unsigned long long>(bt);
    const bool vec = cols % 4 == 0 && (bits & 15) == 0;  /* float4 rows; otherwise the scalar loops */
    const long long nq = cols / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float s = 0.f;
    if (vec) {
        for (long long q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 256) s += xr[c];
    }
    const float mean = block_sum256(s, warps) / (float)cols;
    float sq = 0.f;
    if (vec) {
        for (long long q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
            sq += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 256) {
            const float d = xr[c] - mean;
            sq += d * d;
        }
    }
    const float rstd = rsqrtf(block_sum256(sq, warps) / (float)cols + eps);
    if (vec) {
        const float4* g4 = reinterpret_cast<const float4*>(g);
        const float4* b4 = reinterpret_cast<const float4*>(bt);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q], gg = g4[q], bb = b4[q];
            float4 o;
            o.x = (v.x - mean) * rstd * gg.x + bb.x;
            o.y = (v.y - mean) * rstd * gg.y + bb.y;
            o.z = (v.z - mean) * rstd * gg.z + bb.z;
            o.w = (v.w - mean) * rstd * gg.w + bb.w;
            y4[q] = o;
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 256) yr[c] = (xr[c] - mean) * rstd * g[c] + bt[c];
    }
}
"""
_LN_TWO_KERNELS = """
__global__ void ln_stats(const float* __restrict__ x, float2* __restrict__ st, long long rows, long long cols,
                         float eps) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32) s += xr[c];
    const float mean = warp_sum(s) / (float)cols;
    float q = 0.f;
    for (long long c = lane; c < cols; c += 32) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(warp_sum(q) / (float)cols + eps);
    if (lane == 0) st[r] = make_float2(mean, rstd);
}

__global__ void ln_apply(const float* __restrict__ x, const float2* __restrict__ st, const float* __restrict__ g,
                         const float* __restrict__ bt, float* __restrict__ y, long long rows, long long cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const long long r = i / cols, c = i - r * cols;
    const float2 s = st[r];
    y[i] = (x[i] - s.x) * s.y * g[c] + bt[c];
}
"""
_LN_TWO_KERNELS_LAUNCH = """    float2* st = 0;
    if (cudaMallocAsync((void**)&st, rows * sizeof(float2), stream) != cudaSuccess) return 3;
    const long long n = rows * cols;
    ln_stats<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, st, rows, cols, eps);
    ln_apply<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, st, g, bt, y, rows, cols);
    cudaFreeAsync(st, stream);"""


def _layer_norm_variants(eps: float) -> list[TorchVariant]:
    args = "(x, g, bt, y, rows, cols, eps);"
    specs = [
        ("thread_per_row", ["thread_per_row", "strided", "block_128"], _LN_THREAD,
         f"    ln_thread_row<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>{args}"),
        ("block_per_row_b256", ["block_per_row", "tree_reduction", "shared_tiling", "block_256"], _LN_BLOCK,
         "    ln_block_row<256><<<(unsigned)rows, 256, 0, stream>>>(x, g, bt, y, cols, eps);"),
        ("block_per_row_b1024", ["block_per_row", "tree_reduction", "shared_tiling", "block_1024"], _LN_BLOCK,
         "    ln_block_row<1024><<<(unsigned)rows, 1024, 0, stream>>>(x, g, bt, y, cols, eps);"),
        ("warp_per_row", ["block_per_row", "warp_shuffle", "coalesced", "block_256"], _LN_WARP,
         f"    ln_warp_row<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>{args}"),
        ("warp_welford", ["block_per_row", "warp_shuffle", "coalesced", "block_128"], _LN_WELFORD,
         f"    ln_warp_welford<<<(unsigned)((rows + 3) / 4), 128, 0, stream>>>{args}"),
        ("block_vec4", ["block_per_row", "vectorized", "warp_shuffle", "two_level", "block_256"], _LN_VEC4,
         "    ln_block_vec4<<<(unsigned)rows, 256, 0, stream>>>(x, g, bt, y, cols, eps);"),
        ("two_kernels", ["multi_pass", "warp_shuffle", "coalesced", "block_256"], _LN_TWO_KERNELS,
         _LN_TWO_KERNELS_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), _LN_HEAD + kernel + _LN_ENTRY.format(eps=repr(eps), launch=launch))
            for name, tags, kernel, launch in specs]


def layer_norm(index: int) -> GeneratedTorchTask:
    rng = rng_for("layer_norm", index)
    rows = int(rng.choice([1024, 2048, 4096, 8192]))
    cols = int(rng.choice([256, 768, 1000, 1024, 2048, 4096]))
    eps = float(rng.choice([1e-6, 1e-5, 1e-4, 1e-3]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shift = round(float(rng.uniform(-1.0, 1.0)), 3)
    init_seed = int(rng.integers(1, 2**31 - 1))
    source = problem_source(
        f"y = LayerNorm({cols}, eps={eps!r})(x) over a (batch_size, {cols}) input, with a weight and bias drawn at "
        "init.", "self.ln(x)", f"torch.randn(batch_size, {cols}) * {spread} + {shift}", batch_size=rows,
        init_body=(f"self.ln = nn.LayerNorm({cols}, eps={eps!r})\n"
                   f"g = torch.Generator().manual_seed({init_seed})\n"
                   "with torch.no_grad():\n"
                   "    self.ln.weight.uniform_(0.5, 1.5, generator=g)\n"
                   "    self.ln.bias.uniform_(-0.5, 0.5, generator=g)"))
    tid = task_id("layer_norm", index)
    # Outputs are of order 1 (|x - mean| * rstd below ~6, times a weight up to 1.5, plus a bias). Mean and variance
    # are sums of up to 4096 floats, so another summation order (sequential, trees, shuffles, Welford) moves them by
    # a few 1e-7 relative; the inputs' offset (|shift| <= 1) against their spread (>= 0.5) amplifies that a few
    # times, and every variant subtracts the mean before squaring. The worst order (one thread summing a row in
    # sequence) stays within ~1e-5 of the exact result in fp32 simulation: 1e-4 absolute and relative is 10x that.
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>", description=f"layer norm over {cols} columns",
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _layer_norm_variants(eps)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "layer_norm", index, {"rows": rows, "cols": cols, "eps": eps, "spread": spread,
                                                          "shift": shift, "init_seed": init_seed}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# col_reduce: a sum, mean or max over dim 0 (the rows) of an activation of the input: one value per column

# reducer: (torch expression over the mapped tensor m, identity, combine(a, b), finish(v, rows), atomic combine)
COL_REDUCERS = {
    "sum": ("torch.sum({m}, dim=0)", "0.f", "a + b", "v", "atomicAdd(p, v);"),
    "mean": ("torch.mean({m}, dim=0)", "0.f", "a + b", "v / (float)rows", "atomicAdd(p, v);"),
    # floats with the sign bit clear order like their bits as signed ints; with it set, in reverse of the bits as
    # unsigned ints (and every such pattern is above every non-negative one): max and min, chosen by v's sign bit
    "max": ("torch.amax({m}, dim=0)", "-INFINITY", "fmaxf(a, b)", "v",
            "if (__float_as_int(v) >= 0) atomicMax((int*)p, __float_as_int(v));\n"
            "    else atomicMin((unsigned int*)p, __float_as_uint(v));"),
}
# max over thousands of rows of a saturating activation is the same constant for every column
_MAX_ACTIVATIONS = ("abs", "gelu", "relu", "silu", "softplus")

_COL_HEAD = """__device__ __forceinline__ float elem(float v) {{
    return {elem};
}}
__device__ __forceinline__ float ident() {{ return {ident}; }}
__device__ __forceinline__ float combine(float a, float b) {{ return {combine}; }}
__device__ __forceinline__ float finish(float v, long long rows) {{
    (void)rows;
    return {finish};
}}
"""
_COL_ATOMIC = """__device__ __forceinline__ void combine_atomic(float* p, float v) {{
    {atomic}
}}
"""
_COL_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1 || in[0].ndim != 2) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

_COL_THREAD = """
__global__ void col_thread(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* neighbours read neighbouring floats */
    if (c >= cols) return;
    float acc = ident();
    for (long long r = 0; r < rows; ++r) acc = combine(acc, elem(x[r * cols + c]));
    y[c] = finish(acc, rows);
}
"""
_COL_GROUP = """
__global__ void col_group8(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    /* each thread owns 8 adjacent columns and reads them row by row: neighbouring threads are 32 bytes apart */
    const long long c0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (c0 >= cols) return;
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = ident();
    for (long long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols + c0;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (c0 + j < cols) acc[j] = combine(acc[j], elem(xr[j]));
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
        if (c0 + j < cols) y[c0 + j] = finish(acc[j], rows);
}
"""
_COL_BLOCK = """
__global__ void col_block(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    /* one block per column: its threads take rows, a whole row (cols floats) apart */
    __shared__ float part[256];
    const long long c = blockIdx.x;
    float acc = ident();
    for (long long r = threadIdx.x; r < rows; r += 256) acc = combine(acc, elem(x[r * cols + c]));
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] = combine(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[c] = finish(part[0], rows);
}
"""
_COL_TILE = """
__global__ void col_init(float* __restrict__ y, long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) y[c] = ident();
}

__global__ void col_tile(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    /* a (32, 8) block reduces a tile of 256 rows by 32 columns: 8 row lanes per column, a tree over them in shared
       memory, then one atomic per column into y */
    __shared__ float part[8][32];
    const long long c = (long long)blockIdx.x * 32 + threadIdx.x;
    const long long r0 = (long long)blockIdx.y * 256;
    const long long r1 = r0 + 256 < rows ? r0 + 256 : rows;
    float acc = ident();
    if (c < cols)
        for (long long r = r0 + threadIdx.y; r < r1; r += 8) acc = combine(acc, elem(x[r * cols + c]));
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    for (int s = 4; s > 0; s >>= 1) {
        const int ty = threadIdx.y, tx = threadIdx.x;
        if (ty < s) part[ty][tx] = combine(part[ty][tx], part[ty + s][tx]);
        __syncthreads();
    }
    if (threadIdx.y == 0 && c < cols) combine_atomic(&y[c], finish(part[0][threadIdx.x], rows));
}
"""
_COL_TILE_LAUNCH = """    col_init<<<(unsigned)((cols + 255) / 256), 256, 0, stream>>>(y, cols);
    dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 255) / 256));
    col_tile<<<grid, dim3(32, 8), 0, stream>>>(x, y, rows, cols);"""
_COL_TWO_PASS = """
__global__ void col_partial(const float* __restrict__ x, float* __restrict__ part, long long rows, long long cols,
                            long long chunk) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float acc = ident();
    for (long long r = r0; r < r1; ++r) acc = combine(acc, elem(x[r * cols + c]));
    part[(long long)blockIdx.y * cols + c] = acc;
}

__global__ void col_finish(const float* __restrict__ part, float* __restrict__ y, long long nparts, long long rows,
                           long long cols) {
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = ident();
    for (long long p = 0; p < nparts; ++p) acc = combine(acc, part[p * cols + c]);
    y[c] = finish(acc, rows);
}
"""
_COL_TWO_PASS_LAUNCH = """    long long chunk = 64;
    while ((rows + chunk - 1) / chunk > 65535) chunk *= 2;
    const long long nparts = (rows + chunk - 1) / chunk;
    float* part = 0;
    if (cudaMallocAsync((void**)&part, nparts * cols * sizeof(float), stream) != cudaSuccess) return 3;
    dim3 grid((unsigned)((cols + 255) / 256), (unsigned)nparts);
    col_partial<<<grid, 256, 0, stream>>>(x, part, rows, cols, chunk);
    col_finish<<<(unsigned)((cols + 255) / 256), 256, 0, stream>>>(part, y, nparts, rows, cols);
    cudaFreeAsync(part, stream);"""
_COL_SHUFFLE = """
__global__ void __launch_bounds__(256) col_shuffle8(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                    long long cols) {
    /* a block per 8 columns; a warp's lanes cover 4 rows by 8 columns (one 32-byte sector per row), the block 32
       rows; row lanes are folded with xor shuffles, then the 8 warps' partials through shared memory */
    __shared__ float part[8][8];
    const int t = threadIdx.x, lane = t % 32, wid = t / 32;
    const long long c = (long long)blockIdx.x * 8 + t % 8;
    float acc = ident();
    if (c < cols)
        for (long long r = t / 8; r < rows; r += 32) acc = combine(acc, elem(x[r * cols + c]));
    acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, 8));
    acc = combine(acc, __shfl_xor_sync(0xffffffffu, acc, 16));
    if (lane < 8) part[wid][lane] = acc;
    __syncthreads();
    if (t < 8 && c < cols) {
        float v = part[0][t];
#pragma unroll
        for (int k = 1; k < 8; ++k) v = combine(v, part[k][t]);
        y[c] = finish(v, rows);
    }
}
"""


def _col_variants(reducer: str, elem: str) -> list[TorchVariant]:
    _, ident, comb, fin, atomic = COL_REDUCERS[reducer]
    head = _COL_HEAD.format(elem=elem, ident=ident, combine=comb, finish=fin)
    specs = [
        ("thread_per_col", ["thread_per_row", "coalesced", "block_256"], _COL_THREAD,
         "    col_thread<<<(unsigned)((cols + 255) / 256), 256, 0, stream>>>(x, y, rows, cols);"),
        ("thread_per_8cols_strided", ["thread_per_row", "strided", "register_blocking", "unrolled", "block_128"],
         _COL_GROUP,
         "    const long long threads = (cols + 7) / 8;\n"
         "    col_group8<<<(unsigned)((threads + 127) / 128), 128, 0, stream>>>(x, y, rows, cols);"),
        ("block_per_col_tree", ["block_per_row", "tree_reduction", "strided", "block_256"], _COL_BLOCK,
         "    col_block<<<(unsigned)cols, 256, 0, stream>>>(x, y, rows, cols);"),
        ("tile_atomics", ["shared_tiling", "tree_reduction", "atomics", "coalesced", "block_256"],
         _COL_ATOMIC.format(atomic=atomic) + _COL_TILE, _COL_TILE_LAUNCH),
        ("two_pass", ["multi_pass", "two_level", "coalesced", "block_256"], _COL_TWO_PASS, _COL_TWO_PASS_LAUNCH),
        ("warp_shuffle_8cols", ["warp_shuffle", "block_per_row", "two_level", "block_256"], _COL_SHUFFLE,
         "    col_shuffle8<<<(unsigned)((cols + 7) / 8), 256, 0, stream>>>(x, y, rows, cols);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _COL_ENTRY.format(launch=launch))
            for name, tags, kernel, launch in specs]


def col_reduce(index: int) -> GeneratedTorchTask:
    rng = rng_for("col_reduce", index)
    rows = int(rng.choice([2048, 4096, 8192, 16384]))
    cols = int(rng.choice([256, 1000, 1024, 4096]))
    reducer = str(rng.choice(sorted(COL_REDUCERS)))
    act = str(rng.choice(sorted(ACTIVATIONS) if reducer != "max" else list(_MAX_ACTIVATIONS)))
    scale_in = round(float(rng.uniform(0.5, 2.0)), 3)
    m_t = ACTIVATIONS[act][0].format(v=f"x * {scale_in}")
    m_c = ACTIVATIONS[act][1].format(v=f"v * {scale_in}f")
    t_expr = COL_REDUCERS[reducer][0].format(m=m_t)
    doc = t_expr.replace("torch.nn.functional.", "F.")
    source = problem_source(f"y = {doc} over a (batch_size, {cols}) input: one value per column.", t_expr,
                            f"torch.randn(batch_size, {cols})", batch_size=rows)
    tid = task_id("col_reduce", index)
    if reducer == "sum":
        # sums of thousands of floats in another order differ in the last bits of every partial sum: row_reduce's
        # 1e-2 absolute and 1e-3 relative
        tol = (1e-2, 1e-3)
    elif reducer == "mean":
        # a mean is a sum divided by up to 16384: the relative error is the sum's, but the values are small (a
        # zero-mean activation averages to ~1e-2), so 1e-2 absolute would let a constant pass; the error of such a
        # mean is ~1e-7, hence 1e-5 absolute
        tol = (1e-5, 1e-3)
    else:
        # a max picks one element: exact up to the activation's last-bit differences between libraries
        tol = (1e-5, 1e-5)
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>", description=f"column {reducer} of {act}",
                       tolerance=DtypeTolerance(fp32=tol))
    variants = _col_variants(reducer, m_c)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "col_reduce", index, {"rows": rows, "cols": cols, "reducer": reducer, "act": act,
                                                          "scale": scale_in}, tuple(variants))
