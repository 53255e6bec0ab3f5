"""Batched 1-D correlation ``y[s][i] = sum_j w[j] * x[s][i + j - r]`` with zero or clamped padding.

Parameters: element type (float/double), radius r (kernel width 2r+1 in 3..63), padding mode, the number of
signals and their length. Every variant sums the taps in increasing j, like the reference; the work per output is
proportional to the width, so the timing size shrinks as the width grows.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

RADII = [1, 2, 3, 4, 5, 7, 8, 10, 12, 15, 16, 20, 23, 25, 31, 6, 9, 13, 18, 28]
# tasks 20..49 (the first 20 are in the shipped dataset and stay as they are): the radii no task had, then the
# others again with the element type and padding they had not had (every (radius, type, padding) appears once)
RADII_MORE = [11, 14, 17, 19, 21, 22, 24, 26, 27, 29, 30, 1, 2, 3, 4, 5, 6, 8, 7, 9, 10, 12, 13, 15, 16, 18, 20, 23,
              25, 31]
MAXR = 31
HEAD = "#include <cuda_runtime.h>\n\n"
SIG = "int nsig, int n, int r, const {t}* x, const {t}* w, {t}* y"


def _load(t: str, pad: str, arr: str = "xs") -> str:
    """Device helper: the padded value of signal row ``xs`` (length n) at index idx."""
    if pad == "zero":
        return (f"__device__ __forceinline__ {t} xat(const {t}* {arr}, int n, int idx) {{\n"
                f"    return (idx >= 0 && idx < n) ? {arr}[idx] : ({t})0;\n}}\n\n")
    return (f"__device__ __forceinline__ {t} xat(const {t}* {arr}, int n, int idx) {{\n"
            f"    idx = idx < 0 ? 0 : (idx >= n ? n - 1 : idx);\n    return {arr}[idx];\n}}\n\n")


def _alloc(t: str) -> str:
    return (f"    size_t total = (size_t)nsig * n;\n"
            f"    size_t bytes = total * sizeof({t});\n"
            f"    {t} *dx, *dw, *dy;\n"
            f"    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes); cudaMalloc(&dw, (size_t)(2 * r + 1) * sizeof({t}));\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            f"    cudaMemcpy(dw, w, (size_t)(2 * r + 1) * sizeof({t}), cudaMemcpyHostToDevice);\n")


FREE = "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n    cudaFree(dx); cudaFree(dw); cudaFree(dy);\n}\n"
GUARD = "    if (nsig <= 0 || n <= 0) return;\n"


def _entry(t: str) -> str:
    return f'extern "C" void conv1d({SIG.format(t=t)}) {{\n' + GUARD


def _naive(t: str, pad: str, block: int) -> str:
    return (HEAD + _load(t, pad)
            + f"__global__ void conv_naive(int nsig, int n, int r, const {t}* x, const {t}* w, {t}* y) {{\n"
            "    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= (long long)nsig * n) return;\n"
            "    int s = (int)(g / n), i = (int)(g % n);\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            f"    {t} acc = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) acc += w[j] * xat(xs, n, i + j - r);\n"
            "    y[g] = acc;\n}\n\n"
            + _entry(t) + _alloc(t)
            + f"    unsigned blocks = (unsigned)((total + {block - 1}) / {block});\n"
            f"    conv_naive<<<blocks, {block}>>>(nsig, n, r, dx, dw, dy);\n" + FREE)


def _const(t: str, pad: str) -> str:
    return (HEAD + f"__constant__ {t} cw[{2 * MAXR + 1}];\n\n" + _load(t, pad)
            + f"__global__ void conv_const(int nsig, int n, int r, const {t}* __restrict__ x, {t}* __restrict__ y) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int s = blockIdx.y;\n"
            "    if (i >= n) return;\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            f"    {t} acc = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) acc += cw[j] * xat(xs, n, i + j - r);\n"
            "    y[(size_t)s * n + i] = acc;\n}\n\n"
            + _entry(t)
            + f"    size_t total = (size_t)nsig * n;\n    size_t bytes = total * sizeof({t});\n"
            f"    {t} *dx, *dy;\n"
            "    cudaMalloc(&dx, bytes); cudaMalloc(&dy, bytes);\n"
            "    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);\n"
            f"    cudaMemcpyToSymbol(cw, w, (size_t)(2 * r + 1) * sizeof({t}));\n"
            "    dim3 grid((n + 127) / 128, nsig);\n"
            "    conv_const<<<grid, 128>>>(nsig, n, r, dx, dy);\n"
            "    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);\n    cudaFree(dx); cudaFree(dy);\n}\n")


def _shared(t: str, pad: str) -> str:
    B = 256
    return (HEAD + _load(t, pad)
            + f"#define TILE {B}\n#define MAXR {MAXR}\n\n"
            + f"__global__ void conv_tile(int nsig, int n, int r, const {t}* __restrict__ x, const {t}* __restrict__ w,"
            f" {t}* __restrict__ y) {{\n"
            f"    __shared__ {t} tile[TILE + 2 * MAXR];\n"
            f"    __shared__ {t} ws[2 * MAXR + 1];\n"
            "    int s = blockIdx.y;\n"
            "    int base = blockIdx.x * TILE;\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            "    for (int k = threadIdx.x; k < TILE + 2 * r; k += blockDim.x) tile[k] = xat(xs, n, base + k - r);\n"
            "    for (int k = threadIdx.x; k <= 2 * r; k += blockDim.x) ws[k] = w[k];\n"
            "    __syncthreads();\n"
            "    int i = base + threadIdx.x;\n"
            "    if (i < n) {\n"
            f"        {t} acc = 0;\n"
            "        for (int j = 0; j <= 2 * r; ++j) acc += ws[j] * tile[threadIdx.x + j];\n"
            "        y[(size_t)s * n + i] = acc;\n    }\n}\n\n"
            + _entry(t) + _alloc(t)
            + "    dim3 grid((n + TILE - 1) / TILE, nsig);\n"
            "    conv_tile<<<grid, TILE>>>(nsig, n, r, dx, dw, dy);\n" + FREE)


def _regblock(t: str, pad: str) -> str:
    return (HEAD + _load(t, pad)
            + "#define OUTS 4\n\n"
            + f"__global__ void conv_reg(int nsig, int n, int r, const {t}* __restrict__ x, const {t}* __restrict__ w,"
            f" {t}* __restrict__ y) {{\n"
            "    int s = blockIdx.y;\n"
            "    int i0 = (blockIdx.x * blockDim.x + threadIdx.x) * OUTS;\n"
            "    if (i0 >= n) return;\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            f"    {t} acc[OUTS];\n"
            "#pragma unroll\n    for (int k = 0; k < OUTS; ++k) acc[k] = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) {\n"
            f"        {t} wj = __ldg(w + j);\n"
            "#pragma unroll\n"
            "        for (int k = 0; k < OUTS; ++k) acc[k] += wj * xat(xs, n, i0 + k + j - r);\n"
            "    }\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < OUTS; ++k) if (i0 + k < n) y[(size_t)s * n + i0 + k] = acc[k];\n}\n\n"
            + _entry(t) + _alloc(t)
            + "    int per = (n + OUTS - 1) / OUTS;\n"
            "    dim3 grid((per + 127) / 128, nsig);\n"
            "    conv_reg<<<grid, 128>>>(nsig, n, r, dx, dw, dy);\n" + FREE)


def _strided(t: str, pad: str) -> str:
    return (HEAD + _load(t, pad)
            + f"__global__ void conv_strided(int nsig, int n, int r, const {t}* x, const {t}* w, {t}* y) {{\n"
            "    // neighbouring threads work on different signals: their accesses are n elements apart\n"
            "    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= (long long)nsig * n) return;\n"
            "    int s = (int)(g % nsig), i = (int)(g / nsig);\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            f"    {t} acc = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) acc += w[j] * xat(xs, n, i + j - r);\n"
            "    y[(size_t)s * n + i] = acc;\n}\n\n"
            + _entry(t) + _alloc(t)
            + "    unsigned blocks = (unsigned)((total + 255) / 256);\n"
            "    conv_strided<<<blocks, 256>>>(nsig, n, r, dx, dw, dy);\n" + FREE)


def _per_signal(t: str, pad: str) -> str:
    return (HEAD + _load(t, pad)
            + f"__global__ void conv_one(int n, int r, const {t}* xs, const {t}* w, {t}* ys) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {t} acc = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) acc += w[j] * xat(xs, n, i + j - r);\n"
            "    ys[i] = acc;\n}\n\n"
            + _entry(t)
            + f"    size_t sb = (size_t)n * sizeof({t});\n"
            f"    {t} *dx, *dw, *dy;\n"
            f"    cudaMalloc(&dx, sb); cudaMalloc(&dy, sb); cudaMalloc(&dw, (size_t)(2 * r + 1) * sizeof({t}));\n"
            f"    cudaMemcpy(dw, w, (size_t)(2 * r + 1) * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "    for (int s = 0; s < nsig; ++s) {\n"
            "        cudaMemcpy(dx, x + (size_t)s * n, sb, cudaMemcpyHostToDevice);\n"
            "        conv_one<<<(n + 127) / 128, 128>>>(n, r, dx, dw, dy);\n"
            "        cudaMemcpy(y + (size_t)s * n, dy, sb, cudaMemcpyDeviceToHost);\n"
            "    }\n"
            "    cudaFree(dx); cudaFree(dw); cudaFree(dy);\n}\n")


def _serial_chunks(t: str, pad: str) -> str:
    return (HEAD + _load(t, pad)
            + f"__global__ void conv_chunks(int nsig, int n, int r, const {t}* x, const {t}* w, {t}* y,"
            " long long chunk) {\n"
            "    // each thread walks a contiguous chunk of outputs serially\n"
            "    long long total = (long long)nsig * n;\n"
            "    long long lo = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * chunk;\n"
            "    long long hi = lo + chunk < total ? lo + chunk : total;\n"
            "    for (long long g = lo; g < hi; ++g) {\n"
            "        int s = (int)(g / n), i = (int)(g % n);\n"
            f"        const {t}* xs = x + (size_t)s * n;\n"
            f"        {t} acc = 0;\n"
            "        for (int j = 0; j <= 2 * r; ++j) acc += w[j] * xat(xs, n, i + j - r);\n"
            "        y[g] = acc;\n    }\n}\n\n"
            + _entry(t) + _alloc(t)
            + "    const int threads = 64 * 64;\n"
            "    long long chunk = ((long long)total + threads - 1) / threads;\n"
            "    conv_chunks<<<64, 64>>>(nsig, n, r, dx, dw, dy, chunk);\n" + FREE)


def _streams(t: str, pad: str) -> str:
    return (HEAD + _load(t, pad)
            + f"__global__ void conv_rows(int nrows, int n, int r, const {t}* __restrict__ x,"
            f" const {t}* __restrict__ w, {t}* __restrict__ y) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int s = blockIdx.y;\n"
            "    if (i >= n || s >= nrows) return;\n"
            f"    const {t}* xs = x + (size_t)s * n;\n"
            f"    {t} acc = 0;\n"
            "    for (int j = 0; j <= 2 * r; ++j) acc += __ldg(w + j) * xat(xs, n, i + j - r);\n"
            "    y[(size_t)s * n + i] = acc;\n}\n\n"
            + _entry(t) + _alloc(t)
            + "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)y, bytes, cudaHostRegisterDefault);\n"
            "    // re-copy x per stream chunk below; the initial copy above is redundant but harmless\n"
            "    const int S = 4;\n    cudaStream_t st[S];\n"
            "    for (int k = 0; k < S; ++k) cudaStreamCreate(&st[k]);\n"
            "    int per = (nsig + S - 1) / S;\n"
            "    for (int k = 0; k < S; ++k) {\n"
            "        int s0 = k * per; int cnt = nsig - s0 < per ? nsig - s0 : per;\n"
            "        if (cnt <= 0) break;\n"
            "        size_t off = (size_t)s0 * n;\n"
            f"        size_t cb = (size_t)cnt * n * sizeof({t});\n"
            "        cudaMemcpyAsync(dx + off, x + off, cb, cudaMemcpyHostToDevice, st[k]);\n"
            "        dim3 grid((n + 255) / 256, cnt);\n"
            "        conv_rows<<<grid, 256, 0, st[k]>>>(cnt, n, r, dx + off, dw, dy + off);\n"
            "        cudaMemcpyAsync(y + off, dy + off, cb, cudaMemcpyDeviceToHost, st[k]);\n"
            "    }\n"
            "    for (int k = 0; k < S; ++k) { cudaStreamSynchronize(st[k]); cudaStreamDestroy(st[k]); }\n"
            "    cudaHostUnregister((void*)x); cudaHostUnregister((void*)y);\n"
            "    cudaFree(dx); cudaFree(dw); cudaFree(dy);\n}\n")


def _reference(t: str, pad: str) -> str:
    if pad == "zero":
        body = ("                int idx = i + j - r;\n"
                "                if (idx >= 0 && idx < n) acc += w[j] * xs[idx];\n")
    else:
        body = ("                int idx = i + j - r;\n"
                "                idx = idx < 0 ? 0 : (idx >= n ? n - 1 : idx);\n"
                "                acc += w[j] * xs[idx];\n")
    return ("#include <stddef.h>\n\n" + f"void conv1d({SIG.format(t=t)}) {{\n"
            "    for (int s = 0; s < nsig; ++s) {\n"
            f"        const {t}* xs = x + (size_t)s * n;\n"
            "        for (int i = 0; i < n; ++i) {\n"
            f"            {t} acc = 0;\n"
            "            for (int j = 0; j <= 2 * r; ++j) {\n" + body + "            }\n"
            "            y[(size_t)s * n + i] = acc;\n        }\n    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    r = RADII[index] if index < len(RADII) else RADII_MORE[index - len(RADII)]
    width = 2 * r + 1
    pad = "zero" if (index // 2) % 2 == 0 else "clamp"
    # ~0.6 ns per tap in the sequential reference (unloaded): aim for ~60 ms
    total = int(min(40_000_000, 110e6 / width))
    nsig = int(rng.choice([1, 3, 8, 16, 64, 200]))
    n_time = max(1000, total // nsig) + int(rng.integers(1, 97))
    tol = {"rtol": 1e-4, "atol": 1e-4} if t == "float" else {"rtol": 1e-9, "atol": 1e-10}
    task = {
        "function_name": "conv1d",
        "description": (f"Batched 1-D correlation over {t}s: nsig signals of length n, stored back to back; "
                        f"y[s*n+i] = sum_{{j=0..2r}} w[j] * x[s*n + i+j-r] summed in increasing j, with "
                        f"{'zero padding (out-of-range inputs are 0)' if pad == 'zero' else 'clamped borders (indices clamped to [0, n-1])'}; "
                        f"r = {r} (width {width}), r <= {MAXR}."),
        "returns": "void",
        "args": [
            {"name": "nsig", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "r", "role": "scalar", "ctype": "int", "dist": {"kind": "const", "value": r}},
            {"name": "x", "role": "in", "ctype": t, "length": "nsig * n",
             "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
            {"name": "w", "role": "in", "ctype": t, "length": "2 * r + 1",
             "dist": {"kind": "uniform", "low": -1.0, "high": 1.0}},
            {"name": "y", "role": "out", "ctype": t, "length": "nsig * n"},
        ],
        "size_configs": [{"nsig": 2, "n": 37}, {"nsig": 3, "n": 1000 + int(rng.integers(1, 30))},
                         {"nsig": 7, "n": 10007}, {"nsig": nsig, "n": n_time}],
        "tolerance": tol,
        "reference_c": _reference(t, pad),
        "tags": ["convolution", "stencil", t],
    }
    variants = (
        Variant("naive_b256", ("naive", "coalesced", "block_256", "pageable"), _naive(t, pad, 256)),
        Variant("naive_b64", ("naive", "coalesced", "block_64", "pageable"), _naive(t, pad, 64)),
        Variant("const_weights", ("naive", "constant_memory", "coalesced", "block_128", "readonly_cache"),
                _const(t, pad)),
        Variant("shared_tile", ("shared_tiling", "coalesced", "block_256"), _shared(t, pad)),
        Variant("register_block4", ("register_blocking", "unrolled", "readonly_cache", "block_128"),
                _regblock(t, pad)),
        Variant("strided_signals", ("strided", "block_256", "pageable"), _strided(t, pad)),
        Variant("per_signal_copies", ("many_launches", "in_loop_transfers", "block_128"), _per_signal(t, pad)),
        Variant("serial_chunks", ("small_grid", "block_64"), _serial_chunks(t, pad)),
        Variant("streams_registered", ("async_streams", "pinned", "extra_transfers", "block_256", "readonly_cache"),
                _streams(t, pad)),
    )
    return GeneratedTask(task, variants, {"type": t, "radius": r, "padding": pad, "nsig": nsig, "n_time": n_time})


FAMILY = Family(
    name="conv1d",
    description="batched 1-D correlation with zero or clamped padding, widths 3..63 (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("stencil",),
)
