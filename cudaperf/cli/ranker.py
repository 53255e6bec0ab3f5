"""cudaperf ranker train | eval | score: the offline pairwise ranker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cudaperf.cli.common import DATASET_HELP, _fail, _open_dataset, console, err

ranker_app = typer.Typer(help="The offline pairwise ranker (R_str): train it on the dataset's measured variants, "
                         "evaluate it on held-out tasks and families against baselines, score a candidate.",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``ranker`` sub-app to ``app``."""
    app.add_typer(ranker_app, name="ranker")


def _need_torch() -> None:
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        _fail("the ranker needs torch and safetensors: pip install 'cudaperf\\[ranker]'")


@ranker_app.command("train")
def ranker_train(
    out: Path = typer.Option(Path("runs/ranker"), "--out", "-o", help="Directory for model.safetensors + "
                             "ranker.json."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    split: str = typer.Option("task", "--split", help="task: train on the tasks of the task split's train part; "
                              "family: on the training families only."),
    seed: int = typer.Option(0, "--seed"),
    epochs: int = typer.Option(50, "--epochs", help="At least this many epochs (PAPER-SPEC §3: 50)."),
    min_steps: int = typer.Option(3000, "--min-steps", help="At least this many optimiser steps: more epochs when "
                                  "the dataset has few pairs (0: exactly --epochs, as the paper)."),
    batch_size: int = typer.Option(512, "--batch-size"),
    pairs: str = typer.Option("quartile", "--pairs", help="Training pairs per task: 'quartile' (the paper's "
                              "strong/weak quartile pairs) or 'ordered' (every pair whose speedups differ by more "
                              "than --pair-min-ratio)."),
    pair_min_ratio: float = typer.Option(1.5, "--pair-min-ratio", min=1.0, help="With --pairs ordered."),
) -> None:
    """Train the paper-tier MLP on per-task quartile pairs (deterministic for a dataset, split and seed)."""
    _need_torch()
    from cudaperf.ranker.train import RankerSettings, train_ranker

    ds = _open_dataset(dataset)
    try:
        r = train_ranker(ds, split=split, settings=RankerSettings(seed=seed, epochs=epochs, batch_size=batch_size,
                                                                min_steps=min_steps, pairs=pairs,
                                                                pair_min_ratio=pair_min_ratio),
                         log=lambda m: err.print(m))
    except ValueError as exc:
        _fail(str(exc))
    r.save(out)
    err.print(f"trained on {r.meta['n_train_pairs']} pairs of {r.meta['n_train_tasks']} tasks, {r.meta['n_steps']} "
              f"steps (dataset "
              f"{r.meta['dataset_version']}, split {split}, seed {seed}); saved to {out}")


@ranker_app.command("eval")
def ranker_eval(
    dataset: Optional[Path] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="One JSON object; top-level pairwise_accuracy is the "
                                 "paper-tier MLP on held-out tasks."),
    compiler: bool = typer.Option(False, "--compiler", help="Also an MLP on the paper + compiler tiers (reads "
                                  "features_compiler.parquet; compiles candidates missing from it)."),
    profile: bool = typer.Option(False, "--profile", help="Also an MLP on the paper + profile tiers, on the tasks "
                                 "whose candidates all have stored Nsight Compute counters "
                                 "(features_profile.parquet, from `cudaperf dataset features --tier profile`), "
                                 "with the paper-tier MLP scored on the same tasks."),
    pairs: str = typer.Option("quartile", "--pairs", help="Training pairs per task: 'quartile' (the paper's "
                              "strong/weak quartile pairs) or 'ordered' (every pair whose speedups differ by more "
                              "than --pair-min-ratio)."),
    pair_min_ratio: float = typer.Option(1.5, "--pair-min-ratio", min=1.0, help="With --pairs ordered."),
) -> None:
    """Train on each split's training part and evaluate on its held-out part: the MLP against random, the paper's
    linear form and a block-size rule (pairwise accuracy with a 95 % interval from resampling held-out tasks,
    ordered-pair accuracy, Kendall tau, top-1 hit rate)."""
    import math

    _need_torch()
    from cudaperf.ranker.evaluate import evaluate_split
    from cudaperf.ranker.train import RankerSettings

    try:
        settings = RankerSettings(seed=seed, pairs=pairs, pair_min_ratio=pair_min_ratio)
    except ValueError as exc:
        _fail(str(exc))
    ds = _open_dataset(dataset)
    tiers = ("paper",) + (("paper+compiler",) if compiler else ()) + (("paper+profile",) if profile else ())
    res = {s: evaluate_split(ds, s, settings, tiers=tiers) for s in ("task", "family")}
    top = res["task"].get("models", {}).get("mlp_paper", {}).get("pairwise_accuracy")
    out = {"pairwise_accuracy": top, "dataset_version": ds.version(), "seed": seed,
           "pairs": pairs if pairs == "quartile" else f"ordered above {pair_min_ratio}x", "splits": res}
    if as_json:
        clean = json.loads(json.dumps(out, default=str), parse_constant=lambda c: None)
        print(json.dumps(clean, allow_nan=False,
                         default=lambda v: None if isinstance(v, float) and math.isnan(v) else v))
        return
    table = Table(title=f"ranker evaluation (dataset {ds.version()}, seed {seed})")
    for col in ("split", "model", "train tasks", "test tasks", "pairwise", "95% CI", "ordered", "tau", "top-1"):
        table.add_column(col, no_wrap=True)
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"
    notes = []
    for s, r in res.items():
        if "models" not in r:
            table.add_row(s, "-", str(r.get("n_train_tasks", 0)), "0", "-", "-", "-", "-", "-")
            notes.append(f"{s} split: {r.get('error', '')}")
            continue
        for m, v in r["models"].items():
            if "error" in v:
                table.add_row(s, m, "-", "0", "-", "-", "-", "-", "-")
                notes.append(f"{s} split, {m}: {v['error']}")
                continue
            lo, hi = v.get("pairwise_accuracy_ci95", (math.nan, math.nan))
            table.add_row(s, m, str(v.get("n_train_tasks", r["n_train_tasks"])), str(v["n_tasks"]),
                          fmt(v["pairwise_accuracy"]),
                          "-" if math.isnan(lo) else f"{lo:.2f}-{hi:.2f}", fmt(v["ordered_accuracy"]),
                          fmt(v["kendall_tau"]), fmt(v["top1_hit_rate"]))
    (console if console.width >= 120 else Console(width=120)).print(table)  # nine columns: keep them whole
    for n in notes:
        err.print(f"[yellow]{escape(n)}[/]")


@ranker_app.command("score")
def ranker_score(
    file: Path = typer.Argument(..., help="A .cu file or a completion text."),
    model: Path = typer.Option(Path("runs/ranker"), "--model", "-m", help="A trained ranker directory."),
) -> None:
    """The structural score s_psi(normalized phi) of one candidate (higher: more like the fast variants)."""
    _need_torch()
    from cudaperf.harness.extract import extract_code
    from cudaperf.ranker.train import Ranker

    if not file.exists():
        _fail(f"file not found: {file}")
    try:
        r = Ranker.load(model)
    except (FileNotFoundError, ValueError) as exc:
        _fail(str(exc))
    text = file.read_text(encoding="utf-8", errors="replace")
    print(f"{r.score_code(extract_code(text).code or text):.6f}")
