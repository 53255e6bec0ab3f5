"""Sandboxed Python runs forked from a zygote that has already imported torch (issue 25).

A PyTorch candidate's runner is a fresh ``python torch_runner.py`` in the sandbox, and it used to spend most of
its start importing torch. A :class:`Zygote` is a fresh interpreter (:mod:`cudaperf.harness.zygote_main`, started
by this module with the run's interpreter and a scrubbed environment; never a fork of the harness) that imports
the preloaded modules once, without a CUDA context, and then forks one process per run. Each run is still a
process of its own with every protection :func:`cudaperf.harness.sandbox.run_sandboxed` gives an exec'd run, set
up in the same order by the same launcher code: its session, cgroup, rlimits and descriptors, new mount, network,
IPC and PID namespaces, the private root, the run's own user, ``no_new_privs`` and the seccomp filter; only the
``execve`` of a fresh interpreter is gone, and with it the import. What a forked run shares with its zygote is
the zygote's memory at the fork, copy-on-write: the interpreter, the preloaded modules, nothing else (the zygote
never reads a run's request: a waiting child it forks before the request does).

Used only where the run is ``[PYTHON, SCRIPT, ARGS...]`` with the zygote's interpreter, the harness runs as root
(runs drop to a user of their own) and the private root works; elsewhere runs start as before.
:attr:`cudaperf.harness.sandbox.SandboxRun.level` says ``start=zygote`` for a run forked from one.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

MAIN = Path(__file__).with_name("zygote_main.py")
LAUNCHER = Path(__file__).with_name("sandbox_root.py")
READY_TIMEOUT_S = 300.0


class ZygoteError(OSError):
    """The zygote could not be started, or ended: a harness fault (the runs fall back to exec'd interpreters)."""


@dataclass(frozen=True)
class ZygoteInfo:
    pid: int
    preload: tuple[str, ...]
    preload_s: float
    """Seconds the zygote took to import the preloaded modules (what each forked run saves)."""
    modules: int
    env_cached: tuple[str, ...]
    """Preloaded modules that read the environment at import (``torch.utils.cpp_extension``'s ``CUDA_HOME``):
    a run forked from this zygote would see the zygote's values, so none is forked from it."""
    skipped: tuple[str, ...] = ()
    """Optional preloads (``?NAME``) this interpreter does not have."""


class ZygoteProcess:
    """The harness's handle on one forked run, in the part of ``subprocess.Popen``'s interface the sandbox uses:
    ``pid`` (the run's process in the harness's PID namespace, which leads its own session), ``stdin`` (its
    standard input's write end, or None), ``poll``, ``wait`` and ``returncode``."""

    def __init__(self, zygote: "Zygote", pid: int, args: Sequence[str]) -> None:
        self.zygote, self.pid, self.args = zygote, pid, list(args)
        self.stdin = None
        self.returncode: int | None = None
        self.lost = False
        """The zygote ended before it reported this run's status (the run was killed with it)."""
        self._done = threading.Event()

    def _ended(self, rc: int | None, lost: bool = False) -> None:
        self.returncode, self.lost = (rc if rc is not None else -9), lost
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """One zygote process (see the module's docstring). Thread-safe; :meth:`close` ends it and its runs."""

    def __init__(self, preload: Sequence[str] = ("torch",), python: str = sys.executable) -> None:
        self.preload = tuple(preload)
        self.python = python
        self._lock = threading.Lock()
        self._replies: list = []
        self._reply = threading.Condition()
        self._procs: dict[int, ZygoteProcess] = {}
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen | None = None
        self.info: ZygoteInfo | None = None
        self.spawned = 0
        """Runs forked so far."""
        self.owner_pid = os.getpid()
        """The process that started it: a process forked from that one (a worker pool) has no use of it."""
        self._dir = Path(tempfile.mkdtemp(prefix="cudaperf-zygote-"))
        os.chmod(self._dir, 0o700)

    @property
    def alive(self) -> bool:
        return (os.getpid() == self.owner_pid and self._proc is not None and self._proc.poll() is None
                and self._sock is not None)

    def start(self) -> ZygoteInfo:
        from cudaperf.harness.sandbox import scrubbed_env

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(self._dir / "zygote.log", "ab")
        try:
            self._proc = subprocess.Popen(
                [self.python, str(MAIN), "--control-fd", str(theirs.fileno()), "--launcher", str(LAUNCHER),
                 "--preload", ",".join(self.preload)],
                cwd=self._dir, env=scrubbed_env(self._dir), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
            log.close()
        from cudaperf.harness.quiet import HOST

        # Its import is background host work: paused while anything is timed, as a runner's start-up is.
        HOST.register(self._proc.pid)
        mine.settimeout(READY_TIMEOUT_S)
        try:
            first = json.loads(mine.recv(1 << 16).decode() or "null")
        except (OSError, ValueError) as exc:
            first = {"error": f"no answer ({exc})"}
        finally:
            HOST.unregister(self._proc.pid)
        if not isinstance(first, dict) or not first.get("ready"):
            self._proc.kill()
            self._proc.wait()
            why = first.get("error") if isinstance(first, dict) else "it ended before it was ready"
            raise ZygoteError(f"the zygote did not start ({why}): {self.log_tail()}")
        mine.settimeout(None)
        self._sock = mine
        self.info = ZygoteInfo(first["pid"], self.preload, float(first["preload_s"]), int(first["modules"]),
                               tuple(first.get("env_cached") or ()), tuple(first.get("skipped") or ()))
        threading.Thread(target=self._read, name="cudaperf-zygote", daemon=True).start()
        return self.info

    def log_tail(self, n: int = 600) -> str:
        try:
            return (self._dir / "zygote.log").read_text(errors="replace")[-n:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
            except OSError:
                msg, fds = b"", []
            if not msg:
                break
            m = json.loads(msg.decode())
            if "spawned" in m:
                proc = ZygoteProcess(self, int(m["spawned"]), ())
                self._procs[proc.pid] = proc
                with self._reply:
                    self._replies.append((proc, fds[0] if fds else None))
                    self._reply.notify_all()
            elif "exit" in m:
                proc = self._procs.pop(int(m["exit"]), None)
                if proc is not None:
                    proc._ended(int(m["rc"]))
            else:
                with self._reply:
                    self._replies.append((None, m.get("error")))
                    self._reply.notify_all()
        self._sock = None
        with self._reply:
            self._replies.append((None, "the zygote ended"))
            self._reply.notify_all()
        for proc in list(self._procs.values()):
            proc._ended(None, lost=True)
        self._procs.clear()

    def spawn(self, argv: Sequence[str], *, env: dict[str, str], cwd: Path, stdin_fd: int, stdout_fd: int,
              stderr_fd: int, pass_fds: Sequence[int], join: Sequence[str], rlimits: Sequence[tuple[int, int, int]],
              nice: int, spec: dict) -> ZygoteProcess:
        """Fork one run: ``argv`` is ``[PYTHON, SCRIPT, ARGS...]``; the descriptors go to the run at 0, 1, 2 and
        at their own numbers (``pass_fds``, the launcher's report descriptor among them); ``spec`` is the
        launcher's (:mod:`cudaperf.harness.sandbox_root`). Raises :class:`ZygoteError` if the zygote is gone."""
        if os.getpid() != self.owner_pid:
            raise ZygoteError("this zygote belongs to the process this one was forked from")
        with self._lock:
            sock = self._sock
            if sock is None:
                raise ZygoteError(f"the zygote has ended: {self.log_tail()}")
            with self._reply:
                self._replies.clear()
                try:
                    sock.send(b'{"op": "spawn"}')
                except OSError as exc:
                    raise ZygoteError(f"the zygote does not listen ({exc})") from None
                deadline = time.monotonic() + 60
                while not self._replies:
                    if not self._reply.wait(timeout=max(0.0, deadline - time.monotonic())):
                        raise ZygoteError("the zygote did not answer a spawn in 60 s")
                proc, chan_fd = self._replies.pop(0)
            if proc is None:
                raise ZygoteError(f"the zygote could not fork a run ({chan_fd}): {self.log_tail()}")
            self.spawned += 1
        proc.args = list(argv)
        chan = socket.socket(fileno=chan_fd)
        req = {"argv": list(argv), "env": dict(env), "cwd": str(cwd), "fds": [0, 1, 2, *pass_fds],
               "join": list(join), "rlimits": [list(r) for r in rlimits], "nice": nice, "spec": spec}
        try:
            socket.send_fds(chan, [json.dumps(req).encode()], [stdin_fd, stdout_fd, stderr_fd, *pass_fds])
            chan.settimeout(60)
            ack = json.loads(chan.recv(1 << 16).decode() or "{}")  # its descriptors are in place
        except (OSError, ValueError) as exc:
            ack = {"error": f"cannot hand the run its request ({exc})"}
        finally:
            chan.close()
        if not ack.get("ok"):
            try:
                os.kill(proc.pid, 9)
            except OSError:
                pass
            raise ZygoteError(ack.get("error") or "the run did not take its request")
        return proc

    def close(self) -> None:
        """End the zygote (its runs die with it); in a process forked from its owner, nothing."""
        if os.getpid() != self.owner_pid:
            return
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


_SHARED: dict[tuple[str, tuple[str, ...]], Zygote | str] = {}
_SHARED_LOCK = threading.Lock()


def zygote_unavailable() -> str | None:
    """Why runs cannot be forked from a zygote here, or None."""
    from cudaperf.harness.sandbox import base_level, private_tmp_available

    if not sys.platform.startswith("linux"):
        return "not Linux"
    if base_level() != "namespaces+nobody":
        return f"the sandbox's base level is {base_level()} (a zygote needs the harness to run as root)"
    if not private_tmp_available():
        return "no private root here"
    return None


def shared_zygote(preload: Sequence[str] = ("torch",), python: str = sys.executable) -> Zygote | str:
    """This process's zygote for ``preload`` (started on first use, started again if it ended), or why there is
    none (then runs start as exec'd interpreters)."""
    key = (python, tuple(preload))
    with _SHARED_LOCK:
        z = _SHARED.get(key)
        if isinstance(z, Zygote) and z.alive:
            return z
        if isinstance(z, Zygote) and z.owner_pid != os.getpid():
            z = None  # inherited from the process this one was forked from: start one of its own
        if isinstance(z, str):
            return z
        why = zygote_unavailable()
        if why is not None:
            _SHARED[key] = why
            return why
        z = Zygote(preload, python)
        try:
            info = z.start()
        except ZygoteError as exc:
            _SHARED[key] = str(exc)
            return str(exc)
        if info.env_cached:
            z.close()
            _SHARED[key] = f"the zygote's preload imported {', '.join(info.env_cached)}, which caches the environment"
            return _SHARED[key]
        _SHARED[key] = z
        return z


def zygote_self_check() -> tuple[bool, str]:
    """(works, what was seen): a zygote with nothing preloaded forks one sandboxed Python run here, which must
    see itself as a run of its own user, ``no_new_privs`` and seccomp in force, and PID 2 of its namespace
    (``cudaperf doctor``)."""
    from cudaperf.harness.sandbox import SandboxSetupError, Workdir, run_sandboxed, share_file

    why = zygote_unavailable()
    if why is not None:
        return False, f"unavailable ({why}): PyTorch runners start as fresh interpreters"
    z = Zygote(preload=())
    try:
        z.start()
        with Workdir(prefix="cudaperf-zcheck-") as w:
            (w / "check.py").write_text(
                "import os\nst = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
                "print(os.getuid() == os.stat('.').st_uid, st['NoNewPrivs'].strip(), st['Seccomp'].strip(), "
                "os.getpid())\n")
            share_file(w / "check.py")
            r = run_sandboxed([z.python, "check.py"], w, zygote=z)
    except (ZygoteError, SandboxSetupError) as exc:
        return False, f"a forked run failed ({exc}): PyTorch runners start as fresh interpreters"
    finally:
        z.close()
    seen = r.stdout.split()
    ok = r.ok and seen[:3] == ["True", "1", "2"] and r.level.endswith("start=zygote")
    detail = (f"a forked run started in {r.wall_s:.2f} s under every protection (its own user, no_new_privs, "
              "seccomp); cudaperf eval --zygote forks PyTorch runners from one that imported torch" if ok else
              f"a forked run did not come out as expected ({r.describe()}: {(r.stdout + r.stderr).strip()[-200:]})")
    return ok, detail


@atexit.register
def _close_all() -> None:
    for z in list(_SHARED.values()):
        if isinstance(z, Zygote):
            z.close()
