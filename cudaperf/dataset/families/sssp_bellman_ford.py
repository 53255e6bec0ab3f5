"""Multi-source shortest paths (Bellman-Ford, 8 consecutive sources at distance 0) with positive integer weights
on a random directed CSR graph.

Edge ``e`` of row ``v`` goes from ``v`` to ``nbr(col_idx[e], nv)`` (a skewing map, see ``_graph.py``) with weight
``w[e]`` in ``[1, W]``. ``dist[v]`` is the shortest-path distance from the nearest source (``INF`` when
unreachable). The
reference runs in-place relaxation rounds over all edges, at most ``nv - 1`` of them, and stops after a round
that changed nothing. Shortest distances are unique, so the exact integer output does not depend on the order of
relaxations: every variant may stop as soon as a round (or its frontier) changes nothing. Distances stay far below
2^31 (paths of a few dozen hops of weight <= 10^4), so ``du + w`` never overflows for a reached ``du``.

Parameters: the average out-degree, the weight range W, the skewing map, the unreachable sentinel INF and the
graph size (the reference's rounds over random edges take tens of milliseconds at the timing size).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.families._graph import (EDGE_SRC_K, SKEWS, TRANSPOSE_FREE, TRANSPOSE_HOST, TRANSPOSE_K,
                                              nbr_c, nbr_device, nbr_text)
from cudaperf.dataset.family import Family, GeneratedTask, Variant

DEGREES = [3, 4, 6, 8, 2, 12, 5, 16]
WEIGHTS = [10, 100, 1000, 2, 10000, 50, 7]
INFS = ["2147483647", "1000000000", "1073741823"]

SIG = ('extern "C" void sssp_bf(int nv, int ne, const int* row_ptr, const int* col_idx, const int* w, int src,'
       ' int* dist)')

INIT_K = """__global__ void sssp_init(int nv, int src, int* dist) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    int ns = nv < NSRC ? nv : NSRC;
    if (v < nv) dist[v] = ((v - src + nv) % nv < ns) ? 0 : INF;
}

"""

SETUP = """    if (nv <= 0) return;
    int *d_rp, *d_ci, *d_w, *d_dist;
    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    cudaMalloc(&d_w, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    cudaMalloc(&d_dist, (size_t)nv * sizeof(int));
    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
    if (ne > 0) {
        cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);
        cudaMemcpy(d_w, w, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);
    }
    sssp_init<<<(nv + 255) / 256, 256>>>(nv, src, d_dist);
"""
TAIL = """    cudaMemcpy(dist, d_dist, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_w); cudaFree(d_dist);
}
"""
FLAG_ALLOC = "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"

# thread per vertex, push over its out-edges with atomicMin (a stale du only relaxes less: the lowered vertex
# sets the flag, so another round follows)
PUSH_K = """__global__ void relax_push(int nv, const int* rp, const int* ci, const int* w, int* dist, int* flag) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int du = dist[v];
    if (du == INF) return;
    int f = 0;
    for (int e = rp[v]; e < rp[v + 1]; ++e) {
        int u = nbr(ci[e], nv);
        int nd = du + w[e];
        if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) f = 1;
    }
    if (f) *flag = 1;
}

"""


def _head(inf: str, skew: str) -> str:
    return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
            f"#define INF {inf}\n#define NSRC 8\n\n" + nbr_device(skew))


def _edge_atomic(h: str) -> str:
    return (h + INIT_K + EDGE_SRC_K
            + """__global__ void relax_edges(int ne, int nv, const int* es, const int* ci, const int* w, int* dist,
                            int* flag) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int du = dist[es[e]];
    if (du == INF) return;
    int u = nbr(ci[e], nv);
    int nd = du + w[e];
    if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    int* d_es; cudaMalloc(&d_es, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    edge_src<<<(nv + 255) / 256, 256>>>(nv, d_rp, d_es);
    for (int r = 0; r < nv - 1 && ne > 0; ++r) {
        int h = 0;
        cudaMemset(d_flag, 0, sizeof(int));
        relax_edges<<<(ne + 255) / 256, 256>>>(ne, nv, d_es, d_ci, d_w, d_dist, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_es); cudaFree(d_flag);
""" + TAIL)


def _pull(h: str) -> str:
    return (h + INIT_K + EDGE_SRC_K + TRANSPOSE_K
            + """__global__ void relax_pull(int nv, const int* off, const int* isrc, const int* es, const int* w,
                           const int* din, int* dout, int* flag) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int old = din[v], best = old;
    for (int p = off[v]; p < off[v + 1]; ++p) {
        int e = isrc[p];
        int du = din[es[e]];
        if (du != INF && du + w[e] < best) best = du + w[e];
    }
    dout[v] = best;
    if (best < old) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    int* d_es; cudaMalloc(&d_es, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    int* d_nx; cudaMalloc(&d_nx, (size_t)nv * sizeof(int));
    edge_src<<<(nv + 255) / 256, 256>>>(nv, d_rp, d_es);
""" + TRANSPOSE_HOST
            + """    for (int r = 0; r < nv - 1 && ne > 0; ++r) {
        int h = 0;
        cudaMemset(d_flag, 0, sizeof(int));
        relax_pull<<<(nv + 127) / 128, 128>>>(nv, d_off, d_isrc, d_es, d_w, d_dist, d_nx, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        int* t = d_dist; d_dist = d_nx; d_nx = t;
        if (!h) break;
    }
    cudaFree(d_es); cudaFree(d_nx); cudaFree(d_flag);
""" + TRANSPOSE_FREE + TAIL)


def _frontier(h: str) -> str:
    return (h + INIT_K
            + """__global__ void relax_frontier(int nq, const int* q, int nv, const int* rp, const int* ci,
                               const int* w, int* dist, int* stamp, int round, int* qout, int* tail) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    int v = q[i];
    int du = dist[v];
    for (int e = rp[v]; e < rp[v + 1]; ++e) {
        int u = nbr(ci[e], nv);
        int nd = du + w[e];
        if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) {
            // queued once per round: the first thread to stamp u this round appends it
            if (atomicExch(&stamp[u], round) != round) qout[atomicAdd(tail, 1)] = u;
        }
    }
}

""" + SIG + " {\n" + SETUP
            + """    int *q_in, *q_out, *d_tail, *d_stamp;
    cudaMalloc(&q_in, (size_t)nv * sizeof(int)); cudaMalloc(&q_out, (size_t)nv * sizeof(int));
    cudaMalloc(&d_tail, sizeof(int)); cudaMalloc(&d_stamp, (size_t)nv * sizeof(int));
    cudaMemset(d_stamp, 0xff, (size_t)nv * sizeof(int));
    int n_in = nv < NSRC ? nv : NSRC;
    int srcs[NSRC];
    for (int k = 0; k < n_in; ++k) srcs[k] = (src + k) % nv;
    cudaMemcpy(q_in, srcs, (size_t)n_in * sizeof(int), cudaMemcpyHostToDevice);
    for (int r = 0; n_in > 0 && r < nv - 1; ++r) {
        cudaMemset(d_tail, 0, sizeof(int));
        relax_frontier<<<(n_in + 255) / 256, 256>>>(n_in, q_in, nv, d_rp, d_ci, d_w, d_dist, d_stamp, r, q_out,
                                                    d_tail);
        cudaMemcpy(&n_in, d_tail, sizeof(int), cudaMemcpyDeviceToHost);
        int* t = q_in; q_in = q_out; q_out = t;
    }
    cudaFree(q_in); cudaFree(q_out); cudaFree(d_tail); cudaFree(d_stamp);
""" + TAIL)


def _push_grid_stride(h: str) -> str:
    return (h + INIT_K
            + """__global__ void relax_gs(int nv, const int* __restrict__ rp, const int* __restrict__ ci,
                         const int* __restrict__ w, int* dist, int* flag) {
    int f = 0;
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {
        int du = dist[v];
        if (du == INF) continue;
        int e1 = __ldg(rp + v + 1);
        for (int e = __ldg(rp + v); e < e1; ++e) {
            int u = nbr(__ldg(ci + e), nv);
            int nd = du + __ldg(w + e);
            if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) f = 1;
        }
    }
    if (f) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int nb = sms * 4; int need = (nv + 511) / 512; if (nb > need) nb = need; if (nb < 1) nb = 1;
    // the flag is read every 4 rounds only: a round that changes nothing changes nothing after it either
    for (int r = 0; r < nv - 1 && ne > 0; r += 4) {
        int h = 0;
        cudaMemset(d_flag, 0, sizeof(int));
        for (int k = 0; k < 4; ++k) relax_gs<<<nb, 512>>>(nv, d_rp, d_ci, d_w, d_dist, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_flag);
""" + TAIL)


def _warp_push(h: str) -> str:
    return (h + INIT_K
            + """__global__ void relax_warp(int nv, const int* rp, const int* ci, const int* w, int* dist, int* flag) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long v = t >> 5;
    int lane = threadIdx.x & 31;
    if (v >= nv) return;
    int du = dist[v];  // lanes may read different values while v is lowered: each relaxes with its own
    if (du == INF) return;
    int e1 = rp[v + 1];
    for (int e = rp[v] + lane; e < e1; e += 32) {
        int u = nbr(ci[e], nv);
        int nd = du + w[e];
        if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) *flag = 1;
    }
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    unsigned blocks = (unsigned)(((long long)nv * 32 + 255) / 256);
    for (int r = 0; r < nv - 1 && ne > 0; ++r) {
        int h = 0;
        cudaMemset(d_flag, 0, sizeof(int));
        relax_warp<<<blocks, 256>>>(nv, d_rp, d_ci, d_w, d_dist, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_flag);
""" + TAIL)


def _host_copy(h: str) -> str:
    return (h + INIT_K + PUSH_K + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    int* prev = (int*)malloc((size_t)nv * sizeof(int));
    int* cur = (int*)malloc((size_t)nv * sizeof(int));
    cudaMemcpy(prev, d_dist, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);
    for (int r = 0; r < nv - 1 && ne > 0; ++r) {
        relax_push<<<(nv + 127) / 128, 128>>>(nv, d_rp, d_ci, d_w, d_dist, d_flag);
        cudaMemcpy(cur, d_dist, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);
        if (memcmp(cur, prev, (size_t)nv * sizeof(int)) == 0) break;
        int* t = prev; prev = cur; cur = t;
    }
    free(prev); free(cur); cudaFree(d_flag);
""" + TAIL)


def _single_block(h: str) -> str:
    return (h + INIT_K
            + """__global__ void sssp_block(int nv, const int* rp, const int* ci, const int* w, int* dist) {
    __shared__ int changed;
    for (int r = 0; r < nv - 1; ++r) {
        if (threadIdx.x == 0) changed = 0;
        __syncthreads();
        int f = 0;
        for (int v = threadIdx.x; v < nv; v += blockDim.x) {
            int du = dist[v];
            if (du == INF) continue;
            for (int e = rp[v]; e < rp[v + 1]; ++e) {
                int u = nbr(ci[e], nv);
                int nd = du + w[e];
                if (nd < dist[u] && atomicMin(&dist[u], nd) > nd) f = 1;
            }
        }
        if (f) changed = 1;
        __syncthreads();
        int c = changed;
        __syncthreads();
        if (!c) break;
    }
}

""" + SIG + " {\n" + SETUP
            + "    sssp_block<<<1, 1024>>>(nv, d_rp, d_ci, d_w, d_dist);\n" + TAIL)


def _reference(inf: str, skew: str) -> str:
    return ("#include <stdlib.h>\n\n"
            f"#define INF {inf}\n#define NSRC 8\n\n" + nbr_c(skew)
            + """void sssp_bf(int nv, int ne, const int* row_ptr, const int* col_idx, const int* w, int src,
             int* dist) {
    (void)ne;
    if (nv <= 0) return;
    for (int v = 0; v < nv; ++v) dist[v] = INF;
    int ns = nv < NSRC ? nv : NSRC;
    for (int k = 0; k < ns; ++k) dist[(src + k) % nv] = 0;
    for (int r = 0; r < nv - 1; ++r) {
        int changed = 0;
        for (int v = 0; v < nv; ++v) {
            int dv = dist[v];
            if (dv == INF) continue;
            for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {
                int u = nbr(col_idx[e], nv);
                int nd = dv + w[e];
                if (nd < dist[u]) { dist[u] = nd; changed = 1; }
            }
        }
        if (!changed) break;
    }
}
""")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    deg = DEGREES[(index + int(rng.integers(3))) % len(DEGREES)]
    wmax = WEIGHTS[index % len(WEIGHTS)]
    skew = SKEWS[(index // 2) % len(SKEWS)]
    inf = INFS[index % len(INFS)]
    # the reference makes ~5..15 in-place rounds over the edges (fewer for skewed maps, whose reach is smaller)
    units = {"identity": 1.6e6, "quadratic": 2.4e6, "cubic": 2.8e6}[skew] * (0.8 + 0.4 * float(rng.random()))
    ne_time = int(units / (20.0 if wmax > 7 else 12.0))
    if wmax <= 10 and deg >= 8:  # few rounds: dense graphs with narrow weight ranges settle quickly
        ne_time *= 6
    if deg <= 2 and skew == "cubic":  # long paths through the few reachable hubs: many rounds
        ne_time //= 2
    nv_time = ne_time // deg + int(rng.integers(1, 97))
    nv1 = 20000 + int(rng.integers(5000))
    h = _head(inf, skew)
    task = {
        "function_name": "sssp_bf",
        "description": (f"Multi-source shortest paths (Bellman-Ford) from the 8 sources src, src+1, .., src+7 (mod nv; "
                        f"all nv when nv < 8) on a directed graph in CSR form "
                        f"(average out-degree {deg}): edge e of row v goes to {nbr_text(skew)} for c = col_idx[e], "
                        f"with weight w[e] in [1, {wmax}]. dist[v] = shortest distance from the nearest source, "
                        f"{inf} when unreachable. At most nv - 1 relaxation rounds; stopping early when a round "
                        "changes nothing gives the same distances."),
        "returns": "void",
        "args": [
            {"name": "nv", "role": "scalar", "ctype": "int"},
            {"name": "ne", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "nv + 1",
             "dist": {"kind": "offsets", "high": "ne"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "w", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 1, "high": wmax + 1}},
            {"name": "src", "role": "scalar", "ctype": "int", "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "dist", "role": "out", "ctype": "int", "length": "nv"},
        ],
        "size_configs": [{"nv": 1000, "ne": 1000 * deg}, {"nv": nv1, "ne": nv1 * deg + int(rng.integers(100))},
                         {"nv": 77, "ne": 150}, {"nv": 5, "ne": 3}, {"nv": nv_time, "ne": ne_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(inf, skew),
        "tags": ["graph", "irregular", "integer", "iterative"],
    }
    variants = (
        Variant("edge_atomic_rounds", ("naive", "atomics", "many_launches", "device_resident", "block_256",
                                       "pageable"), _edge_atomic(h)),
        Variant("vertex_pull_jacobi", ("thread_per_row", "double_buffered", "host_compute", "many_launches",
                                       "multi_pass", "block_128", "pageable"), _pull(h)),
        Variant("frontier_worklist", ("atomics", "many_launches", "device_resident", "branch_divergent",
                                      "block_256", "pageable"), _frontier(h)),
        Variant("push_grid_stride_check4", ("grid_stride", "thread_per_row", "atomics", "readonly_cache",
                                            "device_resident", "many_launches", "block_512", "pageable"),
                _push_grid_stride(h)),
        Variant("warp_per_vertex", ("block_per_row", "coalesced", "atomics", "many_launches", "block_256",
                                    "pageable"), _warp_push(h)),
        Variant("host_dist_compare", ("thread_per_row", "atomics", "in_loop_transfers", "extra_transfers",
                                      "host_compute", "block_128", "pageable"), _host_copy(h)),
        Variant("single_block", ("single_thread", "atomics", "block_1024", "pageable"), _single_block(h)),
    )
    params = {"avg_degree": deg, "wmax": wmax, "skew": skew, "inf": inf, "nv_time": nv_time, "ne_time": ne_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="sssp_bellman_ford",
    description="Bellman-Ford multi-source shortest paths (integer weights, skewed degrees) on a CSR graph",
    generate=generate,
    n_tasks=50,
    tags=("graph", "integer", "iterative"),
)
