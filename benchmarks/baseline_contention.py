"""Does other host work move the sequential C baseline? Quiet windows against loaded ones, side by side.

    python benchmarks/baseline_contention.py [--tasks ID,ID,...] [--rounds 3] [--load-mb 256] [--out FILE]

Each task is prepared once (one seed: the same inputs throughout), then its baseline is timed by the harness's
own :func:`time_baseline` in alternating windows: quiet, then with a *load* process beside it, for ``--rounds``
rounds. The load copies two ``--load-mb`` MiB buffers back and forth with numpy: the memory traffic that
another GPU worker's host-side work (pageable copies, judging outputs, a candidate's hidden tests) makes while
this worker times. A second preparation with another seed, timed quiet, shows what fresh inputs alone do.

Reported per task, as |log ratio| of baseline medians: quiet against quiet (the window-to-window floor),
loaded against quiet, and seed against seed. CPU only: the baseline never touches the GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import statistics
import time
from dataclasses import replace
from pathlib import Path

# The default tasks: the 10 % C sample that runs r2 and r3 re-measured on the H200 (session 6).
R2_SAMPLE = ("conv1d_004,gather_scatter_015,matmul_009,mean_variance_002,minmax_reduce_001,monte_carlo_001,"
             "pairwise_distance_005,pixel_ops_015,prefix_scan_018,row_col_reduce_002,spmv_csr_000,spmv_csr_015,"
             "stencil1d_015,stencil1d_019,wavefront_dp_000")


def _load(stop, mb: int) -> None:
    import numpy as np

    a = np.ones(mb << 18, dtype=np.float32)  # mb MiB
    b = np.empty_like(a)
    while not stop.is_set():
        np.copyto(b, a)
        np.copyto(a, b)


def _timed(prepared, settings) -> float:
    from cudaperf.harness.run_c_function import time_baseline

    return time_baseline(replace(prepared, baseline_timing=None), settings).baseline_timing.median_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=R2_SAMPLE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load-mb", type=int, default=256)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.harness.run_c_function import prepare_c_function
    from cudaperf.harness.settings import HarnessSettings

    tasks = dataset_tasks(Dataset.load(default_dataset_dir()))
    settings = HarnessSettings()
    ctx = mp.get_context("spawn")
    rows = []
    for tid in args.tasks.split(","):
        task = tasks[tid]
        t0 = time.monotonic()
        p1 = prepare_c_function(task, settings, seed=1, defer_baseline=True)
        p2 = prepare_c_function(task, settings, seed=2, defer_baseline=True)
        quiet, loaded = [], []
        for _ in range(args.rounds):
            quiet.append(_timed(p1, settings))
            stop = ctx.Event()
            proc = ctx.Process(target=_load, args=(stop, args.load_mb), daemon=True)
            proc.start()
            time.sleep(1.0)  # the load is running before the window opens
            loaded.append(_timed(p1, settings))
            stop.set()
            proc.join()
        other_seed = _timed(p2, settings)
        q = statistics.median(quiet)
        row = {"task": tid, "quiet_ms": quiet, "loaded_ms": loaded, "other_seed_ms": other_seed,
               "quiet_vs_quiet": statistics.median(abs(math.log(a / b)) for a, b in zip(quiet, quiet[1:])),
               "loaded_vs_quiet": abs(math.log(statistics.median(loaded) / q)),
               "seed_vs_seed": abs(math.log(other_seed / q)), "wall_s": round(time.monotonic() - t0, 1)}
        rows.append(row)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                          if not isinstance(v, list)}), flush=True)
    summary = {k: statistics.median(r[k] for r in rows) for k in ("quiet_vs_quiet", "loaded_vs_quiet",
                                                                   "seed_vs_seed")}
    summary["loaded_slower_in"] = sum(statistics.median(r["loaded_ms"]) > statistics.median(r["quiet_ms"])
                                      for r in rows)
    summary["tasks"] = len(rows)
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
