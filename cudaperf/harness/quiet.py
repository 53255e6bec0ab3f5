"""Keep timing runs apart from background host work in one harness process.

Two classes of host work must not overlap, or the background work's CPU and memory traffic leaks into the
measured times: *timing* (a candidate's timed run, the sequential baseline's timing) and *background* (reference
runs that compute expected outputs, input generation for the next task). Work of one class may overlap freely
(timing runs on different GPUs, several preparations). Timing has priority: once a timing run waits, no new
background step starts. Background steps are short (one reference run), so a timing run waits at most one step.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class HostActivity:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._timing = 0
        self._timing_waiting = 0
        self._background = 0

    @contextmanager
    def timing(self) -> Iterator[None]:
        with self._cv:
            self._timing_waiting += 1
            self._cv.wait_for(lambda: self._background == 0)
            self._timing_waiting -= 1
            self._timing += 1
        try:
            yield
        finally:
            with self._cv:
                self._timing -= 1
                self._cv.notify_all()

    @contextmanager
    def background(self) -> Iterator[None]:
        with self._cv:
            self._cv.wait_for(lambda: self._timing == 0 and self._timing_waiting == 0)
            self._background += 1
        try:
            yield
        finally:
            with self._cv:
                self._background -= 1
                self._cv.notify_all()

    def state(self) -> tuple[int, int, int]:
        """(timing runs, timing runs waiting, background steps) now: for tests and diagnostics."""
        with self._cv:
            return self._timing, self._timing_waiting, self._background


HOST = HostActivity()
