"""Task families: parametric generators of ``c_function`` tasks, each with several CUDA variants.

A family is a Python module under :mod:`cudaperf.dataset.families` that defines ``FAMILY = Family(...)``. Its
``generate(index, rng)`` returns one :class:`GeneratedTask`: a task dictionary in the task-file format (the
fields of :func:`cudaperf.tasks.schema.task_from_dict`, with ``reference_c``; see ``docs/DATASET.md``) and the
CUDA variants that solve it. ``rng`` is seeded from the family name and the index, so a family's tasks are
reproducible; parameters drawn or enumerated from the index vary types, sizes, expressions and shapes so that no
two tasks are copies.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from cudaperf.tasks.schema import CFunctionTask, TaskError, task_from_dict

# The strategy vocabulary: every variant is tagged with the strategies its code uses (several may apply).
STRATEGY_TAGS: dict[str, str] = {
    "naive": "one thread per output element, the direct translation",
    "grid_stride": "a grid-stride loop over the elements",
    "coalesced": "consecutive threads access consecutive addresses",
    "strided": "consecutive threads access addresses a stride apart (uncoalesced)",
    "shared_tiling": "tiles staged through shared memory",
    "warp_shuffle": "warp-level shuffles (__shfl_*_sync) for reductions or exchanges",
    "vectorized": "vector loads/stores (float4, int4, double2, ...)",
    "atomics": "atomic operations combine partial results",
    "tree_reduction": "a block-level tree reduction in shared memory",
    "multi_pass": "several kernel launches over the data (e.g. reduce then finish)",
    "single_thread": "a single GPU thread (or one block) does sequential work",
    "thread_per_row": "one thread per row/segment/item",
    "block_per_row": "one block (or warp) per row/segment/item",
    "register_blocking": "each thread computes several outputs kept in registers",
    "unrolled": "loops unrolled by hand or with #pragma unroll",
    "many_launches": "many small kernel launches (e.g. one per step, row or element chunk)",
    "fused": "work fused into fewer kernels",
    "in_loop_transfers": "host-device copies inside a loop",
    "extra_transfers": "redundant host-device copies",
    "device_resident": "data stays on the device across steps; one copy in, one copy out",
    "pinned": "pinned (page-locked) host staging buffers",
    "pageable": "plain cudaMemcpy from pageable host memory",
    "async_streams": "asynchronous copies and/or several streams overlapping work",
    "host_compute": "part of the work done on the host",
    "constant_memory": "read-only parameters in __constant__ memory",
    "readonly_cache": "__ldg / const __restrict__ read-only loads",
    "block_64": "64 threads per block",
    "block_128": "128 threads per block",
    "block_256": "256 threads per block",
    "block_512": "512 threads per block",
    "block_1024": "1024 threads per block",
    "block_32": "32 threads per block",
    "small_grid": "far fewer threads than elements (each does a long serial chunk)",
    "branch_divergent": "thread-dependent branching inside warps",
    "branchless": "branches replaced by arithmetic or selects",
    "double_buffered": "ping-pong buffers between steps",
    "sorting_network": "a data-independent compare-exchange network",
    "two_level": "per-block partial results combined in a second stage",
    "bit_packed": "several items packed per machine word and processed with bitwise word operations",
    "mixed_precision": "low-precision storage (bf16, int8) read on the device, arithmetic in higher precision",
    "warp_vote": "warp votes (__ballot_sync / __any_sync / __all_sync, __popc of a ballot) decide or compact",
}

_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Variant:
    """One CUDA implementation of a task: a complete translation unit defining the task's function with C linkage."""

    name: str
    """Unique within the task, ``[a-z][a-z0-9_]*`` (e.g. ``naive_b256``)."""
    tags: tuple[str, ...]
    """Strategies from :data:`STRATEGY_TAGS`."""
    code: str
    description: str = ""


@dataclass(frozen=True)
class GeneratedTask:
    task: Mapping[str, Any]
    """The task dictionary (task-file format, with ``reference_c``); ``id`` is set by the family."""
    variants: tuple[Variant, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    """The family parameters this task was made from (recorded in the dataset)."""


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    generate: Callable[[int, np.random.Generator], GeneratedTask]
    n_tasks: int = 24
    """How many tasks ``cudaperf dataset build`` makes by default (indices 0..n_tasks-1)."""
    tags: tuple[str, ...] = ()
    """Task-level tags (e.g. memory-bound, compute-bound, integer)."""


def family_rng(family: str, index: int) -> np.random.Generator:
    """The generator a family's task ``index`` is drawn from: seeded by the family name and the index."""
    digest = hashlib.sha256(f"{family}:{index}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def task_id(family: str, index: int) -> str:
    return f"{family}_{index:03d}"


def normalized_code(code: str) -> str:
    """Code with comments and whitespace removed: two variants must differ in this, not only in spacing."""
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    code = re.sub(r"//[^\n]*", " ", code)
    return re.sub(r"\s+", "", code)


@dataclass(frozen=True)
class BuiltTask:
    family: str
    index: int
    task: CFunctionTask
    task_dict: Mapping[str, Any]
    variants: tuple[Variant, ...]
    params: Mapping[str, Any]


def build_task(fam: Family, index: int) -> BuiltTask:
    """Generate task ``index`` of ``fam`` and validate its structure (raises TaskError with the reason)."""
    gen = fam.generate(index, family_rng(fam.name, index))
    tid = task_id(fam.name, index)
    d = dict(gen.task)
    d["id"] = tid
    d.setdefault("kind", "c_function")
    d["tags"] = list(dict.fromkeys([fam.name, *fam.tags, *d.get("tags", ())]))
    task = task_from_dict(d)
    if not isinstance(task, CFunctionTask):
        raise TaskError(f"task {tid}: families make c_function tasks, got {task.kind}")
    if len(task.size_configs) < 3:
        raise TaskError(f"task {tid}: needs >= 3 size configurations (2+ test sizes and the timing size)")
    names = [v.name for v in gen.variants]
    if len(set(names)) != len(names):
        raise TaskError(f"task {tid}: variant names repeat: {names}")
    seen: dict[str, str] = {}
    for v in gen.variants:
        if not _ID_RE.match(v.name):
            raise TaskError(f"task {tid}: variant name {v.name!r} must match {_ID_RE.pattern}")
        bad = [t for t in v.tags if t not in STRATEGY_TAGS]
        if bad or not v.tags:
            raise TaskError(f"task {tid}: variant {v.name}: unknown or missing strategy tags {bad or '[]'}")
        key = normalized_code(v.code)
        if key in seen:
            raise TaskError(f"task {tid}: variants {seen[key]} and {v.name} are the same code")
        seen[key] = v.name
    return BuiltTask(fam.name, index, task, d, tuple(gen.variants), dict(gen.params))
