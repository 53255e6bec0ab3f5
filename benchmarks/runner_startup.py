"""Where a PyTorch runner's start-up goes (issue 25): a fresh Python that imports torch and makes a CUDA context,
run plainly, under the sandbox with all its protections, and under the sandbox with one protection switched off at
a time; and, for comparison, a child forked from a process that has already imported torch (what a zygote would
save), plainly and in the sandbox (``sandbox_forked``: the sandboxed process imports torch, then forks; the
child's figures); and the sandboxed run forked from the harness's zygote (``sandbox_zygote``,
:mod:`cudaperf.harness.zygote`: ``RUNNER_PRELOAD``, torch and torch._dynamo, imported once, outside the run, every protection in force; the zygote's own
start, its ``zygote_preload_s``, is not counted: it is paid once per harness process).

    python benchmarks/runner_startup.py --out DIR [--repeats 3] [--arms A,B,...] [--cpu]

Per arm and repeat: the wall time from launch to the end of the child (``wall_s``), and as the child measures them
from its own start, torch's import (``import_s``), the CUDA context (``cuda_s``: ``torch.cuda.init`` and a first
tensor on the GPU), a first kernel (``kernel_s``) and
the profiler's first session on one op (``profiler_s``, as the runner's probe). Arms alternate over the repeats. Written to
``DIR/summary.json``. Needs a CUDA build of PyTorch (run it on the GPU machine); ``--cpu`` times torch's import
and the profiler's first session on the CPU, where there is no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# After torch's import: the CUDA context, a first kernel, the profiler's first session (t1 .. t4).
MEASURE = r"""
torch.cuda.init()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t2 = time.perf_counter()
(x + 1).sum().item()
t3 = time.perf_counter()
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
prof.events()
t4 = time.perf_counter()
"""

# --cpu (a machine without a GPU): torch's import, and the profiler's first session on the CPU (what the runner's
# probe imports with it); no CUDA context or kernel.
CPU_MEASURE = """
t2 = t3 = time.perf_counter()
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU]) as prof:
    torch.zeros(1).add_(1)
prof.events()
t4 = time.perf_counter()
"""
if "--cpu" in sys.argv:
    MEASURE = CPU_MEASURE

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
""" + MEASURE + r"""
print(json.dumps({"import_s": t1 - t0, "cuda_s": t2 - t1, "kernel_s": t3 - t2, "profiler_s": t4 - t3}))
"""

FORK_CHILD = r"""
import json, os, sys, time
import torch
r, w = os.pipe()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    t1 = time.perf_counter()
""" + textwrap.indent(MEASURE, "    ") + r"""
    os.write(w, json.dumps({"import_s": 0.0, "cuda_s": t2 - t1, "kernel_s": t3 - t2, "profiler_s": t4 - t3,
                            "child_s": t4 - t0}).encode())
    os._exit(0)
os.close(w)
data = os.read(r, 65536)
os.waitpid(pid, 0)
print(data.decode())
"""

SANDBOX_ARMS = {"sandbox_zygote": "", "sandbox_forked": "", "sandbox": "", "sandbox_no_seccomp": "-seccomp", "sandbox_no_private_root": "-private_root",
                "sandbox_no_per_run_uid": "-per_run_uid", "sandbox_no_memory_cgroup": "-memory_cgroup"}


def plain() -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        return {"error": p.stderr[-800:], "wall_s": wall}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "wall_s": wall}


def sandboxed(arm: str) -> dict:
    os.environ["CUDAPERF_SANDBOX"] = SANDBOX_ARMS[arm]
    from cudaperf.harness.sandbox import SandboxLimits, make_workdir, run_sandboxed, scrubbed_env
    w = make_workdir("cudaperf-startup-")
    (w / "child.py").write_text(FORK_CHILD if arm == "sandbox_forked" else CHILD)
    zygote, extra = None, {}
    if arm == "sandbox_zygote":  # the run forked from a zygote that imported torch (its start not counted)
        from cudaperf.harness.run_pytorch import RUNNER_PRELOAD
        from cudaperf.harness.zygote import Zygote

        zygote = Zygote(RUNNER_PRELOAD)
        extra["zygote_preload_s"] = zygote.start().preload_s
    t = time.perf_counter()
    r = run_sandboxed([sys.executable, "child.py"], w, limits=SandboxLimits(wall_s=300), env=scrubbed_env(w),
                      zygote=zygote)
    wall = time.perf_counter() - t
    if zygote is not None:
        zygote.close()
    if not r.ok:
        return {"error": r.describe() + " " + r.stderr[-800:], "wall_s": wall, "level": r.level}
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "wall_s": wall, "level": r.level, **extra}


def forked() -> dict:
    """A parent that has imported torch (no CUDA) forks a child that makes the context: the parent's import is
    not counted (a zygote pays it once)."""
    import torch  # noqa: F401  (the zygote's import)
    r, wfd = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ns = {"torch": torch, "time": time}
        t1 = time.perf_counter()
        exec(MEASURE, ns)
        os.write(wfd, json.dumps({"import_s": 0.0, "cuda_s": ns["t2"] - t1, "kernel_s": ns["t3"] - ns["t2"],
                                  "profiler_s": ns["t4"] - ns["t3"]}).encode())
        os._exit(0)
    os.close(wfd)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t
    if status != 0 or not data:
        return {"error": f"child status {status}", "wall_s": wall}
    return {**json.loads(data), "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arms", default="plain,forked," + ",".join(SANDBOX_ARMS))
    ap.add_argument("--cpu", action="store_true", help="no GPU here: time torch's import alone (no CUDA context, "
                    "kernel or profiler)")
    args = ap.parse_args()
    cpu = ["--cpu"] if args.cpu else []
    args.out.mkdir(parents=True, exist_ok=True)
    arms = [a for a in args.arms.split(",") if a]
    rows: dict[str, list[dict]] = {a: [] for a in arms}
    for rep in range(args.repeats):
        for arm in arms:
            if arm == "plain":
                row = plain()
            elif arm == "forked":
                # in a process of its own, so that this one never imports torch before a sandboxed arm
                p = subprocess.run([sys.executable, __file__, "--one-forked", *cpu], capture_output=True, text=True,
                                   timeout=300)
                row = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {
                    "error": p.stderr[-800:]}
            else:
                p = subprocess.run([sys.executable, __file__, "--one-sandboxed", arm, *cpu],
                                   capture_output=True, text=True, timeout=300)
                row = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {
                    "error": p.stderr[-800:]}
            row["repeat"] = rep
            rows[arm].append(row)
            print(json.dumps({"arm": arm, **row}), flush=True)
    summary = {}
    for arm, rs in rows.items():
        ok = [r for r in rs if "error" not in r]
        summary[arm] = {k: round(statistics.median(r[k] for r in ok), 3) for k in
                        ("wall_s", "import_s", "cuda_s", "kernel_s", "profiler_s") if k in ok[0]} if ok else {"error": rs[-1].get("error")}
        summary[arm]["n"] = len(ok)
    print(json.dumps(summary, indent=1))
    (args.out / "summary.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--one-forked":
        print(json.dumps(forked()))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--one-sandboxed":
        print(json.dumps(sandboxed(sys.argv[2])))
    else:
        main()
