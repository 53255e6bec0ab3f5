"""T Jacobi steps of a 5- or 9-point stencil on an ny x nx row-major grid (float/double); the outer ring of the
grid stays fixed.

Parameters: 5 or 9 points, the weights (isotropic or anisotropic diffusion, smoothing, skewed advection; all
positive and summing to just under 1 so the field stays bounded), the element type, the grid shape (square, wide,
tall) and the number of steps.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["heat5", "aniso5", "iso9", "random9", "skew5", "random5", "box9"]
SHAPES = [(1024, 1024), (768, 2051), (2001, 640), (1200, 1201), (1500, 999), (640, 2500), (1100, 1300)]


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


def _terms(kind: str, rng: np.random.Generator) -> list[tuple[int, int, float]]:
    five = [(-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)]
    nine = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    if kind == "heat5":
        c = float(rng.uniform(0.05, 0.24))
        ws = [c, c, 1 - 4 * c, c, c]
        pts = five
    elif kind == "aniso5":
        cx, cy = float(rng.uniform(0.05, 0.24)), float(rng.uniform(0.02, 0.12))
        ws = [cy, cx, 1 - 2 * cx - 2 * cy, cx, cy]
        pts = five
    elif kind in ("skew5", "random5"):
        ws = [float(x) for x in rng.uniform(0.1, 1.0, 5)]
        if kind == "skew5":
            ws[1] *= 3.0
        pts = five
    elif kind == "iso9":
        w0, w1, w2 = float(rng.uniform(0.2, 0.5)), float(rng.uniform(0.1, 0.2)), float(rng.uniform(0.02, 0.08))
        ws = [w2 if dy and dx else (w0 if not dy and not dx else w1) for dy, dx in nine]
        pts = nine
    elif kind == "box9":
        ws = [1.0] * 9
        pts = nine
    else:
        ws = [float(x) for x in rng.uniform(0.1, 1.0, 9)]
        pts = nine
    s = sum(ws)
    ws = [round(w / s * 0.999, 6) for w in ws]
    return [(dy, dx, w) for (dy, dx), w in zip(pts, ws)]


def _expr(terms, t: str, load) -> str:
    suf = "f" if t == "float" else ""
    return " + ".join(f"{w:.6f}{suf} * {load(dy, dx)}" for dy, dx, w in terms)


def _o(k: int) -> str:
    return "" if k == 0 else (f" + {k}" if k > 0 else f" - {-k}")


def _g(arr: str):
    return lambda dy, dx: f"{arr}[(y{_o(dy)}) * nx + x{_o(dx)}]"


HEAD = "#include <cuda_runtime.h>\n\n"
SIG = 'extern "C" void jacobi2d(int ny, int nx, int steps, @T@* u) {\n    if (ny < 3 || nx < 3 || steps <= 0) return;\n'
ALLOC = """    size_t bytes = (size_t)ny * nx * sizeof(@T@);
    @T@ *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(db, da, bytes, cudaMemcpyDeviceToDevice);
"""
LOOP = """    for (int s = 0; s < steps; ++s) {
        @LAUNCH@;
        @T@* tmp = da; da = db; db = tmp;
    }
"""
FINISH = """    cudaMemcpy(u, da, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
}
"""
INTERIOR = "y >= 1 && y < ny - 1 && x >= 1 && x < nx - 1"


def _full(t, kernel, pre, launch):
    return _sub(HEAD + kernel + "\n" + SIG + ALLOC + pre + LOOP + FINISH, LAUNCH=launch, T=t)


def _naive2d(t, terms, bx, by, ldg, colmajor):
    if ldg:
        ld = lambda dy, dx: f"__ldg(&a[(y{_o(dy)}) * nx + x{_o(dx)}])"  # noqa: E731
    else:
        ld = _g("a")
    if colmajor:
        idx = ("    int y = blockIdx.x * blockDim.x + threadIdx.x;   // threads of a warp walk down a column\n"
               "    int x = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = f"dim3 grid((ny + {bx - 1}) / {bx}, (nx + {by - 1}) / {by})"
    else:
        idx = ("    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = f"dim3 grid((nx + {bx - 1}) / {bx}, (ny + {by - 1}) / {by})"
    k = ("__global__ void step2d(int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n" + idx
         + f"    if ({INTERIOR}) b[y * nx + x] = {_expr(terms, t, ld)};\n}}\n")
    return _full(t, k, f"    dim3 block({bx}, {by});\n    {grid};\n", "step2d<<<grid, block>>>(ny, nx, da, db)")


def _shared(t, terms):
    ld = lambda dy, dx: f"tile[ty + 1{_o(dy)}][tx + 1{_o(dx)}]"  # noqa: E731
    k = ("// 32x8 output tile; a (8+2) x (32+2) input tile with halo staged in shared memory\n"
         "__global__ void step_tile(int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    __shared__ @T@ tile[10][34];\n"
         "    int tx = threadIdx.x, ty = threadIdx.y;\n"
         "    int x0 = blockIdx.x * 32 - 1, y0 = blockIdx.y * 8 - 1;\n"
         "    for (int k = ty * 32 + tx; k < 340; k += 256) {\n"
         "        int ly = k / 34, lx = k % 34;\n"
         "        int gy = y0 + ly, gx = x0 + lx;\n"
         "        tile[ly][lx] = (gy >= 0 && gy < ny && gx >= 0 && gx < nx) ? a[(size_t)gy * nx + gx] : (@T@)0;\n"
         "    }\n"
         "    __syncthreads();\n"
         "    int x = blockIdx.x * 32 + tx, y = blockIdx.y * 8 + ty;\n"
         f"    if ({INTERIOR}) b[y * nx + x] = {_expr(terms, t, ld)};\n}}\n")
    return _full(t, k, "    dim3 block(32, 8);\n    dim3 grid((nx + 31) / 32, (ny + 7) / 8);\n",
                 "step_tile<<<grid, block>>>(ny, nx, da, db)")


def _thread_per_row(t, terms):
    k = ("// one thread per row sweeps all columns: neighbouring threads are a whole row apart\n"
         "__global__ void step_rows(int ny, int nx, const @T@* a, @T@* b) {\n"
         "    int y = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    if (y < 1 || y >= ny - 1) return;\n"
         "    for (int x = 1; x < nx - 1; ++x)\n"
         f"        b[y * nx + x] = {_expr(terms, t, _g('a'))};\n}}\n")
    return _full(t, k, "", "step_rows<<<(ny + 127) / 128, 128>>>(ny, nx, da, db)")


def _block_per_row(t, terms):
    k = ("__global__ void step_row_block(int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    int y = blockIdx.x + 1;\n"
         "    for (int x = 1 + threadIdx.x; x < nx - 1; x += blockDim.x)\n"
         f"        b[y * nx + x] = {_expr(terms, t, _g('a'))};\n}}\n")
    return _full(t, k, "", "step_row_block<<<ny - 2, 256>>>(ny, nx, da, db)")


def _grid_stride(t, terms):
    k = ("__global__ void step_flat(int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    int total = ny * nx;\n"
         "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {\n"
         "        int y = i / nx, x = i - y * nx;\n"
         f"        if ({INTERIOR}) b[i] = {_expr(terms, t, _g('a'))};\n    }}\n}}\n")
    pre = ("    int sms = 0;\n    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
           "    int blocks = (ny * nx + 511) / 512;\n    if (blocks > sms * 8) blocks = sms * 8;\n")
    return _full(t, k, pre, "step_flat<<<blocks, 512>>>(ny, nx, da, db)")


def _in_loop(t, terms):
    k = ("__global__ void step_all(int ny, int nx, const @T@* a, @T@* b) {\n"
         "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
         "    if (x >= nx || y >= ny) return;\n"
         f"    if ({INTERIOR}) b[y * nx + x] = {_expr(terms, t, _g('a'))};\n"
         "    else b[y * nx + x] = a[y * nx + x];\n}\n\n")
    host = (SIG + """    size_t bytes = (size_t)ny * nx * sizeof(@T@);
    @T@ *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    dim3 block(16, 16);
    dim3 grid((nx + 15) / 16, (ny + 15) / 16);
    for (int s = 0; s < steps; ++s) {
        cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
        step_all<<<grid, block>>>(ny, nx, da, db);
        cudaMemcpy(u, db, bytes, cudaMemcpyDeviceToHost);
    }
    cudaFree(da);
    cudaFree(db);
}
""")
    return _sub(HEAD + k + host, T=t)


def _reference(t, terms):
    code = ("#include <stdlib.h>\n#include <string.h>\n\n"
            "void jacobi2d(int ny, int nx, int steps, @T@* u) {\n"
            "    if (ny < 3 || nx < 3 || steps <= 0) return;\n"
            "    size_t bytes = (size_t)ny * nx * sizeof(@T@);\n"
            "    @T@* v = (@T@*)malloc(bytes);\n    memcpy(v, u, bytes);\n"
            "    @T@* a = u;\n    @T@* b = v;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        for (int y = 1; y < ny - 1; ++y)\n"
            "            for (int x = 1; x < nx - 1; ++x)\n"
            f"                b[y * nx + x] = {_expr(terms, t, _g('a'))};\n"
            "        @T@* tmp = a; a = b; b = tmp;\n    }\n"
            "    if (a != u) memcpy(u, a, bytes);\n    free(v);\n}\n")
    return _sub(code, T=t)


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    kind = KINDS[index % len(KINDS)]
    terms = _terms(kind, rng)
    ny, nx = SHAPES[(index * 3 + 1) % len(SHAPES)]
    npts = len(terms)
    ns_per_point = {("float", 5): 1.5, ("float", 9): 2.5, ("double", 5): 2.0, ("double", 9): 3.3}[(t, npts)]
    steps = int(float(rng.uniform(60, 100)) * 1e6 / (ny * nx * ns_per_point))
    steps = max(8, min(200, steps))
    tol = {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-12}
    task = {
        "function_name": "jacobi2d",
        "description": (f"{npts}-point {kind} stencil on an ny x nx row-major {t} grid: steps Jacobi sweeps of "
                        f"u[y][x] = sum w * u[y+dy][x+dx] over (dy, dx, w) in {terms} for interior points; the "
                        "outer ring stays fixed."),
        "returns": "void",
        "args": [
            {"name": "ny", "role": "scalar", "ctype": "int"},
            {"name": "nx", "role": "scalar", "ctype": "int"},
            {"name": "steps", "role": "scalar", "ctype": "int"},
            {"name": "u", "role": "inout", "ctype": t, "length": "ny * nx",
             "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}},
        ],
        "size_configs": [{"ny": 37, "nx": 45, "steps": 4},
                         {"ny": 129 + int(rng.integers(20)), "nx": 300 + int(rng.integers(20)), "steps": 9},
                         {"ny": 250, "nx": 257, "steps": 15},
                         {"ny": ny, "nx": nx, "steps": steps}],
        "tolerance": tol,
        "reference_c": _reference(t, terms),
        "tags": ["stencil", "2d", "iterative", t],
    }
    dev = ("device_resident", "double_buffered", "many_launches")
    variants = (
        Variant("naive_16x16", ("naive", "coalesced", "block_256", "pageable") + dev,
                _naive2d(t, terms, 16, 16, False, False)),
        Variant("naive_ldg_32x8", ("naive", "coalesced", "block_256", "readonly_cache") + dev,
                _naive2d(t, terms, 32, 8, True, False)),
        Variant("naive_32x32", ("naive", "coalesced", "block_1024") + dev, _naive2d(t, terms, 32, 32, False, False)),
        Variant("colmajor_16x16", ("naive", "strided", "block_256") + dev, _naive2d(t, terms, 16, 16, False, True)),
        Variant("shared_tile_32x8", ("shared_tiling", "coalesced", "block_256") + dev, _shared(t, terms)),
        Variant("block_per_row", ("block_per_row", "coalesced", "block_256") + dev, _block_per_row(t, terms)),
        Variant("grid_stride_flat", ("grid_stride", "coalesced", "block_512") + dev, _grid_stride(t, terms)),
        Variant("thread_per_row", ("thread_per_row", "strided", "block_128") + dev, _thread_per_row(t, terms)),
        Variant("transfers_every_step", ("naive", "in_loop_transfers", "many_launches", "block_256", "pageable"),
                _in_loop(t, terms)),
    )
    return GeneratedTask(task, variants, {"type": t, "kind": kind, "points": npts, "terms": terms,
                                          "ny": ny, "nx": nx, "steps_time": steps})


FAMILY = Family(
    name="stencil2d",
    description="T Jacobi steps of a 5- or 9-point 2-D stencil with a fixed boundary ring (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("stencil",),
)
