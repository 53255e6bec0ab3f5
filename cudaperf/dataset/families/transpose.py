"""Out-of-place transposes out[j * rows + i] = f(in[i * cols + j]) of a rows x cols row-major matrix, with an
element map f: a plain copy, a scaling by alpha, a type conversion, or a little arithmetic.

Parameters: the input and output element types (float, double, int, unsigned int, short, unsigned short,
unsigned char), the map, and the (large, often not tile-aligned) shape. The CPU's transpose is cache- and
TLB-unfriendly at these sizes, so the tiled GPU variants win even with the transfers counted.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# (input type, output type, f(x) in C, uses alpha, input distribution, tolerance or None for exact)
FORMS = [
    ("float", "float", "x", False, {"kind": "uniform", "low": -1.0, "high": 1.0}, {"rtol": 0.0, "atol": 0.0}),
    ("double", "double", "alpha * x", True, {"kind": "uniform", "low": -2.0, "high": 2.0}, {"rtol": 1e-12, "atol": 1e-14}),
    ("unsigned char", "float", "(float)x * (1.0f / 255.0f)", False, {"kind": "randint", "low": 0, "high": 256},
     {"rtol": 1e-6, "atol": 1e-7}),
    ("int", "double", "(double)x * 0.5 + 1.0", False, {"kind": "randint", "low": -1000000, "high": 1000000},
     {"rtol": 1e-12, "atol": 1e-12}),
    ("float", "double", "(double)x * (double)x", False, {"kind": "uniform", "low": -3.0, "high": 3.0},
     {"rtol": 1e-12, "atol": 1e-14}),
    ("unsigned short", "unsigned short", "x", False, {"kind": "randint", "low": 0, "high": 65536}, None),
    ("float", "float", "expf(-x * x) * alpha", True, {"kind": "uniform", "low": -2.0, "high": 2.0},
     {"rtol": 1e-5, "atol": 1e-6}),
    ("double", "double", "sqrt(fabs(x)) + alpha * x", True, {"kind": "uniform", "low": -4.0, "high": 4.0},
     {"rtol": 1e-12, "atol": 1e-13}),
    ("short", "float", "(float)x * alpha", True, {"kind": "randint", "low": -30000, "high": 30000},
     {"rtol": 1e-6, "atol": 1e-6}),
    ("unsigned int", "unsigned int", "(x * 2654435761u) ^ (x >> 7)", False,
     {"kind": "randint", "low": 0, "high": 2000000000}, None),
    ("double", "float", "(float)x", False, {"kind": "uniform", "low": -100.0, "high": 100.0}, {"rtol": 0.0, "atol": 0.0}),
    ("int", "int", "x", False, {"kind": "randint", "low": -2000000000, "high": 2000000000}, None),
]
SHAPES = [(4096, 3000), (3001, 4099), (2048, 6000), (6007, 2000), (3500, 3500), (5000, 2501), (2777, 4444)]
SIZEOF = {"float": 4, "double": 8, "int": 4, "unsigned int": 4, "short": 2, "unsigned short": 2, "unsigned char": 1}


def _sub(code: str, **kw: object) -> str:
    for k, v in kw.items():
        code = code.replace(f"@{k}@", str(v))
    return code


HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n#include <string.h>\n\n"


def _fn(alpha: bool, expr: str) -> str:
    ap = ", @TO@ alpha" if alpha else ""
    return f"__device__ __forceinline__ @TO@ fmap(@TI@ x{ap}) {{ return {expr}; }}\n\n"


def _kp(alpha: bool) -> str:
    return ", @TO@ alpha" if alpha else ""


def _ka(alpha: bool) -> str:
    return ", alpha" if alpha else ""


def _sig(alpha: bool) -> str:
    ap = "@TO@ alpha, " if alpha else ""
    return f"void transpose(int rows, int cols, {ap}const @TI@* in, @TO@* out)"


def _host(alpha: bool, launch: str) -> str:
    return ('extern "C" ' + _sig(alpha) + " {\n"
            "    if (rows <= 0 || cols <= 0) return;\n"
            "    size_t ne = (size_t)rows * cols;\n"
            "    @TI@* din;\n    @TO@* dout;\n"
            "    cudaMalloc(&din, ne * sizeof(@TI@));\n    cudaMalloc(&dout, ne * sizeof(@TO@));\n"
            "    cudaMemcpy(din, in, ne * sizeof(@TI@), cudaMemcpyHostToDevice);\n" + launch
            + "    cudaMemcpy(out, dout, ne * sizeof(@TO@), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(din);\n    cudaFree(dout);\n}\n")


def _fm(alpha: bool, arg: str) -> str:
    return f"fmap({arg}{_ka(alpha)})"


def _naive(alpha, expr, write_coalesced):
    if write_coalesced:
        idx = ("    int i = blockIdx.x * blockDim.x + threadIdx.x;   // consecutive threads: consecutive rows of in\n"
               "    int j = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = "dim3 grid((rows + 31) / 32, (cols + 7) / 8)"
    else:
        idx = ("    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "    int i = blockIdx.y * blockDim.y + threadIdx.y;\n")
        grid = "dim3 grid((cols + 31) / 32, (rows + 7) / 8)"
    k = ("__global__ void tr_naive(int rows, int cols, const @TI@* in, @TO@* out" + _kp(alpha) + ") {\n" + idx
         + f"    if (i < rows && j < cols) out[(size_t)j * rows + i] = {_fm(alpha, 'in[(size_t)i * cols + j]')};\n}}\n\n")
    launch = (f"    dim3 block(32, 8);\n    {grid};\n"
              f"    tr_naive<<<grid, block>>>(rows, cols, din, dout{_ka(alpha)});\n")
    return HEAD + _fn(alpha, expr) + k + _host(alpha, launch)


def _tile_kernel(alpha, pad, per_thread):
    """32x32 tile; blockDim (32, 32 / per_thread); each thread moves per_thread elements."""
    by = 32 // per_thread
    w = 33 if pad else 32
    return ("__global__ void tr_tile(int rows, int cols, int row0, int nrows, const @TI@* __restrict__ in,"
            " @TO@* __restrict__ out" + _kp(alpha) + ") {\n"
            f"    __shared__ @TO@ tile[32][{w}];\n"
            "    int tx = threadIdx.x, ty = threadIdx.y;\n"
            "    int j0 = blockIdx.x * 32, i0 = row0 + blockIdx.y * 32;\n"
            "    int iend = row0 + nrows;\n"
            + ("#pragma unroll\n" if per_thread > 1 else "")
            + f"    for (int r = 0; r < 32; r += {by}) {{\n"
            "        int i = i0 + ty + r, j = j0 + tx;\n"
            f"        if (i < iend && j < cols) tile[ty + r][tx] = {_fm(alpha, 'in[(size_t)i * cols + j]')};\n"
            "    }\n"
            "    __syncthreads();\n"
            + ("#pragma unroll\n" if per_thread > 1 else "")
            + f"    for (int r = 0; r < 32; r += {by}) {{\n"
            "        int j = j0 + ty + r, i = i0 + tx;\n"
            "        if (j < cols && i < iend) out[(size_t)j * rows + i] = tile[tx][ty + r];\n"
            "    }\n}\n\n")


def _tiled(alpha, expr, pad, per_thread):
    by = 32 // per_thread
    launch = (f"    dim3 block(32, {by});\n    dim3 grid((cols + 31) / 32, (rows + 31) / 32);\n"
              f"    tr_tile<<<grid, block>>>(rows, cols, 0, rows, din, dout{_ka(alpha)});\n")
    return HEAD + _fn(alpha, expr) + _tile_kernel(alpha, pad, per_thread) + _host(alpha, launch)


def _pinned(alpha, expr):
    host = ('extern "C" ' + _sig(alpha) + " {\n"
            "    if (rows <= 0 || cols <= 0) return;\n"
            "    size_t ne = (size_t)rows * cols;\n"
            "    @TI@ *din, *hin;\n    @TO@ *dout, *hout;\n"
            "    cudaMallocHost(&hin, ne * sizeof(@TI@));\n    cudaMallocHost(&hout, ne * sizeof(@TO@));\n"
            "    memcpy(hin, in, ne * sizeof(@TI@));\n"
            "    cudaMalloc(&din, ne * sizeof(@TI@));\n    cudaMalloc(&dout, ne * sizeof(@TO@));\n"
            "    cudaMemcpy(din, hin, ne * sizeof(@TI@), cudaMemcpyHostToDevice);\n"
            "    dim3 block(32, 8);\n    dim3 grid((cols + 31) / 32, (rows + 31) / 32);\n"
            f"    tr_tile<<<grid, block>>>(rows, cols, 0, rows, din, dout{_ka(alpha)});\n"
            "    cudaMemcpy(hout, dout, ne * sizeof(@TO@), cudaMemcpyDeviceToHost);\n"
            "    memcpy(out, hout, ne * sizeof(@TO@));\n"
            "    cudaFreeHost(hin);\n    cudaFreeHost(hout);\n"
            "    cudaFree(din);\n    cudaFree(dout);\n}\n")
    return HEAD + _fn(alpha, expr) + _tile_kernel(alpha, True, 4) + host


def _row_chunks(alpha, expr):
    host = ('extern "C" ' + _sig(alpha) + " {\n"
            "    if (rows <= 0 || cols <= 0) return;\n"
            "    size_t ne = (size_t)rows * cols;\n"
            "    @TI@* din;\n    @TO@* dout;\n"
            "    cudaMalloc(&din, ne * sizeof(@TI@));\n    cudaMalloc(&dout, ne * sizeof(@TO@));\n"
            "    // copy and transpose 32 rows at a time: one small copy and one launch per band\n"
            "    for (int r0 = 0; r0 < rows; r0 += 32) {\n"
            "        int nr = rows - r0 < 32 ? rows - r0 : 32;\n"
            "        size_t off = (size_t)r0 * cols;\n"
            "        cudaMemcpy(din + off, in + off, (size_t)nr * cols * sizeof(@TI@), cudaMemcpyHostToDevice);\n"
            "        dim3 block(32, 8);\n        dim3 grid((cols + 31) / 32, 1);\n"
            f"        tr_tile<<<grid, block>>>(rows, cols, r0, nr, din, dout{_ka(alpha)});\n"
            "    }\n"
            "    cudaMemcpy(out, dout, ne * sizeof(@TO@), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(din);\n    cudaFree(dout);\n}\n")
    return HEAD + _fn(alpha, expr) + _tile_kernel(alpha, True, 4) + host


def _grid_stride(alpha, expr):
    k = ("// walk the output in order: writes coalesced, reads a column of in (stride cols)\n"
         "__global__ void tr_gs(int rows, int cols, const @TI@* in, @TO@* out" + _kp(alpha) + ") {\n"
         "    size_t ne = (size_t)rows * cols;\n"
         "    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < ne; o += (size_t)gridDim.x * blockDim.x) {\n"
         "        size_t j = o / rows, i = o % rows;\n"
         f"        out[o] = {_fm(alpha, 'in[i * cols + j]')};\n    }}\n}}\n\n")
    launch = ("    int sms = 0;\n    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
              f"    tr_gs<<<sms * 8, 256>>>(rows, cols, din, dout{_ka(alpha)});\n")
    return HEAD + _fn(alpha, expr) + k + _host(alpha, launch)


def _reference(alpha, expr):
    ap = ", @TO@ alpha" if alpha else ""
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"static @TO@ fmap(@TI@ x{ap}) {{ return {expr}; }}\n\n"
            + _sig(alpha) + " {\n"
            "    for (int i = 0; i < rows; ++i)\n"
            "        for (int j = 0; j < cols; ++j)\n"
            f"            out[(size_t)j * rows + i] = {_fm(alpha, 'in[(size_t)i * cols + j]')};\n}}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    ti, to, expr, alpha, dist, tol = FORMS[index % len(FORMS)]
    rows, cols = SHAPES[(index * 3 + index // len(FORMS)) % len(SHAPES)]
    # bigger matrices for narrow element types (the CPU cost per element is mostly cache/TLB misses)
    bytes_per = SIZEOF[ti] + SIZEOF[to]
    f = 0.85 * (float((8.0 / bytes_per) ** 0.25) if bytes_per < 8 else (0.85 if bytes_per > 8 else 1.0))
    f *= 1.0 + 0.1 * float(rng.uniform(-1, 1))
    rows, cols = max(33, int(rows * f)), max(33, int(cols * f))
    args = [{"name": "rows", "role": "scalar", "ctype": "int"}, {"name": "cols", "role": "scalar", "ctype": "int"}]
    if alpha:
        args.append({"name": "alpha", "role": "scalar", "ctype": to, "dist": {"kind": "uniform", "low": 0.5, "high": 2.0}})
    args += [{"name": "in", "role": "in", "ctype": ti, "length": "rows * cols", "dist": dist},
             {"name": "out", "role": "out", "ctype": to, "length": "rows * cols"}]
    task = {
        "function_name": "transpose",
        "description": (f"Out-of-place transpose of a rows x cols row-major {ti} matrix into a {to} matrix: "
                        f"out[j * rows + i] = f(in[i * cols + j]) with f(x) = {expr}."),
        "returns": "void",
        "args": args,
        "size_configs": [{"rows": 33, "cols": 65}, {"rows": 1025, "cols": 257 + int(rng.integers(10))},
                         {"rows": 100 + int(rng.integers(30)), "cols": 31}, {"rows": rows, "cols": cols}],
        "reference_c": "",
        "tags": ["memory-bound", "transpose", "2d", ti.replace(" ", "_"), to.replace(" ", "_")],
    }
    if tol is not None:
        task["tolerance"] = tol
    fill = {"TI": ti, "TO": to}
    task["reference_c"] = _sub(_reference(alpha, expr), **fill)
    v = [
        ("naive_read_coalesced", ("naive", "coalesced", "block_256", "pageable"), _naive(alpha, expr, False)),
        ("naive_write_coalesced", ("naive", "strided", "block_256"), _naive(alpha, expr, True)),
        ("tile32_nopad", ("shared_tiling", "coalesced", "block_1024"), _tiled(alpha, expr, False, 1)),
        ("tile32_padded", ("shared_tiling", "coalesced", "block_1024"), _tiled(alpha, expr, True, 1)),
        ("tile32_padded_4per_thread", ("shared_tiling", "coalesced", "register_blocking", "unrolled", "block_256"),
         _tiled(alpha, expr, True, 4)),
        ("tile32_nopad_4per_thread", ("shared_tiling", "coalesced", "register_blocking", "unrolled", "block_256"),
         _tiled(alpha, expr, False, 4)),
        ("grid_stride_out_order", ("grid_stride", "strided", "block_256"), _grid_stride(alpha, expr)),
        ("tiled_pinned_staging", ("shared_tiling", "coalesced", "pinned", "block_256"), _pinned(alpha, expr)),
        ("row_bands_in_loop", ("shared_tiling", "in_loop_transfers", "many_launches", "block_256"), _row_chunks(alpha, expr)),
    ]
    variants = tuple(Variant(n, tg, _sub(c, **fill)) for n, tg, c in v)
    return GeneratedTask(task, variants, {"in_type": ti, "out_type": to, "map": expr, "rows": rows, "cols": cols})


FAMILY = Family(
    name="transpose",
    description="out = f(in)^T for row-major matrices: copies, scalings, type conversions, small maps",
    generate=generate,
    n_tasks=50,
    tags=("memory-bound",),
)
