#include <cuda_runtime.h>

// Bug: when combining the per-warp partial sums, thread 0 starts its loop at warp 1 and drops warp 0's sum.
constexpr int BLOCK = 256;

__global__ void block_sums(int n, const float* __restrict__ x, float* __restrict__ part) {
    __shared__ float ws[BLOCK / 32];
    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    float s = 0.0f;
    for (int i = tid; i < n; i += stride) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 1; w < BLOCK / 32; ++w) t += ws[w];
        part[blockIdx.x] = t;
    }
}

extern "C" void sum_reduce(int n, const float* x, float* result) {
    if (n <= 0) {
        result[0] = 0.0f;
        return;
    }
    int blocks = (n + BLOCK - 1) / BLOCK;
    if (blocks > 1024) blocks = 1024;
    float *dx, *dpart, *dres;
    cudaMalloc(&dx, (size_t)n * sizeof(float));
    cudaMalloc(&dpart, (size_t)blocks * sizeof(float));
    cudaMalloc(&dres, sizeof(float));
    cudaMemcpy(dx, x, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    block_sums<<<blocks, BLOCK>>>(n, dx, dpart);
    block_sums<<<1, BLOCK>>>(blocks, dpart, dres);
    cudaMemcpy(result, dres, sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dpart);
    cudaFree(dres);
}
