#include <cuda_runtime.h>

// Bug: the round loop starts at r = 1, so only rounds - 1 rounds are applied.
__global__ void hash_kernel(int n, int rounds, const unsigned int* __restrict__ keys, unsigned int* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int x = keys[i];
    for (int r = 1; r < rounds; ++r) {
        x += (unsigned int)r * 0x9e3779b9u;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
    }
    out[i] = x;
}

extern "C" void hash_rounds(int n, int rounds, const unsigned int* keys, unsigned int* out) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(unsigned int);
    unsigned int *dk, *dout;
    cudaMalloc(&dk, bytes);
    cudaMalloc(&dout, bytes);
    cudaMemcpy(dk, keys, bytes, cudaMemcpyHostToDevice);
    hash_kernel<<<(n + 255) / 256, 256>>>(n, rounds, dk, dout);
    cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dk);
    cudaFree(dout);
}
