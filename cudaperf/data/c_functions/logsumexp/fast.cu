#include <cuda_runtime.h>
#include <math.h>

// Fast: single pass with an online (max, scaled sum) pair per thread, merged by warp shuffles; one block merges blocks.
constexpr int BLOCK = 256;

__device__ __forceinline__ void merge(double& m, double& s, double m2, double s2) {
    double mm = fmax(m, m2);
    if (mm == -INFINITY) return; /* both empty */
    s = s * exp(m - mm) + s2 * exp(m2 - mm);
    m = mm;
}

__device__ void block_merge(double& m, double& s) {
    __shared__ double wm[BLOCK / 32], wsum[BLOCK / 32];
    for (int o = 16; o > 0; o >>= 1) {
        double m2 = __shfl_down_sync(0xffffffffu, m, o), s2 = __shfl_down_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) { wm[w] = m; wsum[w] = s; }
    __syncthreads();
    if (w == 0) {
        m = lane < BLOCK / 32 ? wm[lane] : -INFINITY;
        s = lane < BLOCK / 32 ? wsum[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) {
            double m2 = __shfl_down_sync(0xffffffffu, m, o), s2 = __shfl_down_sync(0xffffffffu, s, o);
            merge(m, s, m2, s2);
        }
    }
}

__global__ void lse_partial(int n, const double* __restrict__ x, double* __restrict__ pm, double* __restrict__ ps) {
    double m = -INFINITY, s = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        double v = x[i];
        if (v > m) { s = s * exp(m - v) + 1.0; m = v; }
        else s += exp(v - m);
    }
    block_merge(m, s);
    if (threadIdx.x == 0) { pm[blockIdx.x] = m; ps[blockIdx.x] = s; }
}

__global__ void lse_final(int nb, const double* __restrict__ pm, const double* __restrict__ ps, double* __restrict__ out) {
    double m = -INFINITY, s = 0.0;
    for (int i = threadIdx.x; i < nb; i += BLOCK) merge(m, s, pm[i], ps[i]);
    block_merge(m, s);
    if (threadIdx.x == 0) out[0] = m + log(s);
}

extern "C" double logsumexp(int n, const double* x) {
    if (n <= 0) return -INFINITY;
    int blocks = (n + BLOCK - 1) / BLOCK;
    if (blocks > 1056) blocks = 1056; /* 8 blocks per SM on 132 SMs */
    double *dx, *dpm, *dps, *dres, res = 0.0;
    cudaMalloc(&dx, (size_t)n * sizeof(double));
    cudaMalloc(&dpm, (size_t)blocks * sizeof(double));
    cudaMalloc(&dps, (size_t)blocks * sizeof(double));
    cudaMalloc(&dres, sizeof(double));
    cudaMemcpy(dx, x, (size_t)n * sizeof(double), cudaMemcpyHostToDevice);
    lse_partial<<<blocks, BLOCK>>>(n, dx, dpm, dps);
    lse_final<<<1, BLOCK>>>(blocks, dpm, dps, dres);
    cudaMemcpy(&res, dres, sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dpm);
    cudaFree(dps);
    cudaFree(dres);
    return res;
}
