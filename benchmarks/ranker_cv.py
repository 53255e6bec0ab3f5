"""Choose the ranker's training options without looking at the held-out tasks: grouped cross-validation.

The task split's training tasks are cut into K folds by task (a task's variants stay together). Each option is
trained on K-1 folds and scored on the left-out one (pairwise accuracy on strong/weak pairs, mean Kendall tau),
for several seeds. The held-out test tasks are not read. Options:

- ``base``: the paper tier as `cudaperf ranker train` trains it (z-scores of the raw features);
- ``log``: the same features through sign(x) * log1p(|x|) before the z-scores (counts of operations and
  accesses span orders of magnitude across tasks);
- ``ens5``: the mean score of five MLPs trained with seeds s..s+4;
- ``log+ens5``;
- ``ordered``: trained on every pair of a task whose speedups differ by more than 1.25x, not only the
  strong/weak quartile pairs (``RankerSettings.pairs="ordered"``); ``ordered1.5``: the same above 1.5x;
  ``log+ordered1.5``: both changes.

    python benchmarks/ranker_cv.py --out cv.json [--folds 5] [--seeds 2] [--options base,log,ens5,log+ens5]

CPU only; about ten minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from dataclasses import replace
from pathlib import Path


def signed_log(feats: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {cid: {k: math.copysign(math.log1p(abs(v)), v) if math.isfinite(v) else v for k, v in f.items()}
            for cid, f in feats.items()}


OPTIONS = {  # name: (feature transform, models averaged, RankerSettings overrides)
    "base": ("raw", 1, {}), "log": ("log", 1, {}), "ens5": ("raw", 5, {}), "log+ens5": ("log", 5, {}),
    "ordered": ("raw", 1, {"pairs": "ordered", "pair_min_ratio": 1.25}),
    "ordered1.5": ("raw", 1, {"pairs": "ordered", "pair_min_ratio": 1.5}),
    "log+ordered1.5": ("log", 1, {"pairs": "ordered", "pair_min_ratio": 1.5}),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--split", default="task")
    ap.add_argument("--options", default="base,log,ens5,log+ens5",
                    help=f"comma-separated, of: {', '.join(OPTIONS)}")
    args = ap.parse_args()
    options = args.options.split(",")
    if set(options) - set(OPTIONS):
        ap.error(f"unknown options: {sorted(set(options) - set(OPTIONS))}")

    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.ranker.evaluate import metrics
    from cudaperf.ranker.train import RankerSettings, feature_table, split_items, train_ranker

    ds = Dataset.load(default_dataset_dir())
    items = split_items(ds, args.split, "train")
    raw = feature_table(ds, [i.candidate_id for i in items], "paper")
    feats = {"raw": raw, "log": signed_log(raw)}
    tasks = sorted({i.task_id for i in items})
    rows = []
    for seed in range(args.seeds):
        order = tasks[:]
        random.Random(seed).shuffle(order)
        folds = [set(order[k::args.folds]) for k in range(args.folds)]
        for option in options:
            transform, n_models, overrides = OPTIONS[option]
            table = feats[transform]
            accs, taus = [], []
            for k, held in enumerate(folds):
                train = [i for i in items if i.task_id not in held]
                test = [i for i in items if i.task_id in held]
                scores = {i.candidate_id: 0.0 for i in test}
                for m in range(n_models):
                    ranker = train_ranker(ds, items=train, features=table,
                                          settings=replace(RankerSettings(), seed=100 * seed + m, **overrides))
                    for i, s in zip(test, ranker.score_many([table[i.candidate_id] for i in test])):
                        scores[i.candidate_id] += float(s) / n_models
                r = metrics(test, scores)
                accs.append(r["pairwise_accuracy"])
                taus.append(r["kendall_tau"])
            row = {"seed": seed, "option": option, "pairwise_accuracy": statistics.fmean(accs),
                   "kendall_tau": statistics.fmean(taus), "folds": accs}
            rows.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                              if k != "folds"}), flush=True)
    summary = {}
    for option in options:
        sel = [r for r in rows if r["option"] == option]
        summary[option] = {"pairwise_accuracy": statistics.fmean(r["pairwise_accuracy"] for r in sel),
                           "kendall_tau": statistics.fmean(r["kendall_tau"] for r in sel)}
    print(json.dumps(summary))
    args.out.write_text(json.dumps({"dataset_version": ds.version(), "split": args.split, "folds": args.folds,
                                    "n_train_tasks": len(tasks), "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
