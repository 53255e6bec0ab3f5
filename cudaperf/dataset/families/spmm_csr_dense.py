"""Sparse-times-dense matrix product: ``C = epi(A B)`` with A an m x ncols CSR matrix and B a dense ncols x K
row-major matrix of K = 4..64 columns (C is m x K, row-major).

Parameters: the element type (float/double), K, the average row length (4..32; row lengths vary since the row
pointers are random cuts), the epilogue (none, ReLU, a scale), the shape (ncols = m/2, m or 2m) and the size.
Values of A are in [0, 1), B in [-1, 1): every summation order (warp lanes, atomics) stays within the tolerance,
which is scaled with the average row length (float: 1e-4 relative plus 5e-6 per average entry absolute).
"""

from __future__ import annotations

import numpy as np

from cudaperf.dataset.family import Family, GeneratedTask, Variant

KS = [4, 8, 16, 32, 64, 12, 24, 48]
ROW_LENS = [8, 4, 16, 32, 6, 12, 24]
EPILOGUES = ["none", "relu", "scale"]
SHAPES = [1.0, 0.5, 2.0]


class Spec:
    def __init__(self, t: str, k: int, epi: str, alpha: float):
        self.t, self.k, self.epi, self.alpha = t, k, epi, alpha

    @property
    def fn(self) -> str:
        return f"spmm_{self.t}_k{self.k}"

    def epi_macro(self) -> str:
        if self.epi == "relu":
            return "#define EPI(x) ((x) > (real)0 ? (x) : (real)0)\n"
        if self.epi == "scale":
            return f"#define EPI(x) ((real){self.alpha!r} * (x))\n"
        return "#define EPI(x) (x)\n"

    def epi_text(self) -> str:
        return {"none": "C = A B", "relu": "C = max(A B, 0)", "scale": f"C = {self.alpha!r} * (A B)"}[self.epi]

    def args(self) -> str:
        return (f"int m, int ncols, int nnz, const int* row_ptr, const int* col_idx, const {self.t}* vals, "
                f"const {self.t}* B, {self.t}* C")

    @property
    def sig(self) -> str:
        return f'extern "C" void {self.fn}({self.args()})'

    def head(self) -> str:
        return ("#include <cuda_runtime.h>\n#include <string.h>\n\n"
                f"typedef {self.t} real;\n#define K {self.k}\n" + self.epi_macro() + "\n")


SETUP = """    if (m <= 0) return;
    size_t bb = (size_t)(ncols > 0 ? ncols : 1) * K * sizeof(real), cb = (size_t)m * K * sizeof(real);
    int *d_rp, *d_ci;
    real *d_v, *d_b, *d_c;
    cudaMalloc(&d_rp, (size_t)(m + 1) * sizeof(int));
    cudaMalloc(&d_ci, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int));
    cudaMalloc(&d_v, (size_t)(nnz > 0 ? nnz : 1) * sizeof(real));
    cudaMalloc(&d_b, bb); cudaMalloc(&d_c, cb);
    cudaMemcpy(d_rp, row_ptr, (size_t)(m + 1) * sizeof(int), cudaMemcpyHostToDevice);
    if (nnz > 0) {
        cudaMemcpy(d_ci, col_idx, (size_t)nnz * sizeof(int), cudaMemcpyHostToDevice);
        cudaMemcpy(d_v, vals, (size_t)nnz * sizeof(real), cudaMemcpyHostToDevice);
    }
    if (ncols > 0) cudaMemcpy(d_b, B, (size_t)ncols * K * sizeof(real), cudaMemcpyHostToDevice);
"""
TAIL = """    cudaMemcpy(C, d_c, cb, cudaMemcpyDeviceToHost);
    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_v); cudaFree(d_b); cudaFree(d_c);
}
"""


def _thread_per_elem(s: Spec) -> str:
    return (s.head()
            + """__global__ void spmm_elem(int m, const int* rp, const int* ci, const real* v, const real* b, real* c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)m * K) return;
    int row = (int)(i / K), k = (int)(i % K);
    real acc = (real)0;
    for (int p = rp[row]; p < rp[row + 1]; ++p) acc += v[p] * b[(size_t)ci[p] * K + k];
    c[i] = EPI(acc);
}

""" + s.sig + " {\n" + SETUP
            + "    spmm_elem<<<(unsigned)(((long long)m * K + 255) / 256), 256>>>(m, d_rp, d_ci, d_v, d_b, d_c);\n"
            + TAIL)


ROW_REGS_K = """__global__ void spmm_row(int m, const int* rp, const int* ci, const real* v, const real* b, real* c) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m) return;
    real acc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = (real)0;
    for (int p = rp[row]; p < rp[row + 1]; ++p) {
        real a = v[p];
        const real* br = b + (size_t)ci[p] * K;
#pragma unroll
        for (int k = 0; k < K; ++k) acc[k] += a * br[k];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) c[(size_t)row * K + k] = EPI(acc[k]);
}

"""


def _thread_per_row(s: Spec) -> str:
    return (s.head() + ROW_REGS_K + s.sig + " {\n" + SETUP
            + "    spmm_row<<<(m + 127) / 128, 128>>>(m, d_rp, d_ci, d_v, d_b, d_c);\n" + TAIL)


def _pinned_row(s: Spec) -> str:
    return (s.head() + ROW_REGS_K + s.sig + """ {
    if (m <= 0) return;
    size_t bb = (size_t)(ncols > 0 ? ncols : 1) * K * sizeof(real), cb = (size_t)m * K * sizeof(real);
    size_t ib = (size_t)(nnz > 0 ? nnz : 1) * sizeof(int), vb = (size_t)(nnz > 0 ? nnz : 1) * sizeof(real);
    int *d_rp, *d_ci, *h_rp, *h_ci;
    real *d_v, *d_b, *d_c, *h_v, *h_b, *h_c;
    cudaStream_t st; cudaStreamCreate(&st);
    cudaMalloc(&d_rp, (size_t)(m + 1) * sizeof(int)); cudaMalloc(&d_ci, ib);
    cudaMalloc(&d_v, vb); cudaMalloc(&d_b, bb); cudaMalloc(&d_c, cb);
    cudaMallocHost(&h_rp, (size_t)(m + 1) * sizeof(int)); cudaMallocHost(&h_ci, ib);
    cudaMallocHost(&h_v, vb); cudaMallocHost(&h_b, bb); cudaMallocHost(&h_c, cb);
    memcpy(h_rp, row_ptr, (size_t)(m + 1) * sizeof(int));
    if (nnz > 0) { memcpy(h_ci, col_idx, (size_t)nnz * sizeof(int)); memcpy(h_v, vals, (size_t)nnz * sizeof(real)); }
    if (ncols > 0) memcpy(h_b, B, (size_t)ncols * K * sizeof(real));
    cudaMemcpyAsync(d_rp, h_rp, (size_t)(m + 1) * sizeof(int), cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(d_ci, h_ci, ib, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(d_v, h_v, vb, cudaMemcpyHostToDevice, st);
    cudaMemcpyAsync(d_b, h_b, bb, cudaMemcpyHostToDevice, st);
    spmm_row<<<(m + 63) / 64, 64, 0, st>>>(m, d_rp, d_ci, d_v, d_b, d_c);
    cudaMemcpyAsync(h_c, d_c, cb, cudaMemcpyDeviceToHost, st);
    cudaStreamSynchronize(st);
    memcpy(C, h_c, cb);
    cudaFree(d_rp); cudaFree(d_ci); cudaFree(d_v); cudaFree(d_b); cudaFree(d_c);
    cudaFreeHost(h_rp); cudaFreeHost(h_ci); cudaFreeHost(h_v); cudaFreeHost(h_b); cudaFreeHost(h_c);
    cudaStreamDestroy(st);
}
""")


def _warp_broadcast(s: Spec) -> str:
    nk = (s.k + 31) // 32
    return (s.head() + f"#define NK {nk}\n\n"
            + """__global__ void spmm_warp(int m, const int* __restrict__ rp, const int* __restrict__ ci,
                          const real* __restrict__ v, const real* __restrict__ b, real* c) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int row = (int)(t >> 5), lane = threadIdx.x & 31;
    if (row >= m) return;  // the whole warp shares the row
    real acc[NK];
#pragma unroll
    for (int j = 0; j < NK; ++j) acc[j] = (real)0;
    int p0 = rp[row], p1 = rp[row + 1];
    for (int base = p0; base < p1; base += 32) {
        int p = base + lane;
        int col = 0; real a = (real)0;
        if (p < p1) { col = ci[p]; a = v[p]; }   // one coalesced load of 32 entries
        int cnt = p1 - base < 32 ? p1 - base : 32;
        for (int j = 0; j < cnt; ++j) {
            int cj = __shfl_sync(0xffffffffu, col, j);
            real aj = __shfl_sync(0xffffffffu, a, j);
            const real* br = b + (size_t)cj * K;
#pragma unroll
            for (int q = 0; q < NK; ++q) {
                int k = lane + 32 * q;
                if (k < K) acc[q] += aj * br[k];
            }
        }
    }
#pragma unroll
    for (int q = 0; q < NK; ++q) {
        int k = lane + 32 * q;
        if (k < K) c[(size_t)row * K + k] = EPI(acc[q]);
    }
}

""" + s.sig + " {\n" + SETUP
            + "    spmm_warp<<<(unsigned)(((long long)m * 32 + 255) / 256), 256>>>(m, d_rp, d_ci, d_v, d_b, d_c);\n"
            + TAIL)


def _shared_stage(s: Spec) -> str:
    rb = 128 // s.k
    return (s.head() + f"#define RB {rb}\n#define CH 32\n\n"
            + """// a block of 128 threads: RB rows, K threads per row (thread (r, k) owns C[row][k]);
// each row's entries are staged through shared memory CH at a time
__global__ void spmm_stage(int m, const int* rp, const int* ci, const real* v, const real* b, real* c) {
    __shared__ int s_col[RB * CH];
    __shared__ real s_val[RB * CH];
    __shared__ int s_len;
    int tid = threadIdx.x, r = tid / K, k = tid % K;
    int row = blockIdx.x * RB + r;
    int active = (r < RB) && (row < m);
    if (tid == 0) s_len = 0;
    __syncthreads();
    int lo = 0, n = 0;
    if (active) { lo = rp[row]; n = rp[row + 1] - lo; if (k == 0) atomicMax(&s_len, n); }
    __syncthreads();
    int len = s_len;
    real acc = (real)0;
    for (int c0 = 0; c0 < len; c0 += CH) {
        for (int i = tid; i < RB * CH; i += blockDim.x) {
            int rr = i / CH, j = i % CH, grow = blockIdx.x * RB + rr;
            if (grow < m) {
                int p = rp[grow] + c0 + j;
                if (p < rp[grow + 1]) { s_col[i] = ci[p]; s_val[i] = v[p]; }
            }
        }
        __syncthreads();
        if (active) {
            int cnt = n - c0 < CH ? n - c0 : CH;
            for (int j = 0; j < cnt; ++j) acc += s_val[r * CH + j] * b[(size_t)s_col[r * CH + j] * K + k];
        }
        __syncthreads();
    }
    if (active) c[(size_t)row * K + k] = EPI(acc);
}

""" + s.sig + " {\n" + SETUP
            + "    spmm_stage<<<(m + RB - 1) / RB, 128>>>(m, d_rp, d_ci, d_v, d_b, d_c);\n" + TAIL)


def _vectorized(s: Spec) -> str:
    vt, w = ("float4", 4) if s.t == "float" else ("double2", 2)
    comps = "xyzw"[:w]
    acc_init = "; ".join(f"acc.{c} = (real)0" for c in comps)
    fma = "\n".join(f"            acc.{c} += a * x.{c};" for c in comps)
    epi = "; ".join(f"acc.{c} = EPI(acc.{c})" for c in comps)
    return (s.head() + f"#define W {w}\ntypedef {vt} vec;\n\n"
            + """// thread per (row, W consecutive columns): vector loads of B's row slice and vector stores of C
__global__ void spmm_vec(int m, const int* __restrict__ rp, const int* __restrict__ ci,
                         const real* __restrict__ v, const vec* __restrict__ b, vec* c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)m * (K / W)) return;
    int row = (int)(i / (K / W)), g = (int)(i % (K / W));
    vec acc; """ + acc_init + """;
    for (int p = rp[row]; p < rp[row + 1]; ++p) {
        real a = v[p];
        vec x = b[(size_t)ci[p] * (K / W) + g];
""" + fma + """
    }
    """ + epi + """;
    c[i] = acc;
}

""" + s.sig + " {\n" + SETUP
            + "    long long nt = (long long)m * (K / W);\n"
            "    spmm_vec<<<(unsigned)((nt + 255) / 256), 256>>>(m, d_rp, d_ci, d_v, (const vec*)d_b, (vec*)d_c);\n"
            + TAIL)


def _atomic_nnz(s: Spec) -> str:
    return (s.head()
            + """__global__ void row_of(int m, const int* rp, int* ri) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < m) for (int p = rp[r]; p < rp[r + 1]; ++p) ri[p] = r;
}

// thread per (nonzero, column): the products are added into C with atomics (any order: within the tolerance)
__global__ void spmm_scatter(int nnz, const int* ri, const int* ci, const real* v, const real* b, real* c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)nnz * K) return;
    int p = (int)(i / K), k = (int)(i % K);
    atomicAdd(&c[(size_t)ri[p] * K + k], v[p] * b[(size_t)ci[p] * K + k]);
}

__global__ void spmm_epi(long long n, real* c) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = EPI(c[i]);
}

""" + s.sig + " {\n" + SETUP
            + """    int* d_ri; cudaMalloc(&d_ri, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int));
    cudaMemset(d_c, 0, cb);
    row_of<<<(m + 255) / 256, 256>>>(m, d_rp, d_ri);
    if (nnz > 0)
        spmm_scatter<<<(unsigned)(((long long)nnz * K + 255) / 256), 256>>>(nnz, d_ri, d_ci, d_v, d_b, d_c);
    spmm_epi<<<(unsigned)(((long long)m * K + 255) / 256), 256>>>((long long)m * K, d_c);
    cudaFree(d_ri);
""" + TAIL)


def _reference(s: Spec) -> str:
    t = s.t
    return (f"#include <stdlib.h>\n\ntypedef {t} real;\n#define K {s.k}\n" + s.epi_macro()
            + f"\nvoid {s.fn}({s.args()}) {{\n"
            + """    (void)ncols; (void)nnz;
    real acc[K];
    for (int i = 0; i < m; ++i) {
        for (int k = 0; k < K; ++k) acc[k] = (real)0;
        for (int p = row_ptr[i]; p < row_ptr[i + 1]; ++p) {
            real a = vals[p];
            const real* br = B + (size_t)col_idx[p] * K;
            for (int k = 0; k < K; ++k) acc[k] += a * br[k];
        }
        for (int k = 0; k < K; ++k) C[(size_t)i * K + k] = EPI(acc[k]);
    }
}
""")


def generate(index: int, rng: np.random.Generator) -> GeneratedTask:
    t = "float" if index % 2 == 0 else "double"
    k = KS[(index // 2) % len(KS)]
    epi = EPILOGUES[index % len(EPILOGUES)]
    alpha = [0.5, 1.25, 2.0, 0.75][index % 4]
    shape = SHAPES[(index // 3) % len(SHAPES)]
    rl = ROW_LENS[(index + int(rng.integers(3))) % len(ROW_LENS)]
    s = Spec(t, k, epi, alpha)
    # the reference's cost per nonzero: a random gather of B's row (a cache miss) plus K multiply-adds
    work = 4.0e7 * (0.8 + 0.4 * float(rng.random()))
    nnz_time = int(work / (2 * k + 16))
    m_time = nnz_time // rl + int(rng.integers(1, 97))
    nc_time = max(1, int(m_time * shape))
    m1 = 3000 + int(rng.integers(1000))
    tol = ({"rtol": 1e-4, "atol": 5e-6 * rl} if t == "float" else {"rtol": 1e-10, "atol": 1e-13 * rl})
    task = {
        "function_name": s.fn,
        "description": (f"Sparse x dense product {s.epi_text()} with {t} values: A is m x ncols in CSR form "
                        f"(row_ptr, col_idx, vals; about {rl} entries per row), B is ncols x {k} row-major, C is "
                        f"m x {k} row-major."),
        "returns": "void",
        "args": [
            {"name": "m", "role": "scalar", "ctype": "int"},
            {"name": "ncols", "role": "scalar", "ctype": "int"},
            {"name": "nnz", "role": "scalar", "ctype": "int"},
            {"name": "row_ptr", "role": "in", "ctype": "int", "length": "m + 1",
             "dist": {"kind": "offsets", "high": "nnz"}},
            {"name": "col_idx", "role": "in", "ctype": "int", "length": "nnz",
             "dist": {"kind": "randint", "low": 0, "high": "ncols"}},
            {"name": "vals", "role": "in", "ctype": t, "length": "nnz", "dist": {"low": 0.0, "high": 1.0}},
            {"name": "B", "role": "in", "ctype": t, "length": f"ncols * {k}", "dist": {"low": -1.0, "high": 1.0}},
            {"name": "C", "role": "out", "ctype": t, "length": f"m * {k}"},
        ],
        "size_configs": [{"m": 500, "ncols": max(1, int(500 * shape)), "nnz": 500 * rl},
                         {"m": m1, "ncols": max(1, int(m1 * shape)), "nnz": m1 * rl + int(rng.integers(50))},
                         {"m": 77, "ncols": 61, "nnz": 300}, {"m": 5, "ncols": 3, "nnz": 4},
                         {"m": m_time, "ncols": nc_time, "nnz": nnz_time}],
        "tolerance": tol,
        "reference_c": _reference(s),
        "tags": ["sparse", "irregular", t],
    }
    variants = (
        Variant("thread_per_element", ("naive", "coalesced", "block_256", "pageable"), _thread_per_elem(s)),
        Variant("thread_per_row_regs", ("thread_per_row", "register_blocking", "unrolled", "strided", "block_128",
                                        "pageable"), _thread_per_row(s)),
        Variant("warp_row_broadcast", ("block_per_row", "warp_shuffle", "coalesced", "readonly_cache", "block_256",
                                       "pageable"), _warp_broadcast(s)),
        Variant("shared_stage_rows", ("shared_tiling", "block_per_row", "coalesced", "block_128", "pageable"),
                _shared_stage(s)),
        Variant("vectorized_cols", ("vectorized", "register_blocking", "readonly_cache", "block_256", "pageable"),
                _vectorized(s)),
        Variant("atomic_scatter", ("atomics", "multi_pass", "naive", "block_256", "pageable"), _atomic_nnz(s)),
        Variant("pinned_stream_row_regs", ("thread_per_row", "register_blocking", "pinned", "async_streams",
                                           "block_64"), _pinned_row(s)),
    )
    params = {"type": t, "k": k, "epilogue": epi, "alpha": alpha, "shape": shape, "avg_row_len": rl,
              "m_time": m_time, "nnz_time": nnz_time}
    return GeneratedTask(task, variants, params)


FAMILY = Family(
    name="spmm_csr_dense",
    description="CSR sparse x dense (K = 4..64 columns) matrix product with an epilogue",
    generate=generate,
    n_tasks=50,
    tags=("sparse", "irregular"),
)
