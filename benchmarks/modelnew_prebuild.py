"""KernelBench-style candidates through the PyTorch batch, side by side in one run (issue 25): their extensions
built in the GPU run (as before, arm ``in_run``), built ahead on the CPU pool (``HarnessSettings.prebuild_modelnew``,
arm ``prebuild``), and built ahead with the next runner started while the current one runs
(``HarnessSettings.prestart_runners``, arm ``prebuild_prestart``).

    python benchmarks/modelnew_prebuild.py --out DIR [--candidates 4] [--rounds 1] [--arms in_run,prebuild,...]

Each arm evaluates the same ``--candidates`` ModelNew modules of the built-in ``relu`` problem, as a policy's
samples arrive (untrusted: one runner at a time on the GPU), through ``run_pytorch_batch``, with a cache of its
own, so every build is cold in every arm. The modules are ``tests/fixtures/pytorch/relu_modelnew.py`` with their
extension renamed and a comment added, each a distinct source. Arms alternate over ``--rounds``. Printed and written to ``DIR/summary.json``: per arm, the batch's wall time, candidates per GPU-hour, the
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


ARMS = {"in_run": (False, False), "prebuild": (True, False), "prebuild_prestart": (True, True)}


def run_arm(arm: str, n: int, out: Path, tag: str) -> dict:
    from cudaperf.harness.batch_pytorch import run_pytorch_batch
    from cudaperf.harness.executor import Job
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    os.environ["CUDAPERF_CACHE"] = str(out / f"cache-{tag}")
    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    prebuild, prestart = ARMS[arm]
    settings = HarnessSettings(budget_ms=500, max_reps=30, prebuild_modelnew=prebuild, prestart_runners=prestart)
    jobs = [Job("relu", f"{tag}-{k}", c) for k, c in enumerate(candidates(n, uuid.uuid4().hex[:8]))]
    store = ResultStore(out / f"{tag}.jsonl")
    t0 = time.monotonic()
    summary = run_pytorch_batch({"relu": task}, jobs, store, settings=settings, parallel=1, prestart=prestart)
    wall = time.monotonic() - t0
    results = list(store.read())
    verdicts: dict[str, int] = {}
    for r in results:
        key = "correct" if r.correct else (r.status if r.status == "unscored" else r.failure.kind.value)
        verdicts[key] = verdicts.get(key, 0) + 1

    def median(name: str):
        vals = [r.durations_s.get(name) for r in results if isinstance(r.durations_s.get(name), (int, float))]
        return round(statistics.median(vals), 2) if vals else None

    return {"arm": arm, "tag": tag, "candidates": len(results),
            "wall_s": round(wall, 1), "per_gpu_hour": round(3600 * len(results) / wall, 1), "verdicts": verdicts,
            "median_compile_s": median("compile_s"), "median_startup_s": median("startup_s"),
            "median_run_s": median("run_s"), "median_load_wait_s": median("load_wait_s"),
            "batch_gpu_s": round(summary.gpu_s, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    a = ap.parse_args()
    arms = [x for x in a.arms.split(",") if x]
    unknown = [x for x in arms if x not in ARMS]
    if unknown:
        ap.error(f"unknown arm(s) {', '.join(unknown)}: choose from {', '.join(ARMS)}")
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in range(a.rounds):
        for arm in arms:
            row = run_arm(arm, a.candidates, a.out, f"{arm}-{r}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    rate = {arm: sum(x["candidates"] for x in rows if x["arm"] == arm) * 3600
            / max(1e-9, sum(x["wall_s"] for x in rows if x["arm"] == arm)) for arm in arms}
    base = rate.get("in_run")
    summary = {"rows": rows, "per_gpu_hour": {k: round(v, 1) for k, v in rate.items()},
               "ratio_over_in_run": {k: round(v / base, 2) for k, v in rate.items()} if base else None}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
