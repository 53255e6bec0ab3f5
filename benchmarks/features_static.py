"""Speed and robustness of the paper-tier static features over varied CUDA sources.

    python benchmarks/features_static.py --out results/features_static.json [--babeltower PATH] [--repeat 3]

Sources: every ``.cu`` file of the repository (``cudaperf/data``, ``tests/fixtures``) and, when the data file is
found, BabelTower's 233 reference kernels twice: the kernel alone and the kernel followed by its host wrapper (so
launches and copies are present). Reports the median and p95 milliseconds per source (best of ``--repeat`` runs
of each source), the number of crashes (an exception escaping the extractor, or an "internal error" reason;
must be 0), and the NaN fraction of each feature. Prints a markdown table and writes JSON to ``--out``.
Goal (issue): median <= 5 ms per candidate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from cudaperf.features.paper import PAPER_FEATURES, extract_paper_features
from cudaperf.tasks.babeltower import find_babeltower, load_babeltower

REPO = Path(__file__).resolve().parent.parent


def collect_sources(babeltower: str | None) -> list[tuple[str, str]]:
    """(label, source) pairs: the repo's .cu files, then BabelTower kernels (alone and with their wrapper)."""
    paths = sorted([*REPO.glob("cudaperf/data/**/*.cu"), *REPO.glob("tests/fixtures/**/*.cu")])
    sources = [(str(p.relative_to(REPO)), p.read_text()) for p in paths]
    bt = find_babeltower(babeltower)
    if bt is not None:
        for task in load_babeltower(bt):
            sources.append((f"babeltower/{task.id}/kernel", task.reference_kernel))
            sources.append((f"babeltower/{task.id}/kernel+wrapper", task.reference_kernel + "\n" + task.wrapper))
    return sources


def measure(source: str, repeat: int) -> tuple[float, object]:
    """Best-of-``repeat`` milliseconds for one extraction, and the last result (or the exception raised)."""
    best, result = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            result = extract_paper_features(source)
        except Exception as e:  # noqa: BLE001 -- a crash is what this benchmark counts
            result = e
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best, result


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def run(sources: list[tuple[str, str]], repeat: int) -> dict:
    """Extract every source; return the summary dict."""
    times, crashes, nan_counts, parse_error_sources = [], [], {n: 0 for n in PAPER_FEATURES}, 0
    for label, src in sources:
        ms, fv = measure(src, repeat)
        times.append(ms)
        if isinstance(fv, Exception) or any("internal error" in r for r in fv.reasons.values()):
            crashes.append({"source": label, "error": repr(fv) if isinstance(fv, Exception) else fv.reasons})
            continue
        parse_error_sources += fv.parse_errors > 0
        for n in PAPER_FEATURES:
            nan_counts[n] += math.isnan(fv.values[n])
    n = len(sources)
    return {
        "n_sources": n, "repeat": repeat,
        "median_ms": statistics.median(times), "p95_ms": percentile(times, 0.95), "max_ms": max(times),
        "crashes": len(crashes), "crash_details": crashes,
        "sources_with_parse_errors": parse_error_sources,
        "nan_fraction": {k: v / n for k, v in nan_counts.items()},
    }


def markdown(summary: dict) -> str:
    """The summary as a markdown table."""
    rows = [
        ("sources", summary["n_sources"]),
        ("median ms / source", f"{summary['median_ms']:.3f}"),
        ("p95 ms / source", f"{summary['p95_ms']:.3f}"),
        ("max ms / source", f"{summary['max_ms']:.3f}"),
        ("crashes", summary["crashes"]),
        ("sources with parse errors", summary["sources_with_parse_errors"]),
    ]
    rows += [(f"NaN fraction: {k}", f"{v:.3f}") for k, v in summary["nan_fraction"].items()]
    return "\n".join(["| metric | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--babeltower", default=None, help="BabelTower jsonl (default: the usual search)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per source (best is kept)")
    args = ap.parse_args()
    sources = collect_sources(args.babeltower)
    extract_paper_features("__global__ void warm(float* a) { a[threadIdx.x] = 0; }")  # parser start-up
    summary = run(sources, max(1, args.repeat))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(markdown(summary))


if __name__ == "__main__":
    main()
