"""The sandbox's first process: builds the private root, drops privileges, loads the seccomp filter, runs the program.

:mod:`cudaperf.harness.sandbox` runs this file with the harness's own interpreter (``python -I -S``), inside the
new PID, mount and network namespaces that ``unshare`` made (or, where namespaces are refused, directly). It uses
the standard library only and imports nothing of cudaperf. It reads its instructions (a JSON line) from a file
descriptor given on its command line, then:

1. with ``root``: makes every mount private, mounts a tmpfs as the new root, binds the listed host paths into it
   read-only (recursively, every submount read-only too), mounts private tmpfs ``/tmp`` and ``/dev/shm`` (size
   capped), a minimal ``/dev`` (null, zero, full, random, urandom and the NVIDIA device nodes), a fresh ``/proc``
   and a read-only ``/sys``, binds the run's working directory read-write at its host path, hides the listed
   paths under empty tmpfs mounts, remounts those tmpfs read-only, and ``pivot_root``s into it (the old root is
   detached, not just hidden);
2. with ``landlock`` (no private root was possible): restricts the file system with Landlock to reading the
   listed paths and writing the working directory;
3. forks the program (it stays PID 1 of the namespace, reaps orphans, and passes on the program's status: 128+N
   for a signal N) or, without a PID namespace, becomes it;
4. in the program's process: sets ``oom_score_adj`` (the program, not this process, is the OOM killer's victim),
   drops to the sandbox user, sets ``no_new_privs``, loads the seccomp filter, and calls ``execve`` with the
   program's path, argv and envp stored at the one address triple the filter lets ``execve`` take (``exec_addrs``: after this call no
   other ``execve`` passes a filter that pins it).

Limits it watches while the program runs (the private ``/tmp`` and ``/dev/shm`` filling up) are reported on the
``report`` descriptor, which the program never holds (close-on-exec), so a program cannot forge or hide them.
"""

import ctypes
import json
import os
import signal
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
ST_FLAGS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC}  # statvfs f_flag -> mount flag (locked ones)
MOUNT_ATTR_RDONLY = 1
AT_RECURSIVE = 0x8000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
PROT_READ, PROT_WRITE = 1, 2
MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED_NOREPLACE = 2, 0x20, 0x100000
SYSCALLS = {  # the calls the C library has no wrapper for, by architecture
    "x86_64": {"pivot_root": 155, "mount_setattr": 442, "landlock_create_ruleset": 444,
               "landlock_add_rule": 445, "landlock_restrict_self": 446},
    "aarch64": {"pivot_root": 41, "mount_setattr": 442, "landlock_create_ruleset": 444,
                "landlock_add_rule": 445, "landlock_restrict_self": 446},
}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
libc.syscall.restype = ctypes.c_long


class SetupError(Exception):
    """The sandbox could not be built or the program not started (a harness fault: reported on the report
    descriptor, exit status 126)."""


def _nr(name):
    return SYSCALLS.get(os.uname().machine, SYSCALLS["x86_64"])[name]


def _check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(e)} (errno {e})")
    return ret


def _mount(src, dst, fstype, flags, data=None):
    _check(libc.mount(src.encode() if src else None, dst.encode(), fstype.encode() if fstype else None, flags,
                      data.encode() if data else None), f"mount {src or fstype} on {dst}")


def _locked_flags(path):
    """The flags of the mount holding ``path`` that a remount must keep (a user namespace may not drop them)."""
    f = os.statvfs(path).f_flag
    return sum(v for k, v in ST_FLAGS.items() if f & k and v != MS_RDONLY)


def _make_readonly(path):
    """Remount ``path`` and every mount below it read-only."""
    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    AT_FDCWD = -100
    if libc.syscall(_nr("mount_setattr"), AT_FDCWD, path.encode(), AT_RECURSIVE, ctypes.byref(attr),
                    ctypes.sizeof(attr)) == 0:
        return
    # an older kernel: remount each mount at or below path
    targets = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == path or mnt.startswith(path.rstrip("/") + "/"):
                targets.append(mnt)
    for mnt in targets:
        _mount(None, mnt, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(mnt))


def _mkdirs(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        if not os.path.isdir(path):
            raise SetupError(f"cannot create {path} in the private root: {e}") from None


def _touch(path):
    _mkdirs(os.path.dirname(path))
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build_root(spec):
    """Build the private root at ``spec['mountpoint']`` and pivot into it."""
    new = spec["mountpoint"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("cudaperf-root", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m,nr_inodes=8192")
    readonly_tmpfs = [new]

    def inside(p):
        return new + p

    for link, target in spec.get("symlinks", []):  # /bin -> usr/bin on a merged-/usr system
        _mkdirs(os.path.dirname(inside(link)))
        os.symlink(target, inside(link))
    # The private /tmp first: a bound path under the host's /tmp (a virtualenv or a CUDA install there) is then bound
    # into it, not covered by it.
    tmp_opts = f"mode=1777,size={spec['tmp_bytes']},nr_inodes={spec.get('tmp_inodes', 65536)}"
    _mkdirs(inside("/tmp"))
    _mount("cudaperf-tmp", inside("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts)
    for op, p in spec["ops"]:  # in order: a path hidden under a bound one, a path bound under a hidden one
        if op == "hide":  # the checkout, the harness's home or temp dir, where a bound path holds it
            if os.path.isdir(inside(p)):
                _mount("cudaperf-hidden", inside(p), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m,nr_inodes=1024")
                readonly_tmpfs.append(inside(p))
            continue
        if os.path.isdir(p):
            _mkdirs(inside(p))
        elif os.path.exists(p):
            _touch(inside(p))
        else:
            continue
        _mount(p, inside(p), None, MS_BIND | MS_REC)
        _make_readonly(inside(p))
    # /dev: the usual character devices and the GPU's nodes, bound from the host one by one
    _mkdirs(inside("/dev"))
    _mount("cudaperf-dev", inside("/dev"), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m")
    for node in spec.get("dev_nodes", []):
        if os.path.isdir(node):
            _mkdirs(inside(node))
        elif os.path.exists(node):
            _touch(inside(node))
        else:
            continue
        _mount(node, inside(node), None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, inside("/dev/" + name))
    _mkdirs(inside("/dev/shm"))
    _mount("cudaperf-shm", inside("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts)
    readonly_tmpfs.append(inside("/dev"))
    if spec.get("proc", True):
        _mkdirs(inside("/proc"))
        _mount("proc", inside("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    if os.path.isdir("/sys"):
        _mkdirs(inside("/sys"))
        _mount("/sys", inside("/sys"), None, MS_BIND | MS_REC)
        _make_readonly(inside("/sys"))
    for p in spec.get("rw", []):  # the working directory, at its host path
        _mkdirs(inside(p))
        _mount(p, inside(p), None, MS_BIND)
    for t in readonly_tmpfs:
        _mount(None, t, None, MS_REMOUNT | MS_RDONLY | _locked_flags(t))
    os.chdir(new)
    _check(libc.syscall(_nr("pivot_root"), b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


# --- Landlock: the file-system fallback where no private root can be made ---------------------------------------

LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_ALL_V1 = (1 << 13) - 1
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15


def landlock(spec):
    """Allow reading (and executing) the bound paths of ``spec['ops']``, everything in the working directory and
    the device nodes; deny every other file-system access. Raises SetupError if the kernel refuses."""
    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    abi = libc.syscall(_nr("landlock_create_ruleset"), None, 0, 1)
    if abi < 1:
        raise SetupError(f"Landlock is not available: {os.strerror(ctypes.get_errno())}")
    handled = LL_ALL_V1 | (LL_REFER if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0) | \
        (LL_IOCTL_DEV if abi >= 5 else 0)
    attr = RulesetAttr(handled)
    fd = _check(libc.syscall(_nr("landlock_create_ruleset"), ctypes.byref(attr), ctypes.sizeof(attr), 0),
                "landlock_create_ruleset")
    read = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    file_only = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV

    def allow(path, access):
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                access &= file_only
            rule = PathBeneath(access & handled, pfd)
            _check(libc.syscall(_nr("landlock_add_rule"), fd, 1, ctypes.byref(rule), 0), f"landlock rule {path}")
        finally:
            os.close(pfd)

    for p in [p for op, p in spec["ops"] if op == "ro"] + ["/proc", "/sys"]:
        allow(p, read)
    for p in spec.get("dev_nodes", []) + ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]:
        allow(p, read | LL_WRITE_FILE | LL_IOCTL_DEV | LL_TRUNCATE)
    for p in spec.get("rw", []):
        allow(p, handled)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.syscall(_nr("landlock_restrict_self"), fd, 0), "landlock_restrict_self")
    os.close(fd)


# --- the program's process ---------------------------------------------------------------------------------------

def _which(cmd, path):
    if "/" in cmd:
        return cmd
    for d in path.split(":"):
        p = os.path.join(d or ".", cmd)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return cmd


def become_run_user(spec):
    """In the program's process: the OOM killer's victim, no blocked signals, its working directory, and (as
    root) the run's own user and group, no supplementary groups. Shared with the zygote's runs
    (:mod:`cudaperf.harness.zygote_main`)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(spec.get("oom_score_adj", 1000)))
    except OSError:
        pass
    if spec.get("cwd"):
        os.chdir(spec["cwd"])
    if spec.get("drop"):
        uid, gid = spec["drop"]
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)


def load_filter(spec):
    """``no_new_privs``, then the run's seccomp filter (if any): the last step before the program's code."""
    bpf = bytes.fromhex(spec.get("seccomp_bpf") or "")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if bpf:
        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

        prog = SockFprog(len(bpf) // 8, bpf)
        _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "load seccomp filter")


def exec_program(spec, argv, env, report=None):
    """In the forked child: become the sandbox user, load the filter, execve. Never returns."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them, and an ignored signal survives execve
        signal.signal(sig, signal.SIG_DFL)
    become_run_user(spec)
    path = _which(argv[0], env.get("PATH", "/usr/bin:/bin")).encode()
    c_argv = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
    items = [f"{k}={v}".encode() for k, v in env.items()]
    c_env = (ctypes.c_char_p * (len(items) + 1))(*items, None)
    addrs = spec.get("exec_addrs")
    if addrs:  # the path, argv and envp at the three addresses the filter lets execve take
        pinned = []
        for addr, data in zip(addrs, (path + b"\0", bytes(c_argv), bytes(c_env))):
            size = (len(data) + 4095) // 4096 * 4096
            got = libc.mmap(addr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                            -1, 0)
            if got != addr:
                raise SetupError(f"cannot map an exec page at {addr:#x} (got {got})")
            ctypes.memmove(addr, data, len(data))
            pinned.append(ctypes.c_void_p(addr))
        path_arg, argv_arg, env_arg = pinned
    else:
        path_arg, argv_arg, env_arg = ctypes.c_char_p(path), c_argv, c_env
    load_filter(spec)
    libc.execve.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    libc.execve(path_arg, argv_arg, env_arg)
    e = ctypes.get_errno()
    raise SetupError(f"cannot execute {argv[0]} ({path.decode(errors='replace')}): {os.strerror(e)}")


def _full(path):
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024 or (st.f_files and st.f_favail == 0)


def supervise(child, spec, report):
    """PID 1 of the namespace: wait for the program, reap orphans, watch the private temporary file systems."""
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    watched = ["/tmp", "/dev/shm"] if spec.get("root") else []
    reported = set()
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(0)
            if pid == 0:
                break
            if pid == child:
                failed = os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0
                if report is not None and failed:
                    # full at the end of a failed run: it ended for it (SIGXFSZ, killed by the program, or an
                    # error it raised on ENOSPC before the next look, 0.1 s)
                    for w in watched:
                        if w not in reported and _full(w):
                            _report(report, f"filled {w}", w)
                os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        for w in watched:
            if w not in reported and _full(w):
                reported.add(w)
                _report(report, f"filled {w}", w)
                if spec.get("kill_when_full", True):
                    os.kill(-1, signal.SIGKILL)  # PID 1: every other process of the namespace
        signal.sigtimedwait([signal.SIGCHLD], 0.1)


def _report(fd, what, where):
    _report_line(fd, {"limit": "tmp", "what": what, "where": where})


def _report_line(fd, msg):
    if fd is not None:
        try:
            os.write(fd, (json.dumps(msg) + "\n").encode())
        except OSError:
            pass


def _fail(report, msg):
    """A setup step failed before the program ran: the harness's fault, reported as such (exit status 126)."""
    _report_line(report, {"setup_error": msg})
    os.write(2, f"cudaperf-sandbox: {msg}\n".encode())
    os._exit(126)


def main():
    args = sys.argv[1:]
    spec_fd = int(args[args.index("--spec-fd") + 1])
    argv = args[args.index("--") + 1:]
    with os.fdopen(spec_fd, "rb") as fh:
        spec = json.loads(fh.read().decode())
    report = spec.get("report_fd")
    if report is not None:
        os.set_inheritable(report, False)  # the program never holds it
    env = dict(os.environ)  # the run's scrubbed environment, as the harness started this process
    try:
        if spec.get("root"):
            build_root(spec)
        elif spec.get("landlock"):
            landlock(spec)
    except (SetupError, OSError) as e:
        _fail(report, f"cannot set up the sandbox: {e}")
    if not spec.get("init"):
        try:
            exec_program(spec, argv, env, report)
        except (SetupError, OSError) as e:
            _fail(report, str(e))
    child = os.fork()
    if child == 0:
        try:
            exec_program(spec, argv, env, report)
        except (SetupError, OSError) as e:
            _fail(report, str(e))
        os._exit(126)
    supervise(child, spec, report)


if __name__ == "__main__":
    main()
