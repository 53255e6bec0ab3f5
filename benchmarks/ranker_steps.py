"""How many optimiser steps the paper-tier MLP needs on the built-in dataset.

PAPER-SPEC §3 trains 50 epochs at batch 512. On the paper's ~2,900 tasks that is about a thousand steps; on a
dataset of a few hundred training pairs it is 50. This trains the MLP at several (batch size, epochs) settings,
each over several seeds, and scores it on the held-out tasks of the task split and of the family split (pairwise
accuracy on strong/weak pairs), so the step floor in ``RankerSettings.min_steps`` rests on a measurement.

    python benchmarks/ranker_steps.py --out steps.json [--seeds 3]

CPU only; a few minutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

SETTINGS = [(512, 50), (64, 50), (64, 200), (32, 300), (512, 3000), (32, 1000)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dataset", type=Path, default=None)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()

    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.ranker.evaluate import evaluate_split
    from cudaperf.ranker.train import RankerSettings

    ds = Dataset.load(args.dataset or default_dataset_dir())
    rows = []
    for batch, epochs in SETTINGS:
        row: dict = {"batch_size": batch, "epochs": epochs}
        for split in ("task", "family"):
            accs, steps = [], None
            for seed in range(args.seeds):
                r = evaluate_split(ds, split, RankerSettings(seed=seed, batch_size=batch, epochs=epochs, min_steps=0),
                                   tiers=())
                accs.append(r["models"]["mlp_paper"]["pairwise_accuracy"])
                steps = r["ranker"]["n_steps"]
            row[split] = {"steps": steps, "pairwise_accuracy": accs, "mean": statistics.fmean(accs)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"dataset_version": ds.version(), "seeds": args.seeds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
