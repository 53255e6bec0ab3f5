#include <cuda_runtime.h>

// Slow: a single block of 64 threads computes every output from global memory.
__global__ void conv_one_block(int n, int k, const float* x, const float* w, float* y) {
    for (int i = threadIdx.x; i + k <= n; i += blockDim.x) {
        float s = 0.0f;
        for (int j = 0; j < k; ++j) s += w[j] * x[i + j];
        y[i] = s;
    }
}

extern "C" void conv1d(int n, int k, const float* x, const float* w, float* y) {
    if (k <= 0 || n < k) return;
    int m = n - k + 1;
    float *dx, *dw, *dy;
    cudaMalloc(&dx, (size_t)n * sizeof(float));
    cudaMalloc(&dw, (size_t)k * sizeof(float));
    cudaMalloc(&dy, (size_t)m * sizeof(float));
    cudaMemcpy(dx, x, (size_t)n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dw, w, (size_t)k * sizeof(float), cudaMemcpyHostToDevice);
    conv_one_block<<<1, 64>>>(n, k, dx, dw, dy);
    cudaMemcpy(y, dy, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
}
