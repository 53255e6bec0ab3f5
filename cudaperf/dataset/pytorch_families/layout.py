"""``transpose_scale``, ``upsample_bilinear`` and ``pixel_shuffle``: operators whose work is moving data between
memory layouts and computing where each element comes from, so that the variants differ in which side of the copy
they keep coalesced, how they stage data through shared memory or registers, and how much index arithmetic they
share between outputs.

The shapes of a family's problems come from a fixed shuffle of every combination of its size choices (so the first
problems never repeat a shape); the other parameters (activation, scalars, modes) are drawn from the problem's
seeded generator. The forward inputs are sized by a module-level ``batch_size`` (so the harness tries a second,
often odd, size), and every variant reads its shapes from the ``TensorArg``s.

``transpose_scale``: ``y = act(x.transpose(-1, -2).contiguous() * scale + bias)`` over a 2-D ``(batch_size, C)`` or a
batched ``(batch_size, R, C)`` input, where the bias is absent, a scalar, or a parameter of C entries drawn at init from
a seeded generator (one per input column, that is per output row: ``self.bias[:, None]``), and the activation one of
``ACTIVATIONS`` for about 60% of the problems. The index picks the layout, R and C (64 to 32768, some odd or not
multiples of 4 or 32; 8M to 32M elements), the scale (negative for some), the bias and the input's spread and offset.
Variants: a thread per input element (reads coalesced, writes R floats apart), a thread per output element (writes
coalesced, reads C floats apart through the read-only cache), 32x32 tiles through shared memory with a thread per
element without and with the +1 column of padding (the unpadded tile's column reads hit one bank 32 times), 32x32 tiles
with blocks of 32x8 threads doing four elements each, the same tiles read and written as float4 (rows whole float4s,
16-byte aligned pointers; otherwise the 32x8 kernel), a thread per 4x4 block transposed in registers with float4 loads
and stores (a scalar 4x4 kernel otherwise), and persistent blocks walking the tiles in a grid-stride loop. Each output
is one input times the scale plus the bias, then the activation: PyTorch rounds the product and the sum separately, a
variant may contract them into one fma, and the activations' CUDA forms are ulps from PyTorch's: a few ulps at outputs
of order 1 to 40. 1e-4 absolute and relative, the element-wise families' rule.

``upsample_bilinear``: ``F.interpolate(x, scale_factor=s or size=(Ho, Wo), mode='bilinear', align_corners=a)`` over
NCHW. The index picks N (the batch), C, the input plane (14x14 to 256x256, some odd or not square), a scale factor (1.5
to 4) or an output size (non-integer ratios, different per axis; 16M to 64M outputs), align_corners and the input's
spread and offset. The variants reproduce PyTorch's coordinates: the step is ``(in - 1) / (out - 1)`` with
align_corners, otherwise ``1 / scale_factor`` when a scale factor was given (not ``in / out``: for 1.5 and an odd input
they differ) or ``in / out`` for a size, in float; the source coordinate is ``step * d`` or ``max(step * (d + 0.5) -
0.5, 0)``, its floor the first tap (the second one further, except at the last input), its fraction the weight; the
blend goes along W first, then along H. Variants: a thread per output, 2-D blocks of 32x8 over the output plane (the
planes along gridDim.z, read through the read-only cache), a block per output row and eight planes with the row's column
taps and weights precomputed in shared memory, four outputs per thread along W (a float4 store when rows are whole
float4s), a thread per (n, oh, ow) walking the channels with its taps computed once, a grid-stride loop, and two passes
(along W into a scratch buffer of N*C*H*Wo, then along H). Tolerance: the blend is exact to a few ulps, but a source
coordinate is itself a rounded float, and whether ``step * (d + 0.5) - 0.5`` is rounded once (an fma) or twice depends
on the compiler (PyTorch's kernel or a variant's): one ulp of a coordinate below 256 moves a weight by up to 2^-16,
times the difference of two neighbouring inputs (up to about 20 at a spread of 2). A float32 simulation of both
roundings over 256-wide planes differs by up to 7e-5; 5e-4 absolute (1e-4 relative) leaves 7x that, and a wrong
convention (align_corners, ``in / out`` for a scale factor, a half-pixel shift) moves outputs by 1e-2 to 1.

``pixel_shuffle``: ``nn.PixelShuffle(r)`` ((N, C*r*r, H, W) to (N, C, H*r, W*r): output (c, h*r + i, w*r + j) is input
channel c*r*r + i*r + j at (h, w)) or ``nn.PixelUnshuffle(r)`` (the inverse), r from 2 to 4, then an activation for
about 60% of the problems. The index picks the direction, r, N (the batch), C, the low-resolution plane H x W (16x16 to
128x128, some W not multiples of 4; 8M to 48M elements) and the input's spread and offset. Variants: a thread per output
(gather: writes coalesced), a thread per input (scatter: reads coalesced), 2-D blocks over the output plane with the
planes along gridDim.z, a thread per low-resolution pixel moving its r x r elements through registers, float4 loads and
stores where W is a multiple of 4 (r float4 in, r float4 out per thread; the r x r kernel otherwise), a grid-stride
loop, and a block per high-resolution row staging its r low-resolution rows (or the row itself) in shared memory so that
both sides are coalesced. A pure permutation: outputs are inputs, or their activations (ulps from PyTorch's); 1e-4
absolute and relative, the element-wise families' rule.
"""

from __future__ import annotations

import itertools
import math

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, shuffled, task_id)
from cudaperf.tasks.pytorch import DtypeTolerance, PyTorchTask

_ACTS = list(ACTIVATIONS)


def _act_c(act: str | None) -> str:
    return ACTIVATIONS[act][1].format(v="v") if act else "v"


def _act_t(act: str | None, v: str) -> str:
    return ACTIVATIONS[act][0].format(v=v) if act else v


def _variants(specs, head: str, entry: str) -> list[TorchVariant]:
    return [TorchVariant(name, tuple(tags), head + kernel + entry.replace("{launch}", launch))
            for name, tags, kernel, launch in specs]


# ---------------------------------------------------------------------------------------------------------------
# transpose_scale: y = act(x.transpose(-1, -2).contiguous() * scale + bias)

_TR_HEAD = """constexpr float SCALE = {scale}f;
constexpr float BIAS = {bias}f;       /* the scalar bias (0 when there is none, or one per column) */
constexpr bool COL_BIAS = {col_bias};  /* a bias per input column (output row): in[1], C floats */

__device__ __forceinline__ float act(float v) {{
    return {act};
}}

/* the output made of input v, in output row c (input column c) */
__device__ __forceinline__ float epi(float v, const float* __restrict__ cb, long long c) {{
    return act(v * SCALE + (COL_BIAS ? cb[c] : BIAS));
}}
"""
_TR_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != (COL_BIAS ? 2 : 1) || n_out != 1 || in[0].ndim < 2 || in[0].dtype != DT_FLOAT32 ||
        out[0].dtype != DT_FLOAT32)
        return 1;
    const int nd = in[0].ndim;
    const long long R = in[0].shape[nd - 2], C = in[0].shape[nd - 1];  /* each matrix is R x C, y's are C x R */
    if (out[0].numel != in[0].numel || out[0].ndim != nd || out[0].shape[nd - 2] != C || out[0].shape[nd - 1] != R)
        return 1;
    const long long n = in[0].numel;
    if (n == 0) return 0;
    if (COL_BIAS && in[1].numel != C) return 1;
    const long long B = n / (R * C);  /* matrices in the batch */
    const float* x = (const float*)in[0].data;
    const float* cb = COL_BIAS ? (const float*)in[1].data : x;  /* not read without a column bias */
    float* y = (float*)out[0].data;
    const unsigned gz = (unsigned)(B < 65535 ? B : 65535);  /* tile kernels loop over matrices past gridDim.z */
    (void)gz;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_TR_ARGS = ("(const float* __restrict__ x, const float* __restrict__ cb,\n"
            "        float* __restrict__ y, long long")
_TR_BY_INPUT = """
/* a thread per input element, in the input's order: reads coalesced, writes R floats apart */
__global__ void tr_by_input""" + _TR_ARGS + """ n, long long R, long long C) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long c = i % C, t = i / C, r = t % R, b = t / R;
    y[(b * C + c) * R + r] = epi(x[i], cb, c);
}
"""
_TR_BY_OUTPUT = """
/* a thread per output element, in the output's order: writes coalesced, reads C floats apart through the read-only
   cache */
__global__ void tr_by_output""" + _TR_ARGS + """ n, long long R, long long C) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long r = i % R, t = i / R, c = t % C, b = t / C;
    y[i] = epi(__ldg(x + (b * R + r) * C + c), cb, c);
}
"""
_TR_TILE32 = """
constexpr int PAD = {pad};  /* {pad_note} */

/* 32 x 32 tiles through shared memory, a block of 32 x 32 threads and one element per thread: a tile's rows are read
   from x coalesced, and its columns written to rows of y coalesced */
__global__ void __launch_bounds__(1024) tr_tile32""" + _TR_ARGS + """ B, long long R, long long C) {
    __shared__ float tile[32][32 + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c0 = (long long)blockIdx.x * 32, r0 = (long long)blockIdx.y * 32;
    for (long long b = blockIdx.z; b < B; b += gridDim.z) {  /* the same trip count for the whole block */
        const float* xb = x + b * R * C;
        float* yb = y + b * R * C;
        if (r0 + ty < R && c0 + tx < C) tile[ty][tx] = xb[(r0 + ty) * C + c0 + tx];
        __syncthreads();
        /* output row c0 + ty (an input column), column r0 + tx (an input row): down a column of the tile */
        if (c0 + ty < C && r0 + tx < R) yb[(c0 + ty) * R + r0 + tx] = epi(tile[tx][ty], cb, c0 + ty);
        __syncthreads();  /* the tile is read before the next matrix overwrites it */
    }
}
"""
_TR_TILE_LAUNCH = """    if ((R + 31) / 32 > 65535) return 3;
    tr_{k}<<<dim3((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), gz), {block}, 0, stream>>>(x, cb, y, B, R,
                                                                                                 C);"""
_TR_TILE32X8 = """
constexpr int TILE = 32, ROWS = 8;  /* a 32 x 32 tile, blocks of 32 x 8 threads: four elements per thread */

/* 32 x 32 tiles (padded) through shared memory; each thread loads four rows of the tile and writes four rows of y */
__global__ void __launch_bounds__(256) tr_tile32x8""" + _TR_ARGS + """ B, long long R, long long C) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c0 = (long long)blockIdx.x * TILE, r0 = (long long)blockIdx.y * TILE;
    for (long long b = blockIdx.z; b < B; b += gridDim.z) {  /* the same trip count for the whole block */
        const float* xb = x + b * R * C;
        float* yb = y + b * R * C;
#pragma unroll
        for (int k = 0; k < TILE; k += ROWS)
            if (r0 + ty + k < R && c0 + tx < C) tile[ty + k][tx] = xb[(r0 + ty + k) * C + c0 + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; k += ROWS)
            if (c0 + ty + k < C && r0 + tx < R)
                yb[(c0 + ty + k) * R + r0 + tx] = epi(tile[tx][ty + k], cb, c0 + ty + k);
        __syncthreads();
    }
}
"""
_TR_VEC4 = _TR_TILE32X8 + """
/* 32 x 32 tiles moved as float4, blocks of 8 x 32 threads: thread (tx, ty) loads columns 4tx..4tx+3 of tile row ty
   with one float4, and stores output row ty's columns 4tx..4tx+3 (tile column ty, rows 4tx..4tx+3) with one float4.
   R and C are multiples of 4 and the pointers 16-byte aligned (the host checks), so a float4 is wholly inside or
   wholly outside the matrix. Bank of tile[r][c] is (r + c) % 32 (rows of 33): a warp (tx 0..7, four ty) hits 32
   different banks both ways. */
__global__ void __launch_bounds__(256) tr_tile_vec4""" + _TR_ARGS + """ B, long long R, long long C) {
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long c0 = (long long)blockIdx.x * 32, r0 = (long long)blockIdx.y * 32;
    for (long long b = blockIdx.z; b < B; b += gridDim.z) {
        const float* xb = x + b * R * C;
        float* yb = y + b * R * C;
        if (r0 + ty < R && c0 + 4 * tx < C) {
            const float4 v = *reinterpret_cast<const float4*>(xb + (r0 + ty) * C + c0 + 4 * tx);
            tile[ty][4 * tx] = v.x;
            tile[ty][4 * tx + 1] = v.y;
            tile[ty][4 * tx + 2] = v.z;
            tile[ty][4 * tx + 3] = v.w;
        }
        __syncthreads();
        const long long oc = c0 + ty;
        if (oc < C && r0 + 4 * tx < R)
            *reinterpret_cast<float4*>(yb + oc * R + r0 + 4 * tx) =
                make_float4(epi(tile[4 * tx][ty], cb, oc), epi(tile[4 * tx + 1][ty], cb, oc),
                            epi(tile[4 * tx + 2][ty], cb, oc), epi(tile[4 * tx + 3][ty], cb, oc));
        __syncthreads();
    }
}
"""
_TR_VEC4_LAUNCH = """    if ((R + 31) / 32 > 65535) return 3;
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), gz);
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    if (R % 4 == 0 && C % 4 == 0 && (bits & 15) == 0)
        tr_tile_vec4<<<grid, dim3(8, 32), 0, stream>>>(x, cb, y, B, R, C);
    else
        tr_tile32x8<<<grid, dim3(32, 8), 0, stream>>>(x, cb, y, B, R, C);"""
_TR_REG4 = """
/* a thread per 4 x 4 block, transposed in registers: four float4 loads (rows r0..r0+3 of x, columns c0..c0+3) and
   four float4 stores (rows c0..c0+3 of y, columns r0..r0+3) when R and C are multiples of 4 and the pointers
   16-byte aligned (VEC); otherwise element by element, each checked against the edges */
template <bool VEC>
__global__ void tr_reg4x4""" + _TR_ARGS + """ B, long long R, long long C) {
    const long long Rq = (R + 3) / 4, Cq = (C + 3) / 4;
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= B * Rq * Cq) return;
    const long long cq = q % Cq, t = q / Cq, rq = t % Rq, b = t / Rq;
    const long long r0 = 4 * rq, c0 = 4 * cq;
    const float* xb = x + b * R * C;
    float* yb = y + b * R * C;
    float v[4][4];
    if (VEC) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 a = *reinterpret_cast<const float4*>(xb + (r0 + i) * C + c0);
            v[i][0] = a.x;
            v[i][1] = a.y;
            v[i][2] = a.z;
            v[i][3] = a.w;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long oc = c0 + j;
            *reinterpret_cast<float4*>(yb + oc * R + r0) =
                make_float4(epi(v[0][j], cb, oc), epi(v[1][j], cb, oc), epi(v[2][j], cb, oc), epi(v[3][j], cb, oc));
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) v[i][j] = (r0 + i < R && c0 + j < C) ? xb[(r0 + i) * C + c0 + j] : 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i)
                if (c0 + j < C && r0 + i < R) yb[(c0 + j) * R + r0 + i] = epi(v[i][j], cb, c0 + j);
    }
}
"""
_TR_REG4_LAUNCH = """    const long long quads = B * ((R + 3) / 4) * ((C + 3) / 4);
    const unsigned blocks = (unsigned)((quads + 127) / 128);
    const unsigned long long bits = reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    if (R % 4 == 0 && C % 4 == 0 && (bits & 15) == 0)
        tr_reg4x4<true><<<blocks, 128, 0, stream>>>(x, cb, y, B, R, C);
    else
        tr_reg4x4<false><<<blocks, 128, 0, stream>>>(x, cb, y, B, R, C);"""
_TR_PERSISTENT = """
/* persistent blocks of 32 x 8 threads: each walks the (matrix, tile row, tile column) tiles in a grid-stride loop,
   a padded 32 x 32 tile at a time, four elements per thread */
__global__ void __launch_bounds__(256) tr_tiles_persistent""" + _TR_ARGS + """ B, long long R, long long C) {
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long tc = (C + 31) / 32, tr = (R + 31) / 32, tiles = B * tr * tc;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {  /* the same trip count for the whole block */
        const long long c0 = t % tc * 32, r0 = t / tc % tr * 32, b = t / (tc * tr);
        const float* xb = x + b * R * C;
        float* yb = y + b * R * C;
#pragma unroll
        for (int k = 0; k < 32; k += 8)
            if (r0 + ty + k < R && c0 + tx < C) tile[ty + k][tx] = xb[(r0 + ty + k) * C + c0 + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 32; k += 8)
            if (c0 + ty + k < C && r0 + tx < R)
                yb[(c0 + ty + k) * R + r0 + tx] = epi(tile[tx][ty + k], cb, c0 + ty + k);
        __syncthreads();
    }
}
"""
_TR_PERSISTENT_LAUNCH = """    const long long tiles = B * ((R + 31) / 32) * ((C + 31) / 32);
    tr_tiles_persistent<<<(unsigned)(tiles < 1056 ? tiles : 1056), dim3(32, 8), 0, stream>>>(x, cb, y, B, R, C);"""


def _tr_variants(scale: float, bias: str, bias_value: float, act: str | None) -> list[TorchVariant]:
    head = _TR_HEAD.format(scale=repr(scale), bias=repr(bias_value if bias == "scalar" else 0.0),
                           col_bias="true" if bias == "column" else "false", act=_act_c(act))
    tile = {0: "no padding: a column of the tile is one bank, so the column reads are 32-way bank conflicts",
            1: "a column of padding: a column of the tile spans the 32 banks"}
    specs = [
        ("naive_read_coalesced", ["naive", "coalesced", "strided", "block_256"], _TR_BY_INPUT,
         "    tr_by_input<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, cb, y, n, R, C);"),
        ("naive_write_coalesced", ["naive", "coalesced", "strided", "readonly_cache", "block_512"], _TR_BY_OUTPUT,
         "    tr_by_output<<<(unsigned)((n + 511) / 512), 512, 0, stream>>>(x, cb, y, n, R, C);"),
        ("tile32_bank_conflicts", ["shared_tiling", "coalesced", "strided", "block_1024"],
         _TR_TILE32.replace("{pad}", "0").replace("{pad_note}", tile[0]),
         _TR_TILE_LAUNCH.format(k="tile32", block="dim3(32, 32)")),
        ("tile32_padded", ["shared_tiling", "coalesced", "block_1024"],
         _TR_TILE32.replace("{pad}", "1").replace("{pad_note}", tile[1]),
         _TR_TILE_LAUNCH.format(k="tile32", block="dim3(32, 32)")),
        ("tile32x8_four_per_thread", ["shared_tiling", "coalesced", "unrolled", "block_256"], _TR_TILE32X8,
         _TR_TILE_LAUNCH.format(k="tile32x8", block="dim3(32, 8)")),
        ("tile_float4", ["shared_tiling", "vectorized", "coalesced", "block_256"], _TR_VEC4, _TR_VEC4_LAUNCH),
        ("registers_4x4_float4", ["register_blocking", "vectorized", "unrolled", "block_128"], _TR_REG4,
         _TR_REG4_LAUNCH),
        ("persistent_tiles", ["shared_tiling", "grid_stride", "coalesced", "unrolled", "block_256"], _TR_PERSISTENT,
         _TR_PERSISTENT_LAUNCH),
    ]
    return _variants(specs, head, _TR_ENTRY)


_TR_SHAPES = (  # (layout, batch_size, R, C): 8M to 32M elements; a 2-D input's rows are its batch
    [("2d", r, r, c) for r, c in itertools.product([2048, 3000, 4096, 6000, 8192, 12288, 16384, 32768],
                                                   [500, 768, 1000, 1024, 1536, 2047, 2048, 3000, 4096])
     if 2**23 <= r * c <= 2**25] +
    [("3d", b, r, c) for b, r, c in itertools.product([2, 4, 8, 16, 32, 64, 128],
                                                      [64, 100, 128, 197, 256, 512, 1000, 1024],
                                                      [64, 96, 128, 255, 384, 512, 768, 1024, 2048])
     if 2**23 <= b * r * c <= 2**25])


def _transpose_task(index: int, p: dict) -> GeneratedTorchTask:
    """The problem and variants of parameters ``p`` (tests build small ones with the same constants)."""
    layout, rows, cols, bias, act = p["layout"], p["rows"], p["cols"], p["bias"], p["act"]
    shape = f"batch_size, {cols}" if layout == "2d" else f"batch_size, {rows}, {cols}"
    expr = f"x.transpose(-1, -2).contiguous() * {p['scale']!r}"
    init_body = ""
    if bias == "scalar":
        expr += f" {'-' if p['bias_value'] < 0 else '+'} {abs(p['bias_value'])!r}"
    elif bias == "column":
        expr += " + self.bias[:, None]"
        init_body = (f"gen = torch.Generator().manual_seed({p['init_seed']})\n"
                     f"self.bias = nn.Parameter(torch.empty({cols}).uniform_(-1.0, 1.0, generator=gen))")
    expr = _act_t(act, expr)
    what = {"none": "", "scalar": f" plus {p['bias_value']!r}",
            "column": f" plus a bias per row of the result ({cols} entries, drawn at init)"}[bias]
    doc = (f"y = {expr.replace('torch.nn.functional.', 'F.')}: the transpose of the last two dimensions of a "
           f"({shape}) input, materialised, times {p['scale']!r}{what}"
           f"{f', then {act}' if act else ''}.")
    source = problem_source(doc, expr, f"torch.randn({shape}) * {p['spread']} + {p['shift']}",
                            batch_size=p["batch"], init_body=init_body)
    tid = task_id("transpose_scale", index)
    # see the module docstring: element-wise after the move, a few ulps; 1e-4 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"transpose ({layout}, {rows}x{cols}) times a scale"
                                   + (f", plus a {bias} bias" if bias != "none" else "")
                                   + (f", then {act}" if act else ""),
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _tr_variants(p["scale"], bias, p["bias_value"], act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "transpose_scale", index, dict(p), tuple(variants))


def transpose_scale(index: int) -> GeneratedTorchTask:
    rng = rng_for("transpose_scale", index)
    layout, batch, rows, cols = shuffled("transpose_scale", _TR_SHAPES)[index % len(_TR_SHAPES)]
    act = None if rng.random() < 0.4 else str(rng.choice(_ACTS))
    bias = str(rng.choice(["none", "scalar", "column"]))
    scale = round(float(rng.uniform(0.5, 3.0)) * (-1.0 if rng.random() < 0.25 else 1.0), 3)
    p = {"layout": layout, "batch": batch, "rows": rows, "cols": cols, "scale": scale, "bias": bias,
         "bias_value": round(float(rng.uniform(-1.0, 1.0)), 3) if bias == "scalar" else 0.0, "act": act,
         "spread": round(float(rng.uniform(0.5, 2.0)), 3), "shift": round(float(rng.uniform(-0.5, 0.5)), 3),
         "init_seed": int(rng.integers(1, 2**31 - 1))}
    return _transpose_task(index, p)


# ---------------------------------------------------------------------------------------------------------------
# upsample_bilinear: F.interpolate(x, scale_factor or size, mode="bilinear", align_corners)

_UP_HEAD = """constexpr bool ALIGN = {align};           /* align_corners */
constexpr double SF_H = {sf_h}, SF_W = {sf_w};  /* F.interpolate's scale factors (0: an output size was given) */

/* the input step per output step along an axis, in float as PyTorch computes it (area_pixel_compute_scale) */
static float axis_scale(long long in, long long out, double sf) {{
    if (ALIGN) return out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.f;
    return sf > 0. ? (float)(1.0 / sf) : (float)in / (float)out;
}}

/* output index d along an axis of n inputs: the first tap i0, the second i1 (i0 + 1, or i0 at the last input) and
   the weight l1 of the second */
__device__ __forceinline__ void source(float step, int d, int n, int& i0, int& i1, float& l1) {{
    float s = ALIGN ? step * (float)d : step * ((float)d + 0.5f) - 0.5f;
    s = fmaxf(s, 0.f);
    int i = (int)s;  /* s >= 0: the floor */
    i = i < n - 1 ? i : n - 1;
    i0 = i;
    i1 = i + (i < n - 1 ? 1 : 0);
    l1 = s - (float)i;
}}

/* the four taps blended along W, then along H (PyTorch's order) */
__device__ __forceinline__ float blend(float a, float b, float c, float d, float lh, float lw) {{
    return (1.f - lh) * ((1.f - lw) * a + lw * b) + lh * ((1.f - lw) * c + lw * d);
}}
"""
_UP_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 1 || n_out != 1 || in[0].ndim != 4 || out[0].ndim != 4 || in[0].dtype != DT_FLOAT32 ||
        out[0].dtype != DT_FLOAT32)
        return 1;
    const int N = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
    const int Ho = (int)out[0].shape[2], Wo = (int)out[0].shape[3];
    if (out[0].shape[0] != N || out[0].shape[1] != C) return 1;
    const long long planes = (long long)N * C;
    const long long n = planes * Ho * Wo;
    if (n == 0) return 0;
    if (H == 0 || W == 0) return 1;
    const float sh = axis_scale(H, Ho, SF_H), sw = axis_scale(W, Wo, SF_W);
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
    const unsigned gz = (unsigned)(planes < 65535 ? planes : 65535);  /* kernels loop over planes past gridDim.z */
    (void)gz;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_UP_ARGS = "(const float* __restrict__ x, float* __restrict__ y"
_UP_ONE = """
/* output i of the (planes, Ho, Wo) result */
__device__ __forceinline__ float up_one(const float* __restrict__ x, long long i, int H, int W, int Ho, int Wo,
                                        float sh, float sw) {
    const int ow = (int)(i % Wo);
    const long long t = i / Wo;
    const int oh = (int)(t % Ho);
    const long long p = t / Ho;
    int h0, h1, w0, w1;
    float lh, lw;
    source(sh, oh, H, h0, h1, lh);
    source(sw, ow, W, w0, w1, lw);
    const float* r0 = x + (p * H + h0) * W;
    const float* r1 = x + (p * H + h1) * W;
    return blend(r0[w0], r0[w1], r1[w0], r1[w1], lh, lw);
}
"""
_UP_NAIVE = _UP_ONE + """
/* a thread per output, its taps and weights computed from its index */
__global__ void up_naive""" + _UP_ARGS + """, long long n, int H, int W, int Ho, int Wo,
                         float sh, float sw) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = up_one(x, i, H, W, Ho, Wo, sh, sw);
}
"""
_UP_GRID_STRIDE = _UP_ONE + """
/* a grid-stride loop over the outputs, at most 2048 blocks of 512 */
__global__ void __launch_bounds__(512) up_grid_stride""" + _UP_ARGS + """, long long n, int H, int W, int Ho,
                                                              int Wo, float sh, float sw) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = up_one(x, i, H, W, Ho, Wo, sh, sw);
}
"""
_UP_GRID_STRIDE_LAUNCH = """    const long long blocks = (n + 511) / 512;
    up_grid_stride<<<(unsigned)(blocks < 2048 ? blocks : 2048), 512, 0, stream>>>(x, y, n, H, W, Ho, Wo, sh, sw);"""
_UP_2D = """
/* 2-D blocks of 32 x 8 over the output plane, the planes along gridDim.z (a loop past 65535); the taps are computed
   once per thread and the input read through the read-only cache */
__global__ void up_2d""" + _UP_ARGS + """, long long planes, int H, int W, int Ho, int Wo, float sh,
                      float sw) {
    const int ow = blockIdx.x * 32 + threadIdx.x, oh = blockIdx.y * 8 + threadIdx.y;
    if (ow >= Wo || oh >= Ho) return;
    int h0, h1, w0, w1;
    float lh, lw;
    source(sh, oh, H, h0, h1, lh);
    source(sw, ow, W, w0, w1, lw);
    for (long long p = blockIdx.z; p < planes; p += gridDim.z) {
        const float* r0 = x + (p * H + h0) * W;
        const float* r1 = x + (p * H + h1) * W;
        y[(p * Ho + oh) * Wo + ow] = blend(__ldg(r0 + w0), __ldg(r0 + w1), __ldg(r1 + w0), __ldg(r1 + w1), lh, lw);
    }
}
"""
_UP_2D_LAUNCH = """    if ((Ho + 7) / 8 > 65535) return 3;
    up_2d<<<dim3((unsigned)((Wo + 31) / 32), (unsigned)((Ho + 7) / 8), gz), dim3(32, 8), 0, stream>>>(
        x, y, planes, H, W, Ho, Wo, sh, sw);"""
_UP_ROW = """
constexpr int PPB = 8;  /* planes per block */

/* a block of 128 per output row oh and PPB planes: the row's column taps and weights (Wo of each) are computed once
   into shared memory, its row taps once per thread, then the block writes row oh of each of its planes */
__global__ void __launch_bounds__(128) up_row_coeffs""" + _UP_ARGS + """, long long planes, int H, int W,
                                                             int Ho, int Wo, float sh, float sw) {
    extern __shared__ float coef[];  /* Wo weights, then Wo first and Wo second taps (ints) */
    float* lw = coef;
    int* w0 = reinterpret_cast<int*>(coef + Wo);
    int* w1 = w0 + Wo;
    const int oh = blockIdx.x;
    for (int ow = threadIdx.x; ow < Wo; ow += 128) {
        int a, b;
        float l;
        source(sw, ow, W, a, b, l);
        w0[ow] = a;
        w1[ow] = b;
        lw[ow] = l;
    }
    int h0, h1;
    float lh;
    source(sh, oh, H, h0, h1, lh);
    __syncthreads();
    const long long p0 = (long long)blockIdx.y * PPB;
    const long long p1 = p0 + PPB < planes ? p0 + PPB : planes;
    for (long long p = p0; p < p1; ++p) {
        const float* r0 = x + (p * H + h0) * W;
        const float* r1 = x + (p * H + h1) * W;
        float* yr = y + (p * Ho + oh) * Wo;
        for (int ow = threadIdx.x; ow < Wo; ow += 128)
            yr[ow] = blend(r0[w0[ow]], r0[w1[ow]], r1[w0[ow]], r1[w1[ow]], lh, lw[ow]);
    }
}
"""
_UP_ROW_LAUNCH = """    const size_t smem = (size_t)Wo * 3 * sizeof(float);
    if (smem > 200 * 1024 || (planes + PPB - 1) / PPB > 65535) return 3;
    if (smem > 48 * 1024 && cudaFuncSetAttribute(up_row_coeffs, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    up_row_coeffs<<<dim3((unsigned)Ho, (unsigned)((planes + PPB - 1) / PPB)), 128, smem, stream>>>(
        x, y, planes, H, W, Ho, Wo, sh, sw);"""
_UP_FOUR = """
/* a thread per four consecutive outputs of a row: the row taps once, four column taps; one float4 store when the
   rows are whole float4s and y is 16-byte aligned (vec), otherwise four scalar stores (the last quad of a row may be
   partial) */
__global__ void up_four_w""" + _UP_ARGS + """, long long planes, int H, int W, int Ho, int Wo, float sh,
                          float sw, int vec) {
    const int Wq = (Wo + 3) / 4;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * Ho * Wq) return;
    const int q = (int)(i % Wq);
    const long long t = i / Wq;
    const int oh = (int)(t % Ho);
    const long long p = t / Ho;
    int h0, h1;
    float lh;
    source(sh, oh, H, h0, h1, lh);
    const float* r0 = x + (p * H + h0) * W;
    const float* r1 = x + (p * H + h1) * W;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int ow = 4 * q + k < Wo ? 4 * q + k : Wo - 1;
        int w0, w1;
        float lw;
        source(sw, ow, W, w0, w1, lw);
        v[k] = blend(r0[w0], r0[w1], r1[w0], r1[w1], lh, lw);
    }
    float* yr = y + (p * Ho + oh) * Wo + 4 * q;
    if (vec) {
        *reinterpret_cast<float4*>(yr) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (4 * q + k < Wo) yr[k] = v[k];
    }
}
"""
_UP_FOUR_LAUNCH = """    const long long quads = planes * Ho * ((Wo + 3) / 4);
    const int vec = Wo % 4 == 0 && (reinterpret_cast<unsigned long long>(y) & 15) == 0;
    up_four_w<<<(unsigned)((quads + 63) / 64), 64, 0, stream>>>(x, y, planes, H, W, Ho, Wo, sh, sw, vec);"""
_UP_CHANNELS = """
/* a thread per (n, oh, ow) walking the C channels: the taps, weights and offsets are computed once and reused for
   every plane of sample n */
__global__ void up_channel_walk""" + _UP_ARGS + """, int N, int C, int H, int W, int Ho, int Wo, float sh,
                                float sw) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * Ho * Wo) return;
    const int ow = (int)(i % Wo);
    const long long t = i / Wo;
    const int oh = (int)(t % Ho);
    const long long nn = t / Ho;
    int h0, h1, w0, w1;
    float lh, lw;
    source(sh, oh, H, h0, h1, lh);
    source(sw, ow, W, w0, w1, lw);
    const long long in_plane = (long long)H * W, out_plane = (long long)Ho * Wo;
    const long long o00 = (long long)h0 * W + w0, o01 = (long long)h0 * W + w1;
    const long long o10 = (long long)h1 * W + w0, o11 = (long long)h1 * W + w1;
    const float* xp = x + nn * C * in_plane;
    float* yp = y + nn * C * out_plane + (long long)oh * Wo + ow;
    for (int c = 0; c < C; ++c, xp += in_plane, yp += out_plane)
        *yp = blend(xp[o00], xp[o01], xp[o10], xp[o11], lh, lw);
}
"""
_UP_CHANNELS_LAUNCH = """    const long long pix = (long long)N * Ho * Wo;
    up_channel_walk<<<(unsigned)((pix + 127) / 128), 128, 0, stream>>>(x, y, N, C, H, W, Ho, Wo, sh, sw);"""
_UP_TWO_PASS = """
/* pass 1, along W: every input row (planes * H of them) interpolated to Wo columns, into a scratch buffer */
__global__ void up_pass_w(const float* __restrict__ x, float* __restrict__ tmp, long long m, int W, int Wo, float sw) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const int ow = (int)(i % Wo);
    const float* xr = x + i / Wo * W;
    int w0, w1;
    float lw;
    source(sw, ow, W, w0, w1, lw);
    tmp[i] = (1.f - lw) * xr[w0] + lw * xr[w1];
}

/* pass 2, along H: output (p, oh, ow) from rows h0 and h1 of plane p of the scratch */
__global__ void up_pass_h(const float* __restrict__ tmp, float* __restrict__ y, long long n, int H, int Ho, int Wo,
                          float sh) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int ow = (int)(i % Wo);
    const long long t = i / Wo;
    const int oh = (int)(t % Ho);
    const long long p = t / Ho;
    int h0, h1;
    float lh;
    source(sh, oh, H, h0, h1, lh);
    const float* tp = tmp + p * H * Wo;
    y[i] = (1.f - lh) * tp[(long long)h0 * Wo + ow] + lh * tp[(long long)h1 * Wo + ow];
}
"""
_UP_TWO_PASS_LAUNCH = """    const long long m = planes * H * Wo;
    float* tmp = 0;
    if (cudaMallocAsync((void**)&tmp, (size_t)m * sizeof(float), stream) != cudaSuccess) return 3;
    up_pass_w<<<(unsigned)((m + 255) / 256), 256, 0, stream>>>(x, tmp, m, W, Wo, sw);
    up_pass_h<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(tmp, y, n, H, Ho, Wo, sh);
    if (cudaFreeAsync(tmp, stream) != cudaSuccess) return 3;"""


def _up_variants(align: bool, sf: float) -> list[TorchVariant]:
    head = _UP_HEAD.format(align="true" if align else "false", sf_h=repr(float(sf)), sf_w=repr(float(sf)))
    specs = [
        ("thread_per_output", ["naive", "coalesced", "block_256"], _UP_NAIVE,
         "    up_naive<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n, H, W, Ho, Wo, sh, sw);"),
        ("blocks_2d", ["coalesced", "readonly_cache", "block_256"], _UP_2D, _UP_2D_LAUNCH),
        ("row_coefficients_shared", ["shared_tiling", "block_per_row", "coalesced", "block_128"], _UP_ROW,
         _UP_ROW_LAUNCH),
        ("four_outputs_per_thread", ["register_blocking", "vectorized", "unrolled", "block_64"], _UP_FOUR,
         _UP_FOUR_LAUNCH),
        ("channel_walk", ["coalesced", "small_grid", "block_128"], _UP_CHANNELS, _UP_CHANNELS_LAUNCH),
        ("grid_stride", ["grid_stride", "coalesced", "block_512"], _UP_GRID_STRIDE, _UP_GRID_STRIDE_LAUNCH),
        ("separable_two_pass", ["multi_pass", "coalesced", "block_256"], _UP_TWO_PASS, _UP_TWO_PASS_LAUNCH),
    ]
    return _variants(specs, head, _UP_ENTRY)


_UP_PLANES = [(14, 14), (17, 17), (28, 28), (31, 33), (32, 32), (45, 60), (56, 56), (64, 64), (63, 95), (75, 75),
              (100, 100), (127, 127), (128, 128), (120, 160), (99, 131), (200, 256), (255, 255), (256, 256)]
"""Input planes (H, W), odd ones among them; every source coordinate stays below 256."""
_UP_RESIZE = [("scale", 2.0), ("scale", 3.0), ("scale", 4.0), ("scale", 1.5), ("scale", 2.5),
              ("size", 1.5, 2.0), ("size", 2.3, 2.3), ("size", 1.25, 1.75), ("size", 3.1, 2.2)]


def _up_out(h: int, w: int, resize: tuple) -> tuple[int, int]:
    if resize[0] == "scale":  # PyTorch's output size: floor(in * scale_factor)
        return math.floor(h * resize[1]), math.floor(w * resize[1])
    return round(h * resize[1]), round(w * resize[2])


_UP_SHAPES = [(n, c, hw, rs) for n, c, hw, rs in itertools.product([1, 2, 4, 8, 16, 32, 64],
                                                                   [3, 8, 16, 32, 64, 128, 256], _UP_PLANES, _UP_RESIZE)
              if 2**24 <= n * c * math.prod(_up_out(*hw, rs)) <= 2**26 and n * c * hw[0] * hw[1] <= 2**24]
"""16M to 64M outputs (64 to 256 MB written by one kernel), inputs of at most 16M."""


def _upsample_task(index: int, p: dict) -> GeneratedTorchTask:
    c, h, w, align = p["channels"], p["height"], p["width"], p["align_corners"]
    how = (f"scale_factor={p['scale_factor']!r}" if p["mode"] == "scale"
           else f"size=({p['out_height']}, {p['out_width']})")
    expr = f"torch.nn.functional.interpolate(x, {how}, mode=\"bilinear\", align_corners={align})"
    doc = (f"y = F.interpolate(x, {how}, mode='bilinear', align_corners={align}): bilinear resampling of a "
           f"(batch_size, {c}, {h}, {w}) input to {p['out_height']}x{p['out_width']}.")
    source = problem_source(doc, expr, f"torch.randn(batch_size, {c}, {h}, {w}) * {p['spread']} + {p['shift']}",
                            batch_size=p["batch"])
    tid = task_id("upsample_bilinear", index)
    # see the module docstring: a coordinate's rounding (one fma or two roundings) moves outputs by up to 7e-5
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"bilinear {h}x{w} -> {p['out_height']}x{p['out_width']}, {c} channels, "
                                   f"align_corners={align}, {how}",
                       tolerance=DtypeTolerance(fp32=(5e-4, 1e-4)))
    variants = _up_variants(align, p["scale_factor"] if p["mode"] == "scale" else 0.0)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "upsample_bilinear", index, dict(p), tuple(variants))


def upsample_bilinear(index: int) -> GeneratedTorchTask:
    rng = rng_for("upsample_bilinear", index)
    batch, c, (h, w), resize = shuffled("upsample_bilinear", _UP_SHAPES)[index % len(_UP_SHAPES)]
    ho, wo = _up_out(h, w, resize)
    p = {"batch": batch, "channels": c, "height": h, "width": w, "out_height": ho, "out_width": wo,
         "mode": resize[0], "scale_factor": resize[1] if resize[0] == "scale" else None,
         "align_corners": bool(rng.random() < 0.5),
         "spread": round(float(rng.uniform(0.5, 2.0)), 3), "shift": round(float(rng.uniform(-0.5, 0.5)), 3)}
    return _upsample_task(index, p)


# ---------------------------------------------------------------------------------------------------------------
# pixel_shuffle: nn.PixelShuffle(r) or nn.PixelUnshuffle(r), then an activation or nothing

_PS_HEAD = """constexpr int R = {r};               /* the factor */
constexpr bool SHUFFLE = {shuffle};  /* PixelShuffle: (N, C*R*R, H, W) -> (N, C, H*R, W*R); otherwise PixelUnshuffle */

__device__ __forceinline__ float act(float v) {{
    return {act};
}}

/* an element by its place in both layouts: sample n, channel c, low-resolution pixel (h, w), sub-pixel (i, j) */
struct Site {{
    long long n, c, h, w;
    int i, j;
}};

/* its offset in the low-resolution layout (N, C*R*R, H, W): channel c*R*R + i*R + j, row h, column w */
__device__ __forceinline__ long long lo_at(const Site& s, long long C, long long H, long long W) {{
    return (((s.n * C + s.c) * R * R + s.i * R + s.j) * H + s.h) * W + s.w;
}}

/* its offset in the high-resolution layout (N, C, H*R, W*R): channel c, row h*R + i, column w*R + j */
__device__ __forceinline__ long long hi_at(const Site& s, long long C, long long H, long long W) {{
    return ((s.n * C + s.c) * H * R + s.h * R + s.i) * (W * R) + s.w * R + s.j;
}}

/* the site of offset e of the low-resolution layout */
__device__ __forceinline__ Site lo_site(long long e, long long C, long long H, long long W) {{
    Site s;
    s.w = e % W;
    e /= W;
    s.h = e % H;
    e /= H;
    const long long cl = e % (C * R * R);
    s.n = e / (C * R * R);
    s.c = cl / (R * R);
    s.i = (int)(cl / R % R);
    s.j = (int)(cl % R);
    return s;
}}

/* the site of offset e of the high-resolution layout */
__device__ __forceinline__ Site hi_site(long long e, long long C, long long H, long long W) {{
    Site s;
    const long long col = e % (W * R);
    e /= W * R;
    const long long row = e % (H * R);
    e /= H * R;
    s.c = e % C;
    s.n = e / C;
    s.h = row / R;
    s.i = (int)(row % R);
    s.w = col / R;
    s.j = (int)(col % R);
    return s;
}}

/* where a site is in x and in y */
__device__ __forceinline__ long long in_at(const Site& s, long long C, long long H, long long W) {{
    return SHUFFLE ? lo_at(s, C, H, W) : hi_at(s, C, H, W);
}}
__device__ __forceinline__ long long out_at(const Site& s, long long C, long long H, long long W) {{
    return SHUFFLE ? hi_at(s, C, H, W) : lo_at(s, C, H, W);
}}
"""
_PS_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {
    if (n_in != 1 || n_out != 1 || in[0].ndim != 4 || out[0].ndim != 4 || in[0].dtype != DT_FLOAT32 ||
        out[0].dtype != DT_FLOAT32)
        return 1;
    /* C: the high-resolution channels; H x W: the low-resolution plane */
    const long long N = in[0].shape[0];
    long long C, H, W;
    if (SHUFFLE) {
        if (in[0].shape[1] % (R * R) != 0) return 1;
        C = in[0].shape[1] / (R * R);
        H = in[0].shape[2];
        W = in[0].shape[3];
    } else {
        if (in[0].shape[2] % R != 0 || in[0].shape[3] % R != 0) return 1;
        C = in[0].shape[1];
        H = in[0].shape[2] / R;
        W = in[0].shape[3] / R;
    }
    if (out[0].numel != in[0].numel) return 1;
    const long long n = in[0].numel;
    if (n == 0) return 0;
    const float* x = (const float*)in[0].data;
    float* y = (float*)out[0].data;
    (void)N;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
"""
_PS_ARGS = "(const float* __restrict__ x, float* __restrict__ y"
_PS_BY_OUTPUT = """
/* a thread per output element (gather): writes coalesced */
__global__ void ps_by_output""" + _PS_ARGS + """, long long n, long long C, long long H, long long W) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Site s = SHUFFLE ? hi_site(i, C, H, W) : lo_site(i, C, H, W);
    y[i] = act(x[in_at(s, C, H, W)]);
}
"""
_PS_BY_INPUT = """
/* a thread per input element (scatter): reads coalesced, writes R floats apart (PixelShuffle) or in R*R planes
   (PixelUnshuffle) */
__global__ void ps_by_input""" + _PS_ARGS + """, long long n, long long C, long long H, long long W) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Site s = SHUFFLE ? lo_site(i, C, H, W) : hi_site(i, C, H, W);
    y[out_at(s, C, H, W)] = act(x[i]);
}
"""
_PS_GRID_STRIDE = """
/* a grid-stride loop over the outputs (gather), at most 2048 blocks of 512 */
__global__ void __launch_bounds__(512) ps_grid_stride""" + _PS_ARGS + """, long long n, long long C, long long H,
                                                              long long W) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const Site s = SHUFFLE ? hi_site(i, C, H, W) : lo_site(i, C, H, W);
        y[i] = act(x[in_at(s, C, H, W)]);
    }
}
"""
_PS_GRID_STRIDE_LAUNCH = """    const long long blocks = (n + 511) / 512;
    ps_grid_stride<<<(unsigned)(blocks < 2048 ? blocks : 2048), 512, 0, stream>>>(x, y, n, C, H, W);"""
_PS_2D = """
/* 2-D blocks of 32 x 8 over an output plane, the output planes along gridDim.z (a loop past 65535); reads through the
   read-only cache */
__global__ void ps_2d""" + _PS_ARGS + """, long long planes, long long C, long long H, long long W) {
    const long long OH = SHUFFLE ? H * R : H, OW = SHUFFLE ? W * R : W;
    const long long col = (long long)blockIdx.x * 32 + threadIdx.x, row = (long long)blockIdx.y * 8 + threadIdx.y;
    if (col >= OW || row >= OH) return;
    for (long long p = blockIdx.z; p < planes; p += gridDim.z) {
        Site s;
        if (SHUFFLE) {  /* plane p is (n, c); row h*R + i, column w*R + j */
            s.n = p / C;
            s.c = p % C;
            s.h = row / R;
            s.i = (int)(row % R);
            s.w = col / R;
            s.j = (int)(col % R);
        } else {  /* plane p is (n, c*R*R + i*R + j); row h, column w */
            const long long cl = p % (C * R * R);
            s.n = p / (C * R * R);
            s.c = cl / (R * R);
            s.i = (int)(cl / R % R);
            s.j = (int)(cl % R);
            s.h = row;
            s.w = col;
        }
        y[(p * OH + row) * OW + col] = act(__ldg(x + in_at(s, C, H, W)));
    }
}
"""
_PS_2D_LAUNCH = """    const long long OH = SHUFFLE ? H * R : H, OW = SHUFFLE ? W * R : W;
    const long long planes = n / (OH * OW);
    if ((OH + 7) / 8 > 65535) return 3;
    ps_2d<<<dim3((unsigned)((OW + 31) / 32), (unsigned)((OH + 7) / 8), (unsigned)(planes < 65535 ? planes : 65535)),
            dim3(32, 8), 0, stream>>>(x, y, planes, C, H, W);"""
_PS_SITE = """
/* a thread per low-resolution pixel (n, c, h, w): its R x R elements through registers, all loads then all stores */
__global__ void ps_site_block""" + _PS_ARGS + """, long long sites, long long C, long long H, long long W) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= sites) return;
    const long long w = e % W, t = e / W, h = t % H, t2 = t / H, c = t2 % C, nn = t2 / C;
    float v[R][R];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) v[i][j] = x[in_at(Site{nn, c, h, w, i, j}, C, H, W)];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) y[out_at(Site{nn, c, h, w, i, j}, C, H, W)] = act(v[i][j]);
}
"""
_PS_VEC4 = _PS_SITE + """
/* a thread per (n, c, i, h) and four low-resolution columns w0..w0+3 (W a multiple of 4, 16-byte aligned pointers):
   the R low-resolution rows (sub-columns j) as R float4, the high-resolution row h*R + i's columns w0*R..w0*R+4R-1
   as R float4 (its element k is column w0 + k / R, sub-column k % R) */
__global__ void __launch_bounds__(128) ps_vec4""" + _PS_ARGS + """, long long groups, long long C, long long H,
                                                     long long W) {
    const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    const long long Wq = W / 4;
    const long long wq = g % Wq, t = g / Wq, h = t % H, t2 = t / H, i = t2 % R, t3 = t2 / R, c = t3 % C, nn = t3 / C;
    const long long w0 = 4 * wq;
    float v[R][4];  /* v[j][q]: column w0 + q, sub-column j */
    if (SHUFFLE) {
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const float4 a = *reinterpret_cast<const float4*>(x + lo_at(Site{nn, c, h, w0, (int)i, j}, C, H, W));
            v[j][0] = a.x;
            v[j][1] = a.y;
            v[j][2] = a.z;
            v[j][3] = a.w;
        }
        float4* yr = reinterpret_cast<float4*>(y + hi_at(Site{nn, c, h, w0, (int)i, 0}, C, H, W));
#pragma unroll
        for (int k4 = 0; k4 < R; ++k4) {
            float o[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) o[q] = act(v[(4 * k4 + q) % R][(4 * k4 + q) / R]);
            yr[k4] = make_float4(o[0], o[1], o[2], o[3]);
        }
    } else {
        const float4* xr = reinterpret_cast<const float4*>(x + hi_at(Site{nn, c, h, w0, (int)i, 0}, C, H, W));
#pragma unroll
        for (int k4 = 0; k4 < R; ++k4) {
            const float4 a = xr[k4];
            const float e[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) v[(4 * k4 + q) % R][(4 * k4 + q) / R] = e[q];
        }
#pragma unroll
        for (int j = 0; j < R; ++j)
            *reinterpret_cast<float4*>(y + lo_at(Site{nn, c, h, w0, (int)i, j}, C, H, W)) =
                make_float4(act(v[j][0]), act(v[j][1]), act(v[j][2]), act(v[j][3]));
    }
}
"""
_PS_VEC4_LAUNCH = """    const unsigned long long bits =
        reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y);
    if (W % 4 == 0 && (bits & 15) == 0) {
        const long long groups = n / (4 * R);  /* N*C*R*H*(W/4) */
        ps_vec4<<<(unsigned)((groups + 127) / 128), 128, 0, stream>>>(x, y, groups, C, H, W);
    } else {
        const long long sites = n / (R * R);
        ps_site_block<<<(unsigned)((sites + 127) / 128), 128, 0, stream>>>(x, y, sites, C, H, W);
    }"""
_PS_ROW = """
/* a block of 128 per high-resolution row (n, c, h*R + i), staged in shared memory (R*W floats) so that both sides
   are coalesced: PixelShuffle reads the R low-resolution rows (channels c*R*R + i*R + j, row h) one after another
   and writes the row; PixelUnshuffle reads the row and writes the R low-resolution rows */
__global__ void __launch_bounds__(128) ps_row_shared""" + _PS_ARGS + """, long long C, long long H, long long W) {
    extern __shared__ float row[];
    const long long b = blockIdx.x;
    const long long hr = b % (H * R), nc = b / (H * R);
    const long long h = hr / R, nn = nc / C, c = nc % C;
    const int i = (int)(hr % R);
    const long long WR = W * R;
    if (SHUFFLE) {
        for (long long k = threadIdx.x; k < WR; k += 128) {  /* row[j*W + w] */
            const long long w = k % W;
            row[k] = x[lo_at(Site{nn, c, h, w, i, (int)(k / W)}, C, H, W)];
        }
        __syncthreads();
        float* yr = y + hi_at(Site{nn, c, h, 0, i, 0}, C, H, W);
        for (long long k = threadIdx.x; k < WR; k += 128) yr[k] = act(row[k % R * W + k / R]);
    } else {
        const float* xr = x + hi_at(Site{nn, c, h, 0, i, 0}, C, H, W);
        for (long long k = threadIdx.x; k < WR; k += 128) row[k] = xr[k];
        __syncthreads();
        for (long long k = threadIdx.x; k < WR; k += 128) {  /* low-resolution row j = k / W, column w = k % W */
            const long long w = k % W;
            const int j = (int)(k / W);
            y[lo_at(Site{nn, c, h, w, i, j}, C, H, W)] = act(row[w * R + j]);
        }
    }
}
"""
_PS_ROW_LAUNCH = """    const size_t smem = (size_t)R * W * sizeof(float);
    const long long rows = n / (W * R);  /* N*C*H*R */
    if (smem > 200 * 1024 || rows > 2147483647LL) return 3;
    if (smem > 48 * 1024 && cudaFuncSetAttribute(ps_row_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)smem) != cudaSuccess)
        return 3;
    ps_row_shared<<<(unsigned)rows, 128, smem, stream>>>(x, y, C, H, W);"""


def _ps_variants(shuffle: bool, r: int, act: str | None) -> list[TorchVariant]:
    head = _PS_HEAD.format(r=r, shuffle="true" if shuffle else "false", act=_act_c(act))
    specs = [
        ("thread_per_output", ["naive", "coalesced", "block_256"], _PS_BY_OUTPUT,
         "    ps_by_output<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n, C, H, W);"),
        ("thread_per_input", ["naive", "strided", "block_128"], _PS_BY_INPUT,
         "    ps_by_input<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(x, y, n, C, H, W);"),
        ("blocks_2d", ["coalesced", "readonly_cache", "block_256"], _PS_2D, _PS_2D_LAUNCH),
        ("subpixels_in_registers", ["register_blocking", "unrolled", "block_64"], _PS_SITE,
         "    ps_site_block<<<(unsigned)((n / (R * R) + 63) / 64), 64, 0, stream>>>(x, y, n / (R * R), C, H, W);"),
        ("float4_rows", ["vectorized", "register_blocking", "coalesced", "block_128"], _PS_VEC4, _PS_VEC4_LAUNCH),
        ("grid_stride", ["grid_stride", "coalesced", "block_512"], _PS_GRID_STRIDE, _PS_GRID_STRIDE_LAUNCH),
        ("row_in_shared", ["shared_tiling", "block_per_row", "coalesced", "block_128"], _PS_ROW, _PS_ROW_LAUNCH),
    ]
    return _variants(specs, head, _PS_ENTRY)


_PS_PLANES = [(16, 16), (17, 17), (24, 40), (28, 28), (31, 33), (32, 32), (45, 45), (48, 64), (64, 64), (60, 90),
              (96, 96), (127, 127), (128, 128)]  # the low-resolution plane; W not a multiple of 4 for some
_PS_SHAPES = [(op, r, n, c, hw) for op, r, n, c, hw in itertools.product(
                  ["shuffle", "unshuffle"], [2, 3, 4], [1, 2, 4, 8, 16, 32, 64], [1, 3, 4, 8, 16, 32, 64], _PS_PLANES)
              if 2**23 <= n * c * r * r * hw[0] * hw[1] <= 3 * 2**24]  # 8M to 48M elements


def _pixel_task(index: int, p: dict) -> GeneratedTorchTask:
    shuffle, r, c, h, w, act = p["op"] == "shuffle", p["factor"], p["channels"], p["height"], p["width"], p["act"]
    module = "PixelShuffle" if shuffle else "PixelUnshuffle"
    shape = f"batch_size, {c * r * r}, {h}, {w}" if shuffle else f"batch_size, {c}, {h * r}, {w * r}"
    result = f"(batch_size, {c}, {h * r}, {w * r})" if shuffle else f"(batch_size, {c * r * r}, {h}, {w})"
    expr = _act_t(act, "self.shuffle(x)")
    doc = (f"y = {expr.replace('torch.nn.functional.', 'F.').replace('self.shuffle', module + f'({r})')}: "
           f"({shape}) to {result}{f', then {act}' if act else ''}.")
    source = problem_source(doc, expr, f"torch.randn({shape}) * {p['spread']} + {p['shift']}", batch_size=p["batch"],
                            init_body=f"self.shuffle = nn.{module}({r})")
    tid = task_id("pixel_shuffle", index)
    # see the module docstring: a permutation, then an activation; 1e-4 absolute and relative
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"{module}({r}) of {shape.replace('batch_size', 'N')}" +
                                   (f", then {act}" if act else ""),
                       tolerance=DtypeTolerance(fp32=(1e-4, 1e-4)))
    variants = _ps_variants(shuffle, r, act)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "pixel_shuffle", index, dict(p), tuple(variants))


def pixel_shuffle(index: int) -> GeneratedTorchTask:
    rng = rng_for("pixel_shuffle", index)
    op, r, batch, c, (h, w) = shuffled("pixel_shuffle", _PS_SHAPES)[index % len(_PS_SHAPES)]
    act = None if rng.random() < 0.4 else str(rng.choice(_ACTS))
    p = {"op": op, "factor": r, "batch": batch, "channels": c, "height": h, "width": w, "act": act,
         "spread": round(float(rng.uniform(0.5, 2.0)), 3), "shift": round(float(rng.uniform(-0.5, 0.5)), 3)}
    return _pixel_task(index, p)
