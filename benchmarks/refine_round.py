"""One refinement round of 16 samples of one C task: judged together through the executor (what ``cudaperf eval``
does each turn) against judged one after another with ``evaluate`` (each call prepares the task afresh: hidden
inputs, reference outputs, the sequential baseline).

    python benchmarks/refine_round.py --out DIR [--task TASK_ID] [--samples 16] [--timing-budget-ms 500] [--max-reps 30]
                                      [--arms round,overlap,one_by_one] [--repeats 1]

Arms: ``round`` (the executor with one candidate's process after another), ``overlap`` (the same with
``HarnessSettings.overlap_judging``: the next candidate starts while the previous one is judged), ``one_by_one``.
With ``--repeats N`` the executor arms alternate N times (round, overlap, round, overlap, ...), each time with new
sources, and each arm's rate is over all its repeats.

The 16 answers are the dataset's variants of the task (cycled), each made a new source by a comment, so every one
goes through nvcc (no cache hit), as model samples would. Both arms get the same 16 sources, each with its own
nonce, so neither reuses the other's builds. Writes ``refine_round.json`` under DIR and prints a line per arm and
the ratio. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path


def _answers(task_id: str | None, samples: int) -> tuple[object, list[str]]:
    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.measure import candidate_summary
    from cudaperf.dataset.store import Dataset, default_dataset_dir

    ds = Dataset.load(default_dataset_dir())
    summary = candidate_summary(ds)
    tasks = dataset_tasks(ds)
    if task_id is None:  # the first held-out C task (by id) with 8 or more valid variants
        test = sorted(t["id"] for t in ds.tasks if t["split_task"] == "test" and not t["family"].startswith("pt_"))
        for tid in test:
            if sum(summary[c["candidate_id"]]["valid"] for c in ds.candidates if c["task_id"] == tid) >= 8:
                task_id = tid
                break
    codes = [c["code"] for c in ds.candidates if c["task_id"] == task_id and summary[c["candidate_id"]]["valid"]]
    if not codes:
        raise SystemExit(f"no valid variants for {task_id}")
    return tasks[task_id], [codes[i % len(codes)] for i in range(samples)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--task", default=None)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--timing-budget-ms", type=float, default=500.0)
    ap.add_argument("--max-reps", type=int, default=30, help="as cudaperf eval's default")
    ap.add_argument("--skip-sequential", action="store_true", help="same as leaving one_by_one out of --arms")
    ap.add_argument("--arms", default="round,one_by_one", help="comma-separated: round, overlap, one_by_one")
    ap.add_argument("--repeats", type=int, default=1, help="times each executor arm runs, alternating")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(wanted) - {"round", "overlap", "one_by_one"}
    if unknown:
        ap.error(f"--arms: unknown {sorted(unknown)}")
    if args.skip_sequential and "one_by_one" in wanted:
        wanted.remove("one_by_one")

    from dataclasses import replace

    from cudaperf.env.evaluator import Evaluator
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.harness.settings import HarnessSettings

    task, codes = _answers(args.task, args.samples)
    settings = HarnessSettings(budget_ms=args.timing_budget_ms, max_reps=args.max_reps)
    arm_settings = {"round": replace(settings, overlap_runs=False),
                    "overlap": replace(settings, overlap_judging=True, overlap_runs=False)}

    def fresh(tag: str) -> list[str]:
        nonce = uuid.uuid4().hex
        return [f"<OUTPUT_CUDA>\n// {tag} {nonce} {i}\n{c}\n</OUTPUT_CUDA>" for i, c in enumerate(codes)]

    def add(name: str, res: list, wall: float) -> None:
        a = arms.setdefault(name, {"wall_s": 0.0, "n": 0, "correct": 0, "speedups": [], "walls_s": []})
        a["wall_s"] = round(a["wall_s"] + wall, 2)
        a["walls_s"].append(round(wall, 2))
        a["n"] += len(res)
        a["correct"] += sum(r.correct for r in res)
        a["speedups"] += [r.speedup for r in res]
        a["per_min"] = round(60 * a["n"] / a["wall_s"], 1)

    arms: dict[str, dict] = {}
    for rep in range(max(1, args.repeats)):
        for name in [a for a in wanted if a in arm_settings]:
            store = args.out / f"refine_round_store_{name}.jsonl"
            store.unlink(missing_ok=True)
            ev = Evaluator([task], store, settings=arm_settings[name])
            t0 = time.monotonic()
            res = ev.evaluate([(task.id, f"s{i}-t0", a) for i, a in enumerate(fresh(f"{name} {rep}"))])
            add(name, res, time.monotonic() - t0)
    if "one_by_one" in wanted:
        seq = []
        t0 = time.monotonic()
        for i, a in enumerate(fresh("sequential")):
            seq.append(evaluate(task, a, settings=settings, candidate_id=f"seq{i}"))
        add("one_by_one", seq, time.monotonic() - t0)
    out = {"task": task.id, "samples": args.samples, "timing_budget_ms": args.timing_budget_ms,
           "max_reps": args.max_reps, "repeats": args.repeats, "arms": arms}
    if "one_by_one" in arms and "round" in arms:
        out["ratio"] = round(arms["round"]["per_min"] / arms["one_by_one"]["per_min"], 2)
    if "overlap" in arms and "round" in arms:
        out["overlap_over_round"] = round(arms["overlap"]["per_min"] / arms["round"]["per_min"], 3)
    (args.out / "refine_round.json").write_text(json.dumps(out, indent=2) + "\n")
    for name, a in arms.items():
        print(f"{name:>11}: {a['n']} candidates ({a['correct']} correct) in {a['wall_s']:.1f} s = {a['per_min']:.1f} /min")
    if "ratio" in out:
        print(f"ratio {out['ratio']}x  task {task.id}")
    if "overlap_over_round" in out:
        print(f"overlap / round {out['overlap_over_round']}x  task {task.id}")


if __name__ == "__main__":
    main()
