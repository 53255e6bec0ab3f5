"""The C driver's untimed work in a timing window: per call, what a window spends outside its timed calls (the
set-up of each call's inputs, the warm-up), on the sequential reference's build of the driver (no GPU needed).

    python benchmarks/driver_setup.py [--tasks dot_norm_000,conv1d_007,elementwise_map_007] [--repeats 4]

For each task: the reference driver's ``time`` mode run ``--repeats`` times as the harness runs a window (5 to 30
calls, 500 ms budget, cv 2 %, one warm-up call and 20 ms, perturbed inputs); medians of the process's wall, the
window's span (from its start to its last timed call, as the driver reports it), the timed calls' sum, and
(span - timed) / calls. To compare two versions of the driver side by side, run it with each checkout on
``PYTHONPATH``, alternating (docs/BENCHMARKS.md, session 24).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="dot_norm_000,conv1d_007,elementwise_map_007")
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()

    from cudaperf.dataset.build import dataset_tasks
    from cudaperf.dataset.store import Dataset, default_dataset_dir
    from cudaperf.harness.run_c_function import prepare_c_function
    from cudaperf.harness.settings import HarnessSettings

    tasks = dataset_tasks(Dataset.load(default_dataset_dir()))
    for tid in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        if tid not in tasks:
            raise SystemExit(f"no task {tid!r} in the built-in dataset")
        p = prepare_c_function(tasks[tid], HarnessSettings(), seed=1, defer_baseline=True)
        inputs = p.input_file("timing")
        rows = []
        with tempfile.TemporaryDirectory() as d:
            for _ in range(max(1, args.repeats)):
                t0 = time.monotonic()
                subprocess.run([str(p.reference_exe), "time", str(inputs), f"{d}/o.bin", f"{d}/s.txt", "5", "30",
                                "500", "0.02", "1", "20", "12345", "1"], check=True)
                wall = time.monotonic() - t0
                stats = open(f"{d}/s.txt").read()
                span = float(re.search(r"span_ns (\S+)", stats).group(1)) / 1e9
                times = [float(x) / 1e9 for x in re.findall(r"time_ns (\S+)", stats)]
                rows.append((wall, span, sum(times), len(times), (span - sum(times)) / len(times)))
        med = [statistics.median(r[i] for r in rows) for i in range(5)]
        print(f"{tid}: wall {med[0]:.3f} s, window span {med[1]:.3f} s, timed {med[2]:.3f} s over {med[3]:.0f} "
              f"calls, untimed {1e3 * med[4]:.1f} ms a call", flush=True)


if __name__ == "__main__":
    main()
