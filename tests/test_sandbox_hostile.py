"""Hostile C programs against the sandbox, run exactly as the harness runs a candidate's build.

Each program (``tests/fixtures/hostile/*.c``) is compiled by nvcc inside the sandbox (as the harness compiles a
candidate), copied into a fresh working directory and run there by :func:`run_sandboxed` with the scrubbed
environment. Every property has a control beside it: the same program doing the allowed thing (reading its own
directory, a thread, a run with the protection switched off), so that a test whose attack "fails" for an
unrelated reason (the program is broken) cannot pass.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from cudaperf.harness import sandbox as sb
from cudaperf.harness.sandbox import (SandboxLimits, Workdir, base_level, copy_in, repo_root, run_sandboxed,
                                      sandbox_level, scrubbed_env, share_file)

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
MiB = 1 << 20

PRIVATE_ROOT = sb._private_root_works() if base_level() != "session" else "no mount namespace"
SECCOMP = sb._seccomp_works()
CGROUP = sb._cgroups()

needs_private_root = pytest.mark.skipif(PRIVATE_ROOT is not None, reason=f"no private root here: {PRIVATE_ROOT}")
needs_seccomp = pytest.mark.skipif(SECCOMP is not None, reason=f"no seccomp here: {SECCOMP}")
needs_cgroup = pytest.mark.skipif(not isinstance(CGROUP, sb._Cgroups), reason=f"no writable cgroup here: {CGROUP}")


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """The hostile programs, built by nvcc in the sandbox (private root, tools profile, memory cap)."""
    from cudaperf.harness.compile import ToolchainError, _nvcc_in_sandbox, nvcc_path

    try:
        nvcc_path()
    except ToolchainError as exc:
        pytest.skip(str(exc))
    out = tmp_path_factory.mktemp("hostile-builds")
    built = {}
    with Workdir(prefix="cudaperf-build-") as w:
        for src in sorted(HOSTILE.glob("*.c")):
            shutil.copy(src, w / src.name)
            share_file(w / src.name)
            ok, log = _nvcc_in_sandbox([src.name, "-o", src.stem, "-lpthread"], w)
            assert ok, f"nvcc could not build {src.name} in the sandbox: {log[-2000:]}"
            shutil.copy(w / src.stem, out / src.stem)
            built[src.stem] = out / src.stem
    return built


def run(programs, name: str, *args: str, workdir: Path | None = None, **limits):
    """Run a hostile program as the harness runs a candidate: copied into its working directory, by absolute
    path, with the scrubbed environment."""
    limits.setdefault("wall_s", 60)

    def go(w: Path):
        exe = copy_in(programs[name], w, "program")
        return run_sandboxed([str(exe), *args], w, env=scrubbed_env(w), limits=SandboxLimits(**limits))

    if workdir is not None:
        return go(workdir)
    with Workdir() as w:
        return go(w)


@pytest.fixture
def planted():
    """A secret file beside the harness: in the checkout and in the harness's temporary directory (both
    world-readable, as a careless harness would leave them)."""
    secret = f"cudaperf-secret-{secrets.token_hex(8)}"  # the content; the names carry another token
    tag = secrets.token_hex(6)
    paths = [repo_root() / f".planted-{tag}", Path(tempfile.gettempdir()) / f"planted-{tag}"]
    for p in paths:
        p.write_text(secret + "\n")
        os.chmod(p, 0o644)
    try:
        yield secret, paths
    finally:
        for p in paths:
            p.unlink(missing_ok=True)


def _lines(out: str, prefix: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith(prefix)]


def test_the_level_names_every_protection():
    level = sandbox_level()
    assert level.split(";")[0] == base_level()
    for key in ("fs=", "seccomp=", "memory=", "disk="):
        assert key in level, level


# --- the file system ----------------------------------------------------------------------------------------------

@needs_private_root
def test_planted_files_beside_the_harness_cannot_be_read(programs, planted):
    secret, paths = planted
    with Workdir() as w:
        (w / "own.txt").write_text("mine\n")  # control: the same reader reads its own directory
        share_file(w / "own.txt")
        r = run(programs, "fs_probe", "read", *map(str, paths), str(w / "own.txt"), workdir=w)
    assert r.ok, r.describe()
    assert secret not in r.stdout, r.stdout
    for p in paths:
        denied = [ln for ln in _lines(r.stdout, "DENIED") if f" {p}:" in ln]
        assert len(denied) == 4, r.stdout  # open, fopen64, mmap, /proc/self/root
        assert all(ln.endswith("ENOENT") for ln in denied), denied
    assert len([ln for ln in _lines(r.stdout, "READ") if ln.endswith(": mine")]) == 4, r.stdout


@needs_private_root
def test_listing_shows_no_checkout_home_or_host_tmp(programs, planted):
    _, paths = planted
    home = os.path.expanduser("~")
    with Workdir() as w:
        r = run(programs, "fs_probe", "list", "/", str(repo_root()), "/tmp", home, "/dev/shm", workdir=w)
        own = w.name
    assert r.ok, r.describe()
    entries: dict[str, set[str]] = {}
    for ln in _lines(r.stdout, "ENTRY"):
        _, d, name = ln.split(" ", 2)
        entries.setdefault(d, set()).add(name)
    assert {"usr", "etc", "proc", "dev", "tmp"} <= entries["/"], entries["/"]
    checkout = entries.get(str(repo_root()), set()) - {".", ".."}
    assert not checkout & {"cudaperf", "tests", "pyproject.toml", ".git"}, checkout
    assert not any(p.name in names for p in paths for names in entries.values())
    # its own directory and nothing of the host's, but the way to an interpreter installed under /tmp (a CI clone's
    # virtualenv), which is bound read-only
    import sys

    ways = {Path(p).relative_to("/tmp").parts[0] for p in {sys.prefix, sys.base_prefix} if p.startswith("/tmp/")}
    assert entries["/tmp"] - {".", ".."} - ways == {own}, entries["/tmp"]
    assert entries.get("/dev/shm", set()) <= {".", ".."}


@needs_private_root
def test_python_in_the_private_root_has_torch_and_numpy_but_not_cudaperf():
    probe = ("import importlib.util, ctypes, json; print(json.dumps({m: importlib.util.find_spec(m) is not None "
             "for m in ('numpy', 'torch', 'cudaperf')}))")
    with Workdir() as w:
        r = run_sandboxed([sys.executable, "-c", probe], w, env=scrubbed_env(w), limits=SandboxLimits(wall_s=120))
    assert r.ok, r.describe() + r.stderr
    import importlib.util
    import json

    seen = json.loads(r.stdout)
    assert seen["cudaperf"] is False
    for m in ("numpy", "torch"):  # whatever the harness's own Python has, the sandboxed one has too
        assert seen[m] == (importlib.util.find_spec(m) is not None), seen


@needs_private_root
def test_writes_to_tmp_and_shm_do_not_outlive_the_run(programs):
    name = f"cudaperf-left-{secrets.token_hex(6)}"
    targets = [f"/tmp/{name}", f"/dev/shm/{name}"]
    first = run(programs, "fs_probe", "write", *targets)
    assert first.ok and _lines(first.stdout, "WROTE") == [f"WROTE {t}" for t in targets], first.stdout
    for t in targets:  # the host side, after the run
        assert not os.path.exists(t), f"{t} outlived the sandboxed run"
    second = run(programs, "fs_probe", "read", *targets)  # the next evaluation sees nothing of the first
    assert _lines(second.stdout, "READ") == [], second.stdout


def test_a_link_or_fifo_in_place_of_the_output_files_reads_nothing_of_the_host(programs, planted):
    """The harness reads a run's stdout and stderr back through its own descriptors, and the records it reads by
    name (``open_untrusted``) only when they are regular files: a symbolic link to a host file in their place reads
    nothing of it, a FIFO blocks nothing (session 20's hostile review read a root-only host file into a failure
    message, and hung ``run_sandboxed`` on a FIFO)."""
    import time

    from cudaperf.tasks.inputs import open_untrusted, read_untrusted_text

    secret, paths = planted
    host_file = paths[1]  # in the harness's temporary directory, world-readable
    r = run(programs, "workdir_tricks", "link-stderr", str(host_file))
    assert r.returncode == 1 and secret not in r.stderr and secret not in r.stdout
    t0 = time.monotonic()
    r = run(programs, "workdir_tricks", "fifo-stdout", wall_s=10)
    assert r.returncode == 1 and time.monotonic() - t0 < 10 and r.stdout == ""
    with Workdir() as w:  # a record the harness reads by name
        r = run(programs, "workdir_tricks", "link-file", "tstats.txt", str(host_file), workdir=w)
        assert r.ok and (w / "tstats.txt").is_symlink()
        with pytest.raises(OSError):
            open_untrusted(w / "tstats.txt")
        with pytest.raises(OSError):
            read_untrusted_text(w / "tstats.txt")
        os.mkfifo(w / "out.bin")
        with pytest.raises(OSError):  # would block without O_NONBLOCK
            open_untrusted(w / "out.bin")
        (w / "ok.txt").write_text("fine")
        assert read_untrusted_text(w / "ok.txt") == "fine" and read_untrusted_text(w / "missing.txt") == ""


def test_a_deep_tree_in_the_working_directory_is_removed_with_it(programs):
    """``Workdir`` removes what a run left however deep (``shutil.rmtree`` recursed past Python's limit at 1,500
    levels, raised ``RecursionError`` into the harness and left the tree on the host)."""
    with Workdir() as w:
        r = run(programs, "workdir_tricks", "deep", "1500", workdir=w)
        assert r.ok and _lines(r.stdout, "DEEP") == ["DEEP 1500"], r.stdout
        path = w
    assert not path.exists()


def test_files_held_open_after_unlinking_count_towards_the_disk_cap(programs):
    """A file unlinked while the program keeps it open (or made with ``O_TMPFILE``) holds the disk, though no
    listing of the working directory finds it: the watch counts the run's open and mapped files with no name.
    The control with names is ended the same way."""
    for mode in ("named", "hidden"):
        r = run(programs, "workdir_tricks", mode, "8", "32", disk_bytes=96 * MiB, wall_s=60)
        assert r.limit and "disk limit" in r.limit, (mode, r.describe(), r.stdout)
        assert r.wall_s < 20, (mode, r.wall_s)  # ended before its 20 s sleep was over
    r = run(programs, "workdir_tricks", "hidden", "2", "16", disk_bytes=96 * MiB, wall_s=60)  # within the cap
    assert r.limit is None


def test_ipc_objects_do_not_outlive_the_run(programs):
    """System V shared memory, message queues and semaphores, and POSIX message queues live in the kernel's IPC
    namespace, which no file system hides: a run leaves them under a key, and the next evaluation must not find
    them (each run has an IPC namespace of its own, gone with it)."""
    import subprocess

    key = f"{secrets.randbits(30) | 1 << 30:x}"
    control = run(programs, "ipc_probe", "self", key)  # IPC works inside one run
    assert control.ok and len(_lines(control.stdout, "LEFT")) == 4, control.stdout
    assert len(_lines(control.stdout, "FOUND")) == 4, control.stdout
    first = run(programs, "ipc_probe", "leave", key)
    assert first.ok and len(_lines(first.stdout, "LEFT")) == 4, first.stdout
    second = run(programs, "ipc_probe", "find", key)  # the next evaluation sees nothing of the first
    assert second.ok and _lines(second.stdout, "FOUND") == [], second.stdout
    host = subprocess.run(["ipcs", "-a"], capture_output=True, text=True).stdout if shutil.which("ipcs") else ""
    assert f"0x{int(key, 16):08x}" not in host, "an IPC object of the run is left on the host"


@needs_private_root
def test_system_paths_and_the_python_installation_are_read_only(programs):
    targets = ["/usr/cudaperf-x", "/etc/cudaperf-x", f"{sys.prefix}/cudaperf-x", "/cudaperf-x"]
    try:
        r = run(programs, "fs_probe", "write", *targets)
        assert _lines(r.stdout, "WROTE") == [], r.stdout
        assert len([ln for ln in _lines(r.stdout, "DENIED") if ln.endswith(("EROFS", "EACCES"))]) == 4, r.stdout
    finally:
        for t in targets[:3]:
            if os.path.exists(t):
                os.unlink(t)
    for t in targets[:3]:
        assert not os.path.exists(t)


@needs_private_root
def test_nvcc_in_the_sandbox_cannot_include_a_file_beside_the_harness(planted):
    from cudaperf.harness.compile import ToolchainError, _nvcc_in_sandbox, nvcc_path

    try:
        nvcc_path()
    except ToolchainError as exc:
        pytest.skip(str(exc))
    secret, paths = planted
    with Workdir(prefix="cudaperf-build-") as w:
        for i, p in enumerate(paths):
            (w / f"k{i}.cu").write_text(f'#include "{p}"\n__global__ void k() {{}}\n')
            share_file(w / f"k{i}.cu")
        (w / "ok.cu").write_text("__global__ void k() {}\n")  # control: the same nvcc run compiles
        share_file(w / "ok.cu")
        ok, log = _nvcc_in_sandbox(["-c", "ok.cu", "-o", "ok.o"], w)
        assert ok, log
        for i, p in enumerate(paths):
            ok, log = _nvcc_in_sandbox(["-c", f"k{i}.cu", "-o", f"k{i}.o"], w)
            assert not ok and "No such file or directory" in log and secret not in log, log


def test_landlock_limits_the_file_system_where_no_namespace_is_had(programs, planted):
    """The fallback: a run without namespaces (``level="session"``) is confined by Landlock instead."""
    if isinstance(sb._landlock_abi(), str) or sb._landlock_works() is not None:
        pytest.skip(f"no Landlock here: {sb._landlock_abi()} {sb._landlock_works()}")
    secret, paths = planted
    left = Path(tempfile.gettempdir()) / f"cudaperf-left-{secrets.token_hex(6)}"
    with Workdir() as w:
        exe = copy_in(programs["fs_probe"], w, "program")
        r = run_sandboxed([str(exe), "read", *map(str, paths), str(exe)], w, env=scrubbed_env(w),
                          limits=SandboxLimits(wall_s=60), level="session")
        wr = run_sandboxed([str(exe), "write", str(left), str(w / "mine")], w, env=scrubbed_env(w),
                           limits=SandboxLimits(wall_s=60), level="session")
        mine = (w / "mine").exists()
    try:
        assert "fs=landlock" in r.level, r.level
        assert secret not in r.stdout
        for p in paths:
            assert [ln for ln in _lines(r.stdout, "DENIED") if f" {p}:" in ln], r.stdout
        assert any(ln.startswith("READ open ") for ln in r.stdout.splitlines()), r.stdout  # its own file: readable
        assert not left.exists() and mine, wr.stdout
    finally:
        left.unlink(missing_ok=True)


# --- disk ---------------------------------------------------------------------------------------------------------

def test_filling_the_working_directory_is_ended_by_the_disk_cap(programs):
    r = run(programs, "fill_disk", "files", ".", "32", disk_bytes=192 * MiB)
    assert r.limit is not None and "192 MiB disk limit" in r.limit, r.describe()
    assert not r.timed_out and not r.ok and "disk limit" in r.describe()


def test_one_endless_file_is_ended_by_the_file_size_limit(programs):
    r = run(programs, "fill_disk", "one", "big", file_size_bytes=64 * MiB)
    assert r.signal_name == "SIGXFSZ" and not r.timed_out, r.describe()


@needs_private_root
@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
def test_filling_the_private_tmp_is_ended_with_its_limit(programs, where):
    r = run(programs, "fill_disk", "files", where, "8", tmp_bytes=96 * MiB)
    assert r.limit == f"it filled its private {where} (the 96 MiB limit)", r.describe()
    assert not r.timed_out


# --- memory -------------------------------------------------------------------------------------------------------

@needs_cgroup
@pytest.mark.parametrize("how", ["malloc", "mmap", "threads", "shm"])
def test_unbounded_allocation_is_ended_by_the_memory_cap(programs, how):
    r = run(programs, "eat_memory", how, memory_bytes=256 * MiB, tmp_bytes=4096 * MiB)
    assert r.limit is not None and "256 MiB memory limit" in r.limit, (r.describe(), r.stderr)
    assert not r.timed_out and r.stdout.startswith("eating")  # it ran, and the cap (not the clock) ended it


@needs_cgroup
def test_a_run_within_its_memory_cap_is_untouched(programs):
    r = run(programs, "eat_memory", "none", memory_bytes=256 * MiB)  # an unknown mode: allocates nothing
    assert r.limit is None and r.returncode == 2 and r.describe() == "exit code 2"


def test_without_a_cgroup_the_rlimit_makes_allocation_fail(programs):
    r = run(programs, "eat_memory", "naive", memory_bytes=256 * MiB, memory_cgroup=False)
    assert "memory=rlimit-data 256 MiB" in r.level
    assert r.signal_name == "SIGSEGV" and not r.timed_out, r.describe()  # malloc returned NULL, it wrote there
    assert "RLIMIT_DATA" in r.describe()


# --- processes ----------------------------------------------------------------------------------------------------

def _alive(path: str) -> int:
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/exe") == path:
                    n += 1
            except OSError:
                pass
    return n


@needs_cgroup
@pytest.mark.parametrize("seccomp", [False, "tools"])
def test_fork_bomb_is_ended_by_the_process_cap(programs, seccomp):
    with Workdir() as w:
        lim = {"seccomp": False} if seccomp is False else {"seccomp_profile": seccomp}
        r = run(programs, "spawn", "bomb", workdir=w, max_processes=64, **lim)
        assert r.limit == "it reached the 64-process limit", r.describe()
        assert not r.timed_out
        assert _alive(str(w / "program")) == 0


@needs_seccomp
def test_the_candidate_profile_denies_new_processes_and_programs_but_not_threads(programs):
    r = run(programs, "spawn", "try")
    got = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    assert got == {"fork": "EPERM", "vfork": "EPERM", "clone": "EPERM", "posix_spawn": "EPERM", "thread": "ok",
                   "execveat": "EPERM", "execve": "EPERM"}, r.stdout
    assert "seccomp=candidate" in r.level
    tools = run(programs, "spawn", "try", seccomp_profile="tools")  # control: the looser profile lets them run
    assert tools.stdout.splitlines()[:5] == ["fork ok", "vfork ok", "clone ok", "posix_spawn ok", "thread ok"]


@needs_seccomp
def test_execve_needs_all_three_pinned_pointers(programs):
    """The launcher starts the program with its path, argv and envp at three addresses drawn independently, and the
    candidate profile lets ``execve`` take those three only: a program that knows (or has searched out) the path
    address and maps its own path there is still refused while its argv or envp lie elsewhere, so no single
    address answers differently from a wrong one (the oracle the path-only pin gave). The control: a program given
    the whole triple runs its own program, so the refusals are the filter's."""
    a, b, c = (f"{x:x}" for x in sb._EXEC_ADDRS)
    for n in (1, 2):
        r = run(programs, "spawn", "pinned", a, b, c, str(n))
        assert r.stdout.strip() == "execve EPERM", (n, r.stdout, r.stderr)
    r = run(programs, "spawn", "pinned", a, b, c, "3")
    assert r.stdout.strip() == "pinned-exec", (r.stdout, r.stderr)


ESCAPES = ["ptrace", "process_vm_readv", "process_vm_writev", "unshare_user", "unshare_user_mount", "clone_newuser",
           "setns", "mount", "umount", "chroot", "perf_event_open", "bpf", "keyctl", "add_key", "personality",
           "io_uring_setup", "userfaultfd", "kexec_load", "init_module", "seccomp", "prctl_seccomp", "clone3"]


@needs_seccomp
@pytest.mark.parametrize("profile", ["candidate", "tools"])
def test_escape_calls_are_denied(programs, profile):
    r = run(programs, "escape", "all", seccomp_profile=profile)
    got = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    assert list(got) == ESCAPES, r.stdout
    assert all(v == ("ENOSYS" if k == "clone3" else "EPERM") for k, v in got.items()), got


def test_without_seccomp_the_escape_calls_work(programs):
    """The control of the test above: the calls it sees denied do succeed for the same user without a filter."""
    r = run(programs, "escape", "all", seccomp=False)
    got = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    works = {k for k, v in got.items() if v == "ok"}
    assert {"ptrace", "process_vm_readv", "process_vm_writev", "personality"} <= works, got


@needs_seccomp
def test_a_foreign_abi_call_kills_the_program(programs):
    r = run(programs, "escape", "x32")
    assert r.signal_name == "SIGSYS" and not r.timed_out, (r.describe(), r.stdout)


@pytest.mark.parametrize("mode", ["killall", "killinit"])
def test_killing_the_sandbox_is_the_programs_own_end(programs, mode):
    r = run(programs, "escape", mode)
    assert not r.timed_out and r.limit is None
    # as the sandbox user it may not signal init (root): it goes on; where it may, it ends itself
    assert (r.returncode == 0 and ("survived" in r.stdout or "kill_init EPERM" in r.stdout)) or \
        r.signal_name == "SIGKILL", (r.describe(), r.stdout)


@needs_seccomp
def test_code_patching_is_allowed_by_default_and_denied_with_deny_exec_remap(programs):
    default = run(programs, "wx")
    assert default.ok and "rw_to_rx ok" in default.stdout and "+deny-exec-remap" not in default.level
    strict = run(programs, "wx", deny_exec_remap=True)
    assert strict.ok and strict.stdout.splitlines() == ["mprotect_code EPERM", "mmap_rwx EPERM", "rw_to_rx EPERM",
                                                         "patch refused"], strict.stdout
    assert "seccomp=candidate+deny-exec-remap" in strict.level


# --- what is whose fault ------------------------------------------------------------------------------------------

@needs_private_root
def test_a_sandbox_that_cannot_start_the_program_is_a_harness_fault():
    """A failure before the program runs (here: a program the private root does not hold) raises, so the harness
    reports it unscored; it is never returned as the program's own exit status."""
    with Workdir() as w:
        with pytest.raises(sb.SandboxSetupError, match="cannot execute /nonexistent/cudaperf-tool"):
            run_sandboxed(["/nonexistent/cudaperf-tool"], w, limits=SandboxLimits(wall_s=30))
        r = run_sandboxed(["sh", "-c", "exit 3"], w, limits=SandboxLimits(wall_s=30))  # control: the program's own
    assert r.returncode == 3 and r.limit is None
