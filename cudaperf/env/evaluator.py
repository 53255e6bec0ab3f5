"""Judge many completions at once through the harness's batch executor, with a resumable result store.

A refinement round's completions for all samples are evaluated together: :func:`cudaperf.harness.executor.run_batch`
checks and compiles them in parallel on a CPU pool and runs them one at a time per GPU, preparing each task once
(hidden inputs, reference outputs, the sequential baseline timed once per round). Every result is appended to the
store as it is judged, so a killed run loses nothing already judged; a candidate already in the store is not
judged again.

``compile_only``: extraction, static checks and nvcc only (for machines without a GPU). A candidate that compiles
gets an ``unscored`` result whose message says it was not run; one that does not compile is a scored failure.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from cudaperf.harness.result import EvaluationResult, Stage
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks.schema import Task

class StoreMismatchError(ValueError):
    """The result store holds, under a candidate's key, the result of other code."""


def _code_sha(completion: str) -> str | None:
    """The ``code_sha256`` the harness records for ``completion`` (None: no code in it)."""
    from cudaperf.harness.evaluate import code_sha256
    from cudaperf.harness.extract import extract_code

    code = extract_code(completion).code
    return code_sha256(code) if code is not None else None


COMPILE_ONLY_MESSAGE = "compile-only run: the candidate compiled and was not run (no GPU asked for)"

Item = tuple[str, str, str]
"""(task_id, candidate_id, completion)."""


class Evaluator:
    def __init__(self, tasks: Iterable[Task], store: str | Path | ResultStore, *,
                 settings: HarnessSettings | None = None, compile_only: bool = False,
                 gpus: Sequence[int] | None = None, compile_workers: int | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> None:
        self.tasks: dict[str, Task] = {t.id: t for t in tasks}
        self.store = store if isinstance(store, ResultStore) else ResultStore(store)
        self.store.check_writable()
        self.settings = settings or HarnessSettings()
        self.compile_only = compile_only
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
            if self.compile_only:
                self._compile_only(todo)
            else:
                from cudaperf.harness.executor import Job, run_batch

                jobs = [Job(task_id=t, candidate_id=c, completion=comp) for t, c, comp in todo]
                run_batch([self.tasks[t] for t in sorted({j.task_id for j in jobs})], jobs, self.store,
                          settings=self.settings, gpus=self.gpus, compile_workers=self.compile_workers,
                          progress=self.progress)
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
        return r.status == "scored" or (self.compile_only and r.failure is not None
                                        and r.failure.message.startswith("compile-only run:"))

    def _compile_only(self, items: Sequence[Item]) -> None:
        from cudaperf.harness.compile import ToolchainError
        from cudaperf.harness.evaluate import base_result, build_candidate, check_candidate, compile_failure, unscored

        done = [0]
        lock = threading.Lock()

        def one(item: Item) -> None:
            tid, cid, completion = item
            task = self.tasks[tid]
            if getattr(task, "kind", None) == "pytorch":
                res = self._pytorch_compile_only(task, cid, completion)
            else:
                checked = check_candidate(task, completion, cid, self.settings)
                if checked.result is not None:
                    res = checked.result
                else:
                    base = replace(base_result(task, cid, checked.code, self.settings, None), stage=Stage.CHECKED)
                    try:
                        build = build_candidate(task, checked.code, self.settings)
                    except ToolchainError as exc:
                        res = unscored(base, f"ToolchainError: {exc}")
                    else:
                        base = replace(base, compile=build.info, static_check_reasons=build.reasons,
                                       durations_s={"compile_s": build.info.seconds})
                        if build.stage != "ok":
                            res = replace(base, failure=compile_failure(build, task))
                        else:
                            res = unscored(replace(base, stage=Stage.COMPILED), COMPILE_ONLY_MESSAGE)
            self.store.append(res)
            with lock:
                done[0] += 1
                n = done[0]
            if self.progress:
                self.progress("compile", n, len(items))

        workers = self.compile_workers or max(1, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, items))

    def _pytorch_compile_only(self, task, cid: str, completion: str) -> EvaluationResult:
        from cudaperf.harness.evaluate import base_result, unscored
        from cudaperf.harness.extract import extract_code
        from cudaperf.harness.run_pytorch import check_and_build

        code = extract_code(completion).code
        res, finished, modelnew, _ = check_and_build(task, code, base_result(task, cid, code, self.settings, None),
                                                     self.settings)
        if finished:
            return res
        if modelnew:
            return unscored(res, COMPILE_ONLY_MESSAGE.replace("compiled", "passed the static checks"))
        return unscored(res, COMPILE_ONLY_MESSAGE)
