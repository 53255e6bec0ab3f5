#include <cuda_runtime.h>

// Fast: each 256-thread block stages its input window (256 + k - 1 values) and the filter in shared memory.
constexpr int BLOCK = 256;

__global__ void conv_shared(int n, int k, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    extern __shared__ float sm[];
    float* ws = sm;     /* k taps */
    float* xs = sm + k; /* BLOCK + k - 1 inputs */
    int m = n - k + 1;
    int base = blockIdx.x * BLOCK;
    for (int t = threadIdx.x; t < k; t += BLOCK) ws[t] = w[t];
    for (int t = threadIdx.x; t < BLOCK + k - 1; t += BLOCK) xs[t] = base + t < n ? x[base + t] : 0.0f;
    __syncthreads();
    int i = base + threadIdx.x;
    if (i >= m) return;
    float s = 0.0f;
    for (int j = 0; j < k; ++j) s += ws[j] * xs[threadIdx.x + j];
    y[i] = s;
}

__global__ void conv_global(int n, int k, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n - k) return;
    float s = 0.0f;
    for (int j = 0; j < k; ++j) s += w[j] * x[i + j];
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
    size_t smem = (size_t)(2 * k + BLOCK - 1) * sizeof(float);
    if (smem <= 48 * 1024)
        conv_shared<<<(m + BLOCK - 1) / BLOCK, BLOCK, smem>>>(n, k, dx, dw, dy);
    else
        conv_global<<<(m + BLOCK - 1) / BLOCK, BLOCK>>>(n, k, dx, dw, dy);
    cudaMemcpy(y, dy, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
}
