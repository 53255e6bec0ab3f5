"""Checks on a candidate's source before anything is compiled. Each rejection carries a reason.

They catch what a sandbox cannot: code that only looks like CUDA (no kernel, or a kernel never launched), macros
that redefine CUDA keywords (``#define __global__`` turns kernels into host functions; seen from a real small
model), host-side escapes (threads, processes, loader tricks, constructors, local includes) and any mention of
the harness's profiler (CUPTI) or driver symbols. A second check,
after compilation, rejects objects that define unmangled global symbols other than the task's function (they
could interpose library or harness functions such as the timer); see :func:`check_symbols`.

Preprocessing (:func:`preprocess`). The checks that require something to exist (a ``__global__`` kernel, a launch,
the task's kernel) read the source as the compiler will see it: the candidate's own text through the real
preprocessor (``gcc -E -P``, in the sandbox), with its ``#include`` lines (and every directive other than
``#define``/``#undef`` and the conditionals) removed, and the macros of the CUDA and C++ system headers predefined
(their names and numeric values, read once from ``nvcc -E -dM``; function-like and non-numeric ones expand to their
own name), so ``#if 0``, ``#ifdef NEVER_DEFINED`` and ``#ifndef CUDART_VERSION`` drop their text as nvcc's host
pass drops it. The deny lists run on both the raw and the preprocessed text: names the candidate's own macros
assemble (``CAT(fo, pen)``, ``#define OPEN fopen``) are seen. When the preprocessor fails, the raw text stands in
(never a rejection for that alone; ``StaticCheckResult.preprocessed`` says so). What stays out of reach: a
conditional on a macro of a header outside the predefined set (``#ifndef SOME_LIBRARY_VERSION``) is evaluated as
if that macro were undefined; and a directive that only the real headers make valid makes the preprocessor fail,
so the raw text is read (the run-time evidence check stands behind both).

Code that runs outside the call (:func:`dynamic_initializers`): ``__attribute__((constructor))``, and C++ dynamic
initialization of namespace-scope and class-static variables (``static int x = f();``, an object of a class with
a constructor, destructor or computed member initializer, an invoked lambda), which runs before the driver's
``main`` or after it returns.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CUDA_KEYWORDS = {
    "__global__", "__device__", "__host__", "__shared__", "__constant__", "__managed__", "__restrict__",
    "__launch_bounds__", "__forceinline__", "__noinline__", "__syncthreads", "__syncwarp", "__threadfence",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "__CUDACC__", "__CUDA_ARCH__",
}

FORBIDDEN_CALLS = {
    "fork": "creates processes", "vfork": "creates processes", "execv": "runs programs", "execve": "runs programs",
    "execvp": "runs programs", "execl": "runs programs", "execlp": "runs programs", "system": "runs programs",
    "popen": "runs programs", "pthread_create": "starts host threads", "dlopen": "loads code at run time",
    "dlsym": "looks up symbols at run time", "ptrace": "traces processes", "syscall": "makes raw system calls",
    "setenv": "changes the environment", "putenv": "changes the environment", "signal": "installs signal handlers",
    "sigaction": "installs signal handlers", "alarm": "installs timers", "setitimer": "installs timers",
    "cudaDeviceReset": "destroys the CUDA context the harness measures in",
    "cudaProfilerStop": "stops the profiler that gathers evidence",
    # Files: the harness's driver writes timings and outputs to files in the candidate's directory; a candidate
    # needs none (inputs come as arguments, results go to the output buffers).
    "fopen": "opens files", "freopen": "opens files", "fdopen": "opens files", "open": "opens files",
    "openat": "opens files", "creat": "creates files", "unlink": "deletes files", "remove": "deletes files",
    "rename": "renames files", "truncate": "truncates files", "ftruncate": "truncates files",
    "dup": "duplicates file descriptors", "dup2": "duplicates file descriptors", "chdir": "changes directory",
    "atexit": "runs code after the call", "at_quick_exit": "runs code after the call",
    "on_exit": "runs code after the call",
    # The sandbox is the boundary (private root, seccomp: cudaperf.harness.sandbox); these names are here for a
    # clear early message. The large-file and directory variants of the file calls:
    "fopen64": "opens files", "freopen64": "opens files", "open64": "opens files", "openat64": "opens files",
    "creat64": "creates files", "opendir": "lists directories", "fdopendir": "lists directories",
    "scandir": "lists directories", "nftw": "walks directories", "ftw": "walks directories",
    "symlink": "links files", "link": "links files",
    # other ways to start processes and programs
    "posix_spawn": "creates processes", "posix_spawnp": "creates processes", "clone": "creates processes",
    "clone3": "creates processes", "execvpe": "runs programs", "execle": "runs programs",
    "fexecve": "runs programs", "memfd_create": "loads code at run time", "kill": "signals processes",
    # rewriting code in memory (the timer-patching hack), and the sandbox's own mechanisms
    "mprotect": "changes memory protection (rewrites code)",
    "pkey_mprotect": "changes memory protection (rewrites code)",
    "process_vm_readv": "reads other processes' memory", "process_vm_writev": "writes other processes' memory",
    "unshare": "leaves the sandbox's namespaces", "setns": "leaves the sandbox's namespaces",
    "mount": "mounts file systems", "umount": "mounts file systems", "umount2": "mounts file systems",
    "chroot": "changes the root directory", "prctl": "changes process controls",
    "personality": "changes the process's execution domain", "seccomp": "changes the system-call filter",
    # the network (the sandbox cuts it; named for a clear early message)
    "socket": "opens network sockets", "socketpair": "opens sockets", "connect": "connects to the network",
    "sendto": "sends over the network", "recvfrom": "reads the network",
    "sendmsg": "sends over the network", "recvmsg": "reads the network", "getaddrinfo": "resolves host names",
    "gethostbyname": "resolves host names",
}

ADDRESS_TAKEN = {
    "system", "popen", "fork", "vfork", "execv", "execve", "execvp", "execl", "execlp", "execvpe", "execle",
    "fexecve", "posix_spawn", "posix_spawnp", "dlopen", "dlsym", "syscall", "mprotect", "pkey_mprotect",
    "pthread_create", "fopen", "fopen64", "freopen", "freopen64", "fdopen", "opendir", "memfd_create", "ptrace",
    "setenv", "putenv", "atexit", "on_exit", "at_quick_exit", "socket", "connect", "process_vm_readv",
    "process_vm_writev", "clone", "clone3", "unshare", "setns", "prctl",
}
"""Forbidden functions that are also rejected when named without a call: taken as a pointer (``&popen``,
``f = popen;``, ``(popen)(...)``, passed as an argument), the way around a check that looks for calls."""

MAX_CODE_BYTES = 1 << 20
"""The largest candidate source the checks accept (1 MiB of UTF-8): the bundled fast candidates are a few KiB; a
20 MB one took minutes in these checks alone before reaching nvcc."""

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])'")
_LAUNCH_BOUNDS = r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*"
KERNEL_DEF_PATTERN = (
    rf"__global__\s+(?:{_LAUNCH_BOUNDS})?(?:static\s+|inline\s+|__forceinline__\s+)*void\s+"
    rf"(?:{_LAUNCH_BOUNDS})?(\w+)\s*\("
)
"""A kernel definition; group 1 is its name. ``__launch_bounds__(...)`` may stand before or after ``void`` (both
are legal CUDA, and the second is the common spelling), with parenthesized expressions inside."""
_KERNEL_DEF = re.compile(KERNEL_DEF_PATTERN)
_DEFINE = re.compile(r"^\s*#\s*(define|undef)\s+(\w+)", re.M)
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]*)[>"]', re.M)


def strip_comments_and_strings(src: str) -> str:
    """Source with comments removed and string/char literals emptied (keeps the line structure)."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    # Strings first would break on '//' inside strings; handle both in one left-to-right pass.
    token = re.compile(_STRING.pattern + r"|" + _COMMENT.pattern, re.S)
    out = []
    pos = 0
    for m in token.finditer(src):
        out.append(src[pos : m.start()])
        text = m.group(0)
        if text.startswith(("//", "/*")):
            out.append(blank(m))
        else:
            out.append(text[0] + " " * (len(text) - 2) + text[-1])
        pos = m.end()
    out.append(src[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Preprocessing

PP_HEADERS = (
    "cuda_runtime.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h", "cooperative_groups.h", "mma.h", "device_launch_parameters.h",
    "cstdio", "cstdlib", "cstring", "cmath", "cstdint", "cfloat", "climits", "cassert", "cstddef", "algorithm",
    "vector", "iostream", "chrono", "limits", "type_traits", "utility", "numeric", "functional", "memory",
    "stdio.h", "stdlib.h", "string.h", "math.h", "stdint.h", "float.h", "limits.h", "assert.h", "time.h",
)
"""Headers whose macros are predefined when a candidate's conditionals are evaluated (:func:`header_macros`)."""

PP_TIMEOUT_S = 20.0
PP_OUTPUT_BYTES = 8 << 20
"""The preprocessed text may be at most this large (a macro bomb fails the preprocessor: the raw text is read)."""

_PP_KEEP = frozenset({"define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"})
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w*)", re.M)
_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else)\b", re.M)
_MACRO_DEF = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\()?(.*)$", re.M)
_NUMERIC_BODY = re.compile(r"[\s\d().+\-*/%<>=!&|^~?:uUlLxXa-fA-F]*")
_FALLBACK_MACROS = ("#define __CUDACC__ 1\n#define __NVCC__ 1\n#define __CUDACC_VER_MAJOR__ 13\n"
                    "#define CUDART_VERSION 13000\n#define CUDA_VERSION 13000\n")


def needs_preprocessing(code: str) -> bool:
    """Whether the preprocessor can change what the checks see: a conditional, a line splice, ``_Pragma``, or a
    macro that is function-like or whose body holds a name (``#define BLOCK 256`` alone changes nothing)."""
    text = strip_comments_and_strings(code.replace("\\\r\n", "").replace("\\\n", ""))
    if "\\\n" in code or "\\\r\n" in code or "_Pragma" in text or _CONDITIONAL.search(text):
        return True
    for m in _MACRO_DEF.finditer(text):
        if m.group(2) or re.search(r"[A-Za-z_]", re.sub(r"\b\d[\w.]*", "", m.group(3))):
            return True
    return False


def _preprocessor_input(code: str) -> str:
    """The candidate's text for the preprocessor: lines spliced, and every directive line other than the macro
    definitions and conditionals blanked (``#include``, ``#pragma``, ``#error``, ``#line``...): nothing is read
    from the file system and no diagnostic the real headers would avoid stops the preprocessor."""
    spliced = code.replace("\\\r\n", "").replace("\\\n", "")
    lines = spliced.split("\n")
    scan = strip_comments_and_strings(spliced).split("\n")  # same line structure; '#/**/include' is a directive
    for i, line in enumerate(scan):
        m = _DIRECTIVE.match(line)
        if m and m.group(1) not in _PP_KEEP:
            lines[i] = ""
    return "\n".join(lines) + "\n"


def _filter_macros(dump: str) -> str:
    """``-dM`` output made safe to predefine: numeric object-like macros keep their value (``CUDART_VERSION``,
    ``M_PI``); every other macro (function-like, or naming things, such as ``__global__``) expands to its own name,
    so ``defined(X)`` holds while the candidate's text is not rewritten. The host pass has no ``__CUDA_ARCH__``."""
    out = []
    for line in dump.splitlines():
        m = re.match(r"#define (\w+)(\([^)]*\))?(?: (.*))?$", line)
        if not m:
            continue
        name, params, body = m.group(1), m.group(2), m.group(3) or ""
        if name.startswith("__CUDA_ARCH") or name in ("__cplusplus", "__STDC__", "__STDC_HOSTED__") or \
                name.startswith("__STDC_"):
            continue
        if params is not None:
            out.append(f"#define {name}{params} {name}")
        elif _NUMERIC_BODY.fullmatch(body) and not re.search(r"[A-Za-z_]", re.sub(r"\b\d[\w.]*", "", body)):
            out.append(f"#define {name} {body}")
        else:
            out.append(f"#define {name} {name}")
    return "\n".join(out) + "\n"


@lru_cache(maxsize=1)
def header_macros() -> str:
    """The macros of :data:`PP_HEADERS` as nvcc's host pass defines them (C++17), filtered by :func:`_filter_macros`;
    read once per toolchain and kept in the build cache. Trusted input (a fixed list of system headers), so nvcc
    runs outside the sandbox, as the reference builds do. Without nvcc, a minimal set of CUDA macros."""
    from cudaperf.harness.compile import ToolchainError, cache_dir, nvcc_path, nvcc_version

    try:
        nvcc = nvcc_path()
        version = nvcc_version()
    except ToolchainError:
        return _FALLBACK_MACROS
    key = hashlib.sha256("\n".join((version, *PP_HEADERS, "v1")).encode()).hexdigest()[:16]
    path = cache_dir() / f"pp-macros-{key}.h"
    if path.is_file():
        return path.read_text()
    tmp = cache_dir() / f".pp-macros-{key}-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    try:
        src = tmp / "headers.cu"
        src.write_text("".join(f"#include <{h}>\n" for h in PP_HEADERS))
        run = subprocess.run([nvcc, "-E", "-std=c++17", "-Xcompiler", "-dM", "-x", "cu", str(src)],
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0 or "#define" not in run.stdout:
            return _FALLBACK_MACROS
        macros = _filter_macros(run.stdout)
        part = tmp / "macros.h"
        part.write_text(macros)
        os.replace(part, path)
        return macros
    except (OSError, subprocess.SubprocessError):
        return _FALLBACK_MACROS
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True)
class Preprocessed:
    """``text``: the candidate as the preprocessor leaves it, or None; ``note``: ``not needed``, ``gcc -E`` or
    why it failed (the checks then read the raw text)."""

    text: str | None
    note: str


@lru_cache(maxsize=2048)
def preprocess(code: str) -> Preprocessed:
    """The candidate's text through ``gcc -E -P -undef -nostdinc`` in the sandbox (see the module docstring), or
    ``text=None`` when it is not needed (:func:`needs_preprocessing`) or failed."""
    if not needs_preprocessing(code):
        return Preprocessed(None, "not needed")
    from cudaperf.harness.sandbox import SandboxLimits, Workdir, run_sandboxed, scrubbed_env, share_file

    gcc = shutil.which("gcc")
    if gcc is None:
        return Preprocessed(None, "failed: gcc not found")
    argv = [gcc, "-E", "-P", "-undef", "-nostdinc", "-w", "-std=c++17", "-x", "c++"]
    with Workdir(prefix="cudaperf-pp-") as w:
        src = w / "candidate.cu"
        src.write_text(_preprocessor_input(code), encoding="utf-8", errors="surrogatepass")
        share_file(src)
        if _CONDITIONAL.search(strip_comments_and_strings(code)):
            (w / "macros.h").write_text(header_macros())
            share_file(w / "macros.h")
            argv += ["-include", "macros.h"]
        argv += ["candidate.cu", "-o", "candidate.ii"]
        try:
            run = run_sandboxed(argv, w, env=scrubbed_env(w, {"PATH": f"{Path(gcc).parent}:/usr/bin:/bin"}),
                                limits=SandboxLimits(wall_s=PP_TIMEOUT_S, cpu_s=int(PP_TIMEOUT_S),
                                                     file_size_bytes=PP_OUTPUT_BYTES))
        except OSError as exc:
            return Preprocessed(None, f"failed: the sandbox could not run the preprocessor ({exc})")
        out = w / "candidate.ii"
        if not run.ok or not out.is_file():
            return Preprocessed(None, f"failed: {run.describe()}: {(run.stderr or run.stdout).strip()[:200]}")
        return Preprocessed(out.read_text(errors="replace"), "gcc -E")


def _line_of(code: str, index: int) -> int:
    return code.count("\n", 0, index) + 1


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_reasons(code: str) -> list[str]:
    """Characters no source file can hold: NUL bytes, and lone surrogates (not valid Unicode, so not writable as
    UTF-8 for the compiler)."""
    reasons = []
    nul = code.find("\x00")
    if nul >= 0:
        reasons.append(f"the code contains a NUL byte (line {_line_of(code, nul)}): a source file must be text")
    sur = _SURROGATE.search(code)
    if sur:
        reasons.append(f"the code contains an invalid character U+{ord(sur.group(0)):04X} (a lone surrogate, line "
                       f"{_line_of(code, sur.start())}): it cannot be written as UTF-8 for the compiler")
    return reasons


@dataclass(frozen=True)
class StaticCheckResult:
    ok: bool
    reasons: tuple[str, ...]
    kernels: tuple[str, ...]
    launched: tuple[str, ...]
    preprocessed: str = "not needed"
    """How the checks that require something to exist read the source: ``not needed`` (the raw text is what the
    compiler sees), ``gcc -E`` (the preprocessed text), or ``failed: ...`` (the raw text stood in)."""


def kernel_names(code: str) -> list[str]:
    return _KERNEL_DEF.findall(strip_comments_and_strings(code))


_NAMES = "|".join(sorted(FORBIDDEN_CALLS, key=len, reverse=True))
_CALL = re.compile(rf"(?:(?<![\w.:>])|(?<![\w:])::\s*|\bstd\s*::\s*)({_NAMES})\s*\(")
"""``name(...)``, ``std::name(...)`` and ``::name(...)``, not ``obj.name(...)``, ``p->name(...)`` or
``Other::name(...)``."""
_ADDR_NAMES = "|".join(sorted(ADDRESS_TAKEN, key=len, reverse=True))
_ADDRESS = re.compile(rf"(?:&\s*(?:::\s*)?({_ADDR_NAMES})\b|\(\s*(?:::\s*)?({_ADDR_NAMES})\s*\)|"
                      rf"[=,(]\s*(?:::\s*)?({_ADDR_NAMES})\s*[;,)])")


def _deny_reasons(text: str, joined: str) -> list[str]:
    """The deny-list checks on one text (comments gone, strings blanked) and ``joined`` (the same text with its
    string literals intact and adjacent ones joined, for inline assembly)."""
    reasons = []
    calls = set(_CALL.findall(text))
    taken = {n for groups in _ADDRESS.findall(text) for n in groups if n}
    for name, why in FORBIDDEN_CALLS.items():
        if name in calls:
            reasons.append(f"calls {name}(): {why}, which candidates may not do")
        elif name in taken:
            reasons.append(f"takes the address of {name}: {why}, which candidates may not do")
    l2 = re.search(r"\b(cudaLimitPersistingL2CacheSize|\w*AccessPolicyWindow|accessPolicyWindow|"
                   r"cudaAccessPropertyPersisting)\b", text)
    if l2:
        reasons.append(f"uses {l2.group(1)}: persisting-L2 controls keep data in L2 across the harness's cache flush "
                       "between timed calls")
    if re.search(r"\bstd::(thread|jthread|async)\b", text):
        reasons.append("uses std::thread/std::async: host threads are not allowed")
    if re.search(r"\b(?:std::)?(?:basic_)?(?:[io]?fstream|filebuf|filesystem)\b", text):
        reasons.append("uses C++ file streams or std::filesystem: candidates may not touch files")
    if re.search(r"\b(?:asm|__asm__|__asm)\b[\s\S]{0,400}?(?:syscall|sysenter|int\s*\$?0x80|svc\s)", joined):
        reasons.append("inline assembly that makes system calls is not allowed")
    for label in re.findall(r"\b(?:asm|__asm__|__asm)\s*\(\s*\"(\w+)\"\s*\)\s*[;={,]", joined):
        if label in FORBIDDEN_CALLS:
            reasons.append(f"renames a declaration to {label} with an assembler label: {FORBIDDEN_CALLS[label]}, "
                           "which candidates may not do")
    probe = re.search(r"\b(cupti\w*|cudaperf_\w*|InitializeInjection|CUDA_INJECTION64_PATH)\b", text, re.I)
    if probe:
        reasons.append(f"names {probe.group(1)}: the harness's profiler and driver are off limits")
    if re.search(r"__attribute__\s*\(\(\s*(constructor|destructor)", text):
        reasons.append("__attribute__((constructor/destructor)): code running outside the call is not allowed")
    if re.search(r"\b__cxa_(?:thread_)?atexit\b", text):
        reasons.append("names __cxa_atexit: code running after the call is not allowed")
    return reasons


def _joined(code: str) -> str:
    """``code`` with its adjacent string literals joined ("sys" "call" is one string to the compiler)."""
    return re.sub(r'"\s*"', "", code)


def check_source(code: str, *, kind: str = "c_function", kernel_name: str | None = None) -> StaticCheckResult:
    """Static checks for a candidate of task kind ``kind``. ``kernel_name`` is the kernel a ``cuda_kernel`` task
    expects the candidate to define."""
    size = len(code.encode("utf-8", errors="surrogatepass"))
    if size > MAX_CODE_BYTES:
        return StaticCheckResult(ok=False, reasons=(
            f"the code is {size} bytes; the limit is {MAX_CODE_BYTES} bytes (MAX_CODE_BYTES)",), kernels=(), launched=())
    reasons = _text_reasons(code)
    raw = strip_comments_and_strings(code)
    pp = preprocess(code) if not reasons else Preprocessed(None, "failed: not text")
    ptext = strip_comments_and_strings(pp.text) if pp.text is not None else None
    text = ptext if ptext is not None else raw  # what the compiler sees, for the checks that need something
    kernels = _KERNEL_DEF.findall(text)
    if not kernels:
        reasons.append("no __global__ kernel is defined: the candidate must run its work in a CUDA kernel")
    launched: list[str] = []
    if kind == "cuda_kernel":
        if kernel_name and kernel_name not in kernels:
            reasons.append(f"the task's kernel {kernel_name!r} is not defined (found: {kernels or 'none'})")
        launched = [k for k in kernels if k == kernel_name]
    else:
        for k in kernels:
            triple = re.search(rf"\b{re.escape(k)}\s*(?:<[^<>;]*>\s*)?<<<", text)
            api = re.search(rf"cudaLaunch\w*\s*\([^;]*\b{re.escape(k)}\b", text, re.S)
            if triple or api:
                launched.append(k)
        if kernels and not launched:
            reasons.append(
                "no kernel is launched (no `kernel<<<grid, block>>>(...)` or cudaLaunchKernel): work would run "
                "on the host"
            )
    for directive, name in _DEFINE.findall(raw):
        if name in CUDA_KEYWORDS or name.startswith("cuda") or (name.startswith("__") and name not in ("__STDC_LIMIT_MACROS",)):
            reasons.append(f"#{directive} {name}: redefining CUDA keywords, CUDA API or reserved names is not allowed")
    for bracket, path in _INCLUDE.findall(code):
        if bracket == '"' or path.startswith("/") or ".." in path:
            reasons.append(f"#include {bracket}{path}: only system headers (#include <...>) are allowed")
    reasons += _deny_reasons(raw, _joined(code))
    if ptext is not None:
        reasons += _deny_reasons(ptext, _joined(pp.text))
    reasons += dynamic_initializers(text)
    return StaticCheckResult(ok=not reasons, reasons=tuple(dict.fromkeys(reasons)), kernels=tuple(kernels),
                             launched=tuple(launched), preprocessed=pp.note)


# ---------------------------------------------------------------------------------------------------------------
# Code that runs before main or after it: dynamic initialization outside functions

_TOK = re.compile(r"\s+|([A-Za-z_]\w*)|(\.?\d(?:[\w.]|[eEpP][+-])*)|(\"[^\"\n]*\"|'[^'\n]*')|"
                  r"(::|->|==|!=|<=|>=|&&|\|\||<<|>>|\S)")
_TYPE_WORDS = frozenset(
    "void bool char short int long float double signed unsigned auto const volatile wchar_t char16_t char32_t "
    "size_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half __nv_bfloat16 "
    "dim3 float1 float2 float3 float4 double2 double3 double4 int2 int3 int4 uint2 uint3 uint4 char2 char4 uchar4 "
    "short2 longlong2 half2 __half2 cudaStream_t cudaEvent_t".split())
_CONST_CALLS = frozenset(
    "sizeof alignof __alignof__ alignas decltype noexcept static_cast reinterpret_cast const_cast "
    "abs fabs fabsf sqrt sqrtf cbrt cbrtf exp expf exp2 exp2f expm1 expm1f log logf log2 log2f log10 log10f log1p "
    "log1pf pow powf sin sinf cos cosf tan tanf asin asinf acos acosf atan atanf atan2 atan2f sinh sinhf cosh coshf "
    "tanh tanhf floor floorf ceil ceilf round roundf trunc truncf fmod fmodf fmin fminf fmax fmaxf hypot hypotf erf "
    "erff erfc erfcf ldexp ldexpf rsqrt rsqrtf min max nan nanf lowest epsilon infinity quiet_NaN signaling_NaN "
    "denorm_min round_error make_float2 make_float3 make_float4 make_int2 make_int3 make_int4 make_uint2 "
    "make_uint3 make_uint4 make_double2 make_double3 make_double4 make_half2 __float2half __half2float "
    "__float2bfloat16 __int_as_float __float_as_int".split()) | _TYPE_WORDS
"""Calls an initializer outside a function may make: casts, type conversions, the C math library and
``std::numeric_limits``: library code, never the candidate's."""
_DEVICE_OR_CONSTANT = frozenset({"__device__", "__constant__", "__shared__", "__managed__", "constexpr", "constinit"})
_SKIP_DECL = frozenset({"typedef", "using", "static_assert", "friend", "asm", "__asm__", "__asm", "namespace"})
_STRIP_GROUPS = frozenset({"__attribute__", "__align__", "alignas", "__declspec", "__launch_bounds__",
                           "__noinline__", "__forceinline__"})


def _tokens(text: str) -> list[str]:
    text = re.sub(r"^[ \t]*#.*$", "", text.replace("\\\n", ""), flags=re.M)  # directives (the raw text has them)
    return [m.group(0) for m in _TOK.finditer(text) if not m.group(0).isspace()]


def _match(toks: list[str], i: int) -> int:
    """The index after the bracket group that opens at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[toks[i]]]
    j = i + 1
    while j < len(toks) and stack:
        t = toks[j]
        if t in pairs:
            stack.append(pairs[t])
        elif t in (")", "]", "}"):
            if t == stack[-1]:
                stack.pop()
            elif t == "}":  # unbalanced: let braces win
                while stack and stack[-1] != "}":
                    stack.pop()
                if stack:
                    stack.pop()
        j += 1
    return j


def _strip_decl(decl: list[str]) -> list[str]:
    """A declaration without its template headers, attributes and alignment groups."""
    out: list[str] = []
    i = 0
    while i < len(decl):
        t = decl[i]
        if t == "template" and i + 1 < len(decl) and decl[i + 1] == "<":
            depth, j = 0, i + 1
            while j < len(decl):
                depth += {"<": 1, ">": -1, ">>": -2}.get(decl[j], 0)
                j += 1
                if depth <= 0:
                    break
            i = j
            continue
        if t in _STRIP_GROUPS and i + 1 < len(decl) and decl[i + 1] == "(":
            i = _match(decl, i + 1)
            continue
        if t == "[" and i + 1 < len(decl) and decl[i + 1] == "[":  # [[attribute]]
            i = _match(decl, i)
            continue
        out.append(t)
        i += 1
    return out


def _top_level(toks: list[str], wanted: str) -> int:
    depth = 0
    for k, t in enumerate(toks):
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == wanted and depth == 0:
            return k
    return -1


@dataclass
class _Class:
    name: str
    code: bool = False  # a user constructor or destructor, or a member initializer that computes
    mentions: set[str] | None = None


class _InitScanner:
    """A small reader of the declarations outside functions (namespace scope, and class bodies for their static
    members and constructors) over comment-free text with string literals blanked."""

    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        self.classes: dict[str, _Class] = {}
        self.pure_constexpr: set[str] = set()
        self.functions: set[str] = set()
        self.decls: list[tuple[list[str], str]] = []  # (declaration, "namespace" or "class NAME")
        self.reasons: list[str] = []

    # -- structure
    def scope(self, i: int, where: str, cls: _Class | None) -> int:
        toks, decl = self.toks, []
        while i < len(toks):
            t = toks[i]
            if t == "}":
                if decl:
                    self.declaration(decl, where, cls)
                return i + 1
            if t == ";":
                self.declaration(decl, where, cls)
                decl, i = [], i + 1
                continue
            if t == "{":
                kind = self.classify(decl)
                j = _match(toks, i)
                if kind == "namespace":
                    i, decl = self.scope(i + 1, "namespace", None), []
                    continue
                if kind in ("class", "enum"):
                    sd = _strip_decl(decl)
                    key = next(k for k, x in enumerate(sd) if x in ("class", "struct", "union", "enum"))
                    names = [x for x in sd[key + 1:] if re.fullmatch(r"[A-Za-z_]\w*", x) and x not in
                             ("class", "struct", "final", "public", "private", "protected", "virtual")]
                    name = names[0] if names and (key + 1 < len(sd) and sd[key + 1] not in (":",)) else f"<anon{i}>"
                    info = self.classes.setdefault(name, _Class(name, mentions=set()))
                    info.mentions |= set(sd[key + 1:])
                    if kind == "class":
                        self.scope(i + 1, f"class {name}", info)
                    decl = decl + [name, "<body>"]
                    i = j
                    continue
                if kind == "init":
                    decl, i = decl + toks[i:j], j
                    continue
                self.function(decl, toks[i + 1:j - 1], where, cls)
                decl, i = [], j
                continue
            decl.append(t)
            i += 1
        if decl:
            self.declaration(decl, where, cls)
        return i

    def classify(self, decl: list[str]) -> str:
        sd = _strip_decl(decl)
        if not sd:
            return "function"  # a stray block: skipped like a body
        if "namespace" in sd[:2] or (sd[0] == "extern" and len(sd) == 2 and sd[1].startswith('"')):
            return "namespace"
        if "operator" in sd:
            return "function"
        eq = _top_level(sd, "=")
        paren = _top_level(sd, "(")
        for k, x in enumerate(sd):
            if x in ("class", "struct", "union", "enum") and (eq < 0 or k < eq) and (paren < 0 or k < paren):
                if paren < 0 or paren > k:
                    return "enum" if x == "enum" else "class"
        if eq >= 0:
            return "init"
        last = sd[-1]
        if last in (")", "}", "const", "noexcept", "override", "final", "mutable", "volatile", "&", "&&", "try") \
                or "->" in sd:
            return "function"
        if re.fullmatch(r"[A-Za-z_]\w*", last) or last in (">", "]"):
            return "init"
        return "function"

    # -- what each declaration does
    def function(self, decl: list[str], body: list[str], where: str, cls: _Class | None) -> None:
        sd = _strip_decl(decl)
        if "(" in sd and sd.index("(") > 0:
            self.functions.add(sd[sd.index("(") - 1])
        if cls is not None:
            self.member_function(sd, cls)
        elif "::" in sd:  # an out-of-class constructor or destructor: A::A(...) / A::~A()
            k = sd.index("(") if "(" in sd else len(sd)
            head = sd[:k]
            if len(head) >= 3 and head[-2] == "::" and (head[-1] == head[-3] or head[-3] == "~") \
                    or (len(head) >= 4 and head[-3] == "::" and head[-2] == "~"):
                owner = head[-4] if head[-2] == "~" else head[-3]
                if owner in self.classes:
                    self.classes[owner].code = True
        if "constexpr" in sd and "(" in sd:
            name = sd[sd.index("(") - 1]
            if self.constant(body, allow_statements=True) is None:
                self.pure_constexpr.add(name)

    def member_function(self, sd: list[str], cls: _Class) -> None:
        words = [x for x in sd if x not in ("explicit", "inline", "constexpr", "__host__", "__device__", "virtual")]
        if len(words) >= 2 and words[1] == "(" and words[0] == cls.name:
            cls.code = True
        elif len(words) >= 3 and words[0] == "~" and words[1] == cls.name:
            cls.code = True

    def declaration(self, decl: list[str], where: str, cls: _Class | None) -> None:
        sd = _strip_decl(decl)
        if not sd or sd[0] in _SKIP_DECL or sd[0] == "extern" and "=" not in sd:
            return
        if cls is not None:
            words = [x for x in sd if x not in ("explicit", "inline", "constexpr", "__host__", "__device__",
                                                 "virtual")]
            if len(words) >= 2 and words[0] == cls.name and words[1] == "(":
                if not (words[-2:] == ["=", "default"] or words[-2:] == ["=", "delete"]):
                    # a declared constructor: user-provided unless defaulted here (an out-of-class body counts)
                    cls.code = True
                return
            if len(words) >= 2 and words[0] == "~" and words[1] == cls.name:
                if not (words[-2:] == ["=", "default"] or words[-2:] == ["=", "delete"]):
                    cls.code = True
                return
            if "static" not in sd:
                cls.mentions |= set(sd)
                eq = _top_level(sd, "=")
                brace = _top_level(sd, "{")
                start = eq if eq >= 0 else brace
                if start >= 0 and "(" not in sd[:start] and self.constant(sd[start + 1:]) is not None:
                    cls.code = True  # a default member initializer that computes: it runs in the constructor
                return
            if "inline" not in sd and "constexpr" not in sd:
                return  # static member declaration: its definition is outside, at namespace scope
        if _DEVICE_OR_CONSTANT & set(sd):
            return
        self.decls.append((sd, where))

    def verdicts(self) -> list[str]:
        active = {n for n, c in self.classes.items() if c.code}
        changed = True
        while changed:
            changed = False
            for n, c in self.classes.items():
                if n not in active and c.mentions and c.mentions & active:
                    active.add(n)
                    changed = True
        out = []
        for sd, where in self.decls:
            if sd[-1] == "<body>":
                continue  # a class definition that declares no variable
            eq = _top_level(sd, "=")
            head, init = (sd[:eq], sd[eq + 1:]) if eq >= 0 else (sd, [])
            paren = _top_level(head, "(")
            brace = _top_level(head, "{")
            if eq < 0 and brace >= 0:
                head, init = sd[:brace], sd[brace:]
            elif eq < 0 and paren > 0 and re.fullmatch(r"[A-Za-z_]\w*", head[paren - 1]):
                args = head[paren + 1:_match(head, paren) - 1]
                if not self.parameters(args):
                    head, init = head[:paren], head[paren:]
                else:
                    self.functions.add(head[paren - 1])
                    continue  # a function declaration
            names = [x for x in head if re.fullmatch(r"[A-Za-z_]\w*", x) and x not in _TYPE_WORDS and x not in
                     ("static", "inline", "extern", "thread_local", "struct", "class", "union", "enum", "const")]
            name = names[-1] if names else "?"
            what = None
            cls_hit = sorted(active & set(head))
            if cls_hit and not ({"*", "&", "&&"} & set(head[head.index(cls_hit[0]):])):
                what = f"an object of {cls_hit[0]}, whose constructor or destructor is the candidate's code"
            if what is None and init:
                what = self.constant(init, active=active)
            if what:
                k = len(head) - 1 - head[::-1].index(name) if name in head else 0
                member = where.startswith("class") or (k >= 2 and head[k - 1] == "::" and head[k - 2] != "std")
                scope = "a class's static member" if member else "a variable outside functions"
                out.append(f"dynamic initializer of {name} ({scope}): {what} runs before main or after it, "
                           "outside the call; only constant initializers are allowed there (make it constexpr, or "
                           "compute it inside the call)")
        return out

    def parameters(self, args: list[str]) -> bool:
        """Whether the contents of ``name(...)`` are parameter declarations (a function declaration), not
        arguments (an object constructed at load time)."""
        if not args or args == ["void"]:
            return True
        first = args[0]
        if first in _TYPE_WORDS or first in ("struct", "class", "enum", "typename", "...", "std") \
                or first in self.classes:
            return True
        return len(args) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", first) is not None and (
            re.fullmatch(r"[A-Za-z_]\w*", args[1]) is not None or args[1] in ("*", "&", "&&", "<", "::"))

    def constant(self, init: list[str], *, active: set[str] | frozenset[str] = frozenset(),
                 allow_statements: bool = False) -> str | None:
        """None when ``init`` runs no code of the candidate's, else what does."""
        k = 0
        while k < len(init):
            t = init[k]
            prev = init[k - 1] if k else "="
            if t in ("sizeof", "alignof", "__alignof__", "decltype", "noexcept") and k + 1 < len(init) \
                    and init[k + 1] == "(":
                k = _match(init, k + 1)
                continue
            if t == "[" and not (re.fullmatch(r"\w+", prev) or prev in (")", "]")):
                j = _match(init, k)
                while j < len(init) and init[j] not in ("{",):
                    j = _match(init, j) if init[j] == "(" else j + 1
                j = _match(init, j) if j < len(init) else j
                if j < len(init) and init[j] == "(":
                    return "an invoked lambda"
                k = j
                continue
            if t in ("new", "throw") and not allow_statements:
                if t == "throw":
                    return "a throw"
            if t in active:
                return f"constructing {t} (its constructor is the candidate's code)"
            if t == "(" and k and (re.fullmatch(r"[A-Za-z_]\w*", prev) or prev == ">"):
                callee = prev
                if prev == ">":
                    depth, m = 0, k - 1
                    while m >= 0:
                        depth += {">": 1, ">>": 2, "<": -1}.get(init[m], 0)
                        if depth <= 0:
                            break
                        m -= 1
                    callee = init[m - 1] if m > 0 else ">"
                at = k - 1 if prev != ">" else m - 1
                qualified_std = at >= 2 and init[at - 1] == "::" and "std" in init[max(0, at - 8):at - 1]
                if callee in _CONST_CALLS or callee.startswith("__builtin_") or callee in self.pure_constexpr:
                    pass
                elif qualified_std:
                    # a library constructor or function; its arguments are read on: an invoked lambda or a class
                    # of the candidate's is caught there, and so is a function of the candidate's handed to it
                    handed = sorted(self.functions & set(init[k:_match(init, k)]))
                    if handed:
                        return f"library code called with the candidate's function {handed[0]}"
                elif allow_statements and callee in ("if", "for", "while", "switch", "return"):
                    pass
                else:
                    return f"the call {callee}(...)"
            k += 1
        return None


def dynamic_initializers(text: str) -> list[str]:
    """Reasons against variables outside functions whose initialization runs code before ``main`` (or whose
    destruction runs it after): a call that is not a cast, a type conversion or the math library, an invoked
    lambda, or an object of a class of the candidate's with a constructor, a destructor or a computed member
    initializer. ``text``: comment-free, strings blanked. Constant initializers (literals, arithmetic,
    ``constexpr``/``constinit``, aggregates of literals, ``sizeof``) and ``__device__``/``__constant__`` variables
    are allowed; so are objects of library types (``std::vector<float> v;``)."""
    scanner = _InitScanner(_tokens(text))
    scanner.scope(0, "namespace", None)
    return scanner.verdicts()


ALLOWED_SYMBOL_PREFIXES = ("_Z", "DW.ref.", "__cudaRegisterLinkedBinary", "__nv_", "__fatbinwrap")
RESERVED_DATA_PREFIXES = ("__", "cuda", "cupti", "CUDA", "cudaperf")
_FUNCTION_TYPES = set("TW")  # nm: text (code), weak (indirect functions are refused whatever their name)
_WEAK_OBJECT_TYPES = set("Vu")  # nm: weak object, unique global


_HOST_WORKER_IMPORT = re.compile(
    r"^(?:pthread_create|thrd_create|timer_create|clone3?|__clone2?|fork|vfork|posix_spawnp?|system|popen"
    r"|cudaLaunchHostFunc(?:_ptsz)?|cudaStreamAddCallback(?:_ptsz)?|cuLaunchHostFunc(?:_ptsz)?|cuStreamAddCallback(?:_ptsz)?"
    r"|_ZNSt6thread\w*|_ZNSt6jthread\w*|_ZSt5async\w*)(?:@.*)?$")
IMPORTS_CHECK = "imports v1: host threads, processes, host callbacks; startup sections v1; ifunc v1"
"""Named in the build cache's key, so that a build judged before the check existed is judged again."""


def host_worker_references(nm_undefined: str) -> list[str]:
    """Reasons to reject an object (``nm -u`` output) that imports a way to run host code beside the call: threads
    (``pthread_create`` and ``std::thread`` however the source spells them: macros, ``using namespace std``,
    ``std::async``; C11 ``thrd_create``), ``SIGEV_THREAD`` timers, CUDA host callbacks (which run on the
    driver's thread) and new processes. An import cannot be hidden by the source's spelling; the run-time bound
    behind it is ``HarnessSettings.max_window_cpu_cores`` (the cores the run kept busy in each timing window)."""
    reasons = []
    for line in nm_undefined.splitlines():
        sym = line.split()[-1] if line.split() else ""
        if _HOST_WORKER_IMPORT.match(sym):
            name = sym.split("@")[0]
            for prefix, readable in (("_ZNSt6thread", "std::thread"), ("_ZNSt6jthread", "std::jthread"),
                                     ("_ZSt5async", "std::async")):
                if name.startswith(prefix):
                    name = readable
            reasons.append(f"refers to {name}: starts host threads, host callbacks or processes, which candidates "
                           "may not do (the GPU must do the work)")
    return list(dict.fromkeys(reasons))


_SECTION = re.compile(r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-fA-F]+\s+[0-9a-fA-F]+\s+([0-9a-fA-F]+)\s", re.M)
STARTUP_SECTIONS = (".init_array", ".preinit_array", ".fini_array", ".ctors", ".dtors")
NVCC_INIT_ENTRIES = 1
"""nvcc puts one constructor of its own in every object (the fat binary's registration, ``__sti____cudaRegisterAll``);
anything more in ``.init_array`` is the candidate's."""


def startup_code_reasons(readelf_sections: str) -> list[str]:
    """Reasons to reject an object (``readelf -SW`` output) that runs code of its own before or after the driver's
    ``main`` however the source spelled it (``[[gnu::constructor]]``, a pointer placed in ``.init_array`` with a
    section attribute, a destructor): more ``.init_array`` entries than nvcc's own registration, or any entry in
    ``.preinit_array``, ``.fini_array``, ``.ctors`` or ``.dtors``. The text checks (:func:`dynamic_initializers`)
    give the clearer message for the spellings they know; this is the boundary behind them."""
    entries: dict[str, int] = {}
    for name, size_hex in _SECTION.findall(readelf_sections):
        section = "." + name.lstrip(".").split(".", 1)[0]  # .init_array.00101 (a prioritised constructor) counts too
        if section in STARTUP_SECTIONS:
            entries[section] = entries.get(section, 0) + int(size_hex, 16) // 8
    reasons = []
    for section, n in entries.items():
        allowed = NVCC_INIT_ENTRIES if section == ".init_array" else 0
        if n > allowed:
            reasons.append(f"the object has {n} {section} entr{'y' if n == 1 else 'ies'} (at most {allowed}: nvcc's "
                           "own registration): code that runs before or after the call, which candidates may not have")
    return reasons


def check_symbols(nm_output: str, allowed: set[str]) -> list[str]:
    """Reasons to reject an object (``nm -g --defined-only`` output) that could replace functions of the C
    library, the CUDA runtime or the harness's driver: unmangled global *functions* other than ``allowed``, and
    global variables with reserved names. Ordinary host globals (``float *d_buf;``) are allowed."""
    reasons = []
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, sym = parts[1], parts[2]
        if kind == "i":  # an indirect function: its resolver runs when the program is loaded, before main
            reasons.append(f"defines the indirect function (ifunc) {sym!r}: its resolver runs when the program is "
                           "loaded, outside the call")
            continue
        if sym in allowed or sym.startswith(ALLOWED_SYMBOL_PREFIXES):
            continue
        if kind in _FUNCTION_TYPES:
            reasons.append(f"defines the global C function {sym!r}: only the task's function may have C linkage "
                           "(make helpers static, or C++ functions)")
        elif kind in _WEAK_OBJECT_TYPES:
            # a weak object with a library function's name (an assembler label, code bytes in .text) stands in for
            # that function: the driver's own fprintf or fclose would run the candidate's code (session 20)
            reasons.append(f"defines the weak global object {sym!r}: an unmangled weak or unique symbol can replace a "
                           "library function the harness calls (make it static)")
        elif sym.startswith(RESERVED_DATA_PREFIXES):
            reasons.append(f"defines the global variable {sym!r} with a reserved name (make it static)")
    return reasons
