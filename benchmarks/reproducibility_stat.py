"""Would another timing statistic reproduce speedups better? Median against minimum, over stored runs.

For every pair of result stores (JSONL, optionally gzipped, as `cudaperf dataset measure --store` writes them)
with at least 5 correct candidates in common, the median |log ratio| between the two runs of: the speedup as
the harness computes it (median baseline time / median candidate time), the same with minimum times, and each
side's time alone. Runs are named by their file stem.

    python benchmarks/reproducibility_stat.py --out repro.json STORE.jsonl.gz STORE.jsonl.gz ...

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--min-common", type=int, default=5)
    args = ap.parse_args()

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
