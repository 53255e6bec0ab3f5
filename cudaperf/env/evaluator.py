"""Judge many completions at once through the harness's batch executor, with a resumable result store.

A refinement round's completions for all samples are evaluated together: :func:`cudaperf.harness.executor.run_batch`
checks and compiles them in parallel on a CPU pool and runs them one at a time per GPU, preparing each task once
(hidden inputs, reference outputs, the sequential baseline timed once per round). Every result is appended to the
store as it is judged, so a killed run loses nothing already judged; a candidate already in the store is not
judged again.

``compile_only``: extraction, static checks and nvcc only (for machines without a GPU). A candidate that compiles
gets an ``unscored`` result whose message says it was not run; one that does not compile is a scored failure.
``executor``: where the batch is judged (:mod:`cudaperf.harness.executors`: ``local``, ``compile-only``, ``ray``...;
an :class:`~cudaperf.harness.executors.Executor` or its spec); ``compile_only`` is ``executor="compile-only"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Sequence

from cudaperf.harness.executors import COMPILE_ONLY_MESSAGE, Executor, make_executor
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks.schema import Task

class StoreMismatchError(ValueError):
    """The result store holds, under a candidate's key, the result of other code."""


def _code_sha(completion: str) -> str | None:
    """The ``code_sha256`` the harness records for ``completion`` (None: no code in it)."""
    from cudaperf.harness.records import code_sha256
    from cudaperf.harness.extract import extract_code

    code = extract_code(completion).code
    return code_sha256(code) if code is not None else None


__all__ = ["COMPILE_ONLY_MESSAGE", "Evaluator", "StoreMismatchError"]

Item = tuple[str, str, str]
"""(task_id, candidate_id, completion)."""


class Evaluator:
    def __init__(self, tasks: Iterable[Task], store: str | Path | ResultStore, *,
                 settings: HarnessSettings | None = None, compile_only: bool = False,
                 gpus: Sequence[int] | None = None, compile_workers: int | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 executor: Executor | str | None = None) -> None:
        self.tasks: dict[str, Task] = {t.id: t for t in tasks}
        self.store = store if isinstance(store, ResultStore) else ResultStore(store)
        self.store.check_writable()
        self.settings = settings or HarnessSettings()
        self.executor = make_executor(executor, compile_only=compile_only, gpus=gpus, compile_workers=compile_workers)
        self.compile_only = self.executor.compile_only
        self.gpus = gpus
        self.compile_workers = compile_workers
        self.progress = progress
        self.n_judged = 0
        """Candidates this evaluator sent through the harness (not those found in the store)."""
        self.judge_wall_s = 0.0

    def evaluate(self, items: Sequence[Item], *, reuse_any: Iterable[tuple[str, str]] = ()) -> list[EvaluationResult]:
        """One result per item, in order. Items whose key is in the store as scored are not judged again; keys in
        ``reuse_any`` (turns already recorded) reuse whatever the store holds for them, unscored included, so a
        resumed run replays exactly what it recorded."""
        import time

        unknown = sorted({tid for tid, _, _ in items} - set(self.tasks))
        if unknown:
            raise ValueError(f"completions for unknown tasks: {unknown[:5]}")
        latest = self.store.latest()
        reuse = set(reuse_any)
        # A stored result stands for a completion only when it judged the same code: a store edited, or left by
        # another run, cannot lend its verdict (or its speedup) to an answer it never saw.
        codes = {(t, c): _code_sha(comp) for t, c, comp in items}
        foreign = [k for k, sha in codes.items() if k in latest and latest[k].code_sha256 != sha]
        if foreign:
            raise StoreMismatchError(f"{self.store.path} holds results of other code for {foreign[:3]} (of "
                                     f"{len(foreign)}): it belongs to another run; give the run its own directory")
        todo = [it for it in items
                if (it[0], it[1]) not in latest
                or (not self._final(latest[(it[0], it[1])]) and (it[0], it[1]) not in reuse)]
        if todo:
            t0 = time.monotonic()
            from cudaperf.harness.executor import Job

            jobs = [Job(task_id=t, candidate_id=c, completion=comp) for t, c, comp in todo]
            self.executor.evaluate([self.tasks[t] for t in sorted({j.task_id for j in jobs})], jobs, self.store,
                                   settings=self.settings, progress=self.progress)
            self.judge_wall_s += time.monotonic() - t0
            self.n_judged += len(todo)
            latest = self.store.latest()
        missing = [(t, c) for t, c, _ in items if (t, c) not in latest]
        if missing:
            raise RuntimeError(f"the harness returned no result for {missing[:3]} (of {len(missing)})")
        return [latest[(t, c)] for t, c, _ in items]

    def _final(self, r: EvaluationResult) -> bool:
        """A stored result that is not judged again: scored ones, and a compile-only run's own "not run" verdicts
        (a harness fault, unscored, is retried)."""
        return self.executor.final(r)

    def close(self) -> None:
        """Release the executor (a Ray connection it opened)."""
        self.executor.close()
