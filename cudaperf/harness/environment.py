"""Facts about the machine an evaluation ran on, gathered once per process."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from cudaperf.harness.compile import ToolchainError, gcc_version, nvcc_version


@lru_cache(maxsize=1)
def gpu_inventory() -> tuple[tuple[int, str, str, int, int], ...]:
    """(index, name, driver, total MiB, free MiB) per GPU this process may use, from nvidia-smi; empty without a
    GPU. ``index`` is nvidia-smi's. Under ``CUDA_VISIBLE_DEVICES`` only the GPUs it names are listed, in its order
    (entries are indices or UUIDs), so that the k-th row is the process's CUDA device k."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ()
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,driver_version,memory.total,memory.free,uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        )
    except (subprocess.SubprocessError, OSError):
        return ()
    rows, uuids = [], []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 6 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[1], parts[2], int(float(parts[3])), int(float(parts[4]))))
            uuids.append(parts[5])
    return tuple(rows[k] for k in visible_positions(len(rows), uuids, os.environ.get("CUDA_VISIBLE_DEVICES")))


def visible_positions(n: int, uuids: list[str], visible: str | None) -> list[int]:
    """Positions (among nvidia-smi's ``n`` GPUs) that a ``CUDA_VISIBLE_DEVICES`` value selects, in its order. As
    CUDA reads it: entries are indices or (prefixes of) UUIDs, and the list ends at the first entry that names no
    GPU; unset means all."""
    if visible is None:
        return list(range(n))
    out: list[int] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit() and int(entry) < n:
            k = int(entry)
        else:
            k = next((i for i, u in enumerate(uuids) if entry and u.startswith(entry)), -1)
        if k < 0 or k in out:
            break
        out.append(k)
    return out


def device_for_child(ordinal: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value that gives a child process this process's CUDA device ``ordinal``: the
    GPU's nvidia-smi index (the child's own value replaces this process's, so a plain ordinal would name another
    GPU whenever this process was itself given a subset)."""
    inv = gpu_inventory()
    return str(inv[ordinal][0]) if 0 <= ordinal < len(inv) else str(ordinal)


def gpu_count() -> int:
    return len(gpu_inventory())


def describe_toolchain() -> tuple[str, str]:
    try:
        nv = nvcc_version()
    except ToolchainError:
        nv = "nvcc missing"
    try:
        gc = gcc_version()
    except ToolchainError:
        gc = "gcc missing"
    return nv, gc


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The host CPU as /proc/cpuinfo names it, with the logical CPU count: the sequential baselines' speed, and
    so every C task's speedup, depends on it."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} x{os.cpu_count() or 1}"


def host_name() -> str:
    return f"{platform.node()} ({platform.machine()}, {platform.system()} {platform.release()})"
