#include <cuda_runtime.h>

// Fast: 32x32 shared-memory tiles, 32x8 threads, each thread accumulates 4 outputs of a column in registers.
constexpr int T = 32, RY = 8, Q = T / RY;

__global__ void matmul_tiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C) {
    __shared__ float As[T][T + 1];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * T, col = blockIdx.x * T + tx;
    float acc[Q] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += T) {
        for (int r = ty; r < T; r += RY) {
            int gr = row0 + r, gk = k0 + tx, bk = k0 + r;
            As[r][tx] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
            Bs[r][tx] = (bk < K && col < N) ? B[(size_t)bk * N + col] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < T; ++kk) {
            float bv = Bs[kk][tx];
#pragma unroll
            for (int q = 0; q < Q; ++q) acc[q] += As[ty + q * RY][kk] * bv;
        }
        __syncthreads();
    }
    for (int q = 0; q < Q; ++q) {
        int gr = row0 + ty + q * RY;
        if (gr < M && col < N) C[(size_t)gr * N + col] = acc[q];
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
    dim3 block(T, RY), grid((N + T - 1) / T, (M + T - 1) / T);
    matmul_tiled<<<grid, block>>>(M, N, K, dA, dB, dC);
    cudaMemcpy(C, dC, cb, cudaMemcpyDeviceToHost);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}
