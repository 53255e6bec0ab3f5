"""2-D image filters (box, binomial Gaussian, sharpen, emboss, Laplacian sharpen, unsharp) with clamped borders.

Parameters: the filter (10 of them, 3x3 to 7x7), the pixel type (float, or unsigned char with integer weights,
integer accumulation and C integer rounding + clamping, so results compare exactly), and the image sizes.
Separable filters get a two-pass variant (integer intermediates keep the unsigned char results bit-exact).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant


def _outer(v: list[int]) -> list[int]:
    return [a * b for a in v for b in v]


# name, K, 2-D weights (row-major), 1-D factor (separable) or None, divisor, offset added before the division
# for unsigned char (rounding / bias), offset added after the division for float
FILTERS = [
    ("box3", 3, _outer([1] * 3), [1] * 3, 9, 4, "0.0f"),
    ("gauss3", 3, _outer([1, 2, 1]), [1, 2, 1], 16, 8, "0.0f"),
    ("sharpen3", 3, [0, -1, 0, -1, 5, -1, 0, -1, 0], None, 1, 0, "0.0f"),
    ("box5", 5, _outer([1] * 5), [1] * 5, 25, 12, "0.0f"),
    ("emboss3", 3, [-2, -1, 0, -1, 1, 1, 0, 1, 2], None, 1, 128, "0.5f"),
    ("gauss5", 5, _outer([1, 4, 6, 4, 1]), [1, 4, 6, 4, 1], 256, 128, "0.0f"),
    ("laplace5", 5, [0, 0, -1, 0, 0, 0, -1, -2, -1, 0, -1, -2, 17, -2, -1, 0, -1, -2, -1, 0, 0, 0, -1, 0, 0],
     None, 1, 0, "0.0f"),
    ("box7", 7, _outer([1] * 7), [1] * 7, 49, 24, "0.0f"),
    ("unsharp5", 5, [-1] * 12 + [49] + [-1] * 12, None, 25, 12, "0.0f"),
    ("gauss7", 7, _outer([1, 6, 15, 20, 15, 6, 1]), [1, 6, 15, 20, 15, 6, 1], 4096, 2048, "0.0f"),
]

SIG = "int h, int w, const {t}* src, {t}* dst"


class _Spec:
    def __init__(self, fidx: int, uchar: bool):
        name, k, w2, w1, div, off, offf = FILTERS[fidx % len(FILTERS)]
        self.name, self.k, self.r, self.w2, self.w1, self.div, self.off, self.offf = name, k, k // 2, w2, w1, div, off, offf
        self.uchar = uchar
        self.t = "unsigned char" if self.uchar else "float"
        self.acc = "int" if self.uchar else "float"
        self.wt = "int" if self.uchar else "float"

    def lit(self, vals: list[int]) -> str:
        if self.uchar:
            return "{" + ", ".join(str(v) for v in vals) + "}"
        return "{" + ", ".join(f"{v}.0f" for v in vals) + "}"

    def fin(self, qual: str) -> str:
        if self.uchar:
            return (f"{qual}unsigned char fin(int acc) {{\n"
                    f"    int v = (acc + {self.off}) / {self.div};\n"
                    "    return (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v));\n}\n\n")
        return f"{qual}float fin(float acc) {{ return acc / {self.div}.0f + {self.offf}; }}\n\n"

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n\n"
                f"#define KS {self.k}\n#define RAD {self.r}\n\n"
                "__device__ __forceinline__ int cl(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }\n\n"
                + self.fin("__device__ __forceinline__ "))

    def const_w(self) -> str:
        return f"__constant__ {self.wt} cw[KS * KS] = {self.lit(self.w2)};\n\n"

    def entry(self) -> str:
        return (f'extern "C" void image_filter({SIG.format(t=self.t)}) {{\n'
                "    if (h <= 0 || w <= 0) return;\n"
                f"    size_t bytes = (size_t)h * w * sizeof({self.t});\n"
                f"    {self.t} *ds, *dd;\n"
                "    cudaMalloc(&ds, bytes); cudaMalloc(&dd, bytes);\n"
                "    cudaMemcpy(ds, src, bytes, cudaMemcpyHostToDevice);\n")

    FREE = "    cudaMemcpy(dst, dd, bytes, cudaMemcpyDeviceToHost);\n    cudaFree(ds); cudaFree(dd);\n}\n"

    def tap_loop(self, wexpr: str, yexpr: str = "y", xexpr: str = "x", ind: str = "    ") -> str:
        return (f"{ind}{self.acc} acc = 0;\n"
                f"{ind}for (int dy = 0; dy < KS; ++dy) {{\n"
                f"{ind}    const {self.t}* row = src + (size_t)cl({yexpr} + dy - RAD, h - 1) * w;\n"
                f"{ind}    for (int dx = 0; dx < KS; ++dx)\n"
                f"{ind}        acc += {wexpr} * ({self.acc})row[cl({xexpr} + dx - RAD, w - 1)];\n"
                f"{ind}}}\n")


def _naive(s: _Spec) -> str:
    t = s.t
    return (s.head()
            + f"static const {s.wt} hw[KS * KS] = {s.lit(s.w2)};\n\n"
            + f"__global__ void filt_naive(int h, int w, const {t}* src, {t}* dst, const {s.wt}* wt) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (x >= w || y >= h) return;\n"
            + s.tap_loop("wt[dy * KS + dx]")
            + "    dst[(size_t)y * w + x] = fin(acc);\n}\n\n"
            + s.entry()
            + f"    {s.wt}* dw;\n    cudaMalloc(&dw, sizeof(hw));\n"
            "    cudaMemcpy(dw, hw, sizeof(hw), cudaMemcpyHostToDevice);\n"
            "    dim3 block(16, 16), grid((w + 15) / 16, (h + 15) / 16);\n"
            "    filt_naive<<<grid, block>>>(h, w, ds, dd, dw);\n"
            "    cudaFree(dw);\n" + _Spec.FREE)


def _const(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + f"__global__ void filt_const(int h, int w, const {t}* __restrict__ src, {t}* __restrict__ dst) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (x >= w || y >= h) return;\n"
            + s.tap_loop("cw[dy * KS + dx]")
            + "    dst[(size_t)y * w + x] = fin(acc);\n}\n\n"
            + s.entry()
            + "    dim3 block(32, 8), grid((w + 31) / 32, (h + 7) / 8);\n"
            "    filt_const<<<grid, block>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _shared(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + "#define BX 32\n#define BY 8\n#define TW (BX + 2 * RAD)\n#define TH (BY + 2 * RAD)\n\n"
            + f"__global__ void filt_tile(int h, int w, const {t}* __restrict__ src, {t}* __restrict__ dst) {{\n"
            f"    __shared__ {t} tile[TH][TW];\n"
            "    int x0 = blockIdx.x * BX, y0 = blockIdx.y * BY;\n"
            "    int tid = threadIdx.y * BX + threadIdx.x;\n"
            "    for (int k = tid; k < TH * TW; k += BX * BY) {\n"
            "        int ty = k / TW, tx = k % TW;\n"
            "        tile[ty][tx] = src[(size_t)cl(y0 + ty - RAD, h - 1) * w + cl(x0 + tx - RAD, w - 1)];\n"
            "    }\n"
            "    __syncthreads();\n"
            "    int x = x0 + threadIdx.x, y = y0 + threadIdx.y;\n"
            "    if (x < w && y < h) {\n"
            f"        {s.acc} acc = 0;\n"
            "#pragma unroll\n"
            "        for (int dy = 0; dy < KS; ++dy) {\n"
            "#pragma unroll\n"
            "            for (int dx = 0; dx < KS; ++dx) {\n"
            f"                acc += cw[dy * KS + dx] * ({s.acc})tile[threadIdx.y + dy][threadIdx.x + dx];\n"
            "            }\n        }\n"
            "        dst[(size_t)y * w + x] = fin(acc);\n    }\n}\n\n"
            + s.entry()
            + "    dim3 block(BX, BY), grid((w + BX - 1) / BX, (h + BY - 1) / BY);\n"
            "    filt_tile<<<grid, block>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _regrows(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + "#define ROWS 4\n\n"
            + f"__global__ void filt_rows(int h, int w, const {t}* __restrict__ src, {t}* __restrict__ dst) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;\n"
            "    if (x >= w || y0 >= h) return;\n"
            f"    {s.acc} acc[ROWS];\n"
            "#pragma unroll\n    for (int k = 0; k < ROWS; ++k) acc[k] = 0;\n"
            "    for (int ry = 0; ry < KS + ROWS - 1; ++ry) {\n"
            f"        const {t}* row = src + (size_t)cl(y0 + ry - RAD, h - 1) * w;\n"
            "        for (int dx = 0; dx < KS; ++dx) {\n"
            f"            {s.acc} v = ({s.acc})__ldg(row + cl(x + dx - RAD, w - 1));\n"
            "#pragma unroll\n"
            "            for (int k = 0; k < ROWS; ++k) {\n"
            "                int dy = ry - k;\n"
            "                if (dy >= 0 && dy < KS) acc[k] += cw[dy * KS + dx] * v;\n"
            "            }\n        }\n    }\n"
            "#pragma unroll\n"
            "    for (int k = 0; k < ROWS; ++k) if (y0 + k < h) dst[(size_t)(y0 + k) * w + x] = fin(acc[k]);\n}\n\n"
            + s.entry()
            + "    int groups = (h + ROWS - 1) / ROWS;\n"
            "    dim3 block(64, 4), grid((w + 63) / 64, (groups + 3) / 4);\n"
            "    filt_rows<<<grid, block>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _separable(s: _Spec) -> str:
    t, a = s.t, s.acc
    return (s.head()
            + f"__constant__ {s.wt} c1[KS] = {s.lit(s.w1)};\n\n"
            + f"__global__ void pass_h(int h, int w, const {t}* __restrict__ src, {a}* __restrict__ tmp) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (x >= w || y >= h) return;\n"
            f"    const {t}* row = src + (size_t)y * w;\n"
            f"    {a} acc = 0;\n"
            "#pragma unroll\n"
            f"    for (int dx = 0; dx < KS; ++dx) acc += c1[dx] * ({a})row[cl(x + dx - RAD, w - 1)];\n"
            "    tmp[(size_t)y * w + x] = acc;\n}\n\n"
            + f"__global__ void pass_v(int h, int w, const {a}* __restrict__ tmp, {t}* __restrict__ dst) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
            "    if (x >= w || y >= h) return;\n"
            f"    {a} acc = 0;\n"
            "#pragma unroll\n"
            "    for (int dy = 0; dy < KS; ++dy) acc += c1[dy] * tmp[(size_t)cl(y + dy - RAD, h - 1) * w + x];\n"
            "    dst[(size_t)y * w + x] = fin(acc);\n}\n\n"
            + s.entry()
            + f"    {a}* dt;\n    cudaMalloc(&dt, (size_t)h * w * sizeof({a}));\n"
            "    dim3 block(32, 8), grid((w + 31) / 32, (h + 7) / 8);\n"
            "    pass_h<<<grid, block>>>(h, w, ds, dt);\n"
            "    pass_v<<<grid, block>>>(h, w, dt, dd);\n"
            "    cudaFree(dt);\n" + _Spec.FREE)


def _colmajor(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + f"__global__ void filt_cols(int h, int w, const {t}* src, {t}* dst) {{\n"
            "    // consecutive threads walk down a column: their accesses are a whole row apart\n"
            "    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= (long long)h * w) return;\n"
            "    int y = (int)(g % h), x = (int)(g / h);\n"
            + s.tap_loop("cw[dy * KS + dx]")
            + "    dst[(size_t)y * w + x] = fin(acc);\n}\n\n"
            + s.entry()
            + "    long long total = (long long)h * w;\n"
            "    filt_cols<<<(unsigned)((total + 255) / 256), 256>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _thread_row(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + f"__global__ void filt_row_serial(int h, int w, const {t}* src, {t}* dst) {{\n"
            "    int y = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (y >= h) return;\n"
            "    for (int x = 0; x < w; ++x) {\n"
            + s.tap_loop("cw[dy * KS + dx]", ind="        ")
            + "        dst[(size_t)y * w + x] = fin(acc);\n    }\n}\n\n"
            + s.entry()
            + "    filt_row_serial<<<(h + 63) / 64, 64>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _row_launch(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + f"__global__ void filt_one_row(int y, int h, int w, const {t}* src, {t}* dst) {{\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (x >= w) return;\n"
            + s.tap_loop("cw[dy * KS + dx]")
            + "    dst[(size_t)y * w + x] = fin(acc);\n}\n\n"
            + s.entry()
            + "    for (int y = 0; y < h; ++y)\n"
            "        filt_one_row<<<(w + 127) / 128, 128>>>(y, h, w, ds, dd);\n" + _Spec.FREE)


def _gridstride(s: _Spec) -> str:
    t = s.t
    return (s.head() + s.const_w()
            + f"__global__ void filt_flat(int h, int w, const {t}* __restrict__ src, {t}* __restrict__ dst) {{\n"
            "    long long total = (long long)h * w;\n"
            "    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < total;"
            " g += (long long)gridDim.x * blockDim.x) {\n"
            "        int y = (int)(g / w), x = (int)(g % w);\n"
            + s.tap_loop("cw[dy * KS + dx]", ind="        ")
            + "        dst[g] = fin(acc);\n    }\n}\n\n"
            + s.entry()
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    long long total = (long long)h * w;\n"
            "    long long want = (total + 511) / 512;\n"
            "    int blocks = (int)(want < (long long)sms * 4 ? want : (long long)sms * 4);\n"
            "    filt_flat<<<blocks, 512>>>(h, w, ds, dd);\n" + _Spec.FREE)


def _reference(s: _Spec) -> str:
    t, a = s.t, s.acc
    return ("#include <stddef.h>\n\n"
            "static int cl(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }\n\n"
            + f"static const {s.wt} W[{s.k * s.k}] = {s.lit(s.w2)};\n\n"
            + s.fin("static ")
            + f"void image_filter({SIG.format(t=t)}) {{\n"
            "    for (int y = 0; y < h; ++y)\n"
            "        for (int x = 0; x < w; ++x) {\n"
            f"            {a} acc = 0;\n"
            f"            for (int dy = 0; dy < {s.k}; ++dy) {{\n"
            f"                const {t}* row = src + (size_t)cl(y + dy - {s.r}, h - 1) * w;\n"
            f"                for (int dx = 0; dx < {s.k}; ++dx)\n"
            f"                    acc += W[dy * {s.k} + dx] * ({a})row[cl(x + dx - {s.r}, w - 1)];\n"
            "            }\n"
            "            dst[(size_t)y * w + x] = fin(acc);\n"
            "        }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    # the pixel type alternates with the index; each filter appears once per type
    s = _Spec(index // 2, index % 2 == 0)
    name, k = s.name, s.k
    pixels = (185e6 if s.uchar else 190e6) / (k * k)
    aspect = float(rng.choice([1.0, 0.75, 1.33, 0.5]))
    h = int((pixels * aspect) ** 0.5) + int(rng.integers(1, 31))
    w = int(pixels / h) + int(rng.integers(1, 31))
    if s.uchar:
        dist = {"kind": "randint", "low": 0, "high": 256}
        tol = {"rtol": 0.0, "atol": 0.0}
    else:
        dist = {"kind": "uniform", "low": 0.0, "high": 1.0}
        tol = {"rtol": 1e-4, "atol": 1e-4}
    fdesc = f"{name} ({k}x{k}, weights {s.w2} row-major, divisor {s.div})"
    if s.uchar:
        post = (f"acc is an int sum of weight * pixel (dy outer, dx inner); out = clamp((acc + {s.off}) / {s.div}, 0, 255) "
                "with C integer division")
    else:
        post = f"acc is a float sum of weight * pixel (dy outer, dx inner); out = acc / {s.div}.0f + {s.offf}"
    task = {
        "function_name": "image_filter",
        "description": (f"2-D {fdesc} filter of an h x w single-channel {s.t} image (row-major) with clamped "
                        f"borders (coordinates clamped to the image): {post}."),
        "returns": "void",
        "args": [
            {"name": "h", "role": "scalar", "ctype": "int"},
            {"name": "w", "role": "scalar", "ctype": "int"},
            {"name": "src", "role": "in", "ctype": s.t, "length": "h * w", "dist": dist},
            {"name": "dst", "role": "out", "ctype": s.t, "length": "h * w"},
        ],
        "size_configs": [{"h": 3, "w": 5}, {"h": 67, "w": 133 + int(rng.integers(0, 20))},
                         {"h": 301, "w": 257}, {"h": h, "w": w}],
        "tolerance": tol,
        "reference_c": _reference(s),
        "tags": ["stencil", "image", "2d", "integer" if s.uchar else "float"],
    }
    variants = [
        Variant("naive_2d", ("naive", "coalesced", "block_256", "pageable"), _naive(s)),
        Variant("const_weights", ("naive", "constant_memory", "coalesced", "block_256", "readonly_cache"), _const(s)),
        Variant("shared_tile", ("shared_tiling", "constant_memory", "unrolled", "coalesced", "block_256"),
                _shared(s)),
        Variant("register_rows4", ("register_blocking", "constant_memory", "unrolled", "readonly_cache",
                                   "block_256"), _regrows(s)),
        Variant("column_major", ("strided", "constant_memory", "block_256"), _colmajor(s)),
        Variant("thread_per_row", ("thread_per_row", "small_grid", "strided", "block_64"), _thread_row(s)),
        Variant("row_launches", ("many_launches", "constant_memory", "block_128"), _row_launch(s)),
        Variant("grid_stride", ("grid_stride", "constant_memory", "coalesced", "block_512"), _gridstride(s)),
    ]
    if s.w1 is not None:
        variants.append(Variant("separable", ("multi_pass", "constant_memory", "unrolled", "coalesced", "block_256"),
                                _separable(s)))
    return GeneratedTask(task, tuple(variants), {"filter": name, "k": k, "type": s.t, "h": h, "w": w})


FAMILY = Family(
    name="image_filter",
    description="2-D box/Gaussian/sharpen/emboss filters (3x3..7x7) on float or unsigned char images, clamped borders",
    generate=generate,
    n_tasks=50,
    tags=("stencil", "image"),
)
