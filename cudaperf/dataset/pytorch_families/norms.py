"""``rms_norm``, ``l2_normalize_rows`` and ``batch_norm_eval``: normalisations that eager PyTorch runs as several
kernels (or one generic kernel), so that the variants can fuse the statistics with the scaling and map rows,
planes and channels onto threads, warps and blocks in different ways.

``rms_norm``: ``y = x * rsqrt(mean(x^2, last dim) + eps) * weight`` written as eager operations, with the weight
(``cols``) drawn at init from a seeded generator, over a 2-D ``(batch_size, cols)`` or a 3-D ``(batch_size, seq,
cols)`` input. The index picks the layout, the shape (256 to 4096 columns, some not multiples of 4), eps and the
input's spread and offset. Variants: a thread per row, a block per row with a shared-memory tree, a warp per row with
shuffles, a block per row with float4 loads, two kernels (a warp per row writes 1/rms, then a thread per element),
and four rows per block staged in shared memory. Outputs are of order 1 (|x| / rms times a weight in [0.5, 1.5]). The
statistic is a sum of at most 4096 squares, all positive, so any summation order is well conditioned: a float32
simulation of the sequential order (a thread per row, the worst) stays within a few 1e-6 relative of the exact
output, and every output's error is relative to it (the output is x times a per-row and a per-column factor). 1e-4
relative with 1e-5 absolute is 10x that margin and still catches a wrong row or column or a missing mean.

``l2_normalize_rows``: ``F.normalize(x, p=2, dim=-1, eps)`` over a ``(batch_size, cols)`` input, times a scale for
about half the problems (as cosine-similarity heads do). The index picks the shape (64 to 16384 columns, from
short embedding rows to long rows, some not multiples of 4), eps, the scale and the input's spread and offset.
Variants: a thread per row, a warp per row, eight lanes per row (four rows per warp), a block per row with a
shared-memory tree, a block per row with float4 loads, a block per row reading the row once (staged in shared
memory), and the rows split into chunks whose sums of squares meet through atomics before an element-wise pass.
Outputs are x times one factor per row, so their errors are relative: the norm is a sum of at most 16384 positive
squares (a few 1e-6 relative in the sequential order, simulated); 1e-4 relative and 1e-5 absolute, while a
normalised row of 16384 columns has entries of order 1e-2 times the scale, so a norm 1% off still fails.

``batch_norm_eval``: ``F.batch_norm`` in eval mode (``training=False``: the running statistics, as
``nn.BatchNorm2d`` uses after ``.eval()``) over an NCHW input, with the weight, bias, running mean and running
variance of an ``nn.BatchNorm2d`` drawn at init from a seeded generator, then an activation from ``ACTIVATIONS``
for about two thirds of the problems. The index picks N (the batch), C, the plane (7x7 to 112x112, some odd), eps,
the activation and the input's spread and offset. Variants: a thread per element, a grid-stride loop, the channel
constants (scale and shift) computed once into constant memory by a first kernel, computed by every block into
shared memory before a grid-stride loop, a block per (n, c) plane, four consecutive elements per thread with float4
loads, and a 2-D grid of plane chunks with four elements per thread unrolled. No reduction: each output is a few
operations on one input (PyTorch folds the constants as x * a + (b - m * a), the variants as (x - m) * a + b, a few
ulps apart at outputs of order 1; the activations' CUDA forms are ulps from PyTorch's). 1e-4 absolute and
relative.
"""

from __future__ import annotations

import itertools

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, BLOCK_SUM, GeneratedTorchTask, TorchVariant,
                                                      check_tags, problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


_WARP_SUM = """__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}

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

# ---------------------------------------------------------------------------------------------------------------
# rms_norm: y = x * rsqrt(mean(x^2, -1) + eps) * weight

_RMS_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 2 || n_out != 1 || in[0].ndim < 1 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    if (out[0].numel != in[0].numel) return 1;
    if (in[0].numel == 0) return 0;
    const long long cols = in[0].shape[in[0].ndim - 1];  /* the normalised (last) dimension */
    if (cols <= 0 || in[1].numel != cols) return 1;
    const long long rows = in[0].numel / cols;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;  /* weight (cols) */
    float* y = (float*)out[0].data;
    const float eps = {eps}f;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_RMS_THREAD = """
/* one thread per row: a sequential sum of squares, then a second pass scales the row */
__global__ void rms_thread_row(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                               long long rows, long long cols, float eps) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = 0; c < cols; ++c) s = fmaf(xr[c], xr[c], s);
    const float inv = rsqrtf(s / (float)cols + eps);
    for (long long c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
}
"""
_RMS_BLOCK = BLOCK_SUM + """
/* one block per row: strided partial sums of squares, a shared-memory tree, then the block scales the row */
template <int B>
__global__ void rms_block_row(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                              long long cols, float eps) {
    __shared__ float sh[B];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) s = fmaf(xr[c], xr[c], s);
    const float inv = rsqrtf(block_sum<B>(s, sh) / (float)cols + eps);
    for (long long c = threadIdx.x; c < cols; c += B) yr[c] = xr[c] * inv * w[c];
}
"""
_RMS_WARP = """
/* one warp per row, 8 per block: lanes stride over the row, xor shuffles sum the squares */
__global__ void rms_warp_row(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                             long long rows, long long cols, float eps) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together: blockDim is a multiple of 32 */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32) s = fmaf(xr[c], xr[c], s);
    const float inv = rsqrtf(warp_sum(s) / (float)cols + eps);
    for (long long c = lane; c < cols; c += 32) yr[c] = xr[c] * inv * w[c];
}
"""
_RMS_VEC4 = """
/* one block of 128 per row reading float4 when the rows are whole float4s and the pointers 16-byte aligned;
   otherwise the scalar loops */
__global__ void __launch_bounds__(128) rms_block_vec4(const float* __restrict__ x, const float* __restrict__ w,
                                                      float* __restrict__ y, long long cols, float eps) {
    __shared__ float part[4];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)
        | reinterpret_cast<unsigned long long>(w);
    const bool vec = cols % 4 == 0 && (bits & 15) == 0;
    const long long nq = cols / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float s = 0.f;
    if (vec) {
        for (long long q = threadIdx.x; q < nq; q += 128) {
            const float4 v = x4[q];
            s += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 128) s = fmaf(xr[c], xr[c], s);
    }
    const float inv = rsqrtf(block_sum_warps<4>(s, part) / (float)cols + eps);
    if (vec) {
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long q = threadIdx.x; q < nq; q += 128) {
            const float4 v = x4[q], g = w4[q];
            y4[q] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 128) yr[c] = xr[c] * inv * w[c];
    }
}
"""
_RMS_TWO_KERNELS = """
/* pass 1: a warp per row writes the row's 1/rms */
__global__ void rms_stats(const float* __restrict__ x, float* __restrict__ inv, long long rows, long long cols,
                          float eps) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32) s = fmaf(xr[c], xr[c], s);
    s = warp_sum(s);
    if (lane == 0) inv[r] = rsqrtf(s / (float)cols + eps);
}

/* pass 2: one thread per element */
__global__ void rms_apply(const float* __restrict__ x, const float* __restrict__ inv, const float* __restrict__ w,
                          float* __restrict__ y, long long n, long long cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long r = i / cols;
    y[i] = x[i] * inv[r] * w[i - r * cols];
}
"""
_RMS_TWO_KERNELS_LAUNCH = """    float* inv = 0;
    if (cudaMallocAsync((void**)&inv, (size_t)rows * sizeof(float), stream) != cudaSuccess) return 3;
    const long long n = rows * cols;
    rms_stats<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, inv, rows, cols, eps);
    rms_apply<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, inv, w, y, n, cols);
    if (cudaFreeAsync(inv, stream) != cudaSuccess) return 3;"""
_RMS_ROWS = """
constexpr int RPB = 4, TPR = 64;  /* rows per block, threads per row (two warps) */

/* a block of 64 x 4 threads takes four rows: each row is read once from global memory into shared memory while
   its squares are summed (shuffles, then the row's two warps through shared memory), and scaled from there */
__global__ void __launch_bounds__(RPB * TPR) rms_rows_per_block(const float* __restrict__ x,
                                                                const float* __restrict__ w, float* __restrict__ y,
                                                                long long rows, long long cols, float eps) {
    extern __shared__ float xs[];  /* RPB rows of cols floats */
    __shared__ float part[RPB][TPR / 32];
    const int tx = threadIdx.x, ty = threadIdx.y;  /* a warp is 32 consecutive tx of one ty */
    const long long r = (long long)blockIdx.x * RPB + ty;
    const bool active = r < rows;  /* no early return: every thread reaches the barrier */
    float* xrow = xs + (long long)ty * cols;
    float s = 0.f;
    if (active) {
        const float* xr = x + r * cols;
        for (long long c = tx; c < cols; c += TPR) {
            const float v = xr[c];
            xrow[c] = v;
            s = fmaf(v, v, s);
        }
    }
    s = warp_sum(s);
    if (tx % 32 == 0) part[ty][tx / 32] = s;
    __syncthreads();  /* also orders the xrow writes before the reads below */
    if (active) {
        const float inv = rsqrtf((part[ty][0] + part[ty][1]) / (float)cols + eps);
        float* yr = y + r * cols;
        for (long long c = tx; c < cols; c += TPR) yr[c] = xrow[c] * inv * w[c];
    }
}
"""
_RMS_ROWS_LAUNCH = """    const size_t smem = (size_t)RPB * cols * sizeof(float);
    if (smem > 200 * 1024) return 3;
    if (smem > 48 * 1024 && cudaFuncSetAttribute(rms_rows_per_block, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    rms_rows_per_block<<<(unsigned)((rows + RPB - 1) / RPB), dim3(TPR, RPB), smem, stream>>>(x, w, y, rows, cols,
                                                                                          eps);"""


def _rms_variants(eps: float) -> list[TorchVariant]:
    args = "(x, w, y, rows, cols, eps);"
    specs = [
        ("thread_per_row", ["thread_per_row", "strided", "block_128"], _RMS_THREAD,
         f"    rms_thread_row<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>{args}"),
        ("block_per_row_tree", ["block_per_row", "tree_reduction", "shared_tiling", "coalesced", "block_256"],
         _RMS_BLOCK, "    rms_block_row<256><<<(unsigned)rows, 256, 0, stream>>>(x, w, y, cols, eps);"),
        ("warp_per_row", ["block_per_row", "warp_shuffle", "coalesced", "block_256"], _RMS_WARP,
         f"    rms_warp_row<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>{args}"),
        ("block_vec4", ["block_per_row", "vectorized", "warp_shuffle", "two_level", "block_128"], _RMS_VEC4,
         "    rms_block_vec4<<<(unsigned)rows, 128, 0, stream>>>(x, w, y, cols, eps);"),
        ("stats_then_scale", ["multi_pass", "warp_shuffle", "coalesced", "block_256"], _RMS_TWO_KERNELS,
         _RMS_TWO_KERNELS_LAUNCH),
        ("four_rows_per_block", ["block_per_row", "shared_tiling", "warp_shuffle", "two_level", "block_256"],
         _RMS_ROWS, _RMS_ROWS_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), _WARP_SUM + kernel + _RMS_ENTRY.format(eps=repr(eps), launch=launch))
            for name, tags, kernel, launch in specs]


_RMS_COLS = [256, 384, 510, 512, 768, 1022, 1024, 1536, 2048, 3070, 4096]  # 510, 1022, 3070: not float4 rows
_RMS_SHAPES = {
    "2d": [(r, 0, c) for r, c in itertools.product([1024, 2048, 4096, 8192, 16384], _RMS_COLS)
           if 2**20 <= r * c <= 2**24],
    "3d": [(b, s, c) for b, s, c in itertools.product([2, 4, 8, 16, 32], [64, 128, 200, 256, 512, 1000], _RMS_COLS)
           if 2**20 <= b * s * c <= 2**24],
}


def rms_norm(index: int) -> GeneratedTorchTask:
    rng = rng_for("rms_norm", index)
    layout = str(rng.choice(["2d", "3d"]))
    b, seq, cols = shuffled(f"rms_norm:{layout}", _RMS_SHAPES[layout])[index % len(_RMS_SHAPES[layout])]
    eps = float(rng.choice([1e-8, 1e-6, 1e-5]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shift = round(float(rng.uniform(-0.5, 0.5)), 3)
    init_seed = int(rng.integers(1, 2**31 - 1))
    shape = f"batch_size, {seq}, {cols}" if layout == "3d" else f"batch_size, {cols}"
    source = problem_source(
        f"y = x * rsqrt(mean(x^2 over the last dim) + {eps!r}) * weight (RMSNorm over {cols} features) on a "
        f"({shape}) input, with a weight drawn at init.",
        f"x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + {eps!r}) * self.weight",
        f"torch.randn({shape}) * {spread} + {shift}", batch_size=b,
        init_body=(f"gen = torch.Generator().manual_seed({init_seed})\n"
                   f"self.weight = nn.Parameter(torch.empty({cols}).uniform_(0.5, 1.5, generator=gen))"))
    tid = task_id("rms_norm", index)
    # see the module docstring: errors relative to each output, 1e-4 relative with a 1e-5 floor
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"RMS norm over {cols} features ({layout})",
                       tolerance=DtypeTolerance(fp32=(1e-5, 1e-4)))
    variants = _rms_variants(eps)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "rms_norm", index,
                              {"layout": layout, "batch": b, "seq": seq, "cols": cols, "eps": eps, "spread": spread,
                               "shift": shift, "init_seed": init_seed}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# l2_normalize_rows: y = F.normalize(x, p=2, dim=-1, eps) [* scale]

_L2_HEAD = """constexpr float SCALE = {scale}f;
constexpr float EPS = {eps}f;

/* the factor that multiplies a row whose sum of squares is ss: scale / max(||x||, eps) */
__device__ __forceinline__ float row_factor(float ss) {{
    return SCALE / fmaxf(sqrtf(ss), EPS);
}}
"""
_L2_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 1 || n_out != 1 || in[0].ndim != 2 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    if (out[0].numel != in[0].numel) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    if (rows == 0 || cols == 0) return 0;
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_L2_THREAD = """
/* one thread per row: a sequential sum of squares, then a second pass scales the row */
__global__ void l2_thread_row(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = 0; c < cols; ++c) s = fmaf(xr[c], xr[c], s);
    const float f = row_factor(s);
    for (long long c = 0; c < cols; ++c) yr[c] = xr[c] * f;
}
"""
_L2_WARP = """
/* one warp per row, 8 per block: lanes stride over the row, xor shuffles sum the squares */
__global__ void l2_warp_row(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32) s = fmaf(xr[c], xr[c], s);
    const float f = row_factor(warp_sum(s));
    for (long long c = lane; c < cols; c += 32) yr[c] = xr[c] * f;
}
"""
_L2_SUBWARP = """
constexpr int LPR = 8;  /* lanes per row: four rows per warp */

/* eight lanes per row: each group of 8 consecutive lanes strides over its row and sums with xor shuffles of
   distance 4, 2, 1 (which stay inside the group); lanes past the last row take part in the shuffles with zeros */
__global__ void l2_subwarp_row(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    const long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / LPR;
    const int sub = threadIdx.x % LPR;
    const bool active = r < rows;
    const float* xr = x + r * cols;
    float s = 0.f;
    if (active)
        for (long long c = sub; c < cols; c += LPR) s = fmaf(xr[c], xr[c], s);
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (active) {
        const float f = row_factor(s);
        float* yr = y + r * cols;
        for (long long c = sub; c < cols; c += LPR) yr[c] = xr[c] * f;
    }
}
"""
_L2_BLOCK = BLOCK_SUM + """
/* one block per row: strided partial sums of squares, a shared-memory tree, then the block scales the row */
template <int B>
__global__ void l2_block_row(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ float sh[B];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) s = fmaf(xr[c], xr[c], s);
    const float f = row_factor(block_sum<B>(s, sh));
    for (long long c = threadIdx.x; c < cols; c += B) yr[c] = xr[c] * f;
}
"""
_L2_VEC4 = """
/* one block of 256 per row reading float4 when the rows are whole float4s and the pointers 16-byte aligned;
   otherwise the scalar loops */
__global__ void __launch_bounds__(256) l2_block_vec4(const float* __restrict__ x, float* __restrict__ y,
                                                     long long cols) {
    __shared__ float part[8];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    const bool vec = cols % 4 == 0 && (bits & 15) == 0;
    const long long nq = cols / 4;
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float s = 0.f;
    if (vec) {
        for (long long q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            s += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 256) s = fmaf(xr[c], xr[c], s);
    }
    const float f = row_factor(block_sum_warps<8>(s, part));
    if (vec) {
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            y4[q] = make_float4(v.x * f, v.y * f, v.z * f, v.w * f);
        }
    } else {
        for (long long c = threadIdx.x; c < cols; c += 256) yr[c] = xr[c] * f;
    }
}
"""
_L2_ONE_READ = """
/* one block of 512 per row reading the row from global memory once: it is kept in shared memory while the squares
   are summed (shuffles, then the 16 warps' partials), and scaled from there */
__global__ void __launch_bounds__(512) l2_block_one_read(const float* __restrict__ x, float* __restrict__ y,
                                                         long long cols) {
    extern __shared__ float xs[];  /* cols floats */
    __shared__ float part[16];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.f;
    for (long long c = threadIdx.x; c < cols; c += 512) {
        const float v = xr[c];
        xs[c] = v;
        s = fmaf(v, v, s);
    }
    const float f = row_factor(block_sum_warps<16>(s, part));  /* its barriers order the xs writes and reads */
    for (long long c = threadIdx.x; c < cols; c += 512) yr[c] = xs[c] * f;
}
"""
_L2_ONE_READ_LAUNCH = """    const size_t smem = (size_t)cols * sizeof(float);
    if (smem > 200 * 1024) return 3;
    if (smem > 48 * 1024 && cudaFuncSetAttribute(l2_block_one_read, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    l2_block_one_read<<<(unsigned)rows, 512, smem, stream>>>(x, y, cols);"""
_L2_SPLIT = """
constexpr int CHUNK = 2048;  /* columns per block of pass 1: 8 per thread */

/* pass 1: grid (rows, chunks); each block sums the squares of its chunk of a row and adds them to the row's total
   atomically */
__global__ void __launch_bounds__(256) l2_partial(const float* __restrict__ x, float* __restrict__ ss,
                                                  long long cols) {
    __shared__ float part[8];
    const long long r = blockIdx.x;
    const float* xr = x + r * cols;
    const long long c0 = (long long)blockIdx.y * CHUNK;
    const long long c1 = c0 + CHUNK < cols ? c0 + CHUNK : cols;
    float s = 0.f;
    for (long long c = c0 + threadIdx.x; c < c1; c += 256) s = fmaf(xr[c], xr[c], s);
    s = block_sum_warps<8>(s, part);
    if (threadIdx.x == 0) atomicAdd(&ss[r], s);
}

/* pass 2: a grid-stride loop over the elements */
__global__ void l2_scale(const float* __restrict__ x, const float* __restrict__ ss, float* __restrict__ y,
                         long long n, long long cols) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = x[i] * row_factor(ss[i / cols]);
}
"""
_L2_SPLIT_LAUNCH = """    float* ss = 0;
    if (cudaMallocAsync((void**)&ss, (size_t)rows * sizeof(float), stream) != cudaSuccess) return 3;
    if (cudaMemsetAsync(ss, 0, (size_t)rows * sizeof(float), stream) != cudaSuccess) {
        cudaFreeAsync(ss, stream);
        return 3;
    }
    const long long n = rows * cols;
    const long long blocks = (n + 255) / 256;
    l2_partial<<<dim3((unsigned)rows, (unsigned)((cols + CHUNK - 1) / CHUNK)), 256, 0, stream>>>(x, ss, cols);
    l2_scale<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(x, ss, y, n, cols);
    if (cudaFreeAsync(ss, stream) != cudaSuccess) return 3;"""


def _l2_variants(eps: float, scale: float) -> list[TorchVariant]:
    head = _WARP_SUM + _L2_HEAD.format(scale=repr(scale), eps=repr(eps))
    specs = [
        ("thread_per_row", ["thread_per_row", "strided", "block_128"], _L2_THREAD,
         "    l2_thread_row<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, y, rows, cols);"),
        ("warp_per_row", ["block_per_row", "warp_shuffle", "coalesced", "block_256"], _L2_WARP,
         "    l2_warp_row<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, cols);"),
        ("eight_lanes_per_row", ["block_per_row", "warp_shuffle", "unrolled", "block_128"], _L2_SUBWARP,
         "    l2_subwarp_row<<<(unsigned)((rows + 15) / 16), 128, 0, stream>>>(x, y, rows, cols);"),
        ("block_per_row_tree", ["block_per_row", "tree_reduction", "shared_tiling", "coalesced", "block_512"],
         _L2_BLOCK, "    l2_block_row<512><<<(unsigned)rows, 512, 0, stream>>>(x, y, cols);"),
        ("block_vec4", ["block_per_row", "vectorized", "warp_shuffle", "two_level", "block_256"], _L2_VEC4,
         "    l2_block_vec4<<<(unsigned)rows, 256, 0, stream>>>(x, y, cols);"),
        ("block_one_read", ["block_per_row", "shared_tiling", "warp_shuffle", "two_level", "block_512"], _L2_ONE_READ,
         _L2_ONE_READ_LAUNCH),
        ("split_rows_atomics", ["atomics", "multi_pass", "two_level", "grid_stride", "warp_shuffle", "block_256"],
         _L2_SPLIT, _L2_SPLIT_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _L2_ENTRY % launch) for name, tags, kernel, launch in specs]


_L2_SHAPES = [(r, c) for r, c in itertools.product([256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
                                                   [64, 99, 128, 256, 301, 512, 768, 1001, 1024, 2048, 4096, 8192,
                                                    16384])
              if 2**20 <= r * c <= 2**24]


def l2_normalize_rows(index: int) -> GeneratedTorchTask:
    rng = rng_for("l2_normalize_rows", index)
    rows, cols = shuffled("l2_normalize_rows", _L2_SHAPES)[index % len(_L2_SHAPES)]
    eps = float(rng.choice([1e-12, 1e-8, 1e-6]))
    scale = 1.0 if rng.random() < 0.5 else round(float(rng.uniform(2.0, 20.0)), 3)
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shift = round(float(rng.uniform(-0.5, 0.5)), 3)
    expr = f"torch.nn.functional.normalize(x, p=2.0, dim=-1, eps={eps!r})"
    if scale != 1.0:
        expr += f" * {scale!r}"
    source = problem_source(
        f"y = F.normalize(x, p=2, dim=-1, eps={eps!r}){f' * {scale!r}' if scale != 1.0 else ''}: each row of a "
        f"(batch_size, {cols}) input divided by its L2 norm (at least eps){' then scaled' if scale != 1.0 else ''}.",
        expr, f"torch.randn(batch_size, {cols}) * {spread} + {shift}", batch_size=rows)
    tid = task_id("l2_normalize_rows", index)
    # see the module docstring: errors relative to each output, 1e-4 relative with a 1e-5 floor
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"L2-normalise rows of {cols}" + (f", scale {scale}" if scale != 1.0 else ""),
                       tolerance=DtypeTolerance(fp32=(1e-5, 1e-4)))
    variants = _l2_variants(eps, scale)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "l2_normalize_rows", index,
                              {"rows": rows, "cols": cols, "eps": eps, "scale": scale, "spread": spread,
                               "shift": shift}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# batch_norm_eval: F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps) [then act]

_BN_HEAD = """__device__ __forceinline__ float act(float v) {{
    return {act};
}}

/* one output from the channel's constants: act((x - mean) * a + bias), a = weight / sqrt(running_var + eps) */
__device__ __forceinline__ float bn_one(float v, float mean, float a, float bias) {{
    return act((v - mean) * a + bias);
}}
"""
_BN_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    /* x, then bn.weight, bn.bias (parameters), bn.running_mean, bn.running_var, bn.num_batches_tracked (buffers) */
    if (n_in != 6 || n_out != 1 || in[0].ndim != 4 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32)
        return 1;
    const long long Nb = in[0].shape[0], C = in[0].shape[1], HW = in[0].shape[2] * in[0].shape[3];
    if (in[1].numel != C || in[2].numel != C || in[3].numel != C || in[4].numel != C) return 1;
    if (out[0].numel != in[0].numel) return 1;
    const long long n = in[0].numel;
    if (n == 0) return 0;
    const float* x = (const float*)in[0].data;
    const float* w = (const float*)in[1].data;
    const float* bs = (const float*)in[2].data;
    const float* rm = (const float*)in[3].data;
    const float* rv = (const float*)in[4].data;
    float* y = (float*)out[0].data;
    const float eps = {eps}f;
    (void)Nb;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_BN_ARGS = ("(const float* __restrict__ x,\n"
            "        const float* __restrict__ w, const float* __restrict__ bs, const float* __restrict__ rm,\n"
            "        const float* __restrict__ rv, float* __restrict__ y")
_BN_NAIVE = """
/* one thread per element: the channel from the index, its constants read and computed again by every thread */
__global__ void bn_naive""" + _BN_ARGS + """, long long n, long long C, long long HW,
        float eps) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = (int)((i / HW) % C);
    y[i] = bn_one(x[i], rm[c], w[c] * rsqrtf(rv[c] + eps), bs[c]);
}
"""
_BN_GRID_STRIDE = """
/* a grid-stride loop with a grid of at most 2048 blocks of 512 */
__global__ void __launch_bounds__(512) bn_grid_stride""" + _BN_ARGS + """, long long n, long long C,
        long long HW, float eps) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int c = (int)((i / HW) % C);
        y[i] = bn_one(x[i], rm[c], w[c] * rsqrtf(rv[c] + eps), bs[c]);
    }
}
"""
_BN_GRID_STRIDE_LAUNCH = """    const long long blocks = (n + 511) / 512;
    bn_grid_stride<<<(unsigned)(blocks < 2048 ? blocks : 2048), 512, 0, stream>>>(x, w, bs, rm, rv, y, n, C, HW,
                                                                                 eps);"""
_BN_CONSTANT = """
constexpr int MAX_C = 4096;
static __constant__ float c_mean[MAX_C];
static __constant__ float c_a[MAX_C];
static __constant__ float c_bias[MAX_C];

/* pass 1: the channels' scale a = w / sqrt(var + eps) into scratch (mean and bias are copied as they are) */
__global__ void bn_channel_scale(const float* __restrict__ w, const float* __restrict__ rv, float* __restrict__ a,
                                 int C, float eps) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) a[c] = w[c] * rsqrtf(rv[c] + eps);
}

/* pass 2: one thread per element, the constants from constant memory (a warp reads one or two channels: broadcast) */
__global__ void bn_apply_constant(const float* __restrict__ x, float* __restrict__ y, long long n, long long C,
                                  long long HW) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int c = (int)((i / HW) % C);
    y[i] = bn_one(x[i], c_mean[c], c_a[c], c_bias[c]);
}
"""
_BN_CONSTANT_LAUNCH = """    if (C > MAX_C) return 3;
    float* a = 0;
    if (cudaMallocAsync((void**)&a, (size_t)C * sizeof(float), stream) != cudaSuccess) return 3;
    bn_channel_scale<<<(unsigned)((C + 255) / 256), 256, 0, stream>>>(w, rv, a, (int)C, eps);
    const size_t cb = (size_t)C * sizeof(float);
    if (cudaMemcpyToSymbolAsync(c_a, a, cb, 0, cudaMemcpyDeviceToDevice, stream) != cudaSuccess ||
        cudaMemcpyToSymbolAsync(c_mean, rm, cb, 0, cudaMemcpyDeviceToDevice, stream) != cudaSuccess ||
        cudaMemcpyToSymbolAsync(c_bias, bs, cb, 0, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) {
        cudaFreeAsync(a, stream);
        return 3;
    }
    bn_apply_constant<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n, C, HW);
    if (cudaFreeAsync(a, stream) != cudaSuccess) return 3;"""
_BN_SHARED = """
/* every block first computes all channels' constants into shared memory (3 C floats), then a grid-stride loop */
__global__ void __launch_bounds__(256) bn_shared_consts""" + _BN_ARGS + """, long long n, int C,
        long long HW, float eps) {
    extern __shared__ float consts[];  /* mean[C], a[C], bias[C] */
    float* sm = consts;
    float* sa = consts + C;
    float* sb = consts + 2 * C;
    for (int c = threadIdx.x; c < C; c += 256) {
        sm[c] = rm[c];
        sa[c] = w[c] * rsqrtf(rv[c] + eps);
        sb[c] = bs[c];
    }
    __syncthreads();
    const long long stride = (long long)gridDim.x * 256;
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n; i += stride) {
        const int c = (int)((i / HW) % C);
        y[i] = bn_one(x[i], sm[c], sa[c], sb[c]);
    }
}
"""
_BN_SHARED_LAUNCH = """    const size_t smem = (size_t)3 * C * sizeof(float);
    if (smem > 48 * 1024) return 3;
    const long long blocks = (n + 255) / 256;
    bn_shared_consts<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, smem, stream>>>(x, w, bs, rm, rv, y, n, (int)C,
                                                                                    HW, eps);"""
_BN_PLANE = """
/* one block of 128 per (n, c) plane: the channel's constants once per thread, then the plane's HW floats */
__global__ void __launch_bounds__(128) bn_plane_block""" + _BN_ARGS + """, long long C, long long HW,
        float eps) {
    const long long p = blockIdx.x;  /* n * C + c */
    const int c = (int)(p % C);
    const float mean = rm[c], a = w[c] * rsqrtf(rv[c] + eps), b = bs[c];
    const float* xp = x + p * HW;
    float* yp = y + p * HW;
    for (long long e = threadIdx.x; e < HW; e += 128) yp[e] = bn_one(xp[e], mean, a, b);
}
"""
_BN_VEC4 = """
/* four consecutive elements per thread, as a float4 when x and y are 16-byte aligned (a float4 may straddle two
   planes when HW is odd: each element takes its own channel); the last partial quad element by element */
__global__ void bn_vec4""" + _BN_ARGS + """, long long n, long long C, long long HW, float eps) {
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long e0 = 4 * q;
    if (e0 >= n) return;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    if ((bits & 15) == 0 && e0 + 3 < n) {
        const float4 v = reinterpret_cast<const float4*>(x)[q];
        float r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int c = (int)(((e0 + k) / HW) % C);
            r[k] = bn_one(r[k], rm[c], w[c] * rsqrtf(rv[c] + eps), bs[c]);
        }
        reinterpret_cast<float4*>(y)[q] = make_float4(r[0], r[1], r[2], r[3]);
    } else {
        for (long long e = e0; e < e0 + 4 && e < n; ++e) {
            const int c = (int)((e / HW) % C);
            y[e] = bn_one(x[e], rm[c], w[c] * rsqrtf(rv[c] + eps), bs[c]);
        }
    }
}
"""
_BN_CHUNKS = """
constexpr int PER = 4;  /* elements per thread: a block of 256 covers 1024 of a plane */

/* a 2-D grid: blockIdx.x the (n, c) plane, blockIdx.y a chunk of 1024 of its elements; each thread loads its four
   elements (256 apart, coalesced) into registers before computing them */
__global__ void __launch_bounds__(256) bn_plane_chunks""" + _BN_ARGS + """, long long C, long long HW,
        float eps) {
    const long long p = blockIdx.x;
    const int c = (int)(p % C);
    const float mean = rm[c], a = w[c] * rsqrtf(rv[c] + eps), b = bs[c];
    const float* xp = x + p * HW;
    float* yp = y + p * HW;
    const long long e0 = (long long)blockIdx.y * (256 * PER) + threadIdx.x;
    float v[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) v[k] = e0 + 256 * k < HW ? xp[e0 + 256 * k] : 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k)
        if (e0 + 256 * k < HW) yp[e0 + 256 * k] = bn_one(v[k], mean, a, b);
}
"""
_BN_CHUNKS_LAUNCH = """    const long long chunks = (HW + 256 * PER - 1) / (256 * PER);
    if (chunks > 65535) return 3;
    bn_plane_chunks<<<dim3((unsigned)(Nb * C), (unsigned)chunks), 256, 0, stream>>>(x, w, bs, rm, rv, y, C, HW, eps);"""


def _bn_variants(eps: float, act: str | None) -> list[TorchVariant]:
    head = _BN_HEAD.format(act=ACTIVATIONS[act][1].format(v="v") if act else "v")
    args = "(x, w, bs, rm, rv, y, n, C, HW, eps);"
    specs = [
        ("thread_per_element", ["naive", "coalesced", "block_256"], _BN_NAIVE,
         f"    bn_naive<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>{args}"),
        ("grid_stride", ["grid_stride", "coalesced", "block_512"], _BN_GRID_STRIDE, _BN_GRID_STRIDE_LAUNCH),
        ("constants_in_constant_memory", ["constant_memory", "multi_pass", "coalesced", "block_256"], _BN_CONSTANT,
         _BN_CONSTANT_LAUNCH),
        ("constants_in_shared_memory", ["shared_tiling", "grid_stride", "coalesced", "block_256"], _BN_SHARED,
         _BN_SHARED_LAUNCH),
        ("block_per_plane", ["block_per_row", "coalesced", "block_128"], _BN_PLANE,
         "    bn_plane_block<<<(unsigned)(Nb * C), 128, 0, stream>>>(x, w, bs, rm, rv, y, C, HW, eps);"),
        ("vec4_elements", ["vectorized", "coalesced", "block_256"], _BN_VEC4,
         f"    bn_vec4<<<(unsigned)((n + 1023) / 1024), 256, 0, stream>>>{args}"),
        ("plane_chunks_unrolled", ["unrolled", "register_blocking", "coalesced", "block_256"], _BN_CHUNKS,
         _BN_CHUNKS_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _BN_ENTRY.format(eps=repr(eps), launch=launch))
            for name, tags, kernel, launch in specs]


_BN_SHAPES = [(n, c, s) for n, c, s in itertools.product([2, 4, 8, 16, 32, 64], [16, 32, 48, 64, 96, 128, 256, 512],
                                                         [7, 14, 15, 28, 31, 56, 64, 112])
              if 2**20 <= n * c * s * s <= 2**24]
_BN_ACTS = [None, "relu", "sigmoid", "tanh", "silu", "gelu", "softplus", "abs"]


def batch_norm_eval(index: int) -> GeneratedTorchTask:
    rng = rng_for("batch_norm_eval", index)
    n, c, s = shuffled("batch_norm_eval", _BN_SHAPES)[index % len(_BN_SHAPES)]
    eps = float(rng.choice([1e-5, 1e-3, 1e-4]))
    act = None if rng.random() < 0.35 else str(rng.choice(_BN_ACTS[1:]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shift = round(float(rng.uniform(-1.0, 1.0)), 3)
    init_seed = int(rng.integers(1, 2**31 - 1))
    bn = ("torch.nn.functional.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, "
          "self.bn.bias, training=False, eps=self.bn.eps)")
    expr = ACTIVATIONS[act][0].format(v=bn) if act else bn
    var_lo, var_hi = round(0.5 * spread**2, 4), round(1.5 * spread**2, 4)
    source = problem_source(
        f"y = {act + '(' if act else ''}BatchNorm2d({c}, eps={eps!r}) in eval mode (the running statistics)"
        f"{')' if act else ''} over a (batch_size, {c}, {s}, {s}) input; the weight, bias, running mean and running "
        "variance are drawn at init.", expr, f"torch.randn(batch_size, {c}, {s}, {s}) * {spread} + {shift}",
        batch_size=n,
        init_body=(f"self.bn = nn.BatchNorm2d({c}, eps={eps!r})\n"
                   f"gen = torch.Generator().manual_seed({init_seed})\n"
                   "with torch.no_grad():\n"
                   "    self.bn.weight.uniform_(0.5, 1.5, generator=gen)\n"
                   "    self.bn.bias.uniform_(-0.5, 0.5, generator=gen)\n"
                   f"    self.bn.running_mean.uniform_({shift - 0.5:.3f}, {shift + 0.5:.3f}, generator=gen)\n"
                   f"    self.bn.running_var.uniform_({var_lo}, {var_hi}, generator=gen)"))
    tid = task_id("batch_norm_eval", index)
    # see the module docstring: element-wise, a few ulps from PyTorch at outputs of order 1
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"batch norm (eval) over {c} channels of {s}x{s}" + (f", then {act}" if act else ""),
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _bn_variants(eps, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "batch_norm_eval", index,
                              {"batch": n, "channels": c, "size": s, "eps": eps, "act": act, "spread": spread,
                               "shift": shift, "init_seed": init_seed}, tuple(variants))
