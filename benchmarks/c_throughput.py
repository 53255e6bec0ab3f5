"""C candidates per minute on one GPU for a batch shaped like an RL step: 16 samples of each of several held-out C
tasks, judged together through the executor (compile on the CPU pool overlapped with the GPU runs), in arms that
differ only in how a task's candidates follow one another on the GPU, side by side in one run:

    python benchmarks/c_throughput.py --out DIR [--tasks 4] [--samples 16] [--arms serial,overlap_judging,overlap_runs]
                                      [--repeats 1] [--timing-budget-ms 500] [--max-reps 30]

Arms (``HarnessSettings``): ``serial`` (a candidate's process starts once the previous one is gone and
judged), ``overlap_judging`` (once it is gone; judging overlaps), ``overlap_runs`` (the default since session 25: once it is
released, its exit and judging overlap the next one's start and tests; timing still waits until it is gone),
``overlap_runs_5`` (the same, timing each answer with the paper's five runs instead of ``--max-reps``: an RL step
that needs speedups, not a report), ``dataset`` (``cudaperf dataset measure``'s settings, ``MEASURE_SETTINGS``: a
task's candidates alive together, three interleaved windows each; trusted code only, as the dataset's variants are)
and ``dataset_together`` (the same, the task's processes started at once: ``HarnessSettings.start_together``).
Arms alternate ``--repeats``
times; each gets the same answers, each made a new source by a nonce (every one goes through nvcc, as a policy's
samples would).

The answers are the dataset's valid variants of the first ``--tasks`` held-out C tasks (one a family) with 8 or more of them
(cycled to ``--samples``). Per arm: wall, candidates per minute, verdicts, how busy the GPU was (the share of the
wall inside timing windows, and inside the timed calls themselves: the candidates' samples), and where each
candidate's GPU-worker time went (medians of its phases), with estimates of the kernels' and the GPU's share of the
wall (:func:`busy_shares`). Between arms: the median |ln| of the ratio of each
answer's speedups, so that a faster arm is seen to time the same. Writes ``c_throughput.json`` under DIR. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import uuid
from dataclasses import replace
from pathlib import Path

ARMS = {"serial": {"overlap_runs": False}, "overlap_judging": {"overlap_judging": True, "overlap_runs": False},
        "overlap_runs": {"overlap_runs": True},
        "overlap_runs_5": {"overlap_runs": True, "min_reps": 5, "max_reps": 5},
        "dataset": {"measure": True}, "dataset_together": {"measure": True, "start_together": True}}
PHASES = ("setup_s", "tests_s", "windows_s", "close_s", "exit_s", "judge_s", "run_s", "compile_s")


def _answers(n_tasks: int, samples: int, min_variants: int = 8):
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import candidate_summary
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    summary = candidate_summary(ds)
    tasks = dataset_tasks(ds)
    valid: dict[str, list[str]] = {}
    for c in ds.candidates:
        if summary[c["candidate_id"]]["valid"]:
            valid.setdefault(c["task_id"], []).append(c["code"])
    family = {t["id"]: t["family"] for t in ds.tasks}
    test = sorted(t["id"] for t in ds.tasks if t["split_task"] == "test" and not t["family"].startswith("pt_"))
    chosen: list[str] = []
    for tid in test:  # one task a family, so that the batch is not one kind of code
        if len(valid.get(tid, [])) >= min_variants and family[tid] not in {family[c] for c in chosen}:
            chosen.append(tid)
    chosen = chosen[:n_tasks]
    if len(chosen) < n_tasks:
        raise SystemExit(f"only {len(chosen)} held-out C tasks have {min_variants}+ valid variants")
    return [tasks[t] for t in chosen], {t: [valid[t][i % len(valid[t])] for i in range(samples)] for t in chosen}


def busy_shares(rows, wall_s: float) -> dict[str, float]:
    """How busy the GPU was over ``wall_s``, from each timed candidate's (timed calls' samples in ms, the traced
    call's kernel share, its GPU share): the timed calls' share of the wall, and estimates of the kernels' share and
    of the GPU's (kernels, copies and fills) share, each call taken to spend its time as the traced call did."""
    timed = kernels = gpu = 0.0
    for samples_ms, kernel_share, gpu_share in rows:
        t = sum(samples_ms) / 1e3
        timed += t
        kernels += t * (kernel_share or 0.0)
        gpu += t * (gpu_share or 0.0)
    return {"timed_call_share": round(timed / wall_s, 4), "kernel_share_est": round(kernels / wall_s, 4),
            "gpu_busy_share_est": round(gpu / wall_s, 4)}


def _rows(results):
    return [(r.candidate_timing.samples_ms, r.gpu_evidence.kernel_share if r.gpu_evidence else None,
             r.gpu_evidence.gpu_share if r.gpu_evidence else None) for r in results if r.candidate_timing]


def _median(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return round(statistics.median(xs), 4) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated: {', '.join(ARMS)}")
    ap.add_argument("--repeats", type=int, default=1, help="times each arm runs, alternating")
    ap.add_argument("--timing-budget-ms", type=float, default=500.0, help="as cudaperf eval's default")
    ap.add_argument("--max-reps", type=int, default=30, help="as cudaperf eval's default")
    args = ap.parse_args()
    wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(wanted) - set(ARMS)
    if unknown or not wanted:
        ap.error(f"--arms: unknown {sorted(unknown)}" if unknown else "--arms: none given")
    args.out.mkdir(parents=True, exist_ok=True)

    from cudaperf.dataset.measure import MEASURE_SETTINGS
    from cudaperf.env.evaluator import Evaluator
    from cudaperf.harness.settings import HarnessSettings

    tasks, codes = _answers(args.tasks, args.samples)
    base = HarnessSettings(budget_ms=args.timing_budget_ms, max_reps=args.max_reps)
    arms: dict[str, dict] = {}
    speedups: dict[str, dict[tuple[str, int], list[float]]] = {}
    for rep in range(max(1, args.repeats)):
        for name in wanted:
            nonce = uuid.uuid4().hex
            items = [(t.id, f"{t.id}/s{i}", f"<OUTPUT_CUDA>\n// {name} {rep} {nonce} {i}\n{c}\n</OUTPUT_CUDA>")
                     for t in tasks for i, c in enumerate(codes[t.id])]
            store = args.out / f"store_{name}_{rep}.jsonl"
            store.unlink(missing_ok=True)
            arm = dict(ARMS[name])
            ev = Evaluator(tasks, store, settings=replace(MEASURE_SETTINGS if arm.pop("measure", False) else base,
                                                          **arm))
            t0 = time.monotonic()
            res = ev.evaluate(items)
            wall = time.monotonic() - t0
            a = arms.setdefault(name, {"runs": [], "phases": {p: [] for p in PHASES}, "verdicts": {}})
            windows = sum(r.durations_s.get("windows_s", 0.0) for r in res if r.durations_s)
            a["runs"].append({"wall_s": round(wall, 2), "n": len(res), "per_min": round(60 * len(res) / wall, 1),
                              "correct": sum(r.correct for r in res),
                              "unscored": sum(r.status == "unscored" for r in res),
                              "window_share": round(windows / wall, 4), **busy_shares(_rows(res), wall),
                              "overlapped": sum(1 for r in res if (r.durations_s or {}).get("overlapped")),
                              "isolated_reruns": sum(1 for r in res if (r.durations_s or {}).get("isolated_rerun"))})
            for r in res:
                v = "correct" if r.correct else (r.failure.kind.value if r.failure else r.status)
                a["verdicts"][v] = a["verdicts"].get(v, 0) + 1
                for p in PHASES:
                    if r.durations_s and p in r.durations_s:
                        a["phases"][p].append(r.durations_s[p])
                if r.speedup:
                    speedups.setdefault(name, {}).setdefault((r.task_id, int(r.candidate_id.rsplit("/s", 1)[1])),
                                                             []).append(r.speedup)
            last = a["runs"][-1]
            print(f"{name:>16} rep {rep}: {last['n']} in {last['wall_s']:.1f} s = {last['per_min']:.1f} /min, "
                  f"{last['correct']} correct, window share {last['window_share']:.2f}, overlapped "
                  f"{last['overlapped']}, reruns {last['isolated_reruns']}", flush=True)
    out: dict = {"tasks": [t.id for t in tasks], "samples": args.samples, "timing_budget_ms": args.timing_budget_ms,
                 "max_reps": args.max_reps, "repeats": args.repeats, "arms": {}}
    for name, a in arms.items():
        n = sum(r["n"] for r in a["runs"])
        wall = sum(r["wall_s"] for r in a["runs"])
        out["arms"][name] = {"per_min": round(60 * n / wall, 1), "n": n, "wall_s": round(wall, 2),
                             "runs": a["runs"], "verdicts": a["verdicts"],
                             "phase_medians_s": {p: _median(v) for p, v in a["phases"].items()}}
    first = wanted[0]
    for name in wanted[1:]:
        if first in out["arms"] and name in out["arms"]:
            out["arms"][name]["rate_over_" + first] = round(out["arms"][name]["per_min"] / out["arms"][first]["per_min"], 3)
            pairs = [math.log(statistics.median(speedups[name][k]) / statistics.median(speedups[first][k]))
                     for k in speedups.get(name, {}) if k in speedups.get(first, {})]
            out["arms"][name]["speedup_vs_" + first + "_median_abs_log"] = (
                round(statistics.median(abs(x) for x in pairs), 4) if pairs else None)
    (args.out / "c_throughput.json").write_text(json.dumps(out, indent=2) + "\n")
    for name, a in out["arms"].items():
        extra = "".join(f", {k} {v}" for k, v in a.items() if k.startswith(("rate_over", "speedup_vs")))
        print(f"{name:>16}: {a['n']} candidates in {a['wall_s']:.1f} s = {a['per_min']:.1f} /min{extra}")
        print(f"{'':>16}  phases (median s): {a['phase_medians_s']}")


if __name__ == "__main__":
    main()
