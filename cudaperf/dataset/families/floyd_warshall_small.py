"""All-pairs path problems on a batch of small dense graphs by Floyd-Warshall (exact integers).

Graph g has n vertices; w[g*n*n + i*n + j] in [0, WR) describes the arc i -> j: present with value w + 1 when
w < THR, absent otherwise (undirected tasks read the upper triangle for both directions). The closure runs
d[i][j] = BETTER(d[i][j], COMB(d[i][k], d[k][j])) for k = 0 .. n-1 over one of three semirings:
shortest paths (min, +; absent = INF = 2^29, d[i][i] = 0), minimax paths (min, max: the smallest possible largest
arc; absent = INF, d[i][i] = 0) and widest paths (max, min: the largest possible smallest arc; absent = 0,
d[i][i] = INF). dist receives the closure with INF written as -1.

What varies with the index: the semiring, directed or undirected arcs, the arc density (THR / WR), the value range,
the graph size n (32 to 256 at the timing size) and the number of graphs.

CPU and GPU agree exactly: the result is the unique optimum of each pair over all paths, whatever order the
updates are made in (blocked or not); d[k][k] is the identity of COMB, so row and column k do not change in
step k and the in-place updates need no copies; sums stay below 2^30. The tolerance is zero.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

SIZES = [32, 48, 64, 96, 128, 160, 200, 256, 40, 80]
SEMIRINGS = ["shortest", "minimax", "widest"]
HEAD = "#include <cuda_runtime.h>\n\n"
DQ = "__device__ __forceinline__"
SIG_ARGS = "int ng, int n, const int* w, int* dist"
SIG = f'extern "C" void apsp({SIG_ARGS})'


def _defs(semiring: str, thr: int, undirected: bool) -> str:
    if semiring == "shortest":
        comb, better, absent, ident = "a + b", "a < b ? a : b", "INF", "0"
    elif semiring == "minimax":
        comb, better, absent, ident = "a > b ? a : b", "a < b ? a : b", "INF", "0"
    else:
        comb, better, absent, ident = "a < b ? a : b", "a > b ? a : b", "0", "INF"
    arc = "wg[(i < j ? i : j) * n + (i < j ? j : i)]" if undirected else "wg[i * n + j]"
    return ("#define INF (1 << 29)\n"
            f"#define ABSENT ({absent})\n"
            f"QUAL int comb(int a, int b) {{ return {comb}; }}\n"
            f"QUAL int better(int a, int b) {{ return {better}; }}\n"
            "QUAL int init_arc(const int* wg, int n, int i, int j) {\n"
            f"    if (i == j) return {ident};\n"
            f"    int x = {arc};\n"
            f"    return x < {thr} ? x + 1 : ABSENT;\n"
            "}\n"
            "QUAL int fin(int x) { return x >= INF ? -1 : x; }\n")


def _reference(defs: str) -> str:
    return ("#include <stddef.h>\n\n" + defs.replace("QUAL", "static inline") + "\n"
            f"void apsp({SIG_ARGS}) {{\n"
            "    size_t nn = (size_t)n * n;\n"
            "    for (int g = 0; g < ng; ++g) {\n"
            "        const int* wg = w + g * nn;\n"
            "        int* d = dist + g * nn;\n"
            "        for (int i = 0; i < n; ++i)\n"
            "            for (int j = 0; j < n; ++j) d[(size_t)i * n + j] = init_arc(wg, n, i, j);\n"
            "        for (int k = 0; k < n; ++k) {\n"
            "            const int* dk = d + (size_t)k * n;\n"
            "            for (int i = 0; i < n; ++i) {\n"
            "                int* di = d + (size_t)i * n;\n"
            "                int dik = di[k];\n"
            "                for (int j = 0; j < n; ++j) di[j] = better(di[j], comb(dik, dk[j]));\n"
            "            }\n"
            "        }\n"
            "        for (size_t c = 0; c < nn; ++c) d[c] = fin(d[c]);\n"
            "    }\n}\n")


# host pieces: the arc weights in, init and fin kernels, the closure out
KERNELS = ("__global__ void fw_init(int ng, int n, const int* w, int* d) {\n"
           "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nn = (size_t)n * n;\n"
           "    if (idx >= (size_t)ng * nn) return;\n"
           "    size_t g = idx / nn, c = idx % nn;\n"
           "    d[idx] = init_arc(w + g * nn, n, (int)(c / n), (int)(c % n));\n}\n\n"
           "__global__ void fw_fin(size_t total, int* d) {\n"
           "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (idx < total) d[idx] = fin(d[idx]);\n}\n\n")


def _host_in(pinned: bool = False) -> str:
    s = ("    if (ng <= 0 || n <= 0) return;\n"
         "    size_t nn = (size_t)n * n, total = (size_t)ng * nn;\n"
         "    int *dw, *dd;\n"
         "    cudaMalloc(&dw, total * sizeof(int)); cudaMalloc(&dd, total * sizeof(int));\n")
    if pinned:
        s += ("    int* hbuf; cudaMallocHost(&hbuf, total * sizeof(int));\n"
              "    memcpy(hbuf, w, total * sizeof(int));\n"
              "    cudaMemcpy(dw, hbuf, total * sizeof(int), cudaMemcpyHostToDevice);\n")
    else:
        s += "    cudaMemcpy(dw, w, total * sizeof(int), cudaMemcpyHostToDevice);\n"
    return s + ("    unsigned eb = (unsigned)((total + 255) / 256);\n"
                "    fw_init<<<eb, 256>>>(ng, n, dw, dd);\n")


def _host_out(pinned: bool = False) -> str:
    if pinned:
        return ("    fw_fin<<<eb, 256>>>(total, dd);\n"
                "    cudaMemcpy(hbuf, dd, total * sizeof(int), cudaMemcpyDeviceToHost);\n"
                "    memcpy(dist, hbuf, total * sizeof(int));\n"
                "    cudaFreeHost(hbuf); cudaFree(dw); cudaFree(dd);\n")
    return ("    fw_fin<<<eb, 256>>>(total, dd);\n"
            "    cudaMemcpy(dist, dd, total * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "    cudaFree(dw); cudaFree(dd);\n")


STEP = ("__global__ void fw_step(int k, int ng, int n, int* d) {\n"
        "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nn = (size_t)n * n;\n"
        "    if (idx >= (size_t)ng * nn) return;\n"
        "    size_t g = idx / nn, c = idx % nn;\n"
        "    int i = (int)(c / n), j = (int)(c % n);\n"
        "    int* dg = d + g * nn;\n"
        "    int old = dg[c];\n"
        "    int nv = better(old, comb(dg[(size_t)i * n + k], dg[(size_t)k * n + j]));\n"
        "    if (nv != old) dg[c] = nv;\n}\n\n")


def _launch_per_k(pre: str, pinned: bool) -> str:
    """A launch per k over every cell of every graph (row and column k never change in step k, and a cell is
    written only when it improves, so the step is race-free)."""
    return (pre + ("#include <string.h>\n" if pinned else "") + KERNELS + STEP + SIG + " {\n" + _host_in(pinned)
            + "    for (int k = 0; k < n; ++k) fw_step<<<eb, 256>>>(k, ng, n, dd);\n" + _host_out(pinned) + "}\n")


def _block_per_graph(pre: str) -> str:
    """One block of 1024 threads per graph loops over k inside the kernel, __syncthreads between steps."""
    return (pre + KERNELS
            + "__global__ void fw_block(int n, int* d) {\n"
            "    size_t nn = (size_t)n * n;\n"
            "    int* dg = d + blockIdx.x * nn;\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        for (size_t c = threadIdx.x; c < nn; c += blockDim.x) {\n"
            "            int i = (int)(c / n), j = (int)(c % n);\n"
            "            int old = dg[c];\n"
            "            int nv = better(old, comb(dg[(size_t)i * n + k], dg[(size_t)k * n + j]));\n"
            "            if (nv != old) dg[c] = nv;\n"
            "        }\n"
            "        __syncthreads();\n"
            "    }\n}\n\n"
            + SIG + " {\n" + _host_in()
            + "    fw_block<<<ng, 1024>>>(n, dd);\n" + _host_out() + "}\n")


def _row_col_shared(pre: str) -> str:
    """A launch per k; a block per graph stages row k and column k in shared memory, then updates every cell."""
    return (pre + KERNELS
            + "__global__ void fw_rc(int k, int n, int* d) {\n"
            "    extern __shared__ int sm[];\n"
            "    int* rowk = sm; int* colk = sm + n;\n"
            "    size_t nn = (size_t)n * n;\n"
            "    int* dg = d + blockIdx.x * nn;\n"
            "    for (int t = threadIdx.x; t < n; t += blockDim.x) {\n"
            "        rowk[t] = dg[(size_t)k * n + t];\n"
            "        colk[t] = dg[(size_t)t * n + k];\n"
            "    }\n"
            "    __syncthreads();\n"
            "    for (size_t c = threadIdx.x; c < nn; c += blockDim.x) {\n"
            "        int i = (int)(c / n), j = (int)(c % n);\n"
            "        int old = dg[c];\n"
            "        int nv = better(old, comb(colk[i], rowk[j]));\n"
            "        if (nv != old) dg[c] = nv;\n"
            "    }\n}\n\n"
            + SIG + " {\n" + _host_in()
            + "    for (int k = 0; k < n; ++k) fw_rc<<<ng, 256, 2 * n * sizeof(int)>>>(k, n, dd);\n"
            + _host_out() + "}\n")


def _register_blocked(pre: str) -> str:
    """A launch per k; each thread updates a 4 x 4 patch, its four d[i][k] and four d[k][j] held in registers."""
    return (pre + KERNELS
            + "__global__ void fw_reg(int k, int ng, int n, int* d) {\n"
            "    int P = (n + 3) / 4;\n"
            "    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, pp = (size_t)P * P;\n"
            "    if (idx >= (size_t)ng * pp) return;\n"
            "    size_t g = idx / pp, c = idx % pp;\n"
            "    int i0 = (int)(c / P) * 4, j0 = (int)(c % P) * 4;\n"
            "    int* dg = d + g * (size_t)n * n;\n"
            "    int ck[4], rk[4];\n"
            "#pragma unroll\n"
            "    for (int u = 0; u < 4; ++u) {\n"
            "        ck[u] = i0 + u < n ? dg[(size_t)(i0 + u) * n + k] : ABSENT;\n"
            "        rk[u] = j0 + u < n ? dg[(size_t)k * n + j0 + u] : ABSENT;\n"
            "    }\n"
            "#pragma unroll\n"
            "    for (int u = 0; u < 4; ++u) {\n"
            "        if (i0 + u >= n) break;\n"
            "        int* row = dg + (size_t)(i0 + u) * n;\n"
            "#pragma unroll\n"
            "        for (int v = 0; v < 4; ++v) {\n"
            "            if (j0 + v < n) {\n"
            "                int old = row[j0 + v];\n"
            "                int nv = better(old, comb(ck[u], rk[v]));\n"
            "                if (nv != old) row[j0 + v] = nv;\n"
            "            }\n"
            "        }\n"
            "    }\n}\n\n"
            + SIG + " {\n" + _host_in()
            + "    int P = (n + 3) / 4;\n"
            "    size_t work = (size_t)ng * P * P;\n"
            "    unsigned rb = (unsigned)((work + 127) / 128);\n"
            "    for (int k = 0; k < n; ++k) fw_reg<<<rb, 128>>>(k, ng, n, dd);\n" + _host_out() + "}\n")


def _blocked(pre: str) -> str:
    """Blocked Floyd-Warshall with 16 x 16 tiles in shared memory: per tile round kb, the diagonal tile closes over
    its own k (phase 1), the tiles of row kb and column kb against it (phase 2), then every other tile from its
    row and column tiles (phase 3); out-of-range cells load as ABSENT and are never written."""
    load = lambda dst, ti, tj: (  # noqa: E731
        f"    {{ int gi = ({ti}) * TB + ty, gj = ({tj}) * TB + tx;\n"
        f"      {dst}[ty][tx] = gi < n && gj < n ? dg[(size_t)gi * n + gj] : ABSENT; }}\n")
    store = lambda src, ti, tj: (  # noqa: E731
        f"    {{ int gi = ({ti}) * TB + ty, gj = ({tj}) * TB + tx;\n"
        f"      if (gi < n && gj < n) dg[(size_t)gi * n + gj] = {src}[ty][tx]; }}\n")
    head = ("    int tx = threadIdx.x, ty = threadIdx.y;\n"
            "    int* dg = d + (size_t)blockIdx.z * n * n;\n"
            "    int kmax = n - kb * TB < TB ? n - kb * TB : TB;\n")
    return (pre + KERNELS + "#define TB 16\n\n"
            "__global__ void fw_phase1(int kb, int n, int* d) {\n"
            "    __shared__ int t[TB][TB];\n" + head + load("t", "kb", "kb")
            + "    __syncthreads();\n"
            "    for (int k = 0; k < kmax; ++k) {\n"
            "        int old = t[ty][tx];\n"
            "        int nv = better(old, comb(t[ty][k], t[k][tx]));\n"
            "        if (nv != old) t[ty][tx] = nv;\n"
            "        __syncthreads();\n"
            "    }\n" + store("t", "kb", "kb") + "}\n\n"
            "__global__ void fw_phase2(int kb, int n, int* d) {\n"
            "    __shared__ int dia[TB][TB], own[TB][TB];\n"
            "    int b = blockIdx.x;\n"
            "    if (b == kb) return;\n"
            "    bool rowtile = blockIdx.y == 0;\n" + head
            + load("dia", "kb", "kb")
            + "    if (rowtile) {\n" + load("own", "kb", "b") + "    } else {\n" + load("own", "b", "kb") + "    }\n"
            "    __syncthreads();\n"
            "    for (int k = 0; k < kmax; ++k) {\n"
            "        int old = own[ty][tx];\n"
            "        int c = rowtile ? comb(dia[ty][k], own[k][tx]) : comb(own[ty][k], dia[k][tx]);\n"
            "        int nv = better(old, c);\n"
            "        if (nv != old) own[ty][tx] = nv;\n"
            "        __syncthreads();\n"
            "    }\n"
            "    if (rowtile) {\n" + store("own", "kb", "b") + "    } else {\n" + store("own", "b", "kb")
            + "    }\n}\n\n"
            "__global__ void fw_phase3(int kb, int n, int* d) {\n"
            "    __shared__ int col[TB][TB], row[TB][TB];\n"
            "    int bi = blockIdx.y, bj = blockIdx.x;\n"
            "    if (bi == kb || bj == kb) return;\n" + head
            + load("col", "bi", "kb") + load("row", "kb", "bj")
            + "    __syncthreads();\n"
            "    int gi = bi * TB + ty, gj = bj * TB + tx;\n"
            "    if (gi >= n || gj >= n) return;\n"
            "    int v = dg[(size_t)gi * n + gj];\n"
            "    for (int k = 0; k < kmax; ++k) v = better(v, comb(col[ty][k], row[k][tx]));\n"
            "    dg[(size_t)gi * n + gj] = v;\n}\n\n"
            + SIG + " {\n" + _host_in()
            + "    int nb = (n + TB - 1) / TB;\n"
            "    dim3 thr(TB, TB);\n"
            "    for (int kb = 0; kb < nb; ++kb) {\n"
            "        fw_phase1<<<dim3(1, 1, ng), thr>>>(kb, n, dd);\n"
            "        fw_phase2<<<dim3(nb, 2, ng), thr>>>(kb, n, dd);\n"
            "        fw_phase3<<<dim3(nb, nb, ng), thr>>>(kb, n, dd);\n"
            "    }\n" + _host_out() + "}\n")


def _thread_per_graph(pre: str) -> str:
    """One thread per graph runs the whole sequential closure (only for small n)."""
    return (pre + KERNELS
            + "__global__ void fw_serial(int ng, int n, int* d) {\n"
            "    int g = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (g >= ng) return;\n"
            "    int* dg = d + (size_t)g * n * n;\n"
            "    for (int k = 0; k < n; ++k) {\n"
            "        const int* dk = dg + (size_t)k * n;\n"
            "        for (int i = 0; i < n; ++i) {\n"
            "            int* di = dg + (size_t)i * n;\n"
            "            int dik = di[k];\n"
            "            for (int j = 0; j < n; ++j) di[j] = better(di[j], comb(dik, dk[j]));\n"
            "        }\n"
            "    }\n}\n\n"
            + SIG + " {\n" + _host_in()
            + "    fw_serial<<<(ng + 63) / 64, 64>>>(ng, n, dd);\n" + _host_out() + "}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    semiring = SEMIRINGS[index % 3]
    undirected = (index // 3) % 2 == 1
    n = SIZES[(index // 2 + int(rng.integers(3))) % len(SIZES)]
    wr = int(rng.choice([10, 100, 1000, 20]))
    dens = float(rng.choice([0.05, 0.1, 0.3, 0.6, 0.9]))
    thr = max(1, int(round(wr * dens)))
    ng = max(2, int(1.5e8 / n ** 3)) + int(rng.integers(0, 4))
    defs = _defs(semiring, thr, undirected)
    what = {"shortest": "shortest-path length (sum of arc values; min over paths)",
            "minimax": "minimax path value (the smallest possible largest arc value over paths)",
            "widest": "widest path value (the largest possible smallest arc value over paths)"}[semiring]
    arcs = ("undirected: the edge {i, j} is read from w[g*n*n + min(i,j)*n + max(i,j)]" if undirected else
            "directed: the arc i -> j is read from w[g*n*n + i*n + j]")
    task = {
        "function_name": "apsp",
        "description": (f"For each of ng graphs of n vertices ({arcs}; present with value x + 1 when x < {thr}, "
                        f"absent otherwise), dist[g*n*n + i*n + j] = the {what} from i to j, computed by the "
                        "Floyd-Warshall closure; INF = 2^29 (unreachable pairs for shortest and minimax, the "
                        "diagonal for widest) is written as -1, absent widest paths are 0, the shortest and "
                        "minimax diagonal is 0."),
        "returns": "void",
        "args": [
            {"name": "ng", "role": "scalar", "ctype": "int"},
            {"name": "n", "role": "scalar", "ctype": "int"},
            {"name": "w", "role": "in", "ctype": "int", "length": "ng * n * n",
             "dist": {"kind": "randint", "low": 0, "high": wr}},
            {"name": "dist", "role": "out", "ctype": "int", "length": "ng * n * n"},
        ],
        "size_configs": [{"ng": 1, "n": 1}, {"ng": 2, "n": 5}, {"ng": 3, "n": 37}, {"ng": 1, "n": 70},
                         {"ng": ng, "n": n}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(defs),
        "tags": ["graph", "integer", "dynamic-programming"],
    }
    pre = HEAD + defs.replace("QUAL", DQ) + "\n"
    variants = [
        Variant("launch_per_k", ("many_launches", "device_resident", "naive", "coalesced", "block_256",
                                 "pageable"), _launch_per_k(pre, False)),
        Variant("launch_per_k_pinned", ("many_launches", "device_resident", "naive", "coalesced", "block_256",
                                        "pinned"), _launch_per_k(pre, True)),
        Variant("block_per_graph_loop", ("block_per_row", "fused", "block_1024", "pageable"),
                _block_per_graph(pre)),
        Variant("row_col_shared", ("many_launches", "block_per_row", "shared_tiling", "block_256", "pageable"),
                _row_col_shared(pre)),
        Variant("register_4x4", ("many_launches", "register_blocking", "unrolled", "block_128", "pageable"),
                _register_blocked(pre)),
        Variant("blocked_tiles_3phase", ("shared_tiling", "multi_pass", "many_launches", "block_256",
                                         "pageable"), _blocked(pre)),
    ]
    if n <= 96:
        variants.append(Variant("thread_per_graph", ("single_thread", "thread_per_row", "block_64", "pageable"),
                                _thread_per_graph(pre)))
    return GeneratedTask(task, tuple(variants), {"semiring": semiring, "undirected": undirected, "n_time": n,
                                                 "ng_time": ng, "wrange": wr, "threshold": thr})


FAMILY = Family(
    name="floyd_warshall_small",
    description="all-pairs shortest / minimax / widest paths of a batch of small dense graphs (Floyd-Warshall)",
    generate=generate,
    n_tasks=50,
    tags=("graph", "integer", "dynamic-programming"),
)
