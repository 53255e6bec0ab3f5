#include <cuda_runtime.h>

// Bug: the k-tile loop only runs over full 16-wide tiles, so the last K % 16 products are dropped.
constexpr int T = 16;

__global__ void matmul_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 + T <= K; k0 += T) {
        As[ty][tx] = row < M ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
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
    dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    matmul_tiled<<<grid, block>>>(M, N, K, dA, dB, dC);
    cudaMemcpy(C, dC, cb, cudaMemcpyDeviceToHost);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}
