#include <cuda_runtime.h>

// Fast: three-phase parallel scan over affine maps x -> (a*x + b) mod P. Tiles of 2048 bytes are scanned by
// 256 threads (8 items each, warp shuffles), one block scans the tile maps, then tile offsets are folded in.
constexpr unsigned long long P = 1000000007ULL, B = 131ULL;
constexpr int TB = 256, IT = 8, TILE = TB * IT;

struct Map { unsigned long long a, b; };

__device__ __forceinline__ Map compose(Map f, Map g) { /* apply f, then g */
    return Map{g.a * f.a % P, (g.a * f.b + g.b) % P};
}

__device__ __forceinline__ Map shfl_up(Map m, int o) {
    return Map{__shfl_up_sync(0xffffffffu, m.a, o), __shfl_up_sync(0xffffffffu, m.b, o)};
}

__device__ Map block_exclusive_scan(Map m, Map* wtot) { /* wtot: __shared__ Map[32] */
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    Map inc = m;
    for (int o = 1; o < 32; o <<= 1) {
        Map p = shfl_up(inc, o);
        if (lane >= o) inc = compose(p, inc);
    }
    Map ex = shfl_up(inc, 1);
    if (lane == 0) ex = Map{1, 0};
    if (lane == 31) wtot[w] = inc;
    __syncthreads();
    if (w == 0) {
        Map t = lane < nw ? wtot[lane] : Map{1, 0};
        for (int o = 1; o < 32; o <<= 1) {
            Map p = shfl_up(t, o);
            if (lane >= o) t = compose(p, t);
        }
        Map te = shfl_up(t, 1);
        if (lane == 0) te = Map{1, 0};
        if (lane < nw) wtot[lane] = te; /* exclusive prefix of each warp */
    }
    __syncthreads();
    return compose(wtot[w], ex);
}

__global__ void hash_tiles(int n, const unsigned char* __restrict__ s, unsigned int* __restrict__ out,
                           unsigned long long* __restrict__ ta, unsigned long long* __restrict__ tb) {
    __shared__ Map wtot[32];
    size_t i0 = (size_t)blockIdx.x * TILE + (size_t)threadIdx.x * IT;
    unsigned long long v[IT];
    Map m = {1, 0};
    for (int q = 0; q < IT; ++q) {
        if (i0 + q < (size_t)n) {
            m.a = m.a * B % P;
            m.b = (m.b * B + s[i0 + q]) % P;
        }
        v[q] = m.b;
    }
    Map ex = block_exclusive_scan(m, wtot);
    unsigned long long xin = ex.b, pw = B;
    for (int q = 0; q < IT; ++q) {
        if (i0 + q < (size_t)n) out[i0 + q] = (unsigned int)((xin * pw + v[q]) % P);
        pw = pw * B % P;
    }
    if (threadIdx.x == TB - 1) {
        Map tot = compose(ex, m);
        ta[blockIdx.x] = tot.a;
        tb[blockIdx.x] = tot.b;
    }
}

__global__ void scan_tile_maps(int nb, const unsigned long long* __restrict__ ta, const unsigned long long* __restrict__ tb,
                               unsigned long long* __restrict__ tin) { /* one block: hash value entering each tile */
    __shared__ Map wtot[32];
    int per = (nb + blockDim.x - 1) / blockDim.x;
    int lo = min(nb, (int)threadIdx.x * per), hi = min(nb, lo + per);
    Map m = {1, 0};
    for (int t = lo; t < hi; ++t) m = compose(m, Map{ta[t], tb[t]});
    unsigned long long x = block_exclusive_scan(m, wtot).b;
    for (int t = lo; t < hi; ++t) {
        tin[t] = x;
        x = (ta[t] * x + tb[t]) % P;
    }
}

__global__ void add_tile_offsets(int n, const unsigned long long* __restrict__ tin, const unsigned int* __restrict__ pw,
                                 unsigned int* __restrict__ out) {
    unsigned long long xin = tin[blockIdx.x];
    size_t base = (size_t)blockIdx.x * TILE;
    for (int k = threadIdx.x; k < TILE; k += TB)
        if (base + k < (size_t)n) out[base + k] = (unsigned int)((xin * pw[k] + out[base + k]) % P);
}

extern "C" void prefix_hash(int n, const unsigned char* s, unsigned int* h) {
    if (n <= 0) return;
    int nb = (n + TILE - 1) / TILE;
    unsigned int pw[TILE]; /* pw[k] = B^(k+1) mod P */
    unsigned long long p = 1;
    for (int k = 0; k < TILE; ++k) { p = p * B % P; pw[k] = (unsigned int)p; }
    unsigned char* ds;
    unsigned int *dh, *dpw;
    unsigned long long *dta, *dtb, *dtin;
    cudaMalloc(&ds, (size_t)n);
    cudaMalloc(&dh, (size_t)n * sizeof(unsigned int));
    cudaMalloc(&dpw, sizeof(pw));
    cudaMalloc(&dta, (size_t)nb * sizeof(unsigned long long));
    cudaMalloc(&dtb, (size_t)nb * sizeof(unsigned long long));
    cudaMalloc(&dtin, (size_t)nb * sizeof(unsigned long long));
    cudaMemcpy(ds, s, (size_t)n, cudaMemcpyHostToDevice);
    cudaMemcpy(dpw, pw, sizeof(pw), cudaMemcpyHostToDevice);
    hash_tiles<<<nb, TB>>>(n, ds, dh, dta, dtb);
    if (nb > 1) {
        scan_tile_maps<<<1, 1024>>>(nb, dta, dtb, dtin);
        add_tile_offsets<<<nb, TB>>>(n, dtin, dpw, dh);
    }
    cudaMemcpy(h, dh, (size_t)n * sizeof(unsigned int), cudaMemcpyDeviceToHost);
    cudaFree(ds);
    cudaFree(dh);
    cudaFree(dpw);
    cudaFree(dta);
    cudaFree(dtb);
    cudaFree(dtin);
}
