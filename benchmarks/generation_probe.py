"""How fast a local model answers cudaperf eval's prompts: one batch per size, the prompts of the first tasks of
a task set (the paper's prompt with five few-shot examples), wall time, answers a second, peak GPU memory.

    python benchmarks/generation_probe.py --model DIR [--adapter DIR] [--tasks test:c] [--sizes 16,64,128]
        [--max-new-tokens 1024] [--context-tokens N] [--out FILE.jsonl]

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
    ap.add_argument("--context-tokens", type=int, help="prompt + answer (eval's --context-tokens); default the model's")
    ap.add_argument("--out")
    ap.add_argument("--profile", help="also write torch.profiler's table (CPU and CUDA time by op) of one short "
                    "generate (the first size, --profile-tokens new tokens) to this file")
    ap.add_argument("--profile-tokens", type=int, default=32)
    ap.add_argument("--static-cache", action="store_true", help="then the first size again with HFPolicy's "
                    "static_cache (compiled on a GPU), twice: the first call includes the compilation")
    a = ap.parse_args()
    import torch

    sizes = [int(x) for x in a.sizes.split(",")]
    t0 = time.monotonic()
    pol = HFPolicy(a.model, adapter=a.adapter, batch_size=max(sizes), context_tokens=a.context_tokens)
    load_s = time.monotonic() - t0
    ts = load_taskset(a.tasks)
    ctx = EnvContext(evaluator=None, settings=EnvSettings(max_turns=1), prompt=PromptSettings(), fewshot=FewShotPool(),
                     summarizer=TemplateSummarizer(), count_tokens=pol.count_tokens, context_tokens=pol.context_tokens,
                     max_new_tokens=a.max_new_tokens)
    tasks = list(ts.tasks)
    sink = open(a.out, "w") if a.out else None  # one line per batch as it ends: a probe cut short keeps what it has
    # each size sampled as eval samples (temperature 0.7, top-p 0.9), then the first size greedily: the gap between
    # the two at one size is what the per-row seeded sampler costs
    for size, temperature in [(s, 0.7) for s in sizes] + [(sizes[0], 0.0)]:
        envs = [RefineEnv(ctx, tasks[i % len(tasks)], i // len(tasks)) for i in range(size)]
        reqs = [e.reset().request for e in envs]
        prompt_tokens = [pol.count_tokens(r.messages) for r in reqs]
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        t = time.monotonic()
        gens = pol.generate(reqs, SamplingParams(temperature=temperature, top_p=0.9, max_new_tokens=a.max_new_tokens))
        wall = time.monotonic() - t
        done = sum(g.completion_tokens or 0 for g in gens)
        row = {"batch": size, "temperature": temperature, "wall_s": round(wall, 2),
               "new_tokens_per_s": round(done / wall),
               "longest_answer_tokens": max(g.completion_tokens or 0 for g in gens),
               "answers_per_s": round(size / wall, 3),
               "prompt_tokens_mean": round(sum(prompt_tokens) / size), "completion_tokens": sum(
                   g.completion_tokens or 0 for g in gens), "errors": sum(g.error is not None for g in gens),
               "split_batches": len({(g.extra or {}).get("batch") for g in gens}),
               "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available()
               else None, "model_load_s": round(load_s, 1)}
        print(json.dumps(row), flush=True)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
    if sink:
        sink.close()
    if a.static_cache:  # (the first policy stays: the prompts count tokens with it)
        static = HFPolicy(a.model, adapter=a.adapter, batch_size=sizes[0], context_tokens=a.context_tokens,
                          static_cache=True)
        reqs = [RefineEnv(ctx, tasks[i % len(tasks)], i // len(tasks)).reset().request for i in range(sizes[0])]
        for attempt in ("first (compiles)", "second"):
            t = time.monotonic()
            gens = static.generate(reqs, SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=a.max_new_tokens))
            wall = time.monotonic() - t
            done = sum(g.completion_tokens or 0 for g in gens)
            row = {"batch": sizes[0], "temperature": 0.7, "static_cache": attempt, "wall_s": round(wall, 2),
                   "new_tokens_per_s": round(done / wall), "answers_per_s": round(sizes[0] / wall, 3),
                   "errors": sum(g.error is not None for g in gens),
                   "first_error": next((g.error for g in gens if g.error), None)}
            print(json.dumps(row), flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
        pol = static
    if a.profile:
        _profile(pol, ctx, tasks, sizes[0], a.profile_tokens, a.profile)


def _profile(pol: HFPolicy, ctx: EnvContext, tasks: list, size: int, new_tokens: int, path: str) -> None:
    """Where a decoding step's time goes: a generate of ``size`` prompts x ``new_tokens`` under torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    reqs = [RefineEnv(ctx, tasks[i % len(tasks)], i // len(tasks)).reset().request for i in range(size)]
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=new_tokens)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        t = time.monotonic()
        pol.generate(reqs, params)
        wall = time.monotonic() - t
    sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    cfg = getattr(pol.model, "config", None)
    with open(path, "w") as f:
        f.write(f"batch {size} x {new_tokens} new tokens: {wall:.2f} s; attention "
                f"{getattr(cfg, '_attn_implementation', '?')}; dtype {next(pol.model.parameters()).dtype}\n\n")
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30) + "\n\n")
        f.write(prof.key_averages().table(sort_by=sort, row_limit=30) + "\n")


if __name__ == "__main__":
    main()
