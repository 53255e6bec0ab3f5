"""Curves of `cudaperf train` runs side by side (issue 24's proof: the composite reward against the verifiable one),
from each run's `grpo_run.json` and `rollouts.jsonl`:

    python benchmarks/grpo_curves.py runs/grpo-paper=paper runs/grpo-verifiable=verifiable \
        --out docs/img/grpo_curves.png [--json FILE]

Four panels: the training reward (TRL's mean over a step's real rows, the turn returns), the rollouts' compile and
correct rates by step, and the held-out evaluations' pass@1 and compile rate by step (`--eval-every`). The table
printed (and written with --json): steps, training wall time, seconds a step, rollout answers judged (rows that
are not padding), seconds per 1,000 of them, and the first and last held-out figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load(run_dir: Path) -> dict[str, Any]:
    """A run's series and figures; raises SystemExit with a message when the directory holds no run record."""
    record_path = run_dir / "grpo_run.json"
    if not record_path.is_file():
        raise SystemExit(f"{run_dir}: no grpo_run.json (give a directory that cudaperf train wrote)")
    record = json.loads(record_path.read_text())
    steps: dict[int, dict[str, float]] = {}
    for h in record.get("log_history", []):
        if "step" in h and "reward" in h:
            steps[int(h["step"])] = h
    judged = 0
    log = run_dir / "rollouts.jsonl"
    if log.is_file():
        for line in log.read_text().splitlines():
            row = json.loads(line)
            judged += int(not row.get("padding") and row.get("evaluation") is not None)
    global_step = int(record.get("global_step") or 0)
    wall = record.get("train_wall_s")
    evals = sorted(record.get("evals") or [], key=lambda e: e["step"])
    return {
        "run_dir": str(run_dir), "status": record.get("status"), "steps": global_step, "train_wall_s": wall,
        "s_per_step": wall / global_step if wall and global_step else None, "judged": judged,
        "s_per_1000_judged": 1000 * wall / judged if wall and judged else None,
        "series": {k: [(s, steps[s].get(k)) for s in sorted(steps)] for k in
                   ("reward", "rollout/compile_rate", "rollout/correct_rate")},
        "evals": [(e["step"], e.get("eval/pass_at_1"), e.get("eval/compile_rate")) for e in evals],
    }


def plot(runs: dict[str, dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), constrained_layout=True)
    panels = [(axes[0][0], "training reward (mean turn return)", lambda r: r["series"]["reward"], "-"),
              (axes[0][1], "rollouts: compile (solid) and correct (dashed) rate",
               lambda r: r["series"]["rollout/compile_rate"], "-"),
              (axes[1][0], "held-out pass@1", lambda r: [(s, p) for s, p, _ in r["evals"]], "o-"),
              (axes[1][1], "held-out compile rate", lambda r: [(s, c) for s, _, c in r["evals"]], "o-")]
    for ax, title, get, style in panels:
        for i, (label, r) in enumerate(runs.items()):
            pts = [(s, v) for s, v in get(r) if v is not None]
            color = f"C{i}"
            if pts:
                ax.plot([s for s, _ in pts], [v for _, v in pts], style, color=color, label=label)
            if title.startswith("rollouts"):
                cor = [(s, v) for s, v in r["series"]["rollout/correct_rate"] if v is not None]
                if cor:
                    ax.plot([s for s, _ in cor], [v for _, v in cor], "--", color=color)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="RUN_DIR or RUN_DIR=LABEL (a cudaperf train --out directory)")
    ap.add_argument("--out", type=Path, help="the PNG to write")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    a = ap.parse_args()
    runs: dict[str, dict[str, Any]] = {}
    for spec in a.runs:
        path, _, label = spec.partition("=")
        label = label or Path(path).name
        if label in runs:
            raise SystemExit(f"two runs are labelled {label!r}: give RUN_DIR=LABEL")
        runs[label] = load(Path(path))

    def fmt(x: Any, f: str = ".1f") -> str:
        return "-" if x is None else format(x, f)

    print("| run | status | steps | train wall (s) | s/step | answers judged | s / 1,000 answers | held-out pass@1 "
          "first -> last | compile first -> last |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, r in runs.items():
        ev = r["evals"]
        first, last = (ev[0], ev[-1]) if ev else ((None,) * 3, (None,) * 3)
        print(f"| {label} | {r['status']} | {r['steps']} | {fmt(r['train_wall_s'])} | {fmt(r['s_per_step'])} | "
              f"{r['judged']} | {fmt(r['s_per_1000_judged'], '.0f')} | {fmt(first[1], '.3f')} -> "
              f"{fmt(last[1], '.3f')} | {fmt(first[2], '.3f')} -> {fmt(last[2], '.3f')} |")
    if a.out:
        plot(runs, a.out)
        print(f"curves: {a.out}")
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
