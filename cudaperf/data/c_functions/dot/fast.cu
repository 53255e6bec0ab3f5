#include <cuda_runtime.h>

// Fast: grid-stride float4 loads of both vectors, double accumulation, warp shuffles; a second launch sums the partials.
constexpr int BLOCK = 256;

__device__ __forceinline__ double block_reduce(double s, double* ws) {
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) ws[w] = s;
    __syncthreads();
    s = 0.0;
    if (w == 0) {
        s = lane < BLOCK / 32 ? ws[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    }
    return s; /* valid in thread 0 */
}

__global__ void dot_partial(int n, const float* __restrict__ x, const float* __restrict__ y, double* __restrict__ part) {
    __shared__ double ws[BLOCK / 32];
    int tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    double s = 0.0;
    for (int i = tid; i < n4; i += stride) {
        float4 a = x4[i], b = y4[i];
        s += (double)a.x * b.x + (double)a.y * b.y + (double)a.z * b.z + (double)a.w * b.w;
    }
    for (int i = 4 * n4 + tid; i < n; i += stride) s += (double)x[i] * y[i];
    s = block_reduce(s, ws);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void sum_partials(int m, const double* __restrict__ part, double* __restrict__ out) {
    __shared__ double ws[BLOCK / 32];
    double s = 0.0;
    for (int i = threadIdx.x; i < m; i += BLOCK) s += part[i];
    s = block_reduce(s, ws);
    if (threadIdx.x == 0) out[0] = s;
}

extern "C" double dot(int n, const float* x, const float* y) {
    if (n <= 0) return 0.0;
    int blocks = (n / 4 + BLOCK - 1) / BLOCK;
    if (blocks > 1024) blocks = 1024;
    if (blocks < 1) blocks = 1;
    size_t bytes = (size_t)n * sizeof(float);
    float *dx, *dy;
    double *dpart, *dres, res = 0.0;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMalloc(&dpart, (size_t)blocks * sizeof(double));
    cudaMalloc(&dres, sizeof(double));
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    dot_partial<<<blocks, BLOCK>>>(n, dx, dy, dpart);
    sum_partials<<<1, BLOCK>>>(blocks, dpart, dres);
    cudaMemcpy(&res, dres, sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dpart);
    cudaFree(dres);
    return res;
}
