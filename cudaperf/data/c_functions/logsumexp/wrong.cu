#include <cuda_runtime.h>
#include <math.h>

// Bug: subtracts the maximum for stability but forgets to add it back: returns log(sum exp(x - m)).
constexpr int BLOCK = 256;

__global__ void block_max(int n, const double* __restrict__ x, double* __restrict__ part) {
    __shared__ double sh[BLOCK];
    double m = -INFINITY;
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) m = fmax(m, x[i]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + h]);
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

__global__ void block_sumexp(int n, const double* __restrict__ x, double m, double* __restrict__ part) {
    __shared__ double sh[BLOCK];
    double s = 0.0;
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) s += exp(x[i] - m);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int h = BLOCK / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

extern "C" double logsumexp(int n, const double* x) {
    if (n <= 0) return -INFINITY;
    const int blocks = 256;
    double *dx, *dpart, part[blocks];
    cudaMalloc(&dx, (size_t)n * sizeof(double));
    cudaMalloc(&dpart, blocks * sizeof(double));
    cudaMemcpy(dx, x, (size_t)n * sizeof(double), cudaMemcpyHostToDevice);
    block_max<<<blocks, BLOCK>>>(n, dx, dpart);
    cudaMemcpy(part, dpart, sizeof(part), cudaMemcpyDeviceToHost);
    double m = -INFINITY;
    for (int b = 0; b < blocks; ++b) m = fmax(m, part[b]);
    block_sumexp<<<blocks, BLOCK>>>(n, dx, m, dpart);
    cudaMemcpy(part, dpart, sizeof(part), cudaMemcpyDeviceToHost);
    double s = 0.0;
    for (int b = 0; b < blocks; ++b) s += part[b];
    cudaFree(dx);
    cudaFree(dpart);
    return log(s);
}
