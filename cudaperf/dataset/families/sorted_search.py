"""Batched searches in a sorted array: for each of q queries x[i], one answer about the sorted keys a[0..n-1].

The query kind varies with the index (lower bound, upper bound, floor index, count of keys within a window
[x - W, x + W], the nearest key's value, and a "find" that returns the position of a matching key or the encoded
insertion point -(p + 1)), as do the key type (int, float, double), the key range (narrow ranges give long runs of
equal keys, wide ones almost none), how far the queries reach outside the keys, the array length n (4 thousand to
16 million keys) and the number of queries. The queries come in the order given (no sorting them first).

Every answer is an index or a count (compared exactly) or one of the keys themselves (the nearest key, copied, also
exact). The only arithmetic on keys is one subtraction or addition per comparison (x - W, x + W, x - a[p-1],
a[p] - x), the same single IEEE operation in C and CUDA (nothing to fuse), so the comparisons and hence the outputs
agree bit for bit: the tolerance is zero. Integer key ranges stay below 2^30 so none of these overflows.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

OPS = ["lower", "upper", "count", "nearest", "find", "floor"]
TYPES = ["int", "float", "double"]
HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"


def _lit(t: str, v) -> str:
    if t == "int":
        return str(int(v))
    if t == "float":
        return f"{float(np.float32(v))!r}f"
    return f"{float(v)!r}"


def _rt(p: dict) -> str:
    return p["t"] if p["op"] == "nearest" else "int"


def _answer(qual: str, p: dict, params: str, lb, ub) -> str:
    """The function answering one query, given code for the lower/upper bound (lb(v), ub(v): count of keys < v / <= v)."""
    t, op = p["t"], p["op"]
    W = _lit(t, p.get("W", 0))
    if op == "lower":
        body = f"    return {lb('x')};\n"
    elif op == "upper":
        body = f"    return {ub('x')};\n"
    elif op == "floor":
        body = f"    return {ub('x')} - 1;\n"
    elif op == "count":
        body = (f"    {t} lo = x - {W};\n    {t} hi = x + {W};\n"
                f"    return {ub('hi')} - {lb('lo')};\n")
    elif op == "find":
        body = (f"    int p = {lb('x')};\n"
                "    return (p < n && a[p] == x) ? p : -(p + 1);\n")
    else:  # nearest
        body = (f"    int p = {lb('x')};\n"
                "    if (p == 0) return a[0];\n"
                "    if (p == n) return a[n - 1];\n"
                f"    {t} below = a[p - 1], above = a[p];\n"
                "    return (x - below) <= (above - x) ? below : above;\n")
    return f"{qual} {_rt(p)} answer({params}, {t} x) {{\n{body}}}\n\n"


def _classic(qual: str, t: str) -> str:
    out = ""
    for name, cmp in (("lbound", "<"), ("ubound", "<=")):
        out += (f"{qual} int {name}(const {t}* a, int n, {t} x) {{\n"
                "    int lo = 0, hi = n;\n"
                "    while (lo < hi) {\n"
                "        int mid = lo + ((hi - lo) >> 1);\n"
                f"        if (a[mid] {cmp} x) lo = mid + 1; else hi = mid;\n"
                "    }\n    return lo;\n}\n\n")
    return out


def _classic_answer(qual: str, p: dict) -> str:
    return _classic(qual, p["t"]) + _answer(qual, p, f"const {p['t']}* a, int n",
                                             lambda v: f"lbound(a, n, {v})", lambda v: f"ubound(a, n, {v})")


def _sig(p: dict) -> str:
    t = p["t"]
    return f'extern "C" void search_sorted(int n, const {t}* a, int q, const {t}* x, {_rt(p)}* out)'


def _alloc(p: dict) -> str:
    t, rt = p["t"], _rt(p)
    return ("    if (q <= 0) return;\n"
            f"    size_t abytes = (size_t)(n > 0 ? n : 1) * sizeof({t});\n"
            f"    size_t xbytes = (size_t)q * sizeof({t});\n"
            f"    size_t obytes = (size_t)q * sizeof({rt});\n"
            f"    {t} *da, *dx; {rt}* dout;\n"
            "    cudaMalloc(&da, abytes); cudaMalloc(&dx, xbytes); cudaMalloc(&dout, obytes);\n"
            f"    if (n > 0) cudaMemcpy(da, a, (size_t)n * sizeof({t}), cudaMemcpyHostToDevice);\n")


FREE = "    cudaFree(da); cudaFree(dx); cudaFree(dout);\n}\n"
COPY_OUT = "    cudaMemcpy(out, dout, obytes, cudaMemcpyDeviceToHost);\n"


def _kernel(p: dict, name: str = "search_kernel") -> str:
    t, rt = p["t"], _rt(p)
    return (f"__global__ void {name}(int n, const {t}* a, int q, const {t}* x, {rt}* out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < q) out[i] = answer(a, n, x[i]);\n}\n\n")


def _simple(p: dict, block: int) -> str:
    """Thread per query, textbook binary search."""
    return (HEAD + _classic_answer("__device__", p) + _kernel(p) + _sig(p) + " {\n" + _alloc(p)
            + "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            f"    search_kernel<<<(q + {block - 1}) / {block}, {block}>>>(n, da, q, dx, dout);\n"
            + COPY_OUT + FREE)


def _branchless_fns(t: str) -> str:
    out = ""
    for name, cmp in (("lbound", "<"), ("ubound", "<=")):
        out += (f"__device__ __forceinline__ int {name}(const {t}* __restrict__ a, int n, {t} x) {{\n"
                "    if (n <= 0) return 0;\n"
                f"    const {t}* b = a;\n"
                "    int len = n;\n"
                "    while (len > 1) {\n"
                "        int half = len >> 1;\n"
                f"        b = (__ldg(b + half) {cmp} x) ? b + half : b;\n"
                "        len -= half;\n"
                "    }\n"
                f"    return (int)(b - a) + (__ldg(b) {cmp} x ? 1 : 0);\n}}\n\n")
    return out


def _branchless_answer(p: dict) -> str:
    return _branchless_fns(p["t"]) + _answer("__device__", p, f"const {p['t']}* __restrict__ a, int n",
                                             lambda v: f"lbound(a, n, {v})", lambda v: f"ubound(a, n, {v})")


def _branchless(p: dict) -> str:
    t, rt = p["t"], _rt(p)
    return (HEAD + _branchless_answer(p)
            + f"__global__ void search_branchless(int n, const {t}* __restrict__ a, int q, "
            f"const {t}* __restrict__ x, {rt}* __restrict__ out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < q) out[i] = answer(a, n, __ldg(x + i));\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    search_branchless<<<(q + 127) / 128, 128>>>(n, da, q, dx, dout);\n"
            + COPY_OUT + FREE)


def _tree_top(p: dict) -> str:
    """Every NS-th key (the top levels of the implicit search tree) staged in shared memory per block; the search
    narrows to one stride among the samples there, then finishes in global memory."""
    t, rt = p["t"], _rt(p)
    fns = ""
    for name, cmp in (("lbound", "<"), ("ubound", "<=")):
        fns += (f"__device__ int {name}(const {t}* a, int n, const {t}* samp, int m, int step, {t} x) {{\n"
                "    int lo = 0, hi = m;\n"
                "    while (lo < hi) {\n"
                "        int mid = (lo + hi) >> 1;\n"
                f"        if (samp[mid] {cmp} x) lo = mid + 1; else hi = mid;\n"
                "    }\n"
                "    if (lo == 0) return 0;\n"
                "    int g = (lo - 1) * step + 1;\n"
                "    int h = lo < m ? lo * step : n;\n"
                "    while (g < h) {\n"
                "        int mid = g + ((h - g) >> 1);\n"
                f"        if (a[mid] {cmp} x) g = mid + 1; else h = mid;\n"
                "    }\n"
                "    return g;\n}\n\n")
    ans = _answer("__device__", p, f"const {t}* a, int n, const {t}* samp, int m, int step",
                  lambda v: f"lbound(a, n, samp, m, step, {v})", lambda v: f"ubound(a, n, samp, m, step, {v})")
    return (HEAD + "#define NS 2048\n\n" + fns + ans
            + f"__global__ void search_tree_top(int n, const {t}* a, int q, const {t}* x, {rt}* out, int step, int m) {{\n"
            f"    __shared__ {t} samp[NS];\n"
            "    for (int k = threadIdx.x; k < m; k += blockDim.x) samp[k] = a[(size_t)k * step];\n"
            "    __syncthreads();\n"
            "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < q; i += gridDim.x * blockDim.x)\n"
            "        out[i] = answer(a, n, samp, m, step, x[i]);\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    int step = n > 0 ? (n + NS - 1) / NS : 1;\n"
            "    int m = n > 0 ? (n + step - 1) / step : 0;\n"
            "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int blocks = (q + 511) / 512; if (blocks > sms * 4) blocks = sms * 4;\n"
            "    search_tree_top<<<blocks, 512>>>(n, da, q, dx, dout, step, m);\n"
            + COPY_OUT + FREE)


def _stride_scan(p: dict) -> str:
    """Linear scans: skip whole runs of STRIDE keys, then step one key at a time (O(n / STRIDE + STRIDE))."""
    t = p["t"]
    fns = ""
    for name, cmp in (("lbound", "<"), ("ubound", "<=")):
        fns += (f"__device__ int {name}(const {t}* a, int n, {t} x) {{\n"
                "    int j = 0;\n"
                f"    while (j + STRIDE <= n && a[j + STRIDE - 1] {cmp} x) j += STRIDE;\n"
                f"    while (j < n && a[j] {cmp} x) ++j;\n"
                "    return j;\n}\n\n")
    ans = _answer("__device__", p, f"const {t}* a, int n", lambda v: f"lbound(a, n, {v})",
                  lambda v: f"ubound(a, n, {v})")
    return (HEAD + "#define STRIDE 512\n\n" + fns + ans + _kernel(p, "scan_kernel") + _sig(p) + " {\n" + _alloc(p)
            + "    cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);\n"
            "    scan_kernel<<<(q + 63) / 64, 64>>>(n, da, q, dx, dout);\n"
            + COPY_OUT + FREE)


def _host_split(p: dict) -> str:
    """The GPU answers the queries past q/16 while the host answers the first q/16 itself."""
    return (HEAD + _classic_answer("__host__ __device__", p) + _kernel(p, "search_tail") + _sig(p) + " {\n"
            + _alloc(p)
            + "    int qh = q / 16;\n"
            "    int rest = q - qh;\n"
            f"    cudaMemcpy(dx, x + qh, (size_t)rest * sizeof({p['t']}), cudaMemcpyHostToDevice);\n"
            "    search_tail<<<(rest + 255) / 256, 256>>>(n, da, rest, dx, dout);\n"
            "    for (int i = 0; i < qh; ++i) out[i] = answer(a, n, x[i]);\n"
            f"    cudaMemcpy(out + qh, dout, (size_t)rest * sizeof({_rt(p)}), cudaMemcpyDeviceToHost);\n"
            + FREE)


def _pinned_streams(p: dict) -> str:
    t, rt = p["t"], _rt(p)
    return (HEAD + _branchless_answer(p)
            + f"__global__ void search_chunk(int n, const {t}* __restrict__ a, int q, "
            f"const {t}* __restrict__ x, {rt}* __restrict__ out) {{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < q) out[i] = answer(a, n, x[i]);\n}\n\n"
            + _sig(p) + " {\n" + _alloc(p)
            + f"    {t}* hx; {rt}* hout;\n"
            "    cudaMallocHost(&hx, xbytes); cudaMallocHost(&hout, obytes);\n"
            "    memcpy(hx, x, xbytes);\n"
            "    const int NSTR = 4;\n"
            "    cudaStream_t st[NSTR];\n"
            "    for (int s = 0; s < NSTR; ++s) cudaStreamCreate(&st[s]);\n"
            "    int per = (q + NSTR - 1) / NSTR;\n"
            "    for (int s = 0; s < NSTR; ++s) {\n"
            "        int lo = s * per;\n"
            "        if (lo >= q) break;\n"
            "        int m = q - lo < per ? q - lo : per;\n"
            f"        cudaMemcpyAsync(dx + lo, hx + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice, st[s]);\n"
            "        search_chunk<<<(m + 255) / 256, 256, 0, st[s]>>>(n, da, m, dx + lo, dout + lo);\n"
            f"        cudaMemcpyAsync(hout + lo, dout + lo, (size_t)m * sizeof({rt}), cudaMemcpyDeviceToHost, st[s]);\n"
            "    }\n"
            "    for (int s = 0; s < NSTR; ++s) { cudaStreamSynchronize(st[s]); cudaStreamDestroy(st[s]); }\n"
            "    memcpy(out, hout, obytes);\n"
            "    cudaFreeHost(hx); cudaFreeHost(hout);\n"
            + FREE)


def _chunked(p: dict) -> str:
    t, rt = p["t"], _rt(p)
    return (HEAD + _classic_answer("__device__", p) + _kernel(p) + _sig(p) + " {\n" + _alloc(p)
            + "    const int CH = 8192;\n"
            "    for (int lo = 0; lo < q; lo += CH) {\n"
            "        int m = q - lo < CH ? q - lo : CH;\n"
            f"        cudaMemcpy(dx, x + lo, (size_t)m * sizeof({t}), cudaMemcpyHostToDevice);\n"
            "        search_kernel<<<(m + 127) / 128, 128>>>(n, da, m, dx, dout);\n"
            f"        cudaMemcpy(out + lo, dout, (size_t)m * sizeof({rt}), cudaMemcpyDeviceToHost);\n"
            "    }\n" + FREE)


def _reference(p: dict) -> str:
    t, rt = p["t"], _rt(p)
    return (_classic("static", t).replace("static int", "static inline int")
            + _answer("static inline", p, f"const {t}* a, int n", lambda v: f"lbound(a, n, {v})",
                      lambda v: f"ubound(a, n, {v})")
            + f"void search_sorted(int n, const {t}* a, int q, const {t}* x, {rt}* out) {{\n"
            "    for (int i = 0; i < q; ++i) out[i] = answer(a, n, x[i]);\n}\n")


# per-query cost of the reference, roughly (ns), by array length: cache misses grow with n
def _query_ns(n: int, t: str) -> float:
    lg = max(1.0, np.log2(n))
    miss = max(0.0, lg - (14 if t == "double" else 15))
    return 7.0 * lg + 40.0 * miss


OP_TEXT = {
    "lower": "out[i] = the number of keys a[j] < x[i] (lower bound: the first index whose key is >= x[i])",
    "upper": "out[i] = the number of keys a[j] <= x[i] (upper bound: the first index whose key is > x[i])",
    "floor": "out[i] = the last index j with a[j] <= x[i], or -1 when there is none",
    "count": "out[i] = the number of keys in the closed window [x[i] - W, x[i] + W] (W = {W}; the window ends "
             "computed in the key type)",
    "nearest": "out[i] = the key closest to x[i] (the smaller key when two are equally close; distances x - a[j] "
               "and a[j] - x computed in the key type)",
    "find": "out[i] = the first index p with a[p] == x[i] if there is one, else -(p + 1) where p is the lower bound "
            "(the number of keys < x[i])",
}


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    op = OPS[index % len(OPS)]
    t = TYPES[(index // len(OPS) + index) % len(TYPES)]
    lg = int([12, 14, 16, 18, 20, 21, 22, 23, 24][(index * 5 + index // 9) % 9])
    n_time = (1 << lg) - int(rng.integers(0, 1 << (lg - 4)))
    p: dict = {"op": op, "t": t}
    if t == "int":
        k = int(rng.integers(4)) if op != "find" else int(rng.integers(2))
        span_e, ratio = [("(n / 8 + 7)", 1 / 8), ("(n / 2 + 11)", 1 / 2), ("(n + 3)", 1.0),
                         ("(4 * n)", 4.0)][k] if k < 3 or op == "find" else ("536870912", (1 << 29) / n_time)
        lo_e = ["0", f"(0 - {span_e} / 2)", "1000"][int(rng.integers(3))]
        hi_e = f"{lo_e} + {span_e}"
        margin_e = f"{span_e} / {int(rng.choice([10, 50]))} + 1"
        kd = {"kind": "sorted", "low": lo_e, "high": hi_e}
        qd = {"kind": "randint", "low": f"{lo_e} - {margin_e}", "high": f"{hi_e} + {margin_e}"}
        W = max(1, int(ratio * float(rng.choice([1, 4, 30]))))
        rng_desc = f"ints in [{lo_e}, {hi_e}); queries in [{qd['low']}, {qd['high']})"
    else:
        lo = float(rng.choice([-1000.0, -1.0, 0.0, 5.0]))
        width = float(rng.choice([2.0, 100.0, 1.0e4]))
        hi = lo + width
        margin = width * float(rng.choice([0.02, 0.1]))
        kd = {"kind": "sorted", "low": lo, "high": hi}
        qd = {"kind": "uniform", "low": lo - margin, "high": hi + margin}
        W = float(np.float32(width / n_time * float(rng.choice([1.0, 5.0, 40.0]))))
        rng_desc = f"{t}s in [{lo}, {hi}); queries in [{lo - margin}, {hi + margin})"
    p["W"] = W
    searches = 2 if op == "count" else 1
    q_time = int(np.clip(70e6 / (searches * _query_ns(n_time, t)), 20_000, 6_000_000)) + int(rng.integers(0, 999))
    rt = _rt(p)
    task = {
        "function_name": "search_sorted",
        "description": (f"a[0..n-1] holds n sorted {t} keys (ascending, repeats possible); for each of the q "
                        f"queries x[i]: " + OP_TEXT[op].format(W=_lit(t, W)) + f". Keys are {rng_desc}. "
                        "n >= 1."),
        "returns": "void",
        "args": [
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "a", "role": "in", "ctype": t, "length": "n", "dist": kd},
            {"name": "q", "role": "scalar", "ctype": "int"},
            {"name": "x", "role": "in", "ctype": t, "length": "q", "dist": qd},
            {"name": "out", "role": "out", "ctype": rt, "length": "q"},
        ],
        "size_configs": [{"n": 1, "q": 7}, {"n": 37, "q": 1000}, {"n": 5003, "q": 777 + int(rng.integers(0, 50))},
                         {"n": n_time, "q": q_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(p),
        "tags": ["search", "binary_search", t],
    }
    variants = (
        Variant("binary_b256", ("naive", "thread_per_row", "branch_divergent", "block_256", "pageable"),
                _simple(p, 256)),
        Variant("binary_b32", ("thread_per_row", "branch_divergent", "block_32"), _simple(p, 32)),
        Variant("branchless_ldg", ("branchless", "readonly_cache", "thread_per_row", "block_128"), _branchless(p)),
        Variant("tree_top_shared", ("shared_tiling", "grid_stride", "two_level", "block_512"), _tree_top(p)),
        Variant("pinned_streams", ("branchless", "pinned", "async_streams", "block_256"), _pinned_streams(p)),
        Variant("host_split", ("host_compute", "thread_per_row", "block_256"), _host_split(p)),
        Variant("stride_scan", ("naive", "branch_divergent", "block_64"), _stride_scan(p)),
        Variant("chunked_queries", ("in_loop_transfers", "many_launches", "thread_per_row", "block_128"),
                _chunked(p)),
    )
    return GeneratedTask(task, variants, {**p, "n_time": n_time, "q_time": q_time, "keys": kd, "queries": qd})


FAMILY = Family(
    name="sorted_search",
    description="batched lower/upper bound, window count, nearest-key and find queries into a sorted int/float/double array",
    generate=generate,
    n_tasks=50,
    tags=("search",),
)
