#include <cuda_runtime.h>

// Slow: one block of 32 threads, each summing its own contiguous chunk (uncoalesced across the warp), serial finish.
constexpr int THREADS = 32;

__global__ void dot_chunks(int n, const float* x, const float* y, double* out) {
    __shared__ double part[THREADS];
    int chunk = (n + THREADS - 1) / THREADS;
    int lo = threadIdx.x * chunk, hi = min(n, lo + chunk);
    double s = 0.0;
    for (int i = lo; i < hi; ++i) s += (double)x[i] * y[i];
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int k = 0; k < THREADS; ++k) t += part[k];
        out[0] = t;
    }
}

extern "C" double dot(int n, const float* x, const float* y) {
    if (n <= 0) return 0.0;
    size_t bytes = (size_t)n * sizeof(float);
    float *dx, *dy;
    double *dres, res = 0.0;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMalloc(&dres, sizeof(double));
    cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
    dot_chunks<<<1, THREADS>>>(n, dx, dy, dres);
    cudaMemcpy(&res, dres, sizeof(double), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dres);
    return res;
}
