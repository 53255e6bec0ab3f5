#include <cuda_runtime.h>

// Bug: applies the filter reversed (w[k-1-j]), i.e. a true convolution instead of the requested correlation.
__global__ void conv_kernel(int n, int k, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n - k) return;
    float s = 0.0f;
    for (int j = 0; j < k; ++j) s += w[k - 1 - j] * x[i + j];
    y[i] = s;
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
    conv_kernel<<<(m + 255) / 256, 256>>>(n, k, dx, dw, dy);
    cudaMemcpy(y, dy, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
}
