"""Tensors between the harness and a sandboxed PyTorch runner through memory, not files.

KernelBench's largest level-1 problems hold 6.4 GB per tensor (4096 x 393216 fp32): written with ``torch.save``
into the run's directory, three trials' inputs and outputs came to 34 GiB on a disk that had 4, and every
candidate of those problems was unscored. Here the tensors travel in anonymous memory files (``memfd``) that the
harness creates and hands to the runner as inherited descriptors:

- **inputs** (:func:`write_pack` / :func:`read_pack`): one sealed memory file per prepared task holding the
  trials' inputs, the parameters and the init inputs; written once by the harness, then sealed against writes,
  growth and shrinking, so that no run can change what the next one reads. The runner maps it copy-on-write:
  its tensors are views of the harness's pages, no copy, and a write lands in the runner's private pages.
- **outputs** (:func:`output_slots`, :func:`create_output_file`): one memory file per run, sized by the harness
  from the trusted outputs (every trial's outputs at fixed, aligned offsets: the *slots*), allocated by the
  harness and sealed against growth and shrinking. The runner copies an output that has the expected dtype and
  shape straight from the GPU into its slot; of any other output it reports only the dtype and shape, which is
  already a wrong answer. A candidate can therefore neither make the transport fail (its outputs are never
  larger than the slots, and the slots exist before it runs) nor write anywhere else.

It also holds the timed calls' input perturbation (:func:`perturb`), which the runner and the harness must
compute alike. This module is copied next to the runner, which imports torch and nothing of cudaperf: it imports
only the standard library and torch.

Pack layout: ``MAGIC`` (8 bytes), the header's length (8 bytes, little-endian), the header (JSON: the object tree
with each tensor as ``{"T": [dtype, shape, offset, nbytes]}``), then each tensor's bytes, contiguous, at offsets
aligned to :data:`ALIGN`.
"""

from __future__ import annotations

import json
import mmap
import os
import warnings

import torch

MAGIC = b"CPTPACK1"
ALIGN = 64
_CHUNK = 1 << 30  # bytes per write(): Linux moves at most about 2 GiB in one call


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tree(obj, tensors: list):
    """The JSON tree of ``obj``; its tensors appended to ``tensors`` (offsets filled in later)."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return {"T": len(tensors) - 1}
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, float, str)):
        return {"V": obj}
    if isinstance(obj, list):
        return {"L": [_tree(x, tensors) for x in obj]}
    if isinstance(obj, tuple):
        return {"U": [_tree(x, tensors) for x in obj]}
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {"D": [[k, _tree(v, tensors)] for k, v in obj.items()]}
    raise TypeError(f"cannot pass a {type(obj).__name__} to the runner (tensors, numbers, strings, None, lists, "
                    "tuples and dicts with string keys only)")


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as a flat uint8 CPU tensor (no copy when it is already contiguous on the CPU)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)


def write_pack(fd: int, obj) -> int:
    """Write ``obj`` (a tree of tensors and plain values) into the file ``fd`` from offset 0; returns its size."""
    tensors: list[torch.Tensor] = []
    tree = _tree(obj, tensors)
    sizes = [t.numel() * t.element_size() for t in tensors]
    header = {"tree": tree, "tensors": [[dtype_name(t.dtype), list(t.shape), 0, n] for t, n in zip(tensors, sizes)]}
    # The header holds the offsets, which follow the header: leave room for 20 digits an offset.
    at = _align(16 + len(json.dumps(header).encode()) + 20 * len(tensors))
    for meta, n in zip(header["tensors"], sizes):
        meta[2] = at
        at = _align(at + n)
    raw = json.dumps(header).encode()
    if tensors and 16 + len(raw) > header["tensors"][0][2]:
        raise AssertionError("the pack's header outgrew its room")
    _pwrite_all(fd, MAGIC + len(raw).to_bytes(8, "little") + raw, 0)
    for t, meta in zip(tensors, header["tensors"]):
        if meta[3]:
            _pwrite_all(fd, memoryview(_as_bytes(t).numpy()), meta[2])
    total = at if tensors else 16 + len(raw)
    if os.fstat(fd).st_size < total:
        os.ftruncate(fd, total)
    return total


def _pwrite_all(fd: int, data, offset: int) -> None:
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        n = os.pwrite(fd, view[done:done + _CHUNK], offset + done)
        if n <= 0:
            raise OSError(f"short write to the pack at offset {offset + done}")
        done += n


def _tensor_at(buf: mmap.mmap, dtype: str, shape, offset: int, nbytes: int) -> torch.Tensor:
    dt = getattr(torch, dtype)
    if nbytes == 0:
        return torch.empty(shape, dtype=dt)
    with warnings.catch_warnings():  # a read-only mapping: torch warns that the tensor may not be written
        warnings.simplefilter("ignore")
        raw = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=offset)
    return raw.view(dt).reshape(shape)


def read_pack(fd: int, *, private: bool = True):
    """The object written by :func:`write_pack` into ``fd``, its tensors views of a mapping of the file (no copy).
    ``private``: a copy-on-write mapping (writes stay in this process); else read-only."""
    size = os.fstat(fd).st_size
    buf = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if private else \
        mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    if buf[:8] != MAGIC:
        raise ValueError("not a tensor pack")
    n = int.from_bytes(buf[8:16], "little")
    header = json.loads(bytes(buf[16:16 + n]))
    tensors = [_tensor_at(buf, *meta) for meta in header["tensors"]]

    def build(node):
        (kind, val), = node.items()
        if kind == "T":
            return tensors[val]
        if kind == "V":
            return val
        if kind == "L":
            return [build(x) for x in val]
        if kind == "U":
            return tuple(build(x) for x in val)
        return {k: build(v) for k, v in val}

    return build(header["tree"])


def seal(fd: int, *, writes: bool) -> None:
    """No growth or shrinking of ``fd`` from now on, and no writes when ``writes`` (nor new seals)."""
    import fcntl

    seals = fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL | (fcntl.F_SEAL_WRITE if writes else 0)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)


def memory_file(name: str) -> int:
    """A new anonymous memory file that can be sealed (its descriptor is not inherited unless passed)."""
    return os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


def output_slots(specs_per_trial) -> tuple[list[list[int]], int]:
    """Each trial's outputs at aligned offsets, one after another: (offset of output i of trial k, total bytes).
    ``specs_per_trial``: per trial, per output, ``(shape, dtype name)``."""
    slots, at = [], 0
    for specs in specs_per_trial:
        row = []
        for shape, dtype in specs:
            row.append(at)
            n = 1
            for d in shape:
                n *= int(d)
            at = _align(at + n * torch.empty(0, dtype=getattr(torch, dtype)).element_size())
        slots.append(row)
    return slots, max(at, ALIGN)


def create_output_file(nbytes: int) -> int:
    """The run's output memory file: ``nbytes`` allocated now (by the harness, whose memory it is) and sealed
    against growth and shrinking. Raises ``OSError`` when the memory cannot be had (a harness fault)."""
    fd = memory_file("cudaperf-outputs")
    try:
        os.ftruncate(fd, nbytes)
        os.posix_fallocate(fd, 0, nbytes)
        seal(fd, writes=False)
    except BaseException:
        os.close(fd)
        raise
    return fd


def slot_tensor(buf, offset: int, shape, dtype: str) -> torch.Tensor:
    """The tensor of ``shape`` and ``dtype`` stored at ``offset`` of the mapped output file ``buf``."""
    n = 1
    for d in shape:
        n *= int(d)
    nbytes = n * torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return _tensor_at(buf, dtype, list(shape), offset, nbytes)


def describe_output(o) -> dict:
    """What the runner reports of one output: dtype and shape of a tensor, else its type (and a small value)."""
    if isinstance(o, torch.Tensor):
        return {"dtype": dtype_name(o.dtype), "shape": list(o.shape)}
    return {"type": type(o).__name__}


# --- timed inputs that never repeat ------------------------------------------------------------------------------
# Shared by the runner (which perturbs each timed call's fresh input copies) and the harness (which perturbs the
# trials' inputs the same way to get, from the reference, what the re-checked timed calls should have returned).

_M64 = (1 << 64) - 1


def _mix(z: int) -> int:  # splitmix64, as the C driver's per-call stream (cudaperf.harness.driver)
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def call_seed(secret: int, k: int) -> int:
    """The perturbation seed of a timing window's ``k``-th call (warm-up calls first); 0 (no change) without a
    secret."""
    return _mix((secret + (k + 1) * 0x632BE59BD9B4E019) & _M64) if secret else 0


def perturb(inputs, seed: int) -> None:
    """Change ``inputs`` (fresh, contiguous copies) in place where the candidate cannot predict: in each
    floating-point tensor, ``m`` elements (a 1,024th, at least 8, at most 4,096) take the values of other elements
    of the same tensor (so they stay in its distribution), positions drawn from ``seed``. The same on the CPU and
    on the GPU: the values are gathered before they are scattered, to positions made distinct. Seed 0: unchanged.
    Integer and boolean tensors (indices, masks, offsets) are left as drawn."""
    if not seed:
        return
    gen = torch.Generator().manual_seed(seed & ((1 << 63) - 1))
    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            continue
        n = x.numel()
        m = min(4096, max(min(8, n), n // 1024))
        p = torch.randint(n, (m,), generator=gen)
        q = torch.randint(n, (m,), generator=gen)
        keep = {}
        for i, j in zip(p.tolist(), q.tolist()):
            keep.setdefault(i, j)  # the first draw of a position wins
        p = torch.tensor(list(keep.keys()), dtype=torch.int64, device=x.device)
        q = torch.tensor(list(keep.values()), dtype=torch.int64, device=x.device)
        flat = x.view(-1)
        flat[p] = flat[q].clone()
