"""S steps of a 2-D outer-totalistic cellular automaton on an h x w grid of bytes (Moore neighbourhood).

The initial state is alive where in[i] < T (in holds bytes, T sets the density); each step, a cell with c live
neighbours among its 8 becomes alive when it is dead and bit c of the birth mask B is set, and stays alive when it
is alive and bit c of the survival mask S is set. out receives the state after the given number of steps (0/1).
What varies with the index: the rule (Life B3/S23, HighLife, Seeds, Day & Night, Maze, Morley, Anneal, Coral,
Replicator, ... twenty rules, none with birth on 0), the boundary (a torus, where row -1 is row h-1 and column -1
column w-1, or dead cells outside the grid), the density T, the number of steps and the grid's shape.

Everything is integer: the outputs are compared exactly, and CPU and GPU agree because each step is a fixed
function of the previous grid.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

RULES = [("Life", "3", "23"), ("HighLife", "36", "23"), ("Seeds", "2", ""), ("Day & Night", "3678", "34678"),
         ("Maze", "3", "12345"), ("2x2", "36", "125"), ("Morley", "368", "245"), ("Anneal", "4678", "35678"),
         ("Diamoeba", "35678", "5678"), ("LongLife", "345", "5"), ("Replicator", "1357", "1357"),
         ("Coral", "3", "45678"), ("Gnarl", "1", "1"), ("DryLife", "37", "23"),
         ("Life without death", "3", "012345678"), ("Amoeba", "357", "1358"), ("Assimilation", "345", "4567"),
         ("Serviettes", "234", ""), ("Stains", "3678", "235678"), ("Walled cities", "45678", "2345")]
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
SIG = 'extern "C" void life_run(int h, int w, int steps, const unsigned char* in, unsigned char* out)'


def _mask(digits: str) -> int:
    return sum(1 << int(c) for c in digits)


def _defs(p: dict) -> str:
    return f"#define BMASK 0x{p['B']:03X}u\n#define SMASK 0x{p['S']:03X}u\n#define THRESH {p['T']}\n\n"


def _at(qual: str, torus: bool, name: str = "at") -> str:
    if torus:
        body = ("    y = y < 0 ? y + h : (y >= h ? y - h : y);\n"
                "    x = x < 0 ? x + w : (x >= w ? x - w : x);\n"
                "    return g[(size_t)y * w + x];\n")
    else:
        body = "    return (y >= 0 && y < h && x >= 0 && x < w) ? g[(size_t)y * w + x] : 0;\n"
    return f"{qual} int {name}(const unsigned char* g, int h, int w, int y, int x) {{\n{body}}}\n\n"


def _rule_fn(qual: str) -> str:
    return (f"{qual} unsigned char next_state(unsigned char alive, int cnt) {{\n"
            "    return (unsigned char)(((alive ? SMASK : BMASK) >> cnt) & 1u);\n}\n\n")


COUNT = ("        int cnt = at(g, h, w, y - 1, x - 1) + at(g, h, w, y - 1, x) + at(g, h, w, y - 1, x + 1)\n"
         "                + at(g, h, w, y, x - 1) + at(g, h, w, y, x + 1)\n"
         "                + at(g, h, w, y + 1, x - 1) + at(g, h, w, y + 1, x) + at(g, h, w, y + 1, x + 1);\n")


def _pre(p: dict) -> str:
    D = "__device__ __forceinline__"
    return HEAD + _defs(p) + _at(D, p["torus"]) + _rule_fn(D)


INIT = ("__global__ void init_grid(size_t n, const unsigned char* __restrict__ in, unsigned char* __restrict__ g) {\n"
        "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) g[i] = in[i] < THRESH ? 1 : 0;\n}\n\n")

STEP2D = ("__global__ void step_cells(int h, int w, const unsigned char* __restrict__ g, unsigned char* __restrict__ o) {\n"
          "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
          "    if (x >= w || y >= h) return;\n"
          + COUNT +
          "    o[(size_t)y * w + x] = next_state(g[(size_t)y * w + x], cnt);\n}\n\n").replace("        int cnt", "    int cnt")

ALLOC = ("    if (h <= 0 || w <= 0) return;\n"
         "    size_t n = (size_t)h * w;\n"
         "    unsigned char *din, *ga, *gb;\n"
         "    cudaMalloc(&din, n); cudaMalloc(&ga, n); cudaMalloc(&gb, n);\n"
         "    cudaMemcpy(din, in, n, cudaMemcpyHostToDevice);\n"
         "    init_grid<<<(unsigned)((n + 255) / 256), 256>>>(n, din, ga);\n")
FREE = "    cudaFree(din); cudaFree(ga); cudaFree(gb);\n}\n"
SWAP = "        { unsigned char* t = ga; ga = gb; gb = t; }\n"


def _naive(p: dict, bx: int, by: int) -> str:
    return (_pre(p) + INIT + STEP2D + SIG + " {\n" + ALLOC
            + f"    dim3 blk({bx}, {by}), grd((w + {bx - 1}) / {bx}, (h + {by - 1}) / {by});\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_cells<<<grd, blk>>>(h, w, ga, gb);\n" + SWAP +
            "    }\n"
            "    cudaMemcpy(out, ga, n, cudaMemcpyDeviceToHost);\n" + FREE)


def _in_loop(p: dict) -> str:
    """One launch per step, and the grid goes to the host and back after every step."""
    return (_pre(p) + INIT + STEP2D + SIG + " {\n" + ALLOC
            + "    dim3 blk(16, 8), grd((w + 15) / 16, (h + 7) / 8);\n"
            "    cudaMemcpy(out, ga, n, cudaMemcpyDeviceToHost);\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_cells<<<grd, blk>>>(h, w, ga, gb);\n"
            "        cudaMemcpy(out, gb, n, cudaMemcpyDeviceToHost);\n"
            "        cudaMemcpy(ga, out, n, cudaMemcpyHostToDevice);\n"
            "    }\n" + FREE)


def _smem(p: dict) -> str:
    """A 32 x 8 tile per block, staged with its one-cell halo (34 x 10) in shared memory."""
    kern = ("#define TX 32\n#define TY 8\n\n"
            "__global__ void step_tile(int h, int w, const unsigned char* __restrict__ g, unsigned char* __restrict__ o) {\n"
            "    __shared__ unsigned char s[TY + 2][TX + 2];\n"
            "    int x0 = blockIdx.x * TX - 1, y0 = blockIdx.y * TY - 1;\n"
            "    int t = threadIdx.y * TX + threadIdx.x;\n"
            "    for (int i = t; i < (TX + 2) * (TY + 2); i += TX * TY) {\n"
            "        int ly = i / (TX + 2), lx = i % (TX + 2);\n"
            "        s[ly][lx] = (unsigned char)at(g, h, w, y0 + ly, x0 + lx);\n"
            "    }\n"
            "    __syncthreads();\n"
            "    int x = blockIdx.x * TX + threadIdx.x, y = blockIdx.y * TY + threadIdx.y;\n"
            "    if (x >= w || y >= h) return;\n"
            "    int ly = threadIdx.y + 1, lx = threadIdx.x + 1;\n"
            "    int cnt = s[ly - 1][lx - 1] + s[ly - 1][lx] + s[ly - 1][lx + 1] + s[ly][lx - 1] + s[ly][lx + 1]\n"
            "            + s[ly + 1][lx - 1] + s[ly + 1][lx] + s[ly + 1][lx + 1];\n"
            "    o[(size_t)y * w + x] = next_state(s[ly][lx], cnt);\n}\n\n")
    return (_pre(p) + INIT + kern + SIG + " {\n" + ALLOC
            + "    dim3 blk(TX, TY), grd((w + TX - 1) / TX, (h + TY - 1) / TY);\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_tile<<<grd, blk>>>(h, w, ga, gb);\n" + SWAP +
            "    }\n"
            "    cudaMemcpy(out, ga, n, cudaMemcpyDeviceToHost);\n" + FREE)


def _eq(c: int) -> str:
    bits = [("s0" if c & 1 else "~s0"), ("s1" if c & 2 else "~s1"), ("s2" if c & 4 else "~s2"),
            ("s3" if c & 8 else "~s3")]
    return "(" + " & ".join(bits) + ")"


def _mask_expr(m: int) -> str:
    terms = [_eq(c) for c in range(9) if m >> c & 1]
    return " | ".join(terms) if terms else "0u"


def _bits(p: dict) -> str:
    """Rows bit-packed into 32-bit words (bit b of word j is cell 32j + b); one thread per word counts the 8
    neighbour bit masks with a bit-sliced adder (32 cells at once) and applies the rule with bit logic."""
    torus = p["torus"]
    load = ("__device__ __forceinline__ void row_masks(const unsigned int* __restrict__ row, int j, int nw, int w,\n"
            "                                          unsigned int& c, unsigned int& l, unsigned int& r) {\n"
            "    c = row[j];\n"
            "    unsigned int pv = j > 0 ? row[j - 1] : 0u;\n"
            "    unsigned int nx = j + 1 < nw ? row[j + 1] : 0u;\n"
            "    l = (c << 1) | (pv >> 31);\n"
            "    r = (c >> 1) | (nx << 31);\n")
    if torus:
        load += ("    if (j == 0) l |= (row[nw - 1] >> ((w - 1) & 31)) & 1u;\n"
                 "    if (j == nw - 1) r |= (row[0] & 1u) << ((w - 1) & 31);\n")
    load += "}\n\n"
    if torus:
        rows = ("    int ym = y == 0 ? h - 1 : y - 1;\n"
                "    int yp = y + 1 == h ? 0 : y + 1;\n"
                "    unsigned int uc, ul, ur, dc, dl, dr;\n"
                "    row_masks(cur + (size_t)ym * nw, j, nw, w, uc, ul, ur);\n"
                "    row_masks(cur + (size_t)yp * nw, j, nw, w, dc, dl, dr);\n")
    else:
        rows = ("    unsigned int uc = 0u, ul = 0u, ur = 0u, dc = 0u, dl = 0u, dr = 0u;\n"
                "    if (y > 0) row_masks(cur + (size_t)(y - 1) * nw, j, nw, w, uc, ul, ur);\n"
                "    if (y + 1 < h) row_masks(cur + (size_t)(y + 1) * nw, j, nw, w, dc, dl, dr);\n")
    adds = "".join(f"    c0 = s0 & {m}; s0 ^= {m}; c1 = s1 & c0; s1 ^= c0; c2 = s2 & c1; s2 ^= c1; s3 |= c2;\n"
                   for m in ("ul", "uc", "ur", "ml", "mr", "dl", "dc", "dr"))
    step = ("__global__ void step_bits(int h, int w, int nw, const unsigned int* __restrict__ cur, "
            "unsigned int* __restrict__ nxt) {\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y;\n"
            "    if (j >= nw) return;\n"
            "    unsigned int mc, ml, mr;\n"
            "    row_masks(cur + (size_t)y * nw, j, nw, w, mc, ml, mr);\n"
            + rows +
            "    unsigned int s0 = 0u, s1 = 0u, s2 = 0u, s3 = 0u, c0, c1, c2;\n"
            "    /* bit-sliced 4-bit counters, one per cell: add each neighbour mask with a ripple of half adders */\n"
            + adds +
            f"    unsigned int born = {_mask_expr(p['B'])};\n"
            f"    unsigned int surv = {_mask_expr(p['S'])};\n"
            "    unsigned int keep = (j == nw - 1 && (w & 31)) ? ((1u << (w & 31)) - 1u) : 0xffffffffu;\n"
            "    nxt[(size_t)y * nw + j] = ((mc & surv) | (~mc & born)) & keep;\n}\n\n")
    pack = ("__global__ void pack_rows(int h, int w, int nw, const unsigned char* __restrict__ in, "
            "unsigned int* __restrict__ bits) {\n"
            "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y;\n"
            "    if (j >= nw) return;\n"
            "    unsigned int v = 0u;\n"
            "    for (int b = 0; b < 32; ++b) {\n"
            "        int x = j * 32 + b;\n"
            "        if (x < w && in[(size_t)y * w + x] < THRESH) v |= 1u << b;\n"
            "    }\n"
            "    bits[(size_t)y * nw + j] = v;\n}\n\n"
            "__global__ void unpack_rows(int h, int w, int nw, const unsigned int* __restrict__ bits, "
            "unsigned char* __restrict__ o) {\n"
            "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    int y = blockIdx.y;\n"
            "    if (x >= w) return;\n"
            "    o[(size_t)y * w + x] = (unsigned char)((bits[(size_t)y * nw + (x >> 5)] >> (x & 31)) & 1u);\n}\n\n")
    return (HEAD + _defs(p) + load + step + pack + SIG + " {\n"
            "    if (h <= 0 || w <= 0) return;\n"
            "    size_t n = (size_t)h * w;\n"
            "    int nw = (w + 31) / 32;\n"
            "    size_t wb = (size_t)h * nw * sizeof(unsigned int);\n"
            "    unsigned char* dio; unsigned int *ba, *bb;\n"
            "    cudaMalloc(&dio, n); cudaMalloc(&ba, wb); cudaMalloc(&bb, wb);\n"
            "    cudaMemcpy(dio, in, n, cudaMemcpyHostToDevice);\n"
            "    dim3 gw((nw + 127) / 128, h);\n"
            "    pack_rows<<<gw, 128>>>(h, w, nw, dio, ba);\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_bits<<<gw, 128>>>(h, w, nw, ba, bb);\n"
            "        { unsigned int* t = ba; ba = bb; bb = t; }\n"
            "    }\n"
            "    unpack_rows<<<dim3((w + 127) / 128, h), 128>>>(h, w, nw, ba, dio);\n"
            "    cudaMemcpy(out, dio, n, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dio); cudaFree(ba); cudaFree(bb);\n}\n")


def _fused(p: dict, ks: int) -> str:
    """KS steps per launch: a 32 x 32 output tile is loaded with a KS-cell halo (redundant with the neighbours'
    tiles) into shared memory and stepped there, the valid region shrinking by one cell per step."""
    torus = p["torus"]
    if torus:
        load = ("        int gy = ((y0 + ly) % h + h) % h, gx = ((x0 + lx) % w + w) % w;\n"
                "        buf[0][ly][lx] = g[(size_t)gy * w + gx];\n")
        dead = ""
    else:
        load = ("        int gy = y0 + ly, gx = x0 + lx;\n"
                "        buf[0][ly][lx] = (gy >= 0 && gy < h && gx >= 0 && gx < w) ? g[(size_t)gy * w + gx] : 0;\n")
        dead = ("                int gy = y0 + ly, gx = x0 + lx;\n"
                "                if (gy < 0 || gy >= h || gx < 0 || gx >= w) v = 0;\n")
    kern = (f"#define FT 32\n#define KS {ks}\n#define TS (FT + 2 * KS)\n\n"
            "__global__ void steps_fused(int h, int w, int k, const unsigned char* __restrict__ g, "
            "unsigned char* __restrict__ o) {\n"
            "    __shared__ unsigned char buf[2][TS][TS];\n"
            "    int y0 = blockIdx.y * FT - KS, x0 = blockIdx.x * FT - KS;\n"
            "    int t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;\n"
            "    for (int i = t; i < TS * TS; i += nt) {\n"
            "        int ly = i / TS, lx = i % TS;\n"
            + load +
            "    }\n"
            "    __syncthreads();\n"
            "    for (int s = 1; s <= k; ++s) {\n"
            "        int src = (s - 1) & 1, dst = s & 1;\n"
            "        for (int i = t; i < TS * TS; i += nt) {\n"
            "            int ly = i / TS, lx = i % TS;\n"
            "            if (ly >= s && ly < TS - s && lx >= s && lx < TS - s) {\n"
            "                int cnt = buf[src][ly - 1][lx - 1] + buf[src][ly - 1][lx] + buf[src][ly - 1][lx + 1]\n"
            "                        + buf[src][ly][lx - 1] + buf[src][ly][lx + 1]\n"
            "                        + buf[src][ly + 1][lx - 1] + buf[src][ly + 1][lx] + buf[src][ly + 1][lx + 1];\n"
            "                unsigned char v = next_state(buf[src][ly][lx], cnt);\n"
            + dead +
            "                buf[dst][ly][lx] = v;\n"
            "            }\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n"
            "    for (int i = t; i < FT * FT; i += nt) {\n"
            "        int ly = i / FT + KS, lx = i % FT + KS;\n"
            "        int gy = y0 + ly, gx = x0 + lx;\n"
            "        if (gy < h && gx < w) o[(size_t)gy * w + gx] = buf[k & 1][ly][lx];\n"
            "    }\n}\n\n")
    pre = HEAD + _defs(p) + _rule_fn("__device__ __forceinline__")
    return (pre + INIT + kern + SIG + " {\n" + ALLOC
            + "    dim3 blk(32, 8), grd((w + FT - 1) / FT, (h + FT - 1) / FT);\n"
            "    for (int done = 0; done < steps; done += KS) {\n"
            "        int k = steps - done < KS ? steps - done : KS;\n"
            "        steps_fused<<<grd, blk>>>(h, w, k, ga, gb);\n" + SWAP +
            "    }\n"
            "    cudaMemcpy(out, ga, n, cudaMemcpyDeviceToHost);\n" + FREE)


def _host_first(p: dict) -> str:
    """The host runs the first quarter of the steps; the grid then goes to the GPU for the rest."""
    host = (_at("static inline", p["torus"], "at_h") + _rule_fn("static inline").replace("next_state", "next_h"))
    return (_pre(p) + host + STEP2D + SIG + " {\n"
            "    if (h <= 0 || w <= 0) return;\n"
            "    size_t n = (size_t)h * w;\n"
            "    unsigned char* a = (unsigned char*)malloc(n);\n"
            "    unsigned char* b = (unsigned char*)malloc(n);\n"
            "    for (size_t i = 0; i < n; ++i) a[i] = in[i] < THRESH ? 1 : 0;\n"
            "    int hs = steps / 4;\n"
            "    for (int s = 0; s < hs; ++s) {\n"
            "        for (int y = 0; y < h; ++y)\n"
            "            for (int x = 0; x < w; ++x) {\n"
            "                const unsigned char* g = a;\n"
            + COUNT.replace("at(", "at_h(").replace("        int cnt", "                int cnt")
                   .replace("\n                + ", "\n                        + ") +
            "                b[(size_t)y * w + x] = next_h(a[(size_t)y * w + x], cnt);\n"
            "            }\n"
            "        unsigned char* t = a; a = b; b = t;\n"
            "    }\n"
            "    unsigned char *ga, *gb;\n"
            "    cudaMalloc(&ga, n); cudaMalloc(&gb, n);\n"
            "    cudaMemcpy(ga, a, n, cudaMemcpyHostToDevice);\n"
            "    dim3 blk(16, 4), grd((w + 15) / 16, (h + 3) / 4);\n"
            "    for (int s = hs; s < steps; ++s) {\n"
            "        step_cells<<<grd, blk>>>(h, w, ga, gb);\n" + SWAP +
            "    }\n"
            "    cudaMemcpy(out, ga, n, cudaMemcpyDeviceToHost);\n"
            "    cudaFree(ga); cudaFree(gb);\n"
            "    free(a); free(b);\n}\n")


def _grid_stride_pinned(p: dict) -> str:
    kern = ("__global__ void step_stride(int h, int w, const unsigned char* __restrict__ g, "
            "unsigned char* __restrict__ o) {\n"
            "    size_t n = (size_t)h * w;\n"
            "    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {\n"
            "        int y = (int)(i / w), x = (int)(i % w);\n"
            + COUNT +
            "        o[i] = next_state(g[i], cnt);\n"
            "    }\n}\n\n")
    return (_pre(p) + INIT + kern + SIG + " {\n"
            "    if (h <= 0 || w <= 0) return;\n"
            "    size_t n = (size_t)h * w;\n"
            "    unsigned char *hbuf, *din, *ga, *gb;\n"
            "    cudaMallocHost(&hbuf, n);\n"
            "    memcpy(hbuf, in, n);\n"
            "    cudaMalloc(&din, n); cudaMalloc(&ga, n); cudaMalloc(&gb, n);\n"
            "    cudaMemcpyAsync(din, hbuf, n, cudaMemcpyHostToDevice, 0);\n"
            "    init_grid<<<(unsigned)((n + 511) / 512), 512>>>(n, din, ga);\n"
            "    size_t want = (n + 511) / 512;\n"
            "    int blocks = want < 264 ? (int)want : 264;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        step_stride<<<blocks, 512>>>(h, w, ga, gb);\n" + SWAP +
            "    }\n"
            "    cudaMemcpyAsync(hbuf, ga, n, cudaMemcpyDeviceToHost, 0);\n"
            "    cudaStreamSynchronize(0);\n"
            "    memcpy(out, hbuf, n);\n"
            "    cudaFreeHost(hbuf);\n" + FREE)


def _reference(p: dict) -> str:
    return ("#include <stdlib.h>\n#include <string.h>\n\n" + _defs(p) + _at("static inline", p["torus"])
            + _rule_fn("static inline")
            + "void life_run(int h, int w, int steps, const unsigned char* in, unsigned char* out) {\n"
            "    if (h <= 0 || w <= 0) return;\n"
            "    size_t n = (size_t)h * w;\n"
            "    unsigned char* a = (unsigned char*)malloc(n);\n"
            "    unsigned char* b = (unsigned char*)malloc(n);\n"
            "    for (size_t i = 0; i < n; ++i) a[i] = in[i] < THRESH ? 1 : 0;\n"
            "    for (int s = 0; s < steps; ++s) {\n"
            "        const unsigned char* g = a;\n"
            "        for (int y = 0; y < h; ++y)\n"
            "            for (int x = 0; x < w; ++x) {\n"
            + COUNT.replace("        int cnt", "                int cnt").replace("\n                + ", "\n                        + ") +
            "                b[(size_t)y * w + x] = next_state(a[(size_t)y * w + x], cnt);\n"
            "            }\n"
            "        unsigned char* t = a; a = b; b = t;\n"
            "    }\n"
            "    memcpy(out, a, n);\n"
            "    free(a); free(b);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    name, bd, sd = RULES[(index * 7) % len(RULES)]
    torus = (index // len(RULES) + index) % 2 == 0
    T = int([51, 90, 128, 166, 77, 110][(index + int(rng.integers(6))) % 6])
    steps = int(rng.choice([8, 12, 16, 20, 24, 32, 40, 48, 64]))
    p = {"rule": name, "B": _mask(bd), "S": _mask(sd), "torus": torus, "T": T, "steps": steps}
    cells = int(12e6 / steps / (1.0 if torus else 0.8))
    aspect = float(rng.choice([1.0, 0.5, 2.0, 0.25, 1.5]))
    w = max(64, int((cells / aspect) ** 0.5))
    h = max(64, cells // w)
    w += int(rng.integers(0, 31))
    ks = int(rng.choice([2, 3, 4, 6]))
    bname = "a torus (edges wrap around)" if torus else "dead cells outside the grid"
    task = {
        "function_name": "life_run",
        "description": (f"steps steps of the outer-totalistic automaton {name} "
                        f"(B{bd}/S{sd}, Moore neighbourhood, {bname}) on an h x w grid, row-major: the initial "
                        f"state is alive where in[i] < {T}; out receives the final state (1 alive, 0 dead)."),
        "returns": "void",
        "args": [
            {"name": "h", "role": "scalar", "ctype": "int"},
            {"name": "w", "role": "scalar", "ctype": "int"},
            {"name": "steps", "role": "scalar", "ctype": "int"},
            {"name": "in", "role": "in", "ctype": "unsigned char", "length": "h * w",
             "dist": {"kind": "randint", "low": 0, "high": 256}},
            {"name": "out", "role": "out", "ctype": "unsigned char", "length": "h * w"},
        ],
        "size_configs": [{"h": 5, "w": 7, "steps": 3},
                         {"h": 37 + int(rng.integers(0, 20)), "w": 45 + int(rng.integers(0, 40)), "steps": steps},
                         {"h": 130 + int(rng.integers(0, 40)), "w": 300 + int(rng.integers(0, 50)),
                          "steps": steps + 1},
                         {"h": h, "w": w, "steps": steps}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["stencil", "cellular_automaton", "integer", "iterative"],
    }
    variants = (
        Variant("naive_pingpong_b256", ("naive", "many_launches", "double_buffered", "device_resident", "block_256"),
                _naive(p, 32, 8)),
        Variant("smem_halo_tiles", ("shared_tiling", "many_launches", "double_buffered", "device_resident",
                                    "block_256"), _smem(p)),
        Variant("in_loop_transfers", ("in_loop_transfers", "extra_transfers", "naive", "many_launches", "block_128"),
                _in_loop(p)),
        Variant("bitpacked_rows", ("register_blocking", "branchless", "double_buffered", "device_resident",
                                   "many_launches", "block_128"), _bits(p)),
        Variant(f"fused_{ks}_steps", ("fused", "shared_tiling", "double_buffered", "device_resident", "block_256"),
                _fused(p, ks)),
        Variant("host_first_steps", ("host_compute", "naive", "many_launches", "double_buffered", "block_64"),
                _host_first(p)),
        Variant("grid_stride_pinned_b512", ("grid_stride", "small_grid", "pinned", "many_launches",
                                            "double_buffered", "block_512"), _grid_stride_pinned(p)),
    )
    return GeneratedTask(task, variants, {**p, "h_time": h, "w_time": w, "fused_steps": ks})


FAMILY = Family(
    name="life_automaton",
    description="S steps of a 2-D outer-totalistic cellular automaton (Life-like rules) on a byte grid",
    generate=generate,
    n_tasks=50,
    tags=("stencil", "integer", "iterative"),
)
