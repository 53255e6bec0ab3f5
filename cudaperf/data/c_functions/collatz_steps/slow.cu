#include <cuda_runtime.h>

// Slow: a single block of 128 threads strides over all start values (one SM does all the work).
__global__ void collatz_kernel(int n, const int* start, int* steps) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        unsigned long long x = (unsigned long long)start[i];
        int c = 0;
        while (x != 1ULL) {
            x = (x & 1ULL) ? 3ULL * x + 1ULL : x >> 1;
            ++c;
        }
        steps[i] = c;
    }
}

extern "C" void collatz_steps(int n, const int* start, int* steps) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(int);
    int *din, *dout;
    cudaMalloc(&din, bytes);
    cudaMalloc(&dout, bytes);
    cudaMemcpy(din, start, bytes, cudaMemcpyHostToDevice);
    collatz_kernel<<<1, 128>>>(n, din, dout);
    cudaMemcpy(steps, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(din);
    cudaFree(dout);
}
