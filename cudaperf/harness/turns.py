"""Turns: a lock whose waiters get it in the order they first asked for it.

Runners started ahead (``HarnessSettings.prestart_runners``) wait for the previous candidate's process to be gone
before their candidate's code loads (:func:`cudaperf.harness.run_pytorch.run_pytorch_candidate`'s ``load_lock``).
With more than one runner ahead (``HarnessSettings.prestart_ahead``) several wait at once, polling with a
timeout so that each can give up when a whole run would no longer fit before its own deadline; a plain lock hands
itself to whichever poll comes first, so one runner could be passed over again and again until its deadline. Here
a thread keeps its place across timed-out attempts, and :meth:`TurnLock.cancel` gives a place up.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class TurnLock:
    """A mutual-exclusion lock, first come (by a thread's first ``acquire`` since it last held or cancelled),
    first served. Usable as a context manager (a blocking ``acquire``)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._held_by: int | None = None
        self._queue: deque[int] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        deadline = None if not blocking or timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._cv:
            if self._held_by == me:
                raise RuntimeError("TurnLock is not re-entrant")
            if me not in self._queue:
                self._queue.append(me)
            while not (self._held_by is None and self._queue[0] == me):
                if not blocking:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False  # keeps its place: the next attempt waits behind fewer threads
                self._cv.wait(left)
            self._queue.popleft()
            self._held_by = me
            return True

    def release(self) -> None:
        with self._cv:
            if self._held_by is None:
                raise RuntimeError("release of an unheld TurnLock")
            self._held_by = None
            self._cv.notify_all()

    def cancel(self) -> None:
        """This thread no longer waits (it gave up after timed-out attempts): its place goes."""
        me = threading.get_ident()
        with self._cv:
            try:
                self._queue.remove(me)
            except ValueError:
                return
            self._cv.notify_all()

    def waiting(self) -> int:
        with self._cv:
            return len(self._queue)

    def __enter__(self) -> "TurnLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
