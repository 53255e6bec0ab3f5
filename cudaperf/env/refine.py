"""The multi-turn refinement environment: ``reset(task) -> Observation``, ``step(completion) -> StepResult``.

Plain Python: no trainer inside. One :class:`RefineEnv` is one trajectory (a task and a sample index); the
things trajectories share (the evaluator, the few-shot pool, the summarizer, the settings) are one
:class:`EnvContext`. :func:`step_batch` steps many trajectories together, so that a turn's completions for all
samples go through the harness's executor in one batch (compiles in parallel, timing one at a time per GPU).

Each turn's prompt is built afresh (PAPER-SPEC §5): earlier turns are dropped from the context and folded into
[FEEDBACK_HISTORY] by the summarizer; the latest turn's feedback is the [FEEDBACK] block. A trajectory ends with
one of :data:`cudaperf.eval.records.STOP_REASONS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from cudaperf.env.evaluator import Evaluator
from cudaperf.env.feedback import FeedbackSettings, feedback_text, summary_request, template_summary
from cudaperf.env.prompt import FewShotExample, FewShotPool, PromptSettings, build_messages
from cudaperf.eval.records import TurnRecord
from cudaperf.harness.result import EvaluationResult, FailureKind
from cudaperf.policy.base import Generation, Message, Policy, Request, SamplingParams
from cudaperf.reward.composite import RewardBreakdown, RewardSettings, completion_code, reward
from cudaperf.tasks.schema import Task


@dataclass(frozen=True)
class EnvSettings:
    max_turns: int = 5
    """The paper's 5 refinement turns."""
    target_speedup: float | None = None
    """A correct answer at least this fast ends the trajectory (``solved``); None: only the turn limit does."""
    repeat_patience: int = 2
    """The same failure (kind and message) this many turns in a row ends the trajectory (``repeated_failure``);
    no code this many turns in a row, ``no_code``."""
    seed: int = 0
    """Seeds the few-shot draw."""
    strategy: str = "refine"
    """``refine`` (every turn repairs or improves the last answer) or ``evolve`` (repair while incorrect, then keep
    the best correct candidate and accept a new one only when correct and ``evolve_margin`` faster;
    :mod:`cudaperf.env.text2cuda`)."""
    evolve_margin: float = 0.02
    staged_feedback: bool | None = None
    """Progressive-validation stages in the feedback: None, for text tasks only; True / False for every task."""

    def __post_init__(self) -> None:
        if self.strategy not in ("refine", "evolve"):
            raise ValueError(f"strategy must be 'refine' or 'evolve', not {self.strategy!r}")
        if not self.evolve_margin >= 0:
            raise ValueError("evolve_margin must be >= 0")
        if self.max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        if self.repeat_patience < 1:
            raise ValueError("repeat_patience must be >= 1")


# --------------------------------------------------------------------------------------------------- summarizers

@dataclass(frozen=True)
class SummaryItem:
    task_id: str
    sample: int
    turn: int
    previous: str
    code: str | None
    feedback: str
    result: EvaluationResult
    features: Mapping[str, float | None]


class TemplateSummarizer:
    """One line per earlier turn: its outcome and a few structural features (deterministic; no policy call)."""

    name = "template"

    def summarize(self, items: Sequence[SummaryItem]) -> list[str]:
        return [template_summary(it.previous, it.turn, it.result, dict(it.features)) for it in items]


class PolicySummarizer:
    """The paper's separate LLM call: the policy folds the last turn into the summary. A failed call keeps the
    template summary, so a trajectory never loses its history."""

    name = "policy"

    def __init__(self, policy: Policy, params: SamplingParams) -> None:
        self.policy = policy
        self.params = params

    def summarize(self, items: Sequence[SummaryItem]) -> list[str]:
        reqs = [summary_request(it.task_id, it.sample, it.turn, it.previous, it.code, it.feedback) for it in items]
        gens = self.policy.generate(reqs, self.params) if reqs else []
        out = []
        for it, g in zip(items, gens):
            text = g.text.strip()
            out.append(text if (g.error is None and text) else template_summary(it.previous, it.turn, it.result,
                                                                                dict(it.features)))
        return out


# --------------------------------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Observation:
    task_id: str
    sample: int
    turn: int
    messages: tuple[Message, ...]

    @property
    def request(self) -> Request:
        return Request(messages=self.messages, task_id=self.task_id, sample=self.sample, turn=self.turn)


@dataclass(frozen=True)
class StepResult:
    reward: float | None
    """The reward preset's total; None when the harness could not judge the answer (unscored)."""
    done: bool
    observation: Observation | None
    """The next turn's observation (None when done)."""
    metrics: dict[str, Any]
    evaluation: EvaluationResult
    record: TurnRecord
    stop: str | None = None


@dataclass
class EnvContext:
    evaluator: Evaluator
    settings: EnvSettings = field(default_factory=EnvSettings)
    prompt: PromptSettings = field(default_factory=PromptSettings)
    feedback: FeedbackSettings = field(default_factory=FeedbackSettings)
    fewshot: FewShotPool | None = None
    summarizer: Any = field(default_factory=TemplateSummarizer)
    reward: RewardSettings = field(default_factory=lambda: RewardSettings(preset="verifiable"))
    structural: Callable[[str], float] | None = None
    count_tokens: Callable[[Sequence[Message]], int] | None = None
    context_tokens: int | None = None
    max_new_tokens: int = 0
    task_meta: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    """Per task id: ``family``, ``level`` (what the report groups by)."""
    recorded: set = field(default_factory=set)
    """(task_id, candidate_id) of turns already recorded (a resumed run replays their stored results)."""
    _examples: dict[str, list[FewShotExample]] = field(default_factory=dict)

    def examples(self, task: Task) -> list[FewShotExample]:
        if self.fewshot is None:
            return []
        if task.id not in self._examples:
            self._examples[task.id] = self.fewshot.examples(task, self.settings.seed)
        return self._examples[task.id]


def candidate_id(sample: int, turn: int) -> str:
    return f"s{sample}-t{turn}"


def paper_features(code: str | None) -> dict[str, float | None]:
    from cudaperf.features.paper import PAPER_FEATURES, extract_paper_features

    if code is None:
        return {n: None for n in PAPER_FEATURES}
    fv = extract_paper_features(code)
    return {n: (None if math.isnan(fv.values[n]) else round(float(fv.values[n]), 6)) for n in PAPER_FEATURES}


# --------------------------------------------------------------------------------------------------- the env

class RefineEnv:
    """One trajectory: a task, a sample index, up to ``max_turns`` turns."""

    def __init__(self, ctx: EnvContext, task: Task | None = None, sample: int = 0) -> None:
        self.ctx = ctx
        self.task = task
        self.sample = sample
        self.turn = 0
        self.history = ""
        self.feedback = ""
        self.done = False
        self.stop: str | None = None
        self._last_failures: list[str] = []
        self.records: list[TurnRecord] = []
        self.spec: str | None = None
        """A text task's specification (or the missing-spec note), shown in every kernel turn; None: no spec turn."""
        self.best: tuple[int, str, EvaluationResult] | None = None
        """``evolve``: (turn, code, result) of the best accepted candidate."""

    def reset(self, task: Task | None = None, sample: int | None = None) -> Observation:
        if task is not None:
            self.task = task
        if self.task is None:
            raise ValueError("reset needs a task")
        if sample is not None:
            self.sample = sample
        self.turn, self.history, self.feedback, self.done, self.stop = 0, "", "", False, None
        self._last_failures, self.records, self.best = [], [], None
        return self.observation()

    def observation(self) -> Observation:
        c = self.ctx
        msgs = build_messages(self.task, c.examples(self.task), self.history, self.feedback, settings=c.prompt,
                              count_tokens=c.count_tokens, context_tokens=c.context_tokens,
                              max_new_tokens=c.max_new_tokens, spec=self.spec)
        return Observation(self.task.id, self.sample, self.turn, msgs)

    def step(self, completion: str | Generation) -> StepResult:
        """Judge one completion alone (see :func:`step_batch` for a turn of many)."""
        return step_batch([self], [completion])[0]

    # -- the parts step_batch composes
    def _judged(self, gen: Generation, result: EvaluationResult) -> tuple[TurnRecord, str | None, SummaryItem]:
        c = self.ctx
        task = self.task
        code = completion_code(gen.text) if gen.error is None else None
        feats = paper_features(code)
        fb = feedback_text(result, feats, c.feedback) if gen.error is None else ""
        staged = c.settings.staged_feedback
        if gen.error is None and (staged or (staged is None and getattr(task, "framing", None) == "text")):
            from cudaperf.env.text2cuda import staged_validation

            timing = task.size_configs[task.timing_config] if hasattr(task, "size_configs") else None
            fb = staged_validation(result, timing) + "\n" + fb
        accepted = None
        if c.settings.strategy == "evolve":
            from cudaperf.env.text2cuda import best_block, evolve_accepts

            accepted = gen.error is None and evolve_accepts(self.best[2] if self.best else None, result,
                                                            c.settings.evolve_margin)
            if accepted:
                self.best = (self.turn, code or "", result)
            if self.best is not None:
                fb = (f"{fb}\nThis answer was {'accepted as the new best' if accepted else 'not accepted'}.\n"
                      + best_block(self.best[1], self.best[2], self.best[0], c.settings.evolve_margin))
        rb: RewardBreakdown | None = None
        if gen.error is None:
            rb = reward(task, gen.text, result, c.reward, c.structural)
        f = result.failure
        key = (f"{f.kind.value}:{f.message[:200]}" if (f and not result.correct and result.status == "scored"
                                                      and gen.error is None) else "")
        self._last_failures = (self._last_failures + [key])[-c.settings.repeat_patience:]
        stop = None
        if gen.error is not None:
            stop = "policy_error"
        elif (result.correct and c.settings.target_speedup is not None and result.speedup is not None
              and result.speedup >= c.settings.target_speedup):
            stop = "solved"
        elif self.turn + 1 >= c.settings.max_turns:
            stop = "turn_limit"
        elif (len(self._last_failures) == c.settings.repeat_patience and key
              and all(k == key for k in self._last_failures)):
            stop = "no_code" if f and f.kind == FailureKind.NO_CODE else "repeated_failure"
        ev = result.gpu_evidence
        meta = c.task_meta.get(task.id, {})
        status = "policy_error" if gen.error is not None else result.status
        rec = TurnRecord(
            task_id=task.id, task_kind="text" if getattr(task, "framing", None) == "text" else task.kind,
            sample=self.sample, turn=self.turn,
            candidate_id=candidate_id(self.sample, self.turn), family=meta.get("family"), level=meta.get("level"),
            status=status, stage=result.stage.value, compiled=result.compile is not None and result.compile.ok,
            correct=bool(result.correct and gen.error is None),
            failure_kind=(f.kind.value if f else None) if gen.error is None else "policy_error",
            failure_message=(f.message[:2000] if f else None) if gen.error is None else gen.error[:2000],
            speedup=result.speedup if result.correct else None,
            candidate_cv=result.candidate_timing.cv if result.candidate_timing else None,
            baseline_cv=result.baseline_timing.cv if result.baseline_timing else None,
            kernel_ms=ev.kernel_ms if ev else None, memcpy_ms=ev.memcpy_ms if ev else None,
            reward=rb.total if rb else None, reward_terms=dict(rb.terms) if rb else {},
            features=feats, prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
            finish_reason=gen.finish_reason, latency_s=round(gen.latency_s, 4), feedback=fb, stop=stop,
            speedup_flag=result.speedup_flag, gen_error=gen.error, accepted=accepted, gen_batch=gen.batch_size)
        item = SummaryItem(task.id, self.sample, self.turn, self.history, code, fb, result, feats)
        return rec, stop, item

    def _advance(self, rec: TurnRecord, stop: str | None, summary: str | None) -> Observation | None:
        self.records.append(rec)
        self.feedback = rec.feedback
        if summary is not None:
            self.history = summary
        self.turn += 1
        if stop is not None:
            self.done, self.stop = True, stop
            return None
        return self.observation()


def _failed_evaluation(env: RefineEnv, gen: Generation) -> EvaluationResult:
    """The record of a turn whose policy call failed: nothing was judged (status carries ``policy_error``)."""
    from cudaperf.harness.result import Stage

    return EvaluationResult(task_id=env.task.id, task_kind=env.task.kind, candidate_id=candidate_id(env.sample, env.turn),
                            code_sha256=None, status="scored", stage=Stage.NONE, correct=False)


def step_batch(envs: Sequence[RefineEnv], completions: Sequence[str | Generation]) -> list[StepResult]:
    """Step many trajectories at once: their completions are judged together in one executor batch, then the
    summaries of the trajectories that go on are made in one summarizer call."""
    if len(envs) != len(completions):
        raise ValueError("one completion per env")
    for e in envs:
        if e.done or e.task is None:
            raise ValueError(f"trajectory {getattr(e.task, 'id', None)}/s{e.sample} is done or was never reset")
    gens = [c if isinstance(c, Generation) else Generation(text=c) for c in completions]
    ctx = envs[0].ctx
    items = [(e.task.id, candidate_id(e.sample, e.turn), g.text) for e, g in zip(envs, gens) if g.error is None]
    judged = iter(ctx.evaluator.evaluate(items, reuse_any=ctx.recorded) if items else [])
    results = [next(judged) if g.error is None else _failed_evaluation(e, g) for e, g in zip(envs, gens)]
    parts = [e._judged(g, r) for e, g, r in zip(envs, gens, results)]
    go_on = [i for i, (_, stop, _) in enumerate(parts) if stop is None]
    summaries: dict[int, str] = {}
    if go_on:
        texts = ctx.summarizer.summarize([parts[i][2] for i in go_on])
        summaries = dict(zip(go_on, texts))
    out = []
    for i, (e, r) in enumerate(zip(envs, results)):
        rec, stop, _ = parts[i]
        obs = e._advance(rec, stop, summaries.get(i))
        metrics = {"compiled": rec.compiled, "correct": rec.correct, "speedup": rec.speedup, "stage": rec.stage,
                   "failure_kind": rec.failure_kind, "turn": rec.turn, **{f"r_{k}": v for k, v in
                                                                          rec.reward_terms.items()}}
        out.append(StepResult(reward=rec.reward, done=e.done, observation=obs, metrics=metrics, evaluation=r,
                              record=rec, stop=stop))
    return out
