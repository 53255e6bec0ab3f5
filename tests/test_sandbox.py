"""The sandbox with real processes: one small adversarial program per property."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cudaperf.harness.sandbox import SandboxLimits, Workdir, base_level, run_sandboxed, scrubbed_env

ISOLATED = base_level() != "session"


def _sh(script: str, w: Path, **limits) -> object:
    return run_sandboxed(["sh", "-c", script], w, limits=SandboxLimits(**limits) if limits else SandboxLimits())


def test_normal_run_captures_output():
    with Workdir() as w:
        r = _sh("echo hello; echo oops >&2; exit 3", w)
    assert r.returncode == 3 and r.stdout == "hello\n" and r.stderr == "oops\n" and not r.timed_out


def test_hang_is_killed_at_the_deadline():
    with Workdir() as w:
        t0 = time.monotonic()
        r = _sh("sleep 60", w, wall_s=1.0)
    assert r.timed_out and r.returncode is None and time.monotonic() - t0 < 10


def test_crash_is_reported_as_a_signal():
    with Workdir() as w:
        r = _sh("kill -SEGV $$", w)
    assert r.returncode == -11 and r.signal_name == "SIGSEGV"


def test_output_flood_is_cut(tmp_path):
    with Workdir() as w:
        r = _sh("yes flood", w, wall_s=20, file_size_bytes=2_000_000, capture_bytes=1000)
    assert r.stdout_truncated and len(r.stdout) == 1000
    assert not r.timed_out  # SIGXFSZ ended it long before the deadline
    assert r.signal_name == "SIGXFSZ" or r.returncode != 0


@pytest.mark.skipif(base_level() != "namespaces+nobody", reason="needs root to drop to nobody")
def test_cannot_write_outside_its_directory(tmp_path):
    target = tmp_path / "owned_by_harness"
    target.mkdir()
    os.chmod(target, 0o755)
    with Workdir() as w:
        r = _sh(f"echo pwned > {target}/x; echo ok > inside.txt; cat inside.txt", w)
    assert not (target / "x").exists()
    # without a private root the directory is there but not writable; with one it is not there at all
    assert any(w in r.stderr for w in ("Permission denied", "No such file or directory", "Directory nonexistent")) and r.stdout == "ok\n"


@pytest.mark.skipif(not ISOLATED, reason="needs PID namespaces")
def test_escaped_children_die_with_the_run():
    with Workdir() as w:  # the marker goes to the run's own directory, which the host still sees afterwards
        marker = w / "alive"
        r = _sh(f"(setsid sh -c 'sleep 2; touch {marker}' &) ; echo started", w, wall_s=10)
        assert r.returncode == 0 and r.stdout == "started\n"
        time.sleep(3)
        assert not marker.exists(), "a setsid'd grandchild outlived the sandboxed run"


@pytest.mark.skipif(base_level() != "namespaces+nobody", reason="RLIMIT_NPROC does not bind root")
def test_fork_bomb_is_bounded_and_cleaned_up():
    with Workdir() as w:
        script = "i=0; while [ $i -lt 2000 ]; do (sleep 31.4159 &) 2>/dev/null; i=$((i+1)); done; echo done"
        r = _sh(script, w, wall_s=20, max_processes=64)
    assert not r.timed_out
    time.sleep(0.5)
    # count only this test's processes: other sandboxes (a compile elsewhere) may run as nobody at the same time
    left = os.popen("ps -u 65534 -o args= | grep -c '^sleep 31.4159'").read().strip()
    assert int(left) == 0, f"{left} processes of the fork bomb survived"


@pytest.mark.skipif(not ISOLATED, reason="needs a network namespace")
def test_no_network():
    with Workdir() as w:
        r = _sh("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '", w)
    assert r.stdout.split() == ["lo"]


def test_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("CUDAPERF_SECRET_TOKEN", "hunter2")
    with Workdir() as w:
        r = run_sandboxed(["env"], w, env=scrubbed_env(w))
    assert "hunter2" not in r.stdout and f"HOME={w}" in r.stdout


def test_a_bad_run_does_not_affect_the_next():
    with Workdir() as w:
        _sh("sleep 60", w, wall_s=0.5)
        r = _sh("echo fine", w)
    assert r.ok and r.stdout == "fine\n"


# --- the control channel: a program that pauses for the harness's verdict ----------------------------------------

def _controlled(script: str, w: Path, control, wall_s: float = 20.0):
    from cudaperf.harness.sandbox import CTL_FD

    return run_sandboxed(["bash", "-c", script, "prog", CTL_FD], w, limits=SandboxLimits(wall_s=wall_s),
                         control=control)


def test_control_channel_round_trip():
    seen = []

    def control(ctl):
        seen.append(ctl.read_line(timeout_s=10))
        assert ctl.send("time")
        seen.append(ctl.read_line(timeout_s=10))

    with Workdir() as w:
        r = _controlled('echo tests_done >&"$1"; read v; echo "got $v" >&"$1"; echo out', w, control)
    assert seen == ["tests_done", "got time"] and r.ok and r.stdout == "out\n"


def test_the_harness_reads_the_runs_cpu_time_from_outside_it():
    """``Control.cpu_s``: the run's CPU time, all its processes and threads, as the harness reads it (cgroup v2
    ``cpu.stat``, else ``/proc``): while the program sleeps it barely moves; while two workers each burn 0.6 s of
    CPU (however the machine shares its cores) it grows by at least their sum (the reading that
    ``max_window_cpu_cores`` divides by the window's wall time)."""
    import sys

    got = {}

    def control(ctl):
        assert ctl.read_line(timeout_s=10) == "tests_done"
        for phase in ("idle", "busy"):
            c0 = ctl.cpu_s()
            assert ctl.send(phase) and ctl.read_line(timeout_s=60) == "done"
            got[phase] = ctl.cpu_s() - c0
        got["source"] = ctl.cpu_source
        ctl.send("stop")

    burn = f"{sys.executable} -c 'import time\nwhile time.process_time() < 0.6: pass'"
    script = (f'echo tests_done >&"$1"; read v; sleep 1.5; echo done >&"$1"; read v; '
              f'{burn} & {burn} & wait; echo done >&"$1"; read v')
    with Workdir() as w:
        r = _controlled(script, w, control, wall_s=90)
    assert r.ok, (r.describe(), r.stderr)
    assert got["source"] and got["idle"] < 0.3 and got["busy"] >= 1.15, got


def test_control_stop_ends_the_program_and_eof_is_seen():
    seen = []

    def control(ctl):
        seen.append(ctl.read_line(timeout_s=10))
        ctl.send("stop")
        seen.append(ctl.read_line(timeout_s=10))
        seen.append(ctl.eof)

    with Workdir() as w:
        r = _controlled('echo tests_done >&"$1"; read v; [ "$v" = time ] && echo timed; exit 0', w, control)
    assert seen == ["tests_done", None, True] and r.ok and r.stdout == ""


def test_control_phase_timeout_kills_the_program():
    def control(ctl):
        line = ctl.read_line(timeout_s=0.5)
        assert line is None and not ctl.eof
        ctl.kill()

    with Workdir() as w:
        t0 = time.monotonic()
        r = _controlled("sleep 30", w, control, wall_s=60)
    assert r.timed_out and r.returncode is None and time.monotonic() - t0 < 10


def test_a_program_that_runs_on_after_its_last_command_is_ended_by_the_exit_grace():
    """Once the control returns (the last command sent, the last record read), ``exit_grace_s`` bounds the exit:
    code of the program's own that runs at exit (a spin in a destructor) no longer holds the run until its
    wall-clock backstop. A prompt exit is untouched, and without the grace the run goes on to its deadline."""
    from cudaperf.harness.sandbox import CTL_FD

    def control(ctl):
        assert ctl.read_line(timeout_s=10) == "tests_done"
        ctl.send("stop")

    def go(script, **limits):
        with Workdir() as w:
            t0 = time.monotonic()
            r = run_sandboxed(["bash", "-c", script, "prog", CTL_FD], w, limits=SandboxLimits(**limits),
                              control=control)
            return r, time.monotonic() - t0

    lingers = 'echo tests_done >&"$1"; read v; while :; do :; done'
    r, took = go(lingers, wall_s=120, exit_grace_s=1.0)
    assert r.exit_overrun and not r.ok and not r.timed_out and took < 30
    assert "had not ended 1 s after the harness's last command" in r.describe()
    r, _ = go('echo tests_done >&"$1"; read v; exit 0', wall_s=120, exit_grace_s=1.0)
    assert r.ok and not r.exit_overrun
    r, took = go(lingers, wall_s=3)  # no grace: the wall clock ends it
    assert r.timed_out and not r.exit_overrun and took >= 2.5


def test_control_line_flood_and_early_exit_are_just_lines():
    got = []

    def control(ctl):
        got.append(ctl.read_line(timeout_s=10))
        got.append(ctl.read_line(timeout_s=10))

    with Workdir() as w:
        r = _controlled('head -c 200000 /dev/zero | tr "\\0" x >&"$1"; printf "tests_done" >&"$1"; exit 4', w,
                        control)
    assert r.returncode == 4
    assert got[0] is not None and len(got[0]) <= 256 and got[1] is None


def _states(pgid: int) -> set[str]:
    """Run states (R, S, T, ...) of the processes in one process group, from /proc."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                out.add(fields[0])
    return out


def test_pausable_runs_stop_while_timing_runs_and_get_their_time_back():
    """A registered background process (its whole group, children included) is stopped while a timing run is
    on and continued after; the stopped time is added to its wall-clock limit, so it is not killed for it."""
    import threading
    import time

    from cudaperf.harness import quiet
    from cudaperf.harness.quiet import HostActivity

    host = HostActivity()
    old, quiet.HOST = quiet.HOST, host
    try:
        box: dict = {}
        with Workdir() as w:
            # the program forks a child that spins: both must stop
            argv = ["/bin/sh", "-c", "(i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done) & wait"]
            th = threading.Thread(target=lambda: box.update(
                run=run_sandboxed(argv, w, limits=SandboxLimits(wall_s=10), pausable=True)))
            th.start()
            deadline = time.monotonic() + 5
            while not host._groups and time.monotonic() < deadline:
                time.sleep(0.01)
            (pgid,) = list(host._groups)
            time.sleep(0.3)
            assert "R" in _states(pgid) or "S" in _states(pgid)
            with host.timing():
                time.sleep(0.3)
                assert host.paused_groups() == [pgid]
                # every process of the group is stopped (T), or frozen with its run's cgroup (D)
                assert _states(pgid) <= {"T", "D"} and _states(pgid), _states(pgid)
                time.sleep(10.5)  # longer than the run's whole limit (the loop needs a few of its 10 s)
            assert host.paused_s(pgid) >= 10.5
            th.join(timeout=120)
        run = box["run"]
        assert not run.timed_out and run.returncode == 0, run.describe()
        assert run.wall_s > 10.5
        assert host._groups == {}
    finally:
        quiet.HOST = old


def test_a_process_that_leaves_the_group_is_frozen_with_its_run(tmp_path):
    """SIGSTOP to a pausable run's process group misses what left the group: a compiler that ninja starts in a
    group of its own, or a candidate's ``setsid`` (a ModelNew module built ahead runs beside other candidates'
    timing). Where the run's cgroup can freeze, the whole run stops while anything is timed: a child that left the
    group by ``setsid`` stops counting, and counts again after. (Without a freezer the child would go on: then
    ``prebuild_modelnew`` is unavailable.)"""
    import threading
    import time

    from cudaperf.harness import quiet
    from cudaperf.harness.quiet import HostActivity
    from cudaperf.harness.sandbox import freezer_available, share_file

    if not freezer_available():
        pytest.skip("no cgroup freezer here")
    host = HostActivity()
    old, quiet.HOST = quiet.HOST, host
    try:
        box: dict = {}
        with Workdir() as w:
            script = ("import os, time\n"
                      "if os.fork() == 0:\n"
                      "    os.setsid()\n"
                      "    n = 0\n"
                      "    while True:\n"
                      "        n += 1\n"
                      "        if n % 20000 == 0:\n"
                      "            open('count.tmp', 'w').write(str(n)); os.replace('count.tmp', 'count')\n"
                      "time.sleep(6)\n")
            (w / "spin.py").write_text(script)
            share_file(w / "spin.py")
            th = threading.Thread(target=lambda: box.update(run=run_sandboxed(
                [sys.executable, "-I", "spin.py"], w, limits=SandboxLimits(wall_s=30), pausable=True)))
            th.start()

            def count() -> int:
                try:
                    return int((w / "count").read_text() or 0)
                except (OSError, ValueError):
                    return 0

            deadline = time.monotonic() + 10
            while count() == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert count() > 0, "the child never counted"
            with host.timing():
                time.sleep(0.3)
                frozen_at = count()
                time.sleep(1.0)
                assert count() == frozen_at, "the child that left the group went on while timing was on"
            time.sleep(0.5)
            assert count() > frozen_at, "the child did not go on after the timing"
            th.join(timeout=60)
        assert box["run"].wall_s > 1.0
    finally:
        quiet.HOST = old


def test_each_working_directory_gets_a_user_of_its_own(monkeypatch):
    """As root, every working directory is owned by a fresh user id and its runs drop to it (``per_run_uid``):
    ``RLIMIT_NPROC`` then counts one run's threads alone, and concurrent runs are different users. Files the
    harness shares into the directory get the same owner; with the switch off, runs are ``nobody`` as before."""
    from cudaperf.harness.sandbox import NOBODY_UID, RUN_ID_BASE, base_level, run_owner, share_file

    if base_level() != "namespaces+nobody":
        pytest.skip("the harness does not run as root here: runs keep the harness's user")
    with Workdir() as a, Workdir() as b:
        ua, ub = run_owner(a)[0], run_owner(b)[0]
        assert ua != ub and min(ua, ub) >= RUN_ID_BASE
        (a / "in.txt").write_text("x")
        share_file(a / "in.txt")
        assert (a / "in.txt").stat().st_uid == ua
        ra, rb = _sh("id -u; id -g; cat in.txt", a), _sh("id -u", b)
        assert ra.stdout.split() == [str(ua), str(run_owner(a)[1]), "x"] and rb.stdout.split() == [str(ub)]
    monkeypatch.setenv("CUDAPERF_SANDBOX", "-per_run_uid")
    with Workdir() as c:
        assert run_owner(c)[0] == NOBODY_UID and _sh("id -u", c).stdout.split() == [str(NOBODY_UID)]


def test_a_run_under_a_user_id_of_its_own_has_a_user_name(tmp_path):
    """A per-run uid has no entry in the password database, so ``getpass.getuser()`` raised KeyError in the run
    unless USER or LOGNAME names one; torch's profiler reached it on the H200 (session 22) and every PyTorch
    candidate was unscored. The sandbox's environment names a user; the password database still has none (the
    control: ``pwd.getpwuid`` raises, so the name comes from the environment)."""
    from cudaperf.harness.sandbox import NOBODY_UID, run_owner, share_file

    if base_level() != "namespaces+nobody":
        pytest.skip("the harness does not run as root here: runs keep the harness's user")
    script = ("import getpass, os, pwd\nprint(getpass.getuser())\n"
              "try:\n    pwd.getpwuid(os.getuid())\n    print('in the database')\n"
              "except KeyError:\n    print('not in the database')\n")
    with Workdir() as w:
        (w / "u.py").write_text(script)
        share_file(w / "u.py")
        r = run_sandboxed([sys.executable, "-I", "u.py"], w)
        assert r.returncode == 0, r.describe()
        name, db = r.stdout.splitlines()
        assert name == "cudaperf-run"
        if run_owner(w)[0] != NOBODY_UID:  # a per-run id: no account has it
            assert db == "not in the database"
