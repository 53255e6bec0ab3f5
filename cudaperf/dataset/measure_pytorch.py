"""Measure the dataset's PyTorch candidates (fast-path units) on the local GPUs.

Per task, on one GPU: the trusted reference runs the hidden trials (fixed dataset seed), the eager baseline is
timed once (and ``torch.compile``'s when asked), then the task's variants run through the sandboxed runner of
:mod:`cudaperf.harness.run_pytorch`. A runner spends seconds importing torch and making a CUDA context before it
touches the GPU, so ``parallel`` variants of a task start together and take turns on the GPU (a lock per GPU
held for each one's trials and for its timing, re-check and profiled call): the set-up overlaps, the GPU work
never does. That needs trust between the variants (the dataset's own), as ``pipeline_candidates`` does for C.

Builds (sandboxed nvcc, at niceness 19) run ahead of the GPU workers on half the cores. Results go to the same
resumable JSONL store as the C tasks' results.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cudaperf.harness.quiet import HOST
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore

PARALLEL_RUNS = 3
"""Variants of a task whose runner processes start together on one GPU (taking turns on the GPU itself)."""
N_TRIALS = 3


@dataclass(frozen=True)
class TorchMeasureSummary:
    n_tasks: int
    n_candidates: int
    n_done: int
    n_skipped_resumed: int
    not_started: int
    gpu_s: float
    wall_s: float
    per_task_s: dict[str, float]


def measure_pytorch(tasks: dict[str, Any], candidates: Sequence[dict[str, Any]], store: ResultStore, *,
                    settings: HarnessSettings, seed_of: Callable[[str], int], gpus: Sequence[int] | None = None,
                    progress: Callable[[str, int, int], None] | None = None, max_seconds: float | None = None,
                    compile_baseline: bool = False, parallel: int = PARALLEL_RUNS) -> TorchMeasureSummary:
    """Evaluate ``candidates`` (dataset rows of PyTorch tasks, in the order to run their tasks) and append one
    result per candidate to ``store``; candidates with a scored result in the store already are skipped."""
    import torch

    from cudaperf.harness.compile import compile_priority
    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.pytorch_reference import prepare_pytorch, time_reference
    from cudaperf.harness.run_pytorch import evaluate_pytorch
    from cudaperf.harness.torch_fast import build_fast_candidate

    t0 = time.monotonic()
    done = store.done_keys()
    todo = [c for c in candidates if (c["task_id"], c["name"]) not in done]
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in todo:
        by_task[c["task_id"]].append(c)
    order = list(by_task)
    if gpus is None:
        gpus = list(range(gpu_count()))
    if not gpus or not torch.cuda.is_available():
        # Nothing can run: each candidate is still checked and built, and its result says why it is unscored.
        for k, c in enumerate(todo, 1):
            store.append(evaluate_pytorch(tasks[c["task_id"]], c["code"], settings, candidate_id=c["name"]))
            if progress:
                progress("pytorch-run", k, len(todo))
        return TorchMeasureSummary(n_tasks=len(order), n_candidates=len(candidates), n_done=len(todo),
                                   n_skipped_resumed=len(candidates) - len(todo), not_started=0, gpu_s=0.0,
                                   wall_s=time.monotonic() - t0, per_task_s={})

    n_build = max(1, (os.cpu_count() or 2) // 2)
    builds: dict[tuple[str, str], Future] = {}
    n_built = [0]
    lock = threading.Lock()

    def build(code: str):
        with compile_priority(19):
            out = build_fast_candidate(code, arch=settings.arch, flags=settings.nvcc_flags)
        with lock:
            n_built[0] += 1
            if progress:
                progress("pytorch-compile", n_built[0], len(todo))
        return out

    pool = ThreadPoolExecutor(max_workers=n_build, thread_name_prefix="cudaperf-torch-build")
    for t in order:
        for c in by_task[t]:
            builds[(t, c["name"])] = pool.submit(build, c["code"])

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

    def worker(gpu: int) -> None:
        gpu_lock = threading.Lock()
        runs = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix=f"cudaperf-torch-gpu{gpu}")
        try:
            with torch.cuda.device(gpu):
                while True:
                    if max_seconds is not None and time.monotonic() - t0 > max_seconds:
                        return
                    try:
                        tid = work.get_nowait()
                    except queue.Empty:
                        return
                    task, cands = tasks[tid], by_task[tid]
                    for c in cands:
                        builds[(tid, c["name"])].result()  # built (cached) before the task takes the GPU
                    ts = time.monotonic()
                    with HOST.background():
                        prep = prepare_pytorch(task, seed_of(tid), n_trials=N_TRIALS, device=f"cuda:{gpu}")
                    with gpu_lock:
                        eager = time_reference(prep, min_reps=settings.min_reps, max_reps=settings.max_reps,
                                               budget_ms=settings.budget_ms, cv_target=settings.cv_target,
                                               warmup_context=HOST.background, timing_context=HOST.timing)
                        compiled = time_reference(prep, compiled=True, min_reps=settings.min_reps,
                                                  max_reps=settings.max_reps, budget_ms=settings.budget_ms,
                                                  cv_target=settings.cv_target, warmup_context=HOST.background,
                                                  timing_context=HOST.timing) if compile_baseline else None
                    futs = [runs.submit(evaluate_pytorch, task, c["code"], settings, candidate_id=c["name"],
                                        prepared=prep, gpu_index=gpu, baseline=eager, compiled_baseline=compiled,
                                        gpu_lock=gpu_lock) for c in cands]
                    for f in futs:
                        record(f.result())
                    per_task[tid] = time.monotonic() - ts
                    with lock:
                        gpu_busy[0] += per_task[tid]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
        finally:
            runs.shutdown(wait=True)

    threads = [threading.Thread(target=worker, args=(g,), name=f"cudaperf-torch-worker{g}", daemon=True)
               for g in gpus]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    pool.shutdown(wait=False, cancel_futures=True)
    if errors:
        raise errors[0]
    left = sum(len(by_task[t]) for t in order if t not in per_task)
    return TorchMeasureSummary(n_tasks=len(order), n_candidates=len(candidates), n_done=n_done[0],
                               n_skipped_resumed=len(candidates) - len(todo), not_started=left,
                               gpu_s=gpu_busy[0], wall_s=time.monotonic() - t0, per_task_s=per_task)
