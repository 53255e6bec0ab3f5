"""KernelBench-style candidates through the PyTorch batch, with their extensions built in the GPU run (as before)
and built ahead on the CPU pool (``HarnessSettings.prebuild_modelnew``), side by side in one run (issue 25).

    python benchmarks/modelnew_prebuild.py --out DIR [--candidates 6] [--rounds 1]

Each arm evaluates the same ``--candidates`` ModelNew modules of the built-in ``relu`` problem, as a policy's
samples arrive (untrusted: one runner at a time on the GPU), through ``run_pytorch_batch``, with a cache of its
own, so every build is cold in both arms. The modules are ``tests/fixtures/pytorch/relu_modelnew.py`` with their
extension renamed and a comment added, each a distinct source. Arms alternate over ``--rounds`` (off, on, off,
on...). Printed and written to ``DIR/summary.json``: per arm, the batch's wall time, candidates per GPU-hour, the
verdicts, and the medians of the build ahead (``compile_s``) and of the runner's start-up (``startup_s``: the
extension's build or load, torch's import, the CUDA context), which the GPU worker waits for.

Needs a CUDA build of PyTorch, nvcc and ninja (run it on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def candidates(n: int, salt: str) -> list[str]:
    base = (ROOT / "tests" / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    out = []
    for k in range(n):
        code = base.replace('name="relu_ext"', f'name="relu_ext_{salt}_{k}"') + f"\n# sample {salt}-{k}\n"
        out.append(f"```python\n{code}```\n")
    return out


def run_arm(prebuild: bool, n: int, out: Path, tag: str) -> dict:
    from cudaperf.harness.batch_pytorch import run_pytorch_batch
    from cudaperf.harness.executor import Job
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    os.environ["CUDAPERF_CACHE"] = str(out / f"cache-{tag}")
    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    settings = HarnessSettings(budget_ms=500, max_reps=30, prebuild_modelnew=prebuild)
    jobs = [Job("relu", f"{tag}-{k}", c) for k, c in enumerate(candidates(n, uuid.uuid4().hex[:8]))]
    store = ResultStore(out / f"{tag}.jsonl")
    t0 = time.monotonic()
    summary = run_pytorch_batch({"relu": task}, jobs, store, settings=settings, parallel=1)
    wall = time.monotonic() - t0
    results = list(store.read())
    verdicts: dict[str, int] = {}
    for r in results:
        key = "correct" if r.correct else (r.status if r.status == "unscored" else r.failure.kind.value)
        verdicts[key] = verdicts.get(key, 0) + 1

    def median(name: str):
        vals = [r.durations_s.get(name) for r in results if isinstance(r.durations_s.get(name), (int, float))]
        return round(statistics.median(vals), 2) if vals else None

    return {"arm": "prebuild" if prebuild else "in_run", "tag": tag, "candidates": len(results),
            "wall_s": round(wall, 1), "per_gpu_hour": round(3600 * len(results) / wall, 1), "verdicts": verdicts,
            "median_compile_s": median("compile_s"), "median_startup_s": median("startup_s"),
            "median_run_s": median("run_s"), "batch_gpu_s": round(summary.gpu_s, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in range(a.rounds):
        for prebuild in (False, True):
            row = run_arm(prebuild, a.candidates, a.out, f"{'on' if prebuild else 'off'}{r}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    by = {arm: [x for x in rows if x["arm"] == arm] for arm in ("in_run", "prebuild")}
    rate = {arm: sum(x["candidates"] for x in xs) * 3600 / max(1e-9, sum(x["wall_s"] for x in xs))
            for arm, xs in by.items()}
    summary = {"rows": rows, "per_gpu_hour": {k: round(v, 1) for k, v in rate.items()},
               "ratio_prebuild_over_in_run": round(rate["prebuild"] / rate["in_run"], 2) if rate["in_run"] else None}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
