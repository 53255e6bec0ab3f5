"""Histogram equalization of an 8-bit image: a histogram, its cumulative distribution, and a remap.

Pixel ``img[i]`` first goes through a fixed tone map ``q = pre(img[i])`` (identity, a square ``q*q/255`` or a
contrast stretch); the 256-bin histogram of ``q`` is optionally clipped (bins above ``clip = max(1, n*k/256)`` are
cut and the excess is spread evenly, its remainder one each over the first bins); its running sum ``cdf`` gives
``lut[b] = ((cdf[b] - cdf_min) * (L - 1) + r) / (n - cdf_min)`` (integer division, ``r`` = 0 or half the divisor,
``cdf_min`` the cdf at the first non-empty bin, ``lut[b] = 0`` below it, all 0 when ``n == cdf_min``), and
``out[i] = lut[q]`` in ``0 .. L-1``. Some tasks also write the (clipped) histogram. Integer arithmetic only: the
outputs are exact.

Variants: atomics into a global histogram with a one-thread CDF, per-block shared histograms merged with atomics
and a one-block scan, warp-private histograms with vectorized loads, the host computing the CDF into constant
memory, separate kernels per stage, pinned staging, and one block doing all three stages.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

PRES = ("identity", "square", "stretch")
LEVELS = [256, 64, 16, 200, 128, 32]


def _pre_body(pre: str, lo: int, hi: int) -> str:
    if pre == "identity":
        return "    return v;\n"
    if pre == "square":
        return "    return (v * v) / 255;\n"
    span = max(1, hi - 1 - lo)
    return f"    int t = ((v - {lo}) * 255) / {span};\n    return t < 0 ? 0 : (t > 255 ? 255 : t);\n"


def _pre_text(pre: str, lo: int, hi: int) -> str:
    if pre == "identity":
        return "q = img[i]"
    if pre == "square":
        return "q = img[i] * img[i] / 255 (integer division)"
    return f"q = clamp((img[i] - {lo}) * 255 / {max(1, hi - 1 - lo)}, 0, 255) (integer division toward zero)"


# the LUT from a 256-bin histogram, shared verbatim by the reference, the host variant and the device code
def _lut_body(p: dict) -> str:
    s = "    int h[256];\n    for (int b = 0; b < 256; ++b) h[b] = hist[b];\n"
    if p["clip"]:
        s += (f"    int clip = (int)(((long long)n * {p['clip']}) / 256);\n"
              "    if (clip < 1) clip = 1;\n"
              "    long long ex = 0;\n"
              "    for (int b = 0; b < 256; ++b) if (h[b] > clip) { ex += h[b] - clip; h[b] = clip; }\n"
              "    int each = (int)(ex / 256), rem = (int)(ex % 256);\n"
              "    for (int b = 0; b < 256; ++b) h[b] += each + (b < rem ? 1 : 0);\n")
    half = "den / 2" if p["round"] else "0"
    s += ("    long long cdf = 0, cmin = -1;\n"
          "    for (int b = 0; b < 256; ++b) {\n"
          "        cdf += h[b];\n"
          "        if (cmin < 0 && h[b] > 0) cmin = cdf;\n"
          "        cum[b] = cdf;\n"
          "    }\n"
          "    long long den = cmin < 0 ? 0 : (long long)n - cmin;\n"
          "    for (int b = 0; b < 256; ++b) {\n"
          "        if (den <= 0 || cum[b] < cmin) { lut[b] = 0; continue; }\n"
          f"        lut[b] = (int)(((cum[b] - cmin) * {p['levels'] - 1} + {half}) / den);\n"
          "    }\n")
    return s


def _lut_fn(p: dict, qual: str) -> str:
    return (f"{qual}void make_lut(int n, const int* hist, int* lut) {{\n"
            "    long long cum[256];\n" + _lut_body(p) + "}\n\n")


def _sig(p: dict) -> str:
    extra = ", int* hist" if p["hist_out"] else ""
    return f'extern "C" void hist_equalize(int n, const unsigned char* img, unsigned char* out{extra})'


def _head(p: dict) -> str:
    return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
            "__host__ __device__ __forceinline__ int pre(int v) {\n" + _pre_body(p["pre"], p["lo"], p["hi"])
            + "}\n\n" + _lut_fn(p, "__host__ __device__ "))


SETUP = """    if (n <= 0) return;
    unsigned char *d_img, *d_out;
    int *d_hist, *d_lut;
    cudaMalloc(&d_img, (size_t)n);
    cudaMalloc(&d_out, (size_t)n);
    cudaMalloc(&d_hist, 256 * sizeof(int));
    cudaMalloc(&d_lut, 256 * sizeof(int));
    cudaMemcpy(d_img, img, (size_t)n, cudaMemcpyHostToDevice);
    cudaMemset(d_hist, 0, 256 * sizeof(int));
"""


def _tail(p: dict) -> str:
    s = "    cudaMemcpy(out, d_out, (size_t)n, cudaMemcpyDeviceToHost);\n"
    if p["hist_out"]:
        s += "    cudaMemcpy(hist, d_hist, 256 * sizeof(int), cudaMemcpyDeviceToHost);\n"
    return s + "    cudaFree(d_img); cudaFree(d_out); cudaFree(d_hist); cudaFree(d_lut);\n}\n"


REMAP_K = """__global__ void remap(int n, const unsigned char* img, const int* lut, unsigned char* out) {
    __shared__ int sl[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sl[b] = lut[b];
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = (unsigned char)sl[pre(img[i])];
}

"""

LUT_K = """__global__ void lut_one_thread(int n, const int* hist, int* lut) {
    make_lut(n, hist, lut);
}

"""

SHARED_HIST_K = """__global__ void hist_shared(int n, const unsigned char* img, int* hist) {
    __shared__ int sh[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&sh[pre(img[i])], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) if (sh[b]) atomicAdd(&hist[b], sh[b]);
}

"""

GRID = """    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int nb = sms * 4, need = (n + 255) / 256;
    if (nb > need) nb = need;
    if (nb < 1) nb = 1;
"""


def _global_atomics(h: str, p: dict) -> str:
    return (h + REMAP_K + LUT_K + """__global__ void hist_global(int n, const unsigned char* img, int* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[pre(img[i])], 1);
}

""" + _sig(p) + " {\n" + SETUP + """    int nb = (n + 255) / 256;
    hist_global<<<nb, 256>>>(n, d_img, d_hist);
    lut_one_thread<<<1, 1>>>(n, d_hist, d_lut);
    remap<<<nb, 256>>>(n, d_img, d_lut, d_out);
""" + _tail(p))


def _shared_merged(h: str, p: dict, pinned: bool) -> str:
    setup = SETUP
    tail = _tail(p)
    if pinned:
        reg = ("    cudaHostRegister((void*)img, (size_t)n, cudaHostRegisterDefault);\n"
               "    cudaHostRegister((void*)out, (size_t)n, cudaHostRegisterDefault);\n")
        setup = SETUP.replace("    unsigned char *d_img", reg + "    unsigned char *d_img")
        unreg = "    cudaHostUnregister((void*)img); cudaHostUnregister((void*)out);\n"
        tail = tail.replace("    cudaFree(d_img);", unreg + "    cudaFree(d_img);")
    # the bins staged in shared memory by a 256-thread block, the LUT by its first thread
    return (h + REMAP_K + SHARED_HIST_K + """__global__ void lut_block(int n, const int* hist, int* lut) {
    __shared__ int raw[256];
    __shared__ int sh[256];
    int b = threadIdx.x;
    raw[b] = hist[b];
    __syncthreads();
    if (b == 0) make_lut(n, raw, sh);  // the clip and the levels, one thread (256 bins)
    __syncthreads();
    lut[b] = sh[b];
}

""" + _sig(p) + " {\n" + setup + GRID + """    hist_shared<<<nb, 256>>>(n, d_img, d_hist);
    lut_block<<<1, 256>>>(n, d_hist, d_lut);
    remap<<<nb, 256>>>(n, d_img, d_lut, d_out);
""" + tail)


def _warp_private(h: str, p: dict) -> str:
    return (h + REMAP_K + LUT_K
            + """// a 256-bin histogram per warp in shared memory (less contention), uchar4 loads, merged per block
__global__ void hist_warp(int n, const unsigned char* img, int* hist) {
    __shared__ int wh[8][256];
    int w = threadIdx.x >> 5;
    for (int k = threadIdx.x; k < 8 * 256; k += blockDim.x) wh[k >> 8][k & 255] = 0;
    __syncthreads();
    int n4 = n >> 2;
    const uchar4* v4 = (const uchar4*)img;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        uchar4 q = v4[i];
        atomicAdd(&wh[w][pre(q.x)], 1);
        atomicAdd(&wh[w][pre(q.y)], 1);
        atomicAdd(&wh[w][pre(q.z)], 1);
        atomicAdd(&wh[w][pre(q.w)], 1);
    }
    if (blockIdx.x == 0)
        for (int i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) atomicAdd(&wh[w][pre(img[i])], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        int s = 0;
        for (int k = 0; k < 8; ++k) s += wh[k][b];
        if (s) atomicAdd(&hist[b], s);
    }
}

""" + _sig(p) + " {\n" + SETUP + GRID + """    hist_warp<<<nb, 256>>>(n, d_img, d_hist);
    lut_one_thread<<<1, 1>>>(n, d_hist, d_lut);
    remap<<<nb, 256>>>(n, d_img, d_lut, d_out);
""" + _tail(p))


def _host_cdf(h: str, p: dict) -> str:
    return (h + SHARED_HIST_K + """__constant__ int c_lut[256];

__global__ void remap_const(int n, const unsigned char* img, unsigned char* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (unsigned char)c_lut[pre(img[i])];
}

""" + _sig(p) + " {\n" + SETUP + GRID + """    hist_shared<<<nb, 256>>>(n, d_img, d_hist);
    int hh[256], hl[256];
    cudaMemcpy(hh, d_hist, 256 * sizeof(int), cudaMemcpyDeviceToHost);
    make_lut(n, hh, hl);
    cudaMemcpyToSymbol(c_lut, hl, 256 * sizeof(int));
    remap_const<<<(n + 127) / 128, 128>>>(n, d_img, d_out);
""" + _tail(p))


def _multi_pass(h: str, p: dict) -> str:
    # one kernel per stage: per-block partial histograms to global rows, a reduce, the clip, a scan, the levels
    clip = ""
    if p["clip"]:
        clip = f"""__global__ void clip_bins(int n, int* h) {{
    __shared__ long long ex;
    int b = threadIdx.x;
    int clip = (int)(((long long)n * {p['clip']}) / 256);
    if (clip < 1) clip = 1;
    if (b == 0) ex = 0;
    __syncthreads();
    int x = h[b];
    if (x > clip) {{ atomicAdd((unsigned long long*)&ex, (unsigned long long)(x - clip)); x = clip; }}
    __syncthreads();
    long long e = ex;
    h[b] = x + (int)(e / 256) + (b < (int)(e % 256) ? 1 : 0);
}}

"""
    half = "den / 2" if p["round"] else "0"
    return (h + REMAP_K + clip + """__global__ void hist_rows(int n, int chunk, const unsigned char* img, int* rows) {
    __shared__ int sh[256];
    sh[threadIdx.x] = 0;
    __syncthreads();
    int lo = blockIdx.x * chunk, hi = min(n, lo + chunk);
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) atomicAdd(&sh[pre(img[i])], 1);
    __syncthreads();
    rows[blockIdx.x * 256 + threadIdx.x] = sh[threadIdx.x];
}

__global__ void reduce_rows(int nrows, const int* rows, int* hist, int* work) {
    int b = threadIdx.x;
    int s = 0;
    for (int r = 0; r < nrows; ++r) s += rows[r * 256 + b];
    hist[b] = s;
    work[b] = s;
}

__global__ void scan_bins(const int* h, long long* cum) {
    __shared__ long long s[256];
    int b = threadIdx.x;
    s[b] = h[b];
    __syncthreads();
    for (int d = 1; d < 256; d <<= 1) {
        long long x = b >= d ? s[b - d] : 0;
        __syncthreads();
        s[b] += x;
        __syncthreads();
    }
    cum[b] = s[b];
}

__global__ void levels(int n, const int* h, const long long* cum, int* lut) {
    __shared__ long long cmin;
    int b = threadIdx.x;
    if (b == 0) {
        cmin = -1;
        for (int k = 0; k < 256; ++k) if (h[k] > 0) { cmin = cum[k]; break; }
    }
    __syncthreads();
    long long den = cmin < 0 ? 0 : (long long)n - cmin;
    if (den <= 0 || cum[b] < cmin) { lut[b] = 0; return; }
""" + f"    lut[b] = (int)(((cum[b] - cmin) * {p['levels'] - 1} + {half}) / den);\n" + """}

""" + _sig(p) + " {\n" + SETUP + """    int chunk = 1 << 16;
    int nrows = (int)(((long long)n + chunk - 1) / chunk);
    int *d_rows, *d_work; long long* d_cum;
    cudaMalloc(&d_rows, (size_t)nrows * 256 * sizeof(int));
    cudaMalloc(&d_work, 256 * sizeof(int));
    cudaMalloc(&d_cum, 256 * sizeof(long long));
    hist_rows<<<nrows, 256>>>(n, chunk, d_img, d_rows);
    reduce_rows<<<1, 256>>>(nrows, d_rows, d_hist, d_work);
""" + ("    clip_bins<<<1, 256>>>(n, d_work);\n" if p["clip"] else "") + """    scan_bins<<<1, 256>>>(d_work, d_cum);
    levels<<<1, 256>>>(n, d_work, d_cum, d_lut);
    remap<<<(n + 255) / 256, 256>>>(n, d_img, d_lut, d_out);
    cudaFree(d_rows); cudaFree(d_work); cudaFree(d_cum);
""" + _tail(p))


def _single_block(h: str, p: dict) -> str:
    return (h + """__global__ void equalize_block(int n, const unsigned char* img, int* hist, int* lut,
                               unsigned char* out) {
    __shared__ int sh[256];
    __shared__ int sl[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&sh[pre(img[i])], 1);
    __syncthreads();
    if (threadIdx.x == 0) make_lut(n, sh, sl);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) { hist[b] = sh[b]; lut[b] = sl[b]; }
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = (unsigned char)sl[pre(img[i])];
}

""" + _sig(p) + " {\n" + SETUP + "    equalize_block<<<1, 1024>>>(n, d_img, d_hist, d_lut, d_out);\n" + _tail(p))


def _reference(p: dict) -> str:
    extra = ", int* hist_out" if p["hist_out"] else ""
    return ("#include <stdlib.h>\n\n"
            "static inline int pre(int v) {\n" + _pre_body(p["pre"], p["lo"], p["hi"]) + "}\n\n"
            + _lut_fn(p, "static ")
            + f"void hist_equalize(int n, const unsigned char* img, unsigned char* out{extra}) {{\n"
            + """    if (n <= 0) return;
    int hist[256], lut[256];
    for (int b = 0; b < 256; ++b) hist[b] = 0;
    for (int i = 0; i < n; ++i) hist[pre(img[i])]++;
    make_lut(n, hist, lut);
    for (int i = 0; i < n; ++i) out[i] = (unsigned char)lut[pre(img[i])];
""" + ("    for (int b = 0; b < 256; ++b) hist_out[b] = hist[b];\n" if p["hist_out"] else "") + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    pre = PRES[index % len(PRES)]
    lo = int(rng.integers(0, 60)) if index % 2 else 0
    hi = 256 - (int(rng.integers(0, 80)) if (index // 2) % 2 else 0)
    p = {"pre": pre, "lo": lo, "hi": hi, "levels": LEVELS[(index // 3 + int(rng.integers(2))) % len(LEVELS)],
         "clip": [0, 2, 0, 4, 3][(index // 5) % 5], "round": (index // 4) % 2 == 0, "hist_out": index % 4 >= 2}
    n_time = int((1.5e7 if pre == "stretch" else 4.0e7) * (0.8 + 0.4 * float(rng.random())))
    n1 = 10000 + int(rng.integers(90000))
    h = _head(p)
    rule = (f"lut[b] = ((cdf[b] - cdf_min) * {p['levels'] - 1}" + (" + (n - cdf_min) / 2" if p["round"] else "")
            + ") / (n - cdf_min)")
    clip = (f" Before the CDF, bins above clip = max(1, n * {p['clip']} / 256) are cut to clip and the total excess "
            "E is spread: every bin gains E / 256 and bins 0 .. E % 256 - 1 one more." if p["clip"] else "")
    task = {
        "function_name": "hist_equalize",
        "description": (f"Histogram-equalize an 8-bit image to {p['levels']} levels: {_pre_text(pre, lo, hi)}; the "
                        f"256-bin histogram of q.{clip} With cdf the running sum of the bins, cdf_min its value "
                        f"at the first non-empty bin: {rule} (integer division) for cdf[b] >= cdf_min, else 0 "
                        "(all 0 when n == cdf_min); out[i] = lut[q]."
                        + (" hist receives the unclipped histogram of q." if p["hist_out"] else "")),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "img", "role": "in", "ctype": "unsigned char", "length": "n",
             "dist": {"kind": "randint", "low": lo, "high": hi}},
            {"name": "out", "role": "out", "ctype": "unsigned char", "length": "n"},
        ] + ([{"name": "hist", "role": "out", "ctype": "int", "length": "256"}] if p["hist_out"] else []),
        "size_configs": [{"n": 4097}, {"n": n1}, {"n": 1}, {"n": 333}, {"n": n_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["image", "histogram", "integer"],
    }
    variants = [
        Variant("global_atomics_one_thread_cdf", ("naive", "atomics", "multi_pass", "single_thread", "block_256",
                                                  "pageable"), _global_atomics(h, p)),
        Variant("shared_hist_merged", ("shared_tiling", "atomics", "two_level", "grid_stride", "block_256",
                                       "pageable"), _shared_merged(h, p, False)),
        Variant("shared_hist_pinned", ("shared_tiling", "atomics", "two_level", "grid_stride", "pinned",
                                       "block_256"), _shared_merged(h, p, True)),
        Variant("warp_private_vec4", ("shared_tiling", "atomics", "vectorized", "grid_stride", "block_256",
                                      "pageable"), _warp_private(h, p)),
        Variant("host_cdf_constant_lut", ("host_compute", "constant_memory", "shared_tiling", "atomics",
                                          "block_128", "pageable"), _host_cdf(h, p)),
        Variant("kernel_per_stage", ("multi_pass", "many_launches", "two_level", "shared_tiling",
                                     "block_256", "pageable"), _multi_pass(h, p)),
        Variant("single_block", ("single_thread", "shared_tiling", "atomics", "block_1024", "pageable"),
                _single_block(h, p)),
    ]
    return GeneratedTask(task, tuple(variants), dict(p, n_time=n_time))


FAMILY = Family(
    name="histogram_equalize",
    description="8-bit histogram equalization (histogram, optional clip, integer CDF levels, remap), exact outputs",
    generate=generate,
    n_tasks=50,
    tags=("image", "integer"),
)
