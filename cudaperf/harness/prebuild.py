"""Compile answers while the policy is still writing the others: :class:`Prebuilder`.

A turn of ``cudaperf eval`` asks the policy for its answers in chunks and judges them once all have come; the
judging starts with the compile pool (nvcc, seconds of CPU each), while the GPU waits. Most of that compiling can
be done earlier, on the CPUs the policy leaves idle while it writes the next chunk (a local model is bound by its
GPU, an endpoint by the network). A prebuild is exactly the harness's own first step, extraction, static checks
and :func:`cudaperf.harness.evaluate.build_candidate` (nvcc in the sandbox), whose outcome the build cache keeps by
content (the code, the task's driver, the flags, the architecture, the toolchain): when the batch executor then
judges the answer, its build is a cache hit. Nothing is recorded and no verdict is made here; a prebuild that
fails (a toolchain fault, a timeout under load) leaves the executor to build as it would have.

Which answers: those of ``c_function`` tasks (the built-in dataset's, BabelTower's are ``cuda_kernel`` and
KernelBench's ``pytorch``, whose builds the executor schedules its own way). Which runs: the local and the
compile-only executors, on the machine whose cache they read; a Ray cluster's workers build on their own nodes.

The judging waits for the prebuilds still running (:meth:`Prebuilder.wait`) before it starts, so that nvcc never
runs beside a timing window (the harness's quiet-host rule).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Mapping, Sequence

from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks.schema import CFunctionTask, Task


class Prebuilder:
    """Builds answers into the harness's build cache in the background (see the module docstring).

    ``workers``: compile threads (default: the machine's cores less two, at least one: the policy keeps a core
    for itself)."""

    def __init__(self, tasks: Mapping[str, Task], settings: HarnessSettings, workers: int | None = None):
        self.tasks = dict(tasks)
        self.settings = settings
        self.workers = workers or max(1, (os.cpu_count() or 2) - 2)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="cudaperf-prebuild")
        self._futures: list[Future] = []
        self._lock = threading.Lock()
        self.submitted = 0
        """Answers handed to a compile thread (those of a c_function task)."""
        self.built = 0
        """Answers that passed the static checks and went through nvcc (their outcome, a failure too, is cached)."""
        self.stopped = 0
        """Answers the static checks end (nothing to build)."""
        self.faults: list[str] = []
        """Prebuilds that raised (a toolchain fault): the executor builds those itself."""

    def submit(self, items: Sequence[tuple[str, str]]) -> int:
        """Queue ``(task_id, completion)`` pairs; returns how many were queued (answers to other task kinds and to
        tasks this prebuilder does not know are left to the executor)."""
        queued = 0
        for task_id, completion in items:
            task = self.tasks.get(task_id)
            if not isinstance(task, CFunctionTask) or not completion:
                continue
            self._futures.append(self._pool.submit(self._one, task, completion))
            queued += 1
        with self._lock:
            self.submitted += queued
        return queued

    def _one(self, task: CFunctionTask, completion: str) -> None:
        from cudaperf.harness.compile import compile_priority
        from cudaperf.harness.evaluate import build_candidate, check_candidate

        try:
            checked = check_candidate(task, completion, "prebuild", self.settings)
            if checked.result is not None:
                with self._lock:
                    self.stopped += 1
                return
            with compile_priority(10):  # behind the policy's own process, which feeds the GPU
                build_candidate(task, checked.code, self.settings)
            with self._lock:
                self.built += 1
        except Exception as exc:  # a fault here costs only the head start: the executor builds it again
            with self._lock:
                self.faults.append(f"{task.id}: {type(exc).__name__}: {str(exc)[:200]}")

    def wait(self) -> None:
        """Block until every queued prebuild has ended."""
        futures, self._futures = self._futures, []
        for f in futures:
            f.result()

    def close(self) -> None:
        self.wait()
        self._pool.shutdown(wait=True)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"submitted": self.submitted, "built": self.built, "stopped": self.stopped,
                    "faults": len(self.faults)}


__all__ = ["Prebuilder"]
