"""Chained per-pixel colour operations on interleaved RGB unsigned char images; integer outputs compare exactly.

Each task chains: per-channel value maps (brightness/contrast with clamping, a gamma lookup table computed on the
host with the same double expression as the reference, inversion, posterization), then an optional cross-channel
step (channel permutation or a sepia-like integer colour matrix), then the output (RGB, grayscale with integer
weights, or thresholded grayscale). Parameters: the chain, its constants, the output kind and the image size.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

GAMMAS = ["0.45", "0.8", "1.8", "2.2", "0.6", "1.5"]
CHAINS = [["bc", "lut"], ["lut", "inv"], ["bc", "post", "lut"], ["inv", "bc", "lut"], ["lut", "bc"],
          ["post", "lut", "inv"]]
PERMS = [(2, 1, 0), (1, 2, 0), (2, 0, 1)]
SEPIA = [(101, 197, 48), (89, 176, 43), (70, 137, 34)]


class _P:
    def __init__(self, index: int, rng: np.random.Generator):
        self.chain = CHAINS[index % len(CHAINS)]
        self.gamma = GAMMAS[index % len(GAMMAS)]
        self.cn = int(rng.integers(40, 100))
        self.br = int(rng.integers(-40, 41))
        self.mask = int(rng.choice([0xF0, 0xE0, 0xF8, 0xFC]))
        self.mix = ["none", "swap", "sepia"][(index // 2) % 3]
        self.perm = PERMS[index % 3]
        self.out = ["rgb", "gray", "thresh"][index % 3]
        self.thr = int(rng.integers(60, 200))
        self.ch = 3 if self.out == "rgb" else 1

    def lut_init(self, name: str = "lut") -> str:
        return (f"    for (int i = 0; i < 256; ++i) {name}[i] = (unsigned char)(255.0 * pow(i / 255.0, {self.gamma}) + 0.5);\n")

    def stage1(self, L: str) -> str:
        ops = {"bc": f"v = ((v - 128) * {self.cn}) / 64 + 128 + ({self.br}); v = v < 0 ? 0 : (v > 255 ? 255 : v);",
               "lut": f"v = {L}[v];", "inv": "v = 255 - v;", "post": f"v = v & {self.mask};"}
        return " ".join(ops[o] for o in self.chain)

    def pix_body(self, L: str, fused: bool) -> str:
        s1 = f"v = {L}[v];" if fused else self.stage1(L)
        code = "".join(f"    {{ int v = {c}; {s1} {c} = v; }}\n" for c in "rgb")
        if self.mix == "swap":
            p = self.perm
            code += f"    {{ int t0 = r, t1 = g, t2 = b; r = t{p[0]}; g = t{p[1]}; b = t{p[2]}; }}\n"
        elif self.mix == "sepia":
            rows = []
            for k, c in enumerate("rgb"):
                a0, a1, a2 = SEPIA[k]
                rows.append(f"    int n{c} = ({a0} * r + {a1} * g + {a2} * b) >> 8;\n")
            code += "".join(rows) + "    r = nr > 255 ? 255 : nr; g = ng > 255 ? 255 : ng; b = nb > 255 ? 255 : nb;\n"
        if self.out == "rgb":
            code += "    return (unsigned)r | ((unsigned)g << 8) | ((unsigned)b << 16);\n"
        elif self.out == "gray":
            code += "    return (unsigned)((77 * r + 150 * g + 29 * b + 128) >> 8);\n"
        else:
            code += f"    return ((77 * r + 150 * g + 29 * b + 128) >> 8) >= {self.thr} ? 255u : 0u;\n"
        return code

    def describe(self) -> str:
        names = {"bc": f"v = clamp(((v - 128) * {self.cn}) / 64 + 128 + {self.br}, 0, 255) (C integer division)",
                 "lut": f"v = lut[v] with lut[i] = (unsigned char)(255.0 * pow(i / 255.0, {self.gamma}) + 0.5)",
                 "inv": "v = 255 - v", "post": f"v = v & {self.mask}"}
        s = "per channel: " + "; then ".join(names[o] for o in self.chain) + ". "
        if self.mix == "swap":
            s += f"Then the channels are permuted: (r, g, b) <- (c{self.perm[0]}, c{self.perm[1]}, c{self.perm[2]}). "
        elif self.mix == "sepia":
            s += "Then a colour matrix: c' = min(255, (w0 * r + w1 * g + w2 * b) >> 8) with rows " + \
                 f"{SEPIA}. "
        if self.out == "rgb":
            s += "Output: the RGB pixel (3 bytes)."
        elif self.out == "gray":
            s += "Output: one gray byte (77 r + 150 g + 29 b + 128) >> 8."
        else:
            s += f"Output: one byte, 255 if (77 r + 150 g + 29 b + 128) >> 8 >= {self.thr} else 0."
        return s


SIG = "int h, int w, const unsigned char* rgb, unsigned char* out"
HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"


def _pixdev(P: _P, fused: bool = False) -> str:
    return ("__device__ __forceinline__ unsigned pix(const unsigned char* L, int r, int g, int b) {\n"
            + P.pix_body("L", fused) + "}\n\n")


def _store(P: _P, o: str, p: str, val: str) -> str:
    if P.ch == 3:
        return (f"{o}[3 * {p}] = (unsigned char)({val} & 255u); {o}[3 * {p} + 1] = (unsigned char)(({val} >> 8) & 255u);"
                f" {o}[3 * {p} + 2] = (unsigned char)({val} >> 16);")
    return f"{o}[{p}] = (unsigned char){val};"


def _host(P: _P, body: str, lut_setup: str = "", free_extra: str = "") -> str:
    return (f'extern "C" void pixel_ops({SIG}) {{\n'
            "    if (h <= 0 || w <= 0) return;\n"
            "    long long npix = (long long)h * w;\n"
            f"    size_t ib = (size_t)npix * 3, ob = (size_t)npix * {P.ch};\n"
            "    unsigned char hl[256];\n" + P.lut_init("hl")
            + "    unsigned char *din, *dout;\n"
            "    cudaMalloc(&din, ib); cudaMalloc(&dout, ob);\n"
            + lut_setup + body + free_extra
            + "    cudaFree(din); cudaFree(dout);\n}\n")


COPY_IN = "    cudaMemcpy(din, rgb, ib, cudaMemcpyHostToDevice);\n"
COPY_OUT = "    cudaMemcpy(out, dout, ob, cudaMemcpyDeviceToHost);\n"
GLOBAL_LUT = ("    unsigned char* dl; cudaMalloc(&dl, 256);\n"
              "    cudaMemcpy(dl, hl, 256, cudaMemcpyHostToDevice);\n")


def _simple_kernel(P: _P, name: str, lut_param: bool) -> str:
    lp = "const unsigned char* L, " if lut_param else ""
    return (f"__global__ void {name}(long long npix, {lp}const unsigned char* in, unsigned char* o) {{\n"
            "    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (p >= npix) return;\n"
            f"    unsigned v = pix({'L' if lut_param else 'cl'}, in[3 * p], in[3 * p + 1], in[3 * p + 2]);\n"
            f"    {_store(P, 'o', 'p', 'v')}\n}}\n\n")


def _global_lut(P: _P) -> str:
    return (HEAD + _pixdev(P) + _simple_kernel(P, "px_global", True)
            + _host(P, COPY_IN + "    px_global<<<(unsigned)((npix + 255) / 256), 256>>>(npix, dl, din, dout);\n"
                    + COPY_OUT, GLOBAL_LUT, "    cudaFree(dl);\n"))


def _const_lut(P: _P) -> str:
    return (HEAD + "__constant__ unsigned char cl[256];\n\n" + _pixdev(P) + _simple_kernel(P, "px_const", False)
            + _host(P, COPY_IN + "    px_const<<<(unsigned)((npix + 127) / 128), 128>>>(npix, din, dout);\n" + COPY_OUT,
                    "    cudaMemcpyToSymbol(cl, hl, 256);\n"))


def _shared_kernel(P: _P, name: str) -> str:
    return (f"__global__ void {name}(long long npix, const unsigned char* __restrict__ L,"
            " const unsigned char* __restrict__ in, unsigned char* __restrict__ o) {\n"
            "    __shared__ unsigned char sl[256];\n"
            "    for (int k = threadIdx.x; k < 256; k += blockDim.x) sl[k] = L[k];\n"
            "    __syncthreads();\n"
            "    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < npix;"
            " p += (long long)gridDim.x * blockDim.x) {\n"
            "        unsigned v = pix(sl, in[3 * p], in[3 * p + 1], in[3 * p + 2]);\n"
            f"        {_store(P, 'o', 'p', 'v')}\n    }}\n}}\n\n")


GS_LAUNCH = ("    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
             "    long long want = (npix + 255) / 256;\n"
             "    int blocks = (int)(want < (long long)sms * 8 ? want : (long long)sms * 8);\n")


def _shared_lut(P: _P) -> str:
    return (HEAD + _pixdev(P) + _shared_kernel(P, "px_shared")
            + _host(P, COPY_IN + GS_LAUNCH + "    px_shared<<<blocks, 256>>>(npix, dl, din, dout);\n" + COPY_OUT,
                    GLOBAL_LUT, "    cudaFree(dl);\n"))


def _fused(P: _P) -> str:
    s1 = P.stage1("hl")
    return (HEAD + _pixdev(P, fused=True) + _shared_kernel(P, "px_fused")
            + _host(P, COPY_IN + GS_LAUNCH + "    px_fused<<<blocks, 256>>>(npix, dl, din, dout);\n" + COPY_OUT,
                    "    // fold the whole per-channel chain into one table on the host\n"
                    "    unsigned char hf[256];\n"
                    f"    for (int i = 0; i < 256; ++i) {{ int v = i; {s1} hf[i] = (unsigned char)v; }}\n"
                    "    unsigned char* dl; cudaMalloc(&dl, 256);\n"
                    "    cudaMemcpy(dl, hf, 256, cudaMemcpyHostToDevice);\n", "    cudaFree(dl);\n"))


def _vectorized(P: _P) -> str:
    if P.ch == 3:
        st = ("        unsigned a = v0 | (v1 << 24), b2 = (v1 >> 8) | (v2 << 16), c = (v2 >> 16) | (v3 << 8);\n"
              "        o[3 * q] = a; o[3 * q + 1] = b2; o[3 * q + 2] = c;\n")
    else:
        st = "        o[q] = v0 | (v1 << 8) | (v2 << 16) | (v3 << 24);\n"
    return (HEAD + _pixdev(P)
            + "__global__ void px_vec(long long nq, const unsigned char* __restrict__ L, const unsigned* __restrict__ in,"
            " unsigned* __restrict__ o) {\n"
            "    // four pixels per thread: 12 input bytes as three 32-bit words\n"
            "    __shared__ unsigned char sl[256];\n"
            "    for (int k = threadIdx.x; k < 256; k += blockDim.x) sl[k] = L[k];\n"
            "    __syncthreads();\n"
            "    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (q < nq) {\n"
            "        unsigned x0 = in[3 * q], x1 = in[3 * q + 1], x2 = in[3 * q + 2];\n"
            "        unsigned v0 = pix(sl, x0 & 255u, (x0 >> 8) & 255u, (x0 >> 16) & 255u);\n"
            "        unsigned v1 = pix(sl, x0 >> 24, x1 & 255u, (x1 >> 8) & 255u);\n"
            "        unsigned v2 = pix(sl, (x1 >> 16) & 255u, x1 >> 24, x2 & 255u);\n"
            "        unsigned v3 = pix(sl, (x2 >> 8) & 255u, (x2 >> 16) & 255u, x2 >> 24);\n"
            + st + "    }\n}\n\n"
            + "__global__ void px_tail(long long p0, long long npix, const unsigned char* L, const unsigned char* in,"
            " unsigned char* o) {\n"
            "    long long p = p0 + threadIdx.x;\n"
            "    if (p >= npix) return;\n"
            "    unsigned v = pix(L, in[3 * p], in[3 * p + 1], in[3 * p + 2]);\n"
            f"    {_store(P, 'o', 'p', 'v')}\n}}\n\n"
            + _host(P, COPY_IN
                    + "    long long nq = npix / 4;\n"
                    "    if (nq > 0) px_vec<<<(unsigned)((nq + 255) / 256), 256>>>(nq, dl, (const unsigned*)din, (unsigned*)dout);\n"
                    "    if (nq * 4 < npix) px_tail<<<1, 4>>>(nq * 4, npix, dl, din, dout);\n" + COPY_OUT,
                    GLOBAL_LUT, "    cudaFree(dl);\n"))


def _per_byte(P: _P) -> str:
    return (HEAD + "__constant__ unsigned char cl[256];\n\n" + _pixdev(P)
            + "__global__ void px_byte(long long nbytes, const unsigned char* in, unsigned char* o) {\n"
            "    // one thread per output byte: each recomputes its whole pixel and keeps one channel\n"
            "    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (k >= nbytes) return;\n"
            "    long long p = k / 3; int c = (int)(k % 3);\n"
            "    unsigned v = pix(cl, in[3 * p], in[3 * p + 1], in[3 * p + 2]);\n"
            "    o[k] = (unsigned char)((v >> (8 * c)) & 255u);\n}\n\n"
            + _host(P, COPY_IN + "    px_byte<<<(unsigned)((ob + 255) / 256), 256>>>((long long)ob, din, dout);\n"
                    + COPY_OUT, "    cudaMemcpyToSymbol(cl, hl, 256);\n"))


def _colmajor(P: _P) -> str:
    return (HEAD + "__constant__ unsigned char cl[256];\n\n" + _pixdev(P)
            + "__global__ void px_cols(int h, int w, const unsigned char* in, unsigned char* o) {\n"
            "    // consecutive threads walk down a column: accesses a whole image row apart\n"
            "    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= (long long)h * w) return;\n"
            "    long long y = g % h, x = g / h;\n"
            "    long long p = y * w + x;\n"
            "    unsigned v = pix(cl, in[3 * p], in[3 * p + 1], in[3 * p + 2]);\n"
            f"    {_store(P, 'o', 'p', 'v')}\n}}\n\n"
            + _host(P, COPY_IN + "    px_cols<<<(unsigned)((npix + 255) / 256), 256>>>(h, w, din, dout);\n" + COPY_OUT,
                    "    cudaMemcpyToSymbol(cl, hl, 256);\n"))


def _chunked(P: _P) -> str:
    return (HEAD + _pixdev(P) + _simple_kernel(P, "px_chunk", True)
            + _host(P, "    const long long C = 1 << 18;\n"
                       "    for (long long p0 = 0; p0 < npix; p0 += C) {\n"
                       "        long long cnt = npix - p0 < C ? npix - p0 : C;\n"
                       "        cudaMemcpy(din, rgb + 3 * p0, (size_t)cnt * 3, cudaMemcpyHostToDevice);\n"
                       "        px_chunk<<<(unsigned)((cnt + 127) / 128), 128>>>(cnt, dl, din, dout);\n"
                       f"        cudaMemcpy(out + {P.ch} * p0, dout, (size_t)cnt * {P.ch}, cudaMemcpyDeviceToHost);\n"
                       "    }\n", GLOBAL_LUT, "    cudaFree(dl);\n"))


def _pinned(P: _P) -> str:
    return (HEAD + _pixdev(P) + _shared_kernel(P, "px_pinned")
            + _host(P, "    unsigned char *hin, *hout;\n"
                       "    cudaMallocHost((void**)&hin, ib); cudaMallocHost((void**)&hout, ob);\n"
                       "    memcpy(hin, rgb, ib);\n"
                       "    cudaMemcpy(din, hin, ib, cudaMemcpyHostToDevice);\n"
                       + GS_LAUNCH + "    px_pinned<<<blocks, 256>>>(npix, dl, din, dout);\n"
                       "    cudaMemcpy(hout, dout, ob, cudaMemcpyDeviceToHost);\n"
                       "    memcpy(out, hout, ob);\n"
                       "    cudaFreeHost(hin); cudaFreeHost(hout);\n", GLOBAL_LUT, "    cudaFree(dl);\n"))


def _reference(P: _P) -> str:
    if P.ch == 3:
        st = "        out[3 * p] = (unsigned char)(v & 255u); out[3 * p + 1] = (unsigned char)((v >> 8) & 255u); out[3 * p + 2] = (unsigned char)(v >> 16);\n"
    else:
        st = "        out[p] = (unsigned char)v;\n"
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            "static unsigned pix(const unsigned char* L, int r, int g, int b) {\n" + P.pix_body("L", False) + "}\n\n"
            f"void pixel_ops({SIG}) {{\n"
            "    unsigned char lut[256];\n" + P.lut_init("lut")
            + "    size_t npix = (size_t)h * w;\n"
            "    for (size_t p = 0; p < npix; ++p) {\n"
            "        unsigned v = pix(lut, rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2]);\n"
            + st + "    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    P = _P(index, rng)
    npix = 10e6 * float(rng.uniform(0.85, 1.2))
    aspect = float(rng.choice([0.5, 0.75, 1.0]))
    h = int((npix * aspect) ** 0.5) + int(rng.integers(0, 17))
    w = int(npix / h) + int(rng.integers(1, 17))
    task = {
        "function_name": "pixel_ops",
        "description": ("Per-pixel colour pipeline over an h x w interleaved RGB unsigned char image (3 bytes per "
                        "pixel, row-major): " + P.describe() + f" out has {P.ch} byte(s) per pixel."),
        "returns": "void",
        "args": [
            {"name": "h", "role": "scalar", "ctype": "int"},
            {"name": "w", "role": "scalar", "ctype": "int"},
            {"name": "rgb", "role": "in", "ctype": "unsigned char", "length": "3 * h * w",
             "dist": {"kind": "randint", "low": 0, "high": 256}},
            {"name": "out", "role": "out", "ctype": "unsigned char", "length": f"{P.ch} * h * w"},
        ],
        "size_configs": [{"h": 1, "w": 7}, {"h": 3, "w": 5}, {"h": 97, "w": 131 + int(rng.integers(0, 30))},
                         {"h": 256, "w": 256}, {"h": h, "w": w}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(P),
        "tags": ["image", "integer", "elementwise", "memory-bound"],
    }
    variants = [
        Variant("pixel_global_lut", ("naive", "block_256", "pageable"), _global_lut(P)),
        Variant("pixel_const_lut", ("naive", "constant_memory", "block_128", "pageable"), _const_lut(P)),
        Variant("shared_lut_grid_stride", ("grid_stride", "shared_tiling", "readonly_cache", "block_256"),
                _shared_lut(P)),
        Variant("vectorized_4px", ("vectorized", "register_blocking", "shared_tiling", "coalesced", "block_256"),
                _vectorized(P)),
        Variant("column_major", ("strided", "constant_memory", "block_256"), _colmajor(P)),
        Variant("chunked_copies", ("many_launches", "in_loop_transfers", "block_128"), _chunked(P)),
        Variant("fused_host_lut", ("fused", "host_compute", "grid_stride", "shared_tiling", "block_256"), _fused(P)),
        Variant("pinned_staging", ("pinned", "extra_transfers", "grid_stride", "shared_tiling", "block_256"),
                _pinned(P)),
    ]
    if P.ch == 3:
        variants.append(Variant("thread_per_byte", ("constant_memory", "coalesced", "block_256"), _per_byte(P)))
    params = {"chain": P.chain, "gamma": P.gamma, "mix": P.mix, "out": P.out, "h": h, "w": w}
    return GeneratedTask(task, tuple(variants), params)


FAMILY = Family(
    name="pixel_ops",
    description="chained per-pixel RGB colour operations (LUT gamma, contrast, colour matrix, gray, threshold)",
    generate=generate,
    n_tasks=50,
    tags=("image", "integer"),
)
