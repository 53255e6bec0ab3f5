"""Shared pieces of the CSR graph families (sssp_bellman_ford, label_prop_components): skewing maps and the
device-side transpose (in-edge lists) that pull variants build.

Graphs come from the harness's input distributions: random row-pointer cuts (``offsets``, geometric out-degrees)
and uniform column indices. The edge ``e`` of row ``v`` goes to ``nbr(col_idx[e], nv)``, a fixed skewing map of
the drawn index into ``[0, nv)``: identity (uniform), quadratic ``c*c/nv`` or cubic ``c*c/nv*c/nv`` (low vertex
ids become hubs: power-law-like in-degree skew).
"""

from __future__ import annotations

SKEWS = ("identity", "quadratic", "cubic")


def nbr_body(skew: str) -> str:
    if skew == "identity":
        return "    (void)nv;\n    return c;\n"
    if skew == "quadratic":
        return "    return (int)(((long long)c * c) / nv);\n"
    return "    return (int)((((long long)c * c) / nv) * c / nv);\n"


def nbr_text(skew: str) -> str:
    return {"identity": "nbr(c) = c", "quadratic": "nbr(c) = (int)((long long)c * c / nv)",
            "cubic": "nbr(c) = (int)(((long long)c * c / nv) * c / nv)"}[skew]


def nbr_device(skew: str) -> str:
    return "__host__ __device__ __forceinline__ int nbr(int c, int nv) {\n" + nbr_body(skew) + "}\n\n"


def nbr_c(skew: str) -> str:
    return "static inline int nbr(int c, int nv) {\n" + nbr_body(skew) + "}\n\n"


# every edge's source vertex (thread per vertex writes its row)
EDGE_SRC_K = """__global__ void edge_src(int nv, const int* rp, int* es) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= nv) return;
    for (int e = rp[v]; e < rp[v + 1]; ++e) es[e] = v;
}

"""

# in-degree count, then (after a host exclusive scan into off/cur) the in-edge lists; the order within a list
# depends on the atomics, which the min-based relaxations do not see
TRANSPOSE_K = """__global__ void in_count(int ne, int nv, const int* ci, int* cnt) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < ne) atomicAdd(&cnt[nbr(ci[e], nv)], 1);
}

__global__ void in_fill(int ne, int nv, const int* ci, const int* es, int* cur, int* isrc) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int p = atomicAdd(&cur[nbr(ci[e], nv)], 1);
    isrc[p] = e;  // the edge id: its source is es[e], its weight w[e]
}

"""

# host part of the transpose: d_cnt (nv ints, zeroed and counted) -> d_off (nv + 1 offsets), d_cur (a copy)
TRANSPOSE_HOST = """    int *d_cnt, *d_off, *d_cur, *d_isrc;
    cudaMalloc(&d_cnt, (size_t)nv * sizeof(int));
    cudaMalloc(&d_off, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_cur, (size_t)(nv + 1) * sizeof(int));
    cudaMalloc(&d_isrc, (size_t)(ne > 0 ? ne : 1) * sizeof(int));
    cudaMemset(d_cnt, 0, (size_t)nv * sizeof(int));
    if (ne > 0) in_count<<<(ne + 255) / 256, 256>>>(ne, nv, d_ci, d_cnt);
    {
        int* h = (int*)malloc((size_t)(nv + 1) * sizeof(int));
        cudaMemcpy(h, d_cnt, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);
        int run = 0;
        for (int v = 0; v < nv; ++v) { int c = h[v]; h[v] = run; run += c; }
        h[nv] = run;
        cudaMemcpy(d_off, h, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
        cudaMemcpy(d_cur, h, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);
        free(h);
    }
    if (ne > 0) in_fill<<<(ne + 255) / 256, 256>>>(ne, nv, d_ci, d_es, d_cur, d_isrc);
"""
TRANSPOSE_FREE = "    cudaFree(d_cnt); cudaFree(d_off); cudaFree(d_cur); cudaFree(d_isrc);\n"
