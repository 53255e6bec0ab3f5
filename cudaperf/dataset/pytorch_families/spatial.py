"""``pool2d``, ``depthwise_conv2d`` and ``row_cumsum``: windowed operations over NCHW planes, and a prefix sum per row.

The shapes of a family's problems come from a fixed shuffle of every combination of its size choices (so the first
problems of a family never repeat a shape); the other parameters (activation, scale) are drawn from the problem's
seeded generator. The forward inputs are sized by a module-level ``batch_size`` (N, or the rows of ``row_cumsum``),
so that the harness tries a second size and every variant reads its shapes from the ``TensorArg``s.
"""

from __future__ import annotations

import itertools

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


def _combo(family: str, index: int, axes: list[list]) -> tuple:
    """The ``index``-th entry of a fixed shuffle of every combination of ``axes`` (distinct for the first
    ``prod(len(a))`` indices, then repeating)."""
    combos = list(itertools.product(*axes))
    order = rng_for(f"{family}:shapes", 0).permutation(len(combos))
    return combos[int(order[index % len(combos)])]


def _act_c(act: str, v: str) -> str:
    return v if act == "none" else ACTIVATIONS[act][1].format(v=v)


def _act_t(act: str, v: str) -> str:
    return v if act == "none" else ACTIVATIONS[act][0].format(v=v)


_SPATIAL_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != {n_in} || n_out != 1 || in[0].ndim != 4 || out[0].ndim != 4 || in[0].dtype != DT_FLOAT32) return 1;
    const int N = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
    const int Ho = (int)out[0].shape[2], Wo = (int)out[0].shape[3];
    const long long planes = (long long)N * C;
    const long long n = planes * Ho * Wo;
    const unsigned gz = (unsigned)(planes < 65535 ? planes : 65535);  /* kernels loop over planes past gridDim.z */
    (void)H; (void)W; (void)Ho; (void)Wo; (void)n; (void)gz;
{check}
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

# ---------------------------------------------------------------------------------------------------------------
# pool2d

_POOL_HEAD = """constexpr int K = {k};  /* window */
constexpr int S = {s};  /* stride (padding 0, floor mode: every window lies inside the plane) */

__device__ __forceinline__ float pool_init() {{ return {init}; }}
__device__ __forceinline__ float pool_step(float acc, float v) {{ return {step}; }}
__device__ __forceinline__ float pool_done(float acc) {{
    float v = {done};
    return {post};
}}
"""
_POOL_WINDOW = """
/* the pooled value of the K x K window whose top-left element is xp (rows ld apart) */
__device__ __forceinline__ float window(const float* __restrict__ xp, long long ld) {
    float acc = pool_init();
#pragma unroll
    for (int dy = 0; dy < K; ++dy)
#pragma unroll
        for (int dx = 0; dx < K; ++dx) acc = pool_step(acc, xp[dy * ld + dx]);
    return pool_done(acc);
}
"""
_POOL_NAIVE = """
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int H, int W, int Ho,
                            int Wo) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int ow = (int)(i % Wo);
    long long t = i / Wo;
    int oh = (int)(t % Ho);
    long long p = t / Ho;
    y[i] = window(x + p * H * W + (long long)oh * S * W + (long long)ow * S, W);
}
"""
_POOL_2D = """
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long planes, int H, int W,
                            int Ho, int Wo) {
    int ow = blockIdx.x * 16 + threadIdx.x;
    int oh = blockIdx.y * 16 + threadIdx.y;
    if (ow >= Wo || oh >= Ho) return;
    for (long long p = blockIdx.z; p < planes; p += gridDim.z)
        y[(p * Ho + oh) * Wo + ow] = window(x + p * H * W + (long long)oh * S * W + (long long)ow * S, W);
}
"""
_POOL_GRID_STRIDE = """
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int H, int W, int Ho,
                            int Wo) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int ow = (int)(i % Wo);
        long long t = i / Wo;
        int oh = (int)(t % Ho);
        long long p = t / Ho;
        y[i] = window(x + p * H * W + (long long)oh * S * W + (long long)ow * S, W);
    }
}
"""
_POOL_SHARED = """
constexpr int TO = 16;                /* outputs per tile side (one per thread of a 16 x 16 block) */
constexpr int TI = (TO - 1) * S + K;  /* input tile side, halo included */

__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long planes, int H, int W,
                            int Ho, int Wo) {
    __shared__ float tile[TI][TI + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TO + tx;
    const int ow = blockIdx.x * TO + tx, oh = blockIdx.y * TO + ty;
    const int ix0 = blockIdx.x * TO * S, iy0 = blockIdx.y * TO * S;
    for (long long p = blockIdx.z; p < planes; p += gridDim.z) {  /* the same trip count for the whole block */
        const float* xp = x + p * H * W;
        for (int e = tid; e < TI * TI; e += TO * TO) {
            int r = e / TI, c = e % TI;
            int gy = iy0 + r, gx = ix0 + c;
            tile[r][c] = (gy < H && gx < W) ? xp[(long long)gy * W + gx] : 0.f;
        }
        __syncthreads();
        if (ow < Wo && oh < Ho) y[(p * Ho + oh) * Wo + ow] = window(&tile[ty * S][tx * S], TI + 1);
        __syncthreads();  /* the tile is read before the next plane overwrites it */
    }
}
"""
_POOL_REGISTER = """
constexpr int R = 4;                  /* outputs per thread, consecutive along W */
constexpr int SPAN = (R - 1) * S + K; /* input columns they cover */

__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long planes, int H, int W,
                            int Ho, int Wo) {
    const int Wq = (Wo + R - 1) / R;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * Ho * Wq) return;
    int q = (int)(i % Wq);
    long long t = i / Wq;
    int oh = (int)(t % Ho);
    long long p = t / Ho;
    const int ow0 = q * R, c0 = ow0 * S;
    const float* xr = x + p * H * W + (long long)oh * S * W;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = pool_init();
#pragma unroll
    for (int dy = 0; dy < K; ++dy) {
        float v[SPAN];
#pragma unroll
        for (int j = 0; j < SPAN; ++j) v[j] = (c0 + j < W) ? xr[(long long)dy * W + c0 + j] : 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int dx = 0; dx < K; ++dx) acc[r] = pool_step(acc[r], v[r * S + dx]);
    }
    float* yr = y + (p * Ho + oh) * Wo;
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (ow0 + r < Wo) yr[ow0 + r] = pool_done(acc[r]);
}
"""
_POOL_CHANNEL_WALK = """
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int C, int H, int W,
                            int Ho, int Wo) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* consecutive threads: consecutive channels */
    if (i >= n) return;
    int c = (int)(i % C);
    long long t = i / C;
    int ow = (int)(t % Wo);
    t /= Wo;
    int oh = (int)(t % Ho);
    long long p = (t / Ho) * C + c;
    y[(p * Ho + oh) * Wo + ow] = window(x + p * H * W + (long long)oh * S * W + (long long)ow * S, W);
}
"""
_POOL_COLUMN_WALK = """
__global__ void pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int H, int W, int Ho,
                            int Wo) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* consecutive threads walk down a column */
    if (i >= n) return;
    int oh = (int)(i % Ho);
    long long t = i / Ho;
    int ow = (int)(t % Wo);
    long long p = t / Wo;
    y[(p * Ho + oh) * Wo + ow] = window(x + p * H * W + (long long)oh * S * W + (long long)ow * S, W);
}
"""
_POOL_ARGS = "(const float*)in[0].data, (float*)out[0].data"


def _pool_variants(op: str, k: int, s: int, act: str) -> list[TorchVariant]:
    if op == "max":
        init, step, done = "-INFINITY", "fmaxf(acc, v)", "acc"
    else:  # padding 0: every window holds K * K elements, the divisor of avg_pool2d
        init, step, done = "0.f", "acc + v", "acc / (float)(K * K)"
    head = _POOL_HEAD.format(k=k, s=s, init=init, step=step, done=done, post=_act_c(act, "v")) + _POOL_WINDOW
    a = _POOL_ARGS
    specs = [
        ("naive_b256", ["naive", "coalesced", "block_256"], _POOL_NAIVE,
         f"    pool_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>({a}, n, H, W, Ho, Wo);"),
        ("plane_2d_16x16", ["coalesced", "block_256"], _POOL_2D,
         "    dim3 block(16, 16), grid((unsigned)((Wo + 15) / 16), (unsigned)((Ho + 15) / 16), gz);\n"
         f"    pool_kernel<<<grid, block, 0, stream>>>({a}, planes, H, W, Ho, Wo);"),
        ("grid_stride", ["grid_stride", "coalesced", "block_256"], _POOL_GRID_STRIDE,
         "    int dev = 0, sms = 0;\n    cudaGetDevice(&dev);\n"
         "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);\n"
         f"    pool_kernel<<<4 * sms, 256, 0, stream>>>({a}, n, H, W, Ho, Wo);"),
        ("shared_tile_16x16", ["shared_tiling", "coalesced", "block_256"], _POOL_SHARED,
         "    dim3 block(16, 16), grid((unsigned)((Wo + 15) / 16), (unsigned)((Ho + 15) / 16), gz);\n"
         f"    pool_kernel<<<grid, block, 0, stream>>>({a}, planes, H, W, Ho, Wo);"),
        ("register_w4", ["register_blocking", "unrolled", "block_128"], _POOL_REGISTER,
         "    const long long threads = planes * Ho * ((Wo + 3) / 4);\n"
         f"    pool_kernel<<<(unsigned)((threads + 127) / 128), 128, 0, stream>>>({a}, planes, H, W, Ho, Wo);"),
        ("channel_walk", ["strided", "block_256"], _POOL_CHANNEL_WALK,
         f"    pool_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>({a}, n, C, H, W, Ho, Wo);"),
        ("column_walk", ["strided", "block_64"], _POOL_COLUMN_WALK,
         f"    pool_kernel<<<(unsigned)((n + 63) / 64), 64, 0, stream>>>({a}, n, H, W, Ho, Wo);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _SPATIAL_ENTRY.format(n_in=1, check="", launch=launch))
            for name, tags, kernel, launch in specs]


_POOL_OPS = [(op, k, s) for op in ("max", "avg") for k in (2, 3) for s in sorted({1, 2, k})]


def pool2d(index: int) -> GeneratedTorchTask:
    rng = rng_for("pool2d", index)
    n, c, h, (op, k, s) = _combo("pool2d", index, [[8, 16, 32], [16, 32, 64], [56, 64, 112, 127], _POOL_OPS])
    act = str(rng.choice(["none", *sorted(ACTIVATIONS)]))
    pool_t = f"torch.nn.functional.{op}_pool2d(x, kernel_size={k}, stride={s})"
    expr = _act_t(act, pool_t)
    ho = (h - k) // s + 1
    doc = f"y = {expr.replace('torch.nn.functional.', 'F.')}: (batch_size, {c}, {h}, {h}) -> (.., {ho}, {ho})."
    source = problem_source(doc, expr, f"torch.randn(batch_size, {c}, {h}, {h})", batch_size=n)
    tid = task_id("pool2d", index)
    # max pooling is exact; an average of K * K <= 9 values summed in the reference's order, then divided, is within
    # an ulp or two, and the activations differ from torch's by a few ulps: 1e-5 absolute and relative.
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"{op} pool {k}x{k} stride {s}" + ("" if act == "none" else f" then {act}"),
                       tolerance=DtypeTolerance(fp32=(1e-5, 1e-5)))
    variants = _pool_variants(op, k, s, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "pool2d", index, {"batch": n, "channels": c, "size": h, "op": op, "kernel": k,
                                                      "stride": s, "act": act}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# depthwise_conv2d

_DW_HEAD = """constexpr int K = {k};      /* filter side (odd) */
constexpr int P = K / 2;    /* zero padding: the output has the input's height and width */

__device__ __forceinline__ float post(float v) {{ return {post}; }}
"""
_DW_CHECK = """    if (in[1].numel != (long long)C * K * K || in[2].numel != C || Ho != H || Wo != W) return 1;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;  /* (C, 1, K, K) */
    const float* b = (const float*)in[2].data;  /* (C) */
    float* y = (float*)out[0].data;"""
_DW_NAIVE = """
__global__ void dw_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long n, int C, int H, int W) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int ox = (int)(i % W);
    long long t = i / W;
    int oy = (int)(t % H);
    long long p = t / H;
    int c = (int)(p % C);
    const float* xp = x + p * H * W;
    const float* wc = w + c * K * K;
    float acc = 0.f;
    for (int dy = 0; dy < K; ++dy) {
        int iy = oy + dy - P;
        if (iy < 0 || iy >= H) continue;
        for (int dx = 0; dx < K; ++dx) {
            int ix = ox + dx - P;
            if (ix >= 0 && ix < W) acc += xp[(long long)iy * W + ix] * wc[dy * K + dx];
        }
    }
    y[i] = post(acc + b[c]);
}
"""
_DW_TILE_2D = """
__global__ void dw_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long planes, int C, int H, int W) {
    const int ox = blockIdx.x * 16 + threadIdx.x, oy = blockIdx.y * 16 + threadIdx.y;
    if (ox >= W || oy >= H) return;
    for (long long p = blockIdx.z; p < planes; p += gridDim.z) {
        const int c = (int)(p % C);
        const float* xp = x + p * H * W;
        float acc = 0.f;
#pragma unroll
        for (int dy = 0; dy < K; ++dy) {
            const int iy = oy + dy - P;
#pragma unroll
            for (int dx = 0; dx < K; ++dx) {
                const int ix = ox + dx - P;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                    acc += __ldg(xp + (long long)iy * W + ix) * __ldg(w + c * K * K + dy * K + dx);
            }
        }
        y[(p * H + oy) * W + ox] = post(acc + __ldg(b + c));
    }
}
"""
_DW_SHARED = """
template <int TX, int TY>
__global__ void dw_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long planes, int C, int H, int W) {
    constexpr int IW = TX + K - 1, IH = TY + K - 1;  /* the input tile with its halo */
    __shared__ float tile[IH][IW + 1];
    __shared__ float wf[K * K];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    const int ox = blockIdx.x * TX + tx, oy = blockIdx.y * TY + ty;
    const int x0 = blockIdx.x * TX - P, y0 = blockIdx.y * TY - P;
    for (long long p = blockIdx.z; p < planes; p += gridDim.z) {  /* the same trip count for the whole block */
        const int c = (int)(p % C);
        const float* xp = x + p * H * W;
        for (int e = tid; e < IH * IW; e += TX * TY) {
            const int r = e / IW, cc = e % IW;
            const int gy = y0 + r, gx = x0 + cc;
            tile[r][cc] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? xp[(long long)gy * W + gx] : 0.f;
        }
        if (tid < K * K) wf[tid] = w[c * K * K + tid];
        __syncthreads();
        if (ox < W && oy < H) {
            float acc = 0.f;
#pragma unroll
            for (int dy = 0; dy < K; ++dy)
#pragma unroll
                for (int dx = 0; dx < K; ++dx) acc += tile[ty + dy][tx + dx] * wf[dy * K + dx];
            y[(p * H + oy) * W + ox] = post(acc + b[c]);
        }
        __syncthreads();  /* the tile and the filter are read before the next plane overwrites them */
    }
}
"""
_DW_REGISTER = """
template <int R>
__global__ void dw_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long planes, int C, int H, int W) {
    const int Wq = (W + R - 1) / R;  /* each thread: R consecutive outputs of one row */
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * H * Wq) return;
    const int q = (int)(i % Wq);
    long long t = i / Wq;
    const int oy = (int)(t % H);
    const long long p = t / H;
    const int c = (int)(p % C);
    const int ox0 = q * R;
    const float* xp = x + p * H * W;
    float wr[K * K];
#pragma unroll
    for (int j = 0; j < K * K; ++j) wr[j] = __ldg(w + c * K * K + j);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
#pragma unroll
    for (int dy = 0; dy < K; ++dy) {
        const int iy = oy + dy - P;
        if (iy < 0 || iy >= H) continue;
        const float* xr = xp + (long long)iy * W;
        float v[R + K - 1];
#pragma unroll
        for (int j = 0; j < R + K - 1; ++j) {
            const int ix = ox0 - P + j;
            v[j] = (ix >= 0 && ix < W) ? __ldg(xr + ix) : 0.f;
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int dx = 0; dx < K; ++dx) acc[r] += v[r + dx] * wr[dy * K + dx];
    }
    const float bc = __ldg(b + c);
    float* yr = y + (p * H + oy) * W;
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (ox0 + r < W) yr[ox0 + r] = post(acc[r] + bc);
}
"""
_DW_CONSTANT = """
constexpr int MAX_W = 12288, MAX_C = 1024;  /* 52 KB of the 64 KB constant bank */
static __constant__ float c_w[MAX_W];
static __constant__ float c_b[MAX_C];

__global__ void dw_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, int C, int H, int W) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int ox = (int)(i % W);
    long long t = i / W;
    const int oy = (int)(t % H);
    const long long p = t / H;
    const int c = (int)(p % C);  /* the threads of a warp share c (one plane): constant-cache broadcasts */
    const float* xp = x + p * H * W;
    float acc = 0.f;
#pragma unroll
    for (int dy = 0; dy < K; ++dy) {
        const int iy = oy + dy - P;
#pragma unroll
        for (int dx = 0; dx < K; ++dx) {
            const int ix = ox + dx - P;
            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                acc += xp[(long long)iy * W + ix] * c_w[c * K * K + dy * K + dx];
        }
    }
    y[i] = post(acc + c_b[c]);
}
"""
_DW_CONSTANT_LAUNCH = """    if ((long long)C * K * K > MAX_W || C > MAX_C) return 3;
    if (cudaMemcpyToSymbolAsync(c_w, w, (size_t)C * K * K * sizeof(float), 0, cudaMemcpyDeviceToDevice, stream)
            != cudaSuccess ||
        cudaMemcpyToSymbolAsync(c_b, b, (size_t)C * sizeof(float), 0, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        return 3;
    dw_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n, C, H, W);"""
_DW_CHANNEL_WALK = """
__global__ void dw_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long n, int C, int H, int W) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* consecutive threads: consecutive channels */
    if (i >= n) return;
    const int c = (int)(i % C);
    long long t = i / C;
    const int ox = (int)(t % W);
    t /= W;
    const int oy = (int)(t % H);
    const long long p = (t / H) * C + c;
    const float* xp = x + p * H * W;
    float acc = 0.f;
    for (int dy = 0; dy < K; ++dy) {
        const int iy = oy + dy - P;
        if (iy < 0 || iy >= H) continue;
        for (int dx = 0; dx < K; ++dx) {
            const int ix = ox + dx - P;
            if (ix >= 0 && ix < W) acc += xp[(long long)iy * W + ix] * w[c * K * K + dy * K + dx];
        }
    }
    y[(p * H + oy) * W + ox] = post(acc + b[c]);
}
"""


def _dw_variants(k: int, act: str) -> list[TorchVariant]:
    head = _DW_HEAD.format(k=k, post=_act_c(act, "v"))
    grid16 = "dim3 block(16, 16), grid((unsigned)((W + 15) / 16), (unsigned)((H + 15) / 16), gz);"
    specs = [
        ("naive_b256", ["naive", "coalesced", "block_256"], _DW_NAIVE,
         "    dw_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, w, b, y, n, C, H, W);"),
        ("tile_2d_16x16", ["coalesced", "readonly_cache", "unrolled", "block_256"], _DW_TILE_2D,
         f"    {grid16}\n    dw_kernel<<<grid, block, 0, stream>>>(x, w, b, y, planes, C, H, W);"),
        ("shared_16x16", ["shared_tiling", "coalesced", "block_256"], _DW_SHARED,
         f"    {grid16}\n    dw_kernel<16, 16><<<grid, block, 0, stream>>>(x, w, b, y, planes, C, H, W);"),
        ("shared_32x8", ["shared_tiling", "coalesced", "block_256"], _DW_SHARED,
         "    dim3 block(32, 8), grid((unsigned)((W + 31) / 32), (unsigned)((H + 7) / 8), gz);\n"
         "    dw_kernel<32, 8><<<grid, block, 0, stream>>>(x, w, b, y, planes, C, H, W);"),
        ("register_w2", ["register_blocking", "unrolled", "readonly_cache", "block_256"], _DW_REGISTER,
         "    const long long threads = planes * H * ((W + 1) / 2);\n"
         "    dw_kernel<2><<<(unsigned)((threads + 255) / 256), 256, 0, stream>>>(x, w, b, y, planes, C, H, W);"),
        ("register_w4", ["register_blocking", "unrolled", "readonly_cache", "block_128"], _DW_REGISTER,
         "    const long long threads = planes * H * ((W + 3) / 4);\n"
         "    dw_kernel<4><<<(unsigned)((threads + 127) / 128), 128, 0, stream>>>(x, w, b, y, planes, C, H, W);"),
        ("constant_weights", ["constant_memory", "coalesced", "unrolled", "block_256"], _DW_CONSTANT,
         _DW_CONSTANT_LAUNCH),
        ("channel_walk", ["strided", "block_256"], _DW_CHANNEL_WALK,
         "    dw_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, w, b, y, n, C, H, W);"),
    ]
    return [TorchVariant(name, tuple(tags),
                         head + kernel + _SPATIAL_ENTRY.format(n_in=3, check=_DW_CHECK, launch=launch))
            for name, tags, kernel, launch in specs]


def depthwise_conv2d(index: int) -> GeneratedTorchTask:
    rng = rng_for("depthwise_conv2d", index)
    n, c, h, k = _combo("depthwise_conv2d", index, [[4, 8, 16], [32, 64, 128], [32, 56, 64, 100], [3, 5]])
    act = str(rng.choice(["none", *sorted(ACTIVATIONS)]))
    expr = _act_t(act, "self.conv(x)")
    doc = (f"y = {expr.replace('torch.nn.functional.', 'F.')}, a depthwise {k}x{k} convolution ({c} groups, padding "
           f"{k // 2}, bias) of (batch_size, {c}, {h}, {h}).")
    source = problem_source(doc, expr, f"torch.randn(batch_size, {c}, {h}, {h})", batch_size=n,
                            init_args=", channels, kernel_size", init_inputs=f"{c}, {k}",
                            init_body="self.conv = nn.Conv2d(channels, channels, kernel_size, "
                                      "padding=kernel_size // 2, groups=channels, bias=True)")
    tid = task_id("depthwise_conv2d", index)
    # sums of at most 25 products of O(1) values plus a bias, in another order than the reference's (cuDNN or
    # PyTorch's depthwise kernels): a few ulps; 1e-4 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"depthwise conv {k}x{k}" + ("" if act == "none" else f" then {act}"),
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _dw_variants(k, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "depthwise_conv2d", index, {"batch": n, "channels": c, "size": h, "kernel": k,
                                                                "act": act}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# row_cumsum

_SCAN_HEAD = """__device__ __forceinline__ float fmap(float v) {{
    return {expr};
}}
"""
_SCAN_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1 || in[0].ndim != 2 || in[0].dtype != DT_FLOAT32) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_SCAN_THREAD = """
__global__ void scan_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float acc = 0.f;
    for (long long c = 0; c < cols; ++c) {
        acc += fmap(xr[c]);
        yr[c] = acc;
    }
}
"""
_SCAN_HILLIS_STEELE = """
template <int B>
__global__ void scan_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    __shared__ float buf[2][B];  /* ping-pong: each step reads one buffer and writes the other */
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const int t = threadIdx.x;
    float carry = 0.f;  /* the sum of the chunks before this one (the same in every thread) */
    for (long long c0 = 0; c0 < cols; c0 += B) {
        const long long c = c0 + t;
        buf[0][t] = c < cols ? fmap(xr[c]) : 0.f;
        __syncthreads();
        int cur = 0;
        for (int off = 1; off < B; off <<= 1) {
            float v = buf[cur][t];
            if (t >= off) v += buf[cur][t - off];
            buf[cur ^ 1][t] = v;
            cur ^= 1;
            __syncthreads();
        }
        if (c < cols) yr[c] = carry + buf[cur][t];
        carry += buf[cur][B - 1];
        __syncthreads();  /* every thread has read buf before the next chunk overwrites it */
    }
}
"""
_SCAN_BLELLOCH = """
template <int B>
__global__ void scan_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    constexpr int M = 2 * B;  /* elements per chunk: two per thread */
    __shared__ float s[M];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const int t = threadIdx.x;
    float carry = 0.f;
    for (long long c0 = 0; c0 < cols; c0 += M) {
        const long long ca = c0 + t, cb = c0 + t + B;
        const float a = ca < cols ? fmap(xr[ca]) : 0.f;
        const float bv = cb < cols ? fmap(xr[cb]) : 0.f;
        s[t] = a;
        s[t + B] = bv;
        int off = 1;
        for (int d = B; d > 0; d >>= 1) {  /* up-sweep: partial sums up a balanced tree */
            __syncthreads();
            if (t < d) {
                const int ai = off * (2 * t + 1) - 1, bi = off * (2 * t + 2) - 1;
                s[bi] += s[ai];
            }
            off <<= 1;
        }
        __syncthreads();
        const float total = s[M - 1];
        __syncthreads();  /* every thread has the total before the root is cleared */
        if (t == 0) s[M - 1] = 0.f;
        for (int d = 1; d < M; d <<= 1) {  /* down-sweep: exclusive prefix sums */
            off >>= 1;
            __syncthreads();
            if (t < d) {
                const int ai = off * (2 * t + 1) - 1, bi = off * (2 * t + 2) - 1;
                const float tmp = s[ai];
                s[ai] = s[bi];
                s[bi] += tmp;
            }
        }
        __syncthreads();
        if (ca < cols) yr[ca] = carry + (s[t] + a);
        if (cb < cols) yr[cb] = carry + (s[t + B] + bv);
        carry += total;
        __syncthreads();  /* s is read before the next chunk overwrites it */
    }
}
"""
_SCAN_WARP = """
__global__ void scan_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* a whole warp leaves together: the shuffles below have all 32 lanes */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float carry = 0.f;
    for (long long c0 = 0; c0 < cols; c0 += 32) {
        const long long c = c0 + lane;
        float v = c < cols ? fmap(xr[c]) : 0.f;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, v, o);
            if (lane >= o) v += u;
        }
        if (c < cols) yr[c] = carry + v;
        carry += __shfl_sync(0xffffffffu, v, 31);
    }
}
"""
_SCAN_WARP_VEC4 = """
__global__ void scan_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* a whole warp leaves together: the shuffles below have all 32 lanes */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const bool vec = cols % 4 == 0 && ((size_t)xr % 16 == 0) && ((size_t)yr % 16 == 0);
    float carry = 0.f;
    for (long long c0 = 0; c0 < cols; c0 += 128) {  /* 128 elements per step: 4 consecutive ones per lane */
        const long long c = c0 + 4 * lane;
        float v0, v1, v2, v3;
        if (vec && c < cols) {  /* cols % 4 == 0: c + 3 < cols too */
            const float4 q = *reinterpret_cast<const float4*>(xr + c);
            v0 = fmap(q.x); v1 = fmap(q.y); v2 = fmap(q.z); v3 = fmap(q.w);
        } else {
            v0 = c < cols ? fmap(xr[c]) : 0.f;
            v1 = c + 1 < cols ? fmap(xr[c + 1]) : 0.f;
            v2 = c + 2 < cols ? fmap(xr[c + 2]) : 0.f;
            v3 = c + 3 < cols ? fmap(xr[c + 3]) : 0.f;
        }
        v1 += v0;  /* the lane's own four, scanned in registers */
        v2 += v1;
        v3 += v2;
        float s = v3;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {  /* inclusive scan of the lanes' totals */
            const float u = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += u;
        }
        float before = __shfl_up_sync(0xffffffffu, s, 1);
        if (lane == 0) before = 0.f;
        const float base = carry + before;
        if (vec && c < cols) {
            *reinterpret_cast<float4*>(yr + c) = make_float4(base + v0, base + v1, base + v2, base + v3);
        } else {
            if (c < cols) yr[c] = base + v0;
            if (c + 1 < cols) yr[c + 1] = base + v1;
            if (c + 2 < cols) yr[c + 2] = base + v2;
            if (c + 3 < cols) yr[c + 3] = base + v3;
        }
        carry += __shfl_sync(0xffffffffu, s, 31);
    }
}
"""
_SCAN_MULTI = """
constexpr int CH = 256;  /* elements per chunk: one per thread of a block */

/* pass 1: each block scans one chunk of one row in place and records the chunk's total */
__global__ void chunk_scan(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ sums,
                           long long rows, long long cols, long long nch) {
    __shared__ float wsum[CH / 32];
    const long long bid = blockIdx.x;
    const long long r = bid / nch, ch = bid % nch;
    const long long c = ch * CH + threadIdx.x;
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    float v = c < cols ? fmap(x[r * cols + c]) : 0.f;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const float u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    if (lane == 31) wsum[wid] = v;
    __syncthreads();
    if (wid == 0) {  /* the whole first warp: scan the warps' totals (lane i reads and writes only wsum[i]) */
        float s = lane < CH / 32 ? wsum[lane] : 0.f;
#pragma unroll
        for (int o = 1; o < CH / 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += u;
        }
        if (lane < CH / 32) wsum[lane] = s;
    }
    __syncthreads();
    if (wid > 0) v += wsum[wid - 1];
    if (c < cols) y[r * cols + c] = v;
    if (threadIdx.x == CH - 1) sums[bid] = v;  /* the chunk's total (elements past the row's end count as 0) */
}

/* pass 2: per row, the chunk totals become exclusive prefix sums (the offsets of the chunks) */
__global__ void sums_scan(float* __restrict__ sums, long long rows, long long nch) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* s = sums + r * nch;
    float acc = 0.f;
    for (long long k = 0; k < nch; ++k) {
        const float t = s[k];
        s[k] = acc;
        acc += t;
    }
}

/* pass 3: add each chunk's offset to its elements */
__global__ void add_back(float* __restrict__ y, const float* __restrict__ sums, long long n, long long cols,
                         long long nch) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long r = i / cols, c = i % cols;
    if (c >= CH) y[i] += sums[r * nch + c / CH];
}
"""
_SCAN_MULTI_LAUNCH = """    const long long nch = (cols + CH - 1) / CH;
    float* sums = 0;
    if (cudaMallocAsync((void**)&sums, (size_t)(rows * nch) * sizeof(float), stream) != cudaSuccess) return 3;
    chunk_scan<<<(unsigned)(rows * nch), CH, 0, stream>>>(x, y, sums, rows, cols, nch);
    sums_scan<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(sums, rows, nch);
    add_back<<<(unsigned)((rows * cols + 255) / 256), 256, 0, stream>>>(y, sums, rows * cols, cols, nch);
    if (cudaFreeAsync(sums, stream) != cudaSuccess) return 3;"""


def _scan_variants(expr: str) -> list[TorchVariant]:
    head = _SCAN_HEAD.format(expr=expr)
    warps = "    scan_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, cols);"
    specs = [
        ("thread_per_row", ["thread_per_row", "strided", "block_128"], _SCAN_THREAD,
         "    scan_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, y, rows, cols);"),
        ("hillis_steele_b256", ["block_per_row", "shared_tiling", "double_buffered", "block_256"], _SCAN_HILLIS_STEELE,
         "    scan_kernel<256><<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols);"),
        ("hillis_steele_b1024", ["block_per_row", "shared_tiling", "double_buffered", "block_1024"],
         _SCAN_HILLIS_STEELE, "    scan_kernel<1024><<<(unsigned)rows, 1024, 0, stream>>>(x, y, rows, cols);"),
        ("blelloch_b256", ["block_per_row", "shared_tiling", "tree_reduction", "block_256"], _SCAN_BLELLOCH,
         "    scan_kernel<256><<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols);"),
        ("warp_shuffle", ["block_per_row", "warp_shuffle", "coalesced", "block_256"], _SCAN_WARP, warps),
        ("warp_vec4", ["block_per_row", "warp_shuffle", "vectorized", "register_blocking", "block_256"],
         _SCAN_WARP_VEC4, warps),
        ("multi_pass", ["multi_pass", "two_level", "warp_shuffle", "block_256"], _SCAN_MULTI, _SCAN_MULTI_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _SCAN_ENTRY.format(launch=launch))
            for name, tags, kernel, launch in specs]


def row_cumsum(index: int) -> GeneratedTorchTask:
    rng = rng_for("row_cumsum", index)
    rows, cols, f = _combo("row_cumsum", index, [[1024, 2048, 4096, 8192], [128, 500, 1024, 2048, 4096],
                                                 ["scale", *sorted(ACTIVATIONS)]])
    if f == "scale":
        scale = round(float(rng.uniform(0.5, 2.0)) * (1 if rng.random() < 0.7 else -1), 3)
        f_t, f_c, mag = f"x * {scale}", f"v * {scale}f", abs(scale)
    else:
        scale = None
        f_t, f_c, mag = ACTIVATIONS[f][0].format(v="x"), ACTIVATIONS[f][1].format(v="v"), 1.0
    # Tolerance. The terms are O(mag) (|x * s| with E = 0.8|s|; the activations of a standard normal have mean
    # |value| < 0.85). A float32 running sum rounds each partial sum S_i by at most u|S_i| (u = 2^-24): the
    # sequential scan (and the reference's own order) ends ~ u * sqrt(j) * max|S_i| <= u * j^1.5 * mag off at
    # column j, trees and chunked scans less. So atol = 4 u cols^1.5 mag (about 0.066 at 4096 columns, mag 1;
    # simulated worst errors of sequential, Hillis-Steele, Blelloch and 32-wide chunked scans stay below 0.012
    # there) with rtol 1e-4 (the partial sums of positive terms grow as j: u sqrt(j) <= 4e-6 relative). A scan
    # that drops a chunk's carry is off by a whole chunk's sum, >= sqrt(32) * 0.8 mag ~ 4.5 mag for zero-mean
    # terms and ~ 16 mag for positive ones: far outside.
    atol = float(f"{4 * 2.0 ** -24 * cols ** 1.5 * mag:.3g}")
    doc = f"y = torch.cumsum({f_t.replace('torch.nn.functional.', 'F.')}, dim=1) over a (batch_size, {cols}) input."
    source = problem_source(doc, f"torch.cumsum({f_t}, dim=1)", f"torch.randn(batch_size, {cols})", batch_size=rows)
    tid = task_id("row_cumsum", index)
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>", description=f"row cumsum of {f}",
                       tolerance=DtypeTolerance(fp32=(atol, 1e-4)))
    variants = _scan_variants(f_c)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "row_cumsum", index, {"rows": rows, "cols": cols, "f": f, "scale": scale,
                                                          "atol": atol}, tuple(variants))
