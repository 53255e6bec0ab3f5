"""The driver's context list as outside evidence (cudaperf.harness.nvml) on this machine: no NVML here, so the
check says it is unavailable; the watch runs beside a real sandboxed program through run_sandboxed's observe hook
and recognises the run's processes (the sandbox's process and its descendants) among the machine's, and no other.
The list itself (NVML) is read on the GPU: tests/gpu/test_gpu_harness.py."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from cudaperf.harness import nvml
from cudaperf.harness.environment import gpu_count
from cudaperf.harness.sandbox import SandboxLimits, Workdir, run_sandboxed


def _all_pids(_index: int) -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()}


def test_descends_from_follows_parents_through_a_real_process_tree():
    p = subprocess.Popen(["bash", "-c", "sleep 5 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        kids: list[int] = []
        while not kids and time.monotonic() < deadline:
            kids = [q for q in _all_pids(0) if nvml._parent(q) == p.pid]
            time.sleep(0.01)
        assert kids, "the child did not start"
        assert nvml.descends_from(kids[0], p.pid) and nvml.descends_from(p.pid, p.pid)
        assert not nvml.descends_from(os.getpid(), p.pid) and not nvml.descends_from(p.pid, kids[0])
    finally:
        p.kill()
        p.wait()


def test_the_watch_sees_the_sandboxed_run_and_nothing_else():
    with Workdir(prefix="cudaperf-test-") as w:
        seen = nvml.ContextWatch(0, lister=_all_pids)  # every process of the machine: the run's among them
        r = run_sandboxed(["/bin/sleep", "0.3"], w, limits=SandboxLimits(wall_s=10), observe=seen)
        assert r.ok and seen.seen and seen.polls >= 1 and seen.error is None
        others = nvml.ContextWatch(0, lister=lambda i: {os.getpid(), 1})  # the harness and init only
        r = run_sandboxed(["/bin/sleep", "0.2"], w, limits=SandboxLimits(wall_s=10), observe=others)
        assert r.ok and not others.seen and others.polls >= 10
        broken = nvml.ContextWatch(0, lister=lambda i: None)
        r = run_sandboxed(["/bin/true"], w, limits=SandboxLimits(wall_s=10), observe=broken)
        assert r.ok and not broken.seen and broken.error


def test_without_nvml_the_check_is_unavailable_and_says_why():
    if gpu_count() > 0:
        import pytest

        pytest.skip("a GPU machine: tests/gpu/test_gpu_harness.py checks the real list")
    assert nvml.compute_pids(0) is None
    ok, why = nvml.context_check_available(0)
    assert not ok and why.startswith("NVML cannot be read")


def test_the_check_is_on_by_default_and_says_why_when_it_cannot_run(monkeypatch):
    """``c_program_context_check`` is on by default (its GPU test passed on the H200). Which GPU it watches: the
    run's ``gpu_index``, or the only visible one when none is given; with several and none given, or where NVML
    cannot be read, nothing is ruled on and the reason is what the result records (``driver_context``)."""
    from dataclasses import replace

    from cudaperf.harness import run_c_program
    from cudaperf.harness.settings import HarnessSettings

    s = HarnessSettings()
    assert s.c_program_context_check
    assert run_c_program._context_check(replace(s, c_program_context_check=False), 0) == (None, "off")
    calls: list[int] = []

    def available(index, arch=None):
        calls.append(index)
        return (index == 3, "" if index == 3 else "NVML cannot be read: test")

    monkeypatch.setattr(run_c_program, "context_check_available", available)
    monkeypatch.setattr(run_c_program, "device_for_child", lambda ordinal: str(ordinal + 3))
    monkeypatch.setattr(run_c_program, "gpu_count", lambda: 1)
    assert run_c_program._context_check(s, None) == (3, "")  # the only visible GPU
    assert run_c_program._context_check(s, 0) == (3, "")
    assert run_c_program._context_check(s, 1) == (None, "unavailable: NVML cannot be read: test")
    monkeypatch.setattr(run_c_program, "gpu_count", lambda: 2)
    index, why = run_c_program._context_check(s, None)
    assert index is None and why.startswith("unavailable: ") and "2 visible" in why
    monkeypatch.setattr(run_c_program, "gpu_count", lambda: 0)
    assert run_c_program._context_check(s, None) == (None, "unavailable: no GPU is visible (nvidia-smi lists none)")
    assert calls == [3, 3, 4]


def test_without_nvml_the_run_s_gpu_is_not_checked_and_the_reason_is_recorded():
    if gpu_count() > 0:
        import pytest

        pytest.skip("a GPU machine: tests/gpu/test_gpu_harness.py checks the real list")
    from cudaperf.harness.run_c_program import _context_check
    from cudaperf.harness.settings import HarnessSettings

    index, why = _context_check(HarnessSettings(), 0)
    assert index is None and why.startswith("unavailable: NVML cannot be read")
