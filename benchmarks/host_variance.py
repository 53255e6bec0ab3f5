"""Does the sequential C baseline drift on a quiet machine, and does pinning it to one core stop the drift?

    python benchmarks/host_variance.py [--tasks ID,...] [--rounds 4] [--arms free,pinned,thp,thp-pinned]
                                       [--core N] [--out FILE]

No GPU work runs: this isolates the host. Each task is prepared once (one seed, the same inputs throughout), then
its baseline is timed by the harness's own :func:`time_baseline` in alternating windows for ``--rounds`` rounds:
*free* (the scheduler's choice of core, as the harness runs today) and *pinned* (the timing process held on one
core, ``--core``, default the last one this process may use); *thp* and *thp-pinned* are the same with glibc's
malloc asking for transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` in the baseline's
environment: its buffers then sit in 2 MiB pages, whatever physical pages the process is given). Before every
window the calibration program
(``native/calibrate.c``) runs under the same affinity, so a core's own speed at that moment is recorded beside
the baseline it describes.

``--spread`` takes the rounds outermost, over all tasks, so that a task's windows lie minutes apart rather than
seconds: does the fastest window repeat over minutes too?

Reported per task and arm: the windows' medians, their spread as max/min, the median |log ratio| between
consecutive windows, the |log ratio| between the fastest window of the first half (in time) and that of the
second half; and the correlation, over all windows, between the baseline's and the calibration's log
deviations from their task means. The host's facts (cores, THP, CPU model) go into the JSON too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import time
from dataclasses import replace
from pathlib import Path

# Tasks of session 6's 10 % C sample whose baselines moved most between runs r2 and r3, and some that moved little.
THP_TUNABLE = "glibc.malloc.hugetlb=1"
DEFAULT_TASKS = ("conv1d_004,prefix_scan_018,pairwise_distance_005,matmul_009,spmv_csr_015,stencil1d_019,"
                 "monte_carlo_001,wavefront_dp_000")


def _host_facts() -> dict:
    def read(p: str) -> str | None:
        try:
            return Path(p).read_text().strip()
        except OSError:
            return None

    def run(cmd: list[str]) -> str | None:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    cpuinfo = read("/proc/cpuinfo") or ""
    mhz = [float(l.split(":")[1]) for l in cpuinfo.splitlines() if l.startswith("cpu MHz")]
    models = sorted({l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")})
    return {"machine": platform.node(), "kernel": platform.release(), "cpu_count": os.cpu_count(),
            "affinity": sorted(os.sched_getaffinity(0)), "cpu_models": models,
            "cpu_mhz_min_max": [min(mhz), max(mhz)] if mhz else None,
            "thp_enabled": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "thp_defrag": read("/sys/kernel/mm/transparent_hugepage/defrag"),
            "lscpu": run(["lscpu"]), "loadavg": read("/proc/loadavg")}


def _log_spread(xs: list[float]) -> dict:
    steps = [abs(math.log(a / b)) for a, b in zip(xs, xs[1:])]
    half = len(xs) // 2
    return {"max_over_min": max(xs) / min(xs), "consecutive_abs_log": statistics.median(steps) if steps else 0.0,
            # the fastest window of the first half of the windows in time against that of the second half: how well
            # the best-window estimator repeats over the span the windows cover
            "halves_best_abs_log": abs(math.log(min(xs[:half]) / min(xs[half:]))) if half else 0.0}


def _corr(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    return statistics.correlation(xs, ys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--arms", default="free,pinned,thp,thp-pinned")
    ap.add_argument("--spread", action="store_true", help="rounds outermost: a task's windows minutes apart")
    ap.add_argument("--core", type=int, default=None, help="the core of the pinned arm (default: the last allowed)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.harness import hostload
    from cudaperf.harness.run_c_function import prepare_c_function, time_baseline
    from cudaperf.harness.settings import HarnessSettings

    arm_names = args.arms.split(",")
    unknown = set(arm_names) - {"free", "pinned", "thp", "thp-pinned"}
    if unknown:
        ap.error(f"unknown arms: {sorted(unknown)}")
    facts = _host_facts()
    print(json.dumps({k: v for k, v in facts.items() if k != "lscpu"}), flush=True)
    free_set = os.sched_getaffinity(0)
    core = args.core if args.core is not None else max(free_set)
    tasks = dataset_tasks(Dataset.load(default_dataset_dir()))
    settings = HarnessSettings()
    ids = args.tasks.split(",")
    prepared = {tid: prepare_c_function(tasks[tid], settings, seed=1, defer_baseline=True) for tid in ids}
    arms = {tid: {a: {"baseline_ms": [], "compute_ms": [], "memory_ms": [], "cv": []} for a in arm_names}
            for tid in ids}
    wall = {tid: 0.0 for tid in ids}

    def window(tid: str, arm: str) -> None:
        t0 = time.monotonic()
        os.sched_setaffinity(0, {core} if arm.endswith("pinned") else free_set)
        if arm.startswith("thp"):
            os.environ["GLIBC_TUNABLES"] = THP_TUNABLE
        try:
            cal = hostload.calibrate()
            stats = time_baseline(replace(prepared[tid], baseline_timing=None), settings).baseline_timing
        finally:
            os.sched_setaffinity(0, free_set)
            os.environ.pop("GLIBC_TUNABLES", None)
        a = arms[tid][arm]
        a["baseline_ms"].append(stats.median_ms)
        a["cv"].append(stats.cv)
        a["compute_ms"].append(cal[0] if cal else float("nan"))
        a["memory_ms"].append(cal[1] if cal else float("nan"))
        wall[tid] += time.monotonic() - t0

    # --spread: rounds outermost, so that a task's windows lie minutes apart (every other task's windows between
    # them); otherwise a task's rounds follow each other within seconds.
    order = ([(tid, r) for r in range(args.rounds) for tid in ids] if args.spread
             else [(tid, r) for tid in ids for r in range(args.rounds)])
    for tid, _ in order:
        for arm in arm_names:
            window(tid, arm)
    rows = []
    for tid in ids:
        row = {"task": tid, "wall_s": round(wall[tid], 1), "arms": arms[tid]}
        for arm, a in arms[tid].items():
            row[arm] = _log_spread(a["baseline_ms"])
        rows.append(row)
        print(json.dumps({"task": tid, "wall_s": row["wall_s"],
                          **{arm: {k: round(v, 4) for k, v in row[arm].items()} for arm in arm_names},
                          **{f"{arm}_ms": [round(x, 2) for x in arms[tid][arm]["baseline_ms"]] for arm in arm_names}}),
              flush=True)

    summary: dict = {"tasks": len(rows), "rounds": args.rounds, "core": core, "spread": args.spread}
    for arm in arm_names:
        summary[arm] = {k: statistics.median(r[arm][k] for r in rows) for k in ("max_over_min",
                                                                                "consecutive_abs_log",
                                                                                "halves_best_abs_log")}
        dev_b, dev_c, dev_m = [], [], []
        for r in rows:
            a = r["arms"][arm]
            for key, dev in (("baseline_ms", dev_b), ("compute_ms", dev_c), ("memory_ms", dev_m)):
                logs = [math.log(x) for x in a[key]]
                mean = statistics.fmean(logs)
                dev.extend(x - mean for x in logs)
        summary[arm]["corr_baseline_compute"] = _corr(dev_b, dev_c)
        summary[arm]["corr_baseline_memory"] = _corr(dev_b, dev_m)
        summary[arm]["calibration_compute_max_over_min"] = statistics.median(
            max(r["arms"][arm]["compute_ms"]) / min(r["arms"][arm]["compute_ms"]) for r in rows)
    print(json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"host": facts, "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
