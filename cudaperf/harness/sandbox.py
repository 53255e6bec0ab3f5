"""Run one untrusted program (a candidate's build, or nvcc on a candidate's source) in a sandbox.

Threat model
------------
The candidate is code written by a model that is rewarded for looking fast and correct. It may be buggy, hostile
or both. Each run gets:

Covered
  * a fresh process in its own session, started by ``unshare`` in new PID, mount and network namespaces (with
    its own /proc) when the OS allows: no network, and when the run ends (or its wall-clock deadline passes) every process it started dies
    with it, including ones that called ``setsid`` or double-forked;
  * a hard wall-clock timeout; on expiry the whole process group (and PID namespace) is killed with SIGKILL;
  * when the harness runs as root: the program runs as ``nobody`` (via ``setpriv``), so it cannot write anywhere
    outside its private working directory and /tmp-like world-writable places, cannot read the harness's files
    mode 0700 (the expected outputs never exist as files in the first place), and ``RLIMIT_NPROC`` applies
    (counted over all of that user's runs at once);
  * rlimits: CPU seconds, file size (an output flood dies with SIGXFSZ), process count, core dumps off;
  * a scrubbed environment: only PATH, HOME/TMPDIR (the private directory), LANG, the CUDA device selection and
    the loader path the CUDA driver needs;
  * stdout and stderr go to files in the private directory and only a trimmed prefix is read back.

Not covered
  * GPU memory and GPU time of other processes on the same GPU: the executor never runs two candidates on one
    GPU at once (except ``timing_rounds`` > 1, where a task's trusted variants wait side by side); a GPU fault is
    sticky only for the faulting process, which is then gone;
  * the trusted driver that times a ``c_function`` candidate shares its process: the static checks (no file
    access, no raw system calls, no exit hooks) and the symbol check (no C-linkage function but the task's) stop
    the direct ways to forge its records, but code that rewrites the driver's memory is not ruled out;
  * side channels, kernel exploits, and reading world-readable files on the host (the candidate can read what
    ``nobody`` can read);
  * if ``unshare`` is not permitted (an unprivileged container), runs fall back to a plain new session: processes
    that escape the process group by ``setsid`` are then not killed, and the network is not cut. The level in
    force is recorded in every result (``sandbox_level``).
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping, Sequence

NOBODY_UID = 65534
NOBODY_GID = 65534


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one run. Defaults fit a candidate test or timing run."""

    wall_s: float = 60.0
    cpu_s: int | None = None
    """CPU seconds (RLIMIT_CPU); None: the wall-clock limit plus 10 s (a CUDA sync spin-waits on the CPU)."""
    file_size_bytes: int = 1 << 30
    """Largest file the program may write (outputs of large tests fit; a flood does not)."""
    max_processes: int = 4096
    """RLIMIT_NPROC: the kernel counts it over *all* processes and threads of the sandbox user, so it must cover
    every sandboxed run alive at once (runners and compiles side by side), not this run alone. It bounds a fork
    bomb; the PID namespace kills whatever the run started when it ends."""
    capture_bytes: int = 64 * 1024
    """How much of stdout and of stderr is read back."""
    nice: int = 0
    """Added to the program's niceness (19: runs only on CPU time nothing else wants, as compiles beside timing
    runs do)."""


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

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def describe(self) -> str:
        if self.timed_out:
            return f"killed after the {self.wall_s:.1f} s wall-clock limit"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        return f"exit code {self.returncode}"


def _is_root() -> bool:
    return os.geteuid() == 0


@lru_cache(maxsize=1)
def sandbox_level() -> str:
    """The strongest isolation this machine allows, probed once: ``namespaces+nobody``, ``namespaces``,
    ``session``."""
    unshare = shutil.which("unshare")
    setpriv = shutil.which("setpriv")
    if unshare:
        base = [unshare, "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
        if _is_root() and setpriv:
            probe = base + [setpriv, f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups", "true"]
            if subprocess.run(probe, capture_output=True, timeout=20).returncode == 0:
                return "namespaces+nobody"
        if _is_root():
            if subprocess.run(base + ["true"], capture_output=True, timeout=20).returncode == 0:
                return "namespaces"
        else:
            user = [unshare, "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "true"]
            if subprocess.run(user, capture_output=True, timeout=20).returncode == 0:
                return "user-namespaces"
    return "session"


@lru_cache(maxsize=None)
def _host_tool(name: str) -> str:
    """The wrapper's own tools by absolute path, found on the harness's PATH, not the run's (which the caller
    sets, and which may lack them)."""
    return shutil.which(name) or name


def _wrap(argv: Sequence[str], level: str) -> list[str]:
    if level == "session":
        return list(argv)
    if level == "user-namespaces":
        return [_host_tool("unshare"), "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "--",
                *_INIT, *argv]
    # --mount-proc: the CUDA driver fails to initialise (cudaErrorOperatingSystem) in a PID namespace whose
    # /proc is the host's (seen on the H200 machine).
    cmd = [_host_tool("unshare"), "--net", "--pid", "--fork", "--mount-proc", "--kill-child", "--"]
    if level == "namespaces+nobody":
        cmd += [_host_tool("setpriv"), f"--reuid={NOBODY_UID}", f"--regid={NOBODY_GID}", "--clear-groups", "--"]
    return cmd + _INIT + list(argv)


# PID 1 of a namespace ignores signals it has no handler for (a candidate that is PID 1 would survive its own
# SIGSEGV from kill, say). A shell as PID 1 runs the program as its child and passes on its status (128+N for
# a signal); "; exit $?" keeps the shell from exec'ing the program in its place.
_INIT = ["/bin/sh", "-c", '"$@"; exit $?', "cudaperf-init"]


def make_workdir(prefix: str = "cudaperf-") -> Path:
    """A private directory the sandboxed program may write to (owned by ``nobody`` when we run as root)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    if sandbox_level() == "namespaces+nobody":
        os.chown(d, NOBODY_UID, NOBODY_GID)
    os.chmod(d, 0o700)
    return d


def share_file(path: Path) -> None:
    """Make a harness-written file readable by the sandbox user."""
    if sandbox_level() == "namespaces+nobody":
        os.chown(path, NOBODY_UID, NOBODY_GID)


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
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # One CPU thread for OpenMP/BLAS pools: a PyTorch runner otherwise starts one per core at import, and
        # RLIMIT_NPROC counts threads over all of the sandbox user's concurrent runs.
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


def _read_prefix(path: Path, limit: int) -> tuple[str, bool]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        return "", False
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


CTL_FD = "@CTL_FD@"
"""An ``argv`` item replaced by the number of the control channel's write end (see :class:`Control`)."""


class Control:
    """The harness's end of a running sandboxed program's control channel.

    The program reports progress by writing lines to a pipe (its file descriptor is passed on the command line,
    :data:`CTL_FD`) and reads the harness's answers on its stdin. Nothing the harness sends carries data from
    the harness (expected outputs never cross): only short commands such as ``time`` or ``stop``. The program is
    untrusted, so every read is bounded by the run's deadline and a malformed line is just a line.
    """

    def __init__(self, proc: subprocess.Popen, status_fd: int, deadline: float) -> None:
        self._proc = proc
        self._fd = status_fd
        self._buf = b""
        self.deadline = deadline
        self.eof = False
        self.killed = False

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
) -> SandboxRun:
    """Run ``argv`` in ``workdir`` under the sandbox; never raises for anything the program does.

    ``control``: called on this thread while the program runs, with the harness's end of a control channel
    (:class:`Control`; the program gets a pipe whose descriptor replaces :data:`CTL_FD` in ``argv``, and its
    stdin). The program is killed at the wall-clock deadline whatever ``control`` does.

    ``pausable``: background work (a compiler) that timing runs in this process stop while they time
    (:mod:`cudaperf.harness.quiet`); the time it spends stopped extends its wall-clock limit.

    Raises ``FileNotFoundError`` only when the sandbox tooling itself is missing (a harness fault).
    """
    level = level or sandbox_level()
    env = dict(env) if env is not None else scrubbed_env(workdir)
    out_path = workdir / ".stdout"
    err_path = workdir / ".stderr"
    status_r = status_w = -1
    if control is not None:
        if stdin_path is not None:
            raise ValueError("a controlled run reads its commands on stdin: no stdin_path")
        status_r, status_w = os.pipe()
        argv = [str(status_w) if a == CTL_FD else a for a in argv]

    def limit_child() -> None:  # runs in the child between fork and exec
        cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.wall_s) + 10
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
        if limits.nice:
            os.nice(limits.nice)

    start = time.monotonic()
    with open(out_path, "wb") as out_fh, open(err_path, "wb") as err_fh:
        stdin = open(stdin_path, "rb") if stdin_path else (subprocess.PIPE if control else subprocess.DEVNULL)
        try:
            proc = subprocess.Popen(
                _wrap(argv, level),
                cwd=workdir,
                env=env,
                stdin=stdin,
                stdout=out_fh,
                stderr=err_fh,
                start_new_session=True,
                preexec_fn=limit_child,
                close_fds=True,
                pass_fds=(status_w,) if control else (),
            )
        except BaseException:
            if control is not None:
                os.close(status_r)
            raise
        finally:
            if stdin_path:
                stdin.close()  # type: ignore[union-attr]
            if control is not None:
                os.close(status_w)
        timed_out = False
        ctl: Control | None = None
        if pausable:
            from cudaperf.harness.quiet import HOST

            HOST.register(proc.pid)
        try:
            if control is not None:
                ctl = Control(proc, status_r, start + limits.wall_s)
                try:
                    control(ctl)
                finally:
                    os.close(status_r)
                    try:
                        proc.stdin.close()  # type: ignore[union-attr]
                    except OSError:
                        pass
            if pausable:
                rc = _wait_pausable(proc, start + limits.wall_s)
            else:
                rc = proc.wait(timeout=max(0.0, start + limits.wall_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        finally:
            if pausable:
                HOST.unregister(proc.pid)
            # Kill whatever is left in the group (also after a normal exit: stray children).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if timed_out:
                proc.wait()
    if ctl is not None and ctl.killed:
        timed_out, rc = True, None
    wall = time.monotonic() - start
    stdout, out_trunc = _read_prefix(out_path, limits.capture_bytes)
    stderr, err_trunc = _read_prefix(err_path, limits.capture_bytes)
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
        level=level,
    )


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
            shutil.rmtree(self.path, ignore_errors=True)
