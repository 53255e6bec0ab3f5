"""Triangle counting in an undirected simple graph built from a random CSR edge list.

Edge ``e`` of row ``v`` joins ``v`` and ``u = nbr(v, col_idx[e], nv)``: a skewing map of the drawn index (identity,
quadratic, cubic: low ids become hubs, see ``_graph.py``) or a band ``u = (v - 1 - c) mod nv`` with ``c`` below a
small width (a ring of overlapping cliques: many triangles). Self loops are dropped and repeated pairs count once.
The harness's inputs are neither sorted nor symmetric, so the reference and every variant first build the oriented
form inside the call: each undirected edge stored once, at its larger endpoint, each list sorted ascending and
deduplicated (a count, an exclusive scan, a fill, a per-row sort). A triangle u < w < v is then counted once, at
the stored edge (v, w), as the common element u of the lists of v and w. The function returns the number of
triangles (long long, exact); some tasks also write ``tri[v]``, the number of triangles through v.

Variants share the device-side build (count with atomics, a one-block scan, fill with atomics, a thread per row
sorts and deduplicates) and differ in the counting: thread per vertex, thread per edge with a merge intersection
(atomics for the total), thread per edge with binary search (block reduction), warp per vertex, block per vertex
with its list staged in shared memory, a grid-stride edge loop with a warp-shuffle reduction, and one block.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.families._graph import nbr_body, nbr_text
from cudaperf.dataset.family import Family, GeneratedTask, Variant

GRAPHS = ("identity", "band", "quadratic", "cubic")
DEGREES = [4.0, 8.0, 6.0, 12.0, 3.0, 10.0, 5.0, 16.0]
SHARED_CAP = 1024


def _nbr_body(graph: str) -> str:
    if graph == "band":
        return "    int u = (v - 1 - c) % nv;\n    return u < 0 ? u + nv : u;\n"
    return "    (void)v;\n" + nbr_body(graph)


def _nbr_text(graph: str, width: int) -> str:
    if graph == "band":
        return f"u = (v - 1 - c) mod nv (non-negative), with 0 <= c < {width}"
    return "u = " + nbr_text(graph).replace("nbr(c) = ", "")


def _sig(per_vertex: bool) -> str:
    extra = ", int* tri" if per_vertex else ""
    return f'extern "C" long long triangle_count(int nv, int ne, const int* row_ptr, const int* col_idx{extra})'


# ---- the shared device-side build of the oriented, sorted, deduplicated lists ------------------------------------

BUILD_K = """__global__ void orient_count(int nv, const int* rp, const int* ci, int* cnt) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    for (int e = rp[v]; e < rp[v + 1]; ++e) {
        int u = nbr(v, ci[e], nv);
        if (u != v) atomicAdd(&cnt[u > v ? u : v], 1);
    }
}

// one block: each thread sums a contiguous chunk, a Hillis-Steele scan of the chunk sums, then the chunk offsets
__global__ void scan_offsets(int nv, const int* cnt, int* off, int* cur) {
    __shared__ int part[1024];
    int t = threadIdx.x;
    int chunk = (nv + blockDim.x - 1) / blockDim.x;
    int lo = t * chunk, hi = min(nv, lo + chunk);
    int s = 0;
    for (int i = lo; i < hi; ++i) s += cnt[i];
    part[t] = s;
    __syncthreads();
    for (int d = 1; d < blockDim.x; d <<= 1) {
        int x = t >= d ? part[t - d] : 0;
        __syncthreads();
        part[t] += x;
        __syncthreads();
    }
    int run = part[t] - s;
    for (int i = lo; i < hi; ++i) { off[i] = run; cur[i] = run; run += cnt[i]; }
    if (t == blockDim.x - 1) off[nv] = part[t];
}

__global__ void orient_fill(int nv, const int* rp, const int* ci, int* cur, int* adj, int* es) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    for (int e = rp[v]; e < rp[v + 1]; ++e) {
        int u = nbr(v, ci[e], nv);
        if (u == v) continue;
        int a = u > v ? u : v, b = u > v ? v : u;
        int p = atomicAdd(&cur[a], 1);
        adj[p] = b;
        es[p] = a;
    }
}

// thread per row: insertion sort, then drop repeats; len[v] = the distinct count (the row's tail is stale)
__global__ void sort_dedup(int nv, const int* off, int* adj, int* len) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    int* a = adj + off[v];
    int n = off[v + 1] - off[v];
    for (int i = 1; i < n; ++i) {
        int x = a[i], j = i - 1;
        while (j >= 0 && a[j] > x) { a[j + 1] = a[j]; --j; }
        a[j + 1] = x;
    }
    int m = 0;
    for (int i = 0; i < n; ++i) if (m == 0 || a[i] != a[m - 1]) a[m++] = a[i];
    len[v] = m;
}

"""


def _setup(per_vertex: bool) -> str:
    s = """    if (nv <= 0) return 0;
    size_t ecap = (size_t)(ne > 0 ? ne : 1);
    int *d_rp, *d_ci, *d_cnt, *d_off, *d_cur, *d_adj, *d_es, *d_len;
    unsigned long long* d_total;
    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_ci, ecap * sizeof(int));
    cudaMalloc(&d_cnt, (size_t)nv * sizeof(int));
    cudaMalloc(&d_off, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_cur, (size_t)nv * sizeof(int));
    cudaMalloc(&d_adj, ecap * sizeof(int));
    cudaMalloc(&d_es, ecap * sizeof(int));
    cudaMalloc(&d_len, (size_t)nv * sizeof(int));
    cudaMalloc(&d_total, sizeof(unsigned long long));
    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemset(d_cnt, 0, (size_t)nv * sizeof(int));
    cudaMemset(d_total, 0, sizeof(unsigned long long));
    int vb = (nv + 255) / 256;
    orient_count<<<vb, 256>>>(nv, d_rp, d_ci, d_cnt);
    scan_offsets<<<1, 1024>>>(nv, d_cnt, d_off, d_cur);
    orient_fill<<<vb, 256>>>(nv, d_rp, d_ci, d_cur, d_adj, d_es);
    sort_dedup<<<(nv + 127) / 128, 128>>>(nv, d_off, d_adj, d_len);
    int m = 0;
    cudaMemcpy(&m, d_off + nv, sizeof(int), cudaMemcpyDeviceToHost);
"""
    if per_vertex:
        s += ("    int* d_tri;\n    cudaMalloc(&d_tri, (size_t)nv * sizeof(int));\n"
              "    cudaMemset(d_tri, 0, (size_t)nv * sizeof(int));\n")
    else:
        s += "    int* d_tri = 0;\n"
    return s


def _tail(per_vertex: bool) -> str:
    s = """    unsigned long long total = 0;
    cudaMemcpy(&total, d_total, sizeof(unsigned long long), cudaMemcpyDeviceToHost);
"""
    if per_vertex:
        s += ("    cudaMemcpy(tri, d_tri, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);\n"
              "    cudaFree(d_tri);\n")
    return s + """    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_cnt); cudaFree(d_off); cudaFree(d_cur);
    cudaFree(d_adj); cudaFree(d_es); cudaFree(d_len); cudaFree(d_total);
    (void)m;
    return (long long)total;
}
"""


def _head(graph: str, per_vertex: bool) -> str:
    return ("#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
            f"#define PER_VERTEX {1 if per_vertex else 0}\n\n"
            "__host__ __device__ __forceinline__ int nbr(int v, int c, int nv) {\n" + _nbr_body(graph) + "}\n\n"
            + BUILD_K)


# the merge intersection of two ascending lists; with PER_VERTEX each common element's count goes up by one
MERGE_D = """__device__ __forceinline__ int merge_count(const int* A, int la, const int* B, int lb, int* tri) {
    int i = 0, j = 0, c = 0;
    while (i < la && j < lb) {
        int x = A[i], y = B[j];
        if (x < y) ++i;
        else if (y < x) ++j;
        else {
            ++c; ++i; ++j;
#if PER_VERTEX
            atomicAdd(&tri[x], 1);
#endif
        }
    }
    (void)tri;
    return c;
}

"""

BSEARCH_D = """__device__ __forceinline__ bool contains(const int* A, int la, int x) {
    int lo = 0, hi = la;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (A[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo < la && A[lo] == x;
}

"""

# the count at the stored edge (a, b), a > b, goes to both ends
ENDS = """#if PER_VERTEX
        if (c) { atomicAdd(&tri[a], c); atomicAdd(&tri[b], c); }
#endif
"""


def _vertex_naive(h: str, pv: bool) -> str:
    return (h + MERGE_D + """__global__ void tc_vertex(int nv, const int* off, const int* len, const int* adj,
                          unsigned long long* total, int* tri) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= nv) return;
    const int* A = adj + off[a];
    int la = len[a];
    long long s = 0;
    for (int j = 0; j < la; ++j) {
        int b = A[j];
        int c = merge_count(A, la, adj + off[b], len[b], tri);
        s += c;
""" + ENDS + """    }
    if (s) atomicAdd(total, (unsigned long long)s);
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + "    tc_vertex<<<vb, 256>>>(nv, d_off, d_len, d_adj, d_total, d_tri);\n" + _tail(pv))


def _edge_merge_atomic(h: str, pv: bool) -> str:
    return (h + MERGE_D + """__global__ void tc_edge(int m, const int* es, const int* off, const int* len,
                        const int* adj, unsigned long long* total, int* tri) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= m) return;
    int a = es[p];
    if (p - off[a] >= len[a]) return;  // a repeat dropped by the dedup
    int b = adj[p];
    int c = merge_count(adj + off[a], len[a], adj + off[b], len[b], tri);
""" + ENDS + """    if (c) atomicAdd(total, (unsigned long long)c);
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + "    if (m > 0) tc_edge<<<(m + 255) / 256, 256>>>(m, d_es, d_off, d_len, d_adj, d_total, d_tri);\n"
            + _tail(pv))


def _edge_bsearch_block(h: str, pv: bool) -> str:
    return (h + BSEARCH_D
            + """__global__ void tc_edge_bs(int m, const int* __restrict__ es, const int* __restrict__ off,
                           const int* __restrict__ len, const int* __restrict__ adj,
                           unsigned long long* total, int* tri) {
    __shared__ unsigned long long part[128];
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int c = 0;
    if (p < m) {
        int a = es[p];
        if (p - off[a] < len[a]) {
            int b = adj[p];
            const int* A = adj + off[a];
            const int* B = adj + off[b];
            int la = len[a], lb = len[b];
            // walk the shorter list, binary-search the longer one
            const int* S = la <= lb ? A : B;
            const int* L = la <= lb ? B : A;
            int ls = la <= lb ? la : lb, ll = la <= lb ? lb : la;
            for (int i = 0; i < ls; ++i) {
                int x = S[i];
                if (contains(L, ll, x)) {
                    ++c;
#if PER_VERTEX
                    atomicAdd(&tri[x], 1);
#endif
                }
            }
""" + ENDS.replace("        ", "            ") + """        }
    }
    (void)tri;
    part[threadIdx.x] = (unsigned long long)c;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && part[0]) atomicAdd(total, part[0]);
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + "    if (m > 0) tc_edge_bs<<<(m + 127) / 128, 128>>>(m, d_es, d_off, d_len, d_adj, d_total, d_tri);\n"
            + _tail(pv))


def _warp_vertex(h: str, pv: bool) -> str:
    return (h + BSEARCH_D
            + """// a warp per vertex a: for each stored neighbour w, the lanes take w's list in strides and
// binary-search a's list
__global__ void tc_warp(int nv, const int* off, const int* len, const int* adj, unsigned long long* total,
                        int* tri) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= nv) return;  // whole warps leave together
    int a = warp;
    const int* A = adj + off[a];
    int la = len[a];
    long long s = 0;
    for (int j = 0; j < la; ++j) {
        int w = A[j];
        const int* W = adj + off[w];
        int lw = len[w];
        for (int k = lane; k < lw; k += 32) {
            int x = W[k];
            if (contains(A, la, x)) {
                ++s;
#if PER_VERTEX
                atomicAdd(&tri[x], 1);
                atomicAdd(&tri[w], 1);
#endif
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0 && s) {
        atomicAdd(total, (unsigned long long)s);
#if PER_VERTEX
        atomicAdd(&tri[a], (int)s);
#endif
    }
    (void)tri;
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + "    int wb = (int)(((long long)nv * 32 + 255) / 256);\n"
            + "    tc_warp<<<wb, 256>>>(nv, d_off, d_len, d_adj, d_total, d_tri);\n"
            + _tail(pv))


def _block_vertex_shared(h: str, pv: bool) -> str:
    return (h + f"#define CAP {SHARED_CAP}\n\n" + BSEARCH_D
            + """// a block per vertex a (grid-stride over vertices): a's list staged in shared memory when it
// fits; each thread takes stored neighbours w and binary-searches w's elements in a's list; a tree
// reduction, one atomic per block
__global__ void tc_block(int nv, const int* off, const int* len, const int* adj, unsigned long long* total,
                         int* tri) {
    __shared__ int sa[CAP];
    __shared__ unsigned long long part[64];
    unsigned long long acc = 0;
    for (int a = blockIdx.x; a < nv; a += gridDim.x) {
        int la = len[a];
        const int* A = adj + off[a];
        if (la <= CAP) {
            for (int k = threadIdx.x; k < la; k += blockDim.x) sa[k] = A[k];
            __syncthreads();
            A = sa;
        }
        int c = 0;
        for (int j = threadIdx.x; j < la; j += blockDim.x) {
            int w = A[j];
            const int* W = adj + off[w];
            int lw = len[w], cw = 0;
            for (int k = 0; k < lw; ++k) {
                int x = W[k];
                if (contains(A, la, x)) {
                    ++cw;
#if PER_VERTEX
                    atomicAdd(&tri[x], 1);
#endif
                }
            }
#if PER_VERTEX
            if (cw) { atomicAdd(&tri[w], cw); atomicAdd(&tri[a], cw); }
#endif
            c += cw;
        }
        acc += (unsigned long long)c;
        __syncthreads();  // sa is rewritten by the next vertex
    }
    (void)tri;
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && part[0]) atomicAdd(total, part[0]);
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + """    int nb = nv < 65536 ? nv : 65536;
    tc_block<<<nb, 64>>>(nv, d_off, d_len, d_adj, d_total, d_tri);
""" + _tail(pv))


def _edge_grid_warp(h: str, pv: bool) -> str:
    return (h + MERGE_D + """__global__ void tc_edge_gs(int m, const int* __restrict__ es, const int* __restrict__ off,
                           const int* __restrict__ len, const int* __restrict__ adj,
                           unsigned long long* total, int* tri) {
    unsigned long long s = 0;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < m; p += gridDim.x * blockDim.x) {
        int a = __ldg(es + p);
        int oa = __ldg(off + a), la = __ldg(len + a);
        if (p - oa >= la) continue;
        int b = __ldg(adj + p);
        int c = merge_count(adj + oa, la, adj + __ldg(off + b), __ldg(len + b), tri);
""" + ENDS + """        s += (unsigned long long)c;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0 && s) atomicAdd(total, s);
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + """    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int nb = sms * 4, need = (m + 511) / 512;
    if (nb > need) nb = need;
    if (nb < 1) nb = 1;
    tc_edge_gs<<<nb, 512>>>(m, d_es, d_off, d_len, d_adj, d_total, d_tri);
""" + _tail(pv))


def _single_block(h: str, pv: bool) -> str:
    return (h + MERGE_D + """__global__ void tc_one_block(int m, const int* es, const int* off, const int* len,
                             const int* adj, unsigned long long* total, int* tri) {
    __shared__ unsigned long long part[1024];
    unsigned long long s = 0;
    for (int p = threadIdx.x; p < m; p += blockDim.x) {
        int a = es[p];
        if (p - off[a] >= len[a]) continue;
        int b = adj[p];
        int c = merge_count(adj + off[a], len[a], adj + off[b], len[b], tri);
""" + ENDS + """        s += (unsigned long long)c;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) *total = part[0];
}

""" + _sig(pv) + " {\n" + _setup(pv)
            + "    tc_one_block<<<1, 1024>>>(m, d_es, d_off, d_len, d_adj, d_total, d_tri);\n" + _tail(pv))


def _reference(graph: str, pv: bool) -> str:
    tri_arg = ", int* tri" if pv else ""
    return ("#include <stdlib.h>\n\n"
            "static inline int nbr(int v, int c, int nv) {\n" + _nbr_body(graph) + "}\n\n"
            f"long long triangle_count(int nv, int ne, const int* row_ptr, const int* col_idx{tri_arg}) {{\n"
            + """    if (nv <= 0) return 0;
    int* off = (int*)malloc((size_t)(nv + 1) * sizeof(int));
    int* len = (int*)malloc((size_t)nv * sizeof(int));
    int* adj = (int*)malloc((size_t)(ne > 0 ? ne : 1) * sizeof(int));
    for (int v = 0; v < nv; ++v) len[v] = 0;
    /* orient: each edge stored at its larger endpoint */
    for (int v = 0; v < nv; ++v)
        for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {
            int u = nbr(v, col_idx[e], nv);
            if (u != v) len[u > v ? u : v]++;
        }
    off[0] = 0;
    for (int v = 0; v < nv; ++v) { off[v + 1] = off[v] + len[v]; len[v] = 0; }
    for (int v = 0; v < nv; ++v)
        for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {
            int u = nbr(v, col_idx[e], nv);
            if (u == v) continue;
            int a = u > v ? u : v, b = u > v ? v : u;
            adj[off[a] + len[a]++] = b;
        }
    /* sort each list, drop repeats */
    for (int v = 0; v < nv; ++v) {
        int* a = adj + off[v];
        int n = len[v];
        for (int i = 1; i < n; ++i) {
            int x = a[i], j = i - 1;
            while (j >= 0 && a[j] > x) { a[j + 1] = a[j]; --j; }
            a[j + 1] = x;
        }
        int m = 0;
        for (int i = 0; i < n; ++i) if (m == 0 || a[i] != a[m - 1]) a[m++] = a[i];
        len[v] = m;
    }
""" + ("    for (int v = 0; v < nv; ++v) tri[v] = 0;\n" if pv else "") + """    long long total = 0;
    for (int v = 0; v < nv; ++v) {
        const int* A = adj + off[v];
        int la = len[v];
        for (int j = 0; j < la; ++j) {
            int w = A[j];
            const int* B = adj + off[w];
            int lb = len[w], i = 0, k = 0, c = 0;
            while (i < la && k < lb) {
                if (A[i] < B[k]) ++i;
                else if (B[k] < A[i]) ++k;
                else {
""" + ("                    tri[A[i]]++;\n" if pv else "") + """                    ++c; ++i; ++k;
                }
            }
            total += c;
""" + ("            tri[v] += c;\n            tri[w] += c;\n" if pv else "") + """        }
    }
    free(off); free(len); free(adj);
    return total;
}
""")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    graph = GRAPHS[index % len(GRAPHS)]
    deg = DEGREES[(index // 4 + int(rng.integers(3))) % len(DEGREES)]
    per_vertex = (index // 4) % 2 == 1
    width = int(rng.integers(4, 25)) if graph == "band" else 0
    # raw edges at the timing size: the build (sort) and the intersections are both ~linear in them
    # (measured here: ~40-130 ms per million raw edges for the band, ~80-340 for the others)
    ne_time = int((1.0e6 if graph == "band" else 5.5e5) * (0.8 + 0.4 * float(rng.random())))
    nv_time = int(ne_time / deg) + int(rng.integers(1, 97))
    nv1 = 3000 + int(rng.integers(3000))
    high = str(width) if graph == "band" else "nv"
    h = _head(graph, per_vertex)
    pv_text = (" Also tri[v] = the number of triangles through vertex v." if per_vertex else "")
    task = {
        "function_name": "triangle_count",
        "description": (f"Count the triangles of an undirected simple graph ({deg:g} raw edges per vertex): edge e "
                        "of row v of the CSR (row_ptr, col_idx) joins v and "
                        f"{_nbr_text(graph, width)} for c = col_idx[e]; self loops are ignored and repeated pairs "
                        "count once. The lists are neither sorted nor symmetric: build the oriented form (each "
                        "edge stored once at its larger endpoint, sorted, deduplicated) inside the call. Return the "
                        "number of triangles." + pv_text),
        "returns": "long long",
        "args": [
            {"name": "nv", "role": "scalar", "ctype": "int"},
            {"name": "ne", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "nv + 1",
             "dist": {"kind": "offsets", "high": "ne"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 0, "high": high}},
        ] + ([{"name": "tri", "role": "out", "ctype": "int", "length": "nv"}] if per_vertex else []),
        "size_configs": [{"nv": 1000, "ne": int(1000 * deg)}, {"nv": nv1, "ne": int(nv1 * deg)},
                         {"nv": 77, "ne": 300}, {"nv": 5, "ne": 12}, {"nv": nv_time, "ne": ne_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(graph, per_vertex),
        "tags": ["graph", "irregular", "integer"],
    }
    pv = per_vertex
    variants = [
        Variant("vertex_merge_naive", ("naive", "thread_per_row", "atomics", "branch_divergent", "block_256",
                                       "pageable"), _vertex_naive(h, pv)),
        Variant("edge_merge_atomic", ("atomics", "device_resident", "block_256", "pageable"),
                _edge_merge_atomic(h, pv)),
        Variant("edge_bsearch_block_reduce", ("tree_reduction", "two_level", "readonly_cache", "block_128",
                                              "pageable"), _edge_bsearch_block(h, pv)),
        Variant("warp_per_vertex", ("block_per_row", "warp_shuffle", "coalesced", "block_256", "pageable"),
                _warp_vertex(h, pv)),
        Variant("block_per_vertex_shared", ("block_per_row", "shared_tiling", "tree_reduction", "block_64",
                                            "pageable"), _block_vertex_shared(h, pv)),
        Variant("edge_grid_stride_warp", ("grid_stride", "warp_shuffle", "atomics", "readonly_cache", "block_512",
                                          "pageable"), _edge_grid_warp(h, pv)),
        Variant("single_block", ("single_thread", "tree_reduction", "block_1024", "pageable"), _single_block(h, pv)),
    ]
    params = {"graph": graph, "band_width": width, "edges_per_vertex": deg, "per_vertex": per_vertex,
              "nv_time": nv_time, "ne_time": ne_time}
    return GeneratedTask(task, tuple(variants), params)


FAMILY = Family(
    name="triangle_count_csr",
    description="Triangle count (and per-vertex counts) of an undirected graph built and oriented from a random CSR",
    generate=generate,
    n_tasks=50,
    tags=("graph", "integer"),
)
