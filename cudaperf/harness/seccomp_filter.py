"""The sandbox's seccomp profiles, built with libseccomp (through its ctypes binding ``pyseccomp``).

Two named profiles; every denied call fails with ``EPERM`` (``ENOSYS`` for ``clone3``, so that the C library falls
back to ``clone``, whose flags a filter can read), the program is not killed, so the message it prints names the
call:

``tools``
    nvcc and its sub-tools, the PyTorch runner (whose KernelBench-style candidates build an extension with ninja
    and nvcc), shell scripts. They fork and exec, so both stay allowed. Denied: the escape and tampering calls no
    compiler or runner needs: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``, ``process_madvise``,
    ``kcmp``; ``mount``/``umount2``/``pivot_root``/``chroot`` and the new mount API (``fsopen``, ``fsmount``,
    ``fsconfig``, ``fspick``, ``move_mount``, ``open_tree``, ``mount_setattr``); ``unshare``, ``setns`` and any
    ``clone`` that makes a namespace; ``kexec_load``/``kexec_file_load``, ``init_module``/``finit_module``/
    ``delete_module``, ``reboot``, ``swapon``/``swapoff``, ``acct``, ``quotactl``; ``bpf``, ``perf_event_open``,
    ``userfaultfd``, the ``io_uring`` calls (they do file and network I/O that a filter cannot see);
    ``keyctl``/``add_key``/``request_key``; ``open_by_handle_at``/``name_to_handle_at``; ``iopl``/``ioperm``;
    the clock and host-name setters (``settimeofday``, ``clock_settime``, ``clock_adjtime``, ``adjtimex``,
    ``sethostname``, ``setdomainname``), ``syslog``, ``vhangup``, ``uselib``, ``lookup_dcookie``; filters of the
    program's own (``seccomp``, ``prctl(PR_SET_SECCOMP)``: one could trap the driver's clock call and forge it); and
    ``personality`` with any value but the query ``0xffffffff`` (no ``ADDR_NO_RANDOMIZE``, ``READ_IMPLIES_EXEC``).

``candidate``
    A candidate's own build (the C driver linked with it, a whole program): all of ``tools``, and no new
    processes or programs: ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD`` (threads stay allowed: the CUDA
    driver starts its own), ``execveat``, and ``execve`` with any path pointer but the one the sandbox's launcher
    uses to start the program (an address drawn at random per harness process, never mapped in the program:
    a program would have to guess it, and a wrong guess fails).

``deny_exec_remap`` (default off, either profile)
    W^X: ``mprotect``/``pkey_mprotect`` that would make memory executable and ``mmap`` of memory both writable
    and executable are denied. That stops a candidate from rewriting code in its own address space (the
    timer-patching hack rewrote ``clock_gettime``). It is off by default because it has not been tried against
    the CUDA driver, which JIT-compiles PTX and may map executable memory: try it on the GPU machine first.

The filter is a classic BPF program exported by libseccomp (``seccomp_export_bpf``) in the harness process and
loaded by the launcher (:mod:`cudaperf.harness.sandbox_root`) just before it ``execve``s the program; filters are
inherited by every child and survive ``execve``. Calls of a foreign ABI (32-bit ``int 0x80``, x32) fail libseccomp's
architecture check, which kills the process.
"""

from __future__ import annotations

import errno
import tempfile
from functools import lru_cache

PROFILES = ("tools", "candidate")

DENIED_ALWAYS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount",
    "open_tree", "mount_setattr", "unshare", "setns",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "acct", "quotactl", "quotactl_fd",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "syslog",
    "vhangup", "uselib", "lookup_dcookie", "seccomp",
)
"""Denied (EPERM) in every profile. ``seccomp`` (and ``prctl(PR_SET_SECCOMP)``, below): a filter of the program's
own could trap the driver's clock system call and answer it with a forged time (session 20's hostile review)."""

DENIED_CANDIDATE = ("fork", "vfork", "execveat")
"""Denied (EPERM) in the candidate profile, besides ``clone`` of a process and ``execve`` of any other path."""

CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
                    0x00000080)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME."""
PROT_WRITE, PROT_EXEC = 0x2, 0x4
PERSONALITY_QUERY = 0xFFFFFFFF
PR_SET_SECCOMP = 22


def available() -> str | None:
    """None when filters can be built here, else why not."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: the module loads libseccomp.so.2 at import
        return f"cannot load the libseccomp binding (pip install pyseccomp; libseccomp2): {exc}"
    return None


def _build(profile: str, exec_addrs: tuple[int, int, int] | None, deny_exec_remap: bool):
    import pyseccomp as sc

    if profile not in PROFILES:
        raise ValueError(f"unknown seccomp profile {profile!r} (known: {', '.join(PROFILES)})")
    if profile == "candidate" and (not exec_addrs or len(exec_addrs) != 3):
        raise ValueError("the candidate profile needs the launcher's exec addresses (path, argv, envp)")
    eperm = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED_ALWAYS:
        _deny(f, eperm, name)
    for flag in CLONE_NAMESPACES:  # clone(flags, ...): a new namespace
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags sit in memory a filter cannot read
    f.add_rule(eperm, "personality", sc.Arg(0, sc.NE, PERSONALITY_QUERY))  # libseccomp: one test per argument
    f.add_rule(eperm, "prctl", sc.Arg(0, sc.EQ, PR_SET_SECCOMP))
    if profile == "candidate":
        for name in DENIED_CANDIDATE:
            _deny(f, eperm, name)
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
        for i, addr in enumerate(exec_addrs):  # EPERM unless all three match: no one of them answers alone
            f.add_rule(eperm, "execve", sc.Arg(i, sc.NE, addr))
    if deny_exec_remap:
        f.add_rule(eperm, "mprotect", sc.Arg(2, sc.MASKED_EQ, PROT_EXEC, PROT_EXEC))
        f.add_rule(eperm, "pkey_mprotect", sc.Arg(2, sc.MASKED_EQ, PROT_EXEC, PROT_EXEC))
        f.add_rule(eperm, "mmap", sc.Arg(2, sc.MASKED_EQ, PROT_WRITE | PROT_EXEC, PROT_WRITE | PROT_EXEC))
    return f


@lru_cache(maxsize=None)
def build_bpf(profile: str, exec_addrs: tuple[int, int, int] | None = None, deny_exec_remap: bool = False) -> bytes:
    """The BPF program of ``profile``; ``exec_addrs``: the only ``execve`` path, argv and envp pointers the
    candidate profile lets through. Raises ValueError for an unknown profile, ImportError/OSError when libseccomp is missing."""
    f = _build(profile, exec_addrs, deny_exec_remap)
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.seek(0)
        bpf = fh.read()
    if not bpf or len(bpf) % 8:
        raise OSError(f"libseccomp exported a malformed filter ({len(bpf)} bytes)")
    return bpf


def _deny(f, action: int, name: str) -> None:
    try:
        f.add_rule(action, name)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EFAULT, errno.EDOM):  # a call this architecture lacks
            raise


def describe(profile: str, deny_exec_remap: bool = False) -> str:
    """The profile as libseccomp's pseudo-filter text, for reading (the exec address shown is a placeholder)."""
    f = _build(profile, 0x1000 if profile == "candidate" else None, deny_exec_remap)
    with tempfile.TemporaryFile("w+") as fh:
        f.export_pfc(fh)
        fh.seek(0)
        return fh.read()


if __name__ == "__main__":  # print a profile: python -m cudaperf.harness.seccomp_filter candidate
    import sys

    print(describe(sys.argv[1] if len(sys.argv) > 1 else "tools"), end="")
