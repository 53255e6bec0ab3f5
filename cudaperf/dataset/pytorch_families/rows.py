"""``row_reduce`` and ``row_softmax``: one reduction or a softmax per row of a 2-D input."""

from __future__ import annotations

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask

# reducer: (torch expression over the row-wise mapped tensor m, CUDA element map of v, final scale of the sum)
REDUCERS = {
    "sum": ("torch.sum({m}, dim=1)", "{v}", "1.f"),
    "mean": ("torch.mean({m}, dim=1)", "{v}", "(1.f / (float)cols)"),
    "sumsq": ("torch.sum(({m}) ** 2, dim=1)", "({v}) * ({v})", "1.f"),
}

_ROW_HEAD = """__device__ __forceinline__ float elem(float v) {{
    return {elem};
}}
"""
_ROW_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1 || in[0].ndim != 2) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
    const float scale = {scale};
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

_THREAD_PER_ROW = """
__global__ void row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                           float scale) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.f;
    for (long long c = 0; c < cols; ++c) acc += elem(x[r * cols + c]);
    y[r] = acc * scale;
}
"""
_TREE = """
template <int B>
__global__ void row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                           float scale) {
    __shared__ float part[B];
    long long r = blockIdx.x;
    float acc = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) acc += elem(x[r * cols + c]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[r] = part[0] * scale;
}
"""
_WARP_PER_ROW = """
__global__ void row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                           float scale) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    float acc = 0.f;
    for (long long c = lane; c < cols; c += 32) acc += elem(x[r * cols + c]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = acc * scale;
}
"""
_TWO_LEVEL = """
__global__ void row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                           float scale) {
    __shared__ float warps[8];
    long long r = blockIdx.x;
    float acc = 0.f;
    for (long long c = threadIdx.x; c < cols; c += 256) acc += elem(x[r * cols + c]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < 8 ? warps[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) y[r] = acc * scale;
    }
}
"""
_ATOMICS = """
__global__ void zero_kernel(float* y, long long rows) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) y[r] = 0.f;
}

__global__ void row_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                           float scale) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) atomicAdd(&y[i / cols], elem(x[i]) * scale);
}
"""


def _row_variants(elem: str, scale: str) -> list[TorchVariant]:
    head = _ROW_HEAD.format(elem=elem)
    specs = [
        ("thread_per_row", ["thread_per_row", "block_128"], _THREAD_PER_ROW,
         "    row_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, y, rows, cols, scale);"),
        ("block_per_row_b256", ["block_per_row", "tree_reduction", "shared_tiling", "block_256"], _TREE,
         "    row_kernel<256><<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols, scale);"),
        ("block_per_row_b1024", ["block_per_row", "tree_reduction", "shared_tiling", "block_1024"], _TREE,
         "    row_kernel<1024><<<(unsigned)rows, 1024, 0, stream>>>(x, y, rows, cols, scale);"),
        ("warp_per_row", ["warp_shuffle", "coalesced", "block_256"], _WARP_PER_ROW,
         "    row_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, cols, scale);"),
        ("two_level", ["two_level", "warp_shuffle", "block_per_row", "block_256"], _TWO_LEVEL,
         "    row_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols, scale);"),
        ("atomics", ["atomics", "coalesced", "block_256", "multi_pass"], _ATOMICS,
         "    zero_kernel<<<(unsigned)((rows + 255) / 256), 256, 0, stream>>>(y, rows);\n"
         "    row_kernel<<<(unsigned)((rows * cols + 255) / 256), 256, 0, stream>>>(x, y, rows, cols, scale);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _ROW_ENTRY.format(scale=scale, launch=launch))
            for name, tags, kernel, launch in specs]


def row_reduce(index: int) -> GeneratedTorchTask:
    rng = rng_for("row_reduce", index)
    rows = int(rng.choice([1000, 2048, 4096, 8191]))
    cols = int(rng.choice([513, 1024, 2049, 4096]))
    reducer = str(rng.choice(sorted(REDUCERS)))
    act = str(rng.choice(sorted(ACTIVATIONS)))
    scale_in = round(float(rng.uniform(0.5, 2.0)), 3)
    m_t = ACTIVATIONS[act][0].format(v=f"x * {scale_in}")
    m_c = ACTIVATIONS[act][1].format(v=f"v * {scale_in}f")
    t_expr = REDUCERS[reducer][0].format(m=m_t)
    doc = t_expr.replace("torch.nn.functional.", "F.")
    source = problem_source(f"y = {doc} over a (batch_size, {cols}) input: one value per row.", t_expr,
                            f"torch.randn(batch_size, {cols})", batch_size=rows)
    tid = task_id("row_reduce", index)
    # Sums of thousands of floats in another order (trees, shuffles, atomics) differ from the reference's in the
    # last bits of every partial sum: an absolute term of 1e-2 and a relative one of 1e-3, as KernelBench allows.
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>", description=f"row {reducer} of {act}",
                       tolerance=DtypeTolerance(fp32=(1e-2, 1e-3)))
    variants = _row_variants(REDUCERS[reducer][1].format(v=m_c), REDUCERS[reducer][2])
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "row_reduce", index, {"rows": rows, "cols": cols, "reducer": reducer,
                                                          "act": act, "scale": scale_in}, tuple(variants))


_SOFTMAX_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1 || in[0].ndim != 2) return 1;
    const long long rows = in[0].shape[0], cols = in[0].shape[1];
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
    const float t = {inv_temp}f;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""

_SM_THREAD = """
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                               float t) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float m = -INFINITY, s = 0.f;
    for (long long c = 0; c < cols; ++c) m = fmaxf(m, xr[c] * t);
    for (long long c = 0; c < cols; ++c) s += expf(xr[c] * t - m);
    for (long long c = 0; c < cols; ++c) y[r * cols + c] = expf(xr[c] * t - m) / s;
}
"""
_SM_BLOCK = """
template <int B>
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                               float t) {
    __shared__ float red[B];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += B) m = fmaxf(m, xr[c] * t);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (long long c = threadIdx.x; c < cols; c += B) sum += expf(xr[c] * t - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    sum = red[0];
    for (long long c = threadIdx.x; c < cols; c += B) yr[c] = expf(xr[c] * t - m) / sum;
}
"""
_SM_WARP = """
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols,
                               float t) {
    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    float m = -INFINITY, s = 0.f;  /* online softmax: running max and rescaled sum in one pass */
    for (long long c = lane; c < cols; c += 32) {
        float v = xr[c] * t;
        float nm = fmaxf(m, v);
        s = s * expf(m - nm) + expf(v - nm);
        m = nm;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_down_sync(0xffffffffu, m, o), os = __shfl_down_sync(0xffffffffu, s, o);
        float nm = fmaxf(m, om);
        s = s * expf(m - nm) + os * expf(om - nm);
        m = nm;
    }
    m = __shfl_sync(0xffffffffu, m, 0);
    s = __shfl_sync(0xffffffffu, s, 0);
    for (long long c = lane; c < cols; c += 32) y[r * cols + c] = expf(xr[c] * t - m) / s;
}
"""
_SM_MULTI = """
__global__ void row_max(const float* __restrict__ x, float* __restrict__ mx, long long rows, long long cols, float t) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float m = -INFINITY;
    for (long long c = 0; c < cols; ++c) m = fmaxf(m, x[r * cols + c] * t);
    mx[r] = m;
}

__global__ void exp_kernel(const float* __restrict__ x, const float* __restrict__ mx, float* __restrict__ y,
                           long long rows, long long cols, float t) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] = expf(x[i] * t - mx[i / cols]);
}

__global__ void row_sum(const float* __restrict__ y, float* __restrict__ sm, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.f;
    for (long long c = 0; c < cols; ++c) s += y[r * cols + c];
    sm[r] = s;
}

__global__ void divide_kernel(float* __restrict__ y, const float* __restrict__ sm, long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] /= sm[i / cols];
}
"""
_SM_MULTI_LAUNCH = """    float *mx = 0, *sm = 0;
    if (cudaMalloc(&mx, rows * sizeof(float)) != cudaSuccess || cudaMalloc(&sm, rows * sizeof(float)) != cudaSuccess)
        return 3;
    long long n = rows * cols;
    row_max<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, mx, rows, cols, t);
    exp_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, mx, y, rows, cols, t);
    row_sum<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(y, sm, rows, cols);
    divide_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, sm, rows, cols);
    cudaStreamSynchronize(stream);
    cudaFree(mx);
    cudaFree(sm);"""


def _softmax_variants(inv_temp: float) -> list[TorchVariant]:
    specs = [
        ("thread_per_row", ["thread_per_row", "multi_pass", "block_128"], _SM_THREAD,
         "    softmax_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, y, rows, cols, t);"),
        ("block_per_row_b256", ["block_per_row", "tree_reduction", "shared_tiling", "block_256"], _SM_BLOCK,
         "    softmax_kernel<256><<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols, t);"),
        ("block_per_row_b1024", ["block_per_row", "tree_reduction", "shared_tiling", "block_1024"], _SM_BLOCK,
         "    softmax_kernel<1024><<<(unsigned)rows, 1024, 0, stream>>>(x, y, rows, cols, t);"),
        ("block_per_row_b64", ["block_per_row", "tree_reduction", "shared_tiling", "block_64"], _SM_BLOCK,
         "    softmax_kernel<64><<<(unsigned)rows, 64, 0, stream>>>(x, y, rows, cols, t);"),
        ("warp_online", ["warp_shuffle", "fused", "coalesced", "block_256"], _SM_WARP,
         "    softmax_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, cols, t);"),
        ("separate_kernels", ["many_launches", "multi_pass", "block_256"], _SM_MULTI, _SM_MULTI_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), kernel + _SOFTMAX_ENTRY.format(inv_temp=inv_temp, launch=launch))
            for name, tags, kernel, launch in specs]


def row_softmax(index: int) -> GeneratedTorchTask:
    rng = rng_for("row_softmax", index)
    rows = int(rng.choice([1024, 2048, 4096, 8191]))
    cols = int(rng.choice([97, 512, 1000, 2049, 4096]))
    inv_temp = round(float(rng.uniform(0.5, 3.0)), 3)
    spread = round(float(rng.uniform(0.5, 4.0)), 3)
    source = problem_source(f"y = softmax(x * {inv_temp}, dim=1) over a (batch_size, {cols}) input.",
                            f"torch.softmax(x * {inv_temp}, dim=1)", f"torch.randn(batch_size, {cols}) * {spread}",
                            batch_size=rows)
    tid = task_id("row_softmax", index)
    # probabilities are at most 1: an absolute term of 1e-6 with the usual relative one
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>", description="row softmax",
                       tolerance=DtypeTolerance(fp32=(1e-6, 1e-4)))
    variants = _softmax_variants(inv_temp)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "row_softmax", index, {"rows": rows, "cols": cols, "inv_temp": inv_temp,
                                                           "spread": spread}, tuple(variants))


