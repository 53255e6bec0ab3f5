"""``cross_entropy_loss``, ``masked_softmax`` and ``embedding_bag_mean``: a loss over class logits, a softmax under a
mask, and a gather-reduce over an embedding table; integer and boolean inputs beside the floats.

``cross_entropy_loss``: ``F.cross_entropy(logits, target, reduction=...)`` over (N, C) logits and int64 targets
drawn in range, with the reduction ``'mean'`` (a scalar) or ``'none'`` (N losses). The index picks N (the batch), C
(10 to 32768, some not multiples of 4 or 32), the reduction and the logits' spread. Variants: a thread per row in
three passes (max, sum of exponentials, the target's logit), a warp per row with an online (one-pass) max and sum,
a block per row with shared-memory trees, two kernels (a block per row's log-sum-exp, then a gather of the target's
logit), a block per row with float4 loads, and a warp per row in two passes; under ``'mean'`` the losses are
averaged by a second kernel (one block's tree over the row losses) or by atomics (one atomic add per block or
row). A row's loss is ``log(sum exp(x - max)) + max - x[t]``, of order log(C) + spread (at most ~25); its sum of up
to 32768 exponentials, in another order than PyTorch's (a sequential thread's is the worst), is a few 1e-6 off
relatively, so the loss a few 1e-6 absolutely (a float32 simulation of the sequential order of the largest rows
stays below 1e-5); the mean adds a float32 sum of up to 131072 losses (a few 1e-7 relative, atomics included).
1e-4 absolute and relative for ``'none'``; for ``'mean'``, whose errors average out, 1e-5 absolute and relative,
tight enough that two draws of the inputs are told apart (the mean of many random losses varies little).

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
                                                      problem_source, rng_for, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask


def _shuffled(family: str, combos: list[tuple]) -> list[tuple]:
    """A fixed shuffle of ``combos`` (the first problems of a family never repeat a shape)."""
    order = rng_for(f"{family}:shapes", 0).permutation(len(combos))
    return [combos[int(k)] for k in order]


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
_CE_ZERO = """    if (cudaMemsetAsync(y, 0, sizeof(float), stream) != cudaSuccess) return 3;  /* the atomics' total */
"""

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
   xor shuffles. MEAN: the block's 8 losses summed in shared memory, one atomic add of their share of the mean */
template <bool MEAN>
__global__ void __launch_bounds__(256) ce_warp_online(const float* __restrict__ x, const long long* __restrict__ t,
                                                      float* __restrict__ y, long long N, int C) {
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
            atomicAdd(y, b / (float)N);
        }
    }
}
"""
_CE_BLOCK_TREE = """
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
   row's share of the mean atomically */
template <bool MEAN>
__global__ void __launch_bounds__(256) ce_block_vec4(const float* __restrict__ x, const long long* __restrict__ t,
                                                     float* __restrict__ y, long long N, int C) {
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
        if (MEAN) atomicAdd(y, l / (float)N);
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
    atomic_tags = ["atomics"] if mean else []
    zero = _CE_ZERO if mean else ""
    m = "true" if mean else "false"
    tree = _CE_MEAN_TREE if mean else ""
    specs = [
        ("thread_per_row_three_pass", ["thread_per_row", "block_128", *tree_tags], _CE_THREAD + tree,
         by_tree("    ce_thread_row<<<(unsigned)((N + 127) / 128), 128, 0, stream>>>(x, t, LOSS, N, C);")),
        ("warp_per_row_online", ["warp_shuffle", "coalesced", "fused", "block_256", *atomic_tags], _CE_WARP_ONLINE,
         zero + f"    ce_warp_online<{m}><<<(unsigned)((N + 7) / 8), 256, 0, stream>>>(x, t, y, N, C);"),
        ("block_per_row_trees", ["block_per_row", "tree_reduction", "shared_tiling", "block_256",
                                 *(["multi_pass"] if mean else [])], _CE_BLOCK_TREE + tree,
         by_tree("    ce_block_tree<<<(unsigned)N, 256, 0, stream>>>(x, t, LOSS, C);")),
        ("two_kernels_logsumexp_gather", ["multi_pass", "block_per_row", "warp_shuffle", "block_128",
                                          *(["tree_reduction", "block_1024"] if mean else [])],
         _CE_TWO_KERNELS + (_CE_GATHER_MEAN if mean else _CE_GATHER_NONE),
         _CE_TWO_LAUNCH.format(second="    gather_mean<<<1, 1024, 0, stream>>>(x, t, lse, y, N, C);" if mean else
                               "    gather_loss<<<(unsigned)((N + 255) / 256), 256, 0, stream>>>(x, t, lse, y, N, C);")),
        ("block_per_row_vec4", ["block_per_row", "vectorized", "warp_shuffle", "coalesced", "block_256",
                                *atomic_tags], _CE_VEC4,
         zero + f"    ce_block_vec4<{m}><<<(unsigned)N, 256, 0, stream>>>(x, t, y, N, C);"),
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
    shapes = _shuffled("cross_entropy_loss", _CE_SHAPES)
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
