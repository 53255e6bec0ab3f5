"""T steps of a 1-D stencil of radius r with fixed weights on a float or double array; the r values at each end
stay fixed.

Parameters: the radius (1..4), the weights (heat equation, binomial smoothing, box filter, random symmetric or
skewed advection-diffusion weights; all positive, summing to at most 1 so the field stays bounded), the element
type, the array length and the number of steps. Enough steps that device-resident iteration beats the CPU even
with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["heat", "binomial", "box", "random_sym", "advect"]


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


def _weights(kind: str, r: int, rng: np.random.Generator) -> list[float]:
    if kind == "heat":
        c = float(rng.uniform(0.1, 0.45)) / r
        w = [0.0] * (2 * r + 1)
        w[r - 1] = c
        w[r + 1] = c
        w[r] = 1.0 - 2.0 * c
        # spread to the outer radius a little so every offset is used
        for k in range(r - 1):
            w[k] = w[2 * r - k] = c * 0.5 ** (r - 1 - k)
        s = sum(w)
        w = [x / s for x in w]
    elif kind == "binomial":
        from math import comb
        w = [comb(2 * r, k) / 4.0 ** r for k in range(2 * r + 1)]
    elif kind == "box":
        w = [1.0 / (2 * r + 1)] * (2 * r + 1)
    elif kind == "random_sym":
        half = rng.uniform(0.2, 1.0, r + 1)
        w = [float(half[abs(k - r)]) for k in range(2 * r + 1)]
        s = sum(w)
        w = [x / s for x in w]
    else:  # advect: skewed upwind weights
        w = [float(x) for x in rng.uniform(0.05, 1.0, 2 * r + 1)]
        w[0] *= 2.5
        s = sum(w)
        w = [x / s for x in w]
    w = [round(x * 0.999, 6) for x in w]
    return w


def _lits(w: list[float], t: str) -> list[str]:
    suf = "f" if t == "float" else ""
    return [f"{x:.6f}{suf}" for x in w]


def _expr(lits: list[str], r: int, load) -> str:
    """load(k) is the C expression for the neighbour at offset k (-r..r)."""
    return " + ".join(f"{lits[k + r]} * {load(k)}" for k in range(-r, r + 1))


def _off(k: int) -> str:
    return "" if k == 0 else (f" + {k}" if k > 0 else f" - {-k}")


HEAD = "#include <cuda_runtime.h>\n#include <string.h>\n\n"

SIG = 'extern "C" void stencil1d(int n, int steps, @T@* u) {\n    if (n <= 2 * @R@ || steps <= 0) return;\n'

ALLOC = """    size_t bytes = (size_t)n * sizeof(@T@);
    @T@ *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, da, bytes, cudaMemcpyDeviceToDevice);
"""

FINISH = """    cudaMemcpy(u, da, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
}
"""


def _pingpong(t, r, lits, block, ldg):
    ld = (lambda k: f"__ldg(&a[i{_off(k)}])") if ldg else (lambda k: f"a[i{_off(k)}]")
    code = (HEAD + "__global__ void step_kernel(int n, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i >= @R@ && i < n - @R@) b[i] = {_expr(lits, r, ld)};\n}}\n\n"
            + SIG + ALLOC
            + "    int blocks = (n + @B@ - 1) / @B@;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_kernel<<<blocks, @B@>>>(n, da, db);\n"
            "        @T@* tmp = da; da = db; db = tmp;\n    }\n" + FINISH)
    return _sub(code, T=t, R=r, B=block)


def _pinned(t, r, lits):
    ld = lambda k: f"a[i{_off(k)}]"  # noqa: E731
    code = (HEAD + "__global__ void step_kernel(int n, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i >= @R@ && i < n - @R@) b[i] = {_expr(lits, r, ld)};\n}}\n\n"
            + SIG
            + """    size_t bytes = (size_t)n * sizeof(@T@);
    @T@ *da, *db, *h;
    cudaMallocHost(&h, bytes);
    memcpy(h, u, bytes);
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, da, bytes, cudaMemcpyDeviceToDevice);
    int blocks = (n + 255) / 256;
    for (int s = 0; s < steps; ++s) {
        step_kernel<<<blocks, 256>>>(n, da, db);
        @T@* tmp = da; da = db; db = tmp;
    }
    cudaMemcpy(h, da, bytes, cudaMemcpyDeviceToHost);
    memcpy(u, h, bytes);
    cudaFreeHost(h);
    cudaFree(da);
    cudaFree(db);
}
""")
    return _sub(code, T=t, R=r)


def _shared_tile(t, r, lits):
    ld = lambda k: f"tile[threadIdx.x + @R@{_off(k)}]"  # noqa: E731
    code = (HEAD + "__global__ void step_tile(int n, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
            "    __shared__ @T@ tile[256 + 2 * @R@];\n"
            "    int base = blockIdx.x * 256;\n"
            "    for (int j = threadIdx.x; j < 256 + 2 * @R@; j += 256) {\n"
            "        int g = base - @R@ + j;\n"
            "        tile[j] = (g >= 0 && g < n) ? a[g] : (@T@)0;\n    }\n"
            "    __syncthreads();\n"
            "    int i = base + threadIdx.x;\n"
            f"    if (i >= @R@ && i < n - @R@) b[i] = {_expr(lits, r, ld)};\n}}\n\n"
            + SIG + ALLOC
            + "    int blocks = (n + 255) / 256;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_tile<<<blocks, 256>>>(n, da, db);\n"
            "        @T@* tmp = da; da = db; db = tmp;\n    }\n" + FINISH)
    return _sub(code, T=t, R=r)


def _fused(t, r, lits, ksteps):
    ld = lambda k: f"src[j{_off(k)}]"  # noqa: E731
    code = (HEAD + "// K steps per launch: each block loads its 256 outputs plus a halo of R*K on each side\n"
            "__global__ void fused_steps(int n, int ks, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
            "    __shared__ @T@ s0[@W@];\n    __shared__ @T@ s1[@W@];\n"
            "    int base = blockIdx.x * 256 - @RK@;\n"
            "    for (int j = threadIdx.x; j < @W@; j += 256) {\n"
            "        int g = base + j;\n"
            "        s0[j] = (g >= 0 && g < n) ? a[g] : (@T@)0;\n    }\n"
            "    __syncthreads();\n"
            "    @T@* src = s0;\n    @T@* dst = s1;\n"
            "    for (int s = 0; s < ks; ++s) {\n"
            "        for (int j = threadIdx.x; j < @W@; j += 256) {\n"
            "            int g = base + j;\n"
            "            if (j >= @R@ && j < @W@ - @R@ && g >= @R@ && g < n - @R@)\n"
            f"                dst[j] = {_expr(lits, r, ld)};\n"
            "            else\n                dst[j] = src[j];\n        }\n"
            "        __syncthreads();\n"
            "        @T@* tmp = src; src = dst; dst = tmp;\n    }\n"
            "    int i = blockIdx.x * 256 + threadIdx.x;\n"
            "    if (i < n) b[i] = src[threadIdx.x + @RK@];\n}\n\n"
            + SIG + ALLOC
            + "    int blocks = (n + 255) / 256;\n"
            "    for (int done = 0; done < steps; done += @K@) {\n"
            "        int ks = steps - done < @K@ ? steps - done : @K@;\n"
            "        fused_steps<<<blocks, 256>>>(n, ks, da, db);\n"
            "        @T@* tmp = da; da = db; db = tmp;\n    }\n" + FINISH)
    return _sub(code, T=t, R=r, K=ksteps, RK=r * ksteps, W=256 + 2 * r * ksteps)


def _in_loop(t, r, lits):
    ld = lambda k: f"a[i{_off(k)}]"  # noqa: E731
    code = (HEAD + "__global__ void step_all(int n, const @T@* a, @T@* b) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    if (i >= @R@ && i < n - @R@) b[i] = {_expr(lits, r, ld)};\n"
            "    else b[i] = a[i];\n}\n\n"
            + SIG
            + """    size_t bytes = (size_t)n * sizeof(@T@);
    @T@ *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    for (int s = 0; s < steps; ++s) {
        cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
        step_all<<<(n + 127) / 128, 128>>>(n, da, db);
        cudaMemcpy(u, db, bytes, cudaMemcpyDeviceToHost);
    }
    cudaFree(da);
    cudaFree(db);
}
""")
    return _sub(code, T=t, R=r)


def _small_grid(t, r, lits):
    ld = lambda k: f"a[i{_off(k)}]"  # noqa: E731
    code = (HEAD + "// 32 blocks of 32 threads; each thread sweeps a contiguous chunk\n"
            "__global__ void step_chunks(int n, const @T@* a, @T@* b) {\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int nt = gridDim.x * blockDim.x;\n"
            "    int chunk = (n + nt - 1) / nt;\n"
            "    int lo = t * chunk;\n"
            "    int hi = lo + chunk < n ? lo + chunk : n;\n"
            "    if (lo < @R@) lo = @R@;\n"
            "    if (hi > n - @R@) hi = n - @R@;\n"
            "    for (int i = lo; i < hi; ++i)\n"
            f"        b[i] = {_expr(lits, r, ld)};\n}}\n\n"
            + SIG + ALLOC
            + "    for (int s = 0; s < steps; ++s) {\n"
            "        step_chunks<<<32, 32>>>(n, da, db);\n"
            "        @T@* tmp = da; da = db; db = tmp;\n    }\n" + FINISH)
    return _sub(code, T=t, R=r)


def _one_block(t, r, lits):
    ld = lambda k: f"a[i{_off(k)}]"  # noqa: E731
    code = (HEAD + "// one block of 1024 threads runs every step; __syncthreads separates the steps\n"
            "__global__ void all_steps(int n, int steps, @T@* a, @T@* b) {\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        for (int i = threadIdx.x; i < n; i += blockDim.x)\n"
            f"            if (i >= @R@ && i < n - @R@) b[i] = {_expr(lits, r, ld)};\n"
            "        __syncthreads();\n"
            "        @T@* tmp = a; a = b; b = tmp;\n    }\n}\n\n"
            + SIG + ALLOC
            + "    all_steps<<<1, 1024>>>(n, steps, da, db);\n"
            "    if (steps % 2 == 1) { @T@* tmp = da; da = db; db = tmp; }\n" + FINISH)
    return _sub(code, T=t, R=r)


def _constmem(t, r, lits):
    code = (HEAD + "__constant__ @T@ cw[2 * @R@ + 1];\n"
            f"static const @T@ host_w[2 * @R@ + 1] = {{{', '.join(lits)}}};\n\n"
            "__global__ void step_gs(int n, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {\n"
            "        if (i < @R@ || i >= n - @R@) continue;\n"
            "        @T@ acc = cw[0] * a[i - @R@];\n"
            "#pragma unroll\n"
            "        for (int k = 1; k <= 2 * @R@; ++k) acc += cw[k] * a[i - @R@ + k];\n"
            "        b[i] = acc;\n    }\n}\n\n"
            + SIG + ALLOC
            + "    cudaMemcpyToSymbol(cw, host_w, sizeof(host_w));\n"
            "    int sms = 0;\n    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = (n + 511) / 512;\n"
            "    if (blocks > sms * 4) blocks = sms * 4;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_gs<<<blocks, 512>>>(n, da, db);\n"
            "        @T@* tmp = da; da = db; db = tmp;\n    }\n" + FINISH)
    return _sub(code, T=t, R=r)


def _reference(t, r, lits):
    ld = lambda k: f"a[i{_off(k)}]"  # noqa: E731
    code = ("#include <stdlib.h>\n#include <string.h>\n\n"
            "void stencil1d(int n, int steps, @T@* u) {\n"
            "    if (n <= 2 * @R@ || steps <= 0) return;\n"
            "    size_t bytes = (size_t)n * sizeof(@T@);\n"
            "    @T@* v = (@T@*)malloc(bytes);\n"
            "    memcpy(v, u, bytes);\n"
            "    @T@* a = u;\n    @T@* b = v;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        for (int i = @R@; i < n - @R@; ++i)\n"
            f"            b[i] = {_expr(lits, r, ld)};\n"
            "        @T@* tmp = a; a = b; b = tmp;\n    }\n"
            "    if (a != u) memcpy(u, a, bytes);\n"
            "    free(v);\n}\n")
    return _sub(code, T=t, R=r)


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    r = 1 + (index // 2) % 4
    kind = KINDS[index % len(KINDS)]
    if kind == "heat" and r > 2:
        kind = "random_sym"
    w = _weights(kind, r, rng)
    lits = _lits(w, t)
    # cost per point-update grows with the radius; pick steps for ~100 ms of C at the timing size
    n_time = int(rng.choice([1 << 20, 1_000_003, 1_200_007, 900_001]))
    ns_per_term = 0.3 if t == "float" else 0.45
    target_ms = float(rng.uniform(90, 150))
    steps = int(target_ms * 1e6 / (n_time * (2 * r + 1) * ns_per_term))
    steps = max(20, min(200, steps))
    ks = 8 if r <= 2 else 4
    tol = {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-12}
    task = {
        "function_name": "stencil1d",
        "description": (f"{kind} stencil of radius {r} on a {t} array: steps Jacobi sweeps of "
                        f"u[i] = sum_k w[k] u[i+k] (k = -{r}..{r}, w = {w}) for {r} <= i < n-{r}; the first and "
                        f"last {r} values stay fixed."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "steps", "role": "scalar", "ctype": "int"},
            {"name": "u", "role": "inout", "ctype": t, "length": "n",
             "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}},
        ],
        "size_configs": [{"n": 77, "steps": 5}, {"n": 1000 + int(rng.integers(1, 31)), "steps": 11},
                         {"n": 65537 + int(rng.integers(1000)), "steps": 23}, {"n": n_time, "steps": steps}],
        "tolerance": tol,
        "reference_c": _reference(t, r, lits),
        "tags": ["stencil", "1d", "iterative", t],
    }
    dev = ("device_resident", "double_buffered", "many_launches")
    variants = (
        Variant("pingpong_b256", ("naive", "coalesced", "block_256", "pageable") + dev, _pingpong(t, r, lits, 256, False)),
        Variant("pingpong_ldg_b64", ("naive", "coalesced", "block_64", "readonly_cache") + dev,
                _pingpong(t, r, lits, 64, True)),
        Variant("pinned_b256", ("naive", "coalesced", "block_256", "pinned") + dev, _pinned(t, r, lits)),
        Variant("shared_tile", ("shared_tiling", "coalesced", "block_256") + dev, _shared_tile(t, r, lits)),
        Variant(f"fused_{ks}steps", ("shared_tiling", "fused", "coalesced", "block_256", "device_resident",
                                     "double_buffered"), _fused(t, r, lits, ks)),
        Variant("constmem_grid_stride", ("grid_stride", "constant_memory", "unrolled", "block_512") + dev,
                _constmem(t, r, lits)),
        Variant("one_block_all_steps", ("single_thread", "fused", "coalesced", "block_1024", "device_resident",
                                        "double_buffered"), _one_block(t, r, lits)),
        Variant("chunks_small_grid", ("small_grid", "strided", "block_32") + dev, _small_grid(t, r, lits)),
        Variant("transfers_every_step", ("naive", "in_loop_transfers", "many_launches", "block_128", "pageable"),
                _in_loop(t, r, lits)),
    )
    return GeneratedTask(task, variants, {"type": t, "radius": r, "kind": kind, "weights": w,
                                          "n_time": n_time, "steps_time": steps})


FAMILY = Family(
    name="stencil1d",
    description="T Jacobi steps of a radius-r 1-D stencil with fixed boundary values (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("stencil",),
)
