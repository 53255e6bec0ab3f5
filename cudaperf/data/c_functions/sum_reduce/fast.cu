#include <cuda_runtime.h>

// Fast: grid-stride float4 loads, warp-shuffle + shared-memory block reduction, then one block reduces the partials.
constexpr int BLOCK = 256;

__global__ void block_sums(int n, const float* __restrict__ x, float* __restrict__ part) {
    __shared__ float ws[BLOCK / 32];
    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float s = 0.0f;
    for (int i = tid; i < n4; i += stride) {
        float4 v = x4[i];
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int i = 4 * n4 + tid; i < n; i += stride) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) ws[w] = s;
    __syncthreads();
    if (w == 0) {
        s = lane < BLOCK / 32 ? ws[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (lane == 0) part[blockIdx.x] = s;
    }
}

extern "C" void sum_reduce(int n, const float* x, float* result) {
    if (n <= 0) {
        result[0] = 0.0f;
        return;
    }
    int blocks = (n / 4 + BLOCK - 1) / BLOCK;
    if (blocks > 1024) blocks = 1024;
    if (blocks < 1) blocks = 1;
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
