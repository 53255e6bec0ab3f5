"""``cross_entropy_loss``, ``masked_softmax`` and ``embedding_bag_mean``: a loss over class logits, a softmax under a
mask, and a gather-reduce over an embedding table; integer and boolean inputs beside the floats.

``cross_entropy_loss``: ``F.cross_entropy(logits, target, reduction=...)`` over (N, C) logits and int64 targets
drawn in range, with the reduction ``'mean'`` (a scalar) or ``'none'`` (N losses). The index picks N (the batch), C
(10 to 32768, some not multiples of 4 or 32), the reduction and the logits' spread. Variants: a thread per row in
three passes (max, sum of exponentials, the target's logit), a warp per row with an online (one-pass) max and sum,
a block per row with shared-memory trees, two kernels (a block per row's log-sum-exp, then a gather of the target's
logit), a block per row with float4 loads, and a warp per row in two passes; under ``'mean'`` the losses are
averaged by a second kernel (one block's tree over the row losses) or by atomics (one double atomic add per block
or row, then a one-thread kernel divides: float atomics, up to 131072 of them, would each round the total). A row's
loss is ``log(sum exp(x - max)) + max - x[t]``, of order log(C) + spread (at most ~30). Its sum of up to 32768
exponentials is the delicate part: in a sequential thread's order, most of the terms (the logits' spread reaches 4)
are below half an ulp of the running sum and are rounded away, a bias; a float32 simulation of that order over rows
of 32768 classes at spread 4 is up to 9e-5 off a float64 loss (2.5e-4 of the loss), 5e-5 on average; the strided
and tree orders, with sums of C/32 to C/1024 terms per thread, much less. 1e-4 absolute and relative for ``'none'``
(a third of it at worst); for ``'mean'`` 1e-5 absolute and relative (the bias above, averaged, is a quarter of it
at worst; the mean's own sum of up to 131072 losses a few 1e-7 relative), tight enough that two draws of the inputs
are told apart (the mean of many random losses varies little).

``masked_softmax``: ``softmax((x * s).masked_fill(mask == 0, -inf), dim=-1)`` over (B, L) with a bool or uint8
mask of the same shape, random (each element kept with probability p) or a padding mask (the first ``len`` of each
row kept); every row keeps at least one element (a random mask forces a random column on), so no row is all
``-inf``. The index picks B, L (100 to 8192), the mask kind and dtype, p, s (1 for about half the problems) and the
spread. Variants: a thread per row in three passes, a warp per row with an online max and sum, a block per row in
three passes with shared-memory trees, a block of 1024 per row with an online max and sum merged by shuffles, a
block per row with float4 loads of x and 4-byte loads of the mask, and a block per row staging the masked row in
shared memory (one read of global memory). Probabilities are at most 1; sums of at most 8192 exponentials in
another order: ``row_softmax``'s 1e-6 absolute and 1e-4 relative. Masked elements are exactly 0 in every variant.

``embedding_bag_mean``: ``nn.EmbeddingBag(V, D, mode=...)`` over fixed-length bags (an int64 (B, L) index tensor
drawn in range), mode ``'mean'`` or ``'sum'``, with the table drawn at init from a seeded generator. The index picks
B, L (4 to 50), V (1000 to 250000), D (32 to 512, some not multiples of 4 or 32), the mode and the table's spread.
Variants: a thread per output element, a warp per bag with float4 loads over D, a block of 64 per bag, a block per
eight bags with their indices staged in shared memory, atomics from a thread per (bag, position), and a warp per
bag whose lanes load the indices together and broadcast them with shuffles (the bag's row of D outputs in
registers). Outputs are of order the spread; sums of at most 50 terms, in another order under atomics: a few ulps.
1e-4 absolute and relative (an index off by one is off by order 1).
"""

from __future__ import annotations

import itertools

from cudaperf.dataset.pytorch_families.common import (BLOCK_SUM, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


_WARP_HELPERS = """
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  /* every lane holds the sum */
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* (m, s): a running max and the sum of exp(v - m) over the values seen; merge (mb, sb) into it */
__device__ __forceinline__ void lse_merge(float& m, float& s, float mb, float sb) {
    const float mn = fmaxf(m, mb);
    if (mn == -INFINITY) return;  /* both empty */
    s = s * expf(m - mn) + sb * expf(mb - mn);
    m = mn;
}
/* one value into (m, s) */
__device__ __forceinline__ void lse_add(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.f;  /* the first finite value: s = 0 * 0 + 1 */
        m = v;
    } else if (v > -INFINITY) {  /* -inf adds nothing (and -inf - -inf would be NaN) */
        s += expf(v - m);
    }
}
/* the warp's (m, s), in every lane (xor merges are symmetric: all lanes end with the same pair) */
__device__ __forceinline__ void warp_lse(float& m, float& s) {
    for (int o = 16; o > 0; o >>= 1) {
        const float mb = __shfl_xor_sync(0xffffffffu, m, o), sb = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, mb, sb);
    }
}
/* the block's (m, s) in every thread: warps through shared memory (pm, ps of NW floats) */
template <int NW>
__device__ __forceinline__ void block_lse(float& m, float& s, float* pm, float* ps) {
    warp_lse(m, s);
    if (threadIdx.x % 32 == 0) {
        pm[threadIdx.x / 32] = m;
        ps[threadIdx.x / 32] = s;
    }
    __syncthreads();
    m = pm[0];
    s = ps[0];
    for (int i = 1; i < NW; ++i) lse_merge(m, s, pm[i], ps[i]);
    __syncthreads();  /* pm, ps may be written again */
}
"""


# ---------------------------------------------------------------------------------------------------------------
# cross_entropy_loss: F.cross_entropy(logits (N, C), target (N,) int64, reduction 'mean' or 'none')

_CE_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 2 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 1) return 1;
    if (in[0].dtype != DT_FLOAT32 || in[1].dtype != DT_INT64 || out[0].dtype != DT_FLOAT32) return 1;
    const long long N = in[0].shape[0];
    const int C = (int)in[0].shape[1];
    if (in[1].numel != N || out[0].numel != {out_numel} || C <= 0) return 1;
    const float* x = (const float*)in[0].data;
    const long long* t = (const long long*)in[1].data;  /* class indices in [0, C) */
    float* y = (float*)out[0].data;
    if (N == 0) return 0;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""
_CE_MEAN_TREE = """
/* the mean of n row losses: one block of 1024, strided partial sums, then a shared-memory tree */
__global__ void __launch_bounds__(1024) mean_tree(const float* __restrict__ v, float* __restrict__ y, long long n) {
    __shared__ float sh[1024];
    float s = 0.f;
    for (long long i = threadIdx.x; i < n; i += 1024) s += v[i];
    const float tot = block_sum<1024>(s, sh);
    if (threadIdx.x == 0) y[0] = tot / (float)n;
}
"""
_CE_SCRATCH = """    float* loss = 0;  /* the row losses, averaged by mean_tree */
    if (cudaMallocAsync((void**)&loss, (size_t)N * sizeof(float), stream) != cudaSuccess) return 3;
{body}
    mean_tree<<<1, 1024, 0, stream>>>(loss, y, N);
    if (cudaFreeAsync(loss, stream) != cudaSuccess) return 3;"""
_CE_ATOMIC_MEAN = """
/* the atomics' double total over N, into the scalar output */
__global__ void mean_finish(const double* __restrict__ total, float* __restrict__ y, long long N) {
    y[0] = (float)(total[0] / (double)N);
}
"""
_CE_ATOMIC_LAUNCH = """    double* total = 0;  /* the losses' sum by atomics, in double */
    if (cudaMallocAsync((void**)&total, sizeof(double), stream) != cudaSuccess) return 3;
    if (cudaMemsetAsync(total, 0, sizeof(double), stream) != cudaSuccess) {{
        cudaFreeAsync(total, stream);
        return 3;
    }}
{body}
    mean_finish<<<1, 1, 0, stream>>>(total, y, N);
    if (cudaFreeAsync(total, stream) != cudaSuccess) return 3;"""

_CE_THREAD = """
/* a thread per row in three passes over its C logits: the max, the sum of exponentials, then the target's logit */
__global__ void ce_thread_row(const float* __restrict__ x, const long long* __restrict__ t, float* __restrict__ loss,
                              long long N, int C) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float* xr = x + r * C;
    float m = -INFINITY;
    for (int c = 0; c < C; ++c) m = fmaxf(m, xr[c]);
    float s = 0.f;
    for (int c = 0; c < C; ++c) s += expf(xr[c] - m);
    loss[r] = logf(s) + (m - xr[t[r]]);
}
"""
_CE_WARP_ONLINE = """
/* a warp per row, 8 per block: each lane keeps an online (max, sum) over its strided logits, the lanes merge with
   xor shuffles. MEAN: the block's 8 losses summed in shared memory, one atomic add per block into a double total */
template <bool MEAN>
__global__ void __launch_bounds__(256) ce_warp_online(const float* __restrict__ x, const long long* __restrict__ t,
                                                      float* __restrict__ y, double* total, long long N, int C) {
    __shared__ float part[8];
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    float l = 0.f;
    if (r < N) {  /* warp-uniform; no early return: MEAN has a barrier below */
        const float* xr = x + r * C;
        float m = -INFINITY, s = 0.f;
        for (int c = lane; c < C; c += 32) lse_add(m, s, xr[c]);
        warp_lse(m, s);
        l = logf(s) + (m - xr[t[r]]);
        if (!MEAN && lane == 0) y[r] = l;
    }
    if (MEAN) {
        if (lane == 0) part[threadIdx.x / 32] = l;
        __syncthreads();
        if (threadIdx.x == 0) {
            float b = 0.f;
            for (int w = 0; w < 8; ++w) b += part[w];
            atomicAdd(total, (double)b);
        }
    }
}
"""
_BLOCK_MAX = """
template <int B>
__device__ float block_max(float v, float* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}
"""
_CE_BLOCK_TREE = _BLOCK_MAX + """
/* a block of 256 per row: the max and the sum of exponentials through shared-memory trees */
__global__ void __launch_bounds__(256) ce_block_tree(const float* __restrict__ x, const long long* __restrict__ t,
                                                     float* __restrict__ loss, int C) {
    __shared__ float sh[256];
    const long long r = blockIdx.x;
    const float* xr = x + r * C;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < C; c += 256) m = fmaxf(m, xr[c]);
    m = block_max<256>(m, sh);
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += 256) s += expf(xr[c] - m);
    s = block_sum<256>(s, sh);
    if (threadIdx.x == 0) loss[r] = logf(s) + (m - xr[t[r]]);
}
"""
_CE_TWO_KERNELS = """
/* kernel 1: a block of 128 per row computes the row's log-sum-exp (online per thread, shuffles, 4 warps' pairs
   through shared memory) */
__global__ void __launch_bounds__(128) row_logsumexp(const float* __restrict__ x, float* __restrict__ lse, int C) {
    __shared__ float pm[4], ps[4];
    const float* xr = x + (long long)blockIdx.x * C;
    float m = -INFINITY, s = 0.f;
    for (int c = threadIdx.x; c < C; c += 128) lse_add(m, s, xr[c]);
    block_lse<4>(m, s, pm, ps);
    if (threadIdx.x == 0) lse[blockIdx.x] = m + logf(s);
}
"""
_CE_GATHER_NONE = """
/* kernel 2: a thread per row, the loss from the row's log-sum-exp and the target's logit */
__global__ void gather_loss(const float* __restrict__ x, const long long* __restrict__ t,
                            const float* __restrict__ lse, float* __restrict__ y, long long N, int C) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < N) y[r] = lse[r] - x[r * C + t[r]];
}
"""
_CE_GATHER_MEAN = """
/* kernel 2: one block of 1024 gathers every row's loss (strided) and averages them with a shared-memory tree */
__global__ void __launch_bounds__(1024) gather_mean(const float* __restrict__ x, const long long* __restrict__ t,
                                                    const float* __restrict__ lse, float* __restrict__ y, long long N,
                                                    int C) {
    __shared__ float sh[1024];
    float s = 0.f;
    for (long long r = threadIdx.x; r < N; r += 1024) s += lse[r] - x[r * C + t[r]];
    const float tot = block_sum<1024>(s, sh);
    if (threadIdx.x == 0) y[0] = tot / (float)N;
}
"""
_CE_TWO_LAUNCH = """    float* lse = 0;
    if (cudaMallocAsync((void**)&lse, (size_t)N * sizeof(float), stream) != cudaSuccess) return 3;
    row_logsumexp<<<(unsigned)N, 128, 0, stream>>>(x, lse, C);
{second}
    if (cudaFreeAsync(lse, stream) != cudaSuccess) return 3;"""
_CE_VEC4 = """
/* a block of 256 per row reading float4 when the rows are whole float4s (C % 4 == 0, x 16-byte aligned), else
   scalars; online (max, sum) per thread, merged by shuffles and through shared memory. MEAN: thread 0 adds the
   row's loss to a double total atomically */
template <bool MEAN>
__global__ void __launch_bounds__(256) ce_block_vec4(const float* __restrict__ x, const long long* __restrict__ t,
                                                     float* __restrict__ y, double* total, int C) {
    __shared__ float pm[8], ps[8];
    const long long r = blockIdx.x;
    const float* xr = x + r * C;
    float m = -INFINITY, s = 0.f;
    if (C % 4 == 0 && (reinterpret_cast<unsigned long long>(x) & 15) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int q = threadIdx.x; q < C / 4; q += 256) {
            const float4 v = x4[q];
            const float mv = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
            const float sv = (expf(v.x - mv) + expf(v.y - mv)) + (expf(v.z - mv) + expf(v.w - mv));
            lse_merge(m, s, mv, sv);
        }
    } else {
        for (int c = threadIdx.x; c < C; c += 256) lse_add(m, s, xr[c]);
    }
    block_lse<8>(m, s, pm, ps);
    if (threadIdx.x == 0) {
        const float l = logf(s) + (m - xr[t[r]]);
        if (MEAN) atomicAdd(total, (double)l);
        else y[r] = l;
    }
}
"""
_CE_WARP_TWO_PASS = """
/* a warp per row, 4 per block, in two strided passes: the max (shuffles), then the sum of exponentials (shuffles) */
__global__ void __launch_bounds__(128) ce_warp_two_pass(const float* __restrict__ x, const long long* __restrict__ t,
                                                        float* __restrict__ loss, long long N, int C) {
    const long long r = (long long)blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= N) return;  /* whole warps leave together */
    const float* xr = x + r * C;
    float m = -INFINITY;
#pragma unroll 4
    for (int c = lane; c < C; c += 32) m = fmaxf(m, xr[c]);
    m = warp_max(m);
    float s = 0.f;
#pragma unroll 4
    for (int c = lane; c < C; c += 32) s += expf(xr[c] - m);
    s = warp_sum(s);
    if (lane == 0) loss[r] = logf(s) + (m - xr[t[r]]);
}
"""


def _ce_variants(mean: bool) -> list[TorchVariant]:
    def by_tree(body: str) -> str:  # 'mean': the row losses into scratch, then mean_tree; 'none': straight into y
        return _CE_SCRATCH.format(body=body.replace("LOSS", "loss")) if mean else body.replace("LOSS", "y")

    tree_tags = ["multi_pass", "tree_reduction"] if mean else []
    atomic_tags = ["atomics", "multi_pass"] if mean else []

    def by_atomics(body: str) -> str:  # 'mean': a double total by atomics, then mean_finish; 'none': no total
        return _CE_ATOMIC_LAUNCH.format(body=body.replace("TOTAL", "total")) if mean else body.replace("TOTAL", "0")

    atomic_mean = _CE_ATOMIC_MEAN if mean else ""
    m = "true" if mean else "false"
    tree = _CE_MEAN_TREE if mean else ""
    specs = [
        ("thread_per_row_three_pass", ["thread_per_row", "block_128", *tree_tags], _CE_THREAD + tree,
         by_tree("    ce_thread_row<<<(unsigned)((N + 127) / 128), 128, 0, stream>>>(x, t, LOSS, N, C);")),
        ("warp_per_row_online", ["warp_shuffle", "coalesced", "fused", "block_256", *atomic_tags],
         _CE_WARP_ONLINE + atomic_mean,
         by_atomics(f"    ce_warp_online<{m}><<<(unsigned)((N + 7) / 8), 256, 0, stream>>>(x, t, y, TOTAL, N, C);")),
        ("block_per_row_trees", ["block_per_row", "tree_reduction", "shared_tiling", "block_256",
                                 *(["multi_pass"] if mean else [])], _CE_BLOCK_TREE + tree,
         by_tree("    ce_block_tree<<<(unsigned)N, 256, 0, stream>>>(x, t, LOSS, C);")),
        ("two_kernels_logsumexp_gather", ["multi_pass", "block_per_row", "warp_shuffle", "block_128",
                                          *(["tree_reduction", "block_1024"] if mean else [])],
         _CE_TWO_KERNELS + (_CE_GATHER_MEAN if mean else _CE_GATHER_NONE),
         _CE_TWO_LAUNCH.format(second=(
             "    gather_mean<<<1, 1024, 0, stream>>>(x, t, lse, y, N, C);" if mean else
             "    gather_loss<<<(unsigned)((N + 255) / 256), 256, 0, stream>>>(x, t, lse, y, N, C);"))),
        ("block_per_row_vec4", ["block_per_row", "vectorized", "warp_shuffle", "coalesced", "block_256",
                                *atomic_tags], _CE_VEC4 + atomic_mean,
         by_atomics(f"    ce_block_vec4<{m}><<<(unsigned)N, 256, 0, stream>>>(x, t, y, TOTAL, C);")),
        ("warp_per_row_two_pass", ["warp_shuffle", "coalesced", "unrolled", "block_128", *tree_tags],
         _CE_WARP_TWO_PASS + tree,
         by_tree("    ce_warp_two_pass<<<(unsigned)((N + 3) / 4), 128, 0, stream>>>(x, t, LOSS, N, C);")),
    ]
    return [TorchVariant(name, tuple(tags), _WARP_HELPERS + (BLOCK_SUM if "block_sum<" in kernel else "") + kernel +
                         _CE_ENTRY.format(out_numel="1" if mean else "N", launch=launch))
            for name, tags, kernel, launch in specs]


_CE_CLASSES = [10, 100, 257, 1000, 1024, 4000, 5003, 10000, 32000, 32768]
_CE_SHAPES = [(n, c) for n, c in itertools.product([128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
                                                     131072], _CE_CLASSES)
              if 2**19 <= n * c <= 2**26]  # 2 to 256 MB of logits


def cross_entropy_loss(index: int) -> GeneratedTorchTask:
    rng = rng_for("cross_entropy_loss", index)
    shapes = shuffled("cross_entropy_loss", _CE_SHAPES)
    n, c = shapes[index % len(shapes)]
    reduction = str(rng.choice(["mean", "none"]))
    spread = round(float(rng.uniform(1.0, 4.0)), 3)
    source = problem_source(
        f"y = F.cross_entropy(logits, target, reduction='{reduction}'): logits of shape (batch_size, {c}) and int64 "
        f"class indices of shape (batch_size,); {'the mean loss (a scalar)' if reduction == 'mean' else 'a loss'}"
        f"{'' if reduction == 'mean' else ' per row'}.",
        f"torch.nn.functional.cross_entropy(logits, target, reduction='{reduction}')",
        f"torch.randn(batch_size, {c}) * {spread}, torch.randint(0, {c}, (batch_size,))",
        forward_args="logits, target", batch_size=n)
    tid = task_id("cross_entropy_loss", index)
    # see the module docstring
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"cross-entropy over {c} classes, reduction {reduction}",
                       tolerance=DtypeTolerance(fp32=(1e-5, 1e-5) if reduction == "mean" else (1e-4, 1e-4)))
    variants = _ce_variants(reduction == "mean")
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "cross_entropy_loss", index, {"batch": n, "classes": c, "reduction": reduction,
                                                                  "spread": spread}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# masked_softmax: softmax((x * s).masked_fill(mask == 0, -inf), dim=-1) with a bool or uint8 mask

_MS_HEAD = """constexpr float S = {scale}f;  /* the scale applied before the mask */

/* an element of the masked, scaled row: -inf where the mask is 0 */
__device__ __forceinline__ float mval(float xv, unsigned char k) {{ return k ? xv * S : -INFINITY; }}
"""
_MS_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1 || in[0].ndim < 1 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32)
        return 1;
    if ((in[1].dtype != DT_BOOL && in[1].dtype != DT_UINT8) || in[1].numel != in[0].numel) return 1;
    if (out[0].numel != in[0].numel) return 1;
    const int L = (int)in[0].shape[in[0].ndim - 1];
    if (L <= 0 || in[0].numel == 0) return 0;
    const long long rows = in[0].numel / L;
    const float* x = (const float*)in[0].data;
    const unsigned char* mk = (const unsigned char*)in[1].data;  /* bool and uint8: one byte, 0 = masked */
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_BLOCK_REDUCE_WARPS = """
/* block-wide max and sum of NW warps: shuffles within each warp, then the warps' values through shared memory */
template <int NW>
__device__ __forceinline__ float block_max_w(float v, float* part) {
    v = warp_max(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    float r = part[0];
    for (int i = 1; i < NW; ++i) r = fmaxf(r, part[i]);
    __syncthreads();  /* part is written again by the next reduction */
    return r;
}
template <int NW>
__device__ __forceinline__ float block_sum_w(float v, float* part) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    float r = part[0];
    for (int i = 1; i < NW; ++i) r += part[i];
    __syncthreads();
    return r;
}
"""
_MS_THREAD = """
/* a thread per row in three passes: the max, the sum of exponentials, the probabilities */
__global__ void ms_thread_row(const float* __restrict__ x, const unsigned char* __restrict__ mk,
                              float* __restrict__ y, long long rows, int L) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    float m = -INFINITY;
    for (int c = 0; c < L; ++c) m = fmaxf(m, mval(xr[c], kr[c]));
    float s = 0.f;
    for (int c = 0; c < L; ++c) s += expf(mval(xr[c], kr[c]) - m);  /* masked: exp(-inf) = 0 */
    const float inv = 1.f / s;
    for (int c = 0; c < L; ++c) yr[c] = expf(mval(xr[c], kr[c]) - m) * inv;
}
"""
_MS_WARP = """
/* a warp per row, 8 per block: an online (max, sum) per lane over its strided elements, merged with xor shuffles,
   then a second pass writes the probabilities */
__global__ void __launch_bounds__(256) ms_warp_online(const float* __restrict__ x, const unsigned char* __restrict__ mk,
                                                      float* __restrict__ y, long long rows, int L) {
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    float m = -INFINITY, s = 0.f;
    for (int c = lane; c < L; c += 32) lse_add(m, s, mval(xr[c], kr[c]));
    warp_lse(m, s);
    const float inv = 1.f / s;
    for (int c = lane; c < L; c += 32) yr[c] = expf(mval(xr[c], kr[c]) - m) * inv;
}
"""
_MS_BLOCK_TREE = """
/* a block of 256 per row in three passes, the max and the sum through shared-memory trees */
__global__ void __launch_bounds__(256) ms_block_tree(const float* __restrict__ x, const unsigned char* __restrict__ mk,
                                                     float* __restrict__ y, int L) {
    __shared__ float sh[256];
    const long long r = blockIdx.x;
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < L; c += 256) m = fmaxf(m, mval(xr[c], kr[c]));
    m = block_max<256>(m, sh);
    float s = 0.f;
    for (int c = threadIdx.x; c < L; c += 256) s += expf(mval(xr[c], kr[c]) - m);
    const float inv = 1.f / block_sum<256>(s, sh);
    for (int c = threadIdx.x; c < L; c += 256) yr[c] = expf(mval(xr[c], kr[c]) - m) * inv;
}
"""
_MS_BLOCK_ONLINE = """
/* a block of 1024 per row: an online (max, sum) per thread, merged by shuffles and across the 32 warps through
   shared memory, then the probabilities */
__global__ void __launch_bounds__(1024) ms_block_online(const float* __restrict__ x,
                                                        const unsigned char* __restrict__ mk, float* __restrict__ y,
                                                        int L) {
    __shared__ float pm[32], ps[32];
    const long long r = blockIdx.x;
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    float m = -INFINITY, s = 0.f;
    for (int c = threadIdx.x; c < L; c += 1024) lse_add(m, s, mval(xr[c], kr[c]));
    block_lse<32>(m, s, pm, ps);
    const float inv = 1.f / s;
    for (int c = threadIdx.x; c < L; c += 1024) yr[c] = expf(mval(xr[c], kr[c]) - m) * inv;
}
"""
_MS_VEC4 = """
/* a block of 256 per row reading x and writing y as float4 and the mask as 4 bytes at a time, when the rows are
   whole vectors (L % 4 == 0, pointers aligned); else scalars. Online (max, sum), then the probabilities */
__global__ void __launch_bounds__(256) ms_block_vec4(const float* __restrict__ x, const unsigned char* __restrict__ mk,
                                                     float* __restrict__ y, int L) {
    __shared__ float pm[8], ps[8];
    const long long r = blockIdx.x;
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    const bool vec = L % 4 == 0 && (bits & 15) == 0 && (reinterpret_cast<unsigned long long>(mk) & 3) == 0;
    const int nq = L / 4;
    float m = -INFINITY, s = 0.f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const uchar4* k4 = reinterpret_cast<const uchar4*>(kr);
        for (int q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            const uchar4 k = k4[q];
            lse_add(m, s, mval(v.x, k.x));
            lse_add(m, s, mval(v.y, k.y));
            lse_add(m, s, mval(v.z, k.z));
            lse_add(m, s, mval(v.w, k.w));
        }
    } else {
        for (int c = threadIdx.x; c < L; c += 256) lse_add(m, s, mval(xr[c], kr[c]));
    }
    block_lse<8>(m, s, pm, ps);
    const float inv = 1.f / s;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const uchar4* k4 = reinterpret_cast<const uchar4*>(kr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int q = threadIdx.x; q < nq; q += 256) {
            const float4 v = x4[q];
            const uchar4 k = k4[q];
            y4[q] = make_float4(expf(mval(v.x, k.x) - m) * inv, expf(mval(v.y, k.y) - m) * inv,
                                expf(mval(v.z, k.z) - m) * inv, expf(mval(v.w, k.w) - m) * inv);
        }
    } else {
        for (int c = threadIdx.x; c < L; c += 256) yr[c] = expf(mval(xr[c], kr[c]) - m) * inv;
    }
}
"""
_MS_SMEM = """
/* a block of 512 per row: the masked, scaled row is read from global memory once into shared memory (L floats);
   the max, the exponentials (kept in place) and their sum come from there. Each thread only touches its own
   elements c = tid + 512k of the staged row, so the phases need no barrier beyond the reductions' */
__global__ void __launch_bounds__(512) ms_smem_row(const float* __restrict__ x, const unsigned char* __restrict__ mk,
                                                   float* __restrict__ y, int L) {
    extern __shared__ float row[];  /* L */
    __shared__ float part[16];
    const long long r = blockIdx.x;
    const float* xr = x + r * L;
    const unsigned char* kr = mk + r * L;
    float* yr = y + r * L;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < L; c += 512) {
        const float v = mval(xr[c], kr[c]);
        row[c] = v;
        m = fmaxf(m, v);
    }
    m = block_max_w<16>(m, part);
    float s = 0.f;
    for (int c = threadIdx.x; c < L; c += 512) {
        const float e = expf(row[c] - m);
        row[c] = e;
        s += e;
    }
    const float inv = 1.f / block_sum_w<16>(s, part);
    for (int c = threadIdx.x; c < L; c += 512) yr[c] = row[c] * inv;
}
"""
_MS_SMEM_LAUNCH = """    const size_t smem = (size_t)L * sizeof(float);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(ms_smem_row, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    ms_smem_row<<<(unsigned)rows, 512, smem, stream>>>(x, mk, y, L);"""


def _ms_variants(scale: float) -> list[TorchVariant]:
    head = _MS_HEAD.format(scale=repr(scale)) + _WARP_HELPERS
    specs = [
        ("thread_per_row_three_pass", ["thread_per_row", "block_128"], _MS_THREAD,
         "    ms_thread_row<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, mk, y, rows, L);"),
        ("warp_per_row_online", ["warp_shuffle", "coalesced", "block_256"], _MS_WARP,
         "    ms_warp_online<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, mk, y, rows, L);"),
        ("block_per_row_three_pass", ["block_per_row", "tree_reduction", "shared_tiling", "block_256"],
         BLOCK_SUM + _BLOCK_MAX + _MS_BLOCK_TREE,
         "    ms_block_tree<<<(unsigned)rows, 256, 0, stream>>>(x, mk, y, L);"),
        ("block_1024_online", ["block_per_row", "warp_shuffle", "coalesced", "block_1024"], _MS_BLOCK_ONLINE,
         "    ms_block_online<<<(unsigned)rows, 1024, 0, stream>>>(x, mk, y, L);"),
        ("block_per_row_vec4", ["block_per_row", "vectorized", "warp_shuffle", "coalesced", "block_256"], _MS_VEC4,
         "    ms_block_vec4<<<(unsigned)rows, 256, 0, stream>>>(x, mk, y, L);"),
        ("block_row_in_shared", ["block_per_row", "shared_tiling", "warp_shuffle", "block_512"],
         _BLOCK_REDUCE_WARPS + _MS_SMEM, _MS_SMEM_LAUNCH),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _MS_ENTRY % launch) for name, tags, kernel, launch in specs]


_MS_SHAPES = [(b, n) for b, n in itertools.product([256, 512, 1024, 2048, 4096, 8192, 16384],
                                                   [100, 128, 255, 512, 1000, 1024, 2048, 3000, 4096, 8192])
              if 2**19 <= b * n <= 2**25]  # 2 to 128 MB of input


def masked_softmax(index: int) -> GeneratedTorchTask:
    rng = rng_for("masked_softmax", index)
    shapes = shuffled("masked_softmax", _MS_SHAPES)
    b, n = shapes[index % len(shapes)]
    kind = str(rng.choice(["random", "padding"]))
    dtype = str(rng.choice(["bool", "uint8"]))
    keep = round(float(rng.uniform(0.2, 0.9)), 3)
    scale = 1.0 if rng.random() < 0.5 else round(float(rng.uniform(0.1, 2.0)), 3)
    spread = round(float(rng.uniform(0.5, 3.0)), 3)
    if kind == "random":  # each element kept with probability keep, and one random column per row forced on
        mask = (f"(torch.rand(batch_size, {n}) < {keep}).scatter(1, torch.randint(0, {n}, (batch_size, 1)), "
                "True)")
        what = f"a random mask (each element kept with probability {keep}, at least one per row)"
    else:  # a padding mask: the first len elements of each row, len in [1, n]
        mask = f"torch.arange({n}) < torch.randint(1, {n + 1}, (batch_size, 1))"
        what = "a padding mask (each row keeps its first len elements, 1 <= len <= L)"
    if dtype == "uint8":
        mask = f"({mask}).to(torch.uint8)"
    scaled = "x" if scale == 1.0 else f"(x * {scale!r})"
    expr = f"torch.softmax({scaled}.masked_fill(mask == 0, float('-inf')), dim=-1)"
    source = problem_source(
        f"y = softmax({scaled}.masked_fill(mask == 0, -inf), dim=-1) over a (batch_size, {n}) input, with {what} "
        f"of dtype {dtype}.", expr, f"torch.randn(batch_size, {n}) * {spread}, {mask}", forward_args="x, mask",
        batch_size=b)
    tid = task_id("masked_softmax", index)
    # probabilities are at most 1: row_softmax's 1e-6 absolute and 1e-4 relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"masked softmax over {n} ({kind} {dtype} mask)",
                       tolerance=DtypeTolerance(fp32=(1e-6, 1e-4)))
    variants = _ms_variants(scale)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "masked_softmax", index,
                              {"batch": b, "length": n, "mask": kind, "dtype": dtype,
                               "keep": keep if kind == "random" else None, "scale": scale,
                               "spread": spread}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# embedding_bag_mean: nn.EmbeddingBag(V, D, mode='mean' or 'sum') over fixed-length bags idx (B, L)

_EB_HEAD = """constexpr int D = {d};          /* the embedding width */
constexpr bool MEAN = {mean};  /* mode 'mean' (else 'sum') */

__device__ __forceinline__ float finish(float acc, int L) {{ return MEAN ? acc / (float)L : acc; }}
"""
_EB_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2) return 1;
    if (in[0].dtype != DT_INT64 || in[1].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32) return 1;
    if (in[1].shape[1] != D) return 1;
    const long long B = in[0].shape[0];
    const int L = (int)in[0].shape[1];
    if (out[0].numel != B * D || L <= 0) return 1;
    if (B == 0) return 0;
    const long long* idx = (const long long*)in[0].data;  /* (B, L) row indices into the table, in [0, V) */
    const float* E = (const float*)in[1].data;            /* the table, (V, D) */
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_EB_THREAD = """
/* a thread per output element (bag b, column d): consecutive threads read consecutive columns of each row */
__global__ void eb_thread_out(const long long* __restrict__ idx, const float* __restrict__ E, float* __restrict__ y,
                              long long B, int L) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * D) return;
    const long long b = i / D;
    const int d = (int)(i % D);
    const long long* ib = idx + b * L;
    float acc = 0.f;
    for (int j = 0; j < L; ++j) acc += E[ib[j] * D + d];
    y[i] = finish(acc, L);
}
"""
_EB_WARP_VEC4 = """
/* a warp per bag, 4 per block: the lanes walk the bag's rows together, float4 over the columns when D % 4 == 0 and
   the table and output are 16-byte aligned, else scalars */
__global__ void __launch_bounds__(128) eb_warp_vec4(const long long* __restrict__ idx, const float* __restrict__ E,
                                                    float* __restrict__ y, long long B, int L) {
    const long long b = (long long)blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= B) return;
    const long long* ib = idx + b * L;
    const unsigned long long bits = reinterpret_cast<unsigned long long>(E) | reinterpret_cast<unsigned long long>(y);
    if (D % 4 == 0 && (bits & 15) == 0) {
        constexpr int Q = D / 4;
        const float4* E4 = reinterpret_cast<const float4*>(E);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int q = lane; q < Q; q += 32) {
            float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int j = 0; j < L; ++j) {
                const float4 v = E4[ib[j] * Q + q];
                acc.x += v.x;
                acc.y += v.y;
                acc.z += v.z;
                acc.w += v.w;
            }
            y4[b * Q + q] = make_float4(finish(acc.x, L), finish(acc.y, L), finish(acc.z, L), finish(acc.w, L));
        }
    } else {
        for (int d = lane; d < D; d += 32) {
            float acc = 0.f;
            for (int j = 0; j < L; ++j) acc += E[ib[j] * D + d];
            y[b * D + d] = finish(acc, L);
        }
    }
}
"""
_EB_BLOCK = """
/* a block of 64 per bag, its threads striding over the columns */
__global__ void __launch_bounds__(64) eb_block_bag(const long long* __restrict__ idx, const float* __restrict__ E,
                                                   float* __restrict__ y, int L) {
    const long long b = blockIdx.x;
    const long long* ib = idx + b * L;
    for (int d = threadIdx.x; d < D; d += 64) {
        float acc = 0.f;
        for (int j = 0; j < L; ++j) acc += E[ib[j] * D + d];
        y[b * D + d] = finish(acc, L);
    }
}
"""
_EB_SHARED_IDX = """
/* a block of 256 per 8 bags: the bags' 8 L indices are staged in shared memory first (one coalesced read), then the
   threads stride over the 8 D outputs, which are contiguous in y */
__global__ void __launch_bounds__(256) eb_shared_idx(const long long* __restrict__ idx, const float* __restrict__ E,
                                                     float* __restrict__ y, long long B, int L) {
    extern __shared__ long long sidx[];  /* 8 * L */
    const long long b0 = (long long)blockIdx.x * 8;
    const int nb = B - b0 < 8 ? (int)(B - b0) : 8;
    for (int e = threadIdx.x; e < nb * L; e += 256) sidx[e] = idx[b0 * L + e];
    __syncthreads();
    for (int e = threadIdx.x; e < nb * D; e += 256) {
        const int bb = e / D, d = e % D;
        const long long* ib = sidx + bb * L;
        float acc = 0.f;
        for (int j = 0; j < L; ++j) acc += E[ib[j] * D + d];
        y[b0 * D + e] = finish(acc, L);
    }
}
"""
_EB_SHARED_IDX_LAUNCH = """    const size_t smem = (size_t)8 * L * sizeof(long long);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(eb_shared_idx, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    eb_shared_idx<<<(unsigned)((B + 7) / 8), 256, smem, stream>>>(idx, E, y, B, L);"""
_EB_ATOMIC = """
/* a thread per (bag, position): it adds its row (divided by L under 'mean') into the bag's output with atomics */
__global__ void eb_atomic_scatter(const long long* __restrict__ idx, const float* __restrict__ E, float* y,
                                  long long B, int L) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * L) return;
    const long long b = i / L;
    const float* er = E + idx[i] * D;
    float* yb = y + b * D;
    const float f = MEAN ? 1.f / (float)L : 1.f;
    for (int d = 0; d < D; ++d) atomicAdd(&yb[d], er[d] * f);
}
"""
_EB_ATOMIC_LAUNCH = """    if (cudaMemsetAsync(y, 0, (size_t)B * D * sizeof(float), stream) != cudaSuccess) return 3;
    eb_atomic_scatter<<<(unsigned)((B * L + 255) / 256), 256, 0, stream>>>(idx, E, y, B, L);"""
_EB_WARP_SHFL = """
/* a warp per bag, 8 per block: the lanes load 32 of the bag's indices at a time (coalesced) and broadcast each with
   a shuffle; lane l keeps the columns l, l + 32, ... of the bag's sum in registers */
__global__ void __launch_bounds__(256) eb_warp_shfl(const long long* __restrict__ idx, const float* __restrict__ E,
                                                    float* __restrict__ y, long long B, int L) {
    constexpr int R = (D + 31) / 32;
    const long long b = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= B) return;  /* whole warps leave together */
    const long long* ib = idx + b * L;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int j0 = 0; j0 < L; j0 += 32) {
        const long long mine = j0 + lane < L ? ib[j0 + lane] : 0;
        const int nj = L - j0 < 32 ? L - j0 : 32;  /* warp-uniform */
        for (int jj = 0; jj < nj; ++jj) {
            const float* er = E + __shfl_sync(0xffffffffu, mine, jj) * D;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int d = lane + 32 * r;
                if (d < D) acc[r] += er[d];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int d = lane + 32 * r;
        if (d < D) y[b * D + d] = finish(acc[r], L);
    }
}
"""


def _eb_variants(d: int, mean: bool) -> list[TorchVariant]:
    head = _EB_HEAD.format(d=d, mean="true" if mean else "false")
    specs = [
        ("thread_per_output", ["naive", "coalesced", "block_256"], _EB_THREAD,
         "    eb_thread_out<<<(unsigned)((B * D + 255) / 256), 256, 0, stream>>>(idx, E, y, B, L);"),
        ("warp_per_bag_vec4", ["block_per_row", "vectorized", "coalesced", "block_128"], _EB_WARP_VEC4,
         "    eb_warp_vec4<<<(unsigned)((B + 3) / 4), 128, 0, stream>>>(idx, E, y, B, L);"),
        ("block_per_bag", ["block_per_row", "coalesced", "block_64"], _EB_BLOCK,
         "    eb_block_bag<<<(unsigned)B, 64, 0, stream>>>(idx, E, y, L);"),
        ("shared_index_staging", ["shared_tiling", "coalesced", "block_256"], _EB_SHARED_IDX, _EB_SHARED_IDX_LAUNCH),
        ("atomic_scatter", ["atomics", "thread_per_row", "strided", "block_256"], _EB_ATOMIC, _EB_ATOMIC_LAUNCH),
        ("warp_shuffle_indices", ["block_per_row", "warp_shuffle", "register_blocking", "unrolled", "block_256"],
         _EB_WARP_SHFL, "    eb_warp_shfl<<<(unsigned)((B + 7) / 8), 256, 0, stream>>>(idx, E, y, B, L);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _EB_ENTRY % launch) for name, tags, kernel, launch in specs]


_EB_SHAPES = [(b, n, v, d) for b, n, v, d in itertools.product([512, 1024, 2048, 4096, 8192, 16384],
                                                               [4, 8, 10, 16, 20, 32, 50],
                                                               [1000, 10000, 50000, 100000, 250000],
                                                               [32, 50, 64, 100, 128, 150, 200, 256, 300, 512])
              if v * d <= 2**25                   # a table of at most 128 MB
              and 2**20 <= b * n * d <= 2**26]    # 4 to 256 MB gathered


def embedding_bag_mean(index: int) -> GeneratedTorchTask:
    rng = rng_for("embedding_bag_mean", index)
    shapes = shuffled("embedding_bag_mean", _EB_SHAPES)
    b, n, v, d = shapes[index % len(shapes)]
    mode = str(rng.choice(["mean", "sum"], p=[0.7, 0.3]))
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    init_seed = int(rng.integers(1, 2**31 - 1))
    source = problem_source(
        f"y = EmbeddingBag({v}, {d}, mode='{mode}')(idx): the {mode} of the table rows named by each row of idx (bags "
        f"of {n} int64 indices, shape (batch_size, {n})), with the table drawn at init.", "self.bag(idx)",
        f"torch.randint(0, {v}, (batch_size, {n}))", forward_args="idx", batch_size=b,
        init_body=(f"self.bag = nn.EmbeddingBag({v}, {d}, mode='{mode}')\n"
                   f"gen = torch.Generator().manual_seed({init_seed})\n"
                   "with torch.no_grad():\n"
                   f"    self.bag.weight.normal_(0.0, {spread}, generator=gen)"))
    tid = task_id("embedding_bag_mean", index)
    # see the module docstring
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"embedding bag ({mode}) of {n} rows of a {v}x{d} table",
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _eb_variants(d, mode == "mean")
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "embedding_bag_mean", index,
                              {"batch": b, "bag": n, "vocab": v, "dim": d, "mode": mode, "spread": spread,
                               "init_seed": init_seed}, tuple(variants))
