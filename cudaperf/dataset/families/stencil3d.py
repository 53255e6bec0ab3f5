"""A few Jacobi steps of a 7- or 27-point 3-D stencil on an nz x ny x nx row-major grid (float/double); the six
faces of the box stay fixed.

Parameters: 7 or 27 points, the weights (isotropic/anisotropic diffusion, distance-class smoothing, random
positive weights; summing to just under 1), the element type, the box shape and the number of steps.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["heat7", "aniso7", "class27", "random7", "random27"]
SHAPES = [(96, 256, 256), (64, 300, 317), (128, 160, 301), (50, 400, 311), (80, 200, 400), (105, 250, 237)]


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


def _terms(kind: str, rng: np.random.Generator) -> list[tuple[int, int, int, float]]:
    seven = [(-1, 0, 0), (0, -1, 0), (0, 0, -1), (0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0)]
    full = [(dz, dy, dx) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    if kind == "heat7":
        c = float(rng.uniform(0.03, 0.16))
        ws = [1 - 6 * c if p == (0, 0, 0) else c for p in seven]
        pts = seven
    elif kind == "aniso7":
        cz, cy, cx = (float(x) for x in rng.uniform(0.02, 0.15, 3))
        cw = {0: cz, 1: cy, 2: cx}
        ws = []
        for p in seven:
            if p == (0, 0, 0):
                ws.append(1 - 2 * (cz + cy + cx))
            else:
                ws.append(cw[[abs(v) for v in p].index(1)])
        pts = seven
    elif kind == "random7":
        ws = [float(x) for x in rng.uniform(0.1, 1.0, 7)]
        pts = seven
    elif kind == "class27":
        cls = [float(rng.uniform(0.2, 0.5)), float(rng.uniform(0.05, 0.1)), float(rng.uniform(0.02, 0.05)),
               float(rng.uniform(0.005, 0.02))]
        ws = [cls[abs(dz) + abs(dy) + abs(dx)] for dz, dy, dx in full]
        pts = full
    else:
        ws = [float(x) for x in rng.uniform(0.1, 1.0, 27)]
        pts = full
    s = sum(ws)
    ws = [round(w / s * 0.999, 6) for w in ws]
    return [(*p, w) for p, w in zip(pts, ws)]


def _o(k: int) -> str:
    return "" if k == 0 else (f" + {k}" if k > 0 else f" - {-k}")


def _expr(terms, t: str, load) -> str:
    suf = "f" if t == "float" else ""
    return " + ".join(f"{w:.6f}{suf} * {load(dz, dy, dx)}" for dz, dy, dx, w in terms)


def _g(arr: str):
    return lambda dz, dy, dx: f"{arr}[((size_t)(z{_o(dz)}) * ny + (y{_o(dy)})) * nx + x{_o(dx)}]"


HEAD = "#include <cuda_runtime.h>\n\n"
SIG = ('extern "C" void stencil3d(int nz, int ny, int nx, int steps, @T@* u) {\n'
       "    if (nz < 3 || ny < 3 || nx < 3 || steps <= 0) return;\n")
ALLOC = """    size_t bytes = (size_t)nz * ny * nx * sizeof(@T@);
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
INTERIOR = "z >= 1 && z < nz - 1 && y >= 1 && y < ny - 1 && x >= 1 && x < nx - 1"
OUT = "b[((size_t)z * ny + y) * nx + x]"


def _full(t, kernel, pre, launch):
    return _sub(HEAD + kernel + "\n" + SIG + ALLOC + pre + LOOP + FINISH, LAUNCH=launch, T=t)


def _naive3d(t, terms, bx, by, bz, strided):
    if strided:
        idx = ("    int z = blockIdx.x * blockDim.x + threadIdx.x;   // a warp walks along z: stride ny*nx\n"
               "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
               "    int x = blockIdx.z * blockDim.z + threadIdx.z;\n")
        grid = f"dim3 grid((nz + {bx - 1}) / {bx}, (ny + {by - 1}) / {by}, (nx + {bz - 1}) / {bz})"
    else:
        idx = ("    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
               "    int z = blockIdx.z * blockDim.z + threadIdx.z;\n")
        grid = f"dim3 grid((nx + {bx - 1}) / {bx}, (ny + {by - 1}) / {by}, (nz + {bz - 1}) / {bz})"
    k = ("__global__ void step3d(int nz, int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         + idx + f"    if ({INTERIOR}) {OUT} = {_expr(terms, t, _g('a'))};\n}}\n")
    return _full(t, k, f"    dim3 block({bx}, {by}, {bz});\n    {grid};\n",
                 "step3d<<<grid, block>>>(nz, ny, nx, da, db)")


def _zmarch_regs(t, terms):
    offs = sorted({(dy, dx) for _, dy, dx, _ in terms})
    no = len(offs)
    kidx = {o: i for i, o in enumerate(offs)}
    names = {-1: "m", 0: "c", 1: "p"}
    ld = lambda dz, dy, dx: f"{names[dz]}[{kidx[(dy, dx)]}]"  # noqa: E731
    dys = ", ".join(str(o[0]) for o in offs)
    dxs = ", ".join(str(o[1]) for o in offs)
    k = ("// 2-D blocks over (x, y); each thread marches up z keeping a 3-plane window of its neighbourhood in registers\n"
         f"__constant__ int c_dy[{no}] = {{{dys}}};\n__constant__ int c_dx[{no}] = {{{dxs}}};\n\n"
         "__global__ void step_zmarch(int nz, int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
         "    if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1) return;\n"
         "    size_t plane = (size_t)ny * nx;\n"
         f"    @T@ m[{no}], c[{no}], p[{no}];\n"
         "#pragma unroll\n"
         f"    for (int k = 0; k < {no}; ++k) {{\n"
         "        size_t off = (size_t)(y + c_dy[k]) * nx + x + c_dx[k];\n"
         "        m[k] = a[off];\n        c[k] = a[plane + off];\n    }\n"
         "    for (int z = 1; z < nz - 1; ++z) {\n"
         "#pragma unroll\n"
         f"        for (int k = 0; k < {no}; ++k) p[k] = a[(size_t)(z + 1) * plane + (size_t)(y + c_dy[k]) * nx + x + c_dx[k]];\n"
         f"        b[(size_t)z * plane + (size_t)y * nx + x] = {_expr(terms, t, ld)};\n"
         "#pragma unroll\n"
         f"        for (int k = 0; k < {no}; ++k) {{ m[k] = c[k]; c[k] = p[k]; }}\n"
         "    }\n}\n")
    return _full(t, k, "    dim3 block(32, 8);\n    dim3 grid((nx + 31) / 32, (ny + 7) / 8);\n",
                 "step_zmarch<<<grid, block>>>(nz, ny, nx, da, db)")


def _zmarch_shared(t, terms):
    slot = {-1: "sm", 0: "sc", 1: "sp"}
    ld = lambda dz, dy, dx: f"tile[{slot[dz]}][ty + 1{_o(dy)}][tx + 1{_o(dx)}]"  # noqa: E731
    k = ("// 2-D blocks march up z; three (8+2) x (32+2) planes rotate through shared memory\n"
         "__device__ void load_plane(@T@ (*t)[34], const @T@* a, int zz, int ny, int nx, int x0, int y0) {\n"
         "    for (int k = threadIdx.y * 32 + threadIdx.x; k < 340; k += 256) {\n"
         "        int ly = k / 34, lx = k % 34;\n"
         "        int gy = y0 + ly, gx = x0 + lx;\n"
         "        t[ly][lx] = (gy >= 0 && gy < ny && gx >= 0 && gx < nx) ? a[((size_t)zz * ny + gy) * nx + gx] : (@T@)0;\n"
         "    }\n}\n\n"
         "__global__ void step_zshared(int nz, int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    __shared__ @T@ tile[3][10][34];\n"
         "    int tx = threadIdx.x, ty = threadIdx.y;\n"
         "    int x0 = blockIdx.x * 32 - 1, y0 = blockIdx.y * 8 - 1;\n"
         "    int x = x0 + 1 + tx, y = y0 + 1 + ty;\n"
         "    load_plane(tile[0], a, 0, ny, nx, x0, y0);\n"
         "    load_plane(tile[1], a, 1, ny, nx, x0, y0);\n"
         "    for (int z = 1; z < nz - 1; ++z) {\n"
         "        int sm = (z - 1) % 3, sc = z % 3, sp = (z + 1) % 3;\n"
         "        load_plane(tile[sp], a, z + 1, ny, nx, x0, y0);\n"
         "        __syncthreads();\n"
         f"        if (x >= 1 && x < nx - 1 && y >= 1 && y < ny - 1) {OUT} = {_expr(terms, t, ld)};\n"
         "        __syncthreads();\n"
         "    }\n}\n")
    return _full(t, k, "    dim3 block(32, 8);\n    dim3 grid((nx + 31) / 32, (ny + 7) / 8);\n",
                 "step_zshared<<<grid, block>>>(nz, ny, nx, da, db)")


def _flat(t, terms):
    k = ("__global__ void step_flat(int nz, int ny, int nx, const @T@* __restrict__ a, @T@* __restrict__ b) {\n"
         "    size_t total = (size_t)nz * ny * nx;\n"
         "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {\n"
         "        int x = (int)(i % nx);\n        size_t r = i / nx;\n"
         "        int y = (int)(r % ny);\n        int z = (int)(r / ny);\n"
         f"        if ({INTERIOR}) b[i] = {_expr(terms, t, _g('a'))};\n    }}\n}}\n")
    pre = ("    int sms = 0;\n    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
           "    int blocks = sms * 16;\n")
    return _full(t, k, pre, "step_flat<<<blocks, 128>>>(nz, ny, nx, da, db)")


def _thread_per_row(t, terms):
    k = ("// one thread per (z, y) row sweeps x: neighbouring threads are a row apart\n"
         "__global__ void step_rows(int nz, int ny, int nx, const @T@* a, @T@* b) {\n"
         "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    if (r >= nz * ny) return;\n"
         "    int z = r / ny, y = r % ny;\n"
         "    if (z < 1 || z >= nz - 1 || y < 1 || y >= ny - 1) return;\n"
         "    for (int x = 1; x < nx - 1; ++x)\n"
         f"        {OUT} = {_expr(terms, t, _g('a'))};\n}}\n")
    return _full(t, k, "", "step_rows<<<(nz * ny + 63) / 64, 64>>>(nz, ny, nx, da, db)")


def _in_loop(t, terms):
    k = ("__global__ void step_all(int nz, int ny, int nx, const @T@* a, @T@* b) {\n"
         "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
         "    int z = blockIdx.z;\n"
         "    if (x >= nx || y >= ny) return;\n"
         f"    if ({INTERIOR}) {OUT} = {_expr(terms, t, _g('a'))};\n"
         f"    else {OUT} = a[((size_t)z * ny + y) * nx + x];\n}}\n\n")
    host = (SIG + """    size_t bytes = (size_t)nz * ny * nx * sizeof(@T@);
    @T@ *da, *db;
    cudaMalloc(&da, bytes);
    cudaMalloc(&db, bytes);
    dim3 block(32, 4);
    dim3 grid((nx + 31) / 32, (ny + 3) / 4, nz);
    for (int s = 0; s < steps; ++s) {
        cudaMemcpy(da, u, bytes, cudaMemcpyHostToDevice);
        step_all<<<grid, block>>>(nz, ny, nx, da, db);
        cudaMemcpy(u, db, bytes, cudaMemcpyDeviceToHost);
    }
    cudaFree(da);
    cudaFree(db);
}
""")
    return _sub(HEAD + k + host, T=t)


def _reference(t, terms):
    code = ("#include <stdlib.h>\n#include <string.h>\n\n"
            "void stencil3d(int nz, int ny, int nx, int steps, @T@* u) {\n"
            "    if (nz < 3 || ny < 3 || nx < 3 || steps <= 0) return;\n"
            "    size_t bytes = (size_t)nz * ny * nx * sizeof(@T@);\n"
            "    @T@* v = (@T@*)malloc(bytes);\n    memcpy(v, u, bytes);\n"
            "    @T@* a = u;\n    @T@* b = v;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        for (int z = 1; z < nz - 1; ++z)\n"
            "            for (int y = 1; y < ny - 1; ++y)\n"
            "                for (int x = 1; x < nx - 1; ++x)\n"
            f"                    {OUT} = {_expr(terms, t, _g('a'))};\n"
            "        @T@* tmp = a; a = b; b = tmp;\n    }\n"
            "    if (a != u) memcpy(u, a, bytes);\n    free(v);\n}\n")
    return _sub(code, T=t)


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    kind = KINDS[index % len(KINDS)]
    terms = _terms(kind, rng)
    npts = len(terms)
    nz, ny, nx = SHAPES[(index * 5 + 2) % len(SHAPES)]
    if npts == 27:
        nz //= 2
    ns_per_point = {("float", 7): 5.0, ("float", 27): 12.0, ("double", 7): 7.0, ("double", 27): 16.0}[(t, npts)]
    steps = int(float(rng.uniform(60, 110)) * 1e6 / (nz * ny * nx * ns_per_point))
    steps = max(2, min(16, steps))
    tol = {"rtol": 1e-4, "atol": 1e-5} if t == "float" else {"rtol": 1e-9, "atol": 1e-12}
    task = {
        "function_name": "stencil3d",
        "description": (f"{npts}-point {kind} stencil on an nz x ny x nx row-major {t} box: steps Jacobi sweeps of "
                        f"u[z][y][x] = sum w * u[z+dz][y+dy][x+dx] over (dz, dy, dx, w) in {terms} for interior "
                        "points; the six faces stay fixed."),
        "returns": "void",
        "args": [
            {"name": "nz", "role": "scalar", "ctype": "int"},
            {"name": "ny", "role": "scalar", "ctype": "int"},
            {"name": "nx", "role": "scalar", "ctype": "int"},
            {"name": "steps", "role": "scalar", "ctype": "int"},
            {"name": "u", "role": "inout", "ctype": t, "length": "nz * ny * nx",
             "dist": {"kind": "uniform", "low": 0.0, "high": 1.0}},
        ],
        "size_configs": [{"nz": 5, "ny": 6, "nx": 7, "steps": 2},
                         {"nz": 17, "ny": 19 + int(rng.integers(5)), "nx": 35, "steps": 3},
                         {"nz": 33, "ny": 40, "nx": 70 + int(rng.integers(10)), "steps": 2},
                         {"nz": nz, "ny": ny, "nx": nx, "steps": steps}],
        "tolerance": tol,
        "reference_c": _reference(t, terms),
        "tags": ["stencil", "3d", "iterative", t],
    }
    dev = ("device_resident", "double_buffered", "many_launches")
    variants = (
        Variant("naive_32x4x2", ("naive", "coalesced", "block_256", "pageable") + dev,
                _naive3d(t, terms, 32, 4, 2, False)),
        Variant("naive_8x8x8", ("naive", "block_512") + dev, _naive3d(t, terms, 8, 8, 8, False)),
        Variant("zmarch_registers", ("register_blocking", "unrolled", "coalesced", "constant_memory", "block_256")
                + dev, _zmarch_regs(t, terms)),
        Variant("zmarch_shared", ("shared_tiling", "coalesced", "block_256") + dev, _zmarch_shared(t, terms)),
        Variant("flat_grid_stride", ("grid_stride", "coalesced", "block_128") + dev, _flat(t, terms)),
        Variant("strided_z_fastest", ("naive", "strided", "block_256") + dev, _naive3d(t, terms, 32, 4, 2, True)),
        Variant("thread_per_row", ("thread_per_row", "strided", "block_64") + dev, _thread_per_row(t, terms)),
        Variant("transfers_every_step", ("naive", "in_loop_transfers", "many_launches", "block_128", "pageable"),
                _in_loop(t, terms)),
    )
    return GeneratedTask(task, variants, {"type": t, "kind": kind, "points": npts, "terms": terms,
                                          "shape": [nz, ny, nx], "steps_time": steps})


FAMILY = Family(
    name="stencil3d",
    description="A few Jacobi steps of a 7- or 27-point 3-D stencil with fixed faces (float/double)",
    generate=generate,
    n_tasks=50,
    tags=("stencil",),
)
