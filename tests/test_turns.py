"""The lock that hands runners started ahead their turn to load in the order they got ready
(:class:`cudaperf.harness.turns.TurnLock`), with real threads."""

from __future__ import annotations

import threading
import time

import pytest

from cudaperf.harness.turns import TurnLock


def _waiter(lock: TurnLock, name: str, order: list[str], poll_s: float | None, started: threading.Event,
            hold_s: float = 0.02) -> threading.Thread:
    def run() -> None:
        started.set()
        if poll_s is None:
            lock.acquire()
        else:
            while not lock.acquire(timeout=poll_s):  # as a prestarted runner polls, keeping its place
                pass
        order.append(name)
        time.sleep(hold_s)
        lock.release()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_queued(lock: TurnLock, n: int) -> None:
    deadline = time.monotonic() + 10
    while lock.waiting() < n:
        assert time.monotonic() < deadline, "the waiters never queued"
        time.sleep(0.005)


@pytest.mark.parametrize("poll_s", [None, 0.001])
def test_waiters_get_the_lock_in_the_order_they_asked(poll_s):
    """Five threads queue behind a holder, one after another; blocking or polling with a short timeout (each
    attempt keeps the thread's place), they get it in that order. A plain Lock with polling gives no order."""
    lock, order = TurnLock(), []
    lock.acquire()
    threads = []
    for k in range(5):
        threads.append(_waiter(lock, f"w{k}", order, poll_s, threading.Event()))
        _wait_queued(lock, k + 1)
    lock.release()
    for t in threads:
        t.join(10)
    assert order == [f"w{k}" for k in range(5)]
    assert lock.waiting() == 0 and lock.acquire(timeout=0)  # free again
    lock.release()


def test_a_waiter_that_gives_up_frees_its_place():
    """A thread that times out and cancels (a runner whose deadline no longer fits a run) leaves the queue: the
    one behind it is served; without the cancel it would wait for ever behind the abandoned place."""
    lock, order = TurnLock(), []
    lock.acquire()
    gave_up = threading.Event()

    def quitter() -> None:
        assert not lock.acquire(timeout=0.05)
        lock.cancel()
        gave_up.set()

    q = threading.Thread(target=quitter, daemon=True)
    q.start()
    _wait_queued(lock, 1)
    q.join(10)
    assert gave_up.is_set() and lock.waiting() == 0
    t = _waiter(lock, "next", order, 0.001, threading.Event())
    _wait_queued(lock, 1)
    lock.release()
    t.join(10)
    assert order == ["next"]


def test_misuse_is_an_error():
    lock = TurnLock()
    with pytest.raises(RuntimeError, match="unheld"):
        lock.release()
    with lock:
        with pytest.raises(RuntimeError, match="re-entrant"):
            lock.acquire(timeout=0)
    assert lock.acquire(blocking=False)  # free after the with block
    lock.release()
