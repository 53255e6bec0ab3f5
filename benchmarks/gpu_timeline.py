"""Where a measurement run's GPU time went, from its result store alone.

Each C task's candidates run as one group on one GPU; a result's ``durations_s["group_s"]`` is the time from the
group's start to that result, so a task's group spans [its results' earliest end minus its group_s, its last end].
With ``--gpus N``, the time between the first group's start and the last group's end, times N, less the groups'
total, is what the GPUs spent outside task groups: the baseline's first window (timed before the group), and
waiting (for a prepared task, or for background work that another GPU's timing holds back).

    python benchmarks/gpu_timeline.py --gpus 2 STORE.jsonl.gz [STORE.jsonl.gz ...] [--out timeline.json]

``--show`` prints each task's interval, in start order, for the first store. Each row also gives the run's
results and, for the baseline and the candidate side, the median over results of ln(slowest / fastest window):
how far the host moved within a task while the run went on (a change to what runs beside the windows shows there).
CPU only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path


def _rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def window_spread(rows: list[dict], side: str) -> float | None:
    """Median over a store's results of ln(slowest / fastest window median) of ``side`` ("baseline_timing" or
    "candidate_timing"), over results timed in at least two windows; None when there are none."""
    spreads = []
    for r in rows:
        w = [x for x in ((r.get(side) or {}).get("windows_ms") or []) if x and x > 0]
        if len(w) >= 2:
            spreads.append(math.log(max(w) / min(w)))
    return round(statistics.median(spreads), 4) if spreads else None


def groups(rows: list[dict]) -> list[tuple[float, float, str]]:
    """(start, end, task id) of each task's group in a store's results, in seconds since the epoch, sorted by
    start."""
    by_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        g = (r.get("durations_s") or {}).get("group_s")
        if g is None or not r.get("created_at"):
            continue
        end = dt.datetime.fromisoformat(r["created_at"]).timestamp()
        by_task[r["task_id"]].append((end - g, end))
    out = [(min(s for s, _ in v), max(e for _, e in v), t) for t, v in by_task.items()]
    return sorted(out)


def summary(path: Path, n_gpus: int) -> dict:
    rows = _rows(path)
    iv = groups(rows)
    if not iv:
        raise SystemExit(f"{path}: no grouped results (durations_s.group_s) to read")
    span = max(e for _, e, _ in iv) - iv[0][0]
    busy = sum(e - s for s, e, _ in iv)
    return {"store": str(path), "tasks": len(iv), "gpus": n_gpus, "span_s": round(span, 1),
            "group_s_per_gpu": round(busy / n_gpus, 1),
            "outside_groups_s_per_gpu": round(span - busy / n_gpus, 1),
            "outside_groups_fraction": round(1 - busy / (span * n_gpus), 3), "results": len(rows),
            "baseline_window_spread": window_spread(rows, "baseline_timing"),
            "candidate_window_spread": window_spread(rows, "candidate_timing")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", type=Path)
    ap.add_argument("--gpus", type=int, required=True, help="GPUs the run used")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--show", action="store_true", help="each task's interval, for the first store")
    args = ap.parse_args()
    if args.gpus < 1:
        ap.error("--gpus must be at least 1")
    for p in args.stores:
        if not p.exists():
            ap.error(f"no such store: {p}")
    if args.show:
        iv = groups(_rows(args.stores[0]))
        t0 = iv[0][0] if iv else 0.0
        for s, e, t in iv:
            print(f"{s - t0:8.1f} {e - t0:8.1f} {e - s:6.1f}  {t}")
    rows = [summary(p, args.gpus) for p in args.stores]
    for r in rows:
        print(f"{Path(r['store']).name}: {r['tasks']} tasks over {r['span_s']} s; in task groups "
              f"{r['group_s_per_gpu']} s per GPU, outside {r['outside_groups_s_per_gpu']} s "
              f"({r['outside_groups_fraction']:.0%}); {r['results']} results; median ln(slowest/fastest window) "
              f"baseline {r['baseline_window_spread']}, candidate {r['candidate_window_spread']}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
