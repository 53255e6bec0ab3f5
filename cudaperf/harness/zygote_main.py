"""A zygote for sandboxed Python programs: imports the heavy modules once, then forks one sandboxed run per request.

:mod:`cudaperf.harness.zygote` starts this file as a fresh interpreter (``python zygote_main.py``, the same
interpreter, flags and scrubbed environment as a sandboxed ``python SCRIPT`` run, never a fork of the harness: it
never holds anything of the harness's, expected outputs least of all). It uses the standard library only,
imports nothing of cudaperf but the sandbox's launcher (``sandbox_root.py``, loaded from its file), imports the
``--preload`` modules (``torch``: no CUDA context is made), freezes its heap, says ``ready`` on its control
socket and serves two kinds of message:

``spawn``
    it forks a *waiting child* and hands the harness one end of a socket pair that only that child holds. The
    zygote itself never reads a run's request, so no run's forked memory holds another run's.
EOF on the control socket
    the harness is gone: the zygote kills its children and ends.

It reaps its children and reports each one's exit status (``{"exit": PID, "rc": N}``, negative for a signal, as
subprocess reports it).

The waiting child reads its request (the run's argv, environment, working directory, resource limits, cgroup,
the launcher's spec, and its descriptors by SCM_RIGHTS), then does in order what ``subprocess.Popen``'s child and
``unshare`` do for an exec'd run: a session of its own, the run's cgroup, its rlimits and niceness, its
descriptors at their numbers and nothing else, new mount, network, IPC and PID namespaces; it forks the
namespace's first process and passes on its status (as ``unshare --fork --kill-child``: that process dies with
it). That first process is the launcher's (``sandbox_root.build_root`` and ``supervise``, unchanged); it forks
the program's process, which calls what ``sandbox_root.exec_program`` calls (``become_run_user``: oom score,
working directory, the run's user; ``load_filter``: ``no_new_privs``, the seccomp filter) but not the ``execve``:
instead, with the run's environment in place,
``sys.argv``, ``sys.path[0]`` and ``tempfile``'s cached directory as a fresh ``python SCRIPT ARGS`` would have
them, it runs the script as ``__main__`` and ends as the interpreter does (``atexit`` handlers, then ``exit``).
"""

_FRESH_MAIN = sorted(globals())  # the names a fresh interpreter's __main__ starts with (this file's, before any)

import ctypes
import fcntl
import gc
import importlib
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import sys
import time

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
PR_SET_PDEATHSIG = 1
MAX_MSG = 1 << 20
MAX_FDS = 253  # SCM_MAX_FD
FD_FLOOR = 512
"""Received descriptors are first moved at or above this, so that placing them at their numbers never overwrites
one not yet placed."""

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
libc.unshare.argtypes = (ctypes.c_int,)


def _load_launcher(path):
    spec = importlib.util.spec_from_file_location("cudaperf_sandbox_root", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _send(sock, msg, fds=()):
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def _status_code(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _place_fds(received, targets, keep=()):
    """Put ``received[i]`` at descriptor ``targets[i]`` (inheritable) and close every other descriptor but
    ``keep``'s (which must lie above every target). The received ones are first moved above every target, so that
    placing one never overwrites another not yet placed."""
    floor = max([*targets, FD_FLOOR]) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in received]
    for fd in received:
        os.close(fd)
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
    kept = set(targets) | set(keep)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in kept:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor


def _program(req, launcher, report):
    """In the program's process (PID 2 of the run's namespace): what the launcher does before its ``execve``;
    returns the callable that runs the script."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if report is not None:
        os.close(report)  # the program never holds the launcher's report descriptor
    launcher.become_run_user(req["spec"])
    launcher.load_filter(req["spec"])
    os.environ.clear()
    os.environ.update(req["env"])
    argv = req["argv"]

    def run():
        import builtins
        import importlib.machinery
        import tempfile
        import types

        tempfile.tempdir = None  # computed afresh from the run's TMPDIR, as a fresh interpreter would
        script = os.path.abspath(argv[1])
        sys.argv = list(argv[1:])
        sys.path[0] = os.path.dirname(script)
        main = types.ModuleType("__main__")  # as the interpreter makes it for `python SCRIPT`
        main.__dict__.update(__file__=script, __cached__=None, __builtins__=builtins, __package__=None,
                             __spec__=None, __loader__=importlib.machinery.SourceFileLoader("__main__", script))
        if "__annotations__" in _FRESH_MAIN:
            main.__annotations__ = {}
        sys.modules["__main__"] = main
        with open(script, "rb") as fh:
            source = fh.read()
        exec(compile(source, script, "exec"), main.__dict__)

    return run


def _init(req, launcher):
    """PID 1 of the run's namespace: the launcher's root, then the program's process; supervises it."""
    spec = req["spec"]
    report = spec.get("report_fd")
    try:
        if spec.get("root"):
            launcher.build_root(spec)
    except (launcher.SetupError, OSError) as e:
        launcher._fail(report, f"cannot set up the sandbox: {e}")
    child = os.fork()
    if child == 0:
        try:
            return _program(req, launcher, report)
        except (launcher.SetupError, OSError) as e:
            launcher._fail(report, str(e))
    launcher.supervise(child, spec, report)
    os._exit(126)


def _waiting_child(chan, launcher):
    """A forked child of the zygote: reads its one request, becomes the run (see the module's docstring)."""
    try:
        msg, fds, _, _ = socket.recv_fds(chan, MAX_MSG, MAX_FDS)
    except OSError:
        os._exit(126)
    if not msg:
        os._exit(126)  # the harness let the spawn go
    req = json.loads(msg.decode())
    report = req["spec"].get("report_fd")
    try:  # until the descriptors are in place, a failure is said on the channel (the harness's fault)
        os.setsid()
        if len(fds) != len(req["fds"]):
            raise OSError(f"{len(fds)} descriptors came for {len(req['fds'])}")
        chan_fd = fcntl.fcntl(chan.fileno(), fcntl.F_DUPFD_CLOEXEC, max([*req["fds"], FD_FLOOR]) + 1 + len(fds))
        chan.close()
        chan = socket.socket(fileno=chan_fd)
        _place_fds(fds, req["fds"], keep=(chan_fd,))
    except OSError as e:
        try:
            chan.send(json.dumps({"error": f"the zygote's run could not take its descriptors: {e}"}).encode())
        except OSError:
            pass
        os._exit(126)
    chan.send(b'{"ok": true}')
    chan.close()
    try:
        for path in req["join"]:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        for which, soft, hard in req["rlimits"]:
            resource.setrlimit(which, (soft, hard))
        if req.get("nice"):
            os.nice(req["nice"])
        os.chdir(req["cwd"])
        launcher._check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID), "unshare")
    except (launcher.SetupError, OSError) as e:
        launcher._fail(report, f"the zygote could not start the run: {e}")
    me = os.getpid()
    first = os.fork()
    if first == 0:
        # It dies with this process (--kill-child). Its parent is outside its PID namespace (getppid() is 0), so a
        # parent gone before this line is not seen here: the harness's kill of the run's group and cgroup ends it.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        return _init(req, launcher)
    # This process holds nothing of the run's. Not by listing /proc/self/fd: it shares the run's mount namespace,
    # whose root the first process may already have pivoted to one whose /proc is the run's PID namespace's.
    os.closerange(0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    while True:
        try:
            _, status = os.waitpid(first, 0)
            break
        except ChildProcessError:
            os._exit(126)
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):  # as unshare does: the same signal
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(me, os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def _end(children):
    """The harness is gone: so are the runs it started."""
    for pid in children:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    os._exit(0)


def serve(sock, launcher):
    """The zygote's loop; returns only in a program's process (the callable that runs its script)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = set()
    while True:
        try:
            ready, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            try:
                _send(sock, {"exit": pid, "rc": _status_code(status)})
            except OSError:
                _end(children)  # the harness is gone
        if sock in ready:
            try:
                msg = sock.recv(MAX_MSG)
            except OSError:
                msg = b""
            if not msg:  # the harness is gone
                _end(children)
            req = json.loads(msg.decode())
            if req.get("op") != "spawn":
                _send(sock, {"error": f"unknown request {req.get('op')!r}"})
                continue
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                sock.close()
                theirs.close()
                return _waiting_child(mine, launcher)
            mine.close()
            children.add(pid)
            try:
                _send(sock, {"spawned": pid}, [theirs.fileno()])
            except OSError:
                _end(children)
            theirs.close()


def main():
    args = sys.argv[1:]
    ctl = int(args[args.index("--control-fd") + 1])
    launcher = _load_launcher(args[args.index("--launcher") + 1])
    preload = [m for m in args[args.index("--preload") + 1].split(",") if m] if "--preload" in args else []
    sock = socket.socket(fileno=ctl)
    os.set_inheritable(ctl, False)
    t0 = time.perf_counter()
    failed = None
    skipped = []
    for name in preload:  # "?NAME": imported where it exists (a module of some torch versions only)
        optional, name = name.startswith("?"), name.lstrip("?")
        try:
            importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - reported to the harness, which then starts runs afresh
            if optional and isinstance(e, ImportError):
                skipped.append(name)
                continue
            failed = f"cannot import {name}: {type(e).__name__}: {e}"
            break
    preload_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()  # the heap's pages stay shared with the children (no collector writes to them)
    env_cached = [m for m in ("torch.utils.cpp_extension",) if m in sys.modules]
    _send(sock, {"ready": failed is None, "error": failed, "pid": os.getpid(), "preload_s": round(preload_s, 4),
                 "modules": len(sys.modules), "env_cached": env_cached, "executable": sys.executable,
                 "skipped": skipped})
    if failed is not None:
        os._exit(3)
    serve(sock, launcher)()  # returns in a program's process only: its script, then the interpreter's own exit


if __name__ == "__main__":
    main()
