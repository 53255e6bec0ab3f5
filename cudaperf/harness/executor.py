"""Batch evaluation over all visible GPUs.

A CPU pool checks and compiles candidates task by task (nvcc runs in the sandbox, in parallel); by default the
GPUs start on the first built task while later tasks still compile, with nvcc at the lowest CPU priority. One
worker per GPU takes one task at a time, prepared ahead by a CPU thread (hidden inputs, reference outputs), times
its sequential baseline just before the task's candidates and evaluates them on its GPU one at a time, so timing
never shares a GPU (nor the host with background preparation: see ``quiet.py``). Every candidate run is a fresh
sandboxed process pinned with CUDA_VISIBLE_DEVICES: a CUDA error, a hang or a crash ends that process only, so the
worker needs no respawn and nothing leaks into the next evaluation. Results are appended to a
:class:`ResultStore` as they complete; a rerun resumes.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cudaperf.harness.compile import BuildOutcome, ToolchainError, compile_priority
from cudaperf.harness.environment import gpu_count
from cudaperf.harness.evaluate import (
    build_candidate,
    check_candidate,
    compile_failure,
    evaluate,
    evaluate_c_function_group,
    finish_preparation,
    prepare_task,
    unscored,
    base_result,
)
from cudaperf.harness.result import EvaluationResult, Stage
from cudaperf.harness.run_c_function import HarnessError, PreparedCFunction
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks.schema import CFunctionTask, Task


@dataclass(frozen=True)
class Job:
    """One candidate for one task: a model completion or a bare CUDA source."""

    task_id: str
    candidate_id: str
    completion: str


@dataclass(frozen=True)
class BatchSummary:
    n_jobs: int
    n_skipped: int
    """Already in the store (scored): not redone."""
    n_compiled: int
    """Candidates that went through nvcc in this run (cache hits included)."""
    compile_wall_s: float
    run_wall_s: float
    n_run: int
    """Candidates that reached a GPU run."""
    gpus: tuple[int, ...]
    results: tuple[EvaluationResult, ...] = field(repr=False, default=())
    n_not_started: int = 0
    """Candidates left for a rerun because ``max_seconds`` ran out."""
    pytorch: Any = None
    """:class:`~cudaperf.harness.batch_pytorch.PyTorchBatchSummary` when the batch had PyTorch tasks."""

    def plus(self, other: "BatchSummary") -> "BatchSummary":
        """Two batches run one after the other, as one summary."""
        return BatchSummary(n_jobs=self.n_jobs + other.n_jobs, n_skipped=self.n_skipped + other.n_skipped,
                            n_compiled=self.n_compiled + other.n_compiled,
                            compile_wall_s=self.compile_wall_s + other.compile_wall_s,
                            run_wall_s=self.run_wall_s + other.run_wall_s, n_run=self.n_run + other.n_run,
                            gpus=self.gpus or other.gpus, results=self.results + other.results,
                            n_not_started=self.n_not_started + other.n_not_started,
                            pytorch=self.pytorch if self.pytorch is not None else other.pytorch)

    @property
    def compile_per_min(self) -> float:
        return 60 * self.n_compiled / self.compile_wall_s if self.compile_wall_s > 0 else 0.0

    @property
    def run_per_min(self) -> float:
        return 60 * self.n_run / self.run_wall_s if self.run_wall_s > 0 else 0.0


ProgressFn = Callable[[str, int, int], None]


def run_batch(
    tasks: Sequence[Task],
    jobs: Sequence[Job],
    store: ResultStore | str | Path,
    *,
    settings: HarnessSettings | None = None,
    gpus: Sequence[int] | None = None,
    compile_workers: int | None = None,
    progress: ProgressFn | None = None,
    prepare_ahead: int = 1,
    prepare_workers: int = 1,
    seed_of: Callable[[str], int] | None = None,
    max_seconds: float | None = None,
    overlap_compile: bool = True,
    compile_baseline: bool = False,
) -> BatchSummary:
    """Evaluate ``jobs``; append each result to ``store`` as it completes; skip jobs already scored there.

    ``prepare_ahead``: tasks prepared on CPU threads while the GPUs run candidates (0: prepare in the GPU worker,
    nothing overlaps); ``prepare_workers``: threads preparing. Each prepared task holds its inputs and expected
    outputs in memory, so this bounds memory as well. ``seed_of(task_id)``: the seed of a task's hidden inputs
    (default: a fresh one per task and run). ``max_seconds``: start no new candidate after this long (counted
    from the call); what did not run stays out of the store, so a rerun resumes there. ``overlap_compile``: run
    the first tasks on the GPUs while later ones still compile (nvcc niced and stopped while anything is timed;
    default ``compile_workers``: the cores less two per GPU); False: compile everything first, on all cores.

    PyTorch tasks' jobs run after the others, through :func:`cudaperf.harness.batch_pytorch.run_pytorch_batch`
    (their builds start first, on half the cores, and go on while the others run)
    (against the eager baseline; ``compile_baseline`` also times ``torch.compile``'s; with
    ``settings.pipeline_candidates``, trusted candidates of a task start their runners together).
    ``settings.exclusive_timing``: one timed window at a time across the GPUs (:mod:`cudaperf.harness.quiet`).
    """
    from cudaperf.harness.quiet import HOST

    settings = settings or HarnessSettings()
    with HOST.exclusive_mode(settings.exclusive_timing):
        return _run_batch(tasks, jobs, store, settings=settings, gpus=gpus, compile_workers=compile_workers,
                          progress=progress, prepare_ahead=prepare_ahead, prepare_workers=prepare_workers,
                          seed_of=seed_of, max_seconds=max_seconds, overlap_compile=overlap_compile,
                          compile_baseline=compile_baseline)


def _run_batch(tasks, jobs, store, *, settings: HarnessSettings, gpus, compile_workers, progress, prepare_ahead,
               prepare_workers, seed_of, max_seconds, overlap_compile, compile_baseline) -> BatchSummary:
    store = store if isinstance(store, ResultStore) else ResultStore(store)
    store.check_writable()  # a wrong --store fails here, before anything runs (StoreFormatError: a ValueError)
    by_id = {t.id: t for t in tasks}
    missing = sorted({j.task_id for j in jobs} - set(by_id))
    if missing:
        raise ValueError(f"jobs name unknown tasks: {missing[:5]}")
    keys = [(j.task_id, j.candidate_id) for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("two jobs share a (task_id, candidate_id) key")
    torch_jobs = [j for j in jobs if getattr(by_id[j.task_id], "kind", None) == "pytorch"]
    if torch_jobs:  # PyTorch tasks: their own per-GPU path (cudaperf.harness.batch_pytorch), after the C tasks
        from cudaperf.harness.batch_pytorch import run_pytorch_batch

        t_all = time.monotonic()
        c_jobs = [j for j in jobs if getattr(by_id[j.task_id], "kind", None) != "pytorch"]
        builds = None
        if c_jobs and (gpu_count() if gpus is None else len(gpus)):
            # the PyTorch candidates build (paused while anything is timed) while the C tasks run
            from cudaperf.harness.batch_pytorch import PyTorchBuilds

            done = store.done_keys()
            builds = PyTorchBuilds([j for j in torch_jobs if (j.task_id, j.candidate_id) not in done], settings,
                                   progress=progress)
        try:
            first = run_batch([t for t in tasks if getattr(t, "kind", None) != "pytorch"], c_jobs, store,
                              settings=settings, gpus=gpus, compile_workers=compile_workers, progress=progress,
                              prepare_ahead=prepare_ahead, prepare_workers=prepare_workers, seed_of=seed_of,
                              max_seconds=max_seconds, overlap_compile=overlap_compile) if c_jobs else None
        except BaseException:
            if builds is not None:
                builds.close()
            raise
        left = None if max_seconds is None else max(0.0, max_seconds - (time.monotonic() - t_all))
        pt = run_pytorch_batch(by_id, torch_jobs, store, settings=settings, seed_of=seed_of, gpus=gpus,
                               progress=progress, max_seconds=left, compile_baseline=compile_baseline,
                               parallel=max(1, settings.pytorch_runners) if settings.pipeline_candidates else 1,
                               prestart=settings.prestart_runners, builds=builds)
        latest = store.latest()
        pt_results = tuple(latest[(j.task_id, j.candidate_id)] for j in torch_jobs
                           if (j.task_id, j.candidate_id) in latest)
        pt_summary = BatchSummary(n_jobs=len(torch_jobs), n_skipped=pt.n_skipped, n_compiled=pt.n_done,
                                  compile_wall_s=0.0, run_wall_s=pt.wall_s if pt.n_gpu_runs else 0.0,
                                  n_run=pt.n_gpu_runs,
                                  gpus=tuple(range(gpu_count())) if gpus is None else tuple(gpus),
                                  results=pt_results, n_not_started=pt.not_started, pytorch=pt)
        return pt_summary if first is None else first.plus(pt_summary)
    t_call = time.monotonic()
    out_of_time = lambda: max_seconds is not None and time.monotonic() - t_call > max_seconds  # noqa: E731
    done = store.done_keys()
    todo = [j for j in jobs if (j.task_id, j.candidate_id) not in done]
    gpus = tuple(range(gpu_count())) if gpus is None else tuple(gpus)
    results: list[EvaluationResult] = []
    lock = threading.Lock()

    def emit(r: EvaluationResult) -> None:
        store.append(r)
        with lock:
            results.append(r)

    # Compilation: static checks and nvcc on a CPU pool, task by task in job order. With ``overlap_compile`` the
    # GPUs start on the first task whose candidates are built while later tasks still compile (nvcc at the
    # lowest CPU priority, on the cores the GPU workers leave); otherwise everything is built first.
    t0 = time.monotonic()
    builds: dict[tuple[str, str], tuple[str, BuildOutcome]] = {}
    n_cpu = max(1, os.cpu_count() or 1)
    # Overlapped compiles are paused while anything is timed (cudaperf.harness.quiet), so they may use every
    # core the GPU workers leave; without pausing, half the cores at the lowest priority.
    if overlap_compile:
        from cudaperf.harness.quiet import HOST

        spare = n_cpu - 2 * max(1, len(gpus)) if HOST.pause_processes else n_cpu // 2 - max(1, len(gpus))
        workers = compile_workers or max(1, spare)
    else:
        workers = compile_workers or n_cpu
    nice = 19 if overlap_compile else 0

    def compile_one(job: Job):
        task = by_id[job.task_id]
        checked = check_candidate(task, job.completion, job.candidate_id, settings)
        if checked.result is not None:
            return job, checked.result, None
        try:
            with compile_priority(nice):
                return job, None, (checked.code, build_candidate(task, checked.code, settings))
        except ToolchainError as exc:
            base = replace(base_result(task, job.candidate_id, checked.code, settings, None), stage=Stage.CHECKED)
            return job, unscored(base, f"ToolchainError: {exc}"), None

    per_task: dict[str, list[Job]] = defaultdict(list)
    for j in todo:
        per_task[j.task_id].append(j)
    pool = ThreadPoolExecutor(max_workers=workers)
    compiled = [0, 0]  # candidates through nvcc, candidates through the compile step (both as collected)
    compile_done = [t0, 0]  # when the last compile step finished, how many have finished

    def compiled_one(fut) -> None:
        if fut.cancelled():  # left for a rerun (time limit)
            return
        with lock:
            compile_done[0] = time.monotonic()
            compile_done[1] += 1
            n = compile_done[1]
        if progress:
            progress("compile", n, len(todo))

    futures = {tid: [pool.submit(compile_one, j) for j in tjobs] for tid, tjobs in per_task.items()}
    for fs in futures.values():
        for f in fs:
            f.add_done_callback(compiled_one)

    def collect(tid: str) -> list[Job]:
        """Wait for one task's builds; record the compile-stage results; the jobs left to run."""
        runnable = []
        for fut in futures[tid]:
            job, final, built = fut.result()
            with lock:
                compiled[1] += 1
            if final is not None:
                emit(final)
            else:
                with lock:
                    compiled[0] += 1
                code, build = built
                if build.stage != "ok":
                    task = by_id[job.task_id]
                    base = replace(base_result(task, job.candidate_id, code, settings, None), stage=Stage.CHECKED,
                                   compile=build.info, static_check_reasons=build.reasons)
                    emit(replace(base, failure=compile_failure(build, task),
                                 durations_s={"compile_s": build.info.seconds}))
                else:
                    with lock:
                        builds[(job.task_id, job.candidate_id)] = (code, build)
                    runnable.append(job)
        return runnable

    ready_jobs: dict[str, list[Job]] = {}
    if not overlap_compile:
        for tid in per_task:
            ready_jobs[tid] = collect(tid)

    t1 = time.monotonic()
    work: queue.Queue[str] = queue.Queue()
    for tid in per_task:
        work.put(tid)
    counter = [0]

    def jobs_of(tid: str) -> list[Job]:
        return ready_jobs[tid] if tid in ready_jobs else collect(tid)

    def n_total() -> int:
        with lock:
            return len(todo) - (compiled[1] - len(builds))

    def run_task(task: Task, task_jobs: list[Job], gpu: int | None, prepared, prep_error: str | None) -> None:
        if prep_error is None and prepared is not None:
            try:
                prepared = finish_preparation(prepared, settings, gpu)  # the baseline, timed on a quiet host
            except (HarnessError, ToolchainError, OSError) as exc:
                prep_error = f"{type(exc).__name__}: {exc}"
        if (prep_error is None and isinstance(task, CFunctionTask) and isinstance(prepared, PreparedCFunction)
                and (settings.timing_rounds > 1 or settings.pipeline_candidates or settings.overlap_judging
                     or settings.overlap_runs)):
            # the task's candidates in one group: pipelined (one window each) or interleaved (timing_rounds > 1)
            items = [(j.candidate_id, *builds[(j.task_id, j.candidate_id)]) for j in task_jobs]
            try:
                group = evaluate_c_function_group(task, items, prepared, settings, gpu, should_stop=out_of_time)
            except (HarnessError, ToolchainError, OSError) as exc:
                prep_error = f"{type(exc).__name__}: {exc}"
            else:
                for r in group:
                    emit(r)
                    with lock:
                        counter[0] += 1
                        n = counter[0]
                    if progress:
                        progress("run", n, n_total())
                return
        for job in task_jobs:
            if out_of_time():
                return
            code, build = builds[(job.task_id, job.candidate_id)]
            if prep_error is not None:
                base = replace(base_result(task, job.candidate_id, code, settings, gpu), stage=Stage.COMPILED,
                               compile=build.info)
                emit(unscored(base, prep_error))
            else:
                emit(evaluate(task, job.completion, settings=settings, candidate_id=job.candidate_id,
                              prepared=prepared, build=build, gpu_index=gpu))
            with lock:
                counter[0] += 1
                n = counter[0]
            if progress:
                progress("run", n, n_total())

    # Tasks are prepared (hidden inputs, reference outputs) on CPU threads ahead of the GPU workers, at most
    # ``prepare_ahead`` waiting at a time, so the GPUs do not idle while the reference runs. The sequential
    # baseline is timed by the GPU worker just before the task's candidates. Timing runs and background
    # preparation never overlap (cudaperf.harness.quiet), so preparation does not disturb the measurements.
    # With prepare_ahead=0 each GPU worker prepares its own task just before running it.
    # Preparation comes in bursts: once the queue runs down to one task per GPU, the producers fill it up, in
    # parallel, to ``prepare_ahead``, then rest. Timing waits while background work runs, so a burst (short,
    # spread over ``prepare_workers`` cores) costs the GPUs far less than one preparation beside every task.
    # With ``settings.burst_preparation`` a burst is also an urgent period (cudaperf.harness.quiet): the GPU workers
    # open no new timing window until it ends, so that it runs at once instead of waiting for every GPU to be
    # between tasks. A burst starts only while a producer is alive to end it.
    ready: queue.Queue = queue.Queue(maxsize=max(1, prepare_ahead))
    gate = threading.Condition()
    burst = [False]
    urgent_on = [False]
    alive = [0]  # producers running
    low_water = max(1, len(gpus))

    def set_burst(on: bool) -> None:  # with ``gate`` held
        burst[0] = on
        if settings.burst_preparation and on != urgent_on[0]:
            from cudaperf.harness.quiet import HOST

            (HOST.begin_urgent if on else HOST.end_urgent)()
            urgent_on[0] = on
        gate.notify_all()

    def taken() -> None:
        with gate:
            if not burst[0] and alive[0] > 0 and not work.empty() and ready.qsize() <= low_water:
                set_burst(True)

    def prepare_one(tid: str):
        try:
            seed = seed_of(tid) if seed_of is not None else None
            return prepare_task(by_id[tid], settings, seed, defer_baseline=True), None
        except (HarnessError, ToolchainError, OSError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    def prepare(tid: str):
        # A c_function task's preparation (hidden inputs, reference outputs on the CPU; its baseline is timed
        # later, by the GPU worker) runs while its candidates still compile on the pool, and is dropped when none
        # of them compiled. Other kinds time their baseline while preparing: after the compiles.
        early = bool(gpus) and isinstance(by_id[tid], CFunctionTask)
        prep, err = prepare_one(tid) if early else (None, None)
        task_jobs = jobs_of(tid)
        if not gpus or not task_jobs:
            return tid, task_jobs, None, None
        if not early:
            prep, err = prepare_one(tid)
        return tid, task_jobs, prep, err

    stop = threading.Event()
    errors: list[BaseException] = []

    def put(item) -> None:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def worker(gpu: int | None) -> None:
        try:
            _worker(gpu)
        except BaseException as exc:  # a programming error: stop everything, re-raised below
            errors.append(exc)
            stop.set()

    def _worker(gpu: int | None) -> None:
        if prepare_ahead <= 0:
            while True:
                try:
                    tid = work.get_nowait()
                except queue.Empty:
                    return
                if out_of_time():
                    return
                _, task_jobs, prep, err = prepare(tid)
                if task_jobs:
                    run_task(by_id[tid], task_jobs, gpu, prep, err)
        while True:
            try:
                item = ready.get(timeout=0.5)
            except queue.Empty:
                if stop.is_set():
                    return
                continue
            if item is None:
                put(None)  # let the other workers see the end too
                return
            taken()
            tid, task_jobs, prep, err = item
            if task_jobs:
                run_task(by_id[tid], task_jobs, gpu, prep, err)

    producers = []
    if prepare_ahead > 0:
        n_prod = max(1, min(prepare_workers, len(per_task)))
        with gate:
            alive[0] = n_prod
            set_burst(True)  # the first burst fills the queue

        def producer_wrapper() -> None:
            # only the last producer to finish posts the end marker (and ends a burst still on); a programming
            # error stops the batch and is re-raised, as a worker's is
            last = False
            try:
                while True:
                    with gate:  # rest between bursts; with nothing left to prepare, go and post the end
                        while not burst[0] and not work.empty() and not stop.is_set() and not out_of_time():
                            gate.wait(timeout=0.5)
                    try:
                        tid = work.get_nowait()
                    except queue.Empty:
                        break
                    if stop.is_set():
                        return
                    if out_of_time():
                        break
                    put(prepare(tid))
                    with gate:
                        if burst[0] and ready.qsize() >= prepare_ahead:
                            set_burst(False)
            except BaseException as exc:
                errors.append(exc)
                stop.set()
            finally:
                with gate:
                    alive[0] -= 1
                    last = alive[0] == 0
                    if last:
                        set_burst(False)
            if last and not stop.is_set():
                put(None)

        producers = [threading.Thread(target=producer_wrapper, daemon=True) for _ in range(n_prod)]
        for t in producers:
            t.start()
    threads = [threading.Thread(target=worker, args=(g,), daemon=True) for g in (gpus or (None,))]
    for t in threads:
        t.start()
    try:
        for t in threads + producers:
            t.join()
    finally:
        with gate:
            if urgent_on[0]:  # a producer that died mid-burst (its error is re-raised below)
                set_burst(False)
        pool.shutdown(wait=True, cancel_futures=True)
    if errors:
        raise errors[0]
    run_wall = time.monotonic() - t1
    return BatchSummary(n_jobs=len(jobs), n_skipped=len(jobs) - len(todo), n_compiled=compiled[0],
                        compile_wall_s=compile_done[0] - t0, run_wall_s=run_wall, n_run=counter[0], gpus=gpus,
                        results=tuple(results), n_not_started=len(todo) - len(results))
