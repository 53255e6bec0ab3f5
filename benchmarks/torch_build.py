"""Build-and-load time of PyTorch candidates: cudaperf's fast path against ``torch.utils.cpp_extension.load_inline``.

The same kernels in both forms: a fast-path unit (``kernel_forward`` over ``TensorArg``; nvcc alone, sandboxed,
then ctypes) and a KernelBench-style extension (a CUDA source plus a C++ binding, built by ``load_inline`` with
ninja and PyTorch's headers). Every build is cold: a nonce comment makes each source new to both caches, and each
``load_inline`` gets a fresh build directory. Both results are checked against torch on the GPU.

    python benchmarks/torch_build.py --out results.json [--repeats 2]

Needs a CUDA build of PyTorch, nvcc and ninja (run it on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

OPS = {  # name: (CUDA expression of x, torch reference)
    "relu": ("x > 0.f ? x : 0.f", lambda x: x.clamp_min(0)),
    "scale_shift": ("2.5f * x + 1.f", lambda x: 2.5 * x + 1),
    "sigmoid": ("1.f / (1.f + expf(-x))", lambda x: x.sigmoid()),
    "softplus": ("log1pf(expf(x))", lambda x: __import__("torch").nn.functional.softplus(x)),
    "square": ("x * x", lambda x: x * x),
}

KERNEL = """
__global__ void op_kernel(const float* __restrict__ in, float* __restrict__ out, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{ float x = in[i]; out[i] = {expr}; }}
}}
"""

FAST = KERNEL + """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != 1 || n_out != 1) return 1;
    long long n = in[0].numel;
    op_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((const float*)in[0].data, (float*)out[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
// {nonce}
"""

INLINE_CUDA = "#include <torch/extension.h>\n" + KERNEL + """
torch::Tensor forward(torch::Tensor in) {{
    auto out = torch::empty_like(in);
    long long n = in.numel();
    op_kernel<<<(unsigned)((n + 255) / 256), 256>>>(in.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}}
// {nonce}
"""
INLINE_CPP = "torch::Tensor forward(torch::Tensor in);"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch
    from torch.utils.cpp_extension import load_inline

    from cudaperf.harness.torch_fast import FastModule, build_fast_candidate

    x = torch.randn(1 << 20, device="cuda")
    rows = []
    for rep in range(args.repeats):
        for name, (expr, ref) in OPS.items():
            want = ref(x)
            nonce = uuid.uuid4().hex
            t0 = time.monotonic()
            b = build_fast_candidate(FAST.format(expr=expr, nonce=nonce))
            mod = FastModule(b.exe)
            fast_s = time.monotonic() - t0
            out = torch.empty_like(x)
            mod([x], [out], torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            fast_ok = torch.allclose(out, want, rtol=1e-5, atol=1e-6)
            with tempfile.TemporaryDirectory() as d:
                t0 = time.monotonic()
                ext = load_inline(name=f"op_{name}_{nonce[:8]}", cpp_sources=INLINE_CPP,
                                  cuda_sources=INLINE_CUDA.format(expr=expr, nonce=nonce), functions=["forward"],
                                  build_directory=d, extra_cuda_cflags=["-O3"], verbose=False)
                inline_s = time.monotonic() - t0
                got = ext.forward(x)
                torch.cuda.synchronize()
                inline_ok = torch.allclose(got, want, rtol=1e-5, atol=1e-6)
            rows.append({"op": name, "repeat": rep, "fast_s": round(fast_s, 3), "fast_correct": bool(fast_ok),
                         "fast_stage": b.stage, "load_inline_s": round(inline_s, 3),
                         "load_inline_correct": bool(inline_ok)})
            print(rows[-1], flush=True)
            write(args.out, rows, torch)  # after every pair, so a run cut short keeps what it measured
    print(write(args.out, rows, torch))


def write(out: Path, rows: list[dict], torch) -> dict:
    fast = [r["fast_s"] for r in rows]
    inline = [r["load_inline_s"] for r in rows]
    summary = {"n": len(rows), "fast_median_s": statistics.median(fast),
               "load_inline_median_s": statistics.median(inline),
               "ratio_median": statistics.median(i / f for i, f in zip(inline, fast)),
               "all_correct": all(r["fast_correct"] and r["load_inline_correct"] for r in rows),
               "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return summary


if __name__ == "__main__":
    main()
