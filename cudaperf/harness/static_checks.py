"""Checks on a candidate's source before anything is compiled. Each rejection carries a reason.

They catch what a sandbox cannot: code that only looks like CUDA (no kernel, or a kernel never launched), macros
that redefine CUDA keywords (``#define __global__`` turns kernels into host functions; seen from a real small
model), host-side escapes (threads, processes, loader tricks, constructors, local includes) and any mention of
the harness's profiler (CUPTI) or driver symbols. A second check,
after compilation, rejects objects that define unmangled global symbols other than the task's function (they
could interpose library or harness functions such as the timer); see :func:`check_symbols`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def kernel_names(code: str) -> list[str]:
    return _KERNEL_DEF.findall(strip_comments_and_strings(code))


def check_source(code: str, *, kind: str = "c_function", kernel_name: str | None = None) -> StaticCheckResult:
    """Static checks for a candidate of task kind ``kind``. ``kernel_name`` is the kernel a ``cuda_kernel`` task
    expects the candidate to define."""
    size = len(code.encode("utf-8", errors="surrogatepass"))
    if size > MAX_CODE_BYTES:
        return StaticCheckResult(ok=False, reasons=(
            f"the code is {size} bytes; the limit is {MAX_CODE_BYTES} bytes (MAX_CODE_BYTES)",), kernels=(), launched=())
    reasons = _text_reasons(code)
    text = strip_comments_and_strings(code)
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
    for directive, name in _DEFINE.findall(text):
        if name in CUDA_KEYWORDS or name.startswith("cuda") or (name.startswith("__") and name not in ("__STDC_LIMIT_MACROS",)):
            reasons.append(f"#{directive} {name}: redefining CUDA keywords, CUDA API or reserved names is not allowed")
    for bracket, path in _INCLUDE.findall(code):
        if bracket == '"' or path.startswith("/") or ".." in path:
            reasons.append(f"#include {bracket}{path}: only system headers (#include <...>) are allowed")
    for name, why in FORBIDDEN_CALLS.items():
        # name(...), std::name(...) and ::name(...), not obj.name(...), p->name(...) or Other::name(...)
        if re.search(rf"(?:(?<![\w.:>])|(?<![\w:])::\s*|\bstd\s*::\s*){name}\s*\(", text):
            reasons.append(f"calls {name}(): {why}, which candidates may not do")
        elif name in ADDRESS_TAKEN and re.search(
                rf"(?:&\s*(?:::\s*)?{name}\b|\(\s*(?:::\s*)?{name}\s*\)|[=,(]\s*(?:::\s*)?{name}\s*[;,)])", text):
            reasons.append(f"takes the address of {name}: {why}, which candidates may not do")
    l2 = re.search(r"\b(cudaLimitPersistingL2CacheSize|\w*AccessPolicyWindow|accessPolicyWindow|"
                   r"cudaAccessPropertyPersisting)\b", text)
    if l2:
        reasons.append(f"uses {l2.group(1)}: persisting-L2 controls keep data in L2 across the harness's cache flush "
                       "between timed calls")
    if re.search(r"\bstd::(thread|jthread|async)\b", text):
        reasons.append("uses std::thread/std::async: host threads are not allowed")
    if re.search(r"\b(?:std::)?(?:[io]?fstream|filebuf|filesystem)\b", text):
        reasons.append("uses C++ file streams or std::filesystem: candidates may not touch files")
    joined = re.sub(r'"\s*"', "", code)  # "sys" "call": adjacent string literals are one string to the compiler
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
    return StaticCheckResult(ok=not reasons, reasons=tuple(dict.fromkeys(reasons)), kernels=tuple(kernels),
                             launched=tuple(launched))


ALLOWED_SYMBOL_PREFIXES = ("_Z", "DW.ref.", "__cudaRegisterLinkedBinary", "__nv_", "__fatbinwrap", "_fini", "_init")
RESERVED_DATA_PREFIXES = ("__", "cuda", "cupti", "CUDA", "cudaperf")
_FUNCTION_TYPES = set("TWi")  # nm: text (code), weak, indirect function


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
        if sym in allowed or sym.startswith(ALLOWED_SYMBOL_PREFIXES):
            continue
        if kind in _FUNCTION_TYPES:
            reasons.append(f"defines the global C function {sym!r}: only the task's function may have C linkage "
                           "(make helpers static, or C++ functions)")
        elif sym.startswith(RESERVED_DATA_PREFIXES):
            reasons.append(f"defines the global variable {sym!r} with a reserved name (make it static)")
    return reasons
