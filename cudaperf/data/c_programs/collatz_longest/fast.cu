// One thread per start value; a block-level max reduction; one 64-bit atomicMax per block on (len << 32 | ~s).
#include <cstdio>
#include <cuda_runtime.h>

__device__ unsigned collatz_len(unsigned long long x) {
    unsigned steps = 1;
    while (x != 1) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++steps; }
    return steps;
}

__global__ void longest(long long n, unsigned long long* best) {
    __shared__ unsigned long long sh[256];
    unsigned long long key = 0;
    for (long long s = 1 + blockIdx.x * (long long)blockDim.x + threadIdx.x; s < n; s += (long long)gridDim.x * blockDim.x) {
        unsigned long long k = ((unsigned long long)collatz_len(s) << 32) | (0xFFFFFFFFull - (unsigned long long)s);
        if (k > key) key = k;
    }
    sh[threadIdx.x] = key;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off >>= 1) {
        if (threadIdx.x < off && sh[threadIdx.x + off] > sh[threadIdx.x]) sh[threadIdx.x] = sh[threadIdx.x + off];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicMax(best, sh[0]);
}

int main() {
    long long n;
    if (scanf("%lld", &n) != 1 || n < 2) return 1;
    unsigned long long* d;
    unsigned long long h = 0;
    cudaMalloc(&d, sizeof h);
    cudaMemset(d, 0, sizeof h);
    longest<<<132 * 8, 256>>>(n, d);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    long long best = (long long)(0xFFFFFFFFull - (h & 0xFFFFFFFFull));
    printf("%lld %u\n", best, (unsigned)(h >> 32));
    return 0;
}
