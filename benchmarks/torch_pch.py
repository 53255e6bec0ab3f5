"""What the precompiled ``torch/extension.h`` (:mod:`cudaperf.harness.torch_pch`, ``HarnessSettings.modelnew_pch``)
saves a ``load_inline`` build, side by side in one run (issue 25):

    python benchmarks/torch_pch.py --out DIR [--repeats 2] [--cuda]

The precompiled header is built first (its time reported; a cached one is reused). Then each arm builds the same
KernelBench-style extension afresh (a new name each time, so nothing is cached), alternating ``--repeats`` times:
``cold`` (no ``CPATH``) and ``pch`` (``CPATH`` to the precompiled header), each with no extra flags and with
``-O3``. Without ``--cuda`` the extension is C++ only (a CPU build of PyTorch can run it); with ``--cuda`` it is
the ReLU of ``tests/fixtures/pytorch/relu_modelnew.py``, whose CUDA unit nvcc compiles unaided in both arms (a CUDA
build of PyTorch and nvcc). Builds run one at a time, in a fresh process each, with ``MAX_JOBS=2`` as the
harness's. Writes ``DIR/torch_pch.json``: per arm and flags, every build's wall time and the median, and the
ratio of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CPP_BODY = """
#include <torch/extension.h>
torch::Tensor add_one(torch::Tensor x) { return x + 1; }
"""
BUILD = """
import sys, time, torch
from torch.utils.cpp_extension import load_inline
name, cuda, flags = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
t = time.monotonic()
if cuda:
    src = open(sys.argv[0].replace("build.py", "cuda_src.cu")).read()
    m = load_inline(name, cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);", cuda_sources=src,
                    functions=["relu_cuda"], extra_cflags=flags)
else:
    m = load_inline(name, cpp_sources=[%r], functions=["add_one"], extra_cflags=flags)
print("seconds", time.monotonic() - t)
""" % CPP_BODY


def _cuda_source() -> str:
    text = (ROOT / "tests" / "fixtures" / "pytorch" / "relu_modelnew.py").read_text()
    start = text.index('cuda_src = """') + len('cuda_src = """')
    return text[start:text.index('"""', start)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cuda", action="store_true", help="a CUDA extension (needs a CUDA build of PyTorch and nvcc)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from cudaperf.harness.torch_pch import torch_pch

    t0 = time.monotonic()
    pch = torch_pch()
    pch_s = time.monotonic() - t0
    print(f"precompiled header: {pch.message} ({pch_s:.1f} s here)", flush=True)
    if pch.root is None:
        return 1
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    (work / "build.py").write_text(BUILD)
    if args.cuda:
        (work / "cuda_src.cu").write_text(_cuda_source())
    runs: dict[str, list[float]] = {}
    for rep in range(max(1, args.repeats)):
        for flags in ([], ["-O3"]):
            for arm in ("cold", "pch"):
                env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(work / "ext"), "MAX_JOBS": "2"}
                env.pop("CPATH", None)
                if arm == "pch":
                    env["CPATH"] = str(pch.root)
                name = f"pchbench_{arm}_{uuid.uuid4().hex[:8]}"
                r = subprocess.run([sys.executable, str(work / "build.py"), name, "1" if args.cuda else "0", *flags],
                                   env=env, capture_output=True, text=True)
                line = [x for x in r.stdout.splitlines() if x.startswith("seconds ")]
                if r.returncode != 0 or not line:
                    print(r.stdout[-2000:], r.stderr[-2000:])
                    return 1
                s = float(line[-1].split()[1])
                key = f"{arm} {' '.join(flags) or '(no flags)'}"
                runs.setdefault(key, []).append(round(s, 2))
                print(f"rep {rep} {key}: {s:.1f} s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratios = {f: round(med[f"cold {f}"] / med[f"pch {f}"], 2) for f in ("(no flags)", "-O3")}
    out = {"cuda": args.cuda, "pch_message": pch.message, "pch_s": round(pch_s, 1), "builds_s": runs,
           "median_s": med, "cold_over_pch": ratios, "python": sys.version.split()[0]}
    (args.out / "torch_pch.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({"median_s": med, "cold_over_pch": ratios}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
