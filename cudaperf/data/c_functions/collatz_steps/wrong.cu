#include <cuda_runtime.h>

// Bug: takes the odd step as x -> (3x+1)/2 but counts it as a single step (the "shortcut" count, not the task's).
__global__ void collatz_kernel(int n, const int* __restrict__ start, int* __restrict__ steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = (unsigned long long)start[i];
    int c = 0;
    while (x != 1ULL) {
        x = (x & 1ULL) ? (3ULL * x + 1ULL) >> 1 : x >> 1;
        ++c;
    }
    steps[i] = c;
}

extern "C" void collatz_steps(int n, const int* start, int* steps) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(int);
    int *din, *dout;
    cudaMalloc(&din, bytes);
    cudaMalloc(&dout, bytes);
    cudaMemcpy(din, start, bytes, cudaMemcpyHostToDevice);
    collatz_kernel<<<(n + 255) / 256, 256>>>(n, din, dout);
    cudaMemcpy(steps, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(din);
    cudaFree(dout);
}
