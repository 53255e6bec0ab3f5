"""What the PyTorch families share: the variant and problem records, the seeded generator, activations, and
the check that every variant's strategy tags are in the dataset's vocabulary."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from cudaperf.dataset.family import STRATEGY_TAGS
from cudaperf.tasks.pytorch import PyTorchTask

# name: (torch expression of v, CUDA expression of v)
ACTIVATIONS = {
    "relu": ("torch.relu({v})", "fmaxf({v}, 0.f)"),
    "sigmoid": ("torch.sigmoid({v})", "(1.f / (1.f + expf(-({v}))))"),
    "tanh": ("torch.tanh({v})", "tanhf({v})"),
    "silu": ("torch.nn.functional.silu({v})", "(({v}) / (1.f + expf(-({v}))))"),
    "gelu": ("torch.nn.functional.gelu({v})", "(0.5f * ({v}) * (1.f + erff(({v}) * 0.70710678f)))"),
    "softplus": ("torch.nn.functional.softplus({v})", "(({v}) > 20.f ? ({v}) : log1pf(expf({v})))"),
    "abs": ("torch.abs({v})", "fabsf({v})"),
}


@dataclass(frozen=True)
class TorchVariant:
    name: str
    tags: tuple[str, ...]
    code: str


@dataclass(frozen=True)
class GeneratedTorchTask:
    task: PyTorchTask
    family: str
    index: int
    params: dict
    variants: tuple[TorchVariant, ...]


BLOCK_SUM = """
template <int B>
__device__ float block_sum(float v, float* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();  /* sh is written again by the next reduction */
    return r;
}
"""
"""A block-wide sum of one float per thread (B threads) through a shared-memory tree: CUDA text that variants with
a block per row or group start with."""

def rng_for(family: str, index: int) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(f"torch-family:{family}:{index}".encode()).digest()[:8], "big")
    return np.random.default_rng(seed)


def shuffled(family: str, combos: list[tuple]) -> list[tuple]:
    """A fixed shuffle of ``combos`` (the first problems of a family never repeat a shape)."""
    order = rng_for(f"{family}:shapes", 0).permutation(len(combos))
    return [combos[int(k)] for k in order]


def check_tags(task_id: str, variants) -> None:
    for v in variants:
        unknown = set(v.tags) - set(STRATEGY_TAGS)
        if unknown:
            raise ValueError(f"{task_id}/{v.name}: unknown strategy tags {sorted(unknown)}")


TASK_PREFIX = "pt_"
"""PyTorch problems' ids and dataset family names start with this (the C families use plain names)."""


def task_id(family: str, index: int) -> str:
    return f"{TASK_PREFIX}{family}_{index:03d}"


def problem_source(doc: str, expr: str, inputs: str, *, forward_args: str = "x", init_args: str = "",
                   init_body: str = "", init_inputs: str = "", batch_size: int | None = None) -> str:
    """A KernelBench-format problem: ``Model`` (docstring ``doc``; ``__init__(self{init_args})`` running
    ``init_body``, lines indented by 8 spaces; ``forward(self, {forward_args})`` returning ``expr``), an optional
    module-level ``batch_size`` (which makes the harness alternate two input sizes), ``get_inputs()`` returning
    ``[inputs]`` and ``get_init_inputs()`` returning ``[init_inputs]``."""
    body = "".join(f"\n        {line}" if line else "\n" for line in init_body.splitlines())
    glob = f"\n\nbatch_size = {batch_size}\n" if batch_size is not None else ""
    return f'''import torch
from torch import nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self{init_args}):
        super().__init__(){body}

    def forward(self, {forward_args}):
        return {expr}
{glob}

def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_inputs}]
'''


REG4_TILES = """    __shared__ float as[16][64 + 4];
    __shared__ float bs[16][64 + 4];
    const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {  /* 1024 elements of each tile, 4 per thread; 16 consecutive k per row */
            const int e = tid + 256 * p, r = e / 16, k = e % 16, gk = k0 + k;
            as[k][r] = (m0 + r < M && gk < K) ? A[(long long)(m0 + r) * K + gk] : 0.f;
            bs[k][r] = (n0 + r < N && gk < K) ? B[(long long)(n0 + r) * K + gk] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = as[kk][tr + 16 * i];
                b[i] = bs[kk][tc + 16 * i];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
"""
"""The main loop of a 4 x 4 register-blocked ``C = A B^T`` kernel (256 threads, 16 x 16, per 64 x 64 output tile;
k through shared memory 16 at a time, both tiles stored k-major): it leaves each thread's outputs in ``acc[4][4]``
for rows ``m0 + tr + 16i`` and columns ``n0 + tc + 16j``. The kernel around it declares ``A``, ``B``, ``M``, ``N`` and
``K`` and writes its own epilogue."""
