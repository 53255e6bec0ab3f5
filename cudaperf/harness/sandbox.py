"""Run one untrusted program (a candidate's build, or nvcc on a candidate's source) in a sandbox.

Threat model
------------
The candidate is code written by a model that is rewarded for looking fast and correct. It may be buggy, hostile
or both. Each run gets what this machine allows of the following; what was in force is recorded in every result
(:func:`sandbox_level` for the defaults, :attr:`SandboxRun.level` per run), and a protection the kernel refuses
is named there with the reason, never dropped silently.

Covered
  * a fresh process in its own session, started by ``unshare`` in new PID, mount, network and IPC namespaces when
    the OS allows: no network, and when the run ends (or its wall-clock deadline passes) every process it started
    dies with it, including ones that called ``setsid`` or double-forked; System V shared memory, message queues
    and semaphores and POSIX message queues it creates vanish with its IPC namespace (before session 20 they
    outlived the run on the host and the next evaluation could read them: ``tests/fixtures/hostile/ipc_probe.c``);
  * a hard wall-clock timeout; on expiry the whole process group (and PID namespace, and the run's cgroup) is
    killed with SIGKILL;
  * a private root (``SandboxLimits.private_root``, on by default; needs the mount namespace): the program sees a
    tmpfs root holding read-only binds of the system directories (``/usr``, ``/etc``, ``/opt``, the ``/bin``-like
    links), the harness's Python (its prefix, base prefix and the ``sys.path`` directories outside the checkout),
    the CUDA toolkit, CUPTI, the ``LD_LIBRARY_PATH`` directories (the driver's libraries), ``/sys`` read-only, a
    fresh ``/proc``, a minimal ``/dev`` (null, zero, full, random, urandom, every ``/dev/nvidia*`` node), its
    working directory read-write at its host path, and private ``/tmp`` and ``/dev/shm`` tmpfs capped at
    ``tmp_bytes`` each that vanish with the run (a run that fills one is ended and reported so). It does not see
    the checkout's source tree, the harness user's home, the host's ``/tmp`` (other runs' directories, the
    harness's temporaries) or ``/dev/shm``; those of them that lie under a bound directory are covered by empty
    read-only tmpfs mounts, and a ``cudaperf`` package installed in a bound site-packages is hidden the same way.
    The old root is detached (``pivot_root``). The
    root is built by :mod:`cudaperf.harness.sandbox_root`, run by the harness's own Python as the namespace's
    first process, which then drops to the sandbox user, loads the seccomp filter and starts the program;
  * where no mount namespace can be had (or the private root fails its probe), Landlock instead (when the kernel
    has it): reads limited to the same paths, writes to the working directory and the device nodes only;
  * seccomp (``SandboxLimits.seccomp``, on by default), two named profiles (:mod:`cudaperf.harness.seccomp_filter`):
    ``tools`` for nvcc, shells and the PyTorch runner denies the escape calls (ptrace, process_vm_*, mount and the
    mount API, unshare, setns, namespace clones, kexec, modules, bpf, perf_event_open, io_uring, keys,
    userfaultfd, personality changes, clock setters...); ``candidate`` for a program that lies in its own working
    directory (a candidate's build) also denies new processes (fork, vfork, clone without CLONE_THREAD) and every
    ``execve`` after the program's own. ``deny_exec_remap`` (W^X: no mprotect to executable, no writable and
    executable mmap) is a separate option, off by default, untried against the CUDA driver;
  * a memory cap per run (``memory_bytes``) in a cgroup of its own: cgroup v2 ``memory.max`` (swap off,
    ``memory.oom.group``) where a writable hierarchy has the memory controller, else cgroup v1
    ``memory.limit_in_bytes``, else ``RLIMIT_DATA``. A cgroup counts what the program really uses, so a CUDA
    context's huge *reserved* address space costs nothing (``RLIMIT_AS`` would kill every CUDA program); only
    when no cgroup is writable does the sandbox fall back to ``RLIMIT_DATA`` (private writable mappings: a
    reservation made ``PROT_NONE`` is not counted, but allocations are), at the same generous value. All runs
    together are also capped (:func:`default_memory_total_bytes`, three quarters of the host's memory, on the
    runs' parent cgroup) so that many at once cannot take the host down. A run the OOM killer ends is reported
    as ended by the memory limit;
  * a process cap per run (``max_processes`` as the cgroup's ``pids.max``, besides ``RLIMIT_NPROC``); a run that
    reaches it is ended at once and reported so;
  * a cap on what the run writes to its working directory (``disk_bytes``, measured every 0.2 s; the run is
    ended and reported so) besides the per-file ``RLIMIT_FSIZE``;
  * when the harness runs as root: the program runs as a user of its own (``per_run_uid``, on by default since
    session 21: a fresh id per working directory, :data:`RUN_ID_BASE`; ``nobody`` with the switch off), so it
    cannot write what it is given read-only, cannot read the harness's files mode 0700 (the expected outputs never
    exist as files in the first place), cannot touch another run's files or processes, and ``RLIMIT_NPROC``
    counts its own processes and threads alone. Such an id has no entry in the password database, so the
    environment names a user (USER, LOGNAME: ``getpass.getuser()`` reads them first; torch's profiler raised
    KeyError without them on the H200 in session 22, and every PyTorch candidate was unscored);
  * the GPU's device nodes only where the run may use the GPU (``gpu_devices``; a ``ModelNew`` module's extension
    build ahead of its GPU run, beside other candidates' timing, gets none);
  * rlimits: CPU seconds, file size (an output flood dies with SIGXFSZ), process count, core dumps off;
  * a scrubbed environment: only PATH, HOME/TMPDIR (the private directory), USER/LOGNAME, LANG, the CUDA device
    selection and the loader path the CUDA driver needs;
  * stdout and stderr go to files in the private directory and only a trimmed prefix is read back.

  Every limit that ends a run is the candidate's failure: :meth:`SandboxRun.describe` names it (``limit``). A
  sandbox that cannot be built, or cannot start the program, raises :class:`SandboxSetupError` instead (a
  harness fault: it happens before the program runs, so a program cannot cause it).

Not covered
  * code of the candidate's outside the call: since session 21 the build reads the object itself, whatever the
    spelling: ``.init_array`` entries beyond nvcc's own registration (``[[gnu::constructor]]``, a pointer placed
    there by a section attribute, prioritised constructors), ``.fini_array``/``.ctors``/``.dtors`` entries and
    indirect functions (ifunc resolvers) are refused (``static_checks.startup_code_reasons``, ``check_symbols``).
    What is left: code reached from the task's own function only (a lazy first-call set-up inside the call is
    timed with it). Host threads are no longer in this list (session 21):
    the build refuses objects that import thread, timer-thread, host-callback or process starts, however the
    source spells them (``static_checks.host_worker_references``), and behind that the harness reads each timing
    window's CPU time of the run from outside it (``Control.cpu_s``) and refuses more than
    ``HarnessSettings.max_window_cpu_cores`` (on the H200: honest candidates 0.995 to 1.001 cores, 16 host
    threads 6.0); host work on the calling thread alone is not seen by that rule (one core's speed at most).
    The ``execve`` oracle session 20's review found (the launcher's one pinned path address) is closed since
    session 21: the path, argv and envp pointers are pinned at three independent addresses (:data:`_EXEC_ADDRS`);
  * device memory a run leaves behind: the driver, not the sandbox, decides what a later context's allocations
    hold; ``tests/gpu/test_gpu_sandbox.py`` (``tests/fixtures/hostile/gpu_residue.cu``) checks that a run's pattern
    does not reach the next run (passed on the H200, session 21);
  * GPU memory and GPU time of other processes on the same GPU: no candidate's timing window shares its GPU with
    another candidate's process (except ``timing_rounds`` > 1, where a task's trusted variants wait side by side).
    With ``HarnessSettings.overlap_runs`` a candidate's start and hidden tests overlap the previous candidate's
    exit: that one can take GPU time or device memory from them (``tests/fixtures/hostile/hog_device_memory.cu``),
    so a run that overlapped and crashed, hung, failed a CUDA call or found no usable GPU is run again alone; a
    GPU fault is sticky only for the faulting process, which is then gone;
  * the trusted driver that times a ``c_function`` candidate shares its process. What stands: the static checks
    and the symbol check stop the direct ways to replace its functions; it reads the clock with the system call
    itself (a rewritten or redirected C library ``clock_gettime`` does not reach it, nor, since session 24, the
    CUPTI probe's kernel and copy durations, which CUPTI converted with the C library's clock); the harness times every
    window with its own clock and gives no credit when the driver's record falls short of it; timed inputs are
    perturbed per call and the last timed call on each input set is re-checked against the reference on the same
    inputs; one timed call per window, drawn by the harness, is traced and must bring its outputs back from the
    device; the harness reads each record (test outputs, each window's samples, the timing outputs, the profile)
    while the program waits on its stdin, so that neither its later calls nor its static destructors and exit
    handlers can rewrite them, and a program that ends without reporting its tests gets no credit. What does not: code that rewrites the driver's memory (its sample array, its counters, its code
    through ``mprotect`` while ``deny_exec_remap`` is off) can shift time between samples within the harness's
    slack (a quarter of the window plus 10 ms), return stale outputs on timed calls that are not re-checked,
    or do host work on all but the traced call; useless copies of the inputs' size to the device and of the
    outputs' size back meet the input and byte rules, and while the host computes, a kernel that takes GPU time
    without doing the work (a grid of idle threads, a spin on the clock:
    ``adversarial/saxpy_token_grid_copy_both_ways.cu``) meets the kernel-share floor
    (``HarnessSettings.min_kernel_share``, which stops a token kernel such as ``trust/token_kernel_full_copy.cu``);
    inputs whose distributions are structured (permutations, offsets,
    sorted, aranges, constants) are not perturbed;
  * the PyTorch runner also shares its process (and, for ``ModelNew``, its interpreter) with the candidate. What
    stands: the static checks, the fast path's symbol check (no vendor library, ATen, module loader or Python C
    API), records read while the runner waits (trial outputs at ``tests_done``, samples at ``timing_done``, the
    re-checked outputs and the profile at ``stopped``), a profiler probe on a trusted op before candidate code
    (after it, a failed profiled call is the candidate's), and the floor check (trial 0's samples against the GPU
    time of the profiled call on the same inputs). What does not: the samples are CUDA events recorded in that
    process, so Python reachable from the candidate can shift them down to half the profiled call's GPU time, and
    a candidate that breaks the profiler itself as well can go lower; the harness keeps no clock of its own on
    each PyTorch call;
  * a whole program (``c_program``) reports its GPU work through a CUPTI probe loaded into its own process, so a
    host-only program can write the probe's record itself. What stands (``c_program_context_check``, on by
    default): the harness reads the driver's list of processes with a CUDA context (NVML) while each test runs,
    and a record claiming kernels from a program never in that list gets no credit (:mod:`cudaperf.harness.nvml`).
    What does not: a program that does hold a context (or starts a child that does) while it computes on the host
    and forges the record; and any forged record where NVML cannot see the sandbox's processes (no GPU or driver,
    a container whose PID namespace hides the driver's process ids), where the check is unavailable and the
    result says why;
  * side channels, kernel exploits (the seccomp profiles are deny-lists: the calls they allow are the kernel's
    attack surface), the GPU driver's own ioctls, and reading what the private root binds (system files, the
    Python installation and its site-packages, the CUDA toolkit, ``/sys``);
  * ``disk_bytes`` is polled, so a fast writer may pass it by what it writes in 0.2 s (each file stays under
    ``file_size_bytes``); the host disk itself is not reserved;
  * under ``RLIMIT_DATA`` (no writable cgroup) an allocation past the cap fails inside the program, which then
    crashes or exits in its own way: the verdict says so, but cannot tell it from other crashes;
  * if ``unshare`` is not permitted (an unprivileged container), runs fall back to a plain new session: processes
    that escape the process group by ``setsid`` are then not killed except through the run's cgroup, the network
    is not cut, and the file system is limited by Landlock only where the kernel has it. Landlock does not cover a
    file's mode, owner or times, and such a run is the harness's own user: it can change those of any file of the
    harness's user it can name (``tests/test_pch_hostile.py`` shows it on the precompiled header, which the
    harness then refuses and builds again).

Switches: each protection is a :class:`SandboxLimits` field; ``CUDAPERF_SANDBOX`` changes their defaults for a
whole process, e.g. ``CUDAPERF_SANDBOX=-private_root,-seccomp,+deny_exec_remap`` (names: ``private_root``,
``seccomp``, ``deny_exec_remap``, ``memory_cgroup``, ``landlock``, ``per_run_uid``), and ``CUDAPERF_SANDBOX_RO_PATHS`` (``:``
separated) adds read-only paths to the private root.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

if TYPE_CHECKING:
    from cudaperf.harness.zygote import Zygote, ZygoteProcess


NOBODY_UID = 65534
NOBODY_GID = 65534
RUN_ID_BASE = 1_500_000_000
RUN_ID_SPAN = 500_000_000
"""With ``per_run_uid`` (and the harness as root), each working directory gets an owner of its own, a user and
group id drawn at random from ``[RUN_ID_BASE, RUN_ID_BASE + RUN_ID_SPAN)`` (no account has them), and its runs drop
to it: ``RLIMIT_NPROC`` counts each run's processes and threads alone (under one sandbox user, one run's threads
counted against every concurrent run's), and no run can signal, trace or read the files of another's."""
GiB = 1 << 30
MiB = 1 << 20
LAUNCHER = Path(__file__).with_name("sandbox_root.py")
SWITCHES = {"private_root": True, "seccomp": True, "deny_exec_remap": False, "memory_cgroup": True, "landlock": True,
            "per_run_uid": True}


def _switch(name: str) -> bool:
    """The default of a protection switch, changed by ``CUDAPERF_SANDBOX`` (``+name`` / ``-name``)."""
    value = SWITCHES[name]
    for tok in os.environ.get("CUDAPERF_SANDBOX", "").replace(" ", "").split(","):
        if tok.lstrip("+-") == name:
            value = not tok.startswith("-")
    return value


def meminfo_bytes(key: str, default: int) -> int:
    """A field of ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``...) in bytes; ``default`` where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return default


def _mem_total() -> int:
    return meminfo_bytes("MemTotal", 16 * GiB)


def default_memory_bytes() -> int:
    """A quarter of the host's memory, at least 4 GiB and at most 32 GiB: nvcc on template-heavy code and a
    PyTorch runner with its inputs fit; a runaway allocation ends long before the host runs short."""
    return max(4 * GiB, min(32 * GiB, _mem_total() // 4))


def default_memory_total_bytes() -> int:
    """Three quarters of the host's memory, for all sandboxed runs together."""
    return _mem_total() * 3 // 4


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits and protections for one run. Defaults fit a candidate test or timing run."""

    wall_s: float = 60.0
    cpu_s: int | None = None
    """CPU seconds (RLIMIT_CPU); None: the wall-clock limit plus 10 s (a CUDA sync spin-waits on the CPU)."""
    file_size_bytes: int = 1 << 30
    """Largest file the program may write (outputs of large tests fit; a flood does not)."""
    max_processes: int = 4096
    """RLIMIT_NPROC: the kernel counts it over all processes and threads of the run's user, which is this run's
    own with ``per_run_uid`` (as root); without it (``nobody``, or the harness's own user when not root) the count
    covers every sandboxed run of that user alive at once, so the value is generous. It bounds a fork bomb; the PID
    namespace kills whatever the run started when it ends. Where a cgroup is writable it is also
    this run's own ``pids.max``, and a run that reaches it is ended."""
    capture_bytes: int = 64 * 1024
    """How much of stdout and of stderr is read back."""
    nice: int = 0
    """Added to the program's niceness (19: runs only on CPU time nothing else wants, as compiles beside timing
    runs do)."""
    memory_bytes: int | None = None
    """Host memory of the run (cgroup ``memory.max``, or RLIMIT_DATA where no cgroup is writable); None:
    :func:`default_memory_bytes`."""
    disk_bytes: int = 8 * GiB
    """What the run may add to its working directory, all files together (polled; the run is ended past it)."""
    tmp_bytes: int = 512 * MiB
    """Size of each of the private ``/tmp`` and ``/dev/shm`` (tmpfs: it counts as the run's memory too); a run
    that fills one is ended."""
    private_root: bool = field(default_factory=lambda: _switch("private_root"))
    """Run in a private root (see the module's threat model); needs a mount namespace."""
    landlock: bool = field(default_factory=lambda: _switch("landlock"))
    """Where no private root can be made: limit the file system with Landlock instead."""
    seccomp: bool = field(default_factory=lambda: _switch("seccomp"))
    """Load a seccomp profile before the program starts."""
    seccomp_profile: str | None = None
    """``tools`` or ``candidate``; None: ``candidate`` for a program that lies in the run's working directory (a
    candidate's build, copied in), ``tools`` for anything else (nvcc, a shell, the PyTorch runner)."""
    deny_exec_remap: bool = field(default_factory=lambda: _switch("deny_exec_remap"))
    """W^X in the seccomp profile (no mprotect to executable, no writable+executable mmap). Off by default: not
    yet tried against the CUDA driver's JIT."""
    memory_cgroup: bool = field(default_factory=lambda: _switch("memory_cgroup"))
    """Cap memory and processes in a cgroup of the run's own; False: RLIMIT_DATA only."""
    ro_paths: tuple[str, ...] = ()
    """More host paths the private root binds read-only."""
    exit_grace_s: float | None = None
    """With a ``control``: once it returns (the harness has sent its last command and read its last record), the
    program has this long to end; past it, it is killed and the run says so (``limit``; ``exit_overrun``). None:
    it may run on to ``wall_s``. Code of the candidate's that runs at exit (a function-local static's destructor)
    otherwise holds the run, and the GPU worker with it, until the wall-clock backstop."""
    gpu_devices: bool = True
    """Bind the GPU's device nodes (``/dev/nvidia*``) into the private root. False for candidate code that runs
    beside other candidates' timing and has no business on the GPU (a ``ModelNew`` module's extension build,
    :mod:`cudaperf.harness.modelnew_build`): without the nodes it cannot open the GPU whatever its environment
    says. Only the private root can leave them out; a run without one sees the host's ``/dev``."""

    @property
    def memory(self) -> int:
        return self.memory_bytes if self.memory_bytes is not None else default_memory_bytes()


@dataclass(frozen=True)
class SandboxRun:
    """What happened to one sandboxed program."""

    argv: tuple[str, ...]
    returncode: int | None
    """Exit status; negative for a signal (as subprocess reports it); None when killed on timeout."""
    timed_out: bool
    wall_s: float
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    level: str
    limit: str | None = None
    """The sandbox limit that ended the run (the memory cap, the process cap, the disk cap, a full /tmp), in
    words; None when none did."""
    memory_note: str | None = None
    """Said of a failed run when memory was capped by RLIMIT_DATA (an allocation past it fails in the program)."""
    exit_overrun: bool = False
    """It was killed because it had not ended ``SandboxLimits.exit_grace_s`` after its ``control`` returned."""

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.limit is None and self.returncode == 0

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def describe(self) -> str:
        if self.limit:
            return f"ended by the sandbox: {self.limit}"
        if self.timed_out:
            return f"killed after the {self.wall_s:.1f} s wall-clock limit"
        note = f" ({self.memory_note})" if self.memory_note and self.returncode != 0 else ""
        if self.signal_name:
            return f"killed by {self.signal_name}{note}"
        return f"exit code {self.returncode}{note}"


def _is_root() -> bool:
    return os.geteuid() == 0


def _fmt_bytes(n: int) -> str:
    return f"{round(n / GiB, 1):g} GiB" if n >= GiB else f"{round(n / MiB, 1):g} MiB"


@lru_cache(maxsize=1)
def base_level() -> str:
    """The process isolation this machine allows, probed once: ``namespaces+nobody``, ``namespaces``,
    ``user-namespaces`` or ``session``."""
    unshare = shutil.which("unshare")
    setpriv = shutil.which("setpriv")
    if unshare:
        base = [unshare, "--net", "--ipc", "--pid", "--fork", "--mount-proc", "--kill-child"]
        if _is_root() and setpriv:
            probe = base + [setpriv, f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups", "true"]
            if subprocess.run(probe, capture_output=True, timeout=20).returncode == 0:
                return "namespaces+nobody"
        if _is_root():
            if subprocess.run(base + ["true"], capture_output=True, timeout=20).returncode == 0:
                return "namespaces"
        else:
            user = [unshare, "--user", "--map-root-user", "--net", "--ipc", "--pid", "--fork", "--mount-proc", "--kill-child", "true"]
            if subprocess.run(user, capture_output=True, timeout=20).returncode == 0:
                return "user-namespaces"
    return "session"


@lru_cache(maxsize=1)
def sandbox_level() -> str:
    """The isolation in force for a run with the default :class:`SandboxLimits`, probed once, e.g.
    ``namespaces+nobody; fs=private-root; seccomp=tools/candidate; memory=cgroup2 6 GiB; pids=cgroup2;
    disk=8 GiB; tmp=512 MiB``. The first item is :func:`base_level`; a protection the machine refused says why
    (``fs=landlock (private root refused: ...)``)."""
    return _plan(SandboxLimits(), None).level


@lru_cache(maxsize=None)
def _host_tool(name: str) -> str:
    """The wrapper's own tools by absolute path, found on the harness's PATH, not the run's (which the caller
    sets, and which may lack them)."""
    return shutil.which(name) or name


def _wrap(argv: Sequence[str], level: str, owner: tuple[int, int] = (NOBODY_UID, NOBODY_GID)) -> list[str]:
    """The command line without the launcher (every protection of the launcher switched off)."""
    if level == "session":
        return list(argv)
    if level == "user-namespaces":
        return [_host_tool("unshare"), "--user", "--map-root-user", "--net", "--ipc", "--pid", "--fork", "--mount-proc", "--kill-child", "--",
                *_INIT, *argv]
    # --mount-proc: the CUDA driver fails to initialise (cudaErrorOperatingSystem) in a PID namespace whose
    # /proc is the host's (seen on the H200 machine).
    cmd = [_host_tool("unshare"), "--net", "--ipc", "--pid", "--fork", "--mount-proc", "--kill-child", "--"]
    if level == "namespaces+nobody":
        cmd += [_host_tool("setpriv"), f"--reuid={owner[0]}", f"--regid={owner[1]}", "--clear-groups", "--"]
    return cmd + _INIT + list(argv)


# PID 1 of a namespace ignores signals it has no handler for (a candidate that is PID 1 would survive its own
# SIGSEGV from kill, say). A shell as PID 1 runs the program as its child and passes on its status (128+N for
# a signal); "; exit $?" keeps the shell from exec'ing the program in its place. (The launcher does the same.)
_INIT = ["/bin/sh", "-c", '"$@"; exit $?', "cudaperf-init"]


def _launcher_wrap(argv: Sequence[str], level: str, spec_fd: int, private_root: bool) -> list[str]:
    inner = [sys.executable, "-I", "-S", "-B", str(LAUNCHER), "--spec-fd", str(spec_fd), "--", *argv]
    if level == "session":
        return inner
    ns = ["--mount"] if private_root else ["--mount-proc"]  # the private root mounts its own /proc
    user = ["--user", "--map-root-user"] if level == "user-namespaces" else []
    return [_host_tool("unshare"), *user, *ns, "--net", "--ipc", "--pid", "--fork", "--kill-child", "--", *inner]


def _fresh_run_id() -> int:
    return RUN_ID_BASE + secrets.randbelow(RUN_ID_SPAN) if _switch("per_run_uid") else NOBODY_UID


def _sandbox_owner(d: Path) -> tuple[int, int] | None:
    """The owner of ``d`` when it is a sandbox user (``nobody`` or a run id), else None."""
    try:
        st = os.stat(d)
    except OSError:
        return None
    if st.st_uid == NOBODY_UID or RUN_ID_BASE <= st.st_uid < RUN_ID_BASE + RUN_ID_SPAN:
        return st.st_uid, st.st_gid
    return None


def run_owner(workdir: Path) -> tuple[int, int]:
    """The user and group a run in ``workdir`` drops to (as root): the directory's owner when :func:`make_workdir`
    gave it one of the run ids, else ``nobody``."""
    return _sandbox_owner(workdir) or (NOBODY_UID, NOBODY_GID)


def make_workdir(prefix: str = "cudaperf-") -> Path:
    """A private directory the sandboxed program may write to (when we run as root, owned by the user its runs
    drop to: a fresh id of its own, ``per_run_uid``, else ``nobody``)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    if base_level() == "namespaces+nobody":
        uid = _fresh_run_id()
        os.chown(d, uid, uid if uid != NOBODY_UID else NOBODY_GID)
    os.chmod(d, 0o700)
    return d


def share_file(path: Path) -> None:
    """Make a harness-written file in a working directory readable (and writable) by the user its runs drop to:
    the owner of the nearest enclosing directory that :func:`make_workdir` gave a run id, else ``nobody``."""
    if base_level() == "namespaces+nobody":
        owners = (_sandbox_owner(d) for d in list(Path(path).parents)[:4])
        os.chown(path, *next((o for o in owners if o is not None), (NOBODY_UID, NOBODY_GID)))


def link_in(src: Path, dst: Path) -> None:
    """A harness-owned, read-only (0444, not owned by the sandbox user) input file into the sandbox's directory: a
    hard link, so that many runs share one copy, or a copy where the filesystem refuses links."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o444)


def copy_in(src: Path, workdir: Path, name: str) -> Path:
    """Copy a harness-built file (an executable, a library) into the sandbox's directory, readable by it."""
    dst = workdir / name
    dst.write_bytes(src.read_bytes())
    dst.chmod(0o755)
    share_file(dst)
    return dst


def scrubbed_env(workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        # A user name for getpass.getuser(), which reads these before the password database: a per-run uid has
        # no entry there, and torch's profiler (through torch._dynamo's config) raised KeyError under one on the
        # H200, so every PyTorch candidate was unscored. Not a name any account has.
        "USER": "cudaperf-run",
        "LOGNAME": "cudaperf-run",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # One CPU thread for OpenMP/BLAS pools: a PyTorch runner otherwise starts one per core at import, and
        # RLIMIT_NPROC counts threads (over all of the user's concurrent runs where runs share a user).
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for key in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    if extra:
        env.update(extra)
    return env


# --- the private root: what it binds and what it hides ----------------------------------------------------------

SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
DRIVER_PATHS = ("/run/nvidia-persistenced",)
"""Where the CUDA driver looks outside the system directories (the persistence daemon's socket), bound if there."""
DEV_NODES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def repo_root() -> Path:
    """The checkout (or installation) the harness runs from: the directory holding the ``cudaperf`` package."""
    return Path(__file__).resolve().parents[2]


def _under(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip("/") + "/")


@lru_cache(maxsize=1)
def _toolkit_paths() -> tuple[str, ...]:
    """The CUDA toolkit, nvcc's directory and CUPTI's library directory, where this machine has them."""
    out: list[str] = []
    try:
        from cudaperf.harness import compile as comp

        for fn in (lambda: comp.cuda_home(), lambda: Path(comp.nvcc_path()).resolve().parents[1],
                   lambda: Path(comp.nvcc_path()).parent, lambda: (comp.cupti_paths() or (None, None))[1]):
            try:
                p = fn()
            except Exception:  # noqa: BLE001 - no toolkit here: nothing to bind
                continue
            if p:
                out.append(str(p))
    except ImportError:
        pass
    return tuple(out)


def _hidden_paths() -> list[str]:
    """Host paths the program must not see even where a bound directory holds them."""
    hide = [str(repo_root()), os.path.expanduser("~"), tempfile.gettempdir(), "/dev/shm"]
    for p in sys.path:  # an installed (not editable) cudaperf in a bound site-packages
        if p and os.path.isfile(os.path.join(p, "cudaperf", "__init__.py")):
            hide.append(os.path.join(p, "cudaperf"))
    return [os.path.realpath(h) for h in hide if h and h != "/"]


def _bind_plan(argv0: str, workdir: Path, extra_ro: Sequence[str]) -> tuple[list[list[str]], list[list[str]]]:
    """(symlinks, ordered ops) for the launcher: ``["ro", path]`` binds and ``["hide", path]`` tmpfs covers."""
    links: list[list[str]] = []
    wanted: list[str] = []
    for name in SYSTEM_DIRS:
        p = "/" + name
        if os.path.islink(p):
            links.append([p, os.readlink(p)])
            wanted.append(os.path.realpath(p))
        elif os.path.isdir(p):
            wanted.append(p)
    py = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
          str(Path(os.path.realpath(sys.executable)).parent.parent), os.path.dirname(sys.executable)]
    repo = str(repo_root())
    py += [p for p in sys.path if p and os.path.isdir(p) and not _under(os.path.realpath(p), repo)]
    env_paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    env_paths += [os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(k)]
    env_paths += [p for p in os.environ.get("CUDAPERF_SANDBOX_RO_PATHS", "").split(":") if p]
    if os.path.isabs(argv0) and not _under(os.path.realpath(argv0), str(workdir)):
        env_paths.append(os.path.dirname(os.path.realpath(argv0)))
    for p in [*py, *_toolkit_paths(), *DRIVER_PATHS, *env_paths, *extra_ro]:
        if not os.path.exists(p):
            continue
        real = os.path.realpath(p)
        wanted.append(real)
        if real != os.path.abspath(p):  # the path the program uses is a link: bind the target, keep the link
            links.append([os.path.abspath(p), real])
    ops: list[tuple[int, int, str, str]] = [(len(Path(h).parts), 0, "hide", h) for h in set(_hidden_paths())]
    ops += [(len(Path(w).parts), 1, "ro", w) for w in set(wanted) if w != "/"]
    ops.sort()
    kept: list[list[str]] = []
    for _, _, op, path in ops:
        nearest = None  # the deepest earlier op at or above this path
        for k_op, k_path in kept:
            if _under(path, k_path) and (nearest is None or len(k_path) > len(nearest[1])):
                nearest = (k_op, k_path)
        if op == "ro" and nearest is not None and nearest[0] == "ro":
            continue  # already visible through a bound parent
        if op == "hide" and (nearest is None or nearest[0] != "ro"):
            continue  # not visible anyway
        kept.append([op, path])
    # a link whose own path is visible through a bind needs nothing; one in the tmpfs is made there
    links = [l for l in links if not any(_under(l[0], p) for o, p in kept if o == "ro") and l[0] != l[1]]
    seen: set[str] = set()
    links = [l for l in links if not (l[0] in seen or seen.add(l[0]))]  # type: ignore[func-returns-value]
    return links, kept


def _dev_nodes(gpu: bool = True) -> list[str]:
    nodes = [d for d in DEV_NODES if os.path.exists(d)]
    if not gpu:
        return nodes
    try:
        nodes += sorted(os.path.join("/dev", n) for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        pass
    return nodes


@lru_cache(maxsize=1)
def _root_mountpoint() -> str:
    """An empty directory that the launcher mounts the new root on, in its own mount namespace only (so one
    directory serves every run of every harness process of this user)."""
    d = Path(tempfile.gettempdir()) / f"cudaperf-newroot-{os.geteuid()}"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return tempfile.mkdtemp(prefix="cudaperf-newroot-")
    st = os.lstat(d)
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return tempfile.mkdtemp(prefix="cudaperf-newroot-")  # not ours, or others may write it: a fresh one
    return str(d)


def _landlock_paths(links: list[list[str]], ops: list[list[str]]) -> list[list[str]]:
    """The private root's binds as Landlock read rules: a bound directory that holds a hidden path is replaced by
    its entries other than the way to it (Landlock cannot carve out exceptions)."""
    hides = [p for o, p in ops if o == "hide"]
    out: list[str] = []

    def add(path: str) -> None:
        inner = [h for h in hides if _under(h, path) and h != path]
        if any(h == path for h in hides):
            return
        if not inner:
            out.append(path)
            return
        try:
            names = os.listdir(path)
        except OSError:
            return
        for n in names:
            add(os.path.join(path, n))

    for o, p in ops:
        if o == "ro":
            add(p)
    return [["ro", p] for p in out]


@lru_cache(maxsize=1)
def _landlock_abi() -> int | str:
    """Landlock's ABI version, or why it is not available."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, 0, 1) if os.uname().machine in ("x86_64", "aarch64") else -1
    if abi < 1:
        return f"Landlock unavailable ({os.strerror(ctypes.get_errno()) if abi < 0 else 'no ABI'})"
    return int(abi)


# --- cgroups: memory and process caps -----------------------------------------------------------------------------

_RUN_IDS = itertools.count()


def _mountinfo() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of this process's mounts."""
    out = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, right = line.rstrip("\n").split(" - ", 1)
                f = left.split()
                r = right.split()
                out.append((f[3], f[4].replace("\\040", " "), r[0], r[2] if len(r) > 2 else ""))
    except (OSError, ValueError, IndexError):
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path."""
    out = {}
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in (ctrls.split(",") if ctrls else [""]):
                    out[c.replace("name=", "")] = path
    except OSError:
        pass
    return out


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read_kv(path: Path) -> dict[str, int]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


@dataclass
class _Cgroups:
    """Where this process makes its runs' cgroups."""

    kind: str  # cgroup2 | cgroup1
    memory: Path  # the parent of the runs' memory cgroups
    pids: Path | None  # the parent of the runs' pids cgroups (the same directory on v2)
    freezer: Path | None = None  # v1: the parent of the runs' freezer cgroups (v2 freezes in the run's own)

    def can_freeze(self) -> bool:
        """Whether a run's processes can be frozen all together, whatever process group they moved to."""
        if self.kind == "cgroup2":
            return (self.memory / "cgroup.freeze").exists()
        return self.freezer is not None

    def create(self, limits: SandboxLimits) -> "_RunCgroup":
        name = f"run-{os.getpid()}-{next(_RUN_IDS)}"
        dirs = []
        freezer = None
        try:
            if self.kind == "cgroup1" and self.freezer is not None:
                freezer = self.freezer / name
                freezer.mkdir()
            mem = self.memory / name
            mem.mkdir()
            dirs.append(mem)
            if self.kind == "cgroup2":
                _write(mem / "memory.max", str(limits.memory))
                for f, v in (("memory.swap.max", "0"), ("memory.oom.group", "1"),
                             ("pids.max", str(limits.max_processes))):
                    if (mem / f).exists():
                        _write(mem / f, v)
            else:
                _write(mem / "memory.limit_in_bytes", str(limits.memory))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    try:
                        _write(mem / "memory.memsw.limit_in_bytes", str(limits.memory))
                    except OSError:
                        pass
                if self.pids is not None:
                    pid_dir = self.pids / name
                    pid_dir.mkdir()
                    dirs.append(pid_dir)
                    _write(pid_dir / "pids.max", str(limits.max_processes))
        except OSError:
            for d in reversed(dirs + ([freezer] if freezer is not None else [])):
                try:
                    d.rmdir()
                except OSError:
                    pass
            raise
        return _RunCgroup(self.kind, dirs, limits, freezer)


@dataclass
class _RunCgroup:
    kind: str
    dirs: list[Path]
    limits: SandboxLimits
    freezer: Path | None = None  # v1: the run's freezer cgroup

    def join_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs] + (
            [str(self.freezer / "cgroup.procs")] if self.freezer is not None else [])

    def set_frozen(self, frozen: bool) -> bool:
        """Freeze (or thaw) every process of the run: those that left its process group too (a compiler that ninja
        started in a group of its own, or a candidate's ``setsid``), which SIGSTOP to the group misses. False
        where the hierarchy cannot."""
        try:
            if self.kind == "cgroup2":
                f = self.dirs[0] / "cgroup.freeze"
                if not f.exists():
                    return False
                _write(f, "1" if frozen else "0")
                return True
            if self.freezer is not None:
                _write(self.freezer / "freezer.state", "FROZEN" if frozen else "THAWED")
                return True
        except OSError:
            pass
        return False

    def _pids_dir(self) -> Path | None:
        if self.kind == "cgroup2":
            return self.dirs[0] if (self.dirs[0] / "pids.events").exists() else None
        return self.dirs[1] if len(self.dirs) > 1 else None

    def oom_kills(self) -> int:
        d = self.dirs[0]
        if self.kind == "cgroup2":
            return _read_kv(d / "memory.events").get("oom_kill", 0)
        return _read_kv(d / "memory.oom_control").get("oom_kill", 0)

    def pids_max_hit(self) -> bool:
        d = self._pids_dir()
        return d is not None and _read_kv(d / "pids.events").get("max", 0) > 0

    def pids(self) -> list[int]:
        out: set[int] = set()
        for f in self.join_files():
            try:
                out.update(int(x) for x in Path(f).read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def cpu_usage_s(self) -> float | None:
        """CPU time (user and system) of every process the run's cgroup has held, threads and ended processes
        included (cgroup v2 ``cpu.stat``, exact to the microsecond); None where the hierarchy has no such count."""
        if self.kind != "cgroup2":
            return None
        usec = _read_kv(self.dirs[0] / "cpu.stat").get("usage_usec")
        return None if usec is None else usec / 1e6

    def kill_all(self) -> None:
        """SIGKILL every process in the run's cgroup (also those that left its session and process group)."""
        kill = self.dirs[0] / "cgroup.kill"
        if self.kind == "cgroup2" and kill.exists():
            try:
                _write(kill, "1")
                return
            except OSError:
                pass
        for _ in range(3):  # a fork between reading and killing: read again
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def remove(self) -> None:
        deadline = time.monotonic() + 5
        if self.freezer is not None:
            self.set_frozen(False)  # a frozen process cannot die: thaw before the kill below
        for d in reversed(self.dirs + ([self.freezer] if self.freezer is not None else [])):
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break  # left for the next process to see; harmless
                    self.kill_all()
                    time.sleep(0.02)


def _enable_controllers(d: Path, wanted: tuple[str, ...]) -> None:
    have = (d / "cgroup.subtree_control").read_text().split()
    missing = [c for c in wanted if c not in have]
    for c in missing:
        try:
            _write(d / "cgroup.subtree_control", f"+{c}")
        except OSError:
            if c == "memory":
                raise


def _v1_parent(mounts, own: dict, controller: str) -> Path | None:
    """The parent of the runs' cgroups in a cgroup v1 hierarchy of ``controller`` (made if need be), or None."""
    m = next((m for m in mounts if m[2] == "cgroup" and controller in m[3].split(",")), None)
    if m is None or controller not in own:
        return None
    try:
        d = Path(m[1]) / own[controller].lstrip("/") / "cudaperf-sandbox"
        d.mkdir(exist_ok=True)
        return d
    except OSError:
        return None


@lru_cache(maxsize=1)
def _cgroups() -> _Cgroups | str:
    """Where this process's runs get their cgroups, or why they cannot: cgroup v2 (in this process's cgroup if
    its controllers are delegated, else under the hierarchy's root when we are root), then cgroup v1."""
    reasons = []
    mounts = _mountinfo()
    own = _own_cgroups()
    total = default_memory_total_bytes()
    v2 = next((m for m in mounts if m[2] == "cgroup2"), None)
    if v2 is not None:
        mount = Path(v2[1])
        parents = []
        if "" in own:
            parents.append(mount / own[""].lstrip("/"))
        parents.append(mount)
        for parent in dict.fromkeys(parents):
            try:
                if "memory" not in (parent / "cgroup.controllers").read_text().split():
                    reasons.append(f"cgroup2 {parent}: no memory controller")
                    continue
                _enable_controllers(parent, ("memory", "pids"))
                base = parent / "cudaperf-sandbox"
                base.mkdir(exist_ok=True)
                _enable_controllers(base, ("memory", "pids"))
                _write(base / "memory.max", str(total))
                cg = _Cgroups("cgroup2", base, base)
                cg.create(SandboxLimits(memory_bytes=64 * MiB, max_processes=16)).remove()
                return cg
            except OSError as exc:
                reasons.append(f"cgroup2 {parent}: {exc.strerror or exc}")
    mem = next((m for m in mounts if m[2] == "cgroup" and "memory" in m[3].split(",")), None)
    if mem is not None and "memory" in own:
        try:
            base = Path(mem[1]) / own["memory"].lstrip("/") / "cudaperf-sandbox"
            base.mkdir(exist_ok=True)
            _write(base / "memory.limit_in_bytes", str(total))
            cg = _Cgroups("cgroup1", base, _v1_parent(mounts, own, "pids"), _v1_parent(mounts, own, "freezer"))
            cg.create(SandboxLimits(memory_bytes=64 * MiB, max_processes=16)).remove()
            return cg
        except OSError as exc:
            reasons.append(f"cgroup1 memory: {exc.strerror or exc}")
    return "; ".join(reasons) or "no cgroup hierarchy with a memory controller is mounted"


# --- the plan for one run ---------------------------------------------------------------------------------------

def _draw_exec_addrs() -> tuple[int, int, int]:
    pages: set[int] = set()
    while len(pages) < 3:  # pages 1 GiB apart at least: the launcher maps up to a few pages at each
        page = secrets.randbelow((1 << 34) - (1 << 28)) + (1 << 28)
        if all(abs(page - q) > (1 << 18) for q in pages):
            pages.add(page)
    a, b, c = (p << 12 for p in pages)
    return a, b, c


_EXEC_ADDRS = _draw_exec_addrs()
"""The one path, argv and envp address triple the candidate profile lets ``execve`` take (drawn per harness
process, independently, between 1 TiB and 64 TiB, below where the kernel places a process's mappings); the launcher
maps the three and starts the program from them. With the path address alone pinned (before session 21),
``execve`` at that address answered EFAULT where any other got EPERM: an oracle for a search of about 10^4
core-seconds, after which a program could map its own path there. Now the filter answers EPERM unless all three
pointers match, so no one of them can be found alone."""


@dataclass(frozen=True)
class _Plan:
    level: str
    base: str
    launcher: bool
    private_root: bool
    landlock: bool
    seccomp_profile: str | None
    cgroups: _Cgroups | None
    rlimit_data: bool


@lru_cache(maxsize=1)
def _private_root_works() -> str | None:
    """None when a private root can be built here, else why not (probed with a real run)."""
    base = base_level()
    if base == "session":
        return "no mount namespace (unshare refused)"
    return _probe(_Plan("probe", base, True, True, False, None, None, False))


@lru_cache(maxsize=1)
def _seccomp_works() -> str | None:
    from cudaperf.harness import seccomp_filter

    why = seccomp_filter.available()
    if why:
        return why
    try:
        for profile in seccomp_filter.PROFILES:
            seccomp_filter.build_bpf(profile, _EXEC_ADDRS)
    except (OSError, ValueError) as exc:
        return f"libseccomp could not build the filters: {exc}"
    return _probe(_Plan("probe", base_level(), True, False, False, "candidate", None, False))


@lru_cache(maxsize=1)
def _landlock_works() -> str | None:
    abi = _landlock_abi()
    if isinstance(abi, str):
        return abi
    return _probe(_Plan("probe", base_level(), True, False, True, None, None, False))


def freezer_available() -> bool:
    """Whether a pausable run is frozen whole (its cgroup's freezer) while anything is timed, rather than only its
    process group stopped."""
    cg = _cgroups()
    return not isinstance(cg, str) and cg.can_freeze()


def private_tmp_available() -> bool:
    """Whether sandboxed runs get a private root (so a private ``/tmp`` of their own, and device nodes the harness
    chooses): a fixed path under ``/tmp`` is then each run's alone."""
    return _plan(SandboxLimits(), None).private_root


def copy_untrusted_tree(src: Path, dst: Path, *, max_bytes: int, max_files: int = 10_000) -> str | None:
    """Copy a directory tree that a sandboxed program wrote (``src``) to ``dst``, which must not exist: regular
    files and directories only (a symbolic link, FIFO or device is left out: the harness, as root, would otherwise
    read a host file through it, or hang), never following a link, with each file's modification time (a build
    tool's up-to-date checks read them). Returns None, or why the tree was not copied (too large, too many
    files, ``src`` not a directory); ``dst`` is then removed."""
    import stat as st_mod

    total, files = 0, 0

    def walk(s_fd: int, d: Path) -> str | None:
        nonlocal total, files
        d.mkdir(mode=0o755)
        with os.scandir(s_fd) as it:
            entries = [(e.name, e.stat(follow_symlinks=False)) for e in it]
        for name, st in entries:
            files += 1
            if files > max_files:
                return f"more than {max_files} files"
            if st_mod.S_ISDIR(st.st_mode):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=s_fd)
                except OSError:
                    continue  # replaced by a link since the listing: left out
                try:
                    why = walk(fd, d / name)
                finally:
                    os.close(fd)
                if why:
                    return why
            elif st_mod.S_ISREG(st.st_mode):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=s_fd)
                except OSError:
                    continue
                try:
                    fst = os.fstat(fd)
                    if not st_mod.S_ISREG(fst.st_mode):
                        continue
                    total += fst.st_size
                    if total > max_bytes:
                        return f"more than {max_bytes} bytes"
                    os.set_blocking(fd, True)
                    out = d / name
                    with os.fdopen(os.dup(fd), "rb") as fin, open(out, "wb") as fout:
                        shutil.copyfileobj(fin, fout, 1 << 20)
                    os.chmod(out, 0o755 if fst.st_mode & 0o111 else 0o644)
                    os.utime(out, ns=(fst.st_atime_ns, fst.st_mtime_ns))
                finally:
                    os.close(fd)
        return None

    try:
        top = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return f"{Path(src).name} is not a directory ({errno.errorcode.get(exc.errno, exc.errno)})"
    try:
        why = walk(top, Path(dst))
    finally:
        os.close(top)
    if why is not None:
        shutil.rmtree(dst, ignore_errors=True)
    return why


def _probe(plan: _Plan) -> str | None:
    with Workdir(prefix="cudaperf-probe-") as w:
        try:
            r = _execute(["/bin/true"], w, plan, SandboxLimits(wall_s=30, private_root=plan.private_root),
                         scrubbed_env(w), None, None, False)
        except OSError as exc:
            return str(exc)
    if r.ok:
        return None
    return f"{r.describe()}: {(r.stderr or r.stdout).strip()[-300:]}"


def _plan(limits: SandboxLimits, argv0: str | None, workdir: Path | None = None, level: str | None = None) -> _Plan:
    base = level or base_level()
    parts = [base]
    private_root = landlock = False
    if limits.private_root:
        why = _private_root_works() if base != "session" else "no mount namespace (unshare refused)"
        if why is None:
            private_root = True
            parts.append("fs=private-root")
        else:
            lw = _landlock_works() if limits.landlock else "switched off"
            landlock = lw is None
            parts.append(f"fs=landlock (private root refused: {why})" if landlock
                         else f"fs=host (private root refused: {why}; Landlock: {lw})")
    elif limits.landlock and base == "session" and _landlock_works() is None:
        landlock = True
        parts.append("fs=landlock (private root switched off)")
    else:
        parts.append("fs=host (private root switched off)")
    profile = None
    if limits.seccomp:
        why = _seccomp_works()
        if why is None:
            if argv0 is None:
                profile = limits.seccomp_profile or "tools/candidate"
            elif limits.seccomp_profile:
                profile = limits.seccomp_profile
            else:
                inside = workdir is not None and os.path.isabs(argv0) and _under(
                    os.path.realpath(argv0), os.path.realpath(workdir))
                profile = "candidate" if inside else "tools"
            parts.append(f"seccomp={profile}" + ("+deny-exec-remap" if limits.deny_exec_remap else ""))
        else:
            parts.append(f"seccomp=off ({why})")
    else:
        parts.append("seccomp=off (switched off)")
    cg = _cgroups() if limits.memory_cgroup else "switched off"
    if isinstance(cg, _Cgroups):
        parts.append(f"memory={cg.kind} {_fmt_bytes(limits.memory)}")
        parts.append(f"pids={cg.kind if cg.pids is not None else 'rlimit'} {limits.max_processes}")
        cgroups, rlimit_data = cg, False
    else:
        parts.append(f"memory=rlimit-data {_fmt_bytes(limits.memory)} (no cgroup: {cg})")
        cgroups, rlimit_data = None, True
    parts.append(f"disk={_fmt_bytes(limits.disk_bytes)}")
    if private_root:
        parts.append(f"tmp={_fmt_bytes(limits.tmp_bytes)}")
    launcher = private_root or landlock or profile is not None
    return _Plan("; ".join(parts), base, launcher, private_root, landlock,
                 profile if profile != "tools/candidate" else None, cgroups, rlimit_data)


def run_sandboxed(
    argv: Sequence[str],
    workdir: Path,
    *,
    limits: SandboxLimits = SandboxLimits(),
    env: Mapping[str, str] | None = None,
    stdin_path: Path | None = None,
    level: str | None = None,
    control: Callable[[Control], None] | None = None,
    pausable: bool = False,
    observe: Callable[[int, threading.Event], None] | None = None,
    pass_fds: Sequence[int] = (),
    zygote: "Zygote | None" = None,
) -> SandboxRun:
    """Run ``argv`` in ``workdir`` under the sandbox; never raises for anything the program does.

    ``control``: called on this thread while the program runs, with the harness's end of a control channel
    (:class:`Control`; the program gets a pipe whose descriptor replaces :data:`CTL_FD` in ``argv``, and its
    stdin). The program is killed at the wall-clock deadline whatever ``control`` does.

    ``pausable``: background work (a compiler) that timing runs in this process stop while they time
    (:mod:`cudaperf.harness.quiet`); the time it spends stopped extends its wall-clock limit.

    ``level``: a :func:`base_level` to use instead of the strongest one (``session`` runs without namespaces).

    ``observe``: called on a thread of its own from the program's start, with the process id the harness sees
    (the program and its descendants are that process's) and an event set once the program has ended; it must
    return soon after the event is set. For evidence gathered from outside the program (the driver's list of
    processes with a CUDA context, :mod:`cudaperf.harness.nvml`).

    ``pass_fds``: descriptors the program inherits under the same numbers (the memory files that carry a PyTorch
    runner's tensors, :mod:`cudaperf.harness.native.tensor_pack`); the harness keeps and closes its own.

    ``zygote``: where ``argv`` is ``[zygote.python, SCRIPT, ARGS...]``, the harness runs as root and the private
    root works, the run is forked from it (:mod:`cudaperf.harness.zygote`: the preloaded modules are not imported
    again) under the same protections, set up by the same launcher code; ``SandboxRun.level`` then ends with
    ``start=zygote``. Elsewhere the run starts as without one.

    Raises ``FileNotFoundError`` when the sandbox tooling itself is missing and :class:`SandboxSetupError` (an
    ``OSError``) when the sandbox could not be built or the program not started in it (a missing bind, say):
    harness faults, which happen before the program runs.
    """
    env = dict(env) if env is not None else scrubbed_env(workdir)
    plan = _plan(limits, argv[0] if argv else "", workdir, level)
    return _execute(argv, workdir, plan, limits, env, stdin_path, control, pausable, observe, tuple(pass_fds),
                    zygote)


def _disk_usage(root: Path, max_entries: int = 200_000) -> tuple[int, int]:
    """(bytes allocated, entries) under ``root``; stops counting past ``max_entries``."""
    total = n = 0
    stack = [str(root)]
    while stack and n <= max_entries:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    n += 1
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
        except OSError:
            continue
    return total, n


def _unlinked_bytes(pids: Sequence[int], dev: int) -> int:
    """Bytes held on device ``dev`` by files the processes ``pids`` keep open or mapped after their names are gone
    (unlinked, or made with ``O_TMPFILE``): no directory listing finds them, and they hold the disk as long as the
    program runs."""
    import stat as _stat

    seen: set[int] = set()
    total = 0
    for pid in pids:
        for sub in ("fd", "map_files"):
            d = f"/proc/{pid}/{sub}"
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for name in names:
                try:
                    st = os.stat(f"{d}/{name}")
                except OSError:
                    continue
                if st.st_nlink == 0 and st.st_dev == dev and _stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
                    seen.add(st.st_ino)
                    total += st.st_blocks * 512
    return total


def _group_pids(pgid: int) -> list[int]:
    """The processes of a process group, from /proc (where the run has no cgroup)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                out.append(int(d))
    return out


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _procs_cpu_s(pids: Sequence[int]) -> float:
    """CPU time (user and system, all threads, and that of the children each has waited for) of the live
    processes ``pids``, from ``/proc/PID/stat`` (clock ticks, 10 ms where ``CLK_TCK`` is 100)."""
    ticks = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime (fields 14-17 of proc(5))
    return ticks / _CLK_TCK


def run_cpu_clock(cg: "_RunCgroup | None", pgid: int) -> tuple[Callable[[], float], str]:
    """How the harness reads a run's CPU time from outside it, and the name of the source: the run's cgroup v2
    ``cpu.stat`` where it has one (every process and thread the run ever had), else ``/proc`` over the run's
    processes (its process group, or its cgroup v1 members)."""
    if cg is not None and cg.cpu_usage_s() is not None:
        return (lambda: cg.cpu_usage_s() or 0.0), "cgroup2 cpu.stat"
    pids = cg.pids if cg is not None else (lambda: _group_pids(pgid))
    return (lambda: _procs_cpu_s(pids())), f"/proc stat ({1000 / _CLK_TCK:.0f} ms ticks)"


class _Watch(threading.Thread):
    """Ends a run that passes a limit no kernel enforces for it: the disk cap of its working directory (its files,
    and those it keeps open or mapped after unlinking them), and the cgroup's process cap (which the kernel
    enforces by failing forks: the run is ended at the first)."""

    def __init__(self, workdir: Path, limits: SandboxLimits, cg: _RunCgroup | None, kill: Callable[[], None],
                 pids: Callable[[], Sequence[int]] = lambda: ()):
        super().__init__(daemon=True, name="cudaperf-sandbox-watch")
        self.workdir, self.limits, self.cg, self.kill, self.pids = workdir, limits, cg, kill, pids
        self.stop = threading.Event()
        self.limit: str | None = None
        self.base, _ = _disk_usage(workdir)
        self.dev = os.stat(workdir).st_dev

    def run(self) -> None:
        while not self.stop.wait(0.2):
            used, entries = _disk_usage(self.workdir)
            used += _unlinked_bytes(self.pids(), self.dev)
            if used - self.base > self.limits.disk_bytes or entries > 200_000:
                self.limit = (f"its files in its working directory passed the {_fmt_bytes(self.limits.disk_bytes)} "
                              "disk limit" if entries <= 200_000 else
                              "it made more than 200000 files in its working directory (the disk limit)")
            elif self.cg is not None and self.cg.pids_max_hit():
                self.limit = f"it reached the {self.limits.max_processes}-process limit"
            if self.limit:
                self.kill()
                return


def _execute(argv: Sequence[str], workdir: Path, plan: _Plan, limits: SandboxLimits, env: dict[str, str],
             stdin_path: Path | None, control: Callable[[Control], None] | None, pausable: bool,
             observe: Callable[[int, threading.Event], None] | None = None,
             extra_fds: tuple[int, ...] = (), zygote: "Zygote | None" = None) -> SandboxRun:
    level = plan.base
    out_path = workdir / ".stdout"
    err_path = workdir / ".stderr"
    status_r = status_w = -1
    if control is not None:
        if stdin_path is not None:
            raise ValueError("a controlled run reads its commands on stdin: no stdin_path")
        status_r, status_w = os.pipe()
        argv = [str(status_w) if a == CTL_FD else a for a in argv]

    run_cg: _RunCgroup | None = None
    if plan.cgroups is not None:
        try:
            run_cg = plan.cgroups.create(limits)
        except OSError:
            run_cg = None  # e.g. the hierarchy was removed under us: fall back to the rlimit for this run
    join = run_cg.join_files() if run_cg else []
    rlimit_data = plan.rlimit_data or run_cg is None

    cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.wall_s) + 10
    rlimits = [(resource.RLIMIT_CPU, cpu, cpu + 1),
               (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
               (resource.RLIMIT_CORE, 0, 0),
               (resource.RLIMIT_NPROC, limits.max_processes, limits.max_processes)]
    if rlimit_data:
        rlimits.append((resource.RLIMIT_DATA, limits.memory, limits.memory))

    def limit_child() -> None:  # runs in the child between fork and exec (a zygote's run does the same)
        for f in join:
            fd = os.open(f, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))
        if limits.nice:
            os.nice(limits.nice)

    # A run forked from a zygote (cudaperf.harness.zygote): [its python, SCRIPT, ...] under the full launcher
    forked = (zygote is not None and plan.private_root and level == "namespaces+nobody" and len(argv) >= 2
              and argv[0] == zygote.python and not argv[1].startswith("-"))

    spec_fd = report_r = report_w = -1
    spec = {}
    pass_fds: list[int] = ([status_w] if control else []) + list(extra_fds)
    if plan.launcher:
        report_r, report_w = os.pipe()
        os.set_blocking(report_r, False)
        spec = {"cwd": str(workdir), "init": level != "session", "report_fd": report_w,
                "drop": list(run_owner(workdir)) if level == "namespaces+nobody" else None,
                "rw": [str(workdir)], "dev_nodes": _dev_nodes(gpu=limits.gpu_devices),
                "tmp_bytes": int(limits.tmp_bytes)}
        if plan.private_root or plan.landlock:
            links, ops = _bind_plan(argv[0] if argv else "", workdir, limits.ro_paths)
            if plan.private_root:
                spec.update(root=True, mountpoint=_root_mountpoint(), symlinks=links, ops=ops)
            else:
                spec.update(landlock=True, ops=_landlock_paths(links, ops))
        if plan.seccomp_profile:
            from cudaperf.harness.seccomp_filter import build_bpf

            addrs = _EXEC_ADDRS if plan.seccomp_profile == "candidate" else None
            spec.update(seccomp_bpf=build_bpf(plan.seccomp_profile, addrs, limits.deny_exec_remap).hex(),
                        exec_addrs=list(addrs) if addrs else None)
        if forked:
            pass_fds.append(report_w)
            cmd = list(argv)
        else:
            spec_fd = os.memfd_create("cudaperf-sandbox-spec", 0)
            os.write(spec_fd, json.dumps(spec).encode())
            os.lseek(spec_fd, 0, os.SEEK_SET)
            pass_fds += [spec_fd, report_w]
            cmd = _launcher_wrap(argv, level, spec_fd, plan.private_root)
    else:
        cmd = _wrap(argv, level, run_owner(workdir))

    start = time.monotonic()
    watch: _Watch | None = None
    # Read back through these descriptors, not the paths: the program may unlink ".stdout" and put a symbolic link
    # to a host file or a FIFO in its place (the harness, often root, would read the file or block on the FIFO).
    with open(out_path, "w+b") as out_fh, open(err_path, "w+b") as err_fh:
        stdin = open(stdin_path, "rb") if stdin_path else (subprocess.PIPE if control else subprocess.DEVNULL)
        try:
            if forked:
                assert zygote is not None
                proc = _spawn_forked(zygote, cmd, env, workdir, stdin, out_fh.fileno(), err_fh.fileno(), pass_fds,
                                     join, rlimits, limits.nice, spec)
            else:
                proc = subprocess.Popen(
                    cmd,
                    cwd=workdir,
                    env=env,
                    stdin=stdin,
                    stdout=out_fh,
                    stderr=err_fh,
                    start_new_session=True,
                    preexec_fn=limit_child,
                    close_fds=True,
                    pass_fds=tuple(pass_fds),
                )
        except BaseException:
            if control is not None:
                os.close(status_r)
            if report_r >= 0:
                os.close(report_r)
            if run_cg is not None:
                run_cg.remove()
            raise
        finally:
            if stdin_path:
                stdin.close()  # type: ignore[union-attr]
            if control is not None:
                os.close(status_w)
            for fd in (spec_fd, report_w):
                if fd >= 0:
                    os.close(fd)

        def kill_all() -> None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if run_cg is not None:
                run_cg.kill_all()

        watch = _Watch(workdir, limits, run_cg, kill_all,
                       run_cg.pids if run_cg is not None else (lambda: _group_pids(proc.pid)))
        watch.start()
        ended = threading.Event()
        observer = None
        if observe is not None:
            observer = threading.Thread(target=observe, args=(proc.pid, ended), name="cudaperf-observe", daemon=True)
            observer.start()
        timed_out = False
        exit_overrun = False
        ctl: Control | None = None
        deadline = start + limits.wall_s
        if pausable:
            from cudaperf.harness.quiet import HOST

            HOST.register(proc.pid, freeze=run_cg.set_frozen if run_cg is not None else None)
        try:
            if control is not None:
                ctl = Control(proc, status_r, deadline, run_cpu_clock(run_cg, proc.pid))
                try:
                    control(ctl)
                finally:
                    os.close(status_r)
                    try:
                        proc.stdin.close()  # type: ignore[union-attr]
                    except OSError:
                        pass
                if limits.exit_grace_s is not None:
                    deadline = min(deadline, time.monotonic() + limits.exit_grace_s)
            try:
                if pausable:
                    rc = _wait_pausable(proc, deadline)
                else:
                    rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                exit_overrun = deadline < start + limits.wall_s
                raise
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        finally:
            ended.set()
            if observer is not None:
                observer.join(timeout=5.0)
            watch.stop.set()
            if pausable:
                HOST.unregister(proc.pid)
            # Kill whatever is left in the group and the cgroup (also after a normal exit: stray children).
            kill_all()
            if timed_out:
                proc.wait()
            watch.join()
        stdout, out_trunc = _read_prefix(out_fh, limits.capture_bytes)
        stderr, err_trunc = _read_prefix(err_fh, limits.capture_bytes)
    if ctl is not None and ctl.killed:
        timed_out, rc = True, None
    wall = time.monotonic() - start
    limit = watch.limit
    if run_cg is not None:
        if limit is None and run_cg.oom_kills() > 0:
            limit = (f"it used more than the {_fmt_bytes(limits.memory)} memory limit "
                     f"({'memory.max' if run_cg.kind == 'cgroup2' else 'memory.limit_in_bytes'}, {run_cg.kind})")
        if limit is None and run_cg.kind == "cgroup1" and run_cg.pids_max_hit():
            limit = f"it reached the {limits.max_processes}-process limit"
        run_cg.remove()
    if forked and getattr(proc, "lost", False):
        if report_r >= 0:
            os.close(report_r)
        raise SandboxSetupError(errno.EIO, f"the zygote ended while {argv[1]} ran: {zygote.log_tail()}")
    if report_r >= 0:
        reported, setup_error = _read_report(report_r, limits)
        os.close(report_r)
        if setup_error is not None and limit is None and not timed_out:
            raise SandboxSetupError(errno.EPERM, f"the sandbox could not start {argv[0] if argv else 'the program'}: "
                                                 f"{setup_error} (level: {plan.level})")
        limit = limit or reported
    exit_overrun = exit_overrun and limit is None
    if exit_overrun:
        limit = (f"it had not ended {limits.exit_grace_s:g} s after the harness's last command (code of its own "
                 "running at exit)")
    if limit is not None:
        timed_out = False  # the limit ended it, not the clock (a kill by the limit may land at the deadline)
    # unshare reports a child killed by signal N as exit status 128+N; map it back to -N like subprocess does.
    if level != "session" and rc is not None and rc > 128 and rc - 128 in {s.value for s in signal.Signals}:
        rc = -(rc - 128)
    return SandboxRun(
        argv=tuple(argv),
        returncode=rc,
        timed_out=timed_out,
        wall_s=wall,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=out_trunc,
        stderr_truncated=err_trunc,
        level=plan.level + ("; start=zygote" if forked else ""),
        limit=limit,
        exit_overrun=exit_overrun,
        memory_note=(f"host memory is capped at {_fmt_bytes(limits.memory)} by RLIMIT_DATA: an allocation past it "
                     "fails" if rlimit_data else None),
    )


def _spawn_forked(zygote: "Zygote", argv: Sequence[str], env: dict[str, str], workdir: Path, stdin,
                  stdout_fd: int, stderr_fd: int, pass_fds: Sequence[int], join: Sequence[str],
                  rlimits: Sequence[tuple[int, int, int]], nice: int, spec: dict) -> "ZygoteProcess":
    """``subprocess.Popen``'s part for a run forked from ``zygote``: its standard input (a pipe whose write end
    the handle keeps, as ``stdin=PIPE`` gives, ``/dev/null`` or an open file), then the spawn."""
    from cudaperf.harness.zygote import ZygoteError

    pipe_w = None
    if stdin is subprocess.PIPE:
        in_fd, pipe_w = os.pipe()
    elif stdin is subprocess.DEVNULL:
        in_fd = os.open(os.devnull, os.O_RDONLY)
    else:
        in_fd = os.dup(stdin.fileno())
    try:
        proc = zygote.spawn(argv, env=env, cwd=workdir, stdin_fd=in_fd, stdout_fd=stdout_fd, stderr_fd=stderr_fd,
                            pass_fds=pass_fds, join=join, rlimits=rlimits, nice=nice, spec=spec)
    except ZygoteError as exc:
        if pipe_w is not None:
            os.close(pipe_w)
        raise SandboxSetupError(errno.EIO, f"the zygote could not start {argv[1]}: {exc}") from None
    finally:
        os.close(in_fd)
    if pipe_w is not None:
        proc.stdin = open(pipe_w, "wb")
    return proc


class SandboxSetupError(OSError):
    """The sandbox could not be built, or the program not started in it (a harness fault, never the program's:
    it happens before the program runs)."""


def _read_report(fd: int, limits: SandboxLimits) -> tuple[str | None, str | None]:
    """What the launcher reported: (a limit the run passed, in words; a setup failure)."""
    try:
        data = os.read(fd, 65536)
    except OSError:
        return None, None
    limit = setup = None
    for line in data.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("limit") == "tmp" and limit is None:
            limit = f"it filled its private {msg.get('where')} (the {_fmt_bytes(limits.tmp_bytes)} limit)"
        if msg.get("setup_error") and setup is None:
            setup = str(msg["setup_error"])[:1000]
    return limit, setup


def _read_prefix(fh, limit: int) -> tuple[str, bool]:
    """The first ``limit`` bytes the program wrote to the file behind ``fh`` (the harness's own descriptor)."""
    fh.seek(0)
    data = fh.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def remove_tree(path: Path | str) -> None:
    """Remove a working directory a sandboxed program wrote into, however deep its tree (``shutil.rmtree`` recurses
    in Python 3.11 and a program can nest thousands of directories; ``rm -rf`` walks it without recursion)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, timeout=600)


CTL_FD = "@CTL_FD@"
"""An ``argv`` item replaced by the number of the control channel's write end (see :class:`Control`)."""


class Control:
    """The harness's end of a running sandboxed program's control channel.

    The program reports progress by writing lines to a pipe (its file descriptor is passed on the command line,
    :data:`CTL_FD`) and reads the harness's answers on its stdin. Nothing the harness sends carries data from
    the harness (expected outputs never cross): only short commands such as ``time`` or ``stop``. The program is
    untrusted, so every read is bounded by the run's deadline and a malformed line is just a line.
    """

    def __init__(self, proc: subprocess.Popen, status_fd: int, deadline: float,
                 cpu_clock: tuple[Callable[[], float], str] | None = None) -> None:
        self._proc = proc
        self._fd = status_fd
        self._buf = b""
        self.deadline = deadline
        self.eof = False
        self.killed = False
        self._cpu, self.cpu_source = cpu_clock if cpu_clock is not None else (None, None)

    def cpu_s(self) -> float | None:
        """The CPU time the run has used so far (seconds, all its processes and threads), read by the harness from
        outside the run (:func:`run_cpu_clock`); None when there is no way to read it here. A window's CPU time
        over its wall time is how many cores worked: host threads doing the work beside a token kernel show."""
        if self._cpu is None:
            return None
        try:
            return float(self._cpu())
        except (OSError, ValueError):
            return None

    @property
    def pid(self) -> int:
        """The program's process id, which is also its process group's (it runs in its own session)."""
        return self._proc.pid

    def read_line(self, timeout_s: float | None = None, max_bytes: int = 256) -> str | None:
        """The next line the program reported, without its newline; None at end of file (the program ended or
        closed the channel) or when ``timeout_s`` or the run's deadline passes (``eof`` tells which)."""
        until = self.deadline if timeout_s is None else min(self.deadline, time.monotonic() + timeout_s)
        while b"\n" not in self._buf:
            if self.eof:
                return None
            left = until - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                self.eof = True
                if self._buf:
                    line, self._buf = self._buf, b""
                    return line[:max_bytes].decode("utf-8", errors="replace")
                return None
            self._buf += chunk
            if len(self._buf) > 64 * 1024:  # a flood without newlines: keep the tail only
                self._buf = self._buf[-max_bytes:]
        line, self._buf = self._buf.split(b"\n", 1)
        return line[:max_bytes].decode("utf-8", errors="replace")

    def kill(self) -> None:
        """End the program now (a phase ran past its own time limit): the run is reported as timed out."""
        self.killed = True
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def send(self, line: str) -> bool:
        """Write one command line to the program's stdin; False when it no longer listens."""
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write((line + "\n").encode())
            self._proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False


def _wait_pausable(proc: subprocess.Popen, deadline: float) -> int:
    """``proc.wait`` with the deadline moved by the time the process group has spent stopped."""
    from cudaperf.harness.quiet import HOST

    while True:
        left = deadline + HOST.paused_s(proc.pid) - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, 0)
        try:
            return proc.wait(timeout=min(left, 0.5))
        except subprocess.TimeoutExpired:
            continue


@dataclass
class Workdir:
    """A private working directory removed on exit (``keep=True`` leaves it for debugging)."""

    prefix: str = "cudaperf-"
    keep: bool = False
    path: Path = field(init=False)

    def __enter__(self) -> Path:
        self.path = make_workdir(self.prefix)
        return self.path

    def __exit__(self, *exc) -> None:
        if not self.keep:
            remove_tree(self.path)
