#include <cuda_runtime.h>

// Slow: one thread computes a whole row of C (M threads in 64-thread blocks, long serial loops, strided A reads).
__global__ void matmul_rows(int M, int N, int K, const float* A, const float* B, float* C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    for (int j = 0; j < N; ++j) {
        float s = 0.0f;
        for (int k = 0; k < K; ++k) s += A[(size_t)i * K + k] * B[(size_t)k * N + j];
        C[(size_t)i * N + j] = s;
    }
}

extern "C" void matmul(int M, int N, int K, const float* A, const float* B, float* C) {
    if (M <= 0 || N <= 0) return;
    size_t ab = (size_t)M * K * sizeof(float), bb = (size_t)K * N * sizeof(float), cb = (size_t)M * N * sizeof(float);
    float *dA, *dB, *dC;
    cudaMalloc(&dA, ab > 0 ? ab : 1);
    cudaMalloc(&dB, bb > 0 ? bb : 1);
    cudaMalloc(&dC, cb);
    cudaMemcpy(dA, A, ab, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, bb, cudaMemcpyHostToDevice);
    matmul_rows<<<(M + 63) / 64, 64>>>(M, N, K, dA, dB, dC);
    cudaMemcpy(C, dC, cb, cudaMemcpyDeviceToHost);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}
