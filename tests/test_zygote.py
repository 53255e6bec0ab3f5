"""Runs forked from a zygote that has imported torch (cudaperf.harness.zygote): the same process, protections and
limits as an exec'd ``python SCRIPT``, with real processes, namespaces, cgroups and seccomp; and what a hostile
run can do to the zygote or to the next run (nothing)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from cudaperf.harness.sandbox import (CTL_FD, SandboxLimits, SandboxSetupError, Workdir, repo_root, run_sandboxed,
                                      share_file)
from cudaperf.harness.zygote import Zygote, shared_zygote, zygote_unavailable

pytestmark = pytest.mark.skipif(zygote_unavailable() is not None, reason=f"no zygote here: {zygote_unavailable()}")

PY = sys.executable


@pytest.fixture(scope="module")
def zygote():
    from cudaperf.harness.run_pytorch import RUNNER_PRELOAD

    z = Zygote(preload=RUNNER_PRELOAD)  # the runners' own
    z.start()
    yield z
    z.close()


def _run(script: str, w: Path, zygote: Zygote | None, args=(), **kw):
    (w / "prog.py").write_text(script)
    share_file(w / "prog.py")
    return run_sandboxed([PY, "prog.py", *args], w, zygote=zygote, **kw)


# What a program sees of its own process, as data (the run's directory written as W).
PROBE = r'''
import json, os, resource, signal, sys, tempfile
w = os.getcwd()
def norm(x):
    return json.loads(json.dumps(x).replace(w, "W"))
status = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/self/status")}
main = sys.modules["__main__"]
mounts = sorted(l.split()[4] for l in open("/proc/self/mountinfo"))
cgroups = sorted(l.strip().rsplit("/", 1)[0] for l in open("/proc/self/cgroup"))
print(json.dumps(norm({
    "argv": sys.argv, "file": __file__, "name": __name__, "main": sorted(k for k in vars(main) if k.startswith("__")),
    "loader": type(__loader__).__name__, "spec": repr(__spec__), "path": sys.path, "flags": repr(sys.flags),
    "executable": sys.executable, "env": dict(os.environ), "cwd": w, "tmp": tempfile.gettempdir(),
    "uid_is_owner": os.getuid() == os.stat(w).st_uid, "gid_is_owner": os.getgid() == os.stat(w).st_gid,
    "groups": os.getgroups(), "umask": os.umask(0o22),
    "status": {k: status.get(k) for k in ("NoNewPrivs", "Seccomp", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NSpid",
                                          "SigBlk", "SigIgn")},
    "fds": sorted(os.listdir("/proc/self/fd")), "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")},
    "nice": os.nice(0), "oom": open("/proc/self/oom_score_adj").read().strip(), "sid_is_pgid": os.getsid(0) == os.getpgid(0),
    "handlers": {s: str(signal.getsignal(getattr(signal, s))) for s in ("SIGINT", "SIGPIPE", "SIGXFSZ", "SIGCHLD", "SIGTERM")},
    "mounts": mounts, "cgroup_controllers": [c.split(":")[1] for c in cgroups],
    "stdin": os.read(0, 100).decode(), "netdev": sorted(l.split(":")[0].strip() for l in list(open("/proc/net/dev"))[2:]),
    "checkout_visible": os.path.exists(os.path.join(%r, "cudaperf", "harness", "sandbox.py")),
}), sort_keys=True))
'''


def test_a_forked_run_is_the_process_an_exec_d_interpreter_would_be(zygote, tmp_path):
    stdin = tmp_path / "stdin.txt"
    stdin.write_text("hello from stdin")
    seen = {}
    for name, z in (("exec", None), ("zygote", zygote)):
        with Workdir() as w:
            r = _run(PROBE % str(repo_root()), w, z, args=("a", "b c"), stdin_path=stdin,
                     limits=SandboxLimits(wall_s=60, nice=3))
            assert r.returncode == 0, r.stderr
            assert r.level.endswith("start=zygote") == (z is not None)
            seen[name] = json.loads(r.stdout)
    a, b = seen["exec"], seen["zygote"]
    assert {k for k in a if a[k] != b[k]} == set(), {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert a["uid_is_owner"] and a["status"]["NoNewPrivs"] == "1" and a["status"]["Seccomp"] == "2"
    assert a["status"]["CapEff"] == "0000000000000000" and a["pids"] == ["1", "2"] and a["netdev"] == ["lo"]
    assert a["fds"] == ["0", "1", "2", "3"] and a["argv"] == ["prog.py", "a", "b c"] and a["nice"] == 3
    assert a["stdin"] == "hello from stdin" and not a["checkout_visible"] and a["tmp"] == "W"


def test_the_preloaded_modules_are_there_without_an_import(zygote):
    script = "import sys; print('torch' in sys.modules); import torch; print(torch.ones(2).sum().item())"
    out = {}
    for name, z in (("exec", None), ("zygote", zygote)):
        with Workdir() as w:
            r = _run(script, w, z)
            out[name] = r.stdout.split()
    assert out == {"exec": ["False", "2.0"], "zygote": ["True", "2.0"]}
    assert zygote.info is not None and zygote.info.preload[0] == "torch" and zygote.info.preload_s > 0


def test_exit_codes_signals_exceptions_and_atexit_as_an_interpreter(zygote):
    cases = {
        "import sys; sys.exit(5)": (5, ""),
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)": (-11, ""),
        "raise ValueError('boom')": (1, "ValueError: boom"),
        "import atexit; atexit.register(lambda: print('at exit'))": (0, ""),
    }
    for script, (rc, err) in cases.items():
        for z in (None, zygote):
            with Workdir() as w:
                r = _run(script, w, z)
            assert r.returncode == rc, (script, z, r.returncode, r.stderr)
            assert err in r.stderr
            if "atexit" in script:
                assert r.stdout == "at exit\n"


def test_limits_end_a_forked_run_as_they_end_an_exec_d_one(zygote):
    cases = [
        ("import time; time.sleep(60)", dict(wall_s=1.5), lambda r: r.timed_out and r.returncode is None),
        ("x = bytearray(1); chunks = []\nwhile True: chunks.append(bytearray(64 << 20))",
         dict(wall_s=60, memory_bytes=512 << 20), lambda r: r.limit is not None and "memory" in r.limit),
        ("f = open('big', 'wb')\nwhile True: f.write(b'x' * (1 << 20)); f.flush()",
         dict(wall_s=60, disk_bytes=8 << 20), lambda r: r.limit is not None and "disk" in r.limit),
        ("f = open('/tmp/fill', 'wb')\nwhile True: f.write(b'x' * (1 << 20)); f.flush()",
         dict(wall_s=60, tmp_bytes=8 << 20), lambda r: r.limit is not None and "/tmp" in r.limit),
    ]
    for script, limits, ended in cases:
        for z in (None, zygote):
            with Workdir() as w:
                t0 = time.monotonic()
                r = _run(script, w, z, limits=SandboxLimits(**limits))
            assert ended(r), (script, z is not None, r.returncode, r.limit, r.stderr)
            assert time.monotonic() - t0 < 30


def test_escape_calls_are_denied_and_escaped_children_die(zygote):
    script = r'''
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
print("unshare", libc.unshare(0x00020000), ctypes.get_errno())
print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(2)
        open(sys.argv[1], "w").write("alive")
    os._exit(0)
print("parent done")
'''
    for z in (None, zygote):
        with Workdir() as w:
            marker = w / "marker"
            r = _run(script, w, z, args=(str(marker),))
            assert r.returncode == 0, r.stderr
            lines = r.stdout.splitlines()
            assert lines[0].startswith("unshare -1 ") and lines[1].startswith("ptrace -1 ")
            time.sleep(2.5)
            assert not marker.exists(), "a setsid'd grandchild outlived its run"


def test_the_control_channel_and_the_exit_grace_work_on_a_forked_run(zygote):
    script = r'''
import os, sys, time
ctl = int(sys.argv[1])
os.write(ctl, b"ready\n")
line = sys.stdin.readline().strip()
os.write(ctl, ("got " + line + "\n").encode())
sys.stdin.readline()
if len(sys.argv) > 2:
    time.sleep(60)  # code of its own at exit
'''
    for spin in (False, True):
        seen = []

        def control(ctl, seen=seen):
            seen.append(ctl.read_line(timeout_s=30))
            ctl.send("time 1 2")
            seen.append(ctl.read_line(timeout_s=30))
            ctl.send("stop")

        with Workdir() as w:
            r = _run(script, w, zygote, args=(CTL_FD, *(["spin"] if spin else [])), control=control,
                     limits=SandboxLimits(wall_s=60, exit_grace_s=1.0))
        assert seen == ["ready", "got time 1 2"]
        assert r.exit_overrun == spin and (r.returncode == 0) == (not spin), r


def test_a_hostile_run_cannot_reach_the_zygote_or_the_next_run(zygote):
    """It kills every process it can signal, looks for the zygote and for descriptors it did not get, writes where
    the next run might read, and tries to keep a process alive: the zygote lives on, and the next run forked from
    it sees none of it."""
    hostile = r'''
import json, os, signal
found = {"pids": sorted(p for p in os.listdir("/proc") if p.isdigit()), "fds": sorted(os.listdir("/proc/self/fd"))}
try:
    open("/proc/1/environ").read()
    found["init_environ"] = True
except OSError:
    found["init_environ"] = False
open("/tmp/left-behind", "w").write("x")
open("/dev/shm/left-behind", "w").write("x")
print(json.dumps(found), flush=True)
if os.fork() == 0:
    os.setsid()
    import time; time.sleep(30)
os.kill(-1, signal.SIGKILL)
'''
    after = "import os; print(os.path.exists('/tmp/left-behind'), os.path.exists('/dev/shm/left-behind'))"
    with Workdir() as w:
        r = _run(hostile, w, zygote)
    found = json.loads(r.stdout.splitlines()[0])
    assert found == {"pids": ["1", "2"], "fds": ["0", "1", "2", "3"], "init_environ": False}
    assert zygote.alive and os.kill(zygote.info.pid, 0) is None
    with Workdir() as w:
        r = _run(after, w, zygote)
    assert r.returncode == 0 and r.stdout == "False False\n" and r.level.endswith("start=zygote")


def test_runs_forked_at_once_from_threads_each_get_their_own(zygote):
    script = "import os, sys; print(os.getcwd() == sys.argv[1], os.getuid() == os.stat('.').st_uid)"
    results = []

    def one():
        with Workdir() as w:
            results.append(_run(script, w, zygote, args=(str(w),)))

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and all(r.returncode == 0 and r.stdout == "True True\n" for r in results), [(r.returncode, r.stdout, r.stderr[-300:]) for r in results]
    assert all(r.level.endswith("start=zygote") for r in results)


def test_a_run_that_is_not_python_script_starts_as_before(zygote):
    with Workdir() as w:
        r = run_sandboxed(["sh", "-c", "echo plain"], w, zygote=zygote)
        r2 = run_sandboxed([PY, "-c", "print('flag')"], w, zygote=zygote)
    assert r.stdout == "plain\n" and not r.level.endswith("start=zygote")
    assert r2.stdout == "flag\n" and not r2.level.endswith("start=zygote")


def test_a_zygote_that_dies_during_a_run_is_a_harness_fault_and_a_new_one_starts():
    z = shared_zygote(("json",))
    assert isinstance(z, Zygote)
    killer = threading.Timer(1.0, lambda: os.kill(z.info.pid, signal.SIGKILL))
    killer.start()
    with Workdir() as w:
        with pytest.raises(SandboxSetupError, match="zygote"):
            _run("import time; time.sleep(20)", w, z, limits=SandboxLimits(wall_s=30))
    killer.join()
    time.sleep(0.2)
    z2 = shared_zygote(("json",))
    assert isinstance(z2, Zygote) and z2 is not z and z2.alive
    with Workdir() as w:
        r = _run("print('again')", w, z2)
    assert r.stdout == "again\n" and r.level.endswith("start=zygote")


def test_a_preload_that_fails_says_why():
    z = Zygote(preload=("no_such_module_cudaperf",))
    with pytest.raises(OSError, match="no_such_module_cudaperf"):
        z.start()


def test_a_run_that_patches_torch_leaves_the_next_run_the_real_torch(zygote):
    """The preloaded torch is the zygote's, copied into each run: a candidate that rewrites its timing (CUDA
    events, the clock) or torch's functions in its own process changes nothing for the next run forked."""
    patch = r'''
import time, torch
torch.cuda.Event.elapsed_time = lambda self, end: 0.001
torch.Tensor.sum = lambda self, *a, **k: torch.tensor(42.0)
time.perf_counter = lambda: 0.0
print(torch.ones(3).sum().item(), torch.cuda.Event.elapsed_time.__name__)
'''
    check = r'''
import time, torch
print(torch.ones(3).sum().item(), torch.cuda.Event.elapsed_time.__name__, time.perf_counter() > 0)
'''
    with Workdir() as w:
        r = _run(patch, w, zygote)
    assert r.stdout == "42.0 <lambda>\n", r.stderr
    with Workdir() as w:
        r = _run(check, w, zygote)
    assert r.stdout == "3.0 elapsed_time True\n", r.stderr


def test_the_torch_runner_forked_without_a_gpu_stops_at_its_check_as_exec_d(zygote):
    """The real runner (native/torch_runner.py) forked from the zygote, on a machine without a GPU: it reaches
    its device check, reports nothing on its channel and exits with EXIT_NO_GPU, as the exec'd runner does (the
    GPU run of it is tests/gpu/test_gpu_pytorch_fast.py)."""
    import torch

    from cudaperf.harness.run_pytorch import EXIT_NO_GPU, PACK, RUNNER
    from cudaperf.harness.sandbox import copy_in

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the GPU test covers the runner")
    for z in (None, zygote):
        lines = []
        with Workdir() as w:
            copy_in(RUNNER, w, "torch_runner.py")
            copy_in(PACK, w, "tensor_pack.py")
            r = run_sandboxed([PY, "torch_runner.py", CTL_FD], w, zygote=z,
                              control=lambda ctl, lines=lines: lines.append(ctl.read_line(timeout_s=60)))
        assert r.returncode == EXIT_NO_GPU and lines == [None] and "no CUDA device" in r.stderr, r
        assert r.level.endswith("start=zygote") == (z is not None)


def test_doctor_s_check_forks_a_run_under_every_protection():
    from cudaperf.harness.zygote import zygote_self_check

    ok, detail = zygote_self_check()
    assert ok, detail
    assert "under every protection" in detail


def test_without_namespaces_runs_are_not_forked(zygote):
    """Where the sandbox runs at a weaker level (here: no namespaces), a zygote given to the run is not used: it
    starts as an exec'd interpreter, and its level says so."""
    with Workdir() as w:
        r = _run("print('exec')", w, zygote, level="session")
    assert r.stdout == "exec\n" and not r.level.endswith("start=zygote")


def test_many_forked_runs_leave_no_descriptor_or_process_behind(zygote):
    """The harness's descriptors and the zygote's children after 30 forked runs (controlled, with stdin files,
    crashing, timing out) are what they were before."""
    def fds():
        return len(os.listdir("/proc/self/fd"))

    def zygote_children():
        kids = Path(f"/proc/{zygote.info.pid}/task/{zygote.info.pid}/children")
        return kids.read_text().split() if kids.exists() else []

    with Workdir() as w:
        _run("pass", w, zygote)  # any lazy descriptor of the harness's opened once
    before = fds()
    for i in range(30):
        with Workdir() as w:
            kind = i % 3
            if kind == 0:
                r = _run("import sys; print(sys.stdin.readline().strip())", w, zygote, control=lambda ctl: ctl.send("x"))
                assert r.stdout == "x\n"
            elif kind == 1:
                r = _run("import os; os.abort()", w, zygote)
                assert r.returncode == -6
            else:
                r = _run("import time; time.sleep(30)", w, zygote, limits=SandboxLimits(wall_s=0.3))
                assert r.timed_out
    time.sleep(0.3)
    assert fds() == before
    assert zygote_children() == []


def test_a_zygote_s_import_waits_while_anything_is_timed():
    """Its start (torch's import) is background host work: stopped while a timing window is open, so it never
    runs beside a timed call."""
    from cudaperf.harness.quiet import HOST

    z = Zygote(preload=("torch",))
    ready_at = []
    with HOST.timing():
        t = threading.Thread(target=lambda: (z.start(), ready_at.append(time.monotonic())))
        t.start()
        time.sleep(3.0)
        assert ready_at == [], "the zygote finished its import inside a timing window"
        closed_at = time.monotonic()
    t.join(timeout=120)
    try:
        assert ready_at and ready_at[0] >= closed_at
    finally:
        z.close()


CONFIGS = r'''
import json, os
import torch
w = os.getcwd()
out = {}
try:
    import torch._dynamo.config as dc, torch._inductor.config as ic, torch._functorch.config as fc
except ImportError:
    print(json.dumps(None))
    raise SystemExit(0)
for name, c in (("dynamo", dc), ("inductor", ic), ("functorch", fc)):
    out[name] = {k: sorted(map(repr, v)) if isinstance(v, (set, frozenset)) else repr(v).replace(w, "W")
                 for k, v in c.get_config_copy().items()}
print(json.dumps(out))
'''


def test_the_preloaded_compiler_configuration_differs_only_in_two_paths_from_the_zygote_s_directory(zygote):
    """RUNNER_PRELOAD imports torch._dynamo in the zygote (the profiler's first session would import it in each
    runner). Its configuration, and torch._inductor's and torch._functorch's, read at that import, must be what an
    exec'd runner reads, except the two values made from the directory the interpreter was in (documented at
    RUNNER_PRELOAD): a tripwire for a torch whose import caches more of its process."""
    seen = {}
    for name, z in (("exec", None), ("zygote", zygote)):
        with Workdir() as w:
            r = _run(CONFIGS, w, z)
            assert r.returncode == 0, r.stderr
            seen[name] = json.loads(r.stdout)
    if seen["exec"] is None:
        pytest.skip("this torch has no torch._dynamo")
    diff = {(sect, k) for sect in seen["exec"] for k in set(seen["exec"][sect]) | set(seen["zygote"][sect])
            if seen["exec"][sect].get(k) != seen["zygote"][sect].get(k)}
    assert diff <= {("dynamo", "debug_dir_root"), ("inductor", "xpu.cutlass_dir")}, diff


def test_descriptors_at_high_numbers_reach_the_run_at_their_numbers(zygote, tmp_path):
    """A harness with many descriptors open passes ones numbered above the zygote's floor (512): each reaches the
    forked run at its own number, with its own content, and nothing else does."""
    files = []
    numbers = []
    for k, n in enumerate((600, 513, 700)):
        p = tmp_path / f"in{k}"
        p.write_text(f"payload {k}")
        fd = os.open(p, os.O_RDONLY)
        os.dup2(fd, n, inheritable=False)
        os.close(fd)
        files.append(n)
        numbers.append(n)
    script = ("import os, sys\nfor n in map(int, sys.argv[1:]):\n    print(n, os.pread(n, 100, 0).decode())\n"
              "print(sorted(int(f) for f in os.listdir('/proc/self/fd')))")
    try:
        with Workdir() as w:
            r = _run(script, w, zygote, args=[str(n) for n in numbers], pass_fds=numbers)
    finally:
        for n in files:
            os.close(n)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["600 payload 0", "513 payload 1", "700 payload 2"]
    assert lines[3] == str(sorted([0, 1, 2, 3, 513, 600, 700])), lines[3]


def test_a_process_forked_from_the_harness_starts_a_zygote_of_its_own():
    """A worker forked from a harness process that holds a zygote (a pool with the fork start method) does not
    talk on the parent's socket: it starts its own, and the parent's keeps working."""
    import multiprocessing

    parent = shared_zygote(("json",))
    assert isinstance(parent, Zygote)

    def child(q):
        z = shared_zygote(("json",))
        with Workdir() as w:
            r = _run("print('child run')", w, z)
        q.put((z is not parent, z.info.pid != parent.info.pid, r.stdout, r.level.endswith("start=zygote")))

    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=30)
    assert got == (True, True, "child run\n", True)
    with Workdir() as w:
        r = _run("print('parent run')", w, parent)
    assert r.stdout == "parent run\n" and parent.alive


def test_torch_s_thread_pools_and_python_threads_work_in_a_forked_run(zygote):
    """Forking copies only the zygote's calling thread: torch's intra-op pool (two threads asked for) and a Python
    thread running torch must still work in the run, as in an exec'd one."""
    script = ("import threading, torch\ntorch.set_num_threads(2)\na = torch.ones(600, 600)\n"
              "t = threading.Thread(target=lambda: print(float((a @ a)[0, 0])))\nt.start(); t.join()\n"
              "print(torch.get_num_threads(), float((a @ a).sum()))")
    for z in (None, zygote):
        with Workdir() as w:
            r = _run(script, w, z, limits=SandboxLimits(wall_s=60))
        assert r.returncode == 0 and r.stdout == "600.0\n2 216000000.0\n", (z is not None, r.stdout, r.stderr)
