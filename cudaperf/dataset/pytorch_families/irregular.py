"""``index_add_rows``, ``topk_rows`` and ``histc_bins``: a scatter-add through repeating int64 indices, a selection
of the largest (or smallest) values per row, and a histogram; irregular writes and data-dependent control flow.

``index_add_rows``: ``base.index_add(0, index, src, alpha=a)`` over a (N, D) or (N, d1, d2) base, an int64 index of
length M (the batch) drawn with repeats, and (M, D) or (M, d1, d2) sources. The index picks the pattern of the
indices (uniform, sorted, skewed: a power law over a random permutation of the rows, or few distinct targets: N
of 16 to 256), N, M, the row width D (16 to 512, some not multiples of 4 or 32), the layout, alpha and the
sources' spread. Variants: atomics per element, a thread per source row (its atomics walk the row), a warp per
source row with float4 loads, a block per source row, a grid-stride loop over the elements on a small grid, tiles
of 64 source rows that first add up the rows sharing a target in the tile (one atomic per distinct target and
column: few targets, few atomics), and row ownership without global atomics: a block owns a range of output rows
(its R x D tile in shared memory), scans every index for the rows that land in its range (ballots compact them)
and writes base plus its tile once. Every variant but the last copies base into the output first. Tolerance:
each output is base plus a sum of c terms of size s = |alpha| * spread in an order of the atomics' choosing, as in
the reference on a GPU (atomics too): two float32 orders of c such terms differ by about 1e-7 * c * s at worst (a
simulation: 1.6e-3 for c = 8192, s = 2, over 200 sums), so atol = 1e-4 + 1e-6 * c_max * s with c_max a bound on
the busiest output row's count (the skewed pattern's hottest row takes M / sqrt(N) of the indices), and rtol
1e-4; a term missed or added twice moves an output by about s.

``topk_rows``: ``torch.topk(x, k, dim=-1, largest=..., sorted=True).values`` over rows of length L (64 to 8192) of a
(B, L) or (B, H, L) input, k from 1 to 32. The index picks B, H, L, k, largest or smallest, and the data: normal,
ties (multiples of 1/8 from a range of about L/2 values: each about twice per row, so the top k holds equal values,
and the rows still differ) or a ramp with small noise (ascending or descending: insertion has the most work when the
largest values come last). Variants: a thread per row keeping a sorted buffer of k in local memory (insertion), a
warp per row whose lanes keep their own top k and merge them in k rounds of warp argmax, a block per row sorting the
row in shared memory by a bitonic network (padded to a power of two with -inf), a block per row taking k rounds of
block argmax over the row in shared memory, two passes (a warp per 256-element chunk writes the chunk's top k, a
warp per row merges the chunks' lists), and a warp per row without buffers: round after round the largest value
below the last one taken and its count. The smallest k are the largest k of -x (negation is exact). Outputs are
input values, ties give the same values whichever element is taken, so the tolerance is zero.

``histc_bins``: ``torch.histc`` of one to three inputs (each (B, W_i), added bin by bin when there are several)
with ``bins`` from 16 to 4096 over a [min, max] that leaves some values outside, as float counts. The index
picks B, the widths, the bins, the data (normal, uniform, gridded values that land on bin edges and on max, or
exponential: most values in the lowest bins, where atomics contend) and the range. Variants: a global atomic
per element, a shared-memory histogram per block of 4096 elements merged with atomics, per-warp sub-histograms,
a thread per bin counting the bins of a block's slice of the elements staged in shared memory (slow, correct),
a grid-stride loop on a small grid with float4 loads into a shared histogram, two passes (per-block histograms
written whole, then a thread per bin adds them), and warp-aggregated atomics (lanes in the same bin find each
other with ``__match_any_sync``, one atomic per bin and warp). Every variant bins as ATen does, ``(x - min) *
bins / (max - min)`` in float32 rounded at each step (``__fsub_rn``, ``__fmul_rn``, ``__fdiv_rn``, so no
contraction or fast division changes a bin), the last bin closed, values outside [min, max] dropped. Counts are
integers below 2^24 (at most 2^24 elements), exact in float32 in any order, so the tolerance is zero.
"""

from __future__ import annotations

import itertools
import math

from cudaperf.dataset.pytorch_families.common import (GeneratedTorchTask, TorchVariant, check_tags, problem_source,
                                                      rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask

_FULL = "0xffffffffu"

# ---------------------------------------------------------------------------------------------------------------
# index_add_rows: base.index_add(0, index, src, alpha=a), int64 indices with repeats

_IA_HEAD = """constexpr float ALPHA = %sf;  /* index_add's alpha: y[index[m]] += ALPHA * src[m] */
"""
_IA_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 3 || n_out != 1 || in[0].ndim < 1 || in[1].ndim != 1 || in[2].ndim != in[0].ndim) return 1;
    if (in[0].dtype != DT_FLOAT32 || in[1].dtype != DT_INT64 || in[2].dtype != DT_FLOAT32 ||
        out[0].dtype != DT_FLOAT32)
        return 1;
    const long long N = in[0].shape[0], M = in[1].shape[0];
    if (N <= 0 || in[2].shape[0] != M || out[0].numel != in[0].numel) return 1;
    const long long D = in[0].numel / N;  /* the elements of a row (the trailing dimensions together) */
    if (in[2].numel != M * D || D <= 0 || D > 1048576) return 1;
    const float* base = (const float*)in[0].data;
    const long long* idx = (const long long*)in[1].data;  /* target rows, in [0, N), repeating */
    const float* src = (const float*)in[2].data;
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_IA_COPY = """    const size_t bytes = (size_t)(N * D) * sizeof(float);
    if (cudaMemcpyAsync(y, base, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 3;
    if (M == 0) return 0;
"""
_IA_ELEM = """
/* a thread per source element: one atomic add each into its target row */
__global__ void ia_elem(const long long* __restrict__ idx, const float* __restrict__ src, float* y, long long M,
                        int D) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * D) return;
    const long long m = i / D;
    const int d = (int)(i - m * D);
    atomicAdd(&y[idx[m] * D + d], ALPHA * src[i]);
}
"""
_IA_THREAD_ROW = """
/* a thread per source row: it walks its row, an atomic add per element (neighbouring threads read rows D apart) */
__global__ void ia_thread_row(const long long* __restrict__ idx, const float* __restrict__ src, float* y,
                              long long M, int D) {
    const long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float* o = y + idx[m] * D;
    const float* s = src + m * D;
    for (int d = 0; d < D; ++d) atomicAdd(o + d, ALPHA * s[d]);
}
"""
_IA_WARP_VEC4 = """
/* a warp per source row, 8 per block: the lanes read the row as float4 when D % 4 == 0 and src is 16-byte aligned
   (else scalars) and add each component atomically */
__global__ void __launch_bounds__(256) ia_warp_vec4(const long long* __restrict__ idx, const float* __restrict__ src,
                                                    float* y, long long M, int D) {
    const long long m = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (m >= M) return;
    float* o = y + idx[m] * D;
    const float* s = src + m * D;
    if (D % 4 == 0 && (reinterpret_cast<unsigned long long>(src) & 15) == 0) {
        const float4* s4 = reinterpret_cast<const float4*>(s);
        for (int q = lane; q < D / 4; q += 32) {
            const float4 v = s4[q];
            atomicAdd(o + 4 * q, ALPHA * v.x);
            atomicAdd(o + 4 * q + 1, ALPHA * v.y);
            atomicAdd(o + 4 * q + 2, ALPHA * v.z);
            atomicAdd(o + 4 * q + 3, ALPHA * v.w);
        }
    } else {
        for (int d = lane; d < D; d += 32) atomicAdd(o + d, ALPHA * s[d]);
    }
}
"""
_IA_BLOCK_ROW = """
/* a block of 128 per source row, its threads striding over the row's elements */
__global__ void __launch_bounds__(128) ia_block_row(const long long* __restrict__ idx, const float* __restrict__ src,
                                                    float* y, int D) {
    const long long m = blockIdx.x;
    float* o = y + idx[m] * D;
    const float* s = src + m * D;
    for (int d = threadIdx.x; d < D; d += 128) atomicAdd(o + d, ALPHA * s[d]);
}
"""
_IA_GRID_STRIDE = """
/* a grid-stride loop over the source elements on a small grid (4 blocks of 512 per multiprocessor) */
__global__ void __launch_bounds__(512) ia_grid_stride(const long long* __restrict__ idx,
                                                      const float* __restrict__ src, float* y, long long M, int D) {
    const long long total = M * D;
    for (long long i = (long long)blockIdx.x * 512 + threadIdx.x; i < total; i += (long long)gridDim.x * 512) {
        const long long m = i / D;
        const int d = (int)(i - m * D);
        atomicAdd(&y[idx[m] * D + d], ALPHA * src[i]);
    }
}
"""
_IA_GRID_STRIDE_LAUNCH = """    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
        sms = 132;
    const long long want = (M * D + 511) / 512;
    const long long blocks = want < 4LL * sms ? want : 4LL * sms;
    ia_grid_stride<<<(unsigned)blocks, 512, 0, stream>>>(idx, src, y, M, (int)D);"""
_IA_TILE = """
/* a block of 256 per tile of 64 source rows. The tile's targets are staged in shared memory; a row whose target
   appeared earlier in the tile is a follower, the first row of each target a leader, and every row points to the
   next row of the tile with its target. The leaders are compacted (ballots of warps 0 and 1), then the block walks
   (leader, column) pairs: the chain's sum, one atomic add per distinct target and column */
__global__ void __launch_bounds__(256) ia_tile(const long long* __restrict__ idx, const float* __restrict__ src,
                                               float* y, long long M, int D) {
    __shared__ long long tgt[64];
    __shared__ int nxt[64];
    __shared__ int lead[64];
    __shared__ int wl[2];
    const long long m0 = (long long)blockIdx.x * 64;
    const int nt = (int)(M - m0 < 64 ? M - m0 : 64);
    const int t = threadIdx.x, lane = t % 32;
    if (t < nt) tgt[t] = idx[m0 + t];
    __syncthreads();
    bool first = false;
    if (t < nt) {
        const long long me = tgt[t];
        int nx = -1;
        first = true;
        for (int j = 0; j < nt; ++j)
            if (tgt[j] == me) {
                if (j < t) first = false;
                else if (j > t && nx < 0) nx = j;
            }
        nxt[t] = nx;
    }
    const unsigned b = __ballot_sync(0xffffffffu, first);  /* every warp votes; leaders are in warps 0 and 1 */
    if (t < 64 && lane == 0) wl[t / 32] = __popc(b);
    __syncthreads();
    if (first) lead[(t >= 32 ? wl[0] : 0) + __popc(b & ((1u << lane) - 1u))] = t;
    const int nl = wl[0] + wl[1];
    __syncthreads();
    for (int e = t; e < nl * D; e += 256) {
        const int k = lead[e / D], d = e % D;
        float s = 0.f;
        for (int j = k; j >= 0; j = nxt[j]) s += src[(m0 + j) * D + d];
        atomicAdd(&y[tgt[k] * D + d], ALPHA * s);
    }
}
"""
_IA_OWN = """
/* row ownership, no global atomics: a block of 256 owns R consecutive output rows (an R x D tile of shared memory,
   R * D <= 8192) and scans every index, 256 at a time; the source rows that land in its range are compacted
   (a ballot per warp, the warps' counts through shared memory) and their elements added into the tile (shared
   atomics). The block then writes base plus its tile: every output element written once */
__global__ void __launch_bounds__(256) ia_own(const float* __restrict__ base, const long long* __restrict__ idx,
                                              const float* __restrict__ src, float* __restrict__ y, long long N,
                                              long long M, int D, int R) {
    extern __shared__ float acc[];  /* R * D */
    __shared__ long long hit[256];
    __shared__ int wcnt[8];
    const long long r0 = (long long)blockIdx.x * R;
    const int nr = (int)(N - r0 < R ? N - r0 : R);
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    for (int e = threadIdx.x; e < nr * D; e += 256) acc[e] = 0.f;
    __syncthreads();
    for (long long m0 = 0; m0 < M; m0 += 256) {
        const long long m = m0 + threadIdx.x;
        const bool own = m < M && (unsigned long long)(idx[m] - r0) < (unsigned long long)nr;
        const unsigned b = __ballot_sync(0xffffffffu, own);
        if (lane == 0) wcnt[w] = __popc(b);
        __syncthreads();
        int off = 0, total = 0;
        for (int i = 0; i < 8; ++i) {
            off += i < w ? wcnt[i] : 0;
            total += wcnt[i];
        }
        if (own) hit[off + __popc(b & ((1u << lane) - 1u))] = m;
        __syncthreads();
        for (int e = threadIdx.x; e < total * D; e += 256) {
            const int k = e / D, d = e - k * D;
            const long long sm = hit[k];
            atomicAdd(&acc[(int)(idx[sm] - r0) * D + d], ALPHA * src[sm * D + d]);
        }
        __syncthreads();  /* hit and wcnt are written again */
    }
    for (int e = threadIdx.x; e < nr * D; e += 256) y[r0 * D + e] = base[r0 * D + e] + acc[e];
}
"""
_IA_OWN_LAUNCH = """    const int R = D >= 8192 ? 1 : (int)(8192 / D);  /* rows per block: at most 8192 floats */
    const size_t smem = (size_t)R * D * sizeof(float);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(ia_own, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    ia_own<<<(unsigned)((N + R - 1) / R), 256, smem, stream>>>(base, idx, src, y, N, M, (int)D, R);"""


def _ia_variants(alpha: float) -> list[TorchVariant]:
    head = _IA_HEAD % repr(alpha)
    specs = [
        ("atomic_per_element", ["naive", "atomics", "coalesced", "block_256"], _IA_ELEM,
         "    ia_elem<<<(unsigned)((M * D + 255) / 256), 256, 0, stream>>>(idx, src, y, M, (int)D);"),
        ("thread_per_source_row", ["thread_per_row", "atomics", "strided", "block_128"], _IA_THREAD_ROW,
         "    ia_thread_row<<<(unsigned)((M + 127) / 128), 128, 0, stream>>>(idx, src, y, M, (int)D);"),
        ("warp_per_row_vec4", ["block_per_row", "vectorized", "atomics", "coalesced", "block_256"], _IA_WARP_VEC4,
         "    ia_warp_vec4<<<(unsigned)((M + 7) / 8), 256, 0, stream>>>(idx, src, y, M, (int)D);"),
        ("block_per_source_row", ["block_per_row", "atomics", "coalesced", "block_128"], _IA_BLOCK_ROW,
         "    ia_block_row<<<(unsigned)M, 128, 0, stream>>>(idx, src, y, (int)D);"),
        ("grid_stride_atomics", ["grid_stride", "small_grid", "atomics", "coalesced", "block_512"], _IA_GRID_STRIDE,
         _IA_GRID_STRIDE_LAUNCH),
        ("tile_combine_duplicates", ["shared_tiling", "atomics", "warp_vote", "block_256"], _IA_TILE,
         "    ia_tile<<<(unsigned)((M + 63) / 64), 256, 0, stream>>>(idx, src, y, M, (int)D);"),
    ]
    out = [TorchVariant(name, tuple(tags), head + kernel + _IA_ENTRY % (_IA_COPY + launch))
           for name, tags, kernel, launch in specs]
    own_tags = ("shared_tiling", "warp_vote", "atomics", "fused", "block_256")
    out.append(TorchVariant("row_ownership_scan", own_tags, head + _IA_OWN + _IA_ENTRY % _IA_OWN_LAUNCH))
    return out


_IA_PATTERNS = ("uniform", "sorted", "skewed", "few")
_IA_DIMS = [(16,), (32,), (50,), (64,), (100,), (128,), (150,), (256,), (333,), (512,), (5, 25), (8, 16), (3, 33),
            (16, 32), (6, 50)]  # a third of the widths not multiples of 4 (no float4 path)


def _ia_shapes(pattern: str) -> list[tuple]:
    rows = [16, 32, 64, 128, 256] if pattern == "few" else [1000, 5000, 20000, 65536, 100000, 250000]
    out = []
    for n, m, dims in itertools.product(rows, [8192, 20000, 65536, 100000, 262144, 500000, 1048576], _IA_DIMS):
        d = math.prod(dims)
        r = 1 if d >= 8192 else 8192 // d
        if not 2**22 <= m * d <= (2**23 if pattern == "few" else 2**25):  # 16 to 128 MB of sources (32 MB: few)
            continue
        if n * d > 2**24 or -(-n // r) * m > 2**28:  # base at most 64 MB; row ownership reads 2^28 indices at most
            continue
        out.append((n, m, dims))
    return out


def _ia_hot_count(pattern: str, n: int, m: int) -> float:
    """A bound on the largest number of source rows sharing a target (expected count plus six deviations)."""
    p = n ** -0.5 if pattern == "skewed" else 1.0 / n  # skewed: index = perm[floor(u^2 N)], P(row perm[0]) = N^-1/2
    return m * p + 6 * math.sqrt(m * p) + 10


def index_add_rows(index: int) -> GeneratedTorchTask:
    rng = rng_for("index_add_rows", index)
    pattern = _IA_PATTERNS[index % len(_IA_PATTERNS)]
    shapes = shuffled(f"index_add_rows:{pattern}", _ia_shapes(pattern))
    n, m, dims = shapes[(index // len(_IA_PATTERNS)) % len(shapes)]
    d = math.prod(dims)
    alpha = 1.0 if rng.random() < 0.4 else round(float(rng.choice([-1, 1]) * rng.uniform(0.25, 2.0)), 3)
    spread = round(float(rng.uniform(0.5, 2.0)), 3)
    shape = ", ".join(map(str, dims))
    index_expr = {
        "uniform": f"torch.randint(0, {n}, (batch_size,))",
        "few": f"torch.randint(0, {n}, (batch_size,))",
        "sorted": f"torch.randint(0, {n}, (batch_size,)).sort().values",
        "skewed": f"torch.randperm({n})[(torch.rand(batch_size) ** 2 * {n}).long().clamp_(max={n - 1})]",
    }[pattern]
    what = {"uniform": "uniform", "few": f"uniform over only {n} rows", "sorted": "uniform, sorted",
            "skewed": "skewed (a power law over a random permutation of the rows)"}[pattern]
    call = "base.index_add(0, index, src)" if alpha == 1.0 else f"base.index_add(0, index, src, alpha={alpha!r})"
    source = problem_source(
        f"y = {call}: base of shape ({n}, {shape}), index of batch_size int64 rows in [0, {n}) ({what}, with "
        f"repeats), src of shape (batch_size, {shape}).", call,
        f"torch.randn({n}, {shape}), {index_expr}, torch.randn(batch_size, {shape}) * {spread}",
        forward_args="base, index, src", batch_size=m)
    tid = task_id("index_add_rows", index)
    c_max = _ia_hot_count(pattern, n, m)
    # see the module docstring: two orders of c float32 additions of terms of size s differ by ~1e-7 c s at worst
    atol = float(f"{1e-4 + 1e-6 * c_max * abs(alpha) * spread:.3g}")
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"index_add of {m} rows of {d} into {n} rows ({pattern} indices)",
                       tolerance=DtypeTolerance(fp32=(atol, 1e-4)))
    variants = _ia_variants(alpha)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "index_add_rows", index,
                              {"rows": n, "index_len": m, "dim": d, "layout": "3d" if len(dims) == 2 else "2d",
                               "inner": dims[-1] if len(dims) == 2 else None, "pattern": pattern, "alpha": alpha,
                               "spread": spread, "hot_count": round(c_max, 1)}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# topk_rows: torch.topk(x, k, dim=-1, largest=..., sorted=True).values

_TK_HEAD = """constexpr int K = %d;          /* values per row, sorted from the best */
constexpr float SGN = %s;     /* 1: the largest k; -1: the smallest k, as the largest k of -x (exact) */
"""
_TK_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 1 || n_out != 1 || in[0].ndim < 1 || in[0].dtype != DT_FLOAT32 || out[0].dtype != DT_FLOAT32)
        return 1;
    const int L = (int)in[0].shape[in[0].ndim - 1];
    if (L < K || L > 8192) return 1;  /* the row lengths these kernels are written for */
    const long long rows = in[0].numel / L;
    if (out[0].numel != rows * K) return 1;
    if (rows == 0) return 0;
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_TK_WARP_ARGMAX = """
/* the warp's largest (m, owner) pair, ties to the lowest owner, in every lane (xor shuffles: all lanes agree) */
__device__ __forceinline__ void warp_argmax(float& m, int& who) {
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o);
        const int ow = __shfl_xor_sync(0xffffffffu, who, o);
        if (om > m || (om == m && ow < who)) {
            m = om;
            who = ow;
        }
    }
}
/* v into the descending buffer best[0..K): it must beat best[K - 1]; smaller entries move down one place */
__device__ __forceinline__ void insert_desc(float* best, float v) {
    if (!(v > best[K - 1])) return;
    int i = K - 1;
    while (i > 0 && best[i - 1] < v) {
        best[i] = best[i - 1];
        --i;
    }
    best[i] = v;
}
"""
_TK_THREAD = """
/* a thread per row: a descending buffer of the best K so far (local memory), each element inserted if it beats the
   buffer's last */
__global__ void __launch_bounds__(128) tk_thread(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                 int L) {
    const long long r = (long long)blockIdx.x * 128 + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * L;
    float best[K];
    for (int i = 0; i < K; ++i) best[i] = -INFINITY;
    for (int c = 0; c < L; ++c) insert_desc(best, SGN * xr[c]);
    for (int i = 0; i < K; ++i) y[r * K + i] = SGN * best[i];
}
"""
_TK_WARP = """
/* a warp per row, 8 per block: each lane keeps the best K of its strided elements, then K rounds take the warp's
   largest head (ties to the lowest lane), whose lane steps on to its next */
__global__ void __launch_bounds__(256) tk_warp(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                               int L) {
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  /* whole warps leave together */
    const float* xr = x + r * L;
    float best[K];
    for (int i = 0; i < K; ++i) best[i] = -INFINITY;
    for (int c = lane; c < L; c += 32) insert_desc(best, SGN * xr[c]);
    int h = 0;
    for (int k = 0; k < K; ++k) {
        float m = h < K ? best[h] : -INFINITY;
        int who = lane;
        warp_argmax(m, who);
        if (lane == who) ++h;
        if (lane == 0) y[r * K + k] = SGN * m;
    }
}
"""
_TK_BITONIC = """
/* a block of 512 per row: the row, padded with -inf to P (the power of two >= L, at most 8192: 32 KB), sorted
   descending in shared memory by a bitonic network; the first K written */
__global__ void __launch_bounds__(512) tk_bitonic(const float* __restrict__ x, float* __restrict__ y, int L, int P) {
    extern __shared__ float s[];  /* P */
    const float* xr = x + (long long)blockIdx.x * L;
    for (int i = threadIdx.x; i < P; i += 512) s[i] = i < L ? SGN * xr[i] : -INFINITY;
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < P / 2; t += 512) {
                const int i = 2 * t - (t & (stride - 1));  /* the lower element of the t-th pair */
                const int j = i + stride;
                const bool desc = (i & size) == 0;           /* this run sorts descending (the last one: all) */
                const float a = s[i], b = s[j];
                if (desc ? a < b : a > b) {
                    s[i] = b;
                    s[j] = a;
                }
            }
            __syncthreads();
        }
    for (int i = threadIdx.x; i < K; i += 512) y[(long long)blockIdx.x * K + i] = SGN * s[i];
}
"""
_TK_BITONIC_LAUNCH = """    int P = 1;
    while (P < L) P <<= 1;
    tk_bitonic<<<(unsigned)rows, 512, (size_t)P * sizeof(float), stream>>>(x, y, L, P);"""
_TK_ARGMAX = """
/* a block of 256 per row, the row in shared memory: K rounds, each a block-wide argmax (value, then lowest index:
   shuffles, then the 8 warps' winners in shared memory); the winner is written and its slot set to -inf */
__global__ void __launch_bounds__(256) tk_argmax(const float* __restrict__ x, float* __restrict__ y, int L) {
    extern __shared__ float s[];  /* L */
    __shared__ float wv[8];
    __shared__ int wi[8];
    const long long r = blockIdx.x;
    const float* xr = x + r * L;
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    for (int i = threadIdx.x; i < L; i += 256) s[i] = SGN * xr[i];
    __syncthreads();
    for (int k = 0; k < K; ++k) {
        float m = -INFINITY;
        int at = 0x7fffffff;
        for (int i = threadIdx.x; i < L; i += 256)
            if (s[i] > m) {
                m = s[i];
                at = i;
            }
        warp_argmax(m, at);
        if (lane == 0) {
            wv[w] = m;
            wi[w] = at;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float bm = wv[0];
            int bi = wi[0];
            for (int j = 1; j < 8; ++j)
                if (wv[j] > bm || (wv[j] == bm && wi[j] < bi)) {
                    bm = wv[j];
                    bi = wi[j];
                }
            y[r * K + k] = SGN * bm;
            s[bi] = -INFINITY;
        }
        __syncthreads();
    }
}
"""
_TK_ARGMAX_LAUNCH = "    tk_argmax<<<(unsigned)rows, 256, (size_t)L * sizeof(float), stream>>>(x, y, L);"
_TK_TWO_PASS = """
/* pass 1: a warp per chunk of 256 elements of a row (8 warps per block): each lane sorts its 8 elements (strided by
   32) in registers with a compare-exchange network, then K rounds of warp argmax over the lanes' heads write the
   chunk's best K, descending (-inf where a short last chunk runs out) */
__global__ void __launch_bounds__(256) tk_chunk(const float* __restrict__ x, float* __restrict__ part,
                                                long long rows, int L, int nch) {
    const long long g = (long long)blockIdx.x * 8 + threadIdx.x / 32;  /* row g / nch, chunk g % nch */
    const int lane = threadIdx.x % 32;
    if (g >= rows * nch) return;  /* whole warps leave together */
    const float* xr = x + (g / nch) * L;
    const int c0 = (int)(g % nch) * 256;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int c = c0 + lane + 32 * i;
        v[i] = c < L ? SGN * xr[c] : -INFINITY;
    }
#pragma unroll
    for (int i = 0; i < 7; ++i)
#pragma unroll
        for (int j = 0; j < 7 - i; ++j)
            if (v[j] < v[j + 1]) {
                const float t = v[j];
                v[j] = v[j + 1];
                v[j + 1] = t;
            }
    for (int k = 0; k < K; ++k) {
        float m = v[0];
        int who = lane;
        warp_argmax(m, who);
        if (lane == who) {  /* the winner's next element moves to the head */
#pragma unroll
            for (int i = 0; i < 7; ++i) v[i] = v[i + 1];
            v[7] = -INFINITY;
        }
        if (lane == 0) part[g * K + k] = m;
    }
}
/* pass 2: a warp per row (8 per block) merges the row's nch <= 32 sorted lists, lane l walking list l */
__global__ void __launch_bounds__(256) tk_merge(const float* __restrict__ part, float* __restrict__ y, long long rows,
                                                int nch) {
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float* pr = part + r * nch * K;
    int h = 0;
    for (int k = 0; k < K; ++k) {
        float m = lane < nch && h < K ? pr[lane * K + h] : -INFINITY;
        int who = lane;
        warp_argmax(m, who);
        if (lane == who) ++h;
        if (lane == 0) y[r * K + k] = SGN * m;
    }
}
"""
_TK_TWO_PASS_LAUNCH = """    const int nch = (L + 255) / 256;  /* at most 32 (L <= 8192) */
    float* part = 0;
    if (cudaMallocAsync((void**)&part, (size_t)(rows * nch) * K * sizeof(float), stream) != cudaSuccess) return 3;
    tk_chunk<<<(unsigned)((rows * nch + 7) / 8), 256, 0, stream>>>(x, part, rows, L, nch);
    tk_merge<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(part, y, rows, nch);
    if (cudaFreeAsync(part, stream) != cudaSuccess) return 3;"""
_TK_ROUNDS = """
/* a warp per row (8 per block), no buffers: each round is one pass over the row finding the largest value below
   the last one taken and how often it occurs ((max, count) per lane, merged by shuffles); it is written that many
   times, at most the K - taken still wanted. At most K passes, fewer with ties */
__global__ void __launch_bounds__(256) tk_rounds(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                 int L) {
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float* xr = x + r * L;
    float* yr = y + r * K;
    float bar = INFINITY;  /* every value taken so far is >= bar; the next ones are the largest below it */
    int taken = 0;
    while (taken < K) {  /* warp-uniform: every lane holds the same taken and bar */
        float m = -INFINITY;
        int cnt = 0;
        for (int c = lane; c < L; c += 32) {
            const float v = SGN * xr[c];
            if (v < bar) {
                if (v > m) {
                    m = v;
                    cnt = 1;
                } else if (v == m) {
                    ++cnt;
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m, o);
            const int oc = __shfl_xor_sync(0xffffffffu, cnt, o);
            if (om > m) {
                m = om;
                cnt = oc;
            } else if (om == m) {
                cnt += oc;
            }
        }
        if (cnt == 0) break;  /* nothing below bar: cannot happen while taken < K <= L */
        const int n = cnt < K - taken ? cnt : K - taken;
        for (int i = lane; i < n; i += 32) yr[taken + i] = SGN * m;
        taken += n;
        bar = m;
    }
}
"""


def _tk_variants(k: int, largest: bool) -> list[TorchVariant]:
    head = _TK_HEAD % (k, "1.f" if largest else "-1.f") + _TK_WARP_ARGMAX
    specs = [
        ("thread_per_row_insertion", ["thread_per_row", "strided", "branch_divergent", "block_128"], _TK_THREAD,
         "    tk_thread<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>(x, y, rows, L);"),
        ("warp_per_row_merge", ["block_per_row", "warp_shuffle", "coalesced", "block_256"], _TK_WARP,
         "    tk_warp<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, L);"),
        ("block_bitonic_shared", ["block_per_row", "sorting_network", "shared_tiling", "block_512"], _TK_BITONIC,
         _TK_BITONIC_LAUNCH),
        ("block_argmax_rounds", ["block_per_row", "warp_shuffle", "shared_tiling", "block_256"], _TK_ARGMAX,
         _TK_ARGMAX_LAUNCH),
        ("two_pass_chunk_merge", ["multi_pass", "two_level", "sorting_network", "warp_shuffle", "unrolled",
                                  "block_256"], _TK_TWO_PASS, _TK_TWO_PASS_LAUNCH),
        ("warp_threshold_rounds", ["block_per_row", "warp_shuffle", "coalesced", "branch_divergent", "block_256"],
         _TK_ROUNDS, "    tk_rounds<<<(unsigned)((rows + 7) / 8), 256, 0, stream>>>(x, y, rows, L);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _TK_ENTRY % launch) for name, tags, kernel, launch in specs]


_TK_LENGTHS = [64, 96, 100, 128, 255, 256, 500, 512, 1000, 1024, 2000, 2048, 3000, 4096, 5000, 6144, 8192]
_TK_SHAPES = [(b, h, n) for b, h, n in itertools.product([128, 256, 512, 1000, 1024, 2048, 4096, 8192, 16384, 32768,
                                                          65536, 131072, 262144], [None, 4, 12], _TK_LENGTHS)
              if 2**20 <= b * (h or 1) * n <= 2**25]  # 4 to 128 MB of input


def topk_rows(index: int) -> GeneratedTorchTask:
    rng = rng_for("topk_rows", index)
    shapes = shuffled("topk_rows", _TK_SHAPES)
    b, h, n = shapes[index % len(shapes)]
    k = int(rng.integers(1, 33))
    largest = bool(rng.random() < 0.7)
    data = str(rng.choice(["normal", "ties", "ramp"], p=[0.5, 0.25, 0.25]))
    spread = round(float(rng.uniform(0.5, 3.0)), 3)
    dims = f"batch_size, {h}, {n}" if h else f"batch_size, {n}"
    if data == "normal":
        x = f"torch.randn({dims}) * {spread}"
        what = "normal values"
    elif data == "ties":  # about two copies of each value per row: ties inside the top k, yet rows differ
        q = n // 4
        x = f"torch.randint(-{q}, {q + 1}, ({dims},)).float() / 8"
        what = f"multiples of 1/8 in [-{q / 8}, {q / 8}] (each value about twice per row: ties)"
    else:
        lo, hi = (-spread, spread) if rng.random() < 0.5 else (spread, -spread)
        x = f"torch.randn({dims}) * 0.05 + torch.linspace({lo!r}, {hi!r}, {n})"
        what = f"a ramp from {lo} to {hi} along each row with noise"
    expr = f"torch.topk(x, {k}, dim=-1, largest={largest}, sorted=True).values"
    source = problem_source(
        f"y = {expr}: the {k} {'largest' if largest else 'smallest'} values of each row of length {n}, sorted, of an "
        f"input of shape ({dims}) holding {what}.", expr, x, batch_size=b)
    tid = task_id("topk_rows", index)
    # the outputs are input values, exactly (ties give the same values whichever element is taken)
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"top-{k} {'largest' if largest else 'smallest'} of rows of {n}",
                       tolerance=DtypeTolerance(fp32=(0.0, 0.0)))
    variants = _tk_variants(k, largest)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "topk_rows", index,
                              {"batch": b, "heads": h, "length": n, "k": k, "largest": largest, "data": data,
                               "spread": spread}, tuple(variants))


# ---------------------------------------------------------------------------------------------------------------
# histc_bins: torch.histc(x, bins, min, max), summed over one to three inputs

_HC_HEAD = """constexpr int BINS = %d;
constexpr float LO = %sf, HI = %sf;  /* histc's min and max (exact in float32) */
constexpr int NIN = %d;              /* inputs, counted into one histogram */

struct Ins {
    const float* p[NIN];
    long long n[NIN];
};

/* the bin of v as ATen computes it, (v - min) * bins / (max - min) in float32 rounded at every step, the last bin
   closed; -1 outside [min, max] (NaN included) */
__device__ __forceinline__ int bin_of(float v) {
    if (!(v >= LO && v <= HI)) return -1;
    const int b = (int)__fdiv_rn(__fmul_rn(__fsub_rn(v, LO), (float)BINS), __fsub_rn(HI, LO));
    return b < BINS ? b : BINS - 1;
}
/* element i of the inputs taken one after another */
__device__ __forceinline__ float elem(const Ins& in, long long i) {
#pragma unroll
    for (int t = 0; t < NIN - 1; ++t) {
        if (i < in.n[t]) return in.p[t][i];
        i -= in.n[t];
    }
    return in.p[NIN - 1][i];
}
"""
_HC_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != NIN || n_out != 1 || out[0].dtype != DT_FLOAT32 || out[0].numel != BINS) return 1;
    Ins ins;
    long long total = 0;
    for (int t = 0; t < NIN; ++t) {
        if (in[t].dtype != DT_FLOAT32) return 1;
        ins.p[t] = (const float*)in[t].data;
        ins.n[t] = in[t].numel;
        total += in[t].numel;
    }
    float* y = (float*)out[0].data;
    if (total == 0) return cudaMemsetAsync(y, 0, BINS * sizeof(float), stream) == cudaSuccess ? 0 : 3;
%s
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_HC_ZERO = "    if (cudaMemsetAsync(y, 0, BINS * sizeof(float), stream) != cudaSuccess) return 3;\n"
_HC_GLOBAL = """
/* a thread per element, one atomic add into the global histogram */
__global__ void hc_global(Ins in, long long total, float* y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int b = bin_of(elem(in, i));
    if (b >= 0) atomicAdd(&y[b], 1.f);
}
"""
_HC_BLOCK = """
/* a block of 256 per 4096 elements: a histogram in shared memory (shared atomics), then one global atomic add per
   nonzero bin */
__global__ void __launch_bounds__(256) hc_block(Ins in, long long total, float* y) {
    __shared__ unsigned h[BINS];
    for (int b = threadIdx.x; b < BINS; b += 256) h[b] = 0u;
    __syncthreads();
    const long long c0 = (long long)blockIdx.x * 4096;
    for (int j = threadIdx.x; j < 4096; j += 256) {
        const long long i = c0 + j;
        if (i < total) {
            const int b = bin_of(elem(in, i));
            if (b >= 0) atomicAdd(&h[b], 1u);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += 256)
        if (h[b]) atomicAdd(&y[b], (float)h[b]);
}
"""
_HC_WARP = """
/* a block of 4 warps per 2048 elements, each warp counting into its own sub-histogram in dynamic shared memory
   (less contention on hot bins; 4 x BINS counters, over 48 KB for more than 3072 bins: the kernel's limit is
   raised first), then the four added per bin and merged with global atomics */
__global__ void __launch_bounds__(128) hc_warp(Ins in, long long total, float* y) {
    extern __shared__ unsigned hw[];  /* 4 x BINS */
    for (int e = threadIdx.x; e < 4 * BINS; e += 128) hw[e] = 0u;
    __syncthreads();
    unsigned* mine = hw + (threadIdx.x / 32) * BINS;
    const long long c0 = (long long)blockIdx.x * 2048;
    for (int j = threadIdx.x; j < 2048; j += 128) {
        const long long i = c0 + j;
        if (i < total) {
            const int b = bin_of(elem(in, i));
            if (b >= 0) atomicAdd(&mine[b], 1u);
        }
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += 128) {
        const unsigned s = (hw[b] + hw[BINS + b]) + (hw[2 * BINS + b] + hw[3 * BINS + b]);
        if (s) atomicAdd(&y[b], (float)s);
    }
}
"""
_HC_WARP_LAUNCH = """    const size_t smem = 4 * BINS * sizeof(unsigned);
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(hc_warp, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
        return 3;
    hc_warp<<<(unsigned)((total + 2047) / 2048), 128, smem, stream>>>(ins, total, y);"""
_HC_PER_BIN = """
constexpr int SLICE = 8192;  /* elements per block row of the grid */
/* a thread per bin: blocks of 256 bins (gridDim.x) times slices of SLICE elements (gridDim.y). The block stages its
   slice's bins in shared memory 1024 at a time (each element binned once per block) and every thread counts the
   ones equal to its own bin: no atomics but one per bin and slice. Work grows with bins x elements */
__global__ void __launch_bounds__(256) hc_per_bin(Ins in, long long total, float* y) {
    __shared__ int sb[1024];
    const int mine = blockIdx.x * 256 + threadIdx.x;
    const long long s0 = (long long)blockIdx.y * SLICE;
    const long long s1 = s0 + SLICE < total ? s0 + SLICE : total;
    unsigned cnt = 0;
    for (long long t0 = s0; t0 < s1; t0 += 1024) {
        for (int j = threadIdx.x; j < 1024; j += 256) {
            const long long i = t0 + j;
            sb[j] = i < s1 ? bin_of(elem(in, i)) : -1;
        }
        __syncthreads();
#pragma unroll 8
        for (int j = 0; j < 1024; ++j) cnt += sb[j] == mine;
        __syncthreads();
    }
    if (mine < BINS && cnt) atomicAdd(&y[mine], (float)cnt);
}
"""
_HC_PER_BIN_LAUNCH = """    const long long slices = (total + SLICE - 1) / SLICE;
    if (slices > 65535) return 1;  /* gridDim.y */
    hc_per_bin<<<dim3((BINS + 255) / 256, (unsigned)slices), 256, 0, stream>>>(ins, total, y);"""
_HC_GRID_VEC4 = """
/* a small grid (2 blocks of 512 per multiprocessor) striding over each input, float4 loads where the input is
   16-byte aligned (a scalar tail), into one shared histogram per block, merged with global atomics */
__device__ __forceinline__ void count_into(unsigned* h, float v) {
    const int b = bin_of(v);
    if (b >= 0) atomicAdd(&h[b], 1u);
}
__global__ void __launch_bounds__(512) hc_grid_vec4(Ins in, float* y) {
    __shared__ unsigned h[BINS];
    for (int b = threadIdx.x; b < BINS; b += 512) h[b] = 0u;
    __syncthreads();
    const long long tid = (long long)blockIdx.x * 512 + threadIdx.x, nth = (long long)gridDim.x * 512;
    for (int t = 0; t < NIN; ++t) {
        const float* p = in.p[t];
        const long long n = in.n[t];
        long long done = 0;
        if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) {
            const float4* p4 = reinterpret_cast<const float4*>(p);
            const long long nq = n / 4;
            for (long long q = tid; q < nq; q += nth) {
                const float4 v = p4[q];
                count_into(h, v.x);
                count_into(h, v.y);
                count_into(h, v.z);
                count_into(h, v.w);
            }
            done = nq * 4;
        }
        for (long long i = done + tid; i < n; i += nth) count_into(h, p[i]);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += 512)
        if (h[b]) atomicAdd(&y[b], (float)h[b]);
}
"""
_HC_GRID_VEC4_LAUNCH = """    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
        sms = 132;
    const long long want = (total + 2047) / 2048;
    const long long blocks = want < 2LL * sms ? want : 2LL * sms;
    hc_grid_vec4<<<(unsigned)blocks, 512, 0, stream>>>(ins, y);"""
_HC_TWO_PASS = """
/* pass 1: G blocks (at most 512) stride over the elements into a shared histogram each, written whole to their row
   of the partial counts (no global atomics); pass 2: a thread per bin adds the G rows (coalesced across bins) and
   writes the count */
__global__ void __launch_bounds__(256) hc_partial(Ins in, long long total, unsigned* __restrict__ part) {
    __shared__ unsigned h[BINS];
    for (int b = threadIdx.x; b < BINS; b += 256) h[b] = 0u;
    __syncthreads();
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < total; i += (long long)gridDim.x * 256) {
        const int b = bin_of(elem(in, i));
        if (b >= 0) atomicAdd(&h[b], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += 256) part[(long long)blockIdx.x * BINS + b] = h[b];
}
__global__ void hc_sum(const unsigned* __restrict__ part, int G, float* __restrict__ y) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= BINS) return;
    unsigned s = 0;
    for (int g = 0; g < G; ++g) s += part[(long long)g * BINS + b];
    y[b] = (float)s;
}
"""
_HC_TWO_PASS_LAUNCH = """    const long long want = (total + 4095) / 4096;
    const int G = (int)(want < 512 ? want : 512);
    unsigned* part = 0;
    if (cudaMallocAsync((void**)&part, (size_t)G * BINS * sizeof(unsigned), stream) != cudaSuccess) return 3;
    hc_partial<<<G, 256, 0, stream>>>(ins, total, part);
    hc_sum<<<(BINS + 255) / 256, 256, 0, stream>>>(part, G, y);
    if (cudaFreeAsync(part, stream) != cudaSuccess) return 3;"""
_HC_MATCH = """
/* a thread per element; the lanes of a warp in the same bin find each other (__match_any_sync, every lane taking
   part, -1 for none) and the lowest of them adds their number: one atomic per bin and warp */
__global__ void __launch_bounds__(256) hc_match(Ins in, long long total, float* y) {
    const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
    const int b = i < total ? bin_of(elem(in, i)) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, b);
    const int lane = threadIdx.x % 32;
    if (b >= 0 && lane == __ffs(peers) - 1) atomicAdd(&y[b], (float)__popc(peers));
}
"""


def _hc_variants(bins: int, lo: float, hi: float, n_in: int) -> list[TorchVariant]:
    head = _HC_HEAD % (bins, _float_literal(lo), _float_literal(hi), n_in)
    specs = [
        ("global_atomics", ["naive", "atomics", "coalesced", "block_256"], _HC_GLOBAL,
         _HC_ZERO + "    hc_global<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(ins, total, y);"),
        ("shared_per_block", ["shared_tiling", "atomics", "two_level", "block_256"], _HC_BLOCK,
         _HC_ZERO + "    hc_block<<<(unsigned)((total + 4095) / 4096), 256, 0, stream>>>(ins, total, y);"),
        ("warp_subhistograms", ["shared_tiling", "atomics", "two_level", "block_128"], _HC_WARP,
         _HC_ZERO + _HC_WARP_LAUNCH),
        ("thread_per_bin_scan", ["thread_per_row", "shared_tiling", "branchless", "atomics", "block_256"],
         _HC_PER_BIN, _HC_ZERO + _HC_PER_BIN_LAUNCH),
        ("grid_stride_vec4", ["grid_stride", "small_grid", "vectorized", "shared_tiling", "atomics", "block_512"],
         _HC_GRID_VEC4, _HC_ZERO + _HC_GRID_VEC4_LAUNCH),
        ("two_pass_partials", ["multi_pass", "two_level", "shared_tiling", "atomics", "block_256"], _HC_TWO_PASS,
         _HC_TWO_PASS_LAUNCH),
        ("warp_aggregated_atomics", ["warp_vote", "atomics", "coalesced", "block_256"], _HC_MATCH,
         _HC_ZERO + "    hc_match<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(ins, total, y);"),
    ]
    return [TorchVariant(name, tuple(tags), head + kernel + _HC_ENTRY % launch) for name, tags, kernel, launch in specs]


def _float_literal(v: float) -> str:
    """A C float literal of ``v`` (a multiple of 1/16, exact in float32)."""
    s = repr(float(v))
    return s if "." in s or "e" in s else s + ".0"


_HC_WIDTHS = [100, 255, 777, 1000, 1024, 3000, 4096, 8192]
_HC_BINS = [16, 32, 50, 64, 100, 128, 256, 500, 1000, 1024, 2048, 3000, 4096]
_HC_SHAPES = [(b, ws, bins) for b, ws, bins in itertools.product(
    [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
    [(w,) for w in _HC_WIDTHS] + [(1000, 255), (4096, 100), (777, 3000), (1024, 1024), (100, 255, 8192),
                                  (3000, 777, 1000)], _HC_BINS)
    if 2**20 <= b * sum(ws) <= 2**24                      # 4 to 64 MB of input; counts stay below 2^24 (exact)
    and -(-bins // 256) * 256 * b * sum(ws) <= 2**33]     # the thread-per-bin variant's comparisons


def histc_bins(index: int) -> GeneratedTorchTask:
    rng = rng_for("histc_bins", index)
    shapes = shuffled("histc_bins", _HC_SHAPES)
    b, widths, bins = shapes[index % len(shapes)]
    data = str(rng.choice(["normal", "uniform", "grid", "exponential"]))
    s = float(rng.choice([0.5, 1.0, 2.0, 4.0]))
    below, above = float(rng.uniform(1.5, 3.5)), float(rng.uniform(1.5, 3.5))
    mu = round(float(rng.uniform(-2.0, 2.0)) * 4) / 4

    def r16(v: float) -> float:  # bounds on a 1/16 grid: exact in float32, and in the problem's source
        return round(v * 16) / 16

    if data == "normal":
        gen = f"torch.randn(batch_size, {{w}}) * {s} + {mu}"
        lo, hi = r16(mu - below * s), r16(mu + above * s)
    elif data == "uniform":  # uniform over [mu - 2s, mu + 2s], the range cutting into it at one end or both
        gen = f"torch.rand(batch_size, {{w}}) * {4 * s} + {mu - 2 * s}"
        cut_lo, cut_hi = float(rng.uniform(-0.5, 1.0)), float(rng.uniform(-0.5, 1.0))
        lo, hi = r16(mu - 2 * s + s * cut_lo), r16(mu + 2 * s - s * cut_hi)
    elif data == "grid":  # values on a grid of 1/q: many fall on bin edges, on min and on max exactly
        q = int(rng.choice([4, 8, 16]))
        gen = f"torch.round(torch.randn(batch_size, {{w}}) * {s * q}) / {q}"
        lo, hi = round(-below * s * q) / q, round(above * s * q) / q
    else:  # exponential: most values in the lowest bins (hot bins for the atomics)
        gen = f"torch.empty(batch_size, {{w}}).exponential_() * {s}"
        lo, hi = 0.0, r16(above * 2 * s)
    inputs = ", ".join(gen.format(w=w) for w in widths)
    names = ["x", "z", "u"][:len(widths)]
    expr = " + ".join(f"torch.histc({v}, bins={bins}, min={lo!r}, max={hi!r})" for v in names)
    shapes_doc = ", ".join(f"(batch_size, {w})" for w in widths)
    source = problem_source(
        f"y = {expr}: a histogram of {bins} bins over [{lo}, {hi}] (values outside dropped, the last bin closed) "
        f"of {'the inputs together' if len(widths) > 1 else 'the input'}, shape{'s' if len(widths) > 1 else ''} "
        f"{shapes_doc}, as float counts.", expr, inputs, forward_args=", ".join(names), batch_size=b)
    tid = task_id("histc_bins", index)
    # integer counts below 2^24, exact in float32 in any order; the variants bin exactly as ATen does
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"histc with {bins} bins of {len(widths)} input{'s' if len(widths) > 1 else ''}",
                       tolerance=DtypeTolerance(fp32=(0.0, 0.0)))
    variants = _hc_variants(bins, lo, hi, len(widths))
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "histc_bins", index,
                              {"batch": b, "widths": widths, "bins": bins, "min": lo, "max": hi, "data": data,
                               "scale": s}, tuple(variants))
