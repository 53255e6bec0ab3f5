"""Cost and coverage of the compiler-tier features (``cudaperf.features.compiler``) on real CUDA sources.

    python benchmarks/features_compiler.py --out results.json [--jobs 2] [--babeltower PATH] [--sample 20]

Sources: every ``.cu`` file under ``cudaperf/data`` and ``tests/fixtures``, plus BabelTower's reference kernels
(``task.reference_kernel``) when the data file is found. Each source is processed once into an EMPTY cache (a
fresh ``$CUDAPERF_CACHE``), ``--jobs`` at a time, and its wall time recorded; an exception is a crash. Then a
sequential breakdown on ``--sample`` sources times the pipeline's parts: sandbox start, ``nvcc -cubin`` (what the
features use), ``nvcc -c`` (for comparison), and cuobjdump + c++filt. Prints markdown tables and writes JSON.
No GPU needed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cudaperf.features import compiler as cf  # noqa: E402
from cudaperf.harness.sandbox import Workdir, run_sandboxed, share_file  # noqa: E402
from cudaperf.tasks.babeltower import find_babeltower, load_babeltower  # noqa: E402


def collect_sources(babeltower: str | None) -> list[tuple[str, str]]:
    """(label, source) for the repo's .cu files and BabelTower's reference kernels."""
    out = []
    for root in (REPO / "cudaperf" / "data", REPO / "tests" / "fixtures"):
        for p in sorted(root.rglob("*.cu")):
            out.append((str(p.relative_to(REPO)), p.read_text()))
    path = find_babeltower(babeltower)
    if path is not None:
        out += [(f"babeltower/{t.id}", t.reference_kernel) for t in load_babeltower(path)]
    return out


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else math.nan


def run_one(label: str, source: str) -> dict:
    t0 = time.monotonic()
    try:
        f = cf.compiler_features(source)
    except Exception:  # noqa: BLE001 - a crash is what this benchmark counts
        return {"label": label, "seconds": time.monotonic() - t0, "crash": traceback.format_exc(limit=3)}
    return {"label": label, "seconds": time.monotonic() - t0, "compile_ok": f.compile_ok, "values": f.values,
            "reasons": f.reasons}


def coverage(results: list[dict], jobs: int) -> dict:
    times = [r["seconds"] for r in results]
    compiled = [r for r in results if r.get("compile_ok")]
    nan_fraction = {name: sum(math.isnan(r["values"][name]) for r in compiled) / max(1, len(compiled))
                    for name in cf.FEATURES}
    return {
        "sources": len(results), "jobs": jobs, "crashes": sum("crash" in r for r in results),
        "compile_failures": sum(r.get("compile_ok") is False for r in results),
        "median_s": statistics.median(times), "p95_s": _percentile(times, 0.95), "max_s": max(times),
        "total_s": sum(times), "nan_fraction": nan_fraction,
        "failed": [r["label"] for r in results if r.get("compile_ok") is False],
        "crashed": [(r["label"], r["crash"]) for r in results if "crash" in r],
    }


def _timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def breakdown(sources: list[tuple[str, str]], arch: str = "sm_90") -> dict:
    """Median seconds of each pipeline part, sequentially (one source at a time)."""
    parts: dict[str, list[float]] = {"sandbox_start": [], "nvcc_cubin": [], "nvcc_c": [], "cuobjdump_cxxfilt": []}
    for _, src in sources:
        with Workdir(prefix="cudaperf-bench-") as w:
            (w / "kernel.cu").write_text(src)
            share_file(w / "kernel.cu")
            parts["sandbox_start"].append(_timed(lambda: run_sandboxed(["true"], w)))
            parts["nvcc_c"].append(_timed(lambda: cf._nvcc_in_sandbox(
                [f"-arch={arch}", "-std=c++17", "-c", "-Xptxas", "-v", "kernel.cu", "-o", "kernel.o"], w)))
            result: dict = {}
            parts["nvcc_cubin"].append(_timed(lambda: result.update(r=cf._nvcc_in_sandbox(
                [f"-arch={arch}", *cf.NVCC_FLAGS, "kernel.cu", "-o", "kernel.cubin"], w))))
            if not result["r"][0]:
                continue
            names = list(cf.parse_ptxas(result["r"][1]))
            parts["cuobjdump_cxxfilt"].append(_timed(lambda: cf._disassemble(w, names)))
    return {k: {"median_s": statistics.median(v) if v else math.nan, "n": len(v)} for k, v in parts.items()}


def markdown(cov: dict, parts: dict) -> str:
    lines = ["| sources | jobs | crashes | compile failures | median s | p95 s | max s |",
             "|---:|---:|---:|---:|---:|---:|---:|",
             f"| {cov['sources']} | {cov['jobs']} | {cov['crashes']} | {cov['compile_failures']} | "
             f"{cov['median_s']:.3f} | {cov['p95_s']:.3f} | {cov['max_s']:.3f} |", "",
             "| feature | NaN fraction (compiled sources) |", "|---|---:|"]
    lines += [f"| `{k}` | {v:.3f} |" for k, v in cov["nan_fraction"].items()]
    lines += ["", "| part (sequential, median) | seconds | n |", "|---|---:|---:|"]
    lines += [f"| {k} | {v['median_s']:.3f} | {v['n']} |" for k, v in parts.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--jobs", type=int, default=2, help="sources processed at a time (default 2)")
    ap.add_argument("--babeltower", default=None, help="BabelTower jsonl (default: find_babeltower())")
    ap.add_argument("--sample", type=int, default=20, help="sources in the sequential breakdown")
    ap.add_argument("--limit", type=int, default=0, help="only the first N sources (0: all)")
    args = ap.parse_args(argv)
    sources = collect_sources(args.babeltower)
    if args.limit:
        sources = sources[: args.limit]
    with tempfile.TemporaryDirectory(prefix="cudaperf-features-cache-") as cache:
        os.environ["CUDAPERF_CACHE"] = cache  # empty: every source is compiled
        cf.sass_tools_version()  # probe the tools once, outside the timings
        cf.nvcc_version()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda s: run_one(*s), sources))
        step = max(1, len(sources) // max(1, args.sample))
        parts = breakdown(sources[::step][: args.sample])
    cov = coverage(results, args.jobs)
    print(markdown(cov, parts))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"coverage": cov, "breakdown": parts, "sass_tools": cf.sass_tools_version(),
                                    "nvcc": cf.nvcc_version(), "results": results}, indent=1, default=str))
    return 1 if cov["crashes"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
