"""The evaluation loop behind ``cudaperf eval``: a policy, a task set, N samples, T refinement turns, a run directory.

Per turn: the prompts of every trajectory still going are built (:mod:`cudaperf.env.prompt`), the policy answers
them in chunks (each answer appended to ``generations.jsonl`` as its chunk completes), the answers are judged
together through the harness's executor (each result appended to ``results.jsonl``), and the turn's records are
appended to ``turns.jsonl``. The summaries of the trajectories that go on are policy calls too, cached the same
way.

Resuming: a killed run is started again with the same command. The loop replays the recorded turns from the
files (a cached answer is never asked for again, a stored result never judged again, a recorded turn never
written again) and continues where the files end. Replaying is exact because every input of a turn is in the
files or is a deterministic function of them (the few-shot draw is seeded; feedback comes from the stored
result). A run directory holding another run's settings is refused.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cudaperf.env.evaluator import Evaluator
from cudaperf.env.refine import EnvContext, EnvSettings, PolicySummarizer, RefineEnv, TemplateSummarizer, step_batch
from cudaperf.env.text2cuda import DEFAULT_EVOLVE_MARGIN
from cudaperf.eval.records import RunHeader, TurnRecord
from cudaperf.eval.tasksets import TaskSet
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import append_line
from cudaperf.policy.base import Generation, Message, Policy, Request, SamplingParams

GENERATIONS = "generations.jsonl"
RESULTS = "results.jsonl"
TURNS = "turns.jsonl"
HEADER = "run.json"

COMPARED_FIELDS = ("policy", "tasks", "task_ids", "samples", "turns", "temperature", "top_p", "max_new_tokens",
                   "seed", "compile_only", "reward_preset", "target_speedup")
"""What a resumed run must share with the run already in the directory."""


class RunDirError(ValueError):
    """The run directory holds another run, or a file in it is not what it should be."""


# --------------------------------------------------------------------------------------------------- files

def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole JSON lines; a torn last line (a run killed mid-write) is skipped; a malformed line elsewhere fails."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if i >= len(lines) - 1:  # the last line (a final newline leaves one empty entry after it)
                continue
            raise RunDirError(f"{path}:{i}: not a JSON line ({exc.msg}); was the file edited?") from None
    return out


class JsonlAppender:
    """Append-only JSON lines, each flushed and synced; a torn last line left by a crash is terminated first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, row: Mapping[str, Any]) -> None:
        append_line(self.path, json.dumps(row, allow_nan=False, default=str) + "\n", self._lock)


EVAL_TIMING_BUDGET_MS = 500.0
"""Timing per correct answer in an evaluation (adaptive repetitions stop past it, or once their cv is below 2 %):
``cudaperf eval``'s default, and that of the held-out evaluations of ``cudaperf sft`` and ``cudaperf train`` and of
the training rollouts' judging. The harness's own default (2 s, for the dataset's measurements) is slower."""
EVAL_MAX_REPS = 30
"""Timed calls per correct answer in an evaluation at most (at least the paper's 5)."""


def eval_harness_settings(budget_ms: float = EVAL_TIMING_BUDGET_MS, max_reps: int = EVAL_MAX_REPS,
                          **kw: Any) -> HarnessSettings:
    """The harness settings an evaluation judges with: eval's timing, the harness's defaults otherwise."""
    return HarnessSettings(budget_ms=budget_ms, max_reps=max_reps, **kw)


BUDGET_ERROR = "not asked: --max-minutes ran out before its chunk"
"""The error of an answer :class:`CachingPolicy` did not ask for because the deadline had passed."""


class CachingPolicy:
    """A policy whose answers are recorded by request key: a recorded answer is returned without asking again.

    Requests go to the inner policy in chunks of ``chunk`` so that answers are recorded as they come, not only at
    the end of a turn. Failed answers (``error`` set) are not recorded: a resumed run asks again."""

    def __init__(self, inner: Policy, path: Path, chunk: int = 16) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        self.chunk = max(1, chunk)
        self._out = JsonlAppender(path)
        self.cache: dict[str, Generation] = {}
        for row in _read_jsonl(path):
            self.cache.setdefault(row["key"], Generation.from_dict(row["generation"]))
        self.n_asked = 0
        self.ask_wall_s = 0.0
        self.on_answers: Callable[[Sequence[Request], Sequence[Generation]], None] | None = None
        """Called with each chunk's newly answered requests and their answers, as they are recorded (the
        prebuilder compiles them while the next chunk is written)."""

    @property
    def context_tokens(self) -> int | None:
        return self.inner.context_tokens

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_tokens(messages)

    def generate(self, requests: Sequence[Request], params: SamplingParams, *,
                 deadline: float | None = None) -> list[Generation]:
        """Answers for ``requests``, recorded ones first. ``deadline`` (a ``time.monotonic()`` value): no chunk is
        started after it; the requests left get a :data:`BUDGET_ERROR` generation, which is not recorded (a resumed
        run asks them)."""
        todo = [r for r in requests if r.key not in self.cache]
        failed: dict[str, Generation] = {}
        for i in range(0, len(todo), self.chunk):
            part = todo[i:i + self.chunk]
            if deadline is not None and time.monotonic() > deadline:
                for r in todo[i:]:
                    failed[r.key] = Generation(text="", finish_reason="error", error=BUDGET_ERROR)
                break
            t0 = time.monotonic()
            gens = self.inner.generate(part, params)
            self.ask_wall_s += time.monotonic() - t0
            self.n_asked += len(part)
            answered = []
            for r, g in zip(part, gens):
                if g.error is not None:
                    failed[r.key] = g
                    continue
                self._out.append({"key": r.key, "task_id": r.task_id, "sample": r.sample, "turn": r.turn,
                                  "purpose": r.purpose, "generation": g.to_dict(),
                                  "prompt": [dict(m) for m in r.messages]})
                self.cache[r.key] = g
                answered.append((r, g))
            if self.on_answers is not None and answered:
                self.on_answers([r for r, _ in answered], [g for _, g in answered])
        return [self.cache.get(r.key) or failed[r.key] for r in requests]

    def close(self) -> None:
        self.inner.close()


# --------------------------------------------------------------------------------------------------- the run

@dataclass(frozen=True)
class EvalOptions:
    samples: int = 5
    turns: int = 3
    sampling: SamplingParams = SamplingParams()
    seed: int = 0
    compile_only: bool = False
    summarizer: str = "policy"
    """``policy`` (the paper's separate LLM call) or ``template``."""
    fewshot: bool = True
    reward_preset: str = "verifiable"
    ranker: str | None = None
    target_speedup: float | None = None
    max_minutes: float | None = None
    chunk: int = 16
    """Requests per policy call (answers are recorded after each)."""
    strategy: str = "refine"
    """``refine`` (today's loop) or ``evolve`` (:class:`cudaperf.env.refine.EnvSettings`)."""
    evolve_margin: float = DEFAULT_EVOLVE_MARGIN
    spec_turn: bool = True
    """Text tasks: a spec turn before the kernel turns (not counted in ``turns``)."""
    staged_feedback: bool | None = None
    """Progressive-validation stages in the feedback: None for text tasks only, True / False for every task."""
    prebuild: bool = True
    """Compile each chunk's answers while the policy writes the next chunk (:mod:`cudaperf.harness.prebuild`; the
    local and compile-only executors, c_function tasks); the judging then finds their builds in the cache. The same
    verdicts either way."""

    def __post_init__(self) -> None:
        if self.strategy not in ("refine", "evolve"):
            raise ValueError("strategy must be 'refine' or 'evolve'")
        if not self.evolve_margin >= 0:
            raise ValueError("evolve_margin must be >= 0")
        if self.samples < 1 or self.turns < 1:
            raise ValueError("samples and turns must be >= 1")
        if self.summarizer not in ("policy", "template"):
            raise ValueError("summarizer must be 'policy' or 'template'")


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    n_trajectories: int
    n_turns_recorded: int
    n_turns_new: int
    n_generated: int
    """Policy calls made by this invocation (cached answers not counted)."""
    generate_wall_s: float
    n_judged: int
    judge_wall_s: float
    wall_s: float
    stops: dict[str, int]
    prebuilt: dict[str, int] | None = None
    """The prebuilder's counts (:meth:`cudaperf.harness.prebuild.Prebuilder.stats`); None when it did not run."""


def _header(policy: Policy, ts: TaskSet, o: EvalOptions, settings: Mapping[str, Any]) -> RunHeader:
    from cudaperf import __version__

    return RunHeader(policy=policy.name, tasks=ts.spec, benchmark=ts.benchmark,
                     task_ids=tuple(t.id for t in ts.tasks), samples=o.samples, turns=o.turns,
                     temperature=o.sampling.temperature, top_p=o.sampling.top_p,
                     max_new_tokens=o.sampling.max_new_tokens, seed=o.seed, compile_only=o.compile_only,
                     reward_preset=o.reward_preset, target_speedup=o.target_speedup, excluded=dict(ts.excluded),
                     created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     cudaperf_version=__version__, settings=dict(settings))


def _check_or_write_header(run_dir: Path, header: RunHeader) -> RunHeader:
    path = run_dir / HEADER
    if path.exists():
        try:
            old = RunHeader.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, TypeError) as exc:
            raise RunDirError(f"{path}: not a run header ({exc})") from None
        new, was = header.to_dict(), old.to_dict()
        diff = [f for f in COMPARED_FIELDS if new[f] != was[f]]
        if diff:
            shown = "; ".join(f"{f}: {was[f]!r} there, {new[f]!r} now" for f in diff[:4] if f != "task_ids")
            raise RunDirError(f"{run_dir} holds another run ({', '.join(diff)} differ{': ' + shown if shown else ''})"
                              ": give a new --out, or the same settings to resume it")
        return old
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(header.to_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return header


def run_eval(policy: Policy, ts: TaskSet, run_dir: str | Path, options: EvalOptions = EvalOptions(), *,
             harness_settings=None, gpus: Sequence[int] | None = None,
             progress: Callable[[str, int, int], None] | None = None,
             settings_record: Mapping[str, Any] | None = None, executor=None) -> RunSummary:
    """Run (or resume) an evaluation into ``run_dir``. ``progress(phase, done, total)``: ``generated`` and
    ``judged`` (answers so far, total -1), ``turn`` (turns done of ``turns``), and the harness's own callbacks
    within a turn as ``judge:compile`` / ``judge:run`` (done, total of that batch). ``executor``: where answers are
    judged (:mod:`cudaperf.harness.executors`, an executor or its spec; default local, or compile-only)."""
    from cudaperf.env.prompt import FewShotPool, PromptSettings
    from cudaperf.reward.composite import RewardSettings

    t_start = time.monotonic()
    run_dir = Path(run_dir)
    if not ts.tasks:
        raise ValueError(f"--tasks {ts.spec} holds no task")
    o = options
    loop = {"strategy": o.strategy, "evolve_margin": o.evolve_margin, "spec_turn": o.spec_turn,
            "staged_feedback": o.staged_feedback}
    harness_settings = harness_settings or eval_harness_settings()
    judged_with = {"timing_budget_ms": harness_settings.budget_ms, "max_reps": harness_settings.max_reps,
                   "overlap_runs": harness_settings.overlap_runs}
    header = _check_or_write_header(run_dir, _header(policy, ts, o, {**judged_with, **(settings_record or {}),
                                                                      **loop}))
    defaults = EvalOptions()  # a run recorded before these settings existed ran with their defaults
    was_loop = {k: header.settings.get(k, getattr(defaults, k)) for k in loop}
    if was_loop != loop:
        raise RunDirError(f"{run_dir} holds another run ({was_loop} there, {loop} now): give a new --out, or the "
                          "same settings to resume it")
    cached = CachingPolicy(policy, run_dir / GENERATIONS, chunk=o.chunk)
    recorded_rows = _read_jsonl(run_dir / TURNS)
    spec_done = {(r["task_id"], r["sample"]) for r in recorded_rows if r.get("phase") == "spec"}
    recorded = {(r["task_id"], r["sample"], r["turn"]): r for r in recorded_rows if r.get("phase") != "spec"}
    turns_out = JsonlAppender(run_dir / TURNS)
    structural = None
    if o.ranker:
        from cudaperf.ranker.train import Ranker

        structural = Ranker.load(o.ranker).score_code
    evaluator = Evaluator(ts.tasks, run_dir / RESULTS, settings=harness_settings,
                          compile_only=o.compile_only, gpus=gpus, executor=executor,
                          progress=(lambda phase, n, total: progress("judge:" + phase, n, total)) if progress else None)
    summ_params = replace(o.sampling, max_new_tokens=min(256, o.sampling.max_new_tokens))
    ctx = EnvContext(
        evaluator=evaluator, settings=EnvSettings(max_turns=o.turns, target_speedup=o.target_speedup, seed=o.seed,
                                                  strategy=o.strategy, evolve_margin=o.evolve_margin,
                                                  staged_feedback=o.staged_feedback),
        prompt=PromptSettings(), fewshot=FewShotPool() if o.fewshot else None,
        summarizer=PolicySummarizer(cached, summ_params) if o.summarizer == "policy" else TemplateSummarizer(),
        reward=RewardSettings(preset=o.reward_preset), structural=structural,
        count_tokens=policy.count_tokens if policy.context_tokens else None, context_tokens=policy.context_tokens,
        max_new_tokens=o.sampling.max_new_tokens, task_meta=ts.meta,
        recorded={(tid, f"s{s}-t{t}") for (tid, s, t) in recorded})
    envs = [RefineEnv(ctx, task, sample) for task in ts.tasks for sample in range(o.samples)]
    prebuilder = None
    if o.prebuild and evaluator.executor.name in ("local", "compile-only"):
        from cudaperf.harness.prebuild import Prebuilder

        prebuilder = Prebuilder(evaluator.tasks, harness_settings)
        cached.on_answers = lambda reqs, gens: prebuilder.submit(
            [(r.task_id, g.text) for r, g in zip(reqs, gens) if r.purpose == "candidate"])
    try:
        return _run_turns(run_dir, o, ts, cached, envs, recorded, spec_done, turns_out, evaluator, progress,
                          t_start, prebuilder)
    finally:
        cached.on_answers = None
        if prebuilder is not None:
            prebuilder.close()


def _run_turns(run_dir, o, ts, cached, envs, recorded, spec_done, turns_out, evaluator, progress, t_start,
               prebuilder) -> RunSummary:
    """run_eval's loop: the spec turn of text tasks, then the refinement turns (see :func:`run_eval`)."""
    n_new = 0
    n_answers = 0
    deadline = t_start + 60 * o.max_minutes if o.max_minutes is not None else None
    stops: dict[str, int] = {}
    if o.spec_turn:  # Text2CUDA's spec turn: recorded, not judged; the kernel turns show the spec
        from cudaperf.env.text2cuda import MISSING_SPEC_NOTE, parse_spec, spec_record, spec_request

        text_envs = [e for e in envs if getattr(e.task, "framing", None) == "text"]
        spec_reqs = [spec_request(e.task, e.sample) for e in text_envs]
        spec_gens = cached.generate(spec_reqs, o.sampling, deadline=deadline) if spec_reqs else []
        for e, g in zip(text_envs, spec_gens):
            if g.error == BUDGET_ERROR:
                e.done, e.stop = True, "budget"
                continue
            spec = parse_spec(g.text) if g.error is None else None
            e.spec = spec if spec is not None else MISSING_SPEC_NOTE
            if (e.task.id, e.sample) not in spec_done:
                turns_out.append(spec_record(e.task, e.sample, g, spec, ts.meta.get(e.task.id)).to_dict())
                spec_done.add((e.task.id, e.sample))
                n_new += 1
        n_answers += len(spec_reqs)
    obs = {id(e): e.reset() for e in envs if not e.done}
    for turn in range(o.turns):
        active = [e for e in envs if not e.done]
        if not active:
            break
        if progress:
            progress("turn", turn, o.turns)
        reqs = [obs[id(e)].request for e in active]
        gens = cached.generate(reqs, o.sampling, deadline=deadline)
        asked = [g.error != BUDGET_ERROR for g in gens]
        if not all(asked):  # the budget ran out inside the turn: those trajectories end unrecorded (resumable)
            for e, a in zip(active, asked):
                if not a:
                    e.done, e.stop = True, "budget"
            active = [e for e, a in zip(active, asked) if a]
            gens = [g for g, a in zip(gens, asked) if a]
            reqs = [r for r, a in zip(reqs, asked) if a]
        n_answers += len(reqs)
        if progress:
            progress("generated", n_answers, -1)
        over = deadline is not None and time.monotonic() > deadline
        if prebuilder is not None:
            prebuilder.wait()  # no nvcc beside the judging's timing windows
        results = step_batch(active, gens) if active else []
        if progress:
            progress("judged", n_answers, -1)
        for e, r in zip(active, results):
            rec = r.record
            was = recorded.get((rec.task_id, rec.sample, rec.turn))
            if (over or (was is not None and was.get("stop") == "budget")) and rec.stop is None:
                rec = replace(rec, stop="budget")
                e.done, e.stop = True, "budget"
                r = replace(r, done=True, observation=None, stop="budget", record=rec)
                e.records[-1] = rec
            key = (rec.task_id, rec.sample, rec.turn)
            if key not in recorded:
                turns_out.append(rec.to_dict())
                recorded[key] = rec.to_dict()
                n_new += 1
            if r.observation is not None:
                obs[id(e)] = r.observation
        if progress:
            progress("turn", turn + 1, o.turns)
    for e in envs:
        if e.stop:
            stops[e.stop] = stops.get(e.stop, 0) + 1
    return RunSummary(run_dir=run_dir, n_trajectories=len(envs), n_turns_recorded=len(recorded) + len(spec_done),
                      n_turns_new=n_new, n_generated=cached.n_asked, generate_wall_s=cached.ask_wall_s,
                      n_judged=evaluator.n_judged, judge_wall_s=evaluator.judge_wall_s,
                      wall_s=time.monotonic() - t_start, stops=stops,
                      prebuilt=prebuilder.stats() if prebuilder is not None else None)


def load_turns(run_dir: str | Path) -> list[TurnRecord]:
    return [TurnRecord.from_dict(r) for r in _read_jsonl(Path(run_dir) / TURNS)]
