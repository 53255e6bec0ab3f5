"""Held-out evaluation of rankers against simple baselines (the paper reports none; we do).

Metrics over the held-out tasks' valid measured candidates:
``pairwise_accuracy``   strong/weak quartile pairs ordered correctly (a tie counts 1/2)
``ordered_accuracy``    every within-task pair with different speedups ordered correctly (ties 1/2)
``kendall_tau``         Kendall's tau-b between score and speedup, averaged over tasks with >= 3 candidates
``top1_hit_rate``       tasks whose top-scored candidate is in the task's fastest quartile
``pairwise_accuracy_ci95``  a 95 % interval for ``pairwise_accuracy`` from resampling whole tasks (pairs of one
                        task are not independent), 1,000 resamples with a fixed seed
"""

from __future__ import annotations

import hashlib
import math
from itertools import combinations
from typing import Callable, Sequence

import numpy as np

from cudaperf.ranker.pairs import Item, by_task, ordered_pairs, quartile_pairs

ScoreFn = Callable[[Sequence[Item]], np.ndarray]


def _agree(sa: float, sb: float) -> float:
    return 1.0 if sa > sb else 0.5 if sa == sb else 0.0


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    conc = disc = tx = ty = 0
    for i, j in combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif (dx > 0) == (dy > 0):
            conc += 1
        else:
            disc += 1
    den = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / den if den > 0 else math.nan


def metrics(items: Sequence[Item], scores: dict[str, float]) -> dict[str, float]:
    qp = quartile_pairs(items)
    op = ordered_pairs(items)
    taus, hits = [], []
    for task, its in by_task(items).items():
        if len(its) >= 3:
            t = kendall_tau_b([scores[i.candidate_id] for i in its], [i.speedup for i in its])
            if not math.isnan(t):
                taus.append(t)
        if len(its) >= 4:
            ranked = sorted(its, key=lambda i: -i.speedup)
            top = {i.candidate_id for i in ranked[:max(1, len(its) // 4)]}
            best = max(its, key=lambda i: (scores[i.candidate_id], i.candidate_id))
            hits.append(best.candidate_id in top)
    mean = lambda v: float(np.mean(v)) if len(v) else math.nan
    return {
        "pairwise_accuracy": mean([_agree(scores[s.candidate_id], scores[w.candidate_id]) for s, w in qp]),
        "pairwise_accuracy_ci95": task_bootstrap_ci(qp, scores),
        "ordered_accuracy": mean([_agree(scores[a.candidate_id], scores[b.candidate_id]) for a, b in op]),
        "kendall_tau": mean(taus),
        "top1_hit_rate": mean(hits),
        "n_tasks": len(by_task(items)), "n_candidates": len(items), "n_quartile_pairs": len(qp),
        "n_ordered_pairs": len(op),
    }


def task_bootstrap_ci(pairs: Sequence[tuple[Item, Item]], scores: dict[str, float], n_resamples: int = 1000,
                      seed: int = 0) -> list[float]:
    """[low, high]: the 2.5th and 97.5th percentiles of the pairwise accuracy over resamples of whole tasks
    (with replacement); [nan, nan] without pairs."""
    per_task: dict[str, list[float]] = {}
    for s, w in pairs:
        per_task.setdefault(s.task_id, []).append(_agree(scores[s.candidate_id], scores[w.candidate_id]))
    if not per_task:
        return [math.nan, math.nan]
    sums = np.array([sum(v) for v in per_task.values()])
    counts = np.array([len(v) for v in per_task.values()])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sums), size=(n_resamples, len(sums)))
    acc = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return [float(np.percentile(acc, 2.5)), float(np.percentile(acc, 97.5))]


def random_scores(items: Sequence[Item], seed: int = 0) -> dict[str, float]:
    """A reproducible random score per candidate (the chance baseline)."""
    return {i.candidate_id: int.from_bytes(hashlib.sha256(f"{seed}:{i.candidate_id}".encode()).digest()[:8], "big")
            / 2.0**64 for i in items}


def fit_linear(train_pos: np.ndarray, train_neg: np.ndarray, l2: float = 1e-3, steps: int = 500) -> np.ndarray:
    """w of the paper's linear form R_str = w . normalized phi, by logistic regression on pair differences
    (P(y+ beats y-) = sigmoid(w . (x+ - x-))), L2-regularised, full-batch gradient descent (deterministic)."""
    d = train_pos - train_neg
    w = np.zeros(d.shape[1])
    lr = 0.5
    for _ in range(steps):
        z = d @ w
        p = 1.0 / (1.0 + np.exp(np.clip(z, -40, 40)))  # = sigmoid(-z): the gradient weight of each pair
        grad = -(d * p[:, None]).mean(axis=0) + l2 * w
        w -= lr * grad
    return w


def _complete_tasks(items: Sequence[Item], have: set[str]) -> list[Item]:
    """The items of the tasks whose every valid candidate is in ``have``."""
    return [i for t in by_task(items).values() if all(x.candidate_id in have for x in t) for i in t]


def evaluate_split(ds, split: str, settings=None, log: Callable[[str], None] | None = None,
                   tiers: Sequence[str] = ("paper",)) -> dict:
    """Train the paper-tier MLP on ``split``'s training tasks; score the held-out (test) tasks with it and with
    the baselines: random, the paper's linear form (w fit by logistic regression on the same pairs) and a
    block-size rule (the paper's ``occ`` feature alone); ``tiers`` adds MLPs on richer feature sets
    (``paper+compiler``), read from the dataset's stored feature tables where present."""
    from cudaperf.ranker.train import RankerSettings, feature_table, split_items, train_ranker

    settings = settings or RankerSettings()
    train_items = split_items(ds, split, "train")
    test_items = split_items(ds, split, "test")
    feats = feature_table(ds, [i.candidate_id for i in train_items + test_items], "paper")
    out: dict = {"split": split, "n_train_tasks": len(by_task(train_items)), "n_test_tasks": len(by_task(test_items))}
    if not test_items:
        out["error"] = "no measured held-out task"
        return out
    ranker = train_ranker(ds, split=split, settings=settings, features=feats, log=log)
    models: dict[str, dict[str, float]] = {}
    mlp = ranker.score_many([feats[i.candidate_id] for i in test_items])
    mlp_scores = {i.candidate_id: float(s) for i, s in zip(test_items, mlp)}
    models["mlp_paper"] = metrics(test_items, mlp_scores)
    family = {t["id"]: t["family"] for t in ds.tasks}
    per_family: dict[str, list[Item]] = {}
    for i in test_items:
        per_family.setdefault(family[i.task_id], []).append(i)
    out["mlp_paper_by_family"] = {f: {k: m[k] for k in ("pairwise_accuracy", "kendall_tau", "n_tasks")}
                                  for f, its in sorted(per_family.items()) if (m := metrics(its, mlp_scores))}
    models["random"] = metrics(test_items, random_scores(test_items, settings.seed))
    tp = quartile_pairs(train_items)
    norm = ranker.normalizer
    xp = np.array(norm.transform_many([feats[s.candidate_id] for s, _ in tp]))
    xn = np.array(norm.transform_many([feats[w.candidate_id] for _, w in tp]))
    w = fit_linear(xp, xn)
    xt = np.array(norm.transform_many([feats[i.candidate_id] for i in test_items]))
    models["linear_paper"] = metrics(test_items, {i.candidate_id: float(s) for i, s in zip(test_items, xt @ w)})
    occ = {i.candidate_id: (feats[i.candidate_id]["occ"] if math.isfinite(feats[i.candidate_id]["occ"]) else 0.0)
           for i in test_items}
    models["block_size_rule"] = metrics(test_items, occ)
    for tier in tiers:
        if tier == "paper":
            continue
        name = f"mlp_{tier.replace('+', '_')}"
        tr, te = train_items, test_items
        if "profile" in tier.split("+"):
            # measured features: only candidates with stored counters, whole tasks only
            from cudaperf.dataset.features import load_features

            have = set(load_features(ds, "profile"))
            tr, te = _complete_tasks(train_items, have), _complete_tasks(test_items, have)
            if not te or not quartile_pairs(tr):
                models[name] = {"error": f"profile features stored for {len(have)} candidates: "
                                         f"{len(by_task(tr))} training and {len(by_task(te))} held-out tasks "
                                         "have them all (run `cudaperf dataset features --tier profile` on a GPU)"}
                continue
            models[f"mlp_paper_on_{name[4:]}_tasks"] = metrics(
                te, {i.candidate_id: float(s) for i, s in
                     zip(te, ranker.score_many([feats[i.candidate_id] for i in te]))}) | {
                "n_train_tasks": len(by_task(train_items))}
            # what the tier adds, apart from the smaller training set: the paper tier trained on the same tasks
            same = train_ranker(ds, split=split, settings=settings, features=feats, items=tr)
            models[f"mlp_paper_trained_on_{name[4:]}_tasks"] = metrics(
                te, {i.candidate_id: float(s) for i, s in
                     zip(te, same.score_many([feats[i.candidate_id] for i in te]))}) | {
                "n_train_tasks": len(by_task(tr))}
        tf = feature_table(ds, [i.candidate_id for i in tr + te], tier)
        rt = train_ranker(ds, split=split, tier=tier, settings=settings, features=tf, items=tr)
        st = rt.score_many([tf[i.candidate_id] for i in te])
        models[name] = metrics(te, {i.candidate_id: float(x) for i, x in zip(te, st)}) | {
            "n_train_tasks": len(by_task(tr))}
    out["models"] = models
    out["linear_weights"] = dict(zip(norm.names, map(float, w)))
    out["ranker"] = ranker.meta
    return out
