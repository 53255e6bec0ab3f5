"""Escape-time iteration counts of Mandelbrot / Julia / burning-ship / tricorn / multibrot sets over a pixel grid.

Parameters: the set, the viewing window, the iteration limit and the resolution. Arithmetic is double with every
multiply and add rounded separately (the reference disables FMA contraction; the CUDA variants use
``__dmul_rn``/``__dadd_rn``/``__dsub_rn``), so integer counts match exactly.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# kind -> list of windows (x0, x1, y0, y1); Julia windows carry the constant c as (cr, ci) in a second table
WINDOWS = {
    "mandelbrot": [(-2.2, 0.8, -1.2, 1.2), (-0.80, -0.70, 0.05, 0.15), (-1.80, -1.70, -0.05, 0.05),
                   (-0.16, -0.10, 1.00, 1.06), (0.25, 0.45, -0.1, 0.1)],
    "julia": [(-1.6, 1.6, -1.0, 1.0), (-0.8, 0.8, -0.6, 0.6), (-0.3, 0.3, -0.3, 0.3)],
    "burning_ship": [(-2.2, 1.4, -2.0, 0.8), (-1.85, -1.65, -0.12, 0.03), (-1.2, 0.2, -1.2, 0.2)],
    "tricorn": [(-2.2, 1.6, -1.6, 1.6), (-0.6, 0.2, 0.6, 1.2)],
    "multibrot3": [(-1.4, 1.4, -1.4, 1.4), (-0.6, 0.2, 0.6, 1.1)],
}
JULIA_C = [(-0.8, 0.156), (0.285, 0.01), (-0.4, 0.6), (-0.70176, -0.3842), (0.355, 0.355)]
KINDS = list(WINDOWS)


def _body(kind: str, jc: tuple[float, float] | None) -> str:
    """Escape loop over (px, py): the same text in C and CUDA (M/A/S are the separately rounded ops)."""
    if kind == "julia":
        init = f"double zx = px, zy = py; const double cx = {jc[0]!r}, cy = {jc[1]!r};\n"
    else:
        init = "double zx = 0.0, zy = 0.0; const double cx = px, cy = py;\n"
    if kind in ("mandelbrot", "julia"):
        step = "zy = A(M(M(2.0, zx), zy), cy); zx = A(S(zx2, zy2), cx);"
    elif kind == "burning_ship":
        step = "zy = A(M(M(2.0, fabs(zx)), fabs(zy)), cy); zx = A(S(zx2, zy2), cx);"
    elif kind == "tricorn":
        step = "zy = A(M(M(-2.0, zx), zy), cy); zx = A(S(zx2, zy2), cx);"
    else:  # z^3 + c
        step = ("double nx = A(M(zx, S(zx2, M(3.0, zy2))), cx); "
                "zy = A(M(zy, S(M(3.0, zx2), zy2)), cy); zx = nx;")
    return ("    " + init
            + "    int k = 0;\n"
            "    for (; k < maxit; ++k) {\n"
            "        double zx2 = M(zx, zx), zy2 = M(zy, zy);\n"
            "        if (A(zx2, zy2) > 4.0) break;\n"
            f"        {step}\n"
            "    }\n    return k;\n")


def _np_avg_iters(kind, win, jc, maxit) -> float:
    xs = np.linspace(win[0], win[1], 48, endpoint=False)
    ys = np.linspace(win[2], win[3], 36, endpoint=False)
    px, py = np.meshgrid(xs, ys)
    if kind == "julia":
        zx, zy = px.copy(), py.copy()
        cx, cy = np.full_like(px, jc[0]), np.full_like(py, jc[1])
    else:
        zx, zy = np.zeros_like(px), np.zeros_like(py)
        cx, cy = px, py
    cnt = np.zeros(px.shape)
    alive = np.ones(px.shape, bool)
    with np.errstate(all="ignore"):
        for _ in range(maxit):
            zx2, zy2 = zx * zx, zy * zy
            alive &= (zx2 + zy2) <= 4.0
            if not alive.any():
                break
            cnt += alive
            if kind == "burning_ship":
                nzy = 2 * np.abs(zx) * np.abs(zy) + cy
                nzx = zx2 - zy2 + cx
            elif kind == "tricorn":
                nzy = -2 * zx * zy + cy
                nzx = zx2 - zy2 + cx
            elif kind == "multibrot3":
                nzx = zx * (zx2 - 3 * zy2) + cx
                nzy = zy * (3 * zx2 - zy2) + cy
            else:
                nzy = 2 * zx * zy + cy
                nzx = zx2 - zy2 + cx
            zx = np.where(alive, nzx, 0.0)
            zy = np.where(alive, nzy, 0.0)
    return float(cnt.mean()) + 1.0


HEAD = ("#include <cuda_runtime.h>\n#include <math.h>\n\n"
        "__device__ __forceinline__ double M(double a, double b) { return __dmul_rn(a, b); }\n"
        "__device__ __forceinline__ double A(double a, double b) { return __dadd_rn(a, b); }\n"
        "__device__ __forceinline__ double S(double a, double b) { return __dsub_rn(a, b); }\n\n")

SIG = 'extern "C" void fractal(int width, int height, int maxit, int* iters)'


def _dev(body: str, win) -> str:
    return (f"__device__ int escape(double px, double py, int maxit) {{\n{body}}}\n\n"
            "__device__ __forceinline__ int pixel(int row, int col, int width, int height, int maxit) {\n"
            f"    double dx = ({win[1]!r} - {win[0]!r}) / (double)width;\n"
            f"    double dy = ({win[3]!r} - {win[2]!r}) / (double)height;\n"
            f"    double px = A({win[0]!r}, M((double)col, dx));\n"
            f"    double py = A({win[2]!r}, M((double)row, dy));\n"
            "    return escape(px, py, maxit);\n}\n\n")


ALLOC = ("    size_t count = (size_t)width * height;\n"
         "    int* d = 0;\n    cudaMalloc(&d, count * sizeof(int));\n")
TAIL = ("    cudaMemcpy(iters, d, count * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "    cudaFree(d);\n}\n")
GUARD = "    if (width <= 0 || height <= 0) return;\n"


def _naive1d(pre, block):
    return (pre + "__global__ void frac_kernel(int width, int height, int maxit, int* out) {\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= (long long)width * height) return;\n"
            "    int row = (int)(i / width), col = (int)(i % width);\n"
            "    out[i] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + f"    frac_kernel<<<(unsigned)((count + {block - 1}) / {block}), {block}>>>(width, height, maxit, d);\n"
            + TAIL)


def _block2d(pre, bx, by):
    return (pre + "__global__ void frac_kernel(int width, int height, int maxit, int* out) {\n"
            "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (col < width && row < height)\n"
            "        out[(size_t)row * width + col] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + f"    dim3 block({bx}, {by});\n"
            f"    dim3 grid((width + {bx - 1}) / {bx}, (height + {by - 1}) / {by});\n"
            "    frac_kernel<<<grid, block>>>(width, height, maxit, d);\n" + TAIL)


def _grid_stride(pre):
    return (pre + "__global__ void frac_kernel(int width, int height, int maxit, int* out) {\n"
            "    long long total = (long long)width * height;\n"
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;\n"
            "         i += (long long)gridDim.x * blockDim.x)\n"
            "        out[i] = pixel((int)(i / width), (int)(i % width), width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    frac_kernel<<<sms * 8, 256>>>(width, height, maxit, d);\n" + TAIL)


def _row_per_thread(pre):
    return (pre + "__global__ void frac_rows(int width, int height, int maxit, int* out) {\n"
            "    int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (row >= height) return;\n"
            "    for (int col = 0; col < width; ++col)\n"
            "        out[(size_t)row * width + col] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    frac_rows<<<(height + 63) / 64, 64>>>(width, height, maxit, d);\n" + TAIL)


def _block_per_row(pre):
    return (pre + "__global__ void frac_rows(int width, int height, int maxit, int* out) {\n"
            "    int row = blockIdx.x;\n"
            "    for (int col = threadIdx.x; col < width; col += blockDim.x)\n"
            "        out[(size_t)row * width + col] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    frac_rows<<<height, 128>>>(width, height, maxit, d);\n" + TAIL)


def _column_major(pre):
    return (pre + "__global__ void frac_cols(int width, int height, int maxit, int* out) {\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= (long long)width * height) return;\n"
            "    int row = (int)(i % height), col = (int)(i / height);\n"
            "    out[(size_t)row * width + col] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    frac_cols<<<(unsigned)((count + 255) / 256), 256>>>(width, height, maxit, d);\n" + TAIL)


def _launch_per_row(pre):
    return (pre + "__global__ void frac_row(int row, int width, int height, int maxit, int* out) {\n"
            "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (col < width) out[(size_t)row * width + col] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    for (int row = 0; row < height; ++row)\n"
            "        frac_row<<<(width + 127) / 128, 128>>>(row, width, height, maxit, d);\n" + TAIL)


def _pinned_rows_async(pre):
    return (pre + "__global__ void frac_kernel(int row0, int nrows, int width, int height, int maxit, int* out) {\n"
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= (long long)nrows * width) return;\n"
            "    int row = row0 + (int)(i / width), col = (int)(i % width);\n"
            "    out[i] = pixel(row, col, width, height, maxit);\n}\n\n"
            + SIG + " {\n" + GUARD + ALLOC
            + "    int* h = 0;\n    cudaMallocHost(&h, count * sizeof(int));\n"
            "    const int S = 4;\n    cudaStream_t s[S];\n"
            "    for (int k = 0; k < S; ++k) cudaStreamCreate(&s[k]);\n"
            "    int band = (height + S - 1) / S;\n"
            "    for (int k = 0; k < S; ++k) {\n"
            "        int r0 = k * band; int nr = height - r0 < band ? height - r0 : band;\n"
            "        if (nr <= 0) break;\n"
            "        size_t off = (size_t)r0 * width, cnt = (size_t)nr * width;\n"
            "        frac_kernel<<<(unsigned)((cnt + 255) / 256), 256, 0, s[k]>>>(r0, nr, width, height, maxit, d + off);\n"
            "        cudaMemcpyAsync(h + off, d + off, cnt * sizeof(int), cudaMemcpyDeviceToHost, s[k]);\n"
            "    }\n"
            "    for (int k = 0; k < S; ++k) { cudaStreamSynchronize(s[k]); cudaStreamDestroy(s[k]); }\n"
            "    for (size_t i = 0; i < count; ++i) iters[i] = h[i];\n"
            "    cudaFreeHost(h);\n    cudaFree(d);\n}\n")


def _reference(body: str, win) -> str:
    return ('#pragma GCC optimize ("fp-contract=off")\n#include <math.h>\n\n'
            "static double M(double a, double b) { return a * b; }\n"
            "static double A(double a, double b) { return a + b; }\n"
            "static double S(double a, double b) { return a - b; }\n\n"
            f"static int escape(double px, double py, int maxit) {{\n{body}}}\n\n"
            "void fractal(int width, int height, int maxit, int* iters) {\n"
            f"    double dx = ({win[1]!r} - {win[0]!r}) / (double)width;\n"
            f"    double dy = ({win[3]!r} - {win[2]!r}) / (double)height;\n"
            "    for (int row = 0; row < height; ++row) {\n"
            f"        double py = A({win[2]!r}, M((double)row, dy));\n"
            "        for (int col = 0; col < width; ++col) {\n"
            f"            double px = A({win[0]!r}, M((double)col, dx));\n"
            "            iters[(long)row * width + col] = escape(px, py, maxit);\n"
            "        }\n    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    wins = WINDOWS[kind]
    win = wins[(index // len(KINDS) + int(rng.integers(len(wins)))) % len(wins)]
    jc = JULIA_C[int(rng.integers(len(JULIA_C)))] if kind == "julia" else None
    maxit = [200, 300, 500, 800, 1000, 1500][int(rng.integers(6))]
    body = _body(kind, jc)
    avg = _np_avg_iters(kind, win, jc, maxit)
    # about 1e7 escape iterations for the reference at the timing size
    pixels = max(128 * 128, min(4096 * 4096, int(1.0e7 / avg)))
    aspect = (win[1] - win[0]) / (win[3] - win[2])
    height = max(64, int(round((pixels / aspect) ** 0.5)))
    width = max(64, pixels // height) + int(rng.integers(0, 7))
    task = {
        "function_name": "fractal",
        "description": (f"Escape-time iteration counts (0..maxit) of the {kind} set"
                        f"{f' with c = {jc}' if jc else ''} over the window x in [{win[0]}, {win[1]}), "
                        f"y in [{win[2]}, {win[3]}), one pixel per (row, col), double arithmetic without FMA."),
        "returns": "void",
        "args": [
            {"name": "width", "role": "scalar", "ctype": "int"},
            {"name": "height", "role": "scalar", "ctype": "int"},
            {"name": "maxit", "role": "scalar", "ctype": "int"},
            {"name": "iters", "role": "out", "ctype": "int", "length": "width * height"},
        ],
        "size_configs": [{"width": 37, "height": 29, "maxit": maxit},
                         {"width": 301 + int(rng.integers(20)), "height": 203, "maxit": maxit},
                         {"width": width, "height": height, "maxit": maxit}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(body, win),
        "tags": ["compute-bound", "integer", "double", "fractal"],
    }
    pre = HEAD + _dev(body, win)
    variants = (
        Variant("naive_1d_b256", ("naive", "coalesced", "block_256", "pageable"), _naive1d(pre, 256)),
        Variant("naive_1d_b32", ("naive", "coalesced", "block_32", "pageable"), _naive1d(pre, 32)),
        Variant("block2d_16x16", ("naive", "coalesced", "block_256", "pageable"), _block2d(pre, 16, 16)),
        Variant("block2d_8x8", ("naive", "coalesced", "block_64", "pageable"), _block2d(pre, 8, 8)),
        Variant("grid_stride", ("grid_stride", "coalesced", "block_256", "pageable"), _grid_stride(pre)),
        Variant("block_per_row", ("block_per_row", "coalesced", "block_128", "pageable"), _block_per_row(pre)),
        Variant("row_per_thread", ("thread_per_row", "strided", "small_grid", "block_64", "pageable"),
                _row_per_thread(pre)),
        Variant("column_major", ("strided", "block_256", "pageable"), _column_major(pre)),
        Variant("launch_per_row", ("many_launches", "coalesced", "block_128", "pageable"), _launch_per_row(pre)),
        Variant("pinned_streams", ("pinned", "async_streams", "extra_transfers", "block_256"),
                _pinned_rows_async(pre)),
    )
    params = {"kind": kind, "window": win, "julia_c": jc, "maxit": maxit, "avg_iters_est": avg,
              "width": width, "height": height}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="fractal_iter",
    description="escape-time iteration counts of Mandelbrot/Julia/burning-ship/tricorn/multibrot sets (double, no FMA)",
    generate=generate,
    n_tasks=50,
    tags=("compute-bound", "integer", "fractal"),
)
