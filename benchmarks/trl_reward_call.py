"""A TRL reward call on real completions, through the harness (run it on a GPU machine).

The completions are chat messages, as TRL's GRPOTrainer passes them for a conversational dataset, holding real
CUDA from the built-in dataset: for each task its fastest and slowest measured variant, a corrupted variant (wrong
index: wrong outputs or a CUDA error), one that does not compile, an answer with no code, and the fastest variant
again with other prose around it (the memo evaluates it once). cudaperf's reward functions are called with TRL's
signature, ``f(prompts=..., completions=..., completion_ids=..., task_id=[...])``, then the async total is awaited
as TRL awaits async rewards.

    python benchmarks/trl_reward_call.py --out trl_reward.json [--ranker DIR] [--tasks 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path

from cudaperf.dataset.build import dataset_tasks
from cudaperf.dataset.measure import interleaved_task_order
from cudaperf.dataset.store import Dataset, default_dataset_dir
from cudaperf.harness.environment import gpu_count
from cudaperf.reward.adapters import HarnessRewards
from cudaperf.reward.composite import RewardSettings


def _fenced(code: str, prose: str = "Here is the CUDA translation.") -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"{prose}\n\n```cuda\n{code}\n```\n"}]


def _corrupt(code: str) -> str:
    """Shift the first global index by one: reads and writes past the intended element."""
    new, n = re.subn(r"blockIdx\.x\s*\*\s*blockDim\.x\s*\+\s*threadIdx\.x",
                     "blockIdx.x * blockDim.x + threadIdx.x + 1", code, count=1)
    return new if n else code.replace("threadIdx.x", "(threadIdx.x + 1)", 1)


def completions_for(ds: Dataset, n_tasks: int) -> list[tuple[str, str, list[dict[str, str]]]]:
    speed: dict[str, float] = {}
    for m in ds.measurements:
        if m["status"] == "scored" and m["correct"] and m["speedup"]:
            speed[m["candidate_id"]] = m["speedup"]
    by_task: dict[str, list[dict]] = {}
    for c in ds.candidates:
        if c["candidate_id"] in speed:
            by_task.setdefault(c["task_id"], []).append(c)
    order = [t for t in interleaved_task_order(ds, set(by_task)) if len(by_task[t]) >= 2][:n_tasks]
    out = []
    for tid in order:
        cands = sorted(by_task[tid], key=lambda c: -speed[c["candidate_id"]])
        fast, slow = cands[0], cands[-1]
        out += [
            (tid, f"fastest measured ({fast['name']})", _fenced(fast["code"])),
            (tid, f"slowest measured ({slow['name']})", _fenced(slow["code"])),
            (tid, "corrupted index", _fenced(_corrupt(fast["code"]))),
            (tid, "does not compile", _fenced(fast["code"].rstrip().rstrip("}"))),
            (tid, "no code", [{"role": "assistant", "content": "Use OpenMP instead; CUDA is not needed here."}]),
            (tid, "fastest again, other prose", _fenced(fast["code"], "Final answer:")),
        ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ranker", type=Path, default=None, help="A ranker directory for R_str (default: none).")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--preset", default="paper")
    args = ap.parse_args()

    ds = Dataset.load(default_dataset_dir())
    items = completions_for(ds, args.tasks)
    tasks = dataset_tasks(ds)
    structural = None
    if args.ranker:
        from cudaperf.ranker.train import Ranker

        structural = Ranker.load(args.ranker).score_code
    rewards = HarnessRewards({t: tasks[t] for t in {i[0] for i in items}}, settings=RewardSettings(args.preset),
                             structural=structural)
    prompts = [[{"role": "user", "content": f"Translate task {t} to CUDA."}] for t, _, _ in items]
    completions = [c for _, _, c in items]
    task_ids = [t for t, _, _ in items]
    t0 = time.monotonic()
    terms = {fn.__name__: fn(prompts=prompts, completions=completions, completion_ids=None, task_id=task_ids)
             for fn in rewards.functions()}
    first_s = time.monotonic() - t0
    t1 = time.monotonic()
    totals = asyncio.run(rewards.async_total()(prompts=prompts, completions=completions, completion_ids=None,
                                               task_id=task_ids))
    again_s = time.monotonic() - t1
    rows = []
    for i, (tid, kind, comp) in enumerate(items):
        r = rewards.result(tid, comp[-1]["content"])
        rows.append({"task_id": tid, "completion": kind, **{k: v[i] for k, v in terms.items()}, "total": totals[i],
                     "status": r.status, "stage": r.stage.value, "correct": r.correct,
                     "failure": r.failure.message[:200] if r.failure else None, "speedup": r.speedup,
                     "candidate_cv": r.candidate_timing.cv if r.candidate_timing else None,
                     "gpu": r.environment.gpu if r.environment else None})
    report = {"preset": args.preset, "ranker": str(args.ranker) if args.ranker else None, "gpus": gpu_count(),
              "n_completions": len(items), "harness_evaluations": rewards.evaluations,
              "first_call_s": round(first_s, 1), "cached_async_call_s": round(again_s, 3), "rows": rows,
              "breakdowns": rewards.log[: len(items)]}
    args.out.write_text(json.dumps(report, indent=1, default=str))
    for row in rows:
        print(f"{row['task_id']:<24} {row['completion']:<40} total={row['total']!s:<22} {row['stage']:<8} "
              f"speedup={row['speedup']}")
    print(f"{len(items)} completions, {rewards.evaluations} harness evaluations, first call {first_s:.1f} s, "
          f"async call over the memo {again_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
