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
    """(index, name, driver, total MiB, free MiB) per visible GPU, from nvidia-smi; empty without a GPU."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ()
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,name,driver_version,memory.total,memory.free", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30,
        )
    except (subprocess.SubprocessError, OSError):
        return ()
    rows = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[1], parts[2], int(float(parts[3])), int(float(parts[4]))))
    return tuple(rows)


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
