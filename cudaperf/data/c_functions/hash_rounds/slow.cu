#include <cuda_runtime.h>

// Slow: one launch per round over a device buffer, each by a single block of 256 threads.
__global__ void hash_round(int n, unsigned int r, unsigned int* x) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned int v = x[i] + r * 0x9e3779b9u;
        v ^= v >> 16;
        v *= 0x7feb352du;
        v ^= v >> 15;
        v *= 0x846ca68bu;
        v ^= v >> 16;
        x[i] = v;
    }
}

extern "C" void hash_rounds(int n, int rounds, const unsigned int* keys, unsigned int* out) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(unsigned int);
    unsigned int* dx;
    cudaMalloc(&dx, bytes);
    cudaMemcpy(dx, keys, bytes, cudaMemcpyHostToDevice);
    for (int r = 0; r < rounds; ++r) hash_round<<<1, 256>>>(n, (unsigned int)r, dx);
    cudaMemcpy(out, dx, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
}
