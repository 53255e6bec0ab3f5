#include <cuda_runtime.h>

// Bug: a typo multiplies x[i] by itself instead of by y[i] (computes ||x||^2).
constexpr int BLOCK = 256;

__global__ void dot_partial(int n, const float* __restrict__ x, const float* __restrict__ y, double* __restrict__ part) {
    __shared__ double ws[BLOCK / 32];
    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    double s = 0.0;
    for (int i = tid; i < n; i += stride) s += (double)x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < BLOCK / 32; ++w) t += ws[w];
        part[blockIdx.x] = t;
    }
}

extern "C" double dot(int n, const float* x, const float* y) {
    if (n <= 0) return 0.0;
    int blocks = (n + BLOCK - 1) / BLOCK;
    if (blocks > 1024) blocks = 1024;
    size_t bytes = (size_t)n * sizeof(float);
    float *dx, *dy;
    double* dpart;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMalloc(&dpart, (size_t)blocks * sizeof(double));
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    dot_partial<<<blocks, BLOCK>>>(n, dx, dy, dpart);
    double* part = new double[blocks];
    cudaMemcpy(part, dpart, (size_t)blocks * sizeof(double), cudaMemcpyDeviceToHost);
    double res = 0.0;
    for (int b = 0; b < blocks; ++b) res += part[b];
    delete[] part;
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dpart);
    return res;
}
