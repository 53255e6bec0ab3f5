"""How repeatable the sequential C baseline is on one machine.

    python benchmarks/baseline_repeatability.py

Prepares every bundled c_function task twice (seeds 1 and 2: different hidden inputs, same sizes) and reports
the median and max |log ratio| of the two baseline medians, for the default settings and for twice the
repetitions. CPU only: the baseline never touches the GPU.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace

from cudaperf.harness.run_c_function import prepare_c_function
from cudaperf.harness.settings import HarnessSettings
from cudaperf.tasks import load_builtin_tasks
from cudaperf.tasks.schema import CFunctionTask


def main() -> None:
    base = HarnessSettings()
    variants = {"default": base, "min_reps=10, budget 4 s": replace(base, min_reps=10, budget_ms=4000)}
    tasks = [t for t in load_builtin_tasks() if isinstance(t, CFunctionTask)]
    print("| settings | median abs log ratio | max | wall s |\n|---|---|---|---|")
    for name, settings in variants.items():
        t0 = time.time()
        logs = []
        for t in tasks:
            a = prepare_c_function(t, settings, seed=1).baseline_timing
            b = prepare_c_function(t, settings, seed=2).baseline_timing
            logs.append(abs(math.log(a.median_ms / b.median_ms)))
        print(f"| {name} | {statistics.median(logs):.4f} | {max(logs):.4f} | {time.time() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
