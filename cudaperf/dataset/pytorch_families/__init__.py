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
"""


from __future__ import annotations

from typing import Callable

from cudaperf.dataset.pytorch_families.common import ACTIVATIONS, GeneratedTorchTask, TorchVariant
from cudaperf.dataset.pytorch_families.elementwise import elementwise_chain
from cudaperf.dataset.pytorch_families.rows import row_reduce, row_softmax

TORCH_FAMILIES: dict[str, Callable[[int], GeneratedTorchTask]] = {
    "elementwise_chain": elementwise_chain, "row_reduce": row_reduce, "row_softmax": row_softmax}

__all__ = ["ACTIVATIONS", "GeneratedTorchTask", "TORCH_FAMILIES", "TorchVariant", "elementwise_chain", "row_reduce",
           "row_softmax"]
