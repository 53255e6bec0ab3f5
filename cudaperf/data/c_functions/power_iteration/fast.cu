#include <cuda_runtime.h>
#include <math.h>

// Fast: A stays on the device; one warp per row (coalesced, shuffle reduction) also accumulates ||y||^2 atomically.
__global__ void gemv_warp(int n, const double* __restrict__ A, const double* __restrict__ x, double* __restrict__ y,
                          double* __restrict__ ss) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= n) return; /* whole warp leaves together */
    const double* a = A + (size_t)row * n;
    double s = 0.0;
    for (int j = lane; j < n; j += 32) s += a[j] * x[j];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) {
        y[row] = s;
        atomicAdd(ss, s * s);
    }
}

__global__ void normalize(int n, const double* __restrict__ y, const double* __restrict__ ss, double* __restrict__ x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = y[i] / sqrt(*ss);
}

extern "C" double power_iteration(int n, int iters, const double* A, double* x) {
    if (n <= 0 || iters <= 0) return 0.0;
    double *dA, *dx, *dy, *dss;
    cudaMalloc(&dA, (size_t)n * n * sizeof(double));
    cudaMalloc(&dx, (size_t)n * sizeof(double));
    cudaMalloc(&dy, (size_t)n * sizeof(double));
    cudaMalloc(&dss, (size_t)iters * sizeof(double));
    cudaMemset(dss, 0, (size_t)iters * sizeof(double));
    cudaMemcpy(dA, A, (size_t)n * n * sizeof(double), cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x, (size_t)n * sizeof(double), cudaMemcpyHostToDevice);
    int gemv_blocks = (n + 7) / 8; /* 8 warps (rows) per 256-thread block */
    for (int it = 0; it < iters; ++it) {
        gemv_warp<<<gemv_blocks, 256>>>(n, dA, dx, dy, dss + it);
        normalize<<<(n + 255) / 256, 256>>>(n, dy, dss + it, dx);
    }
    double ss = 0.0;
    cudaMemcpy(x, dx, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost);
    cudaMemcpy(&ss, dss + iters - 1, sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(dA);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dss);
    return sqrt(ss);
}
