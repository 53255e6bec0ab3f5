"""cudaperf dataset build | measure | conditioning | ingest | supersede | add-candidates | features | stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from cudaperf.cli.common import DATASET_HELP, PHASE_LABELS, _bar, _fail, _open_dataset, console, err

dataset_app = typer.Typer(help="The built-in C->CUDA dataset: generate it from the task families, measure its "
                          "candidates on the local GPUs, add external candidates, print statistics.",
                          no_args_is_help=True)

KIND_NAMES = {"c": "C", "pytorch": "PyTorch"}


def register(app: typer.Typer) -> None:
    """Add the ``dataset`` sub-app to ``app``."""
    app.add_typer(dataset_app, name="dataset")


@dataset_app.command("build")
def dataset_build(
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    families: Optional[str] = typer.Option(None, "--families", help="Comma-separated families (default: all)."),
    n_tasks: Optional[int] = typer.Option(None, "--n-tasks", help="Tasks per family (default: each family's own)."),
) -> None:
    """Generate tasks and CUDA variants from the task families, C and PyTorch (pt_*), with no GPU.

    Measurements of unchanged variants and external candidates are kept; rerunning is safe.
    """
    from cudaperf.dataset.build import SPLIT_RULES, build
    from cudaperf.tasks.schema import TaskError

    ds = _open_dataset(dataset, missing_ok=True)
    fams = [f.strip() for f in families.split(",")] if families else None
    with _bar() as bar:
        tid = bar.add_task("generating", total=None)
        try:
            info = build(ds, families=fams, n_tasks=n_tasks,
                         progress=lambda i, n: bar.update(tid, completed=i, total=n))
        except (ValueError, TaskError) as exc:
            _fail(str(exc))
    version = ds.save({"split_rules": SPLIT_RULES})
    err.print(f"{info['tasks']} tasks from {info['families']} families, {info['candidates']} candidates; "
              f"{info['measurements_kept']} measurements kept, {info['measurements_dropped']} dropped (code changed); "
              f"version {version} in {ds.root}")
    for tid, why in info["degenerate"].items():
        err.print(f"[yellow]left out {tid}[/]: its reference output is degenerate ({'; '.join(why)})")


@dataset_app.command("measure")
def dataset_measure(
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    families: Optional[str] = typer.Option(None, "--families", help="Only these families (comma-separated)."),
    remeasure: bool = typer.Option(False, "--remeasure", help="Measure candidates that already have a scored "
                                   "measurement again (a new run; the old rows stay). A candidate's label pools "
                                   "its runs (each side's fastest window over them): three runs repeat to within "
                                   "5 % on the H200 machines."),
    sample: Optional[float] = typer.Option(None, "--sample", help="Measure this fraction of the tasks (all their "
                                           "candidates), drawn with --seed; with --remeasure, a reproducibility "
                                           "check."),
    extend_sample: Optional[str] = typer.Option(None, "--extend-sample", metavar="RUN_ID", help="With --sample: "
                                                "the tasks that run RUN_ID measured are part of the sample "
                                                "already; measure only tasks drawn from the others, as many as "
                                                "bring the sample to --sample of the selected tasks (a "
                                                "reproducibility sample that grows with the dataset)."),
    seed: int = typer.Option(0, "--seed"),
    limit_tasks: Optional[int] = typer.Option(None, "--limit-tasks", help="At most this many tasks."),
    per_family: Optional[int] = typer.Option(None, "--per-family", help="At most this many tasks per family "
                                             "(drawn with --seed): a quick stratified sample."),
    store: Optional[Path] = typer.Option(None, "--store", help="Raw results JSONL (resumable; default "
                                         "DATASET/runs/RUN_ID.jsonl)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Resume this run (same --store)."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Start no candidate after this many "
                                                "minutes; the rest is left for a rerun (fits a machine's time "
                                                "limit, and the dataset is still saved)."),
    timing_rounds: Optional[int] = typer.Option(None, "--timing-rounds", min=1, help="Split each candidate's "
                                                "timing into this many windows, interleaved with the task's other "
                                                "candidates and the baseline's windows (the task's candidates stay "
                                                "alive together; default 3)."),
    held_out_first: bool = typer.Option(False, "--held-out-first", help="Measure the held-out tasks of both splits "
                                        "(task split's test part, test families) before the rest: what `cudaperf "
                                        "ranker eval` needs first."),
    include_ill_conditioned: bool = typer.Option(False, "--include-ill-conditioned", help="Measure tasks that "
                                                 "`cudaperf dataset conditioning` flagged too."),
    below_runs: Optional[int] = typer.Option(None, "--below-runs", min=1, help="With --remeasure: only the valid "
                                             "candidates whose label rests on fewer than this many runs (C: "
                                             "windowed runs; labels pooled over 3 repeat to within 5 %; `dataset "
                                             "stats` counts the labels by runs)."),
    external_only: bool = typer.Option(False, "--external-only", help="Only the candidates added with `cudaperf "
                                       "dataset add-candidates` (untrusted: one process at a time)."),
    compile_baseline: bool = typer.Option(False, "--compile-baseline", help="PyTorch tasks: also time the "
                                          "torch.compile baseline (seconds of compilation per task); speedups "
                                          "stay over eager."),
    pytorch_runners: int = typer.Option(4, "--pytorch-runners", min=1, help="PyTorch tasks: runner processes "
                                        "alive at once per GPU, taking turns on it (start-up overlaps, GPU work "
                                        "never does)."),
    zygote: Optional[bool] = typer.Option(None, "--zygote/--no-zygote", help="PyTorch tasks: fork each runner "
                                          "from a process that has imported torch once instead of a fresh "
                                          "interpreter (the same sandbox; needs root and the private root). "
                                          "Default: off, or CUDAPERF_PYTORCH_ZYGOTE=1."),
    exclusive_timing: bool = typer.Option(False, "--exclusive-timing", help="One timed window at a time across "
                                          "the GPUs, with C candidates' tests and exits kept out of every window: "
                                          "slower, for a host whose timings drift with the other GPUs' work."),
    speedup_estimator: Optional[str] = typer.Option(None, "--speedup-estimator", help="C tasks: 'best_window' "
                                                    "(each side's fastest window median) or 'median' (all timed "
                                                    "calls of each side); default best_window."),
    burst_preparation: Optional[bool] = typer.Option(None, "--burst-preparation/--no-burst-preparation",
                                                     help="C tasks on several GPUs: prepare tasks in bursts during "
                                                     "which no GPU opens a new timed window, and skip a baseline's "
                                                     "host calibration rather than wait for the other GPUs, so the "
                                                     "GPUs stop waiting for one another between tasks. What is "
                                                     "timed does not change. Default on."),
    executor: str = typer.Option("local", "--executor", help="Where candidates run: local | compile-only | ray | "
                                 "ray:auto | ray://HOST:PORT (Ray: pip install 'cudaperf[ray]')."),
) -> None:
    """Measure candidates with the harness on the local GPUs: one worker per GPU, tasks interleaved across
    families, starting while later tasks still compile in parallel. PyTorch tasks (families pt_*) run after the
    C ones, against the eager PyTorch baseline.

    Results are appended to a JSONL store as they complete; rerun with the same --store and --run-id to resume.
    """
    from cudaperf.dataset.measure import new_run_id, select_candidates
    from cudaperf.harness.settings import SPEEDUP_ESTIMATORS

    from cudaperf.harness.executors import ExecutorError, make_executor

    try:
        ex = make_executor(executor)
    except ExecutorError as exc:
        _fail(str(exc))
    if speedup_estimator is not None and speedup_estimator not in SPEEDUP_ESTIMATORS:
        err.print(f"[red]--speedup-estimator must be one of {', '.join(SPEEDUP_ESTIMATORS)}[/], not "
                  f"{speedup_estimator!r}")
        raise typer.Exit(2)
    if store is not None:
        from cudaperf.harness.store import ResultStore, StoreFormatError

        try:
            ResultStore(store).check_writable()
        except StoreFormatError as exc:
            _fail(str(exc))
    ds = _open_dataset(dataset)
    fams = [f.strip() for f in families.split(",")] if families else None
    if extend_sample is not None and sample is None:
        _fail("--extend-sample needs --sample (the fraction of the tasks the sample should reach)")
    if below_runs is not None and not remeasure:
        _fail("--below-runs needs --remeasure (it picks measured candidates whose labels pool few runs)")
    try:
        cands = select_candidates(ds, families=fams, remeasure=remeasure, sample_tasks=sample, seed=seed,
                                  limit_tasks=limit_tasks, tasks_per_family=per_family,
                                  held_out_first=held_out_first, include_ill_conditioned=include_ill_conditioned,
                                  extend_sample_run=extend_sample, origin="external" if external_only else None,
                                  below_pooled_runs=below_runs)
    except ValueError as exc:
        _fail(str(exc))
    if not cands and extend_sample is not None:
        err.print(f"nothing to measure: the tasks of run {extend_sample} make {sample:g} of the selected tasks "
                  f"already")
        return
    if not cands:
        err.print("nothing to measure: every selected candidate has a scored measurement (use --remeasure)")
        return
    from dataclasses import replace as _replace

    from cudaperf.dataset.measure import MEASURE_SETTINGS

    run_id = run_id or new_run_id()
    settings = _replace(MEASURE_SETTINGS, timing_rounds=timing_rounds or MEASURE_SETTINGS.timing_rounds,
                        pytorch_runners=pytorch_runners, exclusive_timing=exclusive_timing,
                        pytorch_zygote=MEASURE_SETTINGS.pytorch_zygote if zygote is None else zygote,
                        burst_preparation=(MEASURE_SETTINGS.burst_preparation if burst_preparation is None
                                           else burst_preparation),
                        speedup_estimator=speedup_estimator or MEASURE_SETTINGS.speedup_estimator)
    store_path = store or ds.root / "runs" / f"{run_id}.jsonl"
    _measure_with_progress(ds, cands, run_id=run_id, store=store, settings=settings,
                           resume=f"the same command with --run-id {run_id} --store {store_path}",
                           held_out_first=held_out_first,
                           max_seconds=max_minutes * 60 if max_minutes is not None else None,
                           compile_baseline=compile_baseline, executor=ex)


def _measure_with_progress(ds, cands: list, *, run_id: str, store: Optional[Path], resume: str, **kwargs) -> None:
    """`measure` with a progress bar per phase, the dataset saved whatever happens, and a summary; ``resume`` says
    how to go on from a run stopped by an error or --max-minutes."""
    from cudaperf.dataset.measure import measure

    err.print(f"measuring {len(cands)} candidates of {len({c['task_id'] for c in cands})} tasks; run {run_id}")
    with _bar() as bar:
        ids = {}

        def progress(phase: str, i: int, n: int) -> None:
            if phase not in ids:
                ids[phase] = bar.add_task(PHASE_LABELS.get(phase, phase), total=n)
            bar.update(ids[phase], completed=i, total=n)

        try:
            summary = measure(ds, cands, store_path=store, run_id=run_id, progress=progress, **kwargs)
        except Exception:
            version = ds.save()  # the results that finished are kept; the error below is the harness's
            err.print(f"[red]the measurement stopped on a harness error[/]; the results that finished are saved "
                      f"(dataset version {version}); rerun {resume} to resume")
            raise
    version = ds.save()
    b = summary.batch
    if not b.gpus:
        err.print("[yellow]no GPU visible:[/] candidates were compiled but not run; their rows are unscored")
    err.print(f"run {run_id}: {summary.n_candidates} candidates, compile {b.compile_wall_s:.0f} s "
              f"({b.compile_per_min:.0f}/min), GPU {b.run_wall_s:.0f} s ({b.run_per_min:.1f}/min) on GPUs "
              f"{list(b.gpus)}; total {summary.wall_s:.0f} s; dataset version {version}")
    t = b.pytorch
    if t is not None:
        err.print(f"of which PyTorch: {t.n_done} candidates of {t.n_tasks} tasks run ({t.n_skipped} already in the "
                  f"store), {t.gpu_s:.0f} s of GPU-worker time, {t.wall_s:.0f} s")
    if b.n_not_started:
        err.print(f"[yellow]{b.n_not_started} candidates not started[/] (--max-minutes): rerun {resume} to go on")


@dataset_app.command("conditioning")
def dataset_conditioning(
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    jobs: int = typer.Option(2, "--jobs", "-j", help="Parallel workers."),
) -> None:
    """Check which C tasks have an ill-conditioned reference (CPU only, resumable): the reference rebuilt with fused
    multiply-adds must stay within the task's tolerance. Flagged tasks are left out of `dataset measure` and the
    filter names the reason. Results: DATASET/conditioning.parquet."""
    from cudaperf.dataset.conditioning import compute_conditioning, load_conditioning

    ds = _open_dataset(dataset)
    with _bar() as bar:
        tid = bar.add_task("conditioning", total=None)
        try:
            n = compute_conditioning(ds, jobs=jobs, progress=lambda i, k: bar.update(tid, completed=i, total=k))
        except RuntimeError as exc:
            _fail(str(exc))
    ill = load_conditioning(ds)
    err.print(f"checked {n} tasks; {len(ill)} ill-conditioned in {ds.root}")
    for t, why in sorted(ill.items()):
        err.print(f"  [yellow]{t}[/]: {why}")


@dataset_app.command("ingest")
def dataset_ingest(
    stores: list[Path] = typer.Argument(..., help="Result stores written by `cudaperf dataset measure --store` "
                                        "(JSONL, or gzipped .jsonl.gz), ingested in the order given."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="The run the results belong to (one store "
                                         "only); default the store's file name without .jsonl or .jsonl.gz, as "
                                         "`dataset measure --store RUN_ID.jsonl` names it."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
) -> None:
    """Add the results of interrupted or remote measurement runs to the dataset's measurements. Every store is
    checked before anything is ingested: a missing file, a file that is not a result store, or a store whose
    results name none of the dataset's candidates stops the command with the dataset unchanged."""
    from cudaperf.dataset.measure import by_result_key, ingest
    from cudaperf.harness.store import ResultStore, StoreFormatError

    if run_id is not None and len(stores) > 1:
        _fail(f"--run-id names one run, but {len(stores)} stores were given: leave it out to take each store's "
              "file name")
    for store in stores:
        if not store.is_file():
            _fail(f"file not found: {store}")
    ds = _open_dataset(dataset)
    known = by_result_key(ds.candidates)
    loaded = []
    for store in stores:
        rs = ResultStore(store)
        try:
            results = rs.read()
        except StoreFormatError as exc:
            _fail(f"{exc}; nothing ingested")
        if not results:
            _fail(f"no results in {store}" + (f" ({rs.torn_lines} torn lines)" if rs.torn_lines else "")
                  + "; nothing ingested")
        unknown = [r for r in results if (r.task_id, r.candidate_id) not in known]
        if len(unknown) == len(results):
            _fail(f"none of the {len(results)} results in {store} names a candidate of the dataset at {ds.root} "
                  f"(the first: {unknown[0].task_id}/{unknown[0].candidate_id}); nothing ingested")
        name = store.name.removesuffix(".gz").removesuffix(".jsonl")
        loaded.append((store, run_id or name, results, unknown, rs.torn_lines))
    for store, run, results, unknown, torn in loaded:
        n = ingest(ds, results, run, known)
        err.print(f"ingested {n} results of run {run} from {store}")
        if unknown:
            err.print(f"[yellow]{len(unknown)} results name no candidate of this dataset and were left out[/] "
                      f"(the first: {unknown[0].task_id}/{unknown[0].candidate_id})")
        if torn:
            err.print(f"[yellow]{torn} torn lines skipped[/] (an interrupted write)")
    err.print(f"dataset version {ds.save()}")


@dataset_app.command("supersede")
def dataset_supersede(
    run_id: str = typer.Argument(..., help="The measurement run whose rows no longer count."),
    why: Optional[str] = typer.Option(None, "--why", help="The reason, kept with each row (required unless "
                                      "--undo)."),
    undo: bool = typer.Option(False, "--undo", help="Let the run count again."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
) -> None:
    """Stop counting a run's measurements (a harness fault or a changed timing method, say) without deleting them:
    speedups, validity, the filter, the ranker's data and `measure`'s choice of what is left to measure leave
    them out; `dataset stats` lists the run with its reason."""
    from cudaperf.dataset.measure import supersede

    if not undo and not why:
        _fail("say why the run no longer counts: --why TEXT (or --undo)")
    ds = _open_dataset(dataset)
    runs = {m["run_id"] for m in ds.measurements}
    if run_id not in runs:
        _fail(f"no run {run_id!r} in the dataset (runs: {', '.join(sorted(runs)) or 'none'})")
    n = supersede(ds, run_id, None if undo else why)
    version = ds.save()
    err.print(f"{n} rows of run {run_id} {'count again' if undo else 'superseded'}; dataset version {version}")


@dataset_app.command("add-candidates")
def dataset_add_candidates(
    file: Path = typer.Argument(..., help="A .jsonl of {task_id, name, code or completion, tags?} rows, or the "
                                "directory of a `cudaperf eval` run on the dataset's tasks (every answer with code "
                                "becomes a candidate of origin 'model', its policy, run, sample and turn recorded)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    measure_now: bool = typer.Option(False, "--measure", help="Measure the new candidates right away on the "
                                     "local GPUs, as untrusted code: one process at a time, in the sandbox."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", min=0.0, help="With --measure: start no "
                                                "candidate after this many minutes (`dataset measure "
                                                "--external-only` goes on)."),
) -> None:
    """Add candidates from outside the families: a file of rows (origin "external"; a row's code, or a model's
    whole completion from which the code is extracted, is stored as given), or a model's answers from an eval run
    (origin "model"): `cudaperf eval --tasks train:c --samples 10 --turns 1 --dataset DIR -o RUN`, then
    `cudaperf dataset add-candidates RUN -d DIR`. They are measured like any candidate, with the task's hidden
    tests and timing against its baseline, as untrusted code."""
    from cudaperf.dataset.external import AddError, add_candidates, add_from_eval_run

    ds = _open_dataset(dataset)
    try:
        if file.is_dir():
            got = add_from_eval_run(ds, file)
            added = got.added
            other = sum(got.other_tasks.values())
            err.print(f"{got.answers} answers in {file}: {len(added)} added, {got.duplicates} with code the task "
                      f"has already, {got.no_code} without code, {got.already} added before"
                      + (f", {other} to {len(got.other_tasks)} tasks not in this dataset" if other else ""))
        else:
            added = add_candidates(ds, file)
    except AddError as exc:
        _fail(str(exc))
    version = ds.save()
    err.print(f"added {len(added)} candidates; dataset version {version}")
    if measure_now and added:
        from cudaperf.dataset.measure import MEASURE_SETTINGS, new_run_id

        run_id = new_run_id()
        store = ds.root / "runs" / f"{run_id}.jsonl"
        _measure_with_progress(ds, added, run_id=run_id, store=store, settings=MEASURE_SETTINGS,
                               resume=f"`cudaperf dataset measure --external-only -d {ds.root} --run-id {run_id} "
                                      f"--store {store}`",
                               max_seconds=max_minutes * 60 if max_minutes is not None else None)


@dataset_app.command("features")
def dataset_features(
    tier: str = typer.Option("paper", "--tier", help="paper (tree-sitter, fast), compiler (nvcc per candidate) or "
                             "profile (Nsight Compute on the local GPUs, C tasks only, about 5 s per candidate)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    jobs: int = typer.Option(2, "--jobs", "-j", help="Parallel workers (profile: one per visible GPU)."),
    all_candidates: bool = typer.Option(False, "--all", help="profile: every candidate, not only the measured "
                                        "valid ones the ranker trains on."),
    order: str = typer.Option("dataset", "--order", help="Which candidates first, task by task: 'dataset' (its "
                              "order), 'held-out-first' (the held-out tasks of both splits, then the rest) or "
                              "'splits-in-turn' (a held-out task, a test family's task, one of the other tasks, "
                              "in turn: a run cut short can still train and test a profile-tier ranker)."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", min=0.0, help="Start no candidate after "
                                                "this many minutes; rerun to go on."),
) -> None:
    """Compute (or bring up to date) DATASET/features_TIER.parquet; resumable (rows are saved as they come)."""
    from cudaperf.dataset.features import compute_features, measured_valid_ids
    from cudaperf.dataset.measure import interleaved_task_order
    from cudaperf.features.profile import ProfilerUnavailable

    orders = ("dataset", "held-out-first", "splits-in-turn")
    if order not in orders:
        _fail(f"--order must be one of {', '.join(orders)}, not {order!r}")
    ds = _open_dataset(dataset)
    ids = measured_valid_ids(ds) if tier == "profile" and not all_candidates else None
    task_order = None if order == "dataset" else interleaved_task_order(
        ds, {t["id"] for t in ds.tasks}, held_out_first=True, groups_in_turn=order == "splits-in-turn")
    with _bar() as bar:
        tid = bar.add_task(f"{tier} features", total=None)
        try:
            n = compute_features(ds, tier, jobs=jobs, candidate_ids=ids, task_order=task_order,
                                 max_minutes=max_minutes,
                                 progress=lambda i, k: bar.update(tid, completed=i, total=k))
        except (ValueError, ProfilerUnavailable) as exc:
            _fail(str(exc))
    err.print(f"computed {n} rows of {ds.root / f'features_{tier}.parquet'}")


@dataset_app.command("stats")
def dataset_stats(
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (n_tasks, n_families, n_candidates, "
                                 "n_valid_candidates, ...)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also write speedup-by-strategy plots (PNG): the C tasks to this path, the PyTorch tasks to NAME_pytorch.png beside it."),
) -> None:
    """Counts, the paper's filter (>= 5 valid variants, one >= 1.5x), speedups by strategy, reproducibility."""
    import math

    from cudaperf.dataset.measure import plot_speedup_by_strategy, stats

    ds = _open_dataset(dataset)
    s = stats(ds)
    if plot is not None:
        try:
            plot_speedup_by_strategy(ds, plot)
            err.print(f"plot of the C tasks written to {plot}")
        except ValueError as exc:
            err.print(f"[yellow]no plot:[/] {exc}")
        except ImportError:
            _fail("plots need matplotlib: pip install 'cudaperf\\[plots]'")
        pt_plot = plot.with_name(f"{plot.stem}_pytorch{plot.suffix}")
        try:
            plot_speedup_by_strategy(ds, pt_plot, pytorch=True)
            err.print(f"plot of the PyTorch tasks written to {pt_plot}")
        except ValueError as exc:
            err.print(f"[yellow]no PyTorch plot:[/] {exc}")
        except ImportError:
            _fail("plots need matplotlib: pip install 'cudaperf\\[plots]'")
    if as_json:
        clean = json.loads(json.dumps(s, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v))
        print(json.dumps(clean, allow_nan=False, default=str))
        return
    table = Table(title=f"dataset {s['version']} ({ds.root})")
    table.add_column("family", no_wrap=True)  # names whole; the counts give way (they are short)
    table.add_column("split")
    for col in ("tasks", "candidates", "measured", "valid", "kept"):
        table.add_column(col, justify="right", min_width=len(col))
    table.caption = "kept: tasks that pass the filter (>= 5 valid variants, one >= 1.5x faster than the baseline)"
    for f, r in s["families"].items():
        table.add_row(f, r["split_family"], str(r["tasks"]), str(r["candidates"]), str(r["measured"]),
                      str(r["valid"]), str(r["kept_tasks"]))
    console.print(table)
    console.print(f"{s['n_tasks']} tasks, {s['n_families']} families, {s['n_candidates']} candidates, "
                  f"{s['n_measured_candidates']} measured, {s['n_valid_candidates']} valid; "
                  f"{s['n_kept_tasks']} tasks pass the filter; dropped: "
                  + ("; ".join(f"{n} {why}" for why, n in s["dropped_tasks"].items()) or "none"))
    rep = s["reproducibility"]
    if rep.get("pairs"):
        console.print(f"re-measured {rep['pairs']} candidates, their first two runs (any method): median |log "
                      f"speedup ratio| {rep['median_abs_log_ratio']:.3f}")
    cur = s["reproducibility_measure_default"]
    if cur.get("run_pairs"):
        console.print(f"runs with the current measurement method: {cur['run_pairs']} pairs, median |log speedup "
                      f"ratio| {cur['speedup_median_abs_log_ratio']:.3f}")
    pooled = s["reproducibility_pooled"]
    if pooled.get("candidates"):
        console.print(f"labels pooled over {pooled['runs_per_side']} runs (each side's fastest window), two such "
                      f"labels of {pooled['candidates']} candidates of {pooled['tasks']} tasks "
                      f"({pooled['share_of_measured_tasks']:.1%} of the measured "
                      f"{' and '.join(KIND_NAMES[k] for k in pooled['task_kinds'])} tasks): median |log speedup "
                      f"ratio| {pooled['speedup_median_abs_log_ratio']:.3f} (95 % interval over tasks "
                      f"{pooled['speedup_ci95'][0]:.3f} to {pooled['speedup_ci95'][1]:.3f}); the baseline's signed "
                      f"median {pooled['baseline_median_log_ratio']:+.3f}")
    if s["label_runs"]:
        parts = [f"{KIND_NAMES[k]} " + ", ".join(f"{n} on {r}" for r, n in v.items())
                 for k, v in s["label_runs"].items()]
        console.print("valid candidates by the runs their label rests on (C: windowed runs pooled, 0 for the "
                      "earlier single-window runs only; PyTorch: runs averaged): " + "; ".join(parts))
    agree = s["label_methods_agreement"]
    if agree["candidates"]:
        console.print(f"{agree['candidates']} candidates of {agree['tasks']} tasks have labels of both methods: the "
                      f"earlier single-window runs read {math.exp(agree['median_log_ratio']):.3f}x the pooled "
                      f"windowed label (median; |log ratio| {agree['median_abs_log_ratio']:.3f}); "
                      f"{len(agree['mixed_tasks'])} tasks mix the two methods among their labels")
    all_pairs = s["reproducibility_by_run_pair"]
    pairs = [p for p in all_pairs if p["candidates"] >= 30]  # the table's rows; the JSON has them all
    if pairs:
        import os.path

        prefix = os.path.commonprefix([r for p in pairs for r in (p["run_a"], p["run_b"])])
        t = Table(title=f"reproducibility between runs {prefix}*: median |log ratio| (signed: b against a)")
        t.add_column("runs a -> b", overflow="fold")  # the run ids wrap; the figures keep their width
        for col, width in (("n", 3), ("speedup", 7), ("baseline", 14), ("candidate", 14)):
            t.add_column(col, no_wrap=True, min_width=width)

        def cell(p: dict, key: str) -> str:
            v, sv = p[f"{key}_median_abs_log_ratio"], p[f"{key}_median_log_ratio"]
            return "-" if v is None else f"{v:.3f} ({sv:+.3f})"

        for p in pairs:
            t.add_row(f"{p['run_a'][len(prefix):]} -> {p['run_b'][len(prefix):]}", str(p["candidates"]),
                      f"{p['speedup_median_abs_log_ratio']:.3f}", cell(p, "baseline"), cell(p, "candidate"))
        console.print(t)
        if len(all_pairs) > len(pairs):
            console.print(f"({len(all_pairs) - len(pairs)} more run pairs with fewer than 30 candidates in common: "
                          "--json lists them)")
    runs = s["runs"]
    if runs:
        span = sum(r["span_s"] or 0.0 for r in runs)
        console.print(f"{len(runs)} measurement runs, {sum(r['n'] for r in runs)} rows, {span / 60:.1f} min from "
                      f"first to last result in each, summed (GPUs: {', '.join(sorted({g for r in runs for g in r['gpus']})) or '-'})")
        for r in runs:
            if r.get("superseded"):
                console.print(f"superseded: run {r['run_id']} ({r['n']} rows): {r['superseded']}")
