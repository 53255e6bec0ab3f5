"""The host's state around a baseline window: the calibration program (real gcc build), /proc/stat, and the
record carried by the baseline's TimingStats through a result's JSON."""

from __future__ import annotations

import time

import pytest

from cudaperf.harness import hostload
from cudaperf.harness.quiet import HOST
from cudaperf.harness.result import EvaluationResult, HostLoad, Stage, TimingStats
from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import find_task, load_builtin_tasks


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAPERF_CACHE", str(tmp_path / "cache"))
    hostload.calibration_exe.cache_clear()
    yield
    hostload.calibration_exe.cache_clear()


def test_calibration_times_both_workloads_as_background_work():
    compute_ms, memory_ms = hostload.calibrate()
    assert compute_ms > 0 and memory_ms > 0
    assert hostload.calibrate_as_background(False) is None
    import threading

    seen = []
    with HOST.timing():  # a timed window is open: the calibration waits for it to close
        t = threading.Thread(target=lambda: seen.append(hostload.calibrate_as_background()))
        t.start()
        t.join(timeout=1.0)
        assert t.is_alive() and not seen
    t.join(timeout=60)
    assert seen and seen[0][0] > 0


def test_a_sampled_window_records_busy_share_and_open_timing_windows():
    if hostload.cpu_times() is None:
        pytest.skip("no /proc/stat here")
    with HOST.timing(), hostload.sampled((1.5, 2.5)) as h:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.3:  # one CPU busy for the whole window
            pass
    load = h.load
    assert load is not None and load.timing_runs == 1 and (load.compute_ms, load.memory_ms) == (1.5, 2.5)
    assert 0 < load.busy_frac <= 1 and 0 <= load.steal_frac <= 1


def test_the_baseline_carries_the_host_state_into_the_result_json():
    task = find_task(load_builtin_tasks(), "saxpy")
    prepared = prepare_c_function(task, HarnessSettings(), seed=3)
    host = prepared.baseline_timing.host
    if hostload.cpu_times() is not None:
        assert host is not None and host.compute_ms > 0 and host.memory_ms > 0
    off = prepare_c_function(task, HarnessSettings(host_calibration=False), seed=3)
    assert off.baseline_timing.host is None or off.baseline_timing.host.compute_ms is None
    res = EvaluationResult(task_id="saxpy", task_kind="c_function", candidate_id="c", code_sha256=None,
                           status="scored", stage=Stage.TIMED, correct=True,
                           candidate_timing=TimingStats.from_samples_ms([1.0, 1.1]),
                           baseline_timing=prepared.baseline_timing, speedup=2.0)
    back = EvaluationResult.from_dict(res.to_dict())
    assert back == res
    assert back.baseline_timing.host is None or isinstance(back.baseline_timing.host, HostLoad)
