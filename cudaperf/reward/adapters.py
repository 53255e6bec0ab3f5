"""Trainer adapters: reward functions with TRL's signature and a verl ``compute_score``.

One :class:`HarnessRewards` object serves every reward term of a trainer process. It evaluates each
(task, code) once, memoised by the task id and the sha256 of the extracted code, and concurrent requests for the
same key wait for the one evaluation in flight. Candidates are checked and compiled in parallel and run one at a
time per visible GPU, so their timings never share a GPU. TRL calls each reward function with
``(prompts, completions, completion_ids, **dataset_columns)``; the dataset must have a ``task_id`` column. A
harness fault gives ``None`` for that sample (TRL leaves it out), never 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Mapping, Sequence

from cudaperf.harness.compile import ToolchainError
from cudaperf.harness.environment import gpu_count
from cudaperf.harness.evaluate import build_candidate, check_candidate, evaluate, prepare_task
from cudaperf.harness.extract import extract_code
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.settings import HarnessSettings
from cudaperf.reward.composite import RewardBreakdown, RewardSettings, reward
from cudaperf.reward.terms import StructuralScore
from cudaperf.tasks.schema import Task

Evaluator = Callable[[Task, str], EvaluationResult]


def completion_text(c: Any) -> str:
    """TRL passes plain strings, or conversations (a list of {"role", "content"} messages): the last message's
    content is the completion."""
    if isinstance(c, str):
        return c
    if isinstance(c, Sequence) and c and isinstance(c[-1], Mapping):
        return str(c[-1].get("content", ""))
    raise TypeError(f"cannot read a completion from {type(c).__name__}")


class HarnessRewards:
    def __init__(self, tasks: Sequence[Task] | Mapping[str, Task], *, settings: RewardSettings = RewardSettings(),
                 structural: StructuralScore | None = None, harness: HarnessSettings | None = None,
                 evaluator: Evaluator | None = None, max_workers: int = 8, cache_size: int = 50_000) -> None:
        self.tasks = dict(tasks) if isinstance(tasks, Mapping) else {t.id: t for t in tasks}
        self.settings = settings
        self.structural = structural
        self.harness = harness or HarnessSettings()
        self._evaluator = evaluator or self._evaluate
        self._prepared: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], EvaluationResult] = OrderedDict()
        self._inflight: dict[tuple[str, str], Future] = {}
        self._pool = ThreadPoolExecutor(max_workers=max_workers)
        gpus: list[int | None] = list(range(gpu_count())) or [None]
        self._gpu_locks = {g: threading.Lock() for g in gpus}
        self._gpu_cycle = itertools.cycle(gpus)
        self.cache_size = cache_size
        self.evaluations = 0
        """How many harness evaluations ran (cache misses)."""
        self.log: list[dict[str, Any]] = []
        """One breakdown per (task, completion) scored, in order (for logging)."""

    # -- evaluation, memoised --------------------------------------------------------------------------------
    def _evaluate(self, task: Task, completion: str) -> EvaluationResult:
        """Check and compile in parallel (the pool's threads); run one candidate at a time per GPU, GPUs taken
        round-robin, so timed runs never share a GPU."""
        if task.kind == "pytorch":
            return self._evaluate_pytorch(task, completion)
        with self._lock:
            prep = self._prepared.get(task.id)
        if prep is None and task.kind != "cuda_kernel":
            prep = prepare_task(task, self.harness)
            with self._lock:
                prep = self._prepared.setdefault(task.id, prep)
        checked = check_candidate(task, completion, "reward", self.harness)
        build = None
        if checked.result is None:
            try:
                build = build_candidate(task, checked.code, self.harness)
            except ToolchainError:
                build = None  # evaluate() meets the same fault and reports it unscored
        with self._lock:
            gpu = next(self._gpu_cycle)
        with self._gpu_locks[gpu]:
            return evaluate(task, completion, settings=self.harness, prepared=prep, build=build, gpu_index=gpu)

    def _evaluate_pytorch(self, task, completion: str) -> EvaluationResult:
        """A PyTorch task: the fast path's build happens inside evaluate(); the trials are drawn once per task
        (on the GPU, when there is one) and reused."""
        prep = None
        if gpu_count() > 0:
            from cudaperf.harness.pytorch_reference import prepare_pytorch
            from cudaperf.tasks.inputs import fresh_seed

            with self._lock:
                prep = self._prepared.get(task.id)
            if prep is None:
                prep = prepare_pytorch(task, fresh_seed(), device="cuda")
                with self._lock:
                    prep = self._prepared.setdefault(task.id, prep)
        with self._lock:
            gpu = next(self._gpu_cycle)
        with self._gpu_locks[gpu]:
            return evaluate(task, completion, settings=self.harness, prepared=prep, gpu_index=gpu)

    @staticmethod
    def key(task_id: str, completion: str) -> tuple[str, str]:
        code = extract_code(completion).code
        return task_id, hashlib.sha256((code if code is not None else "\0" + completion).encode()).hexdigest()

    def result(self, task_id: str, completion: str) -> EvaluationResult:
        if task_id not in self.tasks:
            raise KeyError(f"unknown task_id {task_id!r}: the reward's task set has no such task")
        k = self.key(task_id, completion)
        with self._lock:
            if k in self._cache:
                self._cache.move_to_end(k)
                return self._cache[k]
            fut = self._inflight.get(k)
            owner = fut is None
            if owner:
                fut = Future()
                self._inflight[k] = fut
        if not owner:
            return fut.result()
        try:
            res = self._evaluator(self.tasks[task_id], completion)
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(k, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self.evaluations += 1
            self._cache[k] = res
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            self._inflight.pop(k, None)
        fut.set_result(res)
        return res

    def breakdowns(self, completions: Sequence[Any], task_ids: Sequence[str]) -> list[RewardBreakdown]:
        texts = [completion_text(c) for c in completions]
        results = list(self._pool.map(lambda a: self.result(*a), zip(task_ids, texts)))
        out = [reward(self.tasks[t], c, r, self.settings, self.structural) for t, c, r in zip(task_ids, texts, results)]
        self.log.extend({"task_id": t, **b.to_dict()} for t, b in zip(task_ids, out))
        return out

    # -- TRL reward functions --------------------------------------------------------------------------------
    def _task_ids(self, n: int, columns: Mapping[str, Any]) -> list[str]:
        ids = columns.get("task_id")
        if ids is None:
            raise KeyError("the training dataset needs a 'task_id' column for cudaperf's reward functions")
        ids = list(ids)
        if len(ids) != n:
            raise ValueError(f"{n} completions but {len(ids)} task ids")
        return ids

    def _term(self, name: str) -> Callable[..., list[float | None]]:
        def fn(prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
            bds = self.breakdowns(completions, self._task_ids(len(completions), columns))
            if name == "total":
                return [b.total for b in bds]
            if name == "ver":
                return [b.terms.get("ver") for b in bds]
            # the structural term counts only where the sample is scored, so ver + str sums to total
            return [None if b.total is None else b.terms.get("str") for b in bds]

        fn.__name__ = f"cudaperf_{name}"
        return fn

    def total(self) -> Callable[..., list[float | None]]:
        """One reward function returning the preset's total."""
        return self._term("total")

    def functions(self) -> list[Callable[..., list[float | None]]]:
        """The preset's terms as separate reward functions (TRL sums them and logs each): [ver] or [ver, str]."""
        if self.settings.preset == "verifiable":
            return [self._term("ver")]
        return [self._term("ver"), self._term("str")]

    def async_total(self) -> Callable[..., Any]:
        """An ``async def`` reward function (TRL awaits async rewards together)."""
        sync = self._term("total")

        async def fn(prompts=None, completions=None, completion_ids=None, **columns):
            return await asyncio.to_thread(sync, prompts, completions, completion_ids, **columns)

        fn.__name__ = "cudaperf_total_async"
        return fn


class UnscoredError(RuntimeError):
    """The harness could not judge this sample (verl has no 'no reward' value)."""


def verl_compute_score(rewards: HarnessRewards, *, on_unscored: str = "raise") -> Callable[..., dict[str, Any]]:
    """A verl ``compute_score(data_source, solution_str, ground_truth, extra_info=None)``; ``ground_truth`` is the
    task id. Returns {"score": total, ...terms}. An unscored sample raises :class:`UnscoredError`
    (``on_unscored="nan"``: score NaN instead) rather than pretend 0."""

    def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> dict[str, Any]:
        b = rewards.breakdowns([solution_str], [str(ground_truth)])[0]
        if b.total is None:
            if on_unscored == "nan":
                return {"score": float("nan"), "unscored": True}
            raise UnscoredError(f"task {ground_truth}: the harness could not score this sample")
        return {"score": b.total, **{f"r_{k}": (v if v is not None else float("nan")) for k, v in b.terms.items()}}

    return compute_score
