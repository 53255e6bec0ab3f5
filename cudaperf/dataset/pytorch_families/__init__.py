"""Generated PyTorch problems with fast-path CUDA variants (the PyTorch side of the built-in dataset).

A family turns an index into a KernelBench-format problem (``Model``, ``get_inputs``, ``get_init_inputs``) and
several fast-path units (``kernel_forward`` over ``TensorArg``, see :mod:`cudaperf.harness.torch_fast`) that
differ in strategy, each tagged with the dataset's strategy vocabulary. Parameters (shapes, the chain of
operations, scalars, the number of inputs) come from a generator seeded by the family and the index, so the
problems of a family are not copies of each other.

``elementwise_chain``: ``y = act2(act1(a*x + b*z) * c + d)`` style chains over one to three same-shaped 2-D
inputs; its variants cover block sizes, a grid-stride loop, vectorised loads, a 2-D grid, a column-major walk
(uncoalesced) and a thread per row.

``row_reduce``: a sum, mean or sum of squares per row of an activation of the input; its variants are a thread
per row, a block per row with a shared-memory tree (256 and 1024 threads), a warp per row with shuffles, a block
per row reduced in two levels of shuffles, and element-parallel atomics.

``row_softmax``: a softmax per row with a temperature; its variants are a thread per row (three passes), a block
per row with shared-memory trees (64, 256 and 1024 threads), a warp per row with an online (one-pass) max and sum, and
four separate kernels with scratch buffers.

``linear_act``, ``layer_norm``, ``col_reduce`` (``blocks``): a linear layer with an activation (naive, 2-D,
strided, shared-memory tiles of 16 and 32, register blocking 2x2 and 4x4, a warp per output with float4 loads);
a layer norm with seeded affine parameters (a thread, block or warp per row, single-pass Welford, float4 loads, two
kernels); a sum, mean or max over the rows (a thread per column, strided column groups, a block per column, tiles
with atomics, two passes, warp shuffles).

``pool2d``, ``depthwise_conv2d``, ``row_cumsum`` (``spatial``): max or average pooling over NCHW with an optional
activation (a thread per output, 2-D blocks, a grid-stride loop, shared tiles with halo, 4 outputs per thread,
channel and column walks); a depthwise convolution with bias (naive, 2-D tiles with read-only loads, shared tiles
16x16 and 32x8, 2 and 4 outputs per thread, weights in constant memory, a channel walk); a cumulative sum along
rows (a thread per row, Hillis-Steele at 256 and 1024 threads, Blelloch, warp shuffles, 4 elements per lane,
three passes).

``gelu_mlp``, ``group_norm``, ``scaled_dot_attention`` (``fused``): two linear layers with a GELU between them
(naive GEMMs with a separate GELU kernel, naive 2-D GEMMs with the GELU in the epilogue, shared tiles of 16 and 32,
4x4 register blocking, a warp per output with float4 loads, one fused kernel per four rows); a group norm over NCHW
with seeded affine parameters (a thread, block or warp per group, statistics then normalise, a one-pass Welford
merge, float4 loads, several blocks per group with atomics); attention, softmax(q k^T * s [causal]) v (three kernels
naive and tiled, a block, warp or thread per query row, flash-attention style K/V tiles with 4 and 8 rows per block).

``rms_norm``, ``l2_normalize_rows``, ``batch_norm_eval`` (``norms``): an RMS norm over the last dimension of a 2-D or
3-D input with a seeded weight (a thread, block or warp per row, float4 loads, statistics then scale, four rows per
block staged in shared memory); ``F.normalize`` over rows, optionally scaled (a thread, warp or eight lanes per row,
a block per row with a shared-memory tree, float4 loads or the row read once into shared memory, row chunks meeting
through atomics); ``BatchNorm2d`` in eval mode with seeded statistics and affine parameters over NCHW, optionally
followed by an activation (a thread per element, a grid-stride loop, the channel constants in constant or shared
memory, a block per (n, c) plane, float4 quads, plane chunks with four elements per thread).

``cross_entropy_loss``, ``masked_softmax``, ``embedding_bag_mean`` (``losses``): a cross-entropy over (N, C) logits
with int64 targets, reduced by ``'mean'`` or ``'none'`` (a thread per row in three passes, a warp per row online, a
block per row with shared-memory trees, two kernels (log-sum-exp then gather), a block per row with float4 loads, a
warp per row in two passes; the mean by a second kernel's tree or by atomics); a softmax under a bool or uint8 mask
with an optional scale (a thread, warp or block per row, three passes or online, float4 loads, the row staged in
shared memory); an ``nn.EmbeddingBag`` mean or sum over fixed-length int64 bags of a seeded table (a thread per
output, a warp per bag with float4 loads, a block per bag, indices staged in shared memory, atomics from a thread per
(bag, position), indices broadcast by shuffles with the bag's row in registers).

``swiglu_mlp``, ``conv1d_causal``, ``rotary_embedding`` (``mlp``): ``down(silu(gate(x)) * up(x))`` with or without
biases (naive GEMMs with a separate SiLU-and-product kernel, the gate and up dot products in one naive kernel, shared
tiles of 16 and 32, 4x4 register blocking, a warp per output with float4 loads, one fused kernel per four rows); a
depthwise causal 1-D convolution over (B, C, L) with 2 to 7 taps and an optional SiLU (a thread per output, shared
tiles with a halo at 128 and 256 threads, a register window sliding along L, weights in constant memory, a
channel-major walk, four outputs per thread with float4); rotary position embedding of (B, heads, T, D) at int64
positions with halves or adjacent pairs (a thread per pair or per row, a thread looping over the heads, a block per
position with its cos/sin in shared memory, float2 and float4 loads, a cos/sin table then the rotation).

``transpose_scale``, ``upsample_bilinear``, ``pixel_shuffle`` (``layout``): ``act(x.transpose(-1, -2).contiguous() *
scale + bias)`` over a 2-D or batched input with no bias, a scalar or a seeded bias per output row (a thread per input
or per output element, 32x32 shared tiles without and with the +1 padding, 32x32 tiles with 32x8 threads doing four
elements, the tiles moved as float4, a 4x4 block per thread transposed in registers, persistent blocks walking the
tiles); ``F.interpolate(mode='bilinear')`` over NCHW by a scale factor or to a size, align_corners or not (a thread
per output, 2-D blocks with the planes along z, a block per output row with its column taps in shared memory, four
outputs per thread along W, a channel walk, a grid-stride loop, two separable passes); ``nn.PixelShuffle`` or
``nn.PixelUnshuffle`` with r from 2 to 4, optionally followed by an activation (a thread per output or per input,
2-D blocks, a low-resolution pixel's r x r elements in registers, float4 rows, a grid-stride loop, a row staged in
shared memory).

``index_add_rows``, ``topk_rows``, ``histc_bins`` (``irregular``): ``base.index_add(0, index, src, alpha=a)`` with
int64 indices that repeat (uniform, sorted, skewed or few distinct targets) over (N, D) or (N, d1, d2) rows (atomics
per element, a thread, warp (float4) or block per source row, a grid-stride loop on a small grid, tiles of 64
source rows adding up their duplicate targets before one atomic each, and row ownership: a block owns a range of
output rows, scans every index and writes base plus its shared tile once, without global atomics);
``torch.topk(x, k, dim=-1).values`` with k from 1 to 32 on rows of 64 to 8192, largest or smallest, normal, tied or
ramped data (a thread per row with an insertion buffer, a warp per row merging its lanes' top k, a block per row
with a bitonic sort or k rounds of argmax in shared memory, per-chunk top k then a merge, a warp per row taking
the next largest value and its count round after round); ``torch.histc`` of one to three inputs with 16 to 4096
bins, as float counts, bins exactly as ATen's (global atomics, a shared histogram per block, per-warp
sub-histograms, a thread per bin counting staged bins, a grid-stride loop with float4 loads, two passes with
per-block partial histograms, warp-aggregated atomics with ``__match_any_sync``).

``bmm_batched``, ``conv2d_bias_relu``, ``half_linear`` (``dense``): ``torch.bmm`` with either operand stored transposed,
optionally scaled and plus a seeded bias (a thread per output, 2-D blocks with blockIdx.z as the batch, shared tiles
of 16 and 32 loaded along each operand's contiguous dimension, 4x4 register blocking, a warp per output with float4
loads along K, a block per output row with the A row in shared memory); ``nn.Conv2d`` with 3x3 or 5x5 kernels, stride
1 or 2, padding and a bias, then ReLU or nothing (a thread per output, a shared input tile with its halo for one or
four output channels per thread, a channel's weights in shared memory, four output channels per thread in registers,
im2col then a tiled GEMM, a channel-last walk); a float16 ``nn.Linear`` accumulating in float32, then an activation,
the output float16 or cast back to float32 (a thread per output with a separate epilogue kernel or with the epilogue
fused, ``__half2`` loads, shared tiles of halves of 16 and 32, a warp per output with 16-byte loads and shuffles, 2x2
and 4x4 register blocking).
"""

from __future__ import annotations

from typing import Callable

from cudaperf.dataset.pytorch_families.blocks import col_reduce, layer_norm, linear_act
from cudaperf.dataset.pytorch_families.common import ACTIVATIONS, GeneratedTorchTask, TorchVariant
from cudaperf.dataset.pytorch_families.dense import bmm_batched, conv2d_bias_relu, half_linear
from cudaperf.dataset.pytorch_families.elementwise import elementwise_chain
from cudaperf.dataset.pytorch_families.fused import gelu_mlp, group_norm, scaled_dot_attention
from cudaperf.dataset.pytorch_families.layout import pixel_shuffle, transpose_scale, upsample_bilinear
from cudaperf.dataset.pytorch_families.irregular import histc_bins, index_add_rows, topk_rows
from cudaperf.dataset.pytorch_families.losses import cross_entropy_loss, embedding_bag_mean, masked_softmax
from cudaperf.dataset.pytorch_families.mlp import conv1d_causal, rotary_embedding, swiglu_mlp
from cudaperf.dataset.pytorch_families.norms import batch_norm_eval, l2_normalize_rows, rms_norm
from cudaperf.dataset.pytorch_families.rows import row_reduce, row_softmax
from cudaperf.dataset.pytorch_families.spatial import depthwise_conv2d, pool2d, row_cumsum

TORCH_FAMILIES: dict[str, Callable[[int], GeneratedTorchTask]] = {
    "elementwise_chain": elementwise_chain, "row_reduce": row_reduce, "row_softmax": row_softmax,
    "linear_act": linear_act, "layer_norm": layer_norm, "col_reduce": col_reduce,
    "pool2d": pool2d, "depthwise_conv2d": depthwise_conv2d, "row_cumsum": row_cumsum,
    "gelu_mlp": gelu_mlp, "group_norm": group_norm, "scaled_dot_attention": scaled_dot_attention,
    "rms_norm": rms_norm, "l2_normalize_rows": l2_normalize_rows, "batch_norm_eval": batch_norm_eval,
    "cross_entropy_loss": cross_entropy_loss, "masked_softmax": masked_softmax,
    "embedding_bag_mean": embedding_bag_mean,
    "swiglu_mlp": swiglu_mlp, "conv1d_causal": conv1d_causal, "rotary_embedding": rotary_embedding,
    "transpose_scale": transpose_scale, "upsample_bilinear": upsample_bilinear, "pixel_shuffle": pixel_shuffle,
    "index_add_rows": index_add_rows, "topk_rows": topk_rows, "histc_bins": histc_bins,
    "bmm_batched": bmm_batched, "conv2d_bias_relu": conv2d_bias_relu, "half_linear": half_linear}

NOT_YET_SHIPPED = frozenset({"gelu_mlp", "group_norm", "scaled_dot_attention", "rms_norm", "l2_normalize_rows",
                             "batch_norm_eval", "cross_entropy_loss", "masked_softmax", "embedding_bag_mean",
                             "swiglu_mlp", "conv1d_causal", "rotary_embedding", "transpose_scale",
                             "upsample_bilinear", "pixel_shuffle", "index_add_rows", "topk_rows", "histc_bins",
                             "bmm_batched", "conv2d_bias_relu", "half_linear"})
"""Families generated and checked on the CPU whose variants have not run on a GPU yet, so the shipped dataset does not
hold them (docs/DATASET.md: a family enters it after a GPU check); remove a name once its problems are shipped."""

__all__ = ["ACTIVATIONS", "GeneratedTorchTask", "NOT_YET_SHIPPED", "TORCH_FAMILIES", "TorchVariant",
           "batch_norm_eval", "bmm_batched", "col_reduce", "conv1d_causal", "conv2d_bias_relu", "cross_entropy_loss",
           "depthwise_conv2d", "elementwise_chain", "embedding_bag_mean", "gelu_mlp", "group_norm", "half_linear",
           "histc_bins", "index_add_rows", "l2_normalize_rows", "layer_norm", "linear_act", "masked_softmax",
           "pixel_shuffle", "pool2d", "rms_norm", "rotary_embedding", "row_cumsum", "row_reduce", "row_softmax",
           "scaled_dot_attention", "swiglu_mlp", "topk_rows", "transpose_scale", "upsample_bilinear"]
