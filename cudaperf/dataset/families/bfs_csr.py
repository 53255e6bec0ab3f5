"""Breadth-first search levels from 16 consecutive source vertices on a random directed graph in CSR form.

``level[v]`` is the number of edges on a shortest path from ``src`` to ``v`` (-1 when unreachable): unique, so
the exact integer output does not depend on the visiting order. Parameters: the vertex count and the average
degree (edges per vertex). Row pointers are random non-decreasing offsets, column indices uniform.
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

HEAD = "#include <cuda_runtime.h>\n#include <stdlib.h>\n\n"
SIG = ('extern "C" void bfs_levels(int nv, int ne, const int* row_ptr, const int* col_idx, int src,'
       ' int* level)')
INIT_K = ("__global__ void bfs_init(int nv, int src, int* level) {\n"
          "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "    int ns = nv < 16 ? nv : 16;\n"
          "    if (v < nv) level[v] = ((v - src + nv) % nv < ns) ? 0 : -1;\n}\n\n")
SETUP = ("    if (nv <= 0) return;\n"
         "    int *d_rp, *d_ci, *d_level;\n"
         "    cudaMalloc(&d_rp, (size_t)(nv + 1) * sizeof(int));\n"
         "    cudaMalloc(&d_ci, (size_t)(ne > 0 ? ne : 1) * sizeof(int));\n"
         "    cudaMalloc(&d_level, (size_t)nv * sizeof(int));\n"
         "    cudaMemcpy(d_rp, row_ptr, (size_t)(nv + 1) * sizeof(int), cudaMemcpyHostToDevice);\n"
         "    if (ne > 0) cudaMemcpy(d_ci, col_idx, (size_t)ne * sizeof(int), cudaMemcpyHostToDevice);\n"
         "    bfs_init<<<(nv + 255) / 256, 256>>>(nv, src, d_level);\n")
TAIL = ("    cudaMemcpy(level, d_level, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);\n"
        "    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_level);\n}\n")

TOPDOWN_K = ("__global__ void bfs_step(int nv, int cur, const int* rp, const int* ci, int* level, int* flag) {\n"
             "    int v = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (v >= nv || level[v] != cur) return;\n"
             "    for (int e = rp[v]; e < rp[v + 1]; ++e) {\n"
             "        int u = ci[e];\n"
             "        if (level[u] == -1) { level[u] = cur + 1; *flag = 1; }\n"
             "    }\n}\n\n")


def _topdown_flag(block: int) -> str:
    return (HEAD + INIT_K + TOPDOWN_K + SIG + " {\n" + SETUP
            + "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"
            "    for (int cur = 0; ; ++cur) {\n"
            "        int h = 0;\n"
            "        cudaMemset(d_flag, 0, sizeof(int));\n"
            f"        bfs_step<<<(nv + {block - 1}) / {block}, {block}>>>(nv, cur, d_rp, d_ci, d_level, d_flag);\n"
            "        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        if (!h) break;\n    }\n"
            "    cudaFree(d_flag);\n" + TAIL)


def _grid_stride() -> str:
    return (HEAD + INIT_K
            + "__global__ void bfs_step(int nv, int cur, const int* __restrict__ rp, const int* __restrict__ ci,"
            " int* level, int* flag) {\n"
            "    int found = 0;\n"
            "    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += gridDim.x * blockDim.x) {\n"
            "        if (level[v] != cur) continue;\n"
            "        int e1 = __ldg(rp + v + 1);\n"
            "        for (int e = __ldg(rp + v); e < e1; ++e) {\n"
            "            int u = __ldg(ci + e);\n"
            "            if (level[u] == -1) { level[u] = cur + 1; found = 1; }\n"
            "        }\n    }\n"
            "    if (found) *flag = 1;\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
            "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"
            "    for (int cur = 0; ; ++cur) {\n"
            "        int h = 0;\n"
            "        cudaMemset(d_flag, 0, sizeof(int));\n"
            "        bfs_step<<<sms * 4, 512>>>(nv, cur, d_rp, d_ci, d_level, d_flag);\n"
            "        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        if (!h) break;\n    }\n"
            "    cudaFree(d_flag);\n" + TAIL)


def _warp_per_vertex() -> str:
    return (HEAD + INIT_K
            + "__global__ void bfs_step(int nv, int cur, const int* rp, const int* ci, int* level, int* flag) {\n"
            "    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    long long v = t >> 5;\n"
            "    int lane = threadIdx.x & 31;\n"
            "    if (v >= nv || level[v] != cur) return;\n"
            "    int e1 = rp[v + 1];\n"
            "    for (int e = rp[v] + lane; e < e1; e += 32) {\n"
            "        int u = ci[e];\n"
            "        if (level[u] == -1) { level[u] = cur + 1; *flag = 1; }\n"
            "    }\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"
            "    unsigned blocks = (unsigned)(((long long)nv * 32 + 255) / 256);\n"
            "    for (int cur = 0; ; ++cur) {\n"
            "        int h = 0;\n"
            "        cudaMemset(d_flag, 0, sizeof(int));\n"
            "        bfs_step<<<blocks, 256>>>(nv, cur, d_rp, d_ci, d_level, d_flag);\n"
            "        cudaMemcpy(&h, d_flag, sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        if (!h) break;\n    }\n"
            "    cudaFree(d_flag);\n" + TAIL)


QUEUE_HOST = ("    int *q_in, *q_out, *d_tail;\n"
              "    cudaMalloc(&q_in, (size_t)nv * sizeof(int)); cudaMalloc(&q_out, (size_t)nv * sizeof(int));\n"
              "    cudaMalloc(&d_tail, sizeof(int));\n"
              "    int n_in = nv < 16 ? nv : 16;\n"
              "    int srcs[16];\n"
              "    for (int k = 0; k < n_in; ++k) srcs[k] = (src + k) % nv;\n"
              "    cudaMemcpy(q_in, srcs, (size_t)n_in * sizeof(int), cudaMemcpyHostToDevice);\n"
              "    for (int cur = 0; n_in > 0; ++cur) {\n"
              "        cudaMemset(d_tail, 0, sizeof(int));\n"
              "        bfs_expand<<<(n_in + {B1}) / {B}, {B}>>>(n_in, cur, q_in, d_rp, d_ci, d_level, q_out, d_tail);\n"
              "        cudaMemcpy(&n_in, d_tail, sizeof(int), cudaMemcpyDeviceToHost);\n"
              "        int* t = q_in; q_in = q_out; q_out = t;\n"
              "    }\n"
              "    cudaFree(q_in); cudaFree(q_out); cudaFree(d_tail);\n")


def _queue_atomics() -> str:
    return (HEAD + INIT_K
            + "__global__ void bfs_expand(int n_in, int cur, const int* q_in, const int* rp, const int* ci,"
            " int* level, int* q_out, int* tail) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i >= n_in) return;\n"
            "    int v = q_in[i];\n"
            "    for (int e = rp[v]; e < rp[v + 1]; ++e) {\n"
            "        int u = ci[e];\n"
            "        if (level[u] == -1 && atomicCAS(&level[u], -1, cur + 1) == -1) q_out[atomicAdd(tail, 1)] = u;\n"
            "    }\n}\n\n"
            + SIG + " {\n" + SETUP + QUEUE_HOST.replace("{B1}", "255").replace("{B}", "256") + TAIL)


def _queue_block_local() -> str:
    return (HEAD + INIT_K
            + "__global__ void bfs_expand(int n_in, int cur, const int* q_in, const int* rp, const int* ci,"
            " int* level, int* q_out, int* tail) {\n"
            "    __shared__ int sq[2048];\n"
            "    __shared__ int scount, sbase;\n"
            "    if (threadIdx.x == 0) scount = 0;\n"
            "    __syncthreads();\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n_in) {\n"
            "        int v = q_in[i];\n"
            "        for (int e = rp[v]; e < rp[v + 1]; ++e) {\n"
            "            int u = ci[e];\n"
            "            if (level[u] == -1 && atomicCAS(&level[u], -1, cur + 1) == -1) {\n"
            "                int p = atomicAdd(&scount, 1);\n"
            "                if (p < 2048) sq[p] = u; else q_out[atomicAdd(tail, 1)] = u;\n"
            "            }\n        }\n    }\n"
            "    __syncthreads();\n"
            "    int cnt = scount < 2048 ? scount : 2048;\n"
            "    if (threadIdx.x == 0) sbase = atomicAdd(tail, cnt);\n"
            "    __syncthreads();\n"
            "    for (int k = threadIdx.x; k < cnt; k += blockDim.x) q_out[sbase + k] = sq[k];\n}\n\n"
            + SIG + " {\n" + SETUP + QUEUE_HOST.replace("{B1}", "127").replace("{B}", "128") + TAIL)


def _host_level_copy() -> str:
    return (HEAD + INIT_K + TOPDOWN_K + SIG + " {\n" + SETUP
            + "    int* d_flag; cudaMalloc(&d_flag, sizeof(int));\n"
            "    int* h = (int*)malloc((size_t)nv * sizeof(int));\n"
            "    for (int cur = 0; ; ++cur) {\n"
            "        bfs_step<<<(nv + 127) / 128, 128>>>(nv, cur, d_rp, d_ci, d_level, d_flag);\n"
            "        cudaMemcpy(h, d_level, (size_t)nv * sizeof(int), cudaMemcpyDeviceToHost);\n"
            "        int any = 0;\n"
            "        for (int v = 0; v < nv; ++v) if (h[v] == cur + 1) { any = 1; break; }\n"
            "        if (!any) break;\n    }\n"
            "    free(h);\n    cudaFree(d_flag);\n" + TAIL)


def _single_block() -> str:
    return (HEAD + INIT_K
            + "__global__ void bfs_block(int nv, const int* rp, const int* ci, int* level) {\n"
            "    __shared__ int changed;\n"
            "    for (int cur = 0; ; ++cur) {\n"
            "        if (threadIdx.x == 0) changed = 0;\n"
            "        __syncthreads();\n"
            "        int found = 0;\n"
            "        for (int v = threadIdx.x; v < nv; v += blockDim.x) {\n"
            "            if (level[v] != cur) continue;\n"
            "            for (int e = rp[v]; e < rp[v + 1]; ++e) {\n"
            "                int u = ci[e];\n"
            "                if (level[u] == -1) { level[u] = cur + 1; found = 1; }\n"
            "            }\n        }\n"
            "        if (found) changed = 1;\n"
            "        __syncthreads();\n"
            "        int c = changed;\n"
            "        __syncthreads();\n"
            "        if (!c) break;\n    }\n}\n\n"
            + SIG + " {\n" + SETUP
            + "    bfs_block<<<1, 1024>>>(nv, d_rp, d_ci, d_level);\n" + TAIL)


def _reference() -> str:
    return ("#include <stdlib.h>\n\n"
            "void bfs_levels(int nv, int ne, const int* row_ptr, const int* col_idx, int src, int* level) {\n"
            "    (void)ne;\n"
            "    if (nv <= 0) return;\n"
            "    for (int v = 0; v < nv; ++v) level[v] = -1;\n"
            "    int* q = (int*)malloc((size_t)nv * sizeof(int));\n"
            "    int head = 0, tail = 0;\n"
            "    int ns = nv < 16 ? nv : 16;\n"
            "    for (int k = 0; k < ns; ++k) { int s = (src + k) % nv; level[s] = 0; q[tail++] = s; }\n"
            "    while (head < tail) {\n"
            "        int v = q[head++];\n"
            "        for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {\n"
            "            int u = col_idx[e];\n"
            "            if (level[u] < 0) { level[u] = level[v] + 1; q[tail++] = u; }\n"
            "        }\n    }\n"
            "    free(q);\n}\n")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    deg = [3.0, 4.0, 5.0, 6.0, 8.0, 12.0, 16.0][(index + int(rng.integers(3))) % 7]
    # random accesses per edge dominate the reference: about 2.5e6 edges at the timing size
    ne_time = int(2.5e6 * (0.8 + 0.4 * float(rng.random())))
    nv_time = int(ne_time / deg) + int(rng.integers(1, 99))
    nv1 = 50000 + int(rng.integers(1000))
    task = {
        "function_name": "bfs_levels",
        "description": (f"Multi-source BFS levels from the sources src, src+1, .., src+15 (mod nv; all nv when nv < 16) on a random directed graph in CSR form (average out-degree {deg:g}): "
                        "level[v] = hop distance from the nearest source, -1 when unreachable."),
        "returns": "void",
        "args": [
            {"name": "nv", "role": "scalar", "ctype": "int"},
            {"name": "ne", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "nv + 1",
             "dist": {"kind": "offsets", "high": "ne"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "ne",
             "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "src", "role": "scalar", "ctype": "int", "dist": {"kind": "randint", "low": 0, "high": "nv"}},
            {"name": "level", "role": "out", "ctype": "int", "length": "nv"},
        ],
        "size_configs": [{"nv": 1000, "ne": int(1000 * deg)}, {"nv": nv1, "ne": int(nv1 * deg)},
                         {"nv": 77, "ne": 150}, {"nv": nv_time, "ne": ne_time}],
        "tolerance": {"rtol": 0.0, "atol": 0.0},
        "reference_c": _reference(),
        "tags": ["graph", "irregular", "integer"],
    }
    variants = (
        Variant("topdown_flag_b256", ("naive", "many_launches", "device_resident", "branch_divergent", "block_256",
                                      "pageable"), _topdown_flag(256)),
        Variant("topdown_flag_b32", ("naive", "many_launches", "device_resident", "block_32", "pageable"),
                _topdown_flag(32)),
        Variant("topdown_grid_stride", ("grid_stride", "many_launches", "readonly_cache", "block_512", "pageable"),
                _grid_stride()),
        Variant("warp_per_vertex", ("block_per_row", "coalesced", "many_launches", "block_256", "pageable"),
                _warp_per_vertex()),
        Variant("frontier_queue", ("atomics", "many_launches", "device_resident", "block_256", "pageable"),
                _queue_atomics()),
        Variant("frontier_queue_block_local", ("atomics", "two_level", "shared_tiling", "many_launches",
                                               "block_128", "pageable"), _queue_block_local()),
        Variant("host_level_copy", ("naive", "in_loop_transfers", "extra_transfers", "host_compute", "block_128",
                                    "pageable"), _host_level_copy()),
        Variant("single_block", ("single_thread", "block_1024", "pageable"), _single_block()),
    )
    return GeneratedTask(task, variants, {"avg_degree": deg, "nv_time": nv_time, "ne_time": ne_time})


FAMILY = Family(
    name="bfs_csr",
    description="BFS levels from a source on a random directed CSR graph (level-synchronous GPU variants)",
    generate=generate,
    n_tasks=50,
    tags=("graph", "integer"),
)
