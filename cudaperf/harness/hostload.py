"""The host's state around a timing window: how busy the CPUs were, how much time the hypervisor stole, how many
of this harness's timing windows were open at once, and how fast one core ran two fixed workloads shortly before.

Why: the sequential C baseline of a task drifts between runs on the H200 machines (a median |log ratio| of 0.20
between two runs minutes apart in one lease, session 6), while most windows' own samples agree within 1 to 3 %.
A program that did not change cannot explain that; the host's state can. Recording it with every baseline
window lets the drift be attributed: to the clock of one core (``compute_ms`` moves with it), to memory traffic
(``memory_ms``), to other guests (``steal_frac``) or to this harness's own concurrency (``timing_runs``).
"""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from cudaperf.harness.compile import NATIVE_DIR, _trusted_build, gcc_version, sha256
from cudaperf.harness.quiet import HOST
from cudaperf.harness.result import HostLoad

_STAT = Path("/proc/stat")


def cpu_times() -> tuple[int, int, int] | None:
    """(total, busy, steal) jiffies over all CPUs since boot, or None where /proc/stat is missing."""
    try:
        first = _STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    v = [int(x) for x in first[1:]] + [0] * 10
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    busy = user + nice + system + irq + softirq
    return busy + idle + iowait + steal, busy, steal


@lru_cache(maxsize=1)
def calibration_exe() -> Path:
    """The calibration program (``native/calibrate.c``), built once by gcc into the build cache."""
    src = (NATIVE_DIR / "calibrate.c").read_text()
    return _trusted_build(sha256("calibrate", src, gcc_version()), "", {"calibrate.c": src},
                          lambda t, out: ["gcc", "-O2", "-o", str(out), str(t / "calibrate.c")],
                          "the host calibration program does not build")


def calibrate() -> tuple[float, float] | None:
    """(compute_ms, memory_ms) of the two fixed workloads on one core now, or None if the program failed."""
    try:
        p = subprocess.run([str(calibration_exe())], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    vals = dict(line.split() for line in p.stdout.splitlines() if line.count(" ") == 1)
    try:
        return int(vals["compute_ns"]) / 1e6, int(vals["memory_ns"]) / 1e6
    except (KeyError, ValueError):
        return None


class _Sample:
    load: HostLoad | None = None


def calibrate_as_background(enabled: bool = True, *, wait: bool = True) -> tuple[float, float] | None:
    """:func:`calibrate` as background host work (``HOST.background()``): it waits until no timing window is open,
    so that its memory traffic never reaches another GPU's timed calls, and it is seconds at most before the window
    it describes (the drift it looks for lasts minutes). None when not ``enabled``, and, with ``wait=False``, when
    background work may not start at once (another GPU's window is open): the caller then goes on without it
    rather than wait for every other GPU to be between windows."""
    if not enabled:
        return None
    if not wait:
        with HOST.try_background() as free:
            return calibrate() if free else None
    with HOST.background():
        return calibrate()


@contextmanager
def sampled(calibration: tuple[float, float] | None = None) -> Iterator[_Sample]:
    """Sample the host around the ``with`` body, which must run inside ``HOST.timing()``; the result is in the
    yielded object's ``load`` afterwards (None without /proc/stat). ``calibration``: the two workloads' times
    from :func:`calibrate_as_background`, stored with the sample."""
    out = _Sample()
    timing_runs = HOST.state()[0]
    before = cpu_times()
    yield out
    after = cpu_times()
    if before is None or after is None:
        return
    total = max(1, after[0] - before[0])
    out.load = HostLoad(busy_frac=round((after[1] - before[1]) / total, 4),
                        steal_frac=round((after[2] - before[2]) / total, 4), timing_runs=timing_runs,
                        compute_ms=None if calibration is None else round(calibration[0], 4),
                        memory_ms=None if calibration is None else round(calibration[1], 4))
