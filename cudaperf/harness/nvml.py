"""Evidence from outside a candidate's process: the driver's list of processes holding a CUDA context on a GPU,
read through NVML (``libnvidia-ml.so.1``, which ships with the driver) by the harness while the program runs.

Whatever a whole program writes in its own address space can be forged by it, the CUPTI probe's record included
(``adversarial/collatz_forged_probe_runtime.cu`` writes the probe's line itself and never touches CUDA). The
driver's process list cannot: a program that never creates a CUDA context is never in it. :class:`ContextWatch`
polls the list while the program runs and notes whether a process of the run (the process the sandbox started or
one of its descendants) appeared on the run's GPU.

Whether the list can be read here, and whether its process ids are this harness's (in a container without the
host's PID namespace the driver's ids are the host's and match nothing), is found once per harness process by
:func:`context_check_available`: a trusted CUDA program run in the sandbox must be seen. When it is not, the check
is unavailable and says why; nothing is ruled on then (the run's record says so), so a machine where NVML cannot
see processes loses the check, never an honest candidate.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

POLL_S = 0.004
"""How often the list is read while a program runs: creating a CUDA context takes far longer (tens of ms)."""

_OK, _INSUFFICIENT_SIZE = 0, 7


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2 and v3 share this layout)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


class _Nvml:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        init = getattr(self.lib, "nvmlInit_v2", None) or self.lib.nvmlInit
        rc = init()
        if rc != _OK:
            raise OSError(f"nvmlInit returned {rc}")
        self._handle = getattr(self.lib, "nvmlDeviceGetHandleByIndex_v2", None) or self.lib.nvmlDeviceGetHandleByIndex
        self._procs = None
        for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
            if hasattr(self.lib, name):
                self._procs = getattr(self.lib, name)
                break
        if self._procs is None:
            raise OSError("this NVML has no nvmlDeviceGetComputeRunningProcesses_v2/_v3")
        self._lock = threading.Lock()

    def compute_pids(self, index: int) -> set[int]:
        handle = ctypes.c_void_p()
        with self._lock:
            rc = self._handle(ctypes.c_uint(index), ctypes.byref(handle))
            if rc != _OK:
                raise OSError(f"nvmlDeviceGetHandleByIndex({index}) returned {rc}")
            n = ctypes.c_uint(0)
            rc = self._procs(handle, ctypes.byref(n), None)
            if rc == _OK:
                return set()
            if rc != _INSUFFICIENT_SIZE:
                raise OSError(f"nvmlDeviceGetComputeRunningProcesses returned {rc}")
            cap = n.value + 16
            # twice the room asked for: were this driver's record larger than the one declared here, its writes
            # would stay inside the buffer (and the garbled ids would fail the calibration, not the harness)
            buf = (_ProcessInfo * (2 * cap))()
            n = ctypes.c_uint(cap)
            rc = self._procs(handle, ctypes.byref(n), buf)
            if rc != _OK:
                raise OSError(f"nvmlDeviceGetComputeRunningProcesses returned {rc}")
            return {buf[i].pid for i in range(n.value)}


@lru_cache(maxsize=1)
def _nvml() -> tuple[_Nvml | None, str]:
    try:
        return _Nvml(), ""
    except (OSError, AttributeError) as exc:
        return None, f"NVML cannot be read: {exc}"


def compute_pids(index: int) -> set[int] | None:
    """Process ids with a CUDA context on GPU ``index`` (NVML's numbering, as ``nvidia-smi``), or None when NVML
    cannot be read."""
    nv, _ = _nvml()
    if nv is None:
        return None
    try:
        return nv.compute_pids(index)
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'
    rest = stat[stat.rfind(")") + 2:].split()
    return int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None


def descends_from(pid: int, root: int, max_depth: int = 64) -> bool:
    """``pid`` is ``root`` or one of its descendants (read from /proc now, while both live)."""
    for _ in range(max_depth):
        if pid == root:
            return True
        if pid <= 1:
            return False
        parent = _parent(pid)
        if parent is None:
            return False
        pid = parent
    return False


@dataclass
class ContextWatch:
    """An ``observe`` callback for :func:`cudaperf.harness.sandbox.run_sandboxed`: reads the driver's process list
    for GPU ``index`` until the run ends and notes whether a process of the run held a CUDA context.

    ``lister(index)`` gives the list (default :func:`compute_pids`; None: unreadable)."""

    index: int
    lister: Callable[[int], set[int] | None] = compute_pids
    interval_s: float = POLL_S
    seen: bool = False
    polls: int = 0
    error: str | None = None

    def __call__(self, root_pid: int, ended: threading.Event) -> None:
        while not ended.is_set():
            pids = self.lister(self.index)
            self.polls += 1
            if pids is None:
                self.error = _nvml()[1] or "NVML cannot be read"
                return
            if any(descends_from(p, root_pid) for p in pids if p != os.getpid()):
                self.seen = True
                return
            ended.wait(self.interval_s)


TRUSTED_CONTEXT_PROGRAM = """#include <cuda_runtime.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (cudaFree(0) != cudaSuccess) { fprintf(stderr, "no CUDA context\\n"); return 1; }
    usleep(150000);
    return 0;
}
"""
"""The calibration: creates a context, holds it for 150 ms, exits."""


@lru_cache(maxsize=8)
def context_check_available(index: int, arch: str | None = None) -> tuple[bool, str]:
    """Whether :class:`ContextWatch` sees the processes of a sandboxed run on GPU ``index`` (nvidia-smi's
    numbering) here: a trusted program
    that holds a CUDA context for 150 ms is run once (per harness process and GPU) and must be seen. (True, "") or
    (False, why)."""
    from cudaperf.harness.compile import build_cuda_program
    from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env

    nv, why = _nvml()
    if nv is None:
        return False, why
    build = build_cuda_program(TRUSTED_CONTEXT_PROGRAM, arch=arch, flags=(), tag="nvml-calibration")
    if build.exe is None:
        return False, f"the calibration program did not build: {build.info.log[-300:]}"
    watch = ContextWatch(index)
    with Workdir(prefix="cudaperf-nvml-") as w:
        exe = copy_in(build.exe, w, "calibrate")
        run = run_sandboxed([str(exe)], w, env=scrubbed_env(w, {"CUDA_VISIBLE_DEVICES": str(index)}),
                            limits=SandboxLimits(wall_s=30), observe=watch)
    if not run.ok:
        return False, f"the calibration program failed: it {run.describe()}: {run.stderr.strip()[-200:]}"
    if watch.error:
        return False, watch.error
    if not watch.seen:
        return False, (f"NVML never listed the calibration program's process ({watch.polls} reads): its process "
                       "ids are not this harness's (a container without the host's PID namespace?)")
    return True, ""
