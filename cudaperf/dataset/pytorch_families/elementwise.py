"""``elementwise_chain``: element-wise activation chains over one to three same-shaped inputs."""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.pytorch_families.common import (ACTIVATIONS, GeneratedTorchTask, TorchVariant, check_tags,
                                                      problem_source, rng_for, task_id)
from cudaperf.tasks.pytorch import PyTorchTask

def _chain(rng: np.random.Generator, n_inputs: int) -> tuple[str, str, dict]:
    names = ["x", "z", "w"][:n_inputs]
    coef = [round(float(rng.uniform(0.25, 2.0)) * (1 if rng.random() < 0.7 else -1), 3) for _ in names]
    acts = [str(a) for a in rng.choice(sorted(ACTIVATIONS), size=2, replace=False)]
    scale, shift = round(float(rng.uniform(0.5, 1.5)), 3), round(float(rng.uniform(-0.5, 0.5)), 3)
    lin_t = " + ".join(f"{c} * {n}" for c, n in zip(coef, names))
    lin_c = " + ".join(f"{c}f * {n}" for c, n in zip(coef, names))
    t = ACTIVATIONS[acts[1]][0].format(v=f"{ACTIVATIONS[acts[0]][0].format(v=lin_t)} * {scale} + {shift}")
    c = ACTIVATIONS[acts[1]][1].format(v=f"{ACTIVATIONS[acts[0]][1].format(v=f'({lin_c})')} * {scale}f + {shift}f")
    return t, c, {"coef": coef, "acts": acts, "scale": scale, "shift": shift}


_HEAD = """__device__ __forceinline__ float chain({args}) {{
    return {expr};
}}
"""
_ENTRY = """
extern "C" int kernel_forward(const TensorArg* in, int n_in, TensorArg* out, int n_out, cudaStream_t stream) {{
    if (n_in != {n} || n_out != 1 || out[0].dtype != DT_FLOAT32) return 1;
    const long long n = out[0].numel;
    const long long rows = out[0].shape[0], cols = out[0].shape[1];
    (void)rows; (void)cols;
{launch}
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}}
"""


def _elementwise_variants(n_inputs: int, expr: str) -> list[TorchVariant]:
    names = ["x", "z", "w"][:n_inputs]
    args = ", ".join(f"float {a}" for a in names)
    params = ", ".join(f"const float* __restrict__ {a}p" for a in names)
    ptrs = ", ".join(f"(const float*)in[{k}].data" for k in range(n_inputs))
    load = lambda idx: ", ".join(f"{a}p[{idx}]" for a in names)  # noqa: E731
    head = _HEAD.format(args=args, expr=expr)
    out = []

    def add(name, tags, kernel, launch):
        code = head + kernel + _ENTRY.format(n=n_inputs, launch=launch)
        out.append(TorchVariant(name, tuple(tags), code))

    flat = f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = chain({load('i')});
}}
"""
    for bs, tags in ((256, ["naive", "coalesced", "block_256"]), (32, ["naive", "coalesced", "block_32"]),
                     (1024, ["naive", "coalesced", "block_1024"])):
        add(f"naive_b{bs}", tags, flat,
            f"    chain_kernel<<<(unsigned)((n + {bs - 1}) / {bs}), {bs}, 0, stream>>>({ptrs}, (float*)out[0].data, n);")
    add("grid_stride", ["grid_stride", "coalesced", "block_256"], f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long n) {{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = chain({load('i')});
}}
""", f"""    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    chain_kernel<<<4 * sms, 256, 0, stream>>>({ptrs}, (float*)out[0].data, n);""")
    vec_loads = "\n".join(f"        float4 {a}4 = reinterpret_cast<const float4*>({a}p)[q];" for a in names)
    lanes = "\n".join(
        f"        r.{c} = chain({', '.join(f'{a}4.{c}' for a in names)});" for c in "xyzw")
    add("vectorized", ["vectorized", "coalesced", "block_256"], f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long n) {{
    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long nq = n / 4;
    if (q < nq) {{
{vec_loads}
        float4 r;
{lanes}
        reinterpret_cast<float4*>(y)[q] = r;
    }}
    long long t = nq * 4 + q;  /* the tail, when n is not a multiple of 4 */
    if (q < n - nq * 4) y[t] = chain({load('t')});
}}
""", f"""    long long threads = n / 4 > n % 4 ? n / 4 : n % 4;
    chain_kernel<<<(unsigned)((threads + 255) / 256), 256, 0, stream>>>({ptrs}, (float*)out[0].data, n);""")
    add("grid_2d", ["coalesced", "block_256"], f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long rows, long long cols) {{
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long r = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {{ long long i = r * cols + c; y[i] = chain({load('i')}); }}
}}
""", f"""    dim3 block(32, 8);
    dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 7) / 8));
    chain_kernel<<<grid, block, 0, stream>>>({ptrs}, (float*)out[0].data, rows, cols);""")
    add("column_major_walk", ["strided", "block_256"], f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long rows, long long cols) {{
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;  /* consecutive threads walk down a column */
    if (t < rows * cols) {{ long long r = t % rows, c = t / rows; long long i = r * cols + c; y[i] = chain({load('i')}); }}
}}
""", f"""    chain_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>({ptrs}, (float*)out[0].data, rows, cols);""")
    add("thread_per_row", ["thread_per_row", "block_128"], f"""
__global__ void chain_kernel({params}, float* __restrict__ y, long long rows, long long cols) {{
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) for (long long c = 0; c < cols; ++c) {{ long long i = r * cols + c; y[i] = chain({load('i')}); }}
}}
""", f"""    chain_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, stream>>>({ptrs}, (float*)out[0].data, rows, cols);""")
    return out


def elementwise_chain(index: int) -> GeneratedTorchTask:
    rng = rng_for("elementwise_chain", index)
    n_inputs = int(rng.integers(1, 4))
    rows = int(rng.choice([512, 1000, 2048, 3001, 4096]))
    cols = int(rng.choice([777, 1024, 2047, 4096, 4099]))
    t_expr, c_expr, params = _chain(rng, n_inputs)
    names = ["x", "z", "w"][:n_inputs]
    doc = t_expr.replace("torch.nn.functional.", "F.")
    source = problem_source(f"y = {doc} element-wise over {n_inputs} input(s) of shape (batch_size, {cols}).",
                            t_expr, ", ".join(f"torch.randn(batch_size, {cols})" for _ in names),
                            forward_args=", ".join(names), batch_size=rows)
    tid = task_id("elementwise_chain", index)
    task = PyTorchTask(id=tid, source=source, path=f"<generated {tid}>",
                       description=f"elementwise chain {params['acts']} over {n_inputs} input(s)")
    variants = _elementwise_variants(n_inputs, c_expr)
    check_tags(tid, variants)
    return GeneratedTorchTask(task, "elementwise_chain", index,
                              {**params, "rows": rows, "cols": cols, "n_inputs": n_inputs}, tuple(variants))


