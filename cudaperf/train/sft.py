"""Supervised warm start (``cudaperf sft``): chat examples from the dataset's training split, LoRA through TRL's
``SFTTrainer``, a run record, and an optional held-out evaluation through ``cudaperf eval``'s loop.

Data (:func:`build_examples`):

* Tasks: the built-in dataset's tasks that are in the training part of **both** splits (task split ``train`` and
  family split ``train``) and kept by the paper's filter, the same set the few-shot examples come from; so no
  training example is a held-out task or comes from a held-out family, whichever split an evaluation uses.
  :func:`check_training_only` re-checks every example (and its few-shot examples) against the dataset and raises.
* Answers: per task, its ``variants_per_task`` fastest **correct** measured variants (correct in every scored run,
  :func:`cudaperf.dataset.measure.candidate_summary`) whose measured speedup is at least ``min_speedup``, ties by
  candidate id; a variant that is not correct is never used. The answer is the paper's output format,
  ``<OUTPUT_CUDA>\\n{code}\\n</OUTPUT_CUDA>`` (as the oracle policy writes it), which
  :func:`cudaperf.harness.extract.extract_code` reads back to the code.
* Prompts: the prompt ``cudaperf eval`` sends at the first turn (:func:`cudaperf.env.prompt.build_messages`, one
  user message), with the few-shot examples eval would draw (:class:`cudaperf.env.prompt.FewShotPool`, seeded by
  the seed and the task id), or none with ``fewshot=False``. Few-shot examples are dropped one at a time, last
  first, until prompt + answer fit ``max_length_tokens`` (eval drops them to fit the context the same way); an
  example whose answer does not fit even without them is left out and counted (``too_long``), never truncated.
* Order: shuffled with the seed; ``max_examples`` keeps the first N of that order. Same settings, same examples
  (their sha256 is in the run record, and a resumed run must match it).

Training (:func:`run_sft`): conversational prompt-completion rows, so TRL puts only the answer (and its end of
turn) in the loss; LoRA on all linear layers (peft), or QLoRA (bitsandbytes 4-bit NF4) with ``qlora``; objective
``plain`` (TRL's loss) or ``cuset`` (:mod:`cudaperf.train.cuset`). The output directory holds::

    OUT/adapter/        the final PEFT adapter (+ tokenizer): cudaperf eval --policy hf:MODEL+OUT/adapter
    OUT/checkpoints/    checkpoint-STEP/ (adapter, optimizer, scheduler, RNG), the last save_total_limit kept
    OUT/tb/             TensorBoard event files (when tensorboard is installed)
    OUT/sft_run.json    the run record: settings, data counts, task and candidate ids, wall time, losses
    OUT/eval/           the held-out evaluation's run directory (cudaperf eval's layout), when one ran
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cudaperf.env.prompt import PromptSettings, build_messages
from cudaperf.train.common import TimeBudget as _TimeBudget
from cudaperf.train.common import TrainRunError, bnb_4bit_config, check_qlora, lora_config, tensorboard_callbacks
from cudaperf.train.common import finite as _finite
from cudaperf.train.common import last_checkpoint as _last_checkpoint
from cudaperf.train.common import resolve_model_dir as _resolve_model_dir
from cudaperf.train.common import versions as _versions
from cudaperf.train.common import write_json as _write_json
from cudaperf.train.cuset import SPANS_COLUMN, CuSeTSettings
from cudaperf.train.sensitive import SENSITIVE_CLASSES, cuda_sensitive_spans

OBJECTIVES = ("plain", "cuset")
KINDS = ("all", "c", "pytorch")
RECORD = "sft_run.json"
ANSWER_OPEN = "<OUTPUT_CUDA>\n"
ANSWER_CLOSE = "\n</OUTPUT_CUDA>"


class TrainingDataError(ValueError):
    """No usable training example, or an example that breaks the training-split rule."""


class SFTRunError(TrainRunError):
    """The output directory, the model or the settings do not allow the run (the message says what to change)."""


# --------------------------------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class SFTDataSettings:
    variants_per_task: int = 2
    """Answers per task: its fastest correct measured variants (top-k by measured speedup)."""
    min_speedup: float = 1.0
    """A variant slower than this (measured speedup over the sequential baseline) is not an answer."""
    fewshot: bool = True
    """The few-shot examples eval puts in the prompt (False: zero-shot prompts)."""
    kinds: str = "all"
    """``all``, ``c`` (C tasks only) or ``pytorch`` (the ``pt_*`` families only)."""
    max_examples: int | None = None
    """Keep only the first N examples of the seeded order (None: all)."""
    max_answer_chars: int = 8000
    """A variant whose code is longer than this is not an answer."""
    seed: int = 0
    """Seeds the few-shot draw and the order of the examples."""

    def __post_init__(self) -> None:
        if self.variants_per_task < 1:
            raise ValueError("variants_per_task must be >= 1")
        if self.kinds not in KINDS:
            raise ValueError(f"kinds must be one of {', '.join(KINDS)}, not {self.kinds!r}")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError("max_examples must be >= 1 (or None for all)")


@dataclass(frozen=True)
class LoRASettings:
    r: int = 16
    """LoRA rank."""
    alpha: int = 32
    """LoRA alpha (the update is scaled by alpha / r)."""
    dropout: float = 0.05
    target_modules: str = "all-linear"
    """peft's ``target_modules``: ``all-linear`` (every linear layer but the output head) or comma-separated names."""

    def __post_init__(self) -> None:
        if self.r < 1 or self.alpha < 1:
            raise ValueError("LoRA r and alpha must be >= 1")


@dataclass(frozen=True)
class SFTTrainSettings:
    objective: str = "plain"
    """``plain`` (TRL's loss on the answer tokens) or ``cuset`` (:mod:`cudaperf.train.cuset`)."""
    epochs: float = 2.0
    """Passes over the examples (ignored when max_steps > 0)."""
    max_steps: int = -1
    """Optimizer steps; -1: as many as ``epochs`` take."""
    learning_rate: float = 2e-4
    batch_size: int = 4
    """Examples per device per micro-batch."""
    grad_accum: int = 4
    """Micro-batches per optimizer step."""
    max_length_tokens: int = 4096
    """Prompt + answer, in the model's tokens; few-shot examples are dropped to fit, longer answers left out."""
    warmup_fraction: float = 0.03
    """Linear warm-up over this fraction of the steps, then linear decay."""
    weight_decay: float = 0.0
    lora: LoRASettings = LoRASettings()
    qlora: bool = False
    """Load the base model in 4-bit NF4 (bitsandbytes, CUDA only) and train the LoRA adapter on it."""
    gradient_checkpointing: bool = True
    group_by_length: bool = False
    """Batch examples of similar token lengths together (transformers' ``LengthGroupedSampler``: random mega-batches,
    sorted within), so that a micro-batch pads less; zero-shot examples range from a few hundred to
    ``max_length_tokens`` tokens. Off: a random order."""
    logging_steps: int = 5
    save_steps: int = 50
    """A checkpoint every this many optimizer steps (and at the end)."""
    save_total_limit: int = 2
    seed: int = 0
    device: str = "auto"
    """``auto`` (the GPU when there is one) or ``cpu``."""
    max_minutes: float | None = None
    """Stop training after the optimizer step that passes this many minutes of training (a checkpoint and the
    adapter are saved; ``resume`` goes on from there). None: no limit."""
    cuset: CuSeTSettings = CuSeTSettings()

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}")
        if self.device not in ("auto", "cpu"):
            raise ValueError("device must be 'auto' or 'cpu'")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError("max_steps must be > 0, or -1 to let epochs decide")
        if self.max_steps == -1 and not self.epochs > 0:
            raise ValueError("epochs must be > 0")
        if self.batch_size < 1 or self.grad_accum < 1 or self.max_length_tokens < 16:
            raise ValueError("batch_size and grad_accum must be >= 1, max_length_tokens >= 16")
        if not self.learning_rate > 0:
            raise ValueError("learning_rate must be > 0")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError("warmup_fraction must be in [0, 1)")
        if self.logging_steps < 1 or self.save_steps < 1 or self.save_total_limit < 1:
            raise ValueError("logging_steps, save_steps and save_total_limit must be >= 1")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError("max_minutes must be > 0 (or None for no limit)")


@dataclass(frozen=True)
class SFTEvalSettings:
    """The held-out evaluation after training: ``cudaperf eval``'s loop with the trained adapter."""

    tasks: str = "test"
    """A ``cudaperf eval --tasks`` spec (default: the built-in test split by task)."""
    samples: int = 5
    turns: int = 3
    compile_only: bool = False
    """No GPU: static checks and nvcc only, as ``cudaperf eval --compile-only``."""
    limit: int | None = None
    """Only the first N tasks of the set."""
    max_new_tokens: int = 1536
    temperature: float = 0.7
    top_p: float = 0.9
    batch_size: int = 64
    summarizer: str = "policy"
    seed: int = 0
    context_tokens: int | None = None
    """Prompt + answer in tokens (few-shot examples dropped to fit): the training run's ``max_length_tokens``, so
    the held-out prompts are built as the training ones were; None: the model's context."""
    decoder: str = "hf"
    """How the adapter's answers are decoded (:data:`cudaperf.policy.decode.DECODERS`, as ``cudaperf eval
    --decoder``)."""


# --------------------------------------------------------------------------------------------------- examples

@dataclass(frozen=True)
class SFTExample:
    task_id: str
    candidate_id: str
    speedup: float
    """The variant's measured speedup (dataset label)."""
    prompt: tuple[Mapping[str, str], ...]
    """The chat before the answer (eval's first-turn prompt: one user message)."""
    answer: str
    """``<OUTPUT_CUDA>\\n{code}\\n</OUTPUT_CUDA>``."""
    code: str
    fewshot_task_ids: tuple[str, ...]
    """The tasks of the few-shot examples left in the prompt."""


@dataclass(frozen=True)
class ExampleSet:
    examples: tuple[SFTExample, ...]
    counts: dict[str, int]
    """``train_tasks`` (training tasks kept by the filter, of the kinds asked for), ``tasks_with_answers``,
    ``answers`` (variants chosen), ``too_long`` (left out: no fit in max_length_tokens), ``examples``,
    ``tasks_used``, ``fewshot_examples`` (few-shot examples in all prompts together), ``fewshot_dropped`` (drawn
    but dropped to fit)."""
    dataset_version: str
    train_task_ids: frozenset[str]

    @property
    def sha256(self) -> str:
        h = hashlib.sha256()
        for e in self.examples:
            h.update(json.dumps([e.task_id, e.candidate_id, [dict(m) for m in e.prompt], e.answer]).encode())
            h.update(b"\n")
        return h.hexdigest()


def answer_text(code: str) -> str:
    """The paper's output format around ``code`` (what the oracle policy answers)."""
    return f"{ANSWER_OPEN}{code.strip(chr(10))}{ANSWER_CLOSE}"


class ChatTokenCounter:
    """Token counts of chats with a tokenizer's chat template: the prompt as eval encodes it (with the generation
    prompt), and a whole prompt + answer conversation as TRL encodes it."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise SFTRunError("the tokenizer has no chat template: SFT trains on the chat format eval prompts in")
        self.tokenizer = tokenizer

    def _ids(self, messages: Sequence[Mapping[str, str]], generation_prompt: bool) -> list[int]:
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        enc = self.tokenizer.apply_chat_template(chat, add_generation_prompt=generation_prompt, tokenize=True,
                                                 return_dict=True)
        ids = enc["input_ids"]
        return list(ids[0] if ids and isinstance(ids[0], list) else ids)

    def prompt_tokens(self, messages: Sequence[Mapping[str, str]]) -> int:
        return len(self._ids(messages, True))

    def conversation_tokens(self, messages: Sequence[Mapping[str, str]], answer: str) -> int:
        return len(self._ids(list(messages) + [{"role": "assistant", "content": answer}], False))

    def text_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _load_dataset(dataset: Any):
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    if dataset is None or isinstance(dataset, (str, Path)):
        return Dataset.load(Path(dataset) if dataset is not None else default_dataset_dir())
    return dataset


def training_task_ids(ds: Any, kinds: str = "all") -> frozenset[str]:
    """The tasks SFT may use: training part of both splits, kept by the paper's filter, of ``kinds``."""
    from cudaperf.dataset.measure import candidate_summary, family_kind, task_filter

    verdict = task_filter(ds, candidate_summary(ds))
    return frozenset(t["id"] for t in ds.tasks
                     if t["split_task"] == "train" and t["split_family"] == "train" and verdict.get(t["id"]) == "kept"
                     and (kinds == "all" or family_kind(t["family"]) == kinds))


def check_training_only(examples: Sequence[SFTExample], ds: Any) -> None:
    """Raise :class:`TrainingDataError` when an example's task (or one of its few-shot examples' tasks) is not in
    the training part of both splits, or its candidate is not a correct measured variant of that task."""
    from cudaperf.dataset.measure import candidate_summary

    rows = {t["id"]: t for t in ds.tasks}
    summary = candidate_summary(ds)
    cands = {c["candidate_id"]: c for c in ds.candidates}
    for e in examples:
        for tid in (e.task_id, *e.fewshot_task_ids):
            t = rows.get(tid)
            if t is None or t["split_task"] != "train" or t["split_family"] != "train":
                where = "unknown" if t is None else f"split_task={t['split_task']}, split_family={t['split_family']}"
                raise TrainingDataError(f"example {e.candidate_id}: task {tid} is not a training task ({where})")
        c = cands.get(e.candidate_id)
        s = summary.get(e.candidate_id)
        if c is None or c["task_id"] != e.task_id or not s or not s["valid"]:
            raise TrainingDataError(f"example {e.candidate_id}: not a correct measured variant of {e.task_id}")


def build_examples(settings: SFTDataSettings = SFTDataSettings(), *, dataset: Any = None,
                   counter: ChatTokenCounter | None = None, max_length_tokens: int | None = None,
                   prompt_settings: PromptSettings = PromptSettings()) -> ExampleSet:
    """The SFT examples (see the module docstring). ``dataset``: a :class:`~cudaperf.dataset.store.Dataset`, its
    directory, or None for the built-in one (the few-shot pool is read from the dataset's directory). Without
    ``counter`` nothing is fitted to a length (every answer kept, every drawn few-shot example kept).
    Raises :class:`TrainingDataError` when no example is left."""
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import candidate_summary
    from cudaperf.env.prompt import FewShotPool

    s = settings
    if (counter is None) != (max_length_tokens is None):
        raise ValueError("give both counter and max_length_tokens, or neither")
    ds = _load_dataset(dataset)
    train = training_task_ids(ds, s.kinds)
    summary = candidate_summary(ds)
    per_task: dict[str, list[tuple[float, str, str]]] = {}
    for c in ds.candidates:
        sm = summary.get(c["candidate_id"])
        if c["task_id"] not in train or not sm or not sm["valid"]:
            continue
        sp = sm["speedup"]
        if sp is None or not math.isfinite(sp) or sp < s.min_speedup or len(c["code"]) > s.max_answer_chars:
            continue
        per_task.setdefault(c["task_id"], []).append((sp, c["candidate_id"], c["code"]))
    chosen = []
    for tid in sorted(per_task):
        best = sorted(per_task[tid], key=lambda v: (-v[0], v[1]))[: s.variants_per_task]
        chosen.extend((tid, sp, cid, code) for sp, cid, code in best)
    random.Random(f"sft-order:{s.seed}").shuffle(chosen)

    tasks = dataset_tasks(ds)
    pool = FewShotPool(ds.root, prompt_settings) if s.fewshot else None
    if pool is not None and not pool.train_task_ids <= training_task_ids(ds, "all"):
        raise TrainingDataError("the few-shot pool holds tasks outside the training split")
    fewshot_cache: dict[str, list] = {}
    block_tokens: dict[str, int] = {}
    examples: list[SFTExample] = []
    too_long = n_fewshot = n_dropped = 0
    for tid, sp, cid, code in chosen:
        if s.max_examples is not None and len(examples) >= s.max_examples:
            break
        task = tasks[tid]
        answer = answer_text(code)
        if pool is not None and tid not in fewshot_cache:
            fewshot_cache[tid] = pool.examples(task, s.seed)
        drawn = fewshot_cache.get(tid, [])
        if counter is not None:
            fitted = _fit(task, drawn, answer, counter, max_length_tokens, prompt_settings, block_tokens)
            if fitted is None:
                too_long += 1
                continue
            msgs, kept = fitted
        else:
            msgs = build_messages(task, drawn, settings=prompt_settings)
            kept = list(drawn)
        n_fewshot += len(kept)
        n_dropped += len(drawn) - len(kept)
        examples.append(SFTExample(task_id=tid, candidate_id=cid, speedup=float(sp), prompt=tuple(msgs),
                                   answer=answer, code=code, fewshot_task_ids=tuple(ex.task_id for ex in kept)))
    counts = {"train_tasks": len(train), "tasks_with_answers": len(per_task), "answers": len(chosen),
              "too_long": too_long, "examples": len(examples), "tasks_used": len({e.task_id for e in examples}),
              "fewshot_examples": n_fewshot, "fewshot_dropped": n_dropped}
    if not examples:
        raise TrainingDataError(
            f"no training example: {counts['train_tasks']} training tasks, {counts['tasks_with_answers']} with a "
            f"correct variant >= {s.min_speedup}x, {counts['answers']} answers chosen, {too_long} too long for "
            f"max_length_tokens={max_length_tokens} (raise --max-length, lower --min-speedup, or widen --kinds)")
    check_training_only(examples, ds)
    return ExampleSet(tuple(examples), counts, ds.version(), train)


def _fit(task: Any, drawn: Sequence[Any], answer: str, counter: ChatTokenCounter, max_tokens: int,
         prompt_settings: PromptSettings, block_tokens: dict[str, int]):
    """(messages, few-shot examples kept) for the longest prefix of ``drawn`` whose prompt + answer fits
    ``max_tokens`` exactly (as TRL will tokenize it), or None when the answer does not fit without any example.

    Tokenizing every candidate prompt of a few thousand tokens is slow, so the number kept is first estimated from
    each example block's own token count (cached per example task: the prompt with it less the prompt without
    it), then checked exactly and lowered until it fits."""
    from cudaperf.env.prompt import render_prompt

    base_msgs = build_messages(task, [], settings=prompt_settings)
    base = counter.conversation_tokens(base_msgs, answer)
    if base > max_tokens:
        return None
    if not drawn:
        return base_msgs, []
    bare = None
    k, total = 0, base
    for ex in drawn:
        if ex.task_id not in block_tokens:
            if bare is None:
                bare = counter.text_tokens(render_prompt(task, [], "", "", prompt_settings))
            block_tokens[ex.task_id] = counter.text_tokens(render_prompt(task, [ex], "", "", prompt_settings)) - bare
        if total + block_tokens[ex.task_id] > max_tokens:
            break
        total += block_tokens[ex.task_id]
        k += 1
    while k > 0:
        msgs = build_messages(task, drawn[:k], settings=prompt_settings)
        if counter.conversation_tokens(msgs, answer) <= max_tokens:
            return msgs, list(drawn[:k])
        k -= 1
    return base_msgs, []


def to_hf_dataset(examples: Sequence[SFTExample], *, with_spans: bool = False,
                  classes: Sequence[str] = SENSITIVE_CLASSES):
    """The examples as a ``datasets.Dataset`` in TRL's conversational prompt-completion format (``prompt``,
    ``completion``, plus ``task_id`` and ``candidate_id``); ``with_spans`` adds ``sensitive_spans``: the answer's
    CUDA-sensitive character ranges (:func:`cudaperf.train.sensitive.cuda_sensitive_spans`), relative to the
    answer text."""
    from datasets import Dataset as HFDataset

    rows: dict[str, list[Any]] = {"prompt": [], "completion": [], "task_id": [], "candidate_id": []}
    if with_spans:
        rows[SPANS_COLUMN] = []
    for e in examples:
        rows["prompt"].append([{"role": m["role"], "content": m["content"]} for m in e.prompt])
        rows["completion"].append([{"role": "assistant", "content": e.answer}])
        rows["task_id"].append(e.task_id)
        rows["candidate_id"].append(e.candidate_id)
        if with_spans:
            code = e.code.strip("\n")
            shift = len(ANSWER_OPEN)
            assert e.answer[shift:shift + len(code)] == code  # answer_text's layout
            rows[SPANS_COLUMN].append([[sp.start_char + shift, sp.end_char + shift]
                                       for sp in cuda_sensitive_spans(code, classes)])
    return HFDataset.from_dict(rows)


# --------------------------------------------------------------------------------------------------- the run

def resolve_model_dir(model: str | Path) -> Path:
    """``embedded`` -> the embedded model's transformers directory (converted from its GGUF the first time);
    otherwise a local model directory, checked. Raises :class:`SFTRunError` with what is missing."""
    return _resolve_model_dir(model, SFTRunError)


@dataclass(frozen=True)
class SFTResult:
    out_dir: Path
    adapter_dir: Path
    record_path: Path
    model_dir: Path
    n_examples: int
    global_step: int
    final_loss: float | None
    """The last logged training loss."""
    wall_s: float
    record: dict[str, Any] = field(default_factory=dict)


def _mean_logged(history: Sequence[Mapping[str, Any]], key: str) -> float | None:
    vals = [v for v in (_finite(r.get(key)) for r in history if key in r) if v is not None]
    return sum(vals) / len(vals) if vals else None


def run_sft(model: str | Path, out_dir: str | Path, data: SFTDataSettings = SFTDataSettings(),
            train: SFTTrainSettings = SFTTrainSettings(), *, resume: bool = False, dataset: Any = None,
            log: Callable[[str], None] = print) -> SFTResult:
    """Train a LoRA adapter on the SFT examples and write ``out_dir`` (see the module docstring).

    ``model``: ``embedded`` or a local transformers directory. ``resume``: continue from the last checkpoint in
    ``out_dir/checkpoints`` (the examples must be the same). Raises :class:`SFTRunError` (output directory, model,
    QLoRA requirements) and :class:`TrainingDataError` (no examples)."""
    t0 = time.monotonic()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local: never reach for a hub
    out = Path(out_dir)
    ckpt_dir = out / "checkpoints"
    last = _last_checkpoint(ckpt_dir) if ckpt_dir.is_dir() else None
    if resume and last is None:
        raise SFTRunError(f"--resume: {ckpt_dir} holds no checkpoint-* directory to continue from")
    if not resume and last is not None:
        raise SFTRunError(f"{out} holds checkpoints of a run ({last.name}): pass --resume to continue it, or give "
                          "another --out")
    model_dir = resolve_model_dir(model)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    use_cuda = train.device == "auto" and torch.cuda.is_available()
    if train.qlora:
        check_qlora(use_cuda, SFTRunError)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    counter = ChatTokenCounter(tokenizer)
    log(f"building examples from the training split (max {train.max_length_tokens} tokens each) ...")
    ds = _load_dataset(dataset)
    exs = build_examples(data, dataset=ds, counter=counter, max_length_tokens=train.max_length_tokens)
    c = exs.counts
    log(f"{c['examples']} examples from {c['tasks_used']} of {c['train_tasks']} training tasks "
        f"({c['too_long']} answers too long left out; {c['fewshot_examples']} few-shot examples in the prompts, "
        f"{c['fewshot_dropped']} dropped to fit)")

    out.mkdir(parents=True, exist_ok=True)
    record_path = out / RECORD
    if resume and record_path.exists():
        old = json.loads(record_path.read_text(encoding="utf-8"))
        diffs = [k for k, new in (("examples_sha256", exs.sha256), ("model_dir", str(model_dir)),
                                  ("objective", train.objective)) if old.get(k) != new]
        if diffs:
            raise SFTRunError(f"--resume: {out} was trained with other {', '.join(diffs)} (the examples, the model "
                              "and the objective must be those of the checkpoints)")
    bf16 = bool(use_cuda and torch.cuda.is_bf16_supported())
    record: dict[str, Any] = {
        "status": "running", "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": str(model), "model_dir": str(model_dir), "objective": train.objective,
        "data_settings": asdict(data), "train_settings": asdict(train), "dataset_version": exs.dataset_version,
        "data_counts": dict(c), "examples_sha256": exs.sha256,
        "task_ids": sorted({e.task_id for e in exs.examples}),
        "candidate_ids": [e.candidate_id for e in exs.examples],
        "device": torch.cuda.get_device_name(0) if use_cuda else "cpu", "bf16": bf16, "versions": _versions(),
        "resumed_from": last.name if resume and last else None,
    }
    _write_json(record_path, record)

    quant = None
    load_kwargs: dict[str, Any] = {"dtype": torch.bfloat16 if bf16 else torch.float32}
    if train.qlora:
        quant = bnb_4bit_config(bf16)
        load_kwargs.update(quantization_config=quant, device_map={"": torch.cuda.current_device()})
    try:
        lm = AutoModelForCausalLM.from_pretrained(model_dir, **load_kwargs)
    except Exception as exc:
        raise SFTRunError(f"cannot load a causal LM from {model_dir}: {type(exc).__name__}: {exc}") from exc

    trainer = _make_trainer(lm, tokenizer, exs, train, out, bf16=bf16, use_cuda=use_cuda, log=log)
    if train.objective == "cuset" and getattr(trainer, "cuset_alignment_failures", 0):
        log(f"note: {trainer.cuset_alignment_failures} examples could not be lined up with their tokens; they "
            "train with no CUDA-sensitive token")
    log(f"training: objective {train.objective}, LoRA r={train.lora.r}{' on 4-bit (QLoRA)' if train.qlora else ''}"
        f", {'resuming from ' + last.name if resume and last else 'from the base model'}")
    t_train = time.monotonic()
    budget = _TimeBudget(train.max_minutes)
    if train.max_minutes is not None:
        trainer.add_callback(budget)
    output = trainer.train(resume_from_checkpoint=str(last) if resume and last else None)
    train_wall_s = time.monotonic() - t_train
    if budget.stopped:
        log(f"stopped at step {trainer.state.global_step} after {train.max_minutes} minutes (--max-minutes); "
            "--resume continues from the checkpoint saved there")
    adapter_dir = out / "adapter"
    trainer.save_model(str(adapter_dir))
    history = list(trainer.state.log_history)
    losses = [r["loss"] for r in history if "loss" in r]
    final_loss = _finite(losses[-1]) if losses else None
    record.update({
        "status": "done", "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "global_step": int(trainer.state.global_step), "epochs_done": _finite(trainer.state.epoch),
        "final_loss": final_loss, "train_loss_mean": _finite(output.training_loss),
        "train_wall_s": round(train_wall_s, 1), "wall_s": round(time.monotonic() - t0, 1),
        "adapter_dir": str(adapter_dir), "stopped_by_time_budget": budget.stopped, "log_history": history,
        "tensorboard_dir": str(out / "tb") if (out / "tb").is_dir() else None,
    })
    if train.objective == "cuset":
        record["cuset_means"] = {k: _mean_logged(history, k) for k in
                                 ("cuset/masked_fraction", "cuset/sensitive_fraction", "cuset/region_fraction",
                                  "cuset/mean_sample_weight", "cuset/weighted_sample_fraction")}
        record["cuset_alignment_failures"] = int(getattr(trainer, "cuset_alignment_failures", 0))
    _write_json(record_path, record)
    del trainer, lm
    if use_cuda:
        torch.cuda.empty_cache()
    return SFTResult(out_dir=out, adapter_dir=adapter_dir, record_path=record_path, model_dir=model_dir,
                     n_examples=len(exs.examples), global_step=record["global_step"], final_loss=final_loss,
                     wall_s=record["wall_s"], record=record)


def _make_trainer(lm: Any, tokenizer: Any, exs: ExampleSet, train: SFTTrainSettings, out: Path, *, bf16: bool,
                  use_cuda: bool, log: Callable[[str], None]):
    from trl import SFTConfig, SFTTrainer

    callbacks = tensorboard_callbacks(out / "tb", log, f"the losses are in {out / RECORD} and the checkpoints' "
                                      "trainer_state.json")
    peft_config = lora_config(train.lora.r, train.lora.alpha, train.lora.dropout, train.lora.target_modules)
    args = SFTConfig(
        output_dir=str(out / "checkpoints"), num_train_epochs=train.epochs, max_steps=train.max_steps,
        learning_rate=train.learning_rate, per_device_train_batch_size=train.batch_size,
        gradient_accumulation_steps=train.grad_accum, max_length=train.max_length_tokens,
        warmup_steps=train.warmup_fraction, weight_decay=train.weight_decay, lr_scheduler_type="linear",
        logging_steps=train.logging_steps, logging_first_step=True, save_strategy="steps",
        save_steps=train.save_steps, save_total_limit=train.save_total_limit, seed=train.seed, data_seed=train.seed,
        bf16=bf16, fp16=False, use_cpu=not use_cuda, gradient_checkpointing=train.gradient_checkpointing,
        completion_only_loss=True, report_to="none", shuffle_dataset=False, dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if train.group_by_length else "random",
        optim="adamw_torch_fused" if use_cuda else "adamw_torch",
    )
    cuset = train.objective == "cuset"
    hf = to_hf_dataset(exs.examples, with_spans=cuset, classes=train.cuset.classes)
    common = dict(model=lm, args=args, train_dataset=hf, processing_class=tokenizer, peft_config=peft_config,
                  callbacks=callbacks)
    if cuset:
        from cudaperf.train.cuset import CuSeTTrainer

        return CuSeTTrainer(cuset=train.cuset, **common)
    return SFTTrainer(**common)


# --------------------------------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class SFTEvalOutcome:
    ran: bool
    reason: str
    """Why it did not run, or what it ran ("compile only" or "full")."""
    run_dir: Path | None = None
    metrics_json: Path | None = None
    report_html: Path | None = None
    policy_spec: str | None = None


def evaluate_adapter(model_dir: str | Path, adapter_dir: str | Path, run_dir: str | Path,
                     settings: SFTEvalSettings = SFTEvalSettings(), *, train_task_ids: frozenset[str] = frozenset(),
                     progress: Callable[[str, int, int], None] | None = None,
                     log: Callable[[str], None] = print) -> SFTEvalOutcome:
    """Evaluate ``hf:MODEL+ADAPTER`` on a task set with ``cudaperf eval``'s loop (:func:`cudaperf.eval.run.run_eval`)
    and write its report (:func:`cudaperf.eval.report.write_report`). Without a GPU it runs only with
    ``compile_only`` (as ``cudaperf eval``), otherwise it returns ``ran=False`` with the reason. A task of the set
    that the adapter was trained on is reported through ``log`` (a custom task set can overlap)."""
    from cudaperf.eval.report import write_report
    from cudaperf.eval.run import EvalOptions, run_eval
    from cudaperf.eval.tasksets import load_taskset, select
    from cudaperf.harness.environment import gpu_count
    from cudaperf.policy.base import SamplingParams
    from cudaperf.policy.spec import load_policy

    s = settings
    if not s.compile_only and gpu_count() == 0:
        return SFTEvalOutcome(False, "no NVIDIA GPU is visible: the held-out evaluation runs every answer on a GPU "
                                     "(pass --compile-only to judge static checks and compilation only)")
    ts = select(load_taskset(s.tasks), limit=s.limit)
    overlap = sorted({t.id for t in ts.tasks} & set(train_task_ids))
    if overlap:
        log(f"warning: {len(overlap)} tasks of --eval-tasks {s.tasks} were trained on (e.g. {overlap[0]}): "
            "their results are not held-out")
    spec = f"hf:{Path(model_dir)}+{Path(adapter_dir)}"
    sampling = SamplingParams(temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed)
    options = EvalOptions(samples=s.samples, turns=s.turns, sampling=sampling, seed=s.seed,
                          compile_only=s.compile_only, summarizer=s.summarizer, chunk=s.batch_size)
    log(f"held-out evaluation: {len(ts.tasks)} tasks ({ts.benchmark}) x {s.samples} samples x up to {s.turns} "
        f"turns, policy {spec}" + (" (compile only)" if s.compile_only else ""))
    pol = load_policy(spec, batch_size=s.batch_size, context_tokens=s.context_tokens, decoder=s.decoder)
    try:
        run_eval(pol, ts, run_dir, options, progress=progress,
                 settings_record={"policy_spec": spec, "batch_size": s.batch_size, "decoder": s.decoder,
                                  "context_tokens": s.context_tokens, "summarizer": s.summarizer,
                                  "fewshot": True, "from": "cudaperf sft"})
    finally:
        pol.close()
    paths = write_report(run_dir)
    return SFTEvalOutcome(True, "compile only" if s.compile_only else "full", Path(run_dir),
                          Path(paths.metrics_json), Path(paths.report_html), spec)


def with_eval(record_path: Path, outcome: SFTEvalOutcome) -> None:
    """Add the evaluation's outcome (and its headline metrics, when it ran) to the run record."""
    record = json.loads(record_path.read_text(encoding="utf-8"))
    ev: dict[str, Any] = {"ran": outcome.ran, "reason": outcome.reason, "policy": outcome.policy_spec,
                          "run_dir": str(outcome.run_dir) if outcome.run_dir else None}
    if outcome.metrics_json and outcome.metrics_json.exists():
        ev["metrics_json"] = str(outcome.metrics_json)
        ev["report_html"] = str(outcome.report_html)
    record["eval"] = ev
    _write_json(record_path, record)


__all__ = ["ChatTokenCounter", "ExampleSet", "LoRASettings", "OBJECTIVES", "SFTDataSettings", "SFTEvalOutcome",
           "SFTEvalSettings", "SFTExample", "SFTResult", "SFTRunError", "SFTTrainSettings", "TrainingDataError",
           "answer_text", "build_examples", "check_training_only", "evaluate_adapter", "resolve_model_dir",
           "run_sft", "to_hf_dataset", "training_task_ids", "with_eval"]
