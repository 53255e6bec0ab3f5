"""How the ranker's held-out accuracy grows with the number of measured training tasks (a learning curve).

For each fraction f of the task split's measured training tasks (drawn with a seed, whole tasks), train the
paper-tier MLP and the paper's linear form on them and score both on the held-out test tasks (pairwise accuracy on
strong/weak pairs, mean Kendall tau). Several draws per fraction. The question it answers: does measuring more of
the dataset promise a better ranker, or has the paper tier stopped improving?

    python benchmarks/ranker_learning_curve.py --out curve.json [--fractions 0.25,0.5,0.75,1] [--draws 3]

CPU only; minutes.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dataset", type=Path, default=None)
    ap.add_argument("--fractions", default="0.25,0.5,0.75,1")
    ap.add_argument("--draws", type=int, default=3)
    args = ap.parse_args()

    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.ranker.evaluate import fit_linear, metrics
    from cudaperf.ranker.pairs import by_task, quartile_pairs
    from cudaperf.ranker.train import RankerSettings, feature_table, split_items, train_ranker

    ds = Dataset.load(args.dataset or default_dataset_dir())
    train_all, test = split_items(ds, "task", "train"), split_items(ds, "task", "test")
    feats = feature_table(ds, [i.candidate_id for i in train_all + test], "paper")
    tasks = sorted(t for t, its in by_task(train_all).items() if len(its) >= 4)
    rows = []
    for frac in (float(f) for f in args.fractions.split(",")):
        for draw in range(args.draws if frac < 1 else 1):
            chosen = set(random.Random(draw).sample(tasks, max(1, round(frac * len(tasks)))))
            items = [i for i in train_all if i.task_id in chosen]
            mlp = train_ranker(ds, settings=RankerSettings(seed=draw), features=feats, items=items)
            m = metrics(test, {i.candidate_id: float(s)
                               for i, s in zip(test, mlp.score_many([feats[i.candidate_id] for i in test]))})
            pairs = quartile_pairs(items)
            norm = mlp.normalizer
            w = fit_linear(np.array(norm.transform_many([feats[a.candidate_id] for a, _ in pairs])),
                           np.array(norm.transform_many([feats[b.candidate_id] for _, b in pairs])))
            xt = np.array(norm.transform_many([feats[i.candidate_id] for i in test]))
            lin = metrics(test, {i.candidate_id: float(s) for i, s in zip(test, xt @ w)})
            rows.append({"fraction": frac, "draw": draw, "train_tasks": len(chosen), "train_pairs": len(pairs),
                         "mlp_pairwise": m["pairwise_accuracy"], "mlp_tau": m["kendall_tau"],
                         "linear_pairwise": lin["pairwise_accuracy"], "linear_tau": lin["kendall_tau"]})
            print(rows[-1], flush=True)
    summary = []
    for frac in sorted({r["fraction"] for r in rows}):
        rs = [r for r in rows if r["fraction"] == frac]
        summary.append({"fraction": frac, "train_tasks": rs[0]["train_tasks"],
                        **{k: statistics.fmean(r[k] for r in rs)
                           for k in ("mlp_pairwise", "mlp_tau", "linear_pairwise", "linear_tau")}})
    out = {"dataset": ds.version(), "test_tasks": len(by_task(test)), "summary": summary, "rows": rows}
    args.out.write_text(json.dumps(out, indent=1))
    for s in summary:
        print(s)


if __name__ == "__main__":
    main()
