#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(float);
    float *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpyAsync(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpyAsync(dy, y, bytes, cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
