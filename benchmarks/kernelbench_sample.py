"""KernelBench from a checkout (issue 22, item 8): load every problem of levels 1 to 3, then run a correct
candidate of this project's through a sample of the largest level-1 problems (the elementwise ones: 4096 x 393216
fp32, 6.4 GB per input) and say what the harness made of each.

    python benchmarks/kernelbench_sample.py --kernelbench PATH/KernelBench --out DIR
                                            [--problems 19_ReLU,21_Sigmoid,...|all] [--budget-ms 1000]

``PATH/KernelBench`` is the folder holding ``level1``, ``level2``, ``level3`` (a checkout of
ScalingIntelligence/KernelBench; nothing of it is copied here). The candidates are fast-path CUDA
(``kernel_forward``), one grid-stride elementwise kernel each, written here from the problem's formula; a problem
whose ``forward`` no longer reads as the formula assumed is skipped and said so. Results go to a resumable store
(``DIR/kernelbench.jsonl``); ``DIR/summary.json`` holds the loaded counts per level and each sampled problem's
verdict, stage, speedup and failure. With a GPU every sampled candidate must come out correct and none unscored: an
unscored large problem is the harness's fault (KernelBench's ``19_ReLU`` once broke the output transport).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

# level-1 stem -> (text the problem's forward must hold, the CUDA expression of the output element from v = x[i])
ELEMENTWISE: dict[str, tuple[str, str]] = {
    "19_ReLU": ("torch.relu(x)", "v > 0.f ? v : 0.f"),
    "20_LeakyReLU": ("leaky_relu(x, negative_slope=self.negative_slope)", "v > 0.f ? v : 0.01f * v"),
    "21_Sigmoid": ("torch.sigmoid(x)", "1.f / (1.f + expf(-v))"),
    "22_Tanh": ("torch.tanh(x)", "tanhf(v)"),
    "25_Swish": ("x * torch.sigmoid(x)", "v / (1.f + expf(-v))"),
    "26_GELU_": ("functional.gelu(x)", "0.5f * v * (1.f + erff(v * 0.70710678118654752f))"),
    "27_SELU_": ("torch.selu(x)", "1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * expm1f(v))"),
    "28_HardSigmoid": ("functional.hardsigmoid(x)", "fminf(fmaxf(v / 6.f + 0.5f, 0.f), 1.f)"),
    "29_Softplus": ("functional.softplus(x)", "v > 20.f ? v : log1pf(expf(v))"),
    "30_Softsign": ("x / (1 + torch.abs(x))", "v / (1.f + fabsf(v))"),
    "31_ELU": ("F.elu(x, alpha=self.alpha)", "v > 0.f ? v : expm1f(v)"),
    "32_HardTanh": ("F.hardtanh(x, min_val=-1., max_val=1.)", "fminf(fmaxf(v, -1.f), 1.f)"),
    "88_MinGPTNewGelu": ("torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))",
                         "0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))"),
}
DEFAULT_SAMPLE = ("19_ReLU", "21_Sigmoid", "22_Tanh", "26_GELU_", "31_ELU", "88_MinGPTNewGelu")
"""31_ELU has an init input (alpha = 1.0); 88_MinGPTNewGelu is 8192 x 8192, the rest 4096 x 393216."""

TEMPLATE = """__global__ void elementwise_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        float v = x[i];
        y[i] = {expr};
    }}
}}

extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1 || in[0].dtype != DT_FLOAT32 || out[0].numel != in[0].numel) return 1;
    long long n = in[0].numel;
    long long blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    if (blocks < 1) blocks = 1;
    elementwise_kernel<<<(unsigned)blocks, 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""


def candidate(stem: str) -> str:
    """The fast-path answer for a level-1 elementwise problem, in the paper's output tag."""
    return f"<OUTPUT_CUDA>\n{TEMPLATE.format(expr=ELEMENTWISE[stem][1])}</OUTPUT_CUDA>\n"


def sample(tasks: list, stems: list[str]) -> tuple[list, list[str]]:
    """(task, stem) for each stem whose level-1 problem reads as assumed, and what was skipped (and why)."""
    by_id = {t.id: t for t in tasks}
    chosen, skipped = [], []
    for stem in stems:
        t = by_id.get(f"level1_{stem}")
        if t is None:
            skipped.append(f"{stem}: no level1/{stem}.py")
        elif ELEMENTWISE[stem][0] not in t.source:
            skipped.append(f"{stem}: its forward no longer holds {ELEMENTWISE[stem][0]!r}")
        else:
            chosen.append((t, stem))
    return chosen, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="a checkout's KernelBench folder (level1..3)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--problems", default=",".join(DEFAULT_SAMPLE),
                    help=f"level-1 stems, comma-separated, or 'all' (the {len(ELEMENTWISE)} elementwise ones); "
                         f"default {','.join(DEFAULT_SAMPLE)}")
    ap.add_argument("--budget-ms", type=float, default=1000.0, help="timing budget per candidate (default 1000)")
    ap.add_argument("--executor", default="local", help="local (default) or compile-only")
    args = ap.parse_args(argv)
    from cudaperf.harness.environment import gpu_count
    from cudaperf.harness.executor import Job
    from cudaperf.harness.executors import make_executor
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore
    from cudaperf.tasks.pytorch import load_pytorch_tasks
    from cudaperf.tasks.schema import TaskError

    stems = list(ELEMENTWISE) if args.problems == "all" else [s.strip() for s in args.problems.split(",") if s.strip()]
    unknown = [s for s in stems if s not in ELEMENTWISE]
    if unknown:
        ap.error(f"--problems: no candidate for {unknown} (known: {', '.join(ELEMENTWISE)})")
    levels = {}
    tasks = []
    for level in ("level1", "level2", "level3"):
        d = args.kernelbench / level
        if not d.is_dir():
            ap.error(f"{d}: not a folder (pass the checkout's KernelBench folder, which holds level1 to level3)")
        try:
            ts = load_pytorch_tasks(d)
        except TaskError as exc:
            print(f"kernelbench_sample: {exc}", file=sys.stderr)
            return 2
        levels[level] = len(ts)
        tasks += [dataclasses.replace(t, id=f"{level}_{t.id}") for t in ts]
    print(f"loaded {sum(levels.values())} problems: " + ", ".join(f"{k} {v}" for k, v in levels.items()))
    chosen, skipped = sample(tasks, stems)
    for why in skipped:
        print(f"skipped: {why}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    store = ResultStore(args.out / "kernelbench.jsonl")
    jobs = [Job(t.id, f"fast_elementwise/{stem}", candidate(stem)) for t, stem in chosen]
    settings = HarnessSettings(budget_ms=args.budget_ms)
    t0 = time.monotonic()
    with make_executor(args.executor) as ex:
        batch = ex.evaluate([t for t, _ in chosen], jobs, store, settings=settings)
    wall = time.monotonic() - t0
    latest = store.latest()
    rows = []
    for (t, stem), job in zip(chosen, jobs):
        r = latest.get((job.task_id, job.candidate_id))
        if r is None:
            rows.append({"task": t.id, "verdict": "no result"})
            continue
        rows.append({"task": t.id, "status": r.status, "correct": r.correct, "stage": r.stage.value,
                     "failure": r.failure.kind.value if r.failure else None,
                     "reason": r.failure.message[:300] if r.failure else None, "speedup": r.speedup,
                     "attributed_to": r.failure.attributed_to if r.failure else None})
    gpu = gpu_count() > 0 and args.executor == "local"
    summary = {"kernelbench": str(args.kernelbench), "levels": levels, "sampled": [s for _, s in chosen],
               "skipped": skipped, "gpu": gpu, "budget_ms": args.budget_ms, "wall_s": round(wall, 1),
               "n_skipped_in_store": batch.n_skipped, "results": rows,
               "verdicts": dict(Counter("correct" if r.get("correct") else
                                        (f"unscored: {r.get('failure')}" if r.get("status") == "unscored" else
                                         str(r.get("failure"))) for r in rows))}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        print(f"{r['task']:<28} {('correct' if r.get('correct') else r.get('failure') or r.get('verdict')):<22} "
              f"{r.get('stage', '-'):<9} {sp:>8}  {r.get('reason') or ''}")
    print(f"verdicts: {summary['verdicts']}; {wall:.0f} s; results in {args.out}")
    if not gpu:
        print("no GPU (or compile-only): the candidates were checked and built, not run (unscored)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
