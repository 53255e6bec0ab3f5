"""KernelBench-style candidates, side by side in one run (issue 25): through this project's PyTorch batch with their
extensions built in the GPU run (as before, arm ``in_run``), built ahead on the CPU pool
(``HarnessSettings.prebuild_modelnew``, arm ``prebuild``), and built ahead with the next runner started while the
current one runs (``HarnessSettings.prestart_runners``, arm ``prebuild_prestart``; three runners ahead,
``prebuild_prestart3``), built ahead without the precompiled ``torch/extension.h`` (``HarnessSettings.modelnew_pch``
off, arm ``prebuild_nopch``; the other arms read it, precompiled once before any arm), built ahead with runners
forked from the zygote that imported torch once (``HarnessSettings.pytorch_zygote``, arms ``prebuild_zygote`` and
``prebuild_prestart_zygote``; ``prebuild_prestart_zygote_quick`` also with ``HarnessSettings.pytorch_quick_exit``);
and through KernelBench's
published procedure, re-implemented here from its description (arm ``kernelbench_procedure``: parallel builds
first, then a fresh unsandboxed process per candidate, 5 correctness trials, 100 timings each of the reference and
the candidate).

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


def sources(n: int, salt: str) -> list[str]:
    base = (ROOT / "tests" / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    return [base.replace('name="relu_ext"', f'name="relu_ext_{salt}_{k}"') + f"\n# sample {salt}-{k}\n"
            for k in range(n)]


def candidates(n: int, salt: str) -> list[str]:
    return [f"```python\n{code}```\n" for code in sources(n, salt)]


ARMS = {"in_run": {"prebuild_modelnew": False, "prestart_runners": False},
        "prebuild": {"prebuild_modelnew": True, "prestart_runners": False},
        "prebuild_nopch": {"prebuild_modelnew": True, "prestart_runners": False, "modelnew_pch": False},
        "prebuild_prestart": {"prebuild_modelnew": True, "prestart_runners": True},
        "prebuild_prestart3": {"prebuild_modelnew": True, "prestart_runners": True, "prestart_ahead": 3},
        "prebuild_zygote": {"prebuild_modelnew": True, "prestart_runners": False, "pytorch_zygote": True},
        "prebuild_prestart_zygote": {"prebuild_modelnew": True, "prestart_runners": True, "pytorch_zygote": True},
        "prebuild_prestart_zygote_quick": {"prebuild_modelnew": True, "prestart_runners": True, "pytorch_zygote": True,
                                           "pytorch_quick_exit": True},
        "kernelbench_procedure": None}

KB_BUILD = """import sys
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "kb_candidate"})
"""

KB_EVAL = """import json, statistics, sys, torch
ref_path, new_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
ref, new = {"__name__": "kb_ref"}, {"__name__": "kb_new"}
exec(compile(open(ref_path).read(), ref_path, "exec"), ref)
exec(compile(open(new_path).read(), new_path, "exec"), new)  # load_inline: the build cache from the prebuild
torch.manual_seed(seed)
init = ref["get_init_inputs"]()
torch.manual_seed(seed)
model = ref["Model"](*init).cuda()
torch.manual_seed(seed)
cand = new["ModelNew"](*init).cuda()
correct = True
for trial in range(5):
    torch.manual_seed(seed + 1 + trial)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref["get_inputs"]()]
    with torch.no_grad():
        a, b = model(*inputs), cand(*inputs)
    torch.cuda.synchronize()
    if a.shape != b.shape or not torch.allclose(a, b, atol=1e-2, rtol=1e-2):
        correct = False
        break
flush = torch.empty(int(2 * torch.cuda.get_device_properties(0).L2_cache_size), dtype=torch.uint8, device="cuda")

def timed(m):
    out = []
    with torch.no_grad():
        for _ in range(100):
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            m(*inputs)
            e.record()
            torch.cuda.synchronize()
            out.append(s.elapsed_time(e))
    return statistics.median(out)

row = {"correct": correct}
if correct:
    row["ref_ms"], row["new_ms"] = timed(model), timed(cand)
    row["speedup"] = row["ref_ms"] / row["new_ms"]
print(json.dumps(row))
"""


def run_kernelbench_procedure(n: int, out: Path, tag: str) -> dict:
    """KernelBench's published procedure, as ``shared/design/HARNESS.md`` measured it, in code of this project's:
    the candidates' extensions built first in parallel processes (one per candidate, all cores), then each
    candidate evaluated in a fresh process of its own (5 correctness trials against the reference, then 100
    CUDA-event timings each of the reference and the candidate, with an L2 flush before each), one after another.
    No sandbox and no checks beyond correctness: this is the procedure being compared, not this project's."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    d = out / f"kb-{tag}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "ref.py").write_text(task.source)
    (d / "build.py").write_text(KB_BUILD)
    (d / "eval.py").write_text(KB_EVAL)
    paths = []
    for k, code in enumerate(sources(n, uuid.uuid4().hex[:8])):
        p = d / f"cand{k}.py"
        p.write_text(code)
        paths.append(p)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(d / "ext")}
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as pool:
        builds = list(pool.map(lambda p: subprocess.run([sys.executable, str(d / "build.py"), str(p)], env=env,
                                                        capture_output=True, text=True), paths))
    build_s = time.monotonic() - t0
    rows = []
    for p in paths:
        r = subprocess.run([sys.executable, str(d / "eval.py"), str(d / "ref.py"), str(p), "42"], env=env,
                           capture_output=True, text=True)
        try:
            rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError):
            rows.append({"correct": False, "error": (r.stderr or r.stdout)[-300:]})
    wall = time.monotonic() - t0
    verdicts: dict[str, int] = {}
    for r in rows:
        key = "correct" if r.get("correct") else ("error" if "error" in r else "wrong")
        verdicts[key] = verdicts.get(key, 0) + 1
    return {"arm": "kernelbench_procedure", "tag": tag, "candidates": len(rows), "wall_s": round(wall, 1),
            "per_gpu_hour": round(3600 * len(rows) / wall, 1), "verdicts": verdicts,
            "prebuild_wall_s": round(build_s, 1), "builds_failed": sum(b.returncode != 0 for b in builds),
            "speedups": [round(r["speedup"], 3) for r in rows if "speedup" in r]}


def run_arm(arm: str, n: int, out: Path, tag: str) -> dict:
    if arm == "kernelbench_procedure":
        return run_kernelbench_procedure(n, out, tag)
    from cudaperf.harness.batch_pytorch import run_pytorch_batch
    from cudaperf.harness.executor import Job
    from cudaperf.harness.settings import HarnessSettings
    from cudaperf.harness.store import ResultStore
    from cudaperf.tasks.pytorch import builtin_pytorch_dir, load_pytorch_tasks

    os.environ["CUDAPERF_CACHE"] = str(out / f"cache-{tag}")
    task = next(t for t in load_pytorch_tasks(builtin_pytorch_dir()) if t.id == "relu")
    settings = HarnessSettings(budget_ms=500, max_reps=30, **ARMS[arm])
    prestart = settings.prestart_runners
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
    os.environ["CUDAPERF_CACHE"] = str(a.out / "cache-pch")
    from cudaperf.harness.torch_pch import torch_pch

    pch = torch_pch()  # once, before the arms, which all find it (a machine precompiles it once)
    print(json.dumps({"pch": pch.message, "pch_s": round(pch.seconds, 1)}), flush=True)
    rows = []
    for r in range(a.rounds):
        for arm in arms:
            row = run_arm(arm, a.candidates, a.out, f"{arm}-{r}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    rate = {arm: sum(x["candidates"] for x in rows if x["arm"] == arm) * 3600
            / max(1e-9, sum(x["wall_s"] for x in rows if x["arm"] == arm)) for arm in arms}
    base = rate.get("in_run")
    summary = {"pch": pch.message, "pch_s": round(pch.seconds, 1), "rows": rows, "per_gpu_hour": {k: round(v, 1) for k, v in rate.items()},
               "ratio_over_in_run": {k: round(v / base, 2) for k, v in rate.items()} if base else None}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
