"""The PyTorch part of a batch: PyTorch tasks' candidates on the local GPUs (``run_batch`` hands them here).

Per task, on one GPU: the trusted reference runs the hidden trials, the eager baseline is timed once (and
``torch.compile``'s when asked), then the task's candidates run through the sandboxed runner of
:mod:`cudaperf.harness.run_pytorch`, in a fast-path library (prebuilt here) or as ``ModelNew`` source.

A runner spends seconds importing torch and making a CUDA context before it touches the GPU. With ``parallel``
> 1 (trusted candidates only: a dataset's own variants, as with ``pipeline_candidates``) that many runners start
together and take turns on the GPU (a lock per GPU held for each one's trials and for its timing, re-check and
profiled call): the set-up overlaps, the GPU work never does. Their start-up counts as background host work
(:mod:`cudaperf.harness.quiet`), so it never runs beside a timed call. Tasks overlap too: the next task's trials
are prepared (background steps) while this task's candidates run, and its baseline and runners start as soon as
this task's last candidates have taken their runner slots. Untrusted candidates run one at a time, and nothing
of the next task overlaps them. Fast-path builds (sandboxed nvcc, at niceness 19, paused while anything is
timed) run ahead of the GPU workers on half the cores, and so do ``ModelNew`` modules' extension builds with
``HarnessSettings.prebuild_modelnew`` (:mod:`cudaperf.harness.modelnew_build`).
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import threading
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

from cudaperf.harness.quiet import HOST
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.harness.turns import TurnLock

N_TRIALS = 3


@dataclass(frozen=True)
class PyTorchBatchSummary:
    n_tasks: int
    n_jobs: int
    n_done: int
    n_skipped: int
    not_started: int
    gpu_s: float
    wall_s: float
    per_task_s: dict[str, float]
    n_gpu_runs: int = 0
    """Jobs that ran on a GPU (0 without one: then every result is unscored after its build)."""


class PyTorchBuilds:
    """A PyTorch batch's candidates built ahead of their GPU runs, on half the cores (niceness 19; the builds'
    processes paused while anything is timed): fast-path units (sandboxed nvcc) and, with
    ``HarnessSettings.prebuild_modelnew``, ``ModelNew`` modules' extensions
    (:mod:`cudaperf.harness.modelnew_build`; the precompiled ``torch/extension.h`` first, with
    ``HarnessSettings.modelnew_pch``). The runs then find them in the cache. Candidates that fail the static checks
    are left to :func:`~cudaperf.harness.run_pytorch.evaluate_pytorch`, which gives their verdicts.

    Start it as soon as the jobs are known (``run_batch`` starts it before a batch's C tasks, so the builds go on
    while those run); :meth:`in_build_order` gives a task's jobs as their builds end."""

    def __init__(self, jobs: Sequence[Any], settings: HarnessSettings, *,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        from cudaperf.harness.extract import extract_code

        self.settings, self.progress = settings, progress
        self._n, self._built = len(jobs), 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2),
                                        thread_name_prefix="cudaperf-torch-build")
        if settings.modelnew_pch and any(_MODELNEW.search(extract_code(j.completion).code or "") for j in jobs):
            from cudaperf.harness.modelnew_build import modelnew_pch

            self._pool.submit(modelnew_pch, True)  # the precompiled torch/extension.h, first (GPU runs never wait)
        self._futures: dict[tuple[str, str], Future] = {
            (j.task_id, j.candidate_id): self._pool.submit(self._build, j.completion) for j in jobs}

    def covers(self, jobs: Sequence[Any]) -> bool:
        return all((j.task_id, j.candidate_id) in self._futures for j in jobs)

    def _build(self, completion: str):
        from cudaperf.harness.compile import ToolchainError, compile_priority
        from cudaperf.harness.extract import extract_code
        from cudaperf.harness.modelnew_build import prebuild_modelnew
        from cudaperf.harness.pytorch_checks import check_pytorch_candidate
        from cudaperf.harness.torch_fast import build_fast_candidate, check_fast_candidate

        settings = self.settings
        code = extract_code(completion).code
        out = None
        if code is not None and not _MODELNEW.search(code) and check_fast_candidate(code).ok:
            try:
                with compile_priority(19):
                    out = build_fast_candidate(code, arch=settings.arch, flags=settings.nvcc_flags)
            except ToolchainError:
                out = None  # evaluate_pytorch meets it again and makes the result unscored
        elif code is not None and settings.prebuild_modelnew and _MODELNEW.search(code) \
                and check_pytorch_candidate(code).ok:
            with compile_priority(19):
                out = prebuild_modelnew(code, arch=settings.arch, pch=settings.modelnew_pch)
        with self._lock:
            self._built += 1
            if self.progress:
                self.progress("pytorch-compile", self._built, self._n)
        return out

    def in_build_order(self, task_id: str, jobs: Sequence[Any]) -> Iterator[Any]:
        """``jobs`` (of ``task_id``) as their builds end; a build's programming error is raised here."""
        from concurrent.futures import as_completed

        of = {self._futures[(task_id, j.candidate_id)]: j for j in jobs}
        for f in as_completed(of):
            f.result()
            yield of[f]

    def close(self) -> None:
        """Builds not started are dropped (a rerun builds them); those running end in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_pytorch_batch(tasks: dict[str, Any], jobs: Sequence[Any], store: ResultStore, *,
                      settings: HarnessSettings, seed_of: Callable[[str], int] | None = None,
                      gpus: Sequence[int] | None = None, progress: Callable[[str, int, int], None] | None = None,
                      max_seconds: float | None = None, compile_baseline: bool = False,
                      parallel: int = 1, prestart: bool = False,
                      builds: PyTorchBuilds | None = None) -> PyTorchBatchSummary:
    """Evaluate ``jobs`` (:class:`~cudaperf.harness.executor.Job` of PyTorch tasks, task by task in their order)
    and append one result per job to ``store``; jobs with a scored result there already are skipped.
    ``seed_of(task_id)``: the seed of a task's trials (default: a fresh one per task). Without a GPU every job is
    still checked and built, and its result is unscored with the reason.

    ``prestart`` (with ``parallel`` 1: candidates that are not trusted): 1 + ``settings.prestart_ahead`` runners
    per GPU, the next ones' trusted set-up beside the current one's run, each one's code loading only once the
    previous one's process is gone, in the order they got ready (``HarnessSettings.prestart_runners``;
    :func:`~cudaperf.harness.run_pytorch.run_pytorch_candidate`'s ``load_lock``, a
    :class:`~cudaperf.harness.turns.TurnLock`). A task's candidates still all end before the next task's baseline is
    timed.

    ``max_seconds``: no candidate starts after this long (counted from the call), within a begun task too; what did
    not start stays out of the store (``not_started``), so a rerun goes on there.

    ``builds``: the candidates' builds, started ahead by the caller (:class:`PyTorchBuilds`, for example while a
    batch's C tasks run); by default they start here. Either way this call closes them."""
    import torch

    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.pytorch_reference import prepare_pytorch, time_reference
    from cudaperf.harness.run_pytorch import evaluate_pytorch
    from cudaperf.tasks.inputs import fresh_seed

    t0 = time.monotonic()
    done = store.done_keys()
    todo = [j for j in jobs if (j.task_id, j.candidate_id) not in done]
    by_task: dict[str, list[Any]] = defaultdict(list)
    for j in todo:
        by_task[j.task_id].append(j)
    order = list(by_task)
    if gpus is None:
        gpus = list(range(gpu_count()))
    if not gpus or not torch.cuda.is_available():
        # Nothing can run: each candidate is still checked and built, and its result says why it is unscored.
        if builds is not None:
            builds.close()
        for k, j in enumerate(todo, 1):
            store.append(evaluate_pytorch(tasks[j.task_id], j.completion, settings, candidate_id=j.candidate_id))
            if progress:
                progress("pytorch-run", k, len(todo))
        return PyTorchBatchSummary(n_tasks=len(order), n_jobs=len(jobs), n_done=len(todo),
                                   n_skipped=len(jobs) - len(todo), not_started=0, gpu_s=0.0,
                                   wall_s=time.monotonic() - t0, per_task_s={}, n_gpu_runs=0)

    lock = threading.Lock()
    if settings.pytorch_zygote and todo:  # its import (seconds) beside the builds, not before the first runner
        from cudaperf.harness.run_pytorch import runner_zygote, sandbox_python

        threading.Thread(target=lambda: runner_zygote(sandbox_python()[0]), name="cudaperf-zygote-start",
                         daemon=True).start()
    if builds is None:
        builds = PyTorchBuilds(todo, settings, progress=progress)
    elif not builds.covers(todo):
        raise ValueError("the builds started ahead do not cover this batch's jobs")

    work: queue.Queue[str] = queue.Queue()
    for t in order:
        work.put(t)
    n_done = [0]
    per_task: dict[str, float] = {}
    gpu_busy = [0.0]
    errors: list[BaseException] = []

    def record(res: EvaluationResult) -> None:
        store.append(res)
        with lock:
            n_done[0] += 1
            if progress:
                progress("pytorch-run", n_done[0], len(todo))

    n_late = [0]  # candidates of a begun task not started because max_seconds ran out (left for a rerun)

    def out_of_time() -> bool:
        return max_seconds is not None and time.monotonic() - t0 > max_seconds

    def run_one(task, job, **kwargs) -> EvaluationResult | None:
        """A candidate's run, or None where ``max_seconds`` ran out before its turn came."""
        if out_of_time():
            return None
        return evaluate_pytorch(task, job.completion, settings, candidate_id=job.candidate_id, **kwargs)

    def next_task() -> str | None:
        if out_of_time():
            return None
        try:
            return work.get_nowait()
        except queue.Empty:
            return None

    def prepare(tid: str, gpu: int):
        """Trials of ``tid`` and its shared inputs (a memory file), as background steps (never beside a timed run); runs for
        the next task while the current task's candidates run."""
        ts = time.monotonic()
        seed = seed_of(tid) if seed_of is not None else fresh_seed()
        prep = prepare_pytorch(tasks[tid], seed, n_trials=N_TRIALS, device=f"cuda:{gpu}",
                               step_context=HOST.background)
        with HOST.background():
            prep.inputs_fd()
        return prep, time.monotonic() - ts

    def finish(tid: str, ts: float, left: list[int], *, late: int, n: int = 1) -> None:
        """``n`` of ``tid``'s candidates are over (``late`` of them never started); the task's time once all are."""
        with lock:
            n_late[0] += late
            left[0] -= n
            if left[0] == 0:
                per_task[tid] = time.monotonic() - ts

    def worker(gpu: int) -> None:
        """Tasks one after another on ``gpu``, overlapped: the next task's preparation runs while this one's
        candidates run, and its baseline and candidates start once this task's last candidates hold the runner
        slots, so the GPU does not idle while runners of one task start up or shut down."""
        gpu_lock = threading.Lock()
        load_lock = TurnLock() if prestart and parallel <= 1 else None  # runners load in the order they got ready
        runs = ThreadPoolExecutor(max_workers=1 + settings.prestart_ahead if load_lock is not None
                                  else max(1, parallel),
                                  thread_name_prefix=f"cudaperf-torch-gpu{gpu}")
        ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"cudaperf-torch-prep{gpu}")
        in_flight: list[Future] = []
        tw = time.monotonic()
        try:
            with torch.cuda.device(gpu):
                tid = next_task()
                pending = ahead.submit(prepare, tid, gpu) if tid is not None else None
                while tid is not None and pending is not None:
                    task, task_jobs = tasks[tid], by_task[tid]
                    ts = time.monotonic()
                    nxt: str | None = None
                    fetched = False
                    try:
                        prep, t_prep = pending.result()
                        nxt, fetched = next_task(), True  # its preparation overlaps this task's candidates,
                        # unless this task's tensors leave no room for another's beside them (then it follows)
                        defer = 3 * host_bytes(prep) > mem_available_bytes()
                        pending = ahead.submit(prepare, nxt, gpu) if nxt is not None and not defer else None
                        # the task takes the GPU once one of its candidates is built (in the cache); the others
                        # go on building while it runs, and run in the order they are built
                        ready = builds.in_build_order(tid, task_jobs)
                        first = next(ready)
                        while sum(not f.done() for f in in_flight) > max(1, parallel):
                            time.sleep(0.05)  # the previous task's last candidates hold the runner slots
                        in_flight = [f for f in in_flight if not f.done()]
                        tb = time.monotonic()
                        with gpu_lock:
                            eager = time_reference(prep, min_reps=settings.min_reps, max_reps=settings.max_reps,
                                                   budget_ms=settings.budget_ms, cv_target=settings.cv_target,
                                                   warmup_context=HOST.background, timing_context=HOST.timing)
                            compiled = time_reference(prep, compiled=True, min_reps=settings.min_reps,
                                                      max_reps=settings.max_reps, budget_ms=settings.budget_ms,
                                                      cv_target=settings.cv_target, warmup_context=HOST.background,
                                                      timing_context=HOST.timing) if compile_baseline else None
                    except Exception as exc:  # noqa: BLE001 - the trusted reference failed: nobody's score
                        why = f"the reference or its baseline failed: {type(exc).__name__}: {exc}"[:1000]
                        for j in task_jobs:
                            record(_unscored(task, j, settings, gpu, why))
                        per_task[tid] = time.monotonic() - ts
                        if not fetched:
                            nxt = next_task()
                            pending = ahead.submit(prepare, nxt, gpu) if nxt is not None else None
                        elif pending is None and nxt is not None:  # deferred for its size
                            pending = ahead.submit(prepare, nxt, gpu)
                        tid = nxt
                        continue
                    task_s = {"task_prepare_s": round(t_prep, 4), "task_baselines_s": round(time.monotonic() - tb, 4)}
                    left = [len(task_jobs)]

                    def done(f: Future, tid=tid, ts=ts, task_s=task_s, left=left) -> None:
                        if f.exception() is not None:
                            errors.append(f.exception())
                            return
                        res = f.result()
                        if res is not None:
                            record(replace(res, durations_s={**res.durations_s, **task_s}))
                        finish(tid, ts, left, late=int(res is None))

                    submitted = 0
                    for j in itertools.chain([first], ready):
                        if out_of_time():  # the rest of the task is left for a rerun, built or not
                            break
                        f = runs.submit(run_one, task, j, prepared=prep, gpu_index=gpu, baseline=eager,
                                        compiled_baseline=compiled, gpu_lock=gpu_lock if parallel > 1 else None,
                                        load_lock=load_lock)
                        submitted += 1
                        f.add_done_callback(done)
                        in_flight.append(f)
                    if submitted < len(task_jobs):
                        finish(tid, ts, left, late=len(task_jobs) - submitted, n=len(task_jobs) - submitted)
                    if parallel <= 1 or defer:  # untrusted candidates: nothing of the next task overlaps them
                        for f in in_flight:
                            f.result()
                    if defer and nxt is not None:
                        del prep, eager, compiled
                        pending = ahead.submit(prepare, nxt, gpu)
                    tid = nxt
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
        finally:
            runs.shutdown(wait=True)
            ahead.shutdown(wait=True)
            with lock:
                gpu_busy[0] += time.monotonic() - tw

    threads = [threading.Thread(target=worker, args=(g,), name=f"cudaperf-torch-worker{g}", daemon=True)
               for g in gpus]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    builds.close()
    if errors:
        raise errors[0]
    left = sum(len(by_task[t]) for t in order if t not in per_task) + n_late[0]
    return PyTorchBatchSummary(n_tasks=len(order), n_jobs=len(jobs), n_done=n_done[0],
                               n_skipped=len(jobs) - len(todo), not_started=left,
                               gpu_s=gpu_busy[0], wall_s=time.monotonic() - t0, per_task_s=per_task,
                               n_gpu_runs=n_done[0])


def host_bytes(prep) -> int:
    """Host memory a prepared task holds while its candidates run: the inputs' pack, the expected outputs and
    a run's output memory file (as large as the expected outputs)."""
    return sum(int(getattr(x, "nbytes", 0)) for t in prep.trials for x in t.inputs) + 2 * sum(
        int(getattr(x, "nbytes", 0)) for t in prep.trials for x in t.expected)


def mem_available_bytes() -> int:
    """The kernel's estimate of memory available without swapping (MemAvailable); very large where unknown."""
    from cudaperf.harness.sandbox import meminfo_bytes

    return meminfo_bytes("MemAvailable", 1 << 62)


_MODELNEW = re.compile(r"\bclass\s+ModelNew\b")


def _unscored(task, job, settings: HarnessSettings, gpu: int, why: str) -> EvaluationResult:
    from cudaperf.harness.records import base_result, unscored
    from cudaperf.harness.extract import extract_code

    return unscored(base_result(task, job.candidate_id, extract_code(job.completion).code, settings, gpu), why)
