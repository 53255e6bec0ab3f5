"""Would another timing statistic reproduce speedups better? Median against minimum, over stored runs.

For every pair of result stores (JSONL, optionally gzipped, as `cudaperf dataset measure --store` writes them)
with at least 5 correct candidates in common, the median |log ratio| between the two runs of: the speedup as
the harness computes it (median baseline time / median candidate time), the same with minimum times, and each
side's time alone. Runs are named by their file stem.

    python benchmarks/reproducibility_stat.py --out repro.json STORE.jsonl.gz STORE.jsonl.gz ...

With ``--pooled``, the stores are repeated runs of one sample given in the order they ran, alternating between
two sides (a1 b1 a2 b2 ...): for k = 1 .. n/2 runs per side, each side's time is pooled over k of its runs (the
fastest window, or the fastest sample, over all of them) and the two sides' speedups compared, averaged over
every choice of k pairs; beside them, each side's speedup as the geometric mean of the runs' own speedups (how
the dataset combined runs before session 10; it now pools by the fastest window). Does timing a candidate again
minutes later bring two measurements closer?

    python benchmarks/reproducibility_stat.py --pooled --out pooled.json A1 B1 A2 B2 ...

With ``--versus``, the stores given first are one side and those after ``--versus`` the other (two leases, say),
each pooled over all its runs by the fastest window and by the fastest sample:

    python benchmarks/reproducibility_stat.py --out cross.json A1 A2 A3 --versus B1 B2

CPU only; reads the timing samples the stores already hold.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import statistics
from pathlib import Path


def load(path: Path) -> dict[tuple[str, str], dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = {}
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            r = json.loads(line)
            if r["status"] == "scored" and r["correct"] and r.get("candidate_timing") and r.get("baseline_timing"):
                rows[(r["task_id"], r["candidate_id"])] = r  # the latest result of a key wins, as in the store
    return rows


def med_abs_log(pairs: list[tuple[float, float]]) -> float:
    return statistics.median(abs(math.log(b / a)) for a, b in pairs)


def fastest(timing: dict, stat: str) -> float:
    """A side's time by ``stat``: 'best_window' (the fastest window's median; the median where there was one
    window) or 'min' (the fastest sample)."""
    if stat == "min":
        return timing["min_ms"]
    return min(timing.get("windows_ms") or [timing["median_ms"]])


def pooled(runs: list[dict], min_common: int) -> list[dict]:
    """``runs`` alternate between side a and side b, in the order they ran. For k runs per side, every choice of k
    of the (a, b) pairs: each side's time is the fastest over its k runs; the median |log ratio| of the speedups
    (and of each side's time) between the sides, averaged over the choices."""
    a_runs, b_runs = runs[0::2], runs[1::2]
    n = min(len(a_runs), len(b_runs))
    common = sorted(set.intersection(*(set(r) for r in runs[:2 * n])))
    if len(common) < min_common:
        return []
    out = []
    for k in range(1, n + 1):
        row: dict = {"runs_per_side": k, "candidates": len(common), "choices": 0}
        sums: dict[str, float] = {}
        for pick in itertools.combinations(range(n), k):
            row["choices"] += 1
            for stat in ("best_window", "min"):
                sides = []
                for side in (a_runs, b_runs):
                    base = [min(fastest(side[i][c]["baseline_timing"], stat) for i in pick) for c in common]
                    cand = [min(fastest(side[i][c]["candidate_timing"], stat) for i in pick) for c in common]
                    sides.append((base, cand))
                (ba, ca), (bb, cb) = sides
                vals = {f"speedup_{stat}": med_abs_log([(x / y, u / v) for x, y, u, v in zip(ba, ca, bb, cb)]),
                        f"baseline_{stat}": med_abs_log(list(zip(ba, bb))),
                        f"candidate_{stat}": med_abs_log(list(zip(ca, cb)))}
                for key, v in vals.items():
                    sums[key] = sums.get(key, 0.0) + v
            # as the dataset combined runs before session 10: the geometric mean of each run's own speedup
            geo = [[math.exp(statistics.fmean(math.log(side[i][c]["speedup"]) for i in pick)) for c in common]
                   for side in (a_runs, b_runs)]
            sums["speedup_geomean"] = sums.get("speedup_geomean", 0.0) + med_abs_log(list(zip(*geo)))
        row.update({key: v / row["choices"] for key, v in sums.items()})
        out.append(row)
        print(f"{k} run(s) per side ({row['choices']} choices, {len(common)} candidates): speedup "
              f"{row['speedup_best_window']:.3f} (fastest window) {row['speedup_min']:.3f} (fastest sample) "
              f"{row['speedup_geomean']:.3f} (geometric mean of the runs' speedups); "
              f"baseline {row['baseline_best_window']:.3f}, candidate {row['candidate_best_window']:.3f}")
    return out


def versus(a_runs: list[dict], b_runs: list[dict], min_common: int) -> dict | None:
    """Side a pooled over all of ``a_runs`` against side b pooled over all of ``b_runs``, on their common
    candidates: the median |log ratio| of the speedups and of each side's time, and the signed median of each
    side's time (b against a), for the fastest window and the fastest sample."""
    common = sorted(set.intersection(*(set(r) for r in a_runs + b_runs)))
    if len(common) < min_common:
        return None
    row: dict = {"runs_a": len(a_runs), "runs_b": len(b_runs), "candidates": len(common)}
    for stat in ("best_window", "min"):
        (ba, ca), (bb, cb) = ([[min(fastest(r[c][f"{side}_timing"], stat) for r in runs) for c in common]
                               for side in ("baseline", "candidate")] for runs in (a_runs, b_runs))
        row[f"speedup_{stat}"] = med_abs_log([(x / y, u / v) for x, y, u, v in zip(ba, ca, bb, cb)])
        for side, xa, xb in (("baseline", ba, bb), ("candidate", ca, cb)):
            row[f"{side}_{stat}"] = med_abs_log(list(zip(xa, xb)))
            row[f"{side}_{stat}_signed"] = statistics.median(math.log(y / x) for x, y in zip(xa, xb))
    print(f"{len(a_runs)} run(s) against {len(b_runs)} ({len(common)} candidates): speedup "
          f"{row['speedup_best_window']:.3f} (fastest window) {row['speedup_min']:.3f} (fastest sample); baseline "
          f"{row['baseline_best_window']:.3f} ({row['baseline_best_window_signed']:+.3f}), candidate "
          f"{row['candidate_best_window']:.3f} ({row['candidate_best_window_signed']:+.3f})")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--min-common", type=int, default=5)
    ap.add_argument("--pooled", action="store_true",
                    help="the stores alternate between two sides, in the order they ran: pool k runs per side")
    ap.add_argument("--versus", nargs="+", type=Path, default=None,
                    help="the other side's stores: the stores given first, pooled, against these, pooled")
    args = ap.parse_args()

    if args.versus:
        row = versus([load(p) for p in args.stores], [load(p) for p in args.versus], args.min_common)
        if row is None:
            ap.error(f"the stores have fewer than {args.min_common} correct candidates in common")
        args.out.write_text(json.dumps({"stores": [str(p) for p in args.stores],
                                        "versus": [str(p) for p in args.versus], **row}, indent=1))
        return

    if args.pooled:
        if len(args.stores) < 2:
            ap.error("--pooled needs at least two stores (a1 b1 ...)")
        rows = pooled([load(p) for p in args.stores], args.min_common)
        if not rows:
            ap.error(f"the stores have fewer than {args.min_common} correct candidates in common")
        args.out.write_text(json.dumps({"stores": [str(p) for p in args.stores], "pooled": rows}, indent=1))
        return
    runs = {p.name.split(".")[0]: load(p) for p in args.stores}
    rows = []
    for a, b in itertools.combinations(runs, 2):
        common = sorted(set(runs[a]) & set(runs[b]))
        if len(common) < args.min_common:
            continue
        row: dict = {"run_a": a, "run_b": b, "candidates": len(common)}
        for stat in ("median", "min"):
            key = f"{stat}_ms"
            ra, rb = ([runs[x][k] for k in common] for x in (a, b))
            row[f"speedup_{stat}"] = med_abs_log([(x["baseline_timing"][key] / x["candidate_timing"][key],
                                                   y["baseline_timing"][key] / y["candidate_timing"][key])
                                                  for x, y in zip(ra, rb)])
            row[f"candidate_{stat}"] = med_abs_log([(x["candidate_timing"][key], y["candidate_timing"][key])
                                                    for x, y in zip(ra, rb)])
            row[f"baseline_{stat}"] = med_abs_log([(x["baseline_timing"][key], y["baseline_timing"][key])
                                                   for x, y in zip(ra, rb)])
        rows.append(row)
        print(f"{a} -> {b} ({len(common)}): speedup {row['speedup_median']:.3f} (median) {row['speedup_min']:.3f} "
              f"(min); candidate {row['candidate_median']:.3f} / {row['candidate_min']:.3f}; baseline "
              f"{row['baseline_median']:.3f} / {row['baseline_min']:.3f}")
    if rows:
        better = sum(r["speedup_min"] < r["speedup_median"] for r in rows)
        print(f"min-based speedups reproduce better in {better} of {len(rows)} run pairs; median over pairs: "
              f"{statistics.median(r['speedup_median'] for r in rows):.3f} (median) against "
              f"{statistics.median(r['speedup_min'] for r in rows):.3f} (min)")
    args.out.write_text(json.dumps({"stores": [str(p) for p in args.stores], "pairs": rows}, indent=1))


if __name__ == "__main__":
    main()
