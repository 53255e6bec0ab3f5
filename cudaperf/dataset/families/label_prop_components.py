"""Connected components by min-label propagation on an undirected graph given as a random CSR edge list.

Edge ``e`` of row ``v`` joins ``v`` and ``nbr(col_idx[e], nv)`` (a skewing map, see ``_graph.py``), in both
directions. ``label[v]`` is the smallest vertex id of v's component: unique, so the exact integer output does not
depend on the algorithm. The reference propagates labels in place over the edges (both ways) until a sweep changes
nothing. Variants: Jacobi pull over a device-built symmetric adjacency, edge-parallel atomicMin push, vertex push-
pull, Shiloach-Vishkin-like hooking with pointer jumping, one block, and (for the smaller graphs) a single-thread
union-find.

Parameters: the edges per vertex (0.6..4: from many small components near the percolation threshold to one giant
component), the skewing map and the graph size.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.families._graph import (EDGE_SRC_K, SKEWS, TRANSPOSE_FREE, TRANSPOSE_HOST, TRANSPOSE_K,
                                              nbr_c, nbr_device, nbr_text)
from cudaperf.dataset.family import Family, GeneratedTask, Variant

DEGREES = [1.5, 0.8, 2.0, 3.0, 0.6, 1.2, 4.0, 1.0]
UF_MAX_EDGES = 400_000

SIG = 'extern "C" void cc_min_label(int nv, int ne, const int* row_ptr, const int* col_idx, int* label)'

INIT_K = """__global__ void cc_init(int nv, int* l) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < nv) l[v] = v;
}

"""
SETUP = """    if (nv <= 0) return;
    int *d_rp, *d_ci, *d_l;
    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    cudaMalloc(&d_l, (size_t)nv * sizeof(int));
    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);
    cc_init<<<(nv + 255) / 256, 256>>>(nv, d_l);
"""
TAIL = """    cudaMemcpy(label, d_l, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_l);
}
"""
ES_ALLOC = """    int* d_es; cudaMalloc(&d_es, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    edge_src<<<(nv + 255) / 256, 256>>>(nv, d_rp, d_es);
"""
FLAG_ALLOC = "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"


def _head(skew: str) -> str:
    return "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n" + nbr_device(skew)


def _edge_atomic(h: str) -> str:
    return (h + INIT_K + EDGE_SRC_K
            + """__global__ void prop_edges(int ne, int nv, const int* es, const int* ci, int* l, int* flag) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int a = es[e], b = nbr(ci[e], nv);
    int la = l[a], lb = l[b];
    if (la < lb) { if (atomicMin(&l[b], la) > la) *flag = 1; }
    else if (lb < la) { if (atomicMin(&l[a], lb) > lb) *flag = 1; }
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC + ES_ALLOC
            + """    for (;;) {
        int h = 0;
        if (ne == 0) break;
        cudaMemset(d_flag, 0, sizeof(int));
        prop_edges<<<(ne + 255) / 256, 256>>>(ne, nv, d_es, d_ci, d_l, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_es); cudaFree(d_flag);
""" + TAIL)


def _pull(h: str) -> str:
    return (h + INIT_K + EDGE_SRC_K + TRANSPOSE_K
            + """__global__ void prop_pull(int nv, const int* rp, const int* ci, const int* off, const int* isrc,
                          const int* es, const int* lin, int* lout, int* flag) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int old = lin[v], m = old;
    for (int e = rp[v]; e < rp[v + 1]; ++e) m = min(m, lin[nbr(ci[e], nv)]);
    for (int p = off[v]; p < off[v + 1]; ++p) m = min(m, lin[es[isrc[p]]]);
    lout[v] = m;
    if (m < old) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC + ES_ALLOC
            + "    int* d_nx; cudaMalloc(&d_nx, (size_t)nv * sizeof(int));\n" + TRANSPOSE_HOST
            + """    for (;;) {
        int h = 0;
        if (ne == 0) break;
        cudaMemset(d_flag, 0, sizeof(int));
        prop_pull<<<(nv + 255) / 256, 256>>>(nv, d_rp, d_ci, d_off, d_isrc, d_es, d_l, d_nx, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        int* t = d_l; d_l = d_nx; d_nx = t;
        if (!h) break;
    }
    cudaFree(d_es); cudaFree(d_nx); cudaFree(d_flag);
""" + TRANSPOSE_FREE + TAIL)


def _vertex_push_pull(h: str) -> str:
    return (h + INIT_K
            + """__global__ void prop_vertex(int nv, const int* rp, const int* ci, int* l, int* flag) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int e0 = rp[v], e1 = rp[v + 1];
    int m = l[v];
    for (int e = e0; e < e1; ++e) m = min(m, l[nbr(ci[e], nv)]);
    int f = 0;
    if (atomicMin(&l[v], m) > m) f = 1;
    for (int e = e0; e < e1; ++e) {
        int u = nbr(ci[e], nv);
        if (l[u] > m && atomicMin(&l[u], m) > m) f = 1;
    }
    if (f) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC
            + """    for (;;) {
        int h = 0;
        if (ne == 0) break;
        cudaMemset(d_flag, 0, sizeof(int));
        prop_vertex<<<(nv + 127) / 128, 128>>>(nv, d_rp, d_ci, d_l, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_flag);
""" + TAIL)


def _hook_jump(h: str) -> str:
    # p[x] <= x and p[x] in x's component always hold; hooking lowers the parent of the larger root with
    # atomicMin; jumping points every vertex at its root (roots do not move during the jump kernel). A hook
    # kernel that lowers nothing means every edge's two ends share a root: that root is the component's minimum.
    return (h + INIT_K + EDGE_SRC_K
            + """__global__ void hook(int ne, int nv, const int* es, const int* ci, int* p, int* flag) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int pa = p[es[e]], pb = p[nbr(ci[e], nv)];
    if (pa < pb) { if (atomicMin(&p[pb], pa) > pa) *flag = 1; }
    else if (pb < pa) { if (atomicMin(&p[pa], pb) > pb) *flag = 1; }
}

__global__ void jump(int nv, int* p) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int x = p[v];
    for (;;) { int y = p[x]; if (y == x) break; x = y; }
    p[v] = x;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC + ES_ALLOC
            + """    for (;;) {
        int h = 0;
        if (ne == 0) break;
        cudaMemset(d_flag, 0, sizeof(int));
        hook<<<(ne + 255) / 256, 256>>>(ne, nv, d_es, d_ci, d_l, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
        jump<<<(nv + 255) / 256, 256>>>(nv, d_l);
    }
    cudaFree(d_es); cudaFree(d_flag);
""" + TAIL)


def _edge_grid_stride(h: str) -> str:
    return (h + INIT_K + EDGE_SRC_K
            + """__global__ void prop_gs(int ne, int nv, const int* __restrict__ es, const int* __restrict__ ci, int* l,
                        int* flag) {
    int f = 0;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < ne; e += gridDim.x * blockDim.x) {
        int a = __ldg(es + e), b = nbr(__ldg(ci + e), nv);
        int la = l[a], lb = l[b];
        if (la < lb) { if (atomicMin(&l[b], la) > la) f = 1; }
        else if (lb < la) { if (atomicMin(&l[a], lb) > lb) f = 1; }
    }
    if (f) *flag = 1;
}

""" + SIG + " {\n" + SETUP + FLAG_ALLOC + ES_ALLOC
            + """    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int nb = sms * 4; int need = (ne + 511) / 512; if (nb > need) nb = need; if (nb < 1) nb = 1;
    // the flag is read every 4 sweeps: sweeps after the last change change nothing
    for (;;) {
        int h = 0;
        if (ne == 0) break;
        cudaMemset(d_flag, 0, sizeof(int));
        for (int k = 0; k < 4; ++k) prop_gs<<<nb, 512>>>(ne, nv, d_es, d_ci, d_l, d_flag);
        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);
        if (!h) break;
    }
    cudaFree(d_es); cudaFree(d_flag);
""" + TAIL)


def _single_block(h: str) -> str:
    return (h + INIT_K
            + """__global__ void cc_block(int nv, const int* rp, const int* ci, int* l) {
    __shared__ int changed;
    for (;;) {
        if (threadIdx.x == 0) changed = 0;
        __syncthreads();
        int f = 0;
        for (int v = threadIdx.x; v < nv; v += blockDim.x) {
            for (int e = rp[v]; e < rp[v + 1]; ++e) {
                int u = nbr(ci[e], nv);
                int la = l[v], lb = l[u];
                if (la < lb) { if (atomicMin(&l[u], la) > la) f = 1; }
                else if (lb < la) { if (atomicMin(&l[v], lb) > lb) f = 1; }
            }
        }
        if (f) changed = 1;
        __syncthreads();
        int c = changed;
        __syncthreads();
        if (!c) break;
    }
}

""" + SIG + " {\n" + SETUP + "    cc_block<<<1, 1024>>>(nv, d_rp, d_ci, d_l);\n" + TAIL)


def _union_find(h: str) -> str:
    return (h + """__device__ int uf_find(int* p, int x) {
    while (p[x] != x) { p[x] = p[p[x]]; x = p[x]; }
    return x;
}

// one thread: union by smaller root (a root is its set's minimum), path halving
__global__ void uf_serial(int nv, const int* rp, const int* ci, int* p) {
    for (int v = 0; v < nv; ++v) p[v] = v;
    for (int v = 0; v < nv; ++v) {
        for (int e = rp[v]; e < rp[v + 1]; ++e) {
            int a = uf_find(p, v), b = uf_find(p, nbr(ci[e], nv));
            if (a < b) p[b] = a; else if (b < a) p[a] = b;
        }
    }
    for (int v = 0; v < nv; ++v) p[v] = uf_find(p, v);
}

""" + SIG + """ {
    if (nv <= 0) return;
    int *d_rp, *d_ci, *d_l;
    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    cudaMalloc(&d_l, (size_t)nv * sizeof(int));
    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);
    uf_serial<<<1, 1>>>(nv, d_rp, d_ci, d_l);
""" + TAIL)


def _reference(skew: str) -> str:
    return ("#include <stdlib.h>\n\n" + nbr_c(skew)
            + """void cc_min_label(int nv, int ne, const int* row_ptr, const int* col_idx, int* label) {
    (void)ne;
    if (nv <= 0) return;
    for (int v = 0; v < nv; ++v) label[v] = v;
    int changed = 1;
    while (changed) {
        changed = 0;
        for (int v = 0; v < nv; ++v) {
            for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {
                int u = nbr(col_idx[e], nv);
                int a = label[v], b = label[u];
                if (a < b) { label[u] = a; changed = 1; }
                else if (b < a) { label[v] = b; changed = 1; }
            }
        }
    }
}
""")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    deg = DEGREES[(index + int(rng.integers(3))) % len(DEGREES)]
    skew = SKEWS[(index // 2) % len(SKEWS)]
    # in-place sweeps until stable: sparse graphs near the percolation threshold have long paths (many sweeps)
    units = 1.0e5 * (0.3 if deg < 1 else 0.6 if deg < 2 else 1.0) * (0.8 + 0.4 * float(rng.random()))
    ne_time = int(units)
    nv_time = int(ne_time / deg) + int(rng.integers(1, 97))
    nv1 = 20000 + int(rng.integers(5000))
    h = _head(skew)
    task = {
        "function_name": "cc_min_label",
        "description": (f"Connected components of an undirected graph ({deg:g} edges per vertex): edge e of row v "
                        f"of the CSR (row_ptr, col_idx) joins v and {nbr_text(skew)} for c = col_idx[e]. "
                        "label[v] = the smallest vertex id in v's component (min-label propagation until "
                        "stable)."),
        "returns": "void",
        "args": [
            {"name": "nv", "role": "scalar", "ctype": "int"},
            {"name": "ne", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "nv + 1",
             "dist": {"kind": "offsets", "high": "ne"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "label", "role": "out", "ctype": "int", "length": "nv"},
        ],
        "size_configs": [{"nv": 1000, "ne": int(1000 * deg)}, {"nv": nv1, "ne": int(nv1 * deg)},
                         {"nv": 77, "ne": 50}, {"nv": 5, "ne": 3}, {"nv": nv_time, "ne": ne_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(skew),
        "tags": ["graph", "irregular", "integer", "iterative"],
    }
    variants = [
        Variant("edge_atomic_min", ("naive", "atomics", "many_launches", "device_resident", "block_256",
                                    "pageable"), _edge_atomic(h)),
        Variant("pull_symmetric_jacobi", ("thread_per_row", "double_buffered", "host_compute", "multi_pass",
                                          "many_launches", "block_256", "pageable"), _pull(h)),
        Variant("vertex_push_pull", ("thread_per_row", "atomics", "branch_divergent", "many_launches",
                                     "block_128", "pageable"), _vertex_push_pull(h)),
        Variant("hook_pointer_jump", ("atomics", "multi_pass", "many_launches", "device_resident", "block_256",
                                      "pageable"), _hook_jump(h)),
        Variant("edge_grid_stride_check4", ("grid_stride", "atomics", "readonly_cache", "many_launches",
                                            "block_512", "pageable"), _edge_grid_stride(h)),
        Variant("single_block", ("single_thread", "atomics", "block_1024", "pageable"), _single_block(h)),
    ]
    if ne_time <= UF_MAX_EDGES:
        variants.append(Variant("single_thread_union_find", ("single_thread", "pageable"), _union_find(h)))
    params = {"edges_per_vertex": deg, "skew": skew, "nv_time": nv_time, "ne_time": ne_time}
    return GeneratedTask(task, tuple(variants), params)


FAMILY = Family(
    name="label_prop_components",
    description="Connected components (min vertex id per component) of a skewed undirected CSR graph",
    generate=generate,
    n_tasks=50,
    tags=("graph", "integer", "iterative"),
)
