"""KernelBench-style candidates' extensions, built on the CPU pool before their GPU run.

A ``ModelNew`` module builds its CUDA with ``torch.utils.cpp_extension.load_inline`` as it runs: nvcc and g++ on
PyTorch's headers, 53 to 65 s on the H200 machine (issue 25), which used to pass inside the candidate's GPU run,
holding the GPU worker while the GPU idled. With ``HarnessSettings.prebuild_modelnew`` the module is first run
in a sandbox of its own, **without the GPU's device nodes** (it runs beside other candidates' timing), its
extensions building into a fixed path of the run's private ``/tmp``; the harness copies what it built (regular
files and directories only, never following a link: :func:`cudaperf.harness.sandbox.copy_untrusted_tree`) into
its cache, keyed by the source and the toolchain. The candidate's GPU run gets that tree at the same path, with
the same compilers, flags and ``TORCH_CUDA_ARCH_LIST`` (:func:`modelnew_env`), so ninja finds every target up to
date and ``load_inline`` only loads the library.

The build run is paused whole while anything is timed: its cgroup is frozen (the compilers ninja starts sit in
process groups of their own, and a hostile module could ``setsid``, so stopping the process group is not enough);
where no cgroup freezer is available the build is not done ahead.

What the build run reports is the candidate's to forge, and it can only harm itself with it: the tree is its
own code, loaded only by its own GPU run (never shared with another source: the key holds the whole source); a
reported build error fails it (``compile_error``), as the same error in the GPU run would have; anything else
(the module needs the GPU at import, a tree too large to keep, no private root here, a torch without CUDA) gives
no prebuilt tree, and the GPU run builds as before. It is available only where sandboxed runs get a private root
(a private ``/tmp``: the fixed path is each run's own, and the device nodes can be left out).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cudaperf.harness.compile import (_PRIORITY, cache_dir, cuda_home, default_arch, gcc_version, nvcc_version,
                                      sha256, trim_log)
from cudaperf.harness.sandbox import (SandboxLimits, Workdir, copy_in, copy_untrusted_tree, freezer_available,
                                      private_tmp_available, run_sandboxed, scrubbed_env, share_file)
from cudaperf.tasks.inputs import read_untrusted_text

BUILDER = Path(__file__).with_name("native") / "modelnew_build.py"
EXT_ROOT = "/tmp/cudaperf-torch-ext"
"""``TORCH_EXTENSIONS_DIR`` of a ``ModelNew`` module's build run and of its GPU run: a path in each run's private
``/tmp``, the same in both, since ninja's build file holds absolute paths."""
COMPILER = "torch.utils.cpp_extension (load_inline), built ahead in the sandbox"
BUILD_TIMEOUT_S = 600.0
MAX_TREE_BYTES = 512 << 20
"""A built tree larger than this is not kept (the GPU run builds again)."""
NINJA_JOBS = 2
"""``MAX_JOBS`` for ninja: a load_inline extension has two or three compile units, and several builds share the
CPU pool."""


@dataclass(frozen=True)
class ModelNewBuild:
    status: str
    """``ok`` (``ext`` holds the built extensions), ``build_error`` (the candidate's extension did not compile:
    ``message``), or ``none`` (nothing prebuilt: the GPU run builds, ``message`` says why)."""
    ext: Path | None
    message: str
    seconds: float
    """Wall time of this call (a cache hit: milliseconds)."""
    build_s: float | None = None
    """The build run's own time, when one ran (also on a cache hit: the time it took then)."""
    cached: bool = False


def cuda_arch_list(arch: str) -> str:
    """``TORCH_CUDA_ARCH_LIST`` for an ``sm_XY[a]`` arch: ``X.Y[a]``."""
    digits = arch.removeprefix("sm_")
    suffix = "a" if digits.endswith("a") else ""
    digits = digits.rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def modelnew_env(py: str, arch: str | None, *, prebuilt: bool, pch: Path | None = None) -> dict[str, str]:
    """What a ``ModelNew`` module's runs add to the sandbox's environment: nvcc and ninja on PATH, CUDA_HOME, and,
    where its extensions are prebuilt, the fixed extensions path, the arch list and ninja's jobs, identical in the
    build run and the GPU run; with ``pch`` (:func:`cudaperf.harness.torch_pch.torch_pch`'s directory, which the
    run must also get read-only: :func:`modelnew_pch`), ``CPATH`` to the precompiled ``torch/extension.h``."""
    env = {"PATH": f"{Path(py).parent}:{cuda_home() / 'bin'}:/usr/local/bin:/usr/bin:/bin",
           "CUDA_HOME": str(cuda_home())}
    if pch is not None:
        env["CPATH"] = str(pch)
    if prebuilt:
        env.update(TORCH_EXTENSIONS_DIR=EXT_ROOT, TORCH_CUDA_ARCH_LIST=cuda_arch_list(arch or default_arch()),
                   MAX_JOBS=str(NINJA_JOBS))
    return env


def modelnew_ro_paths(pch: Path | None) -> tuple[str, ...]:
    """``SandboxLimits.ro_paths`` of a ``ModelNew`` module's runs: the precompiled header's directory, which
    :func:`modelnew_env` names in ``CPATH``, read-only at the same path (nothing where there is none). The rest of
    the harness's cache, and the lock its build holds beside it, are not in the run's root."""
    return (str(pch),) if pch is not None else ()


def modelnew_pch(enabled: bool, *, build: bool = True) -> Path | None:
    """The precompiled ``torch/extension.h``'s directory for a ``ModelNew`` module's runs
    (``HarnessSettings.modelnew_pch``), built on first use (``build``; a GPU run takes it only if it is built
    already, and never waits for it); None where it is off or cannot be built (the build then reads the header as
    before)."""
    if not enabled:
        return None
    from cudaperf.harness.torch_pch import ready_pch, torch_pch

    return torch_pch().root if build else ready_pch()


@lru_cache(maxsize=1)
def prebuild_unavailable() -> str | None:
    """Why ``ModelNew`` extensions cannot be built ahead here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if getattr(torch.version, "cuda", None) is None:
        return f"torch {torch.__version__} has no CUDA: its extensions cannot be built here"
    try:
        path = modelnew_env(sys.executable, "sm_90", prebuilt=False)["PATH"]
    except Exception as exc:  # noqa: BLE001 - no CUDA toolkit: nothing can build
        return f"no CUDA toolkit: {exc}"
    if shutil.which("ninja", path=path) is None:
        return f"ninja is not on the sandbox's PATH ({path}); load_inline needs it"
    if not private_tmp_available():
        return "sandboxed runs get no private root here, so no private /tmp for a fixed extensions path"
    if not freezer_available():
        return ("no cgroup freezer here: the build (candidate code, and compilers ninja starts in process groups of "
                "their own) could not be paused whole while other candidates are timed")
    return None


def _key(code: str, arch: str, pch: Path | None) -> str:
    import torch

    return sha256("modelnew-prebuild", code, BUILDER.read_text(), torch.__version__, str(torch.version.cuda),
                  sys.version, nvcc_version(), gcc_version(), cuda_arch_list(arch), str(NINJA_JOBS), EXT_ROOT,
                  str(pch))  # a tree built with the precompiled header lists it among its dependencies


def _cache_paths(key: str) -> tuple[Path, Path]:
    d = cache_dir() / "modelnew" / key[:2]
    return d / key, d / f"{key}.json"


def prebuild_modelnew(code: str, *, arch: str | None = None, pch: bool = True) -> ModelNewBuild:
    """Build ``code``'s extensions ahead of its GPU run (cached by the source and the toolchain); see the module's
    docstring. ``pch``: with the precompiled ``torch/extension.h`` (``HarnessSettings.modelnew_pch``; the GPU run
    must say the same). Never raises for anything the candidate does."""
    t0 = time.monotonic()
    why = prebuild_unavailable()
    if why is not None:
        return ModelNewBuild("none", None, why, time.monotonic() - t0)
    arch = arch or default_arch()
    pch_root = modelnew_pch(pch)
    key = _key(code, arch, pch_root)
    tree, meta_p = _cache_paths(key)
    if meta_p.exists():
        meta = json.loads(meta_p.read_text())
        if meta["status"] != "ok" or tree.is_dir():
            return ModelNewBuild(meta["status"], tree if meta["status"] == "ok" else None, meta.get("message", ""),
                                 time.monotonic() - t0, meta.get("build_s"), cached=True)
    from cudaperf.harness.run_pytorch import sandbox_python

    py, why = sandbox_python()
    if why is not None:
        return ModelNewBuild("none", None, why, time.monotonic() - t0)
    with Workdir(prefix="cudaperf-mnbuild-") as w:
        (w / "candidate.py").write_text(code)
        share_file(w / "candidate.py")
        copy_in(BUILDER, w, "modelnew_build.py")
        env = scrubbed_env(w, modelnew_env(py, arch, prebuilt=True, pch=pch_root))
        run = run_sandboxed([py, "modelnew_build.py"], w, env=env, pausable=True,
                            limits=SandboxLimits(wall_s=BUILD_TIMEOUT_S, cpu_s=int(BUILD_TIMEOUT_S) * 4,
                                                 file_size_bytes=512 << 20, gpu_devices=False,
                                                 nice=getattr(_PRIORITY, "nice", 0),
                                                 ro_paths=modelnew_ro_paths(pch_root)))
        log = (run.stdout or "") + (run.stderr or "")
        try:
            report = json.loads(read_untrusted_text(w / "build.json", 1 << 20) or "null")
        except (OSError, ValueError):
            report = None
        if not isinstance(report, dict) or report.get("status") not in ("ok", "build_error", "error"):
            what = "timed out" if run.timed_out else run.describe()
            return ModelNewBuild("none", None, f"the build run left no report ({what})", time.monotonic() - t0)
        status = report["status"]
        build_s = report.get("seconds") if isinstance(report.get("seconds"), (int, float)) else None
        message = str(report.get("message", ""))[-4000:]
        if status == "build_error":
            return _store(key, None, {"status": "build_error", "build_s": build_s,
                                      "message": trim_log(message + "\n" + log, max_lines=60)}, t0)
        if status != "ok":  # it may need the GPU at import: the GPU run decides, and builds as before
            return ModelNewBuild("none", None, f"the module failed in the build run: {message[:300]}",
                                 time.monotonic() - t0, build_s)
        tree.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=tree.parent))
        why = copy_untrusted_tree(w / "ext", staging / "ext", max_bytes=MAX_TREE_BYTES)
        if why is not None:
            shutil.rmtree(staging, ignore_errors=True)
            return ModelNewBuild("none", None, f"its built extensions were not kept: {why}", time.monotonic() - t0,
                                 build_s)
        try:
            os.rename(staging / "ext", tree)
        except OSError:  # another thread stored the same build first
            pass
        shutil.rmtree(staging, ignore_errors=True)
        return _store(key, tree, {"status": "ok", "build_s": build_s, "message": ""}, t0)


def _store(key: str, tree: Path | None, meta: dict, t0: float) -> ModelNewBuild:
    _, meta_p = _cache_paths(key)
    meta_p.parent.mkdir(parents=True, exist_ok=True)
    tmp = meta_p.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, meta_p)
    return ModelNewBuild(meta["status"], tree, meta.get("message", ""), time.monotonic() - t0, meta.get("build_s"))


def install_prebuilt(tree: Path, workdir: Path, name: str = "ext") -> None:
    """Copy a prebuilt tree into a GPU run's working directory (modification times kept), readable by its user;
    the runner copies it to :data:`EXT_ROOT` before the candidate's module runs."""
    shutil.copytree(tree, workdir / name, copy_function=shutil.copy2)
