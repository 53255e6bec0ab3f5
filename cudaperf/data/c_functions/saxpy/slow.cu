#include <cuda_runtime.h>

// One thread walks a strided share of the array with a single tiny block: correct, but uses 32 threads of the GPU.
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = a * x[i] + y[i];
}

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(float);
    float *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    saxpy_kernel<<<1, 32>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
