"""How fast a local model answers cudaperf eval's prompts: one batch per size, the prompts of the first tasks of
a task set (the paper's prompt with five few-shot examples), wall time, answers a second, peak GPU memory.

    python benchmarks/generation_probe.py --model DIR [--adapter DIR] [--tasks test:c] [--sizes 16,64,128]
        [--max-new-tokens 1024] [--out FILE.jsonl]

Use it before a long evaluation to choose --batch-size (each chunk must end inside --max-minutes).
"""

from __future__ import annotations

import argparse
import json
import time

from cudaperf.env.prompt import FewShotPool, PromptSettings
from cudaperf.env.refine import EnvContext, EnvSettings, RefineEnv, TemplateSummarizer
from cudaperf.eval.tasksets import load_taskset
from cudaperf.policy.base import SamplingParams
from cudaperf.policy.hf import HFPolicy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--tasks", default="test:c")
    ap.add_argument("--sizes", default="16,64,128")
    ap.add_argument("--max-new-tokens", type=int, default=1024)
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch

    sizes = [int(x) for x in a.sizes.split(",")]
    t0 = time.monotonic()
    pol = HFPolicy(a.model, adapter=a.adapter, batch_size=max(sizes))
    load_s = time.monotonic() - t0
    ts = load_taskset(a.tasks)
    ctx = EnvContext(evaluator=None, settings=EnvSettings(max_turns=1), prompt=PromptSettings(), fewshot=FewShotPool(),
                     summarizer=TemplateSummarizer(), count_tokens=pol.count_tokens, context_tokens=pol.context_tokens,
                     max_new_tokens=a.max_new_tokens)
    tasks = list(ts.tasks)
    rows = []
    for size in sizes:
        envs = [RefineEnv(ctx, tasks[i % len(tasks)], i // len(tasks)) for i in range(size)]
        reqs = [e.reset().request for e in envs]
        prompt_tokens = [pol.count_tokens(r.messages) for r in reqs]
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t = time.monotonic()
        gens = pol.generate(reqs, SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=a.max_new_tokens))
        wall = time.monotonic() - t
        row = {"batch": size, "wall_s": round(wall, 2), "answers_per_s": round(size / wall, 3),
               "prompt_tokens_mean": round(sum(prompt_tokens) / size), "completion_tokens": sum(
                   g.completion_tokens or 0 for g in gens), "errors": sum(g.error is not None for g in gens),
               "split_batches": len({(g.extra or {}).get("batch") for g in gens}),
               "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available()
               else None, "model_load_s": round(load_s, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
