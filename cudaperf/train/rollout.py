"""The multi-turn rollout of ``cudaperf train`` (GRPO through TRL's ``rollout_func``): each turn is one training row.

TRL calls :meth:`Rollout.__call__` with a generation batch of prompts, each distinct prompt (a task id) repeated
``num_generations = m x T`` times in a row. Per distinct prompt (a *group*) the rollout runs ``m`` trajectories of
:class:`cudaperf.env.refine.RefineEnv` for up to ``T`` turns:

* every turn, all live trajectories of the batch are generated together with the trainer's model (one batched
  ``generate`` call, its rows at their trajectories' temperatures, through :class:`TrainerPolicy`, the project's HF
  policy over the live model; a policy that takes one temperature a call gets one call a temperature)
  and judged together with :func:`cudaperf.env.refine.step_batch` (one harness batch per turn);
* trajectory ``j`` samples at ``temperatures[j % len(temperatures)]`` (the paper's "[0.2, 0.7]": with m = 4, two
  trajectories at 0.2 and two at 0.7);
* a turn's row is ``prompt_ids`` = that turn's own chat-templated context (earlier turns are folded into
  [FEEDBACK_HISTORY], PAPER-SPEC §5), ``completion_ids`` = the tokens generated, ending with EOS when generation
  stopped by itself and without it when it hit the length cap (TRL then counts it as truncated), ``env_mask`` = 1 over
  every completion token, ``logprobs`` None (TRL recomputes them);
* its reward is the turn's return ``R_t = s_t + gamma R_{t+1}`` over the same trajectory's later turns
  (:func:`discounted_returns`), with ``s_t`` the composite reward of the turn (:func:`turn_scores`);
* the rows of a trajectory that stopped early (solved, repeated failure, no code, a policy error, pruned) are padding:
  reward None (TRL forces the advantage to 0), an all-zero ``env_mask``, a one-token prompt and an EOS completion
  (:func:`padding_row`), so the group keeps its m x T rows.

Pruning (LEAP-style, off by default): after turn 1, a group whose m first answers are all correct at
>= ``prune_solved_speedup`` (trivially solved) or of which at most ``prune_hopeless_max_compiled`` compile
(hopeless) gets no further turns (:func:`prune_decision`); the share of pruned groups is logged.

Every row (padding too) is appended to the rollout log (``rollouts.jsonl``): the step, the task, sample, trajectory
and turn, the turn's prompt text and completion, each reward term, the return, the evaluation's summary, the stop
reason.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cudaperf.env.refine import EnvContext, PolicySummarizer, RefineEnv, TemplateSummarizer, step_batch
from cudaperf.harness.result import EvaluationResult
from cudaperf.harness.store import append_line
from cudaperf.policy.base import Generation, SamplingParams
from cudaperf.policy.decode import DECODERS
from cudaperf.policy.hf import HFPolicy
from cudaperf.reward.composite import RewardBreakdown, RewardSettings, leap_group_rewards, reward
from cudaperf.reward.terms import compiled
from cudaperf.train.common import clean_json

REWARD_PRESETS = ("paper", "gated", "verifiable", "leap")
"""``paper`` R_ver + R_str, ``gated`` R_ver + gated R_str, ``verifiable`` R_ver (:mod:`cudaperf.reward.composite`);
``leap``: LEAP's rank reward, each candidate's win rate against the other candidates of its group (all turns)."""

SUMMARIZERS = ("policy", "template")
TERM_KEYS = ("r_ver", "r_str", "r_compile", "r_leap")
"""The reward terms each row carries (None where a term does not apply)."""

PRUNED_SOLVED = "pruned_solved"
PRUNED_HOPELESS = "pruned_hopeless"


class RolloutError(ValueError):
    """The batch TRL handed over cannot be rolled out (groups split across processes, an unknown task)."""


# --------------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class RolloutSettings:
    trajectories: int = 4
    """m: trajectories per prompt (group). The group is m x turns rows (TRL's ``num_generations``)."""
    turns: int = 4
    """T: the most turns of a trajectory. The paper's G = 16 with 4 x 4; its 5 turns do not divide 16 (16 x 5 = 80
    rows per group is the other reading: ``trajectories = 16, turns = 5``)."""
    gamma: float = 0.4
    """Discount of later turns' rewards in a turn's return (Kevin's 0.4)."""
    temperatures: tuple[float, ...] = (0.2, 0.7)
    """Sampling temperatures: trajectory j samples at ``temperatures[j % len]`` (the paper's [0.2, 0.7])."""
    top_p: float = 0.9
    """Nucleus sampling mass (the paper's 0.9)."""
    max_new_tokens: int = 1536
    """New tokens per answer, in the model's tokens (the paper's 1536)."""
    summary_max_new_tokens: int = 256
    """New tokens of a summary call (``summarizer = "policy"``)."""
    summarizer: str = "policy"
    """``policy``: the live model summarizes earlier turns (the paper's separate LLM call; summaries are not trained
    on); ``template``: a deterministic one-line summary per turn."""
    fewshot: bool = True
    """The few-shot examples of the training split in the prompt, as ``cudaperf eval``."""
    context_tokens: int | None = None
    """Prompt + answer, in tokens; few-shot examples are dropped to fit. None: the model's context."""
    static_cache: bool = False
    """Generate with transformers' static KV cache, which it compiles on a GPU (``HFPolicy(static_cache=True)``):
    prompts padded to 256-token buckets, batches filled to ``generation_batch_rows``. Off by default: each new
    shape costs a compilation, and it is not yet measured against the training loop."""
    decoder: str = "hf"
    """How answers are decoded (:data:`cudaperf.policy.decode.DECODERS`): ``hf`` (transformers' ``generate``),
    ``loop`` or ``graph`` (the project's static-cache loop, each decoding step a CUDA graph on a GPU); the same
    answers, from the live weights, either way."""
    reward_preset: str = "paper"
    """``paper``, ``gated``, ``verifiable`` or ``leap`` (see :data:`REWARD_PRESETS`)."""
    ranker: str | None = None
    """A trained ranker directory (``cudaperf ranker train``) for R_str (``paper`` and ``gated``); None: the one
    shipped in the package (:data:`cudaperf.ranker.BUILTIN_RANKER`, trained on the task split's training part)."""
    gate_scale: float = 0.5
    """``gated``: R_str is squashed into (-gate_scale, gate_scale)."""
    compile_only_credit: float = 0.0
    """With the harness in compile-only mode, R_ver of an answer that compiled (it is never run, so R_ver has no
    value): this credit instead, against -alpha_comp (-3) for one that does not compile."""
    target_speedup: float | None = None
    """A correct answer at least this fast ends its trajectory (``solved``); None: only the turn limit does."""
    repeat_patience: int = 2
    """The same failure this many turns in a row ends a trajectory (``repeated_failure`` / ``no_code``)."""
    prune: bool = False
    """LEAP-style difficulty pruning of groups after turn 1 (see the module docstring)."""
    prune_solved_speedup: float = 2.0
    """Trivially solved: every first answer of the group is correct with a speedup >= this (x)."""
    prune_hopeless_max_compiled: int = 0
    """Hopeless: at most this many first answers of the group compile (0: none compiles)."""
    generation_batch_rows: int = 64
    """Prompts per ``generate`` call (a turn's requests of one temperature are split into calls of this size)."""
    seed: int = 0
    """Seeds the few-shot draw and the per-request sampling seeds (with the step, task, sample and turn)."""

    def __post_init__(self) -> None:
        if self.trajectories < 1 or self.turns < 1:
            raise ValueError("trajectories and turns must be >= 1")
        if self.trajectories * self.turns < 2:
            raise ValueError("trajectories x turns (TRL's num_generations) must be >= 2")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError("gamma must be in [0, 1]")
        if self.decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {', '.join(DECODERS)}")
        if self.decoder != "hf" and self.static_cache:
            raise ValueError("static_cache is for decoder 'hf' (loop and graph have a static cache of their own)")
        if not self.temperatures or any(not t > 0 for t in self.temperatures):
            raise ValueError("temperatures must be one or more values > 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.max_new_tokens < 1 or self.summary_max_new_tokens < 1:
            raise ValueError("max_new_tokens and summary_max_new_tokens must be >= 1")
        if self.summarizer not in SUMMARIZERS:
            raise ValueError(f"summarizer must be one of {', '.join(SUMMARIZERS)}, not {self.summarizer!r}")
        if self.reward_preset not in REWARD_PRESETS:
            raise ValueError(f"reward_preset must be one of {', '.join(REWARD_PRESETS)}, not {self.reward_preset!r}")
        if self.repeat_patience < 1 or self.generation_batch_rows < 1:
            raise ValueError("repeat_patience and generation_batch_rows must be >= 1")
        if self.prune_hopeless_max_compiled < 0:
            raise ValueError("prune_hopeless_max_compiled must be >= 0")
        if self.context_tokens is not None and self.context_tokens < 2:
            raise ValueError("context_tokens must be >= 2 (or None for the model's context)")

    @property
    def group_size(self) -> int:
        """Rows per prompt: TRL's ``num_generations``."""
        return self.trajectories * self.turns

    def temperature(self, trajectory: int) -> float:
        return self.temperatures[trajectory % len(self.temperatures)]


# --------------------------------------------------------------------------------------------------- pure parts

def discounted_returns(scores: Sequence[float | None], gamma: float) -> list[float | None]:
    """Per turn of one trajectory, in order: ``R_t = s_t + gamma R_{t+1}`` (the last turn's return is its score).

    An unscored turn (``s_t`` None, a harness fault) has no return of its own and adds nothing to the earlier
    turns' returns, but still counts as a turn for the discount: ``R_t = sum over scored k >= t of gamma^(k-t) s_k``
    for a scored turn t."""
    out: list[float | None] = [None] * len(scores)
    tail = 0.0  # sum over scored k > t of gamma^(k-t-1) s_k
    for t in range(len(scores) - 1, -1, -1):
        s = scores[t]
        if s is not None:
            out[t] = float(s) + gamma * tail
        tail = (float(s) if s is not None else 0.0) + gamma * tail
    return out


def prune_decision(first: Sequence[EvaluationResult], settings: RolloutSettings) -> str | None:
    """Whether a group stops after its first turn: ``pruned_solved``, ``pruned_hopeless`` or None.

    ``first``: the group's first-turn results (policy errors left out). Trivially solved: every one correct with a
    known speedup >= ``prune_solved_speedup``. Hopeless: at most ``prune_hopeless_max_compiled`` of them compiled
    (a compile-only run's "compiled, not run" counts as compiled)."""
    if not settings.prune or not first:
        return None
    if all(r.correct and r.speedup is not None and r.speedup >= settings.prune_solved_speedup for r in first):
        return PRUNED_SOLVED
    n_compiled = sum(1 for r in first if _compiled(r))
    if n_compiled <= settings.prune_hopeless_max_compiled:
        return PRUNED_HOPELESS
    return None


def _compile_only_not_run(r: EvaluationResult) -> bool:
    return (r.status == "unscored" and r.failure is not None
            and r.failure.message.startswith("compile-only run:"))


def _compiled(r: EvaluationResult) -> bool:
    if r.status == "unscored":
        return _compile_only_not_run(r)
    return compiled(r)


def turn_scores(task, completion: str, result: EvaluationResult, settings: RolloutSettings,
                structural: Callable[[str], float] | None) -> RewardBreakdown:
    """The composite reward ``s_t`` of one judged turn (presets ``paper``, ``gated``, ``verifiable``; ``leap`` is a
    group reward, :func:`leap_scores`). In a compile-only run an answer that compiled (and was not run) gets
    ``compile_only_credit`` as its R_ver (term ``compile``), plus the preset's structural term."""
    preset = "verifiable" if settings.reward_preset == "leap" else settings.reward_preset
    rs = RewardSettings(preset=preset, gate_scale=settings.gate_scale)
    if _compile_only_not_run(result):
        b = reward(task, completion, replace(result, status="scored"), rs, structural)
        terms = {"ver": None, "compile": settings.compile_only_credit}
        st = b.terms.get("str")
        if preset != "verifiable":
            terms["str"] = st
            if "str_raw" in b.terms:
                terms["str_raw"] = b.terms["str_raw"]
        return RewardBreakdown(settings.compile_only_credit + (st or 0.0), terms, preset)
    return reward(task, completion, result, rs, structural)


def leap_scores(completions: Sequence[str], results: Sequence[EvaluationResult]) -> list[float | None]:
    """LEAP's rank reward over one group's judged turns (:func:`cudaperf.reward.composite.leap_group_rewards`); a
    compile-only run's "compiled, not run" answers rank as compiled and not correct."""
    ranked = [replace(r, status="scored") if _compile_only_not_run(r) else r for r in results]
    return leap_group_rewards(completions, ranked)


def padding_row(eos_id: int) -> dict[str, Any]:
    """The token part of a padding row: a one-token prompt, an EOS completion (so it is not counted truncated), an
    all-zero env_mask (nothing of it in the loss)."""
    return {"prompt_ids": [eos_id], "completion_ids": [eos_id], "env_mask": [0]}


def task_ids_of_groups(prompts: Sequence[Any], group_size: int) -> list[str]:
    """The task id of each group of a TRL generation batch: ``group_size`` equal prompts in a row, else
    :class:`RolloutError` (a group split across processes, or a batch that is not whole groups)."""
    ids = [prompt_task_id(p) for p in prompts]
    if len(ids) % group_size:
        raise RolloutError(f"the rollout got {len(ids)} rows, not a multiple of the group size {group_size}: each "
                           "process's generation batch must hold whole groups (prompts_per_step x group rows)")
    out = []
    for g in range(0, len(ids), group_size):
        part = set(ids[g:g + group_size])
        if len(part) != 1:
            raise RolloutError(f"rows {g}..{g + group_size - 1} of the batch are not one prompt repeated "
                               f"{group_size} times ({sorted(part)[:3]}): a group must not be split")
        out.append(ids[g])
    return out


def prompt_task_id(prompt: Any) -> str:
    """The dataset's prompt is the task id (a string, or one user message holding it)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence) and prompt and isinstance(prompt[-1], Mapping):
        return str(prompt[-1].get("content", ""))
    raise RolloutError(f"cannot read a task id from a prompt of type {type(prompt).__name__}")


# --------------------------------------------------------------------------------------------------- the policy

class TrainerPolicy(HFPolicy):
    """The project's HF policy over a model in training (the trainer's, unwrapped for generation) that also returns
    each answer's token ids: ``extra["prompt_ids"]`` (the chat-templated prompt, as fed) and
    ``extra["completion_ids"]`` (the generated tokens up to and including the first EOS; no EOS when the answer hit
    its token budget)."""

    @classmethod
    def over(cls, model: Any, tokenizer: Any, batch_size: int, context_tokens: int | None = None,
             static_cache: bool = False, decoder: str = "hf") -> "TrainerPolicy":
        return cls.from_loaded(model, tokenizer, name="grpo:live-model", batch_size=batch_size,
                               context_tokens=context_tokens, static_cache=static_cache, decoder=decoder)

    def _batch(self, chunk):
        self.last_new_tokens = []
        gens = super()._batch(chunk)
        new = self.last_new_tokens
        out = []
        for row, ((_, ids, budget, *_), g) in enumerate(zip(chunk, gens)):
            tokens = new[row][:budget]
            end = next((k for k, t in enumerate(tokens) if t in self.eos_ids), None)
            comp = tokens[:end + 1] if end is not None else tokens
            out.append(replace(g, extra={**g.extra, "prompt_ids": list(ids), "completion_ids": [int(t) for t in comp]}))
        return out

    def close(self) -> None:  # the model belongs to the trainer
        pass


class TokenizingPolicy:
    """A policy that answers with text only (replay of recorded completions, the dataset's oracle) made into one the
    rollout can turn into rows, for offline checks of the loop and the harness: ``prompt_ids`` are the chat-templated
    prompt and ``completion_ids`` the answer's tokens plus EOS (an answer that stopped by itself). Training rows
    must come from the model that is trained (:class:`TrainerPolicy`); this is for looking at rollouts."""

    def __init__(self, inner: Any, tokenizer: Any) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.name = f"{inner.name}+tokenized"
        self.context_tokens = None

    def count_tokens(self, messages) -> int:
        return len(self._prompt_ids(messages))

    def _prompt_ids(self, messages) -> list[int]:
        chat = [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]
        enc = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = enc["input_ids"]
        return [int(i) for i in (ids[0] if ids and isinstance(ids[0], list) else ids)]

    def generate(self, requests, params) -> list[Generation]:
        out = []
        for r, g in zip(requests, self.inner.generate(requests, params)):
            if g.error is None:
                comp = self.tokenizer(g.text, add_special_tokens=False)["input_ids"]
                if g.finish_reason != "length":
                    comp = list(comp) + [int(self.tokenizer.eos_token_id)]
                g = replace(g, extra={**g.extra, "prompt_ids": self._prompt_ids(r.messages),
                                      "completion_ids": [int(t) for t in comp]})
            out.append(g)
        return out

    def close(self) -> None:
        self.inner.close()


# --------------------------------------------------------------------------------------------------- the rollout

@dataclass
class _Turn:
    """What a trajectory's turn leaves for its row."""

    prompt_ids: list[int] | None
    completion_ids: list[int] | None
    prompt_text: str
    completion: str
    finish_reason: str
    record: Any
    result: EvaluationResult | None
    breakdown: RewardBreakdown | None
    stop: str | None
    error: str | None = None


@dataclass
class RolloutStats:
    groups: int = 0
    pruned_solved: int = 0
    pruned_hopeless: int = 0
    rows: int = 0
    padding_rows: int = 0
    compiled: int = 0
    correct: int = 0
    turns_judged: int = 0
    truncated: int = 0
    trajectories: int = 0
    generate_s: float = 0.0
    judge_s: float = 0.0

    def metrics(self) -> dict[str, float]:
        g, n = max(self.groups, 1), max(self.turns_judged, 1)
        return {"rollout/pruned_fraction": (self.pruned_solved + self.pruned_hopeless) / g,
                "rollout/pruned_solved_fraction": self.pruned_solved / g,
                "rollout/pruned_hopeless_fraction": self.pruned_hopeless / g,
                "rollout/padding_fraction": self.padding_rows / max(self.rows, 1),
                "rollout/compile_rate": self.compiled / n, "rollout/correct_rate": self.correct / n,
                "rollout/truncated_rate": self.truncated / n,
                "rollout/turns_per_trajectory": self.turns_judged / max(self.trajectories, 1),
                "rollout/generate_s": self.generate_s, "rollout/judge_s": self.judge_s}


class Rollout:
    """TRL's ``rollout_func`` (call it with ``(prompts, trainer)``) and its reward function (:meth:`reward_function`).

    ``ctx``: the environment's shared parts (evaluator over the training tasks, few-shot pool, structural scorer);
    its summarizer is set per call (the live model's, or the template). ``tokenizer``: the trainer's.
    ``log_path``: the rollout JSONL log (None: no log)."""

    def __init__(self, ctx: EnvContext, settings: RolloutSettings, tokenizer: Any, *,
                 log_path: Path | None = None, structural: Callable[[str], float] | None = None) -> None:
        self.ctx = ctx
        self.settings = settings
        self.tokenizer = tokenizer
        self.structural = structural
        self.log_path = log_path
        self._lock = threading.Lock()
        self.last_stats = RolloutStats()
        self.calls = 0
        eos = tokenizer.eos_token_id
        if eos is None:
            raise RolloutError("the tokenizer names no EOS token: rows could not end with one")
        self.eos_id = int(eos)
        ctx.settings = replace(ctx.settings, max_turns=settings.turns, target_speedup=settings.target_speedup,
                               repeat_patience=settings.repeat_patience, seed=settings.seed)

    # -- TRL entry points ----------------------------------------------------------------------------------------
    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        from trl.models import unwrap_model_for_generation

        step = int(trainer.state.global_step)
        rank = int(getattr(trainer.accelerator, "process_index", 0))
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                                         gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs
                                         ) as model:
            was_training = model.training
            model.eval()
            try:
                policy = TrainerPolicy.over(model, self.tokenizer, self.settings.generation_batch_rows,
                                            context_tokens=self.settings.context_tokens,
                                            static_cache=self.settings.static_cache,
                                            decoder=self.settings.decoder)
                return self.collect(prompts, policy, step=step, rank=rank)
            finally:
                if was_training:
                    model.train()

    def reward_function(self) -> Callable[..., list[float | None]]:
        """The one reward function: each row's ``turn_return`` (None for padding rows and unscored turns); it logs the
        last rollout's figures (pruned share, compile rate, ...) through TRL's ``log_metric``."""
        rollout = self

        def turn_return(prompts=None, completions=None, completion_ids=None, turn_return=None, log_metric=None,
                        **_: Any) -> list[float | None]:
            if turn_return is None:
                raise RolloutError("no turn_return column: the trainer must use this Rollout as its rollout_func")
            if log_metric is not None:
                for k, v in rollout.last_stats.metrics().items():
                    log_metric(k, float(v))
            return [None if r is None else float(r) for r in turn_return]

        turn_return.__name__ = "turn_return"
        return turn_return

    # -- the loop --------------------------------------------------------------------------------------------------
    def collect(self, prompts: Sequence[Any], policy: Any, *, step: int, rank: int = 0) -> dict[str, list[Any]]:
        """Roll out a generation batch with ``policy`` (see the module docstring); returns TRL's output dict."""
        s = self.settings
        ctx = self.ctx
        G, m, T = s.group_size, s.trajectories, s.turns
        group_tasks = task_ids_of_groups(prompts, G)
        unknown = sorted(set(group_tasks) - set(ctx.evaluator.tasks))
        if unknown:
            raise RolloutError(f"prompts name tasks outside the training task set: {unknown[:3]}")
        ctx.summarizer = (PolicySummarizer(policy, SamplingParams(temperature=min(s.temperatures), top_p=s.top_p,
                                                                  max_new_tokens=s.summary_max_new_tokens,
                                                                  seed=s.seed))
                          if s.summarizer == "policy" else TemplateSummarizer())
        if getattr(policy, "context_tokens", None):
            ctx.count_tokens, ctx.context_tokens = policy.count_tokens, policy.context_tokens
        ctx.max_new_tokens = s.max_new_tokens
        stats = RolloutStats(groups=len(group_tasks), trajectories=len(group_tasks) * m)
        n_groups = len(group_tasks)
        envs: list[list[RefineEnv]] = []
        for g, tid in enumerate(group_tasks):
            task = ctx.evaluator.tasks[tid]
            # unique sample numbers per step and rank: the result store's keys and the sampling seeds never repeat
            base = ((step * 1024 + rank) * n_groups + g) * m
            envs.append([RefineEnv(ctx, task, base + j) for j in range(m)])
        obs = {id(e): e.reset() for grp in envs for e in grp}
        turns: dict[int, list[_Turn]] = {id(e): [] for grp in envs for e in grp}
        pruned: dict[int, str] = {}
        for t in range(T):
            active = [(g, j, e) for g, grp in enumerate(envs) for j, e in enumerate(grp) if not e.done]
            if not active:
                break
            gens: dict[int, Generation] = {}
            t0 = time.monotonic()
            by_temp = {temp: SamplingParams(temperature=temp, top_p=s.top_p, max_new_tokens=s.max_new_tokens,
                                            seed=s.seed) for temp in s.temperatures}
            if getattr(policy, "per_request_params", False):  # every temperature in one call
                reqs = [obs[id(e)].request for _, _, e in active]
                plist = [by_temp[s.temperature(j)] for _, j, _ in active]
                for (_, _, e), gen in zip(active, policy.generate(reqs, plist)):
                    gens[id(e)] = gen
            else:  # one call a temperature
                for temp in sorted(set(s.temperatures)):
                    part = [(g, j, e) for g, j, e in active if s.temperature(j) == temp]
                    if not part:
                        continue
                    reqs = [obs[id(e)].request for _, _, e in part]
                    for (_, _, e), gen in zip(part, policy.generate(reqs, by_temp[temp])):
                        gens[id(e)] = gen
            stats.generate_s += time.monotonic() - t0
            t0 = time.monotonic()
            live = [e for _, _, e in active]
            results = step_batch(live, [gens[id(e)] for e in live])
            stats.judge_s += time.monotonic() - t0
            for e, r in zip(live, results):
                gen = gens[id(e)]
                o = obs[id(e)]
                prompt_text = "\n".join(str(msg.get("content") or "") for msg in o.messages)
                bd = None
                if gen.error is None and s.reward_preset != "leap":
                    bd = turn_scores(e.task, gen.text, r.evaluation, s, self.structural)
                ok = gen.error is None
                turns[id(e)].append(_Turn(
                    prompt_ids=gen.extra.get("prompt_ids") if ok else None,
                    completion_ids=gen.extra.get("completion_ids") if ok else None,
                    prompt_text=prompt_text, completion=gen.text, finish_reason=gen.finish_reason, record=r.record,
                    result=r.evaluation if ok else None, breakdown=bd, stop=r.stop, error=gen.error))
                if ok:
                    stats.turns_judged += 1
                    stats.compiled += int(_compiled(r.evaluation))
                    stats.correct += int(bool(r.record.correct))
                    stats.truncated += int(gen.finish_reason == "length")
                if r.observation is not None:
                    obs[id(e)] = r.observation
            if t == 0 and s.prune:
                for g, grp in enumerate(envs):
                    first = [turns[id(e)][0].result for e in grp if turns[id(e)][0].result is not None]
                    why = prune_decision(first, s)
                    if why is None:
                        continue
                    pruned[g] = why
                    if why == PRUNED_SOLVED:
                        stats.pruned_solved += 1
                    else:
                        stats.pruned_hopeless += 1
                    for e in grp:
                        if not e.done:
                            e.done, e.stop = True, why
                            turns[id(e)][-1].stop = why
        return self._rows(group_tasks, envs, turns, pruned, stats, step=step, rank=rank)

    def _rows(self, group_tasks, envs, turns, pruned, stats: RolloutStats, *, step: int, rank: int):
        s = self.settings
        out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask",
                                                     "turn_return", "turn_reward", "task_id", "sample", "trajectory",
                                                     "turn", "stop", "padding", *TERM_KEYS)}
        log_rows = []
        for g, (tid, grp) in enumerate(zip(group_tasks, envs)):
            leap: dict[tuple[int, int], float | None] = {}
            if s.reward_preset == "leap":
                judged = [(j, t, tr) for j, e in enumerate(grp) for t, tr in enumerate(turns[id(e)])
                          if tr.result is not None]
                vals = leap_scores([tr.completion for _, _, tr in judged], [tr.result for _, _, tr in judged])
                leap = {(j, t): v for (j, t, _), v in zip(judged, vals)}
            for j, e in enumerate(grp):
                trs = turns[id(e)]
                scores: list[float | None] = []
                for t, tr in enumerate(trs):
                    if tr.result is None:
                        scores.append(None)
                    elif s.reward_preset == "leap":
                        scores.append(leap.get((j, t)))
                    else:
                        scores.append(tr.breakdown.total if tr.breakdown else None)
                returns = discounted_returns(scores, s.gamma)
                for t in range(s.turns):
                    tr = trs[t] if t < len(trs) else None
                    real = tr is not None and tr.completion_ids is not None and len(tr.completion_ids) > 0
                    if real:
                        out["prompt_ids"].append(list(tr.prompt_ids))
                        out["completion_ids"].append(list(tr.completion_ids))
                        out["env_mask"].append([1] * len(tr.completion_ids))
                        ret = returns[t]
                    else:
                        pad = padding_row(self.eos_id)
                        for k in ("prompt_ids", "completion_ids", "env_mask"):
                            out[k].append(pad[k])
                        ret = None
                        stats.padding_rows += 1
                    terms = dict(tr.breakdown.terms) if (tr is not None and tr.breakdown) else {}
                    row_terms = {"r_ver": terms.get("ver"), "r_str": terms.get("str"),
                                 "r_compile": terms.get("compile"),
                                 "r_leap": leap.get((j, t)) if s.reward_preset == "leap" else None}
                    out["logprobs"].append(None)
                    out["turn_return"].append(ret)
                    out["turn_reward"].append(scores[t] if (real and t < len(scores)) else None)
                    out["task_id"].append(tid)
                    out["sample"].append(e.sample)
                    out["trajectory"].append(j)
                    out["turn"].append(t)
                    out["stop"].append(tr.stop if tr is not None else None)
                    out["padding"].append(not real)
                    for k in TERM_KEYS:
                        out[k].append(row_terms[k] if real else None)
                    stats.rows += 1
                    log_rows.append(self._log_row(step, rank, tid, e.sample, j, t, tr, real, ret,
                                                  scores[t] if (real and t < len(scores)) else None, row_terms,
                                                  pruned.get(g)))
        out["logprobs"] = None  # TRL recomputes them (no vLLM)
        self.last_stats = stats
        self.calls += 1
        self._write_log(log_rows)
        return out

    def _log_row(self, step, rank, tid, sample, j, t, tr: _Turn | None, real: bool, ret, score, terms, pruned):
        row: dict[str, Any] = {"step": step, "rank": rank, "task_id": tid, "sample": sample, "trajectory": j,
                               "turn": t, "temperature": self.settings.temperature(j), "padding": not real,
                               "reward": score, "turn_return": ret, **terms, "pruned": pruned}
        if tr is None:
            row.update(stop=None, prompt=None, completion=None)
            return row
        rec = tr.record
        row.update({
            "stop": tr.stop, "prompt": tr.prompt_text, "completion": tr.completion, "finish_reason": tr.finish_reason,
            "truncated": tr.finish_reason == "length", "gen_error": tr.error,
            "prompt_tokens": len(tr.prompt_ids) if tr.prompt_ids else None,
            "completion_tokens": len(tr.completion_ids) if tr.completion_ids else 0,
            "reward_terms": dict(tr.breakdown.terms) if tr.breakdown else {},
            "evaluation": {"candidate_id": rec.candidate_id, "status": rec.status, "stage": rec.stage,
                           "compiled": bool(_compiled(tr.result)) if tr.result is not None else False,
                           "correct": rec.correct, "failure_kind": rec.failure_kind,
                           "failure_message": (rec.failure_message or "")[:500] or None, "speedup": rec.speedup,
                           "candidate_cv": rec.candidate_cv},
        })
        return row

    def _write_log(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for r in rows:
            append_line(self.log_path, json.dumps(clean_json(r), allow_nan=False, default=str) + "\n", self._lock)


def read_rollout_log(path: str | Path) -> list[dict[str, Any]]:
    """The rollout log's rows (a torn last line is skipped)."""
    from cudaperf.eval.run import _read_jsonl

    return _read_jsonl(Path(path))


__all__ = ["PRUNED_HOPELESS", "PRUNED_SOLVED", "REWARD_PRESETS", "Rollout", "RolloutError", "RolloutSettings",
           "RolloutStats", "TrainerPolicy", "discounted_returns", "leap_scores", "padding_row", "prompt_task_id",
           "prune_decision", "read_rollout_log", "task_ids_of_groups", "turn_scores"]
