"""Compile candidates with nvcc and references with gcc, cached by (source hash, flags, arch, toolchain).

Candidate compilation runs in the sandbox (it is untrusted input to a compiler); reference and driver builds are
trusted. The cache stores executables and failure logs under ``$CUDAPERF_CACHE`` (default
``~/.cache/cudaperf/build``); a key is the SHA-256 of everything that affects the output, so a hit is always
safe to reuse. Writes are atomic (temp file + rename), so parallel compiles of the same source are harmless.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

from cudaperf.harness.result import CompileInfo
from cudaperf.harness.sandbox import SandboxLimits, Workdir, run_sandboxed, scrubbed_env, share_file
from cudaperf.harness.static_checks import IMPORTS_CHECK, check_symbols, host_worker_references, startup_code_reasons

NATIVE_DIR = Path(__file__).resolve().parent / "native"
DEFAULT_NVCC_FLAGS = ("-O3", "-std=c++17", "-lineinfo")
REFERENCE_FLAGS = ("-O3", "-std=gnu11", "-fno-openmp")
COMPILE_TIMEOUT_S = 180.0


class ToolchainError(RuntimeError):
    """nvcc or gcc is missing or broken: a harness fault, never a candidate failure."""


def cache_dir() -> Path:
    d = Path(os.environ.get("CUDAPERF_CACHE", Path.home() / ".cache" / "cudaperf" / "build"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _first_line_matching(text: str, pattern: str) -> str:
    for line in text.splitlines():
        if re.search(pattern, line):
            return line.strip()
    return text.strip().splitlines()[-1] if text.strip() else "unknown"


@lru_cache(maxsize=1)
def tool_path(name: str) -> str:
    """A host tool the build needs (``nm``, ...) on PATH, or ToolchainError (a harness fault, never the
    candidate's)."""
    found = shutil.which(name)
    if found is None:
        raise ToolchainError(f"{name} not found on PATH: install it (gcc, binutils; see `cudaperf doctor`)")
    return found


def nvcc_path() -> str:
    for cand in (shutil.which("nvcc"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.exists(cand):
            return cand
    raise ToolchainError("nvcc not found: install the CUDA toolkit or put nvcc on PATH (see `cudaperf doctor`)")


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    out = subprocess.run([nvcc_path(), "--version"], capture_output=True, text=True).stdout
    return _first_line_matching(out, r"release")


@lru_cache(maxsize=1)
def gcc_version() -> str:
    gcc = shutil.which("gcc")
    if not gcc:
        raise ToolchainError("gcc not found: it builds the sequential C reference (see `cudaperf doctor`)")
    return subprocess.run([gcc, "--version"], capture_output=True, text=True).stdout.splitlines()[0].strip()


@lru_cache(maxsize=1)
def cuda_home() -> Path:
    """The toolkit root holding ``include/cuda_runtime.h`` (nvcc on PATH may be a wrapper script)."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  str(Path(nvcc_path()).resolve().parent.parent), "/usr/local/cuda"]
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_runtime.h").exists():
            return Path(c)
    raise ToolchainError("cannot find the CUDA toolkit's include/cuda_runtime.h: set CUDA_HOME")


@lru_cache(maxsize=1)
def cupti_paths() -> tuple[Path, Path] | None:
    """(include dir, library dir) of CUPTI, or None when this toolkit has none."""
    home = cuda_home()
    roots = [home, home / "extras" / "CUPTI", Path("/usr/local/cuda"), Path("/usr/local/cuda/extras/CUPTI")]
    try:  # the pip wheel nvidia-cuda-cupti
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            roots += [p.parent for p in Path(loc).glob("**/include/cupti.h")]
    except (ImportError, ValueError):
        pass
    for root in roots:
        inc = root / "include"
        if (inc / "cupti.h").exists():
            for lib in ("lib64", "lib", "targets/x86_64-linux/lib"):
                libdir = root / lib
                if list(libdir.glob("libcupti.so*")):
                    return inc, libdir
    return None


def default_arch() -> str:
    """``sm_XY`` of GPU 0 (via nvidia-smi), or ``sm_90`` (the H200) when no GPU is visible."""
    env = os.environ.get("CUDAPERF_ARCH")
    if env:
        return env
    return _detected_arch()


@lru_cache(maxsize=1)
def _detected_arch() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20).stdout.split()
            if out and re.fullmatch(r"\d+\.\d+", out[0]):
                return "sm_" + out[0].replace(".", "")
        except (subprocess.SubprocessError, OSError):
            pass
    return "sm_90"


def trim_log(log: str, max_lines: int = 40, max_chars: int = 4000) -> str:
    """Keep the first errors of a compiler log: error lines and their context, then the rest up to a limit."""
    lines = [l for l in log.splitlines() if l.strip()]
    errors = [i for i, l in enumerate(lines) if re.search(r"\berror\b|undefined reference|multiple definition", l)]
    if errors:
        keep: list[str] = []
        for i in errors:
            keep.extend(lines[i : i + 3])
            if len(keep) >= max_lines:
                break
        lines = list(dict.fromkeys(keep))
    text = "\n".join(lines[:max_lines])
    return text[:max_chars]


def sha256(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class BuildOutcome:
    """An executable (or why there is none). ``stage`` says where a failure happened."""

    exe: Path | None
    info: CompileInfo
    stage: str
    """``ok``, ``compile``, ``symbols`` or ``link``."""
    reasons: tuple[str, ...] = ()


def _store(key: str, exe: Path | None, meta: dict) -> None:
    d = cache_dir() / key[:2]
    d.mkdir(parents=True, exist_ok=True)
    if exe is not None:
        tmp = d / f".{key}.{uuid.uuid4().hex}.tmp"
        shutil.copy2(exe, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, d / key)
    tmpm = d / f".{key}.{uuid.uuid4().hex}.json.tmp"
    tmpm.write_text(json.dumps(meta))
    os.replace(tmpm, d / f"{key}.json")


def _lookup(key: str) -> tuple[Path | None, dict] | None:
    d = cache_dir() / key[:2]
    meta_p = d / f"{key}.json"
    if not meta_p.exists():
        return None
    meta = json.loads(meta_p.read_text())
    if meta.get("stage") in ("compile", "link") and not meta.get("fault_aware") \
            and toolchain_fault(False, meta.get("log", "")):
        return None  # written before toolchain faults were told apart from the source's: build again
    exe = d / key
    if meta.get("stage") == "ok" and not exe.exists():
        return None
    return (exe if meta.get("stage") == "ok" else None), meta


# ---------------------------------------------------------------------------------------------------------------
# Trusted builds


_BUILD_LOCK = threading.Lock()  # one trusted build at a time: compile threads share the driver and probe objects


def _trusted_build(key: str, suffix: str, files: dict[str, str], cmd: Callable[[Path, Path], list[str]],
                   what: str) -> Path:
    """Build trusted code (gcc, not sandboxed) once into the cache and return the cached artifact.

    ``cmd(tmpdir, output)`` gives the command line; ``files`` are written into ``tmpdir`` first. Raises
    :class:`ToolchainError` with ``what`` and the trimmed compiler log when the build fails.
    """
    out = cache_dir() / key[:2] / f"{key}{suffix}"
    with _BUILD_LOCK:
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="cudaperf-trusted-") as tmp:
            t = Path(tmp)
            for name, text in files.items():
                (t / name).write_text(text)
            built = t / f"artifact{suffix}"
            argv = cmd(t, built)
            try:
                p = subprocess.run([tool_path(argv[0]), *argv[1:]], capture_output=True, text=True,
                                   timeout=COMPILE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise ToolchainError(f"{what}: {argv[0]} did not finish within {COMPILE_TIMEOUT_S:.0f} s") from None
            if p.returncode != 0:
                raise ToolchainError(f"{what}:\n{trim_log(p.stderr)}")
            tmp_out = out.parent / f".{key}.{uuid.uuid4().hex}{suffix}"
            shutil.copy2(built, tmp_out)
            os.chmod(tmp_out, 0o755)
            os.replace(tmp_out, out)
    return out


def build_reference(driver_c: str, reference_c: str, flags: tuple[str, ...] = REFERENCE_FLAGS) -> Path:
    """gcc build (default ``-O3``, single thread) of the C reference with the task's driver. Raises
    ToolchainError."""
    key = sha256("reference", driver_c, reference_c, " ".join(flags), gcc_version())
    return _trusted_build(
        key, "", {"driver.c": driver_c, "reference.c": reference_c},
        lambda t, out: ["gcc", *flags, "-o", str(out), str(t / "driver.c"), str(t / "reference.c"), "-lm"],
        "the task's C reference does not build with gcc")


def _probe_object() -> Path:
    """The CUPTI probe (or, without CUPTI, a build that reports it is unavailable) as an object file."""
    paths = cupti_paths()
    src = (NATIVE_DIR / ("probe.c" if paths else "probe_unavailable.c")).read_text()
    inc = ["-I", str(paths[0])] if paths else []
    return _trusted_build(
        sha256("probe", src, str(paths), gcc_version()), ".o", {"probe.c": src},
        lambda t, out: ["gcc", "-O2", "-fPIC", "-c", str(t / "probe.c"), "-o", str(out), "-I", str(NATIVE_DIR),
                        "-I", str(cuda_home() / "include"), *inc],
        "cannot build the CUPTI probe")


def _driver_object(driver_c: str) -> Path:
    return _trusted_build(
        sha256("driver-gpu", driver_c, gcc_version(), str(cuda_home())), ".o", {"driver.c": driver_c},
        lambda t, out: ["gcc", "-O2", "-std=gnu11", "-DCUDAPERF_GPU", "-c", str(t / "driver.c"), "-o", str(out),
                        "-I", str(NATIVE_DIR), "-I", str(cuda_home() / "include")],
        "the generated driver does not compile (a harness bug)")


# ---------------------------------------------------------------------------------------------------------------
# Untrusted builds


_PRIORITY = threading.local()
_TIMED_OUT = threading.local()
"""``hit``: an nvcc run of the build on this thread ran past ``COMPILE_TIMEOUT_S``."""


@contextmanager
def compile_priority(nice: int) -> Iterator[None]:
    """Run this thread's candidate compiles at the given niceness (19: only on CPU time that timing runs and
    reference runs leave, when a batch compiles while it measures)."""
    old = getattr(_PRIORITY, "nice", 0)
    _PRIORITY.nice = nice
    try:
        yield
    finally:
        _PRIORITY.nice = old


TOOLCHAIN_FAULT = re.compile(
    r"Resource temporarily unavailable|Cannot fork|\bv?fork: |pthread_create failed|setpriv: failed to execute"
    r"|Failed to preprocess host compiler properties")
"""Compiler output that says the toolchain could not run (the host ran out of processes, say), not that the
source is wrong. Such a build is retried, never cached, and in the end a :class:`ToolchainError`."""
TOOLCHAIN_RETRY_DELAYS_S = (1.0, 4.0)


def toolchain_fault(ok: bool, log: str) -> str | None:
    """Why a failed compile is the harness's fault, or None when it is the source's: the log says the toolchain
    could not run, or nvcc failed without a word (a syntax error always has a diagnostic)."""
    if ok:
        return None
    m = TOOLCHAIN_FAULT.search(log)
    if m:
        line = next((ln for ln in log.splitlines() if m.group(0) in ln), m.group(0))
        return line.strip()[:300]
    return None if log.strip() else "nvcc failed without any output"


def _nvcc_in_sandbox(args: list[str], workdir: Path) -> tuple[bool, str]:
    """Run nvcc on a candidate in the sandbox: (ok, log). A run that failed for the host's reasons, not the
    source's (:func:`toolchain_fault`), is retried after a pause; if it still cannot run, ToolchainError."""
    nvcc = nvcc_path()
    env = scrubbed_env(workdir, {"PATH": f"{Path(nvcc).parent}:/usr/local/bin:/usr/bin:/bin"})
    for attempt, delay_s in enumerate((*TOOLCHAIN_RETRY_DELAYS_S, None)):
        run = run_sandboxed([nvcc, *args], workdir, env=env,
                            limits=SandboxLimits(wall_s=COMPILE_TIMEOUT_S, cpu_s=math.ceil(COMPILE_TIMEOUT_S * 2),
                                                 file_size_bytes=512 << 20, nice=getattr(_PRIORITY, "nice", 0)),
                            pausable=True)
        log = run.stderr + run.stdout
        if run.timed_out:
            _TIMED_OUT.hit = True  # the candidate's failure now, but not cached (_cached_nvcc_build)
            return False, f"nvcc did not finish within {COMPILE_TIMEOUT_S:.0f} s\n" + log
        if run.signal_name:  # an output flood (SIGXFSZ) or the CPU limit: the source's doing
            log = f"nvcc was {run.describe()}\n" + log
        fault = toolchain_fault(run.ok, log)
        if fault is not None and any(TOOLCHAIN_FAULT.search(f.read_text(errors="replace"))
                                     for f in workdir.glob("*.cu")):
            fault = None  # the words are in the source (nvcc echoes source lines): a candidate cannot buy "unscored"
        if fault is None:
            return run.ok, log
        if delay_s is None:
            raise ToolchainError(f"nvcc could not run after {attempt + 1} tries ({run.describe()}): {fault}")
        time.sleep(delay_s)
    raise AssertionError("unreachable")


@lru_cache(maxsize=1)
def _probe_source() -> str:
    return (NATIVE_DIR / "probe.c").read_text()


def _cached_nvcc_build(key: str, arch: str, all_flags: tuple[str, ...],
                       build: Callable[[Path], tuple[str, str, tuple[str, ...], str]]) -> BuildOutcome:
    """Return the cached outcome for ``key`` or run ``build(workdir)`` once and cache what it made.

    ``build`` returns (stage, compiler log, rejection reasons, name of the executable in the workdir); stage
    ``ok`` means the executable exists. Failures are cached too, with their trimmed log, except a build whose nvcc
    ran past its time limit: that is the candidate's failure this time, but a machine under load (compiles
    prebuilt beside a policy's generation, many builds at once) can slow an honest heavy build that far, so the
    next evaluation of the same source builds it again.
    """
    toolchain = f"{nvcc_version()}; {gcc_version()}"
    t0 = time.monotonic()
    hit = _lookup(key)
    cached = hit is not None
    if hit is None:
        _TIMED_OUT.hit = False
        with Workdir(prefix="cudaperf-build-") as w:
            stage, log, reasons, exe_name = build(w)
            meta = {"stage": stage, "log": trim_log(log), "reasons": list(reasons), "fault_aware": True}
            if stage != "ok" and _TIMED_OUT.hit:
                hit = (None, meta)  # this time only: not stored
            else:  # fault_aware: toolchain faults never get here
                _store(key, w / exe_name if stage == "ok" else None, meta)
        hit = hit or _lookup(key)
        assert hit is not None
    exe, meta = hit
    info = CompileInfo(ok=exe is not None, compiler="nvcc", flags=all_flags, arch=arch, toolchain=toolchain,
                       log=meta.get("log", ""), cached=cached, seconds=time.monotonic() - t0)
    return BuildOutcome(exe=exe, info=info, stage=meta["stage"], reasons=tuple(meta.get("reasons", ())))


@dataclass(frozen=True)
class ObjectReport:
    defined: str
    """``nm -g --defined-only`` of the object."""
    undefined: str
    """``nm -u`` of the object (its imports)."""
    reasons: list[str]
    """Why the object is refused: C-linkage functions but ``allowed`` and reserved globals (:func:`check_symbols`),
    imported thread, callback or process starts (:func:`host_worker_references`), code before or after the call
    (:func:`startup_code_reasons`)."""


def object_reasons(obj: Path, allowed: set[str]) -> ObjectReport:
    """The checks every candidate's object gets after nvcc, read from the object whatever the source's spelling."""
    defined = subprocess.run([tool_path("nm"), "-g", "--defined-only", str(obj)], capture_output=True, text=True)
    undefined = subprocess.run([tool_path("nm"), "-u", str(obj)], capture_output=True, text=True)
    sections = subprocess.run([tool_path("readelf"), "-SW", str(obj)], capture_output=True, text=True)
    return ObjectReport(defined.stdout, undefined.stdout,
                        check_symbols(defined.stdout, allowed) + host_worker_references(undefined.stdout)
                        + startup_code_reasons(sections.stdout))


def build_c_function_candidate(code: str, driver_c: str, function_name: str, *, arch: str | None = None,
                               flags: tuple[str, ...] = DEFAULT_NVCC_FLAGS) -> BuildOutcome:
    """Compile a ``c_function`` candidate, check its symbols, and link it with the driver and the probe."""
    arch = arch or default_arch()
    all_flags = (f"-arch={arch}", *flags)
    key = sha256("cfunc", code, driver_c, " ".join(all_flags), f"{nvcc_version()}; {gcc_version()}",
                 str(cupti_paths()), _probe_source(), IMPORTS_CHECK)

    def build(w: Path) -> tuple[str, str, tuple[str, ...], str]:
        (w / "candidate.cu").write_text(code)
        share_file(w / "candidate.cu")
        ok, log = _nvcc_in_sandbox([*all_flags, "-c", "candidate.cu", "-o", "candidate.o"], w)
        if not ok:
            return "compile", log, (), "candidate"
        reasons = tuple(object_reasons(w / "candidate.o", {function_name}).reasons)
        if reasons:
            return "symbols", log, reasons, "candidate"
        objs = [_driver_object(driver_c), _probe_object()]
        for obj in objs:
            shutil.copy2(obj, w / obj.name)
            share_file(w / obj.name)
        link = [f"-arch={arch}", "candidate.o", *(o.name for o in objs), "-o", "candidate", "-lm"]
        paths = cupti_paths()
        if paths:
            link += [f"-L{paths[1]}", "-lcupti", f"-Xlinker=-rpath={paths[1]}"]
        ok, link_log = _nvcc_in_sandbox(link, w)
        return ("ok" if ok else "link"), log + link_log, (), "candidate"

    return _cached_nvcc_build(key, arch, all_flags, build)


def build_cuda_program(code: str, *, arch: str | None = None, flags: tuple[str, ...] = DEFAULT_NVCC_FLAGS,
                       tag: str = "program") -> BuildOutcome:
    """Compile a whole CUDA program (``c_program`` candidates, ``cuda_kernel`` test programs) in the sandbox."""
    arch = arch or default_arch()
    all_flags = (f"-arch={arch}", *flags)
    key = sha256(tag, code, " ".join(all_flags), f"{nvcc_version()}; {gcc_version()}")

    def build(w: Path) -> tuple[str, str, tuple[str, ...], str]:
        (w / "program.cu").write_text(code)
        share_file(w / "program.cu")
        ok, log = _nvcc_in_sandbox([*all_flags, "program.cu", "-o", "program", "-lm"], w)
        return ("ok" if ok else "compile"), log, (), "program"

    return _cached_nvcc_build(key, arch, all_flags, build)


def build_c_program(source: str, *, tag: str = "cprog", flags: tuple[str, ...] = REFERENCE_FLAGS) -> Path:
    """Trusted gcc build of a whole C program (a ``c_program`` reference or input generator)."""
    return _trusted_build(
        sha256(tag, source, " ".join(flags), gcc_version()), "", {"prog.c": source},
        lambda t, out: ["gcc", *flags, "-o", str(out), str(t / "prog.c"), "-lm"],
        "a trusted C program of the task does not build")


def injection_library() -> Path | None:
    """The CUPTI injection library for whole programs (``CUDA_INJECTION64_PATH``), or None without CUPTI."""
    paths = cupti_paths()
    if paths is None:
        return None
    srcs = {n: (NATIVE_DIR / n).read_text() for n in ("probe.c", "inject.c", "probe.h")}
    return _trusted_build(
        sha256("inject", *srcs.values(), str(paths), gcc_version()), ".so", srcs,
        lambda t, out: ["gcc", "-shared", "-fPIC", "-O2", "-I", str(t), "-I", str(paths[0]),
                        "-I", str(cuda_home() / "include"), str(t / "probe.c"), str(t / "inject.c"),
                        f"-L{paths[1]}", "-lcupti", f"-Wl,-rpath,{paths[1]}", "-o", str(out)],
        "cannot build the CUPTI injection library")
