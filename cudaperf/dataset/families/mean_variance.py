"""Per-segment mean and variance of f(x): equal-length segments, CSR-style offsets, or the whole array (1 segment).

The reference is two-pass in double (mean, then the sum of squared deviations); the variants use two-pass,
one-pass Welford with parallel merging, or sum/sum-of-squares in double (accurate for these input ranges).
Parameters: segment layout and shape (few huge segments to millions of tiny ones), f (identity or a libm map),
population or sample variance, element type and sizes. Empty segments get mean 0 and variance 0; sample variance
of a segment with fewer than 2 elements is 0.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

FUNCS = ["v", "log(v)", "v", "sqrt(v)", "v * v", "exp(-v)", "v", "log1p(v * v)"]
FIXED_SHAPES = [(4, 4_000_000), (1, 16_000_000), (100_000, 160), (16_000, 1000), (1_000_000, 16), (2000, 8000)]
CSR_NSEG = [1000, 1_000_000, 20_000, 1, 200_000]


class Spec:
    def __init__(self, t, csr, f, sample, fn):
        self.t, self.csr, self.f, self.sample, self.fn = t, csr, f, sample, fn

    @property
    def sig(self) -> str:
        seg = "const int* offsets" if self.csr else "int len"
        return f'extern "C" void {self.fn}(int nseg, {seg}, const {self.t}* x, double* mean, double* var)'

    @property
    def segp(self) -> str:
        return "const int* __restrict__ off" if self.csr else "int len"

    @property
    def sega(self) -> str:
        return "doff" if self.csr else "len"

    @property
    def head(self) -> str:
        rng = ("    *lo = off[s]; *hi = off[s + 1];" if self.csr
               else "    *lo = (size_t)s * len; *hi = *lo + len;")
        den = "(cnt > 1 ? (double)(cnt - 1) : 0.0)" if self.sample else "(double)cnt"
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"__host__ __device__ __forceinline__ double fv({self.t} xv) {{ double v = (double)xv; return {self.f}; }}\n\n"
                f"__host__ __device__ __forceinline__ void seg_range(int s, {self.segp}, size_t* lo, size_t* hi) {{\n{rng}\n}}\n\n"
                "/* variance from the count and the sum of squared deviations (0 where undefined) */\n"
                "__host__ __device__ __forceinline__ double var_of(long long cnt, double m2) {\n"
                f"    double den = {den};\n"
                "    return den > 0.0 ? m2 / den : 0.0;\n}\n\n"
                "__device__ __forceinline__ double warp_sum(double v) {\n"
                "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
                "    return v;\n}\n\n")

    def entry(self) -> str:
        t = self.t
        if self.csr:
            sz = ("    size_t n = (size_t)offsets[nseg];\n"
                  "    int* doff; cudaMalloc(&doff, (size_t)(nseg + 1) * sizeof(int));\n"
                  "    cudaMemcpy(doff, offsets, (size_t)(nseg + 1) * sizeof(int), cudaMemcpyHostToDevice);\n")
        else:
            sz = "    size_t n = (size_t)nseg * len;\n"
        return (f"{self.sig} {{\n    if (nseg <= 0) return;\n" + sz
                + f"    {t}* dx; double *dmean, *dvar;\n"
                f"    cudaMalloc(&dx, (n ? n : 1) * sizeof({t}));\n"
                "    cudaMalloc(&dmean, (size_t)nseg * sizeof(double)); cudaMalloc(&dvar, (size_t)nseg * sizeof(double));\n"
                f"    if (n) cudaMemcpy(dx, x, n * sizeof({t}), cudaMemcpyHostToDevice);\n")

    def exit(self) -> str:
        return ("    cudaMemcpy(mean, dmean, (size_t)nseg * sizeof(double), cudaMemcpyDeviceToHost);\n"
                "    cudaMemcpy(var, dvar, (size_t)nseg * sizeof(double), cudaMemcpyDeviceToHost);\n"
                f"    cudaFree(dx); cudaFree(dmean); cudaFree(dvar);{' cudaFree(doff);' if self.csr else ''}\n}}\n")


def _thread_two_pass(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void seg_thread(int nseg, {s.segp}, const {t}* x, double* mean, double* var) {{\n"
            "    int sg = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (sg >= nseg) return;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    long long cnt = (long long)(hi - lo);\n"
            "    double sum = 0.0; for (size_t i = lo; i < hi; ++i) sum += fv(x[i]);\n"
            "    double mu = cnt > 0 ? sum / (double)cnt : 0.0;\n"
            "    double m2 = 0.0; for (size_t i = lo; i < hi; ++i) { double d = fv(x[i]) - mu; m2 += d * d; }\n"
            "    mean[sg] = mu; var[sg] = var_of(cnt, m2);\n}\n\n"
            + s.entry()
            + f"    seg_thread<<<(nseg + 127) / 128, 128>>>(nseg, {s.sega}, dx, dmean, dvar);\n" + s.exit())


def _warp_two_pass(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void seg_warp(int nseg, {s.segp}, const {t}* __restrict__ x, double* mean, double* var) {{\n"
            "    int sg = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (sg >= nseg) return;  // whole warp leaves together\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    long long cnt = (long long)(hi - lo);\n"
            "    double sum = 0.0; for (size_t i = lo + lane; i < hi; i += 32) sum += fv(x[i]);\n"
            "    sum = warp_sum(sum);\n"
            "    double mu = cnt > 0 ? sum / (double)cnt : 0.0;\n"
            "    double m2 = 0.0; for (size_t i = lo + lane; i < hi; i += 32) { double d = fv(x[i]) - mu; m2 += d * d; }\n"
            "    m2 = warp_sum(m2);\n"
            "    if (lane == 0) { mean[sg] = mu; var[sg] = var_of(cnt, m2); }\n}\n\n"
            + s.entry()
            + f"    seg_warp<<<(nseg + 7) / 8, 256>>>(nseg, {s.sega}, dx, dmean, dvar);\n" + s.exit())


def _block_welford(s: Spec) -> str:
    t = s.t
    return (s.head
            + "/* Chan et al.: merge (nb, mb, qb) into (na, ma, qa) */\n"
            "__device__ __forceinline__ void wmerge(double& na, double& ma, double& qa, double nb, double mb, double qb) {\n"
            "    if (nb == 0.0) return;\n"
            "    if (na == 0.0) { na = nb; ma = mb; qa = qb; return; }\n"
            "    double n = na + nb, d = mb - ma;\n"
            "    ma += d * (nb / n); qa += qb + d * d * (na * nb / n); na = n;\n}\n\n"
            f"__global__ void seg_block(int nseg, {s.segp}, const {t}* x, double* mean, double* var) {{\n"
            "    __shared__ double sn[256], sm[256], sq[256];\n"
            "    int sg = blockIdx.x, tid = threadIdx.x;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    double n = 0.0, mu = 0.0, q = 0.0;\n"
            "    for (size_t i = lo + tid; i < hi; i += 256) {\n"
            "        double v = fv(x[i]); n += 1.0; double d = v - mu; mu += d / n; q += d * (v - mu);\n    }\n"
            "    sn[tid] = n; sm[tid] = mu; sq[tid] = q;\n    __syncthreads();\n"
            "    for (int h = 128; h > 0; h >>= 1) {\n"
            "        if (tid < h) { double a = sn[tid], b = sm[tid], c = sq[tid]; wmerge(a, b, c, sn[tid + h], sm[tid + h], sq[tid + h]);\n"
            "                       sn[tid] = a; sm[tid] = b; sq[tid] = c; }\n"
            "        __syncthreads();\n    }\n"
            "    if (tid == 0) { long long cnt = (long long)(hi - lo); mean[sg] = cnt > 0 ? sm[0] : 0.0; var[sg] = var_of(cnt, sq[0]); }\n}\n\n"
            + s.entry()
            + f"    seg_block<<<nseg, 256>>>(nseg, {s.sega}, dx, dmean, dvar);\n" + s.exit())


def _warp_sumsq_kernel(s: Spec) -> str:
    t = s.t
    return (f"__global__ void seg_sumsq(int nseg, {s.segp}, const {t}* __restrict__ x, double* mean, double* var) {{\n"
            "    int sg = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
            "    if (sg >= nseg) return;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    long long cnt = (long long)(hi - lo);\n"
            "    double a = 0.0, b = 0.0;\n"
            "    for (size_t i = lo + lane; i < hi; i += 32) { double v = fv(__ldg(x + i)); a += v; b += v * v; }\n"
            "    a = warp_sum(a); b = warp_sum(b);\n"
            "    if (lane == 0) {\n"
            "        double mu = cnt > 0 ? a / (double)cnt : 0.0;\n"
            "        double m2 = b - a * mu; if (m2 < 0.0) m2 = 0.0;\n"
            "        mean[sg] = mu; var[sg] = var_of(cnt, m2);\n    }\n}\n\n")


def _warp_sumsq(s: Spec) -> str:
    return (s.head + _warp_sumsq_kernel(s) + s.entry()
            + f"    seg_sumsq<<<(nseg + 3) / 4, 128>>>(nseg, {s.sega}, dx, dmean, dvar);\n" + s.exit())


def _warp_sumsq_pinned(s: Spec) -> str:
    t = s.t
    ent = s.entry().replace(
        f"    if (n) cudaMemcpy(dx, x, n * sizeof({t}), cudaMemcpyHostToDevice);\n",
        f"    if (n) {{ cudaHostRegister((void*)x, n * sizeof({t}), cudaHostRegisterDefault);\n"
        f"             cudaMemcpy(dx, x, n * sizeof({t}), cudaMemcpyHostToDevice); cudaHostUnregister((void*)x); }}\n")
    return (s.head + _warp_sumsq_kernel(s) + ent
            + f"    seg_sumsq<<<(nseg + 3) / 4, 128>>>(nseg, {s.sega}, dx, dmean, dvar);\n" + s.exit())


def _flat_atomic(s: Spec) -> str:
    t = s.t
    maxlen = ("    size_t maxlen = 0;\n"
              "    for (int q = 0; q < nseg; ++q) { size_t l = (size_t)(offsets[q + 1] - offsets[q]); if (l > maxlen) maxlen = l; }\n"
              if s.csr else "    size_t maxlen = (size_t)len;\n")
    return (s.head + f"__global__ void chunk_sums(int nseg, {s.segp}, const {t}* __restrict__ x, double* acc) {{\n"
            "    __shared__ double wa[8], wb[8];\n"
            "    int sg = blockIdx.x;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    size_t c0 = lo + (size_t)blockIdx.y * 4096;\n"
            "    if (c0 >= hi) return;  // the whole block leaves together\n"
            "    size_t c1 = c0 + 4096 < hi ? c0 + 4096 : hi;\n"
            "    double a = 0.0, b = 0.0;\n"
            "    for (size_t i = c0 + threadIdx.x; i < c1; i += 256) { double v = fv(x[i]); a += v; b += v * v; }\n"
            "    a = warp_sum(a); b = warp_sum(b);\n"
            "    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
            "    if (lane == 0) { wa[w] = a; wb[w] = b; }\n"
            "    __syncthreads();\n"
            "    if (w == 0) {\n"
            "        a = lane < 8 ? wa[lane] : 0.0; b = lane < 8 ? wb[lane] : 0.0;\n"
            "        a = warp_sum(a); b = warp_sum(b);\n"
            "        if (lane == 0) { atomicAdd(acc + 2 * (size_t)sg, a); atomicAdd(acc + 2 * (size_t)sg + 1, b); }\n    }\n}\n\n"
            f"__global__ void finish_segs(int nseg, {s.segp}, const double* acc, double* mean, double* var) {{\n"
            "    int sg = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (sg >= nseg) return;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    long long cnt = (long long)(hi - lo);\n"
            "    double a = acc[2 * (size_t)sg], b = acc[2 * (size_t)sg + 1];\n"
            "    double mu = cnt > 0 ? a / (double)cnt : 0.0;\n"
            "    double m2 = b - a * mu; if (m2 < 0.0) m2 = 0.0;\n"
            "    mean[sg] = mu; var[sg] = var_of(cnt, m2);\n}\n\n"
            + s.entry() + maxlen
            + "    double* dacc; cudaMalloc(&dacc, 2 * (size_t)nseg * sizeof(double)); cudaMemset(dacc, 0, 2 * (size_t)nseg * sizeof(double));\n"
            "    unsigned chunks = (unsigned)((maxlen + 4095) / 4096); if (chunks < 1) chunks = 1;\n"
            f"    chunk_sums<<<dim3(nseg, chunks), 256>>>(nseg, {s.sega}, dx, dacc);\n"
            f"    finish_segs<<<(nseg + 255) / 256, 256>>>(nseg, {s.sega}, dacc, dmean, dvar);\n"
            "    cudaFree(dacc);\n" + s.exit())


def _multi_kernel(s: Spec) -> str:
    t = s.t
    return (s.head + f"__global__ void seg_means(int nseg, {s.segp}, const {t}* x, double* mean) {{\n"
            "    __shared__ double sh[128];\n"
            "    int sg = blockIdx.x, tid = threadIdx.x;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    double a = 0.0; for (size_t i = lo + tid; i < hi; i += 128) a += fv(x[i]);\n"
            "    sh[tid] = a; __syncthreads();\n"
            "    for (int h = 64; h > 0; h >>= 1) { if (tid < h) sh[tid] += sh[tid + h]; __syncthreads(); }\n"
            "    if (tid == 0) mean[sg] = hi > lo ? sh[0] / (double)(hi - lo) : 0.0;\n}\n\n"
            f"__global__ void sq_dev(int nseg, {s.segp}, const {t}* x, const double* mean, double* d2) {{\n"
            "    int sg = blockIdx.x;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    double mu = mean[sg];\n"
            "    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) { double d = fv(x[i]) - mu; d2[i] = d * d; }\n}\n\n"
            f"__global__ void seg_vars(int nseg, {s.segp}, const double* d2, double* var) {{\n"
            "    __shared__ double sh[128];\n"
            "    int sg = blockIdx.x, tid = threadIdx.x;\n"
            f"    size_t lo, hi; seg_range(sg, {'off' if s.csr else 'len'}, &lo, &hi);\n"
            "    double a = 0.0; for (size_t i = lo + tid; i < hi; i += 128) a += d2[i];\n"
            "    sh[tid] = a; __syncthreads();\n"
            "    for (int h = 64; h > 0; h >>= 1) { if (tid < h) sh[tid] += sh[tid + h]; __syncthreads(); }\n"
            "    if (tid == 0) var[sg] = var_of((long long)(hi - lo), sh[0]);\n}\n\n"
            + s.entry()
            + "    double* dd2; cudaMalloc(&dd2, (n ? n : 1) * sizeof(double));\n"
            f"    seg_means<<<nseg, 128>>>(nseg, {s.sega}, dx, dmean);\n"
            f"    sq_dev<<<nseg, 128>>>(nseg, {s.sega}, dx, dmean, dd2);\n"
            f"    seg_vars<<<nseg, 128>>>(nseg, {s.sega}, dd2, dvar);\n"
            "    cudaFree(dd2);\n" + s.exit())


def _map_then_host(s: Spec) -> str:
    t = s.t
    rng = ("size_t lo = (size_t)offsets[sg], hi = (size_t)offsets[sg + 1];" if s.csr
           else "size_t lo = (size_t)sg * len, hi = lo + len;")
    return (s.head + f"__global__ void map_f(size_t n, const {t}* x, double* f) {{\n"
            "    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) f[i] = fv(x[i]);\n}\n\n"
            + f"{s.sig} {{\n    if (nseg <= 0) return;\n"
            + ("    size_t n = (size_t)offsets[nseg];\n" if s.csr else "    size_t n = (size_t)nseg * len;\n")
            + f"    {t}* dx; double* df; cudaMalloc(&dx, (n ? n : 1) * sizeof({t})); cudaMalloc(&df, (n ? n : 1) * sizeof(double));\n"
            f"    if (n) cudaMemcpy(dx, x, n * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "    if (n) map_f<<<(unsigned)((n + 255) / 256), 256>>>(n, dx, df);\n"
            "    double* hf = (double*)malloc((n ? n : 1) * sizeof(double));\n"
            "    if (n) cudaMemcpy(hf, df, n * sizeof(double), cudaMemcpyDeviceToHost);\n"
            "    for (int sg = 0; sg < nseg; ++sg) {\n"
            f"        {rng}\n"
            "        long long cnt = (long long)(hi - lo);\n"
            "        double a = 0.0; for (size_t i = lo; i < hi; ++i) a += hf[i];\n"
            "        double mu = cnt > 0 ? a / (double)cnt : 0.0;\n"
            "        double q = 0.0; for (size_t i = lo; i < hi; ++i) { double d = hf[i] - mu; q += d * d; }\n"
            "        mean[sg] = mu; var[sg] = var_of(cnt, q);\n    }\n"
            "    free(hf); cudaFree(dx); cudaFree(df);\n}\n")


def _reference(s: Spec) -> str:
    t = s.t
    seg = "const int* offsets" if s.csr else "int len"
    rng = ("size_t lo = (size_t)offsets[sg], hi = (size_t)offsets[sg + 1];" if s.csr
           else "size_t lo = (size_t)sg * len, hi = lo + len;")
    den = "(cnt > 1 ? (double)(cnt - 1) : 0.0)" if s.sample else "(double)cnt"
    return ("#include <math.h>\n#include <stddef.h>\n\n"
            f"static double fv({t} xv) {{ double v = (double)xv; return {s.f}; }}\n\n"
            f"void {s.fn}(int nseg, {seg}, const {t}* x, double* mean, double* var) {{\n"
            "    for (int sg = 0; sg < nseg; ++sg) {\n"
            f"        {rng}\n"
            "        long long cnt = (long long)(hi - lo);\n"
            "        double a = 0.0; for (size_t i = lo; i < hi; ++i) a += fv(x[i]);\n"
            "        double mu = cnt > 0 ? a / (double)cnt : 0.0;\n"
            "        double q = 0.0; for (size_t i = lo; i < hi; ++i) { double d = fv(x[i]) - mu; q += d * d; }\n"
            f"        double den = {den};\n"
            "        mean[sg] = mu; var[sg] = den > 0.0 ? q / den : 0.0;\n    }\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    csr = index % 3 == 2
    f = FUNCS[index % len(FUNCS)]
    sample = (index // 2) % 2 == 1
    heavy = f != "v" and f != "v * v"
    budget = 3_000_000 if heavy else 16_000_000
    if t == "double":
        budget = budget * 3 // 4
    fn = ("csr_" if csr else "seg_") + ("mean_samplevar_" if sample else "mean_var_") + t
    s = Spec(t, csr, f, sample, fn)
    if csr:
        nseg_t = CSR_NSEG[(index // 3) % len(CSR_NSEG)]
        n_t = budget + int(rng.integers(0, 1000))
        configs = [{"nseg": 50, "n": 1000}, {"nseg": 1000, "n": 77_777}, {"nseg": 1, "n": 5003},
                   {"nseg": 200, "n": 100}, {"nseg": nseg_t, "n": n_t}]
        seg_args = [{"name": "offsets", "role": "in", "ctype": "int", "length": "nseg + 1",
                     "dist": {"kind": "offsets", "high": "n"}}]
        xlen = "n"
        layout = "segment s is x[offsets[s] .. offsets[s+1])"
    else:
        ns, ln = FIXED_SHAPES[(index // 3 + index) % len(FIXED_SHAPES)]
        scale = budget / (ns * ln)
        if ns > 1:
            ns = max(1, int(ns * scale))
        else:
            ln = int(ln * scale)
        ln += int(rng.integers(0, 3)) if ln > 100 else 0
        configs = [{"nseg": 3, "len": 1000}, {"nseg": 517, "len": 33}, {"nseg": 1, "len": 77_777},
                   {"nseg": 100, "len": 1}, {"nseg": ns, "len": ln}]
        seg_args = [{"name": "len", "role": "scalar", "ctype": "int"}]
        xlen = "nseg * len"
        layout = "segment s is x[s*len .. (s+1)*len)"
    lo, hi = [(0.5, 2.5), (0.1, 1.0), (1.0, 3.0)][int(rng.integers(3))] if f in ("log(v)", "sqrt(v)") else \
        [(-1.0, 1.0), (0.5, 2.5), (-2.0, 1.0)][int(rng.integers(3))]
    kind = "sample (divide by count - 1; 0 when count < 2)" if sample else "population (divide by count)"
    task = {
        "function_name": fn,
        "description": (f"For nseg segments of a {t} array x ({layout}), mean[s] and the {kind} variance var[s] "
                        f"of f(x[i]) over the segment, f(v) = {f} in double. Empty segments give 0 and 0. "
                        "The reference is two-pass in double; any numerically sound method passes."),
        "returns": "void",
        "args": [{"name": "nseg", "role": "scalar", "ctype": "int"}] + seg_args + [
            {"name": "x", "role": "in", "ctype": t, "length": xlen, "dist": {"kind": "uniform", "low": lo, "high": hi}},
            {"name": "mean", "role": "out", "ctype": "double", "length": "nseg"},
            {"name": "var", "role": "out", "ctype": "double", "length": "nseg"},
        ],
        "size_configs": configs,
        "tolerance": {"rtol": 1e-8, "atol": 1e-10},
        "reference_c": _reference(s),
        "tags": ["reduction", "segmented", "statistics", t],
    }
    variants = (
        Variant("thread_per_segment", ("thread_per_row", "strided", "multi_pass", "block_128", "pageable"),
                _thread_two_pass(s)),
        Variant("warp_two_pass", ("block_per_row", "warp_shuffle", "coalesced", "block_256", "pageable"),
                _warp_two_pass(s)),
        Variant("block_welford", ("block_per_row", "tree_reduction", "coalesced", "block_256", "pageable"),
                _block_welford(s)),
        Variant("warp_sumsq", ("block_per_row", "warp_shuffle", "fused", "readonly_cache", "coalesced", "block_128",
                               "pageable"), _warp_sumsq(s)),
        Variant("warp_sumsq_pinned", ("block_per_row", "warp_shuffle", "fused", "readonly_cache", "coalesced",
                                      "block_128", "pinned"), _warp_sumsq_pinned(s)),
        Variant("chunk_atomic", ("two_level", "atomics", "warp_shuffle", "multi_pass", "coalesced", "block_256",
                                 "pageable"), _flat_atomic(s)),
        Variant("multi_kernel", ("multi_pass", "tree_reduction", "block_per_row", "block_128", "pageable"),
                _multi_kernel(s)),
        Variant("map_then_host", ("naive", "host_compute", "extra_transfers", "coalesced", "block_256", "pageable"),
                _map_then_host(s)),
    )
    return GeneratedTask(task, variants, {"type": t, "csr": csr, "f": f, "sample": sample})


FAMILY = Family(
    name="mean_variance",
    description="per-segment (fixed, CSR or whole-array) mean and variance of f(x), two-pass / Welford / sum-sumsq",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
