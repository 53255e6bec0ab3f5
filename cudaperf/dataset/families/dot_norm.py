"""Dot products and norms of one to three vectors (x, y, weights w), float or double inputs, double accumulation.

Parameters: the expression (dot, weighted dot, L1/L2/Linf norms of x - y or w*x, robust losses with transcendental
terms, several accumulators in one pass such as cosine similarity), the element type, whether the value is returned
or written to ``out[0]``, the input ranges and the sizes. Every term is computed in double on both sides.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

# name, arrays, [(kind, term)], final (over a0, a1, a2), heavy?, description
EXPRS = [
    ("dot", "xy", [("sum", "x * y")], "a0", False, "the dot product sum x[i]*y[i]"),
    ("l1_diff", "xy", [("sum", "fabs(x - y)")], "a0", False, "the L1 norm of x - y"),
    ("l2_diff", "xy", [("sum", "(x - y) * (x - y)")], "sqrt(a0)", False, "the L2 norm of x - y"),
    ("linf_diff", "xy", [("max", "fabs(x - y)")], "a0", False, "the L-infinity norm (max |x[i]-y[i]|) of x - y"),
    ("weighted_l2", "wx", [("sum", "(w * x) * (w * x)")], "sqrt(a0)", False, "the L2 norm of w*x (element-wise)"),
    ("weighted_dot", "wxy", [("sum", "w * x * y")], "a0", False, "the weighted dot product sum w[i]*x[i]*y[i]"),
    ("pseudo_huber", "xy", [("sum", "sqrt(1.0 + (x - y) * (x - y)) - 1.0")], "a0", True,
     "the pseudo-Huber loss sum sqrt(1 + (x-y)^2) - 1"),
    ("cauchy", "xy", [("sum", "log1p((x - y) * (x - y))")], "a0", True, "the Cauchy loss sum log(1 + (x-y)^2)"),
    ("gauss_sim", "xy", [("sum", "exp(-(x - y) * (x - y))")], "a0", True,
     "the Gaussian similarity sum exp(-(x-y)^2)"),
    ("cosine", "xy", [("sum", "x * y"), ("sum", "x * x"), ("sum", "y * y")], "a0 / sqrt(a1 * a2)", False,
     "the cosine similarity dot(x,y) / (|x| |y|), all three sums in one pass"),
    ("rel_l2_err", "xy", [("sum", "(x - y) * (x - y)"), ("sum", "y * y")], "sqrt(a0 / a1)", False,
     "the relative error |x - y|_2 / |y|_2"),
    ("log_cosh", "xy", [("sum", "log(cosh(x - y))")], "a0", True, "the log-cosh loss sum log(cosh(x-y))"),
    ("p15_norm", "xy", [("sum", "pow(fabs(x - y), 1.5)")], "pow(a0, 1.0 / 1.5)", True,
     "the 1.5-norm (sum |x-y|^1.5)^(1/1.5)"),
    ("wl2_plus_linf", "wxy", [("sum", "(w * (x - y)) * (w * (x - y))"), ("max", "fabs(w * (x - y))")],
     "sqrt(a0) + a1", False, "the L2 norm plus the L-infinity norm of w*(x - y), both in one pass"),
]


class Spec:
    def __init__(self, t, arrays, accs, final, fn, ret):
        self.t, self.arrays, self.accs, self.final, self.fn, self.ret = t, arrays, accs, final, fn, ret
        self.na = len(accs)

    @property
    def sig(self) -> str:
        ps = ", ".join(f"const {self.t}* {a}" for a in self.arrays)
        if self.ret:
            return f'extern "C" double {self.fn}(int n, {ps})'
        return f'extern "C" void {self.fn}(int n, {ps}, double* out)'

    def finish(self, v: str) -> str:
        return f"return {v};" if self.ret else f"out[0] = {v}; return;"

    def dparams(self) -> str:
        return ", ".join(f"const {self.t}* __restrict__ {a}" for a in self.arrays)

    def dargs(self, pre: str = "d", off: str = "") -> str:
        return ", ".join(f"{pre}{a}{off}" for a in self.arrays)

    def load(self, i: str) -> str:
        return ", ".join(f"{a}[{i}]" for a in self.arrays)

    @property
    def head(self) -> str:
        t = self.t
        elem_params = ", ".join(f"{t} {a}r" for a in self.arrays)
        conv = " ".join(f"double {a} = (double){a}r;" for a in self.arrays)
        upd = []
        merge = []
        for c, (kind, term) in enumerate(self.accs):
            if kind == "sum":
                upd.append(f"    a.v[{c}] += {term};")
                merge.append(f"    a.v[{c}] += b.v[{c}];")
            else:
                upd.append(f"    a.v[{c}] = fmax(a.v[{c}], {term});")
                merge.append(f"    a.v[{c}] = fmax(a.v[{c}], b.v[{c}]);")
        fin = self.final
        for c in range(self.na):
            fin = fin.replace(f"a{c}", f"a.v[{c}]")
        return ("#include <cuda_runtime.h>\n#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
                f"struct Acc {{ double v[{self.na}]; }};\n\n"
                "__host__ __device__ __forceinline__ void acc_zero(Acc& a) {\n"
                f"    for (int c = 0; c < {self.na}; ++c) a.v[c] = 0.0;\n}}\n\n"
                f"__device__ __forceinline__ void acc_elem(Acc& a, {elem_params}) {{\n"
                f"    {conv}\n" + "\n".join(upd) + "\n}\n\n"
                "__host__ __device__ __forceinline__ void acc_merge(Acc& a, const Acc& b) {\n"
                + "\n".join(merge) + "\n}\n\n"
                f"__host__ __device__ __forceinline__ double acc_final(const Acc& a) {{ return {fin}; }}\n\n"
                "__device__ __forceinline__ void warp_merge(Acc& a) {\n"
                "    for (int o = 16; o > 0; o >>= 1) {\n"
                f"        Acc b;\n#pragma unroll\n        for (int c = 0; c < {self.na}; ++c) b.v[c] = __shfl_down_sync(0xffffffffu, a.v[c], o);\n"
                "        acc_merge(a, b);\n    }\n}\n\n")

    def atomic_merge(self, ptr: str, a: str) -> str:
        lines = []
        for c, (kind, _) in enumerate(self.accs):
            if kind == "sum":
                lines.append(f"atomicAdd({ptr} + {c}, {a}.v[{c}]);")
            else:  # values are >= 0, so their bit patterns order like the values
                lines.append(f"atomicMax((unsigned long long*)({ptr} + {c}), (unsigned long long)__double_as_longlong({a}.v[{c}]));")
        return " ".join(lines)

    def entry(self) -> str:
        return f"{self.sig} {{\n    if (n <= 0) {{ Acc z; acc_zero(z); {self.finish('acc_final(z)')} }}\n"

    def upload(self) -> str:
        t = self.t
        return (f"    size_t bytes = (size_t)n * sizeof({t});\n"
                + "".join(f"    {t}* d{a}; cudaMalloc(&d{a}, bytes); cudaMemcpy(d{a}, {a}, bytes, cudaMemcpyHostToDevice);\n"
                          for a in self.arrays))

    def free(self) -> str:
        return " ".join(f"cudaFree(d{a});" for a in self.arrays)

    def tree(self, b: int) -> str:
        return (f"    for (int h = {b // 2}; h > 0; h >>= 1) {{\n"
                "        if (t < h) acc_merge(sh[t], sh[t + h]);\n"
                "        __syncthreads();\n    }\n")

    def block_shuffle(self, nw: int) -> str:
        return ("    warp_merge(a);\n"
                f"    __shared__ Acc ws[{nw}];\n"
                "    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;\n"
                "    if (lane == 0) ws[wp] = a;\n"
                "    __syncthreads();\n"
                "    if (wp == 0) {\n"
                f"        if (lane < {nw}) a = ws[lane]; else acc_zero(a);\n"
                "        warp_merge(a);\n")


def _final_kernel(s: Spec, b: int) -> str:
    return (f"__global__ void final_tree(int m, const Acc* part, double* res) {{\n"
            f"    __shared__ Acc sh[{b}];\n"
            "    int t = threadIdx.x; Acc a; acc_zero(a);\n"
            f"    for (int j = t; j < m; j += {b}) acc_merge(a, part[j]);\n"
            "    sh[t] = a;\n    __syncthreads();\n" + s.tree(b)
            + "    if (t == 0) res[0] = acc_final(sh[0]);\n}\n\n")


def _atomic_naive(s: Spec) -> str:
    na = s.na
    return (s.head + f"__global__ void elem_atomic(int n, {s.dparams()}, double* acc) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) {{ Acc a; acc_zero(a); acc_elem(a, {s.load('i')}); {s.atomic_merge('acc', 'a')} }}\n}}\n\n"
            + s.entry() + s.upload()
            + f"    double* dacc; cudaMalloc(&dacc, {na} * sizeof(double)); cudaMemset(dacc, 0, {na} * sizeof(double));\n"
            f"    elem_atomic<<<(n + 255) / 256, 256>>>(n, {s.dargs()}, dacc);\n"
            f"    Acc h; cudaMemcpy(h.v, dacc, {na} * sizeof(double), cudaMemcpyDeviceToHost);\n"
            f"    {s.free()} cudaFree(dacc);\n"
            f"    {s.finish('acc_final(h)')}\n}}\n")


def _tree_two_pass(s: Spec) -> str:
    return (s.head + f"__global__ void block_tree(int n, {s.dparams()}, Acc* part) {{\n"
            "    __shared__ Acc sh[256];\n"
            "    int t = threadIdx.x; int i = blockIdx.x * 256 + t;\n"
            f"    Acc a; acc_zero(a); if (i < n) acc_elem(a, {s.load('i')});\n"
            "    sh[t] = a;\n    __syncthreads();\n" + s.tree(256)
            + "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + _final_kernel(s, 256)
            + s.entry() + s.upload()
            + "    int blocks = (n + 255) / 256;\n"
            "    Acc* dpart; double* dres; cudaMalloc(&dpart, (size_t)blocks * sizeof(Acc)); cudaMalloc(&dres, sizeof(double));\n"
            f"    block_tree<<<blocks, 256>>>(n, {s.dargs()}, dpart);\n"
            "    final_tree<<<1, 256>>>(blocks, dpart, dres);\n"
            "    double r; cudaMemcpy(&r, dres, sizeof(double), cudaMemcpyDeviceToHost);\n"
            f"    {s.free()} cudaFree(dpart); cudaFree(dres);\n"
            f"    {s.finish('r')}\n}}\n")


def _shuffle_atomic(s: Spec) -> str:
    na = s.na
    return (s.head + f"__global__ void gs_sum(int n, {s.dparams()}, double* acc) {{\n"
            "    Acc a; acc_zero(a);\n"
            f"    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc_elem(a, {s.load('i')});\n"
            + s.block_shuffle(8)
            + f"        if (lane == 0) {{ {s.atomic_merge('acc', 'a')} }}\n    }}\n}}\n\n"
            + s.entry() + s.upload()
            + f"    double* dacc; cudaMalloc(&dacc, {na} * sizeof(double)); cudaMemset(dacc, 0, {na} * sizeof(double));\n"
            "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = sms * 8; int need = (n + 255) / 256; if (blocks > need) blocks = need;\n"
            f"    gs_sum<<<blocks, 256>>>(n, {s.dargs()}, dacc);\n"
            f"    Acc h; cudaMemcpy(h.v, dacc, {na} * sizeof(double), cudaMemcpyDeviceToHost);\n"
            f"    {s.free()} cudaFree(dacc);\n"
            f"    {s.finish('acc_final(h)')}\n}}\n")


def _vectorized(s: Spec) -> str:
    t = s.t
    vt, w = ("float4", 4) if t == "float" else ("double2", 2)
    comps = ["x", "y", "z", "w"][:w]
    loads = " ".join(f"{vt} q{a} = __ldg(reinterpret_cast<const {vt}*>({a}) + j);" for a in s.arrays)
    calls = " ".join(f"acc_elem(a, {', '.join(f'q{a}.{c}' for a in s.arrays)});" for c in comps)
    tail_load = ", ".join(f"__ldg({a} + j)" for a in s.arrays)
    return (s.head + f"__global__ void vec_sum(int n, {s.dparams()}, Acc* part) {{\n"
            f"    Acc a; acc_zero(a); int nv = n / {w};\n"
            "    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;\n"
            f"    for (int j = tid; j < nv; j += stride) {{ {loads}\n        {calls} }}\n"
            f"    for (int j = nv * {w} + tid; j < n; j += stride) acc_elem(a, {tail_load});\n"
            + s.block_shuffle(8)
            + "        if (lane == 0) part[blockIdx.x] = a;\n    }\n}\n\n"
            + _final_kernel(s, 512)
            + s.entry() + s.upload()
            + f"    int blocks = (n / {w} + 255) / 256; if (blocks > 1024) blocks = 1024; if (blocks < 1) blocks = 1;\n"
            "    Acc* dpart; double* dres; cudaMalloc(&dpart, (size_t)blocks * sizeof(Acc)); cudaMalloc(&dres, sizeof(double));\n"
            f"    vec_sum<<<blocks, 256>>>(n, {s.dargs()}, dpart);\n"
            "    final_tree<<<1, 512>>>(blocks, dpart, dres);\n"
            "    double r; cudaMemcpy(&r, dres, sizeof(double), cudaMemcpyDeviceToHost);\n"
            f"    {s.free()} cudaFree(dpart); cudaFree(dres);\n"
            f"    {s.finish('r')}\n}}\n")


def _single_block(s: Spec) -> str:
    return (s.head + f"__global__ void one_block(int n, {s.dparams()}, double* res) {{\n"
            "    __shared__ Acc sh[512];\n"
            "    int t = threadIdx.x; Acc a; acc_zero(a);\n"
            f"    for (int i = t; i < n; i += 512) acc_elem(a, {s.load('i')});\n"
            "    sh[t] = a;\n    __syncthreads();\n" + s.tree(512)
            + "    if (t == 0) res[0] = acc_final(sh[0]);\n}\n\n"
            + s.entry() + s.upload()
            + "    double* dres; cudaMalloc(&dres, sizeof(double));\n"
            f"    one_block<<<1, 512>>>(n, {s.dargs()}, dres);\n"
            "    double r; cudaMemcpy(&r, dres, sizeof(double), cudaMemcpyDeviceToHost);\n"
            f"    {s.free()} cudaFree(dres);\n"
            f"    {s.finish('r')}\n}}\n")


def _host_finish(s: Spec) -> str:
    return (s.head + f"__global__ void block_sum4(int n, {s.dparams()}, Acc* part) {{\n"
            "    __shared__ Acc sh[512];\n"
            "    int t = threadIdx.x; Acc a; acc_zero(a);\n"
            "    for (int r = 0; r < 4; ++r) {\n"
            "        size_t i = (size_t)blockIdx.x * 2048 + (size_t)r * 512 + t;\n"
            f"        if (i < (size_t)n) acc_elem(a, {s.load('i')});\n    }}\n"
            "    sh[t] = a;\n    __syncthreads();\n" + s.tree(512)
            + "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + s.entry() + s.upload()
            + "    int blocks = (int)(((size_t)n + 2047) / 2048);\n"
            "    Acc* dpart; cudaMalloc(&dpart, (size_t)blocks * sizeof(Acc));\n"
            f"    block_sum4<<<blocks, 512>>>(n, {s.dargs()}, dpart);\n"
            "    Acc* hp = (Acc*)malloc((size_t)blocks * sizeof(Acc));\n"
            "    cudaMemcpy(hp, dpart, (size_t)blocks * sizeof(Acc), cudaMemcpyDeviceToHost);\n"
            "    Acc tot; acc_zero(tot);\n    for (int b = 0; b < blocks; ++b) acc_merge(tot, hp[b]);\n"
            f"    free(hp); {s.free()} cudaFree(dpart);\n"
            f"    {s.finish('acc_final(tot)')}\n}}\n")


def _pinned_streams(s: Spec) -> str:
    t, na = s.t, s.na
    nar = len(s.arrays)
    copies = "".join(
        f"        memcpy(hb[k] + {j} * (size_t)C, {a} + lo, (size_t)m * sizeof({t}));\n" for j, a in enumerate(s.arrays))
    dptrs = ", ".join(f"db[k] + {j} * (size_t)C" for j in range(nar))
    return (s.head + f"__global__ void chunk_sum(int m, {s.dparams()}, double* acc) {{\n"
            "    Acc a; acc_zero(a);\n"
            f"    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) acc_elem(a, {s.load('i')});\n"
            + s.block_shuffle(8)
            + f"        if (lane == 0) {{ {s.atomic_merge('acc', 'a')} }}\n    }}\n}}\n\n"
            + s.entry()
            + "    const int C = 1 << 20;\n"
            "    int nch = (n + C - 1) / C;\n"
            f"    {t} *hb[2], *db[2]; cudaStream_t st[2];\n"
            "    for (int k = 0; k < 2; ++k) {\n"
            f"        cudaMallocHost(&hb[k], {nar} * (size_t)C * sizeof({t}));\n"
            f"        cudaMalloc(&db[k], {nar} * (size_t)C * sizeof({t}));\n"
            "        cudaStreamCreate(&st[k]);\n    }\n"
            f"    double* dacc; cudaMalloc(&dacc, (size_t)nch * {na} * sizeof(double)); cudaMemset(dacc, 0, (size_t)nch * {na} * sizeof(double));\n"
            "    for (int c = 0; c < nch; ++c) {\n"
            "        int k = c & 1; size_t lo = (size_t)c * C; int m = (int)((size_t)n - lo < (size_t)C ? (size_t)n - lo : (size_t)C);\n"
            "        cudaStreamSynchronize(st[k]);\n" + copies
            + f"        cudaMemcpyAsync(db[k], hb[k], {nar} * (size_t)C * sizeof({t}), cudaMemcpyHostToDevice, st[k]);\n"
            "        int blocks = (m + 255) / 256; if (blocks > 528) blocks = 528;\n"
            f"        chunk_sum<<<blocks, 256, 0, st[k]>>>(m, {dptrs}, dacc + (size_t)c * {na});\n    }}\n"
            "    cudaDeviceSynchronize();\n"
            f"    double* hacc = (double*)malloc((size_t)nch * {na} * sizeof(double));\n"
            f"    cudaMemcpy(hacc, dacc, (size_t)nch * {na} * sizeof(double), cudaMemcpyDeviceToHost);\n"
            "    Acc tot; acc_zero(tot);\n"
            f"    for (int c = 0; c < nch; ++c) {{ Acc p; for (int q = 0; q < {na}; ++q) p.v[q] = hacc[(size_t)c * {na} + q]; acc_merge(tot, p); }}\n"
            "    free(hacc); cudaFree(dacc);\n"
            "    for (int k = 0; k < 2; ++k) { cudaStreamDestroy(st[k]); cudaFreeHost(hb[k]); cudaFree(db[k]); }\n"
            f"    {s.finish('acc_final(tot)')}\n}}\n")


def _chunked(s: Spec) -> str:
    t = s.t
    copies = "".join(f"        cudaMemcpy(d{a}, {a} + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
                     for a in s.arrays)
    allocs = " ".join(f"{t}* d{a}; cudaMalloc(&d{a}, (size_t)C * sizeof({t}));" for a in s.arrays)
    return (s.head + f"__global__ void tree128(int m, {s.dparams()}, Acc* part) {{\n"
            "    __shared__ Acc sh[128];\n"
            "    int t = threadIdx.x; int i = blockIdx.x * 128 + t;\n"
            f"    Acc a; acc_zero(a); if (i < m) acc_elem(a, {s.load('i')});\n"
            "    sh[t] = a;\n    __syncthreads();\n" + s.tree(128)
            + "    if (t == 0) part[blockIdx.x] = sh[0];\n}\n\n"
            + s.entry()
            + f"    const int C = 1 << 16;\n    {allocs}\n"
            "    Acc* dpart; cudaMalloc(&dpart, (C / 128) * sizeof(Acc));\n"
            "    Acc hp[C / 128]; Acc tot; acc_zero(tot);\n"
            "    for (int lo = 0; lo < n; lo += C) {\n"
            "        int m = n - lo < C ? n - lo : C; int blocks = (m + 127) / 128;\n" + copies
            + f"        tree128<<<blocks, 128>>>(m, {s.dargs()}, dpart);\n"
            "        cudaMemcpy(hp, dpart, (size_t)blocks * sizeof(Acc), cudaMemcpyDeviceToHost);\n"
            "        for (int b = 0; b < blocks; ++b) acc_merge(tot, hp[b]);\n    }\n"
            f"    {s.free()} cudaFree(dpart);\n"
            f"    {s.finish('acc_final(tot)')}\n}}\n")


def _small_grid(s: Spec) -> str:
    return (s.head + f"__global__ void serial_chunks(int n, int chunk, {s.dparams()}, Acc* part) {{\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    size_t lo = (size_t)g * chunk; size_t hi = lo + chunk; if (hi > (size_t)n) hi = n;\n"
            "    Acc a; acc_zero(a);\n"
            f"    for (size_t i = lo; i < hi; ++i) acc_elem(a, {s.load('i')});\n"
            "    part[g] = a;\n}\n\n"
            + s.entry() + s.upload()
            + "    const int T = 48 * 64; int chunk = (n + T - 1) / T;\n"
            "    Acc* dpart; cudaMalloc(&dpart, T * sizeof(Acc));\n"
            f"    serial_chunks<<<48, 64>>>(n, chunk, {s.dargs()}, dpart);\n"
            "    Acc* hp = (Acc*)malloc(T * sizeof(Acc));\n"
            "    cudaMemcpy(hp, dpart, T * sizeof(Acc), cudaMemcpyDeviceToHost);\n"
            "    Acc tot; acc_zero(tot);\n    for (int g = 0; g < T; ++g) acc_merge(tot, hp[g]);\n"
            f"    free(hp); {s.free()} cudaFree(dpart);\n"
            f"    {s.finish('acc_final(tot)')}\n}}\n")


def _reference(s: Spec) -> str:
    t = s.t
    ps = ", ".join(f"const {t}* {a}" for a in s.arrays)
    sig = f"double {s.fn}(int n, {ps})" if s.ret else f"void {s.fn}(int n, {ps}, double* out)"
    decl = " ".join(f"double a{c} = 0.0;" for c in range(s.na))
    conv = " ".join(f"double {a} = (double){a}_[i];" for a in s.arrays)
    upd = []
    for c, (kind, term) in enumerate(s.accs):
        if kind == "sum":
            upd.append(f"        a{c} += {term};")
        else:
            upd.append(f"        {{ double v = {term}; if (v > a{c}) a{c} = v; }}")
    ps_ = ", ".join(f"const {t}* {a}_" for a in s.arrays)
    sig = sig.replace(ps, ps_)
    return ("#include <math.h>\n\n" + sig + " {\n"
            f"    {decl}\n"
            f"    for (int i = 0; i < n; ++i) {{\n        {conv}\n" + "\n".join(upd) + "\n    }\n"
            + (f"    return {s.final};\n" if s.ret else f"    out[0] = {s.final};\n") + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    e = index % len(EXPRS)
    t = "float" if (index + index // len(EXPRS)) % 2 == 0 else "double"
    name, arrays, accs, final, heavy, desc = EXPRS[e]
    ret = index % 3 != 2
    fn = f"{name}_{t}"
    s = Spec(t, list(arrays), accs, final, fn, ret)
    if heavy:
        n_time = 6_000_000 if t == "float" else 4_000_000
    else:
        n_time = 32_000_000 if t == "float" else 16_000_000
    n_time = n_time * 2 // len(arrays) + int(rng.integers(0, 3000))
    lo, hi = [(-1.0, 1.0), (-2.0, 2.0), (-0.5, 1.5)][int(rng.integers(3))]
    args = [{"name": "n", "role": "scalar", "ctype": "int"}]
    for a in arrays:
        d = {"kind": "uniform", "low": 0.0, "high": 1.0} if a == "w" else {"kind": "uniform", "low": lo, "high": hi}
        args.append({"name": a, "role": "in", "ctype": t, "length": "n", "dist": d})
    if not ret:
        args.append({"name": "out", "role": "out", "ctype": "double", "length": 1})
    task = {
        "function_name": fn,
        "description": (f"{'Returns' if ret else 'Writes to out[0]'} {desc}, over {t} arrays of length n; every term "
                        "is computed and accumulated in double (any summation order is accepted within the tolerance)."),
        "returns": "double" if ret else "void",
        "args": args,
        "size_configs": [{"n": 1000 + int(rng.integers(0, 500))}, {"n": 60_001 + int(rng.integers(0, 30000))},
                         {"n": 33}, {"n": n_time}],
        "tolerance": {"rtol": 1e-7, "atol": 1e-9},
        "reference_c": _reference(s),
        "tags": ["reduction", "compute-bound" if heavy else "memory-bound", t],
    }
    variants = (
        Variant("atomic_per_element", ("naive", "atomics", "coalesced", "block_256", "pageable"), _atomic_naive(s)),
        Variant("tree_two_pass", ("tree_reduction", "multi_pass", "two_level", "coalesced", "block_256", "pageable"),
                _tree_two_pass(s)),
        Variant("shuffle_block_atomic", ("grid_stride", "warp_shuffle", "atomics", "coalesced", "block_256", "pageable"),
                _shuffle_atomic(s)),
        Variant("vectorized_shuffle", ("vectorized", "grid_stride", "warp_shuffle", "two_level", "multi_pass",
                                       "readonly_cache", "coalesced", "block_256", "pageable"), _vectorized(s)),
        Variant("single_block", ("single_thread", "tree_reduction", "coalesced", "block_512", "pageable"),
                _single_block(s)),
        Variant("host_finish", ("tree_reduction", "two_level", "host_compute", "coalesced", "block_512", "pageable"),
                _host_finish(s)),
        Variant("pinned_streams", ("pinned", "async_streams", "double_buffered", "grid_stride", "warp_shuffle",
                                   "atomics", "host_compute", "block_256"), _pinned_streams(s)),
        Variant("chunked_sync", ("in_loop_transfers", "many_launches", "tree_reduction", "host_compute", "block_128"),
                _chunked(s)),
        Variant("small_grid_serial", ("small_grid", "strided", "host_compute", "block_64", "pageable"), _small_grid(s)),
    )
    return GeneratedTask(task, variants, {"type": t, "expression": name, "returns_scalar": ret, "n_time": n_time})


FAMILY = Family(
    name="dot_norm",
    description="dot products, norms and robust losses of x, y, w (float/double inputs, double accumulation)",
    generate=generate,
    n_tasks=50,
    tags=("reduction",),
)
