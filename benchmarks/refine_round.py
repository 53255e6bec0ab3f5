"""One refinement round of 16 samples of one C task: judged together through the executor (what ``cudaperf eval``
does each turn) against judged one after another with ``evaluate`` (each call prepares the task afresh: hidden
inputs, reference outputs, the sequential baseline).

    python benchmarks/refine_round.py --out DIR [--task TASK_ID] [--samples 16] [--timing-budget-ms 500] [--max-reps 30]

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
    ap.add_argument("--skip-sequential", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from cudaperf.env.evaluator import Evaluator
    from cudaperf.harness.evaluate import evaluate
    from cudaperf.harness.settings import HarnessSettings

    task, codes = _answers(args.task, args.samples)
    settings = HarnessSettings(budget_ms=args.timing_budget_ms, max_reps=args.max_reps)

    def fresh(tag: str) -> list[str]:
        nonce = uuid.uuid4().hex
        return [f"<OUTPUT_CUDA>\n// {tag} {nonce} {i}\n{c}\n</OUTPUT_CUDA>" for i, c in enumerate(codes)]

    arms = {}
    round_answers = fresh("round")
    store = args.out / "refine_round_store.jsonl"
    store.unlink(missing_ok=True)
    ev = Evaluator([task], store, settings=settings)
    t0 = time.monotonic()
    res = ev.evaluate([(task.id, f"s{i}-t0", a) for i, a in enumerate(round_answers)])
    wall = time.monotonic() - t0
    arms["round"] = {"wall_s": round(wall, 2), "per_min": round(60 * len(res) / wall, 1),
                     "correct": sum(r.correct for r in res), "n": len(res),
                     "speedups": [r.speedup for r in res]}
    if not args.skip_sequential:
        seq = []
        t0 = time.monotonic()
        for i, a in enumerate(fresh("sequential")):
            seq.append(evaluate(task, a, settings=settings, candidate_id=f"seq{i}"))
        wall = time.monotonic() - t0
        arms["one_by_one"] = {"wall_s": round(wall, 2), "per_min": round(60 * len(seq) / wall, 1),
                              "correct": sum(r.correct for r in seq), "n": len(seq),
                              "speedups": [r.speedup for r in seq]}
    out = {"task": task.id, "samples": args.samples, "timing_budget_ms": args.timing_budget_ms,
           "max_reps": args.max_reps, "arms": arms}
    if "one_by_one" in arms:
        out["ratio"] = round(arms["round"]["per_min"] / arms["one_by_one"]["per_min"], 2)
    (args.out / "refine_round.json").write_text(json.dumps(out, indent=2) + "\n")
    for name, a in arms.items():
        print(f"{name:>11}: {a['n']} candidates ({a['correct']} correct) in {a['wall_s']:.1f} s = {a['per_min']:.1f} /min")
    if "ratio" in out:
        print(f"ratio {out['ratio']}x  task {task.id}")


if __name__ == "__main__":
    main()
