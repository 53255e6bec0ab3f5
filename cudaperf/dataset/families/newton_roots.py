"""Per-element safeguarded Newton iteration solving f(x; a_i) = c_i for a smooth increasing f.

Element i solves f(x; a[i]) = c[i] for one of: x + a sin x (Kepler-like, |a| < 1), x^3 + Q x^2 + a x (a > Q^2/3),
exp(K x) + a x (a > 0), sinh x + a x (a > 0), x + a atan x (a > -1). Every f is increasing with f' bounded away
from 0, so the root is unique and well-conditioned. A closed-form bracket [lo, hi] holds the root; a Newton step
that leaves the bracket, is NaN or is longer than half the previous step is replaced by bisection (so the loop
converges well within MAXIT from any start), the bracket shrinks with the sign of f - c, and the loop stops when a step is below TOL * (1 + |x|), when f(x) = c exactly, or after MAXIT steps. The number of
iterations depends on the data (the start, the bracket and a_i): irregular control flow and warp divergence.

What varies with the index: the function and its constants (Q, K), the ranges of c and a, the start (c, the
bracket's middle, or 0), the I/O type (float or double), the internal precision (float inputs are solved in float
or in double), TOL and MAXIT.

CPU and GPU agree within the tolerance, not bit for bit: fused multiply-add contraction is allowed on both sides
(nvcc contracts by default; the reference built with -ffp-contract=fast is checked by validate) and the GPU's
sin/exp/sinh/atan differ from the C library's by an ulp or two. These change the path of the iteration, but every
path stops within about TOL * (1 + |x|) of the same root (a Newton stop is quadratically closer; a bisection stop
at most one bracket half-width), and an evaluation error e moves the root by e / f', with f' >= 0.1. The
tolerance is therefore rtol = atol = max(2e-4, 20 * TOL) for float internals, 1e-6 for float outputs computed in
double, and 1e-8 for double outputs (TOL <= 1e-10): 20 times or more the largest difference any path makes.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KINDS = ["kepler", "cubic", "expo", "sinh", "atan"]
HEAD = "#include <cuda_runtime.h>\n#include <math.h>\n\n"
DQ = "__host__ __device__ __forceinline__"


def _lit(v: float, R: str) -> str:
    s = repr(float(v))
    return s + "f" if R == "float" else s


def _fn(name: str, R: str) -> str:
    return name + "f" if R == "float" else name


def _fset(p: dict, R: str, tol: float, qual: str, pre: str) -> str:
    """The helper functions of one precision R, names prefixed by ``pre``: fval, dval, bracket, start, iterate,
    solve."""
    L = lambda v: _lit(v, R)  # noqa: E731
    F = lambda n: _fn(n, R)  # noqa: E731
    one, zero, half = L(1.0), L(0.0), L(0.5)
    kind = p["kind"]
    if kind == "kepler":
        f, d = f"x + aa * {F('sin')}(x)", f"{one} + aa * {F('cos')}(x)"
        br = f"R r = {F('fabs')}(aa); *lo = cc - r; *hi = cc + r;"
    elif kind == "cubic":
        q = p["Q"]
        f, d = f"((x + {L(q)}) * x + aa) * x", f"({L(3.0)} * x + {L(2 * q)}) * x + aa"
        br = f"R B = {one} + {F('fabs')}(cc) + {L(abs(q))} + aa; *lo = -B; *hi = B;"
    elif kind == "expo":
        k = p["K"]
        f, d = f"{F('exp')}({L(k)} * x) + aa * x", f"{L(k)} * {F('exp')}({L(k)} * x) + aa"
        br = f"R t = (cc - {one}) / aa; *lo = t < {zero} ? t : {zero}; *hi = cc / aa;"
    elif kind == "sinh":
        f, d = f"{F('sinh')}(x) + aa * x", f"{F('cosh')}(x) + aa"
        br = f"R t = cc / ({one} + aa); *lo = t < {zero} ? t : {zero}; *hi = t > {zero} ? t : {zero};"
    else:
        f, d = f"x + aa * {F('atan')}(x)", f"{one} + aa / ({one} + x * x)"
        br = f"R r = {L(2.0)} * {F('fabs')}(aa); *lo = cc - r; *hi = cc + r;"
    x0 = {"c": "cc", "mid": f"{half} * (lo + hi)", "zero": zero}[p["start"]]
    body = (f"QUAL R {pre}fval(R x, R aa) {{ return {f}; }}\n"
            f"QUAL R {pre}dval(R x, R aa) {{ return {d}; }}\n"
            f"QUAL void {pre}bracket(R cc, R aa, R* lo, R* hi) {{ {br} }}\n"
            f"QUAL R {pre}start(R cc, R lo, R hi) {{\n"
            f"    R x = {x0};\n"
            f"    if (!(x > lo && x < hi)) x = {half} * (lo + hi);\n"
            "    return x;\n}\n"
            f"QUAL R {pre}iterate(R cc, R aa, R lo, R hi, R x) {{\n"
            "    R prev = hi - lo;\n"
            f"    for (int it = 0; it < {p['maxit']}; ++it) {{\n"
            f"        R fx = {pre}fval(x, aa) - cc;\n"
            f"        if (fx == {zero}) break;\n"
            f"        if (fx < {zero}) lo = x; else hi = x;\n"
            f"        R xn = x - fx / {pre}dval(x, aa);\n"
            f"        if (!(xn > lo && xn < hi) || {F('fabs')}(xn - x) > {half} * prev) xn = {half} * (lo + hi);\n"
            "        R step = xn - x;\n"
            f"        prev = {F('fabs')}(step);\n"
            "        x = xn;\n"
            f"        if ({F('fabs')}(step) <= {L(tol)} * ({one} + {F('fabs')}(x))) break;\n"
            "    }\n"
            "    return x;\n}\n"
            f"QUAL R {pre}solve(R cc, R aa) {{\n"
            "    R lo, hi;\n"
            f"    {pre}bracket(cc, aa, &lo, &hi);\n"
            f"    return {pre}iterate(cc, aa, lo, hi, {pre}start(cc, lo, hi));\n}}\n")
    return body.replace("QUAL R", f"{qual} {R}").replace("QUAL void", f"{qual} void").replace("(R ", f"({R} ") \
        .replace(", R ", f", {R} ").replace("R* ", f"{R}* ").replace("    R ", f"    {R} ").replace("{ R ", f"{{ {R} ")


def _reference(p: dict, T: str, R: str) -> str:
    return ("#include <math.h>\n\n" + _fset(p, R, p["tol"], "static inline", "") + "\n"
            f"void newton_roots(int n, const {T}* c, const {T}* a, {T}* x) {{\n"
            f"    for (int i = 0; i < n; ++i) x[i] = ({T})solve(({R})c[i], ({R})a[i]);\n}}\n")


def _io(T: str) -> tuple[str, str]:
    i = ("    if (n <= 0) return;\n"
         f"    size_t bytes = (size_t)n * sizeof({T});\n"
         f"    {T} *dc, *da, *dx;\n"
         "    cudaMalloc(&dc, bytes); cudaMalloc(&da, bytes); cudaMalloc(&dx, bytes);\n"
         "    cudaMemcpy(dc, c, bytes, cudaMemcpyHostToDevice);\n"
         "    cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);\n")
    o = ("    cudaMemcpy(x, dx, bytes, cudaMemcpyDeviceToHost);\n"
         "    cudaFree(dc); cudaFree(da); cudaFree(dx);\n")
    return i, o


def _sig(T: str) -> str:
    return f'extern "C" void newton_roots(int n, const {T}* c, const {T}* a, {T}* x)'


def _naive(pre: str, T: str, R: str, block: int) -> str:
    i, o = _io(T)
    return (pre + f"__global__ void roots_kernel(int n, const {T}* c, const {T}* a, {T}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    x[i] = ({T})solve(({R})c[i], ({R})a[i]);\n}}\n\n"
            + _sig(T) + " {\n" + i
            + f"    roots_kernel<<<(n + {block - 1}) / {block}, {block}>>>(n, dc, da, dx);\n" + o + "}\n")


def _grid_stride(pre: str, T: str, R: str, block: int) -> str:
    i, o = _io(T)
    return (pre + f"__global__ void roots_gs(int n, const {T}* __restrict__ c, const {T}* __restrict__ a,"
            f" {T}* __restrict__ x) {{\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
            f"        x[i] = ({T})solve(({R})__ldg(c + i), ({R})__ldg(a + i));\n}}\n\n"
            + _sig(T) + " {\n" + i
            + f"    int blocks = (n + {block - 1}) / {block};\n"
            "    if (blocks > 1056) blocks = 1056;\n"
            f"    roots_gs<<<blocks, {block}>>>(n, dc, da, dx);\n" + o + "}\n")


def _fixed_iters(pre: str, p: dict, T: str, R: str) -> str:
    """Every thread runs MAXIT steps; a converged element is frozen by selects instead of leaving the loop."""
    i, o = _io(T)
    L = lambda v: _lit(v, R)  # noqa: E731
    fa = _fn("fabs", R)
    return (pre + f"__global__ void roots_fixed(int n, const {T}* c, const {T}* a, {T}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {R} cc = ({R})c[i], aa = ({R})a[i], lo, hi;\n"
            "    bracket(cc, aa, &lo, &hi);\n"
            f"    {R} xv = start(cc, lo, hi);\n"
            "    bool done = false;\n"
            f"    {R} prev = hi - lo;\n"
            f"    for (int it = 0; it < {p['maxit']}; ++it) {{\n"
            f"        {R} fx = fval(xv, aa) - cc;\n"
            f"        bool stop = fx == {L(0.0)};\n"
            f"        bool neg = fx < {L(0.0)};\n"
            f"        {R} nlo = neg ? xv : lo, nhi = neg ? hi : xv;\n"
            f"        {R} xn = xv - fx / dval(xv, aa);\n"
            f"        bool ok = xn > nlo && xn < nhi && {fa}(xn - xv) <= {L(0.5)} * prev;\n"
            f"        xn = ok ? xn : {L(0.5)} * (nlo + nhi);\n"
            f"        {R} st = {fa}(xn - xv);\n"
            f"        bool conv = st <= {L(p['tol'])} * ({L(1.0)} + {fa}(xn));\n"
            "        bool upd = !done && !stop;\n"
            "        lo = upd ? nlo : lo; hi = upd ? nhi : hi; xv = upd ? xn : xv; prev = upd ? st : prev;\n"
            "        done = done || stop || conv;\n"
            "    }\n"
            f"    x[i] = ({T})xv;\n}}\n\n"
            + _sig(T) + " {\n" + i
            + "    roots_fixed<<<(n + 255) / 256, 256>>>(n, dc, da, dx);\n" + o + "}\n")


def _binned(pre: str, T: str, R: str) -> str:
    """Elements binned by the size of their first residual (a difficulty estimate), solved bin by bin through a
    permutation; each result is written back to its own index."""
    i, o = _io(T)
    fr = _fn("frexp", R)
    fa = _fn("fabs", R)
    return (pre + f"__global__ void key_kernel(int n, const {T}* c, const {T}* a, int* key, int* count) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    {R} cc = ({R})c[i], aa = ({R})a[i], lo, hi;\n"
            "    bracket(cc, aa, &lo, &hi);\n"
            f"    {R} r = {fa}(fval(start(cc, lo, hi), aa) - cc);\n"
            "    int e = 0;\n"
            f"    {fr}(r, &e);\n"
            "    int k = e + 16;\n"
            "    k = k < 0 ? 0 : (k > 31 ? 31 : k);\n"
            "    if (!(r == r)) k = 31;\n"
            "    key[i] = k;\n"
            "    atomicAdd(&count[k], 1);\n}\n\n"
            "__global__ void offsets_kernel(int* count) {\n"
            "    if (threadIdx.x != 0 || blockIdx.x != 0) return;\n"
            "    int s = 0;\n"
            "    for (int k = 0; k < 32; ++k) { int t = count[k]; count[k] = s; s += t; }\n}\n\n"
            "__global__ void scatter_kernel(int n, const int* key, int* cursor, int* perm) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            "    perm[atomicAdd(&cursor[key[i]], 1)] = i;\n}\n\n"
            f"__global__ void solve_perm(int n, const int* perm, const {T}* c, const {T}* a, {T}* x) {{\n"
            "    int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (t >= n) return;\n"
            "    int i = perm[t];\n"
            f"    x[i] = ({T})solve(({R})c[i], ({R})a[i]);\n}}\n\n"
            + _sig(T) + " {\n" + i
            + "    int *key, *count, *perm;\n"
            "    cudaMalloc(&key, (size_t)n * sizeof(int)); cudaMalloc(&perm, (size_t)n * sizeof(int));\n"
            "    cudaMalloc(&count, 32 * sizeof(int));\n"
            "    cudaMemset(count, 0, 32 * sizeof(int));\n"
            "    int blocks = (n + 255) / 256;\n"
            "    key_kernel<<<blocks, 256>>>(n, dc, da, key, count);\n"
            "    offsets_kernel<<<1, 32>>>(count);\n"
            "    scatter_kernel<<<blocks, 256>>>(n, key, count, perm);\n"
            "    solve_perm<<<blocks, 256>>>(n, perm, dc, da, dx);\n"
            "    cudaFree(key); cudaFree(count); cudaFree(perm);\n" + o + "}\n")


def _other_precision(p: dict, T: str, R: str) -> str:
    """Float work solved in double (float internals), or a float solve polished by three double Newton steps
    (double internals)."""
    i, o = _io(T)
    if R == "float":
        pre = HEAD + _fset(p, "double", 1e-9, DQ, "d_") + "\n"
        body = f"    x[i] = ({T})d_solve((double)c[i], (double)a[i]);\n"
    else:
        pre = HEAD + _fset(p, "float", 1e-5, DQ, "f_") + _fset(p, "double", p["tol"], DQ, "d_") + "\n"
        body = ("    double cc = (double)c[i], aa = (double)a[i];\n"
                "    double xv = (double)f_solve((float)cc, (float)aa);\n"
                "    for (int k = 0; k < 3; ++k) {\n"
                "        double s = (d_fval(xv, aa) - cc) / d_dval(xv, aa);\n"
                "        if (s == s) xv -= s;\n"
                "    }\n"
                f"    x[i] = ({T})xv;\n")
    return (pre + f"__global__ void roots_prec(int n, const {T}* c, const {T}* a, {T}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n" + body + "}\n\n"
            + _sig(T) + " {\n" + i
            + "    roots_prec<<<(n + 511) / 512, 512>>>(n, dc, da, dx);\n" + o + "}\n")


def _host_bracket(pre: str, T: str, R: str) -> str:
    """The host computes every bracket and start; they travel as three more arrays; the GPU iterates."""
    i, o = _io(T)
    return (pre + f"__global__ void roots_from(int n, const {T}* c, const {T}* a, const {R}* lo, const {R}* hi,"
            f" const {R}* x0, {T}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n) return;\n"
            f"    x[i] = ({T})iterate(({R})c[i], ({R})a[i], lo[i], hi[i], x0[i]);\n}}\n\n"
            + _sig(T) + " {\n" + i
            + f"    size_t rb = (size_t)n * sizeof({R});\n"
            f"    {R}* h = ({R}*)malloc(3 * rb);\n"
            "    for (int k = 0; k < n; ++k) {\n"
            f"        {R} l, u;\n"
            f"        bracket(({R})c[k], ({R})a[k], &l, &u);\n"
            f"        h[k] = l; h[n + k] = u; h[2 * (size_t)n + k] = start(({R})c[k], l, u);\n"
            "    }\n"
            f"    {R}* dh; cudaMalloc(&dh, 3 * rb);\n"
            "    cudaMemcpy(dh, h, 3 * rb, cudaMemcpyHostToDevice);\n"
            "    free(h);\n"
            "    roots_from<<<(n + 127) / 128, 128>>>(n, dc, da, dh, dh + n, dh + 2 * (size_t)n, dx);\n"
            "    cudaFree(dh);\n" + o + "}\n")


def _streams(pre: str, T: str, R: str) -> str:
    """Pinned (registered) host arrays, four streams overlapping copies in, solving and copies out."""
    return (pre + f"__global__ void roots_chunk(int m, const {T}* c, const {T}* a, {T}* x) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= m) return;\n"
            f"    x[i] = ({T})solve(({R})c[i], ({R})a[i]);\n}}\n\n"
            + _sig(T) + " {\n"
            "    if (n <= 0) return;\n"
            f"    size_t bytes = (size_t)n * sizeof({T});\n"
            f"    {T} *dc, *da, *dx;\n"
            "    cudaMalloc(&dc, bytes); cudaMalloc(&da, bytes); cudaMalloc(&dx, bytes);\n"
            "    cudaHostRegister((void*)c, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)a, bytes, cudaHostRegisterDefault);\n"
            "    cudaHostRegister((void*)x, bytes, cudaHostRegisterDefault);\n"
            "    const int NS = 4;\n"
            "    cudaStream_t st[NS];\n"
            "    for (int s = 0; s < NS; ++s) cudaStreamCreate(&st[s]);\n"
            "    int per = (n + NS - 1) / NS;\n"
            "    for (int s = 0; s < NS; ++s) {\n"
            "        int lo = s * per;\n"
            "        if (lo >= n) break;\n"
            "        int m = n - lo < per ? n - lo : per;\n"
            f"        size_t cb = (size_t)m * sizeof({T});\n"
            "        cudaMemcpyAsync(dc + lo, c + lo, cb, cudaMemcpyHostToDevice, st[s]);\n"
            "        cudaMemcpyAsync(da + lo, a + lo, cb, cudaMemcpyHostToDevice, st[s]);\n"
            "        roots_chunk<<<(m + 255) / 256, 256, 0, st[s]>>>(m, dc + lo, da + lo, dx + lo);\n"
            "        cudaMemcpyAsync(x + lo, dx + lo, cb, cudaMemcpyDeviceToHost, st[s]);\n"
            "    }\n"
            "    for (int s = 0; s < NS; ++s) { cudaStreamSynchronize(st[s]); cudaStreamDestroy(st[s]); }\n"
            "    cudaHostUnregister((void*)c); cudaHostUnregister((void*)a); cudaHostUnregister((void*)x);\n"
            "    cudaFree(dc); cudaFree(da); cudaFree(dx);\n}\n")


# element counts at the timing size, by kind (about 100 ms of reference time; the c range and the start move it)
N_TIME = {"kepler": 480_000, "cubic": 420_000, "expo": 320_000, "sinh": 160_000, "atan": 360_000}


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    kind = KINDS[index % len(KINDS)]
    T, R = [("float", "float"), ("float", "double"), ("double", "double")][(index // 5) % 3]
    p: dict = {"kind": kind, "start": ["c", "mid", "zero"][(index // 3 + int(rng.integers(2))) % 3]}
    if kind == "kepler":
        A = [0.5, 0.8, 0.9][int(rng.integers(3))]
        C = [3.2, 10.0, 40.0][int(rng.integers(3))]
        arange_, crange = (-A, A), (-C, C)
        fdesc = "x + a sin(x)"
    elif kind == "cubic":
        Q = [-2.0, -1.0, 0.0, 0.5, 1.5, 3.0][int(rng.integers(6))]
        p["Q"] = Q
        base = Q * Q / 3 + 0.3
        S = [1.0, 5.0, 20.0][int(rng.integers(3))]
        C = [2.0, 30.0, 500.0][int(rng.integers(3))]
        arange_, crange = (round(base, 4), round(base + S, 4)), (-C, C)
        fdesc = f"x^3 + {Q:g} x^2 + a x"
    elif kind == "expo":
        K = [0.5, 1.0, 2.0][int(rng.integers(3))]
        p["K"] = K
        arange_ = (0.25, [1.0, 3.0][int(rng.integers(2))])
        crange = [(-10.0, 5.0), (0.0, 20.0), (-10.0, 20.0)][int(rng.integers(3))]
        fdesc = f"exp({K:g} x) + a x"
    elif kind == "sinh":
        arange_ = (0.1, [0.5, 2.0][int(rng.integers(2))])
        C = [5.0, 50.0, 500.0][int(rng.integers(3))]
        crange = (-C, C)
        fdesc = "sinh(x) + a x"
    else:
        arange_ = (-0.9, [0.5, 3.0, 10.0][int(rng.integers(3))])
        C = [1.0, 10.0, 50.0][int(rng.integers(3))]
        crange = (-C, C)
        fdesc = "x + a atan(x)"
    if R == "double":
        p["tol"] = [1e-10, 1e-12][int(rng.integers(2))]
    else:
        p["tol"] = [1e-5, 3e-5][int(rng.integers(2))]
    p["maxit"] = [60, 80, 100][int(rng.integers(3))]
    if T == "double":
        tol = 1e-8
    elif R == "double":
        tol = 1e-6
    else:
        tol = max(2e-4, 20 * p["tol"])
    n_time = int(N_TIME[kind] * (0.65 if R == "double" else 1.0) * (0.8 + 0.4 * float(rng.random())))
    start_desc = {"c": "x = c[i]", "mid": "the middle of the bracket", "zero": "x = 0"}[p["start"]]
    task = {
        "function_name": "newton_roots",
        "description": (f"For every i < n, x[i] = the root x of f(x) = c[i] with f(x) = {fdesc} and a = a[i] "
                        f"(f increasing), found by Newton's method in {R} from {start_desc} (moved inside a "
                        f"closed-form bracket of the root), with bisection whenever a step leaves the bracket or is longer than half the previous step, "
                        f"stopping when |step| <= {p['tol']:g} * (1 + |x|) or after {p['maxit']} steps. "
                        f"c is uniform in [{crange[0]:g}, {crange[1]:g}), a in [{arange_[0]:g}, {arange_[1]:g})."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "c", "role": "in", "ctype": T, "length": "n",
             "dist": {"kind": "uniform", "low": crange[0], "high": crange[1]}},
            {"name": "a", "role": "in", "ctype": T, "length": "n",
             "dist": {"kind": "uniform", "low": arange_[0], "high": arange_[1]}},
            {"name": "x", "role": "out", "ctype": T, "length": "n"},
        ],
        "size_configs": [{"n": 1}, {"n": 31}, {"n": 1000}, {"n": 4099 + int(rng.integers(0, 200))},
                         {"n": n_time}],
        "tolerance": {"rtol": tol, "atol": tol},
        "reference_c": _reference(p, T, R),
        "tags": ["root-finding", "iterative", "divergent", T],
    }
    pre = HEAD + _fset(p, R, p["tol"], DQ, "") + "\n"
    other = ("double_internal" if R == "float" else "float_then_double_polish")
    variants = (
        Variant("naive_b256", ("naive", "branch_divergent", "block_256", "pageable"), _naive(pre, T, R, 256)),
        Variant("naive_b32", ("naive", "branch_divergent", "block_32", "pageable"), _naive(pre, T, R, 32)),
        Variant("grid_stride_b128", ("grid_stride", "readonly_cache", "block_128", "pageable"),
                _grid_stride(pre, T, R, 128)),
        Variant("fixed_iterations", ("branchless", "naive", "block_256", "pageable"), _fixed_iters(pre, p, T, R)),
        Variant("binned_by_difficulty", ("atomics", "multi_pass", "strided", "block_256", "pageable"),
                _binned(pre, T, R)),
        Variant(other, ("naive", "branch_divergent", "block_512", "pageable"), _other_precision(p, T, R)),
        Variant("host_bracket", ("host_compute", "extra_transfers", "branch_divergent", "block_128", "pageable"),
                _host_bracket(pre + "#include <stdlib.h>\n", T, R)),
        Variant("pinned_streams", ("pinned", "async_streams", "branch_divergent", "block_256"),
                _streams(pre, T, R)),
    )
    return GeneratedTask(task, variants, {**p, "type": T, "internal": R, "c_range": list(crange),
                                          "a_range": list(arange_), "n_time": n_time, "tolerance": tol})


FAMILY = Family(
    name="newton_roots",
    description="per-element safeguarded Newton solves of f(x; a_i) = c_i (data-dependent iteration counts)",
    generate=generate,
    n_tasks=50,
    tags=("root-finding", "iterative", "divergent"),
)
