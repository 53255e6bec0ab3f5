"""Precompiled ``torch/extension.h`` for ``ModelNew`` modules' ``load_inline`` builds (issue 25).

``load_inline`` prepends ``#include <torch/extension.h>`` to a module's C++ source and compiles it with g++ on
PyTorch's headers: most of that unit's time is parsing those headers, again for every candidate. The harness (trusted
code, outside any sandbox) precompiles the header once per toolchain into its cache, for the flag sets
candidates commonly give (:data:`VARIANTS`), as GCC's directory form of a precompiled header
(``DIR/torch/extension.h.gch/`` holding one file per variant: GCC uses the first that matches the compilation;
``DIR/torch/extension.h`` a copy of the header, which GCC reads from the same directory wherever it cannot use a
precompiled form).
A module's runs (the build ahead and the GPU run) get ``DIR`` read-only at the same path and ``CPATH=DIR``:
``CPATH`` directories are searched like ``-I`` ones, before PyTorch's ``-isystem`` directories, so g++ finds the
precompiled header first and uses it where its flags match; where they do not (other optimisation flags, other
macros), GCC ignores it and reads the header as before. The extension built is the same either way: GCC only uses
a precompiled header that is valid for the compilation (same compiler, same macros, compatible options).

PyTorch's own ``load_inline(use_pch=True)`` writes its precompiled header into PyTorch's installed headers, which a
sandboxed run cannot write and which would be shared by every candidate; this is the harness's own, read-only to
candidates. nvcc's units (``cuda_sources``) are not helped: nvcc compiles host code from preprocessed output.

On this project's CPU machine (2 cores, with another job beside it): a ``load_inline``-style unit with ``-O3``
compiled in 43.9 s cold and 18.4 s with the precompiled header; precompiling took 52.9 s once; the file is about
0.8 GB per variant.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cudaperf.harness.compile import cache_dir, gcc_version, sha256

VARIANTS: tuple[tuple[str, ...], ...] = ((), ("-O3",))
"""Flag sets (``load_inline``'s ``extra_cflags``) precompiled for: none, and ``-O3`` (most KernelBench-style
candidates give one of the two). Each costs about 0.8 GB of cache and a minute of one core once."""
BUILD_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class TorchPCH:
    root: Path | None
    """The directory to give as ``CPATH`` (it holds ``torch/extension.h.gch/``), or None."""
    message: str
    """Why there is none, or what was built."""
    seconds: float


def _torch_flags() -> tuple[str, list[str]]:
    """(the C++ compiler ``load_inline`` runs, the flags it gives every C++ unit before the candidate's own),
    without ``-DTORCH_EXTENSION_NAME`` (which the header does not use)."""
    from torch.utils import cpp_extension as ce

    includes = [*ce.include_paths(), sysconfig.get_path("include")]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for inc in includes:
        flags += ["-isystem", inc]
    return ce.get_cxx_compiler(), flags + ["-fPIC", "-std=c++20"]


def _header() -> Path:
    from torch.utils import cpp_extension as ce

    return Path(ce.include_paths()[0]) / "torch" / "extension.h"


def _key(compiler: str, flags: list[str]) -> str:
    import torch

    return sha256("torch-pch", torch.__version__, str(_header()), compiler, gcc_version(), " ".join(flags),
                  repr(VARIANTS), _header().read_text(errors="replace"))


@lru_cache(maxsize=1)
def _plan() -> tuple[str, list[str], Path] | str:
    """(the compiler, the flags, the directory the precompiled header goes to), or why there is none."""
    try:
        compiler, flags = _torch_flags()
    except Exception as exc:  # noqa: BLE001 - no torch, or no C++ toolchain: builds go on without
        return f"no precompiled header: {type(exc).__name__}: {exc}"
    exe = shutil.which(compiler)
    if exe is None:
        return f"no precompiled header: {compiler} is not on PATH"
    try:
        r = subprocess.run([exe, "-v"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"no precompiled header: {exc}"
    if "gcc version" not in r.stdout + r.stderr or "clang" in (r.stdout + r.stderr).lower():
        return f"no precompiled header: {compiler} is not GCC (GCC's precompiled headers only)"
    return exe, flags, cache_dir() / "torch-pch" / _key(compiler, flags)[:24]


def _entries() -> dict[str, int]:
    """What :func:`torch_pch` leaves in the directory, each path with its file type (``stat.S_IFMT``)."""
    gch = "torch/extension.h.gch"
    files = ["done", "torch/extension.h", *(f"{gch}/v{i}.gch" for i in range(len(VARIANTS)))]
    return {".": stat.S_IFDIR, "torch": stat.S_IFDIR, gch: stat.S_IFDIR, **dict.fromkeys(files, stat.S_IFREG)}


def _done(root: Path) -> bool:
    """The directory is built and is as :func:`torch_pch` left it: exactly its entries (GCC takes any file in
    ``extension.h.gch/`` as a candidate precompiled form), no links, each owned by this process's user and writable
    by no other, the header copy with the header's size and time (what ``#pragma once`` compares). Its content is
    not hashed (1.6 GB each time a GPU run asks): who could have written it is what is checked. Sandboxed runs get
    it read-only and, in a private root, never see the rest of the cache; but Landlock (the fallback without
    namespaces, where a run is the harness's own user) does not cover a file's mode, owner or times, so a run there
    can change those: anything other than what the harness left means the cache was changed outside it, and
    the directory is built again."""
    want = _entries()
    try:
        seen = {".": os.lstat(root)}
        if stat.S_ISDIR(seen["."].st_mode):
            seen.update((str(p.relative_to(root)), os.lstat(p)) for p in root.rglob("*"))
        header = os.stat(_header())
    except OSError:
        return False
    if seen.keys() != want.keys():
        return False
    copy = seen["torch/extension.h"]
    return (copy.st_size == header.st_size and int(copy.st_mtime) == int(header.st_mtime)
            and all(stat.S_IFMT(st.st_mode) == want[name] and st.st_uid == os.geteuid() and not st.st_mode & 0o022
                    for name, st in seen.items()))


def _lock_path(root: Path) -> Path:
    """The file whose lock :func:`torch_pch` holds while it builds ``root`` (beside it in the cache, which sandboxed
    runs never see)."""
    return root.parent / f".{root.name}.lock"


def ready_pch() -> Path | None:
    """The precompiled header's directory if it is built already; never builds (a GPU run does not wait for it)."""
    plan = _plan()
    return plan[2] if not isinstance(plan, str) and _done(plan[2]) else None


def _build_variants(exe: str, flags: list[str], out: Path) -> str | None:
    """Every variant at once, at the lowest CPU priority, each compiler a process group that timing windows stop
    (:mod:`cudaperf.harness.quiet`, as the pool's compiles are); the first failure's output, or None."""
    from cudaperf.harness.quiet import HOST

    procs = []
    try:
        for i, variant in enumerate(VARIANTS):
            cmd = [exe, "-x", "c++-header", str(_header()), "-o", str(out / f"v{i}.gch"), *flags, *variant]
            if shutil.which("nice"):
                cmd = ["nice", "-n", "19", *cmd]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
            HOST.register(p.pid)
            procs.append(p)
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        failed = None
        for p in procs:
            try:
                log, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic() + HOST.paused_s(p.pid)))
            except subprocess.TimeoutExpired:
                p.kill()
                log, _ = p.communicate()
                log = f"timed out after {BUILD_TIMEOUT_S:.0f} s\n{log}"
            if p.returncode != 0 and failed is None:
                failed = (log or f"exit status {p.returncode}")[-500:]
        return failed
    finally:
        for p in procs:
            HOST.unregister(p.pid)
            if p.poll() is None:
                p.kill()
                p.wait()


@lru_cache(maxsize=1)
def torch_pch() -> TorchPCH:
    """The precompiled header's directory, built once (a file lock keeps concurrent builds to one); None with the
    reason where it cannot be (no torch, a compiler that is not GCC, a failed build): builds then go on without."""
    t0 = time.monotonic()
    plan = _plan()
    if isinstance(plan, str):
        return TorchPCH(None, plan, time.monotonic() - t0)
    exe, flags, root = plan
    base, key = root.parent, root.name
    if _done(root):
        return TorchPCH(root, f"precompiled torch/extension.h ({len(VARIANTS)} variants, cached)",
                        time.monotonic() - t0)
    try:
        base.mkdir(parents=True, exist_ok=True)
        # not truncated, and never through a link: a lock only needs a file to hold
        fd = os.open(_lock_path(root), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return TorchPCH(None, f"no precompiled header: its build lock: {exc}", time.monotonic() - t0)
    with open(fd) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait, then use its result
        if _done(root):
            return TorchPCH(root, f"precompiled torch/extension.h ({len(VARIANTS)} variants, cached)",
                            time.monotonic() - t0)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
        try:
            out = staging / "torch" / "extension.h.gch"
            out.mkdir(parents=True)
            failed = _build_variants(exe, flags, out)
            if failed is not None:
                return TorchPCH(None, f"no precompiled header: its build failed: {failed}", time.monotonic() - t0)
            # The header itself beside its precompiled forms: GCC uses a precompiled header only for a unit's
            # first include; a later ``#include <torch/extension.h>`` (load_inline prepends one to sources that
            # often have their own), or any compile none of them fits, then reads the header from this directory,
            # where it must exist. A copy with its time kept, which ``#pragma once`` takes for the same file.
            shutil.copy2(_header(), staging / "torch" / "extension.h")
            (staging / "done").write_text(" ".join(flags))
            for p in [staging, *staging.rglob("*")]:  # readable by the sandbox's users, writable by none
                p.chmod(0o755 if p.is_dir() else 0o444)
            if root.is_symlink() or root.is_file():  # a tree that failed :func:`_done`: whatever is there goes
                root.unlink()
            elif root.exists():
                shutil.rmtree(root, ignore_errors=True)
            os.rename(staging, root)
        except (OSError, subprocess.SubprocessError) as exc:
            return TorchPCH(None, f"no precompiled header: {type(exc).__name__}: {exc}", time.monotonic() - t0)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return TorchPCH(root, f"precompiled torch/extension.h ({len(VARIANTS)} variants) in "
                          f"{time.monotonic() - t0:.0f} s", time.monotonic() - t0)
