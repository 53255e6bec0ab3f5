"""Keep timing runs apart from background host work in one harness process.

Two classes of host work must not overlap, or the background work's CPU and memory traffic leaks into the
measured times: *timing* (a candidate's timed run, the sequential baseline's timing) and *background* (reference
runs that compute expected outputs, input generation for the next task). Work of one class may overlap freely
(timing runs on different GPUs, several preparations). Timing has priority: once a timing run waits, no new
background step starts. Background steps are short (one reference run), so a timing run waits at most one step.

Compilers are long background processes (seconds each, many at once) that a batch overlaps with the GPU runs.
They are *paused*: while any timing run is on, every registered process group (``run_sandboxed(pausable=True)``,
which nvcc runs use) is stopped with SIGSTOP and continued with SIGCONT when the last timing run ends, so that
neither their CPU time nor their memory traffic reaches a timed call or the sequential baseline. Where the run's
cgroup can freeze (cgroup v2 ``cgroup.freeze``, or the v1 freezer), the whole run is frozen too: processes that left
the group (the compilers ninja starts in groups of their own, a candidate's ``setsid`` in a ModelNew module built
ahead) stop with it. The time a group spends stopped is added to its wall-clock limit
(:meth:`HostActivity.paused_s`).

Exclusive timing (``HarnessSettings.exclusive_timing``, off by default) goes further on a machine with several
GPUs: one GPU worker's timed window never overlaps another's, and a C candidate's hidden tests and its exit (its
own process, on its own GPU) count as background work, so no other worker's timed call runs beside them. (The
PyTorch path does not name its windows' owner yet: its windows share the owner ``None`` and may overlap one
another.) It
trades throughput for a host that is quiet for every timed call, for when the sequential baseline is seen to
drift with the other workers' activity.

Timing's priority starves background work on a machine with several GPUs: a task's timing rounds hold one window
for seconds, the GPU workers' rounds overlap, so the host is rarely free of timing, and a GPU worker that needs
background work (its next task's preparation, a host calibration) waits until every other worker is between
tasks. The GPUs then move in lockstep. An *urgent* period (:meth:`HostActivity.begin_urgent`) turns the priority
round for a while: timing windows already open, and windows that an owner opens inside its own open one, go on;
no owner opens a new one; background work starts as soon as no window is open, whether or not a timing run
waits. The two classes still never overlap. :meth:`HostActivity.try_background` takes a background slot only if
no window is open or waits, and never waits.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator


class HostActivity:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._timing = 0
        self._timing_waiting = 0
        self._background = 0
        self.pause_processes = True
        """Stop registered background process groups while timing runs (off: they run on, e.g. to compare)."""
        self._groups: dict[int, list[float]] = {}  # pgid -> [seconds stopped so far, stopped since (0: running)]
        self._freezers: dict[int, Callable[[bool], bool]] = {}  # pgid -> its run's cgroup freezer
        self.exclusive = False
        """Exclusive timing (:meth:`exclusive_mode`): timing windows of different owners (GPU workers) never
        overlap, and callers that hold background slots (:meth:`hold_background`) for a candidate's hidden tests
        and its exit keep those away from every timed window too."""
        self._owners: Counter = Counter()
        self._urgent = 0
        self.urgent_started = 0
        """Urgent periods begun so far: for tests and diagnostics."""

    @contextmanager
    def timing(self, owner: Hashable = None) -> Iterator[None]:
        """A timed window. ``owner`` (the GPU index in a batch) matters in exclusive mode only: windows of one
        owner may nest (a task's rounds hold one while its candidates' windows run), other owners wait."""
        with self._cv:
            self._timing_waiting += 1
            self._cv.wait_for(lambda: self._background == 0 and (not self._urgent or self._owners[owner] > 0)
                              and (not self.exclusive or set(self._owners) <= {owner}))
            self._timing_waiting -= 1
            self._timing += 1
            self._owners[owner] += 1
            if self._timing == 1:
                self._signal_all(stop=True)
        try:
            yield
        finally:
            with self._cv:
                self._timing -= 1
                self._owners[owner] -= 1
                if not self._owners[owner]:
                    del self._owners[owner]
                if self._timing == 0:
                    self._signal_all(stop=False)
                self._cv.notify_all()

    @contextmanager
    def exclusive_mode(self, on: bool = True) -> Iterator[None]:
        """Exclusive timing for the ``with`` body (a batch), then back to what it was."""
        with self._cv:
            before, self.exclusive = self.exclusive, on
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                self.exclusive = before
                self._cv.notify_all()

    def hold_background(self) -> "BackgroundSlot":
        """A background slot taken now (waiting while any timing window is open or waits) and given back with
        :meth:`BackgroundSlot.release`, possibly from another thread: for host work that spans threads, such as a
        sandboxed candidate's hidden tests."""
        with self._cv:
            self._cv.wait_for(lambda: self._timing == 0 and self._timing_waiting == 0)
            self._background += 1
        return BackgroundSlot(self)

    def _release_background(self) -> None:
        with self._cv:
            self._background -= 1
            self._cv.notify_all()

    # -- pausable process groups -------------------------------------------------------------------------------

    def _signal(self, pgid: int, stop: bool) -> None:
        entry = self._groups[pgid]
        freeze = self._freezers.get(pgid)
        now = time.monotonic()
        if stop and entry[1] == 0.0 and self.pause_processes:
            try:  # the group stopped first (its processes show as stopped), then the run's cgroup frozen
                os.killpg(pgid, signal.SIGSTOP)
                entry[1] = now
            except (ProcessLookupError, PermissionError):
                pass
            if freeze is not None and freeze(True):
                entry[1] = now
        elif not stop and entry[1] != 0.0:
            if freeze is not None:
                freeze(False)
            try:
                os.killpg(pgid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            entry[0] += now - entry[1]
            entry[1] = 0.0

    def _signal_all(self, stop: bool) -> None:
        for pgid in list(self._groups):
            self._signal(pgid, stop)

    def register(self, pgid: int, freeze: Callable[[bool], bool] | None = None) -> None:
        """A background process group (its own session) that timing runs may pause; stopped at once if one is
        on. ``freeze``: also freezes (True) and thaws (False) the run's cgroup, which holds its processes that
        left the group (:meth:`cudaperf.harness.sandbox._RunCgroup.set_frozen`)."""
        with self._cv:
            self._groups[pgid] = [0.0, 0.0]
            if freeze is not None:
                self._freezers[pgid] = freeze
            if self._timing > 0:
                self._signal(pgid, stop=True)

    def unregister(self, pgid: int) -> float:
        """Forget the group (continuing it if stopped); the seconds it spent stopped."""
        with self._cv:
            if pgid not in self._groups:
                return 0.0
            self._signal(pgid, stop=False)
            self._freezers.pop(pgid, None)
            return self._groups.pop(pgid)[0]

    def paused_s(self, pgid: int) -> float:
        """Seconds the group has spent stopped so far (0 for an unknown group)."""
        with self._cv:
            entry = self._groups.get(pgid)
            if entry is None:
                return 0.0
            return entry[0] + (time.monotonic() - entry[1] if entry[1] else 0.0)

    def paused_groups(self) -> list[int]:
        """Registered groups stopped now: for tests and diagnostics."""
        with self._cv:
            return [g for g, e in self._groups.items() if e[1]]

    def _background_may_start(self) -> bool:
        return self._timing == 0 and (self._urgent > 0 or self._timing_waiting == 0)

    @contextmanager
    def background(self) -> Iterator[None]:
        with self._cv:
            self._cv.wait_for(self._background_may_start)
            self._background += 1
        try:
            yield
        finally:
            with self._cv:
                self._background -= 1
                self._cv.notify_all()

    @contextmanager
    def try_background(self) -> Iterator[bool]:
        """A background step only if one may start now (no window open or waiting, or an urgent period with no
        window open): yields True holding the slot, or False at once, holding nothing."""
        with self._cv:
            ok = self._background_may_start()
            if ok:
                self._background += 1
        try:
            yield ok
        finally:
            if ok:
                with self._cv:
                    self._background -= 1
                    self._cv.notify_all()

    def begin_urgent(self) -> None:
        """Start an urgent period (see the module's doc); periods nest, each ended by :meth:`end_urgent`."""
        with self._cv:
            self._urgent += 1
            self.urgent_started += 1
            self._cv.notify_all()

    def end_urgent(self) -> None:
        with self._cv:
            if self._urgent <= 0:
                raise RuntimeError("end_urgent without begin_urgent")
            self._urgent -= 1
            self._cv.notify_all()

    def urgent_periods(self) -> int:
        """Urgent periods open now: for tests and diagnostics."""
        with self._cv:
            return self._urgent

    def state(self) -> tuple[int, int, int]:
        """(timing runs, timing runs waiting, background steps) now: for tests and diagnostics."""
        with self._cv:
            return self._timing, self._timing_waiting, self._background


class BackgroundSlot:
    """A held background slot (:meth:`HostActivity.hold_background`); :meth:`release` is idempotent."""

    def __init__(self, host: HostActivity) -> None:
        self._host: HostActivity | None = host
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            host, self._host = self._host, None
        if host is not None:
            host._release_background()


HOST = HostActivity()
