"""Harness throughput and reproducibility on the bundled tasks, and BabelTower's reference kernels.

    python benchmarks/harness_batch.py --out DIR [--runs 2] [--babeltower PATH] [--skip-bundled]

Run 1 compiles into an empty cache (so compile throughput is real nvcc work); later runs reuse the cache and
re-measure everything else (fresh hidden inputs, the baseline re-timed), so comparing speedups across runs
measures the harness's timing reproducibility. Writes ``summary.json`` and the stores (JSONL) under DIR and
prints a table. Needs a GPU for anything but compile figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from cudaperf.harness.environment import gpu_inventory
from cudaperf.harness.executor import Job, run_batch
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks import builtin_candidates, load_builtin_tasks


def _speedups(results) -> dict[tuple[str, str], float]:
    return {(r.task_id, r.candidate_id): r.speedup for r in results if r.speedup}


def bundled(out: Path, runs: int, settings: HarnessSettings) -> dict:
    tasks = load_builtin_tasks()
    jobs = [Job(c.task_id, c.label, c.source) for c in builtin_candidates()]
    summaries = []
    for run in range(runs):
        store = ResultStore(out / f"bundled_run{run + 1}.jsonl")
        if store.path.exists():
            store.path.unlink()
        s = run_batch(tasks, jobs, store, settings=settings)
        results = store.read()
        verdicts: dict[str, int] = {}
        for r in results:
            key = "correct" if r.correct else (r.failure.kind.value if r.failure else "?")
            verdicts[key] = verdicts.get(key, 0) + 1
        summaries.append({
            "run": run + 1, "n_jobs": s.n_jobs, "compile_wall_s": s.compile_wall_s, "n_compiled": s.n_compiled,
            "compile_per_min": s.compile_per_min, "run_wall_s": s.run_wall_s, "n_run": s.n_run,
            "run_per_min": s.run_per_min, "verdicts": verdicts,
            "cached_compiles": sum(1 for r in results if r.compile and r.compile.cached),
        })
        print(f"run {run + 1}: {summaries[-1]}", flush=True)
    agreement = None
    if runs >= 2:
        a = _speedups(ResultStore(out / "bundled_run1.jsonl").read())
        b = _speedups(ResultStore(out / "bundled_run2.jsonl").read())
        common = sorted(set(a) & set(b))
        logs = [abs(math.log(a[k] / b[k])) for k in common]
        agreement = {
            "n_pairs": len(common),
            "median_abs_log_ratio": statistics.median(logs) if logs else None,
            "p90_abs_log_ratio": sorted(logs)[int(0.9 * (len(logs) - 1))] if logs else None,
            "max_abs_log_ratio": max(logs) if logs else None,
            "worst": sorted(((abs(math.log(a[k] / b[k])), k, a[k], b[k]) for k in common), reverse=True)[:5],
        }
        print(f"agreement: {agreement}", flush=True)
    return {"runs": summaries, "agreement": agreement}


def babeltower(out: Path, path: str | None, settings: HarnessSettings) -> dict:
    from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

    p = find_babeltower(path)
    if p is None:
        return {"skipped": "BabelTower data not found"}
    tasks = load_babeltower(p)
    jobs = [Job(t.id, "reference", t.reference_kernel) for t in tasks]
    store = ResultStore(out / "babeltower_reference.jsonl")
    if store.path.exists():
        store.path.unlink()
    s = run_batch(tasks, jobs, store, settings=settings)
    results = store.read()
    failed = [{"task": r.task_id, "kind": r.failure.kind.value if r.failure else None,
               "message": (r.failure.message if r.failure else "")[:300]} for r in results if not r.correct]
    res = {"n_tasks": len(tasks), "n_pass_all": sum(r.correct for r in results), "failed": failed,
           "compile_wall_s": s.compile_wall_s, "run_wall_s": s.run_wall_s, "run_per_min": s.run_per_min}
    print(f"babeltower: {res['n_pass_all']}/{res['n_tasks']} reference kernels pass all their tests", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--babeltower", default=None)
    ap.add_argument("--skip-bundled", action="store_true")
    ap.add_argument("--skip-babeltower", action="store_true")
    ap.add_argument("--budget-ms", type=float, default=2000.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["CUDAPERF_CACHE"] = tempfile.mkdtemp(prefix="cudaperf-bench-cache-")  # run 1 compiles for real
    settings = HarnessSettings(budget_ms=args.budget_ms)
    t0 = time.time()
    summary = {"machine": [list(g) for g in gpu_inventory()], "cpus": os.cpu_count(),
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "settings": {"budget_ms": settings.budget_ms, "n_tests": settings.n_tests,
                            "min_reps": settings.min_reps, "cv_target": settings.cv_target}}
    if not args.skip_bundled:
        summary["bundled"] = bundled(args.out, args.runs, settings)
    if not args.skip_babeltower:
        summary["babeltower"] = babeltower(args.out, args.babeltower, settings)
    summary["wall_s"] = time.time() - t0
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
